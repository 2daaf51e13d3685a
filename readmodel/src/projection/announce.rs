//! Messages: what the projection announces while it applies events (`docs/webhooks.md`,
//! "Messages"). A message is derived from what an account can see, never from the event
//! alone: each entity's state keeps, per subscriber, a digest of what was last
//! announced (`EntityState::seen`), and a change is announced only when what the
//! account sees differs from it. A stale or repeated event therefore announces nothing
//! (it changes no state), nor does an update that renders the same entry, and the
//! owner of a share never hears of it (it is in nobody's audience but the recipients').
//!
//! `data` holds the ids and, for what the account can still see, the resource's REST
//! list entry as the account's own rows hold it; never a transcript's text.

use std::collections::BTreeSet;

use recap_schemas::{ActionItem, Meeting, Share};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::driver::StoreError;
use crate::messages::{raw_json, raw_text, AccountMessage, Message, MessageKind};
use crate::views::{self, render};

use super::batch::{Batch, Stamp};
use super::entities::{EntityKind, EntityState};

/// The digest kept of a rendered entry: 16 bytes of its SHA-256, in hex.
pub(super) fn digest(rendered: &str) -> String {
    hex::encode(&Sha256::digest(rendered.as_bytes())[..16])
}

/// Message data `{"<id_key>": id, "<entry_key>": entry}`, `entry` a list entry as
/// rendered (JSON by construction, `null` for none) and embedded as it is: never read
/// into a value and written again. The keys are plain names.
fn entry_data(id_key: &str, id: &str, entry_key: &str, entry: &str) -> Box<RawValue> {
    let id = serde_json::to_string(id).unwrap_or_default();
    raw_text(format!("{{\"{id_key}\":{id},\"{entry_key}\":{entry}}}"))
}

/// What a meeting's state keeps for a transcript's message, applied later: its list
/// entry, as rendered.
#[derive(Deserialize)]
struct KeptEntry<'a> {
    #[serde(borrow)]
    entry: &'a RawValue,
}

/// What a transcript's state keeps: the digest of the transcript last applied.
#[derive(Serialize, Deserialize)]
struct KeptDigest {
    digest: String,
}

/// Keys of `EntityState::seen`.
pub(super) const SEEN_MEETING: &str = "meeting";
pub(super) const SEEN_NOTES: &str = "notes_ready";
pub(super) const SEEN_TRANSCRIPT: &str = "transcript";
pub(super) const SEEN_ITEM: &str = "item";
pub(super) const SEEN_TEAM: &str = "team";

fn item_key(item_id: &str) -> String {
    format!("item:{item_id}")
}

/// Whether a meeting has notes to read: a note with text, or a summary.
fn has_notes(meeting: &Meeting) -> bool {
    !meeting.note.text.is_empty() || !meeting.summaries.is_empty()
}

/// What changed for a subscriber whose last-seen digest is `seen` and who now sees
/// `now` (None: nothing).
pub(super) enum Change {
    Appeared,
    Changed,
    Gone,
}

pub(super) fn change(seen: Option<&String>, now: Option<&str>) -> Option<Change> {
    match (seen, now) {
        (None, Some(_)) => Some(Change::Appeared),
        (Some(seen), Some(now)) if *seen != now => Some(Change::Changed),
        (Some(_), None) => Some(Change::Gone),
        _ => None,
    }
}

impl Batch {
    /// Announces `kind` of `resource_id` to `account_id`, from the event being applied.
    pub(super) fn announce(&mut self, account_id: &str, kind: MessageKind, resource_id: &str, data: Value) {
        self.announce_data(account_id, kind, resource_id, raw_json(&data));
    }

    /// [`Self::announce`] with the data as JSON text already.
    fn announce_data(&mut self, account_id: &str, kind: MessageKind, resource_id: &str, data: Box<RawValue>) {
        let message = Message::with_data(&self.source.event_id, account_id, kind, resource_id, self.source.occurred_at, data);
        self.messages.push(AccountMessage { account_id: account_id.to_owned(), message });
    }

    // ---- meetings and their action items -----------------------------------------

