//! `recap listen`: a webhook receiver for development. It answers every `POST` (any
//! path) after verifying the delivery as Standard Webhooks says, with the endpoint's
//! signing secret, and prints each verified message on standard output, one line each:
//! a summary, or with `--json` the body as received (for `jq`). A delivery that does
//! not verify is answered `400` with the reason, which also goes to standard error.
//!
//! The verifying is the Standard Webhooks reference library's (`standardwebhooks`), not
//! recap's own signing code run backwards: what `recap listen` accepts, any receiver
//! built on a Standard Webhooks library accepts.
//!
//! `--status` makes it answer verified deliveries with another status (a 5xx shows
//! recap retrying on its schedule); a delivery whose `webhook-id` came before is marked
//! `again`, with how many times it came.
//!
//! Secrets never reach the output: not in a line, an error, or the arguments' `Debug`.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Args;
use serde_json::Value;
use standardwebhooks::{Webhook, WebhookError};
use tokio::net::TcpListener;

use crate::distributed::{shutdown_signal, Secret};

/// The largest body read; a delivery is a few kilobytes.
const BODY_LIMIT: usize = 1 << 20;

#[derive(Args, Debug)]
pub struct ListenArgs {
    /// Where to listen. Every path is accepted. With port 0 a free port is taken; the
    /// address is printed on standard error either way.
    #[arg(long, env = "RECAP_LISTEN_ADDRESS", default_value = "127.0.0.1:9000")]
    pub address: SocketAddr,
    /// The endpoint's signing secret (`whsec_` and base64), as its
    /// `webhook_endpoint.upserted` event set it. Repeat it, or separate secrets with
    /// commas, to also accept the previous secret of a rotation. Prefer the environment
    /// variable: a command's arguments are visible to the machine's other users.
    #[arg(long = "secret", env = "RECAP_LISTEN_SECRET", value_name = "SECRET", value_delimiter = ',', required = true, hide_env_values = true)]
    pub secrets: Vec<Secret>,
    /// The status answered to a verified delivery. A 4xx or 5xx makes recap retry it on
    /// its schedule (`recap serve --webhooks-retry-scale` shortens the schedule).
    #[arg(long, env = "RECAP_LISTEN_STATUS", default_value_t = 200, value_parser = clap::value_parser!(u16).range(200..=599))]
    pub status: u16,
    /// Print each verified message as one JSON line, its body as received, instead of a
    /// summary line.
    #[arg(long, env = "RECAP_LISTEN_JSON")]
    pub json: bool,
}

/// What the listener holds: the verifiers, what to answer, and how often each
/// `webhook-id` came.
struct Listener {
    verifiers: Vec<Webhook>,
    status: StatusCode,
    json: bool,
    seen: Mutex<HashMap<String, u64>>,
}

/// Runs `recap listen` until interrupted.
pub async fn run(args: ListenArgs) -> anyhow::Result<()> {
    let listener = Arc::new(Listener::new(&args)?);
    let socket = TcpListener::bind(args.address).await.with_context(|| format!("binding {}", args.address))?;
    let address = socket.local_addr()?;
    eprintln!(
        "recap listen: http://{address}/ (any path), verifying with {} secret{}, answering {}",
        listener.verifiers.len(),
        if listener.verifiers.len() == 1 { "" } else { "s" },
        listener.status.as_u16()
    );
    let router = axum::Router::new().fallback(receive).with_state(listener).layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT));
    axum::serve(socket, router).with_graceful_shutdown(shutdown_signal()).await.context("serving")?;
    Ok(())
}

impl Listener {
    fn new(args: &ListenArgs) -> anyhow::Result<Listener> {
        let verifiers = args
            .secrets
            .iter()
            .enumerate()
            .map(|(index, Secret(secret))| verifier(secret).with_context(|| format!("secret {}", index + 1)))
            .collect::<anyhow::Result<Vec<Webhook>>>()?;
        let status = StatusCode::from_u16(args.status).context("--status")?;
        Ok(Listener { verifiers, status, json: args.json, seen: Mutex::default() })
    }

