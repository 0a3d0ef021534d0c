//! Keeps an HTTP/1 connection usable when the answer comes before the request body was read.
//!
//! Many answers are given without reading the body: 401 before the token is checked against a
//! body, 404 and 405 before any handler runs, 413 from a declared length. The server under the
//! adapter then holds the unread rest of the body in the connection. hyper reads at most what
//! is already buffered and otherwise closes the connection once the response is written,
//! without having announced it; a keep-alive client that sent its next request meanwhile sees
//! "connection closed before message completed". So the answer waits here until the rest of a
//! small body (up to [`MAX_DRAIN_BYTES`], within [`DRAIN_TIME`]) has been read and dropped;
//! when the body is larger, slower or broken, the response says `Connection: close` instead,
//! so that the client knows not to send anything more on it.
//!
//! HTTP/2 needs none of this (an unread stream is reset on its own), nor does a request that
//! already closes its connection.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Version, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt as _;
use tokio::sync::oneshot;

use crate::api::{RequestBody, ResponseBody};

/// The most unread body bytes read and dropped to keep a connection open.
pub(crate) const MAX_DRAIN_BYTES: u64 = 64 * 1024;

/// How long the answer waits for the unread rest of a body before closing the connection.
pub(crate) const DRAIN_TIME: Duration = Duration::from_secs(1);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How much unread body is drained, and for how long.
#[derive(Debug, Clone, Copy)]
struct DrainLimits {
    bytes: u64,
    time: Duration,
}

/// Drains small unread request bodies or announces `Connection: close`; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct KeepAliveLayer {
    limits: DrainLimits,
}

impl KeepAliveLayer {
    /// The layer with [`MAX_DRAIN_BYTES`] and [`DRAIN_TIME`].
    pub(crate) fn new() -> Self {
        Self {
            limits: DrainLimits {
                bytes: MAX_DRAIN_BYTES,
                time: DRAIN_TIME,
            },
        }
    }
}

impl<S> tower::Layer<S> for KeepAliveLayer {
    type Service = KeepAlive<S>;

    fn layer(&self, inner: S) -> KeepAlive<S> {
        KeepAlive {
            inner,
            limits: self.limits,
        }
    }
}

/// See [`KeepAliveLayer`].
#[derive(Debug, Clone)]
pub(crate) struct KeepAlive<S> {
    inner: S,
    limits: DrainLimits,
}

impl<S> tower::Service<Request<RequestBody>> for KeepAlive<S>
where
    S: tower::Service<Request<RequestBody>, Response = Response<ResponseBody>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        if !connection_may_stay_open(&request) || request.body().is_end_stream() {
            return Box::pin(self.inner.call(request));
        }
        let expects_continue = expects_continue(&request);
        let declared = declared_length(&request);
        let (parts, body) = request.into_parts();
        let (body, leftover) = Tracked::new(body);
        let response = call_boxed(
            &mut self.inner,
            Request::from_parts(parts, body.boxed_unsync()),
        );
        // Runs only once polled, after the answer is ready.
        let settled = settle(leftover, expects_continue, declared, self.limits);
        Box::pin(async move {
            let mut response = response.await?;
            if settled.await == Settled::Close {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        })
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<Response<ResponseBody>, Infallible>> + Send>>;

/// Calls the inner service, its future boxed outside any `async` block: there every lifetime
/// is known, while inside one the compiler cannot prove `S::Future: Send` for the erased
/// lifetimes of the boxed body error.
fn call_boxed<S>(inner: &mut S, request: Request<RequestBody>) -> BoxFuture
where
    S: tower::Service<Request<RequestBody>, Response = Response<ResponseBody>, Error = Infallible>,
    S::Future: Send + 'static,
{
    Box::pin(inner.call(request))
}

/// Whether the connection would carry another request after this one: HTTP/1.1 unless the
/// request closes it, HTTP/1.0 only when it asks for keep-alive. (HTTP/2 streams end alone.)
fn connection_may_stay_open<B>(request: &Request<B>) -> bool {
    let tokens = || {
        request
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
    };
    match request.version() {
        Version::HTTP_11 => !tokens().any(|token| token.eq_ignore_ascii_case("close")),
        Version::HTTP_10 => tokens().any(|token| token.eq_ignore_ascii_case("keep-alive")),
        _ => false,
    }
}

/// Whether the client waits for `100 Continue` before sending its body.
fn expects_continue<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get(header::EXPECT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("100-continue"))
}

