//! The event contract (docs/events.md) against the types: every example parses,
//! each required field when removed makes the event invalid (and each optional one
//! does not), wrong types and bad timestamps are invalid, unknown fields are accepted
//! at every level, and the JSON Schema files under `schemas/events/` are the ones the
//! types generate (`RECAP_WRITE_SCHEMAS=1` rewrites them: `make schemas`).

use recap_schemas::{envelope_schema, DecodeError, Envelope, KNOWN_TYPES};
use serde_json::{json, Value};

const FIXTURES: &str = include_str!("fixtures/contract-examples.jsonl");

fn examples() -> Vec<Value> {
    FIXTURES.lines().map(|line| serde_json::from_str(line).expect("fixture is JSON")).collect()
}

fn decode(value: &Value) -> Result<Envelope, DecodeError> {
    Envelope::decode(value.to_string().as_bytes())
}

#[test]
fn every_example_of_the_contract_parses() {
    let examples = examples();
    let types: Vec<&str> = examples.iter().map(|example| example["type"].as_str().unwrap()).collect();
    assert_eq!(types, KNOWN_TYPES, "one example per known type, in contract order");
    for example in &examples {
        let envelope = decode(example).unwrap_or_else(|error| panic!("{error}: {example}"));
        assert_eq!(envelope.event.type_name(), example["type"]);
    }
}

// Producers and tests write events with `Envelope::to_line`: what it writes is the
// contract's envelope, and reads back as the same event.
#[test]
fn every_example_round_trips_through_its_json_line() {
    for example in examples() {
        let envelope = decode(&example).unwrap();
        let line = envelope.to_line();
        let written: Value = serde_json::from_str(&line).unwrap();
        let keys: Vec<&str> = written.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["data", "id", "occurred_at", "type", "version"], "{line}");
        assert_eq!(written["type"], example["type"]);
        assert_eq!(Envelope::decode(line.as_bytes()), Ok(envelope), "{line}");
    }
}

/// Resolves `$ref` and the `anyOf [X, null]` schemars writes for Option<X>.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.trim_start_matches("#/$defs/");
        return resolve(&root["$defs"][name], root);
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        if let Some(non_null) = options.iter().find(|option| option.get("type") != Some(&json!("null"))) {
            return resolve(non_null, root);
        }
    }
    schema
}

