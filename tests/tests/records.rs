//! Conformance: financial records (accounts, transactions, holdings, balance snapshots) and
//! their read endpoints, with the record upserts that sync and import use, seeded through the
//! store.

use aggregation_core::store::{
    AccountType, AssetType, ConnectionRecord, ConnectionStatus, NewAccount, NewHolding,
    NewSnapshot, NewTransaction, SnapshotSource, TransactionQuery, TransactionStatus,
    TransactionType, now, provider_id,
};
use aggregation_tests::{TestApp, conformance};
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use uuid::Uuid;

conformance!(
    record_endpoints_require_a_token_and_uuid_ids,
    accounts_list_filters_and_totals,
    provider_accounts_are_scoped_to_the_connection,
    foreign_records_are_not_found,
    transactions_page_newest_first_with_type_filter,
    transaction_query_bounds_are_422,
    transactions_date_range_rule,
    transactions_date_range_pages_by_cursor,
    transactions_cursor_errors_are_422,
    upserts_count_created_updated_unchanged,
    holdings_filters_and_totals,
    snapshots_latest_history_and_per_account,
    connections_are_found_or_created_once,
);

fn dec(text: &str) -> Decimal {
    text.parse().expect("decimal")
}

fn date(text: &str) -> NaiveDate {
    text.parse().expect("date")
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("timestamp")
        .with_timezone(&Utc)
}

/// A verified, logged-in user: (id, access token).
async fn user(app: &TestApp, email: &str) -> (Uuid, String) {
    let (id, access, _) = app.user(email).await;
    (id.parse().expect("user id"), access)
}

async fn connection(app: &TestApp, user_id: Uuid, slug: &str) -> ConnectionRecord {
    app.active_connection(user_id, slug, Some(&format!("{slug} alias")))
        .await
}

fn account(
    provider_id: &str,
    name: &str,
    kind: AccountType,
    currency: &str,
    balance: &str,
) -> NewAccount {
    NewAccount {
        provider_account_id: provider_id.to_owned(),
        account_number: Some(format!("12345{provider_id}")),
        name: name.to_owned(),
        account_type: kind,
        currency: currency.to_owned(),
        balance_amount: dec(balance),
        available_balance_amount: None,
        is_active: true,
    }
}

/// Seeds accounts into a connection; returns their ids in order.
async fn accounts(app: &TestApp, connection_id: Uuid, rows: &[NewAccount]) -> Vec<Uuid> {
    app.store
        .upsert_accounts(connection_id, rows, now())
        .await
        .expect("upsert accounts")
        .ids
}

fn transaction(
    provider_id: &str,
    day: &str,
    amount: &str,
    kind: TransactionType,
) -> NewTransaction {
    NewTransaction {
        provider_transaction_id: provider_id.to_owned(),
        transaction_type: kind,
        subtype: None,
        status: TransactionStatus::Settled,
        amount: dec(amount),
        currency: "usd".to_owned(),
        description: Some(format!("transaction {provider_id}")),
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: date(day),
        settlement_date: None,
        pending_transaction_id: None,
        merchant_code: None,
    }
}

fn holding(
    provider_id: &str,
    symbol: &str,
    kind: AssetType,
    currency: &str,
    value: &str,
) -> NewHolding {
    NewHolding {
        provider_holding_id: provider_id.to_owned(),
        symbol: symbol.to_owned(),
        security_name: Some(format!("{symbol} Inc.")),
        asset_type: kind,
        quantity: dec("10"),
        cost_basis: Some(dec("900.00")),
        market_value: dec(value),
        currency: currency.to_owned(),
        average_price: Some(dec("90.00")),
        current_price: None,
        unrealized_gain_loss: None,
    }
}

fn snapshot(
    account_id: Uuid,
    captured: &str,
    balance: &str,
    source: SnapshotSource,
) -> NewSnapshot {
    NewSnapshot {
        account_id,
        balance: dec(balance),
        available_balance: None,
        holdings_value: Some(dec("100.00")),
        cash_value: None,
        currency: "USD".to_owned(),
        source,
        captured_at: at(captured),
    }
}

/// One user with one connection and one USD brokerage account holding five transactions:
/// (access token, account id, transaction ids t1..t5 dated 2024-01-01..05).
async fn account_with_transactions(app: &TestApp) -> (String, Uuid, Vec<Uuid>) {
    let (user_id, access) = user(app, "ledger@example.com").await;
    let connection = connection(app, user_id, "schwab").await;
    let ids = accounts(
        app,
        connection.id,
        &[account(
            "A1",
            "Brokerage",
            AccountType::Brokerage,
            "USD",
            "100",
        )],
    )
    .await;
    let kinds = [
        TransactionType::Trade,
        TransactionType::Fee,
        TransactionType::Trade,
        TransactionType::Income,
        TransactionType::Fee,
    ];
    let rows: Vec<NewTransaction> = kinds
        .iter()
        .enumerate()
        .map(|(index, kind)| {
            transaction(
                &format!("t{}", index + 1),
                &format!("2024-01-0{}", index + 1),
                &format!("-{}.50", index + 1),
                *kind,
            )
        })
        .collect();
    let counts = app
        .store
        .upsert_transactions(ids[0], &rows, now())
        .await
        .expect("upsert transactions");
    assert_eq!(counts.created, 5);
    (access, ids[0], counts.ids)
}

fn provider_ids(list: &Value, key: &str, field: &str) -> Vec<String> {
    list[key]
        .as_array()
        .expect("list")
        .iter()
        .map(|item| item[field].as_str().expect("string").to_owned())
        .collect()
}

