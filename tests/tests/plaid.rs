//! Plaid through the three fronts and both stores, against a fake Plaid API served on
//! loopback that checks the application's `client_id` and `secret` on every call: Link
//! (link token, public token exchange), the `/transactions/sync` change feed (paging, a
//! mutation during paging, modified and removed rows, pending rows that post keeping their
//! id, the sign flip), accounts and holdings, the spec's flow endpoints, error mapping,
//! reauthorization in update mode (and only then a callback without a public token), verified
//! webhooks and their events, and the disconnect that removes the item.

use std::sync::{Arc, Mutex};

use aggregation_core::providers::{PlaidConfig, PlaidProvider};
use aggregation_tests::{Setup, TestApp, conformance};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const CLIENT_ID: &str = "client-test-1";
const SECRET: &str = "secret-test-1";
const PUBLIC_TOKEN: &str = "public-sandbox-good";
/// An administrator of these cases (reads the audit trail).
const ADMIN: &str = "plaid-admin@example.com";
/// The id of the fake's webhook verification key.
const KID: &str = "fake-plaid-key-1";

/// The fake's webhook signing key (P-256, made for these tests) and its public point.
const SIGNING_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgciSG0RwvQDJ0L9ho
9l/2suezk+KKQURGnVZVUsC8V8GhRANCAATFi93vMpLfs/Jml6l9MUPNK3tbJ2f5
g3zWmGZwPaNczYAfHqU+NHRm/fT/ySZc9gCF5Kx45inI9tuo2jgQTZpb
-----END PRIVATE KEY-----
";
const KEY_X: &str = "xYvd7zKS37PyZpepfTFDzSt7Wydn-YN81phmcD2jXM0";
const KEY_Y: &str = "gB8epT40dGb99P_JJlz2AIXkrHjmKcj226jaOBBNmls";
/// Another P-256 key: what a forger signs with.
const FORGER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPxXAMpeZBNR1dvBm
l6x8WB8ncx9oeEbaE2rWg/cBjtWhRANCAARH15Bh3BGdM/89kwVBjOf9NVQnSNbq
ViiK5QUYcpb3CoIN7ZTWk5FRAXvQbXK4TZq/DNXx8E+q9QW1qA2kXHFN
-----END PRIVATE KEY-----
";

/// One change in the fake item's feed.
#[derive(Clone)]
enum Change {
    Added(Value),
    Modified(Value),
    Removed(&'static str, &'static str),
}

/// What the fake Plaid API holds and saw.
#[derive(Default)]
struct Fake {
    /// Every request: its path and body.
    requests: Vec<(String, Value)>,
    /// The feed; a cursor is `c<index>`.
    log: Vec<Change>,
    /// Items issued: access token and item id.
    items: Vec<(String, String)>,
    /// Access tokens removed.
    removed_items: Vec<String>,
    /// The next data request fails with this (status, error_type, error_code).
    fail_next: Option<(u16, &'static str, &'static str)>,
    /// `/transactions/sync` requests so far.
    sync_requests: usize,
    /// The `/transactions/sync` request of this number answers a mutation.
    mutate_at: Option<usize>,
    /// The `/transactions/sync` request of this number answers a 500.
    fail_at: Option<usize>,
}

/// A fake Plaid API, stopped when dropped.
struct FakePlaid {
    state: Arc<Mutex<Fake>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakePlaid {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn tx(id: &str, account: &str, amount: f64, date: &str, name: &str, pending: bool) -> Value {
    json!({
        "transaction_id": id,
        "account_id": account,
        "amount": amount,
        "iso_currency_code": "USD",
        "unofficial_currency_code": null,
        "date": date,
        "authorized_date": date,
        "name": name,
        "merchant_name": null,
        "pending": pending,
        "pending_transaction_id": null,
        "payment_channel": "in store",
        "personal_finance_category": null,
    })
}

/// The feed before anything posts: five rows, paged two at a time.
fn first_log() -> Vec<Change> {
    let mut coffee = tx(
        "tx-coffee-p",
        "acc-checking",
        4.5,
        "2026-11-20",
        "SQ *BLUE BOTTLE",
        true,
    );
    coffee["merchant_name"] = json!("Blue Bottle Coffee");
    coffee["personal_finance_category"] =
        json!({"primary": "FOOD_AND_DRINK", "detailed": "FOOD_AND_DRINK_COFFEE"});
    vec![
        Change::Added(coffee),
        Change::Added(tx(
            "tx-salary",
            "acc-checking",
            -2500.0,
            "2026-11-15",
            "ACME PAYROLL",
            false,
        )),
        Change::Added(tx(
            "tx-grocery",
            "acc-checking",
            52.1,
            "2026-11-18",
            "CORNER GROCERY",
            false,
        )),
        Change::Added(tx(
            "tx-refund",
            "acc-card",
            -10.0,
            "2026-11-17",
            "REFUND",
            false,
        )),
        Change::Added(tx(
            "tx-card-lunch",
            "acc-card",
            18.75,
            "2026-11-19",
            "LUNCH PLACE",
            false,
        )),
    ]
}

impl Fake {
    fn fail(&mut self) -> Option<Response> {
        self.fail_next
            .take()
            .map(|(status, kind, code)| error(status, kind, code))
    }

    fn known_token(&self, body: &Value) -> bool {
        let token = body["access_token"].as_str().unwrap_or("");
        self.items.iter().any(|(access, _)| access == token)
            && !self.removed_items.iter().any(|removed| removed == token)
    }
}

/// A JSON answer.
struct Reply(Value);

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            self.0.to_string(),
        )
            .into_response()
    }
}

fn error(status: u16, kind: &str, code: &str) -> Response {
    let mut response = (
        StatusCode::from_u16(status).expect("status"),
        Reply(json!({
            "error_type": kind,
            "error_code": code,
            "error_message": "the fake says so",
            "display_message": null,
            "request_id": "req-1",
        })),
    )
        .into_response();
    if status == 429 {
        response
            .headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("17"));
    }
    response
}

