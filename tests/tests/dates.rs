//! Conformance: dates and date-times in requests lie within the years 1900 to 2200 (a 422
//! naming the field otherwise), and no date-like input, however odd, is a server error.

use aggregation_core::store::{
    AccountType, NewAccount, NewSnapshot, NewTransaction, SnapshotSource, TransactionStatus,
    TransactionType, now,
};
use aggregation_tests::{Backend, Setup, Target, TestApp, conformance};
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, Utc};
use http::{Method, Request, header};
use http_body_util::Full;
use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use uuid::Uuid;

conformance!(
    sync_end_date_out_of_range_is_422,
    transaction_dates_are_bounded,
    balance_history_dates_are_bounded,
);

mod sandboxed {
    use super::*;

    fn sandbox() -> Setup {
        aggregation_tests::sandbox_setup()
    }

    conformance!(setup = sandbox; syncs_accept_the_boundary_dates);

    /// Durations and windows far beyond any calendar: the arithmetic saturates.
    fn sandbox_with_endless_durations() -> Setup {
        let mut setup = aggregation_tests::sandbox_setup();
        setup.config = setup
            .config
            .with_transactions_sync_window_days(u32::MAX)
            .with_oauth_state_ttl(std::time::Duration::MAX)
            .with_token_refresh_margin(std::time::Duration::MAX)
            .with_verification_token_ttl(std::time::Duration::MAX);
        setup
    }

    mod endless {
        use super::*;

        conformance!(setup = sandbox_with_endless_durations; endless_durations_saturate);
    }
}

async fn endless_durations_saturate(app: TestApp) {
    let (_, token, _) = app.user("endless@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let connection_id = connection["id"].as_str().expect("id");
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": connection_id}),
        Some(&token),
    )
    .await
    .expect(201);
    // No start_date: the window reaches back to 1900-01-01, not past the calendar.
    for body in [
        json!({"connection_id": connection_id, "force": true}),
        json!({"connection_id": connection_id, "end_date": "1900-01-01", "force": true}),
    ] {
        let synced = app
            .post("/api/v1/transactions/syncs", &body, Some(&token))
            .await
            .expect(201);
        assert!(
            synced["errors"].as_array().is_some_and(Vec::is_empty),
            "{synced}"
        );
    }
    // Every token is within the endless refresh margin.
    app.post(
        &format!("/api/v1/providers/{connection_id}/token-refreshes"),
        &json!({}),
        Some(&token),
    )
    .await
    .expect(201);
}

fn dec(text: &str) -> Decimal {
    text.parse().expect("decimal")
}

fn day(text: &str) -> NaiveDate {
    text.parse().expect("date")
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("timestamp")
        .with_timezone(&Utc)
}

fn error_fields(problem: &Value) -> Vec<(String, String)> {
    problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|error| {
            (
                error["field"].as_str().expect("field").to_owned(),
                error["code"].as_str().expect("code").to_owned(),
            )
        })
        .collect()
}

/// What a seeded user has: an access token, a `file_import` connection and one account with a
/// transaction and a snapshot on each boundary day.
struct Seeded {
    access: String,
    connection_id: Uuid,
    account_id: Uuid,
}

