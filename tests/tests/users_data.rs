//! Conformance: users' own data. `GET /api/v1/users/me`, the streamed export (every section in
//! the reads' shapes, nothing secret, its own rate limit), and the erasure by the user (with
//! the password) or an administrator: access ends at once, every row goes (and no other
//! user's), the email registers again, a confirmation email, the `user.deleted` audit record,
//! an interrupted erasure resumed by the `erase_users` job, and provider connections ended at
//! the provider.

use std::sync::Arc;
use std::time::Duration;

use aggregation_core::Config;
use aggregation_core::events::{DurableEvent as _, UserDeleted};
use aggregation_core::jobs::{ERASE_USERS, RunOutcome};
use aggregation_core::providers::{EnableBankingConfig, EnableBankingProvider};
use aggregation_core::rate_limit::PolicyTable;
use aggregation_core::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewSnapshot, NewTransaction, NewUserErasure,
    SnapshotSource, TransactionStatus, TransactionType, now,
};
use aggregation_sandbox::EnableBankingSandbox;
use aggregation_tests::{PASSWORD, REDIRECT_URI, Setup, TestApp, conformance, test_config};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use uuid::Uuid;

const ME: &str = "/api/v1/users/me";
const EXPORT: &str = "/api/v1/users/me/export";
const ADMIN: &str = "admin@example.com";

fn admin_config() -> Config {
    let keyring =
        aggregation_core::Keyring::new(vec![("test".into(), vec![7; 32])]).expect("a 32-byte key");
    test_config()
        .with_admin_emails(vec![ADMIN.to_owned()])
        .with_keyring(keyring)
}

/// The built-in rate limits on (the other cases run with limiting off).
fn limited() -> Setup {
    Setup {
        config: admin_config(),
        policies: PolicyTable::builtin(),
        ..Setup::default()
    }
}

mod rate_limited {
    use super::*;

    conformance!(setup = limited; export_has_its_own_rate_limit);
}

conformance!(
    config = admin_config;
    me_is_the_callers_account,
    export_holds_every_section_in_the_reads_shapes_and_nothing_secret,
    erasure_needs_the_password_and_ends_access_at_once,
    erasure_deletes_everything_and_the_email_registers_again,
    admin_erases_a_user_and_the_audit_keeps_only_the_id,
    an_interrupted_erasure_resumes_with_the_job,
);

fn dec(text: &str) -> Decimal {
    text.parse().expect("decimal")
}

fn uuid(text: &str) -> Uuid {
    text.parse().expect("uuid")
}

/// Seeds one account with `transactions` transactions, a holding and a snapshot for the
/// user; the account id.
async fn seed(app: &TestApp, user_id: &str, transactions: usize) -> Uuid {
    let connection = app.active_connection(uuid(user_id), "bank", None).await;
    let account = NewAccount {
        provider_account_id: "brokerage".to_owned(),
        account_number: Some("123456789".to_owned()),
        name: "Brokerage".to_owned(),
        account_type: AccountType::Brokerage,
        currency: "USD".to_owned(),
        balance_amount: dec("1000.00"),
        available_balance_amount: None,
        is_active: true,
    };
    let account_id = app
        .store
        .upsert_accounts(connection.id, &[account], now())
        .await
        .expect("account")
        .ids[0];
    let rows: Vec<NewTransaction> = (0..transactions)
        .map(|n| NewTransaction {
            provider_transaction_id: format!("t{n}"),
            transaction_type: TransactionType::Trade,
            subtype: None,
            status: TransactionStatus::Settled,
            amount: dec("-12.34"),
            currency: "USD".to_owned(),
            description: Some(format!("payee {n}")),
            symbol: Some("ACME".to_owned()),
            security_name: None,
            quantity: Some(dec("1")),
            unit_price: Some(dec("12.34")),
            commission: None,
            transaction_date: chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("date")
                + chrono::TimeDelta::days(i64::try_from(n % 300).expect("small")),
            settlement_date: None,
            pending_transaction_id: None,
            merchant_code: None,
        })
        .collect();
    app.store
        .upsert_transactions(account_id, &rows, now())
        .await
        .expect("transactions");
    let holding = NewHolding {
        provider_holding_id: "acme".to_owned(),
        symbol: "ACME".to_owned(),
        security_name: Some("Acme Inc.".to_owned()),
        asset_type: AssetType::Equity,
        quantity: dec("10"),
        cost_basis: Some(dec("100.00")),
        market_value: dec("123.40"),
        currency: "USD".to_owned(),
        average_price: None,
        current_price: None,
        unrealized_gain_loss: None,
    };
    app.store
        .upsert_holdings(account_id, &[holding], now())
        .await
        .expect("holding");
    app.store
        .insert_snapshot(&NewSnapshot {
            account_id,
            balance: dec("1000.00"),
            available_balance: None,
            holdings_value: Some(dec("123.40")),
            cash_value: None,
            currency: "USD".to_owned(),
            source: SnapshotSource::AccountSync,
            captured_at: now(),
        })
        .await
        .expect("snapshot");
    account_id
}

