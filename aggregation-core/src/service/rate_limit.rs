//! Rate limiting of the matched endpoint. It sits after the router's path match (it needs the
//! route template, the path id and the row of the request's method) and before the
//! dispatcher, so a refused request never reaches a handler.
//!
//! The bucket is the limiter's (see [`RateLimiter::check_policy`]) for the caller's [`ClientIp`] and
//! verified [`Caller`], and the connection or account id of the path; for the bulk syncs
//! ([`TargetId::BodyConnectionId`]) the body is read (within the usual limit) to take its
//! `connection_id`, and the very same bytes go on to the handler. A limited endpoint's answer
//! carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`, whatever it
//! is; a refused request is 429 with `Retry-After`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};

use crate::api::extract::{Caller, ClientIp, buffered_body, read_body};
use crate::api::router::Matched;
use crate::api::{RequestBody, ResponseBody, TargetId};
use crate::problem::ApiError;
use crate::rate_limit::{
    Decision, Policy, RateLimiter, RequestIdentity, Scope, body_connection_id, canonical_id,
};

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct RateLimitLayer {
    limiter: RateLimiter,
    max_body_bytes: usize,
}

impl RateLimitLayer {
    /// Limits with `limiter`; a body read for its connection id is refused past
    /// `max_body_bytes`, as the handler would.
    pub(crate) fn new(limiter: RateLimiter, max_body_bytes: usize) -> Self {
        Self {
            limiter,
            max_body_bytes,
        }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            limiter: self.limiter.clone(),
            max_body_bytes: self.max_body_bytes,
            inner,
        }
    }
}

/// See [`RateLimitLayer`].
#[derive(Debug, Clone)]
pub(crate) struct RateLimit<S> {
    limiter: RateLimiter,
    max_body_bytes: usize,
    inner: S,
}

// Constants: a header named by a string is copied on every insert.
const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Sets the `X-RateLimit-*` headers of a decision.
fn set_headers(headers: &mut HeaderMap, decision: &Decision) {
    headers.insert(LIMIT, HeaderValue::from(decision.limit));
    headers.insert(REMAINING, HeaderValue::from(decision.remaining));
    headers.insert(RESET, HeaderValue::from(decision.reset_after_secs));
}

