//! The roles of the distributed edition, each its own process: `migrate` (creates or
//! upgrades the keyspace and tables of `schemas/cql/recap.cql`), `projector` (Kafka into
//! ScyllaDB), `query_api` (the REST API) and `mcp` (the MCP server and its OAuth
//! authorization server), and the settings they share (the store, Redis, the operations
//! listener). Every role serves `/livez`, `/readyz` and `/metrics`, and drains on
//! SIGTERM; the webhooks role is `webhooks.rs`'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use recap_kafka::KafkaClient;
use recap_projector::kafka::KafkaConfig;
use recap_projector::Stats;
use recap_readmodel::{Driver, Instrumented, ReadModel};
use recap_scylla::{parse_consistency, Credentials, ScyllaCluster, ScyllaConfig, ScyllaDriver, ScyllaTls};

use crate::telemetry::Telemetry;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The Redis every replica shares: the query-api's rate-limit windows and quota
/// counters, the mcp role's counts of tool calls and of dynamic client registrations.
#[derive(Args, Debug, Clone)]
pub struct RedisArgs {
    /// Redis holding the limiters' counters, shared by every replica.
    #[arg(id = "redis_url", value_name = "REDIS_URL", long = "redis-url", env = "RECAP_REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    pub url: String,
    /// Prefix of every Redis key, so deployments can share one Redis.
    #[arg(id = "redis_key_prefix", value_name = "REDIS_KEY_PREFIX", long = "redis-key-prefix", env = "RECAP_REDIS_KEY_PREFIX", default_value = "recap:")]
    pub key_prefix: String,
    /// Bound of each limiter call, in milliseconds; past it the request is decided by
    /// the process's local limiter (fail open).
    #[arg(id = "redis_timeout_ms", value_name = "REDIS_TIMEOUT_MS", long = "redis-timeout-ms", env = "RECAP_REDIS_TIMEOUT_MS", default_value_t = 100)]
    pub timeout_ms: u64,
}

impl RedisArgs {
    /// The limiter over this Redis, connected on first use: with Redis away at start,
    /// calls fail open until it answers, as they do when it goes away later.
    pub fn limiter(&self) -> anyhow::Result<recap_redis::RedisLimiter> {
        let clock: Arc<dyn recap_access::Clock> = Arc::new(recap_access::SystemClock);
        recap_redis::RedisLimiter::new(&self.url, &self.key_prefix, Duration::from_millis(self.timeout_ms), clock)
            .map_err(|error| anyhow::anyhow!("RECAP_REDIS_URL: {error}"))
    }
}

/// How to reach ScyllaDB (or Cassandra standing in for it).
#[derive(Args, Debug, Clone)]
pub struct ScyllaArgs {
    /// Comma-separated `host:port` of ScyllaDB nodes.
    #[arg(long, env = "RECAP_SCYLLA_NODES", default_value = "127.0.0.1:9042", value_delimiter = ',')]
    pub scylla_nodes: Vec<String>,
    /// Keyspace of the read model.
    #[arg(long, env = "RECAP_SCYLLA_KEYSPACE", default_value = "recap")]
    pub keyspace: String,
    /// Consistency level of reads and writes (local_quorum, quorum, one, ...).
    #[arg(long, env = "RECAP_SCYLLA_CONSISTENCY", default_value = "local_quorum")]
    pub consistency: String,
    /// Bound of every store request, in milliseconds.
    #[arg(long = "store-timeout-ms", env = "RECAP_STORE_TIMEOUT_MS", default_value_t = 2_000)]
    pub scylla_timeout_ms: u64,
    /// Write requests of one batch in flight at once (the rows of one partition key go in
    /// one request).
    #[arg(long, env = "RECAP_SCYLLA_WRITE_CONCURRENCY", default_value_t = 256)]
    pub write_concurrency: usize,
    /// The login of a cluster that asks for one (`PasswordAuthenticator`), with
    /// --scylla-password.
    #[arg(long, env = "RECAP_SCYLLA_USERNAME", value_name = "USERNAME", requires = "scylla_password")]
    pub scylla_username: Option<String>,
    /// The login's password, never shown.
    #[arg(long, env = "RECAP_SCYLLA_PASSWORD", value_name = "PASSWORD", hide_env_values = true, requires = "scylla_username")]
    pub scylla_password: Option<Secret>,
    /// Connect with TLS: the PEM file of the CA certificates that sign the nodes'. Each
    /// node's certificate must chain to one of them and name the node's IP address.
    #[arg(long, env = "RECAP_SCYLLA_TLS_CA", value_name = "PEM_FILE")]
    pub scylla_tls_ca: Option<std::path::PathBuf>,
    /// The client certificate (PEM, its chain after it) for a cluster that requires one,
    /// with --scylla-tls-key and --scylla-tls-ca.
    #[arg(long, env = "RECAP_SCYLLA_TLS_CERT", value_name = "PEM_FILE", requires_all = ["scylla_tls_key", "scylla_tls_ca"])]
    pub scylla_tls_cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, env = "RECAP_SCYLLA_TLS_KEY", value_name = "PEM_FILE", requires = "scylla_tls_cert")]
    pub scylla_tls_key: Option<std::path::PathBuf>,
}

