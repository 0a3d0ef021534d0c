//! An actix-web application that embeds the aggregation API beside its own routes.
//!
//! ```text
//! AGG_JWT_SECRET=$(openssl rand -base64 48) \
//! AGG_ENCRYPTION_KEYS=k1:$(openssl rand -base64 32) \
//! APP_CORS_ORIGINS=http://localhost:5173 \
//! cargo run -p aggregation-examples --example embed-actix
//! ```
//!
//! It serves `/` and `/connected` itself, the API under `/api/v1` and `/health`, and its own
//! 404 everywhere else. The settings are listed in `service.rs`.

use actix_cors::Cors;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use aggregation_actix::{AggregationService, Mount, router_with};

mod service;

use service::{HostError, Settings, connected_page, exit_code, start, stop};

#[actix_web::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt().init();
    exit_code(run().await)
}

async fn run() -> Result<(), HostError> {
    let settings = Settings::from_env()?;
    // Started on the main thread's runtime, which runs until the server has stopped: the mail
    // queue and the jobs live there, and every worker shares them through its clone.
    let started = start(&settings).await?;
    let service = started.service;
    let origins = settings.cors_origins.clone();
    tracing::info!("listening on http://{}", settings.bind);
    // actix hands each client's address to the adapter itself; nothing to add for it. It also
    // stops gracefully on SIGINT/SIGTERM, so `await` returns once requests have finished.
    HttpServer::new(move || app(service.clone(), cors(&origins)))
        .bind(settings.bind)?
        .run()
        .await?;
    stop(started.jobs, started.mail).await
}

/// The host's app: its own pages and default service, the API, and CORS for its front ends.
fn app(
    service: AggregationService,
    cors: Cors,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .wrap(cors)
        .route("/", web::get().to(|| async { "the host's home page" }))
        .route(
            "/connected",
            web::get().to(|request: HttpRequest| async move {
                connected_page(Some(request.query_string()))
            }),
        )
        .configure(router_with(service, Mount::api().with_health()))
        .default_service(web::to(|| async {
            HttpResponse::NotFound().body("no such page on the host")
        }))
}

/// Browsers on `origins` may call the API with a bearer token and JSON bodies, and read the
/// headers a client acts on. `Cors` answers preflights itself.
fn cors(origins: &[String]) -> Cors {
    origins
        .iter()
        .fold(Cors::default(), |cors, origin| cors.allowed_origin(origin))
        .allowed_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allowed_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .expose_headers([
            header::RETRY_AFTER,
            header::ETAG,
            header::HeaderName::from_static("x-ratelimit-limit"),
            header::HeaderName::from_static("x-ratelimit-remaining"),
            header::HeaderName::from_static("x-ratelimit-reset"),
        ])
}

#[cfg(test)]
mod tests {
    use actix_web::http::StatusCode;
    use actix_web::test::{self, TestRequest};

    use super::*;
    use crate::service::{REGISTRATION, sent_emails, test_settings};

    /// Sends one request as a client at 127.0.0.1 would; answers status, headers and body.
    async fn send<S, B>(app: &S, request: TestRequest) -> (StatusCode, header::HeaderMap, String)
    where
        S: actix_web::dev::Service<
                actix_http::Request,
                Response = ServiceResponse<B>,
                Error = actix_web::Error,
            >,
        B: MessageBody,
    {
        let request = request
            .peer_addr(std::net::SocketAddr::from(([127, 0, 0, 1], 40000)))
            .to_request();
        let response = test::call_service(app, request).await;
        let status = response.status();
        let headers = response.headers().clone();
        let body = test::read_body(response).await;
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    fn value(headers: &header::HeaderMap, name: header::HeaderName) -> &str {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    }

    #[actix_web::test]
    async fn the_host_app_serves_its_pages_the_api_and_drains_mail_at_shutdown() {
        let dir = tempfile::tempdir().expect("temp dir");
        let settings = test_settings(dir.path());
        let started = start(&settings).await.expect("service");
        let app = test::init_service(app(started.service, cors(&settings.cors_origins))).await;

        let (status, _, body) = send(&app, TestRequest::get().uri("/")).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "the host's home page")
        );
        let (status, _, body) = send(&app, TestRequest::get().uri("/nope")).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::NOT_FOUND, "no such page on the host")
        );
        let (status, _, _) = send(&app, TestRequest::get().uri("/health")).await;
        assert_eq!(status, StatusCode::OK);
        let (status, headers, _) = send(&app, TestRequest::get().uri("/api/v1/nope")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            value(&headers, header::CONTENT_TYPE),
            "application/problem+json",
            "the API's own 404 under /api/v1"
        );

        let preflight = TestRequest::default()
            .method(Method::OPTIONS)
            .uri("/api/v1/sessions")
            .insert_header((header::ORIGIN, "https://app.example.com"))
            .insert_header((header::ACCESS_CONTROL_REQUEST_METHOD, "POST"))
            .insert_header((header::ACCESS_CONTROL_REQUEST_HEADERS, "content-type"));
        let (status, headers, _) = send(&app, preflight).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            value(&headers, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            "https://app.example.com"
        );

        let register = TestRequest::post()
            .uri("/api/v1/users")
            .insert_header((header::ORIGIN, "https://app.example.com"))
            .insert_header((header::CONTENT_TYPE, "application/json"))
            .set_payload(REGISTRATION);
        let (status, headers, body) = send(&app, register).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(
            value(&headers, header::ACCESS_CONTROL_ALLOW_ORIGIN),
            "https://app.example.com"
        );

        drop(app);
        stop(started.jobs, started.mail)
            .await
            .expect("jobs stopped, mail drained");
        assert_eq!(sent_emails(&settings), 1, "the verification email was sent");
    }
}
