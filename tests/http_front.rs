//! The HTTP front of `recap serve` against what an attacker on the network tries: slow
//! and unfinished heads, idle connections, trickled bodies, a flood of connections,
//! malformed request heads, two credentials. Raw TCP against the real binary, with the
//! limits shortened by their flags so that every test takes seconds
//! (docs/operations.md, "HTTP limits").

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use recap_testkit::server::Server;
use serde_json::Value;

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", self.body))
    }

    /// The error envelope with this status and code, as JSON, with a request id.
    fn assert_envelope(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{:?} {}", self.headers, self.body);
        assert_eq!(self.header("content-type"), Some("application/json"), "{:?}", self.headers);
        let request_id = self.header("x-request-id").unwrap_or_else(|| panic!("no X-Request-Id: {:?}", self.headers));
        assert!(!request_id.is_empty());
        let json = self.json();
        assert_eq!(json["error"]["code"], code, "{json}");
        assert!(json["error"]["message"].is_string(), "{json}");
        assert_eq!(json.as_object().map(|object| object.len()), Some(1), "only the error key: {json}");
    }

    /// [`Answer::assert_envelope`], for a REST answer made before routing, which the REST
    /// API's document must list on every operation.
    fn assert_documented_envelope(&self, status: u16, code: &str) {
        self.assert_envelope(status, code);
        self.assert_documented_on_every_rest_operation();
    }

    /// The REST API's document (`schemas/openapi.json`) lists this answer's status on
    /// every operation, as the Error envelope with this code: a REST answer made before
    /// routing can come from any path.
    fn assert_documented_on_every_rest_operation(&self) {
        let document = openapi();
        let resolve = |node: &'static Value| -> &'static Value {
            match node["$ref"].as_str() {
                Some(pointer) => document.pointer(pointer.trim_start_matches('#')).unwrap_or_else(|| panic!("dangling {pointer}")),
                None => node,
            }
        };
        let code = self.json()["error"]["code"].clone();
        let codes = &document["components"]["schemas"]["ErrorBody"]["properties"]["code"]["enum"];
        assert!(codes.as_array().expect("the codes").contains(&code), "{code} is not among the documented codes");
        let status = self.status.to_string();
        let operations = document["paths"].as_object().expect("paths");
        assert!(!operations.is_empty());
        for (route, methods) in operations {
            let response = resolve(&methods["get"]["responses"][&status]);
            assert_eq!(response["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/Error", "GET {route} documents no {status} error");
            assert!(response["headers"]["X-Request-Id"].is_object(), "GET {route}: {status} without X-Request-Id");
            if self.header("retry-after").is_some() {
                assert!(response["headers"]["Retry-After"].is_object(), "GET {route}: {status} without Retry-After");
            }
        }
    }
}

/// `schemas/openapi.json`, read once.
fn openapi() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/openapi.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("schemas/openapi.json")).expect("openapi.json is JSON")
    })
}

/// `host:port` of a URL such as `http://127.0.0.1:8080/v1`.
fn address(url: &str) -> String {
    url.trim_start_matches("http://").split('/').next().expect("an address").to_string()
}

fn connect(address: &str) -> TcpStream {
    let stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    stream
}

/// Reads one answer: its head, then `Content-Length` bytes of body; nothing may follow.
fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut bytes = Vec::new();
    let answer = read_answer_from(stream, &mut bytes);
    assert!(bytes.is_empty(), "nothing follows the answer: {:?}", String::from_utf8_lossy(&bytes));
    answer
}

