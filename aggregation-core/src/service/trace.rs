//! Trace context, the request span and the access log: the outermost layer.
//!
//! The trace id is the one of a well-formed incoming W3C `traceparent`, or a fresh one; it is
//! put in the request extensions ([`TraceId`], for problem bodies), answered in a
//! `traceparent` with a new span id, and logged with the method, path, matched route
//! template, status and time of every request.
//!
//! Everything below runs inside a `request` span carrying `trace_id`, `method`, `path` and,
//! once the router has matched it, `route` (the template): whatever a handler, a use case, a
//! provider call or the event sink logs while the request is handled can be tied to the
//! request by its trace id. With the feature `metrics`, the answer is also counted
//! ([`crate::metrics`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use tracing::Instrument as _;

use crate::api::router::MatchedRoute;
use crate::crypto::{random_span_id, random_trace_id};

/// The W3C trace context header, read and answered (a constant: a header named by a string is
/// copied on every insert).
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The trace id of the request (32 lower-case hex digits). Held inline: it is copied into the
/// span, the access line, the `traceparent` answer and problem bodies without an allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceId([u8; 32]);

impl TraceId {
    /// A fresh random trace id.
    pub(crate) fn random() -> Self {
        Self(random_trace_id())
    }

    /// 32 hex digits, in any case; `None` for anything else.
    pub(crate) fn parse(digits: &str) -> Option<Self> {
        let mut digits: [u8; 32] = digits.as_bytes().try_into().ok()?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        digits.make_ascii_lowercase();
        Some(Self(digits))
    }

    /// The 32 hex digits.
    pub(crate) fn as_str(&self) -> &str {
        // Only ever built from ASCII hex digits.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// This trace id in a `traceparent` header with a fresh span id.
    fn traceparent(&self) -> Option<HeaderValue> {
        let span_id = random_span_id();
        let mut value = [0_u8; 55];
        let parts: [&[u8]; 5] = [b"00-", &self.0, b"-", &span_id, b"-01"];
        let mut at = 0;
        for part in parts {
            value.get_mut(at..at + part.len())?.copy_from_slice(part);
            at += part.len();
        }
        HeaderValue::from_bytes(&value).ok()
    }
}

impl std::fmt::Display for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TraceId").field(&self.as_str()).finish()
    }
}

/// The trace id of an incoming W3C `traceparent` header, when it is well formed.
fn incoming_trace_id(headers: &HeaderMap) -> Option<TraceId> {
    let value = headers.get(TRACEPARENT)?.to_str().ok()?;
    let mut parts = value.trim().split('-');
    let (version, trace_id, parent_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let valid = hex(version, 2)
        && version != "ff"
        && trace_id.bytes().any(|b| b != b'0')
        && hex(parent_id, 16)
        && hex(flags, 2);
    valid.then(|| TraceId::parse(trace_id)).flatten()
}

/// See the [module docs](self).
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceLayer {
    #[cfg(feature = "metrics")]
    metrics: crate::metrics::Metrics,
}

impl TraceLayer {
    /// The layer, counting requests into `metrics` (feature `metrics`).
    pub(crate) fn new(#[cfg(feature = "metrics")] metrics: crate::metrics::Metrics) -> Self {
        Self {
            #[cfg(feature = "metrics")]
            metrics,
        }
    }
}

impl<S> tower::Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(&self, inner: S) -> Trace<S> {
        Trace {
            inner,
            #[cfg(feature = "metrics")]
            metrics: self.metrics.clone(),
        }
    }
}

/// See [`TraceLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Trace<S> {
    inner: S,
    #[cfg(feature = "metrics")]
    metrics: crate::metrics::Metrics,
}

impl<S, B, R> tower::Service<Request<B>> for Trace<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let started = Instant::now();
        let trace_id = incoming_trace_id(request.headers()).unwrap_or_else(TraceId::random);
        let method = request.method().clone();
        // Shares the request's bytes (a reference count, not a copy of the path).
        let uri = request.uri().clone();
        let route = MatchedRoute::default();
        request.extensions_mut().insert(trace_id);
        request.extensions_mut().insert(route.clone());
        let span = tracing::info_span!(
            "request",
            trace_id = %trace_id,
            method = %method,
            path = %uri.path(),
            route = tracing::field::Empty,
        );
        #[cfg(feature = "metrics")]
        let (metrics, in_flight) = (self.metrics.clone(), self.metrics.in_flight());
        // The layers below may already log (and the router match) while the call is made.
        let response = span.in_scope(|| self.inner.call(request));
        // Recorded here rather than by the router: the span is at hand (no lookup of the
        // current span), and nothing of the handler has run yet.
        if let Some(template) = route.get() {
            span.record("route", tracing::field::display(template));
        }
        Box::pin(
            async move {
                let mut response = response.await?;
                if let Some(value) = trace_id.traceparent() {
                    response.headers_mut().insert(TRACEPARENT, value);
                }
                let elapsed = started.elapsed();
                tracing::info!(
                    method = %method,
                    path = %uri.path(),
                    route = route.get(),
                    status = response.status().as_u16(),
                    elapsed_ms = elapsed.as_secs_f64() * 1000.0,
                    trace_id = %trace_id,
                    "request"
                );
                #[cfg(feature = "metrics")]
                {
                    metrics.record_request(&method, route.get(), response.status(), elapsed);
                    drop(in_flight);
                }
                Ok(response)
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt as _;

    use super::*;

    #[test]
    fn traceparent_is_validated() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "traceparent",
            http::HeaderValue::from_static(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        );
        assert_eq!(
            incoming_trace_id(&headers).as_ref().map(TraceId::as_str),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        headers.insert(
            "traceparent",
            http::HeaderValue::from_static(
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            ),
        );
        assert_eq!(incoming_trace_id(&headers), None);
        headers.insert("traceparent", http::HeaderValue::from_static("garbage"));
        assert_eq!(incoming_trace_id(&headers), None);
    }

    /// Answers with the trace id the layer put in the extensions.
    async fn echo(request: Request<()>) -> Result<Response<String>, Infallible> {
        let trace_id = request.extensions().get::<TraceId>().cloned();
        Ok(Response::new(
            trace_id.map(|id| id.to_string()).unwrap_or_default(),
        ))
    }

    #[tokio::test]
    async fn an_incoming_trace_id_is_kept_and_answered() {
        let service = tower::Layer::layer(&TraceLayer::default(), tower::service_fn(echo));
        let request = Request::builder()
            .header(
                "traceparent",
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            )
            .body(())
            .expect("request");
        let response = service.oneshot(request).await.expect("infallible");
        assert_eq!(response.body(), "4bf92f3577b34da6a3ce929d0e0e4736");
        let answered = response
            .headers()
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .expect("traceparent");
        let parts: Vec<_> = answered.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[1], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(parts[2], "00f067aa0ba902b7", "a new span id");
    }

    #[tokio::test]
    async fn without_one_a_fresh_trace_id_is_answered() {
        let service = tower::Layer::layer(&TraceLayer::default(), tower::service_fn(echo));
        let request = Request::builder().body(()).expect("request");
        let response = service.oneshot(request).await.expect("infallible");
        let trace_id = response.body().clone();
        assert_eq!(trace_id.len(), 32);
        let answered = response
            .headers()
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .expect("traceparent");
        assert!(
            answered.starts_with(&format!("00-{trace_id}-")),
            "{answered}"
        );
    }
}
