//! Webhook endpoints: `webhook_endpoint.upserted` and `webhook_endpoint.deleted`. Rule 1
//! per endpoint (last version wins) and rule 2 (a delete keeps the version, so an older
//! upsert arriving later is stale). An endpoint owns two rows: its record
//! (`webhook_endpoints`, what the account may read) and its secrets (`webhook_secrets`,
//! what only the deliverer reads). A changed secret keeps the previous one signing for
//! [`ROTATION_OVERLAP`] after the upsert's `occurred_at`, under the same account only:
//! should a producer reuse an endpoint id under another account (ids are unique across
//! accounts), the endpoint moves there whole, its rows under the first account are
//! removed, and no secret of the first account ever signs the other's messages.
//!
//! An upsert of an endpoint that does not exist (never upserted, deleted, or under
//! another account) creates a new one, whose record names the version it was created
//! at: the delivery state and attempts the runtime keeps under the endpoint's id name
//! it too, so those of an endpoint deleted before are not the new one's. A delete
//! removes no state or attempt row itself: the runtime may still be writing one for
//! the deleted endpoint, after the delete, and a delete's tombstone could not shadow a
//! row written later.

use recap_schemas::{Timestamp, WebhookEndpointDeleted, WebhookEndpointUpserted};
use serde::{Deserialize, Serialize};

use crate::driver::StoreError;
use crate::table::Val;
use crate::tables::{WEBHOOK_ENDPOINTS, WEBHOOK_SECRETS};
use crate::views::render;
use crate::webhooks::{EndpointRecord, SecretsRecord, SigningSecret, ROTATION_OVERLAP};

use super::batch::{Batch, Stamp};
use super::entities::{EntityKind, EntityState, Revision};
use super::rows::RowWrite;
use super::Applied;

/// What an endpoint's state remembers: its account, when and at which version it was
/// created, and its secrets (to keep the previous one through a rotation).
#[derive(Serialize, Deserialize)]
struct EndpointData {
    /// Absent in a state written before the account was kept: then the account its
    /// secrets row is under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    account_id: Option<String>,
    created_at: Timestamp,
    /// 0 in a state written before it was kept.
    #[serde(default)]
    created_version: u64,
    secrets: SecretsRecord,
}

impl EndpointData {
    /// What the endpoint's state holds, while the endpoint exists under `account_id`.
    fn of(state: &EntityState, account_id: &str) -> Option<EndpointData> {
        if state.deleted {
            return None;
        }
        let data: EndpointData = state.data.as_deref().and_then(|data| serde_json::from_str(data.get()).ok())?;
        let secrets_row_account = || {
            state.rows.iter().find(|(table, _, _)| *table == WEBHOOK_SECRETS.id).and_then(|(_, partition, _)| partition.first()?.as_text().map(str::to_owned))
        };
        // An account not known either way is not taken for this one.
        let known = data.account_id.clone().or_else(secrets_row_account)?;
        (known == account_id).then_some(data)
    }
}

/// The secrets after an upsert at `now` set `current`: the new one first; the previous
/// current one, when it differs, until the overlap ends; earlier ones while they last.
pub(super) fn rotate(previous: Option<&SecretsRecord>, current: &str, now: Timestamp) -> SecretsRecord {
    let overlap_micros = i64::try_from(ROTATION_OVERLAP.as_micros()).unwrap_or(i64::MAX);
    let mut secrets = vec![SigningSecret { secret: current.to_owned(), expires_at: None }];
    for secret in previous.map(|record| record.secrets.as_slice()).unwrap_or_default() {
        if secret.secret == current {
            continue;
        }
        let expires_at = secret.expires_at.unwrap_or(Timestamp(now.0.saturating_add(overlap_micros)));
        if expires_at > now {
            secrets.push(SigningSecret { secret: secret.secret.clone(), expires_at: Some(expires_at) });
        }
    }
    SecretsRecord { secrets }
}

