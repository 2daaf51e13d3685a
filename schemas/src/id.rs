//! Identifiers as the contract bounds them: UTF-8 text of 1 to [`MAX_ID_BYTES`] bytes.
//! An [`Id`] is checked once, where it is made (decoding an event, parsing a request's
//! path or filter), so whatever holds one holds a usable key part.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest identifier an event may carry, in bytes. Identifiers become parts of the
/// read model's keys (a key holds up to four of them, and both stores bound key sizes),
/// so a longer one is refused with the event, named, instead of failing its write.
pub const MAX_ID_BYTES: usize = 256;

/// Why a text is not an identifier. The wording completes a sentence naming the
/// field: `meeting_id is empty`, `meeting_id is 300 bytes, longer than 256`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// An empty identifier names nothing: no request could ask for it (a path segment
    /// or filter is at least one byte).
    #[error("is empty")]
    Empty,
    #[error("is {0} bytes, longer than {MAX_ID_BYTES}")]
    TooLong(usize),
}

/// An identifier: UTF-8 text of 1 to [`MAX_ID_BYTES`] bytes (multi-byte characters
/// count by their bytes). Reads as the `str` it holds; serialises as a plain string.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(String);

impl Id {
    /// Checks the bound; the text is copied only when it is an identifier.
    pub fn parse(text: &str) -> Result<Id, IdError> {
        check(text)?;
        Ok(Id(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

fn check(text: &str) -> Result<(), IdError> {
    match text.len() {
        0 => Err(IdError::Empty),
        length if length > MAX_ID_BYTES => Err(IdError::TooLong(length)),
        _ => Ok(()),
    }
}

impl TryFrom<String> for Id {
    type Error = IdError;

    fn try_from(text: String) -> Result<Id, IdError> {
        check(&text)?;
        Ok(Id(text))
    }
}

impl TryFrom<&str> for Id {
    type Error = IdError;

    fn try_from(text: &str) -> Result<Id, IdError> {
        Id::parse(text)
    }
}

impl TryFrom<Cow<'_, str>> for Id {
    type Error = IdError;

    fn try_from(text: Cow<'_, str>) -> Result<Id, IdError> {
        check(&text)?;
        Ok(Id(text.into_owned()))
    }
}

impl FromStr for Id {
    type Err = IdError;

    fn from_str(text: &str) -> Result<Id, IdError> {
        Id::parse(text)
    }
}

impl From<Id> for String {
    fn from(id: Id) -> String {
        id.0
    }
}

impl From<&Id> for String {
    fn from(id: &Id) -> String {
        id.0.clone()
    }
}

impl Deref for Id {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Id {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<Id> for String {
    fn eq(&self, other: &Id) -> bool {
        *self == other.0
    }
}

impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<Id> for &str {
    fn eq(&self, other: &Id) -> bool {
        *self == other.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

// The text alone, as a `String` shows it: identifiers are read in assertions and logs.
impl fmt::Debug for Id {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, formatter)
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Id::try_from(String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Id {
    fn schema_name() -> Cow<'static, str> {
        "Id".into()
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "description": format!("identifier: 1 to {MAX_ID_BYTES} bytes of UTF-8 (bytes, not characters: a multi-byte character counts as several)")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_1_to_256_bytes() {
        assert_eq!(Id::parse(""), Err(IdError::Empty));
        assert_eq!(Id::parse(&"x".repeat(256)).map(|id| id.len()), Ok(256));
        assert_eq!(Id::parse(&"é".repeat(128)).map(|id| id.len()), Ok(256));
        assert_eq!(Id::parse(&"é".repeat(129)), Err(IdError::TooLong(258)));
        assert_eq!(IdError::TooLong(257).to_string(), "is 257 bytes, longer than 256");
    }

    #[test]
    fn serde_reads_and_writes_a_plain_string_and_validates() {
        let id: Id = serde_json::from_str("\"mtg_1\"").expect("an identifier");
        assert_eq!(id, "mtg_1");
        assert_eq!(serde_json::to_string(&id).expect("serialises"), "\"mtg_1\"");
        assert!(serde_json::from_str::<Id>("\"\"").is_err());
        assert!(serde_json::from_str::<Id>("7").is_err());
    }
}
