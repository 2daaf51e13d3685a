//! The semantics every driver keeps (driver.rs): newest timestamp wins per row, a
//! tombstone shadows older writes and wins a tie, a purged row is gone, rows expire, scans follow the
//! clustering order within bounds; a conditional insert writes only where no live row
//! is, exactly one of racing inserts wins, and each table takes only its own kind of
//! write. The same cases run against each driver.

use std::ops::Bound;
use std::sync::Arc;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::tables::{MEETINGS_BY_ACCOUNT, MESSAGE_CLAIMS, OAUTH_CLAIMS, OAUTH_CODES, TEAMS_BY_ACCOUNT};
use recap_readmodel::{Driver, Mutation, Op, ScanRange, StoreError, Val};

fn embedded() -> (tempfile::TempDir, Arc<dyn Driver>) {
    let dir = tempfile::tempdir().unwrap();
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
    (dir, driver)
}

fn put(partition: &str, created: i64, id: &str, body: &str, ts: i64) -> Mutation {
    Mutation {
        table: &MEETINGS_BY_ACCOUNT,
        partition: vec![Val::text(partition)],
        clustering: vec![Val::Int(created), Val::text(id)],
        op: Op::Put { body: body.into(), expires_at: None },
        ts,
    }
}

fn delete(partition: &str, created: i64, id: &str, ts: i64) -> Mutation {
    Mutation { op: Op::Delete, ..put(partition, created, id, "", ts) }
}

async fn body(driver: &Arc<dyn Driver>, created: i64, id: &str) -> Option<String> {
    driver.get(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &[Val::Int(created), Val::text(id)]).await.unwrap().map(|row| row.body)
}

