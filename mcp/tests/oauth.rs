//! The OAuth 2.1 authorization server (docs/mcp.md: Authentication, OAuth
//! details 1–5) and its abuse cases: wrong verifier, code replay, expired code, near-miss
//! redirect URIs, refresh-token reuse, revoked PAT.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use recap_mcp::McpConfig;
use recap_testkit::events;
use serde_json::{json, Value};

async fn mcp_status<W: recap_testkit::World + ?Sized>(world: &World<W>, token: &str) -> (StatusCode, Value) {
    let reply =
        world.post_raw(Some(token), r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_meetings","arguments":{"limit":1}}}"#, &[]).await;
    // "A missing, unknown, expired or revoked token returns 401 with a WWW-Authenticate
    // header pointing to the protected-resource metadata": every 401 of these tests.
    if reply.status == StatusCode::UNAUTHORIZED {
        assert_challenge(&reply);
    }
    let body = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    (reply.status, body)
}

// "Metadata is published at /.well-known/oauth-protected-resource and /.well-known/oauth-authorization-server under {mcp_url}." (+ RFC 8414/9728 root forms)
#[tokio::test]
async fn metadata_is_published_under_mcp_url_and_at_the_rfc_paths() {
    let world = World::new().await;
    for path in ["/mcp/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        let reply = world.get(path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        let document = reply.json();
        assert_eq!(document["resource"], "http://mcp.test:8080/mcp");
        assert_eq!(document["authorization_servers"], json!(["http://mcp.test:8080/mcp"]));
        assert_eq!(document["scopes_supported"], json!(["svc:read"]));
    }
    for path in ["/mcp/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp", "/.well-known/oauth-authorization-server"] {
        let reply = world.get(path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        let document = reply.json();
        assert_eq!(document["issuer"], "http://mcp.test:8080/mcp");
        assert_eq!(document["authorization_endpoint"], "http://mcp.test:8080/mcp/authorize");
        assert_eq!(document["token_endpoint"], "http://mcp.test:8080/mcp/token");
        assert_eq!(document["registration_endpoint"], "http://mcp.test:8080/mcp/register");
        assert_eq!(document["revocation_endpoint"], "http://mcp.test:8080/mcp/revoke");
        assert_eq!(document["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(document["token_endpoint_auth_methods_supported"], json!(["none"]));
        assert_eq!(document["grant_types_supported"], json!(["authorization_code", "refresh_token"]));
        assert_eq!(document["authorization_response_iss_parameter_supported"], true);
    }
}

// The issuer equals the URL the document is fetched under (Host, X-Forwarded-Proto).
#[tokio::test]
async fn the_issuer_follows_the_host_the_client_used() {
    let world = World::new().await;
    let request = axum::http::Request::get("/.well-known/oauth-authorization-server/mcp")
        .header("host", "mcp.example.com")
        .header("x-forwarded-proto", "https")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(world.send(request).await.json()["issuer"], "https://mcp.example.com/mcp");
}

// "Dynamic client registration at /register ... public clients without a secret"
#[tokio::test]
async fn registration_creates_a_public_client() {
    let world = World::new().await;
    for path in ["/mcp/register", "/register"] {
        let reply = world.post_json(path, &json!({"client_name": "Claude", "redirect_uris": ["https://claude.ai/api/mcp/auth_callback", "http://localhost:33418/cb"], "token_endpoint_auth_method": "client_secret_post"})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let client = reply.json();
        assert!(client["client_id"].as_str().unwrap().starts_with("mcpc_"));
        assert_eq!(client["token_endpoint_auth_method"], "none");
        assert!(client.get("client_secret").is_none());
        assert_eq!(client["grant_types"], json!(["authorization_code", "refresh_token"]));
        assert_eq!(client["redirect_uris"], json!(["https://claude.ai/api/mcp/auth_callback", "http://localhost:33418/cb"]));
    }
}

// RFC 7591 §3.2.2: invalid_redirect_uri and invalid_client_metadata.
#[tokio::test]
async fn bad_registrations_are_rfc_7591_errors() {
    let world = World::new().await;
    for (body, code) in [
        (json!({"redirect_uris": ["http://evil.example/cb"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["https://ok.example/cb#fragment"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["myapp://callback"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({"client_name": "x"}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["https://ok.example/cb"], "grant_types": ["client_credentials"]}), "invalid_client_metadata"),
        (json!({"redirect_uris": ["https://ok.example/cb"], "response_types": ["token"]}), "invalid_client_metadata"),
        (json!({"redirect_uris": ["https://ok.example/cb"], "scope": "admin"}), "invalid_client_metadata"),
        (json!({"redirect_uris": ["https://ok.example/cb"], "client_name": 5}), "invalid_client_metadata"),
        (json!([1, 2]), "invalid_client_metadata"),
    ] {
        let reply = world.post_json("/mcp/register", &body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(reply.json()["error"], code, "{body}");
    }
    // Descriptions speak of the document, never of the type it is read into.
    for (body, description) in [
        (json!([1, 2]), "the body must be a JSON object of client metadata"),
        (
            json!({"redirect_uris": ["https://ok.example/cb"], "grant_types": "authorization_code"}),
            "grant_types and response_types must be arrays of strings, and scope a string",
        ),
    ] {
        let reply = world.post_json("/mcp/register", &body).await;
        assert_eq!(reply.json()["error_description"], description, "{body}");
    }
    // A member given twice: which value was meant is unknowable.
    let twice = r#"{"redirect_uris": ["https://ok.example/cb"], "redirect_uris": ["https://evil.example/cb"]}"#;
    let request = axum::http::Request::post("/mcp/register").header("host", "mcp.test:8080").header("content-type", "application/json");
    let reply = world.send(request.body(axum::body::Body::from(twice)).unwrap()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert_eq!(reply.json()["error"], "invalid_client_metadata");
    assert!(reply.json()["error_description"].as_str().unwrap().starts_with("a member of the document is given more than once"), "{}", reply.body);
}

fn authorize_query(client_id: &str, redirect_uri: &str, extra: &[(&str, &str)]) -> String {
    let challenge = challenge(VERIFIER);
    let mut pairs = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
        ("state", "st8"),
        ("scope", "svc:read"),
    ];
    for (key, value) in extra {
        pairs.retain(|(existing, _)| existing != key);
        if !value.is_empty() {
            pairs.push((key, value));
        }
    }
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

// "On the authorization page the user proves identity with a personal access token."
#[tokio::test]
async fn the_authorization_page_names_the_client_and_scope_and_asks_for_a_pat() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let reply = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, REDIRECT_URI, &[]))).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.header("content-type").unwrap().starts_with("text/html"));
    assert!(reply.body.contains("Test &lt;Client&gt;"), "the client's name, escaped");
    assert!(reply.body.contains("svc:read"));
    assert!(reply.body.contains("<form method=\"POST\""));
    assert!(reply.body.contains("name=\"pat\""));
    assert_eq!(reply.header("x-frame-options"), Some("DENY"));
}

// MCP authorization, security considerations: "SHOULD display additional warnings for
// localhost-only redirect URIs": any local program could be listening there. Every
// loopback form warns (`localhost`, all of 127.0.0.0/8, `::1`); a remote host does not.
#[tokio::test]
async fn the_authorization_page_warns_when_approving_sends_to_this_computer() {
    let world = World::new().await;
    let warning = "This is an application on this computer";
    let local = [
        "http://127.0.0.1:4000/cb",
        "http://127.0.0.2:4000/cb",
        "http://127.1.2.3/cb",
        "http://localhost:4000/cb",
        "http://LocalHost:4000/cb",
        "http://[::1]:4000/cb",
    ];
    for redirect_uri in local.into_iter().chain(["https://app.example.com/cb"]) {
        let client_id = register(&world, &[redirect_uri]).await;
        let reply = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, redirect_uri, &[]))).await;
        assert_eq!(reply.status, StatusCode::OK, "{redirect_uri}: {}", reply.body);
        assert_eq!(reply.body.contains(warning), local.contains(&redirect_uri), "{redirect_uri}");
    }
}

// RFC 6749 §4.1.2.1: an invalid client or redirect URI is shown, never redirected to,
// the page naming the OAuth error.
#[tokio::test]
async fn unknown_clients_and_unregistered_or_near_miss_redirect_uris_get_an_error_page() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    // A loopback redirect URI may name another port (RFC 8252 §7.3), nothing else.
    let near_misses = [
        "http://127.0.0.1:47123/callback/",
        "http://127.0.0.1:47123/Callback",
        "http://localhost:47123/callback",
        "http://127.0.0.1:47123/callback?x=1",
        "https://evil.example/callback",
    ];
    for redirect_uri in near_misses {
        let reply = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, redirect_uri, &[]))).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{redirect_uri}");
        assert!(reply.header("location").is_none());
        assert!(reply.body.contains("Authorization failed"));
        assert!(reply.body.contains("invalid_request: redirect_uri is not one the client registered"), "{redirect_uri}: {}", reply.body);
    }
    let reply = world.get(&format!("/mcp/authorize?{}", authorize_query("mcpc_unknown", REDIRECT_URI, &[]))).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.body.contains("invalid_client: unknown client_id"), "{}", reply.body);
    assert!(reply.header("location").is_none());
    // The POST is held to the same rule.
    let reply = world.post_form("/mcp/authorize", &[("client_id", &client_id), ("redirect_uri", near_misses[0]), ("pat", FLOW_PAT)]).await;
    assert!(reply.header("location").is_none());
}