fn error_fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|error| error["field"].as_str().expect("field").to_owned())
        .collect()
}

async fn record_endpoints_require_a_token_and_uuid_ids(app: TestApp) {
    let (_, access) = user(&app, "token@example.com").await;
    let id = Uuid::now_v7();
    let paths = [
        "/api/v1/accounts".to_owned(),
        format!("/api/v1/accounts/{id}"),
        format!("/api/v1/transactions/{id}"),
        format!("/api/v1/accounts/{id}/transactions"),
        "/api/v1/holdings".to_owned(),
        format!("/api/v1/accounts/{id}/holdings"),
        "/api/v1/balance-snapshots".to_owned(),
        format!("/api/v1/accounts/{id}/balance-history?start_date=2024-01-01&end_date=2024-02-01"),
        format!("/api/v1/accounts/{id}/balance-snapshots"),
        format!("/api/v1/providers/{id}/accounts"),
    ];
    for path in &paths {
        let problem = app
            .get(path, None)
            .await
            .expect_problem(401, "unauthorized");
        assert_eq!(
            problem["detail"],
            "A valid authorization token is required."
        );
        app.get(path, Some("not-a-jwt"))
            .await
            .expect_problem(401, "unauthorized");
    }
    for path in paths.iter().filter(|path| path.contains(&id.to_string())) {
        let problem = app
            .get(&path.replace(&id.to_string(), "not-a-uuid"), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], "path.id");
        // A well-formed id of nothing is 404.
        app.get(path, Some(&access))
            .await
            .expect_problem(404, "not_found");
    }
}

async fn accounts_list_filters_and_totals(app: TestApp) {
    let (user_id, access) = user(&app, "accounts@example.com").await;
    let connection = connection(&app, user_id, "schwab").await;
    let mut savings = account("S1", "Savings", AccountType::Savings, "eur", "50.00");
    savings.is_active = false;
    let mut checking = account("C1", "Checking", AccountType::Checking, "USD", "200.25");
    checking.available_balance_amount = Some(dec("150.25"));
    let ids = accounts(
        &app,
        connection.id,
        &[
            account("B1", "Brokerage", AccountType::Brokerage, "USD", "1000.50"),
            checking,
            savings,
        ],
    )
    .await;

    let list = app.get("/api/v1/accounts", Some(&access)).await.expect(200);
    assert_eq!(
        provider_ids(&list, "accounts", "name"),
        ["Brokerage", "Checking", "Savings"]
    );
    assert_eq!(list["total_count"], 3);
    assert_eq!(list["active_count"], 2);
    assert_eq!(
        list["total_balance_by_currency"],
        json!({"USD": "1200.75", "EUR": "50.00"})
    );
    let checking = &list["accounts"][1];
    let mut keys: Vec<&str> = checking
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "account_number_masked",
            "account_type",
            "available_balance_amount",
            "balance_amount",
            "connection_id",
            "created_at",
            "currency",
            "id",
            "is_active",
            "last_synced_at",
            "name",
            "provider_account_id",
            "updated_at",
        ]
    );
    assert_eq!(checking["id"], ids[1].to_string());
    assert_eq!(checking["connection_id"], connection.id.to_string());
    assert_eq!(checking["provider_account_id"], "C1");
    assert_eq!(checking["account_number_masked"], "****45C1");
    assert_eq!(checking["account_type"], "checking");
    assert_eq!(checking["currency"], "USD");
    assert_eq!(checking["balance_amount"], "200.25");
    assert_eq!(checking["available_balance_amount"], "150.25");
    assert_eq!(checking["is_active"], true);
    assert!(
        checking["created_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(
        checking["last_synced_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(list["accounts"][0]["available_balance_amount"], Value::Null);

    let active = app
        .get("/api/v1/accounts?active_only=true", Some(&access))
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&active, "accounts", "name"),
        ["Brokerage", "Checking"]
    );
    assert_eq!(active["total_count"], 2);
    assert_eq!(
        active["total_balance_by_currency"],
        json!({"USD": "1200.75"})
    );
    let typed = app
        .get("/api/v1/accounts?account_type=checking", Some(&access))
        .await
        .expect(200);
    assert_eq!(provider_ids(&typed, "accounts", "name"), ["Checking"]);
    let inactive_savings = app
        .get(
            "/api/v1/accounts?account_type=savings&active_only=true",
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(inactive_savings["total_count"], 0);
    assert_eq!(inactive_savings["total_balance_by_currency"], json!({}));

    let problem = app
        .get(
            "/api/v1/accounts?account_type=bogus&active_only=maybe",
            Some(&access),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&problem),
        ["query.active_only", "query.account_type"]
    );

    let one = app
        .get(&format!("/api/v1/accounts/{}", ids[0]), Some(&access))
        .await
        .expect(200);
    assert_eq!(one["name"], "Brokerage");
    assert_eq!(one["balance_amount"], "1000.50");
}

