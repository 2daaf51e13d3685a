//! A soak of the distributed edition, the one implementation behind the short test
//! (`tests/distributed.rs`) and the bench (`cargo bench --bench distributed soak`):
//! mixed REST and MCP reads offered open-loop at a fixed rate by the six accounts of
//! [`stream`], the stream produced slice by slice throughout, a projector restart and a
//! query-api restart in the middle, and per window the resident memory and open file
//! descriptors of every role, the reads' p50 and p99 and errors, the projector's lag,
//! Cassandra's resident memory and Redis's `used_memory`. At the end the read model is
//! compared with the reference fold of everything produced.
//!
//! Reads alternate between the two query-api processes. While one restarts, its REST
//! share goes to the other, as a load balancer takes a terminating pod out of rotation
//! (the drained process answers what it holds; the restarted one listens on a new
//! port). Errors inside a restart window (from its SIGTERM to 2 s after the new
//! process is ready) are counted apart; every other error is a failure.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use recap_schemas::Envelope;

use crate::cluster::Cluster;
use crate::process::{events_file, recap_bin};
use crate::stream::{difference, stream, stream_token, STREAM_OWNERS};

/// What a soak does and for how long.
#[derive(Clone, Debug)]
pub struct Plan {
    pub duration: Duration,
    /// One row of the report per window.
    pub window: Duration,
    /// Windows that start before this are warm-up: not the baseline of the drift checks.
    pub warm_up: Duration,
    /// Reads offered per second (open loop), REST and MCP together.
    pub rate: f64,
    /// Threads sending the reads (each takes every `workers`-th scheduled read).
    pub workers: usize,
    /// Events produced per second, as one slice a second.
    pub events_per_second: usize,
    /// Seconds of events produced and projected before the reads start.
    pub lead: usize,
    pub projector_restart_at: Duration,
    pub query_api_restart_at: Duration,
    /// How soon after a restart the projector's lag must be back to its steady level:
    /// at most five seconds of events (the slices produced since the projector's last
    /// lag refresh, every 2 s, and the one it is writing). While events keep coming it
    /// does not read zero; once they stop it must, and the soak waits for that.
    pub lag_bound: Duration,
    pub seed: usize,
}

/// The settings a soak's cluster runs with: the REST per-minute limit and quota and the
/// MCP tool-call limit lifted (they would turn a steady load into 429s and
/// `rate_limited` tool errors; Redis still counts every request and call).
pub fn cluster_settings() -> Vec<(String, String)> {
    vec![
        ("RECAP_REST_RATE_LIMIT_PER_MINUTE".into(), "1000000000".into()),
        ("RECAP_DEFAULT_API_QUOTA".into(), "1000000000000".into()),
        ("RECAP_MCP_TOOL_CALLS_PER_MINUTE".into(), "1000000000".into()),
    ]
}

/// One read, as the report counts it.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Scheduled instant, since the load started.
    at: Duration,
    /// From the scheduled instant to the end of the answer.
    latency_ms: f64,
    ok: bool,
}

/// One process's figures at the end of a window.
#[derive(Clone, Debug)]
pub struct Process {
    pub name: String,
    pub pid: u32,
    pub rss_mib: f64,
    pub fds: usize,
}

/// One row of the report.
#[derive(Clone, Debug)]
pub struct Window {
    pub start: Duration,
    pub end: Duration,
    pub reads: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Errors outside the restart windows.
    pub errors: usize,
    /// Errors inside a restart window.
    pub restart_errors: usize,
    /// The largest and the last lag the projector reported in the window (events not yet
    /// projected, summed over its partitions); None while no projector reported one.
    pub lag_max: Option<i64>,
    pub lag_last: Option<i64>,
    pub roles: Vec<Process>,
    pub cassandra_rss_mib: f64,
    pub redis_used_mib: f64,
    /// Whether the Cassandra of `make up` was another process at the end of this window
    /// than at the end of the one before: restarted by another user of the shared
    /// engines (fault tests do), which no soak target can be judged through.
    pub cassandra_restarted: bool,
    /// The roles restarted in this window.
    pub restart: Option<String>,
}