// "authorization code flow with PKCE method S256": plain and a missing challenge are refused
// (before the user acted: an error page naming the error, with a link back carrying error,
// state and iss; RFC 9700 §4.11.2).
#[tokio::test]
async fn pkce_s256_is_required() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    for (extra, error) in [
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge_method", "")], "invalid_request"),
        (vec![("code_challenge", "")], "invalid_request"),
        (vec![("response_type", "token")], "unsupported_response_type"),
        (vec![("scope", "svc:write")], "invalid_scope"),
    ] {
        let reply = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, REDIRECT_URI, &extra))).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{extra:?}");
        assert_eq!(reply.header("location"), None);
        assert!(reply.body.contains(&format!("<code id=\"error\">{error}</code>")), "{}", reply.body);
        let (base, pairs) = return_link(&reply);
        assert_eq!(base, REDIRECT_URI);
        assert_eq!(query_value(&pairs, "error").as_deref(), Some(error), "{extra:?}");
        assert_eq!(query_value(&pairs, "state").as_deref(), Some("st8"));
        assert_eq!(query_value(&pairs, "iss").as_deref(), Some("http://mcp.test:8080/mcp"));
        assert!(query_value(&pairs, "code").is_none());
    }
}

// Approval redirects to the exact registered redirect URI with code, state and iss (RFC 9207).
#[tokio::test]
async fn approval_redirects_with_code_state_and_iss() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let challenge = challenge(VERIFIER);
    let reply = world
        .post_form(
            "/mcp/authorize",
            &[
                ("response_type", "code"),
                ("client_id", &client_id),
                ("redirect_uri", REDIRECT_URI),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("state", "opaque state"),
                ("pat", FLOW_PAT),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let (base, pairs) = location_query(&reply);
    assert_eq!(base, REDIRECT_URI);
    assert!(query_value(&pairs, "code").is_some_and(|code| code.len() >= 43));
    assert_eq!(query_value(&pairs, "state").as_deref(), Some("opaque state"));
    assert_eq!(query_value(&pairs, "iss").as_deref(), Some("http://mcp.test:8080/mcp"));
}

#[tokio::test]
async fn bad_pats_and_denial_do_not_issue_codes() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let challenge = challenge(VERIFIER);
    // The authorization page's form, posted with `pat` and each of `decisions`.
    let world = &world;
    let submit = |pat: &str, decisions: &[&str]| {
        let mut pairs = vec![
            ("response_type", "code".to_string()),
            ("client_id", client_id.clone()),
            ("redirect_uri", REDIRECT_URI.to_string()),
            ("code_challenge", challenge.clone()),
            ("code_challenge_method", "S256".to_string()),
            ("state", "s".to_string()),
            ("pat", pat.to_string()),
        ];
        pairs.extend(decisions.iter().map(|decision| ("decision", decision.to_string())));
        async move {
            let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(key, value)| (*key, value.as_str())).collect();
            world.post_form("/mcp/authorize", &borrowed).await
        }
    };
    for (pat, status) in [
        ("svc_pat_nope", StatusCode::UNAUTHORIZED),
        (REVOKED_PAT, StatusCode::UNAUTHORIZED),
        (ENTERPRISE_PAT, StatusCode::PAYMENT_REQUIRED),
        ("", StatusCode::BAD_REQUEST),
    ] {
        let reply = submit(pat, &["approve"]).await;
        assert_eq!(reply.status, status, "{pat}");
        assert!(reply.header("location").is_none());
        assert!(reply.body.contains("name=\"pat\""), "the form is shown again");
        assert!(!pat.starts_with("svc_") || !reply.body.contains(pat), "the PAT is never echoed");
    }
    // "The user proves identity with a personal access token": an OAuth access token of
    // the same account is not one.
    let (_, access, _) = connect(world, FLOW_PAT).await;
    let reply = submit(&access, &["approve"]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "an svc_oat_ token is not a PAT");
    assert!(reply.header("location").is_none());
    assert!(!reply.body.contains(&access), "the token is never echoed");
    let reply = submit("", &["deny"]).await;
    let (_, query) = location_query(&reply);
    assert_eq!(query_value(&query, "error").as_deref(), Some("access_denied"));
    // Only the page's own buttons decide, with a valid PAT too: no decision or another
    // value shows the form again; a repeated one is an error page. None redirects.
    for decisions in [&[][..], &["maybe"], &["DENY"], &["Approve"]] {
        let reply = submit(FLOW_PAT, decisions).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{decisions:?}");
        assert!(reply.header("location").is_none(), "{decisions:?}");
        assert!(reply.body.contains("name=\"pat\"") && reply.body.contains("Choose Approve or Deny."), "{decisions:?}: {}", reply.body);
    }
    for decisions in [&["deny", "deny"][..], &["approve", "approve"], &["deny", "approve"]] {
        let reply = submit(FLOW_PAT, decisions).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{decisions:?}");
        assert!(reply.header("location").is_none(), "{decisions:?}");
        assert!(reply.body.contains("decision is repeated") && !reply.body.contains("code="), "{decisions:?}: {}", reply.body);
    }
}

// The whole flow: the svc_oat_ token works on /mcp; access tokens last one hour.
#[tokio::test]
async fn a_code_exchange_issues_a_working_one_hour_access_token() {
    let world = World::in_process(McpConfig::default()).await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    let reply = exchange(&world, &client_id, &code).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let tokens = reply.json();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    assert_eq!(tokens["scope"], "svc:read");
    let access = tokens["access_token"].as_str().unwrap();
    assert!(access.starts_with("svc_oat_"));
    let (status, body) = mcp_status(&world, access).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["result"]["isError"], false);
    world.advance_clock(Duration::from_secs(3599));
    assert_eq!(mcp_status(&world, access).await.0, StatusCode::OK);
    world.advance_clock(Duration::from_secs(2));
    let reply = world.post_raw(Some(access), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "expired after one hour");
    assert_challenge(&reply);
}

// Abuse: a wrong PKCE verifier.
#[tokio::test]
async fn a_wrong_verifier_is_invalid_grant() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    for verifier in ["wrong-verifier-0123456789-0123456789-0123456789", "short", ""] {
        let reply = exchange_with_verifier(&world, &client_id, &code, verifier).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{verifier}");
        assert!(["invalid_grant", "invalid_request"].contains(&reply.json()["error"].as_str().unwrap()));
    }
}

// Abuse: code replay revokes what the code issued.
#[tokio::test]
async fn replaying_a_code_fails_and_revokes_the_tokens_it_issued() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    let tokens = exchange(&world, &client_id, &code).await.json();
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(mcp_status(&world, access).await.0, StatusCode::OK);
    let replay = exchange(&world, &client_id, &code).await;
    assert_eq!(replay.status, StatusCode::BAD_REQUEST);
    assert_eq!(replay.json()["error"], "invalid_grant");
    let (status, body) = mcp_status(&world, access).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "token_revoked");
    assert_eq!(refresh(&world, &client_id, tokens["refresh_token"].as_str().unwrap()).await.json()["error"], "invalid_grant");
}

// Abuse: codes live at most 10 minutes.
#[tokio::test]
async fn an_expired_code_is_invalid_grant() {
    let world = World::in_process(McpConfig::default()).await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    world.advance_clock(Duration::from_secs(601));
    let reply = exchange(&world, &client_id, &code).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"], "invalid_grant");
}

// redirect_uri must match the authorization request; the code belongs to its client.
#[tokio::test]
async fn a_mismatched_redirect_uri_or_client_is_invalid_grant() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI, "http://127.0.0.1:47123/other"]).await;
    let other_client = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    for (client, redirect_uri) in [(client_id.as_str(), "http://127.0.0.1:47123/other"), (other_client.as_str(), REDIRECT_URI)] {
        let reply = world
            .post_form(
                "/mcp/token",
                &[("grant_type", "authorization_code"), ("code", &code), ("redirect_uri", redirect_uri), ("client_id", client), ("code_verifier", VERIFIER)],
            )
            .await;
        assert_eq!(reply.json()["error"], "invalid_grant", "{client} {redirect_uri}");
    }
    let reply =
        world.post_form("/mcp/token", &[("grant_type", "authorization_code"), ("code", &code), ("client_id", &client_id), ("code_verifier", VERIFIER)]).await;
    assert_eq!(reply.json()["error"], "invalid_grant", "redirect_uri omitted although the request named it");
    let reply = world
        .post_form(
            "/mcp/token",
            &[("grant_type", "authorization_code"), ("code", &code), ("redirect_uri", REDIRECT_URI), ("client_id", "mcpc_nobody"), ("code_verifier", VERIFIER)],
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(reply.json()["error"], "invalid_client");
    // The legitimate exchange still works.
    assert_eq!(exchange(&world, &client_id, &code).await.status, StatusCode::OK);
}

