//! The projection: events in, row writes out, written once for both drivers.
//!
//! The contract's rules live here:
//! 1. last version wins per entity: every entity's last applied version is kept in
//!    `projection_entities`; an event at or below it changes nothing;
//! 2. deletes shadow: a delete keeps the entity's version, so an older upsert arriving
//!    later is stale, and a higher one brings it back;
//! 3. unknown fields are ignored by the types (`recap-schemas`).
//!
//! Rows owned by one entity are written with the entity's version as timestamp; rows
//! derived from several (what a member sees of a team) with the event's stream
//! position; both drivers keep newest-timestamp-wins with shadowing tombstones.
//!
//! Visibility is decided here, not at read time: a share is materialised into the
//! partitions of every account that may see it (the team's current members and the
//! direct recipients, never the owner), and withdrawn when a member leaves, the team is
//! deleted or the share is withdrawn. Reads then stay one partition, O(page).
//!
//! A [`Batch`] accumulates the writes of many events and reads its own writes, so a
//! whole batch commits as one atomic write together with the stream position.
//!
//! Messages are derived here too, while applying (`announce`): every change an account
//! can see becomes one [`crate::messages::AccountMessage`], collected by the batch
//! ([`Batch::take_messages`]) and published by the projector once the batch's rows are
//! written. What each account last saw of an entity is kept, as digests, in the
//! entity's state, so a change nobody can see (a stale or repeated event, an update
//! that renders the same) announces nothing.
//!
//! One file per group of rules: `batch` (the overlay and the commit), `entities`
//! (rules 1 and 2 per entity), `accounts`, `meetings`, `teams`, `shares` and
//! `endpoints` (each event type's own rules), `rows` (what each snapshot becomes in the
//! tables), `announce` (the messages).

mod accounts;
mod announce;
mod batch;
mod endpoints;
mod entities;
mod meetings;
mod rows;
mod shares;
mod teams;

use recap_schemas::{Envelope, Event};

use crate::driver::StoreError;

pub use batch::{Batch, Frozen, OUTBOX_SOURCE};
pub use rows::{action_item_rows, meeting_rows, transcript_rows, RowKey, RowWrite};

use batch::Stamp;

/// What applying one event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The event changed the read model.
    Applied,
    /// The event was at or below its entity's last version: nothing changed.
    Stale,
}

impl Batch {
    /// Applies one event at `position` of its stream partition.
    pub async fn apply(&mut self, envelope: &Envelope, position: i64) -> Result<Applied, StoreError> {
        self.begin_event(batch::Source { event_id: envelope.id.to_string(), occurred_at: envelope.occurred_at });
        let version = envelope.version;
        let stamp = Stamp { version: version as i64, position };
        match &envelope.event {
            Event::AccountUpserted(event) => self.account_upserted(event, version, stamp).await,
            Event::TokenCreated(event) => self.token_created(event, version, stamp).await,
            Event::TokenRevoked(event) => self.token_revoked(event, version, stamp).await,
            Event::MeetingUpserted(event) => self.meeting_upserted(event, version, stamp).await,
            Event::MeetingDeleted(event) => self.meeting_deleted(event, version, stamp).await,
            Event::MeetingTranscriptSet(event) => self.transcript_set(event, version, stamp).await,
            Event::ActionItemUpserted(event) => self.action_item_upserted(event, version, stamp).await,
            Event::ActionItemDeleted(event) => self.action_item_deleted(event, version, stamp).await,
            Event::TeamUpserted(event) => self.team_upserted(event, version, stamp).await,
            Event::TeamDeleted(event) => self.team_deleted(event, version, stamp).await,
            Event::TeamMemberUpserted(event) => self.member_upserted(event, version, stamp).await,
            Event::TeamMemberRemoved(event) => self.member_removed(event, version, stamp).await,
            Event::NoteShared(event) => self.note_shared(event, version, stamp).await,
            Event::NoteUnshared(event) => self.note_unshared(event, version, stamp).await,
            Event::TeamActionItemUpserted(event) => self.team_action_item_upserted(event, version, stamp).await,
            Event::TeamActionItemDeleted(event) => self.team_action_item_deleted(event, version, stamp).await,
            Event::WebhookEndpointUpserted(event) => self.endpoint_upserted(event, version, stamp).await,
            Event::WebhookEndpointDeleted(event) => self.endpoint_deleted(event, version, stamp).await,
        }
    }
}
