//! JSON-RPC 2.0 as MCP uses it over HTTP: reading one message (batches refused),
//! classifying it (request, notification, or a client's response), the protocol
//! versions this server speaks (both eras), and writing responses and errors. Response and error
//! objects are rmcp's model types; the one exception is an error whose id could not be
//! read, which JSON-RPC 2.0 requires to carry `"id": null` while rmcp's `JsonRpcError`
//! leaves the member out (the 2026 revision's rule).

use std::borrow::Cow;

use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcResponse, JsonRpcVersion2_0, NumberOrString, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The version a client gets when it asks for one this server does not know, and the
/// version assumed for requests without an `MCP-Protocol-Version` header.
pub const DEFAULT_VERSION: &str = "2025-03-26";

/// Versions this server speaks, oldest first. Each later one only adds what this
/// server sends when asked (structuredContent, outputSchema, titles).
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-03-26", "2025-06-18", "2025-11-25"];

/// From this version on, tools carry `outputSchema` and results `structuredContent`.
pub const STRUCTURED_SINCE: &str = "2025-06-18";

/// The stateless revision (`modern.rs`): no initialize, the version and the client's
/// capabilities in every request's `params._meta`.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Every version this server speaks, newest first, as `server/discover` lists them and
/// an unsupported version's error names them: a dual-era client learns from either
/// that it may also fall back to `initialize`.
pub const ALL_VERSIONS: &[&str] = &[MODERN_VERSION, "2025-11-25", "2025-06-18", "2025-03-26"];

/// The version an initialize request gets: the requested one when supported, else the
/// default (the client then decides whether it can continue).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested.and_then(|requested| SUPPORTED_VERSIONS.iter().copied().find(|supported| *supported == requested)).unwrap_or(DEFAULT_VERSION)
}

pub fn supported(version: &str) -> Option<&'static str> {
    SUPPORTED_VERSIONS.iter().copied().find(|supported| *supported == version)
}

/// Whether a negotiated version includes structured tool output.
pub fn structured(version: &str) -> bool {
    version >= STRUCTURED_SINCE
}

/// A protocol error, answered as a JSON-RPC error response: with HTTP 200 on the legacy
/// path, with the status [`RpcError::modern_status`] gives under 2026-07-28.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// -32700
    #[error("parse error: the body is not valid JSON")]
    Parse,
    /// -32600
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    /// -32601
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// -32602: an unknown tool, or params of the wrong shape.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// -32020 (2026-07-28): a routing header (`MCP-Protocol-Version`, `Mcp-Method`,
    /// `Mcp-Name`) missing, repeated, or saying otherwise than the body.
    #[error("Header mismatch: {0}")]
    HeaderMismatch(String),
    /// -32022 (2026-07-28): a version this server does not speak; `data` lists the ones
    /// it does.
    #[error("Unsupported protocol version")]
    UnsupportedProtocolVersion { requested: String },
}

impl RpcError {
    pub fn code(&self) -> ErrorCode {
        match self {
            RpcError::Parse => ErrorCode::PARSE_ERROR,
            RpcError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
            RpcError::MethodNotFound(_) => ErrorCode::METHOD_NOT_FOUND,
            RpcError::InvalidParams(_) => ErrorCode::INVALID_PARAMS,
            RpcError::HeaderMismatch(_) => ErrorCode(-32020),
            RpcError::UnsupportedProtocolVersion { .. } => ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        }
    }

    /// The HTTP status of this error under 2026-07-28 (the transport spec's table:
    /// 404 for an unknown method, 400 for everything a client sent wrong).
    pub fn modern_status(&self) -> axum::http::StatusCode {
        match self {
            RpcError::MethodNotFound(_) => axum::http::StatusCode::NOT_FOUND,
            _ => axum::http::StatusCode::BAD_REQUEST,
        }
    }

    fn data(&self) -> ErrorData {
        let data = match self {
            RpcError::UnsupportedProtocolVersion { requested } => Some(serde_json::json!({"supported": ALL_VERSIONS, "requested": requested})),
            _ => None,
        };
        ErrorData::new(self.code(), Cow::Owned(self.to_string()), data)
    }
}

/// One incoming message.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Option<Value>,
    },
    /// No id: nothing is answered (202).
    Notification,
    /// A client's answer to a server request (this server sends none): 202.
    Response,
}

/// Reads a message; on failure, the error and the id when it could be read.
pub fn parse(body: &[u8]) -> Result<Incoming, (Option<RequestId>, RpcError)> {
    match parse_request(body) {
        Some(request) => Ok(request),
        None => parse_any(body),
    }
}