// "Refresh tokens last 30 days and rotate on every use."
#[tokio::test]
async fn refresh_tokens_rotate_and_last_30_days() {
    let world = World::in_process(McpConfig::default()).await;
    let (client_id, _, refresh_1) = connect(&world, FLOW_PAT).await;
    let reply = refresh(&world, &client_id, &refresh_1).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let tokens = reply.json();
    let refresh_2 = tokens["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(refresh_2, refresh_1);
    assert_eq!(mcp_status(&world, tokens["access_token"].as_str().unwrap()).await.0, StatusCode::OK);
    world.advance_clock(Duration::from_secs(30 * 86_400 - 60));
    let reply = refresh(&world, &client_id, &refresh_2).await;
    assert_eq!(reply.status, StatusCode::OK, "still within 30 days");
    let refresh_3 = reply.json()["refresh_token"].as_str().unwrap().to_string();
    world.advance_clock(Duration::from_secs(30 * 86_400 + 1));
    let reply = refresh(&world, &client_id, &refresh_3).await;
    assert_eq!(reply.json()["error"], "invalid_grant", "expired after 30 days");
}

// Abuse: presenting a rotated refresh token revokes the whole grant.
#[tokio::test]
async fn reusing_a_rotated_refresh_token_revokes_the_grant() {
    let world = World::new().await;
    let (client_id, _, refresh_1) = connect(&world, FLOW_PAT).await;
    let tokens = refresh(&world, &client_id, &refresh_1).await.json();
    let (access_2, refresh_2) = (tokens["access_token"].as_str().unwrap().to_string(), tokens["refresh_token"].as_str().unwrap().to_string());
    let reuse = refresh(&world, &client_id, &refresh_1).await;
    assert_eq!(reuse.status, StatusCode::BAD_REQUEST);
    assert_eq!(reuse.json()["error"], "invalid_grant");
    assert_eq!(mcp_status(&world, &access_2).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(refresh(&world, &client_id, &refresh_2).await.json()["error"], "invalid_grant");
}

// "Revoking that token also revokes every OAuth connection it authorized."
#[tokio::test]
async fn revoking_the_pat_revokes_every_connection_it_authorized() {
    let world = World::new().await;
    let (client_a, access_a, refresh_a) = connect(&world, FLOW2_PAT).await;
    let (_, access_b, _) = connect(&world, FLOW2_PAT).await;
    let (_, access_other, _) = connect(&world, FLOW_PAT).await;
    assert_eq!(mcp_status(&world, &access_a).await.0, StatusCode::OK);
    world.feed(&[events::token_revoked("acc_flow", "tok_flow2", 2)]).await;
    for access in [&access_a, &access_b] {
        let (status, body) = mcp_status(&world, access).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["code"], "token_revoked");
    }
    assert_eq!(refresh(&world, &client_a, &refresh_a).await.json()["error"], "invalid_grant");
    assert_eq!(mcp_status(&world, &access_other).await.0, StatusCode::OK, "connections approved with another PAT live on");
}

// A code approved with a PAT revoked before the exchange issues nothing.
#[tokio::test]
async fn a_code_approved_by_a_since_revoked_pat_is_invalid_grant() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW2_PAT).await;
    world.feed(&[events::token_revoked("acc_flow", "tok_flow2", 2)]).await;
    assert_eq!(exchange(&world, &client_id, &code).await.json()["error"], "invalid_grant");
}

