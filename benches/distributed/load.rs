//! Load and baselines: wrk for closed-loop maximums, an open-loop HTTP generator that
//! times every request from its scheduled instant, and the raw-driver loops (the
//! `scylla` crate straight, with the statements, consistency and settings the
//! ScyllaDriver uses) that recap's figures are divided by.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, TryStreamExt};
use recap_readmodel::driver::{now_micros, Mutation, Op};
use recap_readmodel::table::Val;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;
use scylla::value::{CqlValue, Row as CqlRow};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::events::TOKEN;

/// What wrk reached: requests per second and requests completed.
pub struct WrkResult {
    pub rate: f64,
    pub requests: u64,
}

/// Closed loop, keep-alive, `connections` connections, one wrk thread pinned to `core`.
pub fn wrk(url: &str, connections: usize, seconds: u64, core: usize) -> WrkResult {
    let script = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(script.path(), format!("wrk.headers[\"Authorization\"] = \"Bearer {TOKEN}\"\n")).expect("write wrk script");
    let output = std::process::Command::new("taskset")
        .args(["-c", &core.to_string(), "wrk", "-t1", &format!("-c{connections}"), &format!("-d{seconds}s"), "-s"])
        .arg(script.path())
        .arg(url)
        .output()
        .expect("run wrk (apt-get install wrk)");
    assert!(output.status.success(), "wrk failed: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let non_2xx = text.lines().find(|line| line.contains("Non-2xx"));
    assert!(non_2xx.is_none(), "{url}: {non_2xx:?}");
    let rate = text.lines().find_map(|line| line.strip_prefix("Requests/sec:")).and_then(|value| value.trim().parse().ok()).expect("wrk rate");
    let requests = text.lines().find_map(|line| line.trim().split_once(" requests in ")).and_then(|(count, _)| count.trim().parse().ok()).expect("wrk count");
    WrkResult { rate, requests }
}

/// A GET with the bench's token, as bytes on the wire.
pub fn get_request(base_url: &str, path: &str) -> (String, Vec<u8>) {
    let without_scheme = base_url.trim_start_matches("http://");
    let (host, prefix) = without_scheme.split_once('/').unwrap_or((without_scheme, ""));
    let request = format!("GET /{prefix}{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    (host.to_string(), request.into_bytes())
}

pub use recap_testkit::bench::http_client::read_response;

/// One open-loop sample: when it was scheduled (since the start), its latency from the
/// scheduled instant, its status (0: no answer).
#[derive(Clone, Copy)]
pub struct Sample {
    pub at: Duration,
    pub latency_ms: f64,
    pub status: u16,
}

/// Offers `rate` requests per second over `connections` keep-alive connections until
/// `stop` is set (connection k sends its i-th request at `(i * connections + k) / rate`;
/// latency counts from that instant, so a stall is charged to every request it delays).
pub async fn open_loop(address: &str, request: Vec<u8>, rate: f64, connections: usize, stop: Arc<AtomicBool>) -> Vec<Sample> {
    let request = Arc::new(request);
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::with_capacity(connections);
    for k in 0..connections {
        let mut connection = TcpStream::connect(address).await.expect("connect");
        let _ = connection.set_nodelay(true);
        let (request, stop) = (request.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut index = k;
            while !stop.load(Ordering::Relaxed) {
                let scheduled = start + Duration::from_secs_f64(index as f64 / rate);
                tokio::time::sleep_until(scheduled).await;
                let status = if connection.write_all(&request).await.is_ok() { read_response(&mut connection).await.unwrap_or(0) } else { 0 };
                samples.push(Sample { at: scheduled - start, latency_ms: scheduled.elapsed().as_secs_f64() * 1e3, status });
                if status == 0 {
                    break;
                }
                index += connections;
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.unwrap_or_default());
    }
    samples.sort_by_key(|sample| sample.at);
    samples
}

/// (p50, p99, max) of latencies in ms.
pub fn percentiles(latencies: &mut [f64]) -> (f64, f64, f64) {
    if latencies.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    (at(0.5), at(0.99), latencies[latencies.len() - 1])
}

/// A session as the ScyllaDriver opens one: no keyspace of its own, as every statement
/// names its table `keyspace.table`.
pub async fn session(nodes: &[String]) -> Session {
    SessionBuilder::new().known_nodes(nodes).connection_timeout(Duration::from_secs(2)).build().await.expect("connect to the store")
}

/// Prepares as the ScyllaDriver does: its consistency, idempotent, bounded, paged by 1,000.
pub async fn prepare(session: &Session, cql: &str) -> PreparedStatement {
    let mut statement = session.prepare(cql.to_string()).await.unwrap_or_else(|error| panic!("prepare {cql}: {error}"));
    statement.set_consistency(Consistency::LocalQuorum);
    statement.set_is_idempotent(true);
    statement.set_request_timeout(Some(Duration::from_secs(2)));
    statement.set_page_size(1_000);
    statement
}

fn cql_value(value: &Val) -> CqlValue {
    match value {
        Val::Text(text) => CqlValue::Text(text.clone()),
        Val::Int(number) => CqlValue::BigInt(*number),
    }
}

/// The statement and values the ScyllaDriver writes a mutation with.
fn write_statement(keyspace: &str, mutation: &Mutation) -> (String, Vec<CqlValue>) {
    let table = mutation.table;
    let key_columns: Vec<&str> = table.partition.iter().map(|column| column.name).chain(table.clustering.iter().map(|column| column.name)).collect();
    let mut values: Vec<CqlValue> = Vec::with_capacity(key_columns.len() + 4);
    match &mutation.op {
        Op::Put { body, expires_at } => {
            values.extend(mutation.partition.iter().chain(&mutation.clustering).map(cql_value));
            values.push(CqlValue::Text(body.clone()));
            let mut columns = key_columns.clone();
            columns.push("body");
            if let Some(expires_at) = expires_at {
                columns.push("expires_at");
                values.push(CqlValue::BigInt(*expires_at));
            }
            let markers = vec!["?"; columns.len()].join(", ");
            let mut cql = format!("INSERT INTO {keyspace}.{} ({}) VALUES ({markers}) USING TIMESTAMP ?", table.name, columns.join(", "));
            values.push(CqlValue::BigInt(mutation.ts));
            if let Some(expires_at) = expires_at {
                cql.push_str(" AND TTL ?");
                values.push(CqlValue::Int(((expires_at - now_micros()) / 1_000_000).clamp(1, i32::MAX as i64) as i32));
            }
            (cql, values)
        }
        // CQL cannot remove a row without a tombstone, as in the ScyllaDriver.
        Op::Delete | Op::Purge => {
            values.push(CqlValue::BigInt(mutation.ts));
            values.extend(mutation.partition.iter().chain(&mutation.clustering).map(cql_value));
            let conditions: Vec<String> = key_columns.iter().map(|column| format!("{column} = ?")).collect();
            (format!("DELETE FROM {keyspace}.{} USING TIMESTAMP ? WHERE {}", table.name, conditions.join(" AND ")), values)
        }
    }
}

/// Writes the batches one after the other, each with `concurrency` writes in flight
/// (the projector's RECAP_SCYLLA_WRITE_CONCURRENCY default); returns the time taken.
/// Statements are prepared before the clock starts; values are built inside it, as the
/// driver builds them.
pub async fn raw_write(session: &Session, keyspace: &str, batches: &[Vec<Mutation>], concurrency: usize) -> Duration {
    let mut statements: HashMap<String, PreparedStatement> = HashMap::new();
    for mutation in batches.iter().flatten() {
        let (cql, _) = write_statement(keyspace, mutation);
        if let std::collections::hash_map::Entry::Vacant(slot) = statements.entry(cql) {
            let prepared = prepare(session, slot.key()).await;
            slot.insert(prepared);
        }
    }
    let started = Instant::now();
    for batch in batches {
        stream::iter(batch.iter().map(Ok::<_, String>))
            .try_for_each_concurrent(concurrency, |mutation| {
                let statements = &statements;
                async move {
                    let (cql, values) = write_statement(keyspace, mutation);
                    session.execute_unpaged(&statements[&cql], values).await.map(|_| ()).map_err(|error| error.to_string())
                }
            })
            .await
            .expect("raw write");
    }
    started.elapsed()
}

/// The reads one `GET /v1/meetings?limit=50` makes, as the ScyllaDriver issues them.
pub struct PageReads {
    token: PreparedStatement,
    account: PreparedStatement,
    page: PreparedStatement,
    token_hash: String,
}

impl PageReads {
    pub async fn prepare(session: &Session, keyspace: &str) -> PageReads {
        PageReads {
            token: prepare(session, &format!("SELECT body, expires_at, writetime(body) FROM {keyspace}.tokens_by_hash WHERE token_sha256 = ?")).await,
            account: prepare(session, &format!("SELECT body, expires_at, writetime(body) FROM {keyspace}.accounts WHERE account_id = ?")).await,
            page: prepare(
                session,
                &format!(
                    "SELECT created_at_us, meeting_id, body, expires_at, writetime(body) FROM {keyspace}.meetings_by_account WHERE account_id = ? LIMIT ?"
                ),
            )
            .await,
            token_hash: recap_access::token_sha256(TOKEN),
        }
    }

    /// The page SELECT (limit 50 + 1, as the endpoint asks), rows deserialized.
    async fn page(&self, session: &Session, account: &str) -> usize {
        let result = session.execute_unpaged(&self.page, (account, 51i32)).await.expect("page select");
        let rows = result.into_rows_result().expect("rows");
        let rows: Vec<CqlRow> = rows.rows::<CqlRow>().expect("typed rows").collect::<Result<_, _>>().expect("row");
        rows.len()
    }

    async fn one(&self, session: &Session, statement: &PreparedStatement, key: &str) -> usize {
        let result = session.execute_unpaged(statement, (key,)).await.expect("select");
        result.into_rows_result().expect("rows").maybe_first_row::<CqlRow>().expect("typed row").map_or(0, |_| 1)
    }

    /// Closed loop: `concurrency` tasks for `duration`; with `all_reads` each iteration
    /// is token → account → page (what a request reads), else the page SELECT alone.
    /// Returns iterations per second.
    pub async fn closed_loop(self: &Arc<Self>, session: &Arc<Session>, account: &str, concurrency: usize, duration: Duration, all_reads: bool) -> f64 {
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let deadline = started + duration;
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (reads, session, done, account) = (self.clone(), session.clone(), done.clone(), account.to_string());
                tokio::spawn(async move {
                    while Instant::now() < deadline {
                        if all_reads {
                            assert_eq!(reads.one(&session, &reads.token, &reads.token_hash).await, 1, "the token row");
                            assert_eq!(reads.one(&session, &reads.account, &account).await, 1, "the account row");
                        }
                        assert_eq!(reads.page(&session, &account).await, 51, "a full page");
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("reader task");
        }
        done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
    }
}