/// A role restarted in the middle of the soak.
#[derive(Clone, Debug)]
pub struct Restart {
    pub role: String,
    /// From its SIGTERM to the new process ready, since the load started.
    pub began: Duration,
    pub ready: Duration,
    /// From ready to the first lag reading at the steady level (at most five seconds
    /// of events) over every partition.
    pub lag_settled_after: Option<Duration>,
}

#[derive(Debug)]
pub struct Report {
    pub plan: Plan,
    pub windows: Vec<Window>,
    pub restarts: Vec<Restart>,
    pub produced: usize,
    /// Reads offered and answered, over the whole soak.
    pub reads: usize,
    /// Time from the end of the load to the lag reading zero.
    pub lag_zero_after_load: Option<Duration>,
    /// Time from the end of the load to the read model equal to the reference fold.
    pub equal_after: Option<Duration>,
    /// Where the read model differed from the reference fold, if it never became equal.
    pub difference: Option<String>,
}

/// The request mix, one read per index: of every ten, six REST GETs (the first page of
/// meetings twice, a meeting's detail twice, action items, shared notes) over the six
/// accounts, and four MCP `tools/call` (list_meetings, get_meeting) over the accounts
/// whose plan includes MCP (acc_a, acc_c, acc_e: `flow`).
enum Request {
    Rest { token: String, path: String, may_be_missing: bool },
    Mcp { token: String, tool: &'static str, arguments: serde_json::Value },
}

fn read_of(index: u64) -> Request {
    let round = (index / 10) as usize;
    let account = round % STREAM_OWNERS.len();
    let mcp_account = [0, 2, 4][round % 3];
    // Meeting n belongs to STREAM_OWNERS[n % 6] (see `stream`); some are deleted or not
    // produced yet: not found is an answer, not an error.
    let meeting = |account: usize| format!("mtg_{}", (round / 6 % 166) * 6 + account);
    let rest = |path: String, may_be_missing| Request::Rest { token: stream_token(STREAM_OWNERS[account]), path, may_be_missing };
    let mcp = |tool, arguments| Request::Mcp { token: stream_token(STREAM_OWNERS[mcp_account]), tool, arguments };
    match index % 10 {
        0 | 5 => rest("/meetings?limit=20".into(), false),
        1 | 6 => rest(format!("/meetings/{}", meeting(account)), true),
        2 => rest("/action-items?limit=20".into(), false),
        3 => rest("/shared-notes?limit=20".into(), false),
        4 | 8 => mcp("list_meetings", serde_json::json!({"limit": 20})),
        _ => mcp("get_meeting", serde_json::json!({"meeting_id": meeting(mcp_account)})),
    }
}

/// Where reads go: the query-api processes (None while one restarts) and the mcp process.
struct Targets {
    rest: RwLock<Vec<Option<String>>>,
    mcp: String,
}

/// Sends read `index`; whether it was answered as it should be.
fn send(agent: &ureq::Agent, targets: &Targets, index: u64) -> bool {
    match read_of(index) {
        Request::Rest { token, path, may_be_missing } => {
            let base = {
                let rest = targets.rest.read().unwrap();
                let up: Vec<&String> = rest.iter().flatten().collect();
                if up.is_empty() {
                    return false;
                }
                up[(index / 10) as usize % up.len()].clone()
            };
            match agent.get(&format!("{base}{path}")).header("Authorization", &format!("Bearer {token}")).call() {
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    let _ = response.body_mut().read_to_string();
                    status == 200 || (may_be_missing && status == 404)
                }
                Err(_) => false,
            }
        }
        Request::Mcp { token, tool, arguments } => {
            let body = serde_json::json!({"jsonrpc": "2.0", "id": index, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
            let answer = agent
                .post(&targets.mcp)
                .header("Authorization", &format!("Bearer {token}"))
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .send(body.to_string());
            let Ok(mut response) = answer else { return false };
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            let data = text.lines().find_map(|line| line.strip_prefix("data:")).unwrap_or(&text);
            let reply: serde_json::Value = serde_json::from_str(data.trim()).unwrap_or_default();
            if status != 200 || reply["result"].is_null() {
                return false;
            }
            if reply["result"]["isError"] != true {
                return true;
            }
            // A tool error: only "not found" (a deleted or not yet produced meeting) is an answer.
            let result: serde_json::Value = serde_json::from_str(reply["result"]["content"][0]["text"].as_str().unwrap_or_default()).unwrap_or_default();
            result["error"]["code"].as_str().is_some_and(|code| code.contains("not_found"))
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(10))).build().into()
}

/// The highest rate the mix is answered at: `workers` threads sending back to back for
/// `seconds` (closed loop); reads answered per second.
pub fn max_rate(cluster: &Cluster, workers: usize, seconds: u64) -> f64 {
    let targets = Arc::new(Targets { rest: RwLock::new(cluster.query_apis.iter().map(|role| Some(role.url.clone())).collect()), mcp: cluster.mcp.url.clone() });
    let next = Arc::new(AtomicU64::new(0));
    let answered = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let (targets, next, answered) = (targets.clone(), next.clone(), answered.clone());
            std::thread::spawn(move || {
                let agent = agent();
                while Instant::now() < deadline {
                    if send(&agent, &targets, next.fetch_add(1, Ordering::Relaxed)) {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    answered.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

/// Offers `rate` reads a second until `stop`: read i is scheduled at i / rate and sent by
/// worker i % workers; its latency counts from that instant, so a stall is charged to
/// every read it delays.
fn open_loop(
    targets: Arc<Targets>,
    rate: f64,
    workers: usize,
    start: Instant,
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..workers)
        .map(|worker| {
            let (targets, stop, samples) = (targets.clone(), stop.clone(), samples.clone());
            std::thread::spawn(move || {
                let agent = agent();
                let mut index = worker as u64;
                while !stop.load(Ordering::Relaxed) {
                    let scheduled = start + Duration::from_secs_f64(index as f64 / rate);
                    if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let ok = send(&agent, &targets, index);
                    samples.lock().unwrap().push(Sample { at: scheduled - start, latency_ms: scheduled.elapsed().as_secs_f64() * 1e3, ok });
                    index += workers as u64;
                }
            })
        })
        .collect()
}

/// Publishes events as [`Cluster::produce`] does, from a thread that does not hold the cluster.
fn produce(brokers: &str, topic_prefix: &str, events: &[Envelope]) {
    let file = events_file(events);
    let output = std::process::Command::new(recap_bin())
        .args(["events", "append", "--kafka", brokers, "--topic-prefix", topic_prefix])
        .arg(file.path())
        .output()
        .expect("run recap events append --kafka");
    assert!(output.status.success(), "producing failed: {}", String::from_utf8_lossy(&output.stderr));
}

/// The projector's lag (summed over its partitions) when it reports every partition it
/// should hold (nine: three topics of three); None otherwise or when it does not answer.
fn lag(cluster: &Cluster) -> Option<i64> {
    let role = cluster.projectors.first().filter(|role| role.child.is_some())?;
    let url = format!("{}progress", role.admin_url);
    let body = agent().get(&url).call().ok()?.body_mut().read_to_string().ok()?;
    let progress: serde_json::Value = serde_json::from_str(&body).ok()?;
    let lags = progress["partition_lag"].as_object()?;
    (lags.len() >= 9).then(|| lags.values().filter_map(serde_json::Value::as_i64).sum())
}

/// VmRSS of a process, in MiB (NaN when it is gone).
pub fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Open file descriptors of a process.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|entries| entries.count()).unwrap_or(0)
}

/// The local Cassandra of `make up`, when it runs on this machine.
pub fn cassandra_pid() -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
        let command = std::fs::read(entry.path().join("cmdline")).ok()?;
        String::from_utf8_lossy(&command).contains("CassandraDaemon").then_some(pid)
    })
}

/// Redis's `used_memory` (`INFO memory`), in MiB; NaN when it does not answer. A plain
/// `redis://host:port` URL (the engines of `make up`).
pub fn redis_used_mib(redis_url: &str) -> f64 {
    let address = redis_url.trim_start_matches("redis://").split('/').next().unwrap_or_default().rsplit('@').next().unwrap_or_default().to_string();
    let read = || -> Option<f64> {
        let mut connection = std::net::TcpStream::connect(&address).ok()?;
        connection.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        connection.write_all(b"INFO memory\r\n").ok()?;
        let mut reply = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            let read = connection.read(&mut buffer).ok()?;
            if read == 0 {
                break;
            }
            reply.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&reply);
            // A bulk string: `$<length>\r\n<body>\r\n`.
            let (head, body) = text.split_once("\r\n")?;
            if body.len() >= head.trim_start_matches('$').parse::<usize>().ok()? {
                break;
            }
        }
        let text = String::from_utf8_lossy(&reply);
        text.lines().find_map(|line| line.strip_prefix("used_memory:")).and_then(|bytes| bytes.trim().parse::<f64>().ok()).map(|bytes| bytes / 1_048_576.0)
    };
    read().unwrap_or(f64::NAN)
}