/// Waits (at most 20 s) until the user's row is gone: the erasure finished.
async fn erased(app: &TestApp, user_id: &str) {
    for _ in 0..400 {
        if app
            .store
            .user_by_id(uuid(user_id))
            .await
            .expect("store")
            .is_none()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the erasure of {user_id} did not finish");
}

async fn me_is_the_callers_account(app: TestApp) {
    let (id, access, _) = app.user("me@example.com").await;
    let me = app.get(ME, Some(&access)).await.expect(200);
    assert_eq!(me["id"], id);
    assert_eq!(me["email"], "me@example.com");
    assert_eq!(me["email_verified"], true);
    assert_eq!(me["roles"], json!(["user"]));
    assert!(
        me["created_at"]
            .as_str()
            .is_some_and(|at| at.ends_with('Z'))
    );
    assert_eq!(
        me.as_object().map(|fields| fields.len()),
        Some(5),
        "exactly the documented fields: {me}"
    );
    app.get(ME, None).await.expect_problem(401, "unauthorized");
    app.get(ME, Some("not-a-token"))
        .await
        .expect_problem(401, "unauthorized");
    let (_, admin, _) = app.user(ADMIN).await;
    let roles = app.get(ME, Some(&admin)).await.expect(200)["roles"].clone();
    assert!(
        roles
            .as_array()
            .is_some_and(|roles| roles.contains(&json!("admin"))),
        "{roles}"
    );
}

async fn export_holds_every_section_in_the_reads_shapes_and_nothing_secret(app: TestApp) {
    let (id, access, refresh) = app.user("export@example.com").await;
    let account_id = seed(&app, &id, 2_500).await;
    let webhook = app
        .post(
            "/api/v1/webhooks",
            &json!({"url": "https://hooks.example.com/agg"}),
            Some(&access),
        )
        .await
        .expect(201);
    let secret = webhook["secret"].as_str().expect("secret").to_owned();
    let category = app
        .post(
            "/api/v1/categories",
            &json!({"name": "Team lunches", "primary": "FOOD_AND_DRINK"}),
            Some(&access),
        )
        .await
        .expect(201);
    // Another user's rows stay out of it.
    let (other_id, _, _) = app.user("other@example.com").await;
    seed(&app, &other_id, 3).await;

    let response = app.get(EXPORT, Some(&access)).await;
    let export = response.expect(200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert!(
        response
            .header("content-disposition")
            .is_some_and(|value| value.starts_with("attachment")),
        "{:?}",
        response.header("content-disposition")
    );
    for section in [
        "exported_at",
        "user",
        "sessions",
        "connections",
        "accounts",
        "transactions",
        "holdings",
        "balance_snapshots",
        "imports",
        "webhooks",
        "categories",
        "rules",
        "transaction_matches",
        "events",
    ] {
        assert!(export.get(section).is_some(), "no {section} in the export");
    }
    assert_eq!(export["user"], app.get(ME, Some(&access)).await.expect(200));
    let transactions = export["transactions"].as_array().expect("transactions");
    assert_eq!(transactions.len(), 2_500);
    let first = &transactions[0];
    let read = app
        .get(
            &format!("/api/v1/transactions/{}", first["id"].as_str().expect("id")),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(first, &read, "the shape of GET /transactions/{{id}}");
    let account = app
        .get(&format!("/api/v1/accounts/{account_id}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(export["accounts"], json!([account]));
    let holdings = app.get("/api/v1/holdings", Some(&access)).await.expect(200);
    assert_eq!(export["holdings"], holdings["holdings"]);
    assert_eq!(
        export["balance_snapshots"].as_array().map(Vec::len),
        Some(1)
    );
    let providers = app
        .get("/api/v1/providers", Some(&access))
        .await
        .expect(200);
    assert_eq!(export["connections"], providers["connections"]);
    let webhooks = app.get("/api/v1/webhooks", Some(&access)).await.expect(200);
    assert_eq!(export["webhooks"], webhooks["webhooks"]);
    // The user's own categories, as the list shows them; the taxonomy's are everyone's.
    assert_eq!(export["categories"], json!([category]));
    assert_eq!(export["sessions"].as_array().map(Vec::len), Some(1));
    assert_eq!(export["sessions"][0]["is_current"], true);

    // Nothing secret: no token, hash, webhook secret or credential, anywhere.
    let text = String::from_utf8_lossy(&response.body);
    for secret in [
        secret.as_str(),
        refresh.as_str(),
        access.as_str(),
        "$argon2",
        "whsec_",
    ] {
        assert!(!text.contains(secret), "the export holds {secret}");
    }
    for field in [
        "password",
        "secret",
        "token",
        "credentials",
        "digest",
        "hash",
    ] {
        assert!(
            !text.contains(&format!("\"{field}")),
            "the export has a field starting with {field}"
        );
    }
    assert!(
        !text.contains(&other_id),
        "another user's rows in the export"
    );
}

async fn export_has_its_own_rate_limit(app: TestApp) {
    let (_, access, _) = app.user("limited@example.com").await;
    let first = app.get(EXPORT, Some(&access)).await;
    first.expect(200);
    assert_eq!(first.header("x-ratelimit-limit"), Some("2"));
    app.get(EXPORT, Some(&access)).await.expect(200);
    let refused = app.get(EXPORT, Some(&access)).await;
    refused.expect_problem(429, "rate_limit_exceeded");
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After");
    assert!(retry > 60, "two an hour: a retry in {retry} s");
    // Other reads keep their own bucket.
    app.get(ME, Some(&access)).await.expect(200);
}

async fn erasure_needs_the_password_and_ends_access_at_once(app: TestApp) {
    let (id, access, refresh) = app.user("leaving@example.com").await;
    app.delete(
        ME,
        Some(&json!({"password": "wrong password"})),
        Some(&access),
    )
    .await
    .expect_problem(401, "unauthorized");
    app.delete(ME, Some(&json!({})), Some(&access))
        .await
        .expect_problem(422, "validation_failed");
    app.delete(ME, Some(&json!({"password": PASSWORD})), None)
        .await
        .expect_problem(401, "unauthorized");
    // Still whole after the refusals.
    app.get(ME, Some(&access)).await.expect(200);

    let accepted = app
        .delete(ME, Some(&json!({"password": PASSWORD})), Some(&access))
        .await
        .expect(202);
    assert_eq!(accepted["user_id"], id);
    // The access token is refused from that moment, the refresh token too.
    app.get(ME, Some(&access))
        .await
        .expect_problem(401, "unauthorized");
    app.get("/api/v1/accounts", Some(&access))
        .await
        .expect_problem(401, "unauthorized");
    app.post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect(401);
    // A login answers as for an unknown account.
    let unknown = app
        .post(
            "/api/v1/sessions",
            &json!({"email": "nobody@example.com", "password": PASSWORD}),
            None,
        )
        .await
        .expect(401);
    let login = app
        .post(
            "/api/v1/sessions",
            &json!({"email": "leaving@example.com", "password": PASSWORD}),
            None,
        )
        .await
        .expect(401);
    assert_eq!(login["type"], unknown["type"]);
    assert_eq!(login["detail"], unknown["detail"]);
    // The confirmation email.
    let email = app.email("leaving@example.com", 2).await;
    assert!(email.subject.contains("deleted"), "{}", email.subject);
    erased(&app, &id).await;
}

async fn erasure_deletes_everything_and_the_email_registers_again(app: TestApp) {
    let (id, access, _) = app.user("gone@example.com").await;
    let account_id = seed(&app, &id, 12_000).await;
    let (other_id, other, _) = app.user("stays@example.com").await;
    let other_account = seed(&app, &other_id, 5).await;

    app.delete(ME, Some(&json!({"password": PASSWORD})), Some(&access))
        .await
        .expect(202);
    erased(&app, &id).await;
    let record = app
        .store
        .user_erasure(uuid(&id))
        .await
        .expect("store")
        .expect("the erasure record");
    assert!(record.finished_at.is_some());
    assert!(record.deleted_rows >= 12_000, "{record:?}");
    assert_eq!(record.requested_by, None);
    assert!(
        app.store
            .account_for_user(uuid(&id), account_id)
            .await
            .expect("store")
            .is_none()
    );

    // The other user is untouched.
    let listed = app
        .get(
            &format!("/api/v1/accounts/{other_account}/transactions"),
            Some(&other),
        )
        .await
        .expect(200);
    assert_eq!(listed["total_count"], 5);
    assert_eq!(app.get(ME, Some(&other)).await.expect(200)["id"], other_id);

    // The email registers again, as a new, empty account (its third email: the first
    // verification, the erasure's confirmation, the new verification).
    let again = app.register("gone@example.com").await;
    let token = app.email_token("gone@example.com", 3).await;
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": token}),
        None,
    )
    .await
    .expect(201);
    assert_ne!(again, id);
    let tokens = app.login("gone@example.com", PASSWORD).await;
    let fresh = tokens["access_token"].as_str().expect("access");
    let accounts = app.get("/api/v1/accounts", Some(fresh)).await.expect(200);
    assert_eq!(accounts["total_count"], 0);
    assert_eq!(app.get(ME, Some(fresh)).await.expect(200)["id"], again);
}

async fn admin_erases_a_user_and_the_audit_keeps_only_the_id(app: TestApp) {
    let (_, admin, _) = app.user(ADMIN).await;
    let (id, access, _) = app.user("erased-by-admin@example.com").await;
    seed(&app, &id, 10).await;
    let path = format!("/api/v1/admin/users/{id}");
    app.delete(&path, None, Some(&access))
        .await
        .expect_problem(403, "forbidden");
    app.delete(
        &format!("/api/v1/admin/users/{}", Uuid::now_v7()),
        None,
        Some(&admin),
    )
    .await
    .expect_problem(404, "not_found");
    app.delete("/api/v1/admin/users/not-a-uuid", None, Some(&admin))
        .await
        .expect_problem(422, "validation_failed");

    let accepted = app.delete(&path, None, Some(&admin)).await.expect(202);
    assert_eq!(accepted["user_id"], id);
    app.get(ME, Some(&access))
        .await
        .expect_problem(401, "unauthorized");
    erased(&app, &id).await;
    app.delete(&path, None, Some(&admin))
        .await
        .expect_problem(404, "not_found");
    let record = app
        .store
        .user_erasure(uuid(&id))
        .await
        .expect("store")
        .expect("record");
    let admin_id = app.get(ME, Some(&admin)).await.expect(200)["id"].clone();
    assert_eq!(
        record.requested_by.map(|by| by.to_string()),
        admin_id.as_str().map(str::to_owned)
    );

    // The audit trail keeps `user.deleted` alone: the user id and the time, nothing else.
    let audit = app
        .get(
            &format!("/api/v1/admin/audit-events?user_id={id}"),
            Some(&admin),
        )
        .await
        .expect(200);
    let events = audit["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{audit}");
    assert_eq!(events[0]["type"], "user.deleted");
    assert_eq!(events[0]["user_id"], id);
    assert_eq!(events[0]["data"], json!({}));
    assert!(
        !audit.to_string().contains("erased-by-admin"),
        "personal data in {audit}"
    );
    let email = app.email("erased-by-admin@example.com", 2).await;
    assert!(email.subject.contains("deleted"));
}

async fn an_interrupted_erasure_resumes_with_the_job(app: TestApp) {
    let (id, access, _) = app.user("crashed@example.com").await;
    seed(&app, &id, 7_000).await;
    // An erasure begun by an instance that died after one batch: its lease lapsed.
    let user_id = uuid(&id);
    let at = now();
    app.store
        .begin_user_erasure(
            &NewUserErasure {
                user_id,
                requested_by: None,
                requested_at: at,
            },
            &[UserDeleted { user_id }.event_at(at)],
        )
        .await
        .expect("store")
        .expect("begun");
    let lapsed = at - chrono::TimeDelta::seconds(1);
    let earlier = at - chrono::TimeDelta::minutes(5);
    assert_eq!(
        app.store
            .claim_user_erasure(Some(user_id), "dead-instance", earlier, lapsed)
            .await
            .expect("store"),
        Some(user_id)
    );
    assert_eq!(
        app.store
            .erase_user_batch(user_id, "dead-instance", 1_000, lapsed)
            .await
            .expect("store"),
        Some(1_000)
    );
    // Its tokens are refused by the store's token version and revoked sessions as well.
    app.post(
        "/api/v1/sessions",
        &json!({"email": "crashed@example.com", "password": PASSWORD}),
        None,
    )
    .await
    .expect(401);
    let outcome = app
        .service
        .jobs()
        .run_once(ERASE_USERS)
        .await
        .expect("runs");
    assert!(
        matches!(&outcome, RunOutcome::Succeeded(summary) if summary.contains("finished 1")),
        "{outcome}"
    );
    assert!(
        app.store
            .user_by_id(user_id)
            .await
            .expect("store")
            .is_none()
    );
    let record = app
        .store
        .user_erasure(user_id)
        .await
        .expect("store")
        .expect("record");
    assert!(record.deleted_rows >= 7_000, "{record:?}");
    let _ = access;
    // Nothing more to do on the next run.
    let idle = app
        .service
        .jobs()
        .run_once(ERASE_USERS)
        .await
        .expect("runs");
    assert!(
        matches!(&idle, RunOutcome::Succeeded(summary) if summary.contains("finished 0")),
        "{idle}"
    );
}

/// The Enable Banking sandbox API on a loopback socket, stopped when dropped.
struct Served {
    sandbox: EnableBankingSandbox,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The sandbox served on loopback and the setup offering `enablebanking` against it.
fn enablebanking() -> Setup {
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
    let config = EnableBankingConfig::new(sandbox.application_id(), sandbox.private_key_pem())
        .with_base_url(base);
    let provider = EnableBankingProvider::new(config).expect("provider");
    let mut setup = aggregation_tests::sandbox_setup();
    setup.sandbox = None;
    setup.builder_with = Some(Box::new(move |builder| builder.provider(provider)));
    setup.context = Some(Arc::new(Served { sandbox, task }));
    setup
}

mod providers {
    use super::*;

    conformance!(setup = enablebanking; erasure_disconnects_at_the_provider);

    /// Connects the sandbox's Finnish bank for the user.
    async fn connect(app: &TestApp, token: &str) -> Value {
        let authorization = app
            .post(
                "/api/v1/providers",
                &json!({"provider_slug": "enablebanking", "alias": "Bank",
                        "institution_id": "FI:Sandbox Nordic Bank"}),
                Some(token),
            )
            .await
            .expect(201);
        let url = authorization["authorization_url"].as_str().expect("url");
        let location = app
            .context::<Served>()
            .sandbox
            .approve(url)
            .expect("approved");
        assert!(location.starts_with(REDIRECT_URI), "{location}");
        let query = location.split_once('?').expect("a query").1;
        app.post(
            &format!("/api/v1/providers/callback?{query}"),
            &json!({}),
            Some(token),
        )
        .await
        .expect(201)
    }

    async fn erasure_disconnects_at_the_provider(app: TestApp) {
        let (id, token, _) = app.user("banked@example.com").await;
        connect(&app, &token).await;
        let sandbox = &app.context::<Served>().sandbox;
        assert_eq!(sandbox.active_sessions().len(), 1);
        app.delete(ME, Some(&json!({"password": PASSWORD})), Some(&token))
            .await
            .expect(202);
        erased(&app, &id).await;
        aggregation_tests::eventually(|| !sandbox.deleted_sessions().is_empty()).await;
        assert_eq!(sandbox.deleted_sessions().len(), 1);
        assert!(sandbox.active_sessions().is_empty());
    }
}
