//! End-to-end tests over real sockets: actix `HttpServer` on 127.0.0.1:0 in its own thread,
//! a hyper 1 client on the test's tokio runtime.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail loudly, like the tests"
)]

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use actix_web::{App, HttpServer};
use aggregation_actix::{Mount, PeerAddr, RequestBody, router_with};
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use http::{Request, Response, StatusCode, header};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full, StreamBody, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::timeout;
use tower::service_fn;

type BoxError = Box<dyn Error + Send + Sync>;
type TestBody = BoxBody<Bytes, BoxError>;

const MIB: usize = 1024 * 1024;
const LIMIT: Duration = Duration::from_secs(20);

/// Runs an actix server (1 worker) handing every path to `svc` in a background thread; returns
/// its address.
fn serve<S>(svc: S) -> SocketAddr
where
    S: tower::Service<Request<RequestBody>, Response = Response<TestBody>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let server = HttpServer::new(move || {
                App::new().configure(router_with(svc.clone(), Mount::api().with_fallback()))
            })
            .workers(1)
            .disable_signals()
            .bind(("127.0.0.1", 0))
            .unwrap();
            tx.send(server.addrs()[0]).unwrap();
            server.run().await.unwrap();
        });
    });
    rx.recv().unwrap()
}

fn full(data: impl Into<Bytes>) -> TestBody {
    Full::new(data.into()).map_err(|e| match e {}).boxed()
}

/// Body of `n` chunks of `size` bytes with unknown length (sent chunked), counting pulls.
fn chunked(n: usize, size: usize, pulled: Arc<AtomicU64>) -> TestBody {
    let chunk = Bytes::from(vec![b'x'; size]);
    let s = stream::iter(0..n).map(move |_| {
        pulled.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        Ok::<_, BoxError>(Frame::data(chunk.clone()))
    });
    BodyExt::boxed(StreamBody::new(s))
}

fn text(s: &str) -> header::HeaderValue {
    header::HeaderValue::from_str(s).unwrap()
}

/// The dummy "core": routes on the path.
async fn dummy(req: Request<RequestBody>) -> Result<Response<TestBody>, Infallible> {
    let peer = req.extensions().get::<PeerAddr>().map(|p| p.0.to_string());
    let mut res = Response::new(full(""));
    let h = res.headers_mut();
    h.insert("x-method", text(req.method().as_str()));
    h.insert("x-uri", text(&req.uri().to_string()));
    h.insert("x-peer", text(&peer.unwrap_or_default()));
    h.insert("x-version", text(&format!("{:?}", req.version())));
    for v in req.headers().get_all("x-test") {
        h.append("x-test", v.clone());
    }
    match req.uri().path() {
        "/echo" => {
            let status = req.uri().query().and_then(|q| q.strip_prefix("status="));
            let status = status.map_or(200, |s| s.parse().unwrap());
            *res.status_mut() = StatusCode::from_u16(status).unwrap();
            if status == 405 {
                res.headers_mut().insert(header::ALLOW, text("GET, HEAD"));
            }
            res.headers_mut().append(header::SET_COOKIE, text("a=1"));
            res.headers_mut().append(header::SET_COOKIE, text("b=2"));
            *res.body_mut() = req.into_body().map_err(Into::into).boxed();
        }
        "/count" => {
            let hint = req.body().size_hint().exact();
            let mut body = req.into_body();
            let (mut frames, mut bytes) = (0u64, 0u64);
            while let Some(frame) = body.frame().await {
                frames += 1;
                bytes += frame.unwrap().into_data().unwrap().len() as u64;
            }
            let h = res.headers_mut();
            h.insert("x-frames", text(&frames.to_string()));
            h.insert("x-bytes", text(&bytes.to_string()));
            h.insert("x-hint", text(&format!("{hint:?}")));
        }
        "/stream" => {
            let s = stream::iter(0..5).then(|i| async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok::<_, BoxError>(Frame::data(Bytes::from(format!("chunk-{i}\n"))))
            });
            *res.body_mut() = BodyExt::boxed(StreamBody::new(s));
        }
        "/drop" => {
            drop(req.into_body());
            *res.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            *res.body_mut() = full("too large");
        }
        "/fail" => {
            // The error comes after the head and first chunk have been flushed.
            let s = stream::iter(0..2).then(|i| async move {
                if i == 0 {
                    return Ok(Frame::data(Bytes::from_static(b"partial")));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(BoxError::from("boom"))
            });
            *res.body_mut() = BodyExt::boxed(StreamBody::new(s));
        }
        _ => *res.status_mut() = StatusCode::NOT_FOUND,
    }
    Ok(res)
}

