//! Conformance: reads whose rows grow with what a user stores are paged or capped, so one
//! answer's cost is bounded (decisions.md "One user's work never hurts another's"): the
//! holdings listings and the balance history page by cursor, the portfolio refuses more
//! active holdings than it adds up.

use std::collections::HashSet;

use aggregation_core::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewSnapshot, SnapshotSource, now,
};
use aggregation_tests::{TestApp, conformance};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde_json::Value;
use uuid::Uuid;

conformance!(
    holdings_page_by_cursor_with_whole_counts,
    holdings_default_page_is_a_thousand,
    account_holdings_page_by_cursor,
    balance_history_pages_by_cursor,
    page_parameters_out_of_shape_are_422,
    the_document_states_the_page_bounds,
    portfolio_past_its_holding_cap_is_400,
);

/// The default (and largest) page of the holdings listings and of the balance history.
const PAGE: usize = 1_000;
/// The most active holdings the portfolio adds up.
const PORTFOLIO_HOLDINGS: usize = 10_000;

fn dec(text: &str) -> Decimal {
    text.parse().expect("decimal")
}

/// A verified, logged-in user: (id, access token).
async fn user(app: &TestApp, email: &str) -> (Uuid, String) {
    let (id, access, _) = app.user(email).await;
    (id.parse().expect("user id"), access)
}

/// Brokerage accounts `names` of a fresh connection of the user, in order.
async fn accounts(app: &TestApp, user_id: Uuid, names: &[&str]) -> Vec<Uuid> {
    let connection = app.active_connection(user_id, "schwab", None).await;
    let rows: Vec<NewAccount> = names
        .iter()
        .map(|name| NewAccount {
            provider_account_id: (*name).to_owned(),
            account_number: None,
            name: (*name).to_owned(),
            account_type: AccountType::Brokerage,
            currency: "USD".to_owned(),
            balance_amount: Decimal::ZERO,
            available_balance_amount: None,
            is_active: true,
        })
        .collect();
    app.store
        .upsert_accounts(connection.id, &rows, now())
        .await
        .expect("upsert accounts")
        .ids
}

fn holding(key: &str, symbol: &str, value: &str) -> NewHolding {
    NewHolding {
        provider_holding_id: key.to_owned(),
        symbol: symbol.to_owned(),
        security_name: None,
        asset_type: AssetType::Equity,
        quantity: dec("1"),
        cost_basis: None,
        market_value: dec(value),
        currency: "USD".to_owned(),
        average_price: None,
        current_price: None,
        unrealized_gain_loss: None,
    }
}

/// `count` holdings `{prefix}{n}`, symbols repeating over a few values so that ties within a
/// symbol are ordered by id.
fn holdings(prefix: &str, count: usize) -> Vec<NewHolding> {
    (0..count)
        .map(|n| {
            let symbol = ["AAA", "BBB", "CCC", "DDD"][n % 4];
            holding(&format!("{prefix}{n}"), symbol, "1.50")
        })
        .collect()
}

/// Follows `next_cursor` from `first` until `has_more` is false; every page's rows (as
/// `(symbol or captured_at, id)`) and sizes, and checks what every page must show alike.
async fn walk(
    app: &TestApp,
    access: &str,
    first: &str,
    rows_key: &str,
    order_key: &str,
    total: usize,
) -> (Vec<(String, String)>, Vec<usize>) {
    let join = if first.contains('?') { '&' } else { '?' };
    let mut cursor: Option<String> = None;
    let mut listed = Vec::new();
    let mut sizes = Vec::new();
    loop {
        let path = match &cursor {
            Some(cursor) => format!("{first}{join}cursor={cursor}"),
            None => first.to_owned(),
        };
        let page = app.get(&path, Some(access)).await.expect(200);
        assert_eq!(page["total_count"], total, "{path}");
        let rows = page[rows_key].as_array().expect("rows");
        sizes.push(rows.len());
        listed.extend(rows.iter().map(|row| {
            (
                row[order_key].as_str().expect("order key").to_owned(),
                row["id"].as_str().expect("id").to_owned(),
            )
        }));
        let has_more = page["has_more"].as_bool().expect("has_more");
        assert_eq!(has_more, page["next_cursor"].is_string(), "{page}");
        if !has_more {
            assert_eq!(page["next_cursor"], Value::Null);
            break;
        }
        assert!(sizes.len() <= total + 1, "the pages never end");
        cursor = Some(page["next_cursor"].as_str().expect("cursor").to_owned());
    }
    (listed, sizes)
}

