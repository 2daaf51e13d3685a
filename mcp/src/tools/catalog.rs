//! The nine tools as `tools/list` presents them, in the order docs/mcp.md lists them
//! (the account's feed last): name, description, input schema, output schema (shown to clients on 2025-06-18 or later)
//! and the annotations every tool carries (read-only, idempotent, closed world). The
//! schemas are derived from each tool's argument and result types (`inputs.rs`, `outputs.rs`).
//! Built once; both renderings of the list are serialised once and copied into
//! responses.

use std::sync::Arc;

use rmcp::model::{CacheScope, JsonObject, ListToolsResult, MetaObject, Tool, ToolAnnotations};
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
    /// For 2026-07-28: with `outputSchema`, `resultType`, the caching hints and the
    /// server's name in `_meta`. `cacheScope` is public: every caller is shown the same
    /// tools, whatever its token (a token decides only what the tools read).
    pub list_modern: String,
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
        Definition {
            name: "list_recent_changes",
            title: "List recent changes",
            description: "List what changed in the account, oldest first: meetings created, updated or deleted, transcripts and notes ready, action items, notes shared with the caller, teams joined or left; each change with id, type, created_at and data. Pass next_cursor back as cursor to get only what happened since (next_cursor is given at the end too). Optionally only some `types`, comma-separated. Changes are kept for 30 days unless configured otherwise.",
            input: input_schema::<ListRecentChangesArguments>,
            output: output_schema::<RecentChanges>,
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
            // resultType belongs to protocol 2026-07-28, not to the handshake-era lists.
            result.result_type = None;
            serde_json::to_string(&result).unwrap_or_else(|_| "{\"tools\":[]}".into())
        };
        let modern = {
            let mut result = ListToolsResult::with_all_items(tools(true));
            result.ttl_ms = Some(crate::modern::TTL_MS);
            result.cache_scope = Some(CacheScope::Public);
            let mut meta = MetaObject::new();
            meta.0.insert(crate::modern::SERVER_INFO_KEY.into(), serde_json::to_value(crate::modern::server_info()).unwrap_or_default());
            result.meta = Some(meta);
            serde_json::to_string(&result).unwrap_or_else(|_| "{\"tools\":[]}".into())
        };
        Catalog { list_without_output_schema: render(tools(false)), list_with_output_schema: render(tools(true)), list_modern: modern, names }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use schemars::schema_for;
    use serde_json::json;

    use super::*;
    use crate::tools::argument_reader::{parse, Args};
    use crate::tools::ToolError;

    fn listed_tools() -> Vec<Value> {
        let list: Value = serde_json::from_str(&Catalog::build().list_with_output_schema).expect("tools/list is JSON");
        list["tools"].as_array().cloned().unwrap_or_default()
    }

    /// `schema` without the keywords the catalog leaves out of an output schema: names,
    /// doc comments and what schemars says of a Rust integer's width.
    fn without_annotations(schema: &mut Value) {
        let Value::Object(object) = schema else { return };
        for key in ["$schema", "title", "description"] {
            object.remove(key);
        }
        if object.remove("format").is_some_and(|format| format.as_str().is_some_and(|format| format.starts_with("uint"))) {
            object.remove("minimum");
        }
        // Subschemas; the keys of `properties` are names, not keywords.
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            properties.values_mut().for_each(without_annotations);
        }
        object.get_mut("items").map(without_annotations);
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(schemas)) = object.get_mut(key) {
                schemas.iter_mut().for_each(without_annotations);
            }
        }
    }

    fn derived_output<T: JsonSchema>() -> Value {
        let generator = SchemaSettings::draft2020_12().for_serialize().with(|settings| settings.inline_subschemas = true).into_generator();
        let mut schema = generator.into_root_schema_for::<T>().to_value();
        without_annotations(&mut schema);
        schema
    }

    fn derived_input(schema: Schema) -> Value {
        let mut schema = schema.to_value();
        for key in ["$schema", "title", "description"] {
            schema.as_object_mut().map(|object| object.remove(key));
        }
        schema
    }

    // Every tool's inputSchema is `schema_for!` of its argument type and its outputSchema
    // the schema of its result type, less names and doc comments: nothing is hand-written.
    #[test]
    fn every_schema_is_derived_from_the_tools_types() {
        let derived = [
            ("list_meetings", derived_input(schema_for!(ListMeetingsArguments)), derived_output::<MeetingsPage>()),
            ("get_meeting", derived_input(schema_for!(GetMeetingArguments)), derived_output::<MeetingWithDocuments>()),
            ("get_meeting_transcript", derived_input(schema_for!(GetMeetingTranscriptArguments)), derived_output::<TranscriptPage>()),
            ("get_recurring_meeting_history", derived_input(schema_for!(GetRecurringMeetingHistoryArguments)), derived_output::<MeetingsPage>()),
            ("search_meetings", derived_input(schema_for!(SearchMeetingsArguments)), derived_output::<MeetingsPage>()),
            ("list_pending_action_items", derived_input(schema_for!(ListPendingActionItemsArguments)), derived_output::<PendingActionItems>()),
            ("search_shared_notes", derived_input(schema_for!(SearchSharedNotesArguments)), derived_output::<SharedNotesFound>()),
            ("get_shared_note", derived_input(schema_for!(GetSharedNoteArguments)), derived_output::<SharedNote>()),
            ("list_recent_changes", derived_input(schema_for!(ListRecentChangesArguments)), derived_output::<RecentChanges>()),
        ];
        let tools = listed_tools();
        assert_eq!(tools.len(), derived.len());
        for (tool, (name, input, output)) in tools.iter().zip(derived) {
            assert_eq!(tool["name"], name);
            assert_eq!(tool["inputSchema"], input, "{name}");
            assert_eq!(tool["outputSchema"], output, "{name}");
            // Inlined: no references left to resolve.
            assert!(!tool.to_string().contains("$ref") && !tool.to_string().contains("$defs"), "{name}");
        }
    }

    // MCP's schemas are JSON Schema 2020-12: each one compiles against its metaschema.
    #[test]
    fn every_schema_is_valid_json_schema_2020_12() {
        for tool in listed_tools() {
            for key in ["inputSchema", "outputSchema"] {
                let mut compiler = boon::Compiler::new();
                compiler.set_default_draft(boon::Draft::V2020_12);
                let location = format!("urn:recap:{}:{key}", tool["name"].as_str().unwrap_or_default());
                compiler.add_resource(&location, tool[key].clone()).expect("a JSON object");
                if let Err(error) = compiler.compile(&location, &mut boon::Schemas::new()) {
                    panic!("{location}: {error:#}");
                }
            }
        }
    }

    /// Reads `args` into the argument type of `tool`, as a call would.
    fn parse_for(tool: &str, args: &Args) -> Result<(), ToolError> {
        match tool {
            "list_meetings" => parse::<ListMeetingsArguments>(args).map(drop),
            "get_meeting" => parse::<GetMeetingArguments>(args).map(drop),
            "get_meeting_transcript" => parse::<GetMeetingTranscriptArguments>(args).map(drop),
            "get_recurring_meeting_history" => parse::<GetRecurringMeetingHistoryArguments>(args).map(drop),
            "search_meetings" => parse::<SearchMeetingsArguments>(args).map(drop),
            "list_pending_action_items" => parse::<ListPendingActionItemsArguments>(args).map(drop),
            "search_shared_notes" => parse::<SearchSharedNotesArguments>(args).map(drop),
            "get_shared_note" => parse::<GetSharedNoteArguments>(args).map(drop),
            "list_recent_changes" => parse::<ListRecentChangesArguments>(args).map(drop),
            other => panic!("no argument type for {other}"),
        }
    }

    // What the schema advertises is what the parser does: every required argument left
    // out is a missing argument, every optional one may be left out, every property is
    // read (a value of the wrong type is refused naming it), and nothing else is.
    #[test]
    fn each_input_schema_says_what_its_parser_reads() {
        for tool in listed_tools() {
            let name = tool["name"].as_str().unwrap_or_default();
            let schema = &tool["inputSchema"];
            let properties = schema["properties"].as_object().cloned().unwrap_or_default();
            let required: Vec<&str> = schema["required"].as_array().map(|names| names.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            let valid = |property: &str| if properties[property]["type"] == "integer" { json!(7) } else { json!("x") };
            let with_required = || -> Args { required.iter().map(|property| (property.to_string(), valid(property))).collect() };
            assert_eq!(parse_for(name, &with_required()), Ok(()), "{name}");
            let mut everything = with_required();
            everything.extend(properties.keys().map(|property| (property.clone(), valid(property))));
            everything.insert("not_an_argument".into(), json!(true));
            assert_eq!(parse_for(name, &everything), Ok(()), "{name}");
            for property in properties.keys() {
                let mut without = everything.clone();
                without.remove(property);
                let outcome = parse_for(name, &without);
                if required.contains(&property.as_str()) {
                    let message = format!("missing required argument: {property} (a non-empty string)");
                    assert_eq!(outcome, Err(ToolError::InvalidArgument(message)), "{name}.{property}");
                } else {
                    assert_eq!(outcome, Ok(()), "{name}.{property}");
                }
                let mut wrong = everything.clone();
                wrong.insert(property.clone(), json!(true));
                match parse_for(name, &wrong) {
                    Err(ToolError::InvalidArgument(message)) => assert!(message.contains(property.as_str()), "{name}.{property}: {message}"),
                    other => panic!("{name}.{property} = true: {other:?}"),
                }
            }
        }
    }
}
