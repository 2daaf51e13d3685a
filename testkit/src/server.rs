//! The black-box harness: starts the real `recap serve` on port 0 over a temporary data
//! dir, feeds it events through `recap events append`, and waits on the operations
//! listener's `/progress` (never on sleeps).
//!
//! With `RECAP_TEST_WORLD=cluster` (what `make test` sets for its second pass over the
//! black-box suites), `Server::start()` and `Server::builder().env(..).start()` start the
//! distributed edition instead ([`crate::cluster`]): the same URLs, `feed` produces to
//! Kafka and waits for the projector. Tests that need a data dir or `serve` flags are
//! about the embedded edition and always run it, as do builders marked `.embedded()`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster;
use crate::process::{append_lines, recap_bin, spawn_with_lines, EventLine};
use crate::world::Edition;

/// A running `recap serve`.
pub struct Server {
    child: Option<Child>,
    pub data_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
    /// `http://127.0.0.1:<port>/v1`
    pub base_url: String,
    /// `http://127.0.0.1:<port>/mcp`
    pub mcp_url: String,
    /// `http://127.0.0.1:<port>/`
    pub admin_url: String,
    /// Every REST base_url (two query-api processes in the distributed edition).
    pub base_urls: Vec<String>,
    /// Everything the server printed on standard output.
    pub stdout: Vec<String>,
    extra_args: Vec<String>,
    envs: Vec<(String, String)>,
    env_removes: Vec<String>,
    /// The distributed edition, when that is what runs.
    pub cluster: Option<cluster::Cluster>,
    /// What the server wrote on standard error, when the builder asked to keep it.
    stderr: Option<Arc<Mutex<Vec<String>>>>,
}

/// Whether the black-box suites run against the distributed edition
/// (`RECAP_TEST_WORLD=cluster`).
pub fn distributed() -> bool {
    Edition::from_env() == Edition::Cluster
}

pub struct ServerBuilder {
    data_dir: Option<PathBuf>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    env_removes: Vec<String>,
    embedded: bool,
    capture_stderr: bool,
}

