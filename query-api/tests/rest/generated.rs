//! Generated requests against a reference model of the rules: methods, paths, tokens,
//! plans, every parameter of every endpoint (valid, invalid, repeated, unknown,
//! percent-encoded or not), visibility and the period quota. Each response must be
//! exactly what the model derives from docs/rest.md and the check order `params.rs`
//! documents: status, code, `param`, the envelope's fields, the quota headers and their
//! count. Nothing here is a 5xx, and no response echoes the caller's token.
//!
//! The model is written from the rules, not from the service's code: a value's validity
//! is decided by the rule docs/rest.md gives for its parameter.

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use recap_query_api::RestConfig;

use crate::common::*;

/// The caller a request presents, and what the world knows of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    Alice,
    Bob,
    Carol,
    Small,
    Enterprise,
    NoPlan,
    Basic,
    Revoked,
    /// No Authorization header at all.
    Missing,
    /// A header that names no token the service knows (index into `BAD_AUTHORIZATIONS`).
    Bad(usize),
}

const BAD_AUTHORIZATIONS: &[&[u8]] = &[
    b"Bearer",
    b"Bearer ",
    b"Bearer  ",
    b"Basic c3ZjX3BhdF9hbGljZQ==",
    b"svc_pat_alice_0123456789",
    b"Bearer svc_pat_",
    b"Bearer svc_pat_nobody_0123456789",
    b"Bearer not_a_pat_0123456789",
    b"Bearer svc_pat_alice_0123456789 extra",
    b"Bearer\tsvc_pat_alice_0123456789",
    b"Bearer svc_pat_\xc3\xa9\xff",
    b"Token svc_pat_alice_0123456789",
];

impl Caller {
    fn token(self) -> Option<&'static str> {
        Some(match self {
            Caller::Alice => ALICE,
            Caller::Bob => BOB,
            Caller::Carol => CAROL,
            Caller::Small => SMALL_QUOTA,
            Caller::Enterprise => ENTERPRISE,
            Caller::NoPlan => NO_PLAN,
            Caller::Basic => BASIC,
            Caller::Revoked => REVOKED,
            Caller::Missing | Caller::Bad(_) => return None,
        })
    }

    /// The period quota of the caller's plan (the world's accounts), for those that have one.
    fn quota(self) -> u64 {
        match self {
            Caller::Small => 3,
            Caller::Enterprise => 7,
            _ => 50_000,
        }
    }
}

