//! The kinds of tool argument. Each is both a serde type (how a value is read: defaults,
//! clamping, which values are refused) and a schemars type (how `inputSchema` shows it),
//! so the two cannot disagree; a tool's argument type is a struct of them deriving both
//! (see `inputs.rs`), read from a call by `argument_reader.rs`. A refused value is told
//! apart by serde's error kind: `invalid_value` for a missing argument, `invalid_type`
//! for an invalid one; the reader names the argument.
//!
//! - A required string ([`RequiredString`]): a missing, null or blank value is a missing
//!   argument; a value of another type (`{"meeting_id": 12345}`) is an invalid argument
//!   (`meeting_id must be a string`).
//! - An optional string ([`OptionalString`]): null or empty is absent; another type is an
//!   invalid argument.
//! - An integer ([`Clamped`]): any JSON number (a fraction is truncated) or a string
//!   holding one's JSON text, clamped into range, never rejected; any other type
//!   (boolean, object, a string that is not a JSON number) is an invalid argument.

use std::borrow::Cow;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;

/// A required string argument, never blank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredString<'a>(Cow<'a, str>);

impl RequiredString<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An optional string argument; null and the empty string count as absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionalString<'a>(Option<Cow<'a, str>>);

impl OptionalString<'_> {
    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// An integer argument: `DEFAULT` when absent or null, otherwise clamped into
/// `MIN..=MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clamped<const DEFAULT: usize, const MIN: usize, const MAX: usize>(usize);

impl<const DEFAULT: usize, const MIN: usize, const MAX: usize> Clamped<DEFAULT, MIN, MAX> {
    pub fn get(self) -> usize {
        self.0
    }

    fn clamp(number: f64) -> usize {
        // `as` saturates: ±inf and huge values land on the bounds.
        let truncated = number.trunc();
        if truncated < MIN as f64 {
            MIN
        } else if truncated > MAX as f64 {
            MAX
        } else {
            truncated as usize
        }
    }
}

impl<const DEFAULT: usize, const MIN: usize, const MAX: usize> Default for Clamped<DEFAULT, MIN, MAX> {
    fn default() -> Self {
        Clamped(DEFAULT)
    }
}

// ---- Schemas ----------------------------------------------------------------------
// Inlined: each is one property of a tool's inputSchema, with the field's doc comment as
// its description.

impl JsonSchema for RequiredString<'_> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "RequiredString".into()
    }
    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string"})
    }
}

impl JsonSchema for OptionalString<'_> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "OptionalString".into()
    }
    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string"})
    }
}

/// No `minimum` or `maximum`: out-of-range values are clamped, not rejected, so every
/// integer is a valid argument, and a client that checks arguments against the schema
/// must not refuse one the server accepts. The range is in the description.
impl<const DEFAULT: usize, const MIN: usize, const MAX: usize> JsonSchema for Clamped<DEFAULT, MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Clamped_{DEFAULT}_{MIN}_{MAX}").into()
    }
    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "integer", "default": DEFAULT})
    }
}

// ---- Reading values -----------------------------------------------------------------