async fn provider_accounts_are_scoped_to_the_connection(app: TestApp) {
    let (user_id, access) = user(&app, "providers@example.com").await;
    let first = connection(&app, user_id, "schwab").await;
    let second = connection(&app, user_id, "file_import").await;
    let mut closed = account("A2", "Closed", AccountType::Ira, "USD", "0");
    closed.is_active = false;
    accounts(
        &app,
        first.id,
        &[
            account("A1", "Roth", AccountType::RothIra, "USD", "10"),
            closed,
        ],
    )
    .await;
    accounts(
        &app,
        second.id,
        &[account("A1", "Checking", AccountType::Checking, "USD", "5")],
    )
    .await;

    let list = app
        .get(
            &format!("/api/v1/providers/{}/accounts", first.id),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(provider_ids(&list, "accounts", "name"), ["Closed", "Roth"]);
    assert_eq!(list["active_count"], 1);
    let active = app
        .get(
            &format!("/api/v1/providers/{}/accounts?active_only=true", first.id),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(provider_ids(&active, "accounts", "name"), ["Roth"]);
    let other = app
        .get(
            &format!("/api/v1/providers/{}/accounts", second.id),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(provider_ids(&other, "accounts", "name"), ["Checking"]);
    assert_eq!(
        app.get("/api/v1/accounts", Some(&access)).await.expect(200)["total_count"],
        3
    );

    let (_, stranger) = user(&app, "stranger@example.com").await;
    app.get(
        &format!("/api/v1/providers/{}/accounts", first.id),
        Some(&stranger),
    )
    .await
    .expect_problem(404, "not_found");
    app.get(
        &format!("/api/v1/providers/{}/accounts?active_only=nope", first.id),
        Some(&access),
    )
    .await
    .expect_problem(422, "validation_failed");
}

async fn foreign_records_are_not_found(app: TestApp) {
    let (access, account_id, transaction_ids) = account_with_transactions(&app).await;
    app.store
        .upsert_holdings(
            account_id,
            &[holding("h1", "AAPL", AssetType::Equity, "USD", "1000")],
            now(),
        )
        .await
        .expect("holdings");
    app.store
        .insert_snapshot(&snapshot(
            account_id,
            "2024-01-01T00:00:00Z",
            "100",
            SnapshotSource::AccountSync,
        ))
        .await
        .expect("snapshot");
    let (_, other) = user(&app, "other@example.com").await;
    for path in [
        format!("/api/v1/accounts/{account_id}"),
        format!("/api/v1/transactions/{}", transaction_ids[0]),
        format!("/api/v1/accounts/{account_id}/transactions"),
        format!(
            "/api/v1/accounts/{account_id}/transactions?start_date=2024-01-01&end_date=2024-12-31"
        ),
        format!("/api/v1/accounts/{account_id}/holdings"),
        format!(
            "/api/v1/accounts/{account_id}/balance-history?start_date=2024-01-01&end_date=2024-12-31"
        ),
        format!("/api/v1/accounts/{account_id}/balance-snapshots"),
    ] {
        app.get(&path, Some(&other))
            .await
            .expect_problem(404, "not_found");
        app.get(&path, Some(&access)).await.expect(200);
    }
    for (path, key) in [
        ("/api/v1/accounts", "accounts"),
        ("/api/v1/holdings", "holdings"),
        ("/api/v1/balance-snapshots", "snapshots"),
    ] {
        let list = app.get(path, Some(&other)).await.expect(200);
        assert_eq!(list[key], json!([]));
        assert_eq!(list["total_count"], 0);
        let own = app.get(path, Some(&access)).await.expect(200);
        assert_eq!(own["total_count"], 1);
    }
    // The store's own reads are scoped the same way.
    let other_id: Uuid = app
        .store
        .user_by_email("other@example.com")
        .await
        .expect("store")
        .expect("user")
        .id;
    let page = app
        .store
        .transactions_for_account(
            other_id,
            account_id,
            &TransactionQuery::Recent {
                transaction_type: None,
                limit: 10,
                offset: 0,
            },
        )
        .await
        .expect("page");
    assert!(page.items.is_empty());
    assert_eq!(page.total_count, 0);
}

async fn transactions_page_newest_first_with_type_filter(app: TestApp) {
    let (access, account_id, ids) = account_with_transactions(&app).await;
    let base = format!("/api/v1/accounts/{account_id}/transactions");

    let all = app.get(&base, Some(&access)).await.expect(200);
    assert_eq!(
        provider_ids(&all, "transactions", "provider_transaction_id"),
        ["t5", "t4", "t3", "t2", "t1"]
    );
    assert_eq!(all["total_count"], 5);
    assert_eq!(all["limit"], 50);
    assert_eq!(all["offset"], 0);
    assert_eq!(all["has_more"], false);

    let page = app
        .get(&format!("{base}?limit=2&offset=1"), Some(&access))
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&page, "transactions", "provider_transaction_id"),
        ["t4", "t3"]
    );
    assert_eq!(page["total_count"], 5);
    assert_eq!(page["limit"], 2);
    assert_eq!(page["offset"], 1);
    assert_eq!(page["has_more"], true);
    let last = app
        .get(&format!("{base}?limit=2&offset=3"), Some(&access))
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&last, "transactions", "provider_transaction_id"),
        ["t2", "t1"]
    );
    assert_eq!(last["has_more"], false);
    let beyond = app
        .get(&format!("{base}?offset=10"), Some(&access))
        .await
        .expect(200);
    assert_eq!(beyond["transactions"], json!([]));
    assert_eq!(beyond["total_count"], 5);
    assert_eq!(beyond["has_more"], false);

    let fees = app
        .get(
            &format!("{base}?transaction_type=fee&limit=1"),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&fees, "transactions", "provider_transaction_id"),
        ["t5"]
    );
    assert_eq!(fees["total_count"], 2);
    assert_eq!(fees["has_more"], true);

    let one = app
        .get(&format!("/api/v1/transactions/{}", ids[1]), Some(&access))
        .await
        .expect(200);
    let mut keys: Vec<&str> = one
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "account_id",
            "amount",
            "category",
            "category_source",
            "commission",
            "created_at",
            "currency",
            "description",
            "id",
            "merchant_name",
            "notes",
            "pending_transaction_id",
            "provider_transaction_id",
            "quantity",
            "security_name",
            "settlement_date",
            "source",
            "status",
            "subtype",
            "symbol",
            "transaction_date",
            "transaction_type",
            "transfer_transaction_id",
            "unit_price",
            "updated_at",
        ]
    );
    assert_eq!(one["pending_transaction_id"], Value::Null);
    assert_eq!(one["transfer_transaction_id"], Value::Null);
    // Nothing gives this row a category or notes: no code, no rule, no user.
    assert_eq!(one["category"], Value::Null);
    assert_eq!(one["category_source"], Value::Null);
    assert_eq!(one["notes"], Value::Null);
    assert_eq!(one["id"], ids[1].to_string());
    assert_eq!(one["account_id"], account_id.to_string());
    assert_eq!(one["transaction_type"], "fee");
    assert_eq!(one["status"], "settled");
    assert_eq!(one["amount"], "-2.50");
    assert_eq!(one["currency"], "USD");
    assert_eq!(one["transaction_date"], "2024-01-02");
    assert_eq!(one["settlement_date"], Value::Null);
    assert_eq!(one["quantity"], Value::Null);
}