/// Reads the next answer out of `bytes` (what was read and not yet taken), reading more
/// as needed, and leaves what follows it there.
fn read_answer_from(stream: &mut TcpStream, bytes: &mut Vec<u8>) -> Answer {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = bytes.windows(4).position(|window| window == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).unwrap_or_else(|error| panic!("reading an answer: {error}; so far {:?}", String::from_utf8_lossy(bytes)));
        assert!(n > 0, "the connection closed without an answer; so far {:?}", String::from_utf8_lossy(bytes));
        bytes.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(bytes[..head_end].to_vec()).expect("a text head");
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|line| line.split(' ').nth(1)).and_then(|code| code.parse().ok()).expect("a status line");
    let headers: Vec<(String, String)> =
        lines.filter_map(|line| line.split_once(':')).map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string())).collect();
    let length: usize = headers.iter().find(|(name, _)| name == "content-length").map(|(_, value)| value.parse().expect("a length")).unwrap_or(0);
    while bytes.len() < head_end + 4 + length {
        let n = stream.read(&mut chunk).expect("reading a body");
        assert!(n > 0, "the connection closed inside a body");
        bytes.extend_from_slice(&chunk[..n]);
    }
    let body = bytes[head_end + 4..head_end + 4 + length].to_vec();
    bytes.drain(..head_end + 4 + length);
    Answer { status, headers, body: String::from_utf8(body).expect("a text body") }
}

/// Whether the server closed the connection (within the stream's read timeout).
fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => matches!(error.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe),
    }
}

fn ask(stream: &mut TcpStream, request: &[u8]) -> Answer {
    stream.write_all(request).expect("write");
    read_answer(stream)
}

fn start(args: &[&str]) -> Server {
    let mut builder = Server::builder().embedded();
    for arg in args {
        builder = builder.arg(arg);
    }
    builder.start()
}

/// Each listener under test with a path it serves: (name, address, path).
fn front_doors(server: &Server) -> [(&'static str, String, &'static str); 2] {
    [("REST", address(&server.base_url), "/v1/teams"), ("MCP", address(&server.mcp_url), "/mcp")]
}

#[test]
fn slowloris_an_unfinished_head_is_answered_408_and_closed_after_the_header_timeout() {
    let server = start(&["--http-header-timeout-ms", "500"]);
    for (door, address, path) in front_doors(&server) {
        let mut stream = connect(&address);
        let started = Instant::now();
        stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n").as_bytes()).expect("write");
        let answer = read_answer(&mut stream);
        let waited = started.elapsed();
        answer.assert_envelope(408, "request_timeout");
        assert_eq!(answer.header("connection"), Some("close"), "{door}");
        assert!(waited >= Duration::from_millis(400) && waited < Duration::from_secs(5), "{door}: answered after {waited:?}");
        assert!(closed(&mut stream), "{door}: closed after the answer");
    }
}

#[test]
fn slowloris_a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let server = start(&["--http-header-timeout-ms", "500"]);
    for (door, address, _) in front_doors(&server) {
        let mut stream = connect(&address);
        let started = Instant::now();
        assert!(closed(&mut stream), "{door}: closed without an answer (nothing was asked)");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(400) && waited < Duration::from_secs(5), "{door}: closed after {waited:?}");
    }
}

#[test]
fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() {
    let server = start(&["--http-idle-timeout-ms", "700"]);
    let address = address(&server.base_url);
    let mut stream = connect(&address);
    let request = b"GET /v1/teams HTTP/1.1\r\nHost: x\r\n\r\n";
    ask(&mut stream, request).assert_envelope(401, "unauthorized");
    // A connection in use stays open: the next request within the idle timeout is served.
    std::thread::sleep(Duration::from_millis(300));
    ask(&mut stream, request).assert_envelope(401, "unauthorized");
    let idle = Instant::now();
    assert!(closed(&mut stream), "the idle connection is closed");
    let waited = idle.elapsed();
    assert!(waited >= Duration::from_millis(600) && waited < Duration::from_secs(5), "closed after {waited:?}");
}

/// Sends `head`, then one byte of its body every 100 ms for up to 6 s, on its own thread.
fn trickle(stream: &TcpStream, head: String) {
    let mut writer = stream.try_clone().expect("clone");
    std::thread::spawn(move || {
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
        for _ in 0..60 {
            std::thread::sleep(Duration::from_millis(100));
            if writer.write_all(b" ").is_err() {
                return;
            }
        }
    });
}

