//! Every answer the read model gives, for every identifier an event stream mentions,
//! as one text: two read models answer every query the same exactly when their
//! snapshots are equal. The fidelity and crash tests compare snapshots.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use recap_schemas::{ActionItemStatus, Envelope, Event};

use recap_readmodel::words::words;
use recap_readmodel::{ActionItemFilter, MeetingFilter, ReadModel, StoreError};

/// The identifiers and words a stream mentions.
#[derive(Debug, Default, Clone)]
pub struct Universe {
    pub accounts: BTreeSet<String>,
    pub token_hashes: BTreeSet<String>,
    pub meetings: BTreeSet<String>,
    pub series: BTreeSet<String>,
    pub assignees: BTreeSet<String>,
    pub shares: BTreeSet<String>,
    pub teams: BTreeSet<String>,
    pub words: BTreeSet<String>,
}

impl Universe {
    pub fn of(envelopes: &[Envelope]) -> Universe {
        let mut universe = Universe::default();
        for envelope in envelopes {
            match &envelope.event {
                Event::AccountUpserted(event) => {
                    universe.accounts.insert(event.account_id.to_string());
                }
                Event::TokenCreated(event) => {
                    universe.accounts.insert(event.account_id.to_string());
                    universe.token_hashes.insert(event.token_sha256.clone());
                }
                Event::TokenRevoked(event) => {
                    universe.accounts.insert(event.account_id.to_string());
                }
                Event::MeetingUpserted(event) => {
                    universe.accounts.insert(event.account_id.to_string());
                    universe.meetings.insert(event.meeting.id.to_string());
                    universe.series.extend(event.meeting.series_id.as_deref().map(str::to_string));
                    universe.words.extend(words(&event.meeting.title));
                    for item in &event.meeting.action_items {
                        universe.assignees.extend(item.assignee_human_id.as_deref().map(str::to_string));
                    }
                }
                Event::MeetingTranscriptSet(event) => {
                    universe.meetings.insert(event.meeting_id.to_string());
                }
                Event::MeetingDeleted(event) => {
                    universe.meetings.insert(event.meeting_id.to_string());
                }
                Event::ActionItemUpserted(event) => {
                    universe.accounts.insert(event.account_id.to_string());
                    universe.assignees.extend(event.item.assignee_human_id.as_deref().map(str::to_string));
                }
                Event::ActionItemDeleted(_) => {}
                Event::TeamUpserted(event) => {
                    universe.teams.insert(event.team.id.to_string());
                }
                Event::TeamDeleted(event) => {
                    universe.teams.insert(event.team_id.to_string());
                }
                Event::TeamMemberUpserted(event) => {
                    universe.teams.insert(event.team_id.to_string());
                    universe.accounts.insert(event.account_id.to_string());
                }
                Event::TeamMemberRemoved(event) => {
                    universe.teams.insert(event.team_id.to_string());
                    universe.accounts.insert(event.account_id.to_string());
                }
                Event::NoteShared(event) => {
                    universe.shares.insert(event.share.id.to_string());
                    universe.accounts.insert(event.share.owner_account_id.to_string());
                    universe.accounts.extend(event.share.recipient_account_ids.iter().map(|id| id.to_string()));
                    universe.words.extend(words(&event.share.title));
                    if let Some(team) = &event.share.team {
                        universe.teams.insert(team.id.to_string());
                    }
                }
                Event::NoteUnshared(event) => {
                    universe.shares.insert(event.share_id.to_string());
                }
                Event::TeamActionItemUpserted(event) => {
                    universe.teams.insert(event.team_id.to_string());
                }
                Event::TeamActionItemDeleted(event) => {
                    universe.teams.insert(event.team_id.to_string());
                }
                Event::WebhookEndpointUpserted(event) => {
                    universe.accounts.insert(event.account_id.to_string());
                }
                Event::WebhookEndpointDeleted(event) => {
                    universe.accounts.insert(event.account_id.to_string());
                }
            }
        }
        universe
    }
}

/// Pages through a cursor-paginated query with a small page size, so the snapshot also
/// proves that walking pages returns every item exactly once.
const PAGE: usize = 3;