async fn seed(app: &TestApp, email: &str) -> Seeded {
    let (user_id, access, _) = app.user(email).await;
    let connection = app
        .active_connection(
            user_id.parse().expect("user id"),
            "file_import",
            Some("Imported"),
        )
        .await;
    let account_id = app
        .store
        .upsert_accounts(
            connection.id,
            &[NewAccount {
                provider_account_id: "acct-1".to_owned(),
                account_number: Some("123456789".to_owned()),
                name: "Brokerage".to_owned(),
                account_type: AccountType::Brokerage,
                currency: "USD".to_owned(),
                balance_amount: dec("100.00"),
                available_balance_amount: None,
                is_active: true,
            }],
            now(),
        )
        .await
        .expect("account")
        .ids[0];
    let transaction = |id: &str, date: &str| NewTransaction {
        provider_transaction_id: id.to_owned(),
        transaction_type: TransactionType::Fee,
        subtype: None,
        status: TransactionStatus::Settled,
        amount: dec("-1.00"),
        currency: "USD".to_owned(),
        description: None,
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: day(date),
        settlement_date: None,
        pending_transaction_id: None,
        merchant_code: None,
    };
    app.store
        .upsert_transactions(
            account_id,
            &[
                transaction("first", "1900-01-01"),
                transaction("last", "2200-12-31"),
            ],
            now(),
        )
        .await
        .expect("transactions");
    for captured in ["1900-01-01T00:00:00Z", "2200-12-31T23:59:59.999999Z"] {
        app.store
            .insert_snapshot(&NewSnapshot {
                account_id,
                balance: dec("100.00"),
                available_balance: None,
                holdings_value: None,
                cash_value: None,
                currency: "USD".to_owned(),
                source: SnapshotSource::FileImport,
                captured_at: at(captured),
            })
            .await
            .expect("snapshot");
    }
    Seeded {
        access,
        connection_id: connection.id,
        account_id,
    }
}

async fn sync_end_date_out_of_range_is_422(app: TestApp) {
    let seeded = seed(&app, "sync-dates@example.com").await;
    let sync = |body: Value| {
        let app = &app;
        let access = seeded.access.clone();
        async move {
            app.post("/api/v1/transactions/syncs", &body, Some(&access))
                .await
        }
    };
    // The request of issue 11: once an overflow panic that dropped the connection.
    let problem = sync(json!({
        "connection_id": seeded.connection_id,
        "end_date": "-262143-01-01",
        "force": true,
    }))
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&problem),
        [("end_date".to_owned(), "out_of_range".to_owned())]
    );
    for (body, field) in [
        (json!({"start_date": "1899-12-31"}), "start_date"),
        (json!({"end_date": "2201-01-01"}), "end_date"),
        (json!({"start_date": "+262142-12-31"}), "start_date"),
    ] {
        let mut body = body;
        body["connection_id"] = json!(seeded.connection_id);
        let problem = sync(body.clone())
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(
            error_fields(&problem),
            [(field.to_owned(), "out_of_range".to_owned())],
            "{body}"
        );
    }
    // The boundary days pass validation; a file_import connection is then not syncable.
    sync(json!({
        "connection_id": seeded.connection_id,
        "start_date": "1900-01-01",
        "end_date": "2200-12-31",
        "force": true,
    }))
    .await
    .expect_problem(400, "command_validation_failed");
    sync(json!({"connection_id": seeded.connection_id, "end_date": "1900-01-01"}))
        .await
        .expect_problem(400, "command_validation_failed");
}