/// The common message, a well-formed request, read without building a value of the
/// whole object: `None` for anything else (a notification, an error to classify, an
/// escaped `jsonrpc`, a duplicate member), which [`parse_any`] then reads. Both give the
/// same answer wherever this one gives any (the tests check it).
fn parse_request(body: &[u8]) -> Option<Incoming> {
    #[derive(Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        jsonrpc: &'a str,
        #[serde(borrow)]
        id: &'a RawValue,
        method: String,
        #[serde(default, deserialize_with = "present")]
        params: Option<ParamsObject>,
    }
    fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<ParamsObject>, D::Error> {
        ParamsObject::deserialize(deserializer).map(Some)
    }
    // Params that are not an object fail to deserialize here: the general path says so.
    let request: Request = serde_json::from_slice(body).ok()?;
    if request.jsonrpc != "2.0" {
        return None;
    }
    let raw = request.id.get();
    let id = if raw.starts_with('"') {
        NumberOrString::String(serde_json::from_str::<String>(raw).ok()?.into())
    } else {
        // Plain integers only; fractions, exponents and -0 are left to the general path.
        let digits = raw.strip_prefix('-').unwrap_or(raw);
        if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) || raw == "-0" {
            return None;
        }
        NumberOrString::Number(raw.parse().ok()?)
    };
    Some(Incoming::Request { id, method: request.method, params: request.params.map(|params| Value::Object(params.0)) })
}

/// The members of `params._meta` the server reads: the 2026-07-28 envelope
/// (`modern.rs`) and the trace context (`transport.rs`). The others (a client's
/// `clientInfo`, anything it adds) are read as JSON and dropped, never built into values:
/// they are most of a 2026-07-28 request's `_meta`, and nothing reads them.
const META_KEYS_READ: [&str; 4] = [crate::modern::PROTOCOL_VERSION_KEY, crate::modern::CLIENT_CAPABILITIES_KEY, "traceparent", "tracestate"];

/// `_meta` as the server keeps it: an object with only [`META_KEYS_READ`], any other
/// value as it is. The general path's equivalent of [`MetaValue`].
fn kept_meta(meta: Value) -> Value {
    match meta {
        Value::Object(mut members) => {
            members.retain(|key, _| META_KEYS_READ.contains(&key.as_str()));
            Value::Object(members)
        }
        other => other,
    }
}

/// A params object, read as a `Value` would be but for `_meta` ([`MetaValue`]).
struct ParamsObject(Map<String, Value>);

impl<'de> Deserialize<'de> for ParamsObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = ParamsObject;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<ParamsObject, A::Error> {
                let mut members = Map::new();
                // A repeated member: the last one wins, as in a `Value`.
                while let Some(key) = access.next_key::<String>()? {
                    let value = if key == "_meta" { access.next_value::<MetaValue>()?.0 } else { access.next_value::<Value>()? };
                    members.insert(key, value);
                }
                Ok(ParamsObject(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// `params._meta` read as [`kept_meta`] keeps it: an object's members outside
/// [`META_KEYS_READ`] are checked as JSON ([`Checked`]) but not kept; any other value is
/// read whole.
struct MetaValue(Value);

impl<'de> Deserialize<'de> for MetaValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Meta;
        impl<'de> serde::de::Visitor<'de> for Meta {
            type Value = MetaValue;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<MetaValue, A::Error> {
                let mut kept = Map::new();
                while let Some(key) = access.next_key::<Key<'de>>()? {
                    if META_KEYS_READ.contains(&key.0.as_ref()) {
                        kept.insert(key.0.into_owned(), access.next_value::<Value>()?);
                    } else {
                        access.next_value::<Checked>()?;
                    }
                }
                Ok(MetaValue(Value::Object(kept)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut access: A) -> Result<MetaValue, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = access.next_element::<Value>()? {
                    items.push(item);
                }
                Ok(MetaValue(Value::Array(items)))
            }
            fn visit_unit<E>(self) -> Result<MetaValue, E> {
                Ok(MetaValue(Value::Null))
            }
            fn visit_bool<E>(self, value: bool) -> Result<MetaValue, E> {
                Ok(MetaValue(Value::Bool(value)))
            }
            fn visit_i64<E>(self, value: i64) -> Result<MetaValue, E> {
                Ok(MetaValue(Value::from(value)))
            }
            fn visit_u64<E>(self, value: u64) -> Result<MetaValue, E> {
                Ok(MetaValue(Value::from(value)))
            }
            fn visit_f64<E>(self, value: f64) -> Result<MetaValue, E> {
                Ok(MetaValue(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)))
            }
            fn visit_str<E>(self, value: &str) -> Result<MetaValue, E> {
                Ok(MetaValue(Value::String(value.to_string())))
            }
            fn visit_string<E>(self, value: String) -> Result<MetaValue, E> {
                Ok(MetaValue(Value::String(value)))
            }
        }
        deserializer.deserialize_any(Meta)
    }
}