/// The routes, with their identifier segment (decoded bytes) where they have one.
#[derive(Clone, Debug)]
enum Path {
    Meetings,
    Meeting(Vec<u8>),
    ActionItems,
    SharedNotes,
    SharedNote(Vec<u8>),
    Teams,
    TeamActionItems(Vec<u8>),
    /// A path that is no route, as sent.
    Unknown(&'static str),
}

const UNKNOWN_PATHS: &[&str] = &[
    "/",
    "/v1",
    "/v1/",
    "/v2/meetings",
    "/v1/Meetings",
    "/v1/meetings/",
    "/v1//meetings",
    "/v1/meetings/mtg_a1/",
    "/v1/meetings/mtg_a1/transcript",
    "/v1/meetings%2Fmtg_a1",
    "/v1/shared-notes/",
    "/v1/teams/",
    "/v1/teams/team_design",
    "/v1/teams/team_design/action-items/tai_1",
    "/v1/teams//action-items",
    "/v1/action-items/ai_1",
    "/v1/action_items",
    "/meetings",
    "/v1/meetings.json",
];

/// The world's identifiers, visible to one caller or another.
const WORLD_IDS: &[&str] =
    &["mtg_a1", "mtg_a2", "mtg_a4", "mtg_b1", "mtg_gone", "shr_team", "shr_direct", "shr_own", "shr_secret", "team_design", "team_free", "team_secret"];

/// Byte strings at and past the identifier rule's edges: the longest and one too long
/// (in bytes, one- and two-byte characters), a control character, a line break, and
/// bytes that are not UTF-8.
fn odd_bytes() -> Vec<Vec<u8>> {
    vec![
        "a".repeat(256).into_bytes(),
        "a".repeat(257).into_bytes(),
        "é".repeat(128).into_bytes(),
        "é".repeat(129).into_bytes(),
        b"\x00".to_vec(),
        b"a\nb".to_vec(),
        b"\xff".to_vec(),
    ]
}

/// Other identifier segments: well-formed unknown ones and malformed ones.
fn odd_identifiers() -> Vec<Vec<u8>> {
    let mut ids: Vec<Vec<u8>> =
        ["nope", "..", ".", "a/b", "a?b", "a#b", "a b", "a+b", "é", "🙂", "%", "100%", "MTG_A1", "\u{202e}x"].iter().map(|id| id.as_bytes().to_vec()).collect();
    ids.extend(odd_bytes());
    ids.push(b"\x7f".to_vec());
    ids.push(b"\xc3".to_vec());
    ids
}

/// Query parameter names: every endpoint's, and names no endpoint knows.
const NAMES: &[&str] = &[
    "limit",
    "cursor",
    "since",
    "until",
    "status",
    "assignee_human_id",
    "meeting_id",
    "q",
    "include",
    "LIMIT",
    "Limit",
    "limit ",
    "foo",
    "",
    "x[]",
    "team_id",
    "shared_note_id",
    "page",
];

/// Decoded values: valid for one parameter or another, and garbage.
fn values() -> Vec<Vec<u8>> {
    let mut values: Vec<Vec<u8>> = [
        "1",
        "2",
        "50",
        "199",
        "200",
        "0050",
        "00050",
        "0000000000000000000000000007",
        "0",
        "000",
        "0201",
        "201",
        "-1",
        "+5",
        "1.5",
        "1e2",
        "99999999999999999999",
        " 5",
        "5 ",
        "",
        "abc",
        "null",
        "[]",
        "2026-11-01T00:00:00Z",
        "2026-11-01T01:30:00+01:00",
        "2026-10-31T23:00:00.123456Z",
        "2026-11-01",
        "2026-11-01T00:00:00",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "todo",
        "done",
        "in_progress",
        "todo,done",
        "done,todo,in_progress",
        "todo,todo",
        "TODO",
        "todo,",
        ",",
        "todo,,done",
        "open",
        "transcript",
        "Transcript",
        "transcript,notes",
        "hum_1",
        "hum_2",
        "mtg_a1",
        "budget",
        "BUDGET plan",
        "shared text",
        "é",
        "🙂",
        "a&b=c",
        "#",
        "%",
        "\u{202e}",
    ]
    .iter()
    .map(|value| value.as_bytes().to_vec())
    .collect();
    values.extend(odd_bytes());
    values.push("w".repeat(1000).into_bytes());
    values.push("w".repeat(1001).into_bytes());
    values.push("budget ".repeat(40).into_bytes());
    values.push(b"\xe2\x80".to_vec());
    values
}

/// How a key or value is written into the URI: only what must be encoded, every byte,
/// or every other byte besides what must be.
#[derive(Clone, Copy, Debug)]
enum Encoding {
    Minimal,
    All,
    Alternate,
}

/// Bytes that may stand unencoded in a query component or a path segment here.
fn may_stand(byte: u8, in_path: bool) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~!$'()*+,;:@".contains(&byte) || (!in_path && byte == b'/')
}

fn encode(bytes: &[u8], encoding: Encoding, in_path: bool) -> String {
    let mut out = String::new();
    for (index, &byte) in bytes.iter().enumerate() {
        let encode = !may_stand(byte, in_path)
            || match encoding {
                Encoding::Minimal => false,
                Encoding::All => true,
                Encoding::Alternate => index % 2 == 0,
            };
        if encode {
            out.push_str(&format!("%{byte:02X}"));
        } else {
            out.push(byte as char);
        }
    }
    out
}