// RFC 7009 revocation: a refresh token revokes the grant, an access token itself; unknown tokens are 200.
#[tokio::test]
async fn revocation_follows_rfc_7009() {
    let world = World::new().await;
    let (client_id, access, refresh_token) = connect(&world, FLOW_PAT).await;
    let reply = world.post_form("/mcp/revoke", &[("token", &access), ("client_id", &client_id)]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(mcp_status(&world, &access).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(refresh(&world, &client_id, &refresh_token).await.status, StatusCode::OK, "the refresh token survives an access token's revocation");
    let (client_id, access, refresh_token) = connect(&world, FLOW_PAT).await;
    assert_eq!(
        world.post_form("/revoke", &[("token", &refresh_token), ("token_type_hint", "refresh_token"), ("client_id", &client_id)]).await.status,
        StatusCode::OK
    );
    assert_eq!(mcp_status(&world, &access).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(refresh(&world, &client_id, &refresh_token).await.json()["error"], "invalid_grant");
    assert_eq!(world.post_form("/mcp/revoke", &[("token", "svc_oat_unknown"), ("client_id", &client_id)]).await.status, StatusCode::OK);
    let reply = world.post_form("/mcp/revoke", &[]).await;
    assert_eq!((reply.status, reply.json()["error"].clone()), (StatusCode::BAD_REQUEST, json!("invalid_request")));
}

// OAuth access tokens get what PATs get: "The plan is checked on every request" (402),
// "the token or plan could not be verified; retry shortly" (503), and a revoked token's
// 401 points to the protected-resource metadata.
#[tokio::test]
async fn oauth_access_tokens_are_held_to_the_plan_the_store_and_revocation() {
    let world = World::in_process(McpConfig::default()).await;
    let (_, access, _) = connect(&world, FLOW_PAT).await;
    assert_eq!(mcp_status(&world, &access).await.0, StatusCode::OK);
    world.fail_table("oauth_tokens");
    let (status, body) = mcp_status(&world, &access).await;
    assert_eq!((status, body["error"]["code"].clone()), (StatusCode::SERVICE_UNAVAILABLE, json!("unavailable")));
    let world = World::in_process(McpConfig::default()).await;
    let (_, access_2, _) = connect(&world, FLOW_PAT).await;
    world.fail_table("oauth_grants");
    assert_eq!(mcp_status(&world, &access_2).await.0, StatusCode::SERVICE_UNAVAILABLE, "the grant could not be read");
    let world = World::new().await;
    let (_, access_3, _) = connect(&world, FLOW_PAT).await;
    world.feed(&[events::account("acc_flow", Some("enterprise"), None, 2)]).await;
    let (status, body) = mcp_status(&world, &access_3).await;
    assert_eq!(status, StatusCode::PAYMENT_REQUIRED, "a downgrade applies at once to an access token");
    assert_eq!(body["error"], json!({"code": "feature_not_included", "message": "the plan does not include MCP", "feature": "mcp"}));
    world.feed(&[events::account("acc_flow", None, None, 3)]).await;
    assert_eq!(mcp_status(&world, &access_3).await.1["error"]["code"], "no_plan");
    world.feed(&[events::account("acc_flow", Some("flow"), None, 4)]).await;
    let (client_4, access_4, _) = connect(&world, FLOW_PAT).await;
    assert_eq!(world.post_form("/mcp/revoke", &[("token", &access_4), ("client_id", &client_4)]).await.status, StatusCode::OK);
    let reply = world.post_raw(Some(&access_4), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_challenge(&reply);
    assert!(reply.header("www-authenticate").is_some_and(|challenge| challenge.contains(r#"error="invalid_token""#)));
}

// RFC 6749 §5.2 errors with proper statuses.
#[tokio::test]
async fn token_endpoint_errors_follow_rfc_6749() {
    let world = World::new().await;
    for (pairs, status, error) in [
        (vec![("grant_type", "password"), ("username", "a")], StatusCode::BAD_REQUEST, "unsupported_grant_type"),
        (vec![("grant_type", "client_credentials")], StatusCode::BAD_REQUEST, "unsupported_grant_type"),
        (vec![], StatusCode::BAD_REQUEST, "invalid_request"),
        (vec![("grant_type", "authorization_code")], StatusCode::BAD_REQUEST, "invalid_request"),
        (vec![("grant_type", "refresh_token")], StatusCode::BAD_REQUEST, "invalid_request"),
        (vec![("grant_type", "refresh_token"), ("refresh_token", "svc_ort_nope")], StatusCode::BAD_REQUEST, "invalid_request"),
        (vec![("grant_type", "refresh_token"), ("refresh_token", "svc_ort_nope"), ("client_id", "mcpc_nope")], StatusCode::BAD_REQUEST, "invalid_grant"),
        (vec![("grant_type", "authorization_code"), ("grant_type", "refresh_token")], StatusCode::BAD_REQUEST, "invalid_request"),
    ] {
        let reply = world.post_form("/mcp/token", &pairs).await;
        assert_eq!(reply.status, status, "{pairs:?}");
        assert_eq!(reply.json()["error"], error, "{pairs:?}");
        assert_eq!(reply.header("cache-control"), Some("no-store"));
    }
}

// "only hashes of tokens and codes stored": no stored row holds a token or code value.
#[tokio::test]
async fn only_hashes_of_tokens_and_codes_are_stored() {
    use recap_readmodel::tables::{OAUTH_CODES, OAUTH_GRANTS, OAUTH_TOKENS};
    use recap_readmodel::Val;
    let world = World::in_process(McpConfig::default()).await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    let tokens = exchange(&world, &client_id, &code).await.json();
    let driver = world.readmodel().driver();
    let secrets = [code.as_str(), tokens["access_token"].as_str().unwrap(), tokens["refresh_token"].as_str().unwrap(), FLOW_PAT];
    assert!(driver.get(&OAUTH_CODES, &[Val::text(&code)], &[]).await.unwrap().is_none());
    let code_row = driver.get(&OAUTH_CODES, &[Val::text(recap_access::token_sha256(&code))], &[]).await.unwrap().expect("the code's hash is the key");
    let access_row = driver.get(&OAUTH_TOKENS, &[Val::text(recap_access::token_sha256(secrets[1]))], &[]).await.unwrap().expect("access hash");
    let refresh_row = driver.get(&OAUTH_TOKENS, &[Val::text(recap_access::token_sha256(secrets[2]))], &[]).await.unwrap().expect("refresh hash");
    let grant_id = serde_json::from_str::<Value>(&access_row.body).unwrap()["grant_id"].as_str().unwrap().to_string();
    let grant_row = driver.get(&OAUTH_GRANTS, &[Val::text(&grant_id)], &[]).await.unwrap().expect("grant");
    for row in [&code_row, &access_row, &refresh_row, &grant_row] {
        for secret in secrets {
            assert!(!row.body.contains(secret), "a stored row holds a secret: {}", row.body);
        }
    }
}

// OAuth state lives in the store: a second router over the same store continues the flow (any pod serves any step).
#[tokio::test]
async fn any_router_over_the_same_store_continues_a_flow() {
    let world = World::in_process(McpConfig::default()).await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    let second = recap_mcp::router(recap_mcp::McpState::new(world.readmodel().clone(), recap_access::Plans::default(), &recap_mcp::McpConfig::default()));
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", client_id.as_str()),
            ("code_verifier", VERIFIER),
        ])
        .finish();
    // Behind one name, as pods behind one load balancer are.
    let request = axum::http::Request::post("/mcp/token")
        .header("host", "mcp.test:8080")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(axum::body::Body::from(body))
        .unwrap();
    let response = tower::ServiceExt::oneshot(second, request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// Twenty simultaneous POSTs of one token request: the token responses of those that got
/// tokens (every other one must be invalid_grant).
async fn race(world: &std::sync::Arc<World>, pairs: &[(&str, &str)]) -> Vec<Value> {
    let pairs: Vec<(String, String)> = pairs.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(20));
    let mut racers = Vec::new();
    for _ in 0..20 {
        let (world, pairs, start) = (world.clone(), pairs.clone(), start.clone());
        racers.push(tokio::spawn(async move {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
            start.wait().await;
            world.post_form("/mcp/token", &pairs).await
        }));
    }
    let mut issued = Vec::new();
    for racer in racers {
        let reply = racer.await.unwrap();
        match reply.status {
            StatusCode::OK => issued.push(reply.json()),
            status => {
                assert_eq!(status, StatusCode::BAD_REQUEST, "{}", reply.body);
                assert_eq!(reply.json()["error"], "invalid_grant");
            }
        }
    }
    issued
}

// "single-use codes ... reusing a code revokes what it issued" (docs/mcp.md, OAuth), under true
// concurrency: of many simultaneous exchanges of one code at most one is issued tokens
// (the one that spends the code), the others are invalid_grant, and being reuses they
// revoke what the winner got.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_redemptions_of_one_code_issue_tokens_at_most_once_and_revoke_them() {
    // Twenty racers queue on the store's durable writes: a bound that load cannot reach.
    let world = std::sync::Arc::new(World::with_config(McpConfig { store_timeout_ms: Some(10_000), ..McpConfig::default() }).await);
    let client_id = register(&world, &[REDIRECT_URI]).await;
    // Races until one has a winner, so that the revocation of what a winner got is
    // checked, not skipped.
    let mut won = None;
    for _ in 0..10 {
        let code = authorize(&world, &client_id, FLOW_PAT).await;
        let issued = race(
            &world,
            &[("grant_type", "authorization_code"), ("code", &code), ("code_verifier", VERIFIER), ("client_id", &client_id), ("redirect_uri", REDIRECT_URI)],
        )
        .await;
        assert!(issued.len() <= 1, "at most one redemption wins: {issued:?}");
        if let Some(tokens) = issued.into_iter().next() {
            won = Some((code, tokens));
            break;
        }
        assert_eq!(exchange(&world, &client_id, &code).await.json()["error"], "invalid_grant", "a code no racer won is spent too");
    }
    let (code, tokens) = won.expect("one of ten races had a winner");
    let (status, body) = mcp_status(&world, tokens["access_token"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the concurrent reuses revoked the winner's tokens");
    assert_eq!(body["error"]["code"], "token_revoked");
    assert_eq!(refresh(&world, &client_id, tokens["refresh_token"].as_str().unwrap()).await.json()["error"], "invalid_grant");
    assert_eq!(exchange(&world, &client_id, &code).await.json()["error"], "invalid_grant", "the code is spent");
}

// "refresh_token (rotates on every use ... presenting a rotated one revokes the whole
// grant)" (docs/mcp.md, OAuth), under true concurrency: of many simultaneous uses of one refresh
// token at most one rotates it, and the others, being reuses, revoke the grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_uses_of_one_refresh_token_rotate_it_once_and_revoke_the_grant() {
    let world = std::sync::Arc::new(World::with_config(McpConfig { store_timeout_ms: Some(10_000), ..McpConfig::default() }).await);
    let client_id = register(&world, &[REDIRECT_URI]).await;
    // Races (each on a grant of its own) until one has a winner, so that the revocation
    // of what the winner got is checked, not skipped.
    let mut won = None;
    for _ in 0..10 {
        let code = authorize(&world, &client_id, FLOW_PAT).await;
        let tokens = exchange(&world, &client_id, &code).await.json();
        let refresh_token = tokens["refresh_token"].as_str().unwrap().to_string();
        let issued = race(&world, &[("grant_type", "refresh_token"), ("refresh_token", &refresh_token), ("client_id", &client_id)]).await;
        assert!(issued.len() <= 1, "at most one use rotates the token: {issued:?}");
        let (status, _) = mcp_status(&world, tokens["access_token"].as_str().unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "the grant is revoked: its first access token too");
        if let Some(rotated) = issued.into_iter().next() {
            won = Some(rotated);
            break;
        }
    }
    let rotated = won.expect("one of ten races had a winner");
    let (status, _) = mcp_status(&world, rotated["access_token"].as_str().unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the concurrent reuses revoked the grant");
    assert_eq!(refresh(&world, &client_id, rotated["refresh_token"].as_str().unwrap()).await.json()["error"], "invalid_grant");
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the grant is revoked: its first access token too");
}

// A lone redemption always wins its claim, and an exchange refused for a wrong verifier
// does not spend the code for the client that holds the right one.
#[tokio::test]
async fn a_refused_exchange_does_not_spend_the_code() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    let wrong = exchange_with_verifier(&world, &client_id, &code, "wrong-verifier-0123456789-0123456789-0123456789").await;
    assert_eq!(wrong.json()["error"], "invalid_grant");
    let reply = exchange(&world, &client_id, &code).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(mcp_status(&world, reply.json()["access_token"].as_str().unwrap()).await.0, StatusCode::OK);
}

fn options(path: &str, origin: Option<&str>, request_headers: &str) -> axum::http::Request<axum::body::Body> {
    let mut request = axum::http::Request::builder()
        .method("OPTIONS")
        .uri(path)
        .header("host", "mcp.test:8080")
        .header("access-control-request-method", if path.contains(".well-known") { "GET" } else { "POST" })
        .header("access-control-request-headers", request_headers);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.body(axum::body::Body::empty()).unwrap()
}

// CORS (docs/mcp.md, CORS): the discovery documents are public, so their preflight
// and their responses allow every origin; browsers preflight them because discovery
// sends MCP-Protocol-Version.
#[tokio::test]
async fn discovery_documents_answer_browser_preflights_for_any_origin() {
    let world = World::with_config(McpConfig { allow_loopback_origins: false, ..McpConfig::default() }).await;
    for path in [
        "/mcp/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        "/mcp/.well-known/oauth-authorization-server",
        "/.well-known/oauth-authorization-server/mcp",
        "/.well-known/oauth-authorization-server",
    ] {
        let reply = world.send(options(path, Some("https://any.example"), "mcp-protocol-version")).await;
        assert_eq!(reply.status, StatusCode::NO_CONTENT, "{path}");
        assert_eq!(reply.header("access-control-allow-origin"), Some("*"), "{path}");
        assert!(reply.header("access-control-allow-methods").unwrap().contains("GET"), "{path}");
        assert!(reply.header("access-control-allow-headers").unwrap().contains("mcp-protocol-version"), "{path}");
        assert_eq!(world.get(path).await.header("access-control-allow-origin"), Some("*"), "{path}");
    }
}

// CORS (docs/mcp.md, CORS): /register, /token and /revoke follow the Origin rule of
// /mcp ("a present Origin header that is not allowed by config → 403"): an allowed
// origin's preflight is 204 with the Access-Control-Allow-* headers and the responses
// carry Access-Control-Allow-Origin; any other origin gets 403 on both.
#[tokio::test]
async fn oauth_endpoints_answer_preflights_of_allowed_origins_and_refuse_others() {
    let world = World::with_config(McpConfig { allowed_origins: vec!["https://app.example.com".into()], ..McpConfig::default() }).await;
    for endpoint in ["register", "token", "revoke"] {
        for path in [format!("/mcp/{endpoint}"), format!("/{endpoint}")] {
            for origin in ["https://app.example.com", "http://localhost:6274"] {
                let reply = world.send(options(&path, Some(origin), "content-type, mcp-protocol-version")).await;
                assert_eq!(reply.status, StatusCode::NO_CONTENT, "{path} {origin}");
                assert_eq!(reply.header("access-control-allow-origin"), Some(origin), "{path} {origin}");
                assert!(reply.header("access-control-allow-methods").unwrap().contains("POST"), "{path}");
                let allowed_headers = reply.header("access-control-allow-headers").unwrap();
                assert!(allowed_headers.contains("content-type") && allowed_headers.contains("mcp-protocol-version"), "{path}");
                assert_eq!(reply.header("access-control-allow-credentials"), None, "{path}");
                assert!(reply.headers.get_all("vary").iter().any(|value| value == "Origin"), "{path}");
            }
            // The Host header's origin is not trusted (DNS rebinding), as on /mcp.
            for origin in ["https://evil.example", "http://mcp.test:8080"] {
                let reply = world.send(options(&path, Some(origin), "content-type")).await;
                assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path} {origin}");
                assert_eq!(reply.header("access-control-allow-origin"), None, "{path} {origin}");
            }
        }
    }
    // The responses themselves carry Access-Control-Allow-Origin for an allowed origin.
    let origin = "https://app.example.com";
    let request = |path: &str, content_type: &str, body: String, origin: &str| {
        axum::http::Request::post(path)
            .header("host", "mcp.test:8080")
            .header("origin", origin)
            .header("content-type", content_type)
            .body(axum::body::Body::from(body))
            .unwrap()
    };
    let registration = json!({"client_name": "Web client", "redirect_uris": ["https://app.example.com/callback"]}).to_string();
    let reply = world.send(request("/mcp/register", "application/json", registration.clone(), origin)).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    assert_eq!(reply.header("access-control-allow-origin"), Some(origin));
    let form = "grant_type=authorization_code&code=nope&client_id=nope&code_verifier=nope".to_string();
    let reply = world.send(request("/mcp/token", "application/x-www-form-urlencoded", form.clone(), origin)).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(reply.header("access-control-allow-origin"), Some(origin), "errors are readable too");
    let reply = world.send(request("/mcp/revoke", "application/x-www-form-urlencoded", "token=nope&client_id=nope".into(), origin)).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("access-control-allow-origin"), Some(origin));
    // A page from an origin that is not allowed can act on none of them.
    for (path, content_type, body) in [
        ("/mcp/register", "application/json", registration),
        ("/token", "application/x-www-form-urlencoded", form),
        ("/revoke", "application/x-www-form-urlencoded", "token=nope".into()),
    ] {
        let reply = world.send(request(path, content_type, body, "https://evil.example")).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(reply.json()["error"], "forbidden_origin", "{path}");
        assert_eq!(reply.header("access-control-allow-origin"), None, "{path}");
    }
    // Native clients send no Origin and are not affected.
    assert_eq!(world.post_form("/mcp/revoke", &[("token", "nope")]).await.header("access-control-allow-origin"), None);
}

// "Any non-POST request returns 405": OPTIONS on {mcp_url} too, whatever the origin.
#[tokio::test]
async fn the_mcp_endpoint_answers_options_with_405() {
    let world = World::new().await;
    let reply = world.send(options("/mcp", Some("http://localhost:6274"), "content-type")).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
}

// "Every answer of /token and /revoke is an OAuth JSON error or success" (docs/mcp.md,
// OAuth rule 3), a method they do not serve included, and /register's as its other errors
// are; the authorization page and the metadata documents name the methods they serve.
#[tokio::test]
async fn a_method_an_oauth_endpoint_does_not_serve_is_405_in_its_own_shape() {
    let world = World::new().await;
    let request = |method: &str, path: &str| {
        axum::http::Request::builder().method(method).uri(path).header("host", "mcp.test:8080").body(axum::body::Body::empty()).unwrap()
    };
    for path in ["/mcp/token", "/token", "/mcp/revoke", "/revoke", "/mcp/register", "/register"] {
        for method in ["GET", "PUT", "DELETE", "PATCH"] {
            let reply = world.send(request(method, path)).await;
            assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert_eq!(reply.header("allow"), Some("POST, OPTIONS"), "{method} {path}");
            assert_eq!(reply.header("content-type"), Some("application/json"), "{method} {path}");
            assert_eq!(reply.json(), json!({"error": "invalid_request", "error_description": "only POST is served on this endpoint"}), "{method} {path}");
        }
    }
    for path in ["/mcp/authorize", "/authorize"] {
        let reply = world.send(request("PUT", path)).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert_eq!(reply.header("allow"), Some("GET, HEAD, POST"), "{path}");
        assert_eq!(reply.json(), json!({"error": {"code": "method_not_allowed", "message": "only GET, HEAD and POST are served on this endpoint"}}));
    }
    for path in ["/.well-known/oauth-authorization-server", "/mcp/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        for method in ["POST", "DELETE"] {
            let reply = world.send(request(method, path)).await;
            assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert_eq!(reply.header("allow"), Some("GET, HEAD, OPTIONS"), "{method} {path}");
            assert_eq!(reply.json()["error"]["code"], "method_not_allowed", "{method} {path}");
        }
    }
}

// RFC 9207 (SEP-2468): iss in every authorization response, success and error, equal to the metadata issuer.
#[tokio::test]
async fn every_authorization_response_carries_iss() {
    let world = World::new().await;
    let issuer = world.get("/.well-known/oauth-authorization-server").await.json()["issuer"].as_str().unwrap().to_string();
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let challenge = challenge(VERIFIER);
    let base = [
        ("response_type", "code"),
        ("client_id", client_id.as_str()),
        ("redirect_uri", REDIRECT_URI),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", "s"),
    ];
    let approved = world.post_form("/mcp/authorize", &[&base[..], &[("pat", FLOW_PAT), ("decision", "approve")]].concat()).await;
    let denied = world.post_form("/mcp/authorize", &[&base[..], &[("decision", "deny")]].concat()).await;
    let bad_scope =
        world.get(&format!("/mcp/authorize?{}&scope=admin", url::form_urlencoded::Serializer::new(String::new()).extend_pairs(base).finish())).await;
    for (reply, expected) in [(approved, None), (denied, Some("access_denied")), (bad_scope, Some("invalid_scope"))] {
        // An invalid request is shown, not redirected: its link back carries iss.
        let (_, pairs) = if reply.header("location").is_some() { location_query(&reply) } else { return_link(&reply) };
        assert_eq!(query_value(&pairs, "error").as_deref(), expected);
        assert_eq!(query_value(&pairs, "iss").as_deref(), Some(issuer.as_str()), "{expected:?}");
    }
}

// MCP client registration: clients send application_type (OIDC Registration §2: web or native); validated, kept and returned.
#[tokio::test]
async fn application_type_is_validated_and_echoed() {
    let world = World::new().await;
    for (application_type, uris, expected) in [
        (json!("native"), json!(["http://127.0.0.1:3000/cb"]), "native"),
        (json!("native"), json!(["https://app.example.com/cb"]), "native"),
        (json!("web"), json!(["https://app.example.com/cb"]), "web"),
        (json!("web"), json!(["HTTPS://App.Example.com/cb"]), "web"),
        (Value::Null, json!(["http://localhost:3000/cb"]), "native"),
        (Value::Null, json!(["https://app.example.com/cb"]), "web"),
    ] {
        let reply = world.post_json("/mcp/register", &json!({"client_name": "A", "redirect_uris": uris, "application_type": application_type})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.json()["application_type"], expected, "{application_type} {uris}");
    }
    for (application_type, uris, code) in [
        (json!("web"), json!(["http://127.0.0.1:3000/cb"]), "invalid_redirect_uri"),
        (json!("web"), json!(["https://localhost/cb"]), "invalid_redirect_uri"),
        (json!("web"), json!(["https://app.example.com/cb", "HTTP://[::1]:9/cb"]), "invalid_redirect_uri"),
        (json!("desktop"), json!(["https://app.example.com/cb"]), "invalid_client_metadata"),
        (json!(1), json!(["https://app.example.com/cb"]), "invalid_client_metadata"),
    ] {
        let reply = world.post_json("/mcp/register", &json!({"redirect_uris": uris, "application_type": application_type})).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{application_type} {uris}");
        assert_eq!(reply.json()["error"], code, "{application_type} {uris}");
    }
}

// ---- Attacks on the authorization server and what stops them ----------------------

/// A registration from the address `X-Forwarded-For` names (for worlds whose proxy is trusted).
async fn register_from<W: recap_testkit::World + ?Sized>(world: &World<W>, forwarded_for: &str, redirect_uri: &str) -> Reply {
    let body = json!({"client_name": "Flood", "redirect_uris": [redirect_uri]}).to_string();
    let request = axum::http::Request::post("/mcp/register")
        .header("host", "mcp.test:8080")
        .header("content-type", "application/json")
        .header("x-forwarded-for", forwarded_for)
        .body(axum::body::Body::from(body))
        .unwrap();
    world.send(request).await
}

fn assert_oauth_error(reply: &Reply, status: StatusCode, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"), "{}", reply.body);
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let body = reply.json();
    assert_eq!(body["error"], code, "{body}");
    assert!(body["error_description"].as_str().is_some_and(|text| !text.is_empty()), "{body}");
}

// Attack: an unauthenticated client fills the store with huge registrations (ten 2 kB
// redirect URIs each). docs/mcp.md, Registration: at most 5 redirect URIs of 512 bytes,
// a client_name of 200 characters, a document of 16 KiB (413 with an OAuth error body).
#[tokio::test]
async fn attack_oversized_registrations_are_refused_with_rfc_7591_errors() {
    let world = World::new().await;
    let long_uri = format!("https://evil.example/{}", "a".repeat(2000));
    let cases = [
        // The attack's own document (20 kB) is over the size bound.
        (json!({"redirect_uris": vec![long_uri.clone(); 10]}), StatusCode::PAYLOAD_TOO_LARGE, "invalid_client_metadata"),
        (json!({"redirect_uris": [long_uri.clone()]}), StatusCode::BAD_REQUEST, "invalid_redirect_uri"),
        (json!({"redirect_uris": [format!("https://evil.example/{}", "a".repeat(513 - 21))]}), StatusCode::BAD_REQUEST, "invalid_redirect_uri"),
        (json!({"redirect_uris": vec!["https://ok.example/cb"; 6]}), StatusCode::BAD_REQUEST, "invalid_redirect_uri"),
        (json!({"redirect_uris": ["https://ok.example/cb"], "client_name": "n".repeat(201)}), StatusCode::BAD_REQUEST, "invalid_client_metadata"),
        (json!({"redirect_uris": ["https://ok.example/cb"], "padding": "p".repeat(16 * 1024)}), StatusCode::PAYLOAD_TOO_LARGE, "invalid_client_metadata"),
    ];
    for (body, status, code) in cases {
        let reply = world.post_json("/mcp/register", &body).await;
        assert_oauth_error(&reply, status, code);
    }
    // Far over the router's own body bound too: the same OAuth answer, not text/plain.
    let huge = json!({"redirect_uris": ["https://ok.example/cb"], "padding": "p".repeat(300 * 1024)});
    assert_oauth_error(&world.post_json("/register", &huge).await, StatusCode::PAYLOAD_TOO_LARGE, "invalid_client_metadata");
    // The largest document allowed is still registered.
    let at_bounds = json!({"client_name": "n".repeat(200), "redirect_uris": vec![format!("https://ok.example/{}", "a".repeat(512 - 19)); 5]});
    let reply = world.post_json("/mcp/register", &at_bounds).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
}

// Attack: one address registers as fast as it can. docs/mcp.md, Registration: counted per
// client address (the peer's, or with --mcp-trusted-proxy-hops n the n-th from the right of
// X-Forwarded-For), --mcp-registrations-per-minute a minute; 429 rate_limited with Retry-After.
#[tokio::test]
async fn attack_registration_flood_from_one_address_is_rate_limited() {
    let world = World::with_config(McpConfig { registrations_per_minute: 3, trusted_proxy_hops: 1, ..McpConfig::default() }).await;
    for _ in 0..3 {
        assert_eq!(register_from(&world, "203.0.113.7", REDIRECT_URI).await.status, StatusCode::CREATED);
    }
    let refused = register_from(&world, "203.0.113.7", REDIRECT_URI).await;
    assert_oauth_error(&refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    let retry_after: u64 = refused.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    // A value the client wrote to the left of what the trusted proxy appended changes nothing.
    assert_eq!(register_from(&world, "198.51.100.1, 203.0.113.7", REDIRECT_URI).await.status, StatusCode::TOO_MANY_REQUESTS);
    // Another address has its own count.
    assert_eq!(register_from(&world, "198.51.100.9", REDIRECT_URI).await.status, StatusCode::CREATED);
    // A refused document is not counted, and a flood of them registers nothing.
    let invalid = world.post_json("/mcp/register", &json!({"redirect_uris": ["http://evil.example/cb"]})).await;
    assert_oauth_error(&invalid, StatusCode::BAD_REQUEST, "invalid_redirect_uri");
}

// Without trusted proxies X-Forwarded-For is the client's to write, so it is ignored: every
// request of one peer shares one count, whatever it claims.
#[tokio::test]
async fn attack_spoofed_forwarded_for_does_not_escape_the_registration_limit() {
    let world = World::with_config(McpConfig { registrations_per_minute: 2, ..McpConfig::default() }).await;
    for address in ["192.0.2.1", "192.0.2.2"] {
        assert_eq!(register_from(&world, address, REDIRECT_URI).await.status, StatusCode::CREATED);
    }
    assert_oauth_error(&register_from(&world, "192.0.2.3", REDIRECT_URI).await, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
}

// docs/mcp.md, Registration: --mcp-registrations-per-month from one address in a calendar month;
// past it 429 until the month ends, and the minute's window moving on does not help.
#[tokio::test]
async fn attack_slow_registration_flood_meets_the_monthly_bound() {
    let world = World::in_process(McpConfig { registrations_per_month: 2, trusted_proxy_hops: 1, ..McpConfig::default() }).await;
    for _ in 0..2 {
        assert_eq!(register_from(&world, "203.0.113.7", REDIRECT_URI).await.status, StatusCode::CREATED);
        world.advance_clock(Duration::from_secs(61));
    }
    let refused = register_from(&world, "203.0.113.7", REDIRECT_URI).await;
    assert_oauth_error(&refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    let retry_after: u64 = refused.header("retry-after").expect("Retry-After").parse().expect("seconds");
    assert!((1..=31 * 86_400).contains(&retry_after), "{retry_after}");
    world.advance_clock(Duration::from_secs(32 * 86_400));
    assert_eq!(register_from(&world, "203.0.113.7", REDIRECT_URI).await.status, StatusCode::CREATED, "a new month");
}

// Attack: registrations nobody completes pile up for a year. docs/mcp.md, Registration: a
// client is stored for a day (--mcp-unconfirmed-client-ttl-secs) until one of its codes is
// redeemed, which keeps it for --mcp-client-ttl-secs, in the same write as the tokens.
#[tokio::test]
async fn attack_abandoned_registrations_expire_within_a_day() {
    let world = World::in_process(McpConfig::default()).await;
    world.record_writes();
    let lifetime_of_client = |batches: &[Vec<recap_readmodel::Mutation>], client_id: &str| -> Vec<i64> {
        let now = recap_readmodel::driver::now_micros();
        batches
            .iter()
            .flatten()
            .filter(|mutation| mutation.table.name == "oauth_clients" && format!("{:?}", mutation.partition).contains(client_id))
            .map(|mutation| match mutation.op {
                recap_readmodel::Op::Put { expires_at: Some(expires_at), .. } => (expires_at - now) / 1_000_000,
                _ => panic!("a client is written with a lifetime"),
            })
            .collect()
    };
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let lifetimes = lifetime_of_client(&world.recorded_writes(), &client_id);
    assert_eq!(lifetimes.len(), 1);
    assert!((86_400 - 60..=86_400).contains(&lifetimes[0]), "a day: {lifetimes:?}");
    let code = authorize(&world, &client_id, FLOW_PAT).await;
    assert_eq!(lifetime_of_client(&world.recorded_writes(), &client_id), Vec::<i64>::new(), "approving a code stores no client");
    assert_eq!(exchange(&world, &client_id, &code).await.status, StatusCode::OK);
    let batches = world.recorded_writes();
    let lifetimes = lifetime_of_client(&batches, &client_id);
    assert_eq!(lifetimes.len(), 1, "one write of the client, with the tokens");
    assert!((365 * 86_400 - 60..=365 * 86_400).contains(&lifetimes[0]), "kept a year: {lifetimes:?}");
    assert!(
        batches
            .iter()
            .any(|batch| batch.iter().any(|mutation| mutation.table.name == "oauth_clients")
                && batch.iter().any(|mutation| mutation.table.name == "oauth_tokens"))
    );
}

// Attack (RFC 9700 §4.11.2): a self-registered client whose redirect URI is the attacker's
// sends the user to /authorize with an invalid request, and the server redirects at once.
// docs/mcp.md, Registration: every error before the user acted is a page (400, no Location)
// naming the error, with a link back the user may follow; only the user's decision redirects.
#[tokio::test]
async fn attack_open_redirect_through_authorization_errors_shows_a_page() {
    let world = World::new().await;
    let landing = "https://evil.example/landing";
    let client_id = register(&world, &[landing]).await;
    let challenge = challenge(VERIFIER);
    let query = |pairs: &[(&str, &str)]| url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
    let requests = [
        (query(&[("client_id", &client_id), ("redirect_uri", landing), ("response_type", "x")]), "unsupported_response_type"),
        (query(&[("client_id", &client_id), ("redirect_uri", landing)]), "invalid_request"),
        (query(&[("client_id", &client_id), ("response_type", "code")]), "invalid_request"),
        (
            query(&[
                ("client_id", &client_id),
                ("redirect_uri", landing),
                ("response_type", "code"),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("scope", "admin"),
            ]),
            "invalid_scope",
        ),
    ];
    for (query, error) in requests {
        for reply in [
            world.get(&format!("/mcp/authorize?{query}")).await,
            world
                .post_form(
                    "/authorize",
                    &url::form_urlencoded::parse(query.as_bytes())
                        .into_owned()
                        .collect::<Vec<_>>()
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect::<Vec<_>>(),
                )
                .await,
        ] {
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}");
            assert_eq!(reply.header("location"), None, "{query}");
            assert!(reply.header("content-type").unwrap().starts_with("text/html"));
            assert_eq!(reply.header("cache-control"), Some("no-store"));
            assert!(reply.body.contains(&format!("<code id=\"error\">{error}</code>")), "{query}: {}", reply.body);
            assert!(reply.body.contains("<strong id=\"redirect-host\">evil.example</strong>"), "the page says where the link goes");
            let (base, pairs) = return_link(&reply);
            assert_eq!(base, landing);
            assert_eq!(query_value(&pairs, "error").as_deref(), Some(error));
            assert_eq!(query_value(&pairs, "iss").as_deref(), Some("http://mcp.test:8080/mcp"));
        }
    }
    // The user's own denial still goes back to the client.
    let denied = world
        .post_form(
            "/mcp/authorize",
            &[
                ("client_id", &client_id),
                ("redirect_uri", landing),
                ("response_type", "code"),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("decision", "deny"),
            ],
        )
        .await;
    assert_eq!(denied.status, StatusCode::FOUND);
    assert_eq!(query_value(&location_query(&denied).1, "error").as_deref(), Some("access_denied"));
}

// Attack on interoperability (RFC 8252 §7.3, OAuth 2.1 §8.4.2): a native client registers
// a loopback redirect URI and listens on another port next time. docs/mcp.md, Registration:
// any port on a loopback host, the rest exact; the token request repeats the URI used.
#[tokio::test]
async fn attack_loopback_redirect_on_another_port_is_accepted_and_bound_to_the_code() {
    let world = World::new().await;
    let challenge = challenge(VERIFIER);
    for (registered, used, wrong) in [
        ("http://127.0.0.1:9999/cb", "http://127.0.0.1:8888/cb", "http://127.0.0.1:9999/cb"),
        ("http://[::1]:9999/cb", "http://[::1]:8888/cb", "http://[::1]:9999/cb"),
        ("http://localhost:9999/cb", "http://localhost:8888/cb", "http://localhost:9999/cb"),
    ] {
        let client_id = register(&world, &[registered]).await;
        let page = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, used, &[]))).await;
        assert_eq!(page.status, StatusCode::OK, "{used}: {}", page.body);
        let approved = world
            .post_form(
                "/mcp/authorize",
                &[
                    ("response_type", "code"),
                    ("client_id", &client_id),
                    ("redirect_uri", used),
                    ("code_challenge", &challenge),
                    ("code_challenge_method", "S256"),
                    ("pat", FLOW_PAT),
                    ("decision", "approve"),
                ],
            )
            .await;
        assert_eq!(approved.status, StatusCode::SEE_OTHER, "{}", approved.body);
        let (base, pairs) = location_query(&approved);
        assert_eq!(base, used, "the code goes to the port the request named");
        let code = query_value(&pairs, "code").unwrap();
        let token = |redirect_uri: &'static str| {
            let (world, client_id, code) = (&world, client_id.clone(), code.clone());
            async move {
                world
                    .post_form(
                        "/mcp/token",
                        &[
                            ("grant_type", "authorization_code"),
                            ("code", &code),
                            ("redirect_uri", redirect_uri),
                            ("client_id", &client_id),
                            ("code_verifier", VERIFIER),
                        ],
                    )
                    .await
            }
        };
        assert_oauth_error(&token(wrong).await, StatusCode::BAD_REQUEST, "invalid_grant");
        assert_eq!(token(used).await.status, StatusCode::OK, "{used}");
    }
    // Only the port is free: another path, host or scheme is an error page.
    let client_id = register(&world, &["http://127.0.0.1:9999/cb"]).await;
    for near_miss in ["http://127.0.0.1:8888/cb/", "http://localhost:9999/cb", "https://127.0.0.1:8888/cb", "http://127.0.0.1:8888/cb?x=1"] {
        let reply = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, near_miss, &[]))).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{near_miss}");
        assert_eq!(reply.header("location"), None);
    }
}

