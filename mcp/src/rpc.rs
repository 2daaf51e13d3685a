//! JSON-RPC 2.0 as MCP uses it over HTTP: reading one message (batches refused),
//! classifying it (request, notification, or a client's response), the protocol
//! versions this server speaks (both eras), and writing responses and errors. Response and error
//! objects are rmcp's model types; the one exception is a handshake-era error whose id
//! could not be read, which JSON-RPC 2.0 requires to carry `"id": null` while rmcp's
//! `JsonRpcError` leaves the member out. Under 2026-07-28 the member is left out
//! ([`modern_error`]): that revision's schema makes it optional and a string or a
//! number, so a client checking responses against it would refuse a `null`.

use std::borrow::Cow;

use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcResponse, JsonRpcVersion2_0, NumberOrString, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The version a client gets when it asks for one this server does not know, and the
/// version assumed for requests without an `MCP-Protocol-Version` header.
pub const DEFAULT_VERSION: &str = "2025-03-26";

/// The handshake-era versions this server speaks (after `initialize`), oldest first;
/// 2026-07-28 is [`MODERN_VERSION`]. Each later one only adds what this
/// server sends when asked (structuredContent, outputSchema, titles).
pub const HANDSHAKE_VERSIONS: &[&str] = &["2025-03-26", "2025-06-18", "2025-11-25"];

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
    requested.and_then(|requested| HANDSHAKE_VERSIONS.iter().copied().find(|supported| *supported == requested)).unwrap_or(DEFAULT_VERSION)
}

pub fn supported(version: &str) -> Option<&'static str> {
    HANDSHAKE_VERSIONS.iter().copied().find(|supported| *supported == version)
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
pub enum Incoming<'a> {
    Request {
        id: RequestId,
        method: String,
        params: Params<'a>,
    },
    /// No id: nothing is answered (202).
    Notification,
    /// A client's answer to a server request (this server sends none): 202.
    Response,
}

/// A request's `params`: the object without `_meta` (`None` when there are no params),
/// and `_meta` read apart ([`Meta`]), never built as a value.
#[derive(Debug, Default)]
pub struct Params<'a> {
    pub object: Option<Value>,
    pub meta: Meta<'a>,
}

/// A JSON value as the server reads it in `params._meta`: a string's text (borrowed
/// from the body unless it has escapes), else only what kind of value it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum MetaValue<'a> {
    #[default]
    Absent,
    Null,
    Text(Cow<'a, str>),
    Object,
    /// A number, a boolean or an array.
    Other,
}

impl<'a> MetaValue<'a> {
    pub fn text(&self) -> Option<&str> {
        match self {
            MetaValue::Text(text) => Some(text),
            _ => None,
        }
    }

    fn of_value(value: Value) -> MetaValue<'static> {
        match value {
            Value::Null => MetaValue::Null,
            Value::String(text) => MetaValue::Text(Cow::Owned(text)),
            Value::Object(_) => MetaValue::Object,
            Value::Bool(_) | Value::Number(_) | Value::Array(_) => MetaValue::Other,
        }
    }

    /// A value serde_json skipped as raw text (its syntax checked): `None` when
    /// [`plainly_valid`] cannot vouch that a `Value` would hold it.
    fn of_raw(raw: &'a RawValue) -> Option<MetaValue<'a>> {
        let text = raw.get();
        if !plainly_valid(text) {
            return None;
        }
        Some(match text.as_bytes().first() {
            Some(b'"') => match text.get(1..text.len() - 1) {
                Some(inner) if !inner.contains('\\') => MetaValue::Text(Cow::Borrowed(inner)),
                _ => MetaValue::Text(Cow::Owned(serde_json::from_str(text).ok()?)),
            },
            Some(b'{') => MetaValue::Object,
            Some(b'n') => MetaValue::Null,
            _ => MetaValue::Other,
        })
    }
}

