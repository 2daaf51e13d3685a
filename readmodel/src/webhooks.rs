//! Webhooks as typed records and operations: an account's endpoints and their signing
//! secrets (written by the projection from `webhook_endpoint.*` events), its feed of
//! messages, the pending deliveries, the attempts made and each endpoint's delivery
//! state. Callers see records; the storage rules stay here:
//!
//! - an endpoint's row and its secrets carry the endpoint's event version, so an older
//!   upsert never overrides a newer one, and a delete shadows both;
//! - the feed of an account is ordered by `seq`, a number that only grows within the
//!   account (the outbox's sequence in the embedded edition, the offset of the message in
//!   its `recap.messages.v1` partition in the distributed one, where an account's
//!   messages all travel in one partition);
//! - a message enters the feed once: its id is claimed by the first seq that carries
//!   it (`message_claims`, a claim holding the seq only, the feed row at that seq
//!   being the message, an account's claims of a day in one partition; read, then
//!   written if absent with the batch's feed rows, see [`WebhookStore::claim_rows`];
//!   `messages_by_id` held them before); a replay of the same seq finds its own claim and
//!   writes the same rows again, a duplicate at another seq (the projector replaying a
//!   batch) finds another's claim and is dropped;
//! - readers see the feed up to its head (`feed_heads`), which is written only once
//!   every row at or below it is: a row that lands late (CQL writes of one batch land in
//!   any order) is never skipped by a cursor that moved past it;
//! - a read without a cursor starts at the oldest message kept, not at the partition's
//!   start: `feed_hour_floors` keeps, per hour of writing and writer's retention, the
//!   lowest seq written ([`WebhookStore::floor_rows`]), so expired rows (tombstones
//!   until compaction on ScyllaDB) are not stepped over one by one;
//! - service-written rows (deliveries, attempts, endpoint states) carry wall-clock
//!   timestamps.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use recap_schemas::Timestamp;
use serde::{Deserialize, Serialize};

use crate::driver::{now_micros, Driver, Mutation, Op, Row, ScanRange, StoreError};
use crate::messages::{Message, MessageKind};
use crate::table::{Table, Val};
use crate::tables::{
    CLAIMS_SINCE_DAY, FEED, FEED_FLOORS, FEED_FLOOR_HOUR_US, FEED_HEADS, MESSAGES_BY_ID, MESSAGE_CLAIMS, WEBHOOK_ATTEMPTS, WEBHOOK_DELIVERIES,
    WEBHOOK_ENDPOINTS, WEBHOOK_ENDPOINT_STATES, WEBHOOK_PROGRESS, WEBHOOK_RETRIES, WEBHOOK_SECRETS, WEBHOOK_SHARDS,
};

/// The write time of a claim of `message_claims` for `seq`: it falls as the seq grows,
/// so that of two claims of one id the lowest seq stands (the stores keep the write
/// with the latest time). Far above any wall-clock or position time, below the
/// largest a store accepts.
pub fn claim_clock(seq: i64) -> i64 {
    CLAIM_CLOCK.saturating_sub(seq)
}

const CLAIM_CLOCK: i64 = 1 << 62;

/// Requests for claims in flight at once in [`WebhookStore::claim_ids`].
const CLAIM_READS: usize = 32;

/// Claims a scan of a day's claims reads at most for each id it looks for: others'
/// claims between a batch's ids are read too.
const CLAIM_SCAN_ROWS: usize = 4;

const DAY_MS: i64 = 86_400_000;

/// The day of a message id's time (its first 12 hex digits, milliseconds since the
/// Unix epoch, [`crate::messages::message_id`]): the partition of `message_claims` its
/// claim is in, beside the account. 0 for an id of another form.
pub fn claim_day(message_id: &str) -> i64 {
    claim_day_at(id_time_ms(message_id))
}

/// A message id's time: its first 12 hex digits, milliseconds since the Unix epoch; 0
/// for an id of another form.
fn id_time_ms(message_id: &str) -> i64 {
    let digits = message_id.strip_prefix("msg_").and_then(|rest| rest.get(..12)).filter(|hex| hex.bytes().all(|byte| byte.is_ascii_hexdigit()));
    digits.and_then(|hex| i64::from_str_radix(hex, 16).ok()).unwrap_or(0)
}

fn claim_day_at(milliseconds: i64) -> i64 {
    milliseconds.max(0) / DAY_MS
}

/// The partition of `message_claims` holding its marker, [`ClaimsSince`].
fn claims_marker_partition() -> [Val; 2] {
    [Val::text(""), Val::Int(CLAIMS_SINCE_DAY)]
}

/// How long after its first claim in `message_claims` a process of the version before
/// may still write claims to `messages_by_id` (a rolling upgrade's end).
const LEGACY_ROLL_US: i64 = 24 * 3_600_000_000;

/// How far past the clock of the process that claims it a message id's time may be
/// (the change's time is its producer's clock).
const ID_TIME_AHEAD_US: i64 = 24 * 3_600_000_000;

/// Where claims kept before `message_claims` may still be found ([`ClaimsSince`]).
#[derive(Clone, Copy, Debug)]
struct Legacy {
    until_us: i64,
    ids_until_ms: i64,
}

impl Legacy {
    /// Before any marker: anywhere.
    const UNKNOWN: Legacy = Legacy { until_us: i64::MAX, ids_until_ms: i64::MAX };

    /// Whether `messages_by_id` may hold a live claim of `message_id` now.
    fn may_hold(&self, message_id: &str) -> bool {
        now_micros() < self.until_us && id_time_ms(message_id) <= self.ids_until_ms
    }
}

/// How long a feed message, its id and an attempt are kept unless configured otherwise.
pub const DEFAULT_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// How long the secret an endpoint had before a rotation still signs its deliveries
/// (beside the new one), so that a receiver can switch over without dropping any.
pub const ROTATION_OVERLAP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// An endpoint as the account configured it, never its secret. The body of a
/// `webhook_endpoints` row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointRecord {
    pub id: String,
    pub url: String,
    #[serde(default)]
    pub description: Option<String>,
    /// The kinds it receives; empty for every kind.
    #[serde(default)]
    pub types: Vec<MessageKind>,
    /// Whether the account wants deliveries to it at all.
    pub enabled: bool,
    /// The version of the event that set it: a delivery state that disabled it names
    /// the version it disabled, so a newer upsert re-enables it.
    pub version: u64,
    /// The version of the upsert that created it: the first, or the first after a
    /// delete (0 when not recorded). Its delivery state, attempts and pending deliveries
    /// name it, so that an endpoint deleted and created again under the same id, a new
    /// endpoint, inherits none of the deleted one's.
    #[serde(default)]
    pub created_version: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl EndpointRecord {
    /// Whether the endpoint receives messages of `kind`.
    pub fn wants(&self, kind: MessageKind) -> bool {
        self.types.is_empty() || self.types.contains(&kind)
    }
}

/// One secret an endpoint's deliveries are signed with. Its `Debug` form leaves the
/// secret out, as the contract's `WebhookSecret` does: a value logged or recorded in a
/// span by mistake never carries it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningSecret {
    /// `whsec_` and the base64 of the key.
    pub secret: String,
    /// When it stops signing (a previous secret during a rotation); None for the current.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

