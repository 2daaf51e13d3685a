//! The demo world of `recap serve --demo`: a few accounts on different plans, about two
//! hundred meetings with notes, summaries, participants, action items and transcripts,
//! a recurring series, teams, team and direct shares and team action items. It is
//! written as contract events and goes through the same path as any producer's
//! (`recap events append`), so the demo exercises the real projector.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// The events of the demo world, one JSON line each, and the token to print.
pub struct DemoWorld {
    pub lines: Vec<String>,
    /// A personal access token of the demo's main account (flow plan).
    pub token: String,
}

struct Writer {
    lines: Vec<String>,
    sequence: u64,
}

impl Writer {
    fn event(&mut self, event_type: &str, version: u64, occurred_at: &str, data: Value) {
        self.sequence += 1;
        let envelope = json!({
            "id": uuid::Uuid::new_v4().to_string(),
            "type": event_type,
            "version": version,
            "occurred_at": occurred_at,
            "data": data,
        });
        self.lines.push(envelope.to_string());
    }
}

const STATUSES: [&str; 3] = ["todo", "in_progress", "done"];
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

fn at(base_micros: i64, offset_minutes: i64) -> String {
    recap_schemas::Timestamp(base_micros + offset_minutes * 60_000_000).to_rfc3339()
}

fn sha256_hex(text: &str) -> String {
    recap_access::token_sha256(text)
}

