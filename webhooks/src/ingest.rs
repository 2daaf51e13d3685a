//! From the message log to the feed and the deliverer, for one batch: its messages are
//! claimed (a duplicate at another seq is dropped), the feed rows and heads are
//! written, then the first attempt of each delivery (one per endpoint that wants the
//! message) is handed over to the deliverer in memory ([`crate::handoff`]), prepared,
//! and registered in the [`crate::handoff::Ledger`]. A first attempt has no row: the
//! message log is its queue, and the reader commits its position only up to the
//! messages whose first attempts are settled. Only those that do not fit in memory are
//! written as rows of `webhook_retries`, due at once, in the write of the feed rows,
//! once the batch has waited while the deliverer freed room for them
//! ([`Handoff::wait_for_room`]).
//!
//! A crash anywhere before the position covers a message reads it again: the same
//! claim (this seq's), the same feed row and head, and its first attempts handed over
//! again (made again if they were made before the crash, with the same `webhook-id`:
//! at least once).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use hyper::body::Bytes;
use recap_readmodel::messages::{AccountMessage, MessageKind};
use recap_readmodel::webhooks::{Claimed, Delivery, DueDelivery, EndpointRecord, EndpointState, SecretsRecord, WebhookStore};
use recap_readmodel::StoreError;
use recap_schemas::Timestamp;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::deliver::Shards;
use crate::handoff::{FirstAttempt, Handoff, Health, PreparedEndpoint, PreparedMessage, Ticket};
use crate::metrics::Stats;
use crate::signing::Signer;

/// One message as the log carries it: its seq in the account's feed (the outbox's
/// sequence, or the record's offset), the shard its deliveries go to, the account, what
/// the ingest needs of the message, and the message's JSON as the log carries it, which
/// is what the feed stores and the deliveries send.
#[derive(Clone, Debug, PartialEq)]
pub struct LogMessage {
    pub seq: i64,
    pub shard: String,
    pub account_id: String,
    pub id: String,
    pub kind: MessageKind,
    pub created_at: Timestamp,
    pub body: String,
}

/// A log record (`{"account_id", "message"}`), the message kept as the bytes it came as.
#[derive(Deserialize)]
struct LogRecord<'a> {
    #[serde(borrow)]
    account_id: Cow<'a, str>,
    #[serde(borrow)]
    message: &'a RawValue,
}

/// What the ingest reads of a message; `data` must be there, and is skipped unread.
#[derive(Deserialize)]
struct MessageHead<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: MessageKind,
    created_at: Timestamp,
    #[serde(rename = "data")]
    _data: IgnoredAny,
}

impl LogMessage {
    /// The message of `account_message`, its JSON made here.
    pub fn new(seq: i64, shard: impl Into<String>, account_message: &AccountMessage) -> LogMessage {
        let message = &account_message.message;
        LogMessage {
            seq,
            shard: shard.into(),
            account_id: account_message.account_id.clone(),
            id: message.id.clone(),
            kind: message.kind,
            created_at: message.created_at,
            body: message.to_json(),
        }
    }

    /// Decodes a log record (an outbox row's body, a topic record's value). The
    /// message's JSON is kept as the record carries it, not decoded into values and
    /// encoded again: the projector wrote it as [`recap_readmodel::messages::Message::to_json`]
    /// makes it, so the feed row and the deliveries carry the same bytes either way.
    pub fn decode(seq: i64, shard: impl Into<String>, record: &str) -> Result<LogMessage, StoreError> {
        let corrupt = |error: serde_json::Error| StoreError::Corrupt(format!("message log: {error}"));
        let LogRecord { account_id, message } = serde_json::from_str(record).map_err(corrupt)?;
        let head: MessageHead<'_> = serde_json::from_str(message.get()).map_err(corrupt)?;
        Ok(LogMessage {
            seq,
            shard: shard.into(),
            account_id: account_id.into_owned(),
            id: head.id.into_owned(),
            kind: head.kind,
            created_at: head.created_at,
            body: message.get().to_owned(),
        })
    }
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

/// An account's endpoints as the batch read them: each with its state and, when it
/// takes deliveries, its secrets, until a first attempt to it is prepared with them.
struct AccountEndpoints {
    endpoints: Vec<(EndpointRecord, EndpointState, Secrets)>,
}

/// An endpoint's secrets in a batch: read with the endpoint, then kept in the prepared
/// endpoint its first attempts share.
enum Secrets {
    /// Not read: the endpoint takes none of the batch's deliveries (disabled, failing for
    /// too long, or wanting none of the kinds the batch has for its account).
    Unread,
    Read(SecretsRecord),
    Prepared(Arc<PreparedEndpoint>),
}

/// Whether the endpoint takes a delivery of a message of `kind`: enabled, not disabled
/// for failing too long, and wanting the kind.
fn takes(endpoint: &EndpointRecord, state: &EndpointState, kind: MessageKind) -> bool {
    endpoint.enabled && !state.disables(endpoint) && endpoint.wants(kind)
}

/// How many accounts' endpoints a batch reads at once.
const ENDPOINT_READS: usize = 32;

/// The endpoints of the accounts (each with the kinds of its messages in the batch),
/// each with its state and, when it takes one of the batch's deliveries, its secrets:
/// the accounts read side by side, and within one the endpoints, then their states, then
/// the secrets, each side by side (on ScyllaDB three round trips an account, not one an
/// endpoint, a state and a secret, one after another).
async fn read_endpoints<'a>(store: &WebhookStore, accounts: Vec<(&'a str, Vec<MessageKind>)>) -> Result<HashMap<&'a str, AccountEndpoints>, StoreError> {
    use futures::{StreamExt, TryStreamExt};
    let reads: Vec<_> = accounts.into_iter().map(|(account_id, kinds)| read_account(store, account_id, kinds)).collect();
    futures::stream::iter(reads).buffer_unordered(ENDPOINT_READS).try_collect().await
}

