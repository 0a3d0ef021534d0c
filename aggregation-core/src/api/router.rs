//! Routing in two steps around the rate limiter: [`RouterLayer`] matches the path against
//! every row of [`super::routes`] (404 when none matches) and puts the [`Matched`] route in
//! the request extensions; [`Dispatch`] picks the row of the request's method (405 with
//! `Allow` when none) and runs its handler. Both answer `Err(ApiError)`, rendered as a
//! problem by the problem layer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use http::request::Parts;
use http::{HeaderValue, Method, Request, Response, header};

use super::events::StreamSlots;
use super::handler::FromParts;
use super::health::Readiness;
use super::openapi::{DescribeArg, OperationDoc, Published};
use super::routes::Route;
use super::{RequestBody, ResponseBody};
use crate::app::App;
use crate::problem::{ApiError, ErrorCode};

/// Where the router leaves the route template a request matched. The outermost layer
/// (`service::trace`) puts an empty one in the request extensions, records it on the request
/// span as soon as the layers below have been called (the router matches synchronously, before
/// any handler runs), and reads it back for the access line and the metrics once the answer is
/// ready (errors included, which carry no extensions up).
#[derive(Debug, Clone, Default)]
pub(crate) struct MatchedRoute(Arc<OnceLock<&'static str>>);

impl MatchedRoute {
    /// Records the template the path matched.
    pub(crate) fn set(&self, template: &'static str) {
        let _ = self.0.set(template);
    }

    /// The template, if a route matched.
    pub(crate) fn get(&self) -> Option<&'static str> {
        self.0.get().copied()
    }
}

/// Every route of one path template, in `Allow` order.
#[derive(Debug)]
pub(crate) struct Resource {
    template: &'static str,
    routes: Vec<&'static Route>,
}

/// The order methods are listed in `Allow`.
fn method_rank(method: &Method) -> usize {
    [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::OPTIONS,
    ]
    .iter()
    .position(|known| known == method)
    .unwrap_or(usize::MAX)
}

/// The compiled route table.
#[derive(Debug)]
pub(crate) struct RouteTable {
    paths: matchit::Router<usize>,
    resources: Vec<Arc<Resource>>,
}

impl RouteTable {
    /// Compiles these rows: one resource per template.
    pub(crate) fn new(routes: impl IntoIterator<Item = &'static Route>) -> Self {
        let mut resources: Vec<Resource> = Vec::new();
        let mut index: HashMap<&'static str, usize> = HashMap::new();
        for route in routes {
            let position = *index.entry(route.template()).or_insert_with(|| {
                resources.push(Resource {
                    template: route.template(),
                    routes: Vec::new(),
                });
                resources.len() - 1
            });
            if let Some(resource) = resources.get_mut(position) {
                if resource.routes.iter().any(|r| r.method() == route.method()) {
                    // The table is static; a duplicate is a programming error the tests catch.
                    tracing::error!(
                        method = %route.method(),
                        template = route.template(),
                        "duplicate route"
                    );
                    continue;
                }
                resource.routes.push(route);
            }
        }
        let mut paths = matchit::Router::new();
        for (position, resource) in resources.iter_mut().enumerate() {
            resource
                .routes
                .sort_by_key(|route| method_rank(route.method()));
            if let Err(error) = paths.insert(resource.template, position) {
                // Likewise static: a conflict is a programming error the tests catch.
                tracing::error!(error = %error, template = resource.template, "route conflict");
            }
        }
        Self {
            paths,
            resources: resources.into_iter().map(Arc::new).collect(),
        }
    }

    /// The resource of a path, with its parameters.
    pub(crate) fn find(&self, path: &str) -> Option<Matched> {
        let found = self.paths.at(path).ok()?;
        let resource = self.resources.get(*found.value)?.clone();
        Some(Matched {
            resource,
            params: found
                .params
                .iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect(),
        })
    }
}

/// The resource a request's path matched, and the path parameters by name. In the request
/// extensions after [`RouterLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Matched {
    resource: Arc<Resource>,
    params: Vec<(String, String)>,
}

