//! SimpleFIN through the three fronts and both stores, against a fake bridge served over plain
//! HTTP on loopback (the sandbox bridge, `AGG_SIMPLEFIN_ALLOW_HTTP`'s test mode): the provider
//! list, setup-token connects, syncs with balances, bridge errors and split windows, pending
//! transactions that book, expiry and reauthorization, and the request budget.

use aggregation_core::AggregationServiceBuilder;
use aggregation_core::jobs::{RunOutcome, SYNC_CONNECTIONS};
use aggregation_core::providers::{RequestBudget, SimplefinConfig, SimplefinProvider};
use aggregation_sandbox::{CHECKING_ID, SANDBOX_ERROR, SimplefinSandbox};
use aggregation_tests::proxy::{Fault, FaultProxy};
use aggregation_tests::simplefin::{Bridge, bridge, provider_config, serve, with_simplefin};
use aggregation_tests::{Setup, TestApp, conformance};
use base64::Engine as _;
use serde_json::{Value, json};

fn with_budgeted_simplefin(builder: AggregationServiceBuilder) -> AggregationServiceBuilder {
    let config = SimplefinConfig {
        budget: Some(RequestBudget::daily(1)),
        ..provider_config()
    };
    builder.provider(SimplefinProvider::new(config).expect("provider"))
}

/// The provider with its default budget (24 requests a day).
fn with_default_simplefin(builder: AggregationServiceBuilder) -> AggregationServiceBuilder {
    let config = SimplefinConfig {
        budget: SimplefinConfig::default().budget,
        ..provider_config()
    };
    builder.provider(SimplefinProvider::new(config).expect("provider"))
}

fn defaults() -> Setup {
    let mut setup = simplefin();
    setup.builder_hook = Some(with_default_simplefin);
    setup
}

/// The provider with timeouts of a second, for a bridge that hangs.
fn with_hasty_simplefin(builder: AggregationServiceBuilder) -> AggregationServiceBuilder {
    let config = SimplefinConfig {
        connect_timeout: std::time::Duration::from_secs(1),
        request_timeout: std::time::Duration::from_secs(1),
        ..provider_config()
    };
    builder.provider(SimplefinProvider::new(config).expect("provider"))
}

fn hasty() -> Setup {
    let mut setup = simplefin();
    setup.builder_hook = Some(with_hasty_simplefin);
    setup
}

fn simplefin() -> Setup {
    let mut setup = aggregation_tests::sandbox_setup();
    setup.sandbox = None;
    setup.builder_hook = Some(with_simplefin);
    setup
}

fn budgeted() -> Setup {
    let mut setup = simplefin();
    setup.builder_hook = Some(with_budgeted_simplefin);
    setup
}

/// A fake bridge reached through a fault proxy (its claim and access URLs name the proxy),
/// so a case can make it hang.
struct ProxiedBridge {
    bridge: Bridge,
    proxy: FaultProxy,
}

async fn proxied_bridge() -> ProxiedBridge {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let proxy = FaultProxy::start(listener.local_addr().expect("address")).await;
    let sandbox = SimplefinSandbox::new(format!("http://{}/simplefin", proxy.address()));
    ProxiedBridge {
        bridge: serve(listener, sandbox),
        proxy,
    }
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

async fn connect(app: &TestApp, token: &str, bridge: &Bridge) -> Value {
    app.post(
        "/api/v1/providers",
        &json!({"provider_slug": "simplefin", "alias": "Bank", "setup_token": bridge.sandbox.setup_token()}),
        Some(token),
    )
    .await
    .expect(201)
}

/// A new user with a connection to a fresh bridge whose accounts are synced.
async fn connected_and_synced(app: &TestApp, email: &str) -> (String, Bridge, Value) {
    let (_, token, _) = app.user(email).await;
    let bridge = bridge().await;
    let connection = connect(app, &token, &bridge).await;
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": id(&connection)}),
        Some(&token),
    )
    .await
    .expect(201);
    (token, bridge, connection)
}

