//! From the message log to the feed and the delivery queue, for one batch: its messages
//! are claimed in one conditional write (a duplicate at another seq is dropped), then
//! the feed rows and one delivery per endpoint that wants the message are written, then
//! the feed heads; then the first attempts are handed over to the deliverer in memory
//! ([`crate::handoff`]), prepared. The caller commits its log position only after this
//! returns, so a crash anywhere replays the batch, and replaying writes the same rows
//! again (the same keys; a delivery first due at the message's time, or at the time it
//! was read when that lies ahead). A first attempt's row is written at its due time, so
//! a replay after the delivery was made lands under the removal's tombstone instead of
//! scheduling it again; what a replay finds live is left to the deliverer's scan, not
//! handed over.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use recap_readmodel::messages::AccountMessage;
use recap_readmodel::webhooks::{Claimed, Delivery, DueDelivery, EndpointRecord, EndpointState, WebhookStore};
use recap_readmodel::{Mutation, StoreError};

use crate::deliver::Shards;
use crate::handoff::{FirstAttempt, Handoff, PreparedEndpoint, PreparedMessage};
use crate::metrics::Stats;

/// One message as the log carries it: its seq in the account's feed (the outbox's
/// sequence, or the record's offset) and the shard its deliveries go to.
#[derive(Clone, Debug, PartialEq)]
pub struct LogMessage {
    pub seq: i64,
    pub shard: String,
    pub message: AccountMessage,
}

/// What one batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ingested {
    pub appended: usize,
    pub duplicates: usize,
    pub deliveries: usize,
}

/// An account's endpoints as the batch read them: each with its state, and once a
/// first attempt to it is prepared, with its secrets.
struct AccountEndpoints {
    endpoints: Vec<(EndpointRecord, EndpointState, Option<Arc<PreparedEndpoint>>)>,
}

/// Appends `batch` to the feeds, schedules its deliveries and hands their first
/// attempts to `handoff`; `now` is the clock's time. The shards' scan marks are lowered
/// to the deliveries written that nothing holds in memory (see [`Shards`]).
pub async fn ingest(store: &WebhookStore, batch: &[LogMessage], now: i64, stats: &Stats, shards: &Shards, handoff: &Handoff) -> Result<Ingested, StoreError> {
    ingest_and_commit(store, batch, now, stats, shards, handoff, Vec::new()).await
}

