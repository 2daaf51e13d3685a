//! The catalog: every read-model table, each shaped for one endpoint or tool (its
//! partition is what one request reads, its clustering order is the endpoint's order),
//! plus the projection's own bookkeeping and the MCP server's OAuth state.

use crate::table::{Clock, Clustering, Column, ColumnType, Order, Table};

const fn text(name: &'static str) -> Column {
    Column { name, kind: ColumnType::Text }
}

const fn bigint(name: &'static str) -> Column {
    Column { name, kind: ColumnType::BigInt }
}

const fn newest(name: &'static str) -> Clustering {
    Clustering { name, kind: ColumnType::BigInt, order: Order::Desc }
}

const fn id_desc(name: &'static str) -> Clustering {
    Clustering { name, kind: ColumnType::Text, order: Order::Desc }
}

const fn id_asc(name: &'static str) -> Clustering {
    Clustering { name, kind: ColumnType::Text, order: Order::Asc }
}

pub static ACCOUNTS: Table = Table {
    id: 1,
    name: "accounts",
    doc: "account plan, read on every request: body {plan}",
    partition: &[text("account_id")],
    clustering: &[],
    clock: Clock::Version,
};

pub static TOKENS_BY_HASH: Table = Table {
    id: 2,
    name: "tokens_by_hash",
    doc: "personal access tokens by SHA-256 of the token: body {account_id, token_id, revoked}",
    partition: &[text("token_sha256")],
    clustering: &[],
    clock: Clock::Version,
};

pub static MEETINGS_BY_ACCOUNT: Table = Table {
    id: 3,
    name: "meetings_by_account",
    doc: "GET /meetings and list_meetings: the account's meetings, newest first; body = list entry",
    partition: &[text("account_id")],
    clustering: &[newest("created_at_us"), id_desc("meeting_id")],
    clock: Clock::Version,
};

pub static MEETING_DETAILS: Table = Table {
    id: 4,
    name: "meeting_details",
    doc: "GET /meetings/{id} and get_meeting: body = meeting detail without transcript",
    partition: &[text("account_id"), text("meeting_id")],
    clustering: &[],
    clock: Clock::Version,
};

pub static MEETING_TRANSCRIPTS: Table = Table {
    id: 5,
    name: "meeting_transcripts",
    doc: "include=transcript and get_meeting_transcript: body {text, segments, words}",
    partition: &[text("account_id"), text("meeting_id")],
    clustering: &[],
    clock: Clock::Version,
};

pub static MEETINGS_BY_SERIES: Table = Table {
    id: 6,
    name: "meetings_by_series",
    doc: "get_recurring_meeting_history and list_meetings(series_id): newest first; body = list entry",
    partition: &[text("account_id"), text("series_id")],
    clustering: &[newest("created_at_us"), id_desc("meeting_id")],
    clock: Clock::Version,
};

pub static MEETING_WORDS: Table = Table {
    id: 7,
    name: "meeting_words",
    doc: "search_meetings: one posting per word of a meeting's title and summaries, newest first",
    partition: &[text("account_id"), text("word")],
    clustering: &[newest("created_at_us"), id_desc("meeting_id")],
    clock: Clock::Version,
};

pub static ACTION_ITEMS_BY_STATUS: Table = Table {
    id: 8,
    name: "action_items_by_status",
    doc: "GET /action-items and list_pending_action_items: one partition per status, newest first; body = list form",
    partition: &[text("account_id"), text("status")],
    clustering: &[newest("created_at_us"), id_desc("item_id")],
    clock: Clock::Version,
};

pub static ACTION_ITEMS_BY_ASSIGNEE: Table = Table {
    id: 9,
    name: "action_items_by_assignee",
    doc: "GET /action-items?assignee_human_id: per assignee and status, newest first; body = list form",
    partition: &[text("account_id"), text("assignee_human_id"), text("status")],
    clustering: &[newest("created_at_us"), id_desc("item_id")],
    clock: Clock::Version,
};

