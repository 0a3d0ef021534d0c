//! The provider's configuration, addresses and answer mapping, against fakes over real HTTP.
//! Its flows against the Schwab sandbox are tested in the `aggregation-sandbox` crate.

use std::convert::Infallible;

use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use super::*;

const REDIRECT_URI: &str = "https://app.example/callback";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

/// Serves a tower service on 127.0.0.1 and answers its base URL.
async fn serve<S>(service: S) -> String
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Full<Bytes>>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{address}")
}

#[test]
fn config_defaults_and_debug_hides_the_secret() {
    let config = SchwabConfig::new("https://api.schwabapi.com/", "app-key", "s3cr3t-value");
    assert_eq!(config.slug, "schwab");
    assert_eq!(config.name, "Charles Schwab");
    assert!(config.use_pkce, "PKCE is on unless turned off");
    let provider = SchwabProvider::new(config.clone()).unwrap();
    assert_eq!(provider.slug(), "schwab");
    assert_eq!(provider.name(), "Charles Schwab");
    assert!(provider.supports_oauth());
    assert!(provider.supports_pkce());
    let plain = SchwabProvider::new(SchwabConfig {
        use_pkce: false,
        ..config.clone()
    })
    .unwrap();
    assert!(!plain.supports_pkce());
    for debug in [format!("{config:?}"), format!("{provider:?}")] {
        assert!(!debug.contains("s3cr3t-value"), "{debug}");
        assert!(debug.contains("app-key"), "{debug}");
    }
}

#[test]
fn bad_base_urls_are_configuration_errors() {
    for base in [
        "",
        "not a url",
        "ftp://example.com",
        "mailto:a@b.c",
        "https://h/?q=1",
    ] {
        let result = SchwabProvider::new(SchwabConfig::new(base, "id", "secret"));
        assert!(
            matches!(result, Err(ProviderError::Configuration(_))),
            "{base}: {result:?}"
        );
    }
}

#[test]
fn authorization_url_shape() {
    let provider = SchwabProvider::new(SchwabConfig::new(
        "https://api.example/prefix/",
        "app key",
        "s",
    ))
    .unwrap();
    let address = provider
        .authorization_url(&AuthorizationRequest {
            state: "st&ate=1",
            redirect_uri: REDIRECT_URI,
            pkce_challenge: None,
        })
        .unwrap();
    let url = Url::parse(&address).unwrap();
    assert_eq!(url.scheme(), "https");
    assert_eq!(url.host_str(), Some("api.example"));
    assert_eq!(url.path(), "/prefix/v1/oauth/authorize");
    let pairs: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(pairs["response_type"], "code");
    assert_eq!(pairs["client_id"], "app key");
    assert_eq!(pairs["redirect_uri"], REDIRECT_URI);
    assert_eq!(pairs["state"], "st&ate=1");
    assert!(!pairs.contains_key("code_challenge"));
    assert!(!pairs.contains_key("scope"));

    let address = provider
        .authorization_url(&AuthorizationRequest {
            state: "s",
            redirect_uri: REDIRECT_URI,
            pkce_challenge: Some(CHALLENGE),
        })
        .unwrap();
    let url = Url::parse(&address).unwrap();
    let pairs: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(pairs["code_challenge"], CHALLENGE);
    assert_eq!(pairs["code_challenge_method"], "S256");

    let bad = provider.authorization_url(&AuthorizationRequest {
        state: "s",
        redirect_uri: "relative/path",
        pkce_challenge: None,
    });
    assert!(matches!(bad, Err(ProviderError::Configuration(_))));
}

#[tokio::test]
async fn unreachable_provider_is_an_http_error() {
    // Bind then drop a listener so the port is (very likely) closed.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let provider = SchwabProvider::new(SchwabConfig::new(
        format!("http://{address}"),
        "id",
        "secret",
    ))
    .unwrap();
    let accounts = provider.accounts("token").await;
    assert!(
        matches!(accounts, Err(ProviderError::Http(_))),
        "{accounts:?}"
    );
    let refresh = provider.refresh_tokens("token").await;
    assert!(
        matches!(refresh, Err(ProviderError::Http(_))),
        "{refresh:?}"
    );
}