async fn last_write_wins(driver: Arc<dyn Driver>) {
    driver.write(vec![put("acc", 1, "m", "v5", 5)]).await.unwrap();
    driver.write(vec![put("acc", 1, "m", "v3", 3)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await.as_deref(), Some("v5"), "an older write changes nothing");
    driver.write(vec![put("acc", 1, "m", "v7", 7)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await.as_deref(), Some("v7"));
}

async fn tombstones_shadow_older_writes_and_win_ties(driver: Arc<dyn Driver>) {
    driver.write(vec![put("acc", 1, "m", "v5", 5)]).await.unwrap();
    driver.write(vec![delete("acc", 1, "m", 5)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await, None, "a tombstone wins a tie");
    driver.write(vec![put("acc", 1, "m", "v4", 4)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await, None, "an older write stays shadowed");
    driver.write(vec![put("acc", 1, "m", "v6", 6)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await.as_deref(), Some("v6"), "a newer write brings it back");
}

/// A purge (a queue's removal, `Op::Purge`) removes the row from reads and scans on
/// every driver: outright on the embedded store, which keeps no tombstone for later
/// scans to step over, as a tombstone under CQL. A newer write of the key lands on both.
async fn a_purged_row_is_gone_from_reads_and_scans(driver: Arc<dyn Driver>) {
    driver.write(vec![put("acc", 1, "m", "v5", 5), put("acc", 2, "n", "w5", 5)]).await.unwrap();
    driver.write(vec![Mutation { op: Op::Purge, ..put("acc", 1, "m", "", 6) }]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await, None, "a purged row reads as absent");
    let scanned = driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 10).await.unwrap();
    assert_eq!(scanned.into_iter().map(|row| row.body).collect::<Vec<_>>(), vec!["w5".to_owned()], "and a scan skips it");
    driver.write(vec![put("acc", 1, "m", "v7", 7)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await.as_deref(), Some("v7"), "a newer write of the key lands");
}

/// Two rows of one key written at one timestamp (two entities writing one row, the
/// projector's case: its rows never expire): the greater body wins, whatever the order,
/// in separate writes or in one.
async fn a_tie_between_writes_keeps_the_greater_body(driver: Arc<dyn Driver>) {
    driver.write(vec![put("acc", 1, "m", "b", 5)]).await.unwrap();
    driver.write(vec![put("acc", 1, "m", "a", 5)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await.as_deref(), Some("b"), "a smaller body at the same timestamp does not replace it");
    driver.write(vec![put("acc", 1, "m", "c", 5)]).await.unwrap();
    assert_eq!(body(&driver, 1, "m").await.as_deref(), Some("c"), "a greater body at the same timestamp does");
    driver.write(vec![put("acc", 2, "n", "x", 7), put("acc", 2, "n", "w", 7)]).await.unwrap();
    assert_eq!(body(&driver, 2, "n").await.as_deref(), Some("x"), "within one write too");
}

async fn scans_follow_clustering_order_and_bounds(driver: Arc<dyn Driver>) {
    let mut writes: Vec<Mutation> = (1..=5).map(|created| put("acc", created, &format!("m{created}"), &format!("b{created}"), 1)).collect();
    writes.push(put("acc", 3, "m3b", "b3b", 1));
    writes.push(put("other", 9, "x", "x", 1));
    writes.push(delete("acc", 2, "m2", 2));
    driver.write(writes).await.unwrap();
    let bodies = |rows: Vec<recap_readmodel::Row>| rows.into_iter().map(|row| row.body).collect::<Vec<_>>();
    let all = driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 100).await.unwrap();
    assert_eq!(bodies(all.clone()), vec!["b5", "b4", "b3b", "b3", "b1"], "newest first, id descending on ties, tombstones skipped");
    assert_eq!(all[2].clustering, vec![Val::Int(3), Val::text("m3b")]);
    let after = driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::after(Some(&all[1].clustering)), 2).await.unwrap();
    assert_eq!(bodies(after), vec!["b3b", "b3"], "strictly after the key, at most the limit");
    let prefix = ScanRange { start: Bound::Included(vec![Val::Int(4)]), end: Bound::Excluded(vec![Val::Int(1)]) };
    assert_eq!(bodies(driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &prefix, 100).await.unwrap()), vec!["b4", "b3b", "b3"]);
    let prefix = ScanRange { start: Bound::Excluded(vec![Val::Int(4)]), end: Bound::Included(vec![Val::Int(3)]) };
    assert_eq!(bodies(driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &prefix, 100).await.unwrap()), vec!["b3b", "b3"]);
    assert_eq!(driver.count(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all()).await.unwrap(), 5, "count skips tombstones");
    assert_eq!(driver.count(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &prefix).await.unwrap(), 2, "count honours bounds");
    let team = |id: &str, ts: i64| Mutation {
        table: &TEAMS_BY_ACCOUNT,
        partition: vec![Val::text("acc")],
        clustering: vec![Val::text(id)],
        op: Op::Put { body: id.to_string(), expires_at: None },
        ts,
    };
    driver.write(vec![team("team_c", 1), team("team_a", 1), team("team_b", 1), team("team_ab", 1)]).await.unwrap();
    let ascending = driver.scan(&TEAMS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 10).await.unwrap();
    assert_eq!(bodies(ascending.clone()), vec!["team_a", "team_ab", "team_b", "team_c"], "an ascending table scans in ascending order");
    let after = driver.scan(&TEAMS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::after(Some(&ascending[1].clustering)), 10).await.unwrap();
    assert_eq!(bodies(after), vec!["team_b", "team_c"], "after a key means greater in an ascending table");
    let bounded = ScanRange { start: Bound::Included(vec![Val::text("team_ab")]), end: Bound::Excluded(vec![Val::text("team_c")]) };
    assert_eq!(bodies(driver.scan(&TEAMS_BY_ACCOUNT, &[Val::text("acc")], &bounded, 10).await.unwrap()), vec!["team_ab", "team_b"]);
    assert_eq!(
        bodies(driver.scan(&TEAMS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 2).await.unwrap()),
        vec!["team_a", "team_ab"],
        "the limit keeps the first keys"
    );
}

/// An OAuth code row (a table of no clustering column) expiring at `expires_at`.
fn code(id: &str, expires_at: i64, ts: i64) -> Mutation {
    Mutation { table: &OAUTH_CODES, partition: vec![Val::text(id)], clustering: vec![], op: Op::Put { body: "{}".into(), expires_at: Some(expires_at) }, ts }
}

async fn rows_expire(driver: Arc<dyn Driver>) {
    let now = recap_readmodel::driver::now_micros();
    let code = |id: &str, expires_at: i64| code(id, expires_at, now);
    driver.write(vec![code("live", now + 60_000_000), code("expired", now - 1)]).await.unwrap();
    assert!(driver.get(&OAUTH_CODES, &[Val::text("live")], &[]).await.unwrap().is_some());
    assert!(driver.get(&OAUTH_CODES, &[Val::text("expired")], &[]).await.unwrap().is_none());
}

/// A row is read until its `expires_at` and not after, on both drivers: CQL, which counts
/// a TTL in whole seconds from the second a row was written in, must not drop it before
/// (a TTL rounded down would: this row's 1.2 s would be a TTL of 1, which CQL may end
/// after a few milliseconds), and reads must not return it after.
async fn rows_are_read_until_their_expiry_and_not_after(driver: Arc<dyn Driver>) {
    let now = recap_readmodel::driver::now_micros();
    let soon = now + 1_200_000;
    driver.write(vec![code("short", soon, now)]).await.unwrap();
    let until = soon - 150_000 - recap_readmodel::driver::now_micros();
    tokio::time::sleep(std::time::Duration::from_micros(until.max(0) as u64)).await;
    let row = driver.get(&OAUTH_CODES, &[Val::text("short")], &[]).await.unwrap();
    // Only a machine stalled past the expiry during the read may find it gone.
    assert!(row.is_some() || recap_readmodel::driver::now_micros() >= soon, "a row is read until its expires_at");
    sleep_until_past(soon).await;
    assert!(driver.get(&OAUTH_CODES, &[Val::text("short")], &[]).await.unwrap().is_none(), "and not after");
}

/// `Driver::get_many` answers each key as `get` would, in the order asked: keys in any
/// order, asked twice, absent, deleted, expired, in another partition, more keys than
/// one request names (the ScyllaDriver's 100), and on a table of two clustering
/// columns (read by key).
async fn many_keys_of_one_partition_read_at_once_answer_as_gets(driver: Arc<dyn Driver>) {
    let now = recap_readmodel::driver::now_micros();
    let claim = |account: &str, id: String, expires_at: Option<i64>, op: Option<Op>| Mutation {
        table: &MESSAGE_CLAIMS,
        partition: vec![Val::text(account), Val::Int(7)],
        clustering: vec![Val::text(id.clone())],
        op: op.unwrap_or(Op::Put { body: format!("{{\"seq\":\"{id}\"}}"), expires_at }),
        ts: 10,
    };
    let mut rows: Vec<Mutation> = (0..250).filter(|n| n % 3 != 0).map(|n| claim("acc", format!("msg_{n:03}"), None, None)).collect();
    rows.push(claim("acc", "msg_expired".into(), Some(now - 1), None));
    rows.push(claim("acc", "msg_live".into(), Some(now + 60_000_000), None));
    rows.push(claim("acc_other", "msg_other".into(), None, None));
    driver.write(rows).await.unwrap();
    driver.write(vec![claim("acc", "msg_001".into(), None, Some(Op::Delete))]).await.unwrap();
    let mut keys: Vec<String> = (0..250).rev().map(|n| format!("msg_{n:03}")).collect();
    keys.extend(["msg_expired", "msg_live", "msg_other", "msg_002", "msg_002", "msg_never"].map(String::from));
    let keys: Vec<Vec<Val>> = keys.into_iter().map(|id| vec![Val::text(id)]).collect();
    let partition = [Val::text("acc"), Val::Int(7)];
    let many = driver.get_many(&MESSAGE_CLAIMS, &partition, &keys).await.unwrap();
    assert_eq!(many.len(), keys.len());
    let mut present = 0;
    for (key, row) in keys.iter().zip(&many) {
        let one = driver.get(&MESSAGE_CLAIMS, &partition, key).await.unwrap();
        assert_eq!(row.as_ref().map(|row| (&row.clustering, &row.body, row.ts)), one.as_ref().map(|row| (&row.clustering, &row.body, row.ts)), "{key:?}");
        present += usize::from(row.is_some());
    }
    // 166 of 0..250 written, one of them deleted; the live one; the 2 asked twice more.
    assert_eq!(present, 165 + 1 + 2);
    assert!(many[many.len() - 3].is_some() && many[many.len() - 2].is_some() && many[many.len() - 1].is_none());
    driver.write(vec![put("acc", 1, "mtg_1", "{\"n\":1}", 5), put("acc", 2, "mtg_2", "{\"n\":2}", 5)]).await.unwrap();
    let keys = vec![vec![Val::Int(2), Val::text("mtg_2")], vec![Val::Int(3), Val::text("mtg_3")], vec![Val::Int(1), Val::text("mtg_1")]];
    let many = driver.get_many(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &keys).await.unwrap();
    assert_eq!(many.iter().map(|row| row.as_ref().map(|row| row.body.as_str())).collect::<Vec<_>>(), vec![Some("{\"n\":2}"), None, Some("{\"n\":1}")]);
}

/// `Driver::holds_rows` says whether a table has a live row in any partition: not
/// for tombstones or expired rows, nor for another table's rows.
async fn a_table_holds_rows_only_when_one_is_live(driver: Arc<dyn Driver>) {
    let now = recap_readmodel::driver::now_micros();
    assert!(!driver.holds_rows(&MEETINGS_BY_ACCOUNT).await.unwrap(), "an empty table");
    driver.write(vec![delete("acc", 1, "mtg_gone", 5)]).await.unwrap();
    assert!(!driver.holds_rows(&MEETINGS_BY_ACCOUNT).await.unwrap(), "a tombstone only");
    let code = |id: &str, expires_at: i64| code(id, expires_at, now);
    driver.write(vec![code("expired", now - 1)]).await.unwrap();
    assert!(!driver.holds_rows(&OAUTH_CODES).await.unwrap(), "an expired row only");
    driver.write(vec![put("acc_other", 2, "mtg_1", "{}", 5)]).await.unwrap();
    assert!(driver.holds_rows(&MEETINGS_BY_ACCOUNT).await.unwrap(), "a live row");
    assert!(!driver.holds_rows(&OAUTH_CODES).await.unwrap(), "another table's row");
    driver.write(vec![code("live", now + 60_000_000)]).await.unwrap();
    assert!(driver.holds_rows(&OAUTH_CODES).await.unwrap());
}

/// One write call of many rows of one partition, across tables, with several writes of
/// the same rows at different timestamps, deletes (one tied with a put) and expiring
/// rows, lands as the same rows written one a call would (the ScyllaDriver sends such
/// rows as batches of one partition key; each row keeps its own timestamp and TTL).
async fn many_rows_of_one_partition_in_one_write_keep_each_rows_rules(driver: Arc<dyn Driver>) {
    let now = recap_readmodel::driver::now_micros();
    let big = "x".repeat(3_000);
    let mut writes = Vec::new();
    for index in 0..150i64 {
        writes.push(put("acc", index, "m", &format!("new {index} {big}"), 20));
        writes.push(put("acc", index, "m", "old", 10));
    }
    // Deleted after the write: gone. Deleted before it: the write stands.
    for index in (0..150).step_by(3) {
        writes.push(delete("acc", index, "m", 30));
    }
    for index in (1..150).step_by(3) {
        writes.push(delete("acc", index, "m", 5));
    }
    // A put and a delete of one row at the same timestamp: the tombstone wins the tie.
    writes.push(put("acc", 150, "m", "tied", 40));
    writes.push(delete("acc", 150, "m", 40));
    // The same partition key in another table, expiring and not.
    let team = |id: &str, expires_at: Option<i64>| Mutation {
        table: &TEAMS_BY_ACCOUNT,
        partition: vec![Val::text("acc")],
        clustering: vec![Val::text(id)],
        op: Op::Put { body: id.to_string(), expires_at },
        ts: 1,
    };
    writes.extend([team("t1", Some(now + 60_000_000)), team("t2", Some(now - 1)), team("t3", None)]);
    driver.write(writes).await.unwrap();

    let rows = driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 1_000).await.unwrap();
    let kept: Vec<(i64, String)> = rows
        .into_iter()
        .map(|row| match row.clustering[0] {
            Val::Int(created) => (created, row.body),
            ref other => panic!("a created_at key: {other:?}"),
        })
        .collect();
    let expected: Vec<i64> = (0..150).rev().filter(|index| index % 3 != 0).collect();
    assert_eq!(
        kept.iter().map(|(created, _)| *created).collect::<Vec<_>>(),
        expected,
        "every row but those deleted after their write or with it, newest first"
    );
    for (created, body) in &kept {
        assert_eq!(*body, format!("new {created} {big}"), "the newest write of each row");
    }
    let teams: Vec<String> =
        driver.scan(&TEAMS_BY_ACCOUNT, &[Val::text("acc")], &ScanRange::all(), 10).await.unwrap().into_iter().map(|row| row.body).collect();
    assert_eq!(teams, vec!["t1", "t3"], "the expired row is not read");
}

async fn text_keys_with_any_characters_round_trip(driver: Arc<dyn Driver>) {
    let odd = "a\u{0}b\u{ff}é\u{1f}";
    driver.write(vec![put("acc\u{0}x", 1, odd, "odd", 1), put("acc", 1, "plain", "plain", 1)]).await.unwrap();
    let rows = driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc\u{0}x")], &ScanRange::all(), 10).await.unwrap();
    assert_eq!(rows.len(), 1, "partitions do not bleed into each other");
    assert_eq!(rows[0].clustering, vec![Val::Int(1), Val::text(odd)]);
}

/// The key of a row of the conditionally written table.
fn claim_key(id: &str) -> [Val; 2] {
    [Val::text("code"), Val::text(id)]
}

/// Sleeps until a little after the wall-clock instant `at` (µs).
async fn sleep_until_past(at: i64) {
    let left = at + 20_000 - recap_readmodel::driver::now_micros();
    tokio::time::sleep(std::time::Duration::from_micros(left.max(0) as u64)).await;
}

async fn claim(driver: &Arc<dyn Driver>, id: &str) -> Option<String> {
    driver.get(&OAUTH_CLAIMS, &claim_key(id), &[]).await.unwrap().map(|row| row.body)
}

async fn conditional_inserts_write_only_where_no_live_row_is(driver: Arc<dyn Driver>) {
    let now = recap_readmodel::driver::now_micros();
    let later = Some(now + 600_000_000);
    assert!(driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("a"), &[], "first", later).await.unwrap(), "an absent key is written");
    assert!(!driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("a"), &[], "second", later).await.unwrap(), "a live row is kept");
    assert_eq!(claim(&driver, "a").await.as_deref(), Some("first"));
    assert!(driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("b"), &[], "kept", None).await.unwrap(), "a row may never expire");
    assert!(!driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("b"), &[], "other", later).await.unwrap());
    assert_eq!(claim(&driver, "b").await.as_deref(), Some("kept"));

    // Expired, then written again, at its `expires_at` to the millisecond on both
    // drivers: CQL, which counts TTLs in whole seconds from the second a row was written
    // in, keeps this row two to three seconds, and a conditional insert replaces it once
    // it has expired by its `expires_at` (and never before: `too early`, which a TTL
    // rounded down let through when the first insert landed late in its second).
    let soon = recap_readmodel::driver::now_micros() + 1_200_000;
    assert!(driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("c"), &[], "short-lived", Some(soon)).await.unwrap());
    assert!(!driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("c"), &[], "too early", later).await.unwrap());
    sleep_until_past(soon).await;
    assert_eq!(claim(&driver, "c").await, None, "an expired row reads as absent");
    assert!(driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("c"), &[], "again", later).await.unwrap(), "an expired row's key is written again");
    assert!(!driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("c"), &[], "once more", later).await.unwrap());
    assert_eq!(claim(&driver, "c").await.as_deref(), Some("again"));
}

