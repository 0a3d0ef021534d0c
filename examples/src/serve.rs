//! The HTTP server loop: HTTP/1.1 and HTTP/2 on one listener, with deadlines a slow or hostile
//! client cannot stretch, a cap on open connections, and a shutdown that waits for in-flight
//! requests only so long.
//!
//! `axum::serve` has no header or body timeouts, so a client that trickles its request holds a
//! connection (and a task) for as long as it likes. Here:
//!
//! * a new connection must choose its protocol (send enough of its first bytes to tell HTTP/1
//!   from the HTTP/2 preface) within [`Timeouts::header_read`], or it is closed;
//! * the request head must arrive within [`Timeouts::header_read`] (HTTP/1; hyper closes the
//!   connection otherwise, also for an idle keep-alive connection that sends nothing);
//! * an HTTP/2 connection with no request in flight for [`Timeouts::header_read`] is closed
//!   (`GOAWAY`), and one whose peer stops answering pings is dropped;
//! * the whole request body must arrive within [`Timeouts::body_read`] of the request starting;
//!   past that, reading it fails and the API answers with its usual problem for an unreadable
//!   body, then the connection closes;
//! * at most `max_connections` connections are open at once: beyond them the server stops
//!   accepting, and new connections wait in the listen backlog until one ends;
//! * at shutdown, the listener closes at once, open connections finish their in-flight
//!   requests, and after [`Timeouts::shutdown`] whatever is still running is abandoned.

use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt as _;

/// How long clients get, and how long a shutdown waits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// From connection (or the end of the previous request) to the end of the request head;
    /// also the longest an HTTP/2 connection stays open with no request in flight.
    pub(crate) header_read: Duration,
    /// From the start of a request to the end of its body.
    pub(crate) body_read: Duration,
    /// From the shutdown signal until open connections are abandoned.
    pub(crate) shutdown: Duration,
}

/// How the connections ended at shutdown.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drained {
    /// Whether connections were still open at the deadline and so abandoned.
    pub(crate) abandoned: bool,
    /// The shutdown signal plus [`Timeouts::shutdown`]: what else stops (jobs, mail) must be
    /// done by then too.
    pub(crate) deadline: Instant,
}

/// Serves `app` on `listener`, at most `max_connections` connections at once, until
/// `shutdown` completes, then drains connections within [`Timeouts::shutdown`].
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    timeouts: Timeouts,
    max_connections: u32,
    shutdown: impl Future<Output = ()>,
) -> Drained {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read);
    // A ping after half the idle bound of silence: a peer gone without a word is found out
    // before the idle bound ends a connection that merely rests.
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(timeouts.header_read / 2)
        .keep_alive_timeout(timeouts.header_read);
    // One permit per open connection, held by its task: the cap, and at shutdown the count of
    // connections still open.
    let slots = Arc::new(Semaphore::new(max_connections as usize));
    let (closing, _) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        // Without a free slot, nothing is accepted: new connections wait in the backlog.
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let app = app.clone();
        let body_read = timeouts.body_read;
        let requests = activity.clone();
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let in_flight = requests.start();
            let mut request =
                request.map(|body| axum::body::Body::new(Deadline::new(body, body_read)));
            request.extensions_mut().insert(ConnectInfo(peer));
            let response = app.clone().oneshot(request);
            async move {
                let response = response.await?;
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    axum::body::Body::new(InFlightBody {
                        body,
                        _in_flight: in_flight,
                    })
                }))
            }
        });
        let io = Sniffing::new(stream, timeouts.header_read, activity.clone());
        let connection = builder
            .serve_connection(TokioIo::new(io), service)
            .into_owned();
        let mut closing = closing.subscribe();
        let idle_limit = timeouts.header_read;
        tokio::spawn(async move {
            let _slot = slot;
            let mut connection = pin!(connection);
            let mut ending = false;
            let ended = loop {
                tokio::select! {
                    // The connection first: whatever it has due (a ping) goes out before a
                    // GOAWAY.
                    biased;
                    ended = connection.as_mut() => break ended,
                    _ = closing.wait_for(|closing| *closing), if !ending => {
                        connection.as_mut().graceful_shutdown();
                        ending = true;
                    }
                    () = activity.http2_idle_for(idle_limit), if !ending => {
                        connection.as_mut().graceful_shutdown();
                        ending = true;
                    }
                }
            };
            if let Err(error) = ended {
                tracing::debug!(peer = %peer, error = %error, "connection ended with an error");
            }
        });
    }
    let deadline = Instant::now() + timeouts.shutdown;
    drop(listener);
    closing.send_replace(true);
    let open = (max_connections as usize).saturating_sub(slots.available_permits());
    if open > 0 {
        tracing::info!(open, "waiting for open connections to finish");
    }
    // Every slot back means every connection has ended.
    let drained = tokio::time::timeout_at(deadline, slots.acquire_many(max_connections)).await;
    if drained.is_ok() {
        return Drained {
            abandoned: false,
            deadline,
        };
    }
    tracing::warn!(
        deadline_seconds = timeouts.shutdown.as_secs(),
        "shutdown deadline passed; abandoning the requests still in flight"
    );
    Drained {
        abandoned: true,
        deadline,
    }
}