impl ServerBuilder {
    /// Serve an existing data dir instead of a fresh temporary one.
    pub fn data_dir(mut self, path: &Path) -> Self {
        self.data_dir = Some(path.to_path_buf());
        self
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_string());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.envs.push((key.to_string(), value.to_string()));
        self
    }

    /// Not inherited from the test's environment (embedded edition).
    pub fn env_remove(mut self, key: &str) -> Self {
        self.env_removes.push(key.to_string());
        self
    }

    /// The embedded edition whatever `RECAP_TEST_WORLD` says.
    pub fn embedded(mut self) -> Self {
        self.embedded = true;
        self
    }

    /// Keeps what the server writes on standard error (its log lines, as `RECAP_LOG`
    /// chooses them) for [`Server::stderr_lines`], instead of passing it through. Embedded
    /// edition only: the distributed roles keep theirs.
    pub fn capture_stderr(mut self) -> Self {
        self.capture_stderr = true;
        self
    }

    pub fn start(self) -> Server {
        if distributed() && !self.embedded && self.data_dir.is_none() && self.args.is_empty() {
            let cluster = cluster::Cluster::start(&self.envs);
            return Server {
                child: None,
                data_dir: PathBuf::new(),
                _temp: None,
                base_url: cluster.query_apis[0].url.clone(),
                mcp_url: cluster.mcp.url.clone(),
                admin_url: cluster.projectors[0].admin_url.clone(),
                base_urls: cluster.query_apis.iter().map(|role| role.url.clone()).collect(),
                stdout: Vec::new(),
                extra_args: Vec::new(),
                envs: self.envs,
                env_removes: Vec::new(),
                cluster: Some(cluster),
                stderr: None,
            };
        }
        let (temp, data_dir) = match self.data_dir {
            Some(path) => (None, path),
            None => {
                let temp = tempfile::tempdir().expect("temp dir");
                let path = temp.path().join("data");
                (Some(temp), path)
            }
        };
        let mut server = Server {
            child: None,
            data_dir,
            _temp: temp,
            base_url: String::new(),
            mcp_url: String::new(),
            admin_url: String::new(),
            base_urls: Vec::new(),
            stdout: Vec::new(),
            extra_args: self.args,
            envs: self.envs,
            env_removes: self.env_removes,
            cluster: None,
            stderr: self.capture_stderr.then(Arc::default),
        };
        server.spawn();
        server
    }
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder { data_dir: None, args: Vec::new(), envs: Vec::new(), env_removes: Vec::new(), embedded: false, capture_stderr: false }
    }

    /// A fresh server over a new temporary data dir.
    pub fn start() -> Server {
        Server::builder().start()
    }

    fn spawn(&mut self) {
        let mut command = Command::new(recap_bin());
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--rest-listen", "127.0.0.1:0", "--mcp-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(&self.extra_args)
            .env("RECAP_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if self.stderr.is_some() { Stdio::piped() } else { Stdio::inherit() });
        for key in &self.env_removes {
            command.env_remove(key);
        }
        for (key, value) in &self.envs {
            command.env(key, value);
        }
        let (mut child, receiver) = spawn_with_lines(&mut command).expect("start recap serve");
        if let (Some(lines), Some(stderr)) = (&self.stderr, child.stderr.take()) {
            let lines = Arc::clone(lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line);
                }
            });
        }
        self.child = Some(child);
        self.stdout.clear();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.base_url.is_empty() || self.mcp_url.is_empty() || self.admin_url.is_empty() {
            let line = receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("recap serve printed its URLs");
            if let Some(url) = line.split("base_url ").nth(1) {
                self.base_url = url.trim().to_string();
            }
            if let Some(url) = line.split("mcp_url ").nth(1) {
                self.mcp_url = url.trim().to_string();
            }
            if let Some(url) = line.split("admin_url ").nth(1) {
                self.admin_url = url.trim().trim_end_matches('/').to_string() + "/";
            }
            self.stdout.push(line);
        }
        self.base_urls = vec![self.base_url.clone()];
        // Keep what follows (the demo token lines) without blocking the server.
        let deadline = Instant::now() + Duration::from_millis(200);
        while let Ok(line) = receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            self.stdout.push(line);
        }
        std::thread::spawn(move || while receiver.recv().is_ok() {});
    }

    /// Appends events through `recap events append`; panics when refused.
    pub fn append<E: EventLine>(&self, events: &[E]) {
        if let Some(cluster) = &self.cluster {
            cluster.produce(events);
            return;
        }
        let output = append_lines(&self.data_dir, events);
        assert!(output.status.success(), "recap events append failed: {}", String::from_utf8_lossy(&output.stderr));
    }

    /// The projector's progress (`/progress`).
    pub fn progress(&self) -> serde_json::Value {
        let body = ureq::get(&format!("{}progress", self.admin_url)).call().expect("progress").into_body().read_to_string().expect("body");
        serde_json::from_str(&body).expect("progress JSON")
    }

    /// Waits until the projector has applied everything appended so far.
    pub fn wait_caught_up(&self) {
        if let Some(cluster) = &self.cluster {
            cluster.wait_projected();
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let progress = self.progress();
            if progress["caught_up"] == true {
                return;
            }
            assert!(Instant::now() < deadline, "projector did not catch up: {progress}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Appends and waits until the events are readable.
    pub fn feed<E: EventLine>(&self, events: &[E]) {
        self.append(events);
        self.wait_caught_up();
    }

    /// The lines written on standard error so far (none unless the builder asked to
    /// [`capture_stderr`](ServerBuilder::capture_stderr)).
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.as_ref().map(|lines| lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(cluster) = &mut self.cluster {
            cluster.projectors.iter_mut().chain(cluster.query_apis.iter_mut()).chain(std::iter::once(&mut cluster.mcp)).for_each(cluster::Role::kill9);
            return;
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        if let Some(cluster) = &mut self.cluster {
            let mut statuses: Vec<std::process::ExitStatus> = Vec::new();
            for role in cluster.query_apis.iter_mut().chain(std::iter::once(&mut cluster.mcp)).chain(cluster.projectors.iter_mut()) {
                statuses.extend(role.stop());
            }
            return statuses.into_iter().find(|status| !status.success()).unwrap_or_default();
        }
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "recap serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts again over the same data dir.
    pub fn restart(&mut self) {
        if let Some(cluster) = &mut self.cluster {
            for role in cluster.projectors.iter_mut().chain(cluster.query_apis.iter_mut()).chain(std::iter::once(&mut cluster.mcp)) {
                if role.child.is_some() {
                    role.stop();
                }
                role.start();
            }
            self.base_url = cluster.query_apis[0].url.clone();
            self.base_urls = cluster.query_apis.iter().map(|role| role.url.clone()).collect();
            self.mcp_url = cluster.mcp.url.clone();
            self.admin_url = cluster.projectors[0].admin_url.clone();
            return;
        }
        if self.child.is_some() {
            self.stop();
        }
        self.base_url.clear();
        self.mcp_url.clear();
        self.admin_url.clear();
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}
