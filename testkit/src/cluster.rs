//! The distributed edition under test: one `recap projector`, two `recap query-api` and
//! one `recap mcp` process, and the `recap webhooks` processes a test adds
//! ([`Cluster::add_webhooks`], started with `--webhooks-allow-insecure` so that they
//! deliver to a receiver on loopback), over the real engines started by `make up`
//! (Kafka, Cassandra standing in for ScyllaDB, Redis), isolated per test by their own
//! topic prefix, keyspace, consumer groups and Redis key prefix. Engine addresses come from
//! `RECAP_KAFKA_BROKERS`, `RECAP_SCYLLA_NODES` and `RECAP_REDIS_URL`, or from the file
//! `make up` writes (`~/.cache/recap/engines/env`). Starting and dropping a cluster
//! run a runtime of their own (topics, keyspace): never from inside a test's runtime
//! ([`crate::world::ClusterWorld`] does both on a thread of its own).

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::process::{events_file, get, recap_bin, spawn_with_lines, EventLine};

/// Where the engines listen.
#[derive(Clone, Debug)]
pub struct Engines {
    pub brokers: String,
    pub scylla_nodes: String,
    /// The store's login (`make up` starts Cassandra with `PasswordAuthenticator`); empty
    /// when it asks for none.
    pub scylla_username: String,
    pub scylla_password: String,
    pub redis_url: String,
}

/// A setting of the engines `make up` started: the environment's, else the file it wrote
/// (`~/.cache/recap/engines/env`), else `default`.
pub fn engine_setting(key: &str, default: &str) -> String {
    if let Ok(value) = std::env::var(key) {
        return value;
    }
    let path = std::path::Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/recap/engines/env");
    for line in std::fs::read_to_string(path).unwrap_or_default().lines() {
        let line = line.trim().trim_start_matches("export ");
        if let Some((name, value)) = line.split_once('=') {
            if name.trim() == key {
                return value.trim().trim_matches('"').trim_matches('\'').to_string();
            }
        }
    }
    default.to_string()
}

/// The options of a client of the broker's SASL/PLAIN listener (`make up`), with
/// `password`; its address is `RECAP_ENGINES_KAFKA_SASL_BROKERS`.
pub fn sasl_options(password: &str) -> Vec<(String, String)> {
    let username = engine_setting("RECAP_ENGINES_KAFKA_SASL_USERNAME", "recap");
    [("security.protocol", "SASL_PLAINTEXT"), ("sasl.mechanism", "PLAIN"), ("sasl.username", username.as_str()), ("sasl.password", password)]
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

impl Engines {
    pub fn from_env() -> Engines {
        let get = engine_setting;
        Engines {
            brokers: get("RECAP_KAFKA_BROKERS", "127.0.0.1:9092"),
            scylla_nodes: get("RECAP_SCYLLA_NODES", "127.0.0.1:9042"),
            scylla_username: get("RECAP_SCYLLA_USERNAME", ""),
            scylla_password: get("RECAP_SCYLLA_PASSWORD", ""),
            redis_url: get("RECAP_REDIS_URL", "redis://127.0.0.1:6379"),
        }
    }

    /// The store as the driver reaches it: its nodes and its login.
    pub fn scylla(&self) -> recap_scylla::ScyllaCluster {
        recap_scylla::ScyllaCluster::from_settings(&self.scylla_nodes, &self.scylla_username, &self.scylla_password)
    }

    /// The settings that give a `recap` process the store's nodes and login.
    pub fn scylla_envs(&self) -> Vec<(String, String)> {
        let mut envs = vec![("RECAP_SCYLLA_NODES".to_string(), self.scylla_nodes.clone())];
        if !self.scylla_username.is_empty() {
            envs.push(("RECAP_SCYLLA_USERNAME".into(), self.scylla_username.clone()));
            envs.push(("RECAP_SCYLLA_PASSWORD".into(), self.scylla_password.clone()));
        }
        envs
    }
}

/// A consumer group's state and its members' ids, as the broker's coordinator has them,
/// asked through `client` (any client of the cluster).
pub fn group_membership<C: rdkafka::consumer::ConsumerContext>(client: &rdkafka::consumer::BaseConsumer<C>, group_id: &str) -> (String, Vec<String>) {
    use rdkafka::consumer::Consumer as _;
    let list = client.fetch_group_list(Some(group_id), Duration::from_secs(5)).expect("the group's description");
    let group = list.groups().iter().find(|group| group.name() == group_id).unwrap_or_else(|| panic!("the group {group_id}"));
    (group.state().to_string(), group.members().iter().map(|member| member.id().to_string()).collect())
}

static NEXT_RUN: AtomicU64 = AtomicU64::new(0);

/// A unique, CQL- and Kafka-safe name for one test's resources.
pub fn run_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or_default();
    format!("t{}_{}_{}", std::process::id(), nanos % 1_000_000_000, NEXT_RUN.fetch_add(1, Ordering::SeqCst))
}