/// `params._meta` as the server reads it, never built as a value: what it is, and when
/// it is an object, the members the server reads (the 2026-07-28 envelope, `modern.rs`;
/// the trace context, `transport.rs`). The others (a client's `clientInfo`, anything it
/// adds) are most of a 2026-07-28 request's `_meta` and nothing reads them: they are
/// checked as JSON by the rules a `Value` is read with (a number out of an f64's range,
/// a lone surrogate, nesting past serde_json's limit refuse the whole body, -32700) and
/// dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta<'a> {
    /// `_meta` itself: the members below are read only when it is an object.
    pub value: MetaValue<'a>,
    pub protocol_version: MetaValue<'a>,
    pub client_capabilities: MetaValue<'a>,
    pub traceparent: MetaValue<'a>,
    pub tracestate: MetaValue<'a>,
}

impl<'a> Meta<'a> {
    /// Where the member named `key` is kept, if the server reads it.
    fn member(&mut self, key: &str) -> Option<&mut MetaValue<'a>> {
        match key {
            crate::modern::PROTOCOL_VERSION_KEY => Some(&mut self.protocol_version),
            crate::modern::CLIENT_CAPABILITIES_KEY => Some(&mut self.client_capabilities),
            "traceparent" => Some(&mut self.traceparent),
            "tracestate" => Some(&mut self.tracestate),
            _ => None,
        }
    }

    /// The general path's reading: the same as [`MetaReader`]'s, from a value.
    fn of_value(value: Value) -> Meta<'static> {
        let mut meta = Meta::default();
        if let Value::Object(members) = value {
            // A repeated member was already resolved as a `Value` resolves it: the last.
            for (key, member) in members {
                if let Some(kept) = meta.member(&key) {
                    *kept = MetaValue::of_value(member);
                }
            }
            meta.value = MetaValue::Object;
        } else {
            meta.value = MetaValue::of_value(value);
        }
        meta
    }
}

/// Reads a message; on failure, the error and the id when it could be read.
pub fn parse(body: &[u8]) -> Result<Incoming<'_>, (Option<RequestId>, RpcError)> {
    match parse_request(body) {
        Some(request) => Ok(request),
        None => parse_any(body),
    }
}

/// The common message, a well-formed request, read without building a value of the
/// whole object: `None` for anything else (a notification, an error to classify, an
/// escaped `jsonrpc`, a duplicate member, a `_meta` holding what [`plainly_valid`] does
/// not judge), which [`parse_any`] then reads. Both give the same answer wherever this
/// one gives any (the tests check it).
fn parse_request(body: &[u8]) -> Option<Incoming<'_>> {
    #[derive(Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        jsonrpc: &'a str,
        #[serde(borrow)]
        id: &'a RawValue,
        method: String,
        #[serde(default, deserialize_with = "present", borrow)]
        params: Option<ParamsObject<'a>>,
    }
    fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<ParamsObject<'de>>, D::Error> {
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
    let params = match request.params {
        Some(ParamsObject(members, meta)) => Params { object: Some(Value::Object(members)), meta },
        None => Params::default(),
    };
    Some(Incoming::Request { id, method: request.method, params })
}

/// A params object, read as a `Value` would be but for `_meta` ([`MetaReader`]), which
/// is read apart.
struct ParamsObject<'a>(Map<String, Value>, Meta<'a>);

impl<'de> Deserialize<'de> for ParamsObject<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = ParamsObject<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<ParamsObject<'de>, A::Error> {
                let (mut members, mut meta) = (Map::new(), Meta::default());
                // A repeated member: the last one wins, as in a `Value`. Names are
                // borrowed until kept, so `_meta`'s is never copied.
                while let Some(key) = access.next_key::<Key<'de>>()? {
                    if key.0 == "_meta" {
                        meta = access.next_value::<MetaReader>()?.0;
                    } else {
                        let value = access.next_value::<Value>()?;
                        members.insert(key.0.into_owned(), value);
                    }
                }
                Ok(ParamsObject(members, meta))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

/// `params._meta` read into a [`Meta`] from the body: each member of an object (and each
/// item of an array) is skipped by serde_json as raw text, which [`plainly_valid`] then
/// checks; the members the server reads are taken from that text. Anything the scan
/// does not judge fails this reading, and the general path reads the body.
struct MetaReader<'a>(Meta<'a>);

