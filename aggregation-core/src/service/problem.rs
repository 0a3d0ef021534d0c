//! The one place a failure becomes a response: every `Err(ApiError)` of the layers below is
//! rendered as an RFC 9457 problem (`type` under the base URL, `instance` = the request path,
//! the trace id of [`TraceId`]), with the error's headers.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response, header};

use super::trace::TraceId;
use crate::api::ResponseBody;
use crate::problem::{ApiError, PROBLEM_CONTENT_TYPE};

/// The problem response of an error.
pub(crate) fn render(
    error: &ApiError,
    base_url: &str,
    instance: &str,
    trace_id: &str,
) -> Response<ResponseBody> {
    let body = serde_json::to_vec(&error.to_body(base_url, instance, trace_id)).unwrap_or_default();
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = error.status();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
    );
    for (name, value) in error.headers() {
        headers.append(name.clone(), value.clone());
    }
    response
}

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub(crate) struct ProblemLayer {
    base_url: Arc<str>,
}

impl ProblemLayer {
    /// Renders problems whose `type` starts with `base_url`.
    pub(crate) fn new(base_url: &str) -> Self {
        Self {
            base_url: base_url.into(),
        }
    }
}

impl<S> tower::Layer<S> for ProblemLayer {
    type Service = Problems<S>;

    fn layer(&self, inner: S) -> Problems<S> {
        Problems {
            base_url: self.base_url.clone(),
            inner,
        }
    }
}

/// See [`ProblemLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Problems<S> {
    base_url: Arc<str>,
    inner: S,
}

impl<S, B> tower::Service<Request<B>> for Problems<S>
where
    S: tower::Service<Request<B>, Response = Response<ResponseBody>, Error = ApiError>,
    S::Future: Send + 'static,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResponseBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The services below are always ready; an error here is rendered by `call`.
        match self.inner.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let base_url = self.base_url.clone();
        // Shares the request's bytes; the path is only read when there is a problem to render.
        let uri = request.uri().clone();
        let trace_id = request
            .extensions()
            .get::<TraceId>()
            .copied()
            .unwrap_or_else(TraceId::random);
        let response = self.inner.call(request);
        Box::pin(async move {
            Ok(match response.await {
                Ok(response) => response,
                Err(error) => render(&error, &base_url, uri.path(), trace_id.as_str()),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    use super::*;
    use crate::problem::ErrorCode;

    async fn refuse(_: Request<()>) -> Result<Response<ResponseBody>, ApiError> {
        Err(
            ApiError::new(ErrorCode::MethodNotAllowed, "PUT is not allowed here.")
                .with_header(header::ALLOW, HeaderValue::from_static("GET")),
        )
    }

    #[tokio::test]
    async fn errors_become_problems_with_instance_trace_id_and_headers() {
        let service = tower::Layer::layer(
            &ProblemLayer::new("https://api.example.com"),
            tower::service_fn(refuse),
        );
        let mut request = Request::builder()
            .uri("/api/v1/users?x=1")
            .body(())
            .expect("request");
        request
            .extensions_mut()
            .insert(TraceId::parse("4bf92f3577b34da6a3ce929d0e0e4736").expect("a trace id"));
        let response = service.oneshot(request).await.expect("infallible");
        assert_eq!(response.status(), http::StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(
            response.headers().get(header::CONTENT_TYPE),
            Some(&HeaderValue::from_static(PROBLEM_CONTENT_TYPE))
        );
        assert_eq!(
            response.headers().get(header::ALLOW),
            Some(&HeaderValue::from_static("GET"))
        );
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let body: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(body["instance"], "/api/v1/users");
        assert_eq!(body["status"], 405);
        assert_eq!(body["detail"], "PUT is not allowed here.");
        assert_eq!(body["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(
            body["type"]
                .as_str()
                .is_some_and(|kind| kind.starts_with("https://api.example.com")),
            "{body}"
        );
    }
}