/// "A table is written one way only": a plain write or delete of a conditionally
/// written table, and a conditional insert into any other, are refused, and nothing of
/// a refused batch is written.
async fn each_table_takes_only_its_own_kind_of_write(driver: Arc<dyn Driver>) {
    let plain_claim = |op: Op| Mutation { table: &OAUTH_CLAIMS, partition: claim_key("a").to_vec(), clustering: vec![], op, ts: 1 };
    let refused = driver.write(vec![put("acc", 1, "m", "v1", 1), plain_claim(Op::Put { body: "plain".into(), expires_at: None })]).await;
    assert!(matches!(refused, Err(StoreError::Misuse(_))), "{refused:?}");
    assert_eq!(body(&driver, 1, "m").await, None, "nothing of a refused batch is written");
    assert_eq!(claim(&driver, "a").await, None);
    let refused = driver.write(vec![plain_claim(Op::Delete)]).await;
    assert!(matches!(refused, Err(StoreError::Misuse(_))), "a tombstone is refused too: {refused:?}");

    let refused = driver.insert_if_absent(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], &[Val::Int(1), Val::text("m")], "v1", None).await;
    assert!(matches!(refused, Err(StoreError::Misuse(_))), "{refused:?}");
    assert_eq!(body(&driver, 1, "m").await, None);

    // Each kind still works on its own tables.
    driver.write(vec![put("acc", 1, "m", "v1", 1)]).await.unwrap();
    assert!(driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key("a"), &[], "conditional", None).await.unwrap());
    assert_eq!((body(&driver, 1, "m").await.as_deref(), claim(&driver, "a").await.as_deref()), (Some("v1"), Some("conditional")));
}

