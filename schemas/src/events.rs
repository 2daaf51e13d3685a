//! The events of the contract (`docs/events.md`) as Rust types.
//!
//! Validation is the type: a field the contract shows without "null" is required, a
//! field it documents as nullable may be null or absent (absent reads as null), a
//! wrong type, a bad timestamp or an identifier outside the bound of [`Id`] is refused
//! (the reason names the field), and unknown fields are ignored at every level (no
//! `deny_unknown_fields` anywhere), so newer producers can add fields.

use schemars::JsonSchema;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::{Id, IdError, MessageKind, Timestamp, MAX_ID_BYTES};

/// The envelope every event travels in. `data` stays raw until the type is known, so
/// an unknown type costs nothing but the envelope parse.
#[derive(Debug, Deserialize)]
pub struct RawEnvelope<'a> {
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub version: u64,
    pub occurred_at: Timestamp,
    #[serde(borrow)]
    pub data: &'a RawValue,
}

/// A decoded event of a known type. Serialises as the contract's envelope
/// (`{"id","type","version","occurred_at","data"}`): see [`Envelope::to_line`].
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub id: Id,
    pub version: u64,
    pub occurred_at: Timestamp,
    pub event: Event,
}

/// The largest version the contract allows ("fits in 53 bits").
pub const MAX_VERSION: u64 = (1 << 53) - 1;

// Events are decoded one at a time and applied at once: boxing the large variants
// would cost an allocation per event for no memory saved. An event serialises as its
// payload, the envelope's `data` (its type is the envelope's `type`).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Event {
    AccountUpserted(AccountUpserted),
    TokenCreated(TokenCreated),
    TokenRevoked(TokenRevoked),
    MeetingUpserted(MeetingUpserted),
    MeetingTranscriptSet(MeetingTranscriptSet),
    MeetingDeleted(MeetingDeleted),
    ActionItemUpserted(ActionItemUpserted),
    ActionItemDeleted(ActionItemDeleted),
    TeamUpserted(TeamUpserted),
    TeamDeleted(TeamDeleted),
    TeamMemberUpserted(TeamMemberUpserted),
    TeamMemberRemoved(TeamMemberRemoved),
    NoteShared(NoteShared),
    NoteUnshared(NoteUnshared),
    TeamActionItemUpserted(TeamActionItemUpserted),
    TeamActionItemDeleted(TeamActionItemDeleted),
    WebhookEndpointUpserted(WebhookEndpointUpserted),
    WebhookEndpointDeleted(WebhookEndpointDeleted),
}

/// Each payload is the event of its type.
macro_rules! event_from_payload {
    ($($variant:ident),* $(,)?) => {
        $(impl From<$variant> for Event {
            fn from(data: $variant) -> Event {
                Event::$variant(data)
            }
        })*
    };
}

event_from_payload!(
    AccountUpserted,
    TokenCreated,
    TokenRevoked,
    MeetingUpserted,
    MeetingTranscriptSet,
    MeetingDeleted,
    ActionItemUpserted,
    ActionItemDeleted,
    TeamUpserted,
    TeamDeleted,
    TeamMemberUpserted,
    TeamMemberRemoved,
    NoteShared,
    NoteUnshared,
    TeamActionItemUpserted,
    TeamActionItemDeleted,
    WebhookEndpointUpserted,
    WebhookEndpointDeleted,
);

/// Every event type this version knows, in contract order.
pub const KNOWN_TYPES: &[&str] = &[
    "account.upserted",
    "token.created",
    "token.revoked",
    "meeting.upserted",
    "meeting.transcript_set",
    "meeting.deleted",
    "action_item.upserted",
    "action_item.deleted",
    "team.upserted",
    "team.deleted",
    "team_member.upserted",
    "team_member.removed",
    "note.shared",
    "note.unshared",
    "team_action_item.upserted",
    "team_action_item.deleted",
    "webhook_endpoint.upserted",
    "webhook_endpoint.deleted",
];