impl SigningSecret {
    /// Whether a secret that stops signing at `expires_at` (None: the current one) signs
    /// a delivery made at `now`.
    pub fn signs(expires_at: Option<Timestamp>, now: Timestamp) -> bool {
        expires_at.is_none_or(|expires_at| expires_at > now)
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningSecret").field("secret", &"(redacted)").field("expires_at", &self.expires_at).finish()
    }
}

/// The secrets an endpoint signs with, current first. The body of a `webhook_secrets`
/// row; never served.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretsRecord {
    pub secrets: Vec<SigningSecret>,
}

impl SecretsRecord {
    /// The secrets that sign a delivery made at `now`: the current one and any previous
    /// one still in its overlap.
    pub fn signing_at(&self, now: Timestamp) -> Vec<&str> {
        self.secrets.iter().filter(|secret| SigningSecret::signs(secret.expires_at, now)).map(|secret| secret.secret.as_str()).collect()
    }
}

/// How deliveries to an endpoint are going. The body of a `webhook_endpoint_states`
/// row; absent for an endpoint nothing was attempted to yet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointState {
    /// The [`EndpointRecord::created_version`] of the endpoint it is the state of; None
    /// when not recorded (written before states named it): then of whichever endpoint
    /// has the id.
    #[serde(default)]
    pub endpoint_created_version: Option<u64>,
    /// Since when every attempt failed (None after a success).
    #[serde(default)]
    pub failing_since: Option<Timestamp>,
    /// The endpoint version that was disabled for failing too long: disabled while the
    /// endpoint is still at that version.
    #[serde(default)]
    pub disabled_version: Option<u64>,
    #[serde(default)]
    pub disabled_at: Option<Timestamp>,
    #[serde(default)]
    pub last_attempt_at: Option<Timestamp>,
    #[serde(default)]
    pub last_success_at: Option<Timestamp>,
}

impl EndpointState {
    /// Whether deliveries to `endpoint` are stopped because it failed for too long.
    pub fn disables(&self, endpoint: &EndpointRecord) -> bool {
        self.disabled_version == Some(endpoint.version)
    }

    /// `endpoint`'s state, from what its row holds: the row is kept under the
    /// endpoint's id, and a state of another endpoint of that id (one deleted before, or
    /// created after the record an attempt holds) is none of `endpoint`'s, which then
    /// has nothing attempted yet.
    pub fn of(self, endpoint: &EndpointRecord) -> EndpointState {
        let created = Some(endpoint.created_version);
        if endpoint.made(self.endpoint_created_version) {
            EndpointState { endpoint_created_version: created, ..self }
        } else {
            EndpointState { endpoint_created_version: created, ..EndpointState::default() }
        }
    }
}

impl EndpointRecord {
    /// Whether what names `created_version` (a state, an attempt, a delivery) is of this
    /// endpoint rather than another of its id; what names none (written before they
    /// named it) is of whichever endpoint has the id.
    pub fn made(&self, created_version: Option<u64>) -> bool {
        created_version.is_none_or(|created| created == self.created_version)
    }
}

/// What became of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// A 2xx answer.
    Succeeded,
    /// Any other answer.
    Failed,
    /// No complete answer in time.
    TimedOut,
    /// Not sent: the URL or the address it resolves to is not allowed, or the connection
    /// failed.
    Unreachable,
}

/// One delivery attempt, as `GET /v1/webhook-endpoints/{id}/attempts` lists it. The body
/// of a `webhook_attempts` row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub id: String,
    /// The [`EndpointRecord::created_version`] of the endpoint it was made to; None when
    /// not recorded (made before attempts named it).
    #[serde(default)]
    pub endpoint_created_version: Option<u64>,
    pub message_id: String,
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// 1 for the first attempt of the message to this endpoint.
    pub attempt: u32,
    pub attempted_at: Timestamp,
    pub outcome: AttemptOutcome,
    /// The HTTP status answered, when one was.
    #[serde(default)]
    pub status: Option<u16>,
    /// Why it failed, in words (never a secret, never the response body).
    #[serde(default)]
    pub error: Option<String>,
    pub duration_ms: u64,
    /// When it is tried again; None when it succeeded or was the last try.
    #[serde(default)]
    pub next_attempt_at: Option<Timestamp>,
}

/// A pending delivery of one message to one endpoint. The body of a `webhook_retries`
/// row, keyed by shard, minute, due time and [`Delivery::id`] (and of a row of
/// `webhook_deliveries`, the table before it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub account_id: String,
    pub endpoint_id: String,
    /// The [`EndpointRecord::created_version`] of the endpoint it is for: another
    /// endpoint of that id does not take it. None when not recorded (written before
    /// deliveries named it): it goes to the endpoint of that id, whichever it is.
    #[serde(default)]
    pub endpoint_created_version: Option<u64>,
    pub message_id: String,
    /// The message's seq in the account's feed.
    pub seq: i64,
    /// The attempt this row is due for (1 for the first).
    pub attempt: u32,
}

impl Delivery {
    /// The delivery's key within its shard and due time: the same message to the same
    /// endpoint always has the same one.
    pub fn id(&self) -> String {
        format!("{}\u{1f}{}\u{1f}{}", self.account_id, self.endpoint_id, self.message_id)
    }

    /// Whether `endpoint` is the one the delivery is for, not another of its id.
    pub fn is_for(&self, endpoint: &EndpointRecord) -> bool {
        endpoint.made(self.endpoint_created_version)
    }
}

/// A pending delivery as scanned: its shard, due time and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueDelivery {
    pub shard: String,
    pub due_at: i64,
    pub delivery: Delivery,
}

/// The `webhook_progress` partition of `delivery`: its id and the version that created
/// its endpoint (0 when the delivery does not name it), so that the retries of an
/// endpoint deleted and created again under its id never count as the new one's.
fn progress_partition(delivery: &Delivery) -> Vec<Val> {
    let version = delivery.endpoint_created_version.and_then(|version| i64::try_from(version).ok()).unwrap_or(0);
    vec![Val::text(delivery.id()), Val::Int(version)]
}

/// How far a delivery went (the body of its `webhook_progress` row): the furthest retry
/// made, and whether it delivered the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub attempt: u32,
    pub delivered: bool,
}

impl Progress {
    /// The row's write time: a further attempt outranks an earlier one, and a delivery
    /// the failure of the same attempt, whichever lands last.
    pub fn rank(self) -> i64 {
        2 * i64::from(self.attempt) + i64::from(self.delivered)
    }

    /// Whether a row scheduling `attempt` is left over: that attempt, or a later one,
    /// was made already, or the message was delivered.
    pub fn covers(self, attempt: u32) -> bool {
        self.delivered || self.attempt >= attempt
    }
}

