//! Open-loop load: `open-loop <host:port> <path> <token> <rate per second> <seconds>`.
//! The requests are spread over 64 keep-alive connections, each with its own schedule
//! (connection k sends its i-th request at `(i * 64 + k) / rate`), and a request's latency
//! counts from its scheduled instant, so a slow answer that delays the next request is
//! charged to that request too (no coordinated omission); the same generator as
//! benches/http.rs. Prints one line of JSON: p50, p99 and max in milliseconds, requests
//! scheduled, answered, and answered with a status other than 200.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONNECTIONS: usize = 64;

async fn read_response(connection: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<u16> {
    buffer.clear();
    let mut chunk = [0u8; 16_384];
    loop {
        let read = connection.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let status = head.split_whitespace().nth(1).and_then(|code| code.parse().ok())?;
            let length: usize = head.lines().find_map(|line| line.strip_prefix("content-length:")).and_then(|value| value.trim().parse().ok()).unwrap_or(0);
            while buffer.len() < end + 4 + length {
                let read = connection.read(&mut chunk).await.ok()?;
                if read == 0 {
                    return None;
                }
                buffer.extend_from_slice(&chunk[..read]);
            }
            return Some(status);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: open-loop <host:port> <path> <token> <rate per second> <seconds>");
        std::process::exit(2);
    }
    let (address, path, token) = (args[1].clone(), &args[2], &args[3]);
    let rate: f64 = args[4].parse().expect("rate");
    let duration: f64 = args[5].parse().expect("seconds");
    let request = Arc::new(format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\r\n").into_bytes());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let total = (rate * duration) as usize;
    let (samples, failed) = runtime.block_on(async move {
        let start = tokio::time::Instant::now() + Duration::from_millis(200);
        let mut tasks = Vec::with_capacity(CONNECTIONS);
        for k in 0..CONNECTIONS {
            let mut connection = TcpStream::connect(&address).await.expect("connect");
            let _ = connection.set_nodelay(true);
            let request = request.clone();
            tasks.push(tokio::spawn(async move {
                let mut samples = Vec::with_capacity(total / CONNECTIONS + 1);
                let mut failed = 0usize;
                let mut buffer = Vec::with_capacity(32_768);
                let mut index = k;
                while index < total {
                    let scheduled = start + Duration::from_secs_f64(index as f64 / rate);
                    tokio::time::sleep_until(scheduled).await;
                    if connection.write_all(&request).await.is_err() {
                        break;
                    }
                    match read_response(&mut connection, &mut buffer).await {
                        None => break,
                        Some(status) => {
                            if status != 200 {
                                failed += 1;
                            }
                        }
                    }
                    samples.push(scheduled.elapsed().as_secs_f64() * 1e3);
                    index += CONNECTIONS;
                }
                (samples, failed)
            }));
        }
        let (mut all, mut failed) = (Vec::with_capacity(total), 0);
        for task in tasks {
            let (samples, task_failed) = task.await.unwrap_or_default();
            all.extend(samples);
            failed += task_failed;
        }
        (all, failed)
    });
    let mut samples = samples;
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples.get(((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1))).copied().unwrap_or(f64::NAN);
    println!(
        "{{\"p50\":{:.3},\"p99\":{:.3},\"max\":{:.3},\"scheduled\":{total},\"answered\":{},\"non_200\":{failed}}}",
        at(0.5),
        at(0.99),
        samples.last().copied().unwrap_or(f64::NAN),
        samples.len()
    );
}
