//! The `recap` binary and what running it as a child takes: where the binary is, a
//! child whose output lines arrive on a channel, events appended to a data dir, and a
//! plain HTTP GET for the operations listeners.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;

use recap_schemas::Envelope;

/// The `recap` binary of the build that made this test executable: next to its
/// `deps` directory (`target/debug/recap` beside `target/debug/deps/<test>`). Test
/// executables of the root package have it built for them; others need
/// `cargo build --bin recap` first.
pub fn recap_bin() -> PathBuf {
    let executable = std::env::current_exe().expect("the test executable's path");
    let profile_dir = executable.parent().and_then(Path::parent).expect("the test executable lies in <target>/<profile>/deps");
    let binary = profile_dir.join("recap");
    assert!(
        binary.is_file(),
        "{} is missing: the cluster world and the black-box harness run the recap binary; build it with `cargo build --bin recap`",
        binary.display()
    );
    binary
}

/// An event as the log and Kafka carry it: one JSON line. Typed events and raw lines
/// (for what the builders cannot express: events that must be refused) alike.
pub trait EventLine {
    fn event_line(&self) -> String;
}

impl EventLine for Envelope {
    fn event_line(&self) -> String {
        self.to_line()
    }
}

impl EventLine for String {
    fn event_line(&self) -> String {
        self.clone()
    }
}

impl EventLine for &str {
    fn event_line(&self) -> String {
        self.to_string()
    }
}

/// `events` as lines in a temporary file, for `recap events append`.
pub fn events_file<E: EventLine>(events: &[E]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    for event in events {
        writeln!(file, "{}", event.event_line()).expect("write events");
    }
    file
}

/// Starts a process whose standard output is piped, and forwards its lines to a
/// channel from a thread, so the process never blocks on a full pipe.
pub fn spawn_with_lines(command: &mut Command) -> std::io::Result<(Child, mpsc::Receiver<String>)> {
    let mut child = command.spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("standard output is not piped"))?;
    Ok((child, lines_of(stdout)))
}

/// The lines of `stream` (a child's piped output), forwarded to a channel from a thread
/// as they come, so the child never blocks on a full pipe.
pub fn lines_of(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// Runs `recap events append --data-dir <dir>` with the events in a temporary file.
pub fn append_lines<E: EventLine>(data_dir: &Path, events: &[E]) -> std::process::Output {
    let file = events_file(events);
    Command::new(recap_bin()).args(["events", "append", "--data-dir"]).arg(data_dir).arg(file.path()).output().expect("run recap events append")
}

/// A GET with a bearer token; any status is a response (no error on 4xx/5xx).
pub fn get(url: &str, token: Option<&str>) -> (u16, Vec<(String, String)>, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut request = agent.get(url);
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().iter().map(|(name, value)| (name.as_str().to_string(), value.to_str().unwrap_or_default().to_string())).collect();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    (status, headers, body)
}