fn processes(cluster: &Cluster) -> Vec<Process> {
    let mut roles: Vec<(String, u32)> = Vec::new();
    for role in &cluster.projectors {
        roles.extend(role.child.as_ref().map(|child| ("projector".to_string(), child.id())));
    }
    for (index, role) in cluster.query_apis.iter().enumerate() {
        roles.extend(role.child.as_ref().map(|child| (format!("query-api {index}"), child.id())));
    }
    roles.extend(cluster.mcp.child.as_ref().map(|child| ("mcp".to_string(), child.id())));
    roles.into_iter().map(|(name, pid)| Process { name, pid, rss_mib: rss_mib(pid), fds: open_fds(pid) }).collect()
}

/// What the main loop gathers for one window while it runs.
struct Gathered {
    end: Duration,
    roles: Vec<Process>,
    cassandra_pid: Option<u32>,
    cassandra_rss_mib: f64,
    redis_used_mib: f64,
}

/// The stream of a soak and how much of it is in Kafka already.
pub struct Prepared {
    events: Vec<Envelope>,
    produced: usize,
}

/// Produces the stream's accounts, tokens and team, and `plan.lead` seconds of its
/// slices, and waits until they are projected: what the reads find from the start (and
/// what [`max_rate`] is measured on).
pub fn prepare(cluster: &Cluster, plan: &Plan) -> Prepared {
    let seconds = plan.lead + (plan.duration.as_secs() as usize).max(1);
    let events = stream(seconds * plan.events_per_second, plan.seed);
    let produced = events.len() - (seconds - plan.lead) * plan.events_per_second;
    cluster.produce(&events[..produced]);
    cluster.wait_projected();
    Prepared { events, produced }
}

