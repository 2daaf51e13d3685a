//! The demo world of `recap serve --demo`: a few accounts on different plans, about two
//! hundred meetings with notes, summaries, participants, action items and transcripts,
//! a recurring series, teams, team and direct shares and team action items. It is
//! written as contract events and goes through the same path as any producer's
//! (`recap events append`), so the demo exercises the real projector.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use recap_schemas::build::{Epoch, Events};
use recap_schemas::{ActionItemStatus, Envelope, Timestamp};

/// The events of the demo world and the token to print.
pub struct DemoWorld {
    pub events: Vec<Envelope>,
    /// A personal access token of the demo's main account (flow plan).
    pub token: String,
}

const STATUSES: [ActionItemStatus; 3] = ActionItemStatus::ALL;
const ACCESS: [&str; 3] = ["viewer", "commenter", "editor"];

const TOPICS: &[(&str, &[&str])] = &[
    ("Budget review", &["budget", "forecast", "spend", "hiring plan"]),
    ("Design critique", &["onboarding flow", "typography", "accessibility", "empty states"]),
    ("Customer call: Northwind", &["renewal", "SSO", "export to CSV", "pricing"]),
    ("Incident retro", &["pager fatigue", "database failover", "timeouts", "runbooks"]),
    ("Roadmap planning", &["Q3 goals", "mobile app", "API v2", "search"]),
    ("1:1 with Grace", &["career growth", "feedback", "vacation", "mentoring"]),
    ("Hiring debrief", &["backend candidate", "system design", "culture", "offer"]),
    ("Sales pipeline", &["enterprise deals", "churn", "trials", "Q3 targets"]),
];

const PEOPLE: &[(&str, &str, &str, &str)] = &[
    ("hum_ada", "Ada Lovelace", "ada@example.com", "CTO"),
    ("hum_grace", "Grace Hopper", "grace@example.com", "Staff Engineer"),
    ("hum_linus", "Linus Chen", "linus@example.com", "Product Designer"),
    ("hum_alan", "Alan Turing", "alan@example.com", "Researcher"),
    ("hum_barbara", "Barbara Liskov", "barbara@example.com", "Engineering Manager"),
    ("hum_ken", "Ken Okafor", "ken@northwind.example", "Head of IT"),
];

fn token(rng: &mut impl Rng) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut value = String::from("svc_pat_");
    for _ in 0..32 {
        value.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
    }
    value
}

fn sha256_hex(text: &str) -> String {
    recap_access::token_sha256(text)
}