/// The snapshot of everything `universe` can ask.
pub async fn snapshot(readmodel: &ReadModel, universe: &Universe) -> Result<String, StoreError> {
    let mut out = String::new();
    for hash in &universe.token_hashes {
        let _ = writeln!(out, "token {hash}: {:?}", readmodel.token_by_hash(hash).await?);
    }
    for account in &universe.accounts {
        let _ = writeln!(out, "account {account}: {:?}", readmodel.account(account).await?);
        let mut after = None;
        loop {
            let page = readmodel.meetings(account, &MeetingFilter::default(), after.as_deref(), PAGE).await?;
            for row in &page.rows {
                let _ = writeln!(out, "meetings {account}: {}", row.body);
            }
            if !page.has_more {
                break;
            }
            after = page.last_key().map(<[_]>::to_vec);
        }
        for meeting in &universe.meetings {
            let _ = writeln!(out, "meeting {account}/{meeting}: {:?}", readmodel.meeting_detail(account, meeting).await?);
            let _ = writeln!(out, "transcript {account}/{meeting}: {:?}", readmodel.meeting_transcript(account, meeting).await?);
            let _ = writeln!(out, "words {account}/{meeting}: {:?}", readmodel.transcript_words(account, meeting, 0, 500).await?);
        }
        let mut filters: Vec<ActionItemFilter> = vec![ActionItemFilter::default()];
        for status in ActionItemStatus::ALL {
            filters.push(ActionItemFilter { statuses: vec![status], ..ActionItemFilter::default() });
        }
        for assignee in &universe.assignees {
            filters.push(ActionItemFilter { assignee_human_id: Some(assignee.clone()), ..ActionItemFilter::default() });
        }
        for meeting in &universe.meetings {
            filters.push(ActionItemFilter { meeting_id: Some(meeting.clone()), ..ActionItemFilter::default() });
        }
        for filter in &filters {
            let mut after = None;
            loop {
                let page = readmodel.action_items(account, filter, after.as_deref(), PAGE).await?;
                for row in &page.rows {
                    let _ = writeln!(out, "action_items {account} {filter:?}: {}", row.body);
                }
                if !page.has_more {
                    break;
                }
                after = page.last_key().map(<[_]>::to_vec);
            }
        }
        for series in &universe.series {
            let (rows, total) = readmodel.series_meetings(account, series, 0, usize::MAX).await?;
            let bodies: Vec<&str> = rows.iter().map(|row| row.body.as_str()).collect();
            let _ = writeln!(out, "series {account}/{series} ({total}): {bodies:?}");
        }
        let mut queries: Vec<Vec<String>> = vec![Vec::new()];
        queries.extend(universe.words.iter().map(|word| vec![word.clone()]));
        for query in &queries {
            let mut after = None;
            loop {
                let page = readmodel.shared_notes(account, query, after.as_deref(), PAGE).await?;
                for row in &page.rows {
                    let _ = writeln!(out, "shared_notes {account} {query:?}: {}", row.body);
                }
                if !page.has_more {
                    break;
                }
                after = page.last_key().map(<[_]>::to_vec);
            }
            if !query.is_empty() {
                let (rows, total) = readmodel.search_meetings(account, query, 0, usize::MAX).await?;
                let bodies: Vec<&str> = rows.iter().map(|row| row.body.as_str()).collect();
                let _ = writeln!(out, "search_meetings {account} {query:?} ({total}): {bodies:?}");
            }
        }
        for share in &universe.shares {
            let _ = writeln!(out, "shared_note {account}/{share}: {:?}", readmodel.shared_note(account, share).await?);
        }
        let _ = writeln!(out, "teams {account}: {:?}", readmodel.teams(account).await?);
        for team in &universe.teams {
            let _ = writeln!(out, "membership {account}/{team}: {:?}", readmodel.team_membership(account, team).await?);
        }
    }
    for team in &universe.teams {
        let bodies: Vec<String> = readmodel.team_action_items(team, None, 200).await?.into_iter().map(|row| row.body).collect();
        let _ = writeln!(out, "team_action_items {team}: {bodies:?}");
    }
    Ok(out)
}