impl<'de: 'a, 'a> Deserialize<'de> for RequiredString<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// A string, blank or not (None: blank, null or absent); any other type is an
        /// `invalid_type` of "a string".
        struct NonBlank;
        impl<'de> Visitor<'de> for NonBlank {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok((!text.trim().is_empty()).then_some(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok((!text.trim().is_empty()).then(|| Cow::Owned(text.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
        }
        // Absent, null or blank: a missing argument. A number, boolean, array or object:
        // the caller gave one, of the wrong type, and is told so.
        match deserializer.deserialize_any(NonBlank)? {
            Some(text) => Ok(RequiredString(text)),
            None => Err(de::Error::invalid_value(Unexpected::Other("no usable value"), &"a non-empty string")),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for OptionalString<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok((!text.is_empty()).then_some(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok((!text.is_empty()).then(|| Cow::Owned(text.to_string())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
        }
        deserializer.deserialize_any(Text).map(OptionalString)
    }
}

impl<'de, const DEFAULT: usize, const MIN: usize, const MAX: usize> Deserialize<'de> for Clamped<DEFAULT, MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Number;
        impl Visitor<'_> for Number {
            /// None: absent or null.
            type Value = Option<f64>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("an integer")
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Self::Value, E> {
                Ok(Some(number as f64))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Self::Value, E> {
                Ok(Some(number as f64))
            }
            fn visit_f64<E: de::Error>(self, number: f64) -> Result<Self::Value, E> {
                Ok(Some(number))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                // A JSON number's text only: not `inf`, `NaN`, `+5` or `0x10`, which Rust
                // would read. One past f64's range is still a number, clamped.
                match text.trim() {
                    number if is_json_number(number) => Ok(number.parse::<f64>().ok()),
                    _ => Err(E::invalid_type(Unexpected::Str(text), &self)),
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
        }
        Ok(deserializer.deserialize_any(Number)?.map_or(Clamped(DEFAULT), |number| Clamped(Self::clamp(number))))
    }
}

/// Whether `text` is a number as JSON writes one (RFC 8259, 6):
/// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn is_json_number(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = usize::from(bytes.first() == Some(&b'-'));
    let digits = |at: &mut usize| {
        let start = *at;
        while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        *at - start
    };
    let whole = digits(&mut at);
    if whole == 0 || (whole > 1 && bytes[at - whole] == b'0') {
        return false;
    }
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        if digits(&mut at) == 0 {
            return false;
        }
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(bytes.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        if digits(&mut at) == 0 {
            return false;
        }
    }
    at == bytes.len()
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::tools::argument_reader::{parse, Args};
    use crate::tools::ToolError;

    fn args(value: Value) -> Args {
        value.as_object().cloned().unwrap_or_default()
    }

    #[derive(Deserialize, Debug)]
    struct Paged<'a> {
        #[serde(borrow)]
        id: RequiredString<'a>,
        #[serde(default, borrow)]
        query: OptionalString<'a>,
        #[serde(default)]
        limit: Clamped<20, 1, 200>,
    }

    fn limit(value: Value) -> Result<usize, ToolError> {
        let args = args(json!({"id": "m", "limit": value}));
        parse::<Paged>(&args).map(|paged| paged.limit.get())
    }

    fn message(arguments: Value) -> String {
        match parse::<Paged>(&args(arguments)) {
            Err(ToolError::InvalidArgument(message)) => message,
            other => panic!("refused: {other:?}"),
        }
    }

    #[test]
    fn limits_clamp_and_never_reject_numbers() {
        assert_eq!(limit(Value::Null), Ok(20));
        assert_eq!(limit(json!(0)), Ok(1));
        assert_eq!(limit(json!(-5)), Ok(1));
        assert_eq!(limit(json!(1e300)), Ok(200));
        assert_eq!(limit(json!(7.9)), Ok(7));
        assert_eq!(limit(json!("30")), Ok(30));
        assert_eq!(limit(json!(" 30.5 ")), Ok(30));
        assert_eq!(limit(json!(u64::MAX)), Ok(200));
        assert_eq!(limit(json!(i64::MIN)), Ok(1));
        assert_eq!(limit(json!("1e400")), Ok(200));
        assert_eq!(limit(json!("-0.5e1")), Ok(1));
        for refused in [
            json!("many"),
            json!("NaN"),
            json!("inf"),
            json!("Infinity"),
            json!("+5"),
            json!("0x10"),
            json!("05"),
            json!("5."),
            json!(".5"),
            json!("1e"),
            json!(""),
            json!("-"),
            json!(true),
            json!([1]),
            json!({"n": 1}),
        ] {
            assert_eq!(limit(refused.clone()), Err(ToolError::InvalidArgument("limit must be an integer".into())), "{refused}");
        }
    }

    #[test]
    fn required_strings_must_be_present_and_non_blank() {
        let missing = "missing required argument: id (a non-empty string)";
        for arguments in [json!({}), json!({"id": null}), json!({"id": "  "})] {
            assert_eq!(message(arguments.clone()), missing, "{arguments}");
        }
        let present = args(json!({"id": "m"}));
        assert_eq!(parse::<Paged>(&present).expect("a present id").id.as_str(), "m");
    }

    // A value of another type is not a missing argument: the caller sent one, and is told
    // its type is wrong.
    #[test]
    fn required_strings_of_another_type_are_wrong_types() {
        for arguments in [json!({"id": 12345}), json!({"id": 1.5}), json!({"id": true}), json!({"id": ["m"]}), json!({"id": {}})] {
            assert_eq!(message(arguments.clone()), "id must be a string", "{arguments}");
        }
    }

    #[test]
    fn optional_strings_are_absent_when_null_or_empty_and_refused_when_not_strings() {
        let query = |value: Value| parse::<Paged>(&args(json!({"id": "m", "query": value}))).map(|paged| paged.query.as_deref().map(str::to_string));
        assert_eq!(query(Value::Null), Ok(None));
        assert_eq!(query(json!("")), Ok(None));
        assert_eq!(query(json!(" a ")), Ok(Some(" a ".into())));
        assert_eq!(query(json!(3)), Err(ToolError::InvalidArgument("query must be a string".into())));
    }
}
