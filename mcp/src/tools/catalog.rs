//! The eight tools as `tools/list` presents them, in the spec's order: name,
//! description, input schema, output schema (shown to clients on 2025-06-18 or later)
//! and the annotations every tool carries (read-only, idempotent, closed world). Built
//! once; both renderings of the list are serialised once and copied into responses.

use std::sync::Arc;

use rmcp::model::{ListToolsResult, Tool, ToolAnnotations};
use serde_json::{json, Value};

/// The prebuilt `tools/list` results.
pub struct Catalog {
    /// For 2025-03-26 clients: no `outputSchema`.
    pub list_without_output_schema: String,
    /// For 2025-06-18 and later.
    pub list_with_output_schema: String,
    pub names: Vec<&'static str>,
}

struct Definition {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input: Value,
    output: Value,
}

/// An integer argument. No `minimum` or `maximum`: out-of-range values are clamped, not
/// rejected, so every integer is a valid argument, and a client that checks arguments
/// against the schema must not refuse one the server accepts. The range is in the text.
fn integer(description: &str, default: i64) -> Value {
    json!({"type": "integer", "description": description, "default": default})
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn nullable(kind: &str) -> Value {
    json!({"type": [kind, "null"]})
}

fn pagination() -> Value {
    json!({
        "type": "object",
        "properties": {
            "offset": {"type": "integer"}, "limit": {"type": "integer"}, "returned": {"type": "integer"},
            "total": nullable("integer"), "next_offset": nullable("integer")
        },
        "required": ["offset", "limit", "returned", "total", "next_offset"]
    })
}

fn meeting_entry() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"}, "title": {"type": "string"}, "kind": {"type": "string"}, "status": {"type": "string"},
            "started_at": {"type": "string"}, "ended_at": {"type": "string"}, "created_at": {"type": "string"}, "updated_at": {"type": "string"},
            "series_id": nullable("string")
        },
        "required": ["id", "title", "created_at"]
    })
}

fn meetings_page() -> Value {
    json!({
        "type": "object",
        "properties": {"meetings": {"type": "array", "items": meeting_entry()}, "pagination": pagination()},
        "required": ["meetings", "pagination"]
    })
}

fn document() -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "kind": {"type": "string"}, "title": {"type": "string"}, "text": {"type": "string"}, "markdown": {"type": "string"}},
        "required": ["id", "text", "markdown"]
    })
}