impl<'de> Deserialize<'de> for MetaReader<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        fn unjudged<E: serde::de::Error>() -> E {
            E::custom("left to the general path")
        }
        struct Reader;
        impl<'de> serde::de::Visitor<'de> for Reader {
            type Value = MetaReader<'de>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<MetaReader<'de>, A::Error> {
                let mut meta = Meta { value: MetaValue::Object, ..Meta::default() };
                while let Some(key) = access.next_key::<Key<'de>>()? {
                    let raw: &'de RawValue = access.next_value()?;
                    let value = MetaValue::of_raw(raw).ok_or_else(unjudged::<A::Error>)?;
                    if let Some(kept) = meta.member(&key.0) {
                        *kept = value;
                    }
                }
                Ok(MetaReader(meta))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut access: A) -> Result<MetaReader<'de>, A::Error> {
                while let Some(raw) = access.next_element::<&'de RawValue>()? {
                    if !plainly_valid(raw.get()) {
                        return Err(unjudged());
                    }
                }
                Ok(MetaReader(Meta { value: MetaValue::Other, ..Meta::default() }))
            }
            fn visit_unit<E>(self) -> Result<MetaReader<'de>, E> {
                Ok(MetaReader(Meta { value: MetaValue::Null, ..Meta::default() }))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MetaReader<'de>, E> {
                Ok(MetaReader(Meta { value: MetaValue::Other, ..Meta::default() }))
            }
            fn visit_i64<E>(self, _: i64) -> Result<MetaReader<'de>, E> {
                Ok(MetaReader(Meta { value: MetaValue::Other, ..Meta::default() }))
            }
            fn visit_u64<E>(self, _: u64) -> Result<MetaReader<'de>, E> {
                Ok(MetaReader(Meta { value: MetaValue::Other, ..Meta::default() }))
            }
            fn visit_f64<E>(self, _: f64) -> Result<MetaReader<'de>, E> {
                Ok(MetaReader(Meta { value: MetaValue::Other, ..Meta::default() }))
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<MetaReader<'de>, E> {
                Ok(MetaReader(Meta { value: MetaValue::Text(Cow::Borrowed(text)), ..Meta::default() }))
            }
            fn visit_str<E>(self, text: &str) -> Result<MetaReader<'de>, E> {
                Ok(MetaReader(Meta { value: MetaValue::Text(Cow::Owned(text.to_string())), ..Meta::default() }))
            }
        }
        deserializer.deserialize_any(Reader)
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

/// How deep [`plainly_valid`] lets a value of `_meta` nest. serde_json refuses a
/// document nested more than 127 deep and a member of `_meta` starts 3 deep (the
/// message, `params`, `_meta`); this bound stays well inside, and anything deeper is
/// left to the general path, which applies serde_json's own limit.
const META_MEMBER_DEPTH: u32 = 64;

/// Whether JSON text whose syntax serde_json has already checked (while skipping it
/// as raw text, which checks no more) holds nothing a `Value` would refuse: `true` when
/// its numbers are integers of at most 18 digits (which an i64 or a u64 holds), its
/// `\u` escapes name no surrogate, and it nests at most [`META_MEMBER_DEPTH`] deep.
/// `false` is not a refusal but "not judged here": a longer number may be out of an
/// f64's range (`1e400`, which a `Value` refuses), a surrogate escape may be lone
/// (refused too), and the general path, which reads the body as a `Value`, decides.
fn plainly_valid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (mut index, mut depth) = (0, 0u32);
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'"' => {
                index += 1;
                // Past the closing quote; an escape's next byte is never the quote.
                while let Some(&inner) = bytes.get(index) {
                    match inner {
                        b'"' => break,
                        b'\\' if bytes.get(index + 1) == Some(&b'u') => {
                            // serde_json checked the four hex digits; D800..DFFF are surrogates.
                            if matches!(bytes.get(index + 2), Some(b'd' | b'D'))
                                && matches!(bytes.get(index + 3), Some(b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'))
                            {
                                return false;
                            }
                            index += 6;
                        }
                        b'\\' => index += 2,
                        _ => index += 1,
                    }
                }
                index += 1;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > META_MEMBER_DEPTH {
                    return false;
                }
                index += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                index += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = index;
                index += 1;
                while bytes.get(index).is_some_and(|byte| matches!(byte, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')) {
                    index += 1;
                }
                let number = &bytes[start..index];
                let digits = number.strip_prefix(b"-").unwrap_or(number);
                if digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
                    return false;
                }
            }
            _ => index += 1,
        }
    }
    true
}