/// The request's `Content-Length`, when it declares a valid one.
fn declared_length<B>(request: &Request<B>) -> Option<u64> {
    request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse().ok())
}

/// What the service left of the request body when it let go of it.
enum Leftover {
    /// Not read to the end.
    Unread {
        body: RequestBody,
        /// Whether the service asked for any of it (which, with `Expect: 100-continue`, is
        /// what invites the client to send it).
        polled: bool,
        /// The body bytes the service read before letting go.
        read: u64,
    },
    /// Reading it failed: the connection's framing can no longer be trusted.
    Failed,
}

/// The request body as the service sees it: when dropped before its end, it hands what is left
/// back to [`KeepAlive`] instead of dropping it (which would make the server close the
/// connection). Read to its end, it sends nothing back.
struct Tracked {
    body: Option<RequestBody>,
    polled: bool,
    read: u64,
    failed: bool,
    home: Option<oneshot::Sender<Leftover>>,
}

impl Tracked {
    fn new(body: RequestBody) -> (Self, oneshot::Receiver<Leftover>) {
        let (home, leftover) = oneshot::channel();
        let tracked = Self {
            body: Some(body),
            polled: false,
            read: 0,
            failed: false,
            home: Some(home),
        };
        (tracked, leftover)
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        this.polled = true;
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = std::task::ready!(Pin::new(body).poll_frame(cx));
        match &frame {
            None => this.body = None,
            Some(Err(_)) => {
                this.body = None;
                this.failed = true;
            }
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    this.read = this.read.saturating_add(data.len() as u64);
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let Some(home) = self.home.take() else {
            return;
        };
        if self.failed {
            let _ = home.send(Leftover::Failed);
            return;
        }
        if let Some(body) = self.body.take()
            && !body.is_end_stream()
        {
            let _ = home.send(Leftover::Unread {
                body,
                polled: self.polled,
                read: self.read,
            });
        }
    }
}

/// Whether the connection can carry the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// The body was read to its end.
    Reusable,
    /// The answer must say `Connection: close`.
    Close,
}

/// Reads and drops the rest of the body the service left, within `limits`.
///
/// Boxed here, where every lifetime is known: inside the generic `call` the compiler cannot
/// prove the future `Send` for the erased lifetimes of the boxed body error.
fn settle(
    leftover: oneshot::Receiver<Leftover>,
    expects_continue: bool,
    declared: Option<u64>,
    limits: DrainLimits,
) -> Pin<Box<dyn Future<Output = Settled> + Send>> {
    Box::pin(settle_now(leftover, expects_continue, declared, limits))
}