/// Why an event could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The type is not one this version knows: skipped and counted, never an error.
    #[error("unknown event type {0:?}")]
    UnknownType(String),
    /// The event is of a known type (or not even an envelope) and is invalid:
    /// dead-lettered with this reason.
    #[error("{0}")]
    Invalid(String),
}

impl Event {
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::AccountUpserted(_) => "account.upserted",
            Event::TokenCreated(_) => "token.created",
            Event::TokenRevoked(_) => "token.revoked",
            Event::MeetingUpserted(_) => "meeting.upserted",
            Event::MeetingTranscriptSet(_) => "meeting.transcript_set",
            Event::MeetingDeleted(_) => "meeting.deleted",
            Event::ActionItemUpserted(_) => "action_item.upserted",
            Event::ActionItemDeleted(_) => "action_item.deleted",
            Event::TeamUpserted(_) => "team.upserted",
            Event::TeamDeleted(_) => "team.deleted",
            Event::TeamMemberUpserted(_) => "team_member.upserted",
            Event::TeamMemberRemoved(_) => "team_member.removed",
            Event::NoteShared(_) => "note.shared",
            Event::NoteUnshared(_) => "note.unshared",
            Event::TeamActionItemUpserted(_) => "team_action_item.upserted",
            Event::TeamActionItemDeleted(_) => "team_action_item.deleted",
            Event::WebhookEndpointUpserted(_) => "webhook_endpoint.upserted",
            Event::WebhookEndpointDeleted(_) => "webhook_endpoint.deleted",
        }
    }

    /// The Kafka message key of the contract's transport table.
    pub fn message_key(&self) -> &str {
        match self {
            Event::AccountUpserted(data) => &data.account_id,
            Event::TokenCreated(data) => &data.account_id,
            Event::TokenRevoked(data) => &data.account_id,
            Event::MeetingUpserted(data) => &data.account_id,
            Event::MeetingTranscriptSet(data) => &data.account_id,
            Event::MeetingDeleted(data) => &data.account_id,
            Event::ActionItemUpserted(data) => &data.account_id,
            Event::ActionItemDeleted(data) => &data.account_id,
            Event::TeamUpserted(data) => &data.team.id,
            Event::TeamDeleted(data) => &data.team_id,
            Event::TeamMemberUpserted(data) => &data.team_id,
            Event::TeamMemberRemoved(data) => &data.team_id,
            Event::NoteShared(data) => match &data.share.team {
                Some(team) => &team.id,
                None => &data.share.id,
            },
            Event::NoteUnshared(data) => &data.share_id,
            Event::TeamActionItemUpserted(data) => &data.team_id,
            Event::TeamActionItemDeleted(data) => &data.team_id,
            Event::WebhookEndpointUpserted(data) => &data.account_id,
            Event::WebhookEndpointDeleted(data) => &data.account_id,
        }
    }

    /// The topic of the contract's transport table (default names).
    pub fn topic(&self) -> &'static str {
        topic_of(self.type_name())
    }
}

/// The default topic carrying an event type.
pub fn topic_of(event_type: &str) -> &'static str {
    match event_type.split('.').next().unwrap_or_default() {
        "account" | "token" | "webhook_endpoint" => "recap.accounts.v1",
        "meeting" | "action_item" => "recap.meetings.v1",
        _ => "recap.sharing.v1",
    }
}

impl Envelope {
    /// Decodes one envelope (one line of the log, one Kafka message value).
    pub fn decode(bytes: &[u8]) -> Result<Envelope, DecodeError> {
        let text = std::str::from_utf8(bytes).map_err(|_| DecodeError::Invalid("not UTF-8".into()))?;
        Envelope::decode_text(text).map_err(|error| match error {
            // "Unknown types are skipped": whatever else a newer type's envelope holds,
            // it is not ours to judge. Read only on the error path.
            DecodeError::Invalid(reason) => match serde_json::from_str::<TypeOnly>(text) {
                Ok(TypeOnly { event_type }) if !KNOWN_TYPES.contains(&event_type.as_str()) => DecodeError::UnknownType(event_type),
                _ => DecodeError::Invalid(reason),
            },
            unknown => unknown,
        })
    }