    /// The messages of a meeting's new snapshot for its owner: created or updated (its
    /// list entry changed), notes_ready the first time it has notes, transcript_ready
    /// for a transcript applied before the meeting was visible, and its action items
    /// created, updated or deleted, item by item. `seen` is the meeting state's.
    pub(super) async fn announce_meeting(&mut self, account_id: &str, meeting: &Meeting, state: &mut EntityState, stamp: Stamp) -> Result<(), StoreError> {
        let meeting_id: &str = &meeting.id;
        let entry = render(&views::MeetingListEntry::of(meeting));
        let entry_digest = digest(&entry);
        let data = entry_data("meeting_id", meeting_id, "meeting", &entry);
        let appeared = !state.seen.contains_key(SEEN_MEETING);
        match change(state.seen.get(SEEN_MEETING), Some(&entry_digest)) {
            Some(Change::Appeared) => self.announce_data(account_id, MessageKind::MeetingCreated, meeting_id, data.clone()),
            Some(Change::Changed) => self.announce_data(account_id, MessageKind::MeetingUpdated, meeting_id, data.clone()),
            _ => {}
        }
        state.seen.insert(SEEN_MEETING.into(), entry_digest);
        // What a transcript's message, applied later, carries of its meeting.
        state.data = Some(raw_text(format!("{{\"entry\":{entry}}}")));
        if has_notes(meeting) && !state.seen.contains_key(SEEN_NOTES) {
            self.announce_data(account_id, MessageKind::MeetingNotesReady, meeting_id, data.clone());
            state.seen.insert(SEEN_NOTES.into(), String::new());
        }
        if appeared {
            self.announce_waiting_transcript(account_id, meeting_id, &data, stamp).await?;
        }
        let items: Vec<(String, String)> =
            meeting.action_items.iter().map(|item| (item.id.to_string(), render(&views::ActionItemListEntry::of(item, Some(meeting))))).collect();
        let current: BTreeSet<String> = items.iter().map(|(id, _)| item_key(id)).collect();
        for (item_id, entry) in &items {
            self.announce_item(account_id, item_id, Some(meeting_id), Some(entry), state, &item_key(item_id));
        }
        let gone: Vec<String> = state.seen.keys().filter(|key| key.starts_with("item:") && !current.contains(*key)).cloned().collect();
        for key in gone {
            let item_id = key.trim_start_matches("item:").to_owned();
            self.announce_item(account_id, &item_id, Some(meeting_id), None, state, &key);
        }
        Ok(())
    }

    /// The messages of a meeting's delete for its owner: meeting.deleted and its items'
    /// action_item.deleted, when it was visible. Its state forgets what was seen, so a
    /// meeting brought back is announced anew.
    pub(super) fn announce_meeting_deleted(&mut self, account_id: &str, meeting_id: &str, state: &mut EntityState) {
        let items: Vec<String> = state.seen.keys().filter(|key| key.starts_with("item:")).cloned().collect();
        for key in items {
            let item_id = key.trim_start_matches("item:").to_owned();
            self.announce_item(account_id, &item_id, Some(meeting_id), None, state, &key);
        }
        if state.seen.contains_key(SEEN_MEETING) {
            self.announce(account_id, MessageKind::MeetingDeleted, meeting_id, json!({ "meeting_id": meeting_id }));
        }
        state.seen.clear();
    }

    /// An action item's message, if what its owner sees of it changed: `entry` is its
    /// list entry now (None: gone). The digest is kept under `key` of `state`.
    pub(super) fn announce_item(&mut self, account_id: &str, item_id: &str, meeting_id: Option<&str>, entry: Option<&str>, state: &mut EntityState, key: &str) {
        let now = entry.map(digest);
        match change(state.seen.get(key), now.as_deref()) {
            Some(Change::Appeared) => self.announce_data(
                account_id,
                MessageKind::ActionItemCreated,
                item_id,
                entry_data("action_item_id", item_id, "action_item", entry.unwrap_or("null")),
            ),
            Some(Change::Changed) => self.announce_data(
                account_id,
                MessageKind::ActionItemUpdated,
                item_id,
                entry_data("action_item_id", item_id, "action_item", entry.unwrap_or("null")),
            ),
            Some(Change::Gone) => {
                self.announce(account_id, MessageKind::ActionItemDeleted, item_id, json!({ "action_item_id": item_id, "meeting_id": meeting_id }))
            }
            None => {}
        }
        match now {
            Some(now) => state.seen.insert(key.to_owned(), now),
            None => state.seen.remove(key),
        };
    }

    /// A standalone action item's message for its owner (`item` None: deleted).
    pub(super) fn announce_standalone_item(&mut self, account_id: &str, item_id: &str, item: Option<&ActionItem>, state: &mut EntityState) {
        let entry = item.map(|item| render(&views::ActionItemListEntry::of(item, None)));
        self.announce_item(account_id, item_id, None, entry.as_deref(), state, SEEN_ITEM);
    }

    // ---- transcripts ----------------------------------------------------------------