/// Runs the soak on a cluster started with [`cluster_settings`] and [`prepare`]d,
/// printing a line a window to standard error as it goes; the report at the end.
pub fn run(cluster: &mut Cluster, plan: &Plan, prepared: Prepared) -> Report {
    let Prepared { events, produced: world } = prepared;
    let targets = Arc::new(Targets { rest: RwLock::new(cluster.query_apis.iter().map(|role| Some(role.url.clone())).collect()), mcp: cluster.mcp.url.clone() });
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let start = Instant::now() + Duration::from_millis(100);
    let workers = open_loop(targets.clone(), plan.rate, plan.workers, start, stop.clone(), samples.clone());
    let producer = {
        let (brokers, prefix, stop) = (cluster.engines.brokers.clone(), cluster.topic_prefix.clone(), stop.clone());
        let events = events[world..].to_vec();
        let per_second = plan.events_per_second;
        std::thread::spawn(move || {
            let mut produced = 0;
            for (second, slice) in events.chunks(per_second.max(1)).enumerate() {
                if let Some(wait) = (start + Duration::from_secs(second as u64)).checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                produce(&brokers, &prefix, slice);
                produced += slice.len();
            }
            produced
        })
    };

    let started_with_cassandra = cassandra_pid();
    let redis_url = cluster.engines.redis_url.clone();
    let gather = |cluster: &Cluster, end: Duration| {
        let cassandra = cassandra_pid();
        Gathered {
            end,
            roles: processes(cluster),
            cassandra_pid: cassandra,
            cassandra_rss_mib: cassandra.map_or(f64::NAN, rss_mib),
            redis_used_mib: redis_used_mib(&redis_url),
        }
    };
    let mut gathered: Vec<Gathered> = Vec::new();
    let mut lags: Vec<(Duration, i64)> = Vec::new();
    let mut restarts: Vec<Restart> = Vec::new();
    let (mut projector_restarted, mut query_api_restarted) = (false, false);
    let mut next_window = plan.window;
    loop {
        let now = start.elapsed();
        if now >= plan.duration {
            break;
        }
        // A window's figures before a restart due at its end: they are the old process's.
        if start.elapsed() >= next_window {
            gathered.push(gather(&*cluster, next_window));
            eprintln!("soak: {:.0} of {:.0} s", next_window.as_secs_f64(), plan.duration.as_secs_f64());
            next_window += plan.window;
        }
        if !projector_restarted && now >= plan.projector_restart_at {
            projector_restarted = true;
            let began = start.elapsed();
            let status = cluster.projectors[0].stop();
            assert!(status.is_some_and(|status| status.success()), "the projector's exit on SIGTERM: {status:?}");
            cluster.projectors[0].start();
            restarts.push(Restart { role: "projector".into(), began, ready: start.elapsed(), lag_settled_after: None });
        }
        if !query_api_restarted && now >= plan.query_api_restart_at {
            query_api_restarted = true;
            let began = start.elapsed();
            targets.rest.write().unwrap()[1] = None;
            let status = cluster.query_apis[1].stop();
            assert!(status.is_some_and(|status| status.success()), "query-api 1's exit on SIGTERM: {status:?}");
            cluster.query_apis[1].start();
            targets.rest.write().unwrap()[1] = Some(cluster.query_apis[1].url.clone());
            restarts.push(Restart { role: "query-api 1".into(), began, ready: start.elapsed(), lag_settled_after: None });
        }
        if let Some(lag) = lag(cluster) {
            let at = start.elapsed();
            lags.push((at, lag));
            let steady = lag <= plan.events_per_second as i64 * 5;
            for restart in restarts.iter_mut().filter(|restart| restart.lag_settled_after.is_none() && steady && at >= restart.ready) {
                restart.lag_settled_after = Some(at - restart.ready);
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    while next_window <= plan.duration {
        gathered.push(gather(&*cluster, next_window));
        next_window += plan.window;
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        let _ = worker.join();
    }
    let produced = producer.join().expect("the producer thread");

    // Everything produced, then projected: the read model must equal the reference fold.
    let load_ended = Instant::now();
    let mut lag_zero_after_load = None;
    while load_ended.elapsed() < Duration::from_secs(120) {
        if lag(cluster) == Some(0) {
            lag_zero_after_load = Some(load_ended.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let all: Vec<Envelope> = events[..world + produced].to_vec();
    let deadline = load_ended + Duration::from_secs(180);
    let (mut equal_after, mut last_difference) = (None, None);
    while Instant::now() < deadline {
        match difference(cluster, &all) {
            None => {
                equal_after = Some(load_ended.elapsed());
                last_difference = None;
                break;
            }
            Some(found) => last_difference = Some(found),
        }
        std::thread::sleep(Duration::from_millis(500));
    }

    let samples = std::mem::take(&mut *samples.lock().unwrap());
    let in_restart = |at: Duration| restarts.iter().any(|restart| at >= restart.began && at < restart.ready + Duration::from_secs(2));
    let mut windows = Vec::new();
    let mut window_start = Duration::ZERO;
    let mut cassandra_before = started_with_cassandra;
    for figures in gathered {
        let cassandra_restarted = figures.cassandra_pid != cassandra_before;
        cassandra_before = figures.cassandra_pid;
        let inside: Vec<&Sample> = samples.iter().filter(|sample| sample.at >= window_start && sample.at < figures.end).collect();
        let mut latencies: Vec<f64> = inside.iter().filter(|sample| sample.ok).map(|sample| sample.latency_ms).collect();
        latencies.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| latencies.get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1))).copied().unwrap_or(f64::NAN);
        let failed: Vec<&&Sample> = inside.iter().filter(|sample| !sample.ok).collect();
        let restart_errors = failed.iter().filter(|sample| in_restart(sample.at)).count();
        let window_lags: Vec<i64> = lags.iter().filter(|(at, _)| *at >= window_start && *at < figures.end).map(|(_, lag)| *lag).collect();
        let restarted: Vec<String> =
            restarts.iter().filter(|restart| restart.began >= window_start && restart.began < figures.end).map(|restart| restart.role.clone()).collect();
        let restart = (!restarted.is_empty()).then(|| restarted.join(", "));
        windows.push(Window {
            start: window_start,
            end: figures.end,
            reads: inside.len(),
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            errors: failed.len() - restart_errors,
            restart_errors,
            lag_max: window_lags.iter().copied().max(),
            lag_last: window_lags.last().copied(),
            roles: figures.roles,
            cassandra_rss_mib: figures.cassandra_rss_mib,
            redis_used_mib: figures.redis_used_mib,
            cassandra_restarted,
            restart,
        });
        window_start = figures.end;
    }
    Report {
        plan: plan.clone(),
        windows,
        restarts,
        produced: world + produced,
        reads: samples.len(),
        lag_zero_after_load,
        equal_after,
        difference: last_difference,
    }
}

/// A role's resident memory from its baseline window (the first after the warm-up, and
/// after its own restart plus the warm-up when it was restarted) to the last window.
#[derive(Clone, Debug)]
pub struct Drift {
    pub role: String,
    pub baseline_mib: f64,
    pub last_mib: f64,
    pub rss_percent: f64,
    pub baseline_fds: usize,
    pub last_fds: usize,
}

impl Report {
    fn baseline_from(&self, role: &str) -> Duration {
        let restarted = self.restarts.iter().filter(|restart| restart.role == role).map(|restart| restart.ready).max().unwrap_or_default();
        restarted + self.plan.warm_up
    }

    /// Every role's drift, for those with a baseline window before the last.
    pub fn drifts(&self) -> Vec<Drift> {
        let Some(last) = self.windows.last() else { return Vec::new() };
        let mut drifts = Vec::new();
        for process in &last.roles {
            let from = self.baseline_from(&process.name);
            let Some(baseline) = self.windows.iter().find(|window| window.start >= from && window.end < last.end) else { continue };
            let Some(first) = baseline.roles.iter().find(|role| role.name == process.name && role.pid == process.pid) else { continue };
            drifts.push(Drift {
                role: process.name.clone(),
                baseline_mib: first.rss_mib,
                last_mib: process.rss_mib,
                rss_percent: (process.rss_mib - first.rss_mib) * 100.0 / first.rss_mib,
                baseline_fds: first.fds,
                last_fds: process.fds,
            });
        }
        drifts
    }

    /// The median p99 of the windows after the warm-up, and the last window's.
    pub fn p99_flatness(&self) -> (f64, f64) {
        let mut p99s: Vec<f64> =
            self.windows.iter().filter(|window| window.start >= self.plan.warm_up && window.restart.is_none()).map(|window| window.p99_ms).collect();
        let last = p99s.last().copied().unwrap_or(f64::NAN);
        p99s.sort_by(|a, b| a.total_cmp(b));
        (p99s.get(p99s.len() / 2).copied().unwrap_or(f64::NAN), last)
    }

    /// What failed: errors outside the restart windows, a lag that did not come back to
    /// zero within the bound, a read model unlike the reference fold, file descriptors
    /// that grew by more than `fd_slack`, and, when `rss_limit_percent` is given, resident
    /// memory that drifted by more than that.
    pub fn failures(&self, fd_slack: usize, rss_limit_percent: Option<f64>) -> Vec<String> {
        let mut failures = Vec::new();
        let errors: usize = self.windows.iter().map(|window| window.errors).sum();
        if errors > 0 {
            failures.push(format!("{errors} reads failed outside the restart windows"));
        }
        for restart in &self.restarts {
            match restart.lag_settled_after {
                Some(after) if after <= self.plan.lag_bound => {}
                other => failures
                    .push(format!("after the {} restart the lag was back to its steady level after {other:?} (bound {:?})", restart.role, self.plan.lag_bound)),
            }
        }
        if self.lag_zero_after_load.is_none() {
            failures.push("the lag never read zero after the last events were produced".into());
        }
        if let Some(difference) = &self.difference {
            failures.push(difference.clone());
        }
        for drift in self.drifts() {
            if drift.last_fds > drift.baseline_fds + fd_slack {
                failures.push(format!("{}: open file descriptors grew from {} to {}", drift.role, drift.baseline_fds, drift.last_fds));
            }
            if rss_limit_percent.is_some_and(|limit| drift.rss_percent > limit) {
                failures.push(format!(
                    "{}: resident memory drifted {:+.1}% ({:.1} to {:.1} MiB)",
                    drift.role, drift.rss_percent, drift.baseline_mib, drift.last_mib
                ));
            }
        }
        failures
    }

    /// The per-window table and the summary under it.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let names: Vec<String> = self.windows.first().map(|window| window.roles.iter().map(|role| role.name.clone()).collect()).unwrap_or_default();
        let plan = &self.plan;
        out.push_str(&format!(
            "soak: {:.0} s, {:.0} reads/s offered (6 REST : 4 MCP, six accounts, two query-api), {} events/s produced; projector restart at {:.0} s, query-api 1 restart at {:.0} s\n",
            plan.duration.as_secs_f64(),
            plan.rate,
            plan.events_per_second,
            plan.projector_restart_at.as_secs_f64(),
            plan.query_api_restart_at.as_secs_f64()
        ));
        out.push_str(&format!("  {:>9} {:>6} {:>8} {:>8} {:>6} {:>9}", "window s", "reads", "p50 ms", "p99 ms", "errors", "lag max/last"));
        for name in &names {
            out.push_str(&format!(" {:>17}", format!("{name} MiB/fds")));
        }
        out.push_str(&format!(" {:>13} {:>9}\n", "cassandra MiB", "redis MiB"));
        for window in &self.windows {
            let lag = |lag: Option<i64>| lag.map_or("-".to_string(), |lag| lag.to_string());
            let errors = if window.restart_errors > 0 { format!("{}+{}r", window.errors, window.restart_errors) } else { window.errors.to_string() };
            out.push_str(&format!(
                "  {:>4.0}-{:<4.0} {:>6} {:>8.1} {:>8.1} {:>6} {:>12}",
                window.start.as_secs_f64(),
                window.end.as_secs_f64(),
                window.reads,
                window.p50_ms,
                window.p99_ms,
                errors,
                format!("{}/{}", lag(window.lag_max), lag(window.lag_last))
            ));
            for name in &names {
                let shown = window.roles.iter().find(|role| &role.name == name).map_or("-".to_string(), |role| format!("{:.1}/{}", role.rss_mib, role.fds));
                out.push_str(&format!(" {shown:>17}"));
            }
            out.push_str(&format!(" {:>13.0} {:>9.1}", window.cassandra_rss_mib, window.redis_used_mib));
            if let Some(role) = &window.restart {
                out.push_str(&format!("  ({role} restarted)"));
            }
            if window.cassandra_restarted {
                out.push_str("  (Cassandra restarted by another user of the engines)");
            }
            out.push('\n');
        }
        out.push_str("  errors: outside restart windows + inside them (r); lag: events produced and not yet projected, summed over the partitions ('-': no projector reporting)\n");
        for restart in &self.restarts {
            out.push_str(&format!(
                "  {} restart: SIGTERM at {:.1} s, ready at {:.1} s, lag back to its steady level (<= {} events) {}\n",
                restart.role,
                restart.began.as_secs_f64(),
                restart.ready.as_secs_f64(),
                self.plan.events_per_second * 5,
                restart.lag_settled_after.map_or("never".to_string(), |after| format!("{:.1} s later", after.as_secs_f64()))
            ));
        }
        for drift in self.drifts() {
            out.push_str(&format!(
                "  {}: VmRSS {:.1} -> {:.1} MiB ({:+.1}% after warm-up; target <= 5%), fds {} -> {}\n",
                drift.role, drift.baseline_mib, drift.last_mib, drift.rss_percent, drift.baseline_fds, drift.last_fds
            ));
        }
        let (median, last) = self.p99_flatness();
        out.push_str(&format!("  p99 after warm-up: median window {median:.1} ms, last window {last:.1} ms ({:.2}x)\n", last / median));
        out.push_str(&format!(
            "  {} events produced, {} reads; lag zero {} after the load ended; the read model {}\n",
            self.produced,
            self.reads,
            self.lag_zero_after_load.map_or("never".to_string(), |after| format!("{:.1} s", after.as_secs_f64())),
            match (self.equal_after, &self.difference) {
                (Some(after), _) => format!("equal to the reference fold {:.1} s after the load ended", after.as_secs_f64()),
                (None, Some(difference)) => format!("NOT equal to the reference fold: {difference}"),
                (None, None) => "never compared".to_string(),
            }
        ));
        out
    }
}