async fn handle(
    State(state): State<Arc<Mutex<Fake>>>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    raw: bytes::Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let path = uri.path().trim_start_matches('/').to_owned();
    let mut fake = state.lock().expect("fake");
    fake.requests.push((path.clone(), body.clone()));
    let keys_ok = body["client_id"] == CLIENT_ID
        && body["secret"] == SECRET
        && headers.get("plaid-client-id").and_then(|v| v.to_str().ok()) == Some(CLIENT_ID)
        && headers.get("plaid-secret").and_then(|v| v.to_str().ok()) == Some(SECRET);
    if !keys_ok {
        return error(400, "INVALID_INPUT", "INVALID_API_KEYS");
    }
    match path.as_str() {
        "webhook_verification_key/get" => {
            if body["key_id"] != KID {
                return error(400, "INVALID_INPUT", "INVALID_WEBHOOK_VERIFICATION_KEY_ID");
            }
            Reply(json!({
                "key": {"alg": "ES256", "crv": "P-256", "kid": KID, "kty": "EC", "use": "sig",
                        "x": KEY_X, "y": KEY_Y, "created_at": 1_700_000_000, "expired_at": null},
                "request_id": "req-key",
            }))
            .into_response()
        }
        "link/token/create" => {
            if body["user"]["client_user_id"].as_str().is_none() {
                return error(400, "INVALID_REQUEST", "MISSING_FIELDS");
            }
            Reply(json!({
                "link_token": format!("link-sandbox-{}", fake.requests.len()),
                "expiration": "2026-12-31T00:00:00Z",
                "request_id": "req-link",
            }))
            .into_response()
        }
        "item/public_token/exchange" => {
            if body["public_token"] != PUBLIC_TOKEN {
                return error(400, "INVALID_INPUT", "INVALID_PUBLIC_TOKEN");
            }
            let n = fake.items.len() + 1;
            let item = (format!("access-sandbox-{n}"), format!("item-{n}"));
            fake.items.push(item.clone());
            Reply(json!({
                "access_token": item.0,
                "item_id": item.1,
                "request_id": "req-exchange",
            }))
            .into_response()
        }
        "item/remove" => {
            if !fake.known_token(&body) {
                return error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN");
            }
            let token = body["access_token"].as_str().unwrap_or("").to_owned();
            fake.removed_items.push(token);
            Reply(json!({"request_id": "req-remove"})).into_response()
        }
        _ if !fake.known_token(&body) => error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN"),
        _ => {
            if let Some(failure) = fake.fail() {
                return failure;
            }
            data(&mut fake, &path, &body)
        }
    }
}

fn data(fake: &mut Fake, path: &str, body: &Value) -> Response {
    match path {
        "accounts/get" => Reply(json!({
            "accounts": [
                {"account_id": "acc-checking", "name": "Everyday Checking", "official_name": null,
                 "mask": "0000", "type": "depository", "subtype": "checking",
                 "balances": {"current": 1200.4, "available": 1100.0, "limit": null,
                              "iso_currency_code": "USD", "unofficial_currency_code": null}},
                {"account_id": "acc-card", "name": "Rewards Card", "official_name": null,
                 "mask": "3333", "type": "credit", "subtype": "credit card",
                 "balances": {"current": 410.25, "available": 4589.75, "limit": 5000,
                              "iso_currency_code": "USD", "unofficial_currency_code": null}},
                {"account_id": "acc-invest", "name": "Brokerage", "official_name": null,
                 "mask": "5555", "type": "investment", "subtype": "brokerage",
                 "balances": {"current": 3210.0, "available": null, "limit": null,
                              "iso_currency_code": "USD", "unofficial_currency_code": null}}
            ],
            "item": {"item_id": "item-1"},
            "request_id": "req-accounts",
        }))
        .into_response(),
        "investments/holdings/get" => {
            let asked = &body["options"]["account_ids"];
            if asked != &json!(["acc-invest"]) {
                return error(400, "INVALID_REQUEST", "INVALID_FIELD");
            }
            Reply(json!({
                "accounts": [],
                "holdings": [
                    {"account_id": "acc-invest", "security_id": "sec-vti", "quantity": 10,
                     "institution_price": 321.0, "institution_value": 3210.0,
                     "cost_basis": 2800.0, "iso_currency_code": "USD",
                     "unofficial_currency_code": null}
                ],
                "securities": [
                    {"security_id": "sec-vti", "ticker_symbol": "VTI",
                     "name": "Vanguard Total Stock Market ETF", "type": "etf"}
                ],
                "request_id": "req-holdings",
            }))
            .into_response()
        }
        "transactions/sync" => {
            let start = match body["cursor"].as_str() {
                None | Some("") => 0,
                Some(cursor) => match cursor
                    .strip_prefix('c')
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    Some(n) if n <= fake.log.len() => n,
                    _ => return error(400, "INVALID_INPUT", "INVALID_CURSOR"),
                },
            };
            fake.sync_requests += 1;
            if fake.mutate_at == Some(fake.sync_requests) {
                return error(
                    400,
                    "TRANSACTIONS_ERROR",
                    "TRANSACTIONS_SYNC_MUTATION_DURING_PAGINATION",
                );
            }
            if fake.fail_at == Some(fake.sync_requests) {
                return error(500, "API_ERROR", "INTERNAL_SERVER_ERROR");
            }
            let count = body["count"].as_u64().unwrap_or(100) as usize;
            let end = (start + count).min(fake.log.len());
            let (mut added, mut modified, mut removed) = (Vec::new(), Vec::new(), Vec::new());
            for change in &fake.log[start..end] {
                match change {
                    Change::Added(t) => added.push(t.clone()),
                    Change::Modified(t) => modified.push(t.clone()),
                    Change::Removed(account, id) => {
                        removed.push(json!({"account_id": account, "transaction_id": id}));
                    }
                }
            }
            Reply(json!({
                "added": added,
                "modified": modified,
                "removed": removed,
                "next_cursor": format!("c{end}"),
                "has_more": end < fake.log.len(),
                "transactions_update_status": "HISTORICAL_UPDATE_COMPLETE",
                "request_id": "req-sync",
            }))
            .into_response()
        }
        _ => error(404, "INVALID_REQUEST", "UNKNOWN_PATH"),
    }
}

/// The fake served on loopback and the setup offering `plaid` against it with these keys.
fn served_setup(secret: &'static str) -> Setup {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.set_nonblocking(true).expect("non-blocking");
    let address = listener.local_addr().expect("address");
    let state = Arc::new(Mutex::new(Fake {
        log: first_log(),
        ..Fake::default()
    }));
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    let app = axum::Router::new()
        .fallback(axum::routing::post(handle))
        .with_state(state.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut config = PlaidConfig::new(CLIENT_ID, secret)
        .with_base_url(format!("http://{address}"))
        .with_allow_http(true)
        .with_webhook_url(Some(
            "https://api.example.com/api/v1/provider-webhooks/plaid".to_owned(),
        ));
    config.page_size = 2;
    let provider = PlaidProvider::new(config).expect("provider");
    let mut setup = aggregation_tests::sandbox_setup();
    setup.sandbox = None;
    setup.config = setup.config.with_admin_emails(vec![ADMIN.to_owned()]);
    setup.builder_with = Some(Box::new(move |builder| builder.provider(provider)));
    setup.context = Some(Arc::new(FakePlaid { state, task }));
    setup
}

fn plaid() -> Setup {
    served_setup(SECRET)
}

fn wrong_keys() -> Setup {
    served_setup("not-the-secret")
}

fn fake(app: &TestApp) -> std::sync::MutexGuard<'_, Fake> {
    app.context::<FakePlaid>().state.lock().expect("fake")
}

fn requests_to(app: &TestApp, path: &str) -> Vec<Value> {
    fake(app)
        .requests
        .iter()
        .filter(|(p, _)| p == path)
        .map(|(_, body)| body.clone())
        .collect()
}

