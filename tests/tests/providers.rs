//! Provider connections and syncs against the Schwab-compatible sandbox over real OAuth.

use aggregation_core::jobs::{REFRESH_PROVIDER_TOKENS, RunOutcome, SYNC_CONNECTIONS};
use aggregation_core::store::ConnectionStatus;
use aggregation_tests::{BASE_URL, Setup, TestApp, conformance};
use http::Method;
use serde_json::{Value, json};

fn sandbox() -> Setup {
    aggregation_tests::sandbox_setup()
}

fn sandbox_refreshing_everything() -> Setup {
    let mut setup = aggregation_tests::sandbox_setup();
    // Every token is "about to expire", so the refresh job has work.
    setup.config = setup
        .config
        .with_token_refresh_margin(std::time::Duration::from_secs(24 * 3600));
    setup
}

fn sandbox_with_short_states() -> Setup {
    let mut setup = aggregation_tests::sandbox_setup();
    setup.config = setup
        .config
        .with_oauth_state_ttl(std::time::Duration::from_secs(1));
    setup
}

fn sandbox_with_bound_callbacks() -> Setup {
    let mut setup = aggregation_tests::sandbox_setup();
    setup.config = setup.config.with_oauth_callback_requires_auth(true);
    setup
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

async fn callback(
    app: &TestApp,
    query: &str,
    bearer: Option<&str>,
) -> aggregation_tests::TestResponse {
    app.call(
        Method::POST,
        &format!("/api/v1/providers/callback{query}"),
        None,
        bearer,
    )
    .await
}

async fn connect_is_validated(app: TestApp) {
    let (_, token, _) = app.user("connect@example.com").await;
    let path = "/api/v1/providers";
    app.post(path, &json!({"provider_slug": "schwab-sandbox"}), None)
        .await
        .expect_problem(401, "unauthorized");
    let missing = app.post(path, &json!({}), Some(&token)).await;
    let body = missing.expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "provider_slug");
    app.post(path, &json!({"provider_slug": "nope"}), Some(&token))
        .await
        .expect_problem(404, "not_found");
    app.post(path, &json!({"provider_slug": "file_import"}), Some(&token))
        .await
        .expect_problem(400, "command_validation_failed");
    let foreign =
        json!({"provider_slug": "schwab-sandbox", "redirect_uri": "https://evil.example/cb"});
    let body = app
        .post(path, &foreign, Some(&token))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "redirect_uri");

    let started = app
        .post(
            path,
            &json!({"provider_slug": "schwab-sandbox", "alias": "Main"}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(started["expires_in"], 600);
    let state = started["state"].as_str().expect("state");
    assert_eq!(state.len(), 43, "32 random bytes, base64url");
    let url = started["authorization_url"].as_str().expect("url");
    assert!(url.contains("/v1/oauth/authorize?"), "{url}");
    assert!(url.contains(&format!("state={state}")), "{url}");
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert!(
        url.contains("redirect_uri=https%3A%2F%2Fapp.example.com%2Fconnected"),
        "{url}"
    );
    // The other allowed redirect URI is accepted and used.
    let other =
        json!({"provider_slug": "schwab-sandbox", "redirect_uri": "https://app.example.com/other"});
    let started = app.post(path, &other, Some(&token)).await.expect(201);
    assert!(
        started["authorization_url"]
            .as_str()
            .is_some_and(|url| url.contains("app.example.com%2Fother"))
    );
}

async fn oauth_flow_creates_and_manages_a_connection(app: TestApp) {
    let (user_id, token, _) = app.user("flow@example.com").await;
    let connection = app.connect_sandbox(&token, Some("Brokerage")).await;
    assert_eq!(connection["user_id"], user_id.as_str());
    assert_eq!(connection["provider_slug"], "schwab-sandbox");
    assert_eq!(connection["alias"], "Brokerage");
    assert_eq!(connection["status"], "active");
    assert_eq!(connection["is_connected"], true);
    assert_eq!(connection["needs_reauthentication"], false);
    assert_eq!(connection["last_sync_at"], Value::Null);
    assert!(
        connection["provider_id"]
            .as_str()
            .is_some_and(|id| id.len() == 36)
    );
    for field in ["connected_at", "created_at", "updated_at"] {
        assert!(
            connection[field].as_str().is_some_and(|t| t.ends_with('Z')),
            "{field}"
        );
    }
    let path = format!("/api/v1/providers/{}", id(&connection));

    // Credentials are stored encrypted, never as the provider's tokens.
    let stored = app
        .store
        .connection_for_user(
            user_id.parse().expect("uuid"),
            id(&connection).parse().expect("uuid"),
        )
        .await
        .expect("store")
        .expect("connection");
    let sealed = stored.encrypted_credentials.expect("credentials");
    assert!(!String::from_utf8_lossy(&sealed).contains("access_token"));
    assert_eq!(stored.credentials_key_id.as_deref(), Some("test"));

    let list = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(list["total_count"], 1);
    assert_eq!(list["active_count"], 1);
    assert_eq!(list["connections"][0]["id"], connection["id"]);
    assert_eq!(
        app.get(&path, Some(&token)).await.expect(200)["alias"],
        "Brokerage"
    );

    let renamed = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"alias": "Retirement"})),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(renamed["alias"], "Retirement");
    let untouched = app
        .call(Method::PATCH, &path, Some(&json!({})), Some(&token))
        .await
        .expect(200);
    assert_eq!(untouched["alias"], "Retirement");
    app.call(
        Method::PATCH,
        &path,
        Some(&json!({"alias": 5})),
        Some(&token),
    )
    .await
    .expect_problem(422, "validation_failed");

    // Another user sees none of it.
    let (_, other, _) = app.user("other@example.com").await;
    app.get(&path, Some(&other))
        .await
        .expect_problem(404, "not_found");
    app.call(
        Method::PATCH,
        &path,
        Some(&json!({"alias": "x"})),
        Some(&other),
    )
    .await
    .expect_problem(404, "not_found");
    app.delete(&path, None, Some(&other))
        .await
        .expect_problem(404, "not_found");
    assert_eq!(
        app.get("/api/v1/providers", Some(&other)).await.expect(200)["total_count"],
        0
    );

    assert_eq!(app.delete(&path, None, Some(&token)).await.status, 204);
    let gone = app.get(&path, Some(&token)).await.expect(200);
    assert_eq!(gone["status"], "disconnected");
    assert_eq!(gone["is_connected"], false);
    assert_eq!(
        app.delete(&path, None, Some(&token)).await.status,
        204,
        "idempotent"
    );
    let active = app
        .get("/api/v1/providers?active_only=true", Some(&token))
        .await
        .expect(200);
    assert_eq!(active["total_count"], 0);
    let all = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(all["total_count"], 1, "kept for audit");
    let stored = app
        .store
        .connection_for_user(
            user_id.parse().expect("uuid"),
            id(&connection).parse().expect("uuid"),
        )
        .await
        .expect("store")
        .expect("connection");
    assert_eq!(stored.status, ConnectionStatus::Disconnected);
    assert_eq!(stored.encrypted_credentials, None, "credentials cleared");
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": id(&connection)}),
        Some(&token),
    )
    .await
    .expect_problem(400, "command_validation_failed");
}