async fn supported_providers_are_listed(app: TestApp) {
    let (_, token, _) = app.user("list@example.com").await;
    app.get("/api/v1/supported-providers", None)
        .await
        .expect_problem(401, "unauthorized");
    let list = app
        .get("/api/v1/supported-providers", Some(&token))
        .await
        .expect(200);
    let providers = list["providers"].as_array().expect("providers");
    let simplefin = providers
        .iter()
        .find(|p| p["slug"] == "simplefin")
        .expect("simplefin offered");
    assert_eq!(simplefin["connect"], "setup_token");
    assert_eq!(simplefin["needs_institution"], false);
    assert_eq!(simplefin["countries"], json!(["US", "CA"]));
    assert_eq!(simplefin["name"], "SimpleFIN Bridge");
    assert!(providers.iter().all(|p| p["slug"] != "file_import"));

    let institutions = "/api/v1/supported-providers/simplefin/institutions?country=US";
    let body = app
        .get(institutions, Some(&token))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["code"], "no_institutions");
    app.get(
        "/api/v1/supported-providers/nope/institutions?country=US",
        Some(&token),
    )
    .await
    .expect_problem(404, "not_found");
    for bad in ["USA", "1X", ""] {
        let body = app
            .get(
                &format!("/api/v1/supported-providers/simplefin/institutions?country={bad}"),
                Some(&token),
            )
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(body["errors"][0]["field"], "query.country");
    }
}

