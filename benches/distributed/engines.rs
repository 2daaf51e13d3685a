//! The bench's own resources on the shared engines, each named after the run so other
//! runs and tests on the same engines are never touched: topics under a prefix, one
//! keyspace per measured store, and a private Redis (its `INFO commandstats` then
//! counts only this run's calls). Plus the recap roles as child processes, optionally
//! pinned to one core, and a bulk Kafka producer.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;

/// The recap binary this bench was built with, copied once at start: the target dir is
/// shared, and a build elsewhere replacing `target/release/recap` mid-run must not
/// change what the later roles run.
pub fn recap_bin() -> std::path::PathBuf {
    static COPY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let copy = std::env::temp_dir().join(format!("recap-bench-{}", std::process::id()));
        std::fs::copy(env!("CARGO_BIN_EXE_recap"), &copy).expect("copy the recap binary");
        copy
    })
    .clone()
}

/// Where the engines listen: `RECAP_*` variables, else the file `make up` writes.
/// (Redis is the run's own, see [`PrivateRedis`].)
#[derive(Clone, Debug)]
pub struct Engines {
    pub brokers: String,
    pub scylla_nodes: String,
    /// The store's login (`make up` starts Cassandra with `PasswordAuthenticator`); empty
    /// when it asks for none.
    pub scylla_username: String,
    pub scylla_password: String,
}

impl Engines {
    pub fn from_env() -> Engines {
        let mut values: HashMap<String, String> = HashMap::new();
        if let Some(home) = std::env::var_os("HOME") {
            let path = std::path::Path::new(&home).join(".cache/recap/engines/env");
            for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
                if let Some((key, value)) = line.trim().trim_start_matches("export ").split_once('=') {
                    values.insert(key.trim().to_string(), value.trim().trim_matches('"').to_string());
                }
            }
        }
        let get = |key: &str, default: &str| std::env::var(key).ok().or_else(|| values.get(key).cloned()).unwrap_or_else(|| default.to_string());
        Engines {
            brokers: get("RECAP_KAFKA_BROKERS", "127.0.0.1:9092"),
            scylla_nodes: get("RECAP_SCYLLA_NODES", "127.0.0.1:9042"),
            scylla_username: get("RECAP_SCYLLA_USERNAME", ""),
            scylla_password: get("RECAP_SCYLLA_PASSWORD", ""),
        }
    }

    /// The store as the driver reaches it: its nodes and its login.
    pub fn cluster(&self) -> recap_scylla::ScyllaCluster {
        recap_scylla::ScyllaCluster::from_settings(&self.scylla_nodes, &self.scylla_username, &self.scylla_password)
    }
}

/// A CQL- and Kafka-safe name unique to this run.
pub fn run_id() -> String {
    let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or_default();
    format!("bench{}_{}", std::process::id(), micros % 1_000_000_000)
}

/// Long enough for the projector's lag figures to refresh (every 2 s).
pub const LAG_CHECK: Duration = Duration::from_secs(3);

pub const TOPICS: [&str; 3] = ["recap.accounts.v1", "recap.meetings.v1", "recap.sharing.v1"];

/// The topics recap writes: dead letters, and the messages the projector announces
/// (which `recap webhooks` reads).
const OWN_TOPICS: [&str; 2] = ["recap.deadletter.v1", "recap.messages.v1"];

/// Creates the contract topics under `prefix` (3 partitions each, as the chart does).
pub async fn create_topics(brokers: &str, prefix: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", brokers).create().expect("kafka admin client");
    let names: Vec<String> = TOPICS.iter().chain(OWN_TOPICS.iter()).map(|topic| format!("{prefix}{topic}")).collect();
    let topics: Vec<NewTopic> = names.iter().map(|name| NewTopic::new(name, 3, TopicReplication::Fixed(1))).collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in admin.create_topics(&topics, &options).await.expect("create topics (are the engines up? `make up`)") {
        if let Err((topic, code)) = result {
            assert_eq!(code, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists, "creating {topic}");
        }
    }
}

