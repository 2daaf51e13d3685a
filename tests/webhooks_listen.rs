//! `recap listen`, the webhook receiver for development (docs/webhooks.md "Try it
//! locally"), through the real binary:
//!
//! - beside `recap serve`, it prints every message delivered to it, verified with the
//!   endpoint's secret by the Standard Webhooks reference library, the body as the feed
//!   holds it;
//! - answering 503, it sees recap retry the same `webhook-id`, marked `again`;
//! - it refuses with 400, and a reason on standard error, a delivery signed by another
//!   secret, a tampered body, a timestamp more than five minutes away and missing
//!   headers; it takes either secret of a rotation; it answers a GET 405;
//! - no secret reaches its output.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use recap_testkit::events::*;
use recap_testkit::process::{get, lines_of, recap_bin};
use recap_testkit::server::Server;
use recap_webhooks::signing;
use serde_json::Value;

const WITHIN: Duration = Duration::from_secs(30);
const SECRET: &str = "whsec_bGlzdGVuLXRlc3Qta2V5LW9mLTMyLWJ5dGVzLW9rPw==";
const PREVIOUS: &str = "whsec_cHJldmlvdXMtc2VjcmV0LWtleS0zMi1ieXRlcy1vaz8=";
const FOREIGN: &str = "whsec_Zm9yZWlnbi1zZWNyZXQta2V5LTMyLWJ5dGVzLW9rPz8=";

/// A running `recap listen`: its address, and its output lines as they come.
struct Listen {
    child: Child,
    url: String,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    /// Every line read so far, both streams, to check for secrets at the end.
    seen: Vec<String>,
}

impl Listen {
    /// Starts `recap listen` on a free port with `secrets` (given as the environment
    /// variable, comma-separated) and `args`.
    fn start(secrets: &[&str], args: &[&str]) -> Listen {
        let mut child = Command::new(recap_bin())
            .args(["listen", "--address", "127.0.0.1:0"])
            .args(args)
            .env("RECAP_LISTEN_SECRET", secrets.join(","))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start recap listen");
        let stdout = lines_of(child.stdout.take().expect("piped"));
        let stderr = lines_of(child.stderr.take().expect("piped"));
        let first = stderr.recv_timeout(WITHIN).expect("recap listen prints its address");
        let url = first.split_whitespace().find(|word| word.starts_with("http://")).unwrap_or_else(|| panic!("no address in {first:?}")).to_owned();
        Listen { child, url, stdout, stderr, seen: vec![first] }
    }

    /// The next line of standard output.
    fn next_line(&mut self) -> String {
        let line = self.stdout.recv_timeout(WITHIN).expect("a line from recap listen");
        self.seen.push(line.clone());
        line
    }

    /// The next line of standard error.
    fn next_error(&mut self) -> String {
        let line = self.stderr.recv_timeout(WITHIN).expect("a line on recap listen's standard error");
        self.seen.push(line.clone());
        line
    }

    /// Lines of standard output until one satisfies `wanted`, which is returned.
    fn line_where(&mut self, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WITHIN;
        loop {
            let line = self.next_line();
            if wanted(&line) {
                return line;
            }
            assert!(Instant::now() < deadline, "no wanted line from recap listen");
        }
    }

    /// POSTs `body` with `headers`: the status and the body answered.
    fn post(&self, headers: &[(&str, String)], body: &str) -> (u16, String) {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut request = agent.post(&format!("{}hooks/e1", self.url)).header("Content-Type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let mut response = request.send(body).expect("POST to recap listen");
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap_or_default())
    }

    /// Stops it, and checks that no secret appeared in anything it printed.
    fn stop_checking_secrets(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.seen.extend(self.stdout.try_iter());
        self.seen.extend(self.stderr.try_iter());
        for secret in [SECRET, PREVIOUS, FOREIGN] {
            let key = secret.trim_start_matches("whsec_");
            assert!(self.seen.iter().all(|line| !line.contains(key)), "a secret in recap listen's output: {:#?}", self.seen);
        }
    }
}

fn now_seconds() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs() as i64
}