/// Many tasks insert one key at once, spread over `sessions` (separate connections to
/// one store, as separate pods hold): exactly one is told it wrote,
/// and every later read, through every session, returns that one's body. Several
/// rounds, a key each; in the last, the key holds a row that has just expired (which
/// CQL still keeps, so the racers replace it rather than insert).
async fn racing_conditional_inserts_let_exactly_one_write(sessions: Vec<Arc<dyn Driver>>) {
    const RACERS: usize = 32;
    for round in 0..6 {
        let key = format!("race{round}");
        if round == 5 {
            let soon = recap_readmodel::driver::now_micros() + 1_200_000;
            assert!(sessions[0].insert_if_absent(&OAUTH_CLAIMS, &claim_key(&key), &[], "expiring", Some(soon)).await.unwrap());
            sleep_until_past(soon).await;
        }
        let start = Arc::new(tokio::sync::Barrier::new(RACERS));
        let racers: Vec<_> = (0..RACERS)
            .map(|racer| {
                let (driver, key, start) = (sessions[racer % sessions.len()].clone(), key.clone(), start.clone());
                tokio::spawn(async move {
                    let body = format!("racer{racer}");
                    start.wait().await;
                    let expires_at = Some(recap_readmodel::driver::now_micros() + 600_000_000);
                    let wrote = driver.insert_if_absent(&OAUTH_CLAIMS, &claim_key(&key), &[], &body, expires_at).await.unwrap();
                    (body.clone(), wrote)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for racer in racers {
            let (body, wrote) = racer.await.unwrap();
            if wrote {
                winners.push(body);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one insert is told it wrote: {winners:?}");
        for (index, session) in sessions.iter().enumerate() {
            assert_eq!(claim(session, &key).await.as_ref(), Some(&winners[0]), "round {round}, session {index} reads the winner's body");
        }
    }
}

async fn body_pages_are_the_scans_bodies_joined(driver: Arc<dyn Driver>) {
    // scan_bodies must equal reading the rows with scan: same rows, same order, same
    // bounds, tombstones and expired rows skipped, skip and limit applied to live rows;
    // scan_counted must equal scan and count.
    let now = recap_readmodel::driver::now_micros();
    let mut writes: Vec<Mutation> = (1..=9).map(|created| put("acc", created, &format!("m{created}"), &format!("{{\"n\":{created}}}"), 1)).collect();
    writes.push(delete("acc", 7, "m7", 2));
    writes.push(Mutation { op: Op::Put { body: "{\"expired\":1}".into(), expires_at: Some(now - 1) }, ..put("acc", 5, "m5", "", 3) });
    writes.push(put("other", 4, "x", "{\"other\":1}", 1));
    driver.write(writes).await.unwrap();
    // Only the required methods forwarded, so `scan_bodies`, `scan_counted` and `count`
    // are the trait's own.
    let plain: Arc<dyn Driver> = Arc::new(recap_testkit::FaultyDriver::new(driver.clone()).with_trait_defaults());
    let ranges = [
        ScanRange::all(),
        ScanRange::after(Some(&[Val::Int(8), Val::text("m8")])),
        ScanRange { start: Bound::Included(vec![Val::Int(6)]), end: Bound::Excluded(vec![Val::Int(2)]) },
    ];
    for range in &ranges {
        let rows = driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], range, 100).await.unwrap();
        for skip in [0, 1, 3, 10] {
            for limit in [0, 1, 2, 5, 100] {
                let expected: Vec<&recap_readmodel::Row> = rows.iter().skip(skip).take(limit).collect();
                let joined = expected.iter().map(|row| row.body.as_str()).collect::<Vec<_>>().join(",");
                let expected_page = recap_readmodel::BodiesPage {
                    count: expected.len(),
                    last_key: expected.last().map(|row| row.clustering.clone()),
                    has_more: rows.len() > skip + limit,
                };
                for (name, driver) in [("the driver's", &driver), ("the trait's", &plain)] {
                    let (counted_rows, total) = driver.scan_counted(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], range, skip + limit).await.unwrap();
                    assert_eq!(
                        counted_rows,
                        rows.iter().take(skip + limit).cloned().collect::<Vec<_>>(),
                        "{name} counted scan, limit {} range {range:?}",
                        skip + limit
                    );
                    assert_eq!(total, rows.len(), "{name} count, range {range:?}");
                    let mut out = b"[".to_vec();
                    let page = driver.scan_bodies(&MEETINGS_BY_ACCOUNT, &[Val::text("acc")], range, skip, limit, &mut out).await.unwrap();
                    assert_eq!(String::from_utf8(out).unwrap(), format!("[{joined}"), "{name} bodies, skip {skip} limit {limit} range {range:?}");
                    assert_eq!(page, expected_page, "{name} page, skip {skip} limit {limit} range {range:?}");
                }
            }
        }
    }
    let mut out = Vec::new();
    let page = driver.scan_bodies(&MEETINGS_BY_ACCOUNT, &[Val::text("nobody")], &ScanRange::all(), 0, 50, &mut out).await.unwrap();
    assert_eq!((out.as_slice(), page.count, page.last_key, page.has_more), (&b""[..], 0, None, false));
}

/// Partitions larger than one page of the ScyllaDriver (1,000 rows): scans, counted
/// scans and body pages read on past it, with tombstones and expired rows on both sides
/// of the page boundary, and a LIMIT just inside and just past one page.
async fn reads_past_the_first_page_of_rows(driver: Arc<dyn Driver>) {
    const ROWS: i64 = 2_345;
    let now = recap_readmodel::driver::now_micros();
    let mut writes: Vec<Mutation> = (1..=ROWS).map(|created| put("acc", created, &format!("m{created}"), &format!("{{\"n\":{created}}}"), 1)).collect();
    // Newest first: created 1345 is the 1,001st row, the first of the second page.
    let expired = [1_344, 1_345, 1_346];
    for created in expired {
        writes.push(Mutation { op: Op::Put { body: "{}".into(), expires_at: Some(now - 1) }, ..put("acc", created, &format!("m{created}"), "", 3) });
    }
    writes.extend((1..=ROWS).filter(|created| created % 100 == 0).map(|created| delete("acc", created, &format!("m{created}"), 2)));
    for chunk in writes.chunks(500) {
        driver.write(chunk.to_vec()).await.unwrap();
    }
    let live: Vec<i64> = (1..=ROWS).rev().filter(|created| created % 100 != 0 && !expired.contains(created)).collect();
    let key = |created: i64| vec![Val::Int(created), Val::text(format!("m{created}"))];
    let partition = [Val::text("acc")];
    let created_of = |rows: &[recap_readmodel::Row]| {
        rows.iter()
            .map(|row| match row.clustering[0] {
                Val::Int(created) => created,
                _ => unreachable!(),
            })
            .collect::<Vec<_>>()
    };

    for limit in [999, 1_000, 1_001, 2_200, 10_000] {
        let rows = driver.scan(&MEETINGS_BY_ACCOUNT, &partition, &ScanRange::all(), limit).await.unwrap();
        assert_eq!(created_of(&rows), live.iter().copied().take(limit).collect::<Vec<_>>(), "scan, limit {limit}");
        let (counted, total) = driver.scan_counted(&MEETINGS_BY_ACCOUNT, &partition, &ScanRange::all(), limit).await.unwrap();
        assert_eq!((counted, total), (rows, live.len()), "counted scan, limit {limit}");
    }
    let after = driver.scan(&MEETINGS_BY_ACCOUNT, &partition, &ScanRange::after(Some(&key(live[1_499]))), 10_000).await.unwrap();
    assert_eq!(created_of(&after), live[1_500..].to_vec(), "strictly after a key past the first page");

    for (skip, limit) in [(0, 1_200), (990, 50), (995, 1_000), (2_000, 500)] {
        let mut out = Vec::new();
        let page = driver.scan_bodies(&MEETINGS_BY_ACCOUNT, &partition, &ScanRange::all(), skip, limit, &mut out).await.unwrap();
        let expected: Vec<i64> = live.iter().copied().skip(skip).take(limit).collect();
        let joined = expected.iter().map(|created| format!("{{\"n\":{created}}}")).collect::<Vec<_>>().join(",");
        assert_eq!(String::from_utf8(out).unwrap(), joined, "bodies, skip {skip} limit {limit}");
        let expected_page =
            recap_readmodel::BodiesPage { count: expected.len(), last_key: expected.last().map(|&created| key(created)), has_more: live.len() > skip + limit };
        assert_eq!(page, expected_page, "page, skip {skip} limit {limit}");
    }
}

/// A fresh keyspace on the real cluster named by `RECAP_SCYLLA_NODES` (started by
/// `make up`), migrated to the tables of `schemas/cql/recap.cql`.
async fn scylla() -> (Arc<dyn Driver>, recap_scylla::ScyllaCluster, String) {
    use recap_scylla::ScyllaDriver;
    assert!(std::env::var_os("RECAP_SCYLLA_NODES").is_some(), "RECAP_SCYLLA_NODES (run `make up`)");
    let nodes = recap_testkit::cluster::Engines::from_env().scylla();
    let keyspace = format!("recap_test_{}", uuid_like());
    let timeout = std::time::Duration::from_secs(10);
    ScyllaDriver::migrate(&nodes, &keyspace, "{'class': 'SimpleStrategy', 'replication_factor': 1}", recap_readmodel::tables::ALL, timeout).await.unwrap();
    (connect(&nodes, &keyspace).await, nodes, keyspace)
}

/// A session of its own on `keyspace`.
async fn connect(nodes: &recap_scylla::ScyllaCluster, keyspace: &str) -> Arc<dyn Driver> {
    let config = recap_scylla::ScyllaConfig {
        cluster: nodes.clone(),
        keyspace: keyspace.to_string(),
        consistency: recap_scylla::Consistency::LocalQuorum,
        timeout: std::time::Duration::from_secs(10),
        write_concurrency: 64,
    };
    Arc::new(recap_scylla::ScyllaDriver::connect(config).await.unwrap())
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}

macro_rules! for_each_driver {
    ($($case:ident),*) => {
        mod embedded_driver {
            $(#[tokio::test]
            async fn $case() {
                let (_dir, driver) = super::embedded();
                super::$case(driver).await;
            })*
        }
        mod scylla_driver {
            $(#[tokio::test]
            #[ignore = "needs the real engines: `make up` (make test runs it)"]
            async fn $case() {
                let (driver, nodes, keyspace) = super::scylla().await;
                super::$case(driver).await;
                recap_scylla::ScyllaDriver::drop_keyspace(&nodes, &keyspace, std::time::Duration::from_secs(30)).await.unwrap();
            })*
        }
    };
}

for_each_driver!(
    last_write_wins,
    tombstones_shadow_older_writes_and_win_ties,
    a_purged_row_is_gone_from_reads_and_scans,
    a_tie_between_writes_keeps_the_greater_body,
    scans_follow_clustering_order_and_bounds,
    rows_expire,
    rows_are_read_until_their_expiry_and_not_after,
    many_rows_of_one_partition_in_one_write_keep_each_rows_rules,
    text_keys_with_any_characters_round_trip,
    body_pages_are_the_scans_bodies_joined,
    reads_past_the_first_page_of_rows,
    conditional_inserts_write_only_where_no_live_row_is,
    each_table_takes_only_its_own_kind_of_write,
    a_table_holds_rows_only_when_one_is_live,
    many_keys_of_one_partition_read_at_once_answer_as_gets
);

// One LMDB store has one owner process, so its racers share one driver (the inserts
// still run on several threads at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_conditional_inserts_let_exactly_one_write_on_lmdb() {
    let (_dir, driver) = embedded();
    racing_conditional_inserts_let_exactly_one_write(vec![driver.clone(), driver]).await;
}

// Two sessions of their own, as two pods hold, each with its own connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
async fn racing_conditional_inserts_let_exactly_one_write_on_cassandra() {
    let (first, nodes, keyspace) = scylla().await;
    let second = connect(&nodes, &keyspace).await;
    racing_conditional_inserts_let_exactly_one_write(vec![first, second]).await;
    recap_scylla::ScyllaDriver::drop_keyspace(&nodes, &keyspace, std::time::Duration::from_secs(30)).await.unwrap();
}

#[tokio::test]
async fn the_embedded_driver_counts_committed_writes_per_table() {
    // It owns its store, so a count that has not moved means the table has not changed
    // (Driver::change_count); the ScyllaDB driver, whose store others write, has none.
    let (_dir, driver) = embedded();
    assert_eq!(driver.change_count(&MEETINGS_BY_ACCOUNT), Some(0));
    driver.write(vec![put("acc", 1, "m", "v5", 5)]).await.unwrap();
    assert_eq!(driver.change_count(&MEETINGS_BY_ACCOUNT), Some(1));
    driver.write(vec![put("acc", 1, "m", "v6", 6), put("acc", 2, "n", "v1", 1)]).await.unwrap();
    assert_eq!(driver.change_count(&MEETINGS_BY_ACCOUNT), Some(2), "one count per committed write, not per row");
    assert_eq!(driver.change_count(&TEAMS_BY_ACCOUNT), Some(0), "other tables keep theirs");
}

#[tokio::test]
async fn the_embedded_driver_wakes_a_waiter_at_the_next_committed_write_to_its_table() {
    // A reader tailing a table waits for its next write instead of polling it
    // (Driver::next_change): taken before a write, the future resolves once the write is
    // committed, and only a write to its own table ends it.
    use futures::FutureExt;
    let (_dir, driver) = embedded();
    let team = Mutation {
        table: &TEAMS_BY_ACCOUNT,
        partition: vec![Val::text("acc")],
        clustering: vec![Val::text("team_a")],
        op: Op::Put { body: "team_a".into(), expires_at: None },
        ts: 1,
    };
    let mut meetings_written = driver.next_change(&MEETINGS_BY_ACCOUNT).expect("the embedded driver tells of its writes");
    driver.write(vec![team]).await.unwrap();
    assert!((&mut meetings_written).now_or_never().is_none(), "another table's write does not end the wait");
    driver.write(vec![put("acc", 1, "m", "v5", 5)]).await.unwrap();
    assert_eq!(meetings_written.now_or_never(), Some(()), "the table's write ends it");
    let after = driver.next_change(&MEETINGS_BY_ACCOUNT).unwrap();
    assert!(after.now_or_never().is_none(), "a wait taken after a write is not ended by it");
}