/// Deletes this run's topics (a million-event backlog should not outlive the run).
pub async fn delete_topics(brokers: &str, prefix: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    let Ok(admin) = ClientConfig::new().set("bootstrap.servers", brokers).create::<AdminClient<rdkafka::client::DefaultClientContext>>() else { return };
    let names: Vec<String> = TOPICS.iter().chain(OWN_TOPICS.iter()).map(|topic| format!("{prefix}{topic}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let _ = admin.delete_topics(&refs, &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)))).await;
}

/// The settings every role of one measured deployment shares.
pub fn role_envs(engines: &Engines, id: &str, topic_prefix: &str, keyspace: &str, redis_url: &str) -> Vec<(String, String)> {
    let login = (!engines.scylla_username.is_empty()).then(|| {
        [("RECAP_SCYLLA_USERNAME".to_string(), engines.scylla_username.clone()), ("RECAP_SCYLLA_PASSWORD".to_string(), engines.scylla_password.clone())]
    });
    let mut envs = vec![
        ("RECAP_KAFKA_BROKERS".into(), engines.brokers.clone()),
        ("RECAP_KAFKA_TOPIC_PREFIX".into(), topic_prefix.into()),
        ("RECAP_KAFKA_GROUP".into(), format!("{topic_prefix}projector")),
        ("RECAP_SCYLLA_NODES".into(), engines.scylla_nodes.clone()),
        ("RECAP_SCYLLA_KEYSPACE".into(), keyspace.into()),
        ("RECAP_SCYLLA_CONSISTENCY".into(), "local_quorum".into()),
        ("RECAP_REDIS_URL".into(), redis_url.into()),
        ("RECAP_REDIS_KEY_PREFIX".into(), format!("{id}:")),
        ("RECAP_CURSOR_SECRET".into(), format!("cursor-secret-of-{id}-0123456789abcdef")),
        ("RECAP_REST_RATE_LIMIT_PER_MINUTE".into(), "1000000000".into()),
        ("RECAP_MCP_TOOL_CALLS_PER_MINUTE".into(), "1000000000".into()),
        // As the chart's production values run it: a hot token costs no store read.
        // `RECAP_BENCH_TOKEN_CACHE_MS=0` measures every request reading token and account.
        ("RECAP_TOKEN_CACHE_MS".into(), std::env::var("RECAP_BENCH_TOKEN_CACHE_MS").unwrap_or_else(|_| "1000".into())),
        ("RECAP_ADMIN_LISTEN".into(), "127.0.0.1:0".into()),
        ("RECAP_REST_LISTEN".into(), "127.0.0.1:0".into()),
    ];
    envs.extend(login.into_iter().flatten());
    envs
}

/// `recap migrate` into a fresh keyspace.
pub fn migrate(envs: &[(String, String)]) {
    let output = Command::new(recap_bin())
        .args(["migrate", "--replication", "{'class': 'SimpleStrategy', 'replication_factor': 1}"])
        .envs(envs.iter().map(|(key, value)| (key.as_str(), value.as_str())))
        .output()
        .expect("run recap migrate");
    assert!(output.status.success(), "recap migrate failed: {}", String::from_utf8_lossy(&output.stderr));
}

pub async fn drop_keyspace(engines: &Engines, keyspace: &str) {
    let _ = recap_scylla::ScyllaDriver::drop_keyspace(&engines.cluster(), keyspace, Duration::from_secs(30)).await;
}

/// One running recap role.
pub struct Role {
    pub child: Child,
    pub url: String,
    pub admin_url: String,
}

impl Role {
    /// Starts `recap <role>`, on `core` when given, and waits until `/readyz` answers.
    pub fn start(role: &str, envs: &[(String, String)], core: Option<usize>) -> Role {
        let mut command = match core {
            Some(core) => {
                let mut command = Command::new("taskset");
                command.args(["-c", &core.to_string()]).arg(recap_bin());
                command
            }
            None => Command::new(recap_bin()),
        };
        command.arg(role).env("RECAP_LOG", "error").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        recap_testkit::bench::child::ends_with_this_process(&mut command);
        command.envs(envs.iter().map(|(key, value)| (key.as_str(), value.as_str())));
        let mut child = command.spawn().unwrap_or_else(|error| panic!("start recap {role}: {error}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, receiver) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let (mut url, mut admin_url) = (String::new(), String::new());
        let deadline = Instant::now() + Duration::from_secs(120);
        // The projector and the webhooks role serve only their admin address.
        let serves_public = !matches!(role, "projector" | "webhooks");
        while admin_url.is_empty() || (serves_public && url.is_empty()) {
            let line = receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())).unwrap_or_else(|_| panic!("recap {role} printed no URLs"));
            if let Some(found) = line.split("base_url ").nth(1) {
                url = found.trim().to_string();
            }
            if let Some(found) = line.split("admin_url ").nth(1) {
                admin_url = found.trim().trim_end_matches('/').to_string() + "/";
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_get(&format!("{admin_url}readyz")).0 != 200 {
            assert!(Instant::now() < deadline, "recap {role} never became ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        Role { child, url, admin_url }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Events the projector accounted for (applied, stale, skipped, dead-lettered).
    pub fn accounted(&self) -> u64 {
        let body = http_get(&format!("{}progress", self.admin_url)).1;
        let progress: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        ["applied", "stale", "skipped_unknown", "dead_lettered"].iter().map(|key| progress[*key].as_u64().unwrap_or(0)).sum()
    }

    /// SIGTERM (the projector commits its position), then waits.
    pub fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (VmRSS, VmHWM) of a process, in MiB.
pub fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// What a process has used so far: CPU seconds (user + system, so time the hypervisor
/// steals is not counted), the context switches its threads asked for (each one a
/// thread that ran out of work and slept until woken), and the CPU seconds of its
/// children it has waited for (wrk, run to completion by this process).
#[derive(Clone, Copy, Default)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub voluntary_switches: u64,
    pub children_cpu_seconds: f64,
}

pub fn usage(pid: u32) -> Usage {
    // utime and stime are the 12th and 13th fields after the command name, in clock
    // ticks of USER_HZ, which Linux fixes at 100.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |index: usize| fields.get(index).and_then(|value| value.parse::<u64>().ok()).unwrap_or(0);
    let mut voluntary_switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        voluntary_switches +=
            status.lines().find_map(|line| line.strip_prefix("voluntary_ctxt_switches:")).and_then(|value| value.trim().parse::<u64>().ok()).unwrap_or(0);
    }
    Usage { cpu_seconds: (ticks(11) + ticks(12)) as f64 / 100.0, voluntary_switches, children_cpu_seconds: (ticks(13) + ticks(14)) as f64 / 100.0 }
}

/// The machine's idle and total CPU time so far, in clock ticks of every core
/// (`/proc/stat`; idle counts I/O wait too).
pub fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|value| value.parse().ok()).collect();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal; guest time is already in user.
    (idle, ticks.iter().take(8).sum())
}

/// The local Cassandra of `make up`, when it runs on this machine.
pub fn cassandra_pid() -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
        let command = std::fs::read(entry.path().join("cmdline")).ok()?;
        String::from_utf8_lossy(&command).contains("CassandraDaemon").then_some(pid)
    })
}

/// The `Cpus_allowed_list` of a `/proc/.../status` file.
fn allowed_cores(status_path: &std::path::Path) -> Option<String> {
    let status = std::fs::read_to_string(status_path).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:")).map(|list| list.trim().to_string())
}

/// The cores a process's threads may run on, each distinct `Cpus_allowed_list` once.
pub fn thread_cores(pid: u32) -> Vec<String> {
    let mut lists: Vec<String> =
        std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten().filter_map(|task| allowed_cores(&task.path().join("status"))).collect();
    lists.sort();
    lists.dedup();
    lists
}

/// Whether every thread of a process is held to `cores` exactly.
pub fn held_to(pid: u32, cores: &str) -> bool {
    thread_cores(pid) == [cores]
}

/// The cores this bench may use (its main thread is never pinned): what a pinned engine
/// gets back.
pub fn bench_cores() -> String {
    allowed_cores(std::path::Path::new("/proc/self/status")).expect("Cpus_allowed_list of this process")
}

/// Holds every thread of `pid` to `cores` (`taskset -a`). A thread that exits while
/// taskset walks them stops it partway, so a failure is tried once more.
fn pin_all_threads(pid: u32, cores: &str) -> Result<(), String> {
    let pid = pid.to_string();
    let once = || {
        let output = Command::new("taskset").args(["-a", "-c", "-p", cores, &pid]).output().map_err(|error| format!("run taskset (util-linux): {error}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
        }
    };
    once().or_else(|_| once())
}

/// Every thread of a process held to some cores until dropped, when it gets back the
/// cores this bench may use, whether the bench finished or panicked (even partway
/// through pinning): the engines of `make up` outlive the bench.
pub struct Pinned {
    pid: u32,
    restore: String,
}

impl Pinned {
    pub fn new(pid: u32, cores: &str) -> Pinned {
        let pinned = Pinned { pid, restore: bench_cores() };
        if let Err(error) = pin_all_threads(pid, cores) {
            panic!("pin process {pid} to cores {cores}: {error}");
        }
        pinned
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Err(error) = pin_all_threads(self.pid, &self.restore) {
            eprintln!("warning: could not give process {} its cores {} back ({error}); `make up` does", self.pid, self.restore);
        }
    }
}

/// A GET without credentials (the operations listener); (status, body), 0 on error.
pub fn http_get(url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(5))).build().into();
    match agent.get(url).call() {
        Ok(mut response) => (response.status().as_u16(), response.body_mut().read_to_string().unwrap_or_default()),
        Err(_) => (0, String::new()),
    }
}