impl ScyllaArgs {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.scylla_timeout_ms)
    }

    /// The nodes with the login and TLS set; an error names a TLS file that cannot be used.
    pub fn cluster(&self) -> anyhow::Result<ScyllaCluster> {
        let mut cluster = ScyllaCluster::open(self.scylla_nodes.clone());
        if let (Some(username), Some(password)) = (&self.scylla_username, &self.scylla_password) {
            cluster.credentials = Some(Credentials { username: username.clone(), password: password.0.clone() });
        }
        if let Some(ca) = &self.scylla_tls_ca {
            let client = self.scylla_tls_cert.as_deref().zip(self.scylla_tls_key.as_deref());
            cluster.tls = Some(ScyllaTls::from_pem_files(ca, client).map_err(|error| anyhow::anyhow!("--scylla-tls-*: {error}"))?);
        }
        Ok(cluster)
    }

    /// Connects, retrying until the store answers (a role starts before its store).
    pub async fn connect(&self, shutdown: &mut watch::Receiver<bool>) -> anyhow::Result<Arc<dyn Driver>> {
        let consistency = parse_consistency(&self.consistency).map_err(anyhow::Error::msg)?;
        let config = ScyllaConfig {
            cluster: self.cluster()?,
            keyspace: self.keyspace.clone(),
            consistency,
            timeout: self.timeout(),
            write_concurrency: self.write_concurrency,
        };
        let mut backoff = Duration::from_millis(200);
        loop {
            match ScyllaDriver::connect(config.clone()).await {
                Ok(driver) => return Ok(Arc::new(Instrumented::new(Arc::new(driver), "cassandra"))),
                Err(error) => {
                    tracing::warn!(%error, "store not reachable yet, retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.changed() => anyhow::bail!("stopped before the store was reachable"),
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct MigrateConfig {
    #[command(flatten)]
    pub scylla: ScyllaArgs,
    /// The keyspace's replication, as CQL.
    #[arg(long, env = "RECAP_SCYLLA_REPLICATION", default_value = "{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}")]
    pub replication: String,
}

/// `recap migrate`: creates or upgrades the keyspace and tables; idempotent.
pub async fn migrate(config: MigrateConfig) -> anyhow::Result<()> {
    let migration =
        ScyllaDriver::migrate(&config.scylla.cluster()?, &config.scylla.keyspace, &config.replication, recap_readmodel::tables::ALL, config.scylla.timeout())
            .await
            .context("migrating the read model")?;
    println!("keyspace {} is up to date: {migration}", config.scylla.keyspace);
    Ok(())
}

#[derive(Args, Debug, Clone)]
pub struct KafkaArgs {
    /// Comma-separated Kafka bootstrap servers.
    #[arg(long, env = "RECAP_KAFKA_BROKERS", default_value = "127.0.0.1:9092")]
    pub kafka_brokers: String,
    #[command(flatten)]
    pub client_options: KafkaClientArgs,
    /// Prefix of every topic name (e.g. `staging.`), so several deployments or test
    /// runs can share one cluster.
    #[arg(long, env = "RECAP_KAFKA_TOPIC_PREFIX", default_value = "")]
    pub topic_prefix: String,
}

impl KafkaArgs {
    /// The cluster and the client options every Kafka client of the role is made with.
    pub fn client(&self) -> KafkaClient {
        self.client_options.client(&self.kafka_brokers)
    }
}

/// How to reach a secured Kafka cluster: librdkafka properties every client is made
/// with, and the SASL password apart, so that it can come from a Secret of its own.
#[derive(Args, Clone, Default)]
pub struct KafkaClientArgs {
    /// A librdkafka property for every Kafka client, KEY=VALUE (repeatable; the variable
    /// takes several, separated by `;`): how to reach the cluster, e.g.
    /// `security.protocol=SASL_SSL`, `sasl.mechanism=SCRAM-SHA-512`, `sasl.username=recap`,
    /// `ssl.ca.location=/etc/kafka/ca.pem`. A setting a client relies on (its group, its
    /// commits, its acknowledgements) is not changed by one.
    #[arg(long = "kafka-option", env = "RECAP_KAFKA_OPTIONS", value_name = "KEY=VALUE", value_delimiter = ';', value_parser = recap_kafka::parse_option, hide_env_values = true)]
    pub options: Vec<(String, String)>,
    /// The SASL password (librdkafka's `sasl.password`), never shown.
    #[arg(long = "kafka-sasl-password", env = "RECAP_KAFKA_SASL_PASSWORD", value_name = "PASSWORD", hide_env_values = true)]
    pub sasl_password: Option<String>,
}

impl std::fmt::Debug for KafkaClientArgs {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.options.iter().map(|(key, _)| key.as_str()).collect();
        formatter.debug_struct("KafkaClientArgs").field("option_keys", &keys).field("sasl_password", &self.sasl_password.as_ref().map(|_| "<set>")).finish()
    }
}

impl KafkaClientArgs {
    pub fn client(&self, brokers: &str) -> KafkaClient {
        let password = self.sasl_password.iter().map(|password| ("sasl.password".to_owned(), password.clone()));
        KafkaClient::new(brokers).with_options(self.options.iter().cloned().chain(password))
    }
}

#[derive(Args, Debug, Clone)]
pub struct ProjectorConfig {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub scylla: ScyllaArgs,
    /// Topics to consume.
    #[arg(long, env = "RECAP_KAFKA_TOPICS", default_value = "recap.accounts.v1,recap.meetings.v1,recap.sharing.v1", value_delimiter = ',')]
    pub topics: Vec<String>,
    /// Consumer group shared by every projector.
    #[arg(long, env = "RECAP_KAFKA_GROUP", default_value = "recap-projector")]
    pub group: String,
    /// Where invalid events go, with their source in headers.
    #[arg(long, env = "RECAP_KAFKA_DEAD_LETTER_TOPIC", default_value = "recap.deadletter.v1")]
    pub dead_letter_topic: String,
    /// Events per batch, at most.
    #[arg(long, env = "RECAP_PROJECTOR_MAX_BATCH", default_value_t = 2_000)]
    pub max_batch: usize,
    /// How long a batch waits for more events once it has one, in milliseconds.
    #[arg(long, env = "RECAP_PROJECTOR_BATCH_WAIT_MS", default_value_t = 5)]
    pub batch_wait_ms: u64,
    /// Kafka's `max.poll.interval.ms`: the longest a member may go without polling
    /// before the group evicts it. The projector polls while a batch waits for the
    /// store, so a long store outage does not reach it; at least the session timeout
    /// (10,000).
    #[arg(long, env = "RECAP_KAFKA_MAX_POLL_INTERVAL_MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(10_000..=86_400_000))]
    pub max_poll_interval_ms: u64,
    /// Address of /livez, /readyz, /metrics and /progress.
    #[arg(long, env = "RECAP_ADMIN_LISTEN", default_value = "127.0.0.1:9464")]
    pub admin_listen: SocketAddr,
    #[command(flatten)]
    pub http: crate::http::HttpLimits,
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}

/// A watch that turns true on SIGTERM or Ctrl-C.
pub fn shutdown_watch() -> watch::Receiver<bool> {
    let (sender, receiver) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = sender.send(true);
    });
    receiver
}

/// Serves the operations listener until `shutdown`.
pub async fn serve_admin(
    listen: SocketAddr,
    state: crate::admin::AdminState,
    limits: &crate::http::HttpLimits,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(listen).await.with_context(|| format!("binding the admin listener {listen}"))?;
    println!("admin     admin_url http://{}/", listener.local_addr()?);
    let router = crate::admin::router(state);
    let limits = limits.clone();
    Ok(tokio::spawn(async move {
        let _ = crate::http::serve(listener, router, &limits, crate::http::Metered::No, async move {
            let _ = shutdown.wait_for(|stop| *stop).await;
        })
        .await;
    }))
}

/// `recap projector`: Kafka into ScyllaDB until SIGTERM, then commits and exits.
pub async fn projector(config: ProjectorConfig, telemetry: Telemetry) -> anyhow::Result<()> {
    let mut shutdown = shutdown_watch();
    let stats = Arc::new(Stats::default());
    crate::telemetry::observe_projector(stats.clone(), None);
    let driver = config.scylla.connect(&mut shutdown).await?;
    let readmodel = ReadModel::new(driver.clone());
    let admin = serve_admin(
        config.admin_listen,
        crate::admin::AdminState { readmodel, stats: Some(stats.clone()), log: None, telemetry },
        &config.http,
        shutdown.clone(),
    )
    .await?;
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let kafka = KafkaConfig {
        client: config.kafka.client(),
        topics: config.topics.iter().map(|topic| format!("{}{topic}", config.kafka.topic_prefix)).collect(),
        group_id: config.group.clone(),
        dead_letter_topic: format!("{}{}", config.kafka.topic_prefix, config.dead_letter_topic),
        messages_topic: format!("{}{}", config.kafka.topic_prefix, recap_projector::kafka::MESSAGES_TOPIC),
        max_batch: config.max_batch,
        batch_wait: Duration::from_millis(config.batch_wait_ms),
        max_poll_interval: Duration::from_millis(config.max_poll_interval_ms),
    };
    recap_projector::kafka::run(driver, kafka, stats, shutdown).await.context("kafka projector")?;
    let _ = admin.await;
    tracing::info!("projector stopped after committing its last batch");
    Ok(())
}

/// `recap events append --kafka`: publishes JSON Lines envelopes to their topics.
pub async fn produce(client: &KafkaClient, lines: Vec<Vec<u8>>, topic: Option<&str>, topic_prefix: &str) -> anyhow::Result<usize> {
    recap_projector::kafka::produce(client, &lines, topic, topic_prefix).await.map_err(anyhow::Error::msg)
}

#[derive(Args, Debug, Clone)]
pub struct QueryApiConfig {
    #[command(flatten)]
    pub scylla: ScyllaArgs,
    #[command(flatten)]
    pub rest: recap_query_api::RestConfig,
    #[command(flatten)]
    pub plans: recap_access::PlanConfig,
    #[command(flatten)]
    pub redis: RedisArgs,
    /// Address of the REST API; its base_url is http://<this>/v1.
    #[arg(long, env = "RECAP_REST_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of /livez, /readyz and /metrics.
    #[arg(long, env = "RECAP_ADMIN_LISTEN", default_value = "127.0.0.1:9464")]
    pub admin_listen: SocketAddr,
    #[command(flatten)]
    pub http: crate::http::HttpLimits,
}

/// `recap query-api`: the REST API over ScyllaDB and Redis until SIGTERM, then drains.
pub async fn query_api(config: QueryApiConfig, telemetry: Telemetry) -> anyhow::Result<()> {
    let mut shutdown = shutdown_watch();
    let secret = config.rest.cursor_secret_bytes().context("RECAP_CURSOR_SECRET is required: every replica must seal cursors with the same key")?;
    let plans = recap_access::Plans::from_config(&config.plans).map_err(anyhow::Error::msg)?;
    let driver = config.scylla.connect(&mut shutdown).await?;
    let readmodel = ReadModel::new(driver);
    let redis_limiter = Arc::new(config.redis.limiter()?);
    let limiter: Arc<dyn recap_access::Limiter> = redis_limiter.clone();
    crate::telemetry::observe_fail_open(redis_limiter.clone());
    let admin = serve_admin(
        config.admin_listen,
        crate::admin::AdminState { readmodel: readmodel.clone(), stats: None, log: None, telemetry },
        &config.http,
        shutdown.clone(),
    )
    .await?;
    let listener = TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    println!("REST API  base_url http://{}/v1", listener.local_addr()?);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let router = crate::telemetry::http_layer(recap_query_api::router(recap_query_api::RestState::new(readmodel, plans, limiter, secret, &config.rest)));
    let mut stop = shutdown.clone();
    crate::http::serve(listener, router, &config.http, crate::http::Metered::Yes, async move {
        let _ = stop.wait_for(|stop| *stop).await;
    })
    .await
    .context("serving the REST API")?;
    let _ = admin.await;
    Ok(())
}

/// A secret setting, whose `Debug` form never shows it.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(text: &str) -> Result<Secret, Self::Err> {
        Ok(Secret(text.to_string()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("<redacted>")
    }
}

#[derive(Args, Debug, Clone)]
pub struct McpRoleConfig {
    #[command(flatten)]
    pub scylla: ScyllaArgs,
    #[command(flatten)]
    pub plans: recap_access::PlanConfig,
    #[command(flatten)]
    pub mcp: recap_mcp::McpConfig,
    /// The key that seals `list_recent_changes` cursors; every mcp replica behind one URL
    /// must share it (it may be query-api's). Required.
    #[arg(long = "cursor-secret", env = "RECAP_CURSOR_SECRET", hide_env_values = true)]
    pub cursor_secret: Option<Secret>,
    #[command(flatten)]
    pub redis: RedisArgs,
    /// Address of the MCP server; its mcp_url is http://<this>/mcp.
    #[arg(long, env = "RECAP_MCP_LISTEN", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Address of /livez, /readyz and /metrics.
    #[arg(long, env = "RECAP_ADMIN_LISTEN", default_value = "127.0.0.1:9464")]
    pub admin_listen: SocketAddr,
    #[command(flatten)]
    pub http: crate::http::HttpLimits,
}

/// `recap mcp`: the MCP server and its OAuth authorization server over ScyllaDB until
/// SIGTERM, then drains. Its OAuth state lives in the store, so any replica serves any
/// request.
pub async fn mcp(mut config: McpRoleConfig, telemetry: Telemetry) -> anyhow::Result<()> {
    config.mcp.load_development_settings().map_err(anyhow::Error::msg)?;
    let cursor_secret = config
        .cursor_secret
        .take()
        .map(|secret| secret.0)
        .filter(|secret| !secret.is_empty())
        .context("RECAP_CURSOR_SECRET is required: every replica must seal cursors with the same key")?;
    let mut shutdown = shutdown_watch();
    let plans = recap_access::Plans::from_config(&config.plans).map_err(anyhow::Error::msg)?;
    let driver = config.scylla.connect(&mut shutdown).await?;
    let readmodel = ReadModel::new(driver);
    let admin = serve_admin(
        config.admin_listen,
        crate::admin::AdminState { readmodel: readmodel.clone(), stats: None, log: None, telemetry },
        &config.http,
        shutdown.clone(),
    )
    .await?;
    let listener = TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    println!("MCP       mcp_url  http://{}/mcp", listener.local_addr()?);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let redis_limiter = Arc::new(config.redis.limiter()?);
    crate::telemetry::observe_fail_open(redis_limiter.clone());
    let state = recap_mcp::McpState::new(readmodel, plans, &config.mcp).with_limiter(redis_limiter).with_cursor_secret(cursor_secret.as_bytes());
    let router = crate::telemetry::http_layer(recap_mcp::router(state));
    let mut stop = shutdown.clone();
    crate::http::serve(listener, router, &config.http, crate::http::Metered::Yes, async move {
        let _ = stop.wait_for(|stop| *stop).await;
    })
    .await
    .context("serving MCP")?;
    let _ = admin.await;
    Ok(())
}