/// What one connection is doing: for closing an HTTP/2 connection that sits idle.
struct Activity {
    load: watch::Sender<Load>,
}

#[derive(Debug, Clone, Copy)]
struct Load {
    /// Whether the connection chose HTTP/2.
    http2: bool,
    /// Requests whose response has not been sent yet.
    in_flight: usize,
    /// When the last request ended (or the connection opened).
    since: Instant,
}

impl Activity {
    fn new() -> Self {
        let (load, _) = watch::channel(Load {
            http2: false,
            in_flight: 0,
            since: Instant::now(),
        });
        Self { load }
    }

    fn chose_http2(&self) {
        self.load.send_modify(|load| load.http2 = true);
    }

    /// A request starts; it ends when the returned guard is dropped.
    fn start(self: &Arc<Self>) -> InFlight {
        // Only an HTTP/2 connection's idle watch reads the count: waking an HTTP/1
        // connection's task for it would cost two extra polls of the connection per request.
        self.load.send_if_modified(|load| {
            load.in_flight += 1;
            load.http2
        });
        InFlight(self.clone())
    }

    /// Completes once the connection is HTTP/2 and has had no request in flight for `limit`.
    async fn http2_idle_for(&self, limit: Duration) {
        let mut load = self.load.subscribe();
        loop {
            let now = *load.borrow_and_update();
            if now.http2 && now.in_flight == 0 {
                tokio::select! {
                    () = tokio::time::sleep_until(now.since + limit) => return,
                    _ = load.changed() => {}
                }
            } else {
                // The sender lives as long as `self`.
                let _ = load.changed().await;
            }
        }
    }
}

/// A request in flight on a connection, until its response body is dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.load.send_if_modified(|load| {
            load.in_flight = load.in_flight.saturating_sub(1);
            load.since = Instant::now();
            load.http2
        });
    }
}

/// A response body that keeps its request counted as in flight until it is sent or dropped.
struct InFlightBody {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl Body for InFlightBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The first bytes of every HTTP/2 connection.
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A new connection whose first bytes must arrive in time: until they tell HTTP/1 from the
/// HTTP/2 preface (as hyper-util's protocol detection reads them), a read that waits past the
/// deadline fails. After that, the protocol's own timers take over.
struct Sniffing {
    stream: TcpStream,
    sniff: Option<Sniff>,
}

struct Sniff {
    /// Bytes of the HTTP/2 preface seen so far.
    matched: usize,
    deadline: Pin<Box<tokio::time::Sleep>>,
    activity: Arc<Activity>,
}

/// What the bytes read so far say about the protocol.
enum Sniffed {
    Undecided,
    Http1,
    Http2,
}

impl Sniff {
    fn observe(&mut self, read: &[u8]) -> Sniffed {
        if read.is_empty() {
            // The peer is gone; nothing more to time.
            return Sniffed::Http1;
        }
        for byte in read {
            if HTTP2_PREFACE.get(self.matched) != Some(byte) {
                return Sniffed::Http1;
            }
            self.matched += 1;
            if self.matched == HTTP2_PREFACE.len() {
                return Sniffed::Http2;
            }
        }
        Sniffed::Undecided
    }
}

impl Sniffing {
    fn new(stream: TcpStream, limit: Duration, activity: Arc<Activity>) -> Self {
        Self {
            stream,
            sniff: Some(Sniff {
                matched: 0,
                deadline: Box::pin(tokio::time::sleep(limit)),
                activity,
            }),
        }
    }
}

impl AsyncRead for Sniffing {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let Some(sniff) = this.sniff.as_mut() else {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        };
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                match sniff.observe(&buf.filled()[before..]) {
                    Sniffed::Undecided => {}
                    Sniffed::Http1 => this.sniff = None,
                    Sniffed::Http2 => {
                        sniff.activity.chose_http2();
                        this.sniff = None;
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if sniff.deadline.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection did not choose a protocol in time",
                )))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Sniffing {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A request body that fails once its deadline has passed.
struct Deadline {
    body: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl Deadline {
    fn new(body: Incoming, limit: Duration) -> Self {
        Self {
            body,
            deadline: Box::pin(tokio::time::sleep(limit)),
            limit,
        }
    }
}

/// The body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
struct BodyTimedOut(Duration);

impl Body for Deadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(BodyTimedOut(this.limit).into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