/// What the store keeps of one shard's queue (the body of its `webhook_shards` row).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardState {
    /// The first minute of `webhook_retries` that may hold a row of the shard: every
    /// earlier one is past and was found empty, and nothing is written to a past
    /// minute, so no scan reads one again.
    pub low_minute: i64,
    /// Whether the shard's rows of `webhook_deliveries` were moved to `webhook_retries`.
    #[serde(default)]
    pub legacy_moved: bool,
}

/// What claiming a message's id for a seq found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// Claimed now: the message enters the feed at this seq.
    New,
    /// Held already by this very seq: an earlier run of the same batch (a replay).
    Again,
    /// Held by another seq: a duplicate, to drop.
    Elsewhere,
}

impl Claimed {
    /// Whether this seq holds the message (claimed now or before).
    pub fn holds(self) -> bool {
        self != Claimed::Elsewhere
    }
}

/// A page of an endpoint's attempts.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptsPage {
    /// Newest first.
    pub attempts: Vec<AttemptRecord>,
    /// The key (time, id) of the last row read, which a next page continues after: it
    /// may lie past the last attempt returned when others were passed over.
    pub last_read: Option<(i64, String)>,
    /// Whether more rows follow `last_read`.
    pub has_more: bool,
}

/// A page of an account's feed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeedPage {
    /// The messages, oldest first, each with its seq.
    pub messages: Vec<(i64, Message)>,
    /// The seq a next page continues after: the last one read, which may lie past the
    /// last message returned when a type filter passed over later ones.
    pub last_seq: Option<i64>,
    /// Whether the feed holds messages past `last_seq` (up to its head).
    pub has_more: bool,
}

/// A message's claim: the seq whose feed row is the message. (Claims written before
/// held the message too, which reads ignore.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Claim {
    seq: i64,
}

/// The marker of `message_claims`: since when claims are kept there (the first
/// claimer's clock), until when `messages_by_id`, where they were kept before, may
/// still hold one that is live (µs), and the latest id time (ms) a claim there may
/// have: processes of the version before claim only until the upgrade's roll ends, and
/// only changes that happened by then. Claims are looked for there too until then,
/// for ids of that time or earlier. A store that held no claim when the first claimer
/// looked needs no look: until = since.
#[derive(Serialize, Deserialize)]
struct ClaimsSince {
    since_us: i64,
    legacy_until_us: i64,
    legacy_ids_until_ms: i64,
}

#[derive(Serialize, Deserialize)]
struct Head {
    seq: i64,
}

/// A row of `feed_hour_floors`: the lowest seq written in its hour under its retention.
#[derive(Serialize, Deserialize)]
struct Floor {
    seq: i64,
}

/// The row of `feed_hour_floors` at this hour (and retention) says since when the
/// account's floors are kept: rows written before that have none.
const FLOORS_SINCE_KEY: i64 = 0;

/// How many floor rows a read takes to find the first hour still kept: the rows of one
/// hour are one a writer's retention, and an hour's writers rarely have more than one.
const FLOOR_ROWS_READ: usize = 8;

#[derive(Serialize, Deserialize)]
struct FloorsSince {
    since_us: i64,
    /// The retention of the writer that began the floors: rows written before them (by
    /// writers keeping no longer) are gone once it has passed since.
    retention_us: i64,
}

/// Most feed rows one page reads past, when a type filter skips them, before it answers
/// with what it has (and a cursor after the last row read).
pub const FEED_SCAN_BUDGET: usize = 1_000;

/// Most attempts of another endpoint of the same id (one deleted before) a page of an
/// endpoint's attempts reads past before it answers with what it has (and a cursor
/// after the last row read): such attempts stay until the retention ends them.
pub const ATTEMPT_SCAN_BUDGET: usize = 1_000;

fn decode<T: serde::de::DeserializeOwned>(table: &Table, body: &str) -> Result<T, StoreError> {
    serde_json::from_str(body).map_err(|error| StoreError::Corrupt(format!("{}: {error}", table.name)))
}

fn encode<T: Serialize>(value: &T) -> String {
    // Records hold strings, numbers, booleans, lists and objects only.
    serde_json::to_string(value).unwrap_or_default()
}

fn micros(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

/// Microseconds of due time in one partition of `webhook_retries`.
pub const RETRY_MINUTE: i64 = 60_000_000;

/// Partitions of `webhook_retries` a scan reads concurrently.
const MINUTES_READ_AT_ONCE: i64 = 16;

/// The minute (since the epoch) whose partition holds a delivery due at `due_at`.
pub fn minute_of(due_at: i64) -> i64 {
    due_at.div_euclid(RETRY_MINUTE)
}

/// When `minute` begins, in microseconds.
pub fn minute_start(minute: i64) -> i64 {
    minute.saturating_mul(RETRY_MINUTE)
}

fn retry_partition(shard: &str, minute: i64) -> [Val; 2] {
    [Val::text(shard), Val::Int(minute)]
}

fn due_range(from: i64, to: i64) -> ScanRange {
    ScanRange { start: Bound::Included(vec![Val::Int(from)]), end: Bound::Included(vec![Val::Int(to)]) }
}

fn decode_due(shard: &str, rows: Vec<Row>) -> Result<Vec<DueDelivery>, StoreError> {
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(due_at) = row.clustering.first().and_then(Val::as_int) else { continue };
        due.push(DueDelivery { shard: shard.to_owned(), due_at, delivery: decode(&WEBHOOK_RETRIES, &row.body)? });
    }
    Ok(due)
}

/// The webhooks' records in the read model's store.
#[derive(Clone)]
pub struct WebhookStore {
    driver: Arc<dyn Driver>,
    retention: std::time::Duration,
    /// Where `messages_by_id` may hold claims, once known.
    legacy_claims: Arc<std::sync::OnceLock<Legacy>>,
}

impl WebhookStore {
    pub fn new(driver: Arc<dyn Driver>, retention: std::time::Duration) -> WebhookStore {
        WebhookStore { driver, retention, legacy_claims: Arc::default() }
    }

    pub fn retention(&self) -> std::time::Duration {
        self.retention
    }

    // ---- endpoints ----------------------------------------------------------------

    /// The change counts of the endpoint and secret tables, where the store keeps them
    /// ([`Driver::change_count`]): while they stay the same, no endpoint was written.
    pub fn endpoint_changes(&self) -> Option<(u64, u64)> {
        Some((self.driver.change_count(&WEBHOOK_ENDPOINTS)?, self.driver.change_count(&WEBHOOK_SECRETS)?))
    }

    /// Whether one [`WebhookStore::write`] lands all or nothing ([`Driver::writes_atomically`]).
    pub fn writes_atomically(&self) -> bool {
        self.driver.writes_atomically()
    }

    /// The account's endpoints, by id, each with its delivery state (the states read
    /// side by side: one round trip on ScyllaDB, not one an endpoint).
    pub async fn endpoints(&self, account_id: &str) -> Result<Vec<(EndpointRecord, EndpointState)>, StoreError> {
        let rows = self.driver.scan(&WEBHOOK_ENDPOINTS, &[Val::text(account_id)], &ScanRange::all(), usize::MAX).await?;
        let endpoints = rows.iter().map(|row| decode::<EndpointRecord>(&WEBHOOK_ENDPOINTS, &row.body)).collect::<Result<Vec<_>, _>>()?;
        let states = futures::future::try_join_all(endpoints.iter().map(|endpoint| self.endpoint_state(account_id, &endpoint.id))).await?;
        Ok(endpoints
            .into_iter()
            .zip(states)
            .map(|(endpoint, state)| {
                let state = state.of(&endpoint);
                (endpoint, state)
            })
            .collect())
    }

