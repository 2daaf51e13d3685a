//! A real OpenTelemetry Collector for the telemetry tests: the distribution
//! `scripts/otel-collector.sh` builds (OTLP receiver, file and debug exporters,
//! health_check extension), started on free loopback ports with an OTLP/HTTP receiver
//! and a file exporter per signal writing OTLP/JSON lines to a temporary directory.
//! Ready means the health_check extension answers 200 (every component has started);
//! dropped means killed. Readers parse what arrived so far; the `wait_*` helpers poll
//! until a deadline and, when it passes, panic with a summary of what did arrive.
//!
//! The binary is `$RECAP_OTELCOL` (what `make test` exports), else whatever
//! `scripts/otel-collector.sh` prints (it builds the collector once, then answers at once).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long the `wait_*` helpers wait for something to arrive.
pub const ARRIVAL: Duration = Duration::from_secs(30);

pub const SPAN_KIND_INTERNAL: i64 = 1;
pub const SPAN_KIND_SERVER: i64 = 2;
pub const SPAN_KIND_CLIENT: i64 = 3;
pub const SPAN_KIND_PRODUCER: i64 = 4;
pub const SPAN_KIND_CONSUMER: i64 = 5;
pub const STATUS_UNSET: i64 = 0;
pub const STATUS_OK: i64 = 1;
pub const STATUS_ERROR: i64 = 2;

/// The collector binary; panics with what to do when there is none.
pub fn collector_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("RECAP_OTELCOL") {
            assert!(!path.is_empty(), "RECAP_OTELCOL is empty: scripts/otel-collector.sh did not build the OpenTelemetry Collector (see its output above)");
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "RECAP_OTELCOL={} is not a file: build the collector with scripts/otel-collector.sh (make test does) and point RECAP_OTELCOL at what it prints",
                path.display()
            );
            return path;
        }
        // The workspace root is the test kit's parent directory.
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/otel-collector.sh");
        let output = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|error| panic!("RECAP_OTELCOL is not set and {} did not run: {error}", script.display()));
        assert!(
            output.status.success(),
            "RECAP_OTELCOL is not set and {} failed to build the OpenTelemetry Collector (it needs go and the Go module proxy)",
            script.display()
        );
        let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        assert!(path.is_file(), "{} printed {}, which is not a file", script.display(), path.display());
        path
    })
    .clone()
}

/// A free loopback port (free when asked; the collector's start retries on a clash).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).map(|address| address.port()).expect("a free loopback port")
}

/// A running collector.
pub struct Collector {
    child: Option<Child>,
    /// Where the exporters write; removed with the collector.
    _dir: tempfile::TempDir,
    /// `http://127.0.0.1:<port>`: the value for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    pub port: u16,
    traces: PathBuf,
    metrics: PathBuf,
    log: PathBuf,
}

impl Collector {
    /// A collector whose OTLP/HTTP receiver listens on a free loopback port.
    pub fn start() -> Collector {
        for _ in 0..5 {
            if let Some(collector) = Collector::try_start(free_port()) {
                return collector;
            }
        }
        panic!("the OpenTelemetry Collector did not start on five free ports in a row");
    }

