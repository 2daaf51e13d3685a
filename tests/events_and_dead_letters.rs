//! The embedded log and dead letters, through the real binary:
//! - `recap events append` refuses a file with a line that is not a JSON object whole,
//!   naming the line, and appends nothing; concurrent appends never interleave lines;
//! - contract rule 5: an invalid event of a known type is dead-lettered with its reason
//!   and offset, kept whole, and never blocks the events behind it;
//! - contract rule 4: unknown types are skipped and counted;
//! - one data dir has one `recap serve`: a second is refused, naming the store in use.

use std::collections::BTreeSet;
use std::process::Command;

use recap_testkit::events::*;
use recap_testkit::process::{append_lines, recap_bin};
use recap_testkit::server::Server;

#[test]
fn append_refuses_a_file_with_a_non_object_line_whole_and_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = account("acc_1", Some("flow"), None, 1).to_line();
    let output = append_lines(dir.path(), &[good.clone(), "[1, 2, 3]".into(), good.clone()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 2") && stderr.contains("not a JSON object"), "{stderr}");
    assert!(std::fs::metadata(dir.path().join("events.log")).map(|m| m.len()).unwrap_or(0) == 0, "nothing was appended");

    let output = append_lines(dir.path(), &[good.clone(), "{\"unterminated\": ".into()]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("line 2"));

    let output = append_lines(dir.path(), &[good.clone(), String::new(), good]);
    assert!(output.status.success(), "blank lines are not events");
    assert_eq!(std::fs::read_to_string(dir.path().join("events.log")).unwrap().lines().count(), 2);
}

#[test]
fn append_reads_standard_input_when_no_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(recap_bin())
        .args(["events", "append", "--data-dir"])
        .arg(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(format!("{}\n", account("acc_1", None, None, 1).to_line()).as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("appended 1 events"));
}

#[test]
fn concurrent_appends_never_interleave_within_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let writers: Vec<_> = (0..6)
        .map(|writer| {
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || {
                // Large lines make a torn write likely if appends were not atomic.
                let lines: Vec<String> = (0..200).map(|index| format!("{{\"writer\":{writer},\"index\":{index},\"pad\":\"{}\"}}", "x".repeat(3000))).collect();
                assert!(append_lines(&path, &lines).status.success());
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let content = std::fs::read_to_string(dir.path().join("events.log")).unwrap();
    let mut seen = BTreeSet::new();
    for line in content.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("every line is whole");
        seen.insert((value["writer"].as_u64().unwrap(), value["index"].as_u64().unwrap()));
    }
    assert_eq!(seen.len(), 6 * 200);
}

#[test]
fn invalid_events_are_dead_lettered_with_reason_and_offset_and_never_block_what_follows() {
    let server = Server::start();
    let valid_before = account("acc_1", Some("flow"), None, 1).to_line();
    let missing_field = envelope("meeting.upserted", 1, serde_json::json!({"account_id": "acc_1"}));
    let bad_timestamp = token_created("acc_1", "tok_1", "svc_pat_x", 1).to_line().replace(&at(0), "20th of September");
    let wrong_type = envelope(
        "team.upserted",
        1,
        serde_json::json!({"team": {"id": 7, "name": "x", "plan": null, "can_collaborate": true, "includes_team_action_items": false}}),
    );
    let not_an_envelope = r#"{"hello": "world"}"#.to_string();
    let unknown_type = envelope("meeting.archived", 1, serde_json::json!({"meeting_id": "m"}));
    let valid_after = meeting("acc_1", "mtg_after", "Still applied", 1, 1).to_line();
    let lines = vec![valid_before, missing_field.clone(), bad_timestamp.clone(), wrong_type.clone(), not_an_envelope.clone(), unknown_type, valid_after];
    server.feed(&lines);

    let progress = server.progress();
    assert_eq!(progress["dead_lettered"], 4);
    assert_eq!(progress["skipped_unknown"], 1, "unknown types are skipped and counted");
    assert_eq!(progress["applied"], 2, "the events after the invalid ones are applied");

    let letters: Vec<serde_json::Value> =
        std::fs::read_to_string(server.data_dir.join("deadletter.jsonl")).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(letters.len(), 4);
    let log = std::fs::read_to_string(server.data_dir.join("events.log")).unwrap();
    for (letter, raw) in letters.iter().zip([&missing_field, &bad_timestamp, &wrong_type, &not_an_envelope]) {
        assert_eq!(letter["raw"].as_str().unwrap(), raw.as_str(), "kept whole");
        let offset = letter["offset"].as_u64().unwrap() as usize;
        assert!(log[offset..].starts_with(raw.as_str()), "the offset points at the line");
        assert_eq!(letter["topic"], "log");
        assert_eq!(letter["partition"], 0);
        assert!(!letter["reason"].as_str().unwrap().is_empty());
    }
    assert!(letters[0]["reason"].as_str().unwrap().contains("missing field `meeting`"), "{}", letters[0]["reason"]);
    assert!(letters[1]["reason"].as_str().unwrap().contains("time zone"), "{}", letters[1]["reason"]);
}

// Rule 5: an invalid event is dead-lettered "kept whole": also a line whose bytes are
// not UTF-8, as an appender killed in the middle of a character leaves behind.
#[test]
fn a_line_that_is_not_utf8_is_dead_lettered_with_its_exact_bytes() {
    let server = Server::start();
    let torn: Vec<u8> = [&br#"{"id":"e1","type":"meeting.upserted","title":"caf"#[..], &[0xC3]].concat();
    {
        use std::io::Write;
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(server.data_dir.join("events.log")).unwrap();
        log.write_all(&torn).unwrap();
    }
    // The next append ends the torn line, which stays a line of its own.
    server.feed(&[account("acc_1", Some("flow"), None, 1)]);
    let progress = server.progress();
    assert_eq!((progress["dead_lettered"].clone(), progress["applied"].clone()), (serde_json::json!(1), serde_json::json!(1)));
    let letters = std::fs::read_to_string(server.data_dir.join("deadletter.jsonl")).unwrap();
    let letter: serde_json::Value = serde_json::from_str(letters.lines().next().unwrap()).unwrap();
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(letter["raw_base64"].as_str().expect("raw_base64")).unwrap();
    assert_eq!(bytes, torn, "kept whole");
    assert_eq!(letter["offset"], 0);
    assert_eq!(letter["reason"], "not UTF-8");
}

/// `recap events dead-letters` over a data dir.
fn dead_letters_of(data_dir: &std::path::Path, format: &str) -> std::process::Output {
    Command::new(recap_bin()).args(["events", "dead-letters", "--format", format, "--data-dir"]).arg(data_dir).output().unwrap()
}

// Rule 5's letters, read back: `recap events dead-letters` prints them oldest first, as
// text (place, the event's id, the reason), as the letters whole, or as the events' exact
// bytes, which once corrected are appended again and applied. The end of a write a crash
// cut short (a line with no end) is named on standard error, and the letters written
// after it are still on lines of their own.
#[test]
fn dead_letters_are_printed_as_text_json_or_raw_events_and_a_corrected_one_is_applied() {
    let mut server = Server::start();
    let letters_file = server.data_dir.join("deadletter.jsonl");
    // Cut short in the middle of a character, as a letter of a non-UTF-8 line (whose
    // `raw` holds U+FFFD) or of any non-ASCII text may be.
    std::fs::write(&letters_file, [&br#"{"topic":"log","partition":0,"offset":0,"reason":"not UTF-8","raw":"caf"#[..], &[0xEF, 0xBF]].concat()).unwrap();
    let bad_timestamp = token_created("acc_1", "tok_1", "svc_pat_x", 1).to_line().replace(&at(0), "20th of September");
    let torn: Vec<u8> = [&br#"{"id":"e1","type":"meeting.upserted","title":"caf"#[..], &[0xC3]].concat();
    server.feed(&[account("acc_1", Some("flow"), None, 1).to_line(), bad_timestamp.clone()]);
    {
        use std::io::Write;
        let mut log = std::fs::OpenOptions::new().append(true).open(server.data_dir.join("events.log")).unwrap();
        log.write_all(&torn).unwrap();
    }
    server.feed(&[meeting("acc_1", "mtg_1", "Kept", 1, 1)]);
    assert_eq!(server.progress()["dead_lettered"], 2);
    let log = std::fs::read(server.data_dir.join("events.log")).unwrap();
    let offset_of = |line: &[u8]| log.windows(line.len()).position(|window| window == line).unwrap();
    let id: String = serde_json::from_str::<serde_json::Value>(&bad_timestamp).unwrap()["id"].as_str().unwrap().to_owned();

    let text = dead_letters_of(&server.data_dir, "text");
    assert!(text.status.success());
    let reason: String = String::from_utf8_lossy(&text.stdout).lines().next().unwrap().rsplit("  ").next().unwrap().to_owned();
    assert!(reason.starts_with("envelope: not an ISO 8601 instant with a time zone"), "{reason}");
    assert_eq!(
        String::from_utf8_lossy(&text.stdout),
        format!("log/0@{}  {id}  {reason}\nlog/0@{}  -  not UTF-8\n", offset_of(bad_timestamp.as_bytes()), offset_of(&torn))
    );
    let stderr = String::from_utf8_lossy(&text.stderr);
    let stderr: Vec<&str> = stderr.lines().collect();
    assert_eq!(stderr.len(), 2, "{stderr:?}");
    assert!(stderr[0].starts_with(&format!("recap events dead-letters: {}: line 1 is not a dead letter (", letters_file.display())), "{stderr:?}");
    assert_eq!(stderr[1], format!("2 dead letters in {}", letters_file.display()));

    // The letters whole, as the file holds them past its torn line.
    let json = dead_letters_of(&server.data_dir, "json");
    let file = std::fs::read(&letters_file).unwrap();
    let kept: Vec<serde_json::Value> =
        file.split(|&byte| byte == b'\n').skip(1).filter(|line| !line.is_empty()).map(|line| serde_json::from_slice(line).unwrap()).collect();
    let printed: Vec<serde_json::Value> = String::from_utf8_lossy(&json.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!((printed.len(), printed), (2, kept));

    // The events' exact bytes, one a line; the first corrected and appended is applied.
    let raw = dead_letters_of(&server.data_dir, "raw");
    assert_eq!(raw.stdout, [bad_timestamp.as_bytes(), b"\n", &torn, b"\n"].concat());
    let corrected = String::from_utf8(raw.stdout.split(|&byte| byte == b'\n').next().unwrap().to_vec()).unwrap().replace("20th of September", &at(0));
    let applied = server.progress()["applied"].as_u64().unwrap();
    server.feed(&[corrected]);
    assert_eq!(server.progress()["applied"].as_u64().unwrap(), applied + 1, "the corrected event is applied");
    assert_eq!(server.progress()["dead_lettered"], 2);

    // The torn line stays; the projector starts again over it, writing no letter twice.
    server.restart();
    server.feed(&[envelope("meeting.upserted", 1, serde_json::json!({"account_id": "acc_1"}))]);
    let text = dead_letters_of(&server.data_dir, "text");
    assert_eq!(String::from_utf8_lossy(&text.stdout).lines().count(), 3, "{}", String::from_utf8_lossy(&text.stdout));
}

#[test]
fn dead_letters_of_a_data_dir_without_any_are_none() {
    let dir = tempfile::tempdir().unwrap();
    let output = dead_letters_of(dir.path(), "text");
    assert!(output.status.success());
    assert_eq!(output.stdout, b"");
    assert_eq!(String::from_utf8_lossy(&output.stderr), format!("0 dead letters in {}\n", dir.path().join("deadletter.jsonl").display()));
    assert!(!dir.path().join("deadletter.jsonl").exists(), "reading creates nothing");
}

#[test]
fn dead_letters_are_not_written_twice_after_a_restart() {
    let mut server = Server::start();
    server.feed(&[envelope("meeting.upserted", 1, serde_json::json!({"account_id": "acc_1"}))]);
    server.restart();
    server.feed(&[account("acc_1", None, None, 1)]);
    let letters = std::fs::read_to_string(server.data_dir.join("deadletter.jsonl")).unwrap();
    assert_eq!(letters.lines().count(), 1);
    assert_eq!(server.progress()["dead_lettered"], 1);
}

#[test]
fn a_second_serve_on_a_data_dir_in_use_is_refused_and_the_first_keeps_serving() {
    let server = Server::builder().embedded().start();
    let mut second = Command::new(recap_bin())
        .args(["serve", "--rest-listen", "127.0.0.1:0", "--mcp-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir"])
        .arg(&server.data_dir)
        .env("RECAP_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = second.kill();
            panic!("a second serve on the same data dir kept running");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!status.success(), "a second serve on the same data dir must exit with an error");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("store.lmdb") && stderr.contains("in use by another process"), "{stderr}");
    server.feed(&[account("acc_1", None, None, 1)]);
    assert_eq!(server.progress()["applied"], 1);
}

#[test]
fn an_unreadable_quota_file_stops_serve_naming_it_and_is_left_as_it_is() {
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let quota_file = data_dir.join("quota-usage.json");
    std::fs::write(&quota_file, b"{not quota counts").unwrap();
    let output = Command::new(recap_bin())
        .args(["serve", "--rest-listen", "127.0.0.1:0", "--mcp-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data_dir)
        .env("RECAP_LOG", "error")
        .output()
        .unwrap();
    assert!(!output.status.success(), "serve must not start over unreadable quota counts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("quota-usage.json") && stderr.contains("left as it is"), "{stderr}");
    assert_eq!(std::fs::read(&quota_file).unwrap(), b"{not quota counts");
}
