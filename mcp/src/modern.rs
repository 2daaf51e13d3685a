//! MCP 2026-07-28 ("modern"), beside the handshake-era versions on the same endpoint.
//! There is no initialize: every request names its version and the client's
//! capabilities in `params._meta`, its method in the `Mcp-Method` header and, for
//! tools/call, its tool in `Mcp-Name`, so that a proxy can route it without reading the
//! body. Every result says `resultType: "complete"` and names the server in its `_meta`.
//!
//! `transport.rs` sends a request here when its `MCP-Protocol-Version` header is present
//! and names no handshake-era version, or comes twice; this module checks the request in the order
//! below and writes the parts of answers only this revision has. Each check answers a
//! JSON-RPC error with an HTTP status ([`RpcError::modern_status`]), never a bare 4xx:
//! a dual-era client takes a 4xx without a JSON-RPC error body for a legacy server.
//!
//! 1. A routing header given twice: -32020 (readers of the first and of the last copy
//!    would disagree).
//! 2. A header version this server does not speak: -32022 listing those it does, before
//!    anything else about the body, so a client on another revision learns what to
//!    speak whatever shape its request has.
//! 3. `params._meta` without `io.modelcontextprotocol/protocolVersion` (a string) or
//!    `io.modelcontextprotocol/clientCapabilities` (an object): -32602.
//! 4. `_meta`'s version differing from the header: -32020.
//! 5. `Mcp-Method` missing or differing from `method`: -32020.
//! 6. tools/call: `params.name` not a string: -32602; `Mcp-Name` missing or, once
//!    decoded from its `=?base64?…?=` form, differing from it: -32020.
//!
//! Header values are compared exactly (case-sensitive) after trimming spaces and tabs
//! around them, as HTTP field values are read.
//!
//! `subscriptions/listen` ([`listen`]) is answered as the revision's subscriptions
//! pattern says, with nothing to listen to: this server has no resources or prompts and
//! its tool list changes only with a release (`tools.listChanged` is not declared), so
//! the acknowledgement agrees to no notification type, and the server then ends the
//! subscription on its own initiative with its completion result, on the same SSE
//! stream, rather than holding a connection open that will never carry anything.

use std::borrow::Cow;
use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use base64::Engine as _;
use rmcp::model::{CacheScope, DiscoverResult, Implementation, ProtocolVersion, ServerCapabilities, ToolsCapability};
use serde_json::Value;

use crate::rpc::{Meta, MetaValue, Params, RpcError, ALL_VERSIONS, MODERN_VERSION};

pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// How long a client may keep `server/discover` and `tools/list` (ms): both change only
/// with a release of the server, and an hour bounds how long a client misses a new tool.
pub const TTL_MS: u64 = 3_600_000;

/// The routing headers, as names built once: a lookup by a `&str` name parses it on
/// every request.
pub const PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// Who answers, in initialize results and in every modern result's `_meta`.
pub fn server_info() -> Implementation {
    Implementation::new("recap", env!("CARGO_PKG_VERSION")).with_title("recap meeting notes")
}

/// The members every modern result ends with, serialised once: `,"resultType":"complete","_meta":{serverInfo}`.
pub fn result_members() -> &'static str {
    static MEMBERS: OnceLock<String> = OnceLock::new();
    MEMBERS.get_or_init(|| {
        let meta = serde_json::json!({ SERVER_INFO_KEY: server_info() });
        format!(",\"resultType\":\"complete\",\"_meta\":{meta}")
    })
}

/// The `server/discover` result, serialised once. Public cache scope: it says the same to
/// every caller.
pub fn discover_result(instructions: &str) -> &'static str {
    static RESULT: OnceLock<String> = OnceLock::new();
    RESULT.get_or_init(|| {
        let mut capabilities = ServerCapabilities::default();
        capabilities.tools = Some(ToolsCapability::default());
        let versions =
            ALL_VERSIONS.iter().filter_map(|version| ProtocolVersion::KNOWN_VERSIONS.iter().find(|known| known.as_str() == *version).cloned()).collect();
        let mut result = DiscoverResult::new(versions, capabilities).with_ttl_ms(TTL_MS).with_cache_scope(CacheScope::Public).with_server_info(server_info());
        result.instructions = Some(instructions.to_string());
        serde_json::to_string(&result).unwrap_or_default()
    })
}

