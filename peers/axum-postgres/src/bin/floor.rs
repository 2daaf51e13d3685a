//! The floor of the comparison: recap's recorded answers to the benchmark's requests,
//! served by hyper's HTTP/1 connection loop on tokio (one worker per core, `TCP_NODELAY`,
//! mimalloc, keep-alive; the loop recap's own server runs, without its timeouts and
//! checks), doing nothing else: no routing, no token check, no store, no limit. What it
//! costs a request is what answering those bytes over HTTP/1.1 costs on this machine, the
//! part no read API can go under; its requests per CPU-second divided by the peer's are
//! the most any service could reach against the peer here.
//!
//! `FLOOR_RESPONSES`: a JSON file, a list of `{"path", "authorization", "status",
//! "headers": [[name, value], ...], "body"}` (the path with its query, the request's
//! `Authorization` header, which tells two accounts' answers to one path apart, the body
//! as text); `LISTEN` the address. Any other request is 404 with an empty body.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Deserialize)]
struct Recorded {
    path: String,
    authorization: String,
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// The answers by path, then by `Authorization` header: looked up with the request's own
/// bytes, nothing made per request.
type Answers = HashMap<String, HashMap<Vec<u8>, Answer>>;

fn load(path: &str) -> Answers {
    let text = std::fs::read(path).unwrap_or_else(|error| panic!("FLOOR_RESPONSES {path}: {error}"));
    let recorded: Vec<Recorded> = serde_json::from_slice(&text).expect("FLOOR_RESPONSES: a list of recorded responses");
    let mut answers = Answers::new();
    for each in recorded {
        let mut headers = HeaderMap::new();
        for (name, value) in each.headers {
            // hyper writes these itself, and the connection's are the recording
            // client's (which closed its connection after each answer).
            if ["content-length", "date", "connection", "keep-alive", "transfer-encoding"].iter().any(|own| name.eq_ignore_ascii_case(own)) {
                continue;
            }
            headers.append(HeaderName::from_bytes(name.as_bytes()).expect("header name"), HeaderValue::from_str(&value).expect("header value"));
        }
        let answer = Answer { status: StatusCode::from_u16(each.status).expect("status"), headers, body: Bytes::from(each.body) };
        answers.entry(each.path).or_default().insert(each.authorization.into_bytes(), answer);
    }
    answers
}

fn answer(answers: &Answers, request: &Request<hyper::body::Incoming>) -> Response<Body> {
    let authorization = request.headers().get(AUTHORIZATION).map(HeaderValue::as_bytes).unwrap_or_default();
    let path = request.uri().path_and_query().map(|path| path.as_str()).unwrap_or("/");
    let mut response = Response::new(Body::empty());
    match answers.get(path).and_then(|by_authorization| by_authorization.get(authorization)) {
        Some(answer) => {
            *response.body_mut() = Body::from(answer.body.clone());
            *response.status_mut() = answer.status;
            *response.headers_mut() = answer.headers.clone();
        }
        None => *response.status_mut() = StatusCode::NOT_FOUND,
    }
    response
}

fn main() {
    let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).enable_all().build().expect("runtime");
    let answers = Arc::new(load(&std::env::var("FLOOR_RESPONSES").expect("FLOOR_RESPONSES names the recorded responses")));
    runtime.block_on(async move {
        let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8091".into());
        let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind LISTEN");
        eprintln!("floor listening on {listen} ({cores} worker(s))");
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.keep_alive(true);
        let builder = Arc::new(builder);
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            let (answers, builder) = (answers.clone(), builder.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let response = answer(&answers, &request);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = builder.serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
}
