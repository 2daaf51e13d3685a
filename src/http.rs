//! The HTTP/1.1 front of every listener (REST, MCP, operations, and the distributed
//! roles'): one accept loop over hyper's HTTP/1 connection with the limits an open port
//! needs, and the answers for what never reaches a router.
//!
//! - **Connection cap.** Each listener holds at most `--http-max-connections` open
//!   connections. Past it, a new connection is answered at once with 503 `unavailable`
//!   (`Retry-After: 1`, `Connection: close`) and closed: the clients already connected
//!   keep being served, and a new client is served again as soon as one closes.
//! - **Timeouts.** A request head must arrive within `--http-header-timeout-ms` of its
//!   first byte (of the connection's opening, for its first request); past it, 408
//!   `request_timeout` if part of a head came, else the connection is just closed. A
//!   kept-alive connection with no request for `--http-idle-timeout-ms` is closed. A
//!   request body must arrive within `--http-body-timeout-ms` of the head: a handler
//!   reading it is answered 408 `request_timeout`; a body nobody reads (the REST API
//!   reads none) is drained that long at most, then the connection is closed. An answer
//!   whose writing has to wait (the client stopped reading) must be all handed to the
//!   network within `--http-send-timeout-ms`, else the connection is reset. No timer
//!   runs while a handler is working on a request.
//! - **The request head is checked here, before hyper parses it**, so that what hyper
//!   would answer with a bare status gets the error envelope and an `X-Request-Id` like
//!   every other answer: a request target over [`MAX_TARGET_BYTES`] is 414
//!   `uri_too_long`; a head over [`MAX_HEAD_BYTES`] or with more than [`MAX_HEADERS`]
//!   fields is 431 `headers_too_large`; a malformed request line or header (a control
//!   byte, 0xFF or invalid UTF-8 in the target, an absolute-form or authority-form
//!   target the `http` crate refuses, a folded or nameless header, a bad
//!   `Content-Length` or `Transfer-Encoding`) is 400 `invalid_request` with `param`
//!   `request-line` or `headers`. The connection is closed after each of these, and
//!   each (with the 503 at the cap) is counted in `http.server.request.duration` on the
//!   listeners whose routers are ([`Metered`]).
//!
//! The check is a byte-at-a-time state machine run over the bytes hyper reads, in
//! hyper's own buffer: nothing is copied or allocated per request. It follows each
//! body's framing (`Content-Length`, chunked) so it knows where the next head starts.
//! On a refusal, the bytes of the offending head are withheld from hyper, hyper sees the
//! end of the stream (finishing any response it is writing), and the refusal is written
//! once hyper hands the connection back.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::Router;
use clap::Args;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::{Instant, Sleep};

/// Longest request target (path and query) accepted: 414 past it.
pub const MAX_TARGET_BYTES: usize = 16 * 1024;
/// Longest request head (request line and header fields) accepted: 431 past it.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most header fields in one request: 431 past it (hyper's own bound).
pub const MAX_HEADERS: usize = 100;
/// Connections past the cap being answered 503 at once; past these, one is just closed.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;
/// How long a refused connection is read (and discarded) after its answer, so that the
/// client's unread bytes do not turn the close into a reset that loses the answer.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 4 * 1024 * 1024;

/// The limits of every HTTP listener of a role. Each listener counts its own connections.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// Time a request head (request line and headers) may take to arrive, from its first
    /// byte (from the connection's opening for its first request), in milliseconds. Past
    /// it: 408 `request_timeout` and the connection closed (closed silently when nothing
    /// came).
    #[arg(long = "http-header-timeout-ms", env = "RECAP_HTTP_HEADER_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_ms: u64,
    /// Time a kept-alive connection may wait for its next request, in milliseconds; then it
    /// is closed. Keep it above the idle timeout of any proxy or load balancer in front.
    #[arg(long = "http-idle-timeout-ms", env = "RECAP_HTTP_IDLE_TIMEOUT_MS", default_value_t = 75_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_ms: u64,
    /// Time a request body may take to arrive after the head, in milliseconds. Past it:
    /// 408 `request_timeout` and the connection closed.
    #[arg(long = "http-body-timeout-ms", env = "RECAP_HTTP_BODY_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_ms: u64,
    /// Time an answer may wait for the client to take it, in milliseconds: from the
    /// moment writing it has to wait (the client stopped reading and the socket's
    /// buffers are full) until all of it is handed to the network. Past it the
    /// connection is reset, freeing its buffers.
    #[arg(long = "http-send-timeout-ms", env = "RECAP_HTTP_SEND_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub send_timeout_ms: u64,
    /// Open connections per listener, at most. Past it a new connection is answered 503
    /// `unavailable` with `Retry-After: 1` and closed; connections already open are served.
    /// Keep the sum over the role's listeners below the process's file descriptor limit.
    #[arg(long = "http-max-connections", env = "RECAP_HTTP_MAX_CONNECTIONS", default_value_t = 4_096, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits { header_timeout_ms: 10_000, idle_timeout_ms: 75_000, body_timeout_ms: 30_000, send_timeout_ms: 30_000, max_connections: 4_096 }
    }
}

#[derive(Clone, Copy, Debug)]
struct Timeouts {
    header: Duration,
    idle: Duration,
    body: Duration,
    send: Duration,
}

impl HttpLimits {
    fn timeouts(&self) -> Timeouts {
        Timeouts {
            header: Duration::from_millis(self.header_timeout_ms),
            idle: Duration::from_millis(self.idle_timeout_ms),
            body: Duration::from_millis(self.body_timeout_ms),
            send: Duration::from_millis(self.send_timeout_ms),
        }
    }
}

/// Accepts a connection with Nagle's algorithm off (`TCP_NODELAY`). With it on, a
/// response written in more than one piece (a large body the socket takes in parts)
/// could hold its last segment until the client acknowledged the previous one, which a
/// client delays by tens of milliseconds: a latency outlier out of nothing.
pub(crate) async fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
    let (stream, _) = listener.accept().await?;
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set on an accepted connection");
    }
    Ok(stream)
}

/// Whether a listener's answers count in `http.server.request.duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metered {
    /// Its router records its answers ([`crate::telemetry::http_layer`]), and the
    /// answers made here before the router are recorded with them.
    Yes,
    /// Neither (the operations listener, whose probes and scrapes are no traffic).
    No,
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting, lets
/// every connection finish the request it is serving (idle ones close at once, a head
/// in progress has the rest of its header timeout) and returns once all are closed.
pub async fn serve(listener: TcpListener, router: Router, limits: &HttpLimits, metered: Metered, shutdown: impl Future<Output = ()> + Send) -> io::Result<()> {
    let cap = limits.max_connections as usize;
    let connections = Arc::new(Semaphore::new(cap));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let timeouts = limits.timeouts();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.keep_alive(true).half_close(false).max_headers(MAX_HEADERS);
    let builder = Arc::new(builder);
    let (stop, stopped) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            accepted = accept(&listener) => match accepted {
                Ok(stream) => stream,
                Err(error) => {
                    if !is_connection_error(&error) {
                        // Out of file descriptors and the like: waiting beats spinning.
                        tracing::warn!(%error, "accepting a connection failed; retrying in a second");
                        tokio::select! {
                            _ = &mut shutdown => break,
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                    continue;
                }
            },
        };
        match connections.clone().try_acquire_owned() {
            Ok(permit) => {
                let (router, builder, stopped) = (router.clone(), builder.clone(), stopped.clone());
                tokio::spawn(async move {
                    serve_connection(stream, router, &builder, timeouts, metered, stopped).await;
                    drop(permit);
                });
            }
            Err(_) => match refusals.clone().try_acquire_owned() {
                Ok(permit) => {
                    if metered == Metered::Yes {
                        // No request was read: its method is unknown.
                        crate::telemetry::record_refusal("_OTHER", Refusal::AtCapacity.status(), Refusal::AtCapacity.code(), Duration::ZERO);
                    }
                    tokio::spawn(async move {
                        refuse(stream, &Refusal::AtCapacity).await;
                        drop(permit);
                    });
                }
                Err(_) => drop(stream),
            },
        }
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection holds a permit until it is closed.
    let _ = connections.acquire_many(limits.max_connections).await;
    Ok(())
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset)
}