/// Every (path, required) of object fields present in `data`, following the schema.
fn fields(data: &Value, schema: &Value, root: &Value, path: &mut Vec<Value>, out: &mut Vec<(Vec<Value>, bool)>) {
    let schema = resolve(schema, root);
    match data {
        Value::Object(object) => {
            let required: Vec<&str> =
                schema.get("required").and_then(Value::as_array).map(|list| list.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            for (key, value) in object {
                path.push(json!(key));
                out.push((path.clone(), required.contains(&key.as_str())));
                if let Some(property) = schema.get("properties").and_then(|properties| properties.get(key)) {
                    fields(value, property, root, path, out);
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            if let (Some(first), Some(item_schema)) = (items.first(), schema.get("items")) {
                path.push(json!(0));
                fields(first, item_schema, root, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(value: &'a mut Value, path: &[Value]) -> &'a mut Value {
    path.iter().fold(value, |value, step| match step {
        Value::String(key) => &mut value[key.as_str()],
        Value::Number(index) => &mut value[index.as_u64().unwrap() as usize],
        _ => unreachable!(),
    })
}

#[test]
fn each_required_field_when_removed_makes_the_event_invalid() {
    let mut checked = 0;
    let mut nullable = Vec::new();
    for example in examples() {
        let event_type = example["type"].as_str().unwrap();
        let schema = envelope_schema(event_type).unwrap();
        let mut found = Vec::new();
        fields(&example, &schema, &schema, &mut Vec::new(), &mut found);
        for (path, required) in found {
            let mut broken = example.clone();
            let (last, parent) = path.split_last().unwrap();
            at_path(&mut broken, parent).as_object_mut().unwrap().remove(last.as_str().unwrap());
            let result = decode(&broken);
            if required {
                assert!(matches!(result, Err(DecodeError::Invalid(_))), "{event_type}: removing required {path:?} must invalidate, got {result:?}");
                checked += 1;
            } else {
                assert!(result.is_ok(), "{event_type}: {path:?} is nullable, so absent reads as null: {result:?}");
                let dotted: Vec<String> = path.iter().map(|step| step.as_str().map_or_else(|| step.to_string(), str::to_string)).collect();
                nullable.push(format!("{event_type} {}", dotted.join(".")));
            }
        }
    }
    assert!(checked > 100, "only {checked} required fields checked");
    // Which fields may be null or absent is the contract's word, not the schema's (the
    // schema is generated from the types under test): its examples and notes show these
    // null ("plan is null when the account has no active plan", "api_quota: null means
    // the tier's default", "words may be null or empty", "team null: shared directly",
    // template_id, role, due_at, completed_at, assignee_human_id and series_id null).
    let expected = [
        "account.upserted data.plan",
        "account.upserted data.plan.api_quota",
        "meeting.upserted data.meeting.action_items.0.assignee_human_id",
        "meeting.upserted data.meeting.action_items.0.completed_at",
        "meeting.upserted data.meeting.action_items.0.due_at",
        "meeting.upserted data.meeting.note.template_id",
        "meeting.upserted data.meeting.participants.0.role",
        "meeting.upserted data.meeting.series_id",
        "meeting.upserted data.meeting.summaries.0.template_id",
        "meeting.transcript_set data.transcript.words",
        "action_item.upserted data.item.assignee_human_id",
        "action_item.upserted data.item.completed_at",
        "action_item.upserted data.item.due_at",
        "team.upserted data.team.plan",
        "note.shared data.share.team",
        "team_action_item.upserted data.item.due_at",
        "webhook_endpoint.upserted data.endpoint.description",
    ];
    assert_eq!(nullable, expected, "the fields that may be absent are exactly the contract's nullable ones");
}

#[test]
fn wrong_types_and_bad_timestamps_make_the_event_invalid() {
    let meeting = examples().into_iter().find(|example| example["type"] == "meeting.upserted").unwrap();
    type Break = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Break)> = vec![
        ("title as a number", Box::new(|event: &mut Value| event["data"]["meeting"]["title"] = json!(42))),
        ("created_at without a zone", Box::new(|event: &mut Value| event["data"]["meeting"]["created_at"] = json!("2026-11-20T09:00:00"))),
        ("created_at as a date", Box::new(|event: &mut Value| event["data"]["meeting"]["created_at"] = json!("2026-11-20"))),
        ("occurred_at garbage", Box::new(|event: &mut Value| event["occurred_at"] = json!("yesterday"))),
        ("status outside the enum", Box::new(|event: &mut Value| event["data"]["meeting"]["action_items"][0]["status"] = json!("blocked"))),
        ("summaries as a string", Box::new(|event: &mut Value| event["data"]["meeting"]["summaries"] = json!("none"))),
        ("version zero", Box::new(|event: &mut Value| event["version"] = json!(0))),
        ("version beyond 53 bits", Box::new(|event: &mut Value| event["version"] = json!(1u64 << 53))),
        ("data not an object", Box::new(|event: &mut Value| event["data"] = json!([1]))),
    ];
    for (name, breaks) in cases {
        let mut broken = meeting.clone();
        breaks(&mut broken);
        assert!(matches!(decode(&broken), Err(DecodeError::Invalid(_))), "{name} must be invalid");
    }
    let transcript = examples().into_iter().find(|example| example["type"] == "meeting.transcript_set").unwrap();
    assert!(decode(&transcript).is_ok(), "the transcript example itself is valid");
    let transcript_cases: Vec<(&str, Break)> = vec![
        ("a segment's start_ms as a string", Box::new(|event: &mut Value| event["data"]["transcript"]["segments"][0]["start_ms"] = json!("0"))),
        ("a word's start_ms fractional", Box::new(|event: &mut Value| event["data"]["transcript"]["words"][0]["start_ms"] = json!(0.5))),
    ];
    for (name, breaks) in transcript_cases {
        let mut broken = transcript.clone();
        breaks(&mut broken);
        assert!(matches!(decode(&broken), Err(DecodeError::Invalid(_))), "{name} must be invalid");
    }
    assert!(matches!(Envelope::decode(b"not json"), Err(DecodeError::Invalid(_))));
}

fn add_unknown_fields(value: &mut Value) {
    match value {
        Value::Object(object) => {
            for child in object.values_mut() {
                add_unknown_fields(child);
            }
            object.insert("x_added_later".into(), json!({"nested": [1, "two"]}));
        }
        Value::Array(items) => items.iter_mut().for_each(add_unknown_fields),
        _ => {}
    }
}

#[test]
fn unknown_fields_are_accepted_at_every_level() {
    for example in examples() {
        let mut extended = example.clone();
        add_unknown_fields(&mut extended);
        assert_eq!(decode(&extended).unwrap(), decode(&example).unwrap(), "{}", example["type"]);
    }
}

#[test]
fn unknown_types_are_reported_as_unknown_not_invalid() {
    let event = json!({"id": "x", "type": "meeting.archived", "version": 1, "occurred_at": "2026-11-20T09:00:00Z", "data": {"whatever": true}});
    assert_eq!(decode(&event), Err(DecodeError::UnknownType("meeting.archived".into())));
}

// "Unknown types are skipped and counted ... never an error": whatever the rest of a
// newer type's envelope holds.
#[test]
fn unknown_types_are_skipped_whatever_their_envelope_holds() {
    for event in [
        json!({"id": "x", "type": "meeting.archived", "version": 0, "occurred_at": "2026-11-20T09:00:00Z", "data": {}}),
        json!({"id": "x", "type": "meeting.archived", "version": 1, "occurred_at": "yesterday", "data": []}),
        json!({"type": "meeting.archived"}),
    ] {
        assert_eq!(decode(&event), Err(DecodeError::UnknownType("meeting.archived".into())), "{event}");
    }
    // A known type with the same faults is still invalid.
    let event = json!({"id": "x", "type": "meeting.deleted", "version": 0, "occurred_at": "2026-11-20T09:00:00Z", "data": {}});
    assert!(matches!(decode(&event), Err(DecodeError::Invalid(_))));
}

// Envelope: "data | object": an array is not one, though serde would read a struct from it.
#[test]
fn data_that_is_not_an_object_is_invalid() {
    for data in [json!(["team_01"]), json!("team_01"), json!(null), json!(7)] {
        let event = json!({"id": "x", "type": "team.deleted", "version": 1, "occurred_at": "2026-11-20T09:00:00Z", "data": data});
        assert!(matches!(decode(&event), Err(DecodeError::Invalid(reason)) if reason.contains("team.deleted")), "{data}");
    }
}

#[test]
fn json_schema_files_are_generated_from_the_types() {
    let directory = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("events");
    let write = std::env::var_os("RECAP_WRITE_SCHEMAS").is_some();
    for event_type in KNOWN_TYPES {
        let schema = envelope_schema(event_type).unwrap();
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        let path = directory.join(format!("{event_type}.json"));
        if write {
            std::fs::create_dir_all(&directory).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(committed, text, "{} is stale: run `make schemas`", path.display());
    }
}

/// The paths of every identifier in an event: string fields named `id` or `…_id`, and
/// the items of `…_ids` arrays, at any depth.
fn id_paths(value: &Value, path: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields {
                path.push(json!(name));
                let is_id = name == "id" || name.ends_with("_id");
                match field {
                    Value::String(_) if is_id => out.push(path.clone()),
                    Value::Array(items) if name.ends_with("_ids") => {
                        for index in 0..items.len() {
                            path.push(json!(index));
                            out.push(path.clone());
                            path.pop();
                        }
                    }
                    _ => id_paths(field, path, out),
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(json!(index));
                id_paths(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Every identifier of every example event: (event type, the example, the identifier's
/// path in it, the field it names). At least 30, so that the checks over them cannot
/// pass on an empty list.
fn identifiers() -> Vec<(String, Value, Vec<Value>, String)> {
    let mut cases = Vec::new();
    for example in examples() {
        let event_type = example["type"].as_str().unwrap().to_string();
        let mut paths = Vec::new();
        id_paths(&example, &mut Vec::new(), &mut paths);
        for path in paths {
            let field = path.iter().rev().find_map(Value::as_str).unwrap().to_string();
            cases.push((event_type.clone(), example.clone(), path, field));
        }
    }
    assert!(cases.len() >= 30, "only {} identifiers found", cases.len());
    cases
}

#[test]
fn an_empty_identifier_makes_the_event_invalid_naming_the_field() {
    for (event_type, example, path, field) in identifiers() {
        let mut empty = example.clone();
        *at_path(&mut empty, &path) = json!("");
        match decode(&empty) {
            Err(DecodeError::Invalid(reason)) => {
                assert!(reason.ends_with("is empty") && reason.contains(&field), "{event_type} {path:?}: the reason {reason:?} must name {field}")
            }
            other => panic!("{event_type}: an empty id at {path:?} must be invalid, got {other:?}"),
        }
    }
    for example in examples() {
        let mut no_event_id = example.clone();
        no_event_id["id"] = json!("");
        assert!(
            matches!(decode(&no_event_id), Err(DecodeError::Invalid(reason)) if reason == "envelope: id is empty"),
            "{}: an empty event id",
            example["type"]
        );
    }
}

#[test]
fn identifiers_longer_than_256_bytes_make_the_event_invalid_naming_the_field() {
    for (event_type, example, path, field) in identifiers() {
        // 256 bytes (multi-byte characters count by their bytes) is accepted...
        let mut longest = example.clone();
        *at_path(&mut longest, &path) = json!(format!("{}{}", "é".repeat(127), "xy"));
        assert!(decode(&longest).is_ok(), "{event_type}: a 256-byte id at {path:?} must be accepted");
        // ...257 is refused, and the reason names the field.
        let mut too_long = example.clone();
        *at_path(&mut too_long, &path) = json!("x".repeat(recap_schemas::MAX_ID_BYTES + 1));
        match decode(&too_long) {
            Err(DecodeError::Invalid(reason)) => {
                assert!(reason.contains("257 bytes, longer than 256"), "{event_type} {path:?}: {reason}");
                assert!(reason.contains(&field), "{event_type} {path:?}: the reason {reason:?} must name {field}");
            }
            other => panic!("{event_type}: a 257-byte id at {path:?} must be invalid, got {other:?}"),
        }
    }
}

fn endpoint_example() -> Value {
    examples().into_iter().find(|example| example["type"] == "webhook_endpoint.upserted").unwrap()
}

fn invalid_reason(event: &Value) -> String {
    match decode(event) {
        Err(DecodeError::Invalid(reason)) => reason,
        other => panic!("must be invalid: {event}, got {other:?}"),
    }
}

#[test]
fn webhook_endpoint_events_travel_on_the_accounts_topic_keyed_by_account() {
    for example in examples().into_iter().filter(|example| example["type"].as_str().unwrap().starts_with("webhook_endpoint.")) {
        let envelope = decode(&example).unwrap();
        assert_eq!(envelope.event.topic(), "recap.accounts.v1");
        assert_eq!(envelope.event.message_key(), "acc_01");
    }
}

#[test]
fn a_webhook_endpoint_accepts_http_and_https_urls_up_to_2048_bytes_and_empty_types() {
    let base = "https://crm.example.com/";
    for url in ["http://localhost:8080/hooks".to_string(), "https://[::1]/x?a=b".to_string(), format!("{base}{}", "a".repeat(2048 - base.len()))] {
        let mut event = endpoint_example();
        event["data"]["endpoint"]["url"] = json!(url);
        event["data"]["endpoint"]["types"] = json!([]);
        let envelope = decode(&event).unwrap_or_else(|error| panic!("{url}: {error}"));
        let recap_schemas::Event::WebhookEndpointUpserted(upserted) = envelope.event else { panic!("an endpoint") };
        assert!(upserted.endpoint.types.is_empty());
    }
}

#[test]
fn a_webhook_endpoint_url_that_is_not_absolute_http_or_is_too_long_is_invalid() {
    for (url, reason) in [
        ("/hooks", "webhook_endpoint.upserted: data: endpoint.url is not an absolute http or https URL"),
        ("ftp://example.com/hooks", "webhook_endpoint.upserted: data: endpoint.url is not an absolute http or https URL"),
        ("mailto:ops@example.com", "webhook_endpoint.upserted: data: endpoint.url is not an absolute http or https URL"),
        ("https://", "webhook_endpoint.upserted: data: endpoint.url is not an absolute http or https URL"),
        ("", "webhook_endpoint.upserted: data: endpoint.url is not an absolute http or https URL"),
    ] {
        let mut event = endpoint_example();
        event["data"]["endpoint"]["url"] = json!(url);
        assert_eq!(invalid_reason(&event), reason, "{url}");
    }
    let mut event = endpoint_example();
    event["data"]["endpoint"]["url"] = json!(format!("https://crm.example.com/{}", "a".repeat(2048)));
    assert_eq!(invalid_reason(&event), "webhook_endpoint.upserted: data: endpoint.url is 2072 bytes, longer than 2048");
}

#[test]
fn a_webhook_secret_is_whsec_and_the_standard_base64_of_24_to_64_bytes() {
    use base64::Engine;
    let encode = |bytes: usize| format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(vec![0xfb; bytes]));
    for valid in [encode(24), encode(32), encode(64)] {
        let mut event = endpoint_example();
        event["data"]["endpoint"]["secret"] = json!(valid);
        assert!(decode(&event).is_ok(), "{valid}");
    }
    let url_safe = format!("whsec_{}", base64::engine::general_purpose::URL_SAFE.encode(vec![0xfb; 32]));
    let unpadded = format!("whsec_{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(vec![0xfb; 25]));
    let no_prefix = base64::engine::general_purpose::STANDARD.encode(vec![0xfb; 32]);
    for invalid in [encode(23), encode(65), url_safe, unpadded, no_prefix, "whsec_".into(), "whsec_not base64!".into()] {
        let mut event = endpoint_example();
        event["data"]["endpoint"]["secret"] = json!(invalid);
        assert_eq!(
            invalid_reason(&event),
            "webhook_endpoint.upserted: data: endpoint.secret is not whsec_ and the standard base64 of 24 to 64 bytes",
            "{invalid}"
        );
    }
}

/// Whether `event` is valid against the published JSON Schema of its type (the file
/// under `schemas/events/`), by a JSON Schema validator.
fn valid_against_the_published_schema(event: &Value) -> bool {
    let event_type = event["type"].as_str().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("events").join(format!("{event_type}.json"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let location = schema["$id"].as_str().unwrap().to_owned();
    let (mut compiler, mut schemas) = (boon::Compiler::new(), boon::Schemas::new());
    compiler.add_resource(&location, schema).unwrap();
    let index = compiler.compile(&location, &mut schemas).unwrap_or_else(|error| panic!("{}: {error:#}", path.display()));
    schemas.validate(event, index).is_ok()
}

fn endpoint_with(field: &str, value: &str) -> Value {
    let mut event = endpoint_example();
    event["data"]["endpoint"][field] = json!(value);
    event
}

#[test]
fn the_published_schema_of_an_endpoint_takes_a_secret_of_24_to_64_bytes_in_canonical_base64_only() {
    use base64::Engine;
    let base64 = |key: &[u8]| base64::engine::general_purpose::STANDARD.encode(key);
    for (secret, valid) in [
        (format!("whsec_{}", base64(&[0xfb; 24])), true),
        (format!("whsec_{}", base64(&[0xfb; 64])), true),
        (format!("whsec_{}", base64(&[0xfb; 65])), false),
        (format!("whsec_{}", base64(&[0xfb; 66])), false),
        (format!("whsec_{}", base64(&[0xfb; 23])), false),
        // 25 bytes end in "==", 26 in "=": any other padding is malformed.
        (format!("whsec_{}", base64(&[0xfb; 25]).replace("==", "=")), false),
        (format!("whsec_{}", base64(&[0xfb; 26]).replace('=', "==")), false),
        (format!("whsec_{}", base64(&[0xfb; 24])) + "==", false),
        // Bits past the key's last byte that are not zero.
        (format!("whsec_{}", base64(&[0xfb; 25]).replace("+w==", "+x==")), false),
    ] {
        let event = endpoint_with("secret", &secret);
        assert_eq!(valid_against_the_published_schema(&event), valid, "{secret}");
        assert_eq!(decode(&event).is_ok(), valid, "the decoder agrees on {secret}");
    }
    // Every key length, as the decoder takes it.
    for bytes in 0..=70 {
        let event = endpoint_with("secret", &format!("whsec_{}", base64(&vec![0xa5; bytes])));
        assert_eq!(valid_against_the_published_schema(&event), decode(&event).is_ok(), "a {bytes}-byte key");
    }
}

#[test]
fn the_published_schema_of_an_endpoint_takes_only_http_and_https_urls_with_a_host() {
    for (url, valid) in [
        ("https://crm.example.com/hooks", true),
        ("http://localhost:8080/hooks", true),
        ("ftp://example.com/hooks", false),
        ("mailto:ops@example.com", false),
        ("https://", false),
        ("/hooks", false),
        ("HTTPS://crm.example.com/hooks", true),
        ("https://a b/hooks", false),
        ("https:// crm.example.com/hooks", false),
    ] {
        let event = endpoint_with("url", url);
        assert_eq!(valid_against_the_published_schema(&event), valid, "{url}");
        assert_eq!(decode(&event).is_ok(), valid, "the decoder agrees on {url}");
    }
}

#[test]
fn an_unknown_message_kind_in_types_is_invalid_and_the_reason_names_its_index() {
    let mut event = endpoint_example();
    event["data"]["endpoint"]["types"] = json!(["meeting.created", "meeting.archived"]);
    let reason = invalid_reason(&event);
    assert!(reason.starts_with("webhook_endpoint.upserted: data: endpoint.types[1]: unknown variant `meeting.archived`"), "{reason}");
    for wrong in [json!("meeting.created"), json!(null), json!([1])] {
        let mut event = endpoint_example();
        event["data"]["endpoint"]["types"] = wrong.clone();
        invalid_reason(&event);
    }
}

#[test]
fn a_webhook_secret_never_shows_in_debug_output() {
    let envelope = decode(&endpoint_example()).unwrap();
    let debug = format!("{envelope:?}");
    assert!(!debug.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{debug}");
    assert!(debug.contains("WebhookSecret(redacted)"), "{debug}");
}