/// One running role and what it printed.
pub struct Role {
    pub name: String,
    pub child: Option<Child>,
    pub args: Vec<String>,
    pub envs: Vec<(String, String)>,
    pub url: String,
    pub admin_url: String,
}

/// Events a `/progress` document accounts for: applied, stale, skipped or dead-lettered.
pub fn accounted(progress: &serde_json::Value) -> u64 {
    ["applied", "stale", "skipped_unknown", "dead_lettered"].iter().map(|key| progress[*key].as_u64().unwrap_or(0)).sum()
}

impl Role {
    /// A running projector's `/progress`: the partitions it holds (those it reports a
    /// lag for) and the events it accounted for (applied, stale, skipped or dead-lettered).
    pub fn progress(&self) -> (usize, u64) {
        let progress = self.progress_json();
        (progress["partition_lag"].as_object().map_or(0, |lags| lags.len()), accounted(&progress))
    }

    /// A running projector's `/progress` document (null when it does not answer).
    pub fn progress_json(&self) -> serde_json::Value {
        let (_, _, body) = get(&format!("{}progress", self.admin_url), None);
        serde_json::from_str(&body).unwrap_or_default()
    }

    fn spawn(name: &str, args: Vec<String>, envs: Vec<(String, String)>) -> Role {
        let mut role = Role { name: name.to_string(), child: None, args, envs, url: String::new(), admin_url: String::new() };
        role.start();
        role
    }

    /// Starts the roles named (each run as `recap <name>`) at once and waits until every
    /// one is ready: each takes a second or more to connect to the engines, time that
    /// need not add up.
    fn spawn_all(roles: &[&str], envs: &[(String, String)]) -> Vec<Role> {
        let launched: Vec<(Role, mpsc::Receiver<String>)> = roles
            .iter()
            .map(|name| {
                let (name, args, envs) = (name.to_string(), vec![name.to_string()], envs.to_vec());
                let mut role = Role { name, child: None, args, envs, url: String::new(), admin_url: String::new() };
                let lines = role.launch();
                (role, lines)
            })
            .collect();
        launched
            .into_iter()
            .map(|(mut role, lines)| {
                role.await_ready(lines);
                role
            })
            .collect()
    }

    pub fn start(&mut self) {
        let lines = self.launch();
        self.await_ready(lines);
    }

    /// Spawns the process; its standard output's lines arrive on the receiver.
    fn launch(&mut self) -> mpsc::Receiver<String> {
        let mut command = Command::new(recap_bin());
        command.args(&self.args).env("RECAP_LOG", "error").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        let (child, receiver) = spawn_with_lines(&mut command).unwrap_or_else(|error| panic!("start recap {}: {error}", self.name));
        self.child = Some(child);
        self.url.clear();
        self.admin_url.clear();
        receiver
    }