// Attack: a stolen refresh token is redeemed without naming a client, which skipped the
// binding. docs/mcp.md, OAuth: a refresh must name the client the token was issued to
// (invalid_request without client_id, invalid_grant with another); a refused refresh does
// not spend the token.
#[tokio::test]
async fn attack_refresh_without_client_id_is_refused() {
    let world = World::new().await;
    let (client_id, _, refresh_token) = connect(&world, FLOW_PAT).await;
    let other_client = register(&world, &[REDIRECT_URI]).await;
    let anonymous = world.post_form("/mcp/token", &[("grant_type", "refresh_token"), ("refresh_token", &refresh_token)]).await;
    assert_oauth_error(&anonymous, StatusCode::BAD_REQUEST, "invalid_request");
    assert_oauth_error(&refresh(&world, &other_client, &refresh_token).await, StatusCode::BAD_REQUEST, "invalid_grant");
    let reply = refresh(&world, &client_id, &refresh_token).await;
    assert_eq!(reply.status, StatusCode::OK, "the refused attempts did not spend it: {}", reply.body);
}

// Attack: a client revokes another client's tokens. RFC 7009 §2.1: the server "verifies
// whether the token was issued to the client making the revocation request. If this
// validation fails, the request is refused": invalid_grant (RFC 6749 §5.2), and the token
// stays valid; without client_id, invalid_request.
#[tokio::test]
async fn attack_revoking_another_clients_token_is_refused_and_it_stays_valid() {
    let world = World::new().await;
    let (client_id, access, refresh_token) = connect(&world, FLOW_PAT).await;
    let other_client = register(&world, &[REDIRECT_URI]).await;
    for token in [&access, &refresh_token] {
        assert_oauth_error(&world.post_form("/mcp/revoke", &[("token", token), ("client_id", &other_client)]).await, StatusCode::BAD_REQUEST, "invalid_grant");
        assert_oauth_error(&world.post_form("/revoke", &[("token", token)]).await, StatusCode::BAD_REQUEST, "invalid_request");
    }
    assert_eq!(mcp_status(&world, &access).await.0, StatusCode::OK, "the access token still works");
    assert_eq!(refresh(&world, &client_id, &refresh_token).await.status, StatusCode::OK, "the refresh token still works");
}

