//! OpenTelemetry for every role: logs, traces and metrics set up once per process.
//!
//! - Logs: `tracing` events to standard error, filtered by `RECAP_LOG` (default `info`).
//! - Traces: `tracing` spans of the recap crates become OpenTelemetry spans (through
//!   tracing-opentelemetry) exported over OTLP http/protobuf when an
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set; off
//!   otherwise, and then spans are never even built. Incoming W3C `traceparent` /
//!   `tracestate` headers are honoured.
//! - Metrics: one meter provider, always read by `/metrics` (Prometheus text) and also
//!   exported over OTLP when an endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//!   `..._METRICS_ENDPOINT`) is set, every `OTEL_METRIC_EXPORT_INTERVAL` ms.
//!
//! The standard variables are read by the OpenTelemetry SDK itself (`OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_TRACES_SAMPLER`,
//! `OTEL_BSP_*`, ...); `OTEL_SDK_DISABLED=true` turns both exports off.
//! [`http_layer`] gives the REST and MCP listeners their server span and the
//! `http.server.request.duration` histogram.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::metrics::Histogram;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use recap_access::telemetry::{ErrorCode, Route};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Bucket bounds of `http.server.request.duration`, in seconds: the semantic
/// conventions' advice, extended below 5 ms where this service's answers live.
const HTTP_BUCKETS: [f64; 17] = [0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0];

/// What the process keeps to serve `/metrics` and to flush the exports on exit.
#[derive(Clone)]
pub struct Telemetry {
    registry: prometheus::Registry,
    meters: SdkMeterProvider,
    tracer: Option<SdkTracerProvider>,
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|value| !value.trim().is_empty())
}

fn sdk_disabled() -> bool {
    std::env::var("OTEL_SDK_DISABLED").is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"))
}

/// Whether a signal is exported: an endpoint for it (or the common one) is set, its
/// `OTEL_<SIGNAL>_EXPORTER` is not `none`, and the SDK is not disabled.
fn exported(signal_endpoint: &str, exporter_variable: &str) -> bool {
    let chosen = std::env::var(exporter_variable).map(|value| value.trim().to_ascii_lowercase()).unwrap_or_default();
    !sdk_disabled() && chosen != "none" && (env_set("OTEL_EXPORTER_OTLP_ENDPOINT") || env_set(signal_endpoint))
}

fn resource(role: &'static str) -> Resource {
    // What the environment says wins (the SDK reads OTEL_RESOURCE_ATTRIBUTES and
    // OTEL_SERVICE_NAME); ours fill the gaps. The SDK's default name is
    // `unknown_service`; ours is `recap`.
    let given = std::env::var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default();
    let mut builder = Resource::builder().with_attribute(KeyValue::new("recap.role", role));
    if !given.contains("service.version=") {
        builder = builder.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    }
    if !env_set("OTEL_SERVICE_NAME") && !given.contains("service.name=") {
        builder = builder.with_service_name("recap");
    }
    builder.build()
}

impl Telemetry {
    /// Installs the process's subscriber, meter provider and propagator. Call once, at
    /// start, from inside the runtime or not (exports run on their own threads).
    pub fn init(role: &'static str) -> Telemetry {
        let resource = resource(role);
        let protocol = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default();
        let mut warnings = Vec::new();
        if !protocol.is_empty() && protocol != "http/protobuf" {
            warnings.push(format!("OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported; exporting with http/protobuf"));
        }

        let registry = prometheus::Registry::new();
        let mut meters = SdkMeterProvider::builder().with_resource(resource.clone());
        match opentelemetry_prometheus::exporter().with_registry(registry.clone()).without_target_info().build() {
            Ok(reader) => meters = meters.with_reader(reader),
            Err(error) => warnings.push(format!("/metrics is empty: {error}")),
        }
        if exported("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER") {
            match opentelemetry_otlp::MetricExporter::builder().with_http().build() {
                Ok(exporter) => meters = meters.with_periodic_exporter(exporter),
                Err(error) => warnings.push(format!("OTLP metrics are off: {error}")),
            }
        }
        let meters = meters.build();
        opentelemetry::global::set_meter_provider(meters.clone());

        let mut tracer = None;
        if exported("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER") {
            match opentelemetry_otlp::SpanExporter::builder().with_http().build() {
                Ok(exporter) => tracer = Some(SdkTracerProvider::builder().with_resource(resource).with_batch_exporter(exporter).build()),
                Err(error) => warnings.push(format!("OTLP traces are off: {error}")),
            }
        }
        opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());