/// [`ingest`], then `commit` (the reader's position): written with the heads where the
/// store writes atomically, so that the batch costs two writes (the claims, then
/// everything else) instead of four; after the heads where it does not.
pub async fn ingest_and_commit(
    store: &WebhookStore,
    batch: &[LogMessage],
    now: i64,
    stats: &Stats,
    shards: &Shards,
    handoff: &Handoff,
    commit: Vec<Mutation>,
) -> Result<Ingested, StoreError> {
    // A message the batch carries twice is claimed only at its first seq: concurrent
    // claims of one id could otherwise let the later seq win.
    let mut first_seen: HashSet<(&str, &str)> = HashSet::new();
    let firsts: Vec<bool> = batch.iter().map(|entry| first_seen.insert((entry.message.account_id.as_str(), entry.message.message.id.as_str()))).collect();
    // Each message's JSON, made once: its claim's, its feed row's and its deliveries' body.
    let mut bodies: Vec<Option<String>> = batch.iter().map(|entry| Some(entry.message.message.to_json())).collect();
    let pending: Vec<(&str, i64, &str, String)> = batch
        .iter()
        .zip(&firsts)
        .zip(&bodies)
        .filter(|((_, first), _)| **first)
        .map(|((entry, _), body)| (entry.message.account_id.as_str(), entry.seq, entry.message.message.id.as_str(), body.clone().unwrap_or_default()))
        .collect();
    let mut told = store.claim_many_json(&pending).await?.into_iter();
    drop(pending);
    let claims: Vec<Claimed> = firsts.iter().map(|first| if *first { told.next().unwrap_or(Claimed::Elsewhere) } else { Claimed::Elsewhere }).collect();
    // Taken before the endpoints are read: a change counted later means they may be stale.
    let changes = store.endpoint_changes();
    let read_at = Instant::now();
    let mut endpoints: HashMap<&str, AccountEndpoints> = HashMap::new();
    let mut heads: BTreeMap<&str, i64> = BTreeMap::new();
    let mut rows = Vec::new();
    // Per shard, the earliest delivery written that nothing will hold in memory, and
    // the earliest of all (should the batch fail halfway).
    let mut unheld: BTreeMap<&str, i64> = BTreeMap::new();
    let mut written: BTreeMap<&str, i64> = BTreeMap::new();
    let mut first_attempts = Vec::new();
    let mut ingested = Ingested::default();
    for ((entry, claimed), body) in batch.iter().zip(claims).zip(bodies.iter_mut()) {
        let account_id = entry.message.account_id.as_str();
        let message = &entry.message.message;
        if claimed == Claimed::Elsewhere {
            ingested.duplicates += 1;
            continue;
        }
        ingested.appended += 1;
        let body = body.take().unwrap_or_else(|| message.to_json());
        let head = heads.entry(account_id).or_insert(entry.seq);
        *head = (*head).max(entry.seq);
        if !endpoints.contains_key(account_id) {
            let read = store.endpoints(account_id).await?.into_iter().map(|(endpoint, state)| (endpoint, state, None)).collect();
            endpoints.insert(account_id, AccountEndpoints { endpoints: read });
        }
        let due_at = message.created_at.micros().min(now);
        // Only a message claimed now is handed over: one claimed before (a replay) may
        // have been delivered already, which only the store knows.
        let hand_over = claimed == Claimed::New && shards.holds(&entry.shard);
        let mut prepared_message = None;
        let account = endpoints.get_mut(account_id).map(|account| &mut account.endpoints);
        for (endpoint, state, prepared) in account.into_iter().flatten() {
            if !endpoint.enabled || state.disables(endpoint) || !endpoint.wants(message.kind) {
                continue;
            }
            let delivery =
                Delivery { account_id: account_id.to_owned(), endpoint_id: endpoint.id.clone(), message_id: message.id.clone(), seq: entry.seq, attempt: 1 };
            rows.push(store.first_delivery_row(&entry.shard, due_at, &delivery));
            ingested.deliveries += 1;
            let earliest = written.entry(entry.shard.as_str()).or_insert(due_at);
            *earliest = (*earliest).min(due_at);
            if !hand_over {
                let earliest = unheld.entry(entry.shard.as_str()).or_insert(due_at);
                *earliest = (*earliest).min(due_at);
                continue;
            }
            let endpoint = match prepared {
                Some(prepared) => prepared.clone(),
                None => {
                    let secrets = store.secrets(account_id, &endpoint.id).await?;
                    prepared.insert(Arc::new(PreparedEndpoint { endpoint: endpoint.clone(), secrets, read_at, changes })).clone()
                }
            };
            let message = prepared_message.get_or_insert_with(|| Arc::new(PreparedMessage::with_body(entry.seq, message, body.clone()))).clone();
            first_attempts.push(FirstAttempt { due: DueDelivery { shard: entry.shard.clone(), due_at, delivery }, message, endpoint });
        }
        rows.push(store.feed_row_with_body(account_id, entry.seq, body));
    }
    let lower = |marks: &BTreeMap<&str, i64>| {
        for (shard, due_at) in marks {
            shards.lower(shard, *due_at);
        }
    };
    // The heads only once every row at or below them is written (in the same write
    // where a write lands all or nothing), and the commit after them.
    let head_rows: Vec<_> = heads.iter().map(|(account_id, seq)| store.head_row(account_id, *seq)).collect();
    let writes = if store.writes_atomically() { vec![rows.into_iter().chain(head_rows).chain(commit).collect()] } else { vec![rows, head_rows, commit] };
    for write in writes {
        if write.is_empty() {
            continue;
        }
        if let Err(error) = store.write(write).await {
            // Some rows may be written: findable by a scan, whatever becomes of the batch.
            lower(&written);
            return Err(error);
        }
    }
    for (account_id, seq) in &heads {
        handoff.head_written(account_id, *seq);
    }
    let refused = handoff.offer(first_attempts);
    for first_attempt in &refused {
        shards.lower(&first_attempt.due.shard, first_attempt.due.due_at);
    }
    if !unheld.is_empty() || !refused.is_empty() {
        lower(&unheld);
        handoff.wake_scan();
    }
    stats.appended.fetch_add(ingested.appended as u64, Ordering::Relaxed);
    stats.duplicates.fetch_add(ingested.duplicates as u64, Ordering::Relaxed);
    stats.scheduled.fetch_add(ingested.deliveries as u64, Ordering::Relaxed);
    crate::metrics::record_messages("appended", ingested.appended as u64);
    crate::metrics::record_messages("duplicate", ingested.duplicates as u64);
    Ok(ingested)
}