/// Only a small body, as a whole (what the service read plus the rest), is drained: a large
/// one the service gave up on (an upload over its limit, say) is not read any further, so an
/// answer like 413 costs no more of the client's bytes than the service itself took.
async fn settle_now(
    mut leftover: oneshot::Receiver<Leftover>,
    expects_continue: bool,
    declared: Option<u64>,
    limits: DrainLimits,
) -> Settled {
    let (mut body, polled, read) = match leftover.try_recv() {
        // Read to its end, nothing came back.
        Err(oneshot::error::TryRecvError::Closed) => return Settled::Reusable,
        // The body outlives the answer (something still reads it): the connection cannot be
        // vouched for.
        Err(oneshot::error::TryRecvError::Empty) | Ok(Leftover::Failed) => return Settled::Close,
        Ok(Leftover::Unread { body, polled, read }) => (body, polled, read),
    };
    if expects_continue && !polled {
        // The client has not been invited to send the body; reading it now would ask for a
        // body only to drop it.
        return Settled::Close;
    }
    let whole_at_least = read
        .saturating_add(body.size_hint().lower())
        .max(declared.unwrap_or(0));
    if whole_at_least > limits.bytes {
        return Settled::Close;
    }
    let drain = async {
        let mut drained: u64 = read;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return Settled::Close;
            };
            if let Some(data) = frame.data_ref() {
                drained = drained.saturating_add(data.len() as u64);
                if drained > limits.bytes {
                    return Settled::Close;
                }
            }
        }
        Settled::Reusable
    };
    tokio::time::timeout(limits.time, drain)
        .await
        .unwrap_or(Settled::Close)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use http_body_util::{Full, StreamBody};
    use tower::ServiceExt as _;

    use super::*;

    const LIMITS: DrainLimits = DrainLimits {
        bytes: 1024,
        time: Duration::from_millis(200),
    };

    /// How the stand-in service treats the body.
    #[derive(Clone, Copy)]
    enum Reads {
        Nothing,
        Everything,
        FirstFrame,
    }

    fn service(
        reads: Reads,
    ) -> KeepAlive<
        impl tower::Service<
            Request<RequestBody>,
            Response = Response<ResponseBody>,
            Error = Infallible,
            Future = impl Send,
        > + Clone,
    > {
        let inner = tower::service_fn(move |request: Request<RequestBody>| async move {
            let mut body = request.into_body();
            match reads {
                Reads::Nothing => {}
                Reads::Everything => while body.frame().await.is_some() {},
                Reads::FirstFrame => drop(body.frame().await),
            }
            Ok::<_, Infallible>(Response::new(ResponseBody::empty()))
        });
        KeepAlive {
            inner,
            limits: LIMITS,
        }
    }

    /// A body of `chunks` frames of `size` bytes, with no declared length (as a chunked
    /// upload), that records when it was read to its end.
    fn chunked(chunks: usize, size: usize, ended: Arc<AtomicBool>) -> RequestBody {
        let frames = futures_util::stream::unfold(0, move |index| {
            let ended = ended.clone();
            async move {
                if index == chunks {
                    ended.store(true, Ordering::SeqCst);
                    return None;
                }
                let frame = Frame::data(Bytes::from(vec![b'x'; size]));
                Some((Ok::<_, BoxError>(frame), index + 1))
            }
        });
        StreamBody::new(frames).boxed_unsync()
    }

    fn request(body: RequestBody) -> Request<RequestBody> {
        Request::builder()
            .uri("/api/v1/accounts")
            .body(body)
            .expect("request")
    }

    fn closes(response: &Response<ResponseBody>) -> bool {
        response
            .headers()
            .get(header::CONNECTION)
            .is_some_and(|value| value == "close")
    }

    #[tokio::test]
    async fn a_body_read_by_the_service_keeps_the_connection() {
        let body = Full::new(Bytes::from_static(b"{}"))
            .map_err(|never| match never {})
            .boxed_unsync();
        let response = service(Reads::Everything)
            .oneshot(request(body))
            .await
            .expect("infallible");
        assert!(!closes(&response));
    }

    #[tokio::test]
    async fn a_small_unread_body_is_drained_and_the_connection_kept() {
        let ended = Arc::new(AtomicBool::new(false));
        for reads in [Reads::Nothing, Reads::FirstFrame] {
            ended.store(false, Ordering::SeqCst);
            let response = service(reads)
                .oneshot(request(chunked(4, 200, ended.clone())))
                .await
                .expect("infallible");
            assert!(!closes(&response));
            assert!(ended.load(Ordering::SeqCst), "the rest was read");
        }
    }

    #[tokio::test]
    async fn an_unread_body_past_the_limit_closes_the_connection() {
        let ended = Arc::new(AtomicBool::new(false));
        let response = service(Reads::Nothing)
            .oneshot(request(chunked(8, 200, ended.clone())))
            .await
            .expect("infallible");
        assert!(closes(&response));
        assert!(
            !ended.load(Ordering::SeqCst),
            "reading stopped at the limit"
        );
    }

    #[tokio::test]
    async fn a_declared_length_past_the_limit_closes_without_reading() {
        let body = Full::new(Bytes::from(vec![b'x'; 2048]))
            .map_err(|never| match never {})
            .boxed_unsync();
        let response = service(Reads::Nothing)
            .oneshot(request(body))
            .await
            .expect("infallible");
        assert!(closes(&response));
    }

    #[tokio::test]
    async fn a_large_body_the_service_gave_up_on_is_not_read_further() {
        // The service read one frame already past the limit (as an upload over its own limit):
        // nothing more is taken from the client.
        let read_after = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = read_after.clone();
        let frames = futures_util::stream::unfold(0, move |index| {
            let counted = counted.clone();
            async move {
                if index == 6 {
                    return None;
                }
                if index > 0 {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                Some((
                    Ok::<_, BoxError>(Frame::data(Bytes::from(vec![b'x'; 1100]))),
                    index + 1,
                ))
            }
        });
        let response = service(Reads::FirstFrame)
            .oneshot(request(StreamBody::new(frames).boxed_unsync()))
            .await
            .expect("infallible");
        assert!(closes(&response));
        assert_eq!(
            read_after.load(Ordering::SeqCst),
            0,
            "no frame after the first"
        );
    }

    #[tokio::test]
    async fn a_declared_length_header_past_the_limit_closes_without_reading() {
        // A body whose size hint says nothing; the header alone decides.
        let ended = Arc::new(AtomicBool::new(false));
        let mut request = request(chunked(1, 10, ended.clone()));
        request
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("4096"));
        let response = service(Reads::Nothing)
            .oneshot(request)
            .await
            .expect("infallible");
        assert!(closes(&response));
        assert!(!ended.load(Ordering::SeqCst), "not one byte was read");
    }

    #[tokio::test]
    async fn a_body_that_stalls_closes_the_connection_after_the_drain_time() {
        let stalled = StreamBody::new(futures_util::stream::pending::<
            Result<Frame<Bytes>, BoxError>,
        >())
        .boxed_unsync();
        let response = service(Reads::Nothing)
            .oneshot(request(stalled))
            .await
            .expect("infallible");
        assert!(closes(&response));
    }

    #[tokio::test]
    async fn a_failed_body_closes_the_connection() {
        let failing = StreamBody::new(futures_util::stream::iter([Err::<Frame<Bytes>, BoxError>(
            "reset".into(),
        )]))
        .boxed_unsync();
        let response = service(Reads::Everything)
            .oneshot(request(failing))
            .await
            .expect("infallible");
        assert!(closes(&response));
    }

    #[tokio::test]
    async fn an_uninvited_body_is_not_asked_for() {
        let ended = Arc::new(AtomicBool::new(false));
        let mut request = request(chunked(1, 10, ended.clone()));
        request
            .headers_mut()
            .insert(header::EXPECT, HeaderValue::from_static("100-continue"));
        let response = service(Reads::Nothing)
            .oneshot(request)
            .await
            .expect("infallible");
        assert!(closes(&response));
        assert!(!ended.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn http2_and_closing_requests_are_left_alone() {
        for (version, connection) in [
            (Version::HTTP_2, None),
            (Version::HTTP_11, Some("close")),
            (Version::HTTP_10, None),
        ] {
            let ended = Arc::new(AtomicBool::new(false));
            let mut request = request(chunked(8, 200, ended.clone()));
            *request.version_mut() = version;
            if let Some(value) = connection {
                request
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static(value));
            }
            let response = service(Reads::Nothing)
                .oneshot(request)
                .await
                .expect("infallible");
            assert!(!closes(&response), "{version:?} {connection:?}");
            assert!(!ended.load(Ordering::SeqCst), "nothing drained");
        }
    }
}