/// Headers of a request, by name.
type Headers = Vec<(&'static str, String)>;

/// The three Standard Webhooks headers of `body` as message `id` at `timestamp`.
fn signed(secrets: &[&str], id: &str, timestamp: i64, body: &str) -> Headers {
    signing::headers(secrets, id, timestamp, body.as_bytes()).expect("signing").to_vec()
}

/// `recap serve` delivering to loopback, an account with a token, and its endpoint at
/// `listen`'s address signing with [`SECRET`].
fn serve_to(listen: &Listen, extra: &[&str]) -> (Server, String) {
    let mut builder = Server::builder().arg("--webhooks-allow-insecure").embedded();
    for arg in extra {
        builder = builder.arg(arg);
    }
    let server = builder.start();
    let token = new_token();
    server.append(&[
        account("acc_listen", Some("flow"), None, 1),
        token_created("acc_listen", "tok_listen", &token, 1),
        EVENTS.webhook_endpoint("acc_listen", "we_listen", format!("{}hooks/we_listen", listen.url)).secret(SECRET).version(1).envelope(),
    ]);
    (server, token)
}

#[test]
fn recap_listen_prints_each_message_recap_serve_delivers_as_the_feed_holds_it() {
    let mut listen = Listen::start(&[SECRET], &["--json"]);
    let (server, token) = serve_to(&listen, &[]);
    server.append(&[meeting("acc_listen", "mtg_listen", "Listened", 0, 1)]);

    let line = listen.line_where(|line| line.contains("meeting.created"));
    let message: Value = serde_json::from_str(&line).unwrap_or_else(|error| panic!("--json prints the body ({error}): {line}"));
    assert_eq!(message["type"], "meeting.created");
    assert_eq!(message["data"]["meeting_id"], "mtg_listen");
    assert_eq!(message["data"]["meeting"]["title"], "Listened");

    // The very message of the account's feed (`GET /v1/events/{id}` answers it as `data`).
    let (status, _, body) = get(&format!("{}/events/{}", server.base_url, message["id"].as_str().expect("an id")), Some(&token));
    assert_eq!(status, 200, "{body}");
    let in_feed: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(in_feed["data"], message);
    assert!(listen.stderr.try_iter().all(|line| !line.starts_with("refused")), "every delivery verified");
    listen.stop_checking_secrets();
}

#[test]
fn a_listener_answering_503_sees_recap_retry_the_same_webhook_id() {
    let mut listen = Listen::start(&[SECRET], &["--status", "503"]);
    // Every delay of the retry schedule a thousandth: the retries after 5 ms and 300 ms.
    let (server, _token) = serve_to(&listen, &["--webhooks-retry-scale", "0.001"]);
    server.append(&[meeting("acc_listen", "mtg_retry", "Retried", 0, 1)]);

    // A meeting with its note also makes `meeting.notes_ready`, delivered beside it.
    let first = listen.line_where(|line| line.contains("meeting.created meeting_id=mtg_retry"));
    let id = first.split_whitespace().next().expect("the webhook-id first").to_owned();
    assert!(id.starts_with("msg_"), "{first}");
    assert_eq!(first, format!("{id} meeting.created meeting_id=mtg_retry"));
    let again = listen.line_where(|line| line.starts_with(&format!("{id} ")));
    assert_eq!(again, format!("{id} meeting.created meeting_id=mtg_retry again 1"));
    let twice = listen.line_where(|line| line.starts_with(&format!("{id} ")));
    assert_eq!(twice, format!("{id} meeting.created meeting_id=mtg_retry again 2"));
    listen.stop_checking_secrets();
}

#[test]
fn recap_listen_refuses_what_the_secrets_do_not_verify_and_takes_either_secret_of_a_rotation() {
    let mut listen = Listen::start(&[SECRET, PREVIOUS], &["--status", "202"]);
    let body = r#"{"id":"msg_a","type":"team.joined","created_at":"2026-12-01T00:00:00Z","data":{"team_id":"team_1"}}"#;
    let now = now_seconds();

    assert_eq!(listen.post(&signed(&[SECRET], "msg_a", now, body), body), (202, String::new()));
    assert_eq!(listen.next_line(), "msg_a team.joined team_id=team_1");
    assert_eq!(listen.post(&signed(&[PREVIOUS], "msg_a", now, body), body).0, 202, "the previous secret of a rotation");
    assert_eq!(listen.next_line(), "msg_a team.joined team_id=team_1 again 1");
    assert_eq!(listen.post(&signed(&[FOREIGN, SECRET], "msg_a", now, body), body).0, 202, "one signature of several that matches");
    assert_eq!(listen.next_line(), "msg_a team.joined team_id=team_1 again 2");

    let refused: [(&str, Headers, &str, &str); 5] = [
        ("another secret", signed(&[FOREIGN], "msg_b", now, body), body, "no signature matches the secret"),
        ("a tampered body", signed(&[SECRET], "msg_b", now, body), r#"{"id":"msg_a","type":"team.left"}"#, "no signature matches the secret"),
        ("a stale timestamp", signed(&[SECRET], "msg_b", now - 400, body), body, "webhook-timestamp is more than 5 minutes old"),
        ("a timestamp ahead", signed(&[SECRET], "msg_b", now + 400, body), body, "webhook-timestamp is more than 5 minutes ahead"),
        (
            "no signature",
            signed(&[SECRET], "msg_b", now, body).into_iter().take(2).collect(),
            body,
            "a webhook-id, webhook-timestamp or webhook-signature header is missing",
        ),
    ];
    for (case, headers, sent, reason) in refused {
        assert_eq!(listen.post(&headers, sent), (400, format!("{reason}\n")), "{case}");
        assert_eq!(listen.next_error(), format!("refused msg_b: {reason}"), "{case}");
    }
    assert!(listen.stdout.try_recv().is_err(), "nothing refused is printed as a message");

    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let response = agent.get(&listen.url).call().expect("GET");
    assert_eq!(response.status().as_u16(), 405);
    assert_eq!(response.headers().get("allow").and_then(|value| value.to_str().ok()), Some("POST"));
    listen.stop_checking_secrets();
}

#[test]
fn recap_listen_starts_only_with_whsec_secrets_and_never_repeats_them() {
    for (secrets, wanted) in
        [("", "--secret"), ("not-a-secret", "secret 1: not whsec_ followed by the base64 of a key"), (&format!("{SECRET},whsec_!!"), "secret 2: not whsec_")]
    {
        let mut command = Command::new(recap_bin());
        command.args(["listen", "--address", "127.0.0.1:0"]);
        if secrets.is_empty() {
            command.env_remove("RECAP_LISTEN_SECRET");
        } else {
            command.env("RECAP_LISTEN_SECRET", secrets);
        }
        let output = command.output().expect("run recap listen");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{secrets}: started");
        assert!(stderr.contains(wanted), "{secrets}: {stderr}");
        assert!(!stderr.contains(SECRET.trim_start_matches("whsec_")), "{stderr}");
    }
}