async fn transaction_query_bounds_are_422(app: TestApp) {
    let (access, account_id, _) = account_with_transactions(&app).await;
    let base = format!("/api/v1/accounts/{account_id}/transactions");
    for (query, field) in [
        ("limit=0", "query.limit"),
        ("limit=101", "query.limit"),
        ("limit=ten", "query.limit"),
        ("offset=-1", "query.offset"),
        ("transaction_type=bogus", "query.transaction_type"),
        ("start_date=2024-13-01", "query.start_date"),
        ("end_date=yesterday&start_date=2024-01-01", "query.end_date"),
        (
            "start_date=2024-02-01&end_date=2024-01-01",
            "query.start_date",
        ),
    ] {
        let problem = app
            .get(&format!("{base}?{query}"), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(error_fields(&problem), [field], "{query}");
    }
    app.get(&format!("{base}?limit=1&offset=0"), Some(&access))
        .await
        .expect(200);
    app.get(&format!("{base}?limit=100"), Some(&access))
        .await
        .expect(200);
    // Enum values are matched case-insensitively.
    let trades = app
        .get(&format!("{base}?transaction_type=TRADE"), Some(&access))
        .await
        .expect(200);
    assert_eq!(trades["total_count"], 2);
}

async fn transactions_date_range_rule(app: TestApp) {
    let (access, account_id, _) = account_with_transactions(&app).await;
    let base = format!("/api/v1/accounts/{account_id}/transactions");

    // Both dates: the date-range listing, oldest first, offset and type not applied; the
    // limit pages it (issue 28: no longer unbounded), 500 unless given.
    let range = app
        .get(
            &format!(
                "{base}?start_date=2024-01-02&end_date=2024-01-04&offset=2&transaction_type=fee"
            ),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&range, "transactions", "provider_transaction_id"),
        ["t2", "t3", "t4"]
    );
    assert_eq!(range["total_count"], 3);
    assert_eq!(range["limit"], 500);
    assert_eq!(range["offset"], 0);
    assert_eq!(range["has_more"], false);
    assert_eq!(range["next_cursor"], Value::Null);
    let first = app
        .get(
            &format!(
                "{base}?start_date=2024-01-02&end_date=2024-01-04&limit=2&offset=2&transaction_type=fee"
            ),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&first, "transactions", "provider_transaction_id"),
        ["t2", "t3"]
    );
    assert_eq!(first["total_count"], 3);
    assert_eq!(first["limit"], 2);
    assert_eq!(first["has_more"], true);
    let cursor = first["next_cursor"].as_str().expect("a cursor");
    let rest = app
        .get(
            &format!("{base}?start_date=2024-01-02&end_date=2024-01-04&limit=2&cursor={cursor}"),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&rest, "transactions", "provider_transaction_id"),
        ["t4"]
    );
    assert_eq!(rest["total_count"], 3);
    assert_eq!(rest["has_more"], false);
    assert_eq!(rest["next_cursor"], Value::Null);
    let same_day = app
        .get(
            &format!("{base}?start_date=2024-01-05&end_date=2024-01-05"),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&same_day, "transactions", "provider_transaction_id"),
        ["t5"]
    );

    // One date alone is ignored: the by-account listing with its paging.
    for lone in ["start_date=2024-01-04", "end_date=2024-01-02"] {
        let listing = app
            .get(&format!("{base}?{lone}&limit=2"), Some(&access))
            .await
            .expect(200);
        assert_eq!(
            provider_ids(&listing, "transactions", "provider_transaction_id"),
            ["t5", "t4"],
            "{lone}"
        );
        assert_eq!(listing["total_count"], 5);
        assert_eq!(listing["has_more"], true);
    }
}

/// Rows in the date range of [`transactions_date_range_pages_by_cursor`]: more than two full
/// pages, three per day so that ties within a date are ordered by id.
const RANGE_ROWS: usize = 1_050;