        // Logs take events only: spans then cost nothing unless traces are exported.
        let log_filter = tracing_subscriber::EnvFilter::try_from_env("RECAP_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let events_only = tracing_subscriber::filter::filter_fn(|metadata| metadata.is_event());
        match &tracer {
            Some(provider) => {
                let traces = tracing_opentelemetry::layer()
                    .with_tracer(provider.tracer("recap"))
                    .with_location(false)
                    .with_threads(false)
                    .with_tracked_inactivity(false)
                    .with_target(false)
                    .with_filter(tracing_subscriber::filter::filter_fn(|metadata| metadata.is_span() && metadata.target().starts_with("recap")));
                let logs = tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(ansi)
                    .with_filter(tracing_subscriber::filter::FilterExt::and(events_only, log_filter));
                let _ = tracing_subscriber::registry().with(logs).with(traces).try_init();
            }
            // Without traces, global filters: a span's callsite is then `never` and
            // `info_span!` costs one cached check (per-layer filters would still have
            // the registry build every span).
            None => {
                let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi);
                let _ = tracing_subscriber::registry().with(events_only).with(log_filter).with(logs).try_init();
            }
        }
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        if tracer.is_some() {
            tracing::info!(role, "exporting traces over OTLP");
        }
        Telemetry { registry, meters, tracer }
    }

    /// The metrics of this process in the Prometheus text format.
    pub fn prometheus_text(&self) -> String {
        use prometheus::Encoder;
        let mut buffer = Vec::new();
        if let Err(error) = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(%error, "encoding /metrics");
        }
        String::from_utf8(buffer).unwrap_or_default()
    }

    /// Flushes and stops the exports (spans of the last requests, the last metrics).
    pub fn shutdown(&self) {
        if let Some(tracer) = &self.tracer {
            let _ = tracer.shutdown();
        }
        let _ = self.meters.shutdown();
    }
}

/// The process-wide instruments registered by roles (observable gauges and counters
/// whose callbacks read live counters).
pub fn meter() -> opentelemetry::metrics::Meter {
    opentelemetry::global::meter(recap_access::telemetry::SCOPE)
}

fn request_duration() -> &'static Histogram<f64> {
    static HISTOGRAM: OnceLock<Histogram<f64>> = OnceLock::new();
    HISTOGRAM.get_or_init(|| {
        meter()
            .f64_histogram("http.server.request.duration")
            .with_unit("s")
            .with_description("Duration of HTTP server requests")
            .with_boundaries(HTTP_BUCKETS.to_vec())
            .build()
    })
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

/// The semantic conventions' method values: known methods as they are, others `_OTHER`.
pub(crate) fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "_OTHER",
    }
}

/// The `http.route` of the answers the server loop makes before any router
/// (`src/http.rs`): a request head malformed, too large or too slow, and a connection
/// past the cap.
pub const REFUSED_BEFORE_ROUTING: &str = "(refused before routing)";

/// Counts an answer made before routing in `http.server.request.duration`, beside the
/// routers' answers: its method (`_OTHER` when none was read), status and wire code,
/// and the time from the first byte of its head to the answer.
pub(crate) fn record_refusal(method: &'static str, status: axum::http::StatusCode, code: &'static str, duration: std::time::Duration) {
    let attributes = [
        KeyValue::new("http.request.method", method),
        KeyValue::new("http.response.status_code", i64::from(status.as_u16())),
        KeyValue::new("http.route", REFUSED_BEFORE_ROUTING),
        KeyValue::new("error.type", code),
    ];
    request_duration().record(duration.as_secs_f64(), &attributes);
}

/// Adds the server span and the request-duration histogram to a listener's router.
pub fn http_layer(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn(observe))
}

async fn observe(request: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = method_name(request.method());
    // A reference count, not a copy: the route is copied only when no handler named it.
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let span = tracing::info_span!(
        "http",
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        http.route = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        url.path = tracing::field::Empty,
        error.type = tracing::field::Empty,
        recap.request_id = tracing::field::Empty,
    );
    let traced = !span.is_disabled();
    if traced {
        span.record("url.path", request.uri().path());
        let parent = opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&HeaderExtractor(request.headers())));
        let _ = span.set_parent(parent);
    }
    let response = next.run(request).instrument(span.clone()).await;

    let status = response.status();
    let route: Option<opentelemetry::StringValue> = response
        .extensions()
        .get::<Route>()
        .map(|route| route.0.into())
        .or_else(|| matched.map(|path| opentelemetry::StringValue::from(path.as_str().to_owned())));
    // The wire code names what went wrong; a 5xx without one (a panic caught by the
    // server, a layer's refusal) is named by its status, as the conventions say.
    let error: Option<opentelemetry::StringValue> = match response.extensions().get::<ErrorCode>() {
        Some(code) => Some(code.0.into()),
        None if status.is_server_error() => Some(status.as_str().to_owned().into()),
        None => None,
    };
    let mut attributes = Vec::with_capacity(4);
    attributes.push(KeyValue::new("http.request.method", method));
    attributes.push(KeyValue::new("http.response.status_code", i64::from(status.as_u16())));
    if let Some(route) = &route {
        attributes.push(KeyValue::new("http.route", route.clone()));
    }
    if let Some(error) = &error {
        attributes.push(KeyValue::new("error.type", error.clone()));
    }
    request_duration().record(start.elapsed().as_secs_f64(), &attributes);

    if traced {
        // The route is known only now, after the span started: rename it (recording
        // `otel.name` no longer applies once the span exists).
        let name = match &route {
            Some(route) => format!("{method} {}", route.as_str()),
            None => method.to_owned(),
        };
        span.context().span().update_name(name);
        if let Some(route) = &route {
            span.record("http.route", route.as_str());
        }
        span.record("http.response.status_code", i64::from(status.as_u16()));
        if let Some(error) = &error {
            span.record("error.type", error.as_str());
        }
        if status.is_server_error() {
            span.record("otel.status_code", "error");
        }
        if let Some(request_id) = response.headers().get("x-request-id").and_then(|value| value.to_str().ok()) {
            span.record("recap.request_id", request_id);
        }
    }
    response
}