/// Reads and classifies any message.
fn parse_any(body: &[u8]) -> Result<Incoming<'static>, (Option<RequestId>, RpcError)> {
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
            let meta = params.remove("_meta").map(Meta::of_value).unwrap_or_default();
            Params { object: Some(Value::Object(params)), meta }
        }
        None => Params::default(),
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

/// An error under 2026-07-28: without an id, the `id` member is left out.
pub fn modern_error(id: Option<RequestId>, error: &RpcError) -> String {
    serde_json::to_string(&JsonRpcError::new(id, error.data())).unwrap_or_default()
}

pub fn error(id: Option<RequestId>, error: &RpcError) -> String {
    match id {
        Some(id) => modern_error(Some(id), error),
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
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"\ud83d\ude00","y":"\udc00"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"\ud83d\ude00","y":"\ud83d"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":[12345678901234567890123,-1e308,2e-400]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":[1e309]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":[1e400]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":"\ud800"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":"a\tb"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"a\u0062c","tracestate":7,"io.modelcontextprotocol/clientCapabilities":[]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":null,"io.modelcontextprotocol/clientCapabilities":"x"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":1},"name":"n","_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":1,}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"\x"}}}"#,
        ];
        // serde_json's nesting limit, reached inside _meta (three levels in): 124 more
        // levels are read, 125 are not.
        let nested: Vec<String> = (62..=66)
            .chain(122..=127)
            .map(|depth| format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_meta":{{"x":{}{}}}}}}}"#, "[".repeat(depth), "]".repeat(depth)))
            .collect();
        assert_eq!(code(&nested[7]), 0, "124 levels in _meta");
        assert_eq!(code(&nested[8]), -32700, "125 levels in _meta");
        for message in messages.iter().copied().chain(nested.iter().map(String::as_str)) {
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

    // `_meta` is read into the members the server reads, borrowed from the body; the
    // others are still read as a `Value` would be, so a number it cannot hold makes the
    // whole body unreadable.
    #[test]
    fn meta_keeps_the_members_read_and_checks_the_others() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"traceparent":"t","tracestate":"s","progressToken":7}}}"#;
        let Ok(Incoming::Request { params, .. }) = parse(body.as_bytes()) else { panic!("a request") };
        assert_eq!(
            params.meta,
            Meta {
                value: MetaValue::Object,
                protocol_version: MetaValue::Text("2026-07-28".into()),
                client_capabilities: MetaValue::Object,
                traceparent: MetaValue::Text("t".into()),
                tracestate: MetaValue::Text("s".into()),
            }
        );
        assert!(matches!(params.meta.protocol_version, MetaValue::Text(Cow::Borrowed(_))), "borrowed from the body");
        assert_eq!(params.object, Some(serde_json::json!({"name": "x"})), "_meta is not among the params");
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"build":1e400}}}}"#), -32700);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"x":"\u0000\q"}}}"#), -32700);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"x":"\ud800"}}}"#), -32700);
    }

    // The fast path vouches only for what a `Value` surely holds: short integers, escapes
    // other than surrogates, shallow nesting. Everything else is left to the general
    // path, never accepted by the scan alone.
    #[test]
    fn the_meta_scan_vouches_only_for_what_a_value_holds() {
        for plain in [r#"{}"#, r#""a\"b\\c\u00e9\n""#, r#"[1,-22,123456789012345678,true,null,{"k":[]}]"#, r#"{"a":{"b":"}]"}}"#] {
            assert!(plainly_valid(plain), "{plain}");
        }
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        for unjudged in ["1.5", "1e3", "1234567890123456789", "-1234567890123456789", r#""\ud83d\ude00""#, r#""\uDFFF""#, r#"{"a":[0.1]}"#, &deep] {
            assert!(!plainly_valid(unjudged), "{unjudged}");
        }
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