async fn setup_tokens_connect_once(app: TestApp) {
    let (_, token, _) = app.user("connect@example.com").await;
    let bridge = bridge().await;
    let path = "/api/v1/providers";
    let missing = app
        .post(path, &json!({"provider_slug": "simplefin"}), Some(&token))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(missing["errors"][0]["field"], "setup_token");
    let encode = |url: &str| base64::engine::general_purpose::STANDARD.encode(url);
    // Not base64 of a URL, a host that is not allowed, a scheme that is not allowed: 400,
    // and the server calls nobody.
    for bad in [
        "%%% not base64 %%%".to_owned(),
        encode("not a url"),
        encode("http://10.1.2.3/simplefin/claim/x"),
        encode("http://localhost/simplefin/claim/x"),
        encode("ftp://127.0.0.1/simplefin/claim/x"),
        encode("http://user:pw@127.0.0.1/simplefin/claim/x"),
        // Other spellings of the allowed address never pass.
        encode("http://2130706433/simplefin/claim/x"),
        encode("http://127.1/simplefin/claim/x"),
        encode("http://0x7f.1/simplefin/claim/x"),
    ] {
        app.post(
            path,
            &json!({"provider_slug": "simplefin", "setup_token": bad}),
            Some(&token),
        )
        .await
        .expect_problem(400, "command_validation_failed");
    }
    // Nothing listening: 502 with a fixed detail (no OS error, nothing to probe ports with).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let closed_port = closed.local_addr().expect("address").port();
    drop(closed);
    let unreachable = app
        .post(
            path,
            &json!({"provider_slug": "simplefin",
                "setup_token": encode(&format!("http://127.0.0.1:{closed_port}/simplefin/claim/x"))}),
            Some(&token),
        )
        .await
        .expect_problem(502, "provider_error");
    let detail = unreachable["detail"].as_str().unwrap_or_default();
    assert!(
        !detail.contains("os error") && !detail.to_lowercase().contains("refused"),
        "{detail}"
    );
    // A claim the bridge refuses (unknown token): 400.
    let port = bridge
        .sandbox
        .config()
        .bridge_hosts
        .first()
        .cloned()
        .expect("host");
    assert!(
        port.starts_with("127.0.0.1:"),
        "pinned to the sandbox's origin: {port}"
    );
    let setup_token = bridge.sandbox.setup_token();
    let decoded = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(&setup_token)
            .expect("base64"),
    )
    .expect("utf-8");
    let unknown = decoded.replace("/claim/", "/claim/unknown");
    app.post(
        path,
        &json!({"provider_slug": "simplefin", "setup_token": encode(&unknown)}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");
    // The bridge down: 502, the token not spent.
    bridge.sandbox.set_failing(true);
    app.post(
        path,
        &json!({"provider_slug": "simplefin", "setup_token": setup_token}),
        Some(&token),
    )
    .await
    .expect_problem(502, "provider_error");
    bridge.sandbox.set_failing(false);

    let connection = app
        .post(
            path,
            &json!({"provider_slug": "simplefin", "alias": "Bank", "setup_token": setup_token}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(connection["provider_slug"], "simplefin");
    assert_eq!(connection["status"], "active");
    assert_eq!(connection["alias"], "Bank");
    assert!(!connection.to_string().contains("access"));
    // Claimed once: the same token again is refused.
    app.post(
        path,
        &json!({"provider_slug": "simplefin", "setup_token": setup_token}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");
    let listed = app.get(path, Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 1);
    // A setup-token provider has no OAuth tokens to refresh.
    app.post(
        &format!("/api/v1/providers/{}/token-refreshes", id(&connection)),
        &json!({"force": true}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");
}

async fn syncs_map_accounts_balances_and_bridge_errors(app: TestApp) {
    let (_, token, _) = app.user("sync@example.com").await;
    let bridge = bridge().await;
    let connection = connect(&app, &token, &bridge).await;
    let synced = app
        .post(
            &format!("/api/v1/providers/{}/sync", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(synced["accounts"]["created"], 3);
    let errors = synced["accounts"]["errors"].as_array().expect("errors");
    assert!(
        errors
            .iter()
            .any(|e| e["item"] == "simplefin" && e["message"] == SANDBOX_ERROR),
        "{errors:?}"
    );
    assert_eq!(synced["transactions"]["created"], 7);
    assert_eq!(synced["transactions"]["removed"], 0);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let by_name = |name: &str| -> Value {
        accounts["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .find(|a| a["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .cloned()
            .expect("account")
    };
    let checking = by_name("Everyday Checking");
    assert_eq!(checking["account_type"], "checking");
    assert_eq!(checking["balance_amount"], "2450.17");
    assert_eq!(checking["available_balance_amount"], "2395.42");
    assert_eq!(checking["currency"], "USD");
    assert_eq!(checking["provider_account_id"], CHECKING_ID);
    assert_eq!(by_name("High Yield Savings")["account_type"], "savings");
    let visa = by_name("Rewards Visa");
    assert_eq!(visa["account_type"], "credit_card");
    assert_eq!(visa["balance_amount"], "-320.55");
    // The card's debt counts as a liability of the owner's net worth (money owed is negative).
    let worth = app.get("/api/v1/net-worth", Some(&token)).await.expect(200);
    let usd = worth["currencies"]
        .as_array()
        .expect("currencies")
        .iter()
        .find(|c| c["currency"] == "USD")
        .expect("USD");
    assert_eq!(usd["liabilities"], "-320.55");
    assert_eq!(usd["by_account_type"]["credit_card"], "-320.55");
    let snapshots = app
        .get("/api/v1/balance-snapshots", Some(&token))
        .await
        .expect(200);
    assert_eq!(snapshots["total_count"], 3);
    let transactions = app
        .get(
            &format!("/api/v1/accounts/{}/transactions", id(&checking)),
            Some(&token),
        )
        .await
        .expect(200);
    let pending: Vec<&Value> = transactions["transactions"]
        .as_array()
        .expect("transactions")
        .iter()
        .filter(|t| t["status"] == "pending")
        .collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["amount"], "-4.75");
    // Every bridge request carried the credentials as Basic, never in the URL.
    assert!(bridge.sandbox.requests().iter().all(|q| !q.contains('@')));
}

/// The same window synced three times; the pending transaction books between the first and
/// the second under a new id: the booked row takes the pending row over (keeping its id, so
/// whatever the user set on it), and nothing is ever duplicated.
async fn pending_transactions_book_without_duplicates(app: TestApp) {
    let (token, _bridge, connection) = connected_and_synced(&app, "pending@example.com").await;
    let today = chrono::Utc::now().date_naive();
    let mut window = json!({
        "connection_id": id(&connection),
        "start_date": (today - chrono::TimeDelta::days(60)).to_string(),
        "end_date": today.to_string(),
    });
    // The first is served by the accounts sync's answer (which had the row pending); the
    // others are forced, so asked afresh.
    let first = app
        .post("/api/v1/transactions/syncs", &window, Some(&token))
        .await
        .expect(201);
    window["force"] = json!(true);
    let sync = || app.post("/api/v1/transactions/syncs", &window, Some(&token));
    assert_eq!(first["created"], 7);
    assert_eq!(first["removed"], 0);
    assert_eq!(first["transactions_removed"], 0);
    let second = sync().await.expect(201);
    assert_eq!(second["created"], 0, "{second}");
    assert_eq!(second["updated"], 1, "{second}");
    assert_eq!(second["removed"], 0);
    assert_eq!(second["transactions_removed"], 0);
    assert_eq!(second["unchanged"], 6);
    let third = sync().await.expect(201);
    assert_eq!(third["created"], 0);
    assert_eq!(third["removed"], 0);
    assert_eq!(third["unchanged"], 7);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let checking = accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|a| a["provider_account_id"] == CHECKING_ID)
        .cloned()
        .expect("checking");
    let listed = app
        .get(
            &format!("/api/v1/accounts/{}/transactions", id(&checking)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(listed["total_count"], 4);
    let rows = listed["transactions"].as_array().expect("rows");
    assert!(rows.iter().all(|t| t["status"] == "settled"));
    assert_eq!(rows.iter().filter(|t| t["amount"] == "-4.75").count(), 1);
}

async fn long_windows_are_split(app: TestApp) {
    let (token, bridge, connection) = connected_and_synced(&app, "windows@example.com").await;
    let today = chrono::Utc::now().date_naive();
    let before = bridge.sandbox.requests().len();
    app.post(
        "/api/v1/transactions/syncs",
        &json!({
            "connection_id": id(&connection),
            "start_date": (today - chrono::TimeDelta::days(199)).to_string(),
            "end_date": today.to_string(),
        }),
        Some(&token),
    )
    .await
    .expect(201);
    let requests = bridge.sandbox.requests();
    let checking: Vec<&String> = requests[before..]
        .iter()
        .filter(|q| q.contains(&format!("account={CHECKING_ID}")))
        .collect();
    // 200 days in windows of at most 90: three requests, each with pending=1.
    assert_eq!(checking.len(), 3, "{checking:?}");
    assert!(
        checking.iter().all(|q| q.contains("pending=1")
            && q.contains("start-date=")
            && q.contains("end-date="))
    );
}

async fn bridge_failures_are_502_and_revocations_expire(app: TestApp) {
    let (_, token, _) = app.user("expiry@example.com").await;
    let bridge = bridge().await;
    let connection = connect(&app, &token, &bridge).await;
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    bridge.sandbox.set_failing(true);
    app.post(&sync_path, &json!({}), Some(&token))
        .await
        .expect_problem(502, "provider_error");
    bridge.sandbox.set_failing(false);
    // The user revoked the app at the bridge: the connection expires, with its event.
    bridge.sandbox.revoke_access();
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(409, "conflict");
    app.expect_expired(&token, &connection).await;
    let expiries = app.expiries(&connection).await;
    let expiry = expiries.first().expect("connection.expired raised");
    assert_eq!(expiry["connection_id"], connection["id"]);
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(409, "conflict");
    // A new setup token renews the same connection.
    let reauthorize = format!("/api/v1/providers/{}/reauthorizations", id(&connection));
    app.post(&reauthorize, &json!({}), Some(&token))
        .await
        .expect_problem(422, "validation_failed");
    let renewed = app
        .post(
            &reauthorize,
            &json!({"setup_token": bridge.sandbox.setup_token()}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(renewed["id"], connection["id"]);
    assert_eq!(renewed["status"], "active");
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        1
    );
}

/// A bridge that accepts connections and never answers costs the configured timeout (a
/// second here), then the sync is a provider failure (502) that writes nothing; once the
/// bridge answers again, syncs work.
async fn a_hung_bridge_is_a_502_after_the_timeout(app: TestApp) {
    let (_, token, _) = app.user("hung@example.com").await;
    let proxied = proxied_bridge().await;
    let connection = connect(&app, &token, &proxied.bridge).await;
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    proxied.proxy.set(Fault::Blackhole);
    app.post(&sync_path, &json!({}), Some(&token))
        .await
        .expect_problem(502, "provider_error");
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    assert_eq!(accounts["total_count"], 0);
    let after = app
        .get(
            &format!("/api/v1/providers/{}", id(&connection)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(after["status"], "active");
    proxied.proxy.set(Fault::Pass);
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    assert!(accounts["total_count"].as_u64().is_some_and(|n| n > 0));
}

/// An access URL the bridge refuses (403: the user revoked the app at the bridge) expires the
/// connection with `connection.expired` whose reason says the access was revoked.
async fn revoked_access_is_reported_as_revoked(app: TestApp) {
    let (_, token, _) = app.user("revoked@example.com").await;
    let bridge = bridge().await;
    let connection = connect(&app, &token, &bridge).await;
    bridge.sandbox.revoke_access();
    app.post(
        &format!("/api/v1/providers/{}/sync", id(&connection)),
        &json!({}),
        Some(&token),
    )
    .await
    .expect_problem(409, "conflict");
    assert_eq!(
        app.expiries(&connection).await,
        [json!({
            "connection_id": connection["id"],
            "provider": "simplefin",
            "reason": "access_revoked",
        })]
    );
}

/// The spec's flow right after connecting, without `force`, on the default budget: the
/// accounts sync asks the bridge once, and its answer serves the transactions sync that
/// follows (no second request). `force` asks the bridge afresh.
async fn the_spec_flow_sends_one_request(app: TestApp) {
    let (_, token, _) = app.user("flow@example.com").await;
    let bridge = bridge().await;
    let connection = connect(&app, &token, &bridge).await;
    let body = json!({"connection_id": id(&connection)});
    let accounts = app
        .post("/api/v1/accounts/syncs", &body, Some(&token))
        .await
        .expect(201);
    assert_eq!(accounts["created"], 3);
    let transactions = app
        .post("/api/v1/transactions/syncs", &body, Some(&token))
        .await
        .expect(201);
    assert_eq!(transactions["created"], 7, "{transactions}");
    let requests = bridge.sandbox.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(requests[0].contains("pending=1") && !requests[0].contains("balances-only"));
    let forced = json!({"connection_id": id(&connection), "force": true});
    app.post("/api/v1/transactions/syncs", &forced, Some(&token))
        .await
        .expect(201);
    assert!(bridge.sandbox.requests().len() > 1);
    // Another user's connection never gets this one's answer.
    let (_, other, _) = app.user("flow-other@example.com").await;
    let theirs = connect(&app, &other, &bridge).await;
    let before = bridge.sandbox.requests().len();
    let listed = app
        .post(
            "/api/v1/transactions/syncs",
            &json!({"connection_id": id(&theirs)}),
            Some(&other),
        )
        .await
        .expect(201);
    assert_eq!(listed["created"], 0, "no accounts of theirs yet: {listed}");
    assert_eq!(bridge.sandbox.requests().len(), before);
}

/// A range far beyond what the bridge serves is narrowed to a few windows, and the sync says
/// so.
async fn a_huge_range_is_narrowed(app: TestApp) {
    let (token, bridge, connection) = connected_and_synced(&app, "huge@example.com").await;
    let before = bridge.sandbox.requests().len();
    let synced = app
        .post(
            "/api/v1/transactions/syncs",
            &json!({
                "connection_id": id(&connection),
                "start_date": "1900-01-01",
                "end_date": "2200-12-31",
                "force": true,
            }),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(synced["created"], 7, "{synced}");
    let errors = synced["errors"].as_array().expect("errors");
    assert!(
        errors.iter().any(|e| e["item"] == "simplefin"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("narrowed"))),
        "{errors:?}"
    );
    // Three accounts, at most four 90-day windows each.
    let sent = bridge.sandbox.requests().len() - before;
    assert!(sent <= 3 * 5, "{sent}");
}

async fn the_request_budget_limits_syncs(app: TestApp) {
    let (_, token, _) = app.user("budget@example.com").await;
    let bridge = bridge().await;
    let connection = connect(&app, &token, &bridge).await;
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    app.post(&sync_path, &json!({}), Some(&token))
        .await
        .expect(201);
    let spent = app
        .post(&sync_path, &json!({"force": true}), Some(&token))
        .await;
    let body = spent.expect_problem(429, "rate_limit_exceeded");
    let retry_after: u64 = spent
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After");
    assert!(retry_after > 3600, "{retry_after}");
    assert_eq!(body["retry_after"], retry_after);
    // The background sync skips it rather than failing.
    let requests = bridge.sandbox.requests().len();
    let outcome = app
        .service
        .jobs()
        .run_once(SYNC_CONNECTIONS)
        .await
        .expect("run");
    assert!(matches!(outcome, RunOutcome::Succeeded(_)), "{outcome:?}");
    assert_eq!(bridge.sandbox.requests().len(), requests);
}

conformance!(setup = simplefin;
    supported_providers_are_listed,
    setup_tokens_connect_once,
    syncs_map_accounts_balances_and_bridge_errors,
    pending_transactions_book_without_duplicates,
    long_windows_are_split,
    a_huge_range_is_narrowed,
    bridge_failures_are_502_and_revocations_expire,
);

mod flow {
    use super::*;
    conformance!(setup = defaults; the_spec_flow_sends_one_request);
}

mod hung {
    use super::*;
    conformance!(setup = hasty; a_hung_bridge_is_a_502_after_the_timeout);
}

mod revoked {
    use super::*;
    conformance!(setup = simplefin; revoked_access_is_reported_as_revoked);
}

mod budget {
    use super::*;
    conformance!(setup = budgeted; the_request_budget_limits_syncs);
}
