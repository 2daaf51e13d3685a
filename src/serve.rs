//! `recap serve`: the embedded edition in one process over one data dir — the projector
//! tailing the local log into the embedded store, the REST API and the MCP server
//! reading it, the webhooks runtime tailing the projector's message outbox into the
//! feed and delivering it, and the operations listener. SIGTERM or Ctrl-C drains in-flight
//! requests and lets the projector commit the batch in hand before exiting.
//!
//! Data dir layout: `events.log` (the event stream), `deadletter.jsonl` (invalid
//! events with reason and offset), `store.lmdb` and `store.lmdb-lock` (the read model),
//! `cursor-secret` (the key that seals REST and MCP cursors, created once), `quota-usage.json`
//! (the quota counts of the current billing periods), `demo-token` (with `--demo`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use recap_access::{InProcessLimiter, PeriodCount};
use recap_lmdb::EmbeddedDriver;
use recap_projector::{EmbeddedProjector, EventLog, LoopConfig};
use recap_readmodel::{Driver, Instrumented, ReadModel};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub const LOG_FILE: &str = "events.log";
pub const DEAD_LETTER_FILE: &str = "deadletter.jsonl";
pub const STORE_FILE: &str = "store.lmdb";
const CURSOR_SECRET_FILE: &str = "cursor-secret";
const DEMO_TOKEN_FILE: &str = "demo-token";
/// The REST API's quota counts of the current billing periods, kept across restarts.
pub const QUOTA_FILE: &str = "quota-usage.json";
/// How often changed quota counts are saved: a crash forgets at most this much counting
/// (a clean stop saves them last).
const QUOTA_SAVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The store's expired rows are removed a minute after the start, then every hour, a
/// step of this many rows at a time, with a pause between steps for the writers.
const SWEEP_FIRST: std::time::Duration = std::time::Duration::from_secs(60);
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);
const SWEEP_STEP_ROWS: usize = 10_000;
const SWEEP_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// Removes the store's expired rows now and then ([`EmbeddedDriver::remove_expired`]),
/// until `stop`: every read skips them already, so this only gives back their room
/// and spares scans stepping over them.
async fn remove_expired_periodically(store: Arc<EmbeddedDriver>, mut stop: watch::Receiver<bool>) {
    let mut wait = SWEEP_FIRST;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        wait = SWEEP_EVERY;
        let (mut after, mut scanned, mut removed) = (None::<Vec<u8>>, 0, 0);
        loop {
            let (step_store, from) = (store.clone(), after.take());
            match tokio::task::spawn_blocking(move || step_store.remove_expired(from.as_deref(), SWEEP_STEP_ROWS)).await {
                Ok(Ok(step)) => {
                    scanned += step.scanned;
                    removed += step.removed;
                    after = step.next;
                }
                Ok(Err(error)) => tracing::warn!(%error, "removing the store's expired rows failed; trying again at the next sweep"),
                Err(error) => tracing::warn!(%error, "the expired rows' sweep stopped"),
            }
            if after.is_none() || *stop.borrow() {
                break;
            }
            tokio::time::sleep(SWEEP_PAUSE).await;
        }
        tracing::info!(scanned, removed, "removed the store's expired rows");
    }
}

#[derive(Args, Debug, Clone)]
pub struct ServeConfig {
    /// Where the log, the read model and the secrets live.
    #[arg(long, env = "RECAP_DATA_DIR", default_value = "./recap-data")]
    pub data_dir: PathBuf,
    /// Address of the REST API; its base_url is http://<this>/v1.
    #[arg(long, env = "RECAP_REST_LISTEN", default_value = "127.0.0.1:8080")]
    pub rest_listen: SocketAddr,
    /// Address of the MCP server; its mcp_url is http://<this>/mcp.
    #[arg(long, env = "RECAP_MCP_LISTEN", default_value = "127.0.0.1:8081")]
    pub mcp_listen: SocketAddr,
    /// Address of /livez, /readyz, /metrics and /progress.
    #[arg(long, env = "RECAP_ADMIN_LISTEN", default_value = "127.0.0.1:8082")]
    pub admin_listen: SocketAddr,
    /// Seed a demo world through the event log on the first start of a new data dir, and
    /// print the demo token on every start (it is kept in the data dir's `demo-token`).
    #[arg(long, env = "RECAP_DEMO")]
    pub demo: bool,
    #[command(flatten)]
    pub rest: recap_query_api::RestConfig,
    #[command(flatten)]
    pub plans: recap_access::PlanConfig,
    #[command(flatten)]
    pub mcp: recap_mcp::McpConfig,
    #[command(flatten)]
    pub delivery: crate::webhooks::DeliveryArgs,
    /// The limits of each of the three listeners (each counts its own connections).
    #[command(flatten)]
    pub http: crate::http::HttpLimits,
}

/// Reads the key that seals cursors from the data dir, creating it on first start.
fn cursor_secret(data_dir: &Path) -> anyhow::Result<Vec<u8>> {
    let path = data_dir.join(CURSOR_SECRET_FILE);
    if let Ok(existing) = std::fs::read(&path) {
        if existing.len() >= 32 {
            return Ok(existing);
        }
    }
    let secret: [u8; 32] = rand::random();
    write_private(&path, &secret)?;
    Ok(secret.to_vec())
}