    fn decode_text(text: &str) -> Result<Envelope, DecodeError> {
        let raw: RawEnvelope = serde_json::from_str(text).map_err(|error| DecodeError::Invalid(format!("envelope: {error}")))?;
        if raw.version == 0 || raw.version > MAX_VERSION {
            return Err(DecodeError::Invalid(format!("envelope: version {} is outside 1..2^53", raw.version)));
        }
        let id = Id::try_from(raw.id).map_err(|error| DecodeError::Invalid(format!("envelope: id {error}")))?;
        // serde reads a struct from an array too: `data` must be an object.
        if !raw.data.get().starts_with('{') {
            return Err(DecodeError::Invalid(format!("{}: data is not an object", raw.event_type)));
        }
        let event = decode_data(&raw.event_type, raw.data.get())?;
        Ok(Envelope { id, version: raw.version, occurred_at: raw.occurred_at, event })
    }

    /// The envelope as one JSON line (no newline): what a producer writes to the log or
    /// a Kafka message value, and what [`Envelope::decode`] reads back unchanged.
    pub fn to_line(&self) -> String {
        // Every field is a string, a number or a struct of them: nothing can fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut envelope = serializer.serialize_struct("Envelope", 5)?;
        envelope.serialize_field("id", &self.id)?;
        envelope.serialize_field("type", self.event.type_name())?;
        envelope.serialize_field("version", &self.version)?;
        envelope.serialize_field("occurred_at", &self.occurred_at)?;
        envelope.serialize_field("data", &self.event)?;
        envelope.end()
    }
}

/// The type of an envelope and nothing else.
#[derive(Deserialize)]
struct TypeOnly {
    #[serde(rename = "type")]
    event_type: String,
}

fn parse<'a, T: Deserialize<'a>>(event_type: &str, data: &'a str) -> Result<T, DecodeError> {
    serde_json::from_str(data).map_err(|error| DecodeError::Invalid(invalid_data_reason::<T>(event_type, data, error)))
}

/// Why a payload was refused. An identifier's check knows the value but not the field
/// it is in, so a refused identifier is named by decoding again with its path tracked:
/// only on this error path, so valid events pay nothing for it.
fn invalid_data_reason<'a, T: Deserialize<'a>>(event_type: &str, data: &'a str, error: serde_json::Error) -> String {
    let mut deserializer = serde_json::Deserializer::from_str(data);
    if let Err(tracked) = serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        if let Some(id_error) = id_error_of(tracked.inner()) {
            return format!("{event_type}: data: {} {id_error}", tracked.path());
        }
        // A name outside a closed list (a message kind of an endpoint's `types`, an
        // action item's status): the path says which element of which list.
        if tracked.inner().to_string().starts_with("unknown variant") {
            return format!("{event_type}: data: {}: {error}", tracked.path());
        }
    }
    format!("{event_type}: data: {error}")
}

/// The identifier check that refused a payload, if that is what did: serde carries our
/// error only as its message (followed by the position).
fn id_error_of(error: &serde_json::Error) -> Option<IdError> {
    if !error.is_data() {
        return None;
    }
    let text = error.to_string();
    let message = text.strip_suffix(&format!(" at line {} column {}", error.line(), error.column())).unwrap_or(&text);
    if message == IdError::Empty.to_string() {
        return Some(IdError::Empty);
    }
    let length = message.strip_prefix("is ")?.strip_suffix(&format!(" bytes, longer than {MAX_ID_BYTES}"))?.parse().ok()?;
    Some(IdError::TooLong(length))
}

