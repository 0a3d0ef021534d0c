//! The mount beside a host app's own routes and default service: which paths reach the service.

use std::convert::Infallible;

use actix_web::http::StatusCode;
use actix_web::{App, HttpResponse, test, web};
use aggregation_actix::{Mount, RequestBody, router, router_with};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use tower::service_fn;

/// Stands in for the core: names the full path (and query) it was handed.
fn echo() -> impl tower::Service<
    Request<RequestBody>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone {
    service_fn(|request: Request<RequestBody>| async move {
        Ok(Response::new(Full::new(Bytes::from(format!(
            "service {}",
            request.uri()
        )))))
    })
}

/// GETs each path from an app and collects (status, body).
async fn get_all<S>(app: &S, paths: &[&str]) -> Vec<(StatusCode, String)>
where
    S: actix_web::dev::Service<
            actix_http::Request,
            Response = actix_web::dev::ServiceResponse,
            Error = actix_web::Error,
        >,
{
    let mut answers = Vec::new();
    for path in paths {
        let response =
            test::call_service(app, test::TestRequest::get().uri(path).to_request()).await;
        let status = response.status();
        let body = test::read_body(response).await;
        answers.push((status, String::from_utf8_lossy(&body).into_owned()));
    }
    answers
}

fn host_fallback() -> (StatusCode, String) {
    (StatusCode::NOT_FOUND, "host fallback".to_owned())
}

fn from_service(path: &str) -> (StatusCode, String) {
    (StatusCode::OK, format!("service {path}"))
}

#[actix_web::test]
async fn api_paths_reach_the_service_and_the_host_keeps_the_rest() {
    let app = test::init_service(
        App::new()
            .route("/", web::get().to(|| async { "host home" }))
            .configure(router(echo()))
            .default_service(web::to(|| async {
                HttpResponse::NotFound().body("host fallback")
            })),
    )
    .await;
    let api = [
        "/api/v1",
        "/api/v1/",
        "/api/v1/sessions",
        "/api/v1/accounts/x/y/z?page=2",
    ];
    assert_eq!(get_all(&app, &api).await, api.map(from_service).to_vec());
    assert_eq!(
        get_all(&app, &["/"]).await,
        [(StatusCode::OK, "host home".to_owned())]
    );
    let host = ["/nope", "/health", "/api/v2/sessions", "/api/v1x", "/api"];
    assert_eq!(
        get_all(&app, &host).await,
        host.map(|_| host_fallback()).to_vec()
    );
}

#[actix_web::test]
async fn health_is_mounted_only_when_asked() {
    let app = test::init_service(
        App::new()
            .configure(router_with(echo(), Mount::api().with_health()))
            .default_service(web::to(|| async {
                HttpResponse::NotFound().body("host fallback")
            })),
    )
    .await;
    assert_eq!(
        get_all(
            &app,
            &[
                "/health",
                "/health/live",
                "/health/ready",
                "/healthz",
                "/health/other"
            ]
        )
        .await,
        [
            from_service("/health"),
            from_service("/health/live"),
            from_service("/health/ready"),
            host_fallback(),
            host_fallback(),
        ]
    );
}

#[actix_web::test]
async fn the_fallback_mount_answers_every_unrouted_path() {
    let app = test::init_service(
        App::new()
            .route("/", web::get().to(|| async { "host home" }))
            .configure(router_with(echo(), Mount::api().with_fallback())),
    )
    .await;
    assert_eq!(
        get_all(&app, &["/", "/nope", "/health", "/api/v2/sessions"]).await,
        [
            (StatusCode::OK, "host home".to_owned()),
            from_service("/nope"),
            from_service("/health"),
            from_service("/api/v2/sessions"),
        ]
    );
}