#[derive(Clone, Debug)]
struct Pair {
    key: Vec<u8>,
    /// None: the pair is written without `=` (its value is then empty).
    value: Option<Vec<u8>>,
    key_encoding: Encoding,
    value_encoding: Encoding,
}

#[derive(Clone, Debug)]
struct Case {
    method: Method,
    path: Path,
    path_encoding: Encoding,
    caller: Caller,
    /// Which spelling of a known token's header (scheme case, spacing).
    header_form: usize,
    pairs: Vec<Pair>,
    /// Stray separators: a leading `&`, a doubled one, a trailing one.
    separators: u8,
}

fn encoding() -> impl Strategy<Value = Encoding> {
    prop_oneof![6 => Just(Encoding::Minimal), 1 => Just(Encoding::All), 1 => Just(Encoding::Alternate)]
}

fn case() -> impl Strategy<Value = Case> {
    let odd_ids = odd_identifiers();
    let values = values();
    let method = prop_oneof![
        40 => Just(Method::GET),
        1 => Just(Method::HEAD),
        1 => Just(Method::POST),
        1 => Just(Method::DELETE),
        1 => Just(Method::OPTIONS),
        1 => Just(Method::from_bytes(b"PROPFIND").expect("an extension method")),
    ];
    let id = prop_oneof![
        2 => proptest::sample::select(WORLD_IDS).prop_map(|id| id.as_bytes().to_vec()),
        1 => proptest::sample::select(odd_ids),
    ];
    let path = prop_oneof![
        4 => Just(Path::Meetings),
        4 => id.clone().prop_map(Path::Meeting),
        4 => Just(Path::ActionItems),
        4 => Just(Path::SharedNotes),
        3 => id.clone().prop_map(Path::SharedNote),
        2 => Just(Path::Teams),
        4 => id.prop_map(Path::TeamActionItems),
        2 => proptest::sample::select(UNKNOWN_PATHS).prop_map(Path::Unknown),
    ];
    let caller = prop_oneof![
        12 => Just(Caller::Alice),
        6 => Just(Caller::Bob),
        2 => Just(Caller::Carol),
        2 => Just(Caller::Small),
        2 => Just(Caller::Enterprise),
        1 => Just(Caller::NoPlan),
        1 => Just(Caller::Basic),
        1 => Just(Caller::Revoked),
        1 => Just(Caller::Missing),
        2 => (0..BAD_AUTHORIZATIONS.len()).prop_map(Caller::Bad),
    ];
    let pair = (proptest::sample::select(NAMES), proptest::option::weighted(0.95, proptest::sample::select(values)), encoding(), encoding())
        .prop_map(|(key, value, key_encoding, value_encoding)| Pair { key: key.as_bytes().to_vec(), value, key_encoding, value_encoding });
    (method, path, encoding(), caller, 0..4usize, proptest::collection::vec(pair, 0..5), 0..8u8).prop_map(
        |(method, path, path_encoding, caller, header_form, pairs, separators)| Case { method, path, path_encoding, caller, header_form, pairs, separators },
    )
}

impl Case {
    fn uri(&self) -> String {
        let path = match &self.path {
            Path::Meetings => "/v1/meetings".to_string(),
            Path::Meeting(id) => format!("/v1/meetings/{}", encode(id, self.path_encoding, true)),
            Path::ActionItems => "/v1/action-items".to_string(),
            Path::SharedNotes => "/v1/shared-notes".to_string(),
            Path::SharedNote(id) => format!("/v1/shared-notes/{}", encode(id, self.path_encoding, true)),
            Path::Teams => "/v1/teams".to_string(),
            Path::TeamActionItems(id) => format!("/v1/teams/{}/action-items", encode(id, self.path_encoding, true)),
            Path::Unknown(path) => path.to_string(),
        };
        let mut parts: Vec<String> = self
            .pairs
            .iter()
            .map(|pair| {
                let key = encode(&pair.key, pair.key_encoding, false).replace('=', "%3D");
                match &pair.value {
                    Some(value) => format!("{key}={}", encode(value, pair.value_encoding, false)),
                    None => key,
                }
            })
            .collect();
        if self.separators & 1 != 0 {
            parts.insert(0, String::new());
        }
        if self.separators & 2 != 0 && !parts.is_empty() {
            parts.insert(parts.len() / 2, String::new());
        }
        if self.separators & 4 != 0 {
            parts.push(String::new());
        }
        if parts.is_empty() {
            path
        } else {
            format!("{path}?{}", parts.join("&"))
        }
    }