/// Decodes the payload of a known type.
pub fn decode_data(event_type: &str, data: &str) -> Result<Event, DecodeError> {
    let event = match event_type {
        "account.upserted" => Event::AccountUpserted(parse(event_type, data)?),
        "token.created" => {
            let created: TokenCreated = parse(event_type, data)?;
            if created.token_sha256.len() != 64 || !created.token_sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                return Err(DecodeError::Invalid("token.created: data: token_sha256 is not 64 lowercase hex digits".into()));
            }
            Event::TokenCreated(created)
        }
        "token.revoked" => Event::TokenRevoked(parse(event_type, data)?),
        "meeting.upserted" => Event::MeetingUpserted(parse(event_type, data)?),
        "meeting.transcript_set" => Event::MeetingTranscriptSet(parse(event_type, data)?),
        "meeting.deleted" => Event::MeetingDeleted(parse(event_type, data)?),
        "action_item.upserted" => Event::ActionItemUpserted(parse(event_type, data)?),
        "action_item.deleted" => Event::ActionItemDeleted(parse(event_type, data)?),
        "team.upserted" => Event::TeamUpserted(parse(event_type, data)?),
        "team.deleted" => Event::TeamDeleted(parse(event_type, data)?),
        "team_member.upserted" => Event::TeamMemberUpserted(parse(event_type, data)?),
        "team_member.removed" => Event::TeamMemberRemoved(parse(event_type, data)?),
        "note.shared" => Event::NoteShared(parse(event_type, data)?),
        "note.unshared" => Event::NoteUnshared(parse(event_type, data)?),
        "team_action_item.upserted" => Event::TeamActionItemUpserted(parse(event_type, data)?),
        "team_action_item.deleted" => Event::TeamActionItemDeleted(parse(event_type, data)?),
        "webhook_endpoint.upserted" => {
            let upserted: WebhookEndpointUpserted = parse(event_type, data)?;
            if let Err(reason) = upserted.endpoint.check() {
                return Err(DecodeError::Invalid(format!("{event_type}: data: endpoint.{reason}")));
            }
            Event::WebhookEndpointUpserted(upserted)
        }
        "webhook_endpoint.deleted" => Event::WebhookEndpointDeleted(parse(event_type, data)?),
        other => return Err(DecodeError::UnknownType(other.to_string())),
    };
    Ok(event)
}

// ---- accounts -------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AccountUpserted {
    pub account_id: Id,
    /// null: the account has no active plan.
    #[serde(default)]
    pub plan: Option<Plan>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    pub tier: String,
    /// Requests per billing period; null means the tier's default.
    #[serde(default)]
    pub api_quota: Option<u64>,
    pub billing_cycle_anchor: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenCreated {
    pub account_id: Id,
    pub token_id: Id,
    pub name: String,
    /// Lowercase hex SHA-256 of the whole token string, prefix included.
    pub token_sha256: String,
    pub created_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenRevoked {
    pub account_id: Id,
    pub token_id: Id,
    pub revoked_at: Timestamp,
}

// ---- meetings -------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeetingUpserted {
    pub account_id: Id,
    pub meeting: Meeting,
}

/// The whole meeting but its transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Meeting {
    pub id: Id,
    pub title: String,
    pub kind: String,
    pub status: String,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default)]
    pub series_id: Option<Id>,
    pub timezone: String,
    pub language: String,
    pub note: Document,
    pub summaries: Vec<Document>,
    pub participants: Vec<Participant>,
    pub action_items: Vec<ActionItem>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Document {
    pub id: Id,
    /// note, summary or template_output.
    pub kind: String,
    pub title: String,
    #[serde(default)]
    pub template_id: Option<Id>,
    pub text: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Participant {
    pub human_id: Id,
    pub name: String,
    pub email: String,
    #[serde(default)]
    pub role: Option<String>,
    pub job_title: String,
}

/// The status values of action items and team action items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionItemStatus {
    Todo,
    InProgress,
    Done,
}

impl ActionItemStatus {
    pub const ALL: [ActionItemStatus; 3] = [ActionItemStatus::Todo, ActionItemStatus::InProgress, ActionItemStatus::Done];