    /// One endpoint of the account, with its delivery state.
    pub async fn endpoint(&self, account_id: &str, endpoint_id: &str) -> Result<Option<(EndpointRecord, EndpointState)>, StoreError> {
        let Some(endpoint) = self.endpoint_record(account_id, endpoint_id).await? else { return Ok(None) };
        let state = self.endpoint_state(account_id, endpoint_id).await?.of(&endpoint);
        Ok(Some((endpoint, state)))
    }

    /// One endpoint of the account, without its state.
    pub async fn endpoint_record(&self, account_id: &str, endpoint_id: &str) -> Result<Option<EndpointRecord>, StoreError> {
        let Some(row) = self.driver.get(&WEBHOOK_ENDPOINTS, &[Val::text(account_id)], &[Val::text(endpoint_id)]).await? else { return Ok(None) };
        decode(&WEBHOOK_ENDPOINTS, &row.body).map(Some)
    }

    /// The secrets the endpoint signs with (empty when it has none or is deleted).
    pub async fn secrets(&self, account_id: &str, endpoint_id: &str) -> Result<SecretsRecord, StoreError> {
        let row = self.driver.get(&WEBHOOK_SECRETS, &[Val::text(account_id), Val::text(endpoint_id)], &[]).await?;
        row.map(|row| decode(&WEBHOOK_SECRETS, &row.body)).transpose().map(Option::unwrap_or_default)
    }

    /// What the state row of the endpoint's id holds, whichever endpoint of that id it
    /// is of ([`EndpointState::of`] takes it for one).
    pub async fn endpoint_state(&self, account_id: &str, endpoint_id: &str) -> Result<EndpointState, StoreError> {
        let row = self.driver.get(&WEBHOOK_ENDPOINT_STATES, &[Val::text(account_id), Val::text(endpoint_id)], &[]).await?;
        row.map(|row| decode(&WEBHOOK_ENDPOINT_STATES, &row.body)).transpose().map(Option::unwrap_or_default)
    }

    pub async fn save_endpoint_state(&self, account_id: &str, endpoint_id: &str, state: &EndpointState) -> Result<(), StoreError> {
        self.driver.write(vec![self.endpoint_state_row(account_id, endpoint_id, state, now_micros())]).await
    }

    /// The row of an endpoint's delivery state, written at `ts` (the newest wins).
    pub fn endpoint_state_row(&self, account_id: &str, endpoint_id: &str, state: &EndpointState, ts: i64) -> Mutation {
        Mutation {
            table: &WEBHOOK_ENDPOINT_STATES,
            partition: vec![Val::text(account_id), Val::text(endpoint_id)],
            clustering: vec![],
            op: Op::Put { body: encode(state), expires_at: None },
            ts,
        }
    }

    // ---- the feed -----------------------------------------------------------------

    /// Claims `message`'s id for `seq` in the account's feed: true when this seq holds
    /// it (claimed now, or by an earlier run of the same seq), false when another seq
    /// carried it first (a duplicate, to drop).
    pub async fn claim(&self, account_id: &str, seq: i64, message: &Message) -> Result<bool, StoreError> {
        Ok(self.claim_many(&[(account_id, seq, message)]).await?.first().is_some_and(|claimed| claimed.holds()))
    }

    /// [`WebhookStore::claim`] of each `(account id, seq, message)`, told in their
    /// order (and whether this seq held it before: a replay), with one write for the
    /// claims made (one commit on the embedded store). Of two seqs of one id in one
    /// call, the first in the call is decided first.
    pub async fn claim_many(&self, claims: &[(&str, i64, &Message)]) -> Result<Vec<Claimed>, StoreError> {
        let claims: Vec<(&str, i64, &str)> = claims.iter().map(|(account_id, seq, message)| (*account_id, *seq, message.id.as_str())).collect();
        self.claim_ids(&claims).await
    }

    /// [`WebhookStore::claim_many`] of `(account id, seq, message id)`. A claim holds
    /// the seq only: the message itself is the feed row at that seq.
    ///
    /// Each id's claim is read, then the claims of the ids no seq holds are written in
    /// one plain write: no conditional write (a lightweight transaction a message on
    /// ScyllaDB, a Paxos round that cost several times the rest of the message's
    /// writes). That is enough because an account's messages are read in seq order by
    /// one reader at a time (the outbox; the account's partition of the message topic):
    /// a duplicate's later seq is claimed only after its earlier one was written and
    /// acknowledged, so its read finds the earlier claim; two holders of a partition
    /// for the moment of a rebalance each read it in order from the committed offset,
    /// so they make the same claims. Whatever order claims of one id land in, their
    /// write time ([`claim_clock`]) makes the lowest seq the one that stands.
    pub async fn claim_ids(&self, claims: &[(&str, i64, &str)]) -> Result<Vec<Claimed>, StoreError> {
        let (told, writes) = self.claim_rows(claims).await?;
        if !writes.is_empty() {
            self.driver.write(writes).await?;
        }
        Ok(told)
    }

    /// What [`WebhookStore::claim_ids`] decides, and the claim rows it would write,
    /// which the caller writes instead, with the other rows of its batch (in the same
    /// commit on the embedded store). The claims hold once those rows are written and
    /// acknowledged, before the next claims of the same account are read.
    pub async fn claim_rows(&self, claims: &[(&str, i64, &str)]) -> Result<(Vec<Claimed>, Vec<Mutation>), StoreError> {
        let (holders, marker) = self.claims_held(claims).await?;
        let expires_at = Some(now_micros().saturating_add(micros(self.retention)));
        let (mut told, mut writes) = (Vec::with_capacity(claims.len()), Vec::new());
        let mut claimed_now: HashMap<(&str, &str), i64> = HashMap::new();
        for ((account_id, seq, message_id), holder) in claims.iter().zip(holders) {
            let holder = holder.or_else(|| claimed_now.get(&(*account_id, *message_id)).copied());
            told.push(match holder {
                Some(holder) if holder == *seq => Claimed::Again,
                Some(_) => Claimed::Elsewhere,
                None => {
                    claimed_now.insert((account_id, message_id), *seq);
                    writes.push(Mutation {
                        table: &MESSAGE_CLAIMS,
                        partition: vec![Val::text(*account_id), Val::Int(claim_day(message_id))],
                        clustering: vec![Val::text(*message_id)],
                        op: Op::Put { body: format!("{{\"seq\":{seq}}}"), expires_at },
                        ts: claim_clock(*seq),
                    });
                    Claimed::New
                }
            });
        }
        if !writes.is_empty() {
            // With the first claims kept in `message_claims`.
            writes.extend(marker);
        }
        Ok((told, writes))
    }