    fn authorization(&self) -> Option<HeaderValue> {
        if let Caller::Bad(index) = self.caller {
            return Some(HeaderValue::from_bytes(BAD_AUTHORIZATIONS[index]).expect("a header value"));
        }
        let token = self.caller.token()?;
        let text = match self.header_form {
            0 => format!("Bearer {token}"),
            1 => format!("bearer {token}"),
            2 => format!("BEARER {token}"),
            _ => format!("Bearer  {token} "),
        };
        Some(HeaderValue::from_str(&text).expect("a header value"))
    }
}

/// What the rules say a request gets.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    status: u16,
    code: Option<&'static str>,
    param: Option<&'static str>,
    /// Whether the request reaches the limiter (and so carries the quota headers).
    limited: bool,
}

fn refused(status: u16, code: &'static str) -> Expected {
    Expected { status, code: Some(code), param: None, limited: false }
}

fn identifier_ok(value: Option<&str>) -> bool {
    // The events' bound on identifiers, in bytes.
    value.is_some_and(|text| (1..=recap_schemas::MAX_ID_BYTES).contains(&text.len()))
}

const STATUSES: [&str; 3] = ["todo", "in_progress", "done"];
const INSTANTS: [&str; 3] = ["2026-11-01T00:00:00Z", "2026-11-01T01:30:00+01:00", "2026-10-31T23:00:00.123456Z"];

/// Whether the single value of a known parameter is valid, by the parameter's rule.
fn value_ok(name: &str, path: &Path, value: Option<&str>) -> bool {
    match name {
        // "limit (integer, 1 to 200, default 50)": decimal digits, whose value (leading
        // zeros add nothing) is from 1 to 200.
        "limit" => value.is_some_and(|text| {
            !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) && {
                let significant = text.trim_start_matches('0');
                significant.len() <= 3 && (1..=200).contains(&significant.parse::<u32>().unwrap_or(0))
            }
        }),
        // "Cursors are opaque. Clients must not build or edit them": none generated here
        // was issued by the service.
        "cursor" => false,
        // "since and until must include a time and a time zone".
        "since" | "until" => value.is_some_and(|text| INSTANTS.contains(&text)),
        // Team action items: "one of todo, in_progress, done"; action items: "comma-separated
        // subset of todo, in_progress, done".
        "status" if matches!(path, Path::TeamActionItems(_)) => value.is_some_and(|text| STATUSES.contains(&text)),
        "status" => value.is_some_and(|text| text.split(',').all(|item| STATUSES.contains(&item))),
        "assignee_human_id" | "meeting_id" => identifier_ok(value),
        // "the value transcript adds the transcript object".
        "include" => value == Some("transcript"),
        // q: any text up to the documented 1,000 characters.
        "q" => value.is_some_and(|text| text.chars().count() <= 1000),
        other => unreachable!("{other} is no parameter"),
    }
}

struct Model {
    /// Counted requests of each caller so far.
    counted: HashMap<&'static str, u64>,
}

