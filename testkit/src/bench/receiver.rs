//! The webhooks benches' receiver: a bare HTTP/1.1 responder on loopback (keep-alive,
//! `Content-Length` bodies, `200` with an empty body at once) on a thread of its own,
//! with its own single-threaded runtime, so that what it costs is measured apart (the
//! CPU time of its thread) and it never queues behind the measured process's tasks: in
//! production it is another machine. `RECAP_BENCH_RECEIVER=axum` puts an axum server
//! there instead, which costs several times as much a request.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the receiver has had: every request's arrival, by the meeting it announces,
/// and where to read the CPU time of its thread.
#[derive(Default)]
pub struct Received {
    count: AtomicU64,
    arrivals: Mutex<Vec<(String, Instant)>>,
    thread_stat: Mutex<Option<PathBuf>>,
}

impl Received {
    fn arrived(&self, body: &[u8]) {
        let at = Instant::now();
        self.arrivals.lock().expect("the arrivals lock").push((meeting_of(body), at));
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests received so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Forgets the requests received so far.
    pub fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
        self.arrivals.lock().expect("the arrivals lock").clear();
    }

    /// Waits until `count` requests were received; panics when none came for `stalled`.
    pub async fn wait_for(&self, count: u64, stalled: Duration) {
        let (mut seen, mut progressed) = (self.count(), Instant::now());
        while seen < count {
            assert!(progressed.elapsed() < stalled, "{seen} of {count} deliveries arrived, then none for {stalled:?}");
            tokio::time::sleep(Duration::from_millis(2)).await;
            let now_seen = self.count();
            if now_seen > seen {
                (seen, progressed) = (now_seen, Instant::now());
            }
        }
    }

    /// When the first request announcing each meeting arrived (a meeting delivered twice
    /// counts at its first), of the arrivals so far; forgets them.
    pub fn take_first_arrivals(&self) -> std::collections::HashMap<String, Instant> {
        let mut first = std::collections::HashMap::new();
        for (meeting, at) in std::mem::take(&mut *self.arrivals.lock().expect("the arrivals lock")) {
            first.entry(meeting).and_modify(|seen: &mut Instant| *seen = (*seen).min(at)).or_insert(at);
        }
        first
    }

    /// When the first and the last of the requests received so far arrived.
    pub fn first_and_last(&self) -> Option<(Instant, Instant)> {
        let arrivals = self.arrivals.lock().expect("the arrivals lock");
        let first = arrivals.iter().map(|(_, at)| *at).min()?;
        let last = arrivals.iter().map(|(_, at)| *at).max()?;
        Some((first, last))
    }

    /// The CPU time the receiver's thread has used so far.
    pub fn cpu(&self) -> Duration {
        self.thread_stat.lock().expect("the stat lock").as_deref().map_or(Duration::ZERO, cpu_time)
    }
}

/// The meeting a delivery announces (`data.meeting_id`), found without parsing the body.
fn meeting_of(body: &[u8]) -> String {
    const KEY: &[u8] = b"\"meeting_id\":\"";
    let Some(start) = body.windows(KEY.len()).position(|window| window == KEY).map(|at| at + KEY.len()) else { return String::new() };
    let end = body[start..].iter().position(|byte| *byte == b'"').map_or(body.len(), |length| start + length);
    String::from_utf8_lossy(&body[start..end]).into_owned()
}

/// The user and system CPU time in a `/proc` stat file (a process's or a thread's).
pub fn cpu_time(stat: &Path) -> Duration {
    let Ok(text) = std::fs::read_to_string(stat) else { return Duration::ZERO };
    // The fields after the command's closing parenthesis: utime and stime are the 12th
    // and 13th of them, in clock ticks (100 a second on Linux).
    let fields: Vec<&str> = text.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |index: usize| fields.get(index).and_then(|field| field.parse::<u64>().ok()).unwrap_or(0);
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A receiver on loopback answering 200 at once, on a thread of its own; returns its URL.
pub fn receiver(received: Arc<Received>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding the receiver");
    let url = format!("http://{}/hooks", listener.local_addr().expect("the receiver's address"));
    listener.set_nonblocking(true).expect("a non-blocking listener");
    std::thread::spawn(move || {
        // `/proc/thread-self` links to `<pid>/task/<tid>`, relative to `/proc`.
        *received.thread_stat.lock().expect("the stat lock") =
            std::fs::read_link("/proc/thread-self").ok().map(|task| Path::new("/proc").join(task).join("stat"));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("the receiver's runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("the receiver's listener");
            if std::env::var("RECAP_BENCH_RECEIVER").is_ok_and(|receiver| receiver == "axum") {
                let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
                    let received = received.clone();
                    async move {
                        received.arrived(&body);
                        axum::http::StatusCode::OK
                    }
                });
                let _ = axum::serve(listener, app).await;
                return;
            }
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(answer(socket, received.clone()));
            }
        });
    });
    url
}

/// Answers the requests of one connection, in order, 200 with an empty body each.
async fn answer(mut socket: tokio::net::TcpStream, received: Arc<Received>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = Vec::with_capacity(16 * 1024);
    loop {
        let head_end = loop {
            if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                break at + 4;
            }
            if !matches!(socket.read_buf(&mut buffer).await, Ok(read) if read > 0) {
                return;
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
        let length = head.lines().find_map(|line| line.strip_prefix("content-length:")).and_then(|value| value.trim().parse::<usize>().ok()).unwrap_or(0);
        while buffer.len() < head_end + length {
            if !matches!(socket.read_buf(&mut buffer).await, Ok(read) if read > 0) {
                return;
            }
        }
        received.arrived(&buffer[head_end..head_end + length]);
        buffer.drain(..head_end + length);
        if socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.is_err() {
            return;
        }
    }
}