    /// The seq holding each claim of `claims`, and the marker row to write with the
    /// claims when none is known to stand ([`ClaimsSince`]). The claims of an account
    /// on one day are one partition of `message_claims`, in id order: a batch's are
    /// read in one request an account and day ([`WebhookStore::day_claims`]). Ids no
    /// claim holds there are looked for in `messages_by_id` while it may hold claims.
    async fn claims_held(&self, claims: &[(&str, i64, &str)]) -> Result<(Vec<Option<i64>>, Option<Mutation>), StoreError> {
        use futures::{StreamExt, TryStreamExt};
        // Per account and day, the indexes of its claims in `claims`.
        let mut days: BTreeMap<(&str, i64), Vec<usize>> = BTreeMap::new();
        for (index, (account_id, _, message_id)) in claims.iter().enumerate() {
            days.entry((*account_id, claim_day(message_id))).or_default().push(index);
        }
        let days: Vec<((&str, i64), Vec<usize>)> = days.into_iter().collect();
        // Claims expire a retention after they are written, which is after their
        // change: a day after the one a retention ago holds no expired claim.
        let kept_since = claim_day_at(now_micros().saturating_sub(micros(self.retention)) / 1_000) + 1;
        // Collected first: a lazy iterator's closure held across the await would make
        // the future `Send` for one lifetime only.
        let reads: Vec<_> = days
            .iter()
            .map(|((account_id, day), indexes)| self.day_claims(account_id, *day, indexes.iter().map(|index| claims[*index].2).collect(), *day >= kept_since))
            .collect();
        let found = futures::stream::iter(reads).buffered(CLAIM_READS).try_collect::<Vec<Vec<Option<i64>>>>();
        let (found, (legacy, marker)) = futures::try_join!(found, self.legacy_claims())?;
        let mut holders: Vec<Option<i64>> = vec![None; claims.len()];
        for ((_, indexes), seqs) in days.iter().zip(found) {
            for (index, seq) in indexes.iter().zip(seqs) {
                holders[*index] = seq;
            }
        }
        let missing: Vec<usize> = (0..claims.len()).filter(|index| holders[*index].is_none() && legacy.may_hold(claims[*index].2)).collect();
        if !missing.is_empty() {
            let reads: Vec<_> = missing.iter().map(|index| self.legacy_claim(claims[*index].0, claims[*index].2)).collect();
            let legacy: Vec<Option<i64>> = futures::stream::iter(reads).buffered(CLAIM_READS).try_collect().await?;
            for (index, seq) in missing.into_iter().zip(legacy) {
                holders[index] = seq;
            }
        }
        Ok((holders, marker))
    }

    /// The seqs holding the claims of `ids` (of one account and day), in their order.
    /// Ids are made in the order of their changes, so a batch's ids of a day are close
    /// together: when `scan` (a day holding no expired claim) they are read by one scan
    /// from the lowest to the highest, which returns others' claims between them too,
    /// up to [`CLAIM_SCAN_ROWS`] an id looked for; the ids past the last row it read
    /// when it read that many, and every id of a day that may hold expired claims (a
    /// range would step over them), are read by their keys in one request
    /// ([`Driver::get_many`]), which costs the store more than a scan of as many rows.
    async fn day_claims(&self, account_id: &str, day: i64, ids: Vec<&str>, scan: bool) -> Result<Vec<Option<i64>>, StoreError> {
        let partition = [Val::text(account_id), Val::Int(day)];
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        let mut held: HashMap<&str, i64> = HashMap::new();
        let mut unread: &[&str] = &sorted;
        if scan && sorted.len() > 1 {
            let limit = sorted.len().saturating_mul(CLAIM_SCAN_ROWS);
            let range = ScanRange { start: Bound::Included(vec![Val::text(sorted[0])]), end: Bound::Included(vec![Val::text(sorted[sorted.len() - 1])]) };
            let rows = self.driver.scan(&MESSAGE_CLAIMS, &partition, &range, limit).await?;
            let key = |row: &Row| row.clustering.first().and_then(Val::as_text).map(str::to_owned);
            // Every claim up to the last row read is known; past it only when the scan
            // ended before its limit.
            let known_to = if rows.len() < limit { None } else { rows.last().and_then(key) };
            for row in &rows {
                if let Some(id) = row.clustering.first().and_then(Val::as_text).and_then(|key| sorted.binary_search(&key).ok().map(|at| sorted[at])) {
                    held.insert(id, decode::<Claim>(&MESSAGE_CLAIMS, &row.body)?.seq);
                }
            }
            unread = match known_to {
                None => &[],
                Some(last) => &sorted[sorted.partition_point(|id| *id <= last.as_str())..],
            };
        }
        if !unread.is_empty() {
            let keys: Vec<Vec<Val>> = unread.iter().map(|id| vec![Val::text(*id)]).collect();
            for (id, row) in unread.iter().zip(self.driver.get_many(&MESSAGE_CLAIMS, &partition, &keys).await?) {
                if let Some(row) = row {
                    held.insert(id, decode::<Claim>(&MESSAGE_CLAIMS, &row.body)?.seq);
                }
            }
        }
        Ok(ids.iter().map(|id| held.get(id).copied()).collect())
    }

    /// The seq that claimed the account's message, while the claim is kept.
    async fn claimed_seq(&self, account_id: &str, message_id: &str) -> Result<Option<i64>, StoreError> {
        let partition = [Val::text(account_id), Val::Int(claim_day(message_id))];
        if let Some(row) = self.driver.get(&MESSAGE_CLAIMS, &partition, &[Val::text(message_id)]).await? {
            return Ok(Some(decode::<Claim>(&MESSAGE_CLAIMS, &row.body)?.seq));
        }
        if self.claims_marker().await?.unwrap_or(Legacy::UNKNOWN).may_hold(message_id) {
            return self.legacy_claim(account_id, message_id).await;
        }
        Ok(None)
    }

    /// A claim written to `messages_by_id`, before claims were kept in `message_claims`.
    async fn legacy_claim(&self, account_id: &str, message_id: &str) -> Result<Option<i64>, StoreError> {
        let Some(row) = self.driver.get(&MESSAGES_BY_ID, &[Val::text(account_id), Val::text(message_id)], &[]).await? else { return Ok(None) };
        Ok(Some(decode::<Claim>(&MESSAGES_BY_ID, &row.body)?.seq))
    }

    /// The marker of `message_claims` ([`ClaimsSince`]), kept once read: a process
    /// reads it until it finds one, then never again. Without one, a reader looks in
    /// `messages_by_id` for every id ([`Legacy::UNKNOWN`]).
    async fn claims_marker(&self) -> Result<Option<Legacy>, StoreError> {
        if let Some(legacy) = self.legacy_claims.get() {
            return Ok(Some(*legacy));
        }
        let Some(row) = self.driver.get(&MESSAGE_CLAIMS, &claims_marker_partition(), &[Val::text("")]).await? else { return Ok(None) };
        let since: ClaimsSince = decode(&MESSAGE_CLAIMS, &row.body)?;
        Ok(Some(*self.legacy_claims.get_or_init(|| Legacy { until_us: since.legacy_until_us, ids_until_ms: since.legacy_ids_until_ms })))
    }