async fn read_account<'a>(store: &WebhookStore, account_id: &'a str, kinds: Vec<MessageKind>) -> Result<(&'a str, AccountEndpoints), StoreError> {
    let endpoints = store.endpoints(account_id).await?;
    let kinds = &kinds;
    let secrets = futures::future::try_join_all(endpoints.iter().map(|(endpoint, state)| async move {
        if kinds.iter().any(|kind| takes(endpoint, state, *kind)) {
            store.secrets(account_id, &endpoint.id).await.map(Secrets::Read)
        } else {
            Ok(Secrets::Unread)
        }
    }))
    .await?;
    let endpoints = endpoints.into_iter().zip(secrets).map(|((endpoint, state), secrets)| (endpoint, state, secrets)).collect();
    Ok((account_id, AccountEndpoints { endpoints }))
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
    // A message the batch carries twice is claimed at its first seq (the claims of one
    // call are decided in their order).
    let pending: Vec<(&str, i64, &str)> = batch.iter().map(|entry| (entry.account_id.as_str(), entry.seq, entry.id.as_str())).collect();
    // Taken before the endpoints are read: a change counted later means they may be stale.
    let changes = store.endpoint_changes();
    let read_at = Instant::now();
    // The endpoints of the accounts whose deliveries are this process's, read beside the
    // claims: neither read depends on the other.
    // Whether each message's shard is held is asked once: its endpoints are read then.
    let delivers: Vec<bool> = batch.iter().map(|entry| shards.holds(&entry.shard)).collect();
    let mut kinds: BTreeMap<&str, Vec<MessageKind>> = BTreeMap::new();
    for (entry, _) in batch.iter().zip(&delivers).filter(|(_, delivers)| **delivers) {
        let account = kinds.entry(entry.account_id.as_str()).or_default();
        if !account.contains(&entry.kind) {
            account.push(entry.kind);
        }
    }
    let delivering: Vec<(&str, Vec<MessageKind>)> = kinds.into_iter().collect();
    // The claims are written with the feed rows, before the heads.
    let ((claims, claim_rows), mut endpoints) = futures::try_join!(store.claim_rows(&pending), read_endpoints(store, delivering))?;
    drop(pending);
    // Nothing is written yet: while the deliverer frees room for the batch's deliveries,
    // they are waited for, to go over in memory rather than as rows.
    let wanted: usize = batch
        .iter()
        .zip(&claims)
        .zip(&delivers)
        .filter(|((_, claimed), delivers)| **delivers && **claimed != Claimed::Elsewhere)
        .map(|((entry, _), _)| {
            endpoints
                .get(entry.account_id.as_str())
                .map_or(0, |account| account.endpoints.iter().filter(|(endpoint, state, _)| takes(endpoint, state, entry.kind)).count())
        })
        .sum();
    handoff.wait_for_room(wanted).await;
    let mut heads: BTreeMap<&str, i64> = BTreeMap::new();
    // Per account, the lowest seq appended: its feed floor (`floor_rows`).
    let mut floors: BTreeMap<&str, i64> = BTreeMap::new();
    let mut rows = claim_rows;
    // What goes over in memory: room taken now, so that a scan queuing rows while the
    // batch is written cannot take it (the batch would have to write rows after the
    // feed, a second write that may fail after some of its first attempts went over).
    let reservation = handoff.reserve(wanted);
    let mut room = reservation.count();
    // Per message (by its index in the batch), the first attempts going into memory.
    let mut handed: Vec<(usize, Vec<Prepared>)> = Vec::new();
    // Shards given first attempts as rows: their scans must look soon.
    let mut written: BTreeMap<&str, i64> = BTreeMap::new();
    let mut ingested = Ingested::default();
    for (index, (entry, claimed)) in batch.iter().zip(claims).enumerate() {
        let account_id = entry.account_id.as_str();
        if claimed == Claimed::Elsewhere {
            ingested.duplicates += 1;
            continue;
        }
        ingested.appended += 1;
        let head = heads.entry(account_id).or_insert(entry.seq);
        *head = (*head).max(entry.seq);
        let floor = floors.entry(account_id).or_insert(entry.seq);
        *floor = (*floor).min(entry.seq);
        // A replay of this seq (claimed Again) is handed over again too: whether its
        // deliveries were made before is what the log position knows, and it is
        // behind this message.
        let delivers = delivers[index];
        let due_at = entry.created_at.micros().min(now);
        let mut prepared_message = None;
        let mut in_memory = Vec::new();
        let account = endpoints.get_mut(account_id).filter(|_| delivers).map(|account| &mut account.endpoints);
        for (endpoint, state, secrets) in account.into_iter().flatten() {
            if !takes(endpoint, state, entry.kind) {
                continue;
            }
            let delivery = Delivery {
                account_id: account_id.to_owned(),
                endpoint_id: endpoint.id.clone(),
                endpoint_created_version: Some(endpoint.created_version),
                message_id: entry.id.clone(),
                seq: entry.seq,
                attempt: 1,
            };
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
            let endpoint = match std::mem::replace(secrets, Secrets::Unread) {
                Secrets::Prepared(prepared) => prepared,
                read => {
                    // Read with the endpoint, as every endpoint taking deliveries is.
                    let secrets = match read {
                        Secrets::Read(secrets) => secrets,
                        _ => store.secrets(account_id, &endpoint.id).await?,
                    };
                    Arc::new(PreparedEndpoint { endpoint: endpoint.clone(), signer: Signer::new(&secrets), health: Health::of(state), read_at, changes })
                }
            };
            *secrets = Secrets::Prepared(endpoint.clone());
            let message = prepared_message
                .get_or_insert_with(|| {
                    Arc::new(PreparedMessage { id: entry.id.clone(), kind: entry.kind, seq: entry.seq, body: Bytes::from(entry.body.clone()) })
                })
                .clone();
            in_memory.push(Prepared { due: DueDelivery { shard: entry.shard.clone(), due_at, delivery }, message, endpoint });
        }
        if !in_memory.is_empty() {
            handed.push((index, in_memory));
        }
        rows.push(store.feed_row_with_body(account_id, entry.seq, entry.body.clone()));
    }
    rows.extend(floors.iter().flat_map(|(account_id, seq)| store.floor_rows(account_id, *seq)));
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
    handoff.offer_reserved(reservation, first_attempts);
    if !written.is_empty() {
        handoff.wake_scan();
    }
    debug_assert_eq!(wanted, ingested.deliveries, "the wait for room counted the deliveries the batch made");
    stats.appended.fetch_add(ingested.appended as u64, Ordering::Relaxed);
    stats.duplicates.fetch_add(ingested.duplicates as u64, Ordering::Relaxed);
    stats.scheduled.fetch_add(ingested.deliveries as u64, Ordering::Relaxed);
    stats.written_as_rows.fetch_add(ingested.written as u64, Ordering::Relaxed);
    crate::metrics::record_messages("appended", ingested.appended as u64);
    crate::metrics::record_messages("duplicate", ingested.duplicates as u64);
    Ok(ingested)
}