/// The SSE body answering `subscriptions/listen` (the module's doc): the
/// acknowledgement, agreeing to no notification type, then the request's completion
/// result, each tagged with the subscription's id (the request's). `params.notifications`,
/// the filter, must be an object when given.
pub fn listen(id: &rmcp::model::RequestId, params: &Params) -> Result<String, RpcError> {
    let filter = params.object.as_ref().and_then(|object| object.get("notifications"));
    if filter.is_some_and(|filter| !filter.is_object()) {
        return Err(RpcError::InvalidParams("subscriptions/listen needs params.notifications, an object".into()));
    }
    let subscription = serde_json::to_value(id).unwrap_or(Value::Null);
    let acknowledged = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": { "_meta": { SUBSCRIPTION_ID_KEY: subscription }, "notifications": {} },
    });
    let ended = serde_json::json!({
        "resultType": "complete",
        "_meta": { SUBSCRIPTION_ID_KEY: subscription, SERVER_INFO_KEY: server_info() },
    });
    Ok(format!("data: {acknowledged}\n\ndata: {}\n\n", crate::rpc::respond_raw(id, &ended.to_string())))
}

/// Checks a modern request's routing headers and `_meta` (the module's rules 1 to 6).
/// `requested` is its `MCP-Protocol-Version` header. `Mcp-Method` and `Mcp-Name` are
/// looked up once, for their values, the copies of all three only when some header of
/// the request comes twice; `_meta`'s members were read with the body ([`Meta`]):
/// these checks are all a 2026-07-28 call does beyond a handshake-era one of the same
/// bytes, on every call.
pub fn check(headers: &HeaderMap, requested: &str, method: &str, params: &Params) -> Result<(), RpcError> {
    // As many values as names: no header at all comes twice, and the copies need no
    // lookup of their own.
    if headers.len() != headers.keys_len() {
        if let Some(repeated) = [PROTOCOL_VERSION_HEADER, METHOD_HEADER, NAME_HEADER].iter().find(|name| headers.get_all(*name).iter().nth(1).is_some()) {
            return Err(RpcError::HeaderMismatch(format!("the {repeated} header appears more than once")));
        }
    }
    if requested != MODERN_VERSION {
        return Err(RpcError::UnsupportedProtocolVersion { requested: requested.to_string() });
    }
    let body_version = envelope(&params.meta)?;
    if body_version != requested {
        return Err(mismatch("MCP-Protocol-Version", requested, body_version));
    }
    match header_text(headers.get(&METHOD_HEADER), &METHOD_HEADER)? {
        None => return Err(RpcError::HeaderMismatch("the Mcp-Method header is required".into())),
        Some(value) if value != method => return Err(mismatch("Mcp-Method", value, method)),
        Some(_) => {}
    }
    if method == "tools/call" {
        let Some(name) = params.object.as_ref().and_then(|object| object.get("name")).and_then(Value::as_str) else {
            return Err(RpcError::InvalidParams("tools/call needs params.name, a string".into()));
        };
        let Some(value) = header_text(headers.get(&NAME_HEADER), &NAME_HEADER)? else {
            return Err(RpcError::HeaderMismatch("the Mcp-Name header is required on tools/call".into()));
        };
        match decode(value) {
            Some(decoded) if decoded == name => {}
            Some(decoded) => return Err(mismatch("Mcp-Name", &decoded, name)),
            None => return Err(RpcError::HeaderMismatch("the Mcp-Name header carries a malformed =?base64?...?= value".into())),
        }
    }
    Ok(())
}