    /// Where `messages_by_id` may hold a live claim, for a claimer, and the marker to
    /// write with its claims when none is written yet (of two, the earliest stands):
    /// since now; when `messages_by_id` holds a row ([`Driver::holds_rows`]; an error is
    /// taken as a row, as the fallback costs reads, never a duplicate), until a
    /// retention and the roll from now, for ids of changes up to the roll's end (and
    /// how far ahead an id's time may be); else until now.
    async fn legacy_claims(&self) -> Result<(Legacy, Option<Mutation>), StoreError> {
        if let Some(legacy) = self.claims_marker().await? {
            return Ok((legacy, None));
        }
        let now = now_micros();
        let held = self.driver.holds_rows(&MESSAGES_BY_ID).await.unwrap_or(true);
        let legacy = match held {
            true => Legacy {
                until_us: now.saturating_add(micros(self.retention)).saturating_add(LEGACY_ROLL_US),
                ids_until_ms: now.saturating_add(LEGACY_ROLL_US).saturating_add(ID_TIME_AHEAD_US) / 1_000,
            },
            false => Legacy { until_us: now, ids_until_ms: 0 },
        };
        let since = ClaimsSince { since_us: now, legacy_until_us: legacy.until_us, legacy_ids_until_ms: legacy.ids_until_ms };
        let marker = Mutation {
            table: &MESSAGE_CLAIMS,
            partition: claims_marker_partition().to_vec(),
            clustering: vec![Val::text("")],
            op: Op::Put { body: encode(&since), expires_at: None },
            ts: claim_clock(now),
        };
        Ok((legacy, Some(marker)))
    }

    /// The feed row of a claimed message, to write with the other rows of its batch.
    pub fn feed_row(&self, account_id: &str, seq: i64, message: &Message) -> Mutation {
        self.feed_row_with_body(account_id, seq, message.to_json())
    }

    /// [`WebhookStore::feed_row`] of a message whose JSON ([`Message::to_json`]) is made.
    pub fn feed_row_with_body(&self, account_id: &str, seq: i64, body: String) -> Mutation {
        let expires_at = Some(now_micros().saturating_add(micros(self.retention)));
        Mutation { table: &FEED, partition: vec![Val::text(account_id)], clustering: vec![Val::Int(seq)], op: Op::Put { body, expires_at }, ts: seq }
    }

    /// The account's feed head at `seq`: written once every feed row at or below it is.
    pub fn head_row(&self, account_id: &str, seq: i64) -> Mutation {
        Mutation {
            table: &FEED_HEADS,
            partition: vec![Val::text(account_id)],
            clustering: vec![],
            op: Op::Put { body: encode(&Head { seq }), expires_at: None },
            ts: seq,
        }
    }

    /// The rows to write with a batch's feed rows of the account, `lowest_seq` the lowest
    /// of them: the floor of the hour they are written in under this writer's retention
    /// (of two writes of one hour and retention, the lowest seq stands; writers keeping
    /// for different times keep floors apart, each as long as its rows and an hour), and
    /// since when the account's floors are kept, with this writer's retention (the
    /// earliest write stands; kept for good).
    pub fn floor_rows(&self, account_id: &str, lowest_seq: i64) -> [Mutation; 2] {
        self.floor_rows_since(account_id, lowest_seq, now_micros())
    }

    /// [`WebhookStore::floor_rows`], the floors said to be kept since `since_us` (an
    /// earlier time than now for a store whose feed is seeded, as a benchmark seeds it).
    pub fn floor_rows_since(&self, account_id: &str, lowest_seq: i64, since_us: i64) -> [Mutation; 2] {
        let now = now_micros();
        let retention_us = micros(self.retention);
        let hour = now - now.rem_euclid(FEED_FLOOR_HOUR_US);
        let expires_at = Some(now.saturating_add(retention_us).saturating_add(FEED_FLOOR_HOUR_US));
        let floor = |clustering: [i64; 2], body: String, expires_at: Option<i64>, ts: i64| Mutation {
            table: &FEED_FLOORS,
            partition: vec![Val::text(account_id)],
            clustering: clustering.into_iter().map(Val::Int).collect(),
            op: Op::Put { body, expires_at },
            ts,
        };
        [
            floor([hour, retention_us], encode(&Floor { seq: lowest_seq }), expires_at, claim_clock(lowest_seq)),
            floor([FLOORS_SINCE_KEY, 0], encode(&FloorsSince { since_us, retention_us }), None, claim_clock(since_us)),
        ]
    }

    /// The seq a read of the account's feed without a cursor starts after: just below
    /// the lowest floor of the first hour with one still kept (a floor outlives the rows
    /// it stands for, by the retention their writer had), once every row written before
    /// the floors began has expired; `None` (the partition's start) before that, or when
    /// the account has no floors. The reader's own retention plays no part: the writers'
    /// decided the rows'. The expired floors before the first kept one are one an hour
    /// (and retention): on ScyllaDB, a few hundred tombstones at most until compaction.
    async fn feed_start(&self, account_id: &str) -> Result<Option<i64>, StoreError> {
        let partition = [Val::text(account_id)];
        let since = self.driver.get(&FEED_FLOORS, &partition, &[Val::Int(FLOORS_SINCE_KEY), Val::Int(0)]);
        let hours = ScanRange { start: Bound::Excluded(vec![Val::Int(FLOORS_SINCE_KEY)]), end: Bound::Unbounded };
        let first = self.driver.scan(&FEED_FLOORS, &partition, &hours, FLOOR_ROWS_READ);
        let (since, first) = futures::try_join!(since, first)?;
        let Some(since) = since else { return Ok(None) };
        let since: FloorsSince = decode(&FEED_FLOORS, &since.body)?;
        if since.since_us.saturating_add(since.retention_us) > now_micros() {
            return Ok(None);
        }
        let Some(first_hour) = first.first().and_then(|row| row.clustering.first()).and_then(Val::as_int) else {
            // No floor kept: nothing written is kept either.
            return Ok(Some(i64::MAX));
        };
        let mut lowest = i64::MAX;
        for row in first.iter().filter(|row| row.clustering.first().and_then(Val::as_int) == Some(first_hour)) {
            lowest = lowest.min(decode::<Floor>(&FEED_FLOORS, &row.body)?.seq);
        }
        Ok(Some(lowest.saturating_sub(1)))
    }

    /// The last seq of the account's feed readers may see; None for an empty feed.
    pub async fn head(&self, account_id: &str) -> Result<Option<i64>, StoreError> {
        let row = self.driver.get(&FEED_HEADS, &[Val::text(account_id)], &[]).await?;
        Ok(row.map(|row| decode::<Head>(&FEED_HEADS, &row.body)).transpose()?.map(|head| head.seq))
    }