/// A Redis of this run only, so `INFO commandstats` counts only the calls it causes.
pub struct PrivateRedis {
    child: Child,
    pub port: u16,
}

impl PrivateRedis {
    pub fn start() -> PrivateRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).map(|address| address.port()).expect("a free port");
        let child = recap_testkit::bench::child::ends_with_this_process(&mut Command::new("redis-server"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server (apt-get install redis-server)");
        let redis = PrivateRedis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !redis.cli(&["PING"]).contains("PONG") {
            assert!(Instant::now() < deadline, "private redis did not answer PING");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn cli(&self, args: &[&str]) -> String {
        Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Calls per command since the server started (`INFO commandstats`).
    pub fn command_calls(&self) -> HashMap<String, u64> {
        let mut calls = HashMap::new();
        for line in self.cli(&["INFO", "commandstats"]).lines() {
            let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
            let Some((name, stats)) = rest.split_once(':') else { continue };
            let count = stats.split(',').find_map(|field| field.strip_prefix("calls=")).and_then(|value| value.trim().parse().ok()).unwrap_or(0);
            calls.insert(name.to_string(), count);
        }
        calls
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Counts failed deliveries.
#[derive(Default, Clone)]
pub struct Deliveries {
    pub failed: Arc<AtomicU64>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_err() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A producer for loading topics fast (`linger_ms` 0 for probes that must leave at once).
pub fn bulk_producer(brokers: &str, linger_ms: u32) -> ThreadedProducer<Deliveries> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", linger_ms.to_string())
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "200000")
        .set("queue.buffering.max.kbytes", "262144")
        .set("message.timeout.ms", "120000")
        .create_with_context(Deliveries::default())
        .expect("kafka producer")
}

/// Queues one event, waiting while the producer's queue is full.
pub fn send(producer: &ThreadedProducer<Deliveries>, topic: &str, key: &str, payload: &str) {
    let mut record = BaseRecord::to(topic).key(key).payload(payload);
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), returned)) => {
                record = returned;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err((error, _)) => panic!("producing to {topic}: {error}"),
        }
    }
}

/// Waits until every queued event is acknowledged; panics if any failed.
pub fn flush(producer: &ThreadedProducer<Deliveries>) {
    producer.flush(Duration::from_secs(300)).expect("flush the producer");
    let failed = producer.context().failed.load(Ordering::Relaxed);
    assert_eq!(failed, 0, "{failed} events were not delivered");
}