/// Writes a file only its owner may read (secrets, tokens).
fn write_private(path: &Path, content: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file =
        std::fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(path).with_context(|| format!("writing {}", path.display()))?;
    file.write_all(content).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The saved quota counts: none when the file does not exist yet. A file that cannot be
/// read stops the start and is left as it is (starting from zero would hand every
/// account its whole quota again).
fn load_quota_counts(path: &Path) -> anyhow::Result<Vec<PeriodCount>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
            format!("{} does not hold quota counts; it is left as it is (move it away to count the current periods from zero)", path.display())
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// Replaces the quota file whole (written aside, synced, renamed over), so a crash
/// leaves the previous counts or the new ones, never a torn file.
fn save_quota_counts(path: &Path, counts: &[PeriodCount]) -> anyhow::Result<()> {
    use std::io::Write;
    let aside = path.with_extension("json.new");
    let mut file = std::fs::File::create(&aside).with_context(|| format!("writing {}", aside.display()))?;
    file.write_all(&serde_json::to_vec_pretty(counts)?).and_then(|()| file.sync_all()).with_context(|| format!("writing {}", aside.display()))?;
    std::fs::rename(&aside, path).with_context(|| format!("replacing {}", path.display()))
}

/// Saves the limiter's quota counts every [`QUOTA_SAVE_INTERVAL`] when they changed, and
/// once more when `stop` turns true (after the servers have drained).
async fn save_quota_counts_periodically(limiter: Arc<InProcessLimiter>, path: PathBuf, mut stop: watch::Receiver<bool>) {
    let mut saved = limiter.counted();
    let mut failing = false;
    let mut ticks = tokio::time::interval(QUOTA_SAVE_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let stopping = tokio::select! {
            _ = ticks.tick() => false,
            _ = stop.wait_for(|stop| *stop) => true,
        };
        let counted = limiter.counted();
        if counted != saved {
            let counts = limiter.period_counts();
            let path = path.clone();
            let outcome = tokio::task::spawn_blocking(move || save_quota_counts(&path, &counts)).await.map_err(anyhow::Error::from).and_then(|result| result);
            match outcome {
                Ok(()) => {
                    saved = counted;
                    if std::mem::take(&mut failing) {
                        tracing::info!("quota counts saved again");
                    }
                }
                // Warned once per failing spell; the counts stay in memory and are retried.
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(error = format!("{error:#}"), "quota counts could not be saved; retrying every second");
                }
                Err(_) => {}
            }
        }
        if stopping {
            break;
        }
    }
}

/// Seeds the demo world on first start; returns the demo token either way.
fn seed_demo(data_dir: &Path, log: &EventLog) -> anyhow::Result<String> {
    let token_path = data_dir.join(DEMO_TOKEN_FILE);
    if let Ok(token) = std::fs::read_to_string(&token_path) {
        return Ok(token.trim().to_string());
    }
    anyhow::ensure!(log.is_empty()?, "--demo seeds only a new data dir, and {} already has events", data_dir.display());
    let world = crate::demo::world(recap_readmodel::driver::now_micros());
    let mut content = String::new();
    for envelope in &world.events {
        content.push_str(&envelope.to_line());
        content.push('\n');
    }
    log.append("demo", content.as_bytes()).context("appending the demo world")?;
    write_private(&token_path, world.token.as_bytes())?;
    tracing::info!(events = world.events.len(), "seeded the demo world");
    Ok(world.token)
}

