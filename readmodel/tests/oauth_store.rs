//! The OAuth store's operations (oauth.rs) on the embedded driver: records round-trip,
//! a code or refresh token is spent once, issuing writes the grant, its tokens and the
//! spent mark together, and a revoked grant stays revoked against a late write.

use std::sync::Arc;
use std::time::Duration;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::oauth::{ClientRecord, CodeRecord, GrantRecord, Issue, OAuthStore, Spend, Spent, TokenKind, TokenRecord};
use recap_readmodel::{Driver, ReadModel};

const HOUR: Duration = Duration::from_secs(3600);

fn store() -> (tempfile::TempDir, OAuthStore) {
    let dir = tempfile::tempdir().unwrap();
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
    (dir, ReadModel::new(driver).oauth())
}

fn code() -> CodeRecord {
    CodeRecord {
        client_id: "mcpc_1".into(),
        redirect_uri: "http://127.0.0.1:9/cb".into(),
        redirect_uri_given: true,
        code_challenge: "challenge".into(),
        scope: "svc:read".into(),
        account_id: "acc_1".into(),
        pat_sha256: "pat-hash".into(),
        pat_token_id: "tok_1".into(),
        grant_id: "grt_1".into(),
        expires_at: 1,
        used: false,
        resource: Some("https://mcp.example.com/mcp".into()),
    }
}

fn grant(refresh_sha256: &str) -> GrantRecord {
    GrantRecord {
        grant_id: "grt_1".into(),
        client_id: "mcpc_1".into(),
        account_id: "acc_1".into(),
        pat_sha256: "pat-hash".into(),
        pat_token_id: "tok_1".into(),
        scope: "svc:read".into(),
        refresh_sha256: refresh_sha256.into(),
        expires_at: 2,
        resource: Some("https://mcp.example.com/mcp".into()),
    }
}

fn token(kind: TokenKind) -> TokenRecord {
    TokenRecord { kind, grant_id: "grt_1".into(), client_id: "mcpc_1".into(), expires_at: 3, rotated: false }
}

#[tokio::test]
async fn records_round_trip_by_their_keys() {
    let (_dir, oauth) = store();
    let client = ClientRecord {
        client_id: "mcpc_1".into(),
        client_name: Some("Client".into()),
        redirect_uris: vec!["http://127.0.0.1:9/cb".into()],
        client_id_issued_at: 7,
        application_type: Some("native".into()),
    };
    oauth.register_client(&client, HOUR).await.unwrap();
    oauth.save_code("code-hash", &code(), HOUR).await.unwrap();
    assert_eq!(oauth.client("mcpc_1").await.unwrap(), Some(client));
    assert_eq!(oauth.code("code-hash").await.unwrap(), Some(code()));
    assert_eq!(oauth.client("mcpc_2").await.unwrap(), None);
    assert_eq!(oauth.code("other-hash").await.unwrap(), None);
}

#[tokio::test]
async fn a_code_or_refresh_token_is_spent_once() {
    let (_dir, oauth) = store();
    assert_eq!(oauth.spend_code("hash", HOUR).await.unwrap(), Spend::Spent);
    assert_eq!(oauth.spend_code("hash", HOUR).await.unwrap(), Spend::AlreadySpent);
    assert_eq!(oauth.spend_refresh_token("hash", HOUR).await.unwrap(), Spend::Spent, "a refresh token is not a code, whatever its hash");
    assert_eq!(oauth.spend_refresh_token("hash", HOUR).await.unwrap(), Spend::AlreadySpent);
    assert_eq!(oauth.spend_code("another", HOUR).await.unwrap(), Spend::Spent);
}

#[tokio::test]
async fn issuing_writes_the_grant_its_tokens_and_the_spent_mark_and_a_revoked_grant_stays_revoked() {
    let (_dir, oauth) = store();
    let code = code();
    oauth.save_code("code-hash", &code, HOUR).await.unwrap();
    let grant = grant("refresh-hash");
    let (access, refresh) = (token(TokenKind::Access), token(TokenKind::Refresh));
    let issue = Issue {
        grant: &grant,
        issued_at: 5,
        access_sha256: "access-hash",
        access: &access,
        access_lifetime: HOUR,
        refresh_sha256: "refresh-hash",
        refresh: &refresh,
        refresh_lifetime: HOUR,
        spent: Spent::Code { code_sha256: "code-hash", code: &code, lifetime: HOUR },
        keep_client: None,
    };
    oauth.issue_tokens(&issue).await.unwrap();
    assert_eq!(oauth.grant("grt_1").await.unwrap(), Some(grant.clone()));
    assert_eq!(oauth.token("access-hash").await.unwrap(), Some(access.clone()));
    assert_eq!(oauth.token("refresh-hash").await.unwrap(), Some(refresh.clone()));
    assert!(oauth.code("code-hash").await.unwrap().unwrap().used, "the code is kept, marked used");

    oauth.revoke_access_token("access-hash").await.unwrap();
    assert_eq!(oauth.token("access-hash").await.unwrap(), None);
    assert!(oauth.grant("grt_1").await.unwrap().is_some(), "revoking an access token leaves its grant");

    oauth.revoke_grant("grt_1").await.unwrap();
    assert_eq!(oauth.grant("grt_1").await.unwrap(), None);
    // A refresh that read the grant before the revocation writes it back afterwards.
    let late =
        Issue { refresh_sha256: "next-refresh-hash", spent: Spent::RefreshToken { refresh_sha256: "refresh-hash", token: &refresh, lifetime: HOUR }, ..issue };
    oauth.issue_tokens(&late).await.unwrap();
    assert_eq!(oauth.grant("grt_1").await.unwrap(), None, "a revoked grant stays revoked");
    assert!(oauth.token("refresh-hash").await.unwrap().unwrap().rotated, "the refresh token is kept, marked rotated");
}