    /// Waits until the launched process printed its URLs and its store answers.
    fn await_ready(&mut self, receiver: mpsc::Receiver<String>) {
        // The projector and the webhooks role serve only their admin address.
        let wants_url = !matches!(self.name.as_str(), "projector" | "webhooks");
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.admin_url.is_empty() || (wants_url && self.url.is_empty()) {
            let line = receiver
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("recap {} did not print its URLs (are the engines up? `make up`)", self.name));
            if let Some(url) = line.split("base_url ").nth(1).or_else(|| line.split("mcp_url ").nth(1)) {
                self.url = url.trim().to_string();
            }
            if let Some(url) = line.split("admin_url ").nth(1) {
                self.admin_url = url.trim().trim_end_matches('/').to_string() + "/";
            }
        }
        std::thread::spawn(move || while receiver.recv().is_ok() {});
        // Ready means its store answers.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, _, _) = get(&format!("{}readyz", self.admin_url), None);
            if status == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "recap {} never became ready", self.name);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and returns at once (the process keeps running while it drains).
    pub fn terminate(&self) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        }
    }

    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.stop_within(Duration::from_secs(60)).map(|(status, _)| status)
    }

    /// SIGTERM, then waits up to `limit` for the exit: the status and whether the
    /// process exited by itself (past `limit` it is killed). None if it was not running.
    pub fn stop_within(&mut self, limit: Duration) -> Option<(std::process::ExitStatus, bool)> {
        self.terminate();
        let mut child = self.child.take()?;
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some((status, true));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return child.wait().ok().map(|status| (status, false));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The whole distributed edition for one test.
pub struct Cluster {
    pub id: String,
    pub engines: Engines,
    pub projectors: Vec<Role>,
    pub query_apis: Vec<Role>,
    pub mcp: Role,
    /// The `recap webhooks` processes ([`Cluster::add_webhooks`]), in one consumer group.
    pub webhooks: Vec<Role>,
    /// Events produced so far: the projector has caught up when it accounted for all.
    pub produced: AtomicU64,
    pub topic_prefix: String,
    pub keyspace: String,
    /// The keyspace's slot in the test kit's pool ([`crate::store`]), given back once
    /// every role is stopped.
    keyspace_lease: Option<crate::store::KeyspaceLease>,
    common_envs: Vec<(String, String)>,
}

impl Cluster {
    /// Starts every role; `envs` go to every process (settings such as
    /// `RECAP_REST_RATE_LIMIT_PER_MINUTE` apply to both editions alike).
    pub fn start(envs: &[(String, String)]) -> Cluster {
        let engines = Engines::from_env();
        let id = run_id();
        let topic_prefix = format!("{id}.");
        let keyspace_lease = lease_keyspace(&engines);
        let keyspace = keyspace_lease.name().to_string();
        create_topics(&engines.brokers, &topics(&topic_prefix));
        let mut common: Vec<(String, String)> = vec![
            ("RECAP_KAFKA_BROKERS".into(), engines.brokers.clone()),
            ("RECAP_KAFKA_TOPIC_PREFIX".into(), topic_prefix.clone()),
            ("RECAP_KAFKA_GROUP".into(), format!("{id}-projector")),
            ("RECAP_SCYLLA_KEYSPACE".into(), keyspace.clone()),
            ("RECAP_SCYLLA_CONSISTENCY".into(), "local_quorum".into()),
            ("RECAP_REDIS_URL".into(), engines.redis_url.clone()),
            ("RECAP_REDIS_KEY_PREFIX".into(), format!("{id}:")),
            ("RECAP_CURSOR_SECRET".into(), format!("cursor-secret-of-{id}-0123456789abcdef")),
            ("RECAP_ADMIN_LISTEN".into(), "127.0.0.1:0".into()),
            ("RECAP_REST_LISTEN".into(), "127.0.0.1:0".into()),
            ("RECAP_MCP_LISTEN".into(), "127.0.0.1:0".into()),
            ("RECAP_PROJECTOR_BATCH_WAIT_MS".into(), "2".into()),
        ];
        common.extend(engines.scylla_envs());
        common.extend(envs.iter().cloned());
        let mut roles = Role::spawn_all(&["projector", "query-api", "query-api", "mcp"], &common).into_iter();
        let (projectors, query_apis, mcp) = match (roles.next(), roles.next(), roles.next(), roles.next()) {
            (Some(projector), Some(query_api_1), Some(query_api_2), Some(mcp)) => (vec![projector], vec![query_api_1, query_api_2], mcp),
            _ => unreachable!("four roles were started"),
        };
        Cluster {
            id,
            engines,
            projectors,
            query_apis,
            mcp,
            webhooks: Vec::new(),
            produced: AtomicU64::new(0),
            topic_prefix,
            keyspace,
            keyspace_lease: Some(keyspace_lease),
            common_envs: common,
        }
    }

    /// A setting every role of the cluster was started with.
    pub fn env(&self, key: &str) -> Option<&str> {
        self.common_envs.iter().rev().find(|(name, _)| name == key).map(|(_, value)| value.as_str())
    }

    /// Another projector in the same consumer group (rebalance tests).
    pub fn add_projector(&mut self) {
        self.projectors.push(Role::spawn("projector", vec!["projector".into()], self.common_envs.clone()));
    }

    /// Another `recap mcp` process with the cluster's settings (a second pod behind a
    /// load balancer without session affinity); stopped when dropped.
    pub fn add_mcp(&self) -> Role {
        Role::spawn("mcp", vec!["mcp".into()], self.common_envs.clone())
    }

    /// Starts a `recap webhooks` process (another member of the group
    /// `<prefix>recap-webhooks` when one runs already), delivering to `http` and loopback
    /// URLs; its settings are the cluster's (`RECAP_WEBHOOKS_*` among the `envs` given to
    /// [`Cluster::start`]). Its index in [`Cluster::webhooks`].
    pub fn add_webhooks(&mut self) -> usize {
        let args = vec!["webhooks".into(), "--webhooks-allow-insecure".into()];
        self.webhooks.push(Role::spawn("webhooks", args, self.common_envs.clone()));
        self.webhooks.len() - 1
    }

    /// Publishes events to their contract topics with their contract keys.
    pub fn produce<E: EventLine>(&self, events: &[E]) {
        let file = events_file(events);
        let output = Command::new(recap_bin())
            .args(["events", "append", "--kafka", &self.engines.brokers, "--topic-prefix", &self.topic_prefix])
            .arg(file.path())
            .output()
            .expect("run recap events append --kafka");
        assert!(output.status.success(), "producing failed: {}", String::from_utf8_lossy(&output.stderr));
        self.produced.fetch_add(events.len() as u64, Ordering::SeqCst);
    }

    /// Events every projector accounted for (applied, stale, skipped or dead-lettered).
    pub fn accounted(&self) -> u64 {
        self.projectors.iter().filter(|role| role.child.is_some()).map(|role| role.progress().1).sum()
    }

    /// Waits until the projectors accounted for every produced event.
    pub fn wait_projected(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let want = self.produced.load(Ordering::SeqCst);
        loop {
            let accounted = self.accounted();
            if accounted >= want {
                return;
            }
            assert!(Instant::now() < deadline, "projected {accounted} of {want} events");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Cluster {
    /// Stops every role, then gives the keyspace back to the pool (the next cluster
    /// empties it) and deletes the run's topics: a broker holding thousands of test
    /// partitions runs out of heap.
    fn drop(&mut self) {
        for role in self.projectors.iter_mut().chain(self.query_apis.iter_mut()).chain(std::iter::once(&mut self.mcp)).chain(self.webhooks.iter_mut()) {
            role.kill9();
        }
        drop(self.keyspace_lease.take());
        delete_topics(&self.engines.brokers, &topics(&self.topic_prefix).into_iter().map(|(name, _)| name).collect::<Vec<_>>());
    }
}

/// A migrated, empty keyspace from the test kit's pool of cluster keyspaces.
fn lease_keyspace(engines: &Engines) -> crate::store::KeyspaceLease {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let lease = runtime.block_on(crate::store::lease_keyspace("cluster", engines.scylla()));
    lease.unwrap_or_else(|error| panic!("a keyspace of the real Cassandra (are the engines up? `make up`): {error}"))
}

/// A run's topics under `prefix`, with their partition counts.
fn topics(prefix: &str) -> Vec<(String, i32)> {
    [("recap.accounts.v1", 3), ("recap.meetings.v1", 3), ("recap.sharing.v1", 3), ("recap.deadletter.v1", 1), ("recap.messages.v1", 3)]
        .iter()
        .map(|(name, partitions)| (format!("{prefix}{name}"), *partitions))
        .collect()
}

/// A Kafka admin client of the engines at `brokers`, with a runtime of its own to drive it.
fn admin(brokers: &str) -> (tokio::runtime::Runtime, rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let admin = rdkafka::config::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("kafka admin client");
    (runtime, admin)
}

/// Deletes topics; best effort (a run killed before this leaves them to `make up`,
/// which deletes the topics of runs whose process is gone).
pub fn delete_topics(brokers: &str, names: &[String]) {
    use rdkafka::admin::AdminOptions;
    let (runtime, admin) = admin(brokers);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10))).operation_timeout(Some(Duration::from_secs(30)));
    let _ = runtime.block_on(admin.delete_topics(&names, &options));
}

/// Creates topics (name, partitions); one that exists already is fine.
pub fn create_topics(brokers: &str, topics: &[(String, i32)]) {
    use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
    let (runtime, admin) = admin(brokers);
    let new: Vec<NewTopic> = topics.iter().map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1))).collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = runtime.block_on(admin.create_topics(&new, &options)).expect("create topics (are the engines up? `make up`)");
    for result in results {
        if let Err((topic, code)) = result {
            assert_eq!(code, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists, "creating {topic}");
        }
    }
}
