//! From the message log to the feed and the deliverer, for one batch: its messages are
//! claimed in one conditional write (a duplicate at another seq is dropped), the feed
//! rows and heads are written, then the first attempt of each delivery (one per
//! endpoint that wants the message) is handed over to the deliverer in memory
//! ([`crate::handoff`]), prepared, and registered in the [`crate::handoff::Ledger`]. A
//! first attempt has no row: the message log is its queue, and the reader commits its
//! position only up to the messages whose first attempts are settled. Only those that
//! do not fit in memory are written as rows of `webhook_retries`, due at once, in the
//! write of the feed rows.
//!
//! A crash anywhere before the position covers a message reads it again: the same
//! claim (this seq's), the same feed row and head, and its first attempts handed over
//! again (made again if they were made before the crash, with the same `webhook-id`:
//! at least once).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use recap_readmodel::messages::AccountMessage;
use recap_readmodel::webhooks::{Claimed, Delivery, DueDelivery, EndpointRecord, EndpointState, WebhookStore};
use recap_readmodel::StoreError;

use crate::deliver::Shards;
use crate::handoff::{FirstAttempt, Handoff, PreparedEndpoint, PreparedMessage, Ticket};
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
    /// Deliveries the batch's messages made: first attempts handed over, and those
    /// written as rows.
    pub deliveries: usize,
    /// Of them, the first attempts written as rows (past what memory holds).
    pub written: usize,
}

/// An account's endpoints as the batch read them: each with its state, and once a
/// first attempt to it is prepared, with its secrets.
struct AccountEndpoints {
    endpoints: Vec<(EndpointRecord, EndpointState, Option<Arc<PreparedEndpoint>>)>,
}

/// A first attempt prepared before the batch's writes, registered after them.
struct Prepared {
    due: DueDelivery,
    message: Arc<PreparedMessage>,
    endpoint: Arc<PreparedEndpoint>,
}