    pub fn as_str(self) -> &'static str {
        match self {
            ActionItemStatus::Todo => "todo",
            ActionItemStatus::InProgress => "in_progress",
            ActionItemStatus::Done => "done",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "todo" => Some(ActionItemStatus::Todo),
            "in_progress" => Some(ActionItemStatus::InProgress),
            "done" => Some(ActionItemStatus::Done),
            _ => None,
        }
    }
}

/// An action item: the detail form of the REST API plus `created_at`, the sort key of
/// GET /action-items.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionItem {
    pub id: Id,
    pub text: String,
    pub status: ActionItemStatus,
    #[serde(default)]
    pub assignee_human_id: Option<Id>,
    #[serde(default)]
    pub due_at: Option<Timestamp>,
    #[serde(default)]
    pub completed_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeetingTranscriptSet {
    pub account_id: Id,
    pub meeting_id: Id,
    pub transcript: Transcript,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Transcript {
    pub text: String,
    pub segments: Vec<Segment>,
    /// null or empty: no word timings.
    #[serde(default)]
    pub words: Option<Vec<Word>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Segment {
    pub id: Id,
    /// mic, speaker or mixed.
    pub track: String,
    pub start_ms: i64,
    pub end_ms: i64,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Word {
    pub text: String,
    pub start_ms: i64,
    pub end_ms: i64,
    pub track: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeetingDeleted {
    pub account_id: Id,
    pub meeting_id: Id,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionItemUpserted {
    pub account_id: Id,
    pub item: ActionItem,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ActionItemDeleted {
    pub account_id: Id,
    pub item_id: Id,
}

// ---- teams and sharing ----------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TeamUpserted {
    pub team: Team,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Team {
    pub id: Id,
    pub name: String,
    /// null: no active plan.
    #[serde(default)]
    pub plan: Option<String>,
    pub can_collaborate: bool,
    pub includes_team_action_items: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TeamDeleted {
    pub team_id: Id,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TeamMemberUpserted {
    pub team_id: Id,
    pub account_id: Id,
    pub role: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TeamMemberRemoved {
    pub team_id: Id,
    pub account_id: Id,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NoteShared {
    pub share: Share,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Share {
    pub id: Id,
    pub title: String,
    pub owner_account_id: Id,
    pub owner_name: String,
    /// viewer, commenter or editor.
    pub access: String,
    pub published_at: Timestamp,
    /// null: shared directly with `recipient_account_ids`.
    #[serde(default)]
    pub team: Option<TeamRef>,
    pub recipient_account_ids: Vec<Id>,
    /// The shared version: the note and its summary.
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TeamRef {
    pub id: Id,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NoteUnshared {
    pub share_id: Id,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TeamActionItemUpserted {
    pub team_id: Id,
    pub item: TeamActionItem,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TeamActionItem {
    pub id: Id,
    pub text: String,
    pub status: ActionItemStatus,
    #[serde(default)]
    pub due_at: Option<Timestamp>,
    /// The name written in the note; not an account.
    pub assignee: String,
    pub owner_name: String,
    pub created_at: Timestamp,
    pub shared_note: SharedNoteRef,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SharedNoteRef {
    pub id: Id,
    pub title: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TeamActionItemDeleted {
    pub team_id: Id,
    pub item_id: Id,
}

// ---- webhook endpoints ----------------------------------------------------------

/// The longest endpoint URL accepted, in bytes.
pub const MAX_WEBHOOK_URL_BYTES: usize = 2048;

/// The bounds of a signing key, in bytes (Standard Webhooks: 24 to 64).
pub const WEBHOOK_KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// The prefix of a signing secret (Standard Webhooks).
pub const WEBHOOK_SECRET_PREFIX: &str = "whsec_";

/// The JSON Schema pattern of a signing secret: `whsec_` and the standard base64 of a
/// 24 to 64 byte key, no more and no less than [`WebhookSecret::key`] takes. A key of n
/// bytes is 4·⌈n/3⌉ characters: groups of four for every three bytes, then, for n mod 3
/// = 1, two characters and `==`, for n mod 3 = 2, three and `=`; the character before
/// the padding leaves its unused bits zero (4 and 2 of them), as canonical base64 does.
/// So 24 to 63 bytes (n mod 3 = 0) are 8 to 21 groups, 25 to 64 bytes 8 to 21 groups
/// and `xx==`, 26 to 62 bytes 8 to 20 groups and `xxx=`.
pub const WEBHOOK_SECRET_PATTERN: &str = concat!(
    "^whsec_(?:",
    "(?:[A-Za-z0-9+/]{4}){8,21}",
    "|(?:[A-Za-z0-9+/]{4}){8,21}[A-Za-z0-9+/][AQgw]==",
    "|(?:[A-Za-z0-9+/]{4}){8,20}[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=",
    ")$"
);

/// The JSON Schema pattern of an endpoint's URL: `http` or `https` in any case, then a
/// host without spaces up to the path, query or fragment (JSON Schema's `uri` format
/// would also admit `ftp:` or `mailto:`). What the
/// decoder reads with the URL standard's parser it approximates: a URL it takes is one
/// the decoder takes but for its host's own rules, and the decoder takes some
/// spellings it refuses (spaces around the URL, `http:host`), which producers need not
/// write.
pub const WEBHOOK_URL_PATTERN: &str = "^[hH][tT][tT][pP][sS]?://[^/?#\\s\\\\]+(?:[/?#\\\\]|$)";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookEndpointUpserted {
    pub account_id: Id,
    pub endpoint: WebhookEndpoint,
}

/// A webhook endpoint of an account, whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookEndpoint {
    pub id: Id,
    /// An absolute http or https URL, at most 2048 bytes.
    #[schemars(length(min = 1, max = 2048), pattern(WEBHOOK_URL_PATTERN))]
    pub url: String,
    /// `whsec_` and the standard base64 of a 24 to 64 byte key.
    #[schemars(with = "String", pattern(WEBHOOK_SECRET_PATTERN))]
    pub secret: WebhookSecret,
    /// The message kinds it receives; empty for every kind.
    pub types: Vec<MessageKind>,
    pub enabled: bool,
    #[serde(default)]
    pub description: Option<String>,
}

impl WebhookEndpoint {
    /// The rules serde cannot check: the URL's form and size, the secret's form. The
    /// reason names the field.
    fn check(&self) -> Result<(), String> {
        if self.url.len() > MAX_WEBHOOK_URL_BYTES {
            return Err(format!("url is {} bytes, longer than {MAX_WEBHOOK_URL_BYTES}", self.url.len()));
        }
        let absolute_http = url::Url::parse(&self.url).is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some());
        if !absolute_http {
            return Err("url is not an absolute http or https URL".into());
        }
        if self.secret.key().is_none() {
            return Err(format!("secret is not {WEBHOOK_SECRET_PREFIX} and the standard base64 of 24 to 64 bytes"));
        }
        Ok(())
    }
}

/// A signing secret: `whsec_` and the standard base64 of the key. Its `Debug` shows
/// nothing of it, so that a logged event never leaks it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WebhookSecret(pub String);

impl WebhookSecret {
    /// The secret of `key`.
    pub fn of_key(key: &[u8]) -> WebhookSecret {
        use base64::Engine;
        WebhookSecret(format!("{WEBHOOK_SECRET_PREFIX}{}", base64::engine::general_purpose::STANDARD.encode(key)))
    }

    /// The key, when the secret has the contract's form.
    pub fn key(&self) -> Option<Vec<u8>> {
        use base64::Engine;
        let encoded = self.0.strip_prefix(WEBHOOK_SECRET_PREFIX)?;
        let key = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
        WEBHOOK_KEY_BYTES.contains(&key.len()).then_some(key)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(redacted)")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookEndpointDeleted {
    pub account_id: Id,
    pub endpoint_id: Id,
}