async fn callback_failures_follow_the_rules(app: TestApp) {
    let (_, token, _) = app.user("callback@example.com").await;
    let body = callback(&app, "", None)
        .await
        .expect_problem(422, "validation_failed");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|error| error["field"].as_str())
        .collect();
    assert_eq!(fields, ["query.code", "query.state"]);
    let unknown = callback(&app, "?code=abc&state=unknown", None)
        .await
        .expect_problem(400, "command_validation_failed");

    // A code the provider refuses is a 502 whose type starts with the service's address, and
    // the state is spent.
    let started = app
        .post(
            "/api/v1/providers",
            &json!({"provider_slug": "schwab-sandbox"}),
            Some(&token),
        )
        .await
        .expect(201);
    let state = started["state"].as_str().expect("state");
    let refused = callback(&app, &format!("?code=forged&state={state}"), None)
        .await
        .expect_problem(502, "provider_error");
    assert_eq!(refused["title"], "Provider Error");
    assert!(
        refused["type"]
            .as_str()
            .is_some_and(|t| t.starts_with(BASE_URL))
    );
    callback(&app, &format!("?code=forged&state={state}"), None)
        .await
        .expect_problem(400, "command_validation_failed");

    // A bearer token of another user than the state's is refused, and spends the state.
    let query = app.authorized_callback_query(&token, None).await;
    let (_, intruder, _) = app.user("intruder@example.com").await;
    let refused = callback(&app, &query, Some(&intruder))
        .await
        .expect_problem(400, "command_validation_failed");
    // Answered exactly as an unknown state: nothing tells the intruder the state exists.
    assert_eq!(refused["detail"], unknown["detail"]);
    assert_eq!(refused["title"], unknown["title"]);
    callback(&app, &query, Some(&token))
        .await
        .expect_problem(400, "command_validation_failed");

    // The state's own user may send their token; a code works once.
    let query = app.authorized_callback_query(&token, None).await;
    callback(&app, &query, Some(&token)).await.expect(201);
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        1
    );

    // Concurrent callbacks with one state: exactly one proceeds.
    let query = app.authorized_callback_query(&token, Some("race")).await;
    let (first, second) = tokio::join!(callback(&app, &query, None), callback(&app, &query, None));
    let mut statuses = [first.status.as_u16(), second.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 400]);
}