/// Publishes a projector's live counters: `recap.projector.events{outcome}`,
/// `recap.projector.fenced` and `recap.projector.partition_lag{partition}` (Kafka),
/// `recap.projector.log_lag`
/// (bytes of the embedded log not applied yet) and `recap.projector.newest_event_age`.
pub fn observe_projector(stats: Arc<recap_projector::Stats>, log: Option<recap_projector::EventLog>) {
    use std::sync::atomic::Ordering::Relaxed;
    let meter = meter();
    let counters = stats.clone();
    meter
        .u64_observable_counter("recap.projector.events")
        .with_unit("{event}")
        .with_description("Events the projector consumed, by outcome")
        .with_callback(move |observer| {
            let snapshot = counters.snapshot();
            observer.observe(snapshot.applied, &[KeyValue::new("outcome", "applied")]);
            observer.observe(snapshot.stale, &[KeyValue::new("outcome", "stale")]);
            observer.observe(snapshot.skipped_unknown, &[KeyValue::new("outcome", "skipped_unknown_type")]);
            observer.observe(snapshot.dead_lettered, &[KeyValue::new("outcome", "dead_lettered")]);
        })
        .build();
    if log.is_none() {
        let fenced = stats.clone();
        meter
            .u64_observable_counter("recap.projector.fenced")
            .with_unit("{message}")
            .with_description("Kafka messages dropped unapplied because their partition was revoked; its next holder applies them")
            .with_callback(move |observer| observer.observe(fenced.fenced.load(Relaxed), &[]))
            .build();
    }
    let lags = stats.clone();
    meter
        .i64_observable_gauge("recap.projector.partition_lag")
        .with_unit("{event}")
        .with_description("Events of a partition not applied yet (high watermark minus committed offset)")
        .with_callback(move |observer| {
            if let Ok(lags) = lags.partition_lag.lock() {
                for (partition, lag) in lags.iter() {
                    observer.observe(*lag, &[KeyValue::new("partition", partition.clone())]);
                }
            }
        })
        .build();
    if let Some(log) = log {
        let position = stats.clone();
        meter
            .u64_observable_gauge("recap.projector.log_lag")
            .with_unit("By")
            .with_description("Bytes of the embedded event log not applied yet")
            .with_callback(move |observer| {
                let length = log.len().unwrap_or_default();
                observer.observe(length.saturating_sub(position.snapshot().position), &[]);
            })
            .build();
    }
    meter
        .f64_observable_gauge("recap.projector.newest_event_age")
        .with_unit("s")
        .with_description("Age of the newest applied event (its occurred_at), a measure of freshness")
        .with_callback(move |observer| {
            let newest = stats.newest_occurred_at_us.load(Relaxed);
            if newest > 0 {
                observer.observe((recap_readmodel::driver::now_micros() as f64 - newest as f64).max(0.0) / 1e6, &[]);
            }
        })
        .build();
}

/// Publishes `recap.limiter.fail_open`: requests decided by the local limiter because
/// Redis did not answer.
pub fn observe_fail_open(limiter: Arc<recap_redis::RedisLimiter>) {
    meter()
        .u64_observable_counter("recap.limiter.fail_open")
        .with_unit("{request}")
        .with_description("Counted requests decided by the per-process limiter because Redis did not answer")
        .with_callback(move |observer| observer.observe(limiter.fail_open_total.load(std::sync::atomic::Ordering::Relaxed), &[]))
        .build();
}

#[cfg(test)]
mod tests {
    #[test]
    fn spans_are_not_even_built_when_traces_are_not_exported() {
        // The test process has no OTEL_EXPORTER_OTLP_* variable: only logs are on, and a
        // span must cost a disabled-callsite check, nothing more.
        assert!(!super::exported("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"), "run without OTEL_* variables");
        let _telemetry = super::Telemetry::init("test");
        assert!(tracing::info_span!("store", otel.kind = "client").is_disabled());
        assert!(tracing::event_enabled!(tracing::Level::INFO), "events still reach the log");
    }
}