pub static ACTION_ITEMS_BY_MEETING: Table = Table {
    id: 10,
    name: "action_items_by_meeting",
    doc: "GET /action-items?meeting_id: per meeting and status, newest first; body = list form",
    partition: &[text("account_id"), text("meeting_id"), text("status")],
    clustering: &[newest("created_at_us"), id_desc("item_id")],
    clock: Clock::Version,
};

pub static SHARES: Table = Table {
    id: 11,
    name: "shares",
    doc: "GET /shared-notes/{id} and get_shared_note: the shared version of a note; body {id, title, team, published_at, text, ...}",
    partition: &[text("share_id")],
    clustering: &[],
    clock: Clock::Version,
};

pub static SHARED_NOTES_BY_ACCOUNT: Table = Table {
    id: 12,
    name: "shared_notes_by_account",
    doc: "GET /shared-notes: what others share with the account (teams and direct), newest first; body = list entry",
    partition: &[text("account_id")],
    clustering: &[newest("published_at_us"), id_desc("share_id")],
    clock: Clock::Position,
};

pub static SHARED_NOTE_ACCESS: Table = Table {
    id: 13,
    name: "shared_note_access",
    doc: "GET /shared-notes/{id}: that the share is visible to the account; body {published_at_us}",
    partition: &[text("account_id"), text("share_id")],
    clustering: &[],
    clock: Clock::Position,
};

pub static SHARED_NOTE_WORDS: Table = Table {
    id: 14,
    name: "shared_note_words",
    doc: "q on GET /shared-notes and search_shared_notes: one posting per word of a visible share, newest first",
    partition: &[text("account_id"), text("word")],
    clustering: &[newest("published_at_us"), id_desc("share_id")],
    clock: Clock::Position,
};

pub static TEAMS_BY_ACCOUNT: Table = Table {
    id: 15,
    name: "teams_by_account",
    doc: "GET /teams and the membership check of team endpoints: body = Team plus includes_team_action_items",
    partition: &[text("account_id")],
    clustering: &[id_asc("team_id")],
    clock: Clock::Position,
};

pub static TEAM_MEMBERS: Table = Table {
    id: 16,
    name: "team_members",
    doc: "projection state: the current members of a team; body {role}",
    partition: &[text("team_id")],
    clustering: &[id_asc("account_id")],
    clock: Clock::Position,
};

pub static TEAM_SHARES: Table = Table {
    id: 17,
    name: "team_shares",
    doc: "projection state: the shares published to a team",
    partition: &[text("team_id")],
    clustering: &[id_asc("share_id")],
    clock: Clock::Position,
};

pub static TEAM_ACTION_ITEMS: Table = Table {
    id: 18,
    name: "team_action_items",
    doc: "GET /teams/{id}/action-items: per team and status, newest first; body = team action item",
    partition: &[text("team_id"), text("status")],
    clustering: &[newest("created_at_us"), id_desc("item_id")],
    clock: Clock::Version,
};

pub static ENTITIES: Table = Table {
    id: 19,
    name: "projection_entities",
    doc: "projection state: last applied version of every entity, deleted flag and the state rows derive from",
    partition: &[text("kind"), text("entity_id")],
    clustering: &[],
    clock: Clock::Position,
};

pub static POSITIONS: Table = Table {
    id: 20,
    name: "projector_positions",
    doc: "embedded edition: the log position committed in the same write as the rows it covers",
    partition: &[text("source")],
    clustering: &[],
    clock: Clock::Position,
};

pub static OAUTH_CLIENTS: Table = Table {
    id: 21,
    name: "oauth_clients",
    doc: "MCP OAuth: registered public clients (RFC 7591); body = client metadata",
    partition: &[text("client_id")],
    clustering: &[],
    clock: Clock::Wall,
};