fn definitions() -> Vec<Definition> {
    let limit_200 = || integer("Page size; values outside 1..200 are clamped.", 20);
    let offset = || integer("Number of results to skip; a negative value counts as 0, one above 100000 as 100000.", 0);
    vec![
        Definition {
            name: "list_meetings",
            title: "List meetings",
            description: "List the account's meetings, newest first. Optionally only those whose title or identifier contains `query` (case-insensitive), or those of one recurring series.",
            input: json!({
                "type": "object",
                "properties": {
                    "query": string("Case-insensitive substring of the title or meeting identifier."),
                    "series_id": string("Exact recurring series identifier."),
                    "limit": limit_200(), "offset": offset()
                }
            }),
            output: meetings_page(),
        },
        Definition {
            name: "get_meeting",
            title: "Get a meeting",
            description: "Get one meeting: metadata, note, summaries (each with its text in `markdown`), participants and action items. Transcript words are not included (see get_meeting_transcript).",
            input: json!({
                "type": "object",
                "properties": {"meeting_id": string("A meeting identifier returned by the service.")},
                "required": ["meeting_id"]
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string"}, "title": {"type": "string"}, "kind": {"type": "string"}, "status": {"type": "string"},
                    "created_at": {"type": "string"}, "updated_at": {"type": "string"}, "started_at": {"type": "string"}, "ended_at": {"type": "string"},
                    "series_id": nullable("string"), "timezone": {"type": "string"}, "language": {"type": "string"},
                    "note": document(), "summaries": {"type": "array", "items": document()},
                    "participants": {"type": "array", "items": {"type": "object"}}, "action_items": {"type": "array", "items": {"type": "object"}}
                },
                "required": ["id", "title", "note", "summaries", "participants", "action_items"]
            }),
        },
        Definition {
            name: "get_meeting_transcript",
            title: "Get a meeting's transcript",
            description: "Get a meeting's transcript: its text (on the first page, offset 0) and its word timings, paged by word. pagination.total is the number of words; next_offset is null on the last page.",
            input: json!({
                "type": "object",
                "properties": {
                    "meeting_id": string("A meeting identifier returned by the service."),
                    "offset": integer("Word offset; a negative value counts as 0.", 0),
                    "limit": integer("Words per page; values outside 1..500 are clamped.", 200)
                },
                "required": ["meeting_id"]
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "meeting_id": {"type": "string"}, "text": nullable("string"),
                    "words": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"text": {"type": "string"}, "start_ms": {"type": "integer"}, "end_ms": {"type": "integer"}, "track": {"type": "string"}},
                        "required": ["text", "start_ms", "end_ms", "track"]
                    }},
                    "pagination": pagination()
                },
                "required": ["meeting_id", "text", "words", "pagination"]
            }),
        },
        Definition {
            name: "get_recurring_meeting_history",
            title: "Get a recurring meeting's history",
            description: "List the meetings of the same recurring series as the given meeting (itself included), newest first. A meeting outside a series returns an empty list. pagination.total is the size of the series.",
            input: json!({
                "type": "object",
                "properties": {"meeting_id": string("A meeting identifier returned by the service."), "limit": limit_200(), "offset": offset()},
                "required": ["meeting_id"]
            }),
            output: meetings_page(),
        },
        Definition {
            name: "search_meetings",
            title: "Search meetings",
            description: "Find meetings whose title or summaries contain every word of `query` (whole words, case-insensitive), newest first. pagination.total counts the matches.",
            input: json!({
                "type": "object",
                "properties": {"query": string("Text to find in meeting titles and summaries, case-insensitive."), "limit": limit_200(), "offset": offset()},
                "required": ["query"]
            }),
            output: meetings_page(),
        },
        Definition {
            name: "list_pending_action_items",
            title: "List pending action items",
            description: "List the account's action items whose status is todo or in_progress, newest first, each with meeting_id and meeting_title of the meeting it came from (null for items outside a meeting).",
            input: json!({"type": "object", "properties": {"limit": limit_200(), "offset": offset()}}),
            output: json!({
                "type": "object",
                "properties": {
                    "action_items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "text": {"type": "string"}, "status": {"type": "string"}, "meeting_id": nullable("string"), "meeting_title": nullable("string")},
                        "required": ["id", "text", "status", "meeting_id", "meeting_title"]
                    }},
                    "pagination": pagination()
                },
                "required": ["action_items", "pagination"]
            }),
        },
        Definition {
            name: "search_shared_notes",
            title: "Search shared notes",
            description: "Search the notes others share with the caller, directly or through the caller's teams: every word of `query` must appear (whole words, case-insensitive). Notes and summaries only, never transcripts. Newest first.",
            input: json!({
                "type": "object",
                "properties": {
                    "query": string("Words that must all appear in the note."),
                    "limit": integer("Number of results; values outside 1..20 are clamped.", 10)
                },
                "required": ["query"]
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "results": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "share_id": {"type": "string"}, "title": {"type": "string"}, "team": {"type": ["object", "null"]},
                            "published_at": {"type": "string"}, "snippet": {"type": "string"}
                        },
                        "required": ["share_id", "title", "team", "published_at", "snippet"]
                    }}
                },
                "required": ["results"]
            }),
        },
        Definition {
            name: "get_shared_note",
            title: "Get a shared note",
            description: "Get a note shared with the caller, by the share_id search_shared_notes returned: its text up to 12,000 characters, with truncated telling whether it was cut.",
            input: json!({
                "type": "object",
                "properties": {"share_id": string("A share identifier returned by search_shared_notes.")},
                "required": ["share_id"]
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "share_id": {"type": "string"}, "title": {"type": "string"}, "team": {"type": ["object", "null"]},
                    "published_at": {"type": "string"}, "text": {"type": "string"}, "truncated": {"type": "boolean"}
                },
                "required": ["share_id", "title", "team", "published_at", "text", "truncated"]
            }),
        },
    ]
}

fn object(value: Value) -> Arc<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(serde_json::Map::new()),
    }
}

impl Catalog {
    pub fn build() -> Catalog {
        let definitions = definitions();
        let names = definitions.iter().map(|definition| definition.name).collect();
        let annotations = ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
        let tools = |with_output: bool| -> Vec<Tool> {
            definitions
                .iter()
                .map(|definition| {
                    let tool = Tool::new(definition.name, definition.description, object(definition.input.clone()))
                        .with_title(definition.title)
                        .with_annotations(annotations.clone());
                    if with_output {
                        tool.with_raw_output_schema(object(definition.output.clone()))
                    } else {
                        tool
                    }
                })
                .collect()
        };
        let render = |tools: Vec<Tool>| {
            let mut result = ListToolsResult::with_all_items(tools);
            // resultType belongs to protocol 2026-07-28, which this server does not speak.
            result.result_type = None;
            serde_json::to_string(&result).unwrap_or_else(|_| "{\"tools\":[]}".into())
        };
        Catalog { list_without_output_schema: render(tools(false)), list_with_output_schema: render(tools(true)), names }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(&name)
    }
}