async fn transaction_dates_are_bounded(app: TestApp) {
    let seeded = seed(&app, "transaction-dates@example.com").await;
    let base = format!("/api/v1/accounts/{}/transactions", seeded.account_id);
    for (query, field) in [
        (
            "start_date=1899-12-31&end_date=2024-01-01",
            "query.start_date",
        ),
        (
            "start_date=2024-01-01&end_date=2201-01-01",
            "query.end_date",
        ),
        ("start_date=1899-12-31", "query.start_date"),
        ("end_date=2201-01-01", "query.end_date"),
        (
            "start_date=-262143-01-01&end_date=2024-01-01",
            "query.start_date",
        ),
        (
            "start_date=2024-01-01&end_date=%2B262142-12-31",
            "query.end_date",
        ),
    ] {
        let problem = app
            .get(&format!("{base}?{query}"), Some(&seeded.access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(
            error_fields(&problem),
            [(field.to_owned(), "out_of_range".to_owned())],
            "{query}"
        );
    }
    let all = app
        .get(
            &format!("{base}?start_date=1900-01-01&end_date=2200-12-31"),
            Some(&seeded.access),
        )
        .await
        .expect(200);
    let dates: Vec<&str> = all["transactions"]
        .as_array()
        .expect("transactions")
        .iter()
        .map(|t| t["transaction_date"].as_str().expect("date"))
        .collect();
    assert_eq!(dates, ["1900-01-01", "2200-12-31"]);
}

async fn balance_history_dates_are_bounded(app: TestApp) {
    let seeded = seed(&app, "history-dates@example.com").await;
    let base = format!("/api/v1/accounts/{}/balance-history", seeded.account_id);
    for (query, field) in [
        (
            "start_date=1899-12-31&end_date=2024-01-01",
            "query.start_date",
        ),
        (
            "start_date=2024-01-01&end_date=2201-01-01",
            "query.end_date",
        ),
        (
            "start_date=1899-12-31T23:59:59.999999Z&end_date=2024-01-01",
            "query.start_date",
        ),
        (
            "start_date=2024-01-01&end_date=2201-01-01T00:00:00Z",
            "query.end_date",
        ),
        // Compared in UTC: half past midnight in UTC+01:00 is still 1899 in UTC.
        (
            "start_date=1900-01-01T00:30:00%2B01:00&end_date=2024-01-01",
            "query.start_date",
        ),
        (
            "start_date=2024-01-01&end_date=2200-12-31T23:30:00-01:00",
            "query.end_date",
        ),
        (
            "start_date=-262143-01-01&end_date=2024-01-01",
            "query.start_date",
        ),
    ] {
        let problem = app
            .get(&format!("{base}?{query}"), Some(&seeded.access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(
            error_fields(&problem),
            [(field.to_owned(), "out_of_range".to_owned())],
            "{query}"
        );
    }
    for query in [
        "start_date=1900-01-01&end_date=2200-12-31",
        "start_date=1900-01-01T00:00:00Z&end_date=2200-12-31T23:59:59.999999Z",
        "start_date=1900-01-01T01:00:00%2B01:00&end_date=2200-12-31T23:59:59.999999999Z",
    ] {
        let history = app
            .get(&format!("{base}?{query}"), Some(&seeded.access))
            .await
            .expect(200);
        assert_eq!(history["total_count"], 2, "{query}");
    }
}

async fn syncs_accept_the_boundary_dates(app: TestApp) {
    let (_, token, _) = app.user("boundary@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let connection_id = connection["id"].as_str().expect("id");
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": connection_id}),
        Some(&token),
    )
    .await
    .expect(201);
    for body in [
        json!({"connection_id": connection_id, "start_date": "1900-01-01", "end_date": "2200-12-31", "force": true}),
        json!({"connection_id": connection_id, "end_date": "1900-01-01", "force": true}),
        json!({"connection_id": connection_id, "end_date": "2200-12-31", "force": true}),
    ] {
        app.post("/api/v1/transactions/syncs", &body, Some(&token))
            .await
            .expect(201);
    }
    let problem = app
        .post(
            "/api/v1/transactions/syncs",
            &json!({"connection_id": connection_id, "end_date": "-262143-01-01", "force": true}),
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&problem),
        [("end_date".to_owned(), "out_of_range".to_owned())]
    );
}

// No date-like input is a server error: a bounded number of generated requests through the
// whole service (tower `oneshot` on the bare service).

/// How many generated inputs each run sends (eight requests each).
const GENERATED_INPUTS: usize = 48;

/// Strings that look like dates or date-times (extreme years included), and arbitrary text.
fn date_like() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => any::<String>(),
        1 => "[-+]?[0-9]{1,7}-[0-9]{1,2}-[0-9]{1,2}",
        1 => "[-+]?[0-9]{1,7}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,12})?(Z|[-+][0-9]{2}:[0-9]{2})",
        1 => (any::<i32>(), 1u32..=12, 1u32..=31).prop_map(|(y, m, d)| format!("{y}-{m:02}-{d:02}")),
        // Every year chrono can represent, as a date and as a date-time.
        3 => (-262_143i32..=262_142, 1u32..=12, 1u32..=28).prop_map(|(y, m, d)| format!("{y}-{m:02}-{d:02}")),
        2 => (-262_143i32..=262_142, 1u32..=12, 1u32..=28)
            .prop_map(|(y, m, d)| format!("{y:04}-{m:02}-{d:02}T12:00:00Z")),
        2 => (1890i32..2210, 1u32..=12, 1u32..=28).prop_map(|(y, m, d)| format!("{y}-{m:02}-{d:02}")),
    ]
}

/// A JSON value standing where a date goes: mostly date-like strings, sometimes anything.
fn json_date() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => date_like().prop_map(Value::String),
        1 => Just(Value::Null),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::from),
    ]
}