    /// Up to `limit` messages of the account's feed after `after_seq`, oldest first, of
    /// `types` (every kind when empty), never past the head. Reads at most
    /// [`FEED_SCAN_BUDGET`] rows past those it returns.
    pub async fn feed_page(&self, account_id: &str, after_seq: Option<i64>, limit: usize, types: &[MessageKind]) -> Result<FeedPage, StoreError> {
        let (head, start) = match after_seq {
            Some(_) => (self.head(account_id).await?, None),
            None => futures::try_join!(self.head(account_id), self.feed_start(account_id))?,
        };
        let Some(head) = head else { return Ok(FeedPage::default()) };
        let partition = [Val::text(account_id)];
        let mut page = FeedPage { last_seq: after_seq, ..FeedPage::default() };
        let mut budget = FEED_SCAN_BUDGET;
        // Where the scan goes on after: the cursor, else the floor, else the start.
        let mut read_after = after_seq.or(start);
        loop {
            if read_after.is_some_and(|seq| seq >= head) {
                return Ok(page);
            }
            let cursor = read_after.map(|seq| vec![Val::Int(seq)]);
            let wanted = (limit - page.messages.len()).min(budget) + 1;
            let rows = self.driver.scan(&FEED, &partition, &ScanRange::after(cursor.as_deref()), wanted).await?;
            let exhausted = rows.len() < wanted;
            for row in rows {
                let Some(seq) = row.clustering.first().and_then(Val::as_int) else { continue };
                if seq > head {
                    return Ok(page);
                }
                if page.messages.len() == limit || budget == 0 {
                    page.has_more = true;
                    return Ok(page);
                }
                let message: Message = decode(&FEED, &row.body)?;
                page.last_seq = Some(seq);
                read_after = Some(seq);
                if types.is_empty() || types.contains(&message.kind) {
                    page.messages.push((seq, message));
                } else {
                    budget -= 1;
                }
            }
            if exhausted {
                return Ok(page);
            }
        }
    }

    /// One message of the account's feed by id, while it is kept and once its seq is
    /// within the head: its claim names the seq, the feed row at that seq is the message.
    pub async fn message(&self, account_id: &str, message_id: &str) -> Result<Option<(i64, Message)>, StoreError> {
        let Some(seq) = self.claimed_seq(account_id, message_id).await? else { return Ok(None) };
        if self.head(account_id).await?.is_none_or(|head| seq > head) {
            return Ok(None);
        }
        Ok(self.feed_message(account_id, seq).await?.map(|(message, _)| (seq, message)))
    }

    /// The message at `seq` of the account's feed, with its JSON as stored (what a
    /// delivery sends), whether or not the head covers it yet (the deliverer waits for
    /// the head itself); None once it expired.
    pub async fn feed_message(&self, account_id: &str, seq: i64) -> Result<Option<(Message, String)>, StoreError> {
        let Some(row) = self.driver.get(&FEED, &[Val::text(account_id)], &[Val::Int(seq)]).await? else { return Ok(None) };
        Ok(Some((decode(&FEED, &row.body)?, row.body)))
    }

    // ---- deliveries and attempts --------------------------------------------------

    /// The row that schedules `delivery` in `shard` at `due_at` (microseconds), in the
    /// partition of its minute. It expires after the feed's retention from then: its
    /// message is gone by that time, and so an old minute's partition disappears even
    /// should a row of it never be removed.
    pub fn retry_row(&self, shard: &str, due_at: i64, delivery: &Delivery) -> Mutation {
        Mutation {
            table: &WEBHOOK_RETRIES,
            partition: vec![Val::text(shard), Val::Int(minute_of(due_at))],
            clustering: vec![Val::Int(due_at), Val::text(delivery.id())],
            op: Op::Put { body: encode(delivery), expires_at: Some(due_at.max(now_micros()).saturating_add(micros(self.retention))) },
            ts: now_micros(),
        }
    }

    /// The removal of a scheduled delivery (done, or moved to another due time): gone
    /// outright on the embedded store, a tombstone on ScyllaDB, in a minute no scan
    /// reads once it is past.
    pub fn retry_done_row(&self, due: &DueDelivery) -> Mutation {
        Mutation {
            table: &WEBHOOK_RETRIES,
            partition: vec![Val::text(&due.shard), Val::Int(minute_of(due.due_at))],
            clustering: vec![Val::Int(due.due_at), Val::text(due.delivery.id())],
            op: Op::Purge,
            ts: now_micros(),
        }
    }

    /// The row that says `delivery` made its attempt `delivery.attempt` (a retry), and
    /// whether it was delivered. Written after the attempt's record and its next retry
    /// row (in the same write where writes are atomic), so a retry row whose attempt it
    /// covers has nothing left to do ([`WebhookStore::progress`]).
    pub fn progress_row(&self, delivery: &Delivery, delivered: bool) -> Mutation {
        let progress = Progress { attempt: delivery.attempt, delivered };
        Mutation {
            table: &WEBHOOK_PROGRESS,
            partition: progress_partition(delivery),
            clustering: vec![],
            op: Op::Put { body: encode(&progress), expires_at: Some(now_micros().saturating_add(micros(self.retention))) },
            ts: progress.rank(),
        }
    }

    /// How far `delivery` went: its furthest retry made, None when it made none (or the
    /// row expired).
    pub async fn progress(&self, delivery: &Delivery) -> Result<Option<Progress>, StoreError> {
        match self.driver.get(&WEBHOOK_PROGRESS, &progress_partition(delivery), &[]).await? {
            Some(row) => Ok(Some(decode(&WEBHOOK_PROGRESS, &row.body)?)),
            None => Ok(None),
        }
    }

    /// Up to `limit` deliveries of `shard` due from `from` to `to` (microseconds, both
    /// included), soonest first: the minutes' partitions are read in order, each from
    /// `from` on, [`MINUTES_READ_AT_ONCE`] at a time (a scan after a long stop, or of a
    /// shard newly held, spans hours of mostly empty minutes), until `limit` rows are
    /// found.
    pub async fn due_between(&self, shard: &str, from: i64, to: i64, limit: usize) -> Result<Vec<DueDelivery>, StoreError> {
        use futures::{StreamExt, TryStreamExt};
        let mut due = Vec::new();
        let mut minute = minute_of(from);
        let last = minute_of(to);
        while minute <= last && due.len() < limit {
            let until = (minute + MINUTES_READ_AT_ONCE - 1).min(last);
            let wanted = limit - due.len();
            let range = due_range(from, to);
            let reads = (minute..=until).map(|read| {
                let range = range.clone();
                async move { self.driver.scan(&WEBHOOK_RETRIES, &retry_partition(shard, read), &range, wanted).await }
            });
            let pages: Vec<Vec<Row>> = futures::stream::iter(reads).buffered(MINUTES_READ_AT_ONCE as usize).try_collect().await?;
            for rows in pages {
                let left = limit - due.len();
                due.extend(decode_due(shard, rows.into_iter().take(left).collect())?);
            }
            minute = until + 1;
        }
        Ok(due)
    }

    /// Every delivery of `shard` scheduled from `from` to `to`, soonest first (tests and
    /// tools: a span of days is thousands of partitions, read as [`Self::due_between`]
    /// reads them).
    pub async fn scheduled(&self, shard: &str, from: i64, to: i64) -> Result<Vec<DueDelivery>, StoreError> {
        self.due_between(shard, from, to, usize::MAX).await
    }