impl Model {
    /// The expected answer to `case`, counting it when the rules count it.
    fn expect(&mut self, case: &Case) -> Expected {
        // Conventions 1 and 7: method, then route.
        if case.method != Method::GET {
            return refused(405, "method_not_allowed");
        }
        if matches!(case.path, Path::Unknown(_)) {
            return refused(404, "not_found");
        }
        // Authentication 7 and Errors: 401 and the plan's 402s.
        match case.caller {
            Caller::Missing | Caller::Bad(_) => return refused(401, "unauthorized"),
            Caller::Revoked => return refused(401, "token_revoked"),
            Caller::NoPlan => return refused(402, "no_plan"),
            Caller::Basic => return refused(402, "feature_not_included"),
            _ => {}
        }
        // Parameters, in the documented order of each endpoint; a known one given twice is
        // invalid; unknown ones are ignored.
        let (path_param, known): (Option<(&'static str, &Vec<u8>)>, &[&'static str]) = match &case.path {
            Path::Meetings => (None, &["since", "until", "limit", "cursor"]),
            Path::Meeting(id) => (Some(("meeting_id", id)), &["include"]),
            Path::ActionItems => (None, &["status", "assignee_human_id", "meeting_id", "limit", "cursor"]),
            Path::SharedNotes => (None, &["q", "limit", "cursor"]),
            Path::SharedNote(id) => (Some(("shared_note_id", id)), &[]),
            Path::Teams => (None, &[]),
            Path::TeamActionItems(id) => (Some(("team_id", id)), &["status", "limit"]),
            Path::Unknown(_) => unreachable!(),
        };
        let invalid = |param: &'static str| Expected { status: 400, code: Some("invalid_request"), param: Some(param), limited: false };
        if let Some((name, id)) = path_param {
            if !identifier_ok(std::str::from_utf8(id).ok()) {
                return invalid(name);
            }
        }
        for &name in known {
            // A pair written without `=` has the empty value.
            let values: Vec<&[u8]> =
                case.pairs.iter().filter(|pair| pair.key == name.as_bytes()).map(|pair| pair.value.as_deref().unwrap_or_default()).collect();
            match values.as_slice() {
                [] => {}
                [value] if value_ok(name, &case.path, std::str::from_utf8(value).ok()) => {}
                _ => return invalid(name),
            }
        }
        // Limits 2 and 6: it counts, unless the period's requests are used up.
        let token = case.caller.token().expect("a known caller");
        let counted = self.counted.entry(token).or_default();
        if *counted >= case.caller.quota() {
            return Expected { status: 402, code: Some("quota_exhausted"), param: None, limited: true };
        }
        *counted += 1;
        let id = |id: &Vec<u8>| String::from_utf8(id.clone()).expect("checked above");
        let found = |status: u16, code: &'static str, visible: bool| {
            if visible {
                Expected { status: 200, code: None, param: None, limited: true }
            } else {
                Expected { status, code: Some(code), param: None, limited: true }
            }
        };
        match (&case.path, case.caller) {
            (Path::Meeting(meeting), caller) => {
                let visible: &[&str] = match caller {
                    Caller::Alice => &["mtg_a1", "mtg_a2", "mtg_a3", "mtg_a4", "mtg_a5"],
                    Caller::Bob => &["mtg_b1"],
                    _ => &[],
                };
                found(404, "meeting_not_found", visible.contains(&id(meeting).as_str()))
            }
            (Path::SharedNote(share), caller) => {
                let visible: &[&str] = match caller {
                    Caller::Alice => &["shr_team", "shr_direct"],
                    Caller::Bob => &["shr_own"],
                    _ => &[],
                };
                found(404, "shared_note_not_found", visible.contains(&id(share).as_str()))
            }
            (Path::TeamActionItems(team), caller) => match (caller, id(team).as_str()) {
                (Caller::Alice, "team_design") | (Caller::Bob, "team_design" | "team_secret") => found(404, "team_not_found", true),
                (Caller::Alice, "team_free") => Expected { status: 402, code: Some("team_plan_required"), param: None, limited: true },
                _ => found(404, "team_not_found", false),
            },
            _ => found(404, "", true),
        }
    }
}