/// A member name, borrowed from the body unless it has escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Name;
        impl<'de> serde::de::Visitor<'de> for Name {
            type Value = Key<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(name)))
            }
            fn visit_str<E>(self, name: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(name.to_string())))
            }
        }
        deserializer.deserialize_str(Name)
    }
}

/// Any JSON value, read with the rules a `Value` is read with (a number outside the
/// range of an f64 is refused, as it is anywhere else in the body) but kept nowhere:
/// serde's `IgnoredAny` skips numbers without reading them.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> serde::de::Visitor<'de> for Any {
            type Value = Checked;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<Checked, A::Error> {
                while access.next_entry::<Checked, Checked>()?.is_some() {}
                Ok(Checked)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut access: A) -> Result<Checked, A::Error> {
                while access.next_element::<Checked>()?.is_some() {}
                Ok(Checked)
            }
            fn visit_unit<E>(self) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
                Ok(Checked)
            }
        }
        deserializer.deserialize_any(Any)
    }
}

/// Reads and classifies any message.
fn parse_any(body: &[u8]) -> Result<Incoming, (Option<RequestId>, RpcError)> {
    let value: Value = serde_json::from_slice(body).map_err(|_| (None, RpcError::Parse))?;
    let mut object = match value {
        Value::Object(object) => object,
        Value::Array(_) => return Err((None, RpcError::InvalidRequest("batches are not supported"))),
        _ => return Err((None, RpcError::InvalidRequest("the message must be a JSON object"))),
    };
    let id = match object.get("id") {
        None => None,
        Some(Value::String(id)) => Some(NumberOrString::String(id.as_str().into())),
        Some(Value::Number(number)) if number.as_i64().is_some() => number.as_i64().map(NumberOrString::Number),
        // MCP forbids null ids; JSON-RPC forbids fractions.
        Some(_) => return Err((None, RpcError::InvalidRequest("id must be a string or an integer"))),
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, RpcError::InvalidRequest("jsonrpc must be \"2.0\"")));
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => return Err((id, RpcError::InvalidRequest("method must be a string"))),
        None if id.is_some() && (object.contains_key("result") || object.contains_key("error")) => return Ok(Incoming::Response),
        None => return Err((id, RpcError::InvalidRequest("method is missing"))),
    };
    let params = match object.remove("params") {
        Some(Value::Object(mut params)) => {
            if let Some(meta) = params.remove("_meta") {
                params.insert("_meta".to_string(), kept_meta(meta));
            }
            Some(Value::Object(params))
        }
        None => None,
        Some(_) => return Err((id, RpcError::InvalidRequest("params must be an object"))),
    };
    match id {
        None => Ok(Incoming::Notification),
        Some(id) => Ok(Incoming::Request { id, method, params }),
    }
}

/// A success response around an already serialised result.
pub fn respond_raw(id: &RequestId, result_json: &str) -> String {
    let id_json = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(result_json.len() + id_json.len() + 36);
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    out.push_str(&id_json);
    out.push_str(",\"result\":");
    out.push_str(result_json);
    out.push('}');
    out
}

pub use crate::json_string::push_json_string;

/// The response to tools/call: one text item holding the tool's JSON and, for clients
/// on 2025-06-18 or later, the same JSON as `structuredContent`. Equal to serialising
/// rmcp's `CallToolResult` (the tests check it), but written directly: the text is
/// escaped once into a buffer of the right size and copied raw as structuredContent,
/// rather than parsed back into a value and serialised again through growing buffers.
#[cfg(test)]
pub fn tool_result(id: &RequestId, text: &str, is_error: bool, structured: bool) -> Vec<u8> {
    tool_result_with(id, text, is_error, structured, "")
}

/// [`tool_result`] with more members appended to the result object: `extra` is empty or
/// starts with a comma (the 2026-07-28 `resultType` and `_meta`, serialised once).
pub fn tool_result_with(id: &RequestId, text: &str, is_error: bool, structured: bool, extra: &str) -> Vec<u8> {
    let id_json = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
    let mut out = Vec::with_capacity(text.len() * if structured { 3 } else { 2 } + id_json.len() + extra.len() + 128);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id_json.as_bytes());
    out.extend_from_slice(b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
    push_json_string(&mut out, text);
    out.extend_from_slice(b"}]");
    if structured {
        out.extend_from_slice(b",\"structuredContent\":");
        out.extend_from_slice(text.as_bytes());
    }
    out.extend_from_slice(if is_error { b",\"isError\":true" } else { b",\"isError\":false" });
    out.extend_from_slice(extra.as_bytes());
    out.extend_from_slice(b"}}");
    // UTF-8 by construction (ASCII added around a copy of `text`): the bytes go to the
    // response body as they are.
    out
}

