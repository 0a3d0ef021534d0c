//! `EnableBankingSandbox` over real HTTP, mounted under a prefix the host strips (as the
//! reference server mounts it): a client signs its JWT with the sandbox application's key, and
//! a user agent follows the approval page's Approve link.

use std::convert::Infallible;

use aggregation_sandbox::EnableBankingSandbox;
use base64::Engine as _;
use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower::ServiceExt as _;
use url::Url;

const PREFIX: &str = "/sandbox/enablebanking";

/// Serves a sandbox under [`PREFIX`] on 127.0.0.1 (other paths: 404) and answers it.
async fn serve() -> EnableBankingSandbox {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("loopback bind");
    let address = listener.local_addr().expect("bound address");
    let sandbox = EnableBankingSandbox::new(format!("http://{address}{PREFIX}"));
    let mounted = sandbox.clone();
    let host = tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        let sandbox = mounted.clone();
        async move {
            let (mut parts, body) = request.into_parts();
            let Some(rest) = parts
                .uri
                .path_and_query()
                .and_then(|path| path.as_str().strip_prefix(PREFIX))
                .map(|rest| if rest.is_empty() { "/" } else { rest }.to_owned())
            else {
                let mut response = http::Response::new(Full::new(Bytes::new()));
                *response.status_mut() = http::StatusCode::NOT_FOUND;
                return Ok::<_, Infallible>(response);
            };
            parts.uri = rest.parse().expect("stripped URI");
            sandbox
                .oneshot(http::Request::from_parts(parts, body))
                .await
        }
    });
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(host.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    sandbox
}

/// The application JWT, signed as a client does: RS256 with the sandbox application's key.
fn jwt(sandbox: &EnableBankingSandbox) -> String {
    let body: String = sandbox
        .private_key_pem()
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("sandbox key");
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(sandbox.application_id().to_owned());
    let now = Utc::now().timestamp();
    let claims = json!({
        "iss": "enablebanking.com",
        "aud": "api.enablebanking.com",
        "iat": now,
        "exp": now + 3600,
    });
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_der(&der)).expect("signed")
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// The `href` of the link with this `id` on a page.
fn link(page: &str, id: &str) -> String {
    let marker = format!("id=\"{id}\" href=\"");
    let start = page.find(&marker).expect("link on the page") + marker.len();
    let end = page[start..].find('"').expect("closing quote") + start;
    page[start..end].to_owned()
}

#[tokio::test]
async fn a_user_agent_approves_and_a_client_reads_every_page() {
    let sandbox = serve().await;
    let base = sandbox.base_url().to_owned();
    let client = client();
    let token = jwt(&sandbox);

    let aspsps: Value = client
        .get(format!("{base}/aspsps?country=FI"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bank = &aspsps["aspsps"][0];
    let seconds = bank["maximum_consent_validity"].as_i64().unwrap();

    let started = client
        .post(format!("{base}/auth"))
        .bearer_auth(&token)
        .json(&json!({
            "access": {"valid_until": (Utc::now() + TimeDelta::seconds(seconds)).to_rfc3339()},
            "aspsp": {"name": bank["name"], "country": bank["country"]},
            "state": "opaque-state",
            "redirect_url": "https://app.example/callback",
            "psu_type": "personal",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 200);
    let started: Value = started.json().await.unwrap();
    let url = started["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{base}/approval/")), "{url}");

    // The user's browser: the page, then its Approve link (no JWT on either).
    let page = client.get(url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    let approved = client.get(link(&page, "approve")).send().await.unwrap();
    assert_eq!(approved.status(), 302);
    let location =
        Url::parse(approved.headers()[http::header::LOCATION].to_str().unwrap()).unwrap();
    assert_eq!(location.path(), "/callback");
    let query: Vec<(String, String)> = location.query_pairs().into_owned().collect();
    assert!(query.contains(&("state".to_owned(), "opaque-state".to_owned())));
    let code = query
        .iter()
        .find(|(name, _)| name == "code")
        .map(|(_, code)| code.clone())
        .unwrap();

    let session: Value = client
        .post(format!("{base}/sessions"))
        .bearer_auth(&token)
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let uid = session["accounts"][0]["uid"].as_str().unwrap();

    let mut rows = 0;
    let mut pages = 0;
    let mut key: Option<String> = None;
    loop {
        let address = format!("{base}/accounts/{uid}/transactions");
        let address = match &key {
            Some(key) => Url::parse_with_params(&address, [("continuation_key", key)]),
            None => Url::parse(&address),
        }
        .unwrap();
        let page: Value = client
            .get(address)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        pages += 1;
        rows += page["transactions"].as_array().unwrap().len();
        match page["continuation_key"].as_str() {
            Some(next) => key = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!((rows, pages), (6, 2));

    // Without the JWT: the API's 401 body.
    let refused = client
        .get(format!("{base}/accounts/{uid}/balances"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"], "AUTHORIZATION_NOT_PROVIDED");

    let requests = sandbox.requests();
    assert!(
        requests.contains(&"GET /aspsps?country=FI".to_owned()),
        "{requests:?}"
    );
    assert!(requests.iter().all(|request| !request.contains(&token)));
}