#[test]
fn slow_body_a_trickled_body_is_answered_408_with_the_envelope() {
    let server = start(&["--http-body-timeout-ms", "600"]);
    let mut stream = connect(&address(&server.mcp_url));
    let started = Instant::now();
    trickle(&stream, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{".to_string());
    let answer = read_answer(&mut stream);
    let waited = started.elapsed();
    answer.assert_envelope(408, "request_timeout");
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(waited >= Duration::from_millis(500) && waited < Duration::from_secs(5), "answered after {waited:?}");
    assert!(closed(&mut stream), "closed after the answer");
    // The OAuth JSON endpoints answer in their own error shape, this one too.
    for path in ["/mcp/token", "/revoke", "/mcp/register"] {
        let mut stream = connect(&address(&server.mcp_url));
        let form = "application/x-www-form-urlencoded";
        trickle(&stream, format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {form}\r\nContent-Length: 200\r\n\r\ngrant_type="));
        let answer = read_answer(&mut stream);
        assert_eq!(answer.status, 408, "{path}: {}", answer.body);
        assert_eq!(answer.json(), serde_json::json!({"error": "invalid_request", "error_description": "the request body did not arrive in time"}), "{path}");
        assert_eq!(answer.header("connection"), Some("close"), "{path}");
    }
}

#[test]
fn slow_body_a_body_nobody_reads_is_drained_no_longer_than_the_body_timeout() {
    // The REST API reads no body: it answers at once, and the trickle after the answer
    // holds the connection no longer than the body timeout.
    let server = start(&["--http-body-timeout-ms", "600"]);
    let mut stream = connect(&address(&server.base_url));
    let started = Instant::now();
    trickle(&stream, "POST /v1/teams HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n{".to_string());
    read_answer(&mut stream).assert_envelope(405, "method_not_allowed");
    assert!(closed(&mut stream), "closed while the body still trickles");
    assert!(started.elapsed() < Duration::from_secs(5), "closed after {:?}", started.elapsed());
}

#[test]
fn connection_flood_past_the_cap_new_connections_are_refused_503_and_served_again_below_it() {
    let server = start(&["--http-max-connections", "3"]);
    let rest = address(&server.base_url);
    let request = b"GET /v1/teams HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut held: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut stream = connect(&rest);
            ask(&mut stream, request).assert_envelope(401, "unauthorized");
            stream
        })
        .collect();
    // At the cap: a new connection is answered at once and closed.
    let mut refused = connect(&rest);
    let started = Instant::now();
    let answer = read_answer(&mut refused);
    answer.assert_documented_envelope(503, "unavailable");
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(started.elapsed() < Duration::from_secs(2), "refused after {:?}", started.elapsed());
    assert!(closed(&mut refused));
    // The connections already open are served, and each listener counts its own.
    ask(&mut held[0], request).assert_envelope(401, "unauthorized");
    let mut mcp = connect(&address(&server.mcp_url));
    assert_eq!(ask(&mut mcp, b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n").status, 405);
    // Below the cap again, a new client is served.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut stream = connect(&rest);
        let answer = ask(&mut stream, request);
        if answer.status == 401 {
            answer.assert_envelope(401, "unauthorized");
            break;
        }
        answer.assert_envelope(503, "unavailable");
        assert!(Instant::now() < deadline, "no connection was served after one closed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn malformed_heads_are_answered_with_the_envelope_and_a_request_id_on_every_listener() {
    let server = start(&[]);
    let long_target = format!("GET /v1/{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70 * 1024)).into_bytes();
    let big_headers = format!("GET /v1/teams HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(1024 * 1024)).into_bytes();
    // (what, the request, status, code, param)
    type Case = (&'static str, Vec<u8>, u16, &'static str, Option<&'static str>);
    let cases: Vec<Case> = vec![
        ("a target over 64 KiB", long_target, 414, "uri_too_long", None),
        ("0xFF in the target", b"GET /v1/\xff HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 400, "invalid_request", Some("request-line")),
        ("NUL in the target", b"GET /v1/\x00 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 400, "invalid_request", Some("request-line")),
        ("a control byte in the target", b"GET /v1/\x1b[2J HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 400, "invalid_request", Some("request-line")),
        ("a folded header", b"GET /v1/teams HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n".to_vec(), 400, "invalid_request", Some("headers")),
        ("NUL in a header", b"GET /v1/teams HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n".to_vec(), 400, "invalid_request", Some("headers")),
        // RFC 9112, 3.2: "A server MUST respond with a 400 (Bad Request) status code to any
        // HTTP/1.1 request message that lacks a Host header field and to any request message
        // that contains more than one Host header field line".
        ("no Host on HTTP/1.1", b"GET /v1/teams HTTP/1.1\r\nX-A: 1\r\n\r\n".to_vec(), 400, "invalid_request", Some("headers")),
        (
            "Host twice",
            b"POST /mcp HTTP/1.1\r\nHost: a.example\r\nhost: b.example\r\nContent-Length: 0\r\n\r\n".to_vec(),
            400,
            "invalid_request",
            Some("headers"),
        ),
        ("1 MB of headers", big_headers, 431, "headers_too_large", None),
    ];
    let addresses = [address(&server.base_url), address(&server.mcp_url), address(&server.admin_url)];
    for address in &addresses {
        for (what, request, status, code, param) in &cases {
            let mut stream = connect(address);
            let mut writer = stream.try_clone().expect("clone");
            let request = request.clone();
            // Written on a thread: the answer may come before the last byte is taken.
            let writing = std::thread::spawn(move || {
                let _ = writer.write_all(&request);
            });
            let answer = read_answer(&mut stream);
            answer.assert_envelope(*status, code);
            assert_eq!(answer.json()["error"]["param"].as_str(), *param, "{address}: {what}");
            assert_eq!(answer.header("connection"), Some("close"), "{address}: {what}");
            assert!(closed(&mut stream), "{address}: {what}: closed after the answer");
            writing.join().expect("writer");
        }
        // The listener still serves well-formed requests.
        let mut stream = connect(address);
        let answer = ask(&mut stream, b"GET /v1/teams HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(matches!(answer.status, 401 | 404 | 405), "{address}: {}", answer.status);
    }
}

#[test]
fn request_smuggling_each_head_after_a_body_or_pipelined_is_found_and_checked() {
    // The check follows each body to the next head: a malformed head after a request
    // with a body is refused as the first one would be, after the first is answered.
    let server = start(&[]);
    let mut stream = connect(&address(&server.base_url));
    stream.write_all(b"POST /v1/teams HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").expect("write");
    read_answer(&mut stream).assert_envelope(405, "method_not_allowed");
    stream.write_all(b"GET /v1/\xff HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let answer = read_answer(&mut stream);
    answer.assert_envelope(400, "invalid_request");
    assert_eq!(answer.json()["error"]["param"], "request-line");
    // Pipelined requests, and a chunked body followed to its end: each is answered.
    let mut stream = connect(&address(&server.base_url));
    stream.write_all(b"GET /v1/teams HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/nowhere HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let mut pending = Vec::new();
    read_answer_from(&mut stream, &mut pending).assert_envelope(401, "unauthorized");
    read_answer_from(&mut stream, &mut pending).assert_envelope(404, "not_found");
    assert!(pending.is_empty());
    let mut stream = connect(&address(&server.mcp_url));
    let chunked = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
5\r\n{\"a\":\r\n2;ext=1\r\n1}\r\n0\r\n\r\n";
    read_answer({
        stream.write_all(chunked).expect("write");
        &mut stream
    })
    .assert_envelope(401, "unauthorized");
    stream.write_all(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    assert_eq!(read_answer(&mut stream).status, 405, "the connection goes on after the chunked body");
}

#[test]
fn duplicate_authorization_headers_are_400_invalid_request_on_rest_and_mcp() {
    let server = start(&["--demo"]);
    server.wait_caught_up();
    let token =
        server.stdout.iter().find_map(|line| line.split("demo token (account acc_ada, plan flow): ").nth(1)).expect("the demo token").trim().to_string();
    let rest = format!("GET /v1/meetings HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nAuthorization: Bearer svc_pat_someone_else\r\n\r\n");
    let answer = ask(&mut connect(&address(&server.base_url)), rest.as_bytes());
    answer.assert_envelope(400, "invalid_request");
    assert_eq!(answer.json()["error"]["param"], "Authorization");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let mcp = format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Request-Id: trace-0123\r\nAuthorization: Bearer svc_pat_someone_else\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = ask(&mut connect(&address(&server.mcp_url)), mcp.as_bytes());
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(answer.json()["error"]["code"], "invalid_request");
    assert_eq!(answer.json()["error"]["param"], "Authorization");
    assert!(answer.header("www-authenticate").is_some_and(|challenge| challenge.contains(r#"error="invalid_request""#)), "{:?}", answer.headers);
    assert_eq!(answer.header("x-request-id"), Some("trace-0123"), "a well-formed incoming request id is echoed on MCP as on REST");
    // One header of the same token is served.
    let one = format!("GET /v1/meetings?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
    assert_eq!(ask(&mut connect(&address(&server.base_url)), one.as_bytes()).status, 200);
}

#[test]
fn demo_token_is_printed_on_every_start_as_the_help_says() {
    let demo_line = |server: &Server| server.stdout.iter().find(|line| line.starts_with("demo token")).cloned();
    let mut server = start(&["--demo"]);
    let first = demo_line(&server).expect("the demo token on the first start");
    server.restart();
    assert_eq!(demo_line(&server), Some(first), "the same token on a later start");
    let help = std::process::Command::new(recap_testkit::process::recap_bin()).args(["serve", "--help"]).output().expect("recap serve --help");
    let help = String::from_utf8_lossy(&help.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("print the demo token on every start"), "{help}");
}

#[test]
fn shutdown_waiting_connections_do_not_hold_a_stop() {
    // SIGTERM drains: a kept-alive connection and one that never sent a request are
    // closed at once rather than holding the stop for their timeouts.
    let mut server = start(&["--http-header-timeout-ms", "60000", "--http-idle-timeout-ms", "60000"]);
    let mut kept_alive = connect(&address(&server.base_url));
    ask(&mut kept_alive, b"GET /v1/teams HTTP/1.1\r\nHost: x\r\n\r\n").assert_envelope(401, "unauthorized");
    let mut silent = connect(&address(&server.mcp_url));
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    assert!(server.stop().success());
    assert!(started.elapsed() < Duration::from_secs(15), "stopped after {:?}", started.elapsed());
    assert!(closed(&mut kept_alive) && closed(&mut silent));
}

/// A connection to `address` from the local address `from` (any of 127.0.0.0/8 is this
/// machine), as a client elsewhere on the network would come from its own address.
fn connect_from(from: &str, address: &str) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(format!("{from}:0").parse().expect("an address")).expect("bind the source address");
        socket.connect(address.parse().expect("an address")).await.expect("connect")
    });
    let stream = stream.into_std().expect("a std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    stream
}

// A registration flood (POST /register is unauthenticated): the real server counts
// registrations under the TCP peer's address, which its connection loop hands to the
// MCP router; a flood from one address meets 429 while another address still registers.
#[test]
fn registration_flood_is_counted_per_peer_address_by_the_real_server() {
    let server = start(&["--mcp-registrations-per-minute", "2"]);
    let mcp = address(&server.mcp_url);
    let body = r#"{"client_name":"flood","redirect_uris":["http://127.0.0.1:9999/cb"],"token_endpoint_auth_method":"none"}"#;
    let request = format!("POST /register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    let statuses: Vec<u16> = (0..3).map(|_| ask(&mut connect_from("127.0.0.1", &mcp), request.as_bytes()).status).collect();
    assert_eq!(statuses, [201, 201, 429], "the third registration from 127.0.0.1 in a minute");
    let other = ask(&mut connect_from("127.0.0.2", &mcp), request.as_bytes());
    assert_eq!(other.status, 201, "another address has its own count: {}", other.body);
}

/// The demo token `recap serve --demo` prints.
fn demo_token(server: &Server) -> String {
    server.stdout.iter().find_map(|line| line.split("demo token (account acc_ada, plan flow): ").nth(1)).expect("the demo token").trim().to_string()
}

/// Writes `request` on its own thread (the answer may come before the last byte is
/// taken), reads the answer, and checks the connection is closed after it.
fn refused(address: &str, request: &[u8]) -> Answer {
    let mut stream = connect(address);
    let mut writer = stream.try_clone().expect("clone");
    let request = request.to_vec();
    let writing = std::thread::spawn(move || {
        let _ = writer.write_all(&request);
    });
    let answer = read_answer(&mut stream);
    assert_eq!(answer.header("connection"), Some("close"), "{:?}", answer.headers);
    assert!(closed(&mut stream), "closed after the answer");
    writing.join().expect("writer");
    answer
}

// hyper reads a target that is not a path with the `http` crate, and answers a bare 400
// (no envelope, no request id) to what the crate refuses: the scan refuses those first.
#[test]
fn absolute_form_targets_hyper_would_refuse_are_400_with_the_envelope_and_others_are_routed_by_path() {
    let server = start(&[]);
    let rest = address(&server.base_url);
    let long_scheme = format!("GET {}://x/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n", "s".repeat(65));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("an empty authority", b"GET http:///v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a byte outside the URI characters in the host", b"GET http://a^b/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a non-ASCII host", "GET http://caf\u{e9}.example/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".as_bytes().to_vec()),
        ("two port colons", b"GET http://a:1:2/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("an unclosed bracket", b"GET http://[::1/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a stray closing bracket", b"GET http://a]/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a % in the host", b"GET http://a%41/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("an @ ending the authority", b"GET http://user@/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a scheme over 64 characters", long_scheme.into_bytes()),
        ("scheme:/ without the second slash", b"GET http:/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("an authority followed by a path", b"GET v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("host:port followed by a path", b"GET x:80/v1/teams HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("a target beginning with UTF-8", "GET \u{e9}/v1 HTTP/1.1\r\nHost: x\r\n\r\n".as_bytes().to_vec()),
    ];
    for (what, request) in &cases {
        let answer = refused(&rest, request);
        answer.assert_envelope(400, "invalid_request");
        assert_eq!(answer.json()["error"]["param"], "request-line", "{what}");
    }
    // Content-Length as hyper reads it: one number, and at most 2^64 - 3.
    for (what, request) in [
        ("a list of one length", &b"POST /v1/teams HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\nab"[..]),
        ("a length over hyper's bound", &b"POST /v1/teams HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551614\r\n\r\n"[..]),
    ] {
        let answer = refused(&rest, request);
        answer.assert_envelope(400, "invalid_request");
        assert_eq!(answer.json()["error"]["param"], "headers", "{what}");
    }
    // What the crate accepts is routed by its path, whatever the host or `Host` say.
    let mut stream = connect(&rest);
    ask(&mut stream, b"GET http://other.example/v1/teams HTTP/1.1\r\nHost: recap.example\r\n\r\n").assert_envelope(401, "unauthorized");
    ask(&mut stream, b"GET HTTPS://user:p%41ss@[::1%25eth0]:8080/v1/nowhere?a=b#c HTTP/1.1\r\nHost: x\r\n\r\n").assert_envelope(404, "not_found");
    ask(&mut stream, b"GET http://x HTTP/1.1\r\nHost: x\r\n\r\n").assert_envelope(404, "not_found");
    ask(&mut stream, b"POST /v1/teams HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nab").assert_envelope(405, "method_not_allowed");
}

/// The `http_server_request_duration_seconds_count` series of a `/metrics` text whose
/// route is the one of answers made before routing: (method, status, error type) and
/// count, in the text's order.
fn refused_before_routing(metrics: &str) -> Vec<((String, String, String), u64)> {
    let mut series = Vec::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("http_server_request_duration_seconds_count{") else { continue };
        let (labels, count) = rest.rsplit_once("} ").expect("labels and a value");
        let label = |name: &str| {
            labels
                .split("\",")
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .map(|value| value.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        if label("http_route") != "(refused before routing)" {
            continue;
        }
        let key = (label("http_request_method"), label("http_response_status_code"), label("error_type"));
        series.push((key, count.trim().parse().expect("a count")));
    }
    series.sort();
    series
}

// An attacker's malformed or slow heads and connection floods are answered before any
// router; they are counted beside the routers' answers, under a route of their own.
#[test]
fn answers_made_before_routing_are_counted_in_the_http_metrics_under_their_own_route() {
    // A listener's cap counts a refused connection until the server has seen the client
    // close it, which may come after the client's next connection: the cap is above the
    // six connections the REST listener gets, so that only the MCP listener reaches it.
    const CAP: usize = 8;
    let cap = CAP.to_string();
    let server = start(&["--http-header-timeout-ms", "500", "--http-max-connections", &cap]);
    let (rest, mcp, admin) = (address(&server.base_url), address(&server.mcp_url), address(&server.admin_url));
    // 408: a head that does not finish.
    let mut stream = connect(&rest);
    stream.write_all(b"GET /v1/teams HTTP/1.1\r\nHost: x\r\n").expect("write");
    read_answer(&mut stream).assert_documented_envelope(408, "request_timeout");
    drop(stream);
    refused(&rest, format!("GET /v1/{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(20 * 1024)).as_bytes()).assert_documented_envelope(414, "uri_too_long");
    refused(&rest, format!("GET /v1/teams HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(70 * 1024)).as_bytes())
        .assert_documented_envelope(431, "headers_too_large");
    refused(&rest, b"GET http:///v1/teams HTTP/1.1\r\nHost: x\r\n\r\n").assert_documented_envelope(400, "invalid_request");
    refused(&rest, b"PATCH /v1/\xff HTTP/1.1\r\nHost: x\r\n\r\n").assert_envelope(400, "invalid_request");
    refused(&rest, b"BREW /v1/\xff HTTP/1.1\r\nHost: x\r\n\r\n").assert_envelope(400, "invalid_request");
    // 503: the MCP listener at its cap.
    let held: Vec<TcpStream> = (0..CAP)
        .map(|_| {
            let mut stream = connect(&mcp);
            assert_eq!(ask(&mut stream, b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n").status, 405);
            stream
        })
        .collect();
    read_answer(&mut connect(&mcp)).assert_envelope(503, "unavailable");
    // The operations listener counts nothing, refusals included.
    refused(&admin, b"GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n").assert_envelope(400, "invalid_request");

    let metrics = ask(&mut connect(&admin), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(metrics.status, 200);
    let series = |method: &str, status: &str, code: &str| ((method.to_string(), status.to_string(), code.to_string()), 1);
    assert_eq!(
        refused_before_routing(&metrics.body),
        vec![
            series("GET", "400", "invalid_request"),
            series("GET", "408", "request_timeout"),
            series("GET", "414", "uri_too_long"),
            series("GET", "431", "headers_too_large"),
            series("PATCH", "400", "invalid_request"),
            series("_OTHER", "400", "invalid_request"),
            series("_OTHER", "503", "unavailable"),
        ],
        "{}",
        metrics.body
    );
    // The routers' answers are counted as before, by their routes.
    assert!(
        metrics.body.lines().any(|line| line.starts_with("http_server_request_duration_seconds_count{")
            && line.contains("http_route=\"/mcp\"")
            && line.contains("http_response_status_code=\"405\"")
            && line.ends_with(&format!(" {CAP}"))),
        "{}",
        metrics.body
    );
    drop(held);
}

/// A connection whose receive buffer is small, so that a client that does not read
/// fills it soon.
fn connect_with_small_receive_buffer(address: &str) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().expect("runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        socket.connect(address.parse().expect("an address")).await.expect("connect")
    });
    let stream = stream.into_std().expect("a std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream.set_read_timeout(Some(Duration::from_secs(2))).expect("read timeout");
    stream
}

/// Reads until the connection ends or nothing comes for the read timeout: the bytes,
/// and how it ended (`None`: still open).
fn drain(stream: &mut TcpStream) -> (Vec<u8>, Option<std::io::ErrorKind>) {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return (bytes, Some(std::io::ErrorKind::UnexpectedEof)),
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return (bytes, None),
            Err(error) => return (bytes, Some(error.kind())),
        }
    }
}

/// The statuses of the whole answers in `bytes`, in order.
fn statuses(bytes: &[u8]) -> Vec<u16> {
    let mut statuses = Vec::new();
    let mut rest = bytes;
    while let Some(head_end) = rest.windows(4).position(|window| window == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&rest[..head_end]).to_string();
        let length: usize = head
            .lines()
            .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|value| value.trim().parse().expect("a length")))
            .expect("a Content-Length");
        if rest.len() < head_end + 4 + length {
            break;
        }
        statuses.push(head.split(' ').nth(1).and_then(|code| code.parse().ok()).expect("a status"));
        rest = &rest[head_end + 4 + length..];
    }
    statuses
}

// A slow-read attack: requests for large pages pipelined, their answers never read (or
// read a little at a time), would hold the connection and its buffers for ever. Once
// an answer has waited for the client longer than the send timeout, the connection is
// reset.
#[test]
fn slow_read_a_client_that_does_not_read_its_answers_is_reset_after_the_send_timeout() {
    let server = start(&["--demo", "--http-send-timeout-ms", "700", "--http-idle-timeout-ms", "60000", "--rest-rate-limit-per-minute", "100000"]);
    server.wait_caught_up();
    let rest = address(&server.base_url);
    let token = demo_token(&server);
    let page = ask(&mut connect(&rest), format!("GET /v1/meetings?limit=100 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n").as_bytes());
    assert_eq!(page.status, 200, "{}", page.body);
    // Enough answers to overflow the socket buffers (a few MB) several times.
    let pipelined = (16 * 1024 * 1024 / page.body.len()).max(64);
    let requests = format!("GET /v1/meetings?limit=100 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n").repeat(pipelined);
    let send = |stream: &TcpStream| {
        let mut writer = stream.try_clone().expect("clone");
        let requests = requests.clone();
        std::thread::spawn(move || {
            let _ = writer.write_all(requests.as_bytes());
        })
    };

    // Never reads, then (after the timeout has long passed) reads what is left.
    let mut silent = connect_with_small_receive_buffer(&rest);
    let silent_writer = send(&silent);
    // Reads 1 KiB every 50 ms.
    let mut trickling = connect_with_small_receive_buffer(&rest);
    let trickling_writer = send(&trickling);
    let started = Instant::now();
    let mut trickled = Vec::new();
    while started.elapsed() < Duration::from_secs(4) {
        let mut chunk = [0u8; 1024];
        match trickling.read(&mut chunk) {
            Ok(n) if n > 0 => trickled.extend_from_slice(&chunk[..n]),
            _ => break,
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for (client, stream, mut bytes) in [("silent", &mut silent, Vec::new()), ("trickling", &mut trickling, trickled)] {
        let (rest_of_it, ended) = drain(stream);
        bytes.extend_from_slice(&rest_of_it);
        let answered = statuses(&bytes);
        assert!(ended.is_some(), "{client}: the connection is still open after {} answers", answered.len());
        assert!(answered.len() < pipelined, "{client}: {} of {pipelined} answers", answered.len());
        assert!(answered.iter().all(|&status| status == 200), "{client}: {answered:?}");
    }
    silent_writer.join().expect("writer");
    trickling_writer.join().expect("writer");

    // A client that reads is served every answer under the same timeout, and its
    // connection stays open.
    let mut reading = connect(&rest);
    reading.set_read_timeout(Some(Duration::from_secs(2))).expect("read timeout");
    let reading_writer = send(&reading);
    let (bytes, ended) = drain(&mut reading);
    assert_eq!(statuses(&bytes), vec![200; pipelined], "every answer, in order");
    assert_eq!(ended, None, "still open after the last answer");
    reading_writer.join().expect("writer");
}
