//! Schemathesis against the real binary: REST v1 fuzzed from `schemas/openapi.json`, so
//! that the document and the service cannot drift apart. `recap serve --demo` gives it a
//! world with data (its token is the bearer; a webhook endpoint with an attempt is added),
//! and the rate limit is lifted so that every request reaches the endpoint. Bounded by a fixed number of examples per operation and
//! a fixed seed: about a minute on two cores.
//!
//! Two runs, each over every operation:
//! 1. conformance: generated requests, valid and invalid, every phase (coverage,
//!    fuzzing, stateful over the links Schemathesis infers); no 5xx, and every response's
//!    status, content type, headers and body are the ones the document gives, 405s carry
//!    `Allow`, and a request without the token is refused;
//! 2. acceptance: only requests the document calls valid, and every one is accepted (2xx,
//!    or 404 for an identifier nothing has, 402 for a team whose plan lacks the feature).
//!    The `cursor` parameters are left out of this run's copy of the document: a cursor is
//!    valid only when the server issued it, which no schema can generate.
//!
//! Fuzzing finds an identifier that fits the document's characters but not the service's
//! 256 bytes only by chance; the REST suite checks that rule on every identifier
//! parameter (`query-api/tests/rest/openapi.rs`).
//!
//! Schemathesis comes from PyPI, pinned and installed by `scripts/setup-schemathesis.sh`
//! (cached under ~/.cache/recap), so this is ignored by a plain `cargo test` and run by
//! `make test` (`-- --ignored`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use recap_testkit::events::*;
use recap_testkit::process::get;
use recap_testkit::receiver::Receiver;
use recap_testkit::server::Server;
use serde_json::Value;

/// The demo world's main account, whose token `recap serve --demo` prints.
const DEMO_ACCOUNT: &str = "acc_ada";
const ENDPOINT: &str = "ep_fuzzed";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `st` command of the pinned Schemathesis.
fn schemathesis() -> PathBuf {
    let output = Command::new("bash").arg(repo().join("scripts/setup-schemathesis.sh")).output().expect("run setup-schemathesis.sh");
    assert!(output.status.success(), "setup-schemathesis.sh failed: {}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().trim())
}

/// `recap serve --demo`, its token, and a webhook endpoint of the demo account with one
/// delivery attempt already made (the demo world has no endpoint, and without one the
/// attempts' operation could only ever answer 404).
fn demo(receiver: &Receiver) -> (Server, String) {
    let server = Server::builder().embedded().arg("--demo").arg("--webhooks-allow-insecure").env("RECAP_REST_RATE_LIMIT_PER_MINUTE", "1000000").start();
    server.wait_caught_up();
    let token = std::fs::read_to_string(server.data_dir.join("demo-token")).expect("the demo token file");
    let token = token.trim().to_string();
    server.feed(&[
        EVENTS.webhook_endpoint(DEMO_ACCOUNT, ENDPOINT, receiver.url(ENDPOINT)).envelope(),
        meeting_draft(DEMO_ACCOUNT, "mtg_fuzzed", "Fuzzed", 0).envelope(),
    ]);
    let attempts = format!("{}/webhook-endpoints/{ENDPOINT}/attempts", server.base_url);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _, body) = get(&attempts, Some(&token));
        if status == 200 && serde_json::from_str::<Value>(&body).is_ok_and(|page| page["data"].as_array().is_some_and(|data| !data.is_empty())) {
            break;
        }
        assert!(Instant::now() < deadline, "no delivery attempt to the endpoint: {status} {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, token)
}

/// Runs `st run` over `document` against the server with the configuration in `work`;
/// panics with its output unless it exits 0, and prints its summary either way.
fn run(st: &Path, work: &Path, server: &Server, token: &str, document: &Path, what: &str, options: &[&str]) {
    let output = Command::new(st)
        .current_dir(work)
        // The configuration (`schemathesis.toml` in `work`) is an option of `st`, not of `run`.
        .arg(format!("--config-file={}", work.join("schemathesis.toml").display()))
        .arg("run")
        .arg(document)
        .args(["--url", &server.base_url])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--seed", "20261126", "--workers", "2", "--generation-database", "none", "--no-color", "--request-timeout", "30"])
        .args(options)
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .output()
        .unwrap_or_else(|error| panic!("{what}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary = stdout.split("SUMMARY").last().unwrap_or_default();
    eprintln!("schemathesis, {what}:{summary}");
    assert!(output.status.success(), "schemathesis, {what}, failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(stdout.contains("Selected: 11/11") && stdout.contains("Tested: 11"), "schemathesis, {what}: not every operation was tested\n{stdout}");
}

#[test]
#[ignore = "needs Schemathesis from scripts/setup-schemathesis.sh: make test runs it"]
fn schemathesis_finds_the_service_as_the_openapi_document_describes_it() {
    let st = schemathesis();
    let receiver = Receiver::start();
    let (server, token) = demo(&receiver);
    let work = tempfile::tempdir().expect("temp dir");
    // What the acceptance run may answer to valid data besides 2xx.
    std::fs::write(work.path().join("schemathesis.toml"), "[checks.positive_data_acceptance]\nexpected-statuses = [\"2xx\", \"402\", \"404\"]\n").unwrap();
    let document = repo().join("schemas/openapi.json");

    run(
        &st,
        work.path(),
        &server,
        &token,
        &document,
        "conformance",
        &[
            "--max-examples",
            "150",
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,\
             unsupported_method,allow_header_conformance,ignored_auth,missing_required_header,use_after_free,ensure_resource_availability",
        ],
    );

    let mut without_cursors: Value = serde_json::from_str(&std::fs::read_to_string(&document).expect("schemas/openapi.json")).expect("JSON");
    for item in without_cursors["paths"].as_object_mut().expect("paths").values_mut() {
        if let Some(parameters) = item["get"].get_mut("parameters").and_then(Value::as_array_mut) {
            parameters.retain(|parameter| parameter["name"] != "cursor");
        }
    }
    let copy = work.path().join("openapi-without-cursors.json");
    std::fs::write(&copy, serde_json::to_vec(&without_cursors).unwrap()).unwrap();
    run(
        &st,
        work.path(),
        &server,
        &token,
        &copy,
        "acceptance",
        &["--mode", "positive", "--max-examples", "150", "--checks", "not_a_server_error,positive_data_acceptance"],
    );
}