async fn expired_states_are_refused(app: TestApp) {
    let (_, token, _) = app.user("late@example.com").await;
    let query = app.authorized_callback_query(&token, None).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    callback(&app, &query, None)
        .await
        .expect_problem(400, "command_validation_failed");
}

async fn reauthorizing_keeps_the_connection(app: TestApp) {
    let (_, token, _) = app.user("again@example.com").await;
    let first = app.connect_sandbox(&token, None).await;
    let second = app.connect_sandbox(&token, None).await;
    assert_eq!(first["id"], second["id"]);
    let third = app.connect_sandbox(&token, Some("Other")).await;
    assert_ne!(first["id"], third["id"]);
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        2
    );
}

async fn syncs_write_records_with_statistics(app: TestApp) {
    let (_, token, _) = app.user("sync@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let connection_id = id(&connection).to_owned();
    let body = json!({"connection_id": connection_id});

    let accounts = app
        .post("/api/v1/accounts/syncs", &body, Some(&token))
        .await
        .expect(201);
    assert_eq!(accounts["created"], 2);
    assert_eq!(accounts["accounts_created"], 2);
    assert_eq!(accounts["updated"], 0);
    assert_eq!(accounts["errors"], json!([]));
    assert!(accounts["message"].as_str().is_some_and(|m| !m.is_empty()));
    let limited = app
        .post("/api/v1/accounts/syncs", &body, Some(&token))
        .await;
    limited.expect_problem(429, "rate_limit_exceeded");
    let retry: u64 = limited
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=300).contains(&retry), "{retry}");
    let forced = app
        .post(
            "/api/v1/accounts/syncs",
            &json!({"connection_id": connection_id, "force": true}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(
        (forced["created"].as_u64(), forced["unchanged"].as_u64()),
        (Some(0), Some(2))
    );

    let listed = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    assert_eq!(listed["total_count"], 2);
    let account = listed["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|account| account["account_number_masked"] == "****5678")
        .expect("the sandbox's margin account")
        .clone();
    assert!(
        account["account_number_masked"]
            .as_str()
            .is_some_and(|m| m.starts_with("****"))
    );
    let snapshots = app
        .get("/api/v1/balance-snapshots", Some(&token))
        .await
        .expect(200);
    assert_eq!(snapshots["total_count"], 2);
    assert_eq!(snapshots["snapshots"][0]["source"], "account_sync");
    let refreshed = app
        .get(&format!("/api/v1/providers/{connection_id}"), Some(&token))
        .await
        .expect(200);
    assert!(refreshed["last_sync_at"].as_str().is_some());

    let transactions = app
        .post("/api/v1/transactions/syncs", &body, Some(&token))
        .await
        .expect(201);
    let created = transactions["created"].as_u64().expect("created");
    assert!(created > 0);
    assert_eq!(transactions["transactions_created"], created);
    assert_eq!(transactions["transactions_updated"], 0);
    let again = app
        .post(
            "/api/v1/transactions/syncs",
            &json!({"connection_id": connection_id, "account_id": id(&account), "force": true}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(again["created"], 0, "nothing new for one account");
    assert!(
        again["unchanged"]
            .as_u64()
            .is_some_and(|n| n > 0 && n <= created)
    );
    let page = app
        .get(
            &format!("/api/v1/accounts/{}/transactions", id(&account)),
            Some(&token),
        )
        .await
        .expect(200);
    assert!(page["total_count"].as_u64().is_some_and(|n| n > 0));

    let holdings_path = format!("/api/v1/accounts/{}/holdings/syncs", id(&account));
    let holdings = app
        .post(&holdings_path, &json!({}), Some(&token))
        .await
        .expect(201);
    assert_eq!(holdings["created"], 3);
    assert_eq!(holdings["holdings_created"], 3);
    assert_eq!(holdings["deactivated"], 0);
    app.post(&holdings_path, &json!({}), Some(&token))
        .await
        .expect_problem(429, "rate_limit_exceeded");
    let symbol = app
        .get(
            &format!("/api/v1/accounts/{}/holdings", id(&account)),
            Some(&token),
        )
        .await
        .expect(200)["holdings"][0]["symbol"]
        .as_str()
        .expect("symbol")
        .to_owned();
    assert!(app.sandbox().remove_position(&symbol));
    let after = app
        .post(&holdings_path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
    assert_eq!(after["deactivated"], 1);
    assert_eq!(after["holdings_deactivated"], 1);
    assert_eq!(after["unchanged"], 2);
    let active = app
        .get(
            &format!("/api/v1/accounts/{}/holdings", id(&account)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(active["total_count"], 2, "active holdings only by default");
    let history = app
        .get(
            &format!(
                "/api/v1/accounts/{}/balance-snapshots?source=holdings_sync",
                id(&account)
            ),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(history["total_count"], 2);
    assert!(history["snapshots"][0]["holdings_value"].as_str().is_some());

    let whole = app
        .post(
            &format!("/api/v1/providers/{connection_id}/sync"),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    // The removed position changed the margin account's value: updated, not duplicated.
    assert_eq!(whole["accounts"]["created"], 0);
    assert_eq!(
        whole["accounts"]["updated"]
            .as_u64()
            .zip(whole["accounts"]["unchanged"].as_u64()),
        Some((1, 1))
    );
    assert_eq!(whole["transactions"]["created"], 0);
    assert!(
        whole["holdings"]["unchanged"]
            .as_u64()
            .is_some_and(|n| n >= 2)
    );
    assert!(whole["message"].as_str().is_some());
    let manual = app
        .get(
            &format!(
                "/api/v1/accounts/{}/balance-snapshots?source=manual_sync",
                id(&account)
            ),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(manual["total_count"], 1);
}

async fn sync_requests_are_validated_and_scoped(app: TestApp) {
    let (_, token, _) = app.user("scope@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let connection_id = id(&connection);
    app.post("/api/v1/accounts/syncs", &json!({}), Some(&token))
        .await
        .expect_problem(422, "validation_failed");
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": "nope"}),
        Some(&token),
    )
    .await
    .expect_problem(422, "validation_failed");
    app.post(
        "/api/v1/transactions/syncs",
        &json!({"connection_id": connection_id, "start_date": "2024-02-01", "end_date": "2024-01-01"}),
        Some(&token),
    )
    .await
    .expect_problem(422, "validation_failed");
    app.post(
        "/api/v1/transactions/syncs",
        &json!({"connection_id": connection_id, "start_date": "yesterday"}),
        Some(&token),
    )
    .await
    .expect_problem(422, "validation_failed");
    app.post(
        "/api/v1/transactions/syncs",
        &json!({"connection_id": connection_id, "account_id": uuid::Uuid::now_v7()}),
        Some(&token),
    )
    .await
    .expect_problem(404, "not_found");
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": connection_id}),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
    let (_, other, _) = app.user("stranger@example.com").await;
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": connection_id}),
        Some(&other),
    )
    .await
    .expect_problem(404, "not_found");
    app.post(
        &format!("/api/v1/providers/{connection_id}/sync"),
        &json!({}),
        Some(&other),
    )
    .await
    .expect_problem(404, "not_found");
    app.post(
        &format!("/api/v1/accounts/{}/holdings/syncs", uuid::Uuid::now_v7()),
        &json!({}),
        Some(&token),
    )
    .await
    .expect_problem(404, "not_found");
}

async fn provider_failures_are_502_and_write_nothing(app: TestApp) {
    let (_, token, _) = app.user("down@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let body = json!({"connection_id": id(&connection)});
    app.sandbox().set_failing(true);
    app.post("/api/v1/accounts/syncs", &body, Some(&token))
        .await
        .expect_problem(502, "provider_error");
    assert_eq!(
        app.get("/api/v1/accounts", Some(&token)).await.expect(200)["total_count"],
        0
    );
    app.sandbox().set_failing(false);
    // A failed sync does not start the cool-down.
    app.post("/api/v1/accounts/syncs", &body, Some(&token))
        .await
        .expect(201);
}

async fn provider_tokens_refresh_and_expire(app: TestApp) {
    let (_, token, _) = app.user("tokens@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let path = format!("/api/v1/providers/{}/token-refreshes", id(&connection));
    let calm = app.post(&path, &json!({}), Some(&token)).await.expect(201);
    assert_eq!(calm["success"], true);
    let requests = app.sandbox().token_requests();
    let forced = app
        .post(&path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
    assert_eq!(forced["success"], true);
    assert!(
        forced["expires_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(app.sandbox().token_requests(), requests + 1);

    // An access token the provider no longer takes is refreshed on the way.
    app.sandbox().expire_access_tokens();
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": id(&connection)}),
        Some(&token),
    )
    .await
    .expect(201);

    app.sandbox().revoke_refresh_tokens();
    app.post(&path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(502, "provider_error");
    let expired = app
        .get(
            &format!("/api/v1/providers/{}", id(&connection)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(expired["status"], "expired");
    assert_eq!(expired["needs_reauthentication"], true);
    assert_eq!(expired["is_connected"], false);
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": id(&connection), "force": true}),
        Some(&token),
    )
    .await
    .expect_problem(409, "conflict");
    // Authorizing again brings the same connection back.
    let again = app.connect_sandbox(&token, None).await;
    assert_eq!(again["id"], connection["id"]);
    assert_eq!(again["status"], "active");
}

async fn jobs_refresh_tokens_and_sync_connections(app: TestApp) {
    let (_, token, _) = app.user("jobs@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let requests = app.sandbox().token_requests();
    let jobs = app.service.jobs();
    let outcome = jobs.run_once(REFRESH_PROVIDER_TOKENS).await.expect("run");
    assert!(
        matches!(&outcome, RunOutcome::Succeeded(summary) if summary.contains("refreshed tokens of 1")),
        "{outcome:?}"
    );
    assert_eq!(app.sandbox().token_requests(), requests + 1);
    let outcome = jobs.run_once(SYNC_CONNECTIONS).await.expect("run");
    assert!(
        matches!(&outcome, RunOutcome::Succeeded(summary) if summary.contains("synced 1")),
        "{outcome:?}"
    );
    let synced = app
        .get(
            &format!("/api/v1/providers/{}", id(&connection)),
            Some(&token),
        )
        .await
        .expect(200);
    assert!(synced["last_sync_at"].as_str().is_some());
    let snapshots = app
        .get("/api/v1/balance-snapshots", Some(&token))
        .await
        .expect(200);
    assert_eq!(snapshots["total_count"], 2);
    assert_eq!(snapshots["snapshots"][0]["source"], "scheduled_sync");
}

/// Token refreshes of one connection from every path at once (explicit refreshes, the four
/// syncs after the provider stopped taking the access token, the background job): the sandbox
/// rotates refresh tokens and refuses a spent one, yet none is presented twice, every request
/// succeeds and the connection stays active.
async fn concurrent_refreshes_and_syncs_keep_the_connection(app: TestApp) {
    let (_, token, _) = app.user("racing@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let connection_id = id(&connection).to_owned();
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": connection_id}),
        Some(&token),
    )
    .await
    .expect(201);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let account_id = accounts["accounts"][0]["id"]
        .as_str()
        .expect("account")
        .to_owned();
    let refresh_path = format!("/api/v1/providers/{connection_id}/token-refreshes");
    let mut requests: Vec<(String, Value)> = Vec::new();
    for _ in 0..6 {
        requests.push((refresh_path.clone(), json!({"force": true})));
    }
    requests.push((refresh_path.clone(), json!({})));
    let forced = json!({"connection_id": connection_id, "force": true});
    requests.push(("/api/v1/accounts/syncs".to_owned(), forced.clone()));
    requests.push(("/api/v1/transactions/syncs".to_owned(), forced));
    requests.push((
        format!("/api/v1/accounts/{account_id}/holdings/syncs"),
        json!({"force": true}),
    ));
    requests.push((
        format!("/api/v1/providers/{connection_id}/sync"),
        json!({"force": true}),
    ));
    let jobs = app.service.jobs();
    for round in 0..3 {
        // Every data call now needs a refresh first.
        app.sandbox().expire_access_tokens();
        let calls = requests
            .iter()
            .map(|(path, body)| app.post(path, body, Some(&token)));
        let (answers, job) = tokio::join!(
            futures_util::future::join_all(calls),
            jobs.run_once(REFRESH_PROVIDER_TOKENS)
        );
        for ((path, _), answer) in requests.iter().zip(&answers) {
            assert_eq!(
                answer.status.as_u16(),
                201,
                "round {round}, {path}: {}",
                String::from_utf8_lossy(&answer.body)
            );
        }
        assert!(
            matches!(&job, Ok(RunOutcome::Succeeded(summary)) if summary.contains("0 failed")),
            "round {round}: {job:?}"
        );
    }
    assert_eq!(
        app.sandbox().refresh_token_reuses(),
        0,
        "no refresh token was presented twice"
    );
    let after = app
        .get(&format!("/api/v1/providers/{connection_id}"), Some(&token))
        .await
        .expect(200);
    assert_eq!(after["status"], "active");
    assert_eq!(after["needs_reauthentication"], false);
    // The tokens in store are the latest: a refresh still works.
    app.post(&refresh_path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
}

conformance!(setup = sandbox;
    connect_is_validated,
    pkce_binds_each_code_to_its_connect,
    oauth_flow_creates_and_manages_a_connection,
    callback_failures_follow_the_rules,
    reauthorizing_keeps_the_connection,
    syncs_write_records_with_statistics,
    sync_requests_are_validated_and_scoped,
    provider_failures_are_502_and_write_nothing,
    provider_tokens_refresh_and_expire,
);

/// The query parameters of an address, as sent (not percent-decoded).
fn query_params(url: &str) -> std::collections::HashMap<String, String> {
    let query = url
        .split_once('?')
        .map(|(_, query)| query)
        .unwrap_or_default();
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// Every connect gets its own PKCE verifier, kept encrypted with the state: the authorization
/// address carries only its S256 challenge, the code exchange sends the verifier, and the
/// sandbox refuses a code presented with another connect's verifier.
async fn pkce_binds_each_code_to_its_connect(app: TestApp) {
    let (_, token, _) = app.user("pkce@example.com").await;
    let start = || async {
        app.post(
            "/api/v1/providers",
            &json!({"provider_slug": "schwab-sandbox"}),
            Some(&token),
        )
        .await
        .expect(201)
    };
    let (first, second) = (start().await, start().await);
    let url = |started: &Value| {
        started["authorization_url"]
            .as_str()
            .expect("url")
            .to_owned()
    };
    let (first_url, second_url) = (url(&first), url(&second));
    let (first_params, second_params) = (query_params(&first_url), query_params(&second_url));
    for params in [&first_params, &second_params] {
        assert_eq!(params["code_challenge_method"], "S256");
        let challenge = &params["code_challenge"];
        assert_eq!(challenge.len(), 43, "base64url of a SHA-256");
        assert!(
            challenge
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert!(!params.contains_key("code_verifier"));
    }
    assert_ne!(
        first_params["code_challenge"], second_params["code_challenge"],
        "a verifier per connect"
    );

    // The verifier is stored encrypted (nonce, ciphertext, tag), never as itself.
    let digest = aggregation_core::crypto::token_digest(first["state"].as_str().expect("state"));
    let stored = app
        .store
        .take_oauth_state(&digest)
        .await
        .expect("store")
        .expect("the state");
    let sealed = stored.encrypted_pkce_verifier.clone().expect("a verifier");
    assert_eq!(stored.pkce_key_id.as_deref(), Some("test"));
    assert_eq!(sealed.len(), 12 + 43 + 16);
    // Put it back for the flow below.
    app.store.insert_oauth_state(&stored).await.expect("store");

    // A code presented with another connect's state (so its verifier) is refused by the
    // provider, both ways round; the codes are spent.
    let (first_code, first_state) = aggregation_tests::authorize(&first_url).await;
    let (second_code, second_state) = aggregation_tests::authorize(&second_url).await;
    callback(
        &app,
        &format!("?code={first_code}&state={second_state}"),
        None,
    )
    .await
    .expect_problem(502, "provider_error");
    callback(
        &app,
        &format!("?code={second_code}&state={first_state}"),
        None,
    )
    .await
    .expect_problem(502, "provider_error");
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        0
    );

    // With its own state, a code goes through.
    let connection = app.connect_sandbox(&token, None).await;
    assert_eq!(connection["status"], "active");
}

/// With callbacks bound to their user, a callback needs the bearer token of the user who
/// started connecting: none (or a bad one) is 401 and leaves the state usable; another user's
/// is answered as an unknown state and spends it.
async fn callbacks_bound_to_their_user(app: TestApp) {
    let (_, token, _) = app.user("owner@example.com").await;
    let (_, other, _) = app.user("someone@example.com").await;
    callback(&app, "", None)
        .await
        .expect_problem(401, "unauthorized");
    let query = app.authorized_callback_query(&token, None).await;
    let missing = callback(&app, &query, None).await;
    missing.expect_problem(401, "unauthorized");
    assert!(
        missing
            .header("www-authenticate")
            .is_some_and(|value| value.starts_with("Bearer"))
    );
    callback(&app, &query, Some("not-a-token"))
        .await
        .expect_problem(401, "unauthorized");
    // The state was not spent by the refusals: its user completes it.
    let connection = callback(&app, &query, Some(&token)).await.expect(201);
    assert_eq!(connection["status"], "active");

    let query = app.authorized_callback_query(&token, Some("second")).await;
    let unknown = callback(&app, "?code=abc&state=unknown", Some(&other))
        .await
        .expect_problem(400, "command_validation_failed");
    let foreign = callback(&app, &query, Some(&other))
        .await
        .expect_problem(400, "command_validation_failed");
    assert_eq!(foreign["detail"], unknown["detail"]);
    assert_eq!(foreign["title"], unknown["title"]);
    callback(&app, &query, Some(&token))
        .await
        .expect_problem(400, "command_validation_failed");
    assert_eq!(
        app.get("/api/v1/providers", Some(&other)).await.expect(200)["total_count"],
        0
    );
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        1
    );
}

mod bound_callbacks {
    use super::*;
    conformance!(setup = sandbox_with_bound_callbacks; callbacks_bound_to_their_user);
}

mod short_states {
    use super::*;
    conformance!(setup = sandbox_with_short_states; expired_states_are_refused);
}

mod refreshing_jobs {
    use super::*;
    conformance!(setup = sandbox_refreshing_everything;
        jobs_refresh_tokens_and_sync_connections,
        concurrent_refreshes_and_syncs_keep_the_connection,
    );
}

/// A request to a bare service: the status and the JSON body.
async fn instance_call(
    service: &aggregation_core::AggregationService,
    path: &str,
    body: &Value,
    bearer: Option<&str>,
) -> (u16, Value) {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    let mut request = http::Request::post(path).header("content-type", "application/json");
    if let Some(bearer) = bearer {
        request = request.header("authorization", format!("Bearer {bearer}"));
    }
    let mut request = request
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .expect("request");
    request
        .extensions_mut()
        .insert(aggregation_core::PeerAddr(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            40_000,
        ))));
    let response = service.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Two instances over one database, each with its own in-process refresh locks, refresh one
/// connection at once: a provider that rotates refresh tokens refuses the loser's copy, and
/// the loser reads the winner's credentials instead of marking the connection expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_refreshing_one_connection_keep_it_active() {
    use aggregation_core::AggregationService;
    use aggregation_core::mail::MemoryMailer;
    use aggregation_core::providers::SchwabProvider;
    use aggregation_sandbox::SchwabSandbox;

    let shared = aggregation_tests::SharedDatabase::open().await;
    let sandbox = SchwabSandbox::new();
    let served = aggregation_tests::serve_sandbox(sandbox.clone()).await;
    let mailer = MemoryMailer::new();
    let instance = |store| {
        AggregationService::builder(aggregation_tests::sandbox_setup().config)
            .shared_store(store)
            .mailer(mailer.clone())
            .provider(SchwabProvider::new(sandbox.config(served.base.clone())).expect("provider"))
            .build()
            .expect("service builds")
    };
    let first = instance(shared.first.clone());
    let second = instance(shared.second.clone());

    let email = "twice@example.com";
    let credentials = json!({"email": email, "password": aggregation_tests::PASSWORD});
    assert_eq!(
        instance_call(&first, "/api/v1/users", &credentials, None)
            .await
            .0,
        201
    );
    let emails = mailer
        .wait_for(email, 1, std::time::Duration::from_secs(10))
        .await;
    let verification = aggregation_tests::extract_hex_token(&emails[0].text).expect("token");
    let verified = instance_call(
        &first,
        "/api/v1/email-verifications",
        &json!({"token": verification}),
        None,
    )
    .await;
    assert_eq!(verified.0, 201, "{}", verified.1);
    let (status, session) = instance_call(&first, "/api/v1/sessions", &credentials, None).await;
    assert_eq!(status, 201, "{session}");
    let token = session["access_token"].as_str().expect("token").to_owned();
    let (status, started) = instance_call(
        &first,
        "/api/v1/providers",
        &json!({"provider_slug": "schwab-sandbox"}),
        Some(&token),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    let (code, state) =
        aggregation_tests::authorize(started["authorization_url"].as_str().expect("url")).await;
    let (status, connection) = instance_call(
        &second,
        &format!("/api/v1/providers/callback?code={code}&state={state}"),
        &json!({}),
        None,
    )
    .await;
    assert_eq!(status, 201, "{connection}");
    let connection_id = id(&connection).to_owned();
    let refresh = format!("/api/v1/providers/{connection_id}/token-refreshes");
    let sync = format!("/api/v1/providers/{connection_id}/sync");
    let forced = json!({"force": true});

    for round in 0..3 {
        sandbox.expire_access_tokens();
        let calls = (0..8).map(|i| {
            let service = if i % 2 == 0 { &first } else { &second };
            let path = if i < 6 { &refresh } else { &sync };
            instance_call(service, path, &forced, Some(&token))
        });
        for (status, body) in futures_util::future::join_all(calls).await {
            assert_eq!(status, 201, "round {round} on {:?}: {body}", shared.backend);
        }
    }
    let (_, after) = instance_call(&first, &refresh, &forced, Some(&token)).await;
    assert_eq!(after["success"], true, "{after}");
    let stored = shared
        .first
        .connection_by_id(connection_id.parse().expect("uuid"))
        .await
        .expect("store")
        .expect("connection");
    assert_eq!(stored.status, ConnectionStatus::Active);
    drop((first, second, served));
    shared.cleanup().await;
}