pub static OAUTH_CODES: Table = Table {
    id: 22,
    name: "oauth_codes",
    doc: "MCP OAuth: authorization codes by SHA-256, single use, short TTL",
    partition: &[text("code_sha256")],
    clustering: &[],
    clock: Clock::Wall,
};

pub static OAUTH_GRANTS: Table = Table {
    id: 23,
    name: "oauth_grants",
    doc: "MCP OAuth: one grant per authorization (client, account, approving PAT), with TTL",
    partition: &[text("grant_id")],
    clustering: &[],
    clock: Clock::Wall,
};

pub static OAUTH_TOKENS: Table = Table {
    id: 24,
    name: "oauth_tokens",
    doc: "MCP OAuth: access and refresh tokens by SHA-256, each pointing at its grant, with TTL",
    partition: &[text("token_sha256")],
    clustering: &[],
    clock: Clock::Wall,
};

pub static OAUTH_GRANTS_BY_TOKEN: Table = Table {
    id: 25,
    name: "oauth_grants_by_pat",
    doc: "MCP OAuth: the grants a personal access token approved, revoked with it",
    partition: &[text("pat_token_id")],
    clustering: &[id_asc("grant_id")],
    clock: Clock::Wall,
};

pub static TRANSCRIPT_WORDS: Table = Table {
    id: 26,
    name: "transcript_words",
    doc: "get_meeting_transcript word paging: the word timings in chunks of WORDS_PER_CHUNK; body = JSON array of words",
    partition: &[text("account_id"), text("meeting_id")],
    clustering: &[Clustering { name: "chunk", kind: ColumnType::BigInt, order: Order::Asc }],
    clock: Clock::Version,
};

pub static OAUTH_CLAIMS: Table = Table {
    id: 27,
    name: "oauth_claims",
    doc: "MCP OAuth: the single use of an authorization code or refresh token, by kind and SHA-256; written only if absent, with TTL",
    partition: &[text("kind"), text("secret_sha256")],
    clustering: &[],
    clock: Clock::FirstWriteWins,
};

const fn seq(name: &'static str) -> Clustering {
    Clustering { name, kind: ColumnType::BigInt, order: Order::Asc }
}

pub static WEBHOOK_ENDPOINTS: Table = Table {
    id: 28,
    name: "webhook_endpoints",
    doc: "GET /webhook-endpoints and delivery: an account's endpoints by id; body {id, url, types, enabled, description}, never the secret; write time = the endpoint's version",
    partition: &[text("account_id")],
    clustering: &[id_asc("endpoint_id")],
    clock: Clock::Version,
};

pub static WEBHOOK_SECRETS: Table = Table {
    id: 29,
    name: "webhook_secrets",
    doc: "delivery only, never served: an endpoint's signing secrets, current first; body {secrets: [{secret, expires_at}]}",
    partition: &[text("account_id"), text("endpoint_id")],
    clustering: &[],
    clock: Clock::Version,
};

pub static MESSAGE_OUTBOX: Table = Table {
    id: 30,
    name: "message_outbox",
    doc: "embedded edition: the messages the projector derived, in order, written with the rows they announce; body {account_id, message}",
    partition: &[text("source")],
    clustering: &[seq("seq")],
    clock: Clock::Position,
};

pub static FEED: Table = Table {
    id: 31,
    name: "feed",
    doc: "GET /events and list_recent_changes: an account's messages, oldest first, kept for the retention; body = the message",
    partition: &[text("account_id")],
    clustering: &[seq("seq")],
    clock: Clock::Position,
};

pub static FEED_HEADS: Table = Table {
    id: 32,
    name: "feed_heads",
    doc: "GET /events: the last seq of an account's feed whose rows, and every earlier one, are written; body {seq}",
    partition: &[text("account_id")],
    clustering: &[],
    clock: Clock::Position,
};

/// The hour of a [`FEED_FLOORS`] row: microseconds since the epoch, whole hours.
pub const FEED_FLOOR_HOUR_US: i64 = 3_600_000_000;

