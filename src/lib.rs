//! The roles of the `recap` binary as library functions, so that tests and benchmarks
//! start them exactly as the binary does: `serve` (the embedded edition), the
//! operations listener (`admin`), the demo world (`demo`) and the roles of the
//! distributed edition (`distributed`), the webhooks runtime's task and role
//! (`webhooks`), plus the command line that selects them (`cli`).

pub mod admin;
pub mod cli;
pub mod demo;
pub mod distributed;
pub mod serve;
pub mod telemetry;
pub mod webhooks;

/// glibc's allocator spends much of a request's time in malloc/free consolidation under
/// this workload (many short-lived strings); mimalloc's thread-local free lists do not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An HTTP listener whose accepted connections send without Nagle's algorithm
/// (`TCP_NODELAY`; axum's `serve` leaves it on). With it on, a response written in more
/// than one piece (a large body the socket takes in parts) could hold its last segment
/// until the client acknowledged the previous one, which a client delays by tens of
/// milliseconds: a latency outlier out of nothing.
pub fn http_listener(listener: tokio::net::TcpListener) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    fn no_delay(stream: &mut tokio::net::TcpStream) {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set on an accepted connection");
        }
    }
    axum::serve::ListenerExt::tap_io(listener, no_delay as fn(&mut tokio::net::TcpStream))
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    #[tokio::test]
    async fn accepted_http_connections_send_without_nagle() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let mut listener = super::http_listener(listener);
        let client = tokio::net::TcpStream::connect(address).await.expect("connect");
        let (accepted, _) = listener.accept().await;
        assert!(accepted.nodelay().expect("the option"), "TCP_NODELAY is set on the accepted side");
        assert!(!client.nodelay().expect("the option"), "a fresh socket has Nagle on, so the assertion above is not vacuous");
    }
}
