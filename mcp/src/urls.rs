//! The URLs the server advertises (MCP endpoint, OAuth issuer and endpoints, metadata
//! documents), derived per request: from `--mcp-public-url` when set, else from the
//! request's `Host` and `X-Forwarded-Proto`, so that the issuer equals the URL the
//! metadata was fetched under whichever name or port the client used.

use axum::http::HeaderMap;

use crate::config::McpConfig;

/// Where the MCP endpoint lives under its origin.
pub const MCP_PATH: &str = "/mcp";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicUrls {
    /// `scheme://host[:port]`
    pub origin: String,
    /// `{origin}/mcp`: the MCP endpoint, the protected resource and the OAuth issuer.
    pub mcp_url: String,
}

impl PublicUrls {
    pub fn of(config: &McpConfig, headers: &HeaderMap) -> PublicUrls {
        if let Some(public) = config.public_url.as_deref().and_then(|url| url::Url::parse(url).ok()) {
            let origin = public.origin().ascii_serialization();
            let mcp_url = public.as_str().trim_end_matches('/').to_string();
            return PublicUrls { origin, mcp_url };
        }
        let host = headers.get(axum::http::header::HOST).and_then(|value| value.to_str().ok()).filter(|host| valid_host(host)).unwrap_or("localhost");
        let scheme = match headers.get("x-forwarded-proto").and_then(|value| value.to_str().ok()).map(|value| value.split(',').next().unwrap_or("").trim()) {
            Some("https") => "https",
            _ => "http",
        };
        let origin = format!("{scheme}://{host}");
        let mcp_url = format!("{origin}{MCP_PATH}");
        PublicUrls { origin, mcp_url }
    }

    /// The OAuth issuer (RFC 8414): the MCP endpoint's URL.
    pub fn issuer(&self) -> &str {
        &self.mcp_url
    }

    /// The protected-resource metadata document, as the spec places it (under {mcp_url}).
    pub fn resource_metadata(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource", self.mcp_url)
    }

    pub fn endpoint(&self, name: &str) -> String {
        format!("{}/{name}", self.mcp_url)
    }
}

/// Whether a `resource` parameter (RFC 8707) names the MCP endpoint at `mcp_url`: an
/// absolute URI without a fragment (§2), equal to it as URLs compare (scheme and host
/// in any case, the default port written or not), a trailing slash aside, as the MCP
/// authorization spec lets a client write the canonical URI either way.
pub fn names_resource(resource: &str, mcp_url: &str) -> bool {
    let (Ok(given), Ok(ours)) = (url::Url::parse(resource), url::Url::parse(mcp_url)) else { return false };
    let path = |url: &url::Url| url.path().trim_end_matches('/').to_string();
    given.fragment().is_none()
        && given.scheme() == ours.scheme()
        && given.host() == ours.host()
        && given.port_or_known_default() == ours.port_or_known_default()
        && path(&given) == path(&ours)
        && given.query() == ours.query()
}

/// A Host header we are willing to echo into documents: a host name or address and an
/// optional port, nothing that could break out of a URL.
fn valid_host(host: &str) -> bool {
    !host.is_empty() && host.len() <= 255 && host.bytes().all(|byte| byte.is_ascii_alphanumeric() || b".-:[]_".contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_from_host_and_forwarded_proto() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "mcp.example.com:8443".parse().expect("a valid header value"));
        headers.insert("x-forwarded-proto", "https".parse().expect("a valid header value"));
        let urls = PublicUrls::of(&McpConfig::default(), &headers);
        assert_eq!(urls.mcp_url, "https://mcp.example.com:8443/mcp");
        assert_eq!(urls.resource_metadata(), "https://mcp.example.com:8443/mcp/.well-known/oauth-protected-resource");
    }

    #[test]
    fn a_resource_names_the_endpoint_as_urls_compare_and_nothing_else() {
        let ours = "https://mcp.example.com/mcp";
        for same in ["https://mcp.example.com/mcp", "https://mcp.example.com/mcp/", "HTTPS://MCP.example.com:443/mcp"] {
            assert!(names_resource(same, ours), "{same}");
        }
        for other in [
            "https://other.example.com/mcp",
            "http://mcp.example.com/mcp",
            "https://mcp.example.com:8443/mcp",
            "https://mcp.example.com/",
            "https://mcp.example.com/mcp/other",
            "https://mcp.example.com/mcp#fragment",
            "https://mcp.example.com/mcp?x=1",
            "mcp.example.com/mcp",
            "/mcp",
        ] {
            assert!(!names_resource(other, ours), "{other}");
        }
    }

    #[test]
    fn refuses_hosts_that_would_break_a_url() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "evil.com/\"><script>".parse().expect("a valid header value"));
        assert_eq!(PublicUrls::of(&McpConfig::default(), &headers).origin, "http://localhost");
    }

    #[test]
    fn the_configured_public_url_wins() {
        let config = McpConfig { public_url: Some("https://mcp.example.com/mcp/".into()), ..McpConfig::default() };
        let mut headers = HeaderMap::new();
        headers.insert("host", "10.0.0.1:9000".parse().expect("a valid header value"));
        let urls = PublicUrls::of(&config, &headers);
        assert_eq!((urls.origin.as_str(), urls.mcp_url.as_str()), ("https://mcp.example.com", "https://mcp.example.com/mcp"));
    }
}