async fn transactions_date_range_pages_by_cursor(app: TestApp) {
    let (user_id, access) = user(&app, "pages@example.com").await;
    let connection = connection(&app, user_id, "schwab").await;
    let ids = accounts(
        &app,
        connection.id,
        &[account("P1", "Checking", AccountType::Checking, "USD", "0")],
    )
    .await;
    let first_day = date("2024-01-01");
    let mut rows: Vec<NewTransaction> = (0..RANGE_ROWS)
        .map(|index| {
            let day = first_day + chrono::Days::new(u64::try_from(index / 3).expect("small"));
            transaction(
                &format!("r{index}"),
                &day.to_string(),
                "-1.00",
                TransactionType::Other,
            )
        })
        .collect();
    // Outside the range asked below: never listed, never counted.
    rows.push(transaction(
        "before",
        "2023-12-31",
        "-1.00",
        TransactionType::Other,
    ));
    rows.push(transaction(
        "after",
        "2025-01-01",
        "-1.00",
        TransactionType::Other,
    ));
    app.store
        .upsert_transactions(ids[0], &rows, now())
        .await
        .expect("upsert transactions");
    let base = format!(
        "/api/v1/accounts/{}/transactions?start_date=2024-01-01&end_date=2024-12-31",
        ids[0]
    );

    // Default page size 500: three pages, the last partial.
    let mut listed: Vec<(String, String)> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut sizes = Vec::new();
    loop {
        let path = match &cursor {
            Some(cursor) => format!("{base}&cursor={cursor}"),
            None => base.clone(),
        };
        let page = app.get(&path, Some(&access)).await.expect(200);
        assert_eq!(page["total_count"], RANGE_ROWS);
        assert_eq!(page["limit"], 500);
        assert_eq!(page["offset"], 0);
        let rows = page["transactions"].as_array().expect("transactions");
        sizes.push(rows.len());
        listed.extend(rows.iter().map(|row| {
            (
                row["transaction_date"].as_str().expect("date").to_owned(),
                row["id"].as_str().expect("id").to_owned(),
            )
        }));
        let has_more = page["has_more"].as_bool().expect("has_more");
        assert_eq!(has_more, page["next_cursor"].is_string());
        if !has_more {
            break;
        }
        cursor = Some(page["next_cursor"].as_str().expect("cursor").to_owned());
    }
    assert_eq!(sizes, [500, 500, 50]);
    // Oldest first, ties by id, each row once: exactly the range in keyset order.
    let mut expected = listed.clone();
    expected.sort();
    expected.dedup();
    assert_eq!(listed, expected);
    assert_eq!(listed.len(), RANGE_ROWS);
    assert_eq!(listed[0].0, "2024-01-01");

    // An explicit limit pages the same order: the third page of 7 starts at the 15th row.
    let mut cursor: Option<String> = None;
    for _ in 0..2 {
        let path = match &cursor {
            Some(cursor) => format!("{base}&limit=7&cursor={cursor}"),
            None => format!("{base}&limit=7"),
        };
        let page = app.get(&path, Some(&access)).await.expect(200);
        assert_eq!(page["transactions"].as_array().expect("rows").len(), 7);
        cursor = Some(page["next_cursor"].as_str().expect("cursor").to_owned());
    }
    let third = app
        .get(
            &format!("{base}&limit=7&cursor={}", cursor.expect("cursor")),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(third["transactions"][0]["id"], listed[14].1);
    assert_eq!(third["limit"], 7);

    // The bound: 500, not the by-account 100.
    app.get(&format!("{base}&limit=500"), Some(&access))
        .await
        .expect(200);
    let problem = app
        .get(&format!("{base}&limit=501"), Some(&access))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(error_fields(&problem), ["query.limit"]);
}

async fn transactions_cursor_errors_are_422(app: TestApp) {
    let (access, account_id, _) = account_with_transactions(&app).await;
    let base = format!("/api/v1/accounts/{account_id}/transactions");
    let range = format!("{base}?start_date=2024-01-01&end_date=2024-01-31");
    let page = app
        .get(&format!("{range}&limit=1"), Some(&access))
        .await
        .expect(200);
    let cursor = page["next_cursor"].as_str().expect("a cursor").to_owned();
    let mut tampered = cursor.clone().into_bytes();
    tampered[0] = b'B';
    let tampered = String::from_utf8(tampered).expect("ascii");
    for query in [
        "cursor=nope".to_owned(),
        "cursor=%00%01".to_owned(),
        format!("cursor={}", &cursor[..20]),
        format!("cursor={cursor}%3D%3D"),
        format!("cursor={tampered}"),
        "cursor=nope&limit=0".to_owned(),
    ] {
        let problem = app
            .get(&format!("{range}&{query}"), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        let fields = error_fields(&problem);
        assert!(
            fields.contains(&"query.cursor".to_owned()),
            "{query}: {fields:?}"
        );
    }
    // A cursor belongs to the date-range listing: without both dates it is refused, not
    // silently ignored.
    for listing in [
        format!("{base}?cursor={cursor}"),
        format!("{base}?start_date=2024-01-01&cursor={cursor}"),
    ] {
        let problem = app
            .get(&listing, Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(error_fields(&problem), ["query.cursor"], "{listing}");
        assert_eq!(problem["errors"][0]["code"], "needs_date_range");
    }
    // The by-account bounds are unchanged.
    let problem = app
        .get(&format!("{base}?limit=101"), Some(&access))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(error_fields(&problem), ["query.limit"]);
}

async fn upserts_count_created_updated_unchanged(app: TestApp) {
    let (user_id, access) = user(&app, "upserts@example.com").await;
    let connection = connection(&app, user_id, "schwab").await;
    let store = &app.store;

    // Accounts: keyed on the provider id within the connection.
    let first = account("A1", "Brokerage", AccountType::Brokerage, "USD", "100.00");
    let created = store
        .upsert_accounts(connection.id, std::slice::from_ref(&first), now())
        .await
        .expect("upsert");
    assert_eq!(
        (created.created, created.updated, created.unchanged),
        (1, 0, 0)
    );
    let before = store
        .account_for_user(user_id, created.ids[0])
        .await
        .expect("store")
        .expect("account");
    let mut same_value = first.clone();
    same_value.balance_amount = dec("100.0");
    let again = store
        .upsert_accounts(connection.id, &[same_value], now())
        .await
        .expect("upsert");
    assert_eq!((again.created, again.updated, again.unchanged), (0, 0, 1));
    assert_eq!(again.ids, created.ids);
    let after = store
        .account_for_user(user_id, created.ids[0])
        .await
        .expect("store")
        .expect("account");
    assert_eq!(after.updated_at, before.updated_at);
    let mut changed = first.clone();
    changed.balance_amount = dec("150.00");
    let batch = store
        .upsert_accounts(
            connection.id,
            &[
                changed,
                account("A2", "Cash", AccountType::Checking, "USD", "1"),
            ],
            now(),
        )
        .await
        .expect("upsert");
    assert_eq!((batch.created, batch.updated, batch.unchanged), (1, 1, 0));
    assert_eq!(batch.ids[0], created.ids[0]);
    let list = app.get("/api/v1/accounts", Some(&access)).await.expect(200);
    assert_eq!(list["total_count"], 2);
    assert_eq!(list["accounts"][0]["balance_amount"], "150.00");

    // Transactions: keyed on the provider id within the account.
    let account_id = created.ids[0];
    let row = transaction("fitid-1", "2024-03-01", "-12.34", TransactionType::Fee);
    let one = store
        .upsert_transactions(account_id, std::slice::from_ref(&row), now())
        .await
        .expect("upsert");
    assert_eq!((one.created, one.updated, one.unchanged), (1, 0, 0));
    let stored = store
        .transaction_for_user(user_id, one.ids[0])
        .await
        .expect("store")
        .expect("transaction");
    let twice = store
        .upsert_transactions(account_id, std::slice::from_ref(&row), now())
        .await
        .expect("upsert");
    assert_eq!((twice.created, twice.updated, twice.unchanged), (0, 0, 1));
    let unchanged = store
        .transaction_for_user(user_id, one.ids[0])
        .await
        .expect("store")
        .expect("transaction");
    assert_eq!(unchanged.updated_at, stored.updated_at);
    let mut amended = row.clone();
    amended.amount = dec("-12.35");
    let third = store
        .upsert_transactions(
            account_id,
            &[
                amended,
                transaction("fitid-2", "2024-03-02", "5", TransactionType::Income),
            ],
            now(),
        )
        .await
        .expect("upsert");
    assert_eq!((third.created, third.updated, third.unchanged), (1, 1, 0));
    let list = app
        .get(
            &format!("/api/v1/accounts/{account_id}/transactions"),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(list["total_count"], 2);
    let amended = app
        .get(
            &format!("/api/v1/transactions/{}", one.ids[0]),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(amended["amount"], "-12.35");
    assert_ne!(amended["updated_at"], amended["created_at"]);

    // Holdings: reactivation counts as an update; deactivation spares the kept ids.
    let holdings = [
        holding("h1", "AAPL", AssetType::Equity, "USD", "1000.00"),
        holding("h2", "VTI", AssetType::Etf, "USD", "500.00"),
    ];
    let first = store
        .upsert_holdings(account_id, &holdings, now())
        .await
        .expect("upsert");
    assert_eq!((first.created, first.updated, first.unchanged), (2, 0, 0));
    let deactivated = store
        .deactivate_missing_holdings(account_id, &["h1".to_owned()], now())
        .await
        .expect("deactivate");
    assert_eq!(deactivated, 1);
    let again = store
        .deactivate_missing_holdings(account_id, &["h1".to_owned()], now())
        .await
        .expect("deactivate");
    assert_eq!(again, 0);
    let second = store
        .upsert_holdings(account_id, &holdings, now())
        .await
        .expect("upsert");
    assert_eq!(
        (second.created, second.updated, second.unchanged),
        (0, 1, 1)
    );
    assert_eq!(
        store
            .deactivate_missing_holdings(account_id, &[], now())
            .await
            .expect("deactivate"),
        2
    );
}

async fn holdings_filters_and_totals(app: TestApp) {
    let (user_id, access) = user(&app, "holdings@example.com").await;
    let connection = connection(&app, user_id, "schwab").await;
    let ids = accounts(
        &app,
        connection.id,
        &[
            account("A1", "Brokerage", AccountType::Brokerage, "USD", "0"),
            account("A2", "Euro", AccountType::Brokerage, "EUR", "0"),
        ],
    )
    .await;
    app.store
        .upsert_holdings(
            ids[0],
            &[
                holding("h1", "AAPL", AssetType::Equity, "USD", "1000.10"),
                holding("h2", "VTI", AssetType::Etf, "USD", "500.05"),
                holding("h3", "OLD", AssetType::Equity, "USD", "7"),
            ],
            now(),
        )
        .await
        .expect("upsert");
    app.store
        .deactivate_missing_holdings(ids[0], &["h1".to_owned(), "h2".to_owned()], now())
        .await
        .expect("deactivate");
    app.store
        .upsert_holdings(
            ids[1],
            &[holding("e1", "ASML", AssetType::Equity, "EUR", "300")],
            now(),
        )
        .await
        .expect("upsert");

    let list = app.get("/api/v1/holdings", Some(&access)).await.expect(200);
    assert_eq!(
        provider_ids(&list, "holdings", "symbol"),
        ["AAPL", "ASML", "VTI"]
    );
    assert_eq!(list["total_count"], 3);
    assert_eq!(list["active_count"], 3);
    assert_eq!(
        list["total_market_value_by_currency"],
        json!({"EUR": "300", "USD": "1500.15"})
    );
    let first = &list["holdings"][0];
    let mut keys: Vec<&str> = first
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "account_id",
            "asset_type",
            "average_price",
            "cost_basis",
            "created_at",
            "currency",
            "current_price",
            "id",
            "is_active",
            "last_synced_at",
            "market_value",
            "provider_holding_id",
            "quantity",
            "security_name",
            "symbol",
            "unrealized_gain_loss",
            "updated_at",
        ]
    );
    assert_eq!(first["quantity"], "10");
    assert_eq!(first["cost_basis"], "900.00");
    assert_eq!(first["current_price"], Value::Null);
    assert_eq!(first["asset_type"], "equity");

    let everything = app
        .get("/api/v1/holdings?active_only=false", Some(&access))
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&everything, "holdings", "symbol"),
        ["AAPL", "ASML", "OLD", "VTI"]
    );
    assert_eq!(everything["total_count"], 4);
    assert_eq!(everything["active_count"], 3);
    assert_eq!(
        everything["total_market_value_by_currency"],
        json!({"EUR": "300", "USD": "1507.15"})
    );
    let equities = app
        .get("/api/v1/holdings?asset_type=equity", Some(&access))
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&equities, "holdings", "symbol"),
        ["AAPL", "ASML"]
    );
    let symbol = app
        .get("/api/v1/holdings?symbol=vti", Some(&access))
        .await
        .expect(200);
    assert_eq!(provider_ids(&symbol, "holdings", "symbol"), ["VTI"]);
    let none = app
        .get("/api/v1/holdings?symbol=old", Some(&access))
        .await
        .expect(200);
    assert_eq!(none["total_count"], 0);

    let per_account = app
        .get(
            &format!("/api/v1/accounts/{}/holdings", ids[0]),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&per_account, "holdings", "symbol"),
        ["AAPL", "VTI"]
    );
    assert_eq!(
        per_account["total_market_value_by_currency"],
        json!({"USD": "1500.15"})
    );
    let per_account_all = app
        .get(
            &format!(
                "/api/v1/accounts/{}/holdings?active_only=false&asset_type=equity",
                ids[0]
            ),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&per_account_all, "holdings", "symbol"),
        ["AAPL", "OLD"]
    );
    assert_eq!(per_account_all["active_count"], 1);

    let problem = app
        .get("/api/v1/holdings?asset_type=bond", Some(&access))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(error_fields(&problem), ["query.asset_type"]);
    app.get(
        &format!("/api/v1/accounts/{}/holdings?active_only=2", ids[0]),
        Some(&access),
    )
    .await
    .expect_problem(422, "validation_failed");
}