/// (Table id 39 was an earlier form of this table, keyed by the hour alone; never reuse it.)
pub static FEED_FLOORS: Table = Table {
    id: 40,
    name: "feed_hour_floors",
    doc: "GET /events without a cursor: per account, hour of writing and the writer's retention, the lowest seq of the feed rows written, kept as long as those rows and an hour, so a read starts at the oldest message kept rather than stepping over expired ones; body {seq}; write time = 2^62 - seq, so the lowest seq stands; the row at hour 0 says since when floors are kept",
    partition: &[text("account_id")],
    clustering: &[seq("hour_us"), seq("retention_us")],
    clock: Clock::Position,
};

pub static MESSAGES_BY_ID: Table = Table {
    id: 33,
    name: "messages_by_id",
    doc: "before message_claims: GET /events/{id}, and the feed's dedupe: an account's message by id, claimed once by the first seq that carries it, kept for the retention; body {seq} (the message is the feed row at that seq; claims written before also held the message); write time = 2^62 - seq, so the lowest seq stands",
    partition: &[text("account_id"), text("message_id")],
    clustering: &[],
    clock: Clock::Position,
};

/// The partition of `message_claims` holding since when claims are kept there
/// (`WebhookStore`'s claims marker): no message id's day is negative.
pub const CLAIMS_SINCE_DAY: i64 = -1;

pub static MESSAGE_CLAIMS: Table = Table {
    id: 41,
    name: "message_claims",
    doc: "GET /events/{id}, and the feed's dedupe: an account's message ids claimed on one day of their time (the id's first 12 hex digits, milliseconds), each by the first seq that carries it, kept for the retention, so a batch's claims of an account are read in one request and written in one; body {seq} (the message is the feed row at that seq); write time = 2^62 - seq, so the lowest seq stands; the row of account \"\" at day -1 says since when claims are kept here and until when messages_by_id may still hold some",
    partition: &[text("account_id"), bigint("day")],
    clustering: &[id_asc("message_id")],
    clock: Clock::Position,
};

pub static WEBHOOK_DELIVERIES: Table = Table {
    id: 34,
    name: "webhook_deliveries",
    doc: "delivery, before webhook_retries: the pending deliveries of one shard, soonest due first, read once by the first runtime that holds the shard after the upgrade, which moves them into webhook_retries; body {account_id, endpoint_id, message_id, seq, attempt}",
    partition: &[text("shard")],
    clustering: &[seq("due_at"), id_asc("delivery_id")],
    clock: Clock::Wall,
};

pub static WEBHOOK_ATTEMPTS: Table = Table {
    id: 35,
    name: "webhook_attempts",
    doc: "GET /webhook-endpoints/{id}/attempts: an endpoint's delivery attempts, newest first, kept 30 days; body = the attempt",
    partition: &[text("account_id"), text("endpoint_id")],
    clustering: &[newest("attempted_at"), id_desc("attempt_id")],
    clock: Clock::Wall,
};

pub static WEBHOOK_ENDPOINT_STATES: Table = Table {
    id: 36,
    name: "webhook_endpoint_states",
    doc: "GET /webhook-endpoints and delivery: an endpoint's delivery state (failing since, disabled at which version, last attempt and success); body = the state",
    partition: &[text("account_id"), text("endpoint_id")],
    clustering: &[],
    clock: Clock::Wall,
};

pub static WEBHOOK_RETRIES: Table = Table {
    id: 37,
    name: "webhook_retries",
    doc: "delivery: the deliveries of one shard waiting for their time (retries, and first attempts not made at once), one partition per minute of due time, soonest first; rows expire after the feed's retention; body {account_id, endpoint_id, message_id, seq, attempt}",
    partition: &[text("shard"), bigint("minute")],
    clustering: &[seq("due_at"), id_asc("delivery_id")],
    clock: Clock::Wall,
};

