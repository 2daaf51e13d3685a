//! Builders of the webhook endpoint events: `webhook_endpoint.upserted` and
//! `webhook_endpoint.deleted`.

use super::{id, Draft, Events};
use crate::{MessageKind, WebhookEndpoint, WebhookEndpointDeleted, WebhookEndpointUpserted, WebhookSecret};

/// The key a built endpoint signs with unless told otherwise: 32 bytes of its id,
/// repeated (reproducible; tests that sign set their own with [`Draft::secret`]).
fn default_key(endpoint_id: &str) -> Vec<u8> {
    endpoint_id.bytes().cycle().take(32).collect()
}

impl Events {
    /// `webhook_endpoint.upserted`: an enabled endpoint at `url` receiving every kind,
    /// without a description.
    #[track_caller]
    pub fn webhook_endpoint(self, account_id: impl AsRef<str>, endpoint_id: impl AsRef<str>, url: impl Into<String>) -> Draft<WebhookEndpointUpserted> {
        let endpoint_id = id(endpoint_id);
        let secret = WebhookSecret::of_key(&default_key(&endpoint_id));
        self.draft(WebhookEndpointUpserted {
            account_id: id(account_id),
            endpoint: WebhookEndpoint { id: endpoint_id, url: url.into(), secret, types: Vec::new(), enabled: true, description: None },
        })
    }

    #[track_caller]
    pub fn webhook_endpoint_deleted(self, account_id: impl AsRef<str>, endpoint_id: impl AsRef<str>) -> Draft<WebhookEndpointDeleted> {
        self.draft(WebhookEndpointDeleted { account_id: id(account_id), endpoint_id: id(endpoint_id) })
    }
}

impl Draft<WebhookEndpointUpserted> {
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.data.endpoint.url = url.into();
        self
    }

    /// Signs with `key` (its secret is `whsec_` and the key's base64).
    pub fn key(mut self, key: &[u8]) -> Self {
        self.data.endpoint.secret = WebhookSecret::of_key(key);
        self
    }

    /// The secret as written, valid or not.
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.data.endpoint.secret = WebhookSecret(secret.into());
        self
    }

    /// The kinds it receives; none for every kind.
    pub fn types(mut self, types: impl IntoIterator<Item = MessageKind>) -> Self {
        self.data.endpoint.types = types.into_iter().collect();
        self
    }

    pub fn enabled(mut self, enabled: bool) -> Self {
        self.data.endpoint.enabled = enabled;
        self
    }

    pub fn description(mut self, description: Option<&str>) -> Self {
        self.data.endpoint.description = description.map(str::to_string);
        self
    }
}