async fn snapshots_latest_history_and_per_account(app: TestApp) {
    let (user_id, access) = user(&app, "snapshots@example.com").await;
    let connection = connection(&app, user_id, "schwab").await;
    let ids = accounts(
        &app,
        connection.id,
        &[
            account("A1", "Alpha", AccountType::Brokerage, "USD", "0"),
            account("A2", "Beta", AccountType::Checking, "USD", "0"),
            account("A3", "Gamma", AccountType::Savings, "USD", "0"),
        ],
    )
    .await;
    let (alpha, beta) = (ids[0], ids[1]);
    for (captured, balance, source) in [
        (
            "2024-01-01T09:00:00Z",
            "100.00",
            SnapshotSource::AccountSync,
        ),
        (
            "2024-01-02T09:00:00Z",
            "110.00",
            SnapshotSource::HoldingsSync,
        ),
        (
            "2024-01-03T09:00:00.123456Z",
            "120.00",
            SnapshotSource::AccountSync,
        ),
        ("2024-01-04T09:00:00Z", "130.00", SnapshotSource::FileImport),
    ] {
        app.store
            .insert_snapshot(&snapshot(alpha, captured, balance, source))
            .await
            .expect("snapshot");
    }
    app.store
        .insert_snapshot(&snapshot(
            beta,
            "2023-12-31T23:59:59Z",
            "5.5",
            SnapshotSource::ManualSync,
        ))
        .await
        .expect("snapshot");

    // Latest per account; an account without snapshots is absent.
    let latest = app
        .get("/api/v1/balance-snapshots", Some(&access))
        .await
        .expect(200);
    assert_eq!(latest["total_count"], 2);
    assert_eq!(
        provider_ids(&latest, "snapshots", "balance"),
        ["130.00", "5.5"]
    );
    let first = &latest["snapshots"][0];
    let mut keys: Vec<&str> = first
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "account_id",
            "available_balance",
            "balance",
            "captured_at",
            "cash_value",
            "currency",
            "holdings_value",
            "id",
            "source",
        ]
    );
    assert_eq!(first["account_id"], alpha.to_string());
    assert_eq!(first["source"], "file_import");
    assert_eq!(first["captured_at"], "2024-01-04T09:00:00Z");
    assert_eq!(first["holdings_value"], "100.00");
    assert_eq!(first["available_balance"], Value::Null);

    // History: chronological, RFC 3339 or plain dates (end date inclusive), optional source.
    let history = format!("/api/v1/accounts/{alpha}/balance-history");
    let days = app
        .get(
            &format!("{history}?start_date=2024-01-02&end_date=2024-01-03"),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&days, "snapshots", "balance"),
        ["110.00", "120.00"]
    );
    assert_eq!(days["total_count"], 2);
    assert_eq!(
        days["snapshots"][1]["captured_at"],
        "2024-01-03T09:00:00.123456Z"
    );
    let instants = app
        .get(
            &format!(
                "{history}?start_date=2024-01-01T09:00:00Z&end_date=2024-01-03T11:00:01%2B02:00"
            ),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&instants, "snapshots", "balance"),
        ["100.00", "110.00", "120.00"]
    );
    let synced = app
        .get(
            &format!("{history}?start_date=2024-01-01&end_date=2024-12-31&source=account_sync"),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&synced, "snapshots", "balance"),
        ["100.00", "120.00"]
    );
    for (query, fields) in [
        ("end_date=2024-01-02", vec!["query.start_date"]),
        ("", vec!["query.start_date", "query.end_date"]),
        (
            "start_date=2024-01-05&end_date=2024-01-01",
            vec!["query.start_date"],
        ),
        (
            "start_date=tomorrow&end_date=2024-01-01",
            vec!["query.start_date"],
        ),
        (
            "start_date=2024-01-01&end_date=2024-01-02&source=cron",
            vec!["query.source"],
        ),
    ] {
        let problem = app
            .get(&format!("{history}?{query}"), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(error_fields(&problem), fields, "{query}");
    }

    // Per account: newest first, limited, with the count of all matching snapshots.
    let list = format!("/api/v1/accounts/{alpha}/balance-snapshots");
    let all = app.get(&list, Some(&access)).await.expect(200);
    assert_eq!(
        provider_ids(&all, "snapshots", "balance"),
        ["130.00", "120.00", "110.00", "100.00"]
    );
    assert_eq!(all["total_count"], 4);
    let two = app
        .get(&format!("{list}?limit=2"), Some(&access))
        .await
        .expect(200);
    assert_eq!(
        provider_ids(&two, "snapshots", "balance"),
        ["130.00", "120.00"]
    );
    assert_eq!(two["total_count"], 4);
    let sourced = app
        .get(
            &format!("{list}?source=account_sync&limit=1"),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(provider_ids(&sourced, "snapshots", "balance"), ["120.00"]);
    assert_eq!(sourced["total_count"], 2);
    for (query, field) in [
        ("limit=0", "query.limit"),
        ("limit=101", "query.limit"),
        ("source=bogus", "query.source"),
    ] {
        let problem = app
            .get(&format!("{list}?{query}"), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(error_fields(&problem), [field], "{query}");
    }
    let empty = app
        .get(
            &format!("/api/v1/accounts/{}/balance-snapshots", ids[2]),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(empty, json!({"snapshots": [], "total_count": 0}));
}

async fn connections_are_found_or_created_once(app: TestApp) {
    let (user_id, _) = user(&app, "imports@example.com").await;
    let store = &app.store;
    let first = store
        .find_or_create_connection(user_id, "file_import", Some("Example Bank"), now())
        .await
        .expect("connection");
    assert_eq!(first.user_id, user_id);
    assert_eq!(first.provider_slug, "file_import");
    assert_eq!(first.alias.as_deref(), Some("Example Bank"));
    assert_eq!(first.status, ConnectionStatus::Active);
    assert!(first.is_connected());
    assert_eq!(first.last_sync_at, None);
    assert_eq!(first.provider_id, provider_id("file_import"));
    let again = store
        .find_or_create_connection(user_id, "file_import", Some("Example Bank"), now())
        .await
        .expect("connection");
    assert_eq!(again.id, first.id);
    assert_eq!(again.created_at, first.created_at);
    let other_bank = store
        .find_or_create_connection(user_id, "file_import", Some("Other Bank"), now())
        .await
        .expect("connection");
    assert_ne!(other_bank.id, first.id);
    let no_alias = store
        .find_or_create_connection(user_id, "file_import", None, now())
        .await
        .expect("connection");
    let no_alias_again = store
        .find_or_create_connection(user_id, "file_import", None, now())
        .await
        .expect("connection");
    assert_eq!(no_alias.id, no_alias_again.id);
    assert_ne!(no_alias.id, first.id);
    let found = store
        .connection_for_user(user_id, first.id)
        .await
        .expect("store")
        .expect("connection");
    assert_eq!(found.id, first.id);
    assert_eq!(found.provider_id, first.provider_id);
    assert_eq!(found.created_at, first.created_at);
    assert!(
        store
            .connection_for_user(Uuid::now_v7(), first.id)
            .await
            .expect("store")
            .is_none()
    );
    assert!(
        store
            .find_or_create_connection(Uuid::now_v7(), "file_import", None, now())
            .await
            .is_err()
    );
    // Concurrent calls for one key agree on one connection.
    let calls = (0..4).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .find_or_create_connection(user_id, "schwab", Some("Race"), now())
                .await
                .expect("connection")
                .id
        })
    });
    let ids: Vec<Uuid> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|joined| joined.expect("task"))
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]));
}
