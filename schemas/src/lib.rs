//! The contracts of recap, in code: the events of `docs/events.md` as Rust types
//! with strict validation (identifiers are [`Id`]s, bounded once where they are made),
//! typed builders of those events ([`build`]) for the code that writes them, their JSON
//! Schema documents (`schemas/events/*.json`, generated from those types and checked
//! against them by the tests), and the paths of the other contract files kept here: the
//! CQL DDL of the read model (`schemas/cql/`) and the OpenAPI document of REST v1
//! (`schemas/openapi.json`).

pub mod build;
pub mod events;
pub mod id;
pub mod message_kind;
pub mod timestamp;

pub use events::*;
pub use id::{Id, IdError, MAX_ID_BYTES};
pub use message_kind::MessageKind;
pub use timestamp::Timestamp;

/// The JSON Schema of one envelope type, generated from the Rust types.
pub fn envelope_schema(event_type: &str) -> Option<serde_json::Value> {
    use schemars::schema_for;
    let data = match event_type {
        "account.upserted" => schema_for!(AccountUpserted),
        "token.created" => schema_for!(TokenCreated),
        "token.revoked" => schema_for!(TokenRevoked),
        "meeting.upserted" => schema_for!(MeetingUpserted),
        "meeting.transcript_set" => schema_for!(MeetingTranscriptSet),
        "meeting.deleted" => schema_for!(MeetingDeleted),
        "action_item.upserted" => schema_for!(ActionItemUpserted),
        "action_item.deleted" => schema_for!(ActionItemDeleted),
        "team.upserted" => schema_for!(TeamUpserted),
        "team.deleted" => schema_for!(TeamDeleted),
        "team_member.upserted" => schema_for!(TeamMemberUpserted),
        "team_member.removed" => schema_for!(TeamMemberRemoved),
        "note.shared" => schema_for!(NoteShared),
        "note.unshared" => schema_for!(NoteUnshared),
        "team_action_item.upserted" => schema_for!(TeamActionItemUpserted),
        "team_action_item.deleted" => schema_for!(TeamActionItemDeleted),
        "webhook_endpoint.upserted" => schema_for!(WebhookEndpointUpserted),
        "webhook_endpoint.deleted" => schema_for!(WebhookEndpointDeleted),
        _ => return None,
    };
    let mut data = serde_json::to_value(data).ok()?;
    let definitions = data.as_object_mut()?.remove("$defs");
    if let Some(object) = data.as_object_mut() {
        object.remove("$schema");
    }
    let mut envelope = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://recap.invalid/schemas/events/{event_type}.json"),
        "title": event_type,
        "description": format!("Envelope of a {event_type} event (docs/events.md). Unknown fields are allowed at every level."),
        "type": "object",
        "required": ["id", "type", "version", "occurred_at", "data"],
        "properties": {
            "id": {"type": "string", "minLength": 1, "description": "unique event id (a UUID by convention): 1 to 256 bytes of UTF-8 (bytes, not characters)"},
            "type": {"const": event_type},
            "version": {"type": "integer", "minimum": 1, "maximum": events::MAX_VERSION},
            "occurred_at": {"$ref": "#/$defs/Timestamp"},
            "data": data,
        },
    });
    let mut all_definitions = serde_json::Map::new();
    if let Some(serde_json::Value::Object(found)) = definitions {
        all_definitions.extend(found);
    }
    all_definitions.insert("Timestamp".into(), serde_json::to_value(schemars::schema_for!(Timestamp)).ok()?);
    if let Some(timestamp) = all_definitions.get_mut("Timestamp").and_then(|v| v.as_object_mut()) {
        timestamp.remove("$schema");
        timestamp.remove("title");
    }
    envelope["$defs"] = serde_json::Value::Object(all_definitions);
    Some(envelope)
}