// Attack: a client registers a name with a right-to-left override and control characters
// to pass for another on the consent page. docs/mcp.md, Registration: the name is stored
// and shown without them; the page shows where approving sends the browser and marks a
// self-registered client unverified.
#[tokio::test]
async fn attack_consent_page_spoofing_with_bidi_and_control_characters() {
    let world = World::new().await;
    let spoofed = "Claude\u{202E}moc.elgoog\u{202C} \u{0}Desktop\n\u{1b}[0m\u{200B}";
    let reply = world.post_json("/mcp/register", &json!({"client_name": spoofed, "redirect_uris": ["https://evil.example/landing"]})).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.json()["client_name"], "Claudemoc.elgoog Desktop [0m");
    let client_id = reply.json()["client_id"].as_str().unwrap().to_string();
    let page = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, "https://evil.example/landing", &[]))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("<span id=\"client-name\">Claudemoc.elgoog Desktop [0m</span>"), "{}", page.body);
    for hidden in ['\u{202E}', '\u{202C}', '\u{0}', '\u{1b}', '\u{200B}'] {
        assert!(!page.body.contains(hidden), "{hidden:?} is not on the page");
    }
    assert!(page.body.contains("<strong id=\"redirect-host\">evil.example</strong>"), "{}", page.body);
    assert!(page.body.contains("id=\"client-unverified\""), "{}", page.body);
    // A name of nothing but such characters is no name: the client id is shown.
    let reply = world.post_json("/mcp/register", &json!({"client_name": "\u{202E}\u{2066}", "redirect_uris": [REDIRECT_URI]})).await;
    assert_eq!(reply.json()["client_name"], Value::Null);
}

