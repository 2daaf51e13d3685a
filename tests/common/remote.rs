//! What the router suites (`query-api/tests/rest`, `mcp/tests`) need to run a world
//! against the distributed edition instead of a router in process: the cluster behind
//! it (`Edition`), and requests sent to it over HTTP as a client sends them.

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;

/// A running distributed edition a world's events and requests go to: the function
/// that publishes events to its Kafka and returns once its projector accounted for them
/// (it owns the cluster: dropping it stops the cluster), and the origins
/// (`http://127.0.0.1:<port>`) of the processes serving the suite's API, asked in turn.
/// Plain std types, so that every copy of a suite's `common` module names the same type.
pub type Edition = (Box<dyn Fn(&[String]) + Send + Sync>, Vec<String>);

/// One request over its own HTTP/1.1 connection to `origin`: the request's method, path
/// and query, headers and body. A request without a Host header gets the origin's.
pub async fn over_http(origin: &str, request: Request<Body>) -> (StatusCode, HeaderMap, Vec<u8>) {
    let authority = origin.trim_start_matches("http://").trim_end_matches('/').to_string();
    let stream = tokio::net::TcpStream::connect(&authority).await.unwrap_or_else(|error| panic!("connect to {origin}: {error}"));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key(header::HOST) {
        parts.headers.insert(header::HOST, authority.parse().expect("an authority"));
    }
    let response = sender.send_request(Request::from_parts(parts, body)).await.unwrap_or_else(|error| panic!("request to {origin}: {error}"));
    let (parts, body) = response.into_parts();
    (parts.status, parts.headers, body.collect().await.expect("the response body").to_bytes().to_vec())
}