#[tokio::test]
async fn odd_token_and_data_answers() {
    // A fake that answers fixed bodies by path, to reach the corners the sandbox does not.
    let fake = tower::service_fn(|request: http::Request<hyper::body::Incoming>| async move {
        let (status, content_type, body): (u16, &'static str, &'static str) = match request
            .uri()
            .path()
        {
            "/v1/oauth/token" => (
                400,
                "application/json",
                r#"{"error":"unsupported_token_type","error_description":"400 Bad Request: {\"error_description\":\"Exception while authenticating refresh token [...]\",\"error\":\"refresh_token_authentication_error\"}"}"#,
            ),
            "/trader/v1/accounts/accountNumbers" => (
                200,
                "application/json",
                r#"[{"accountNumber":"1","hashValue":"H1"}]"#,
            ),
            "/trader/v1/accounts" => (200, "application/json", r#"{"not":"an array"}"#),
            _ => (200, "text/html", "<html>surprise</html>"),
        };
        let mut response = http::Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
        if !content_type.is_empty() {
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(content_type),
            );
        }
        Ok::<_, Infallible>(response)
    });
    let base = serve(fake).await;
    let provider = SchwabProvider::new(SchwabConfig::new(base, "id", "secret")).unwrap();
    // Schwab's answer for an expired refresh token.
    let refresh = provider.refresh_tokens("expired").await;
    assert!(
        matches!(refresh, Err(ProviderError::InvalidGrant(_))),
        "{refresh:?}"
    );
    let accounts = provider.accounts("token").await;
    assert!(
        matches!(accounts, Err(ProviderError::InvalidResponse(_))),
        "{accounts:?}"
    );
    let today = Utc::now().date_naive();
    let transactions = provider
        .transactions(
            "token",
            "H1",
            DateRange {
                start: today,
                end: today,
            },
        )
        .await;
    assert!(
        matches!(transactions, Err(ProviderError::InvalidResponse(_))),
        "{transactions:?}"
    );
}

#[test]
fn token_errors_map_to_provider_errors() {
    assert!(is_invalid_grant("invalid_grant", None));
    assert!(is_invalid_grant("refresh_token_authentication_error", None));
    assert!(is_invalid_grant(
        "unsupported_token_type",
        Some("... \"error\":\"refresh_token_authentication_error\" ...")
    ));
    assert!(!is_invalid_grant("unsupported_token_type", None));
    assert!(!is_invalid_grant("invalid_client", Some("invalid_grant")));
}

#[tokio::test]
async fn minimal_token_answers_keep_the_refresh_token_and_default_the_lifetime() {
    let fake = tower::service_fn(|_request: http::Request<hyper::body::Incoming>| async {
        let mut response = http::Response::new(Full::new(Bytes::from_static(
            br#"{"access_token":"new-access","token_type":"bearer","unknown":[1,2]}"#,
        )));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json; charset=utf-8"),
        );
        Ok::<_, Infallible>(response)
    });
    let provider =
        SchwabProvider::new(SchwabConfig::new(serve(fake).await, "id", "secret")).unwrap();
    let before = Utc::now();
    let refreshed = provider.refresh_tokens("old-refresh").await.unwrap();
    assert_eq!(refreshed.access_token, "new-access");
    assert_eq!(refreshed.refresh_token.as_deref(), Some("old-refresh"));
    assert_eq!(refreshed.scope, None);
    let lifetime = refreshed.expires_at - before;
    assert!(
        lifetime >= TimeDelta::seconds(1799) && lifetime <= TimeDelta::seconds(1801),
        "{lifetime}"
    );
    let exchanged = provider
        .exchange_code("code", REDIRECT_URI, None)
        .await
        .unwrap();
    assert_eq!(exchanged.refresh_token, None);
    assert!(!format!("{exchanged:?}").contains("new-access"));
}
