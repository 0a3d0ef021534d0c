//! Enable Banking through the three fronts and both stores, against the sandbox API served on
//! loopback (it verifies the application JWT's signature and claims on every call): the
//! institutions list, connect and callback, a refusal at the bank, syncs with paging, pending
//! rows that book and balances as snapshots, an expired session and its reauthorization, the
//! request budget, and the disconnect that ends the session.

use std::sync::Arc;

use aggregation_core::jobs::{RunOutcome, SYNC_CONNECTIONS};
use aggregation_core::providers::{EnableBankingConfig, EnableBankingProvider, RequestBudget};
use aggregation_sandbox::EnableBankingSandbox;
use aggregation_tests::{REDIRECT_URI, Setup, TestApp, conformance};
use serde_json::{Value, json};

const FI_BANK_ID: &str = "FI:Sandbox Nordic Bank";

/// The sandbox API on a loopback socket, stopped when dropped.
struct Served {
    sandbox: EnableBankingSandbox,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The sandbox served on loopback, and the setup offering `enablebanking` against it with
/// `budget`. Called from the case's runtime.
fn served_setup(budget: Option<RequestBudget>) -> Setup {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.set_nonblocking(true).expect("non-blocking");
    let address = listener.local_addr().expect("address");
    let base = format!("http://{address}/enablebanking");
    let sandbox = EnableBankingSandbox::new(base.clone());
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    let app = axum::Router::new().nest_service("/enablebanking", sandbox.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut config = EnableBankingConfig::new(sandbox.application_id(), sandbox.private_key_pem())
        .with_base_url(base);
    config.budget = budget;
    let provider = EnableBankingProvider::new(config).expect("provider");
    let mut setup = aggregation_tests::sandbox_setup();
    setup.sandbox = None;
    setup.builder_with = Some(Box::new(move |builder| builder.provider(provider)));
    setup.context = Some(Arc::new(Served { sandbox, task }));
    setup
}

fn enablebanking() -> Setup {
    served_setup(None)
}

fn budgeted() -> Setup {
    let mut setup = served_setup(EnableBankingConfig::new("app", "key").budget);
    // Every connection is due for the background sync whenever it runs.
    // and its syncs do not wait for a cool-down after the user's.
    setup.config = setup
        .config
        .with_sync_connections_every(Some(std::time::Duration::ZERO))
        .with_sync_cooldown(std::time::Duration::ZERO);
    setup
}

fn sandbox(app: &TestApp) -> &EnableBankingSandbox {
    &app.context::<Served>().sandbox
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

/// The query of a redirect `Location`.
fn query_of(location: &str) -> String {
    location
        .split_once('?')
        .map(|(_, query)| query.to_owned())
        .expect("a query")
}

/// Starts connecting the Finnish bank: the authorization answer.
async fn start(app: &TestApp, token: &str) -> Value {
    app.post(
        "/api/v1/providers",
        &json!({"provider_slug": "enablebanking", "alias": "Bank", "institution_id": FI_BANK_ID}),
        Some(token),
    )
    .await
    .expect(201)
}

/// Approves an authorization at the sandbox bank and finishes it: the callback's answer.
async fn approve(app: &TestApp, token: &str, authorization: &Value) -> Value {
    let url = authorization["authorization_url"].as_str().expect("url");
    let location = sandbox(app).approve(url).expect("approved");
    assert!(location.starts_with(REDIRECT_URI), "{location}");
    app.post(
        &format!("/api/v1/providers/callback?{}", query_of(&location)),
        &json!({}),
        Some(token),
    )
    .await
    .expect(201)
}

async fn connect(app: &TestApp, token: &str) -> Value {
    let authorization = start(app, token).await;
    approve(app, token, &authorization).await
}

fn aspsp_requests(app: &TestApp) -> usize {
    sandbox(app)
        .requests()
        .iter()
        .filter(|request| request.starts_with("GET /aspsps"))
        .count()
}

async fn institutions_are_listed_and_cached(app: TestApp) {
    let (_, token, _) = app.user("institutions@example.com").await;
    let list = app
        .get("/api/v1/supported-providers", Some(&token))
        .await
        .expect(200);
    let provider = list["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .find(|p| p["slug"] == "enablebanking")
        .cloned()
        .expect("enablebanking offered");
    assert_eq!(provider["connect"], "oauth");
    assert_eq!(provider["needs_institution"], true);
    assert_eq!(provider["name"], "Enable Banking");
    let countries = provider["countries"].as_array().expect("countries");
    assert!(countries.contains(&json!("FI")) && countries.contains(&json!("DE")));

    let path = "/api/v1/supported-providers/enablebanking/institutions";
    let finnish = app
        .get(&format!("{path}?country=fi"), Some(&token))
        .await
        .expect(200);
    assert_eq!(finnish["total_count"], 1);
    let bank = &finnish["institutions"][0];
    assert_eq!(bank["id"], FI_BANK_ID);
    assert_eq!(bank["name"], EnableBankingSandbox::FI_BANK);
    assert_eq!(bank["country"], "FI");
    assert_eq!(bank["max_consent_days"], 180);
    let german = app
        .get(&format!("{path}?country=DE&q=SPARKASSE"), Some(&token))
        .await
        .expect(200);
    assert_eq!(german["total_count"], 1);
    assert_eq!(german["institutions"][0]["max_consent_days"], 90);
    let none = app
        .get(
            &format!("{path}?country=FI&q=nothing-like-it"),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(none["total_count"], 0);
    // Served from the cache within the hour: one request per country.
    let asked = aspsp_requests(&app);
    assert_eq!(asked, 2);
    app.get(&format!("{path}?country=FI"), Some(&token))
        .await
        .expect(200);
    assert_eq!(aspsp_requests(&app), asked);
}

async fn connects_through_the_bank(app: TestApp) {
    let (_, token, _) = app.user("connect@example.com").await;
    let path = "/api/v1/providers";
    let missing = app
        .post(
            path,
            &json!({"provider_slug": "enablebanking"}),
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(missing["errors"][0]["field"], "institution_id");
    let unknown = app
        .post(
            path,
            &json!({"provider_slug": "enablebanking", "institution_id": "FI:No Such Bank"}),
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(unknown["errors"][0]["field"], "institution_id");

    let authorization = start(&app, &token).await;
    let state = authorization["state"].as_str().expect("state");
    let sent = sandbox(&app).auth_requests();
    assert_eq!(sent.len(), 1);
    let auth = &sent[0];
    assert_eq!(auth["aspsp"]["name"], EnableBankingSandbox::FI_BANK);
    assert_eq!(auth["aspsp"]["country"], "FI");
    assert_eq!(auth["state"], state);
    assert_eq!(auth["redirect_url"], REDIRECT_URI);
    let valid_until = chrono::DateTime::parse_from_rfc3339(
        auth["access"]["valid_until"].as_str().expect("valid_until"),
    )
    .expect("RFC 3339");
    let asked = valid_until.with_timezone(&chrono::Utc) - chrono::Utc::now();
    assert!(
        asked > chrono::TimeDelta::days(179) && asked <= chrono::TimeDelta::days(180),
        "{asked}"
    );

    let connection = approve(&app, &token, &authorization).await;
    assert_eq!(connection["provider_slug"], "enablebanking");
    assert_eq!(connection["status"], "active");
    assert_eq!(connection["alias"], "Bank");
    assert!(!connection.to_string().contains("session"));
    assert_eq!(sandbox(&app).active_sessions().len(), 1);
    let listed = app.get(path, Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 1);
}

async fn a_refusal_at_the_bank_creates_nothing(app: TestApp) {
    let (_, token, _) = app.user("refusal@example.com").await;
    let authorization = start(&app, &token).await;
    let url = authorization["authorization_url"].as_str().expect("url");
    let location = sandbox(&app).deny(url).expect("denied");
    assert!(location.contains("error=access_denied"), "{location}");
    let callback = format!("/api/v1/providers/callback?{}", query_of(&location));
    let body = app
        .post(&callback, &json!({}), Some(&token))
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(body.to_string().contains("access_denied"), "{body}");
    // Nothing was created, no session was asked for, and the state is spent.
    let listed = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 0);
    assert!(
        sandbox(&app)
            .requests()
            .iter()
            .all(|request| !request.starts_with("POST /sessions"))
    );
    app.post(&callback, &json!({}), Some(&token))
        .await
        .expect_problem(400, "command_validation_failed");
}

fn account_named<'a>(accounts: &'a Value, account_type: &str) -> &'a Value {
    accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|a| a["account_type"] == account_type)
        .expect("account of the type")
}

async fn syncs_map_accounts_balances_and_pages(app: TestApp) {
    let (_, token, _) = app.user("sync@example.com").await;
    let connection = connect(&app, &token).await;
    let synced = app
        .post(
            &format!("/api/v1/providers/{}/sync", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(synced["accounts"]["created"], 2, "{synced}");
    assert_eq!(synced["transactions"]["created"], 9, "{synced}");
    assert_eq!(synced["transactions"]["errors"], json!([]));
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let current = account_named(&accounts, "checking");
    assert_eq!(current["balance_amount"], "1520.40");
    assert_eq!(current["available_balance_amount"], "1490.00");
    assert_eq!(current["currency"], "EUR");
    assert_eq!(current["name"], "Everyday Account");
    assert_eq!(current["account_number_masked"], "****8730");
    // The IBAN is kept masked only.
    assert!(!accounts.to_string().contains("FI4950009420028730"));
    let card = account_named(&accounts, "credit_card");
    assert_eq!(card["balance_amount"], "-312.55");
    // The card's debt is a liability of the owner's net worth.
    let worth = app.get("/api/v1/net-worth", Some(&token)).await.expect(200);
    let eur = worth["currencies"]
        .as_array()
        .expect("currencies")
        .iter()
        .find(|c| c["currency"] == "EUR")
        .cloned()
        .expect("EUR");
    assert_eq!(eur["liabilities"], "-312.55");
    assert_eq!(eur["by_account_type"]["credit_card"], "-312.55");
    let snapshots = app
        .get("/api/v1/balance-snapshots", Some(&token))
        .await
        .expect(200);
    assert_eq!(snapshots["total_count"], 2);
    // Six rows of the current account in pages of three: the second page was asked for.
    assert!(
        sandbox(&app)
            .requests()
            .iter()
            .any(|request| request.contains("/transactions?")
                && request.contains("continuation_key="))
    );
    let rows = app
        .get(
            &format!("/api/v1/accounts/{}/transactions", id(current)),
            Some(&token),
        )
        .await
        .expect(200);
    let rows = rows["transactions"].as_array().expect("rows");
    let coffee = rows
        .iter()
        .find(|t| t["amount"] == "-4.75")
        .expect("the pending coffee");
    assert_eq!(coffee["status"], "pending");
    let salary = rows
        .iter()
        .find(|t| t["amount"] == "2450.00")
        .expect("the salary");
    assert_eq!(salary["status"], "settled");
    assert_eq!(salary["description"], "Acme Oy: Salary");
    let grocery = rows
        .iter()
        .find(|t| t["amount"] == "-42.80")
        .expect("the grocery row without an entry reference");
    assert_eq!(
        grocery["description"],
        "Corner Grocery: Card purchase CORNER GROCERY"
    );
    // The bank's merchant category codes name the card purchases' categories.
    assert_eq!(grocery["category"], "FOOD_AND_DRINK_GROCERIES", "{grocery}");
    assert_eq!(grocery["category_source"], "merchant_code", "{grocery}");
    assert_eq!(coffee["category"], "FOOD_AND_DRINK_FAST_FOOD", "{coffee}");
    assert_eq!(coffee["category_source"], "merchant_code", "{coffee}");
    assert_eq!(salary["category_source"], Value::Null, "{salary}");
}

/// One window synced three times; the pending rows book between the first and the second:
/// each booked row takes its pending row over (keeping its id), and nothing is ever
/// duplicated.
async fn pending_rows_book_without_duplicates(app: TestApp) {
    let (_, token, _) = app.user("pending@example.com").await;
    let connection = connect(&app, &token).await;
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": id(&connection)}),
        Some(&token),
    )
    .await
    .expect(201);
    let today = chrono::Utc::now().date_naive();
    let window = json!({
        "connection_id": id(&connection),
        "start_date": (today - chrono::TimeDelta::days(60)).to_string(),
        "end_date": today.to_string(),
        "force": true,
    });
    let sync = || app.post("/api/v1/transactions/syncs", &window, Some(&token));
    let first = sync().await.expect(201);
    assert_eq!(first["created"], 9, "{first}");
    assert_eq!(first["removed"], 0);
    sandbox(&app).book_pending();
    let second = sync().await.expect(201);
    assert_eq!(second["created"], 0, "{second}");
    assert_eq!(second["updated"], 2, "{second}");
    assert_eq!(second["removed"], 0);
    assert_eq!(second["unchanged"], 7);
    let third = sync().await.expect(201);
    assert_eq!(third["created"], 0, "{third}");
    assert_eq!(third["removed"], 0);
    assert_eq!(third["unchanged"], 9);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let mut rows = Vec::new();
    for account in accounts["accounts"].as_array().expect("accounts") {
        let listed = app
            .get(
                &format!("/api/v1/accounts/{}/transactions", id(account)),
                Some(&token),
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
    assert_eq!(rows.len(), 9);
    assert!(rows.iter().all(|t| t["status"] == "settled"));
    assert_eq!(rows.iter().filter(|t| t["amount"] == "-4.75").count(), 1);
    assert_eq!(rows.iter().filter(|t| t["amount"] == "-23.10").count(), 1);
}

async fn an_expired_session_expires_and_reauthorization_keeps_the_accounts(app: TestApp) {
    let (_, token, _) = app.user("expiry@example.com").await;
    let connection = connect(&app, &token).await;
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    app.post(&sync_path, &json!({}), Some(&token))
        .await
        .expect(201);
    let before = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    // The bank is down: 502, the connection stays active.
    sandbox(&app).set_failing(true);
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(502, "provider_error");
    sandbox(&app).set_failing(false);
    // The consent ran out at the bank: the connection expires, with its event.
    sandbox(&app).set_sessions_expired(true);
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(409, "conflict");
    app.expect_expired(&token, &connection).await;
    assert!(!app.expiries(&connection).await.is_empty());
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(409, "conflict");

    // A reauthorization asks the same bank again and renews this connection.
    let reauthorization = app
        .post(
            &format!("/api/v1/providers/{}/reauthorizations", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    let sent = sandbox(&app).auth_requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1]["aspsp"]["name"], EnableBankingSandbox::FI_BANK);
    let renewed = approve(&app, &token, &reauthorization).await;
    assert_eq!(renewed["id"], connection["id"]);
    assert_eq!(renewed["status"], "active");
    let synced = app
        .post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
    // New account uids in the new session, the same accounts and records.
    assert_eq!(synced["accounts"]["created"], 0, "{synced}");
    assert_eq!(synced["transactions"]["created"], 0, "{synced}");
    let after = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let ids = |accounts: &Value| -> Vec<String> {
        let mut ids: Vec<String> = accounts["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .map(|a| id(a).to_owned())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&after), ids(&before));
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        1
    );
}

async fn a_consent_that_ended_expires_without_asking_the_bank(app: TestApp) {
    let (_, token, _) = app.user("consent-end@example.com").await;
    // The bank grants a consent that has already ended by the time anything is synced.
    sandbox(&app).set_granted_validity(Some(chrono::TimeDelta::seconds(-60)));
    let connection = connect(&app, &token).await;
    sandbox(&app).set_granted_validity(None);
    let asked_before = sandbox(&app).requests().len();
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    app.post(&sync_path, &json!({}), Some(&token))
        .await
        .expect_problem(409, "conflict");
    let data_calls: Vec<String> = sandbox(&app).requests()[asked_before..]
        .iter()
        .filter(|request| request.contains("/accounts") || request.contains("/sessions/"))
        .cloned()
        .collect();
    assert!(data_calls.is_empty(), "the bank was asked: {data_calls:?}");
    app.expect_expired(&token, &connection).await;
    assert_eq!(app.expiries(&connection).await.len(), 1);
}

async fn disconnecting_ends_the_session(app: TestApp) {
    let (_, token, _) = app.user("disconnect@example.com").await;
    let first = connect(&app, &token).await;
    assert_eq!(sandbox(&app).active_sessions().len(), 1);
    let path = format!("/api/v1/providers/{}", id(&first));
    assert_eq!(app.delete(&path, None, Some(&token)).await.status, 204);
    // Ended in the background, after the answer.
    aggregation_tests::eventually(|| !sandbox(&app).deleted_sessions().is_empty()).await;
    assert_eq!(sandbox(&app).deleted_sessions().len(), 1);
    assert!(sandbox(&app).active_sessions().is_empty());
    // The API failing does not block a disconnect.
    let second = connect(&app, &token).await;
    sandbox(&app).set_failing(true);
    let path = format!("/api/v1/providers/{}", id(&second));
    assert_eq!(app.delete(&path, None, Some(&token)).await.status, 204);
    sandbox(&app).set_failing(false);
    let listed = app
        .get("/api/v1/providers?active_only=true", Some(&token))
        .await
        .expect(200);
    assert_eq!(listed["total_count"], 0);
}

/// The default budget (4 unattended requests a day): the syncs the user asks for are
/// PSU-present (every data request carries `Psu-Ip-Address` and `Psu-User-Agent`) and not
/// limited by it, so the spec's flow and more work right after connecting; the background
/// job's syncs send no PSU headers and spend it, and once it is spent they are skipped.
async fn the_request_budget_limits_unattended_syncs(app: TestApp) {
    let (_, token, _) = app.user("budget@example.com").await;
    let connection = connect(&app, &token).await;
    let body = json!({"connection_id": id(&connection)});
    let before = sandbox(&app).data_requests().len();
    app.post("/api/v1/accounts/syncs", &body, Some(&token))
        .await
        .expect(201);
    let transactions = app
        .post("/api/v1/transactions/syncs", &body, Some(&token))
        .await
        .expect(201);
    assert!(
        transactions["created"].as_u64().is_some_and(|n| n > 0),
        "{transactions}"
    );
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    for _ in 0..3 {
        app.post(&sync_path, &json!({"force": true}), Some(&token))
            .await
            .expect(201);
    }
    let attended = sandbox(&app).data_requests()[before..].to_vec();
    assert!(attended.len() > 4, "{attended:?}");
    for request in &attended {
        assert_eq!(
            request.psu_ip_address.as_deref(),
            Some("127.0.0.1"),
            "{request:?}"
        );
        assert!(
            request
                .psu_user_agent
                .as_deref()
                .is_some_and(|agent| agent.starts_with("Mozilla/5.0")),
            "{request:?}"
        );
    }
    // The background job: its first pass spends the budget (unattended, no PSU headers).
    let run = || async {
        let outcome = app
            .service
            .jobs()
            .run_once(SYNC_CONNECTIONS)
            .await
            .expect("run");
        let RunOutcome::Succeeded(summary) = outcome else {
            panic!("{outcome:?}")
        };
        summary
    };
    let before = sandbox(&app).data_requests().len();
    let first = run().await;
    assert!(first.contains("synced 1 "), "{first}");
    let unattended = sandbox(&app).data_requests()[before..].to_vec();
    assert!(!unattended.is_empty());
    assert!(
        unattended
            .iter()
            .all(|r| r.psu_ip_address.is_none() && r.psu_user_agent.is_none()),
        "{unattended:?}"
    );
    // Each request counted: until the bucket is empty, a pass syncs; then it skips, asking
    // the bank nothing.
    let mut summary = first;
    let mut passes = 1;
    while !summary.contains("1 skipped") {
        passes += 1;
        assert!(passes <= 4, "four requests a day: {summary}");
        summary = run().await;
    }
    let requests = sandbox(&app).requests().len();
    let skipped = run().await;
    assert!(skipped.contains("1 skipped"), "{skipped}");
    assert_eq!(sandbox(&app).requests().len(), requests);
    // The user is still not limited by it.
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
}

conformance!(setup = enablebanking;
    institutions_are_listed_and_cached,
    connects_through_the_bank,
    a_refusal_at_the_bank_creates_nothing,
    syncs_map_accounts_balances_and_pages,
    pending_rows_book_without_duplicates,
    an_expired_session_expires_and_reauthorization_keeps_the_accounts,
    a_consent_that_ended_expires_without_asking_the_bank,
    disconnecting_ends_the_session,
);

mod budget {
    use super::*;
    conformance!(setup = budgeted; the_request_budget_limits_unattended_syncs);
}