    /// A collector whose OTLP/HTTP receiver listens on `127.0.0.1:<port>`; waits up to
    /// `patience` for the port to be free.
    pub fn start_on(port: u16, patience: Duration) -> Collector {
        let deadline = Instant::now() + patience;
        loop {
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                if let Some(collector) = Collector::try_start(port) {
                    return collector;
                }
            }
            assert!(Instant::now() < deadline, "127.0.0.1:{port} stayed busy: the collector could not listen there");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn try_start(port: u16) -> Option<Collector> {
        let dir = tempfile::tempdir().expect("temp dir");
        let health_port = free_port();
        let traces = dir.path().join("traces.jsonl");
        let metrics = dir.path().join("metrics.jsonl");
        let log = dir.path().join("collector.log");
        let config = dir.path().join("config.yaml");
        // Quoted YAML strings are JSON strings; the collector's own telemetry is off so
        // that it opens no port of its own.
        let text = format!(
            r#"extensions:
  health_check:
    endpoint: {health}
receivers:
  otlp:
    protocols:
      http:
        endpoint: {receiver}
exporters:
  file/traces:
    path: {traces}
    format: json
    flush_interval: 50ms
  file/metrics:
    path: {metrics}
    format: json
    flush_interval: 50ms
  debug:
    verbosity: basic
service:
  extensions: [health_check]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces, debug]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics, debug]
"#,
            health = json!(format!("127.0.0.1:{health_port}")),
            receiver = json!(format!("127.0.0.1:{port}")),
            traces = json!(traces.to_string_lossy()),
            metrics = json!(metrics.to_string_lossy()),
        );
        std::fs::write(&config, text).expect("write the collector config");
        let log_file = std::fs::File::create(&log).expect("collector log");
        let child = Command::new(collector_bin())
            .arg("--config")
            .arg(format!("file:{}", config.display()))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("collector log"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|error| panic!("start {}: {error}", collector_bin().display()));
        let mut collector = Collector { child: Some(child), _dir: dir, endpoint: format!("http://127.0.0.1:{port}"), port, traces, metrics, log };
        let health = format!("http://127.0.0.1:{health_port}/");
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(2))).build().into();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(response) = agent.get(&health).call() {
                if response.status() == 200 {
                    return Some(collector);
                }
            }
            if let Some(status) = collector.child.as_mut().and_then(|child| child.try_wait().ok().flatten()) {
                // Most likely a port taken between asking and listening: the caller retries.
                eprintln!("the OpenTelemetry Collector exited ({status}) while starting:\n{}", collector.log_text());
                collector.child = None;
                return None;
            }
            assert!(Instant::now() < deadline, "the OpenTelemetry Collector never became healthy:\n{}", collector.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The collector's own output (the debug exporter's one line per batch).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Everything exported so far, as written (both signals).
    pub fn raw(&self) -> String {
        let mut text = std::fs::read_to_string(&self.traces).unwrap_or_default();
        text.push_str(&std::fs::read_to_string(&self.metrics).unwrap_or_default());
        text
    }

    /// Posts an OTLP/JSON export request to the receiver (`/v1/traces` or `/v1/metrics`).
    pub fn post_json(&self, signal_path: &str, body: &Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let url = format!("{}{signal_path}", self.endpoint);
        let mut response = agent.post(&url).header("Content-Type", "application/json").send(body.to_string()).expect("post to the collector");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        assert_eq!(status, 200, "{url} answered {status}: {text}");
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        let mut spans = Vec::new();
        for request in read_lines(&self.traces) {
            for resource_spans in array(&request["resourceSpans"]) {
                let resource = Attributes::parse(&resource_spans["resource"]["attributes"]);
                for scope_spans in array(&resource_spans["scopeSpans"]) {
                    let scope = scope_spans["scope"]["name"].as_str().unwrap_or_default().to_string();
                    for span in array(&scope_spans["spans"]) {
                        spans.push(Span {
                            resource: resource.clone(),
                            scope: scope.clone(),
                            trace_id: span["traceId"].as_str().unwrap_or_default().to_string(),
                            span_id: span["spanId"].as_str().unwrap_or_default().to_string(),
                            parent_span_id: span["parentSpanId"].as_str().unwrap_or_default().to_string(),
                            name: span["name"].as_str().unwrap_or_default().to_string(),
                            kind: integer(&span["kind"]).unwrap_or(0),
                            attributes: Attributes::parse(&span["attributes"]),
                            status_code: integer(&span["status"]["code"]).unwrap_or(STATUS_UNSET),
                        });
                    }
                }
            }
        }
        spans
    }

    /// Every metric data point received so far, oldest export first.
    pub fn points(&self) -> Vec<Point> {
        let mut points = Vec::new();
        for request in read_lines(&self.metrics) {
            for resource_metrics in array(&request["resourceMetrics"]) {
                let resource = Attributes::parse(&resource_metrics["resource"]["attributes"]);
                for scope_metrics in array(&resource_metrics["scopeMetrics"]) {
                    let scope = scope_metrics["scope"]["name"].as_str().unwrap_or_default().to_string();
                    for metric in array(&scope_metrics["metrics"]) {
                        let (kind, data) = if let Some(sum) = metric.get("sum") {
                            (MetricKind::Sum { monotonic: sum["isMonotonic"] == true }, sum)
                        } else if let Some(gauge) = metric.get("gauge") {
                            (MetricKind::Gauge, gauge)
                        } else if let Some(histogram) = metric.get("histogram") {
                            (MetricKind::Histogram, histogram)
                        } else if let Some(histogram) = metric.get("exponentialHistogram") {
                            (MetricKind::ExponentialHistogram, histogram)
                        } else if let Some(summary) = metric.get("summary") {
                            (MetricKind::Summary, summary)
                        } else {
                            continue;
                        };
                        for point in array(&data["dataPoints"]) {
                            let value = match kind {
                                MetricKind::Sum { .. } | MetricKind::Gauge => {
                                    number(&point["asDouble"]).or_else(|| integer(&point["asInt"]).map(|value| value as f64)).unwrap_or(0.0)
                                }
                                _ => number(&point["sum"]).unwrap_or(0.0),
                            };
                            points.push(Point {
                                resource: resource.clone(),
                                scope: scope.clone(),
                                name: metric["name"].as_str().unwrap_or_default().to_string(),
                                unit: metric["unit"].as_str().unwrap_or_default().to_string(),
                                kind,
                                attributes: Attributes::parse(&point["attributes"]),
                                time_unix_nano: integer(&point["timeUnixNano"]).unwrap_or(0),
                                value,
                                count: integer(&point["count"]).unwrap_or(0) as u64,
                            });
                        }
                    }
                }
            }
        }
        points
    }

    /// Polls `probe` over what arrived until it answers, or panics at the deadline
    /// naming `what` and summing up what did arrive.
    pub fn wait_until<T>(&self, what: &str, mut probe: impl FnMut(&[Span], &[Point]) -> Option<T>) -> T {
        let deadline = Instant::now() + ARRIVAL;
        loop {
            let spans = self.spans();
            let points = self.points();
            if let Some(found) = probe(&spans, &points) {
                return found;
            }
            if Instant::now() > deadline {
                panic!("{what}: not exported within {ARRIVAL:?}\n{}", summary(&spans, &points));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The first span matching `matches`, once it arrived.
    pub fn wait_span(&self, what: &str, matches: impl Fn(&Span) -> bool) -> Span {
        self.wait_until(what, |spans, _| spans.iter().find(|span| matches(span)).cloned())
    }

    /// The newest data point of metric `name` matching `matches`, once one arrived.
    pub fn wait_point(&self, name: &str, what: &str, matches: impl Fn(&Point) -> bool) -> Point {
        self.wait_until(&format!("{name}: {what}"), |_, points| newest(points, name, &matches))
    }

    /// Waits until the newest data point of metric `name` matching `matches` satisfies
    /// `done` (cumulative counters and gauges move while exports go on); returns it.
    pub fn wait_point_until(&self, name: &str, what: &str, matches: impl Fn(&Point) -> bool, done: impl Fn(&Point) -> bool) -> Point {
        self.wait_until(&format!("{name}: {what}"), |_, points| newest(points, name, &matches).filter(|point| done(point)))
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let log = self.log_text();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("-- the OpenTelemetry Collector's last lines:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
    }
}

/// The newest point (by time, then by arrival) of metric `name` matching `matches`.
pub fn newest(points: &[Point], name: &str, matches: impl Fn(&Point) -> bool) -> Option<Point> {
    points
        .iter()
        .enumerate()
        .filter(|(_, point)| point.name == name && matches(point))
        .max_by_key(|(index, point)| (point.time_unix_nano, *index))
        .map(|(_, point)| point.clone())
}

/// What arrived, in a few lines: for the panic messages of the `wait_*` helpers.
pub fn summary(spans: &[Span], points: &[Point]) -> String {
    let mut span_lines: Vec<String> = spans
        .iter()
        .map(|span| format!("  span {:?} kind {} status {} attributes {} resource {}", span.name, span.kind, span.status_code, span.attributes, span.resource))
        .collect();
    span_lines.sort();
    span_lines.dedup();
    let mut point_lines: Vec<String> =
        points.iter().map(|point| format!("  metric {} ({:?}, unit {:?}) attributes {}", point.name, point.kind, point.unit, point.attributes)).collect();
    point_lines.sort();
    point_lines.dedup();
    format!("{} spans arrived:\n{}\n{} data points arrived:\n{}", spans.len(), span_lines.join("\n"), points.len(), point_lines.join("\n"))
}

/// One span as exported.
#[derive(Clone, Debug)]
pub struct Span {
    pub resource: Attributes,
    pub scope: String,
    /// Lowercase hex, as in OTLP/JSON.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// One of the `SPAN_KIND_*` values.
    pub kind: i64,
    pub attributes: Attributes,
    /// One of the `STATUS_*` values.
    pub status_code: i64,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&AnyValue> {
        self.attributes.get(key)
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.attributes.str(key)
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        self.attributes.int(key)
    }

    pub fn service(&self) -> Option<&str> {
        self.resource.str("service.name")
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetricKind {
    Sum { monotonic: bool },
    Gauge,
    Histogram,
    ExponentialHistogram,
    Summary,
}

/// One metric data point as exported.
#[derive(Clone, Debug)]
pub struct Point {
    pub resource: Attributes,
    pub scope: String,
    pub name: String,
    pub unit: String,
    pub kind: MetricKind,
    pub attributes: Attributes,
    pub time_unix_nano: i64,
    /// The value of a sum or gauge point; the sum of a histogram point.
    pub value: f64,
    /// The count of a histogram point (0 for sums and gauges).
    pub count: u64,
}

impl Point {
    pub fn str(&self, key: &str) -> Option<&str> {
        self.attributes.str(key)
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        self.attributes.int(key)
    }

    pub fn service(&self) -> Option<&str> {
        self.resource.str("service.name")
    }
}

/// An attribute value, typed as OTLP types it.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyValue {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    Other(Value),
}

impl std::fmt::Display for AnyValue {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnyValue::Str(value) => write!(formatter, "{value:?}"),
            AnyValue::Int(value) => write!(formatter, "{value}i"),
            AnyValue::Double(value) => write!(formatter, "{value}d"),
            AnyValue::Bool(value) => write!(formatter, "{value}"),
            AnyValue::Other(value) => write!(formatter, "{value}"),
        }
    }
}

/// Key-value attributes, in their exported order.
#[derive(Clone, Debug, Default)]
pub struct Attributes(pub Vec<(String, AnyValue)>);

impl Attributes {
    fn parse(list: &Value) -> Attributes {
        Attributes(
            array(list)
                .iter()
                .map(|entry| {
                    let value = &entry["value"];
                    let typed = if let Some(text) = value.get("stringValue").and_then(Value::as_str) {
                        AnyValue::Str(text.to_string())
                    } else if let Some(int) = value.get("intValue").and_then(integer) {
                        AnyValue::Int(int)
                    } else if let Some(double) = value.get("doubleValue").and_then(number) {
                        AnyValue::Double(double)
                    } else if let Some(flag) = value.get("boolValue").and_then(Value::as_bool) {
                        AnyValue::Bool(flag)
                    } else {
                        AnyValue::Other(value.clone())
                    };
                    (entry["key"].as_str().unwrap_or_default().to_string(), typed)
                })
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&AnyValue> {
        self.0.iter().find(|(name, _)| name == key).map(|(_, value)| value)
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The value when it is a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(AnyValue::Str(value)) => Some(value),
            _ => None,
        }
    }

    /// The value when it is an integer.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key) {
            Some(AnyValue::Int(value)) => Some(*value),
            _ => None,
        }
    }
}

impl std::fmt::Display for Attributes {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries: Vec<String> = self.0.iter().map(|(key, value)| format!("{key}={value}")).collect();
        write!(formatter, "{{{}}}", entries.join(", "))
    }
}

/// The JSON lines of a file exporter's output; a line still being written is skipped.
fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// OTLP/JSON writes 64-bit integers as strings; accepts both.
fn integer(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_str().and_then(|text| text.parse().ok()))
}

fn number(value: &Value) -> Option<f64> {
    value.as_f64().or_else(|| value.as_str().and_then(|text| text.parse().ok()))
}

/// Random W3C ids: a 32-hex-digit trace id and a 16-hex-digit span id.
pub fn random_trace_context() -> (String, String) {
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let span_id = uuid::Uuid::new_v4().simple().to_string()[..16].to_string();
    (trace_id, span_id)
}