/// A `Plaid-Verification` JWT over `body`: signed with `pem` (ES256), naming `kid`, issued
/// `age` seconds ago, claiming `digest_of` as the body.
fn verification(pem: &str, kid: &str, age: i64, digest_of: &[u8]) -> String {
    use sha2::Digest as _;
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    let claims = json!({
        "iat": chrono::Utc::now().timestamp() - age,
        "request_body_sha256": hex::encode(sha2::Sha256::digest(digest_of)),
    });
    let key = jsonwebtoken::EncodingKey::from_ec_der(&pem_der(pem));
    jsonwebtoken::encode(&header, &claims, &key).expect("signed")
}

/// The DER inside a PEM block.
fn pem_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let inner: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(inner)
        .expect("base64 PEM")
}

/// A webhook body for the fake's first item.
fn webhook(kind: &str, code: &str, error_code: Option<&str>) -> Vec<u8> {
    let mut body = json!({
        "webhook_type": kind,
        "webhook_code": code,
        "item_id": "item-1",
        "environment": "sandbox",
    });
    if let Some(error_code) = error_code {
        body["error"] = json!({"error_type": "ITEM_ERROR", "error_code": error_code,
                               "error_message": "the login details changed", "display_message": null});
    }
    serde_json::to_vec(&body).expect("json")
}

/// Posts a webhook with this `Plaid-Verification` value (none with `None`).
async fn post_webhook(
    app: &TestApp,
    body: &[u8],
    verification: Option<&str>,
) -> aggregation_tests::TestResponse {
    let mut request = http::Request::builder()
        .method(http::Method::POST)
        .uri("/api/v1/provider-webhooks/plaid")
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(verification) = verification {
        request = request.header("Plaid-Verification", verification);
    }
    app.send(
        request
            .body(http_body_util::Full::new(bytes::Bytes::from(body.to_vec())))
            .expect("request"),
    )
    .await
}

/// Posts a webhook signed by the fake's key: 200.
async fn post_signed_webhook(app: &TestApp, body: &[u8]) {
    let answer = post_webhook(app, body, Some(&verification(SIGNING_KEY, KID, 0, body))).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json());
}

/// The data of the user's events of this type, oldest first.
async fn events_of(app: &TestApp, connection: &Value, event_type: &str) -> Vec<Value> {
    let user_id = connection["user_id"].as_str().expect("user_id");
    let user_id = uuid::Uuid::parse_str(user_id).expect("a uuid");
    app.store
        .user_events_after(user_id, None, 100)
        .await
        .expect("events")
        .into_iter()
        .filter(|event| event.event_type.as_str() == event_type)
        .map(|event| event.data)
        .collect()
}