#[cfg(test)]
mod tests {
    use recap_readmodel::messages::Message;

    use super::*;

    fn account_message() -> AccountMessage {
        let data = serde_json::json!({"meeting_id": "mtg_1", "meeting": {"id": "mtg_1", "title": "Caf\u{e9} \"weekly\"\n", "duration": 1.5, "count": 7, "tags": [], "series": null}});
        AccountMessage {
            account_id: "acc_1".into(),
            message: Message::new("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_1", Timestamp::parse("2026-11-20T09:00:00Z").unwrap(), data),
        }
    }

    #[test]
    fn a_decoded_log_record_keeps_the_message_json_the_projector_wrote_byte_for_byte() {
        let account_message = account_message();
        let record = serde_json::to_string(&account_message).unwrap();
        let decoded = LogMessage::decode(4, "2", &record).unwrap();
        assert_eq!(decoded, LogMessage::new(4, "2", &account_message), "the same as decoding it into values and encoding it again");
        assert_eq!(decoded.body, account_message.message.to_json());
        assert_eq!(
            (decoded.account_id.as_str(), decoded.id.as_str(), decoded.kind),
            ("acc_1", account_message.message.id.as_str(), MessageKind::MeetingCreated)
        );
    }

    #[test]
    fn a_log_record_without_data_or_with_an_unknown_type_is_corrupt() {
        let record = serde_json::to_value(account_message()).unwrap();
        let mut without_data = record.clone();
        without_data["message"].as_object_mut().unwrap().remove("data");
        let mut unknown_type = record.clone();
        unknown_type["message"]["type"] = "meeting.exploded".into();
        let mut bad_time = record;
        bad_time["message"]["created_at"] = "yesterday".into();
        for broken in [without_data, unknown_type, bad_time] {
            assert!(matches!(LogMessage::decode(1, "0", &broken.to_string()), Err(StoreError::Corrupt(_))), "{broken}");
        }
    }
}