// A body over the router's bound (256 KiB) on /token and /revoke: the OAuth JSON error
// (413 invalid_request, no-store) like every other answer of these endpoints, not a
// text/plain rejection.
#[tokio::test]
async fn oversized_token_and_revocation_requests_are_413_oauth_errors() {
    let world = World::new().await;
    let padding = "p".repeat(300 * 1024);
    for path in ["/token", "/mcp/token", "/revoke", "/mcp/revoke"] {
        let reply = world.post_form(path, &[("grant_type", "refresh_token"), ("token", "x"), ("padding", &padding)]).await;
        assert_oauth_error(&reply, StatusCode::PAYLOAD_TOO_LARGE, "invalid_request");
    }
}

// A consent form over the router's bound (256 KiB) gets the authorization error page
// (413, HTML, no-store, naming invalid_request) like every other refusal before the
// user's decision: never axum's text/plain rejection, and never a redirect, since the
// unread form names no redirect URI to trust.
#[tokio::test]
async fn an_oversized_consent_form_is_a_413_error_page_and_never_redirects() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let query = authorize_query(&client_id, REDIRECT_URI, &[]);
    let mut form: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    form.push(("pat".into(), FLOW_PAT.into()));
    form.push(("decision".into(), "approve".into()));
    form.push(("padding".into(), "p".repeat(300 * 1024)));
    let pairs: Vec<(&str, &str)> = form.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect();
    for path in ["/mcp/authorize", "/authorize"] {
        let reply = world.post_form(path, &pairs).await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        assert_eq!(reply.header("location"), None, "{path}");
        assert_eq!(reply.header("content-type"), Some("text/html; charset=utf-8"), "{path}");
        assert_eq!(reply.header("cache-control"), Some("no-store"), "{path}");
        assert_eq!(reply.header("x-frame-options"), Some("DENY"), "{path}");
        assert!(reply.body.contains("<code id=\"error\">invalid_request</code>: the authorization form may be 262144 bytes at most"), "{path}: {}", reply.body);
        assert!(!reply.body.contains("id=\"return\""), "no link back: the form named no redirect URI to trust");
    }
    // The same form within the bound is approved.
    let within: Vec<(&str, &str)> = pairs.iter().copied().filter(|(key, _)| *key != "padding").collect();
    let reply = world.post_form("/mcp/authorize", &within).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
}