pub fn respond<T: Serialize>(id: RequestId, result: T) -> String {
    serde_json::to_string(&JsonRpcResponse { jsonrpc: JsonRpcVersion2_0, id, result })
        .unwrap_or_else(|_| error(None, &RpcError::InvalidRequest("unserialisable result")))
}

pub fn error(id: Option<RequestId>, error: &RpcError) -> String {
    match id {
        Some(id) => serde_json::to_string(&JsonRpcError::new(Some(id), error.data())).unwrap_or_default(),
        None => {
            let data = serde_json::to_string(&error.data()).unwrap_or_default();
            format!("{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{data}}}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> i32 {
        match parse(body.as_bytes()) {
            Err((_, error)) => error.code().0,
            Ok(_) => 0,
        }
    }

    #[test]
    fn classifies_messages() {
        assert_eq!(code("{"), -32700);
        assert_eq!(code("[]"), -32600);
        assert_eq!(code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#), -32600);
        assert!(matches!(parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), Ok(Incoming::Notification)));
        assert!(matches!(parse(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#), Ok(Incoming::Response)));
    }

    #[test]
    fn the_request_fast_path_reads_what_the_general_path_reads() {
        let messages = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_meetings","arguments":{"limit":20}}}"#,
            r#"{"method":"ping","id":"a\"b","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":-42,"method":"ping","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","extra":{"x":[1,2]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","x":[1,{"y":null}],"z":1.5e3}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"a","io.modelcontextprotocol/protocolVersion":"b","n\u0061me":"\u00e9"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"tracestate":"a"},"_meta":{"traceparent":"b"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":[1,"a",{"b":true}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":-5.25}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"clientInfo":{"n":1e400}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"\ud800"}}}"#,
        ];
        for message in messages {
            let general = format!("{:?}", parse_any(message.as_bytes()));
            assert_eq!(format!("{:?}", parse(message.as_bytes())), general, "{message}");
            if let Some(fast) = parse_request(message.as_bytes()) {
                assert_eq!(format!("{:?}", Ok::<_, ()>(fast)), general, "{message}");
            }
        }
        // The common request does take the fast path.
        assert!(parse_request(messages[0].as_bytes()).is_some());
        assert!(parse_request(messages[1].as_bytes()).is_some());
    }

    // `_meta` keeps only the members the server reads; the others are still read as a
    // `Value` would be, so a number it cannot hold makes the whole body unreadable.
    #[test]
    fn meta_keeps_the_members_read_and_checks_the_others() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"traceparent":"t","tracestate":"s","progressToken":7}}}"#;
        let Ok(Incoming::Request { params: Some(params), .. }) = parse(body.as_bytes()) else { panic!("a request") };
        assert_eq!(
            params["_meta"],
            serde_json::json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "traceparent": "t",
                "tracestate": "s",
            })
        );
        assert_eq!(params["name"], "x");
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"build":1e400}}}}"#), -32700);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"x":"\u0000\q"}}}"#), -32700);
    }

    #[test]
    fn negotiates_known_versions_and_falls_back() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2025-11-25")), "2025-11-25");
        assert_eq!(negotiate(Some("2024-11-05")), "2025-03-26");
        assert_eq!(negotiate(Some("2099-01-01")), "2025-03-26");
        assert_eq!(negotiate(None), "2025-03-26");
    }

    #[test]
    fn tool_results_equal_rmcps_serialisation() {
        use rmcp::model::{CallToolResult, ContentBlock};
        let text = r#"{"meetings":[{"id":"m\"1","title":"A\nB"}],"pagination":{"total":null}}"#;
        for (id, is_error, structured) in
            [(NumberOrString::Number(7), false, false), (NumberOrString::String("x\"y".into()), false, true), (NumberOrString::Number(1), true, false)]
        {
            let mut expected =
                if is_error { CallToolResult::error(vec![ContentBlock::text(text)]) } else { CallToolResult::success(vec![ContentBlock::text(text)]) };
            expected.result_type = None;
            if structured {
                expected.structured_content = serde_json::from_str(text).ok();
            }
            let expected: Value = serde_json::from_str(&respond(id.clone(), expected)).expect("rmcp writes JSON");
            let written: Value = serde_json::from_slice(&tool_result(&id, text, is_error, structured)).expect("a tool result is JSON");
            assert_eq!(written, expected);
        }
    }

    #[test]
    fn errors_without_an_id_carry_null() {
        assert_eq!(error(None, &RpcError::Parse), r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: the body is not valid JSON"}}"#);
    }
}
