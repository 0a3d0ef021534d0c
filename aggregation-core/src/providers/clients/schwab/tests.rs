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

/// Schwab credentials holding these tokens.
fn credentials(access_token: &str, refresh_token: Option<&str>) -> ProviderCredentials {
    let secret = SchwabSecret {
        access_token: access_token.to_owned(),
        refresh_token: refresh_token.map(str::to_owned),
        scope: None,
    };
    ProviderCredentials {
        secret: ProviderSecret::serialize(&secret).unwrap(),
        renew_at: Some(Utc::now()),
        consent_expires_at: None,
    }
}

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
        .authorization_url(&AuthorizationRequest::new("st&ate=1", REDIRECT_URI))
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
        .authorization_url(
            &AuthorizationRequest::new("s", REDIRECT_URI).with_pkce_challenge(Some(CHALLENGE)),
        )
        .unwrap();
    let url = Url::parse(&address).unwrap();
    let pairs: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(pairs["code_challenge"], CHALLENGE);
    assert_eq!(pairs["code_challenge_method"], "S256");

    let bad = provider.authorization_url(&AuthorizationRequest::new("s", "relative/path"));
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
    let accounts = provider.accounts(&credentials("token", None)).await;
    assert!(
        matches!(accounts, Err(ProviderError::Http(_))),
        "{accounts:?}"
    );
    let refresh = provider
        .renew_credentials(&credentials("token", Some("token")))
        .await;
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
    let refresh = provider
        .renew_credentials(&credentials("token", Some("expired")))
        .await;
    assert!(
        matches!(refresh, Err(ProviderError::InvalidGrant(_))),
        "{refresh:?}"
    );
    // Credentials without a refresh token cannot be renewed at all.
    let unrenewable = provider
        .renew_credentials(&credentials("token", None))
        .await;
    assert!(
        matches!(unrenewable, Err(ProviderError::Unsupported(_))),
        "{unrenewable:?}"
    );
    let accounts = provider.accounts(&credentials("token", None)).await;
    assert!(
        matches!(accounts, Err(ProviderError::InvalidResponse(_))),
        "{accounts:?}"
    );
    let today = Utc::now().date_naive();
    let transactions = provider
        .transactions(
            &credentials("token", None),
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
    let refreshed = provider
        .renew_credentials(&credentials("old-access", Some("old-refresh")))
        .await
        .unwrap();
    let secret = SchwabSecret::of(&refreshed).unwrap();
    assert_eq!(secret.access_token, "new-access");
    assert_eq!(secret.refresh_token.as_deref(), Some("old-refresh"));
    assert_eq!(secret.scope, None);
    assert_eq!(refreshed.consent_expires_at, None);
    let lifetime = refreshed.renew_at.unwrap() - before;
    assert!(
        lifetime >= TimeDelta::seconds(1799) && lifetime <= TimeDelta::seconds(1801),
        "{lifetime}"
    );
    let exchanged = provider
        .exchange_code("code", REDIRECT_URI, None)
        .await
        .unwrap();
    assert_eq!(SchwabSecret::of(&exchanged).unwrap().refresh_token, None);
    assert!(!format!("{exchanged:?}").contains("new-access"));
}

#[tokio::test]
async fn token_pairs_stored_by_earlier_releases_still_work() {
    // What the release before opaque secrets encrypted for a Schwab connection.
    let legacy = serde_json::json!({
        "access_token": "old-access",
        "refresh_token": "old-refresh",
        "expires_at": "2026-03-01T12:00:00Z",
        "scope": "api",
    });
    let keyring = crate::crypto::Keyring::new(vec![("k1".to_owned(), vec![9; 32])]).unwrap();
    let connection_id = uuid::Uuid::now_v7();
    let (key_id, sealed) = keyring
        .encrypt(
            &serde_json::to_vec(&legacy).unwrap(),
            connection_id.as_bytes(),
        )
        .unwrap();
    let credentials =
        crate::providers::connections::open_credentials(&keyring, connection_id, &key_id, &sealed)
            .unwrap();

    // The data calls send the old access token, the renewal the old refresh token.
    let fake = tower::service_fn(|request: http::Request<hyper::body::Incoming>| async move {
        let bearer = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let (status, body): (u16, String) = match request.uri().path() {
            "/v1/oauth/token" => {
                use http_body_util::BodyExt as _;
                let form = request.into_body().collect().await.unwrap().to_bytes();
                let form = String::from_utf8_lossy(&form).into_owned();
                if form.contains("refresh_token=old-refresh") {
                    (
                        200,
                        r#"{"access_token":"new-access","token_type":"Bearer","expires_in":1800}"#
                            .to_owned(),
                    )
                } else {
                    (400, r#"{"error":"invalid_grant"}"#.to_owned())
                }
            }
            _ if bearer.as_deref() != Some("Bearer old-access") => (401, String::new()),
            "/trader/v1/accounts/accountNumbers" => (
                200,
                r#"[{"accountNumber":"1","hashValue":"H1"}]"#.to_owned(),
            ),
            "/trader/v1/accounts" => (200, "[]".to_owned()),
            _ => (404, String::new()),
        };
        let mut response = http::Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Ok::<_, Infallible>(response)
    });
    let provider =
        SchwabProvider::new(SchwabConfig::new(serve(fake).await, "id", "secret")).unwrap();
    let accounts = provider.accounts(&credentials).await;
    assert!(accounts.is_ok(), "{accounts:?}");
    let renewed = provider.renew_credentials(&credentials).await.unwrap();
    let secret = SchwabSecret::of(&renewed).unwrap();
    assert_eq!(secret.access_token, "new-access");
    assert_eq!(secret.refresh_token.as_deref(), Some("old-refresh"));
}