impl Matched {
    /// The template that matched.
    pub(crate) fn template(&self) -> &'static str {
        self.resource.template
    }

    /// A path parameter; empty when the template has none of that name.
    pub(crate) fn param(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value)
    }

    /// The row of a method, if the resource answers it.
    pub(crate) fn route(&self, method: &Method) -> Option<&'static Route> {
        self.resource
            .routes
            .iter()
            .find(|route| route.method() == method)
            .copied()
    }

    /// The methods the resource answers, as `Allow` lists them.
    fn allow(&self) -> String {
        self.resource
            .routes
            .iter()
            .map(|route| route.method().as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn not_found(path: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("No resource at {path}."))
}

/// Matches the path (404 when nothing does) and puts [`Matched`] in the extensions.
#[derive(Debug, Clone)]
pub(crate) struct RouterLayer {
    table: Arc<RouteTable>,
}

impl RouterLayer {
    /// Routes over every row of the API.
    pub(crate) fn new() -> Self {
        Self::with_routes(super::routes())
    }

    /// Routes over these rows.
    pub(crate) fn with_routes(routes: impl IntoIterator<Item = &'static Route>) -> Self {
        Self {
            table: Arc::new(RouteTable::new(routes)),
        }
    }
}

impl<S> tower::Layer<S> for RouterLayer {
    type Service = Router<S>;

    fn layer(&self, inner: S) -> Router<S> {
        Router {
            table: self.table.clone(),
            inner,
        }
    }
}

/// See [`RouterLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Router<S> {
    table: Arc<RouteTable>,
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> tower::Service<Request<B>> for Router<S>
where
    S: tower::Service<Request<B>, Error = ApiError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = ApiError;
    type Future = BoxFuture<Result<S::Response, ApiError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ApiError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let Some(matched) = self.table.find(request.uri().path()) else {
            let error = not_found(request.uri().path());
            return Box::pin(async move { Err(error) });
        };
        if let Some(route) = request.extensions().get::<MatchedRoute>() {
            route.set(matched.template());
        }
        request.extensions_mut().insert(matched);
        Box::pin(self.inner.call(request))
    }
}

/// What the HTTP edge keeps beside the [`App`], shared by every clone of the service: the open
/// event streams per user, the OpenAPI document once published, and the last readiness
/// result. [`Dispatch`] hands it to the handlers that take it as an argument; the app knows
/// nothing of it.
#[derive(Clone, Default)]
pub(crate) struct ApiState(Arc<ApiShared>);

#[derive(Default)]
struct ApiShared {
    streams: StreamSlots,
    openapi: OnceLock<Published>,
    readiness: Readiness,
}

impl ApiState {
    /// The open event streams per user, for their cap.
    pub(crate) fn streams(&self) -> &StreamSlots {
        &self.0.streams
    }

    /// The OpenAPI document, built on its first request.
    pub(crate) fn openapi(&self) -> &OnceLock<Published> {
        &self.0.openapi
    }

    /// The last readiness result, answered for a second (`GET /health/ready`).
    pub(crate) fn readiness(&self) -> &Readiness {
        &self.0.readiness
    }
}

impl FromParts for ApiState {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Self>()
            .cloned()
            .ok_or_else(ApiError::internal)
    }
}

impl DescribeArg for ApiState {
    fn describe(_: &mut OperationDoc) {}
}

/// Runs the handler of the matched row for the request's method; 405 with `Allow` when the
/// resource does not answer it.
#[derive(Clone)]
pub(crate) struct Dispatch {
    app: Arc<App>,
    state: ApiState,
}

impl Dispatch {
    /// Runs handlers against `app`, handing them `state` when they ask for it.
    pub(crate) fn new(app: Arc<App>, state: ApiState) -> Self {
        Self { app, state }
    }
}