    /// meeting.transcript_ready for a transcript just applied (its digest `applied`,
    /// kept in the transcript's state), when its meeting is visible; otherwise it waits
    /// for the meeting ([`Self::announce_waiting_transcript`]).
    pub(super) async fn announce_transcript(
        &mut self,
        account_id: &str,
        meeting_id: &str,
        transcript: &mut EntityState,
        applied: String,
        earlier_form: Option<String>,
    ) -> Result<(), StoreError> {
        transcript.data = serde_json::value::to_raw_value(&KeptDigest { digest: applied.clone() }).ok();
        let meeting = self.entity(EntityKind::Meeting, meeting_id).await?.unwrap_or_default();
        let kept = meeting.data.as_deref().and_then(|data| serde_json::from_str::<KeptEntry<'_>>(data.get()).ok());
        let Some(kept) = kept.filter(|_| !meeting.deleted && meeting.seen.contains_key(SEEN_MEETING)) else {
            return Ok(());
        };
        let seen = transcript.seen.get(SEEN_TRANSCRIPT);
        if seen == Some(&applied) {
            return Ok(());
        }
        // Told under the digest's earlier form (of the first row only): the same
        // transcript, as far as that form can tell, is not told again.
        if seen.is_none() || seen != earlier_form.as_ref() {
            let data = entry_data("meeting_id", meeting_id, "meeting", kept.entry.get());
            self.announce_data(account_id, MessageKind::MeetingTranscriptReady, meeting_id, data);
        }
        transcript.seen.insert(SEEN_TRANSCRIPT.into(), applied);
        Ok(())
    }

    /// meeting.transcript_ready for a transcript applied while its meeting was not
    /// visible yet, once it is.
    async fn announce_waiting_transcript(&mut self, account_id: &str, meeting_id: &str, data: &RawValue, stamp: Stamp) -> Result<(), StoreError> {
        let Some(mut transcript) = self.entity(EntityKind::Transcript, meeting_id).await? else { return Ok(()) };
        if transcript.rows.is_empty() {
            return Ok(());
        }
        let Some(applied) = transcript.data.as_deref().and_then(|data| serde_json::from_str::<KeptDigest>(data.get()).ok()).map(|kept| kept.digest) else {
            return Ok(());
        };
        if transcript.seen.get(SEEN_TRANSCRIPT) == Some(&applied) {
            return Ok(());
        }
        self.announce_data(account_id, MessageKind::MeetingTranscriptReady, meeting_id, data.to_owned());
        transcript.seen.insert(SEEN_TRANSCRIPT.into(), applied);
        self.save_entity(EntityKind::Transcript, meeting_id, transcript, stamp);
        Ok(())
    }

    // ---- shares -------------------------------------------------------------------

    /// Brings what each account was told of a share in line with who sees it now:
    /// received for an account that gains sight of it, updated for one that keeps it and
    /// sees another list entry, withdrawn for one that loses it. `share` None: withdrawn
    /// from everyone. Saves the share's state at `stamp`.
    pub(super) async fn announce_share(&mut self, share_id: &str, share: Option<&Share>, stamp: Stamp) -> Result<(), StoreError> {
        let Some(mut state) = self.entity(EntityKind::Share, share_id).await? else { return Ok(()) };
        let (audience, entry) = match share {
            Some(share) => (self.audience(share).await?, Some(render(&views::SharedNoteListEntry::of(share)))),
            None => (BTreeSet::new(), None),
        };
        let now = entry.as_deref().map(digest);
        let accounts: BTreeSet<String> = state.seen.keys().cloned().chain(audience.iter().cloned()).collect();
        // The same data for every account that receives it or sees it change, made once
        // the first such account is met (a change no account sees makes none).
        let received = std::cell::OnceCell::new();
        let received = || received.get_or_init(|| entry_data("share_id", share_id, "shared_note", entry.as_deref().unwrap_or("null"))).clone();
        let mut changed = false;
        for account in accounts {
            let sees = now.as_deref().filter(|_| audience.contains(&account));
            match change(state.seen.get(&account), sees) {
                Some(Change::Appeared) => self.announce_data(&account, MessageKind::SharedNoteReceived, share_id, received()),
                Some(Change::Changed) => self.announce_data(&account, MessageKind::SharedNoteUpdated, share_id, received()),
                Some(Change::Gone) => self.announce(&account, MessageKind::SharedNoteWithdrawn, share_id, json!({ "share_id": share_id })),
                None => continue,
            }
            changed = true;
            match sees {
                Some(sees) => state.seen.insert(account, sees.to_owned()),
                None => state.seen.remove(&account),
            };
        }
        if changed {
            self.save_entity(EntityKind::Share, share_id, state, stamp);
        }
        Ok(())
    }

    // ---- teams --------------------------------------------------------------------

    /// team.joined or team.left for a member, when whether they see the team changed:
    /// `team` is its GET /teams entry as the member sees it now (None: not at all).
    pub(super) fn announce_membership(&mut self, account_id: &str, team_id: &str, team: Option<&views::TeamView>, member: &mut EntityState) -> bool {
        let was = member.seen.contains_key(SEEN_TEAM);
        match (was, team) {
            (false, Some(team)) => {
                self.announce(account_id, MessageKind::TeamJoined, team_id, json!({ "team_id": team_id, "team": team }));
                member.seen.insert(SEEN_TEAM.into(), String::new());
                true
            }
            (true, None) => {
                self.announce(account_id, MessageKind::TeamLeft, team_id, json!({ "team_id": team_id }));
                member.seen.remove(SEEN_TEAM);
                true
            }
            _ => false,
        }
    }
}