/// Appends `batch` to the feeds and hands the first attempts of its deliveries to
/// `handoff`; `now` is the clock's time. Messages of shards this process does not hold
/// are appended but not delivered: the position of such a shard is not this process's
/// to commit, and its holder reads them again. The caller tells the ledger how far the
/// log is read once this returns.
pub async fn ingest(store: &WebhookStore, batch: &[LogMessage], now: i64, stats: &Stats, shards: &Shards, handoff: &Handoff) -> Result<Ingested, StoreError> {
    // A message the batch carries twice is claimed only at its first seq: concurrent
    // claims of one id could otherwise let the later seq win.
    let mut first_seen: HashSet<(&str, &str)> = HashSet::new();
    let firsts: Vec<bool> = batch.iter().map(|entry| first_seen.insert((entry.message.account_id.as_str(), entry.message.message.id.as_str()))).collect();
    let pending: Vec<(&str, i64, &str)> = batch
        .iter()
        .zip(&firsts)
        .filter(|(_, first)| **first)
        .map(|(entry, _)| (entry.message.account_id.as_str(), entry.seq, entry.message.message.id.as_str()))
        .collect();
    let mut told = store.claim_ids(&pending).await?.into_iter();
    drop(pending);
    let claims: Vec<Claimed> = firsts.iter().map(|first| if *first { told.next().unwrap_or(Claimed::Elsewhere) } else { Claimed::Elsewhere }).collect();
    // Taken before the endpoints are read: a change counted later means they may be stale.
    let changes = store.endpoint_changes();
    let read_at = Instant::now();
    let mut endpoints: HashMap<&str, AccountEndpoints> = HashMap::new();
    let mut heads: BTreeMap<&str, i64> = BTreeMap::new();
    let mut rows = Vec::new();
    // What fits in memory now; only the deliverer frees room meanwhile.
    let mut room = handoff.room();
    // Per message (by its index in the batch), the first attempts going into memory.
    let mut handed: Vec<(usize, Vec<Prepared>)> = Vec::new();
    // Shards given first attempts as rows: their scans must look soon.
    let mut written: BTreeMap<&str, i64> = BTreeMap::new();
    let mut ingested = Ingested::default();
    for (index, (entry, claimed)) in batch.iter().zip(claims).enumerate() {
        let account_id = entry.message.account_id.as_str();
        let message = &entry.message.message;
        if claimed == Claimed::Elsewhere {
            ingested.duplicates += 1;
            continue;
        }
        ingested.appended += 1;
        let body = message.to_json();
        let head = heads.entry(account_id).or_insert(entry.seq);
        *head = (*head).max(entry.seq);
        // A replay of this seq (claimed Again) is handed over again too: whether its
        // deliveries were made before is what the log position knows, and it is
        // behind this message.
        let delivers = shards.holds(&entry.shard);
        if delivers && !endpoints.contains_key(account_id) {
            let read = store.endpoints(account_id).await?.into_iter().map(|(endpoint, state)| (endpoint, state, None)).collect();
            endpoints.insert(account_id, AccountEndpoints { endpoints: read });
        }
        let due_at = message.created_at.micros().min(now);
        let mut prepared_message = None;
        let mut in_memory = Vec::new();
        let account = endpoints.get_mut(account_id).filter(|_| delivers).map(|account| &mut account.endpoints);
        for (endpoint, state, prepared) in account.into_iter().flatten() {
            if !endpoint.enabled || state.disables(endpoint) || !endpoint.wants(message.kind) {
                continue;
            }
            let delivery =
                Delivery { account_id: account_id.to_owned(), endpoint_id: endpoint.id.clone(), message_id: message.id.clone(), seq: entry.seq, attempt: 1 };
            ingested.deliveries += 1;
            if room == 0 {
                // Past what memory holds: a row, due at once, which a scan finds.
                shards.prepare(store, &entry.shard, now).await?;
                rows.push(store.retry_row(&entry.shard, now, &delivery));
                written.insert(entry.shard.as_str(), now);
                ingested.written += 1;
                continue;
            }
            room -= 1;
            let endpoint = match prepared {
                Some(prepared) => prepared.clone(),
                None => {
                    let secrets = store.secrets(account_id, &endpoint.id).await?;
                    prepared.insert(Arc::new(PreparedEndpoint { endpoint: endpoint.clone(), secrets, read_at, changes })).clone()
                }
            };
            let message = prepared_message.get_or_insert_with(|| Arc::new(PreparedMessage::with_body(entry.seq, message, body.clone()))).clone();
            in_memory.push(Prepared { due: DueDelivery { shard: entry.shard.clone(), due_at, delivery }, message, endpoint });
        }
        if !in_memory.is_empty() {
            handed.push((index, in_memory));
        }
        rows.push(store.feed_row_with_body(account_id, entry.seq, body));
    }
    // The heads only once every row at or below them is written (in the same write
    // where a write lands all or nothing).
    let head_rows: Vec<_> = heads.iter().map(|(account_id, seq)| store.head_row(account_id, *seq)).collect();
    let writes = if store.writes_atomically() { vec![rows.into_iter().chain(head_rows).collect()] } else { vec![rows, head_rows] };
    for write in writes {
        if !write.is_empty() {
            store.write(write).await?;
        }
    }
    for (account_id, seq) in &heads {
        handoff.head_written(account_id, *seq);
    }
    for (shard, due_at) in &written {
        shards.lower(shard, *due_at);
    }
    // Registered before they are offered: a first attempt can settle as soon as it is.
    let ledger = handoff.ledger();
    let mut first_attempts = Vec::new();
    for (index, prepared) in handed {
        let entry = &batch[index];
        let ticket: Ticket = ledger.register(&entry.shard, entry.seq, prepared.len(), now);
        first_attempts.extend(prepared.into_iter().map(|Prepared { due, message, endpoint }| FirstAttempt { due, message, endpoint, ticket: ticket.clone() }));
    }
    let refused = handoff.offer(first_attempts);
    if !refused.is_empty() {
        // Room only grows between the count and the offer; should it not have, the
        // refused are written as rows like those past the count.
        write_as_rows(store, shards, handoff, refused, now).await?;
    }
    if !written.is_empty() {
        handoff.wake_scan();
    }
    stats.appended.fetch_add(ingested.appended as u64, Ordering::Relaxed);
    stats.duplicates.fetch_add(ingested.duplicates as u64, Ordering::Relaxed);
    stats.scheduled.fetch_add(ingested.deliveries as u64, Ordering::Relaxed);
    crate::metrics::record_messages("appended", ingested.appended as u64);
    crate::metrics::record_messages("duplicate", ingested.duplicates as u64);
    Ok(ingested)
}

/// Writes first attempts as rows of `webhook_retries`, due at `now`, then settles
/// them: their messages no longer hold the log position.
pub(crate) async fn write_as_rows(store: &WebhookStore, shards: &Shards, handoff: &Handoff, attempts: Vec<FirstAttempt>, now: i64) -> Result<(), StoreError> {
    let mut rows = Vec::with_capacity(attempts.len());
    for attempt in &attempts {
        shards.prepare(store, &attempt.due.shard, now).await?;
        rows.push(store.retry_row(&attempt.due.shard, now, &attempt.due.delivery));
    }
    store.write(rows).await?;
    for attempt in &attempts {
        shards.lower(&attempt.due.shard, now);
        handoff.ledger().settle(&attempt.ticket);
    }
    handoff.wake_scan();
    Ok(())
}
