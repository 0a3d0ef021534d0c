//! The HTTP server loop: HTTP/1.1 and HTTP/2 on one listener, with deadlines a slow or hostile
//! client cannot stretch, and a shutdown that waits for in-flight requests only so long.
//!
//! `axum::serve` has no header or body timeouts, so a client that trickles its request holds a
//! connection (and a task) for as long as it likes. Here:
//!
//! * the request head must arrive within [`Timeouts::header_read`] (HTTP/1; hyper closes the
//!   connection otherwise, also for an idle keep-alive connection that starts a request and
//!   never finishes it);
//! * the whole request body must arrive within [`Timeouts::body_read`] of the request starting;
//!   past that, reading it fails and the API answers with its usual problem for an unreadable
//!   body, then the connection closes;
//! * at shutdown, the listener closes at once, open connections finish their in-flight
//!   requests, and after [`Timeouts::shutdown`] whatever is still running is abandoned.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tower::ServiceExt as _;

/// How long clients get, and how long a shutdown waits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// From connection (or the end of the previous request) to the end of the request head.
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
    pub(crate) deadline: tokio::time::Instant,
}

/// Serves `app` on `listener` until `shutdown` completes, then drains connections within
/// [`Timeouts::shutdown`].
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    timeouts: Timeouts,
    shutdown: impl Future<Output = ()>,
) -> Drained {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
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
        let app = app.clone();
        let body_read = timeouts.body_read;
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let mut request =
                request.map(|body| axum::body::Body::new(Deadline::new(body, body_read)));
            request.extensions_mut().insert(ConnectInfo(peer));
            app.clone().oneshot(request)
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(peer = %peer, error = %error, "connection ended with an error");
            }
        });
    }
    let deadline = tokio::time::Instant::now() + timeouts.shutdown;
    drop(listener);
    let open = graceful.count();
    if open > 0 {
        tracing::info!(open, "waiting for open connections to finish");
    }
    let drained = tokio::time::timeout_at(deadline, graceful.shutdown()).await;
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