fn assert_sorted_and_distinct(rows: &[(String, String)]) {
    let mut sorted = rows.to_vec();
    sorted.sort();
    assert_eq!(rows, sorted, "ordered by the key, then id");
    let distinct: HashSet<&(String, String)> = rows.iter().collect();
    assert_eq!(distinct.len(), rows.len(), "no row twice");
}

async fn holdings_page_by_cursor_with_whole_counts(app: TestApp) {
    let (user_id, access) = user(&app, "holding-pages@example.com").await;
    let ids = accounts(&app, user_id, &["One", "Two"]).await;
    app.store
        .upsert_holdings(ids[0], &holdings("a", 13), now())
        .await
        .expect("holdings");
    app.store
        .upsert_holdings(ids[1], &holdings("b", 9), now())
        .await
        .expect("holdings");
    // Three of the second account's leave: inactive, listed only with active_only=false.
    let keep: Vec<String> = (0..6).map(|n| format!("b{n}")).collect();
    app.store
        .deactivate_missing_holdings(ids[1], &keep, now())
        .await
        .expect("deactivate");
    // Another user's holdings are never listed nor counted, and their ids are no cursor here.
    let (stranger, stranger_access) = user(&app, "holding-stranger@example.com").await;
    let theirs = accounts(&app, stranger, &["Theirs"]).await;
    app.store
        .upsert_holdings(theirs[0], &holdings("s", 5), now())
        .await
        .expect("holdings");

    let (active, sizes) = walk(
        &app,
        &access,
        "/api/v1/holdings?limit=5",
        "holdings",
        "symbol",
        19,
    )
    .await;
    assert_eq!(sizes, [5, 5, 5, 4]);
    assert_sorted_and_distinct(&active);
    let (everything, sizes) = walk(
        &app,
        &access,
        "/api/v1/holdings?limit=5&active_only=false",
        "holdings",
        "symbol",
        22,
    )
    .await;
    assert_eq!(sizes, [5, 5, 5, 5, 2]);
    assert_sorted_and_distinct(&everything);
    let active_ids: HashSet<&String> = active.iter().map(|(_, id)| id).collect();
    assert!(
        everything
            .iter()
            .filter(|(_, id)| active_ids.contains(id))
            .count()
            == 19
    );

    // The counts are of every matching holding, the sums of the page's.
    let page = app
        .get("/api/v1/holdings?limit=4&active_only=false", Some(&access))
        .await
        .expect(200);
    assert_eq!(page["total_count"], 22);
    assert_eq!(page["active_count"], 19);
    assert_eq!(page["holdings"].as_array().map(Vec::len), Some(4));
    assert_eq!(page["total_market_value_by_currency"]["USD"], "6.00");
    // One page holding everything: no next page.
    let whole = app
        .get("/api/v1/holdings?active_only=false", Some(&access))
        .await
        .expect(200);
    assert_eq!(whole["holdings"].as_array().map(Vec::len), Some(22));
    assert_eq!(whole["has_more"], false);
    assert_eq!(whole["next_cursor"], Value::Null);
    assert_eq!(whole["total_market_value_by_currency"]["USD"], "33.00");

    // Filters page the same way: the symbol filter with pages of 2.
    let (ccc, sizes) = walk(
        &app,
        &access,
        "/api/v1/holdings?symbol=ccc&limit=2",
        "holdings",
        "symbol",
        4,
    )
    .await;
    assert_eq!(sizes, [2, 2]);
    assert!(ccc.iter().all(|(symbol, _)| symbol == "CCC"));

    // A cursor naming a holding the caller does not own lists nothing of anybody's.
    let first = app
        .get("/api/v1/holdings?limit=1", Some(&stranger_access))
        .await
        .expect(200);
    let foreign = first["next_cursor"].as_str().expect("cursor");
    let page = app
        .get(&format!("/api/v1/holdings?cursor={foreign}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(page["holdings"], Value::Array(Vec::new()));
    assert_eq!(page["total_count"], 19);
    assert_eq!(page["has_more"], false);
}

async fn holdings_default_page_is_a_thousand(app: TestApp) {
    let (user_id, access) = user(&app, "holding-default@example.com").await;
    let ids = accounts(&app, user_id, &["Big"]).await;
    app.store
        .upsert_holdings(ids[0], &holdings("h", PAGE + 1), now())
        .await
        .expect("holdings");
    let (listed, sizes) = walk(
        &app,
        &access,
        "/api/v1/holdings",
        "holdings",
        "symbol",
        PAGE + 1,
    )
    .await;
    assert_eq!(sizes, [PAGE, 1]);
    assert_sorted_and_distinct(&listed);
    let first = app.get("/api/v1/holdings", Some(&access)).await.expect(200);
    assert_eq!(first["active_count"], PAGE + 1);
    assert_eq!(first["total_market_value_by_currency"]["USD"], "1500.00");
}

async fn account_holdings_page_by_cursor(app: TestApp) {
    let (user_id, access) = user(&app, "account-holding-pages@example.com").await;
    let ids = accounts(&app, user_id, &["Mine", "Other"]).await;
    app.store
        .upsert_holdings(ids[0], &holdings("m", 7), now())
        .await
        .expect("holdings");
    app.store
        .upsert_holdings(ids[1], &holdings("o", 3), now())
        .await
        .expect("holdings");
    let path = format!("/api/v1/accounts/{}/holdings?limit=3", ids[0]);
    let (listed, sizes) = walk(&app, &access, &path, "holdings", "symbol", 7).await;
    assert_eq!(sizes, [3, 3, 1]);
    assert_sorted_and_distinct(&listed);
    // A cursor of the other account's listing names a holding outside this one: nothing.
    let other = app
        .get(
            &format!("/api/v1/accounts/{}/holdings?limit=1", ids[1]),
            Some(&access),
        )
        .await
        .expect(200);
    let cursor = other["next_cursor"].as_str().expect("cursor");
    let page = app
        .get(
            &format!("/api/v1/accounts/{}/holdings?cursor={cursor}", ids[0]),
            Some(&access),
        )
        .await
        .expect(200);
    assert_eq!(page["holdings"], Value::Array(Vec::new()));
    assert_eq!(page["total_count"], 7);
}

fn snapshot(account_id: Uuid, captured_at: DateTime<Utc>, source: SnapshotSource) -> NewSnapshot {
    NewSnapshot {
        account_id,
        balance: dec("10.00"),
        available_balance: None,
        holdings_value: None,
        cash_value: None,
        currency: "USD".to_owned(),
        source,
        captured_at,
    }
}

async fn balance_history_pages_by_cursor(app: TestApp) {
    let (user_id, access) = user(&app, "history-pages@example.com").await;
    let ids = accounts(&app, user_id, &["Saved", "Elsewhere"]).await;
    let start: DateTime<Utc> = "2024-03-01T00:00:00Z".parse().expect("instant");
    // Twelve in March, pairs sharing an instant (ordered by id), and one on each side of it.
    for n in 0..12 {
        let at = start + Duration::hours(i64::from(n / 2));
        let source = if n % 3 == 0 {
            SnapshotSource::FileImport
        } else {
            SnapshotSource::AccountSync
        };
        app.store
            .insert_snapshot(&snapshot(ids[0], at, source))
            .await
            .expect("snapshot");
    }
    for outside in ["2024-02-29T23:59:59Z", "2024-04-01T00:00:00Z"] {
        app.store
            .insert_snapshot(&snapshot(
                ids[0],
                outside.parse().expect("instant"),
                SnapshotSource::AccountSync,
            ))
            .await
            .expect("snapshot");
    }
    let base = format!(
        "/api/v1/accounts/{}/balance-history?start_date=2024-03-01&end_date=2024-03-31",
        ids[0]
    );
    let (listed, sizes) = walk(
        &app,
        &access,
        &format!("{base}&limit=5"),
        "snapshots",
        "captured_at",
        12,
    )
    .await;
    assert_eq!(sizes, [5, 5, 2]);
    assert_sorted_and_distinct(&listed);
    let (whole, sizes) = walk(&app, &access, &base, "snapshots", "captured_at", 12).await;
    assert_eq!(sizes, [12]);
    assert_eq!(whole, listed, "the pages make up the whole range");
    // The source filter pages too.
    let (imports, sizes) = walk(
        &app,
        &access,
        &format!("{base}&source=file_import&limit=3"),
        "snapshots",
        "captured_at",
        4,
    )
    .await;
    assert_eq!(sizes, [3, 1]);
    assert_sorted_and_distinct(&imports);
    // A cursor naming a snapshot of another account lists nothing.
    for _ in 0..2 {
        app.store
            .insert_snapshot(&snapshot(ids[1], start, SnapshotSource::AccountSync))
            .await
            .expect("snapshot");
    }
    let other = app
        .get(
            &format!(
                "/api/v1/accounts/{}/balance-history?start_date=2024-03-01&end_date=2024-03-31&limit=1",
                ids[1]
            ),
            Some(&access),
        )
        .await
        .expect(200);
    let cursor = other["next_cursor"].as_str().expect("cursor");
    let page = app
        .get(&format!("{base}&cursor={cursor}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(page["snapshots"], Value::Array(Vec::new()));
    assert_eq!(page["total_count"], 12);
}

async fn page_parameters_out_of_shape_are_422(app: TestApp) {
    let (user_id, access) = user(&app, "page-shapes@example.com").await;
    let ids = accounts(&app, user_id, &["Shapes"]).await;
    app.store
        .upsert_holdings(ids[0], &holdings("x", 3), now())
        .await
        .expect("holdings");
    let holdings_cursor = app
        .get("/api/v1/holdings?limit=1", Some(&access))
        .await
        .expect(200)["next_cursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    let history = format!(
        "/api/v1/accounts/{}/balance-history?start_date=2024-01-01&end_date=2024-12-31",
        ids[0]
    );
    let account_holdings = format!("/api/v1/accounts/{}/holdings", ids[0]);
    for (path, field) in [
        ("/api/v1/holdings?limit=0".to_owned(), "query.limit"),
        ("/api/v1/holdings?limit=1001".to_owned(), "query.limit"),
        ("/api/v1/holdings?limit=ten".to_owned(), "query.limit"),
        ("/api/v1/holdings?cursor=nope".to_owned(), "query.cursor"),
        (
            "/api/v1/holdings?cursor=AAAAAAAAAAAAAAAAAAAAAAA".to_owned(),
            "query.cursor",
        ),
        (format!("{account_holdings}?limit=1001"), "query.limit"),
        (format!("{account_holdings}?cursor=%00"), "query.cursor"),
        (format!("{history}&limit=0"), "query.limit"),
        (format!("{history}&limit=1001"), "query.limit"),
        (format!("{history}&cursor=nope"), "query.cursor"),
        // A cursor of one listing is refused by another.
        (
            format!("{history}&cursor={holdings_cursor}"),
            "query.cursor",
        ),
    ] {
        let problem = app
            .get(&path, Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{path}");
    }
    // The largest page is allowed.
    app.get("/api/v1/holdings?limit=1000", Some(&access))
        .await
        .expect(200);
    app.get(&format!("{history}&limit=1000"), Some(&access))
        .await
        .expect(200);
}

async fn portfolio_past_its_holding_cap_is_400(app: TestApp) {
    let (user_id, access) = user(&app, "portfolio-cap@example.com").await;
    let ids = accounts(&app, user_id, &["Wide"]).await;
    app.store
        .upsert_holdings(ids[0], &holdings("p", PORTFOLIO_HOLDINGS), now())
        .await
        .expect("holdings");
    let at_cap = app
        .get("/api/v1/portfolio", Some(&access))
        .await
        .expect(200);
    let usd = &at_cap["currencies"][0];
    assert_eq!(usd["market_value"], "15000.00", "{at_cap}");
    app.store
        .upsert_holdings(ids[0], &[holding("one-more", "EEE", "1")], now())
        .await
        .expect("holdings");
    let problem = app
        .get("/api/v1/portfolio", Some(&access))
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("10001")),
        "{problem}"
    );
    // Other reads of the same user go on.
    app.get("/api/v1/holdings?limit=1", Some(&access))
        .await
        .expect(200);
}

async fn the_document_states_the_page_bounds(app: TestApp) {
    let document = app.get("/api/v1/openapi.json", None).await.expect(200);
    for path in [
        "/api/v1/holdings",
        "/api/v1/accounts/{id}/holdings",
        "/api/v1/accounts/{id}/balance-history",
    ] {
        let parameters = document["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{path} has parameters"));
        let schema = |name: &str| {
            parameters
                .iter()
                .find(|parameter| parameter["name"] == name)
                .map(|parameter| parameter["schema"].clone())
                .unwrap_or_else(|| panic!("{path} has no parameter {name}"))
        };
        let limit = schema("limit");
        assert_eq!(
            (limit["minimum"].clone(), limit["maximum"].clone()),
            (1.into(), 1000.into()),
            "{path}"
        );
        assert_eq!(
            schema("cursor")["pattern"],
            "^([A-Za-z0-9_-]{23})?$",
            "{path}"
        );
    }
}