pub static WEBHOOK_SHARDS: Table = Table {
    id: 38,
    name: "webhook_shards",
    doc: "delivery: per shard, the first minute of webhook_retries that may hold a row (no scan reads an earlier one), and whether its webhook_deliveries rows were moved; body {low_minute, legacy_moved}",
    partition: &[text("shard")],
    clustering: &[],
    clock: Clock::Wall,
};

pub static WEBHOOK_PROGRESS: Table = Table {
    id: 42,
    name: "webhook_progress",
    doc: "delivery: per delivery that made a retry (and the version that created its endpoint: an endpoint deleted and created again under its id starts afresh), the furthest attempt made and whether it was delivered, written after the attempt's record and next retry row, so that a second retry row of one attempt (a first attempt made twice, a retry made again late) is removed unsent when taken up instead of going on as a second chain; body {attempt, delivered}; write time = 2 attempt + delivered, so the furthest stands; kept the feed's retention",
    partition: &[text("delivery_id"), bigint("endpoint_created_version")],
    clustering: &[],
    clock: Clock::Version,
};

/// Word timings per TRANSCRIPT_WORDS row: the largest page get_meeting_transcript
/// serves, so any page reads at most two rows.
pub const WORDS_PER_CHUNK: usize = 500;

/// Every table, in id order.
pub static ALL: &[&Table] = &[
    &ACCOUNTS,
    &TOKENS_BY_HASH,
    &MEETINGS_BY_ACCOUNT,
    &MEETING_DETAILS,
    &MEETING_TRANSCRIPTS,
    &MEETINGS_BY_SERIES,
    &MEETING_WORDS,
    &ACTION_ITEMS_BY_STATUS,
    &ACTION_ITEMS_BY_ASSIGNEE,
    &ACTION_ITEMS_BY_MEETING,
    &SHARES,
    &SHARED_NOTES_BY_ACCOUNT,
    &SHARED_NOTE_ACCESS,
    &SHARED_NOTE_WORDS,
    &TEAMS_BY_ACCOUNT,
    &TEAM_MEMBERS,
    &TEAM_SHARES,
    &TEAM_ACTION_ITEMS,
    &ENTITIES,
    &POSITIONS,
    &OAUTH_CLIENTS,
    &OAUTH_CODES,
    &OAUTH_GRANTS,
    &OAUTH_TOKENS,
    &OAUTH_GRANTS_BY_TOKEN,
    &TRANSCRIPT_WORDS,
    &OAUTH_CLAIMS,
    &WEBHOOK_ENDPOINTS,
    &WEBHOOK_SECRETS,
    &MESSAGE_OUTBOX,
    &FEED,
    &FEED_HEADS,
    &MESSAGES_BY_ID,
    &WEBHOOK_DELIVERIES,
    &WEBHOOK_ATTEMPTS,
    &WEBHOOK_ENDPOINT_STATES,
    &WEBHOOK_RETRIES,
    &WEBHOOK_SHARDS,
    &FEED_FLOORS,
    &MESSAGE_CLAIMS,
    &WEBHOOK_PROGRESS,
];

pub fn by_id(id: u8) -> Option<&'static Table> {
    ALL.iter().copied().find(|table| table.id == id)
}

/// The whole CQL schema, as kept in `schemas/cql/recap.cql`.
pub fn cql_schema() -> String {
    let mut cql = String::from(
        "-- recap read model: one table per endpoint or tool (partition = what one request reads,\n\
         -- clustering order = the endpoint's order). Generated from readmodel/src/tables.rs;\n\
         -- `make schemas` rewrites it, a test checks it. Every statement is valid on ScyllaDB\n\
         -- and Apache Cassandra 5. Writes carry USING TIMESTAMP, but those of a table written\n\
         -- only if absent (INSERT ... IF NOT EXISTS) do not (see Clock in table.rs).\n\n",
    );
    for table in ALL {
        cql.push_str(&table.cql());
        cql.push('\n');
    }
    cql
}