/// Sends one request on a fresh connection; also returns the client's local address.
async fn send(
    addr: SocketAddr,
    req: Request<TestBody>,
) -> (hyper::Result<Response<Incoming>>, SocketAddr) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let local = stream.local_addr().unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    (sender.send_request(req).await, local)
}

fn request(method: &str, uri: &str, body: TestBody) -> Request<TestBody> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "localhost")
        .body(body)
        .unwrap()
}

fn values(res: &Response<Incoming>, name: &str) -> Vec<String> {
    let all = res.headers().get_all(name).iter();
    all.map(|v| v.to_str().unwrap().to_owned()).collect()
}

fn one(res: &Response<Incoming>, name: &str) -> String {
    res.headers()[name].to_str().unwrap().to_owned()
}

async fn body_of(res: Response<Incoming>) -> Bytes {
    res.into_body().collect().await.unwrap().to_bytes()
}

#[tokio::test]
async fn method_uri_headers_status_round_trip() {
    let addr = serve(service_fn(dummy));
    let mut req = request("PURGE", "/echo?status=405", full("hello"));
    req.headers_mut().append("x-test", text("one"));
    req.headers_mut().append("x-test", text("two"));
    let (res, _) = timeout(LIMIT, send(addr, req)).await.unwrap();
    let res = res.unwrap();
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(one(&res, "allow"), "GET, HEAD");
    assert_eq!(values(&res, "set-cookie"), ["a=1", "b=2"]);
    assert_eq!(values(&res, "x-test"), ["one", "two"]);
    assert_eq!(one(&res, "x-method"), "PURGE");
    assert_eq!(one(&res, "x-uri"), "/echo?status=405");
    assert_eq!(one(&res, "x-version"), "HTTP/1.1");
    assert_eq!(body_of(res).await, "hello");

    let (res, _) = send(addr, request("GET", "/nowhere/at/all", full(""))).await;
    let res = res.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(one(&res, "x-method"), "GET");
}

#[tokio::test]
async fn peer_address_arrives() {
    let addr = serve(service_fn(dummy));
    let (res, local) = send(
        addr,
        request("GET", "/echo", Empty::new().map_err(|e| match e {}).boxed()),
    )
    .await;
    let res = res.unwrap();
    assert_eq!(one(&res, "x-peer"), local.to_string());
}

#[tokio::test]
async fn large_upload_is_streamed_not_buffered() {
    let addr = serve(service_fn(dummy));
    // Known length (Content-Length), well over actix's 256 KiB default payload limit.
    let req = request("POST", "/count", full(vec![7u8; 5 * MIB]));
    let (res, _) = timeout(LIMIT, send(addr, req)).await.unwrap();
    let res = res.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(one(&res, "x-bytes"), (5 * MIB).to_string());
    assert_eq!(one(&res, "x-hint"), format!("Some({})", 5 * MIB));
    assert!(one(&res, "x-frames").parse::<u64>().unwrap() > 1);

    // Chunked upload of unknown length.
    let req = request("POST", "/count", chunked(80, 64 * 1024, Default::default()));
    let (res, _) = timeout(LIMIT, send(addr, req)).await.unwrap();
    let res = res.unwrap();
    assert_eq!(one(&res, "x-bytes"), (5 * MIB).to_string());
    assert_eq!(one(&res, "x-hint"), "None");
    assert!(one(&res, "x-frames").parse::<u64>().unwrap() > 1);
}