// RFC 8707 (the MCP authorization spec: "MCP servers MUST validate that access tokens
// were issued specifically for them as the intended audience"): a `resource` must name
// this server's MCP endpoint, at authorization (shown, `invalid_target`) and at the token
// endpoint (400 `invalid_target`, the code or refresh token not spent); the tokens are
// good at the endpoint the authorization reached only, not under another name of the
// same server.
#[tokio::test]
async fn rfc_8707_a_resource_must_name_this_endpoint_and_the_tokens_are_good_there_only() {
    let world = World::new().await;
    let client_id = register(&world, &[REDIRECT_URI]).await;
    let other = "https://other.example.com/mcp";
    let refused = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, REDIRECT_URI, &[("resource", other)]))).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.body.contains("<code id=\"error\">invalid_target</code>"), "{}", refused.body);
    assert_eq!(query_value(&return_link(&refused).1, "error").as_deref(), Some("invalid_target"));
    for named in ["http://mcp.test:8080/mcp", "http://MCP.test:8080/mcp/"] {
        let shown = world.get(&format!("/mcp/authorize?{}", authorize_query(&client_id, REDIRECT_URI, &[("resource", named)]))).await;
        assert_eq!(shown.status, StatusCode::OK, "{named}: {}", shown.body);
    }
    let code = authorize_with(&world, &client_id, FLOW_PAT, &[("resource", "http://mcp.test:8080/mcp")]).await;
    for resource in [other, "not a uri"] {
        let refused = exchange_with(&world, &client_id, &code, &[("resource", resource)]).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{resource}: {}", refused.body);
        assert_eq!(refused.json()["error"], "invalid_target", "{resource}");
    }
    // The code exchanged at the server under another name: the grant is not for it.
    let exchange =
        [("grant_type", "authorization_code"), ("code", &code), ("redirect_uri", REDIRECT_URI), ("client_id", &client_id), ("code_verifier", VERIFIER)];
    let elsewhere = world.post_form_at("other.test:8080", "/mcp/token", &exchange).await;
    assert_eq!((elsewhere.status, elsewhere.json()["error"].clone()), (StatusCode::BAD_REQUEST, json!("invalid_grant")), "{}", elsewhere.body);
    let issued = exchange_with(&world, &client_id, &code, &[("resource", "http://mcp.test:8080/mcp")]).await;
    assert_eq!(issued.status, StatusCode::OK, "the refused exchanges did not spend the code: {}", issued.body);
    let tokens = issued.json();
    let (access, refresh_token) = (tokens["access_token"].as_str().unwrap().to_string(), tokens["refresh_token"].as_str().unwrap().to_string());
    assert_eq!(mcp_status(&world, &access).await.0, StatusCode::OK);
    // A ping with the token, to the server as `host` names it.
    let ping_at = |host: &'static str| {
        world.send(
            axum::http::Request::post("/mcp")
                .header("host", host)
                .header("authorization", format!("Bearer {access}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(axum::body::Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#))
                .unwrap(),
        )
    };
    // The same server under another name: the token is not for it.
    let elsewhere = ping_at("other.test:8080").await;
    assert_eq!(elsewhere.status, StatusCode::UNAUTHORIZED);
    assert!(elsewhere.header("www-authenticate").unwrap().contains("error=\"invalid_token\""), "{:?}", elsewhere.header("www-authenticate"));
    // The same endpoint named otherwise (the host's case) is the same resource.
    let same = ping_at("MCP.Test:8080").await;
    assert_eq!(same.status, StatusCode::OK, "{}", same.body);
    // A refresh reaching the server under another name: the grant is not for it, and the
    // client is sent back to authorize rather than given tokens /mcp would refuse.
    let refresh = [("grant_type", "refresh_token"), ("refresh_token", refresh_token.as_str()), ("client_id", client_id.as_str())];
    let elsewhere = world.post_form_at("other.test:8080", "/mcp/token", &refresh).await;
    assert_eq!((elsewhere.status, elsewhere.json()["error"].clone()), (StatusCode::BAD_REQUEST, json!("invalid_grant")), "{}", elsewhere.body);
    // A refresh naming another resource is refused and spends nothing.
    let refused = world
        .post_form("/mcp/token", &[("grant_type", "refresh_token"), ("refresh_token", &refresh_token), ("client_id", &client_id), ("resource", other)])
        .await;
    assert_eq!((refused.status, refused.json()["error"].clone()), (StatusCode::BAD_REQUEST, json!("invalid_target")));
    let refreshed = world
        .post_form(
            "/mcp/token",
            &[("grant_type", "refresh_token"), ("refresh_token", &refresh_token), ("client_id", &client_id), ("resource", "http://mcp.test:8080/mcp")],
        )
        .await;
    assert_eq!(refreshed.status, StatusCode::OK, "{}", refreshed.body);
    assert_eq!(mcp_status(&world, refreshed.json()["access_token"].as_str().unwrap()).await.0, StatusCode::OK);
}