    /// Whether the partition of `shard`'s `minute` holds no delivery.
    pub async fn minute_is_empty(&self, shard: &str, minute: i64) -> Result<bool, StoreError> {
        Ok(self.driver.scan(&WEBHOOK_RETRIES, &retry_partition(shard, minute), &ScanRange::all(), 1).await?.is_empty())
    }

    /// How many deliveries of `shard` are due from `from` to `to`, and the soonest's
    /// due time (the queue figures).
    pub async fn count_due(&self, shard: &str, from: i64, to: i64) -> Result<(usize, Option<i64>), StoreError> {
        use futures::{StreamExt, TryStreamExt};
        let range = due_range(from, to);
        // In minute order, several at once, as `due_between` reads them.
        let reads = (minute_of(from)..=minute_of(to)).map(|minute| {
            let range = range.clone();
            async move { self.driver.scan_counted(&WEBHOOK_RETRIES, &retry_partition(shard, minute), &range, 1).await }
        });
        let counted: Vec<(Vec<Row>, usize)> = futures::stream::iter(reads).buffered(MINUTES_READ_AT_ONCE as usize).try_collect().await?;
        let (mut count, mut soonest) = (0, None);
        for (first, found) in counted {
            soonest = soonest.or_else(|| first.first().and_then(|row| row.clustering.first()).and_then(Val::as_int));
            count += found;
        }
        Ok((count, soonest))
    }

    /// What the store keeps of `shard`'s queue; None before any process held it.
    pub async fn shard_state(&self, shard: &str) -> Result<Option<ShardState>, StoreError> {
        let row = self.driver.get(&WEBHOOK_SHARDS, &[Val::text(shard)], &[]).await?;
        row.map(|row| decode(&WEBHOOK_SHARDS, &row.body)).transpose()
    }

    /// The row of `shard`'s queue state, written now (the newest wins).
    pub fn shard_state_row(&self, shard: &str, state: &ShardState) -> Mutation {
        Mutation {
            table: &WEBHOOK_SHARDS,
            partition: vec![Val::text(shard)],
            clustering: vec![],
            op: Op::Put { body: encode(state), expires_at: None },
            ts: now_micros(),
        }
    }

    /// Up to `limit` deliveries of `shard` in `webhook_deliveries`, the table before
    /// `webhook_retries`, soonest first, after the one keyed `after` (due time and
    /// delivery id): read once a shard, page after page, to move them.
    pub async fn legacy_deliveries(&self, shard: &str, after: Option<&(i64, String)>, limit: usize) -> Result<Vec<DueDelivery>, StoreError> {
        let cursor = after.map(|(due_at, id)| vec![Val::Int(*due_at), Val::text(id)]);
        let rows = self.driver.scan(&WEBHOOK_DELIVERIES, &[Val::text(shard)], &ScanRange::after(cursor.as_deref()), limit).await?;
        let mut due = Vec::with_capacity(rows.len());
        for row in rows {
            let Some(due_at) = row.clustering.first().and_then(Val::as_int) else { continue };
            due.push(DueDelivery { shard: shard.to_owned(), due_at, delivery: decode(&WEBHOOK_DELIVERIES, &row.body)? });
        }
        Ok(due)
    }

    /// The removal of a moved `webhook_deliveries` row.
    pub fn legacy_done_row(&self, due: &DueDelivery) -> Mutation {
        Mutation {
            table: &WEBHOOK_DELIVERIES,
            partition: vec![Val::text(&due.shard)],
            clustering: vec![Val::Int(due.due_at), Val::text(due.delivery.id())],
            op: Op::Purge,
            ts: now_micros(),
        }
    }

    /// The row recording an attempt, kept for the retention.
    pub fn attempt_row(&self, account_id: &str, endpoint_id: &str, attempt: &AttemptRecord) -> Mutation {
        let expires_at = Some(now_micros().saturating_add(micros(self.retention)));
        Mutation {
            table: &WEBHOOK_ATTEMPTS,
            partition: vec![Val::text(account_id), Val::text(endpoint_id)],
            clustering: vec![Val::Int(attempt.attempted_at.0), Val::text(&attempt.id)],
            op: Op::Put { body: encode(attempt), expires_at },
            ts: now_micros(),
        }
    }

    /// Up to `limit` attempts recorded under the endpoint's id, whichever endpoint of
    /// that id they were made to, newest first, after the attempt keyed `after` (its
    /// time and id).
    pub async fn attempts(
        &self,
        account_id: &str,
        endpoint_id: &str,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<(Vec<AttemptRecord>, bool), StoreError> {
        let cursor = after.map(|(at, id)| vec![Val::Int(at), Val::text(id)]);
        let rows =
            self.driver.scan(&WEBHOOK_ATTEMPTS, &[Val::text(account_id), Val::text(endpoint_id)], &ScanRange::after(cursor.as_deref()), limit + 1).await?;
        let has_more = rows.len() > limit;
        let attempts = rows.iter().take(limit).map(|row| decode(&WEBHOOK_ATTEMPTS, &row.body)).collect::<Result<Vec<AttemptRecord>, _>>()?;
        Ok((attempts, has_more))
    }

    /// Up to `limit` attempts made to `endpoint`, newest first, after the attempt keyed
    /// `after`: those made to another endpoint of its id (one deleted before) are passed
    /// over, at most [`ATTEMPT_SCAN_BUDGET`] of them a page.
    pub async fn endpoint_attempts(
        &self,
        account_id: &str,
        endpoint: &EndpointRecord,
        after: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<AttemptsPage, StoreError> {
        let partition = [Val::text(account_id), Val::text(&endpoint.id)];
        let mut page = AttemptsPage { attempts: Vec::new(), last_read: after.map(|(at, id)| (at, id.to_owned())), has_more: false };
        let mut budget = ATTEMPT_SCAN_BUDGET;
        // A page's worth first (all a page reads when no attempt is passed over), then
        // twice as many rows each round, never more than the page and the budget need:
        // a run of passed-over attempts costs a few round trips, not one per page size.
        let mut batch = limit + 1;
        loop {
            let cursor = page.last_read.as_ref().map(|(at, id)| vec![Val::Int(*at), Val::text(id)]);
            let wanted = batch.min(limit - page.attempts.len() + budget + 1);
            batch = batch.saturating_mul(2);
            let rows = self.driver.scan(&WEBHOOK_ATTEMPTS, &partition, &ScanRange::after(cursor.as_deref()), wanted).await?;
            let exhausted = rows.len() < wanted;
            for row in rows {
                if page.attempts.len() == limit || budget == 0 {
                    page.has_more = true;
                    return Ok(page);
                }
                let attempt: AttemptRecord = decode(&WEBHOOK_ATTEMPTS, &row.body)?;
                page.last_read = Some((attempt.attempted_at.micros(), attempt.id.clone()));
                if endpoint.made(attempt.endpoint_created_version) {
                    page.attempts.push(attempt);
                } else {
                    budget -= 1;
                }
            }
            if exhausted {
                return Ok(page);
            }
        }
    }

    pub async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        self.driver.write(mutations).await
    }
}