async fn serve_connection(
    stream: TcpStream,
    router: Router,
    builder: &hyper::server::conn::http1::Builder,
    timeouts: Timeouts,
    metered: Metered,
    mut stopped: watch::Receiver<bool>,
) {
    let shared = Arc::new(Shared::default());
    let peer = stream.peer_addr().ok();
    let io = Guarded::new(stream, shared.clone(), timeouts);
    let service = Service { router, shared: shared.clone(), body_timeout: timeouts.body, peer };
    let mut connection = builder.serve_connection(TokioIo::new(io), service);
    let mut shutting_down = false;
    let stop = stopped.wait_for(|stop| *stop);
    tokio::pin!(stop);
    let result = std::future::poll_fn(|cx| {
        if !shutting_down && stop.as_mut().poll(cx).is_ready() {
            shutting_down = true;
            // hyper closes a connection between requests, but not one that has not sent
            // its first: the stream ends it, unless part of a head came.
            shared.draining.store(true, Ordering::Relaxed);
            Pin::new(&mut connection).graceful_shutdown();
        }
        connection.poll_without_shutdown(cx)
    })
    .await;
    if let Err(error) = result {
        tracing::debug!(%error, "http connection ended with an error");
    }
    let mut io = connection.into_parts().io.into_inner();
    if io.send_timed_out {
        // What the socket still holds would wait for a reader that does not read: a
        // reset gives its buffers back at once, where a close would keep them.
        tracing::debug!(peer = ?peer, "resetting a connection whose answer was not taken within the send timeout");
        if let Err(error) = io.inner.set_zero_linger() {
            tracing::debug!(%error, "SO_LINGER not set on a connection to reset");
        }
        return;
    }
    match io.refusal.take() {
        Some(refusal) => {
            if metered == Metered::Yes {
                let method = io.scanner.method().map_or("_OTHER", |method| crate::telemetry::method_name(&method));
                crate::telemetry::record_refusal(method, refusal.status(), refusal.code(), io.head_started.elapsed());
            }
            refuse(io.inner, &refusal).await
        }
        None => {
            let _ = io.inner.shutdown().await;
        }
    }
}

/// Writes a refusal, closes the sending side and reads what the client still sends for
/// a moment, so that the answer is not lost to a reset.
async fn refuse(mut stream: TcpStream, refusal: &Refusal) {
    let answer = refusal.response();
    let written = tokio::time::timeout(LINGER, stream.write_all(&answer)).await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = [0u8; 8192];
        let mut read = 0;
        while read < LINGER_BYTES {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

/// Why a connection is answered without reaching a router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 400 `invalid_request`: `param` is `request-line` or `headers`.
    Malformed { param: &'static str, message: &'static str },
    /// 414 `uri_too_long`
    UriTooLong,
    /// 431 `headers_too_large`
    HeadersTooLarge,
    /// 408 `request_timeout`: part of a head came, not all of it in time.
    HeaderTimeout,
    /// 503 `unavailable`: the listener is at its connection cap.
    AtCapacity,
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Refusal::Malformed { .. } => StatusCode::BAD_REQUEST,
            Refusal::UriTooLong => StatusCode::URI_TOO_LONG,
            Refusal::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Refusal::HeaderTimeout => StatusCode::REQUEST_TIMEOUT,
            Refusal::AtCapacity => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The wire error code.
    fn code(&self) -> &'static str {
        match self {
            Refusal::Malformed { .. } => "invalid_request",
            Refusal::UriTooLong => "uri_too_long",
            Refusal::HeadersTooLarge => "headers_too_large",
            Refusal::HeaderTimeout => "request_timeout",
            Refusal::AtCapacity => "unavailable",
        }
    }

    fn body(&self) -> String {
        let code = self.code();
        match self {
            Refusal::Malformed { param, message } => envelope(code, message, Some(param)),
            Refusal::UriTooLong => envelope(code, &format!("the request target is longer than {MAX_TARGET_BYTES} bytes"), None),
            Refusal::HeadersTooLarge => {
                envelope(code, &format!("the request head is longer than {MAX_HEAD_BYTES} bytes or has more than {MAX_HEADERS} fields"), None)
            }
            Refusal::HeaderTimeout => envelope(code, "the request head did not arrive in time", None),
            Refusal::AtCapacity => envelope(code, "the server has too many open connections; retry shortly", None),
        }
    }

    /// The whole answer, as bytes on the wire.
    pub(crate) fn response(&self) -> Vec<u8> {
        let status = self.status();
        let body = self.body();
        let retry_after = if *self == Refusal::AtCapacity { "retry-after: 1\r\n" } else { "" };
        format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-request-id: {}\r\n{retry_after}connection: close\r\n\r\n{body}",
            status.as_u16(),
            status.canonical_reason().unwrap_or_default(),
            body.len(),
            recap_access::request_id::generate(),
        )
        .into_bytes()
    }
}

/// The error envelope of the REST API, which the MCP server's HTTP errors share:
/// `{"error": {"code", "message", "param"?}}`.
fn envelope(code: &str, message: &str, param: Option<&str>) -> String {
    let mut error = serde_json::json!({"code": code, "message": message});
    if let Some(param) = param {
        error["param"] = serde_json::json!(param);
    }
    serde_json::json!({ "error": error }).to_string()
}

/// What a connection's stream and its requests share: how many requests the handlers
/// took and finished (no connection timer runs in between), and whether a request's
/// body ran out of time (its answer is then 408, whatever the handler made of it).
#[derive(Default)]
struct Shared {
    started: AtomicU64,
    finished: AtomicU64,
    body_timed_out: AtomicBool,
    /// The server is stopping: a connection waiting for a request is closed.
    draining: AtomicBool,
}

/// hyper's service: the router, each request's body under the body deadline.
struct Service {
    router: Router,
    shared: Arc<Shared>,
    body_timeout: Duration,
    /// The connection's peer, given to handlers as axum's `ConnectInfo` (MCP counts
    /// registrations under it).
    peer: Option<std::net::SocketAddr>,
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Served;

    fn call(&self, request: Request<Incoming>) -> Served {
        self.shared.started.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + self.body_timeout;
        let shared = self.shared.clone();
        // A reference to hyper's buffer, not a copy.
        let request_id = recap_access::request_id::kept(request.headers());
        let mut request = request.map(|body| Body::new(TimedBody { inner: body, deadline, sleep: None, shared: shared.clone() }));
        if let Some(peer) = self.peer {
            request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        }
        let future = tower::Service::call(&mut self.router.clone(), request);
        Served { future, shared, request_id }
    }
}

use recap_access::request_id::X_REQUEST_ID;

/// The router's answer, with an `X-Request-Id` when the router set none (the request's
/// own when well-formed, as the REST API echoes it, else a new one); a 408 instead when
/// the request's body ran out of time.
struct Served {
    future: axum::routing::future::RouteFuture<Infallible>,
    shared: Arc<Shared>,
    request_id: Option<HeaderValue>,
}

