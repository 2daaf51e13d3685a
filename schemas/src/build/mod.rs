//! Typed builders of contract events, for code that writes events rather than reading
//! them: the demo world, the benches and every test suite. They construct the event
//! types themselves (no JSON), so a renamed or retyped contract field fails to compile
//! wherever events are built.
//!
//! An [`Events`] value starts every builder: it holds the epoch that every time of a
//! new event defaults to (and that [`Events::minute`] counts from) and where envelope
//! ids come from. A builder ([`Draft`]) has defaults for every field and chainable
//! setters, and ends in an [`Envelope`] or its JSON line:
//!
//! ```
//! use recap_schemas::build::{Epoch, Events};
//! use recap_schemas::ActionItemStatus;
//!
//! const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_790_000_000));
//!
//! let line = EVENTS
//!     .meeting("acc_1", "mtg_1")
//!     .title("Budget review")
//!     .times(EVENTS.minute(10))
//!     .action_items([EVENTS.item("ai_1").text("do ai_1").status(ActionItemStatus::Done)])
//!     .version(2)
//!     .to_line();
//! assert!(line.contains(r#""type":"meeting.upserted","version":2"#));
//! ```
//!
//! Builders take identifiers as text and panic on one outside the contract's bound
//! ([`crate::MAX_ID_BYTES`]): they build the events code writes, whose identifiers are
//! the code's own; events from input are decoded ([`Envelope::decode`]), never built.

mod accounts;
mod meetings;
mod sharing;
mod webhooks;

use std::sync::atomic::{AtomicU64, Ordering};

pub use meetings::{DocumentDraft, ItemDraft, ParticipantDraft};

use crate::{Envelope, Event, Id, Timestamp};

/// A fixed instant that events' times are counted from, in minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch(pub Timestamp);

impl Epoch {
    pub const fn from_unix_seconds(seconds: i64) -> Epoch {
        Epoch(Timestamp(seconds * 1_000_000))
    }

    pub const fn from_micros(micros: i64) -> Epoch {
        Epoch(Timestamp(micros))
    }

    /// The instant `minute` minutes after the epoch (before it when negative).
    pub const fn minute(self, minute: i64) -> Timestamp {
        Timestamp(self.0 .0 + minute * 60_000_000)
    }
}

/// An identifier written by code.
///
/// # Panics
/// When `text` is empty or longer than [`crate::MAX_ID_BYTES`] bytes.
#[track_caller]
pub fn id(text: impl AsRef<str>) -> Id {
    let text = text.as_ref();
    Id::parse(text).unwrap_or_else(|error| panic!("a built event's identifier {text:?} {error}"))
}

/// The next envelope id of this process's counter, in UUID form
/// (`00000000-0000-4000-8000-000000000001`, …): unique in the process, reproducible.
pub fn counter_id() -> Id {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    id(format!("00000000-0000-4000-8000-{:012}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// A random (version 4) UUID, as producers' envelope ids are.
pub fn random_id() -> Id {
    id(uuid::Uuid::new_v4().to_string())
}

/// Where builders take envelope ids from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventIds {
    Counter,
    Random,
}

/// The start of every builder: the epoch and the source of envelope ids. `Copy` and
/// `const`, so a suite keeps its own as a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Events {
    epoch: Epoch,
    ids: EventIds,
}

impl Events {
    /// Builders whose times default to `epoch` and whose envelope ids come from
    /// [`counter_id`].
    pub const fn new(epoch: Epoch) -> Events {
        Events { epoch, ids: EventIds::Counter }
    }

    /// The same, with envelope ids from [`random_id`].
    pub const fn with_random_ids(self) -> Events {
        Events { ids: EventIds::Random, ..self }
    }

    pub const fn epoch(self) -> Epoch {
        self.epoch
    }

    /// The instant `minute` minutes after the epoch.
    pub const fn minute(self, minute: i64) -> Timestamp {
        self.epoch.minute(minute)
    }

    fn at(self) -> Timestamp {
        self.epoch.0
    }

    /// A draft of `data`: version 1, occurred at the epoch, with the next envelope id.
    pub fn draft<T: Into<Event>>(self, data: T) -> Draft<T> {
        let id = match self.ids {
            EventIds::Counter => counter_id(),
            EventIds::Random => random_id(),
        };
        Draft { id, version: 1, occurred_at: self.at(), data }
    }
}

/// An event being built: its payload `data` and its envelope's fields. The setters of
/// each payload type are in the modules of their events.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft<T> {
    pub id: Id,
    pub version: u64,
    pub occurred_at: Timestamp,
    pub data: T,
}

impl<T: Into<Event>> Draft<T> {
    /// The envelope id.
    #[track_caller]
    pub fn id(mut self, envelope_id: impl AsRef<str>) -> Self {
        self.id = id(envelope_id);
        self
    }