pub async fn run(mut config: ServeConfig, telemetry: crate::telemetry::Telemetry) -> anyhow::Result<()> {
    config.mcp.load_development_settings().map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&config.data_dir).with_context(|| format!("creating data dir {}", config.data_dir.display()))?;
    let log = EventLog::new(config.data_dir.join(LOG_FILE));
    let store_path = config.data_dir.join(STORE_FILE);
    let lmdb =
        Arc::new(EmbeddedDriver::open(&store_path).with_context(|| format!("opening {} (is another recap serve using this data dir?)", store_path.display()))?);
    let embedded: Arc<dyn Driver> = lmdb.clone();
    let driver: Arc<dyn Driver> = Arc::new(Instrumented::new(embedded, "lmdb"));
    let (stop_sweeper, sweeper_stopped) = watch::channel(false);
    let sweeper = tokio::spawn(remove_expired_periodically(lmdb, sweeper_stopped));
    let readmodel = ReadModel::new(driver.clone());
    let demo_token = if config.demo { Some(seed_demo(&config.data_dir, &log)?) } else { None };
    let secret = match config.rest.cursor_secret_bytes() {
        Some(secret) => secret,
        None => cursor_secret(&config.data_dir)?,
    };
    let plans = recap_access::Plans::from_config(&config.plans).map_err(anyhow::Error::msg).context("--plan-features")?;

    let projector = EmbeddedProjector::new(driver.clone(), log.clone(), config.data_dir.join(DEAD_LETTER_FILE), LoopConfig::default());
    let stats = projector.stats();
    crate::telemetry::observe_projector(stats.clone(), Some(log.clone()));
    let (stop_projector, projector_stopped) = watch::channel(false);
    let mut projector_task = tokio::spawn(async move { projector.run(projector_stopped).await });
    let (stop_webhooks, webhooks_stopped) = watch::channel(false);
    let webhooks = crate::webhooks::spawn_embedded(driver.clone(), &config.rest.feed, &config.delivery, webhooks_stopped);

    let rest = TcpListener::bind(config.rest_listen).await.with_context(|| format!("binding the REST listener {}", config.rest_listen))?;
    let mcp = TcpListener::bind(config.mcp_listen).await.with_context(|| format!("binding the MCP listener {}", config.mcp_listen))?;
    let admin = TcpListener::bind(config.admin_listen).await.with_context(|| format!("binding the admin listener {}", config.admin_listen))?;
    let (rest_address, mcp_address, admin_address) = (rest.local_addr()?, mcp.local_addr()?, admin.local_addr()?);

    let quota_path = config.data_dir.join(QUOTA_FILE);
    let limiter = Arc::new(InProcessLimiter::with_system_clock());
    limiter.restore(load_quota_counts(&quota_path)?);
    let (stop_quota_saver, quota_saver_stopped) = watch::channel(false);
    let quota_saver = tokio::spawn(save_quota_counts_periodically(limiter.clone(), quota_path, quota_saver_stopped));
    let rest_router = crate::telemetry::http_layer(recap_query_api::router(recap_query_api::RestState::new(
        readmodel.clone(),
        plans.clone(),
        limiter as Arc<dyn recap_access::Limiter>,
        secret.clone(),
        &config.rest,
    )));
    let mcp_router =
        crate::telemetry::http_layer(recap_mcp::router(recap_mcp::McpState::new(readmodel.clone(), plans, &config.mcp).with_cursor_secret(&secret)));
    let admin_router = crate::admin::router(crate::admin::AdminState { readmodel: readmodel.clone(), stats: Some(stats), log: Some(log.clone()), telemetry });

    // Written at once and without `println!`, which panics when standard output is gone
    // (a closed pipe): the server keeps serving whatever happens to its banner.
    let mut banner = format!(
        "recap serving data dir {}\nREST API  base_url http://{rest_address}/v1\nMCP       mcp_url  http://{mcp_address}/mcp\nadmin     admin_url http://{admin_address}/\n",
        config.data_dir.display()
    );
    if let Some(token) = &demo_token {
        banner.push_str(&format!(
            "\ndemo token (account acc_ada, plan flow): {token}\ntry:\n  curl -s -H 'Authorization: Bearer {token}' 'http://{rest_address}/v1/meetings?limit=3'\n"
        ));
        banner.push_str(&format!(
            "  curl -s -X POST http://{mcp_address}/mcp -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' \\\n       -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"list_meetings\",\"arguments\":{{\"limit\":3}}}}}}'\n"
        ));
        banner.push_str("  webhooks: `recap listen` receives and verifies them (docs/webhooks.md, \"Try it locally\")\n");
    }
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(banner.as_bytes()).and_then(|()| stdout.flush());
    drop(stdout);

    let (stop_servers, _) = tokio::sync::broadcast::channel::<()>(1);
    let serve = |listener: TcpListener, router: axum::Router, metered: crate::http::Metered| {
        let mut stop = stop_servers.subscribe();
        let limits = config.http.clone();
        tokio::spawn(async move {
            crate::http::serve(listener, router, &limits, metered, async move {
                let _ = stop.recv().await;
            })
            .await
        })
    };
    use crate::http::Metered;
    let servers = [serve(rest, rest_router, Metered::Yes), serve(mcp, mcp_router, Metered::Yes), serve(admin, admin_router, Metered::No)];

    // A projector that stops on its own (corrupt store, unreadable log) stops the
    // process: serving an ever staler read model silently is worse.
    let projector_result = tokio::select! {
        _ = crate::distributed::shutdown_signal() => None,
        result = &mut projector_task => Some(result),
    };
    tracing::info!("shutting down: draining requests and committing the projector's position");
    let _ = stop_servers.send(());
    for server in servers {
        let _ = server.await;
    }
    let _ = stop_quota_saver.send(true);
    let _ = quota_saver.await;
    let _ = stop_sweeper.send(true);
    let _ = sweeper.await;
    // Attempts in flight finish (each bounded by its timeout); what is pending stays
    // in the store for the next start.
    let _ = stop_webhooks.send(true);
    let _ = webhooks.await;
    let _ = stop_projector.send(true);
    let result = match projector_result {
        Some(result) => result,
        None => projector_task.await,
    };
    match result {
        Ok(Ok(progress)) => tracing::info!(position = progress.position, applied = progress.applied, "projector stopped"),
        Ok(Err(error)) => return Err(error).context("projector"),
        Err(error) => return Err(error).context("projector task"),
    }
    Ok(())
}
