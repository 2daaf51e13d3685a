//! The minimal HTTP/1.1 client side the benchmarks' open-loop generators share (wrk
//! measures the maximum; these time each request from its scheduled instant).

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Reads one HTTP/1.1 response with a Content-Length body; its status, None on error.
pub async fn read_response(connection: &mut TcpStream) -> Option<u16> {
    let mut buffer = Vec::with_capacity(16_384);
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