    pub fn version(mut self, version: u64) -> Self {
        self.version = version;
        self
    }

    pub fn occurred_at(mut self, occurred_at: Timestamp) -> Self {
        self.occurred_at = occurred_at;
        self
    }

    /// Any change the setters do not cover, on the payload itself.
    pub fn with(mut self, change: impl FnOnce(&mut T)) -> Self {
        change(&mut self.data);
        self
    }

    pub fn envelope(self) -> Envelope {
        Envelope { id: self.id, version: self.version, occurred_at: self.occurred_at, event: self.data.into() }
    }

    /// The envelope as a JSON line: see [`Envelope::to_line`].
    pub fn to_line(self) -> String {
        self.envelope().to_line()
    }
}

impl<T: Into<Event>> From<Draft<T>> for Envelope {
    fn from(draft: Draft<T>) -> Envelope {
        draft.envelope()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ActionItemStatus;

    const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_790_000_000));

    #[test]
    fn minutes_count_from_the_epoch() {
        assert_eq!(EVENTS.minute(0).to_rfc3339(), "2026-09-21T14:13:20Z");
        assert_eq!(EVENTS.minute(61).to_rfc3339(), "2026-09-21T15:14:20Z");
        assert_eq!(EVENTS.minute(-1).to_rfc3339(), "2026-09-21T14:12:20Z");
    }

    #[test]
    fn every_built_event_decodes_to_itself() {
        let drafts: Vec<Envelope> = vec![
            EVENTS.account("acc_1").plan("flow", Some(5), EVENTS.minute(0)).into(),
            EVENTS.token_created("acc_1", "tok_1", "a".repeat(64)).into(),
            EVENTS.token_revoked("acc_1", "tok_1").version(2).into(),
            EVENTS
                .meeting("acc_1", "mtg_1")
                .series_id(Some("ser_1"))
                .summaries([EVENTS.summary("mtg_1_sum").template_id(Some("tpl_1"))])
                .participants([EVENTS.participant("hum_1").role(Some("host"))])
                .action_items([EVENTS.item("ai_1").status(ActionItemStatus::Done).assignee(Some("hum_1")).completed_at(Some(EVENTS.minute(3)))])
                .into(),
            EVENTS.transcript("acc_1", "mtg_1", "Hello").segment("seg_1", "mic", 0, 10, "Hello").words(Some(vec![EVENTS.word("Hello", 0, 10, "mic")])).into(),
            EVENTS.meeting_deleted("acc_1", "mtg_1").into(),
            EVENTS.action_item("acc_1", EVENTS.item("ai_2").due_at(Some(EVENTS.minute(9)))).into(),
            EVENTS.action_item_deleted("acc_1", "ai_2").into(),
            EVENTS.team("team_1", "Design").plan(Some("business")).into(),
            EVENTS.team_deleted("team_1").into(),
            EVENTS.member("team_1", "acc_1").into(),
            EVENTS.member_removed("team_1", "acc_1").into(),
            EVENTS.share("shr_1", "acc_1").team(Some(("team_1", "Design"))).recipients(["acc_2"]).into(),
            EVENTS.unshared("shr_1").into(),
            EVENTS.team_item("team_1", "tai_1").shared_note("shr_1", "Shared").into(),
            EVENTS.team_item_deleted("team_1", "tai_1").into(),
            EVENTS
                .webhook_endpoint("acc_1", "ep_1", "https://example.com/hooks")
                .key(&[7; 24])
                .types([crate::MessageKind::MeetingCreated])
                .enabled(false)
                .description(Some("CRM"))
                .into(),
            EVENTS.webhook_endpoint_deleted("acc_1", "ep_1").version(2).into(),
        ];
        let types: Vec<&str> = drafts.iter().map(|envelope| envelope.event.type_name()).collect();
        assert_eq!(types, crate::KNOWN_TYPES, "one builder per known type");
        for envelope in drafts {
            let line = envelope.to_line();
            assert_eq!(Envelope::decode(line.as_bytes()).as_ref(), Ok(&envelope), "{line}");
        }
    }

    #[test]
    fn envelope_ids_come_from_the_counter_or_are_random() {
        let first = EVENTS.team_deleted("team_1").envelope().id;
        let second = EVENTS.team_deleted("team_1").envelope().id;
        assert!(first.starts_with("00000000-0000-4000-8000-") && first < second, "{first} {second}");
        let random = EVENTS.with_random_ids().team_deleted("team_1").envelope().id;
        assert_eq!(uuid::Uuid::parse_str(&random).map(|uuid| uuid.get_version_num()), Ok(4));
        assert_eq!(EVENTS.team_deleted("team_1").id("ev_1").envelope().id, "ev_1");
    }

    #[test]
    #[should_panic(expected = "is empty")]
    fn an_empty_identifier_is_refused() {
        let _ = EVENTS.team_deleted("");
    }
}