impl Future for Served {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let response = match std::task::ready!(Pin::new(&mut self.future).poll(cx)) {
            Ok(response) => response,
            Err(never) => match never {},
        };
        self.shared.finished.fetch_add(1, Ordering::Relaxed);
        // hyper reads again only when the socket wakes it, and the idle timer is armed
        // by a read that waits: one more poll of the connection arms it now.
        cx.waker().wake_by_ref();
        let request_id = match response.headers().get(&X_REQUEST_ID) {
            Some(set) => set.clone(),
            None => self.request_id.take().unwrap_or_else(recap_access::request_id::new_value),
        };
        if !self.shared.body_timed_out.swap(false, Ordering::Relaxed) {
            let mut response = response;
            if !response.headers().contains_key(&X_REQUEST_ID) {
                response.headers_mut().insert(X_REQUEST_ID.clone(), request_id);
            }
            return Poll::Ready(Ok(response));
        }
        let body = match response.extensions().get::<recap_access::telemetry::BodyTimeoutAnswer>() {
            Some(own) => own.0.to_string(),
            None => envelope("request_timeout", "the request body did not arrive in time", None),
        };
        let mut timed_out = Response::new(Body::from(body));
        *timed_out.status_mut() = StatusCode::REQUEST_TIMEOUT;
        let headers = timed_out.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        headers.insert(X_REQUEST_ID.clone(), request_id);
        Poll::Ready(Ok(timed_out))
    }
}

/// A request body that fails once its deadline passed. The timer is made only when the
/// body is waited for: a request without a body (every REST request) never makes one.
struct TimedBody {
    inner: Incoming,
    deadline: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    shared: Arc<Shared>,
}

impl hyper::body::Body for TimedBody {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = self.deadline;
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        std::task::ready!(sleep.as_mut().poll(cx));
        self.shared.body_timed_out.store(true, Ordering::Relaxed);
        Poll::Ready(Some(Err(io::Error::new(io::ErrorKind::TimedOut, "the request body did not arrive in time").into())))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The accepted stream as hyper reads it: every byte read goes through the [`Scanner`],
/// and the connection's timers run when a read has to wait.
struct Guarded {
    inner: TcpStream,
    scanner: Scanner,
    shared: Arc<Shared>,
    timeouts: Timeouts,
    /// Since when the connection waits for a request (its opening, a head's end, or the
    /// last answer).
    idle_since: Instant,
    head_started: Instant,
    body_started: Instant,
    /// The handlers' finished count when last looked at.
    seen_finished: u64,
    sleep: Pin<Box<Sleep>>,
    armed: Option<Instant>,
    /// Nothing more is handed to hyper (it reads the end of the stream).
    closed: bool,
    /// The answer to write once hyper handed the connection back.
    refusal: Option<Refusal>,
    /// When what hyper has to write must all be handed to the socket, set by the first
    /// write that waits since hyper last had nothing left to write.
    send_deadline: Option<Instant>,
    /// The send timer, made the first time a write waits.
    send_sleep: Option<Pin<Box<Sleep>>>,
    send_timed_out: bool,
}

impl Guarded {
    fn new(inner: TcpStream, shared: Arc<Shared>, timeouts: Timeouts) -> Guarded {
        let now = Instant::now();
        Guarded {
            inner,
            scanner: Scanner::default(),
            shared,
            timeouts,
            idle_since: now,
            head_started: now,
            body_started: now,
            seen_finished: 0,
            sleep: Box::pin(tokio::time::sleep_until(now + timeouts.header)),
            armed: None,
            closed: false,
            refusal: None,
            send_deadline: None,
            send_sleep: None,
            send_timed_out: false,
        }
    }

    /// A write has to wait: runs the send timer, which fails the write once the client
    /// has taken too long to take the answer (hyper then ends the connection).
    fn poll_send_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let send = self.timeouts.send;
        let deadline = *self.send_deadline.get_or_insert_with(|| Instant::now() + send);
        let sleep = self.send_sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
        std::task::ready!(sleep.as_mut().poll(cx));
        self.send_timed_out = true;
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client did not take the answer within the send timeout")))
    }

