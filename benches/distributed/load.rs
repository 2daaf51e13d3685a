//! Load and baselines: wrk for closed-loop maximums, an open-loop HTTP generator that
//! times every request from its scheduled instant, and the raw-driver loops (the
//! `scylla` crate straight, with the statements, consistency and settings the
//! ScyllaDriver uses) that recap's figures are divided by.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, TryStreamExt};
use recap_readmodel::driver::Mutation;
use recap_scylla::{write_groups, write_statement};
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchStatement, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;
use scylla::value::Row as CqlRow;
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
pub async fn session(cluster: &recap_scylla::ScyllaCluster) -> Session {
    cluster.builder(Duration::from_secs(2)).build().await.expect("connect to the store")
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

/// Writes the batches one after the other, as the ScyllaDriver writes them: the
/// driver's statements and its requests (rows of one partition key as one unlogged
/// batch, `recap_scylla::write_groups`), `concurrency` requests in flight (the
/// projector's RECAP_SCYLLA_WRITE_CONCURRENCY default); returns the time taken.
/// Statements are prepared before the clock starts; values and requests are built
/// inside it, as the driver builds them.
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
        stream::iter(write_groups(batch).into_iter().map(Ok::<_, String>))
            .try_for_each_concurrent(concurrency, |group| {
                let statements = &statements;
                async move { send(session, keyspace, statements, &group).await }
            })
            .await
            .expect("raw write");
    }
    started.elapsed()
}

/// Sends one of the ScyllaDriver's requests: a row alone as its statement, rows of one
/// partition key as one unlogged batch.
async fn send(session: &Session, keyspace: &str, statements: &HashMap<String, PreparedStatement>, group: &[&Mutation]) -> Result<(), String> {
    if let [mutation] = group {
        let (cql, values) = write_statement(keyspace, mutation);
        return session.execute_unpaged(&statements[&cql], values).await.map(|_| ()).map_err(|error| error.to_string());
    }
    let mut request = Batch::new(BatchType::Unlogged);
    let mut values = Vec::with_capacity(group.len());
    for mutation in group {
        let (cql, row_values) = write_statement(keyspace, mutation);
        request.append_statement(BatchStatement::PreparedStatement(statements[&cql].clone()));
        values.push(row_values);
    }
    request.set_consistency(Consistency::LocalQuorum);
    request.set_is_idempotent(true);
    request.set_request_timeout(Some(Duration::from_secs(2)));
    session.batch(&request, values).await.map(|_| ()).map_err(|error| error.to_string())
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

/// Cassandra's CPU time and this process's a row when `rows` feed rows (about 500 bytes
/// each, over 64 accounts, expiring within 10 minutes) are written one a request, then
/// in the driver's requests (rows of one partition key in one unlogged batch,
/// `write_groups`), with `concurrency` requests in flight; each form twice, alternated,
/// after a warm-up of each. Prints a line a round.
pub async fn requests_vs_rows(session: &Session, keyspace: &str, rows: usize, concurrency: usize) {
    use recap_readmodel::driver::Op;
    use recap_readmodel::table::Val;
    let body = format!(r#"{{"id":"msg_0","type":"meeting.created","data":{{"title":"{}"}}}}"#, "x".repeat(440));
    let expires_at = recap_readmodel::driver::now_micros() + 600_000_000;
    let writes = |round: usize, count: usize| -> Vec<Mutation> {
        (0..count)
            .map(|index| Mutation {
                table: &recap_readmodel::tables::FEED,
                partition: vec![Val::text(format!("acc_{}", index % 64))],
                clustering: vec![Val::Int((round * rows + index) as i64)],
                op: Op::Put { body: body.clone(), expires_at: Some(expires_at) },
                ts: 1,
            })
            .collect()
    };
    let Some(cassandra_pid) = super::engines::cassandra_pid() else {
        println!("  skipped: no Cassandra process on this machine to measure");
        return;
    };
    let (cql, _) = write_statement(keyspace, &writes(0, 1)[0]);
    let statement = prepare(session, &cql).await;
    let statements = HashMap::from([(cql, statement)]);
    let cassandra = || super::engines::usage(cassandra_pid).cpu_seconds;
    let this_process = || super::engines::usage(std::process::id()).cpu_seconds;
    for round in 0..6 {
        let grouped = round % 2 == 1;
        let batch = writes(round, if round < 2 { rows / 10 } else { rows });
        let (cassandra_before, process_before, started) = (cassandra(), this_process(), Instant::now());
        let requests: Vec<Vec<&Mutation>> = if grouped { write_groups(&batch) } else { batch.iter().map(|row| vec![row]).collect() };
        stream::iter(requests.into_iter().map(Ok::<_, String>))
            .try_for_each_concurrent(concurrency, |group| {
                let statements = &statements;
                async move { send(session, keyspace, statements, &group).await }
            })
            .await
            .expect("raw write");
        let took = started.elapsed();
        if round < 2 {
            continue; // the warm-up
        }
        let per_row = |seconds: f64| seconds * 1e6 / rows as f64;
        println!(
            "  {:<35} {rows} rows in {:>5.2} s ({:>7.0} rows/s)   Cassandra {:>5.1} us a row, this process {:>4.1}",
            if grouped { "rows of a partition in one request" } else { "one request a row" },
            took.as_secs_f64(),
            rows as f64 / took.as_secs_f64(),
            per_row(cassandra() - cassandra_before),
            per_row(this_process() - process_before)
        );
    }
}
