//! Client ID Metadata Documents (docs/mcp.md: Client ID Metadata Documents): a
//! `client_id` that is an https URL is fetched from a local https server with a test
//! CA, checked, kept, and refused with the OAuth error its rule names; and
//! `application_type` at registration. The server under test fetches from this
//! process, so every world here is in-process.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use recap_mcp::McpConfig;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One canned answer of the document server.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    delay: Duration,
    /// No `content-length`: the body ends when the connection closes.
    unannounced: bool,
}

impl Answer {
    fn ok(body: String) -> Answer {
        Answer { status: 200, headers: Vec::new(), body, delay: Duration::ZERO, unannounced: false }
    }
}

/// An https server on 127.0.0.1 with a certificate from a fresh test CA: answers per
/// path (set after start, since documents name the server's own URL), and counts the
/// requests of each path.
struct DocumentServer {
    base: String,
    root_der: Vec<u8>,
    answers: Arc<Mutex<HashMap<String, Vec<Answer>>>>,
    requests: Arc<Mutex<HashMap<String, usize>>>,
}

impl DocumentServer {
    async fn start() -> DocumentServer {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "recap test CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap().signed_by(&leaf_key, &issuer).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone()], rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()))
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let answers: Arc<Mutex<HashMap<String, Vec<Answer>>>> = Arc::default();
        let requests: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let (served_answers, served_requests) = (answers.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, answers, requests) = (acceptor.clone(), served_answers.clone(), served_requests.clone());
                tokio::spawn(async move {
                    let Ok(mut stream) = acceptor.accept(stream).await else { return };
                    let mut head = Vec::new();
                    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                        let mut chunk = [0u8; 1024];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => head.extend_from_slice(&chunk[..read]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let answer = {
                        *requests.lock().unwrap().entry(path.clone()).or_default() += 1;
                        let mut answers = answers.lock().unwrap();
                        match answers.get_mut(&path) {
                            // The last answer of a path repeats; earlier ones are used once.
                            Some(queue) if queue.len() > 1 => queue.remove(0),
                            Some(queue) if !queue.is_empty() => queue[0].clone(),
                            _ => Answer { status: 404, ..Answer::ok("{}".into()) },
                        }
                    };
                    tokio::time::sleep(answer.delay).await;
                    let mut response = format!("HTTP/1.1 {} X\r\nconnection: close\r\n", answer.status);
                    // application/json unless the answer names its own.
                    if !answer.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
                        response.push_str("content-type: application/json\r\n");
                    }
                    if !answer.unannounced {
                        response.push_str(&format!("content-length: {}\r\n", answer.body.len()));
                    }
                    for (name, value) in &answer.headers {
                        response.push_str(&format!("{name}: {value}\r\n"));
                    }
                    response.push_str("\r\n");
                    response.push_str(&answer.body);
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        DocumentServer { base, root_der: ca.der().to_vec(), answers, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Serves `answers` at `path`, in order (the last one from then on).
    fn serve(&self, path: &str, answers: Vec<Answer>) {
        self.answers.lock().unwrap().insert(path.to_string(), answers);
    }

    /// A valid document for `path`, with `changes` applied.
    fn document(&self, path: &str, changes: Value) -> String {
        let mut document = json!({
            "client_id": self.url(path),
            "client_name": "Doc <Client>",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        for (key, value) in changes.as_object().unwrap() {
            document[key] = value.clone();
        }
        document.to_string()
    }

    fn requests(&self, path: &str) -> usize {
        self.requests.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// The MCP settings that trust this server: its CA, and loopback allowed.
    fn config(&self) -> McpConfig {
        McpConfig { cimd_allow_insecure: true, cimd_extra_roots: vec![self.root_der.clone()], cimd_timeout_ms: 1000, ..McpConfig::default() }
    }
}

fn authorize_query(client_id: &str, redirect_uri: &str) -> String {
    let challenge = challenge(VERIFIER);
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", redirect_uri),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("state", "st8"),
            ("scope", "svc:read"),
        ])
        .finish()
}

/// The authorization page for a metadata URL client.
async fn show<W: recap_testkit::World + ?Sized>(world: &World<W>, client_id: &str) -> Reply {
    world.get(&format!("/mcp/authorize?{}", authorize_query(client_id, REDIRECT_URI))).await
}

/// An error page (never a redirect) naming invalid_client and `reason`.
fn assert_refused(reply: &Reply, reason: &str) {
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(reply.header("location").is_none(), "an unusable client is never redirected to");
    assert!(reply.body.contains("Authorization failed"), "{}", reply.body);
    assert!(reply.body.contains("invalid_client"), "{}", reply.body);
    assert!(reply.body.contains(reason), "{reason:?} in {}", reply.body);
}

// MCP client registration: "SHOULD fetch metadata documents when encountering URL-formatted client_ids";
// the full flow, authorize → code → token → an MCP request with the token, refresh and revoke checked against the URL.
#[tokio::test]
async fn a_metadata_document_client_completes_the_flow() {
    let server = DocumentServer::start().await;
    server.serve("/client.json", vec![Answer::ok(server.document("/client.json", json!({})))]);
    let client_id = server.url("/client.json");
    let world = World::in_process(server.config()).await;

    let page = show(&world, &client_id).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("Doc &lt;Client&gt;"), "the document's name, escaped");
    assert!(page.body.contains("id=\"redirect-host\">127.0.0.1<"), "the redirect URI's host is shown");
    assert!(page.body.contains("id=\"client-host\">127.0.0.1<"), "the host that publishes the document is shown");

    let code = authorize(&world, &client_id, FLOW_PAT).await;
    let reply = exchange(&world, &client_id, &code).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let tokens = reply.json();
    let access = tokens["access_token"].as_str().unwrap();
    let listed = world.rpc_as(access, "tools/list", json!({}), &[]).await;
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), TOOLS.len(), "{listed}");

    // The URL is the client id of what was issued: refresh checks it like any client's.
    let refresh_token = tokens["refresh_token"].as_str().unwrap();
    let other = refresh(&world, "https://127.0.0.1:1/other.json", refresh_token).await;
    assert_eq!((other.status, other.json()["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_grant")));
    let refreshed = refresh(&world, &client_id, refresh_token).await;
    assert_eq!(refreshed.status, StatusCode::OK, "{}", refreshed.body);
    let access = refreshed.json()["access_token"].as_str().unwrap().to_string();
    let revoked = world.post_form("/mcp/revoke", &[("token", access.as_str()), ("client_id", client_id.as_str())]).await;
    assert_eq!(revoked.status, StatusCode::OK);
    let after = world.post_raw(Some(&access), r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, &[]).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);
}

// "SHOULD cache metadata respecting HTTP cache headers": a second authorization does not fetch again.
#[tokio::test]
async fn a_valid_document_is_kept_and_not_fetched_again() {
    let server = DocumentServer::start().await;
    server.serve("/client.json", vec![Answer::ok(server.document("/client.json", json!({})))]);
    let client_id = server.url("/client.json");
    let world = World::in_process(server.config()).await;
    assert_eq!(show(&world, &client_id).await.status, StatusCode::OK);
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    assert_eq!(exchange(&world, &client_id, &code).await.status, StatusCode::OK);
    assert_eq!(server.requests("/client.json"), 1, "the page, the approval and the token request share one fetch");
}

// A kept document is kept for what is left of its freshness (max-age less its Age), then
// fetched again.
#[tokio::test]
async fn a_kept_document_is_fetched_again_once_stale() {
    let server = DocumentServer::start().await;
    let headers = vec![("cache-control".into(), "max-age=2".into()), ("age".into(), "1".into())];
    server.serve("/client.json", vec![Answer { headers, ..Answer::ok(server.document("/client.json", json!({}))) }]);
    let world = World::in_process(server.config()).await;
    for _ in 0..2 {
        assert_eq!(show(&world, &server.url("/client.json")).await.status, StatusCode::OK);
    }
    assert_eq!(server.requests("/client.json"), 1, "kept while fresh");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(show(&world, &server.url("/client.json")).await.status, StatusCode::OK);
    assert_eq!(server.requests("/client.json"), 2, "fetched again after the one second left of its two");
}

// Cache-Control: no-store (or max-age=0) is respected: such a document is fetched each time.
#[tokio::test]
async fn a_no_store_document_is_fetched_each_time() {
    let server = DocumentServer::start().await;
    let answer = Answer { headers: vec![("cache-control".into(), "no-store".into())], ..Answer::ok(server.document("/client.json", json!({}))) };
    server.serve("/client.json", vec![answer]);
    let world = World::in_process(server.config()).await;
    for _ in 0..2 {
        assert_eq!(show(&world, &server.url("/client.json")).await.status, StatusCode::OK);
    }
    assert_eq!(server.requests("/client.json"), 2);
}

// Draft §4: the AS "MUST NOT cache error responses": a failed fetch is tried again next time.
#[tokio::test]
async fn a_failure_is_not_kept() {
    let server = DocumentServer::start().await;
    let failing = Answer { status: 500, ..Answer::ok("{}".into()) };
    server.serve("/client.json", vec![failing, Answer::ok(server.document("/client.json", json!({})))]);
    let world = World::in_process(server.config()).await;
    assert_refused(&show(&world, &server.url("/client.json")).await, "answered 500");
    assert_eq!(show(&world, &server.url("/client.json")).await.status, StatusCode::OK);
    assert_eq!(server.requests("/client.json"), 2);
}

// Draft-01: "MUST NOT automatically follow HTTP redirects", and only 200 counts.
#[tokio::test]
async fn a_redirect_or_any_status_but_200_is_refused() {
    let server = DocumentServer::start().await;
    let moved = Answer { status: 302, headers: vec![("location".into(), server.url("/client.json"))], ..Answer::ok(String::new()) };
    server.serve("/moved.json", vec![moved]);
    server.serve("/client.json", vec![Answer::ok(server.document("/client.json", json!({})))]);
    let world = World::in_process(server.config()).await;
    assert_refused(&show(&world, &server.url("/moved.json")).await, "redirects are not followed");
    assert_eq!(server.requests("/client.json"), 0, "the redirect was not followed");
    assert_refused(&show(&world, &server.url("/missing.json")).await, "answered 404");
    server.serve("/accepted.json", vec![Answer { status: 203, ..Answer::ok(server.document("/accepted.json", json!({}))) }]);
    assert_refused(&show(&world, &server.url("/accepted.json")).await, "only 200 counts");
}

// Draft-01: "The authorization server MUST treat all other HTTP status codes and content
// types as an error response": a document served as anything but application/json (its
// parameters aside), or with no content type, is refused.
#[tokio::test]
async fn a_document_served_with_another_content_type_is_refused() {
    let server = DocumentServer::start().await;
    let world = World::in_process(server.config()).await;
    for (path, content_type) in
        [("/html.json", Some("text/html")), ("/text.json", Some("text/plain")), ("/none.json", None), ("/jsonish.json", Some("application/jsonp"))]
    {
        let headers = match content_type {
            Some(value) => vec![("content-type".to_string(), value.to_string())],
            None => vec![("content-type".to_string(), String::new())],
        };
        server.serve(path, vec![Answer { headers, ..Answer::ok(server.document(path, json!({}))) }]);
        assert_refused(&show(&world, &server.url(path)).await, "content type");
    }
    for (path, content_type) in [("/charset.json", "application/json; charset=utf-8"), ("/upper.json", "Application/JSON")] {
        server.serve(path, vec![Answer { headers: vec![("content-type".into(), content_type.into())], ..Answer::ok(server.document(path, json!({}))) }]);
        let reply = show(&world, &server.url(path)).await;
        assert_eq!(reply.status, StatusCode::OK, "{content_type}: {}", reply.body);
    }
}

// Draft §6: a size cap (5 KiB, the draft's recommended maximum).
#[tokio::test]
async fn an_oversize_document_is_refused() {
    let server = DocumentServer::start().await;
    server.serve("/big.json", vec![Answer::ok(server.document("/big.json", json!({"logo_uri": "x".repeat(6 * 1024)})))]);
    let world = World::in_process(server.config()).await;
    assert_refused(&show(&world, &server.url("/big.json")).await, "larger than 5120 bytes");
    // Without a length announced, the body is read up to the cap and no further.
    let unannounced = Answer { unannounced: true, ..Answer::ok(server.document("/streamed.json", json!({"logo_uri": "x".repeat(6 * 1024)}))) };
    server.serve("/streamed.json", vec![unannounced]);
    assert_refused(&show(&world, &server.url("/streamed.json")).await, "larger than 5120 bytes");
    let small = Answer { unannounced: true, ..Answer::ok(server.document("/small.json", json!({}))) };
    server.serve("/small.json", vec![small]);
    assert_eq!(show(&world, &server.url("/small.json")).await.status, StatusCode::OK);
}

// A time limit bounds the fetch (--mcp-cimd-timeout-ms).
#[tokio::test]
async fn a_slow_document_is_refused_at_the_time_limit() {
    let server = DocumentServer::start().await;
    server.serve("/slow.json", vec![Answer { delay: Duration::from_secs(3), ..Answer::ok(server.document("/slow.json", json!({}))) }]);
    let world = World::in_process(McpConfig { cimd_timeout_ms: 300, ..server.config() }).await;
    let started = std::time::Instant::now();
    assert_refused(&show(&world, &server.url("/slow.json")).await, "did not arrive within 300 ms");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

// "MUST validate that the fetched document's client_id matches the URL exactly".
#[tokio::test]
async fn a_document_whose_client_id_is_not_its_url_is_refused() {
    let server = DocumentServer::start().await;
    server.serve("/client.json", vec![Answer::ok(server.document("/client.json", json!({"client_id": server.url("/other.json")})))]);
    let world = World::in_process(server.config()).await;
    assert_refused(&show(&world, &server.url("/client.json")).await, "client_id is not exactly its URL");
}

// "MUST validate the document structure is valid JSON and contains required fields"; no shared secret.
#[tokio::test]
async fn a_malformed_document_is_refused() {
    let server = DocumentServer::start().await;
    let world = World::in_process(server.config()).await;
    for (path, body, reason) in [
        ("/text.json", "not json".to_string(), "is not JSON"),
        ("/no-name.json", server.document("/no-name.json", json!({"client_name": null})), "needs a client_name"),
        ("/no-uris.json", server.document("/no-uris.json", json!({"redirect_uris": []})), "non-empty redirect_uris"),
        ("/secret.json", server.document("/secret.json", json!({"token_endpoint_auth_method": "client_secret_basic"})), "shared secret"),
    ] {
        server.serve(path, vec![Answer::ok(body)]);
        assert_refused(&show(&world, &server.url(path)).await, reason);
    }
}

// "MUST validate redirect URIs presented in an authorization request against those in the metadata document".
#[tokio::test]
async fn a_redirect_uri_not_in_the_document_is_refused() {
    let server = DocumentServer::start().await;
    server.serve("/client.json", vec![Answer::ok(server.document("/client.json", json!({})))]);
    let world = World::in_process(server.config()).await;
    let reply = world.get(&format!("/mcp/authorize?{}", authorize_query(&server.url("/client.json"), "http://127.0.0.1:47123/other"))).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.header("location").is_none());
    assert!(reply.body.contains("invalid_request: redirect_uri is not one the client registered"), "{}", reply.body);
}

// Draft-01 / SSRF: without the development flag, loopback and private addresses, and http, are refused before any request.
#[tokio::test]
async fn loopback_private_and_http_documents_are_refused_without_the_development_flag() {
    let server = DocumentServer::start().await;
    server.serve("/client.json", vec![Answer::ok(server.document("/client.json", json!({})))]);
    let world = World::in_process(McpConfig { cimd_allow_insecure: false, ..server.config() }).await;
    assert_refused(&show(&world, &server.url("/client.json")).await, "resolves to a loopback");
    // A name is resolved, and what it resolves to is checked.
    let by_name = server.url("/client.json").replace("127.0.0.1", "localhost");
    assert_refused(&show(&world, &by_name).await, "resolves to a loopback");
    assert_refused(&show(&world, "https://10.0.0.7/client.json").await, "resolves to a private network");
    assert_refused(&show(&world, "https://169.254.169.254/latest/client.json").await, "link-local (metadata) address");
    assert_refused(&show(&world, "https://[::1]:9/client.json").await, "resolves to a loopback");
    assert_refused(&show(&world, "http://app.example.com/client.json").await, "must use https");
    assert_eq!(server.requests("/client.json"), 0);
}

// Draft §3: the URL has a path, no fragment, no dot segments.
#[tokio::test]
async fn client_id_urls_without_a_path_or_with_dot_segments_are_refused() {
    let world = World::in_process(McpConfig::default()).await;
    assert_refused(&show(&world, "https://app.example.com").await, "must have a path");
    assert_refused(&show(&world, "https://app.example.com/a/../client.json").await, "normal form");
    assert_refused(&show(&world, "https://app.example.com/client.json#f").await, "fragment");
}

// With the development flag, a name that resolves to loopback is fetched (the certificate names localhost too).
#[tokio::test]
async fn the_development_flag_allows_a_loopback_name() {
    let server = DocumentServer::start().await;
    let url = server.url("/client.json").replace("127.0.0.1", "localhost");
    let document = json!({"client_id": url, "client_name": "Local", "redirect_uris": [REDIRECT_URI]}).to_string();
    server.serve("/client.json", vec![Answer::ok(document)]);
    let world = World::in_process(server.config()).await;
    let page = show(&world, &url).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"client-host\">localhost<"));
}

// At /token a client whose document is no longer usable gets invalid_client.
#[tokio::test]
async fn the_token_endpoint_refuses_an_unusable_document_with_invalid_client() {
    let server = DocumentServer::start().await;
    let once = Answer { headers: vec![("cache-control".into(), "no-store".into())], ..Answer::ok(server.document("/client.json", json!({}))) };
    server.serve("/client.json", vec![once, Answer { status: 404, ..Answer::ok("{}".into()) }]);
    let client_id = server.url("/client.json");
    let world = World::in_process(server.config()).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    let reply = exchange(&world, &client_id, &code).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.body);
    assert_eq!(reply.json()["error"], "invalid_client");
}

// MCP metadata: "client_id_metadata_document_supported": true, and RFC 9207's flag.
#[tokio::test]
async fn the_metadata_advertises_cimd_and_the_iss_parameter() {
    let world = World::new().await;
    let document = world.get("/.well-known/oauth-authorization-server").await.json();
    assert_eq!(document["client_id_metadata_document_supported"], true);
    assert_eq!(document["authorization_response_iss_parameter_supported"], true);
}
