//! A webhook receiver for the black-box suites: an HTTP server on 127.0.0.1 (port 0)
//! that records every request it gets (path, headers, body) and answers 200, after an
//! optional delay and an optional check run on receipt (a read-your-webhook call to the
//! API, say) whose failures are recorded beside the request. Endpoints are told apart
//! by their path: [`Receiver::url`] of `"ep_a"` is `http://127.0.0.1:<port>/ep_a`.
//! Used by the webhook suites (`tests/webhooks_*.rs`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, Uri};

/// What a check run on receipt is given: the endpoint's path (without the slash) and
/// the body as JSON. It answers why the receipt is wrong, if it is.
pub type Check = Arc<dyn Fn(&str, &serde_json::Value) -> Result<(), String> + Send + Sync>;

/// One request as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The endpoint: the URL's path without its leading slash.
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// What the check said was wrong, if it ran and found something.
    pub check_failed: Option<String>,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str()).unwrap_or_default()
    }

    pub fn webhook_id(&self) -> &str {
        self.header("webhook-id")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("a webhook body that is not JSON ({error}): {}", self.body))
    }
}

/// A running receiver; it stops with its runtime when dropped.
pub struct Receiver {
    base: String,
    requests: Arc<Mutex<Vec<Received>>>,
    _runtime: tokio::runtime::Runtime,
}

pub struct ReceiverBuilder {
    delay: Duration,
    check: Option<Check>,
}

impl ReceiverBuilder {
    /// Answers each request only after `delay` (deliveries stay in flight that long).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Runs `check` on each receipt, before answering; it may block (it runs on a
    /// blocking thread).
    pub fn check(mut self, check: impl Fn(&str, &serde_json::Value) -> Result<(), String> + Send + Sync + 'static) -> Self {
        self.check = Some(Arc::new(check));
        self
    }

    pub fn start(self) -> Receiver {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime for the receiver");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let (delay, check) = (self.delay, self.check);
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: String| {
            let (log, check) = (log.clone(), check.clone());
            async move {
                tokio::time::sleep(delay).await;
                let endpoint = uri.path().trim_start_matches('/').to_owned();
                let headers = headers.iter().map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or_default().to_owned())).collect();
                let mut received = Received { endpoint, headers, body, check_failed: None };
                if let Some(check) = check {
                    let (endpoint, body) = (received.endpoint.clone(), received.json());
                    let verdict = tokio::task::spawn_blocking(move || check(&endpoint, &body)).await;
                    received.check_failed = match verdict {
                        Ok(verdict) => verdict.err(),
                        Err(error) => Some(format!("the check panicked: {error}")),
                    };
                }
                log.lock().expect("the receiver's log").push(received);
                StatusCode::OK
            }
        });
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("binding the receiver");
        let base = format!("http://{}", listener.local_addr().expect("the receiver's address"));
        runtime.spawn(async move { axum::serve(listener, app).await });
        Receiver { base, requests, _runtime: runtime }
    }
}

impl Receiver {
    pub fn builder() -> ReceiverBuilder {
        ReceiverBuilder { delay: Duration::ZERO, check: None }
    }

    /// A receiver answering 200 at once.
    pub fn start() -> Receiver {
        Receiver::builder().start()
    }

    /// The URL of the endpoint named `endpoint` on this receiver.
    pub fn url(&self, endpoint: &str) -> String {
        format!("{}/{endpoint}", self.base)
    }

    /// Every request so far, in the order they were answered.
    pub fn requests(&self) -> Vec<Received> {
        self.requests.lock().expect("the receiver's log").clone()
    }

    /// The requests to `endpoint` so far.
    pub fn requests_to(&self, endpoint: &str) -> Vec<Received> {
        self.requests().into_iter().filter(|request| request.endpoint == endpoint).collect()
    }

    /// Polls until `done` holds for the requests so far, or panics after `within`
    /// saying what `done` was waiting for.
    pub fn wait_until(&self, within: Duration, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let requests = self.requests();
            if done(&requests) {
                return requests;
            }
            assert!(Instant::now() < deadline, "waited {within:?} for {what}; received {} requests", requests.len());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until every id of `ids` reached `endpoint` at least once.
    pub fn wait_for_ids(&self, endpoint: &str, ids: &BTreeSet<String>, within: Duration) -> Vec<Received> {
        self.wait_until(within, &format!("{} messages at {endpoint}", ids.len()), |requests| {
            let seen: BTreeSet<&str> = requests.iter().filter(|request| request.endpoint == endpoint).map(Received::webhook_id).collect();
            ids.iter().all(|id| seen.contains(id.as_str()))
        })
    }
}