/// An error answered with the `X-RateLimit-*` headers of a decision.
fn with_headers(error: ApiError, decision: &Decision) -> ApiError {
    let mut headers = HeaderMap::new();
    set_headers(&mut headers, decision);
    headers.iter().fold(error, |error, (name, value)| {
        error.with_header(name.clone(), value.clone())
    })
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<Response<ResponseBody>, ApiError>> + Send>>;

/// Calls the inner service, its future boxed outside any `async` block: there every lifetime
/// is known, while inside one the compiler cannot prove `S::Future: Send` for the erased
/// lifetimes of the boxed body error.
fn call_boxed<S>(inner: &mut S, request: Request<RequestBody>) -> BoxFuture
where
    S: tower::Service<Request<RequestBody>, Response = Response<ResponseBody>, Error = ApiError>,
    S::Future: Send + 'static,
{
    Box::pin(inner.call(request))
}

/// Whether the bucket of this request is keyed by the `connection_id` of its body: a bulk sync
/// (its row targets the body's connection) under a `user_provider` policy (the path names no
/// connection).
fn keyed_by_body_connection(method: &http::Method, matched: &Matched, policy: &Policy) -> bool {
    policy.scope == Scope::UserProvider
        && matched
            .route(method)
            .and_then(|route| route.rate_limit())
            .is_some_and(|limit| limit.target == TargetId::BodyConnectionId)
}

impl<S> tower::Service<Request<RequestBody>> for RateLimit<S>
where
    S: tower::Service<Request<RequestBody>, Response = Response<ResponseBody>, Error = ApiError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<ResponseBody>;
    type Error = ApiError;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ApiError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let Some(matched) = request.extensions().get::<Matched>().cloned() else {
            // Not routed: nothing to key a bucket by.
            return Box::pin(self.inner.call(request));
        };
        let limiter = self.limiter.clone();
        let max_body_bytes = self.max_body_bytes;
        // The clone that was made ready goes with the request (tower's usual swap).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let Some((policy, bucket)) = limiter
                .policies()
                .active(request.method().as_str(), matched.template())
            else {
                // No policy or a disabled one: not limited, and no headers.
                return call_boxed(&mut inner, request).await;
            };
            let body_keyed = keyed_by_body_connection(request.method(), &matched, policy);
            let mut request = request;
            let mut identity = RequestIdentity {
                client_ip: request.extensions().get::<ClientIp>().and_then(|ip| ip.0),
                // Only a token whose signature verifies may name the user.
                user_id: request
                    .extensions()
                    .get::<Caller>()
                    .and_then(Caller::claims)
                    .map(|claims| claims.sub.to_string()),
                // Canonical, or none when the id is not a UUID: every spelling of one id
                // shares a bucket, and junk ids share the user's.
                provider_or_account_id: canonical_id(matched.param("id")),
            };
            let mut unreadable = None;
            if body_keyed && identity.user_id.is_some() && identity.provider_or_account_id.is_none()
            {
                let (parts, body) = request.into_parts();
                let body = match read_body(&parts.headers, body, max_body_bytes).await {
                    Ok(bytes) => {
                        identity.provider_or_account_id = body_connection_id(&bytes);
                        buffered_body(bytes)
                    }
                    Err(error) => {
                        // Still charged to the user's bucket below, so oversized bodies are
                        // no way around the limit.
                        unreadable = Some(error);
                        buffered_body(Bytes::new())
                    }
                };
                request = Request::from_parts(parts, body);
            }
            // The limiter keys the bucket by the template with canonical ids, not the raw path.
            let decision = limiter
                .check_policy(
                    policy,
                    bucket,
                    request.method().as_str(),
                    matched.template(),
                    request.uri().path(),
                    &identity,
                )
                .await;
            if !decision.allowed {
                let error = ApiError::rate_limited(decision.retry_after_header());
                return Err(with_headers(error, &decision));
            }
            if let Some(error) = unreadable {
                return Err(with_headers(error, &decision));
            }
            match call_boxed(&mut inner, request).await {
                Ok(mut response) => {
                    set_headers(response.headers_mut(), &decision);
                    Ok(response)
                }
                Err(error) => Err(with_headers(error, &decision)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::StatusCode;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    use uuid::Uuid;

    use super::*;
    use crate::api::router::RouterLayer;
    use crate::auth::AccessClaims;
    use crate::problem::ErrorCode;
    use crate::rate_limit::policy::PROVIDER_SYNC;
    use crate::rate_limit::{InMemoryRateLimitStore, NoopEvents, PolicyTable};

    const CONNECTION: &str = "0192f3c4-0000-7000-8000-0000000000c2";

    /// The router, this layer, and a handler that answers 200 with the body it received
    /// (or 404 for `/api/v1/accounts/x`), over the given store.
    fn service(
        policies: PolicyTable,
        store: Arc<InMemoryRateLimitStore>,
    ) -> impl tower::Service<
        Request<RequestBody>,
        Response = Response<ResponseBody>,
        Error = ApiError,
        Future: Send,
    > + Clone {
        let limiter = RateLimiter::new(policies, store, Arc::new(NoopEvents));
        tower::ServiceBuilder::new()
            .layer(RouterLayer::new())
            .layer(RateLimitLayer::new(limiter, 64))
            .service(tower::service_fn(
                |request: Request<RequestBody>| async move {
                    if request.uri().path() == "/api/v1/accounts/x" {
                        return Err(ApiError::new(ErrorCode::NotFound, "Account not found."));
                    }
                    let (parts, body) = request.into_parts();
                    let bytes = read_body(&parts.headers, body, 64).await?;
                    Ok(Response::new(ResponseBody::full(bytes)))
                },
            ))
    }

    fn request(method: &str, path: &str, body: &str, user: bool) -> Request<RequestBody> {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .body(buffered_body(Bytes::from(body.to_owned())))
            .expect("request");
        request
            .extensions_mut()
            .insert(ClientIp(Some("203.0.113.9".parse().expect("ip"))));
        let caller = if user {
            Caller::Authenticated(std::sync::Arc::new(AccessClaims::for_tests(
                Uuid::nil(),
                Uuid::nil(),
            )))
        } else {
            Caller::Anonymous
        };
        request.extensions_mut().insert(caller);
        request
    }

    fn header(headers: &HeaderMap, name: &str) -> Option<String> {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    }

    #[tokio::test]
    async fn limited_answers_carry_the_headers_and_the_sixth_login_is_429() {
        let service = service(
            PolicyTable::builtin(),
            Arc::new(InMemoryRateLimitStore::new()),
        );
        for remaining in (0..5).rev() {
            let response = service
                .clone()
                .oneshot(request("POST", "/api/v1/sessions", "{}", false))
                .await
                .expect("allowed");
            assert_eq!(
                header(response.headers(), "x-ratelimit-limit").as_deref(),
                Some("5")
            );
            assert_eq!(
                header(response.headers(), "x-ratelimit-remaining"),
                Some(remaining.to_string())
            );
        }
        let error = service
            .clone()
            .oneshot(request("POST", "/api/v1/sessions", "{}", false))
            .await
            .expect_err("429");
        assert_eq!(error.status(), StatusCode::TOO_MANY_REQUESTS);
        let names: Vec<_> = error
            .headers()
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        assert!(names.contains(&"retry-after"), "{names:?}");
        assert!(names.contains(&"x-ratelimit-remaining"), "{names:?}");
        // Errors of the handler carry the headers too; the unlimited health check none.
        let error = service
            .clone()
            .oneshot(request("GET", "/api/v1/accounts/x", "", true))
            .await
            .expect_err("404");
        assert!(
            error
                .headers()
                .iter()
                .any(|(name, _)| name == "x-ratelimit-limit")
        );
        let response = service
            .oneshot(request("GET", "/health", "", false))
            .await
            .expect("unlimited");
        assert!(response.headers().get("x-ratelimit-limit").is_none());
    }

    #[tokio::test]
    async fn bulk_syncs_key_their_bucket_by_the_body_connection_and_pass_the_body_on() {
        let store = Arc::new(InMemoryRateLimitStore::new());
        let service = service(PolicyTable::builtin(), store.clone());
        let body = format!(r#"{{"connection_id": "{}"}}"#, CONNECTION.to_uppercase());
        let response = service
            .clone()
            .oneshot(request("POST", "/api/v1/accounts/syncs", &body, true))
            .await
            .expect("allowed");
        let echoed = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(echoed, Bytes::from(body));
        let key = format!(
            "rl:user_provider:{}:{CONNECTION}:POST:/api/v1/accounts/syncs",
            Uuid::nil()
        );
        let bucket = PROVIDER_SYNC.bucket().expect("valid");
        assert_eq!(store.peek_now(&key, &bucket).remaining, 9, "bucket {key}");
        // Anonymous: keyed by IP, the body left unread for the handler.
        let response = service
            .oneshot(request("POST", "/api/v1/accounts/syncs", "{}", false))
            .await
            .expect("allowed");
        assert_eq!(
            response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes(),
            Bytes::from_static(b"{}")
        );
        let key = "rl:ip:203.0.113.9:POST:/api/v1/accounts/syncs";
        assert_eq!(store.peek_now(key, &bucket).remaining, 9, "bucket {key}");
    }

    #[tokio::test]
    async fn an_oversized_bulk_sync_is_charged_then_refused_with_413() {
        let service = service(
            PolicyTable::builtin(),
            Arc::new(InMemoryRateLimitStore::new()),
        );
        let body = format!(
            r#"{{"connection_id": "{CONNECTION}", "padding": "{}"}}"#,
            "x".repeat(64)
        );
        let error = service
            .oneshot(request("POST", "/api/v1/transactions/syncs", &body, true))
            .await
            .expect_err("413");
        assert_eq!(error.code(), ErrorCode::PayloadTooLarge);
        assert!(
            error
                .headers()
                .iter()
                .any(|(name, value)| name == "x-ratelimit-remaining" && value == "9")
        );
    }
}
