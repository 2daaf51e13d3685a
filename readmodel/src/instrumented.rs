//! A [`Driver`] wrapper that reports every store call to OpenTelemetry: a client span
//! per call (`SELECT <table>`, `COUNT <table>`, `BATCH [<table>]`, and `INSERT <table>`
//! for a conditional insert) and the `db.client.operation.duration` histogram. Both
//! drivers get the same names this way, and the drivers themselves stay about storage.
//! Spans cost nothing when no tracing layer wants them; the histogram is recorded
//! always, for `/metrics`.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use opentelemetry::metrics::Histogram;
use opentelemetry::KeyValue;
use tracing::Instrument;

use crate::driver::{BodiesPage, Driver, Mutation, MutationRef, NextChange, Row, ScanRange, StoreError};
use crate::projection::Frozen;
use crate::table::{Table, Val};

/// Bucket bounds in seconds, from an embedded read (microseconds) to a store timeout.
const BUCKETS: [f64; 15] = [0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];

fn duration() -> &'static Histogram<f64> {
    static HISTOGRAM: OnceLock<Histogram<f64>> = OnceLock::new();
    HISTOGRAM.get_or_init(|| {
        opentelemetry::global::meter("recap")
            .f64_histogram("db.client.operation.duration")
            .with_unit("s")
            .with_description("Duration of read-model store operations")
            .with_boundaries(BUCKETS.to_vec())
            .build()
    })
}

/// Wraps a driver; `system` is the `db.system.name` it reports (`lmdb`, `cassandra`).
pub struct Instrumented {
    inner: Arc<dyn Driver>,
    system: &'static str,
}

impl Instrumented {
    pub fn new(inner: Arc<dyn Driver>, system: &'static str) -> Instrumented {
        Instrumented { inner, system }
    }

    async fn observe<T>(
        &self,
        operation: &'static str,
        collection: Option<&'static str>,
        call: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let span = tracing::info_span!(
            "store",
            otel.name = tracing::field::Empty,
            otel.kind = "client",
            db.system.name = self.system,
            db.operation.name = operation,
            db.collection.name = collection,
            error.type = tracing::field::Empty,
        );
        if !span.is_disabled() {
            match collection {
                Some(collection) => span.record("otel.name", format!("{operation} {collection}")),
                None => span.record("otel.name", operation),
            };
        }
        let start = Instant::now();
        let result = call.instrument(span.clone()).await;
        let error = result.as_ref().err().map(|error| match error {
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Corrupt(_) => "corrupt",
            StoreError::Misuse(_) => "misuse",
        });
        if let Some(error) = error {
            span.record("error.type", error);
        }
        record(start.elapsed(), self.system, operation, collection, error);
        result
    }
}

fn record(elapsed: Duration, system: &'static str, operation: &'static str, collection: Option<&'static str>, error: Option<&'static str>) {
    let mut attributes = Vec::with_capacity(4);
    attributes.push(KeyValue::new("db.system.name", system));
    attributes.push(KeyValue::new("db.operation.name", operation));
    if let Some(collection) = collection {
        attributes.push(KeyValue::new("db.collection.name", collection));
    }
    if let Some(error) = error {
        attributes.push(KeyValue::new("error.type", error));
    }
    duration().record(elapsed.as_secs_f64(), &attributes);
}

/// The one table a batch writes to, if it writes to exactly one.
fn single_table<'a>(mut mutations: impl Iterator<Item = MutationRef<'a>>) -> Option<&'static str> {
    let first = mutations.next()?.table;
    mutations.all(|mutation| mutation.table == first).then_some(first.name)
}

#[async_trait]
impl Driver for Instrumented {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        self.observe("SELECT", Some(table.name), self.inner.get(table, partition, clustering)).await
    }

    async fn get_body(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<String>, StoreError> {
        self.observe("SELECT", Some(table.name), self.inner.get_body(table, partition, clustering)).await
    }

    async fn get_many(&self, table: &'static Table, partition: &[Val], keys: &[Vec<Val>]) -> Result<Vec<Option<Row>>, StoreError> {
        self.observe("SELECT", Some(table.name), self.inner.get_many(table, partition, keys)).await
    }

    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.observe("SELECT", Some(table.name), self.inner.scan(table, partition, range, limit)).await
    }

    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        let table = single_table(mutations.iter().map(Mutation::as_ref));
        self.observe("BATCH", table, self.inner.write(mutations)).await
    }

    async fn write_frozen(&self, frozen: Arc<Frozen>) -> Result<(), StoreError> {
        let table = single_table(frozen.mutations());
        self.observe("BATCH", table, self.inner.write_frozen(frozen)).await
    }

    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.observe("INSERT", Some(table.name), self.inner.insert_if_absent(table, partition, clustering, body, expires_at)).await
    }

    async fn scan_bodies(
        &self,
        table: &'static Table,
        partition: &[Val],
        range: &ScanRange,
        skip: usize,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<BodiesPage, StoreError> {
        self.observe("SELECT", Some(table.name), self.inner.scan_bodies(table, partition, range, skip, limit, out)).await
    }

    async fn scan_counted(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<(Vec<Row>, usize), StoreError> {
        self.observe("SELECT", Some(table.name), self.inner.scan_counted(table, partition, range, limit)).await
    }

    async fn count(&self, table: &'static Table, partition: &[Val], range: &ScanRange) -> Result<usize, StoreError> {
        self.observe("COUNT", Some(table.name), self.inner.count(table, partition, range)).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    async fn holds_rows(&self, table: &'static Table) -> Result<bool, StoreError> {
        self.inner.holds_rows(table).await
    }

    fn timeout(&self) -> Duration {
        self.inner.timeout()
    }

    fn change_count(&self, table: &'static Table) -> Option<u64> {
        self.inner.change_count(table)
    }

    fn next_change(&self, table: &'static Table) -> Option<NextChange<'_>> {
        self.inner.next_change(table)
    }

    fn writes_atomically(&self) -> bool {
        self.inner.writes_atomically()
    }
}