impl Batch {
    pub(super) async fn endpoint_upserted(&mut self, event: &WebhookEndpointUpserted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let endpoint = &event.endpoint;
        let endpoint_id: &str = &endpoint.id;
        let Some(mut state) = self.newer(EntityKind::WebhookEndpoint, endpoint_id, version).await? else { return Ok(Applied::Stale) };
        let now = self.source.occurred_at;
        let known = EndpointData::of(&state, &event.account_id);
        let (created_at, created_version) = known.as_ref().map_or((now, version), |known| (known.created_at, known.created_version));
        let secrets = rotate(known.as_ref().map(|known| &known.secrets), endpoint.secret.as_str(), now);
        let record = EndpointRecord {
            id: endpoint_id.to_owned(),
            url: endpoint.url.clone(),
            description: endpoint.description.clone(),
            types: endpoint.types.clone(),
            enabled: endpoint.enabled,
            version,
            created_version,
            created_at,
            updated_at: now,
        };
        let account = Val::text(&event.account_id);
        let rows = vec![
            RowWrite { table: &WEBHOOK_ENDPOINTS, partition: vec![account.clone()], clustering: vec![Val::text(endpoint_id)], body: render(&record) },
            RowWrite { table: &WEBHOOK_SECRETS, partition: vec![account, Val::text(endpoint_id)], clustering: vec![], body: render(&secrets) },
        ];
        state.data =
            serde_json::value::to_raw_value(&EndpointData { account_id: Some(event.account_id.to_string()), created_at, created_version, secrets }).ok();
        self.revise(EntityKind::WebhookEndpoint, endpoint_id, state, version, Revision::Present(rows), stamp);
        Ok(Applied::Applied)
    }

    pub(super) async fn endpoint_deleted(&mut self, event: &WebhookEndpointDeleted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let endpoint_id: &str = &event.endpoint_id;
        let Some(mut state) = self.newer(EntityKind::WebhookEndpoint, endpoint_id, version).await? else { return Ok(Applied::Stale) };
        state.data = None;
        // The rows it owned are tombstoned at the delete's version (rule 2); tombstones
        // for its key under this account too, in case no upsert was applied before.
        let account = Val::text(&event.account_id);
        self.delete(&WEBHOOK_ENDPOINTS, vec![account.clone()], vec![Val::text(endpoint_id)], stamp);
        self.delete(&WEBHOOK_SECRETS, vec![account, Val::text(endpoint_id)], vec![], stamp);
        self.revise(EntityKind::WebhookEndpoint, endpoint_id, state, version, Revision::Deleted, stamp);
        Ok(Applied::Applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000_000;

    // Secrets never in logs or traces: the debug form of the secrets, as a log line or a
    // span field would print them, carries no secret.
    #[test]
    fn the_debug_form_of_signing_secrets_leaves_the_secrets_out() {
        let record = rotate(Some(&rotate(None, "whsec_c2VjcmV0LW9uZQ==", Timestamp(0))), "whsec_c2VjcmV0LXR3bw==", Timestamp(HOUR));
        let printed = format!("{record:?} {:?} {record:#?}", record.secrets[0]);
        assert!(!printed.contains("c2VjcmV0"), "{printed}");
        assert!(printed.contains("redacted") && printed.contains("expires_at"), "{printed}");
    }

    #[test]
    fn a_new_secret_is_current_and_the_previous_one_signs_for_the_overlap() {
        let first = rotate(None, "whsec_a", Timestamp(0));
        assert_eq!(first.secrets, vec![SigningSecret { secret: "whsec_a".into(), expires_at: None }]);
        let second = rotate(Some(&first), "whsec_b", Timestamp(HOUR));
        assert_eq!(
            second.secrets,
            vec![
                SigningSecret { secret: "whsec_b".into(), expires_at: None },
                SigningSecret { secret: "whsec_a".into(), expires_at: Some(Timestamp(25 * HOUR)) }
            ]
        );
        // The same secret again rotates nothing; the previous one keeps its expiry.
        assert_eq!(rotate(Some(&second), "whsec_b", Timestamp(2 * HOUR)), second);
        // Past its overlap, the previous secret is dropped.
        let third = rotate(Some(&second), "whsec_c", Timestamp(26 * HOUR));
        assert_eq!(
            third.secrets,
            vec![
                SigningSecret { secret: "whsec_c".into(), expires_at: None },
                SigningSecret { secret: "whsec_b".into(), expires_at: Some(Timestamp(50 * HOUR)) }
            ]
        );
    }
}