#[test]
fn errors_generated_requests_get_exactly_what_the_rules_say_and_never_a_5xx() {
    // Conventions 1, 4, 5, 7; Authentication 7–8; Errors (every code, its status and its
    // fields); Limits 2, 3, 6; every endpoint's parameters.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let world = runtime.block_on(World::with_config(&standard_events(), RestConfig { rate_limit_per_minute: 1_000_000_000, ..RestConfig::default() }));
    let model = std::cell::RefCell::new(Model { counted: HashMap::new() });
    let cases: u32 = std::env::var("RECAP_GENERATED_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(3000);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&case(), |case| {
        let uri = case.uri();
        let expected = model.borrow_mut().expect(&case);
        let mut request = Request::builder().method(case.method.clone()).uri(&uri);
        if let Some(authorization) = case.authorization() {
            request = request.header("authorization", authorization);
        }
        let response = runtime.block_on(world.send(request.body(Body::empty()).expect("a request")));
        let context = format!("{} {uri} as {:?}: {}", case.method, case.caller, response.text);
        prop_assert_eq!(response.status.as_u16(), expected.status, "{}", context);
        prop_assert!(response.header("x-request-id").is_some(), "convention 4: {}", context);
        for name in ["x-quota-limit", "x-quota-remaining", "x-quota-reset"] {
            prop_assert_eq!(response.header(name).is_some(), expected.limited, "{} only where the limiter was asked: {}", name, context);
        }
        if expected.limited {
            let used = *model.borrow().counted.get(case.caller.token().expect("a known caller")).expect("counted");
            let quota = case.caller.quota();
            let limit = quota.to_string();
            prop_assert_eq!(response.header("x-quota-limit"), Some(limit.as_str()), "{}", context);
            prop_assert_eq!(response.remaining(), quota - used, "{}", context);
        }
        if case.method == Method::HEAD {
            prop_assert_eq!(response.header("allow"), Some("GET"), "{}", context);
            return Ok(());
        }
        if let Some(token) = case.caller.token() {
            prop_assert!(!response.text.contains(token), "the token is never echoed: {}", context);
        }
        match expected.code {
            None => {
                let data = &response.json["data"];
                match &case.path {
                    // The identifier asked for is the one answered.
                    Path::Meeting(id) | Path::SharedNote(id) => prop_assert_eq!(data["id"].as_str().map(str::as_bytes), Some(id.as_slice()), "{}", context),
                    Path::Teams => prop_assert!(data.is_array(), "{}", context),
                    // No page is longer than its limit (default 50).
                    _ => {
                        let limit = case
                            .pairs
                            .iter()
                            .find(|pair| pair.key == b"limit")
                            .and_then(|pair| std::str::from_utf8(pair.value.as_deref().unwrap_or_default()).ok()?.parse().ok())
                            .unwrap_or(50);
                        let entries = data.as_array().map_or(0, Vec::len);
                        prop_assert!(data.is_array() && entries <= limit, "{} entries, limit {}: {}", entries, limit, context);
                    }
                }
            }
            Some(code) => {
                let extra: &[&str] = match code {
                    "invalid_request" => &["param"],
                    "quota_exhausted" => &["used", "limit", "resets_at"],
                    "feature_not_included" => &["feature"],
                    _ => &[],
                };
                response.assert_error(expected.status, code, extra);
                prop_assert_eq!(response.json["error"]["param"].as_str(), expected.param, "{}", context);
                match code {
                    "method_not_allowed" => prop_assert_eq!(response.header("allow"), Some("GET"), "{}", context),
                    "unauthorized" | "token_revoked" => prop_assert!(response.header("www-authenticate").is_some(), "{}", context),
                    "feature_not_included" => prop_assert_eq!(response.json["error"]["feature"].as_str(), Some("public_api"), "{}", context),
                    "quota_exhausted" => {
                        let quota = case.caller.quota();
                        prop_assert_eq!(response.json["error"]["used"].as_u64(), Some(quota), "{}", context);
                        prop_assert_eq!(response.json["error"]["limit"].as_u64(), Some(quota), "{}", context);
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