impl tower::Service<Request<RequestBody>> for Dispatch {
    type Response = Response<ResponseBody>;
    type Error = ApiError;
    type Future = BoxFuture<Result<Response<ResponseBody>, ApiError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ApiError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<RequestBody>) -> Self::Future {
        let Some(matched) = request.extensions().get::<Matched>() else {
            let error = not_found(request.uri().path());
            return Box::pin(async move { Err(error) });
        };
        let Some(route) = matched.route(request.method()) else {
            let allow = matched.allow();
            let error = ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!(
                    "{} is not allowed here; allowed: {allow}.",
                    request.method()
                ),
            )
            .with_header(
                header::ALLOW,
                HeaderValue::from_str(&allow).unwrap_or(HeaderValue::from_static("GET")),
            );
            return Box::pin(async move { Err(error) });
        };
        request.extensions_mut().insert(self.state.clone());
        (route.handler())(self.app.clone(), request)
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt as _;

    use super::*;

    #[test]
    fn every_template_is_routable_and_static_segments_win() {
        let table = RouteTable::new(crate::api::routes());
        for route in crate::api::routes() {
            let path = route
                .template()
                .replace("{id}", "0192f3c4-0000-7000-8000-000000000000")
                .replace("{user_id}", "0192f3c4-0000-7000-8000-000000000000");
            let matched = table.find(&path).expect("routable");
            assert_eq!(matched.template(), route.template());
            assert!(matched.route(route.method()).is_some());
        }
        let current = table.find("/api/v1/sessions/current").expect("routable");
        assert_eq!(current.template(), "/api/v1/sessions/current");
        let syncs = table.find("/api/v1/accounts/syncs").expect("routable");
        assert_eq!(syncs.template(), "/api/v1/accounts/syncs");
        let session = table.find("/api/v1/sessions/abc").expect("routable");
        assert_eq!(session.param("id"), "abc");
        assert_eq!(session.param("user_id"), "");
        assert!(table.find("/api/v2/users").is_none());
    }

    #[test]
    fn no_endpoint_is_written_twice() {
        let mut seen = Vec::new();
        for route in crate::api::routes() {
            let endpoint = (route.method().clone(), route.template());
            assert!(!seen.contains(&endpoint), "{endpoint:?} appears twice");
            seen.push(endpoint);
        }
    }

    #[test]
    fn allow_lists_methods_in_a_fixed_order() {
        let table = RouteTable::new(crate::api::routes());
        let allow = |path: &str| table.find(path).expect("routable").allow();
        assert_eq!(allow("/api/v1/sessions"), "GET, POST, DELETE");
        assert_eq!(allow("/api/v1/providers/x"), "GET, PATCH, DELETE");
        assert_eq!(allow("/api/v1/providers"), "GET, POST");
        assert_eq!(allow("/api/v1/sessions/x"), "GET, DELETE");
    }

    /// Echoes the matched template, or fails like the dispatcher would without one.
    async fn echo_template(request: Request<()>) -> Result<String, ApiError> {
        request
            .extensions()
            .get::<Matched>()
            .map(|matched| matched.template().to_owned())
            .ok_or_else(ApiError::internal)
    }

    #[tokio::test]
    async fn the_router_matches_or_answers_404() {
        let router = tower::Layer::layer(&RouterLayer::new(), tower::service_fn(echo_template));
        let request = |path: &str| Request::builder().uri(path).body(()).expect("request");
        let template = router
            .clone()
            .oneshot(request("/api/v1/accounts/abc/holdings"))
            .await
            .expect("matched");
        assert_eq!(template, "/api/v1/accounts/{id}/holdings");
        let error = router
            .oneshot(request("/api/v1/nope"))
            .await
            .expect_err("404");
        assert_eq!(error.code(), ErrorCode::NotFound);
        assert_eq!(error.detail(), "No resource at /api/v1/nope.");
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod dispatch_tests {
    use tower::ServiceExt as _;

    use super::*;
    use crate::config::Config;

    #[tokio::test]
    async fn a_method_the_resource_does_not_answer_is_405_with_allow() {
        let config = Config::new("http://localhost:8080", vec![7; 32]).expect("config");
        let app = App::for_tests(config).await;
        let service = tower::ServiceBuilder::new()
            .layer(RouterLayer::new())
            .service(Dispatch::new(app, ApiState::default()));
        let request = Request::builder()
            .method(Method::PUT)
            .uri("/api/v1/sessions")
            .body(crate::api::extract::buffered_body(bytes::Bytes::new()))
            .expect("request");
        let error = service.oneshot(request).await.expect_err("405");
        assert_eq!(error.code(), ErrorCode::MethodNotAllowed);
        assert_eq!(
            error.detail(),
            "PUT is not allowed here; allowed: GET, POST, DELETE."
        );
        assert_eq!(
            error.headers(),
            [(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"))]
        );
    }
}