#[tokio::test]
async fn large_body_echoes_back() {
    let addr = serve(service_fn(dummy));
    let data: Vec<u8> = (0..3 * MIB).map(|i| (i % 251) as u8).collect();
    let (res, _) = timeout(
        LIMIT,
        send(addr, request("PUT", "/echo", full(data.clone()))),
    )
    .await
    .unwrap();
    let body = timeout(LIMIT, body_of(res.unwrap())).await.unwrap();
    assert!(body == data, "echoed body differs");
}

#[tokio::test]
async fn streaming_response_arrives_whole() {
    let addr = serve(service_fn(dummy));
    let (res, _) = timeout(LIMIT, send(addr, request("GET", "/stream", full(""))))
        .await
        .unwrap();
    let res = res.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(one(&res, "transfer-encoding"), "chunked");
    assert!(res.headers().get(header::CONTENT_LENGTH).is_none());
    let expected: String = (0..5).map(|i| format!("chunk-{i}\n")).collect();
    assert_eq!(body_of(res).await, expected);
}

#[tokio::test]
async fn body_error_mid_stream_closes_connection() {
    let addr = serve(service_fn(dummy));
    let (res, _) = timeout(LIMIT, send(addr, request("GET", "/fail", full(""))))
        .await
        .unwrap();
    let res = res.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let collected = timeout(LIMIT, res.into_body().collect()).await.unwrap();
    assert!(
        collected.is_err(),
        "truncated body must surface as an error"
    );
}

#[tokio::test]
async fn dropped_body_does_not_hang() {
    let addr = serve(service_fn(dummy));
    // Chunked upload: actix can drain the rest, so the response must arrive.
    let req = request("POST", "/drop", chunked(80, 64 * 1024, Default::default()));
    let (res, _) = timeout(LIMIT, send(addr, req)).await.unwrap();
    let res = res.unwrap();
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body_of(res).await, "too large");

    // Content-Length upload: actix closes after answering; either way, no hang.
    let req = request("POST", "/drop", full(vec![0u8; 5 * MIB]));
    let (res, _) = timeout(LIMIT, send(addr, req)).await.unwrap();
    if let Ok(res) = res {
        assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }

    // The server still answers.
    let (res, _) = timeout(LIMIT, send(addr, request("GET", "/echo", full(""))))
        .await
        .unwrap();
    assert_eq!(res.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn slow_consumer_applies_back_pressure() {
    let paused = Arc::new(Notify::new());
    let resume = Arc::new(Notify::new());
    let (p, r) = (paused.clone(), resume.clone());
    let svc = service_fn(move |req: Request<RequestBody>| {
        let (paused, resume) = (p.clone(), r.clone());
        async move {
            let mut body = req.into_body();
            let mut bytes = 0;
            let first = body.frame().await.unwrap().unwrap();
            bytes += first.into_data().unwrap().len();
            paused.notify_one();
            resume.notified().await;
            while let Some(frame) = body.frame().await {
                bytes += frame.unwrap().into_data().unwrap().len();
            }
            Ok::<_, Infallible>(Response::new(full(bytes.to_string())))
        }
    });
    let addr = serve(svc);

    const TOTAL: usize = 64 * MIB;
    let pulled = Arc::new(AtomicU64::new(0));
    let req = request(
        "POST",
        "/",
        chunked(TOTAL / (64 * 1024), 64 * 1024, pulled.clone()),
    );
    let client = tokio::spawn(async move { send(addr, req).await.0 });

    timeout(LIMIT, paused.notified()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Only socket buffers and a couple of chunks may fill while the service is stalled.
    let sent = pulled.load(Ordering::SeqCst);
    eprintln!("bytes pulled from the client while the service stalled: {sent}");
    assert!(
        sent < (TOTAL / 2) as u64,
        "upload not held back: {sent} bytes sent"
    );

    resume.notify_one();
    let res = timeout(LIMIT, client).await.unwrap().unwrap().unwrap();
    assert_eq!(body_of(res).await, TOTAL.to_string());
}