/// Query-string text written as is, escapes and separators included.
fn raw_query() -> impl Strategy<Value = String> {
    "[a-z_=&%0-9A-F+:.TZ-]{0,60}"
}

/// Percent-encodes everything but unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[derive(Debug)]
struct Generated {
    start: String,
    end: String,
    raw: String,
    body_start: Value,
    body_end: Value,
    body: Vec<u8>,
}

fn generated() -> impl Strategy<Value = Generated> {
    (
        date_like(),
        date_like(),
        raw_query(),
        json_date(),
        json_date(),
        proptest::collection::vec(any::<u8>(), 0..96),
    )
        .prop_map(|(start, end, raw, body_start, body_end, body)| Generated {
            start,
            end,
            raw,
            body_start,
            body_end,
            body,
        })
}

fn request(method: Method, path: &str, access: &str, body: Option<Bytes>) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header(header::AUTHORIZATION, format!("Bearer {access}"));
    if body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    builder
        .body(Full::new(body.unwrap_or_default()))
        .expect("request")
}

async fn no_date_input_is_a_server_error(app: TestApp) {
    let seeded = seed(&app, "fuzz@example.com").await;
    let account = seeded.account_id;
    let mut runner = TestRunner::new(ProptestConfig::default());
    let strategy = generated();
    for _ in 0..GENERATED_INPUTS {
        let input = strategy
            .new_tree(&mut runner)
            .expect("generated input")
            .current();
        let (start, end) = (encode(&input.start), encode(&input.end));
        let sync_body = json!({
            "connection_id": seeded.connection_id,
            "start_date": input.body_start,
            "end_date": input.body_end,
            "force": true,
        });
        let requests = [
            request(
                Method::GET,
                &format!(
                    "/api/v1/accounts/{account}/transactions?start_date={start}&end_date={end}&{}",
                    input.raw
                ),
                &seeded.access,
                None,
            ),
            // One generated bound beside an ordinary one, so the range reaches the store.
            request(
                Method::GET,
                &format!(
                    "/api/v1/accounts/{account}/transactions?start_date={start}&end_date=2024-01-01"
                ),
                &seeded.access,
                None,
            ),
            request(
                Method::GET,
                &format!(
                    "/api/v1/accounts/{account}/balance-history?start_date={start}&end_date=2024-01-01"
                ),
                &seeded.access,
                None,
            ),
            request(
                Method::GET,
                &format!(
                    "/api/v1/accounts/{account}/balance-history?start_date=2024-01-01&end_date={end}"
                ),
                &seeded.access,
                None,
            ),
            request(
                Method::GET,
                &format!(
                    "/api/v1/accounts/{account}/balance-history?start_date={start}&end_date={end}"
                ),
                &seeded.access,
                None,
            ),
            request(
                Method::GET,
                &format!("/api/v1/accounts/{account}/balance-history?{}", input.raw),
                &seeded.access,
                None,
            ),
            request(
                Method::POST,
                "/api/v1/transactions/syncs",
                &seeded.access,
                Some(Bytes::from(serde_json::to_vec(&sync_body).expect("json"))),
            ),
            request(
                Method::POST,
                "/api/v1/transactions/syncs",
                &seeded.access,
                Some(Bytes::from(input.body.clone())),
            ),
        ];
        for request in requests {
            let described = format!("{} {}", request.method(), request.uri());
            let response = app.send(request).await;
            assert!(
                response.status.as_u16() < 500,
                "{described} answered {}: {}\ninput: {input:?}",
                response.status,
                String::from_utf8_lossy(&response.body)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_date_inputs_are_never_server_errors_sqlite() {
    aggregation_tests::run(
        Target::Bare,
        Backend::Sqlite,
        no_date_input_is_a_server_error,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_date_inputs_are_never_server_errors_postgres() {
    aggregation_tests::run(
        Target::Bare,
        Backend::Postgres,
        no_date_input_is_a_server_error,
    )
    .await;
}
