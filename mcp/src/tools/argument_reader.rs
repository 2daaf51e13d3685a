//! How a call's arguments are read into a tool's argument type: a serde deserializer over
//! the call's `arguments` object that gives the type's fields in the order it declares
//! them, an absent one as null, and names the argument in the error of a refused value.
//! So a call with several bad arguments is refused for the first one declared, a missing
//! required argument is reported before a bad one after it, and the message is the one
//! the argument's kind gives (`arguments.rs`). Unknown arguments are ignored, so newer
//! clients can send more.

use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, Expected, IntoDeserializer, MapAccess, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::ToolError;

/// The `arguments` object of a tools/call.
pub type Args = Map<String, Value>;

/// Reads a call's arguments into a tool's argument type.
pub fn parse<'a, T: Deserialize<'a>>(args: &'a Args) -> Result<T, ToolError> {
    T::deserialize(CallArguments(args)).map_err(|error| ToolError::InvalidArgument(error.to_string()))
}

/// Why an argument was refused, and which (named once it is known: the value is read
/// without its name).
#[derive(Debug)]
pub struct ArgumentError {
    argument: &'static str,
    problem: Problem,
}

#[derive(Debug)]
enum Problem {
    /// No value the argument can take: absent, null, blank or not a string where a
    /// non-empty string is required (serde's `invalid_value`). The spec calls each a
    /// missing argument.
    Missing { expected: String },
    /// A value of a type the argument does not take (serde's `invalid_type`).
    WrongType { expected: String },
    /// Anything else serde reports (no argument kind here does).
    Other(String),
}

impl ArgumentError {
    fn of_argument(self, argument: &'static str) -> ArgumentError {
        ArgumentError { argument, ..self }
    }
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        let argument = self.argument;
        match &self.problem {
            Problem::Missing { expected } => write!(formatter, "missing required argument: {argument} ({expected})"),
            Problem::WrongType { expected } => write!(formatter, "{argument} must be {expected}"),
            Problem::Other(message) => write!(formatter, "{argument}: {message}"),
        }
    }
}

impl std::error::Error for ArgumentError {}

impl de::Error for ArgumentError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        ArgumentError { argument: "", problem: Problem::Other(message.to_string()) }
    }
    fn invalid_type(_unexpected: Unexpected, expected: &dyn Expected) -> Self {
        ArgumentError { argument: "", problem: Problem::WrongType { expected: expected.to_string() } }
    }
    fn invalid_value(_unexpected: Unexpected, expected: &dyn Expected) -> Self {
        ArgumentError { argument: "", problem: Problem::Missing { expected: expected.to_string() } }
    }
    fn missing_field(field: &'static str) -> Self {
        ArgumentError { argument: field, problem: Problem::Missing { expected: "a value".into() } }
    }
}

/// A call's arguments, read as a struct: each declared field in declaration order, an
/// absent one as null.
struct CallArguments<'a>(&'a Args);

static NULL: Value = Value::Null;

impl<'de> Deserializer<'de> for CallArguments<'de> {
    type Error = ArgumentError;

    fn deserialize_struct<V: Visitor<'de>>(self, _name: &'static str, fields: &'static [&'static str], visitor: V) -> Result<V::Value, ArgumentError> {
        visitor.visit_map(DeclaredArguments { args: self.0, fields: fields.iter(), current: "" })
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, ArgumentError> {
        Err(de::Error::custom("arguments are read into a struct"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

struct DeclaredArguments<'a> {
    args: &'a Args,
    fields: std::slice::Iter<'static, &'static str>,
    current: &'static str,
}

impl<'de> MapAccess<'de> for DeclaredArguments<'de> {
    type Error = ArgumentError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ArgumentError> {
        let Some(field) = self.fields.next() else { return Ok(None) };
        self.current = field;
        seed.deserialize(IntoDeserializer::<ArgumentError>::into_deserializer(*field)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, ArgumentError> {
        let value = self.args.get(self.current).unwrap_or(&NULL);
        seed.deserialize(ArgumentValue(value)).map_err(|error| error.of_argument(self.current))
    }
}

/// One argument's value, self-describing, with [`ArgumentError`]s.
struct ArgumentValue<'a>(&'a Value);

impl<'de> Deserializer<'de> for ArgumentValue<'de> {
    type Error = ArgumentError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgumentError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(value) => visitor.visit_bool(*value),
            Value::Number(number) => match (number.as_u64(), number.as_i64(), number.as_f64()) {
                (Some(value), _, _) => visitor.visit_u64(value),
                (None, Some(value), _) => visitor.visit_i64(value),
                (None, None, Some(value)) => visitor.visit_f64(value),
                (None, None, None) => Err(de::Error::invalid_type(Unexpected::Other("number"), &visitor)),
            },
            Value::String(text) => visitor.visit_borrowed_str(text),
            Value::Array(items) => visitor.visit_seq(SeqDeserializer::new(items.iter().map(ArgumentValue))),
            Value::Object(entries) => visitor.visit_map(MapDeserializer::new(entries.iter().map(|(key, value)| (key.as_str(), ArgumentValue(value))))),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, ArgumentError> for ArgumentValue<'de> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::arguments::{Clamped, OptionalString, RequiredString};

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

    fn message(arguments: Value) -> String {
        match parse::<Paged>(&args(arguments)) {
            Err(ToolError::InvalidArgument(message)) => message,
            other => panic!("refused: {other:?}"),
        }
    }

    // The first argument in declaration order is the one reported, absent ones included;
    // unknown arguments are ignored.
    #[test]
    fn arguments_are_checked_in_declaration_order() {
        assert_eq!(message(json!({"limit": true, "query": 1})), "missing required argument: id (a non-empty string)");
        assert_eq!(message(json!({"id": "m", "limit": true, "query": 1})), "query must be a string");
        assert_eq!(message(json!({"id": "m", "limit": {}, "zzz": 1})), "limit must be an integer");
        let unknown = args(json!({"id": "m", "unknown": [1, 2]}));
        let parsed = parse::<Paged>(&unknown).expect("unknown arguments are ignored");
        assert_eq!((parsed.id.as_str(), parsed.query.as_deref(), parsed.limit.get()), ("m", None, 20));
    }
}