/// The user's events of this type once there are `count` (the webhook's work runs in the
/// background).
async fn events_once(
    app: &TestApp,
    connection: &Value,
    event_type: &str,
    count: usize,
) -> Vec<Value> {
    let mut events = Vec::new();
    for _ in 0..200 {
        events = events_of(app, connection, event_type).await;
        if events.len() >= count {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(events.len(), count, "{event_type}: {events:?}");
    events
}

/// The connection's status as `GET /providers/{id}` reads it.
async fn status_of(app: &TestApp, token: &str, connection: &Value) -> Value {
    app.get(
        &format!("/api/v1/providers/{}", id(connection)),
        Some(token),
    )
    .await
    .expect(200)["status"]
        .clone()
}

/// Connects, syncs, and has the next sync meet `ITEM_LOGIN_REQUIRED`: the connection, expired.
async fn expired_connection(app: &TestApp, token: &str) -> Value {
    let connection = connect(app, token).await;
    sync(app, token, &connection).await;
    fake(app).fail_next = Some((400, "ITEM_ERROR", "ITEM_LOGIN_REQUIRED"));
    app.post(
        &format!("/api/v1/providers/{}/sync", id(&connection)),
        &json!({"force": true}),
        Some(token),
    )
    .await
    .expect_problem(409, "conflict");
    app.expect_expired(token, &connection).await;
    connection
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

/// `POST /providers` for plaid: the link answer.
async fn start(app: &TestApp, token: &str) -> Value {
    app.post(
        "/api/v1/providers",
        &json!({"provider_slug": "plaid", "alias": "Bank"}),
        Some(token),
    )
    .await
    .expect(201)
}

async fn connect(app: &TestApp, token: &str) -> Value {
    let link = start(app, token).await;
    app.post(
        "/api/v1/providers/callback",
        &json!({"state": link["state"], "public_token": PUBLIC_TOKEN}),
        Some(token),
    )
    .await
    .expect(201)
}

async fn sync(app: &TestApp, token: &str, connection: &Value) -> Value {
    app.post(
        &format!("/api/v1/providers/{}/sync", id(connection)),
        &json!({"force": true}),
        Some(token),
    )
    .await
    .expect(201)
}

/// Every transaction of the user, over their accounts.
async fn all_rows(app: &TestApp, token: &str) -> Vec<Value> {
    let accounts = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    let mut rows = Vec::new();
    for account in accounts["accounts"].as_array().expect("accounts") {
        let listed = app
            .get(
                &format!("/api/v1/accounts/{}/transactions", id(account)),
                Some(token),
            )
            .await
            .expect(200);
        rows.extend(
            listed["transactions"]
                .as_array()
                .expect("rows")
                .iter()
                .cloned(),
        );
    }
    rows
}

fn row<'a>(rows: &'a [Value], description: &str) -> &'a Value {
    rows.iter()
        .find(|t| t["description"] == description)
        .unwrap_or_else(|| panic!("{description} in {rows:?}"))
}

async fn links_and_exchanges_the_public_token(app: TestApp) {
    let (user_id, token, _) = app.user("link@example.com").await;
    let offered = app
        .get("/api/v1/supported-providers", Some(&token))
        .await
        .expect(200);
    let plaid = offered["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .find(|p| p["slug"] == "plaid")
        .cloned()
        .expect("plaid offered");
    assert_eq!(plaid["connect"], "link");
    assert_eq!(plaid["countries"], json!(["US"]));

    let link = start(&app, &token).await;
    assert!(
        link["link_token"]
            .as_str()
            .expect("link_token")
            .starts_with("link-sandbox-")
    );
    assert_eq!(link["expires_in"], 600);
    assert!(link.get("authorization_url").is_none());
    let created = requests_to(&app, "link/token/create");
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["user"]["client_user_id"], user_id.as_str());
    assert_eq!(created[0]["products"], json!(["transactions"]));
    assert_eq!(created[0]["country_codes"], json!(["US"]));
    assert_eq!(
        created[0]["webhook"],
        "https://api.example.com/api/v1/provider-webhooks/plaid"
    );
    assert!(created[0].get("access_token").is_none());

    // A public token Plaid refuses: 400, the state spent, nothing created.
    let refused = app
        .post(
            "/api/v1/providers/callback",
            &json!({"state": link["state"], "public_token": "public-forged"}),
            Some(&token),
        )
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(refused.to_string().contains("public token"), "{refused}");
    app.post(
        "/api/v1/providers/callback",
        &json!({"state": link["state"], "public_token": PUBLIC_TOKEN}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");
    let listed = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 0);
    // A state alone (no public token) for a new connection: refused.
    let fresh = start(&app, &token).await;
    app.post(
        "/api/v1/providers/callback",
        &json!({"state": fresh["state"]}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");

    let connection = connect(&app, &token).await;
    assert_eq!(connection["provider_slug"], "plaid");
    assert_eq!(connection["status"], "active");
    assert_eq!(connection["alias"], "Bank");
    let text = connection.to_string();
    assert!(
        !text.contains("access-sandbox") && !text.contains("item-1"),
        "{text}"
    );
    // The exchange sent the token once.
    let exchanges = requests_to(&app, "item/public_token/exchange");
    assert_eq!(
        exchanges.last().expect("an exchange")["public_token"],
        PUBLIC_TOKEN
    );
}

async fn syncs_page_the_feed_and_flip_signs(app: TestApp) {
    let (_, token, _) = app.user("feed@example.com").await;
    let connection = connect(&app, &token).await;
    let synced = sync(&app, &token, &connection).await;
    assert_eq!(synced["accounts"]["created"], 3, "{synced}");
    assert_eq!(synced["transactions"]["created"], 5, "{synced}");
    assert_eq!(synced["holdings"]["created"], 1, "{synced}");
    // Five rows in pages of two: three pages, the first without a cursor.
    let pages = requests_to(&app, "transactions/sync");
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(pages[0].get("cursor").is_none());
    assert_eq!(pages[1]["cursor"], "c2");
    assert_eq!(pages[2]["cursor"], "c4");
    // Holdings were asked for the investment account only.
    assert_eq!(requests_to(&app, "investments/holdings/get").len(), 1);

    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let by_type = |kind: &str| {
        accounts["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .find(|a| a["account_type"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("{kind} in {accounts}"))
    };
    let checking = by_type("checking");
    assert_eq!(checking["balance_amount"], "1200.40");
    assert_eq!(checking["available_balance_amount"], "1100.00");
    assert_eq!(checking["account_number_masked"], "****0000");
    let card = by_type("credit_card");
    assert_eq!(card["balance_amount"], "-410.25");
    assert!(card["available_balance_amount"].is_null());
    assert_eq!(by_type("brokerage")["balance_amount"], "3210.00");

    let rows = all_rows(&app, &token).await;
    assert_eq!(rows.len(), 5);
    let coffee = row(&rows, "SQ *BLUE BOTTLE");
    assert_eq!(coffee["amount"], "-4.50");
    assert_eq!(coffee["status"], "pending");
    // Plaid's category and merchant name are the row's, with source `provider`.
    assert_eq!(coffee["category"], "FOOD_AND_DRINK_COFFEE", "{coffee}");
    assert_eq!(coffee["category_source"], "provider", "{coffee}");
    assert_eq!(coffee["merchant_name"], "Blue Bottle Coffee", "{coffee}");
    assert_eq!(row(&rows, "ACME PAYROLL")["amount"], "2500.00");
    assert_eq!(row(&rows, "REFUND")["amount"], "10.00");

    // Nothing new: one page from the stored cursor, nothing written.
    let again = sync(&app, &token, &connection).await;
    assert_eq!(again["transactions"]["created"], 0, "{again}");
    assert_eq!(again["transactions"]["updated"], 0, "{again}");
    let pages = requests_to(&app, "transactions/sync");
    assert_eq!(pages.len(), 4);
    assert_eq!(pages[3]["cursor"], "c5");
}

async fn a_rule_has_the_last_word_over_the_providers_merchant_name(app: TestApp) {
    let (_, token, _) = app.user("rule-over-plaid@example.com").await;
    // Its condition reads the provider's merchant name, which the description lacks.
    app.post(
        "/api/v1/rules",
        &json!({
            "name": "Coffee",
            "conditions": [{"field": "merchant_name", "op": "equals", "value": "blue bottle coffee"}],
            "actions": [{"set_merchant_name": "My coffee place"}, {"set_notes": "ruled"}],
        }),
        Some(&token),
    )
    .await
    .expect(201);
    let connection = connect(&app, &token).await;
    sync(&app, &token, &connection).await;
    let rows = all_rows(&app, &token).await;
    let coffee = row(&rows, "SQ *BLUE BOTTLE");
    assert_eq!(coffee["merchant_name"], "My coffee place", "{coffee}");
    assert_eq!(coffee["notes"], "ruled", "{coffee}");
    // The rule set no category: the provider's stays.
    assert_eq!(coffee["category"], "FOOD_AND_DRINK_COFFEE", "{coffee}");
    assert_eq!(coffee["category_source"], "provider", "{coffee}");
    // A row the rule does not match keeps what the feed and the description give.
    assert_ne!(row(&rows, "CORNER GROCERY")["notes"], "ruled");
}

async fn posted_rows_take_over_pending_and_removed_rows_go(app: TestApp) {
    let (_, token, _) = app.user("posted@example.com").await;
    let connection = connect(&app, &token).await;
    sync(&app, &token, &connection).await;
    let before = all_rows(&app, &token).await;
    let pending_id = row(&before, "SQ *BLUE BOTTLE")["id"].clone();
    {
        let mut fake = fake(&app);
        // The coffee posts with a tip, under a new id linked to the pending one.
        let mut posted = tx(
            "tx-coffee",
            "acc-checking",
            5.4,
            "2026-11-21",
            "SQ *BLUE BOTTLE",
            false,
        );
        posted["pending_transaction_id"] = json!("tx-coffee-p");
        fake.log.push(Change::Added(posted));
        fake.log
            .push(Change::Removed("acc-checking", "tx-coffee-p"));
        fake.log.push(Change::Modified(tx(
            "tx-grocery",
            "acc-checking",
            52.6,
            "2026-11-18",
            "CORNER GROCERY",
            false,
        )));
        fake.log.push(Change::Removed("acc-card", "tx-refund"));
    }
    let synced = sync(&app, &token, &connection).await;
    let stats = &synced["transactions"];
    assert_eq!(stats["created"], 0, "{synced}");
    assert_eq!(stats["updated"], 2, "{synced}");
    assert_eq!(stats["removed"], 1, "{synced}");
    let after = all_rows(&app, &token).await;
    assert_eq!(after.len(), 4, "{after:?}");
    let coffee = after
        .iter()
        .find(|t| t["id"] == pending_id)
        .expect("the pending row kept its id");
    assert_eq!(coffee["status"], "settled");
    assert_eq!(coffee["amount"], "-5.40");
    // The row names the posted transaction now and the pending one it replaced
    // (Reconciliation), and came from a sync.
    assert_eq!(coffee["provider_transaction_id"], "tx-coffee", "{coffee}");
    assert_eq!(coffee["pending_transaction_id"], "tx-coffee-p", "{coffee}");
    assert_eq!(coffee["source"], "sync", "{coffee}");
    assert_eq!(coffee["transfer_transaction_id"], Value::Null, "{coffee}");
    // Read alone, it says the same; a row that was never pending names none.
    let read = app
        .get(
            &format!("/api/v1/transactions/{}", id(coffee)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(read["pending_transaction_id"], "tx-coffee-p", "{read}");
    assert_eq!(read["provider_transaction_id"], "tx-coffee", "{read}");
    let grocery = row(&after, "CORNER GROCERY");
    assert_eq!(grocery["pending_transaction_id"], Value::Null, "{grocery}");
    assert_eq!(
        grocery["provider_transaction_id"], "tx-grocery",
        "{grocery}"
    );
    assert_eq!(grocery["source"], "sync", "{grocery}");
    // The posted row names no category: the pending row's stays.
    assert_eq!(coffee["category"], "FOOD_AND_DRINK_COFFEE", "{coffee}");
    assert_eq!(coffee["merchant_name"], "Blue Bottle Coffee", "{coffee}");
    assert_eq!(row(&after, "CORNER GROCERY")["amount"], "-52.60");
    assert!(after.iter().all(|t| t["description"] != "REFUND"));
}

async fn a_mutation_during_paging_restarts_from_the_first_cursor(app: TestApp) {
    let (_, token, _) = app.user("mutation@example.com").await;
    let connection = connect(&app, &token).await;
    fake(&app).mutate_at = Some(2);
    let synced = sync(&app, &token, &connection).await;
    assert_eq!(synced["transactions"]["created"], 5, "{synced}");
    let pages = requests_to(&app, "transactions/sync");
    // Page one, the refused page two, then the whole loop again from the start.
    assert_eq!(pages.len(), 5, "{pages:?}");
    assert!(pages[2].get("cursor").is_none(), "{pages:?}");
    assert_eq!(all_rows(&app, &token).await.len(), 5);
}

async fn a_failed_sync_keeps_the_cursor(app: TestApp) {
    let (_, token, _) = app.user("cursor@example.com").await;
    let connection = connect(&app, &token).await;
    // The second page fails: what the first page brought is not written either.
    fake(&app).fail_at = Some(2);
    let failed = app
        .post(
            &format!("/api/v1/providers/{}/sync", id(&connection)),
            &json!({"force": true}),
            Some(&token),
        )
        .await
        .expect_problem(502, "provider_error");
    // Coarse: Plaid's code, never its message.
    assert!(!failed.to_string().contains("the fake says so"), "{failed}");
    assert!(all_rows(&app, &token).await.is_empty());
    let synced = sync(&app, &token, &connection).await;
    assert_eq!(synced["transactions"]["created"], 5, "{synced}");
    let pages = requests_to(&app, "transactions/sync");
    // The sync after the failure started again from no cursor.
    assert_eq!(pages.len(), 5, "{pages:?}");
    assert!(pages[2].get("cursor").is_none(), "{pages:?}");
}

/// Five more changes after the first feed (cursor `c5`), in pages of two: `c5` brings a new
/// row and a modified one, `c7` another new row and a removal, `c9` a last new row.
fn second_log() -> Vec<Change> {
    vec![
        Change::Added(tx(
            "tx-books",
            "acc-checking",
            23.0,
            "2026-11-22",
            "CORNER BOOKSHOP",
            false,
        )),
        Change::Modified(tx(
            "tx-grocery",
            "acc-checking",
            60.0,
            "2026-11-18",
            "CORNER GROCERY",
            false,
        )),
        Change::Added(tx(
            "tx-cinema",
            "acc-card",
            14.0,
            "2026-11-22",
            "CINEMA",
            false,
        )),
        Change::Removed("acc-card", "tx-refund"),
        Change::Added(tx("tx-taxi", "acc-card", 31.5, "2026-11-23", "TAXI", false)),
    ]
}

async fn a_failure_on_a_later_page_keeps_the_stored_cursor_and_no_row(app: TestApp) {
    let (_, token, _) = app.user("later-page@example.com").await;
    let connection = connect(&app, &token).await;
    sync(&app, &token, &connection).await;
    let before = all_rows(&app, &token).await;
    assert_eq!(before.len(), 5);
    let asked = {
        let mut fake = fake(&app);
        fake.log.extend(second_log());
        // Page 2 of the 3 pages after the stored cursor fails.
        fake.fail_at = Some(fake.sync_requests + 2);
        fake.requests.len()
    };
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(502, "provider_error");
    let pages: Vec<Value> = fake(&app).requests[asked..]
        .iter()
        .filter(|(path, _)| path == "transactions/sync")
        .map(|(_, body)| body.clone())
        .collect();
    assert_eq!(pages.len(), 2, "{pages:?}");
    assert_eq!(pages[0]["cursor"], "c5");
    assert_eq!(pages[1]["cursor"], "c7");
    // Nothing of page 1 was kept: no new row, the modified row as it was, the removed row
    // still there.
    let after = all_rows(&app, &token).await;
    assert_eq!(after.len(), 5, "{after:?}");
    assert!(after.iter().all(|t| t["description"] != "CORNER BOOKSHOP"));
    assert_eq!(row(&after, "CORNER GROCERY")["amount"], "-52.10");
    assert_eq!(row(&after, "REFUND")["amount"], "10.00");

    // The stored cursor is still the old one: the next sync reads from it again, and every
    // change lands once.
    let asked = fake(&app).requests.len();
    let synced = sync(&app, &token, &connection).await;
    let stats = &synced["transactions"];
    assert_eq!(stats["created"], 3, "{synced}");
    assert_eq!(stats["updated"], 1, "{synced}");
    assert_eq!(stats["removed"], 1, "{synced}");
    let pages: Vec<Value> = fake(&app).requests[asked..]
        .iter()
        .filter(|(path, _)| path == "transactions/sync")
        .map(|(_, body)| body.clone())
        .collect();
    let cursors: Vec<&Value> = pages.iter().map(|page| &page["cursor"]).collect();
    assert_eq!(cursors, [&json!("c5"), &json!("c7"), &json!("c9")]);
    let rows = all_rows(&app, &token).await;
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert_eq!(row(&rows, "CORNER GROCERY")["amount"], "-60.00");
    assert_eq!(row(&rows, "TAXI")["amount"], "-31.50");
    // And that sync saved the last page's cursor.
    let again = sync(&app, &token, &connection).await;
    assert_eq!(again["transactions"]["created"], 0, "{again}");
    let last = requests_to(&app, "transactions/sync");
    assert_eq!(last.last().expect("a page")["cursor"], "c10");
}

async fn a_mutation_restarts_from_the_stored_cursor_not_the_failed_page(app: TestApp) {
    let (_, token, _) = app.user("mutation-later@example.com").await;
    let connection = connect(&app, &token).await;
    sync(&app, &token, &connection).await;
    let asked = {
        let mut fake = fake(&app);
        fake.log.extend(second_log());
        // Page 2 of the 3 after the stored cursor meets a mutation.
        fake.mutate_at = Some(fake.sync_requests + 2);
        fake.requests.len()
    };
    let synced = sync(&app, &token, &connection).await;
    let stats = &synced["transactions"];
    // Page 1's changes, read twice, land once.
    assert_eq!(stats["created"], 3, "{synced}");
    assert_eq!(stats["updated"], 1, "{synced}");
    assert_eq!(stats["removed"], 1, "{synced}");
    let pages: Vec<Value> = fake(&app).requests[asked..]
        .iter()
        .filter(|(path, _)| path == "transactions/sync")
        .map(|(_, body)| body.clone())
        .collect();
    let cursors: Vec<&Value> = pages.iter().map(|page| &page["cursor"]).collect();
    // c5, the refused c7, then the whole loop again from c5 (the loop's first cursor).
    assert_eq!(
        cursors,
        [
            &json!("c5"),
            &json!("c7"),
            &json!("c5"),
            &json!("c7"),
            &json!("c9")
        ]
    );
    let rows = all_rows(&app, &token).await;
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert_eq!(
        rows.iter()
            .filter(|t| t["description"] == "CORNER BOOKSHOP")
            .count(),
        1
    );
}

async fn rate_limits_are_503_with_retry_after(app: TestApp) {
    let (_, token, _) = app.user("rate@example.com").await;
    let connection = connect(&app, &token).await;
    fake(&app).fail_next = Some((429, "RATE_LIMIT_EXCEEDED", "TRANSACTIONS_SYNC_LIMIT"));
    let limited = app
        .post(
            &format!("/api/v1/providers/{}/sync", id(&connection)),
            &json!({"force": true}),
            Some(&token),
        )
        .await;
    assert_eq!(limited.status, 503, "{:?}", limited.json());
    assert_eq!(limited.header("retry-after"), Some("17"));
    let read = app
        .get(
            &format!("/api/v1/providers/{}", id(&connection)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(read["status"], "active");
}

async fn login_required_expires_and_update_mode_renews(app: TestApp) {
    let (_, token, _) = app.user("relink@example.com").await;
    let connection = connect(&app, &token).await;
    sync(&app, &token, &connection).await;
    fake(&app).fail_next = Some((400, "ITEM_ERROR", "ITEM_LOGIN_REQUIRED"));
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(409, "conflict");
    app.expect_expired(&token, &connection).await;
    assert!(!app.expiries(&connection).await.is_empty());

    let exchanges = requests_to(&app, "item/public_token/exchange").len();
    let link = app
        .post(
            &format!("/api/v1/providers/{}/reauthorizations", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    assert!(link["link_token"].is_string(), "{link}");
    let created = requests_to(&app, "link/token/create");
    let update = created.last().expect("an update-mode link token");
    assert_eq!(update["access_token"], "access-sandbox-1");
    assert!(update.get("products").is_none());
    // Update mode finishes without a public token: same connection, active again.
    let renewed = app
        .post(
            "/api/v1/providers/callback",
            &json!({"state": link["state"]}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(renewed["id"], connection["id"]);
    assert_eq!(renewed["status"], "active");
    assert_eq!(
        requests_to(&app, "item/public_token/exchange").len(),
        exchanges
    );
    let again = sync(&app, &token, &connection).await;
    assert_eq!(again["transactions"]["created"], 0, "{again}");
    assert_eq!(all_rows(&app, &token).await.len(), 5);
}

async fn disconnecting_removes_the_item(app: TestApp) {
    let (_, token, _) = app.user("remove@example.com").await;
    let connection = connect(&app, &token).await;
    let path = format!("/api/v1/providers/{}", id(&connection));
    assert_eq!(app.delete(&path, None, Some(&token)).await.status, 204);
    aggregation_tests::eventually(|| !fake(&app).removed_items.is_empty()).await;
    assert_eq!(
        fake(&app).removed_items,
        vec!["access-sandbox-1".to_owned()]
    );
}

async fn wrong_keys_are_a_provider_error(app: TestApp) {
    let (_, token, _) = app.user("keys@example.com").await;
    app.post(
        "/api/v1/providers",
        &json!({"provider_slug": "plaid"}),
        Some(&token),
    )
    .await
    .expect_problem(502, "provider_error");
    let listed = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 0);
}

async fn verified_webhooks_sync_expire_and_revoke(app: TestApp) {
    let (_, token, _) = app.user("hooks@example.com").await;
    let connection = connect(&app, &token).await;
    // New data: one background sync of the item's connection.
    let body = webhook("TRANSACTIONS", "SYNC_UPDATES_AVAILABLE", None);
    let answer = post_webhook(&app, &body, Some(&verification(SIGNING_KEY, KID, 0, &body))).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json());
    assert_eq!(answer.json()["received"], true);
    aggregation_tests::eventually(|| fake(&app).sync_requests >= 3).await;
    let mut rows = Vec::new();
    for _ in 0..200 {
        rows = all_rows(&app, &token).await;
        if rows.len() == 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(rows.len(), 5, "the webhook's sync wrote the feed");
    // The key was fetched once and is cached.
    let unknown = webhook("WHATEVER", "SOMETHING_NEW", None);
    let ignored = post_webhook(
        &app,
        &unknown,
        Some(&verification(SIGNING_KEY, KID, 0, &unknown)),
    )
    .await;
    assert_eq!(ignored.status, 200);
    assert_eq!(requests_to(&app, "webhook_verification_key/get").len(), 1);

    // Access ends soon: connection.expiring.
    let body = webhook("ITEM", "PENDING_EXPIRATION", None);
    let answer = post_webhook(&app, &body, Some(&verification(SIGNING_KEY, KID, 0, &body))).await;
    assert_eq!(answer.status, 200);
    let user_id =
        uuid::Uuid::parse_str(connection["user_id"].as_str().expect("user")).expect("uuid");
    let mut expiring = 0;
    for _ in 0..200 {
        expiring = app
            .store
            .user_events_after(user_id, None, 100)
            .await
            .expect("events")
            .iter()
            .filter(|event| event.event_type.as_str() == "connection.expiring")
            .count();
        if expiring > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(expiring, 1);

    // The login is needed again: expired, with its event.
    let body = webhook("ITEM", "ERROR", Some("ITEM_LOGIN_REQUIRED"));
    let answer = post_webhook(&app, &body, Some(&verification(SIGNING_KEY, KID, 0, &body))).await;
    assert_eq!(answer.status, 200);
    let path = format!("/api/v1/providers/{}", id(&connection));
    let mut status = Value::Null;
    for _ in 0..200 {
        status = app.get(&path, Some(&token)).await.expect(200)["status"].clone();
        if status == "expired" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, "expired");
    let expiries = app.expiries(&connection).await;
    assert_eq!(
        expiries.last().expect("an expiry")["reason"],
        "login_required"
    );

    // Revoked at Plaid.
    let body = webhook("ITEM", "USER_PERMISSION_REVOKED", None);
    let answer = post_webhook(&app, &body, Some(&verification(SIGNING_KEY, KID, 0, &body))).await;
    assert_eq!(answer.status, 200);
    for _ in 0..200 {
        status = app.get(&path, Some(&token)).await.expect(200)["status"].clone();
        if status == "revoked" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, "revoked");
}

async fn unverified_webhooks_are_401_and_do_nothing(app: TestApp) {
    let (_, token, _) = app.user("forged@example.com").await;
    let connection = connect(&app, &token).await;
    let body = webhook("ITEM", "ERROR", Some("ITEM_LOGIN_REQUIRED"));
    let other = webhook("ITEM", "ERROR", Some("ITEM_LOCKED"));
    let hs256 = {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some(KID.to_owned());
        use sha2::Digest as _;
        let claims = json!({"iat": chrono::Utc::now().timestamp(),
                            "request_body_sha256": hex::encode(sha2::Sha256::digest(&body))});
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(KEY_X.as_bytes()),
        )
        .expect("signed")
    };
    let none = {
        use base64::Engine as _;
        use sha2::Digest as _;
        let b64 = |value: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
        };
        format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "typ": "JWT", "kid": KID})),
            b64(&json!({"iat": chrono::Utc::now().timestamp(),
                        "request_body_sha256": hex::encode(sha2::Sha256::digest(&body))}))
        )
    };
    let cases: Vec<(&str, Option<String>)> = vec![
        ("missing header", None),
        ("empty header", Some(String::new())),
        (
            "another body's digest",
            Some(verification(SIGNING_KEY, KID, 0, &other)),
        ),
        (
            "an old iat",
            Some(verification(SIGNING_KEY, KID, 6 * 60, &body)),
        ),
        ("HS256", Some(hs256)),
        ("alg none", Some(none)),
        (
            "an unknown kid",
            Some(verification(SIGNING_KEY, "no-such-key", 0, &body)),
        ),
        ("another key", Some(verification(FORGER_KEY, KID, 0, &body))),
        ("not a JWT", Some("not.a.jwt".to_owned())),
    ];
    for (case, header) in &cases {
        let answer = post_webhook(&app, &body, header.as_deref()).await;
        assert_eq!(answer.status, 401, "{case}: {:?}", answer.json());
    }
    // Nothing was done: still active, no expiry, no sync.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let read = app
        .get(
            &format!("/api/v1/providers/{}", id(&connection)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(read["status"], "active");
    assert!(app.expiries(&connection).await.is_empty());
    assert!(requests_to(&app, "transactions/sync").is_empty());
    // A slug that takes no webhooks is 404; a body over 64 KiB is 413.
    let mut request = http::Request::builder()
        .method(http::Method::POST)
        .uri("/api/v1/provider-webhooks/schwab-sandbox")
        .header(http::header::CONTENT_TYPE, "application/json");
    request = request.header(
        "Plaid-Verification",
        verification(SIGNING_KEY, KID, 0, &body),
    );
    let unknown = app
        .send(
            request
                .body(http_body_util::Full::new(bytes::Bytes::from(body.clone())))
                .expect("request"),
        )
        .await;
    assert_eq!(unknown.status, 404);
    let large = vec![b' '; 65 * 1024];
    let too_large = post_webhook(
        &app,
        &large,
        Some(&verification(SIGNING_KEY, KID, 0, &large)),
    )
    .await;
    assert_eq!(too_large.status, 413);
}

/// The spec's flow for a Plaid connection: connect, `POST /accounts/syncs` (accounts and
/// balances only), `POST /transactions/syncs` (the feed), `POST /accounts/{id}/holdings/syncs`.
async fn the_flow_endpoints_sync_a_plaid_connection(app: TestApp) {
    let (_, token, _) = app.user("flow@example.com").await;
    let connection = connect(&app, &token).await;
    let body = json!({"connection_id": id(&connection)});
    let accounts = app
        .post("/api/v1/accounts/syncs", &body, Some(&token))
        .await
        .expect(201);
    assert_eq!(accounts["created"], 3, "{accounts}");
    assert_eq!(requests_to(&app, "accounts/get").len(), 1);
    // Accounts only: the feed was not read, no row written.
    assert!(requests_to(&app, "transactions/sync").is_empty());
    assert!(all_rows(&app, &token).await.is_empty());
    let listed = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let checking = listed["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|a| a["account_type"] == "checking")
        .cloned()
        .expect("checking");
    assert_eq!(checking["balance_amount"], "1200.40");

    let transactions = app
        .post("/api/v1/transactions/syncs", &body, Some(&token))
        .await
        .expect(201);
    assert_eq!(transactions["created"], 5, "{transactions}");
    assert_eq!(transactions["removed"], 0, "{transactions}");
    // The whole feed in pages of two, from no cursor.
    let pages = requests_to(&app, "transactions/sync");
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(pages[0].get("cursor").is_none(), "{pages:?}");
    let rows = all_rows(&app, &token).await;
    assert_eq!(rows.len(), 5);
    assert_eq!(row(&rows, "SQ *BLUE BOTTLE")["amount"], "-4.50");

    // The pending coffee posts: the next transactions sync goes on from the stored cursor.
    {
        let mut fake = fake(&app);
        let mut posted = tx(
            "tx-coffee",
            "acc-checking",
            4.5,
            "2026-11-21",
            "SQ *BLUE BOTTLE",
            false,
        );
        posted["pending_transaction_id"] = json!("tx-coffee-p");
        fake.log.push(Change::Added(posted));
        fake.log
            .push(Change::Removed("acc-checking", "tx-coffee-p"));
    }
    let forced = json!({"connection_id": id(&connection), "force": true});
    let again = app
        .post("/api/v1/transactions/syncs", &forced, Some(&token))
        .await
        .expect(201);
    assert_eq!(again["created"], 0, "{again}");
    assert_eq!(again["updated"], 1, "{again}");
    let pages = requests_to(&app, "transactions/sync");
    assert_eq!(pages.last().expect("a page")["cursor"], "c5", "{pages:?}");
    let rows = all_rows(&app, &token).await;
    assert_eq!(rows.len(), 5);
    assert_eq!(row(&rows, "SQ *BLUE BOTTLE")["status"], "settled");

    // Holdings of the investment account.
    let invest = listed["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|a| a["account_type"] == "brokerage")
        .cloned()
        .expect("brokerage");
    let holdings = app
        .post(
            &format!("/api/v1/accounts/{}/holdings/syncs", id(&invest)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(holdings["created"], 1, "{holdings}");
    let held = app
        .get(
            &format!("/api/v1/accounts/{}/holdings", id(&invest)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(held["holdings"][0]["symbol"], "VTI", "{held}");
}

/// A fresh `POST /providers` state is not a reauthorization: its callback without a public
/// token is refused and the user's expired connection stays expired (Link never ran for it).
/// A reauthorization's state renews exactly its connection, renamed meanwhile or not, and one
/// disconnected meanwhile is not brought back.
async fn only_a_reauthorization_finishes_without_a_public_token(app: TestApp) {
    let (_, token, _) = app.user("fresh-state@example.com").await;
    let connection = expired_connection(&app, &token).await;
    let created_before = events_of(&app, &connection, "connection.created")
        .await
        .len();
    // Same provider and alias as the expired connection.
    let fresh = start(&app, &token).await;
    let refused = app
        .post(
            "/api/v1/providers/callback",
            &json!({"state": fresh["state"]}),
            Some(&token),
        )
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(refused.to_string().contains("public_token"), "{refused}");
    app.expect_expired(&token, &connection).await;
    let listed = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 1, "{listed}");
    assert_eq!(
        events_of(&app, &connection, "connection.created")
            .await
            .len(),
        created_before,
        "nothing was authorized"
    );
    // The state was spent: the same callback again is an unknown state.
    app.post(
        "/api/v1/providers/callback",
        &json!({"state": fresh["state"]}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");
    app.expect_expired(&token, &connection).await;

    // A reauthorization, the connection renamed before its callback: that connection renews.
    let link = app
        .post(
            &format!("/api/v1/providers/{}/reauthorizations", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    app.call(
        http::Method::PATCH,
        &format!("/api/v1/providers/{}", id(&connection)),
        Some(&json!({"alias": "Renamed"})),
        Some(&token),
    )
    .await
    .expect(200);
    let renewed = app
        .post(
            "/api/v1/providers/callback",
            &json!({"state": link["state"]}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(renewed["id"], connection["id"]);
    assert_eq!(renewed["status"], "active");
    assert_eq!(renewed["alias"], "Renamed");
    let listed = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 1, "{listed}");
    let created = events_of(&app, &connection, "connection.created").await;
    assert_eq!(created.len(), created_before + 1);
    assert_eq!(created.last().expect("renewed")["reauthorized"], true);

    // A reauthorization whose connection is disconnected before its callback: refused, and
    // the connection stays disconnected.
    let link = app
        .post(
            &format!("/api/v1/providers/{}/reauthorizations", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    let path = format!("/api/v1/providers/{}", id(&connection));
    assert_eq!(app.delete(&path, None, Some(&token)).await.status, 204);
    app.post(
        "/api/v1/providers/callback",
        &json!({"state": link["state"]}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");
    assert_eq!(status_of(&app, &token, &connection).await, "disconnected");
}

/// `PENDING_DISCONNECT` raises `connection.expiring` as `PENDING_EXPIRATION` does, and
/// changes nothing else.
async fn pending_disconnect_raises_connection_expiring(app: TestApp) {
    let (_, token, _) = app.user("pending-disconnect@example.com").await;
    let connection = connect(&app, &token).await;
    post_signed_webhook(&app, &webhook("ITEM", "PENDING_DISCONNECT", None)).await;
    let expiring = events_once(&app, &connection, "connection.expiring", 1).await;
    assert_eq!(
        expiring[0],
        json!({"connection_id": id(&connection), "provider": "plaid",
               "reason": "pending_disconnect"})
    );
    post_signed_webhook(&app, &webhook("ITEM", "PENDING_EXPIRATION", None)).await;
    let expiring = events_once(&app, &connection, "connection.expiring", 2).await;
    assert_eq!(expiring[1]["reason"], "pending_expiration");
    assert_eq!(status_of(&app, &token, &connection).await, "active");
    assert!(app.expiries(&connection).await.is_empty());
}

/// `USER_PERMISSION_REVOKED` makes the connection `revoked` with `connection.revoked`, which
/// the audit trail lists; a repeated webhook raises nothing more, and a disconnected
/// connection stays disconnected.
async fn a_revocation_raises_its_event_and_spares_a_disconnect(app: TestApp) {
    let (_, token, _) = app.user("revoked@example.com").await;
    let connection = connect(&app, &token).await;
    let revoked = webhook("ITEM", "USER_PERMISSION_REVOKED", None);
    post_signed_webhook(&app, &revoked).await;
    let events = events_once(&app, &connection, "connection.revoked", 1).await;
    assert_eq!(
        events[0],
        json!({"connection_id": id(&connection), "provider": "plaid",
               "reason": "permission_revoked"})
    );
    let read = app
        .get(
            &format!("/api/v1/providers/{}", id(&connection)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(read["status"], "revoked", "{read}");
    assert_eq!(read["needs_reauthentication"], true, "{read}");
    let (_, admin, _) = app.user(ADMIN).await;
    let audit = app
        .get(
            &format!(
                "/api/v1/admin/audit-events?type=connection.revoked&user_id={}",
                connection["user_id"].as_str().expect("user_id")
            ),
            Some(&admin),
        )
        .await
        .expect(200);
    let listed = audit["events"].as_array().expect("events");
    assert_eq!(listed.len(), 1, "{audit}");
    assert_eq!(listed[0]["type"], "connection.revoked");
    assert_eq!(listed[0]["data"]["connection_id"], connection["id"]);
    // Plaid delivers again: still revoked, one event.
    post_signed_webhook(&app, &revoked).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        events_of(&app, &connection, "connection.revoked")
            .await
            .len(),
        1
    );

    // A disconnected connection: the revocation leaves it disconnected, with no event.
    let (_, other_token, _) = app.user("revoked-gone@example.com").await;
    let gone = connect(&app, &other_token).await;
    let path = format!("/api/v1/providers/{}", id(&gone));
    assert_eq!(
        app.delete(&path, None, Some(&other_token)).await.status,
        204
    );
    let mut body: Value = serde_json::from_slice(&revoked).expect("json");
    body["item_id"] = json!("item-2");
    let body = serde_json::to_vec(&body).expect("json");
    post_signed_webhook(&app, &body).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(status_of(&app, &other_token, &gone).await, "disconnected");
    assert!(
        events_of(&app, &gone, "connection.revoked")
            .await
            .is_empty()
    );
}

conformance!(setup = plaid;
    verified_webhooks_sync_expire_and_revoke,
    unverified_webhooks_are_401_and_do_nothing,
    links_and_exchanges_the_public_token,
    syncs_page_the_feed_and_flip_signs,
    a_rule_has_the_last_word_over_the_providers_merchant_name,
    posted_rows_take_over_pending_and_removed_rows_go,
    a_mutation_during_paging_restarts_from_the_first_cursor,
    a_failed_sync_keeps_the_cursor,
    a_failure_on_a_later_page_keeps_the_stored_cursor_and_no_row,
    a_mutation_restarts_from_the_stored_cursor_not_the_failed_page,
    rate_limits_are_503_with_retry_after,
    login_required_expires_and_update_mode_renews,
    disconnecting_removes_the_item,
    the_flow_endpoints_sync_a_plaid_connection,
    only_a_reauthorization_finishes_without_a_public_token,
    pending_disconnect_raises_connection_expiring,
    a_revocation_raises_its_event_and_spares_a_disconnect,
);

mod keys {
    use super::*;
    conformance!(setup = wrong_keys; wrong_keys_are_a_provider_error);
}
