//! The token cache over the embedded store, which sees every write: a hot token costs
//! no store read, and a revocation or plan change is still seen on the next request.
//! (The age bound that applies where the store is shared is tested by the REST and MCP
//! suites, whose test drivers do not report changes.) Concurrent lookups of one token
//! share one read of its rows.

use std::time::Duration;

use recap_access::{AuthError, TokenCache};
use recap_schemas::build::{Epoch, Events};
use recap_schemas::Envelope;
use recap_testkit::world::{Door, InProcess, Settings, World};

/// Every event and time here is on 2026-01-01 (UTC).
const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_767_225_600));

const TOKEN: &str = "svc_pat_token_cache_test_0000000000";

/// An embedded store that reports its change counts, as `recap serve`'s does, holding
/// an account on the flow plan and its token.
async fn world() -> InProcess {
    let world = InProcess::builder(Settings::default()).embedded().reporting_change_counts().start().await;
    apply(&world, EVENTS.account("acc").plan("flow", None, EVENTS.minute(0))).await;
    apply(&world, EVENTS.token_created("acc", "tok", recap_access::token_sha256(TOKEN)).name("script")).await;
    world
}

async fn apply(world: &InProcess, event: impl Into<Envelope>) {
    world.feed(&[event.into()]).await;
    // The projection's own reads are not the lookups'.
    world.store().reset_counts();
}

/// The point reads that reached the store since the last call.
fn reads(world: &InProcess) -> u64 {
    let gets = world.store().gets();
    world.store().reset_counts();
    gets
}

#[tokio::test]
async fn a_hot_token_costs_no_store_read_until_a_token_or_account_row_changes() {
    // Authentication 5 (a revoked token "stops working on the next request") and 8
    // ("the plan is checked on every request") hold with lookups kept.
    let world = world().await;
    // No age bound at all: the store's own change count decides.
    let cache = TokenCache::new(Duration::ZERO);
    assert_eq!(cache.authenticate(world.readmodel(Door::Rest), TOKEN).await.unwrap().account_id, "acc");
    assert_eq!(reads(&world), 2, "the first lookup reads the token and the account");
    for _ in 0..3 {
        assert_eq!(cache.authenticate(world.readmodel(Door::Rest), TOKEN).await.unwrap().token_id, "tok");
    }
    assert_eq!(reads(&world), 0, "later lookups are kept");

    // A write to another table keeps them.
    apply(&world, EVENTS.meeting("acc", "mtg_1").title("Sync").ended_at(EVENTS.minute(30)).note(EVENTS.note("n1").text("Agenda"))).await;
    cache.authenticate(world.readmodel(Door::Rest), TOKEN).await.unwrap();
    assert_eq!(reads(&world), 0, "a meeting write leaves token lookups current");

    // A plan change is seen on the next lookup.
    apply(&world, EVENTS.account("acc").plan("enterprise", None, EVENTS.minute(0)).version(2)).await;
    let caller = cache.authenticate(world.readmodel(Door::Rest), TOKEN).await.unwrap();
    assert_eq!(caller.account.plan.map(|plan| plan.tier), Some("enterprise".to_string()));
    assert_eq!(reads(&world), 2);

    // So is a revocation, and the refusal is not kept.
    apply(&world, EVENTS.token_revoked("acc", "tok").revoked_at(EVENTS.minute(24 * 60)).version(2)).await;
    assert_eq!(cache.authenticate(world.readmodel(Door::Rest), TOKEN).await, Err(AuthError::TokenRevoked));
    assert_eq!(cache.authenticate(world.readmodel(Door::Rest), TOKEN).await, Err(AuthError::TokenRevoked));
    assert_eq!(reads(&world), 2, "each refused lookup reads the token again");
}

#[tokio::test]
async fn a_token_created_after_a_refusal_works_at_once() {
    let world = world().await;
    let cache = TokenCache::new(Duration::ZERO);
    let fresh = "svc_pat_created_after_a_refusal_00000000";
    assert_eq!(cache.authenticate(world.readmodel(Door::Rest), fresh).await, Err(AuthError::Unauthorized));
    apply(&world, EVENTS.token_created("acc", "tok2", recap_access::token_sha256(fresh)).name("script")).await;
    assert_eq!(cache.authenticate(world.readmodel(Door::Rest), fresh).await.unwrap().token_id, "tok2");
}

#[tokio::test]
async fn requests_in_flight_for_a_token_share_one_lookup_instead_of_each_reading_the_rows() {
    // 32 requests at once for a token whose kept lookup has aged out (or was never
    // made), as 32 keep-alive connections send when a lookup expires under load: one
    // lookup reads the token and the account, the rest wait for it.
    // A store other processes write (no change counts), whose point reads take a
    // network round trip, so that the lookups overlap.
    let world = InProcess::builder(Settings::default()).embedded().start().await;
    apply(&world, EVENTS.account("acc").plan("flow", None, EVENTS.minute(0))).await;
    apply(&world, EVENTS.token_created("acc", "tok", recap_access::token_sha256(TOKEN)).name("script")).await;
    world.store().slow_gets(Duration::from_millis(20));
    let readmodel = world.readmodel(Door::Rest);
    let cache = TokenCache::new(Duration::from_millis(200));
    for round in 0..2 {
        let callers = futures::future::join_all((0..32).map(|_| cache.authenticate(readmodel, TOKEN))).await;
        for caller in callers {
            assert_eq!(caller.expect("the token is known").token_id, "tok", "round {round}");
        }
        assert_eq!(reads(&world), 2, "round {round}: one lookup, the token and the account");
        // The kept lookup ages out: the next burst looks it up again, once.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Refusals are shared by the requests in flight, and not kept: a token created after
    // them works at once.
    let fresh = "svc_pat_created_after_a_shared_refusal_0";
    let refused = futures::future::join_all((0..32).map(|_| cache.authenticate(readmodel, fresh))).await;
    assert!(refused.iter().all(|result| *result == Err(AuthError::Unauthorized)), "{refused:?}");
    assert_eq!(reads(&world), 1, "one token read for the 32 refusals");
    apply(&world, EVENTS.token_created("acc", "tok2", recap_access::token_sha256(fresh)).name("script")).await;
    assert_eq!(cache.authenticate(readmodel, fresh).await.expect("the new token is known").token_id, "tok2");
}