/// Builds the demo world with times relative to `now_micros`.
pub fn world(now_micros: i64) -> DemoWorld {
    let mut rng = StdRng::from_os_rng();
    let mut writer = Writer { lines: Vec::new(), sequence: 0 };
    let base = now_micros - 200 * 24 * 60 * 60_000_000;
    let anchor = at(base - 40 * 24 * 60, 0);

    // Accounts on different plans: flow (REST + MCP), enterprise (REST only), none, and
    // a tier that includes neither.
    let accounts = [
        ("acc_ada", json!({"tier": "flow", "api_quota": null, "billing_cycle_anchor": anchor})),
        ("acc_grace", json!({"tier": "enterprise", "api_quota": 100000, "billing_cycle_anchor": anchor})),
        ("acc_linus", Value::Null),
        ("acc_alan", json!({"tier": "starter", "api_quota": null, "billing_cycle_anchor": anchor})),
    ];
    let mut main_token = String::new();
    for (index, (account, plan)) in accounts.iter().enumerate() {
        writer.event("account.upserted", 1, &at(base, 0), json!({"account_id": account, "plan": plan}));
        let value = token(&mut rng);
        if index == 0 {
            main_token = value.clone();
        }
        writer.event(
            "token.created",
            1,
            &at(base, 1),
            json!({"account_id": account, "token_id": format!("tok_{account}"), "name": "demo script",
                   "token_sha256": sha256_hex(&value), "created_at": at(base, 1)}),
        );
    }

    // Ada's meetings: one every day or so, a weekly series among them.
    let mut minute = 60;
    for index in 0..200u32 {
        minute += rng.random_range(600..1_400);
        let (topic, subjects) = TOPICS[index as usize % TOPICS.len()];
        let weekly = index % 7 == 0;
        let title = if weekly { "Weekly sync".to_string() } else { topic.to_string() };
        let meeting_id = format!("mtg_{:04}", index + 1);
        let started = at(base, minute);
        let ended = at(base, minute + 45);
        let subject = subjects[rng.random_range(0..subjects.len())];
        let other = subjects[rng.random_range(0..subjects.len())];
        let attendees: Vec<&(&str, &str, &str, &str)> = PEOPLE.iter().filter(|_| rng.random_bool(0.5)).collect();
        let participants: Vec<Value> = std::iter::once(&PEOPLE[0])
            .chain(attendees.into_iter().filter(|person| person.0 != "hum_ada"))
            .map(|(human, name, email, job)| json!({"human_id": human, "name": name, "email": email, "role": if *human == "hum_ada" { json!("host") } else { Value::Null }, "job_title": job}))
            .collect();
        let assignees: Vec<&str> = participants.iter().filter_map(|p| p["human_id"].as_str()).collect();
        let mut action_items = Vec::new();
        for item in 0..rng.random_range(0..4u32) {
            let status = STATUSES[rng.random_range(0..3)];
            let assignee = if rng.random_bool(0.8) { json!(assignees[rng.random_range(0..assignees.len())]) } else { Value::Null };
            action_items.push(json!({
                "id": format!("ai_{:04}_{item}", index + 1),
                "text": format!("Follow up on {subject}"),
                "status": status,
                "assignee_human_id": assignee,
                "due_at": if rng.random_bool(0.5) { json!(at(base, minute + 7 * 24 * 60)) } else { Value::Null },
                "completed_at": if status == "done" { json!(at(base, minute + 24 * 60)) } else { Value::Null },
                "created_at": at(base, minute + 50),
            }));
        }
        let note_text = format!("{title}\nAgenda\n{subject}\n{other}\nNotes\nWe discussed {subject} and agreed to revisit {other} next time.");
        let summary_text = format!("Summary\nThe team reviewed {subject}.\nDecisions\nMove forward with {other}.");
        let meeting = json!({
            "id": meeting_id, "title": title, "kind": if index % 5 == 0 { "in_person" } else { "call" }, "status": "done",
            "started_at": started, "ended_at": ended, "created_at": started, "updated_at": at(base, minute + 60),
            "series_id": if weekly { json!("ser_weekly") } else { Value::Null },
            "timezone": "Europe/London", "language": "en",
            "note": {"id": format!("doc_{meeting_id}_n"), "kind": "note", "title": title, "template_id": null,
                     "text": note_text, "created_at": started, "updated_at": at(base, minute + 60)},
            "summaries": [{"id": format!("doc_{meeting_id}_s"), "kind": if index % 3 == 0 { "template_output" } else { "summary" },
                           "title": "Summary", "template_id": if index % 3 == 0 { json!("tpl_standup") } else { Value::Null },
                           "text": summary_text, "created_at": ended, "updated_at": ended}],
            "participants": participants,
            "action_items": action_items,
        });
        writer.event("meeting.upserted", 1, &started, json!({"account_id": "acc_ada", "meeting": meeting}));
        if index % 2 == 0 {
            let sentence = format!("Thanks everyone for joining. Today we cover {subject} and then {other}. Let us start with the numbers.");
            let mut words = Vec::new();
            let mut clock = 0i64;
            for word in sentence.split(' ') {
                let length = 150 + 40 * word.len() as i64;
                words.push(json!({"text": word, "start_ms": clock, "end_ms": clock + length, "track": if words.len() < 8 { "mic" } else { "speaker" }}));
                clock += length + 60;
            }
            let with_words = index % 4 == 0;
            writer.event(
                "meeting.transcript_set",
                2,
                &ended,
                json!({"account_id": "acc_ada", "meeting_id": meeting_id, "transcript": {
                    "text": sentence,
                    "segments": [{"id": "seg_1", "track": "mic", "start_ms": 0, "end_ms": clock / 2, "text": "Thanks everyone for joining."},
                                 {"id": "seg_2", "track": "speaker", "start_ms": clock / 2, "end_ms": clock, "text": format!("Today we cover {subject} and then {other}.")}],
                    "words": if with_words { json!(words) } else { Value::Null }}}),
            );
        }
    }
    // Two meetings deleted after the fact, one retitled.
    writer.event("meeting.deleted", 3, &at(base, minute + 10), json!({"account_id": "acc_ada", "meeting_id": "mtg_0003"}));
    writer.event("meeting.deleted", 3, &at(base, minute + 11), json!({"account_id": "acc_ada", "meeting_id": "mtg_0011"}));

    // Grace's own meetings (enterprise plan).
    for index in 0..30u32 {
        let started = at(base, 100 + index as i64 * 2_000);
        let meeting_id = format!("mtg_g{:03}", index + 1);
        writer.event(
            "meeting.upserted",
            1,
            &started,
            json!({"account_id": "acc_grace", "meeting": {
                "id": meeting_id, "title": format!("Compiler office hours #{}", index + 1), "kind": "call", "status": "done",
                "started_at": started, "ended_at": started, "created_at": started, "updated_at": started, "series_id": "ser_office_hours",
                "timezone": "America/New_York", "language": "en",
                "note": {"id": format!("doc_{meeting_id}"), "kind": "note", "title": "Office hours", "template_id": null,
                         "text": "Questions\nLinkers\nLoaders", "created_at": started, "updated_at": started},
                "summaries": [], "participants": [], "action_items": []}}),
        );
    }

    // Standalone action items of Ada's (not from a meeting).
    for index in 0..6u32 {
        writer.event(
            "action_item.upserted",
            1,
            &at(base, minute + 20 + index as i64),
            json!({"account_id": "acc_ada", "item": {"id": format!("ai_solo_{index}"), "text": format!("Personal follow-up #{}", index + 1),
                   "status": STATUSES[index as usize % 3], "assignee_human_id": null, "due_at": null,
                   "completed_at": null, "created_at": at(base, minute + 20 + index as i64)}}),
        );
    }

    // Teams: Design (team action items included), Research (no plan), with members.
    writer.event(
        "team.upserted",
        1,
        &at(base, 5),
        json!({"team": {"id": "team_design", "name": "Design", "plan": "business", "can_collaborate": true, "includes_team_action_items": true}}),
    );
    writer.event(
        "team.upserted",
        1,
        &at(base, 6),
        json!({"team": {"id": "team_research", "name": "Research", "plan": null, "can_collaborate": false, "includes_team_action_items": false}}),
    );
    for (version, (team, account)) in
        [("team_design", "acc_ada"), ("team_design", "acc_grace"), ("team_design", "acc_linus"), ("team_research", "acc_ada"), ("team_research", "acc_alan")]
            .into_iter()
            .enumerate()
    {
        writer.event("team_member.upserted", 1, &at(base, 10 + version as i64), json!({"team_id": team, "account_id": account, "role": "member"}));
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
        writer.event(
            "note.shared",
            1,
            &at(base, share_minute),
            json!({"share": {
                "id": format!("shr_{:03}", index + 1), "title": format!("{topic} notes"), "owner_account_id": owner, "owner_name": owner_name,
                "access": ACCESS[index as usize % 3], "published_at": at(base, share_minute),
                "team": if direct { Value::Null } else { json!({"id": "team_design", "name": "Design"}) },
                "recipient_account_ids": if direct { json!(["acc_ada"]) } else { json!([]) },
                "text": format!("{topic}\nDecisions\nWe agreed on {}.\nSummary\nNext steps for {} were assigned.", subjects[0], subjects[1])}}),
        );
        if !direct && index % 2 == 0 {
            writer.event(
                "team_action_item.upserted",
                1,
                &at(base, share_minute + 5),
                json!({"team_id": "team_design", "item": {
                    "id": format!("tai_{:03}", index + 1), "text": format!("Prepare {}", subjects[1]),
                    "status": STATUSES[index as usize % 3], "due_at": null,
                    "assignee": (["Grace", "Linus", "Ada"][index as usize % 3]), "owner_name": owner_name,
                    "created_at": at(base, share_minute + 5),
                    "shared_note": {"id": format!("shr_{:03}", index + 1), "title": format!("{topic} notes")}}}),
            );
        }
    }
    writer.event("note.unshared", 2, &at(base, share_minute + 100), json!({"share_id": "shr_002"}));
    let _ = writer.sequence;
    DemoWorld { lines: writer.lines, token: main_token }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_demo_event_is_a_valid_contract_event() {
        let demo = world(1_800_000_000_000_000);
        let meetings = demo.lines.iter().filter(|line| line.contains("\"type\":\"meeting.upserted\"") && line.contains("acc_ada")).count();
        assert_eq!(meetings, 200, "about two hundred meetings for the main account");
        for line in &demo.lines {
            recap_schemas::Envelope::decode(line.as_bytes()).unwrap_or_else(|error| panic!("{error}: {line}"));
        }
        assert!(demo.token.starts_with("svc_pat_"));
    }
}
