//! From the message log to the feed and the delivery queue, for one batch: its messages
//! are claimed in one conditional write (a duplicate at another seq is dropped), then
//! the feed rows and one delivery per endpoint that wants the message are written, then
//! the feed heads. The caller commits its log position only after this returns, so a
//! crash anywhere replays the batch, and replaying writes the same rows again (the
//! same keys; a delivery first due at the message's time, or at the time it was read
//! when that lies ahead).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;

use recap_readmodel::messages::{AccountMessage, Message};
use recap_readmodel::webhooks::{Delivery, EndpointRecord, EndpointState, WebhookStore};
use recap_readmodel::StoreError;

use crate::deliver::Shards;
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

/// Appends `batch` to the feeds and schedules its deliveries; `now` is the clock's time.
/// The shards' scan marks are lowered to the deliveries it wrote (see [`Shards`]).
pub async fn ingest(store: &WebhookStore, batch: &[LogMessage], now: i64, stats: &Stats, shards: &Shards) -> Result<Ingested, StoreError> {
    // A message the batch carries twice is claimed only at its first seq: concurrent
    // claims of one id could otherwise let the later seq win.
    let mut first_seen: HashSet<(&str, &str)> = HashSet::new();
    let firsts: Vec<bool> = batch.iter().map(|entry| first_seen.insert((entry.message.account_id.as_str(), entry.message.message.id.as_str()))).collect();
    let pending: Vec<(&str, i64, &Message)> = batch
        .iter()
        .zip(&firsts)
        .filter(|(_, first)| **first)
        .map(|(entry, _)| (entry.message.account_id.as_str(), entry.seq, &entry.message.message))
        .collect();
    let mut won = store.claim_many(&pending).await?.into_iter();
    let claims: Vec<bool> = firsts.iter().map(|first| *first && won.next().unwrap_or(false)).collect();
    let mut endpoints: HashMap<&str, Vec<(EndpointRecord, EndpointState)>> = HashMap::new();
    let mut heads: BTreeMap<&str, i64> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut earliest: BTreeMap<&str, i64> = BTreeMap::new();
    let mut ingested = Ingested::default();
    for (entry, claimed) in batch.iter().zip(claims) {
        let account_id = entry.message.account_id.as_str();
        let message = &entry.message.message;
        if !claimed {
            ingested.duplicates += 1;
            continue;
        }
        ingested.appended += 1;
        rows.push(store.feed_row(account_id, entry.seq, message));
        let head = heads.entry(account_id).or_insert(entry.seq);
        *head = (*head).max(entry.seq);
        if !endpoints.contains_key(account_id) {
            endpoints.insert(account_id, store.endpoints(account_id).await?);
        }
        let due_at = message.created_at.micros().min(now);
        for (endpoint, state) in endpoints.get(account_id).into_iter().flatten() {
            if !endpoint.enabled || state.disables(endpoint) || !endpoint.wants(message.kind) {
                continue;
            }
            let delivery =
                Delivery { account_id: account_id.to_owned(), endpoint_id: endpoint.id.clone(), message_id: message.id.clone(), seq: entry.seq, attempt: 1 };
            rows.push(store.delivery_row(&entry.shard, due_at, &delivery));
            let shard_earliest = earliest.entry(entry.shard.as_str()).or_insert(due_at);
            *shard_earliest = (*shard_earliest).min(due_at);
            ingested.deliveries += 1;
        }
    }
    if !rows.is_empty() {
        store.write(rows).await?;
    }
    for (shard, due_at) in earliest {
        shards.lower(shard, due_at);
    }
    // Only once every row at or below them is written.
    let head_rows: Vec<_> = heads.into_iter().map(|(account_id, seq)| store.head_row(account_id, seq)).collect();
    if !head_rows.is_empty() {
        store.write(head_rows).await?;
    }
    stats.appended.fetch_add(ingested.appended as u64, Ordering::Relaxed);
    stats.duplicates.fetch_add(ingested.duplicates as u64, Ordering::Relaxed);
    stats.scheduled.fetch_add(ingested.deliveries as u64, Ordering::Relaxed);
    crate::metrics::record_messages("appended", ingested.appended as u64);
    crate::metrics::record_messages("duplicate", ingested.duplicates as u64);
    Ok(ingested)
}