    /// The read has to wait: runs the timer of the phase the connection is in.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let finished = self.shared.finished.load(Ordering::Relaxed);
        if self.shared.started.load(Ordering::Relaxed) != finished {
            // A handler is at work: its time is its own (and its body's, under the body
            // deadline).
            return Poll::Pending;
        }
        if finished != self.seen_finished {
            self.seen_finished = finished;
            self.idle_since = Instant::now();
        }
        let phase = self.scanner.phase();
        if phase == Phase::Idle && self.shared.draining.load(Ordering::Relaxed) {
            self.closed = true;
            return Poll::Ready(Ok(()));
        }
        let deadline = match phase {
            Phase::Idle if self.scanner.heads_completed == 0 => self.idle_since + self.timeouts.header,
            Phase::Idle => self.idle_since + self.timeouts.idle,
            Phase::Head => self.head_started + self.timeouts.header,
            Phase::Body => self.body_started + self.timeouts.body,
        };
        if self.armed != Some(deadline) {
            self.armed = Some(deadline);
            self.sleep.as_mut().reset(deadline);
        }
        std::task::ready!(self.sleep.as_mut().poll(cx));
        self.closed = true;
        if phase == Phase::Head {
            self.refusal = Some(Refusal::HeaderTimeout);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Guarded {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closed {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => return this.poll_deadline(cx),
        }
        if buf.filled().len() == before {
            return Poll::Ready(Ok(()));
        }
        let (started, completed) = (this.scanner.heads_started, this.scanner.heads_completed);
        let outcome = this.scanner.feed(&buf.filled()[before..]);
        if this.scanner.heads_completed != completed {
            let now = Instant::now();
            this.idle_since = now;
            this.body_started = now;
        }
        if this.scanner.heads_started != started {
            // Also when the head is refused or complete in this read: a refusal's
            // duration counts from it.
            this.head_started = Instant::now();
        }
        if let Err(stop) = outcome {
            buf.set_filled(before + stop.deliver);
            this.closed = true;
            this.refusal = stop.refusal;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Pending => this.poll_send_deadline(cx),
            written => written,
        }
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => this.poll_send_deadline(cx),
            written => written,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // hyper flushes the stream only once all it had to write was written: the
        // answer is handed over, and the next wait is a new one.
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if flushed.is_ready() {
            self.send_deadline = None;
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Where the connection is in its byte stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Between requests: no byte of the next head yet.
    Idle,
    /// Part of a head came.
    Head,
    /// A body is coming.
    Body,
}

/// Where the scan stopped: how many of the bytes just read go to hyper (those before
/// the offending head, or before a body's broken framing), and the answer to write.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Stop {
    pub deliver: usize,
    pub refusal: Option<Refusal>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    IdleCr,
    Method,
    /// The request target: its form, and where in it the scan is.
    Target(Part),
    Version(u8),
    /// A CR ended a line of the head: LF must follow.
    LineCr,
    LineStart,
    Name,
    Value,
    EndCr,
    Length,
    ChunkSize,
    ChunkExt,
    ChunkSizeLf,
    ChunkData,
    ChunkDataCr,
    ChunkDataLf,
    Trailer,
    TrailerLine,
    TrailerLineLf,
    TrailerEndLf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Start,
    Star,
    /// Letters and scheme characters so far: a scheme (`http://host/path`, the absolute
    /// form) or a whole authority (`host:port`, the authority form).
    Scheme,
    /// `scheme:`, a scheme if `//` follows.
    SchemeColon,
    SchemeSlash,
    /// The authority of the absolute form, after `scheme://`: a path, query or fragment
    /// may follow.
    Authority,
    /// A target that is one authority: nothing may follow it.
    AuthorityForm,
    Path,
    Query,
    Fragment,
}

/// The authority being read (the `http` crate's rules): colons, brackets and `%`
/// since the last `@` or `]`, and where it began and where its last `@` ended (in
/// target bytes).
#[derive(Clone, Copy, Debug, Default)]
struct AuthorityScan {
    began_at: usize,
    at_sign_ended_at: Option<usize>,
    colons: u8,
    open_bracket: bool,
    close_bracket: bool,
    percent: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Other,
    ContentLength,
    TransferEncoding,
}

/// A request head checked byte by byte as it arrives, and each body's framing followed
/// to the next head. The rules are httparse's and the `http` crate's (what hyper would
/// refuse, this refuses first), with a request target of printable ASCII or UTF-8, and
/// `Content-Length` beside `Transfer-Encoding` refused (RFC 9112 §6.1 allows it).
#[derive(Debug)]
pub(crate) struct Scanner {
    state: State,
    pub heads_started: u64,
    pub heads_completed: u64,
    head_bytes: usize,
    target_bytes: usize,
    /// UTF-8 in the target: continuation bytes still due, and the range of the next one.
    utf8_due: u8,
    utf8_low: u8,
    utf8_high: u8,
    http10: bool,
    /// The method's first bytes, and its length: enough to name the known methods.
    method: [u8; 7],
    method_bytes: usize,
    /// Target bytes before the `:` of a scheme.
    scheme_bytes: usize,
    authority: AuthorityScan,
    fields: usize,
    field: Field,
    name_bytes: usize,
    maybe_content_length: bool,
    maybe_transfer_encoding: bool,
    maybe_host: bool,
    /// `Host` fields of the head so far.
    hosts: usize,
    content_length: Option<u64>,
    /// The `Content-Length` item being read: its digits so far, and whether spaces
    /// followed them.
    length_item: Option<u64>,
    length_item_done: bool,
    transfer_encoding: bool,
    /// The `Transfer-Encoding` item being read is `chunked` so far (`chunked_at`
    /// letters of it), or not.
    chunked_so_far: bool,
    chunked_at: usize,
    item_started: bool,
    item_done: bool,
    last_is_chunked: bool,
    remaining: u64,
    chunk_digits: u8,
}

impl Default for Scanner {
    fn default() -> Scanner {
        Scanner {
            state: State::Idle,
            heads_started: 0,
            heads_completed: 0,
            head_bytes: 0,
            target_bytes: 0,
            utf8_due: 0,
            utf8_low: 0,
            utf8_high: 0,
            http10: false,
            method: [0; 7],
            method_bytes: 0,
            scheme_bytes: 0,
            authority: AuthorityScan::default(),
            fields: 0,
            field: Field::Other,
            name_bytes: 0,
            maybe_content_length: false,
            maybe_transfer_encoding: false,
            maybe_host: false,
            hosts: 0,
            content_length: None,
            length_item: None,
            length_item_done: false,
            transfer_encoding: false,
            chunked_so_far: true,
            chunked_at: 0,
            item_started: false,
            item_done: false,
            last_is_chunked: false,
            remaining: 0,
            chunk_digits: 0,
        }
    }
}

const fn token_map() -> [bool; 256] {
    let mut map = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        map[byte] =
            b.is_ascii_alphanumeric() || matches!(b, b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~');
        byte += 1;
    }
    map
}

static TOKEN: [bool; 256] = token_map();

const fn byte_map(low: u8, high: u8, except: &[u8], also: &[u8]) -> [bool; 256] {
    let mut map = [false; 256];
    let mut byte = low as usize;
    while byte <= high as usize {
        map[byte] = true;
        byte += 1;
    }
    let mut at = 0;
    while at < except.len() {
        map[except[at] as usize] = false;
        at += 1;
    }
    let mut at = 0;
    while at < also.len() {
        map[also[at] as usize] = true;
        at += 1;
    }
    map
}

/// Bytes of a field's value that need no decision: all but CR, LF and the forbidden
/// control bytes.
static PLAIN_VALUE: [bool; 256] = byte_map(0x20, 0xFF, &[0x7F], b"\t");
/// Path bytes that stay in the path (the `http` crate's path bytes, less `?`, `#` and
/// anything non-ASCII, which the state machine decides).
static PLAIN_PATH: [bool; 256] = byte_map(0x21, 0x7E, b"#<>?`", b"");
/// Query bytes that stay in the query (as above: less `#` and non-ASCII).
static PLAIN_QUERY: [bool; 256] = byte_map(0x21, 0x7E, b"#\"<>", b"");
/// The `http` crate's scheme characters (it admits `~`), less the `:` that ends one.
static SCHEME: [bool; 256] = {
    let mut map = byte_map(b'0', b'9', b"", b"+-.~");
    let mut letter = b'A';
    while letter <= b'Z' {
        map[letter as usize] = true;
        map[letter.to_ascii_lowercase() as usize] = true;
        letter += 1;
    }
    map
};
/// Authority bytes that need no decision: the `http` crate's URI characters less the
/// ones an authority's rules count (`:`, `@`, `[`, `]`, `%`) and the ones that end it.
static PLAIN_AUTHORITY: [bool; 256] = {
    let mut map = SCHEME;
    let mut at = 0;
    let also = b"!$&'()*+,;=_";
    while at < also.len() {
        map[also[at] as usize] = true;
        at += 1;
    }
    map
};
static NOTHING: [bool; 256] = [false; 256];

fn malformed(param: &'static str, message: &'static str) -> Refusal {
    Refusal::Malformed { param, message }
}

const BAD_LINE: &str = "the request line is malformed";
const BAD_TARGET: &str = "the request target holds a byte it may not (a control byte, a space, or invalid UTF-8)";
const BAD_AUTHORITY: &str = "the request target is neither a path nor a well-formed URL or authority (scheme, host, port)";
const LONG_SCHEME: &str = "the request target's scheme is longer than 64 characters";
const BAD_HEADER: &str = "a header field is malformed";
const FOLDED: &str = "a header field is folded over lines (obsolete line folding)";
const BAD_LENGTH: &str = "Content-Length is not one decimal number";
const HUGE_LENGTH: &str = "Content-Length is larger than any body can be";
const HOST_COUNT: &str = "an HTTP/1.1 request carries exactly one Host header field (HTTP/1.0: at most one)";
const BAD_FRAMING: &str = "Transfer-Encoding is not chunked last, comes with Content-Length, or is on HTTP/1.0";

impl Scanner {
    pub(crate) fn phase(&self) -> Phase {
        match self.state {
            State::Idle | State::IdleCr => Phase::Idle,
            State::Method | State::Target(_) | State::Version(_) | State::LineCr | State::LineStart | State::Name | State::Value | State::EndCr => Phase::Head,
            _ => Phase::Body,
        }
    }

    /// Scans the bytes just read. On a refusal (or a body's broken framing), says how
    /// many of them hyper may have.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), Stop> {
        // Where the head being scanned began in `bytes`; 0 when it began before them
        // (what came before was handed over already).
        let mut head_start = 0;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            // A body's bytes are skipped in bulk.
            match self.state {
                State::Length | State::ChunkData => {
                    let take = (self.remaining.min((bytes.len() - i) as u64)) as usize;
                    self.remaining -= take as u64;
                    i += take;
                    if self.remaining == 0 {
                        self.state = if self.state == State::Length { self.end_of_request() } else { State::ChunkDataCr };
                    }
                    continue;
                }
                // The long runs of a head (a field's value, a path or query, a name) are
                // scanned in a tight loop over a table; their last byte and anything
                // else goes through the state machine below.
                State::Value | State::Target(Part::Scheme | Part::Authority | Part::AuthorityForm | Part::Path | Part::Query) | State::Name => {
                    let table = match self.state {
                        State::Value if self.field == Field::Other => &PLAIN_VALUE,
                        State::Target(Part::Path) if self.utf8_due == 0 => &PLAIN_PATH,
                        State::Target(Part::Query) if self.utf8_due == 0 => &PLAIN_QUERY,
                        State::Target(Part::Scheme) => &SCHEME,
                        State::Target(Part::Authority | Part::AuthorityForm) => &PLAIN_AUTHORITY,
                        State::Name if !self.maybe_content_length && !self.maybe_transfer_encoding && !self.maybe_host => &TOKEN,
                        _ => &NOTHING,
                    };
                    let run = bytes[i..].iter().position(|&b| !table[b as usize]).unwrap_or(bytes.len() - i);
                    if run > 0 {
                        self.head_bytes += run;
                        if let State::Target(_) = self.state {
                            self.target_bytes += run;
                            if self.target_bytes > MAX_TARGET_BYTES {
                                return Err(Stop { deliver: head_start, refusal: Some(Refusal::UriTooLong) });
                            }
                        }
                        if self.head_bytes > MAX_HEAD_BYTES {
                            return Err(Stop { deliver: head_start, refusal: Some(Refusal::HeadersTooLarge) });
                        }
                        i += run;
                        continue;
                    }
                }
                _ => {}
            }
            if self.phase() == Phase::Head {
                self.head_bytes += 1;
                if self.head_bytes > MAX_HEAD_BYTES {
                    return Err(Stop { deliver: head_start, refusal: Some(Refusal::HeadersTooLarge) });
                }
            }
            let step = match self.state {
                State::Idle => match b {
                    b'\r' => Ok(State::IdleCr),
                    b'\n' => Ok(State::Idle),
                    _ => {
                        head_start = i;
                        self.begin_head();
                        self.head_bytes = 1;
                        if TOKEN[b as usize] {
                            self.method_byte(b);
                            Ok(State::Method)
                        } else {
                            Err(malformed("request-line", BAD_LINE))
                        }
                    }
                },
                State::IdleCr => match b {
                    b'\n' => Ok(State::Idle),
                    _ => Err(malformed("request-line", BAD_LINE)),
                },
                State::Method => match b {
                    b' ' => Ok(State::Target(Part::Start)),
                    _ if TOKEN[b as usize] => {
                        self.method_byte(b);
                        Ok(State::Method)
                    }
                    _ => Err(malformed("request-line", BAD_LINE)),
                },
                State::Target(part) => self.target(part, b),
                State::Version(at) => {
                    const VERSION: &[u8] = b"HTTP/1.";
                    match at {
                        0..=6 if b == VERSION[at as usize] => Ok(State::Version(at + 1)),
                        7 if b == b'0' || b == b'1' => {
                            self.http10 = b == b'0';
                            Ok(State::Version(8))
                        }
                        8 if b == b'\r' => Ok(State::LineCr),
                        8 if b == b'\n' => Ok(State::LineStart),
                        _ => Err(malformed("request-line", BAD_LINE)),
                    }
                }
                State::LineCr => match b {
                    b'\n' => Ok(State::LineStart),
                    _ => Err(malformed("headers", BAD_HEADER)),
                },
                State::LineStart => match b {
                    b'\r' => Ok(State::EndCr),
                    b'\n' => self.end_of_head(),
                    b' ' | b'\t' => Err(malformed("headers", FOLDED)),
                    _ if TOKEN[b as usize] => {
                        self.fields += 1;
                        if self.fields > MAX_HEADERS {
                            Err(Refusal::HeadersTooLarge)
                        } else {
                            self.name_bytes = 0;
                            self.maybe_content_length = true;
                            self.maybe_transfer_encoding = true;
                            self.maybe_host = true;
                            self.name_byte(b);
                            Ok(State::Name)
                        }
                    }
                    _ => Err(malformed("headers", BAD_HEADER)),
                },
                State::Name => match b {
                    b':' => {
                        if self.maybe_host && self.name_bytes == 4 {
                            self.hosts += 1;
                        }
                        self.field = if self.maybe_content_length && self.name_bytes == 14 {
                            Field::ContentLength
                        } else if self.maybe_transfer_encoding && self.name_bytes == 17 {
                            self.transfer_encoding = true;
                            Field::TransferEncoding
                        } else {
                            Field::Other
                        };
                        self.length_item = None;
                        self.length_item_done = false;
                        self.chunked_so_far = true;
                        self.chunked_at = 0;
                        self.item_started = false;
                        self.item_done = false;
                        Ok(State::Value)
                    }
                    _ if TOKEN[b as usize] => {
                        self.name_byte(b);
                        Ok(State::Name)
                    }
                    _ => Err(malformed("headers", BAD_HEADER)),
                },
                State::Value => match b {
                    b'\r' | b'\n' => self.end_of_field().map(|()| if b == b'\r' { State::LineCr } else { State::LineStart }),
                    b'\t' | b' '..=b'~' | 0x80..=0xFF => self.value_byte(b).map(|()| State::Value),
                    _ => Err(malformed("headers", BAD_HEADER)),
                },
                State::EndCr => match b {
                    b'\n' => self.end_of_head(),
                    _ => Err(malformed("headers", BAD_HEADER)),
                },
                // Body framing: a break in it stops the connection (hyper would fail the
                // body too), without an answer of this layer's.
                State::ChunkSize => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' if self.chunk_digits < 15 => {
                        self.chunk_digits += 1;
                        self.remaining = self.remaining * 16 + (b as char).to_digit(16).unwrap_or(0) as u64;
                        Ok(State::ChunkSize)
                    }
                    b';' | b' ' | b'\t' if self.chunk_digits > 0 => Ok(State::ChunkExt),
                    b'\r' if self.chunk_digits > 0 => Ok(State::ChunkSizeLf),
                    _ => return Err(Stop { deliver: i, refusal: None }),
                },
                State::ChunkExt => match b {
                    b'\r' => Ok(State::ChunkSizeLf),
                    b'\n' => return Err(Stop { deliver: i, refusal: None }),
                    _ => Ok(State::ChunkExt),
                },
                State::ChunkSizeLf => match b {
                    b'\n' if self.remaining == 0 => Ok(State::Trailer),
                    b'\n' => Ok(State::ChunkData),
                    _ => return Err(Stop { deliver: i, refusal: None }),
                },
                State::ChunkDataCr => match b {
                    b'\r' => Ok(State::ChunkDataLf),
                    _ => return Err(Stop { deliver: i, refusal: None }),
                },
                State::ChunkDataLf => match b {
                    b'\n' => {
                        self.chunk_digits = 0;
                        Ok(State::ChunkSize)
                    }
                    _ => return Err(Stop { deliver: i, refusal: None }),
                },
                State::Trailer => match b {
                    b'\r' => Ok(State::TrailerEndLf),
                    b'\n' => return Err(Stop { deliver: i, refusal: None }),
                    _ => Ok(State::TrailerLine),
                },
                State::TrailerLine => match b {
                    b'\r' => Ok(State::TrailerLineLf),
                    b'\n' => return Err(Stop { deliver: i, refusal: None }),
                    _ => Ok(State::TrailerLine),
                },
                State::TrailerLineLf => match b {
                    b'\n' => Ok(State::Trailer),
                    _ => return Err(Stop { deliver: i, refusal: None }),
                },
                State::TrailerEndLf => match b {
                    b'\n' => Ok(self.end_of_request()),
                    _ => return Err(Stop { deliver: i, refusal: None }),
                },
                State::Length | State::ChunkData => unreachable!("bodies are skipped above"),
            };
            match step {
                Ok(state) => self.state = state,
                Err(refusal) => return Err(Stop { deliver: head_start, refusal: Some(refusal) }),
            }
            i += 1;
        }
        Ok(())
    }

    fn begin_head(&mut self) {
        self.heads_started += 1;
        self.method_bytes = 0;
        self.target_bytes = 0;
        self.utf8_due = 0;
        self.scheme_bytes = 0;
        self.http10 = false;
        self.fields = 0;
        self.hosts = 0;
        self.content_length = None;
        self.transfer_encoding = false;
        self.last_is_chunked = false;
    }

    fn method_byte(&mut self, b: u8) {
        if let Some(slot) = self.method.get_mut(self.method_bytes) {
            *slot = b;
        }
        self.method_bytes += 1;
    }

    /// The method of the head begun last, when one of the known methods may be it
    /// (what the HTTP metrics name; others are `_OTHER` there).
    pub(crate) fn method(&self) -> Option<axum::http::Method> {
        let bytes = self.method.get(..self.method_bytes)?;
        axum::http::Method::from_bytes(bytes).ok()
    }

    fn target(&mut self, part: Part, b: u8) -> Result<State, Refusal> {
        if b == b' ' {
            return match part {
                Part::Start => Err(malformed("request-line", BAD_TARGET)),
                _ if self.utf8_due > 0 => Err(malformed("request-line", BAD_TARGET)),
                // `scheme:/` is an authority with a path, which the authority form lacks.
                Part::SchemeSlash => Err(malformed("request-line", BAD_AUTHORITY)),
                Part::Authority | Part::AuthorityForm => self.end_of_authority(self.target_bytes).map(|()| State::Version(0)),
                _ => Ok(State::Version(0)),
            };
        }
        self.target_bytes += 1;
        if self.target_bytes > MAX_TARGET_BYTES {
            return Err(Refusal::UriTooLong);
        }
        match part {
            Part::Scheme | Part::SchemeColon | Part::SchemeSlash | Part::Authority | Part::AuthorityForm => return self.scheme_or_authority(part, b),
            _ => {}
        }
        if self.utf8_due > 0 || (b >= 0x80 && part != Part::Start) {
            return if self.utf8_byte(b) { Ok(State::Target(part)) } else { Err(malformed("request-line", BAD_TARGET)) };
        }
        let next = match part {
            Part::Start => match b {
                b'*' => Some(Part::Star),
                b'/' => Some(Part::Path),
                _ if b.is_ascii_alphabetic() => Some(Part::Scheme),
                _ => None,
            },
            Part::Star => None,
            Part::Path => match b {
                b'?' => Some(Part::Query),
                b'#' => Some(Part::Fragment),
                0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E | b'"' | b'{' | b'}' => Some(Part::Path),
                _ => None,
            },
            Part::Query => match b {
                b'#' => Some(Part::Fragment),
                0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x7E => Some(Part::Query),
                _ => None,
            },
            Part::Fragment => (0x21..=0x7E).contains(&b).then_some(Part::Fragment),
            Part::Scheme | Part::SchemeColon | Part::SchemeSlash | Part::Authority | Part::AuthorityForm => None,
        };
        next.map(State::Target).ok_or(malformed("request-line", BAD_TARGET))
    }

    /// A target that does not begin with `/` or `*`, read as the `http` crate reads it:
    /// `scheme://authority[path]` when its first `:` is followed by `//`, else one
    /// authority. hyper answers what the crate refuses with a bare 400.
    fn scheme_or_authority(&mut self, part: Part, b: u8) -> Result<State, Refusal> {
        let authority_form = |scanner: &mut Scanner, colons: u8, b: u8| {
            scanner.authority = AuthorityScan { colons, ..AuthorityScan::default() };
            scanner.authority_byte(Part::AuthorityForm, b)
        };
        match part {
            Part::Scheme if b == b':' => {
                self.scheme_bytes = self.target_bytes - 1;
                Ok(State::Target(Part::SchemeColon))
            }
            Part::Scheme if SCHEME[b as usize] => Ok(State::Target(Part::Scheme)),
            Part::Scheme => authority_form(self, 0, b),
            Part::SchemeColon if b == b'/' => Ok(State::Target(Part::SchemeSlash)),
            Part::SchemeColon => authority_form(self, 1, b),
            Part::SchemeSlash if b == b'/' => {
                if self.scheme_bytes > 64 {
                    return Err(malformed("request-line", LONG_SCHEME));
                }
                self.authority = AuthorityScan { began_at: self.target_bytes, ..AuthorityScan::default() };
                Ok(State::Target(Part::Authority))
            }
            Part::SchemeSlash => Err(malformed("request-line", BAD_AUTHORITY)),
            _ => self.authority_byte(part, b),
        }
    }

    fn authority_byte(&mut self, part: Part, b: u8) -> Result<State, Refusal> {
        let authority = &mut self.authority;
        match b {
            b'/' | b'?' | b'#' => {
                if part == Part::AuthorityForm {
                    return Err(malformed("request-line", BAD_AUTHORITY));
                }
                self.end_of_authority(self.target_bytes - 1)?;
                return Ok(State::Target(match b {
                    b'/' => Part::Path,
                    b'?' => Part::Query,
                    _ => Part::Fragment,
                }));
            }
            b'%' => authority.percent = true,
            b':' if authority.colons >= 8 => return Err(malformed("request-line", BAD_AUTHORITY)),
            b':' => authority.colons += 1,
            b'[' if authority.percent || authority.open_bracket => return Err(malformed("request-line", BAD_AUTHORITY)),
            b'[' => authority.open_bracket = true,
            b']' if !authority.open_bracket || authority.close_bracket => return Err(malformed("request-line", BAD_AUTHORITY)),
            b']' | b'@' => {
                // What came before was an IPv6 address or the user information, whose
                // colons and `%` are theirs.
                if b == b']' {
                    authority.close_bracket = true;
                } else {
                    authority.at_sign_ended_at = Some(self.target_bytes);
                }
                authority.colons = 0;
                authority.percent = false;
            }
            _ if PLAIN_AUTHORITY[b as usize] => {}
            _ => return Err(malformed("request-line", BAD_AUTHORITY)),
        }
        Ok(State::Target(part))
    }

    /// The authority ended after `end` target bytes: the checks only its whole allows.
    fn end_of_authority(&self, end: usize) -> Result<(), Refusal> {
        let authority = &self.authority;
        let empty = end == authority.began_at;
        if empty || authority.open_bracket != authority.close_bracket || authority.colons > 1 || authority.at_sign_ended_at == Some(end) || authority.percent {
            return Err(malformed("request-line", BAD_AUTHORITY));
        }
        Ok(())
    }

    fn utf8_byte(&mut self, b: u8) -> bool {
        if self.utf8_due > 0 {
            if b < self.utf8_low || b > self.utf8_high {
                return false;
            }
            self.utf8_due -= 1;
            (self.utf8_low, self.utf8_high) = (0x80, 0xBF);
            return true;
        }
        let (due, low, high) = match b {
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            _ => return false,
        };
        (self.utf8_due, self.utf8_low, self.utf8_high) = (due, low, high);
        true
    }

    fn name_byte(&mut self, b: u8) {
        let lower = b.to_ascii_lowercase();
        let at = self.name_bytes;
        self.maybe_content_length &= b"content-length".get(at) == Some(&lower);
        self.maybe_transfer_encoding &= b"transfer-encoding".get(at) == Some(&lower);
        self.maybe_host &= b"host".get(at) == Some(&lower);
        self.name_bytes += 1;
    }

    fn value_byte(&mut self, b: u8) -> Result<(), Refusal> {
        match self.field {
            Field::Other => Ok(()),
            Field::ContentLength => match b {
                b' ' | b'\t' => {
                    self.length_item_done |= self.length_item.is_some();
                    Ok(())
                }
                b'0'..=b'9' if !self.length_item_done => {
                    let digit = u64::from(b - b'0');
                    self.length_item =
                        Some(self.length_item.unwrap_or(0).checked_mul(10).and_then(|n| n.checked_add(digit)).ok_or(malformed("headers", BAD_LENGTH))?);
                    Ok(())
                }
                // A list, even of one length repeated, is one hyper refuses (repeated
                // fields of one length it takes).
                _ => Err(malformed("headers", BAD_LENGTH)),
            },
            Field::TransferEncoding => {
                match b {
                    b' ' | b'\t' => self.item_done |= self.item_started,
                    b',' => self.end_of_coding(),
                    _ => {
                        if self.item_done {
                            self.chunked_so_far = false;
                        }
                        self.item_started = true;
                        if self.chunked_so_far && b"chunked".get(self.chunked_at) == Some(&b.to_ascii_lowercase()) {
                            self.chunked_at += 1;
                        } else {
                            self.chunked_so_far = false;
                        }
                    }
                }
                Ok(())
            }
        }
    }

    fn end_of_length_item(&mut self) -> Result<(), Refusal> {
        let length = self.length_item.take().ok_or(malformed("headers", BAD_LENGTH))?;
        self.length_item_done = false;
        // hyper's bound on a body's length (it answers a bare 431 past it).
        if length > u64::MAX - 2 {
            return Err(malformed("headers", HUGE_LENGTH));
        }
        match self.content_length {
            Some(seen) if seen != length => Err(malformed("headers", BAD_LENGTH)),
            _ => {
                self.content_length = Some(length);
                Ok(())
            }
        }
    }

    fn end_of_coding(&mut self) {
        self.last_is_chunked = self.item_started && self.chunked_so_far && self.chunked_at == 7;
        self.chunked_so_far = true;
        self.chunked_at = 0;
        self.item_started = false;
        self.item_done = false;
    }

    fn end_of_field(&mut self) -> Result<(), Refusal> {
        match self.field {
            Field::Other => Ok(()),
            Field::ContentLength => self.end_of_length_item(),
            Field::TransferEncoding => {
                self.end_of_coding();
                Ok(())
            }
        }
    }

    /// The blank line after the fields: the body's framing decides what comes next.
    fn end_of_head(&mut self) -> Result<State, Refusal> {
        self.heads_completed += 1;
        if self.transfer_encoding && (self.http10 || !self.last_is_chunked || self.content_length.is_some()) {
            return Err(malformed("headers", BAD_FRAMING));
        }
        // RFC 9112, 3.2: an HTTP/1.1 request without Host, or any with two, is 400: the
        // MCP server derives its public URLs from the one Host when none is configured.
        if self.hosts > 1 || (self.hosts == 0 && !self.http10) {
            return Err(malformed("headers", HOST_COUNT));
        }
        if self.transfer_encoding {
            self.chunk_digits = 0;
            self.remaining = 0;
            return Ok(State::ChunkSize);
        }
        match self.content_length {
            Some(length) if length > 0 => {
                self.remaining = length;
                Ok(State::Length)
            }
            _ => Ok(self.end_of_request()),
        }
    }

    fn end_of_request(&mut self) -> State {
        self.head_bytes = 0;
        State::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(chunks: &[&[u8]]) -> Result<Phase, (usize, Stop)> {
        let mut scanner = Scanner::default();
        for (at, chunk) in chunks.iter().enumerate() {
            scanner.feed(chunk).map_err(|stop| (at, stop))?;
        }
        Ok(scanner.phase())
    }

    fn refused(bytes: &[u8]) -> Option<Refusal> {
        scan(&[bytes]).err().and_then(|(_, stop)| stop.refusal)
    }

    #[test]
    fn the_default_limits_are_the_command_line_defaults() {
        #[derive(clap::Parser)]
        struct Limits {
            #[command(flatten)]
            limits: HttpLimits,
        }
        let parsed = <Limits as clap::Parser>::try_parse_from(["recap"]).expect("no flags");
        assert_eq!(parsed.limits, HttpLimits::default());
        assert!(<Limits as clap::Parser>::try_parse_from(["recap", "--http-max-connections", "0"]).is_err(), "a cap of zero would serve nobody");
    }

    // MCP 2026-07-28, basic/patterns/cancellation.mdx: "The server MUST treat a client
    // disconnect as cancellation". A request whose client closes its connection while
    // the request is served has its handler dropped, not run to its end: hyper reads on
    // while it answers (half-closures are not allowed), sees the end of the stream and
    // drops the request's future, and with it the store calls it awaits.
    #[tokio::test]
    async fn a_client_that_disconnects_cancels_the_request_it_sent() {
        use tokio::sync::oneshot;
        struct Dropped(Option<oneshot::Sender<()>>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                if let Some(told) = self.0.take() {
                    let _ = told.send(());
                }
            }
        }
        let (entered, entered_rx) = oneshot::channel::<()>();
        let (dropped, dropped_rx) = oneshot::channel::<()>();
        let handles = Arc::new(std::sync::Mutex::new(Some((entered, dropped))));
        let router = Router::new().route(
            "/slow",
            axum::routing::post(move || {
                let handles = handles.lock().expect("the handles").take();
                async move {
                    let (entered, dropped) = handles.expect("one request");
                    let _dropped = Dropped(Some(dropped));
                    let _ = entered.send(());
                    std::future::pending::<()>().await;
                    "never answered"
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            serve(listener, router, &HttpLimits::default(), Metered::No, async move {
                let _ = stopped.await;
            })
            .await
        });
        let mut client = TcpStream::connect(address).await.expect("connect");
        client.write_all(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}").await.expect("send");
        tokio::time::timeout(Duration::from_secs(5), entered_rx).await.expect("the handler runs").expect("entered");
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), dropped_rx).await.expect("the handler is dropped once its client left").expect("dropped");
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), server).await.expect("the server stops").expect("joined").expect("served");
    }

    #[tokio::test]
    async fn accepted_http_connections_send_without_nagle() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let client = TcpStream::connect(address).await.expect("connect");
        let accepted = accept(&listener).await.expect("accept");
        assert!(accepted.nodelay().expect("the option"), "TCP_NODELAY is set on the accepted side");
        assert!(!client.nodelay().expect("the option"), "a fresh socket has Nagle on, so the assertion above is not vacuous");
    }

    #[test]
    fn well_formed_requests_pass_in_any_split_and_bodies_are_followed_to_the_next_head() {
        let requests: &[u8] = b"GET /v1/meetings?limit=3&q=caf%C3%A9 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer svc_pat_x\r\n\r\n\
POST /mcp HTTP/1.1\r\nContent-Length: 5\r\nhOsT: x\r\nContent-Type: application/json\r\n\r\n{\x00\xff}\n\
POST /mcp HTTP/1.1\r\nHost:x\r\nTransfer-Encoding: gzip, Chunked \r\n\r\n3;ext=1\r\n\xff\x00\r\r\n0\r\nTrailer: x\r\n\r\n\
GET /v1/caf\xc3\xa9 HTTP/1.0\nX-Empty:\n\n";
        for split in 0..requests.len() {
            let (left, right) = requests.split_at(split);
            assert_eq!(scan(&[left, right]), Ok(Phase::Idle), "split at {split}");
        }
        let mut scanner = Scanner::default();
        scanner.feed(requests).expect("well-formed");
        assert_eq!((scanner.heads_started, scanner.heads_completed), (4, 4));
    }

    #[test]
    fn malformed_heads_are_refused_with_what_to_answer() {
        let line = |message| Some(Refusal::Malformed { param: "request-line", message });
        let headers = |message| Some(Refusal::Malformed { param: "headers", message });
        assert_eq!(refused(b"GET /v1/\xff HTTP/1.1\r\n\r\n"), line(BAD_TARGET));
        assert_eq!(refused(b"GET /v1/\x00 HTTP/1.1\r\n\r\n"), line(BAD_TARGET));
        assert_eq!(refused(b"GET /v1/\x07 HTTP/1.1\r\n\r\n"), line(BAD_TARGET));
        assert_eq!(refused(b"GET /v1/\xc3 HTTP/1.1\r\n\r\n"), line(BAD_TARGET));
        assert_eq!(refused(b"GET /a<b HTTP/1.1\r\n\r\n"), line(BAD_TARGET));
        assert_eq!(refused(b"GET  / HTTP/1.1\r\n\r\n"), line(BAD_TARGET));
        assert_eq!(refused(b"GET / HTTP/2.0\r\n\r\n"), line(BAD_LINE));
        assert_eq!(refused(b"G\x01T / HTTP/1.1\r\n\r\n"), line(BAD_LINE));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"), headers(FOLDED));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nHost : x\r\n\r\n"), headers(BAD_HEADER));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nHost: a\x00b\r\n\r\n"), headers(BAD_HEADER));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), headers(BAD_HEADER));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), headers(BAD_LENGTH));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\n"), headers(BAD_LENGTH));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n"), headers(BAD_LENGTH));
        assert_eq!(refused(b"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"), headers(BAD_LENGTH));
        assert_eq!(refused(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"), headers(BAD_FRAMING));
        assert_eq!(refused(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), headers(BAD_FRAMING));
        assert_eq!(refused(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), headers(BAD_FRAMING));
        // hyper reads one number per field: a list is refused, even of one length.
        assert_eq!(refused(b"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\nab"), headers(BAD_LENGTH));
        assert_eq!(refused(b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551614\r\n\r\n"), headers(HUGE_LENGTH));
        // Equal lengths in two fields are one length (as hyper reads them).
        assert_eq!(scan(&[b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length:  2 \r\ncontent-length: 2\r\n\r\nab"]), Ok(Phase::Idle));
        assert_eq!(scan(&[b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551613\r\n\r\n"]), Ok(Phase::Body));
        // RFC 9112, 3.2: exactly one Host on HTTP/1.1, at most one on HTTP/1.0, whatever
        // the case of its name; a field whose name only begins or ends like it is another.
        for missing_or_twice in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost-Name: x\r\nX-Host: x\r\nHos: x\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\nhost: x\r\n\r\n",
            b"GET / HTTP/1.0\r\nHOST: x\r\nHost: y\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(refused(missing_or_twice), headers(HOST_COUNT), "{}", String::from_utf8_lossy(missing_or_twice));
        }
        for one in [&b"GET / HTTP/1.1\r\nhOST:x\r\n\r\n"[..], b"GET / HTTP/1.0\r\n\r\n", b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"] {
            assert_eq!(scan(&[one]), Ok(Phase::Idle), "{}", String::from_utf8_lossy(one));
        }
    }

    #[test]
    fn targets_other_than_a_path_are_refused_where_the_http_crate_refuses_them() {
        let target = |target: &str| refused(format!("GET {target} HTTP/1.1\r\n\r\n").as_bytes());
        let authority = Some(malformed("request-line", BAD_AUTHORITY));
        for bad in [
            "http://",
            "http:///v1",
            "http://?a",
            "http://a^b/",
            "http://a\"b/",
            "http://a{b}/",
            "http://a|b/",
            "http://a\\b/",
            "http://a:1:2/",
            "http://1:2:3:4:5:6:7:8:9/",
            "http://[::1/",
            "http://a]/",
            "http://[a]]/",
            "http://[[a]/",
            "http://a%41/",
            "http://a%[::1]/",
            "http://user@/",
            "http://user@",
            "http:/v1",
            "http:/",
            "v1/teams",
            "x:80/v1",
            "x:/v1",
            "host?query",
            "host#fragment",
            "a:b:c",
            "a%b",
            "x:y:z//a",
        ] {
            assert_eq!(target(bad), authority, "{bad}");
            // What the crate hyper parses targets with refuses too.
            assert!(bad.parse::<axum::http::Uri>().is_err(), "the http crate accepts {bad}");
        }
        assert_eq!(target(&format!("{}://x/", "s".repeat(65))), Some(malformed("request-line", LONG_SCHEME)));
        assert_eq!(target("http://caf\u{e9}/"), authority, "a non-ASCII host");
        assert_eq!(target("\u{e9}/v1"), Some(malformed("request-line", BAD_TARGET)), "UTF-8 may not begin a target");
        assert_eq!(target("http://a/\u{e9}\x01"), Some(malformed("request-line", BAD_TARGET)), "the path after the authority has the path's rules");
        for good in [
            "http://a",
            "HTTP://a/v1/teams",
            "https://a:443/v1/teams?limit=3#top",
            "http://a?limit=3",
            "http://a#top",
            "http://user:p%41ss@host:80/",
            "http://[::1]:8080/",
            "http://[fe80::1%25eth0]/",
            "http://a@b@c/",
            "http://a:/",
            "ftp+x.y-z~://host/",
            &format!("{}://x/", "s".repeat(64)),
            "host",
            "host:443",
            "h:",
            "user@host:1",
            "a-b.c~d",
            "http://a!$&'()*+,;=_~-.b/caf\u{e9}",
        ] {
            let request = format!("GET {good} HTTP/1.1\r\nHost: a\r\n\r\n");
            for split in 0..request.len() {
                let (left, right) = request.as_bytes().split_at(split);
                assert_eq!(scan(&[left, right]), Ok(Phase::Idle), "{good}, split at {split}");
            }
            // Checked against the crate hyper parses targets with.
            assert!(good.parse::<axum::http::Uri>().is_ok(), "the http crate refuses {good}");
        }
    }

    #[test]
    fn the_refused_heads_method_is_kept_for_the_metrics() {
        let mut scanner = Scanner::default();
        let _ = scanner.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nPATCH /\xff HTTP/1.1\r\n\r\n");
        assert_eq!(scanner.method(), Some(axum::http::Method::PATCH), "the head refused, not the one before it");
        let mut scanner = Scanner::default();
        let _ = scanner.feed(b"PROPPATCH /\xff HTTP/1.1\r\n\r\n");
        assert_eq!(scanner.method(), None, "longer than any known method");
        let mut scanner = Scanner::default();
        let _ = scanner.feed(b"GE\x01 / HTTP/1.1\r\n\r\n");
        assert_ne!(scanner.method(), Some(axum::http::Method::GET), "a method cut short is not the one it begins");
    }

    #[test]
    fn long_targets_and_heads_and_many_fields_are_refused_by_size() {
        let mut long_target = b"GET /".to_vec();
        long_target.resize(MAX_TARGET_BYTES + 5, b'a');
        assert_eq!(refused(&long_target), Some(Refusal::UriTooLong));
        let mut exact = b"GET /".to_vec();
        exact.resize(MAX_TARGET_BYTES + 4, b'a');
        exact.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(scan(&[&exact]), Ok(Phase::Idle), "a target of exactly the limit passes");
        let mut big_head = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
        big_head.resize(MAX_HEAD_BYTES + 1, b'a');
        assert_eq!(refused(&big_head), Some(Refusal::HeadersTooLarge));
        let many: Vec<u8> = [b"GET / HTTP/1.1\r\n".to_vec(), b"X: y\r\n".repeat(MAX_HEADERS + 1)].concat();
        assert_eq!(refused(&many), Some(Refusal::HeadersTooLarge));
        let enough: Vec<u8> = [b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec(), b"X: y\r\n".repeat(MAX_HEADERS - 1), b"\r\n".to_vec()].concat();
        assert_eq!(scan(&[&enough]), Ok(Phase::Idle));
    }

    #[test]
    fn a_refused_head_is_withheld_from_hyper_and_what_came_before_it_is_not() {
        let bytes = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /\xff HTTP/1.1\r\n\r\n";
        let (_, stop) = scan(&[bytes]).expect_err("refused");
        assert_eq!(stop.deliver, 28, "the first request goes to hyper, the second head does not");
        let (at, stop) = scan(&[b"GET /a", b"\xff HTTP/1.1\r\n\r\n"]).expect_err("refused");
        assert_eq!((at, stop.deliver), (1, 0), "a head refused in a later read: nothing more is handed over");
        let (_, stop) = scan(&[b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz"]).expect_err("broken framing");
        assert_eq!(stop, Stop { deliver: 56, refusal: None }, "a body's broken framing closes without an answer of its own");
    }

    #[test]
    fn refusals_carry_the_envelope_a_request_id_and_close() {
        let answer = String::from_utf8(Refusal::UriTooLong.response()).expect("text");
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{head}");
        assert!(head.contains("\r\nx-request-id: ") && head.contains("\r\nconnection: close"), "{head}");
        assert!(head.contains(&format!("\r\ncontent-length: {}", body.len())), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(body["error"]["code"], "uri_too_long");
        let answer = String::from_utf8(Refusal::AtCapacity.response()).expect("text");
        assert!(answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n") && answer.contains("\r\nretry-after: 1\r\n"), "{answer}");
    }
}