/// The version `_meta` names, once both required keys are there.
fn envelope<'a>(meta: &'a Meta) -> Result<&'a str, RpcError> {
    if meta.value != MetaValue::Object {
        return Err(RpcError::InvalidParams(format!("params._meta is required, with {PROTOCOL_VERSION_KEY} and {CLIENT_CAPABILITIES_KEY}")));
    }
    let (version, capabilities) = (&meta.protocol_version, &meta.client_capabilities);
    if *version == MetaValue::Absent || *capabilities == MetaValue::Absent {
        let missing: Vec<&str> = [(version, PROTOCOL_VERSION_KEY), (capabilities, CLIENT_CAPABILITIES_KEY)]
            .into_iter()
            .filter_map(|(value, key)| (*value == MetaValue::Absent).then_some(key))
            .collect();
        return Err(RpcError::InvalidParams(format!("params._meta is missing the required key(s): {}", missing.join(", "))));
    }
    if *capabilities != MetaValue::Object {
        return Err(RpcError::InvalidParams(format!("params._meta.{CLIENT_CAPABILITIES_KEY} must be an object")));
    }
    version.text().ok_or_else(|| RpcError::InvalidParams(format!("params._meta.{PROTOCOL_VERSION_KEY} must be a string")))
}

/// A header's value without the spaces and tabs around it; `None` when absent.
fn header_text<'a>(value: Option<&'a HeaderValue>, name: &HeaderName) -> Result<Option<&'a str>, RpcError> {
    match value {
        None => Ok(None),
        Some(value) => match value.to_str() {
            Ok(text) => Ok(Some(trim_spaces_and_tabs(text))),
            Err(_) => Err(RpcError::HeaderMismatch(format!("the {name} header has characters outside visible ASCII"))),
        },
    }
}

/// `text` without the spaces and tabs around it, found byte by byte (both are ASCII, so
/// the cuts fall between characters) rather than through a `char` pattern.
fn trim_spaces_and_tabs(text: &str) -> &str {
    let is_blank = |byte: &u8| *byte == b' ' || *byte == b'\t';
    let start = text.bytes().position(|byte| !is_blank(&byte)).unwrap_or(text.len());
    let end = text.bytes().rposition(|byte| !is_blank(&byte)).map_or(start, |last| last + 1);
    text.get(start..end).unwrap_or_default()
}

fn mismatch(header: &str, header_value: &str, body_value: &str) -> RpcError {
    RpcError::HeaderMismatch(format!("{header} header value '{header_value}' does not match body value '{body_value}'"))
}

/// A header value as its sender meant it: the UTF-8 inside `=?base64?<b64>?=` (the form
/// for values a header cannot carry as they are), else the value itself. `None` for a
/// malformed encoded form (bad or non-canonical base64, not UTF-8), which then matches
/// nothing. A plain value is borrowed, not copied.
pub fn decode(value: &str) -> Option<Cow<'_, str>> {
    let Some(payload) = value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) else {
        return Some(Cow::Borrowed(value));
    };
    let bytes = base64::engine::general_purpose::STANDARD.decode(payload).ok()?;
    String::from_utf8(bytes).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Header values are read without the spaces and tabs around them, and only those.
    #[test]
    fn header_values_lose_only_the_spaces_and_tabs_around_them() {
        for (value, trimmed) in
            [("tools/call", "tools/call"), (" \t tools/call\t ", "tools/call"), ("a b", "a b"), ("", ""), (" \t ", ""), ("\u{a0}x\u{a0}", "\u{a0}x\u{a0}")]
        {
            assert_eq!(trim_spaces_and_tabs(value), trimmed, "{value:?}");
            assert_eq!(trim_spaces_and_tabs(value), value.trim_matches([' ', '\t']), "{value:?}");
        }
    }

    #[test]
    fn encoded_names_decode_and_malformed_ones_match_nothing() {
        assert_eq!(decode("get_meeting").as_deref(), Some("get_meeting"));
        assert_eq!(decode("=?base64?Z2V0X21lZXRpbmc=?=").as_deref(), Some("get_meeting"));
        assert_eq!(decode("=?base64?w6ljaG8=?=").as_deref(), Some("écho"));
        assert_eq!(decode("=?base64?not base64?="), None);
        // Non-zero trailing bits: not what an encoder writes.
        assert_eq!(decode("=?base64?Z2V0X21lZXRpbmd=?="), None);
        assert_eq!(decode("=?base64?/w==?="), None, "not UTF-8");
        // The markers are case-sensitive: anything else is a plain value.
        assert_eq!(decode("=?BASE64?Z2V0?=").as_deref(), Some("=?BASE64?Z2V0?="));
    }
}
