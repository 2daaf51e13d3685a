//! The eight tools as `tools/list` presents them, in the spec's order: name,
//! description, input schema, output schema (shown to clients on 2025-06-18 or later)
//! and the annotations every tool carries (read-only, idempotent, closed world). The
//! schemas are derived from each tool's argument and result types (`inputs.rs`, `outputs.rs`).
//! Built once; both renderings of the list are serialised once and copied into
//! responses.

use std::sync::Arc;

use rmcp::model::{JsonObject, ListToolsResult, Tool, ToolAnnotations};
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema};
use serde_json::Value;

use super::inputs::*;
use super::outputs::*;

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
    input: fn() -> JsonObject,
    output: fn() -> JsonObject,
}

fn definitions() -> Vec<Definition> {
    vec![
        Definition {
            name: "list_meetings",
            title: "List meetings",
            description: "List the account's meetings, newest first. Optionally only those whose title or identifier contains `query` (case-insensitive), or those of one recurring series.",
            input: input_schema::<ListMeetingsArguments>,
            output: output_schema::<MeetingsPage>,
        },
        Definition {
            name: "get_meeting",
            title: "Get a meeting",
            description: "Get one meeting: metadata, note, summaries (each with its text in `markdown`), participants and action items. Transcript words are not included (see get_meeting_transcript).",
            input: input_schema::<GetMeetingArguments>,
            output: output_schema::<MeetingWithDocuments>,
        },
        Definition {
            name: "get_meeting_transcript",
            title: "Get a meeting's transcript",
            description: "Get a meeting's transcript: its text (on the first page, offset 0) and its word timings, paged by word. pagination.total is the number of words; next_offset is null on the last page.",
            input: input_schema::<GetMeetingTranscriptArguments>,
            output: output_schema::<TranscriptPage>,
        },
        Definition {
            name: "get_recurring_meeting_history",
            title: "Get a recurring meeting's history",
            description: "List the meetings of the same recurring series as the given meeting (itself included), newest first. A meeting outside a series returns an empty list. pagination.total is the size of the series.",
            input: input_schema::<GetRecurringMeetingHistoryArguments>,
            output: output_schema::<MeetingsPage>,
        },
        Definition {
            name: "search_meetings",
            title: "Search meetings",
            description: "Find meetings whose title or summaries contain every word of `query` (whole words, case-insensitive), newest first. pagination.total counts the matches.",
            input: input_schema::<SearchMeetingsArguments>,
            output: output_schema::<MeetingsPage>,
        },
        Definition {
            name: "list_pending_action_items",
            title: "List pending action items",
            description: "List the account's action items whose status is todo or in_progress, newest first, each with meeting_id and meeting_title of the meeting it came from (null for items outside a meeting).",
            input: input_schema::<ListPendingActionItemsArguments>,
            output: output_schema::<PendingActionItems>,
        },
        Definition {
            name: "search_shared_notes",
            title: "Search shared notes",
            description: "Search the notes others share with the caller, directly or through the caller's teams: every word of `query` must appear (whole words, case-insensitive). Notes and summaries only, never transcripts. Newest first.",
            input: input_schema::<SearchSharedNotesArguments>,
            output: output_schema::<SharedNotesFound>,
        },
        Definition {
            name: "get_shared_note",
            title: "Get a shared note",
            description: "Get a note shared with the caller, by the share_id search_shared_notes returned: its text up to 12,000 characters, with truncated telling whether it was cut.",
            input: input_schema::<GetSharedNoteArguments>,
            output: output_schema::<SharedNote>,
        },
    ]
}

/// A tool's `inputSchema`: its argument type's schema (JSON Schema 2020-12, which MCP
/// uses) without the meta-schema and the Rust type's name and doc comment, which a
/// client has no use for (the tool's title and description say what it is). Each
/// property keeps its description.
fn input_schema<T: JsonSchema>() -> JsonObject {
    let schema = SchemaSettings::draft2020_12().with(|settings| settings.inline_subschemas = true).into_generator().into_root_schema_for::<T>();
    without_names(schema)
}

/// A tool's `outputSchema`: its result type's schema for what the tool writes, nested
/// types inlined, without the meta-schema, the Rust types' names and doc comments (they
/// are for readers of the code) and what schemars says of a Rust integer's width: its
/// `format` (`int64`, `uint`: not JSON Schema formats) and, for an unsigned one,
/// `minimum: 0`. A client needs only that it is an integer.
fn output_schema<T: JsonSchema>() -> JsonObject {
    let schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .with(|settings| settings.inline_subschemas = true)
        .with_transform(RecursiveTransform(|schema: &mut Schema| {
            schema.remove("description");
            if let Some(Value::String(format)) = schema.remove("format") {
                if format.starts_with("uint") {
                    schema.remove("minimum");
                }
            }
        }))
        .into_generator()
        .into_root_schema_for::<T>();
    without_names(schema)
}

fn without_names(schema: Schema) -> JsonObject {
    let mut object = match schema.to_value() {
        Value::Object(object) => object,
        // A derived struct's schema is always an object.
        _ => JsonObject::new(),
    };
    for key in ["$schema", "title", "description"] {
        object.remove(key);
    }
    object
}

impl Catalog {
    pub fn build() -> Catalog {
        let definitions = definitions();
        let names = definitions.iter().map(|definition| definition.name).collect();
        let annotations = ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
        let schemas: Vec<(Arc<JsonObject>, Arc<JsonObject>)> =
            definitions.iter().map(|definition| (Arc::new((definition.input)()), Arc::new((definition.output)()))).collect();
        let tools = |with_output: bool| -> Vec<Tool> {
            definitions
                .iter()
                .zip(&schemas)
                .map(|(definition, (input, output))| {
                    let tool =
                        Tool::new(definition.name, definition.description, input.clone()).with_title(definition.title).with_annotations(annotations.clone());
                    if with_output {
                        tool.with_raw_output_schema(output.clone())
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