/// Builds the demo world with times relative to `now_micros`.
pub fn world(now_micros: i64) -> DemoWorld {
    let mut rng = StdRng::from_os_rng();
    let base = now_micros - 200 * 24 * 60 * 60_000_000;
    // Every event is built with times in minutes after `base`, and occurs at its own.
    let build = Events::new(Epoch::from_micros(base)).with_random_ids();
    let at = |minute: i64| build.minute(minute);
    let mut events = Vec::new();
    let anchor = Timestamp(base - 40 * 24 * 60);

    // Accounts on different plans: flow (REST + MCP), enterprise (REST only), none, and
    // a tier that includes neither.
    let accounts =
        [("acc_ada", Some(("flow", None))), ("acc_grace", Some(("enterprise", Some(100_000)))), ("acc_linus", None), ("acc_alan", Some(("starter", None)))];
    let mut main_token = String::new();
    for (index, (account, plan)) in accounts.into_iter().enumerate() {
        let upserted = build.account(account).occurred_at(at(0));
        events.push(match plan {
            Some((tier, api_quota)) => upserted.plan(tier, api_quota, anchor).envelope(),
            None => upserted.envelope(),
        });
        let value = token(&mut rng);
        if index == 0 {
            main_token = value.clone();
        }
        let created = build.token_created(account, format!("tok_{account}"), sha256_hex(&value)).name("demo script").created_at(at(1));
        events.push(created.occurred_at(at(1)).envelope());
    }

    // Ada's meetings: one every day or so, a weekly series among them.
    let mut minute = 60;
    for index in 0..200u32 {
        minute += rng.random_range(600..1_400);
        let (topic, subjects) = TOPICS[index as usize % TOPICS.len()];
        let weekly = index % 7 == 0;
        let title = if weekly { "Weekly sync".to_string() } else { topic.to_string() };
        let meeting_id = format!("mtg_{:04}", index + 1);
        let (started, ended) = (at(minute), at(minute + 45));
        let subject = subjects[rng.random_range(0..subjects.len())];
        let other = subjects[rng.random_range(0..subjects.len())];
        let attendees: Vec<&(&str, &str, &str, &str)> = PEOPLE.iter().filter(|_| rng.random_bool(0.5)).collect();
        let people: Vec<&(&str, &str, &str, &str)> = std::iter::once(&PEOPLE[0]).chain(attendees.into_iter().filter(|person| person.0 != "hum_ada")).collect();
        let participants = people.iter().map(|(human, name, email, job)| {
            let role = (*human == "hum_ada").then_some("host");
            build.participant(human).name(*name).email(*email).role(role).job_title(*job)
        });
        let participants: Vec<_> = participants.collect();
        let mut action_items = Vec::new();
        for item in 0..rng.random_range(0..4u32) {
            let status = STATUSES[rng.random_range(0..3)];
            let assignee = if rng.random_bool(0.8) { Some(people[rng.random_range(0..people.len())].0) } else { None };
            let due_at = rng.random_bool(0.5).then(|| at(minute + 7 * 24 * 60));
            let completed_at = (status == ActionItemStatus::Done).then(|| at(minute + 24 * 60));
            let action_item = build.item(format!("ai_{:04}_{item}", index + 1)).text(format!("Follow up on {subject}")).status(status);
            action_items.push(action_item.assignee(assignee).due_at(due_at).completed_at(completed_at).created_at(at(minute + 50)));
        }
        let note_text = format!("{title}\nAgenda\n{subject}\n{other}\nNotes\nWe discussed {subject} and agreed to revisit {other} next time.");
        let summary_text = format!("Summary\nThe team reviewed {subject}.\nDecisions\nMove forward with {other}.");
        let templated = index % 3 == 0;
        let summary = build
            .summary(format!("doc_{meeting_id}_s"))
            .kind(if templated { "template_output" } else { "summary" })
            .template_id(templated.then_some("tpl_standup"))
            .text(summary_text)
            .times(ended);
        let note = build.note(format!("doc_{meeting_id}_n")).title(&title).text(note_text).created_at(started).updated_at(at(minute + 60));
        let meeting = build
            .meeting("acc_ada", &meeting_id)
            .title(&title)
            .kind(if index % 5 == 0 { "in_person" } else { "call" })
            .started_at(started)
            .ended_at(ended)
            .created_at(started)
            .updated_at(at(minute + 60))
            .series_id(weekly.then_some("ser_weekly"))
            .timezone("Europe/London")
            .note(note)
            .summaries([summary])
            .participants(participants)
            .action_items(action_items);
        events.push(meeting.occurred_at(started).envelope());
        if index % 2 == 0 {
            let sentence = format!("Thanks everyone for joining. Today we cover {subject} and then {other}. Let us start with the numbers.");
            let mut words = Vec::new();
            let mut clock = 0i64;
            for word in sentence.split(' ') {
                let length = 150 + 40 * word.len() as i64;
                words.push(build.word(word, clock, clock + length, if words.len() < 8 { "mic" } else { "speaker" }));
                clock += length + 60;
            }
            let with_words = index % 4 == 0;
            let transcript = build
                .transcript("acc_ada", &meeting_id, sentence)
                .segment("seg_1", "mic", 0, clock / 2, "Thanks everyone for joining.")
                .segment("seg_2", "speaker", clock / 2, clock, format!("Today we cover {subject} and then {other}."))
                .words(with_words.then_some(words));
            events.push(transcript.version(2).occurred_at(ended).envelope());
        }
    }
    // Two meetings deleted after the fact, one retitled.
    events.push(build.meeting_deleted("acc_ada", "mtg_0003").version(3).occurred_at(at(minute + 10)).envelope());
    events.push(build.meeting_deleted("acc_ada", "mtg_0011").version(3).occurred_at(at(minute + 11)).envelope());

    // Grace's own meetings (enterprise plan).
    for index in 0..30u32 {
        let started = at(100 + index as i64 * 2_000);
        let meeting_id = format!("mtg_g{:03}", index + 1);
        let note = build.note(format!("doc_{meeting_id}")).title("Office hours").text("Questions\nLinkers\nLoaders");
        let meeting = build
            .meeting("acc_grace", &meeting_id)
            .title(format!("Compiler office hours #{}", index + 1))
            .series_id(Some("ser_office_hours"))
            .timezone("America/New_York")
            .note(note)
            .times(started);
        events.push(meeting.occurred_at(started).envelope());
    }

    // Standalone action items of Ada's (not from a meeting).
    for index in 0..6u32 {
        let created = at(minute + 20 + index as i64);
        let item = build.item(format!("ai_solo_{index}")).text(format!("Personal follow-up #{}", index + 1)).status(STATUSES[index as usize % 3]);
        events.push(build.action_item("acc_ada", item.created_at(created)).occurred_at(created).envelope());
    }

    // Teams: Design (team action items included), Research (no plan), with members.
    let design = build.team("team_design", "Design").plan(Some("business")).can_collaborate(true).includes_team_action_items(true);
    events.push(design.occurred_at(at(5)).envelope());
    events.push(build.team("team_research", "Research").occurred_at(at(6)).envelope());
    for (version, (team, account)) in
        [("team_design", "acc_ada"), ("team_design", "acc_grace"), ("team_design", "acc_linus"), ("team_research", "acc_ada"), ("team_research", "acc_alan")]
            .into_iter()
            .enumerate()
    {
        events.push(build.member(team, account).occurred_at(at(10 + version as i64)).envelope());
    }

    // Shares: Grace and Linus publish to Design; Grace shares one note with Ada directly;
    // Ada's own share to Design is not under her /shared-notes.
    let mut share_minute = 300;
    for index in 0..24u32 {
        share_minute += 2_000;
        let (owner, owner_name) = if index % 3 == 0 { ("acc_linus", "Linus Chen") } else { ("acc_grace", "Grace Hopper") };
        let (topic, subjects) = TOPICS[(index as usize + 3) % TOPICS.len()];
        let direct = index % 8 == 5;
        let owner = if index == 23 { "acc_ada" } else { owner };
        let owner_name = if index == 23 { "Ada Lovelace" } else { owner_name };
        let share_id = format!("shr_{:03}", index + 1);
        let shared = build
            .share(&share_id, owner)
            .title(format!("{topic} notes"))
            .owner_name(owner_name)
            .access(ACCESS[index as usize % 3])
            .published_at(at(share_minute))
            .team((!direct).then_some(("team_design", "Design")))
            .recipients(if direct { vec!["acc_ada"] } else { vec![] })
            .text(format!("{topic}\nDecisions\nWe agreed on {}.\nSummary\nNext steps for {} were assigned.", subjects[0], subjects[1]));
        events.push(shared.occurred_at(at(share_minute)).envelope());
        if !direct && index % 2 == 0 {
            let item = build
                .team_item("team_design", format!("tai_{:03}", index + 1))
                .text(format!("Prepare {}", subjects[1]))
                .status(STATUSES[index as usize % 3])
                .assignee(["Grace", "Linus", "Ada"][index as usize % 3])
                .owner_name(owner_name)
                .created_at(at(share_minute + 5))
                .shared_note(&share_id, format!("{topic} notes"));
            events.push(item.occurred_at(at(share_minute + 5)).envelope());
        }
    }
    events.push(build.unshared("shr_002").version(2).occurred_at(at(share_minute + 100)).envelope());
    DemoWorld { events, token: main_token }
}

#[cfg(test)]
mod tests {
    use recap_schemas::Event;

    use super::*;

    #[test]
    fn every_demo_event_is_a_valid_contract_event() {
        let demo = world(1_800_000_000_000_000);
        let meetings = demo.events.iter().filter(|envelope| matches!(&envelope.event, Event::MeetingUpserted(event) if event.account_id == "acc_ada")).count();
        assert_eq!(meetings, 200, "about two hundred meetings for the main account");
        for envelope in &demo.events {
            let line = envelope.to_line();
            assert_eq!(recap_schemas::Envelope::decode(line.as_bytes()).as_ref(), Ok(envelope), "{line}");
        }
        assert!(demo.token.starts_with("svc_pat_"));
    }
}
