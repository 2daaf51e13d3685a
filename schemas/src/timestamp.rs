//! Instants as the contract writes them: ISO 8601 / RFC 3339 with a zone, fractional
//! seconds optional. Stored as microseconds since the Unix epoch (the precision every
//! read-model column keeps, in the embedded store and in CQL `bigint` columns alike) and
//! always rendered in UTC with the `Z` suffix, so clients see one form whatever the
//! producer sent.

use std::fmt;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An instant with microsecond precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn from_micros(micros: i64) -> Self {
        Timestamp(micros)
    }

    pub fn micros(self) -> i64 {
        self.0
    }

    /// Parses an RFC 3339 instant. A date alone, or a time without a zone, is refused:
    /// an instant without a zone is ambiguous.
    pub fn parse(text: &str) -> Result<Self, String> {
        let parsed = DateTime::parse_from_rfc3339(text.trim_end()).map_err(|error| format!("not an ISO 8601 instant with a time zone ({error})"))?;
        if text.len() < 20 || text.as_bytes().get(10) != Some(&b'T') && text.as_bytes().get(10) != Some(&b't') {
            return Err("not an ISO 8601 instant with a time zone (expected YYYY-MM-DDTHH:MM:SS and a zone)".into());
        }
        Ok(Timestamp(parsed.with_timezone(&Utc).timestamp_micros()))
    }

    pub fn now() -> Self {
        Timestamp(Utc::now().timestamp_micros())
    }

    pub fn to_datetime(self) -> DateTime<Utc> {
        Utc.timestamp_micros(self.0).single().unwrap_or_default()
    }

    /// `2026-11-20T09:00:00Z`, with fractional digits only when the instant has them.
    pub fn to_rfc3339(self) -> String {
        self.to_datetime().to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Timestamp".into()
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "ISO 8601 instant with a time zone (Z or +00:00), fractional seconds optional",
            "pattern": "^\\d{4}-\\d{2}-\\d{2}[Tt]\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?([Zz]|[+-]\\d{2}:\\d{2})$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_both_utc_forms_and_fractions() {
        let z = Timestamp::parse("2026-11-20T09:00:00Z").expect("a valid RFC 3339 timestamp");
        let offset = Timestamp::parse("2026-11-20T09:00:00+00:00").expect("a valid RFC 3339 timestamp");
        assert_eq!(z, offset);
        let fraction = Timestamp::parse("2026-11-20T09:00:00.123456+00:00").expect("a valid RFC 3339 timestamp");
        assert_eq!(fraction.micros() - z.micros(), 123_456);
        assert_eq!(fraction.to_rfc3339(), "2026-11-20T09:00:00.123456Z");
        assert_eq!(z.to_rfc3339(), "2026-11-20T09:00:00Z");
        let millis = Timestamp::parse("2026-11-20T09:00:00.5Z").expect("a valid RFC 3339 timestamp");
        assert_eq!(millis.to_rfc3339(), "2026-11-20T09:00:00.500Z");
    }

    #[test]
    fn refuses_instants_without_time_or_zone() {
        for bad in ["2026-11-20", "2026-11-20T09:00:00", "yesterday", "", "2026-13-01T00:00:00Z"] {
            assert!(Timestamp::parse(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn other_offsets_are_normalised_to_utc() {
        let berlin = Timestamp::parse("2026-11-20T10:00:00+01:00").expect("a valid RFC 3339 timestamp");
        assert_eq!(berlin.to_rfc3339(), "2026-11-20T09:00:00Z");
    }
}
