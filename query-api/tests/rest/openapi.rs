//! Every response the suite receives is checked against `schemas/openapi.json`: the
//! operation's response for that status (or the Error schema for paths and methods the
//! document has no operation for), and the headers it documents for 200 and 429.
//!
//! The checker understands the JSON Schema keywords the document uses and refuses any
//! other, so a schema can never pass by being misunderstood. It is also stricter than
//! the document in one way: a property the schema does not declare is an error, so
//! the document and the responses cannot drift apart (clients still must ignore unknown
//! fields; the document promises no `additionalProperties: false`).

use std::sync::OnceLock;

use serde_json::Value;

fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/openapi.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("schemas/openapi.json")).expect("openapi.json is JSON")
    })
}

fn resolve(node: &Value) -> &Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(pointer) => resolve(document().pointer(pointer.trim_start_matches('#')).unwrap_or_else(|| panic!("dangling $ref {pointer}"))),
        None => node,
    }
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("unknown type {other}"),
    }
}

/// Checks `value` against `schema`; the error names the JSON path.
pub fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let schema = resolve(schema);
    let Some(keywords) = schema.as_object() else { return Err(format!("{at}: schema is not an object")) };
    for (keyword, argument) in keywords {
        match keyword.as_str() {
            "description" | "default" | "title" => {}
            "type" => {
                let names: Vec<&str> = match argument {
                    Value::String(name) => vec![name.as_str()],
                    Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
                    _ => return Err(format!("{at}: bad type keyword")),
                };
                if !names.iter().any(|name| type_matches(name, value)) {
                    return Err(format!("{at}: {value} is not of type {names:?}"));
                }
            }
            "enum" => {
                if !argument.as_array().is_some_and(|allowed| allowed.contains(value)) {
                    return Err(format!("{at}: {value} not in {argument}"));
                }
            }
            "format" => {
                if argument == "date-time" {
                    if let Some(text) = value.as_str() {
                        recap_schemas::Timestamp::parse(text).map_err(|error| format!("{at}: {text} is not a date-time: {error}"))?;
                        if !text.ends_with('Z') && !text.ends_with("+00:00") {
                            return Err(format!("{at}: {text} is not in UTC"));
                        }
                    }
                }
            }
            "minimum" | "maximum" | "minLength" | "maxLength" => {
                let bound = argument.as_f64().unwrap_or_default();
                let measured = match (keyword.as_str(), value) {
                    ("minLength" | "maxLength", Value::String(text)) => Some(text.chars().count() as f64),
                    ("minimum" | "maximum", Value::Number(number)) => number.as_f64(),
                    _ => None,
                };
                if let Some(measured) = measured {
                    let fine = if keyword.starts_with("min") { measured >= bound } else { measured <= bound };
                    if !fine {
                        return Err(format!("{at}: {value} breaks {keyword} {bound}"));
                    }
                }
            }
            "required" => {
                if let Some(object) = value.as_object() {
                    for name in argument.as_array().into_iter().flatten().filter_map(Value::as_str) {
                        if !object.contains_key(name) {
                            return Err(format!("{at}: required field {name} missing"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(object) = value.as_object() {
                    let declared = argument.as_object().ok_or_else(|| format!("{at}: bad properties"))?;
                    for (name, field) in object {
                        let field_schema = declared.get(name).ok_or_else(|| format!("{at}: field {name} is not in the document"))?;
                        check(field_schema, field, &format!("{at}.{name}"))?;
                    }
                }
            }
            "items" => {
                if let Some(items) = value.as_array() {
                    for (index, item) in items.iter().enumerate() {
                        check(argument, item, &format!("{at}[{index}]"))?;
                    }
                }
            }
            "anyOf" => {
                let options = argument.as_array().ok_or_else(|| format!("{at}: bad anyOf"))?;
                if !options.iter().any(|option| check(option, value, at).is_ok()) {
                    return Err(format!("{at}: {value} matches no anyOf option"));
                }
            }
            other => return Err(format!("{at}: the checker does not know the keyword {other}")),
        }
    }
    Ok(())
}

/// The document's path template of a request path, e.g. `/meetings/{meeting_id}`.
fn template(path: &str) -> Option<(&'static str, &'static Value)> {
    let relative = path.strip_prefix("/v1")?;
    let paths = document()["paths"].as_object()?;
    paths.iter().find_map(|(template, item)| {
        let mut wanted = template.split('/');
        let mut given = relative.split('/');
        loop {
            match (wanted.next(), given.next()) {
                (None, None) => return Some((template.as_str(), item)),
                (Some(pattern), Some(segment)) if pattern.starts_with('{') && !segment.is_empty() => {}
                (Some(pattern), Some(segment)) if pattern == segment => {}
                _ => return None,
            }
        }
    })
}

/// Checks one received response against the document.
pub fn check_response(method: &str, path: &str, status: u16, headers: &axum::http::HeaderMap, body: &Value) {
    assert!(headers.contains_key("x-request-id"), "every response carries X-Request-Id");
    let operation = if method == "GET" { template(path).and_then(|(_, item)| item.get("get")) } else { None };
    let Some(operation) = operation else {
        let error = &document()["components"]["schemas"]["Error"];
        check(error, body, "$").unwrap_or_else(|failure| panic!("{method} {path} -> {status}: {failure}\n{body}"));
        return;
    };
    let response = resolve(operation["responses"].get(status.to_string()).unwrap_or_else(|| panic!("{path}: the document has no {status} response")));
    let schema = &response["content"]["application/json"]["schema"];
    check(schema, body, "$").unwrap_or_else(|failure| panic!("{method} {path} -> {status}: {failure}\n{body}"));
    if status == 200 || status == 429 {
        for name in response["headers"].as_object().into_iter().flatten().map(|(name, _)| name) {
            assert!(headers.contains_key(name.as_str()), "{path} -> {status}: documented header {name} missing");
        }
    }
}

#[test]
fn the_document_is_openapi_3_1_with_every_endpoint() {
    let document = document();
    assert_eq!(document["openapi"], "3.1.0");
    let mut paths: Vec<&str> = document["paths"].as_object().unwrap().keys().map(String::as_str).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/action-items",
            "/events",
            "/events/{event_id}",
            "/meetings",
            "/meetings/{meeting_id}",
            "/shared-notes",
            "/shared-notes/{shared_note_id}",
            "/teams",
            "/teams/{team_id}/action-items",
            "/webhook-endpoints",
            "/webhook-endpoints/{endpoint_id}/attempts"
        ]
    );
    for (_, item) in document["paths"].as_object().unwrap() {
        assert_eq!(item.as_object().unwrap().keys().collect::<Vec<_>>(), ["get"], "read-only: GET only");
    }
}

/// JSON Schema counts characters and the service bounds identifiers in bytes
/// (`recap_schemas::MAX_ID_BYTES`), so the document's identifiers carry a pattern
/// admitting only what fits: every string it admits must be an identifier the service
/// takes, or a client (or a fuzzer) following the document would be refused.
#[test]
fn identifier_parameters_admit_only_strings_the_service_takes_as_identifiers() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;

    let identifiers = ["meeting_id", "shared_note_id", "team_id", "event_id", "endpoint_id", "assignee_human_id"];
    let mut seen = 0;
    for (path, item) in document()["paths"].as_object().unwrap() {
        for parameter in item["get"]["parameters"].as_array().into_iter().flatten() {
            let name = parameter["name"].as_str().unwrap();
            if !identifiers.contains(&name) {
                continue;
            }
            seen += 1;
            let schema = &parameter["schema"];
            assert_eq!((&schema["type"], &schema["minLength"], &schema["maxLength"]), (&"string".into(), &1.into(), &256.into()), "{path} {name}");
            let pattern = schema["pattern"].as_str().unwrap_or_else(|| panic!("{path} {name}: no pattern"));
            // The pattern is anchored at both ends; the generator wants it bare.
            let bare = pattern.strip_prefix('^').and_then(|rest| rest.strip_suffix('$')).unwrap_or_else(|| panic!("{path} {name}: {pattern} is not anchored"));
            let strategy = proptest::string::string_regex(bare).unwrap_or_else(|error| panic!("{path} {name}: {pattern}: {error}"));
            let mut runner = TestRunner::deterministic();
            let mut longest = 0;
            for _ in 0..2000 {
                let text = strategy.new_tree(&mut runner).unwrap().current();
                longest = longest.max(text.len());
                assert!(recap_schemas::Id::parse(&text).is_ok(), "{path} {name}: the document admits {text:?} ({} bytes), the service refuses it", text.len());
            }
            assert!(longest > 200, "{path} {name}: the generated identifiers stayed short ({longest} bytes at most)");
        }
    }
    assert_eq!(seen, 7, "every identifier parameter was checked");
}
