//! What the HTTP benches (`inbox`, `console`) share: a router served on a loopback port,
//! one timed GET as a person signed in by the trusted header, and medians.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;

/// Serves `router` on a free loopback port; its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// One GET over a fresh loopback connection as `user`; its latency, and its body.
pub async fn get(addr: SocketAddr, user: &str, path: &str) -> (Duration, String) {
    let started = Instant::now();
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap_or_else(|e| panic!("handshake: {e}"));
    tokio::spawn(connection);
    let request = Request::get(path)
        .header("host", addr.to_string())
        .header("x-forwarded-user", user)
        .body(Empty::<Bytes>::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let response = sender
        .send_request(request)
        .await
        .unwrap_or_else(|e| panic!("request: {e}"));
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    assert!(status.is_success(), "{path}: {status} {body}");
    (started.elapsed(), body)
}

pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