    /// Whether any secret verifies the delivery; the first secret's reason when none
    /// does (they all read the same headers, so only the signature's check differs).
    fn verify(&self, body: &[u8], headers: &HeaderMap) -> Result<(), WebhookError> {
        let mut first_error = None;
        for verifier in &self.verifiers {
            match verifier.verify(body, headers) {
                Ok(()) => return Ok(()),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.unwrap_or(WebhookError::InvalidSignature))
    }

    /// How many times `id` came before this delivery.
    fn count(&self, id: &str) -> u64 {
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = seen.entry(id.to_owned()).or_insert(0);
        *count += 1;
        *count - 1
    }
}

/// A verifier of `secret`, which must be `whsec_` and standard base64 of a key. The key
/// is read as recap's signing reads it: the reference library would also take a secret
/// without the prefix, or an empty key, which no endpoint of recap has.
fn verifier(secret: &str) -> anyhow::Result<Webhook> {
    let key = recap_webhooks::signing::key(secret).map_err(|_| anyhow::anyhow!("not whsec_ followed by the base64 of a key"))?;
    Webhook::from_bytes(key).map_err(|_| anyhow::anyhow!("not a key the Standard Webhooks library takes"))
}

async fn receive(State(listener): State<Arc<Listener>>, method: Method, headers: HeaderMap, body: Bytes) -> Response {
    if method != Method::POST {
        return (StatusCode::METHOD_NOT_ALLOWED, [("allow", "POST")], "a webhook delivery is a POST\n").into_response();
    }
    let id = headers.get("webhook-id").and_then(|id| id.to_str().ok()).unwrap_or("-").to_owned();
    if let Err(error) = listener.verify(&body, &headers) {
        let reason = refusal(&error);
        eprintln!("refused {id}: {reason}");
        return (StatusCode::BAD_REQUEST, format!("{reason}\n")).into_response();
    }
    let again = listener.count(&id);
    let line = if listener.json { String::from_utf8_lossy(&body).into_owned() } else { summary(&id, &body, again) };
    let mut out = std::io::stdout().lock();
    // A closed standard output (the reader went away) must not fail the delivery.
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    listener.status.into_response()
}

/// The reason a delivery was refused, in the words a receiver's log would use.
fn refusal(error: &WebhookError) -> &'static str {
    match error {
        WebhookError::MissingHeader(_) => "a webhook-id, webhook-timestamp or webhook-signature header is missing",
        WebhookError::InvalidHeader(_) => "a webhook header is not text",
        WebhookError::InvalidTimestamp => "webhook-timestamp is not a number of seconds",
        WebhookError::TimestampTooOldError => "webhook-timestamp is more than 5 minutes old",
        WebhookError::FutureTimestampError => "webhook-timestamp is more than 5 minutes ahead",
        WebhookError::InvalidPayload => "the body is not UTF-8",
        WebhookError::InvalidSignature | WebhookError::InvalidSecret(_) => "no signature matches the secret",
    }
}

/// `<webhook-id> <type> <key>=<id> [again N]`: the message's type and the id of the
/// resource it announces (an item's rather than its meeting's).
fn summary(id: &str, body: &[u8], again: u64) -> String {
    let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let kind = message["type"].as_str().unwrap_or("?");
    let resource = ["action_item_id", "share_id", "team_id", "meeting_id"]
        .iter()
        .find_map(|key| message["data"][key].as_str().map(|value| format!("{key}={value}")))
        .unwrap_or_default();
    let mut line = format!("{id} {kind} {resource}");
    if again > 0 {
        line.push_str(&format!(" again {again}"));
    }
    line.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_the_type_and_the_resource_and_counts_repeats() {
        let body = br#"{"id":"msg_1","type":"meeting.created","created_at":"2026-01-01T00:00:00Z","data":{"meeting_id":"m1","meeting":{}}}"#;
        assert_eq!(summary("msg_1", body, 0), "msg_1 meeting.created meeting_id=m1");
        assert_eq!(summary("msg_1", body, 2), "msg_1 meeting.created meeting_id=m1 again 2");
        let item = br#"{"type":"action_item.created","data":{"meeting_id":"m1","action_item_id":"a1"}}"#;
        assert_eq!(summary("msg_2", item, 0), "msg_2 action_item.created action_item_id=a1");
        assert_eq!(summary("msg_3", b"not json", 0), "msg_3 ?");
    }

    #[test]
    fn only_whsec_secrets_of_a_key_are_taken() {
        assert!(verifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_ok());
        for refused in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_***"] {
            let error = verifier(refused).err().unwrap_or_else(|| panic!("{refused} taken")).to_string();
            assert_eq!(error, "not whsec_ followed by the base64 of a key", "the secret is not repeated");
        }
    }
}
