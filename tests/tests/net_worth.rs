//! Conformance: `GET /api/v1/net-worth` (now, by account type, and the history built from
//! balance snapshots) and `GET /api/v1/portfolio`, seeded through the store; and the sign
//! convention (money owed is negative) of each source, through sync and import.

use aggregation_core::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewSnapshot, SnapshotSource, now,
};
use aggregation_tests::{TestApp, conformance, upload, upload_with};
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use uuid::Uuid;

conformance!(
    net_worth_now_by_type_and_history,
    net_worth_intervals_count_back_from_to,
    net_worth_defaults_and_scope,
    net_worth_bounds_are_422,
    portfolio_sums_per_symbol_and_currency,
    ofx_bank_and_credit_card_balances_keep_the_owner_sign,
    ofx_short_positions_are_negative,
    statement_formats_keep_money_owed_negative,
);

fn dec(text: &str) -> Decimal {
    text.parse().expect("decimal")
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

/// A connection of the user; its id.
async fn connection(app: &TestApp, user_id: Uuid) -> Uuid {
    app.active_connection(user_id, "schwab", None).await.id
}

fn account(
    key: &str,
    kind: AccountType,
    currency: &str,
    balance: &str,
    active: bool,
) -> NewAccount {
    NewAccount {
        provider_account_id: key.to_owned(),
        account_number: None,
        name: format!("Account {key}"),
        account_type: kind,
        currency: currency.to_owned(),
        balance_amount: dec(balance),
        available_balance_amount: None,
        is_active: active,
    }
}

async fn snapshot(app: &TestApp, account_id: Uuid, captured: &str, balance: &str) {
    app.store
        .insert_snapshot(&NewSnapshot {
            account_id,
            balance: dec(balance),
            available_balance: None,
            holdings_value: None,
            cash_value: None,
            currency: "USD".to_owned(),
            source: SnapshotSource::AccountSync,
            captured_at: at(captured),
        })
        .await
        .expect("snapshot");
}

/// Checking (1000, snapshots 500 on Jan 1, 800 on Jan 15, 900 at the last second of Feb 10),
/// credit card (-120, snapshot -50 on Jan 20), brokerage (5000, no snapshot), an inactive
/// savings account (999, snapshot 999 on Jan 1) in USD, and a EUR savings account (200).
async fn seeded(app: &TestApp) -> String {
    let (user_id, access) = user(app, "worth@example.com").await;
    let connection = connection(app, user_id).await;
    let ids = app
        .store
        .upsert_accounts(
            connection,
            &[
                account("CHK", AccountType::Checking, "USD", "1000.00", true),
                account("CC", AccountType::CreditCard, "usd", "-120.00", true),
                account("BRK", AccountType::Brokerage, "USD", "5000", true),
                account("OLD", AccountType::Savings, "USD", "999", false),
                account("EUR", AccountType::Savings, "EUR", "200.00", true),
            ],
            now(),
        )
        .await
        .expect("accounts")
        .ids;
    let (checking, card, old) = (ids[0], ids[1], ids[3]);
    snapshot(app, checking, "2024-01-01T09:00:00Z", "500.00").await;
    snapshot(app, checking, "2024-01-15T00:00:00Z", "800.00").await;
    snapshot(app, checking, "2024-02-10T23:59:59.999999Z", "900.00").await;
    snapshot(app, card, "2024-01-20T12:00:00Z", "-50.00").await;
    snapshot(app, old, "2024-01-01T00:00:00Z", "999").await;
    access
}

fn currency<'a>(body: &'a Value, code: &str) -> &'a Value {
    body["currencies"]
        .as_array()
        .expect("currencies")
        .iter()
        .find(|entry| entry["currency"] == code)
        .unwrap_or_else(|| panic!("no {code} in {body}"))
}

/// The history as (date, net worth, assets, liabilities), amounts by value.
fn history(entry: &Value) -> Vec<(String, Decimal, Decimal, Decimal)> {
    entry["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|point| {
            let amount = |key: &str| dec(point[key].as_str().expect("decimal string"));
            (
                point["date"].as_str().expect("date").to_owned(),
                amount("net_worth"),
                amount("assets"),
                amount("liabilities"),
            )
        })
        .collect()
}

fn point(
    date: &str,
    net: &str,
    assets: &str,
    liabilities: &str,
) -> (String, Decimal, Decimal, Decimal) {
    (date.to_owned(), dec(net), dec(assets), dec(liabilities))
}

async fn net_worth_now_by_type_and_history(app: TestApp) {
    let access = seeded(&app).await;
    let body = app
        .get(
            "/api/v1/net-worth?from=2024-01-01&to=2024-03-01&interval=month",
            Some(&access),
        )
        .await
        .expect(200);
    assert!(body["as_of"].as_str().expect("as_of").ends_with('Z'));
    let codes: Vec<&str> = body["currencies"]
        .as_array()
        .expect("currencies")
        .iter()
        .map(|entry| entry["currency"].as_str().expect("code"))
        .collect();
    assert_eq!(codes, ["EUR", "USD"]);

    // Now: active accounts only; the credit card is a liability, the inactive savings absent.
    let usd = currency(&body, "USD");
    assert_eq!(dec(usd["net_worth"].as_str().expect("net")), dec("5880"));
    assert_eq!(dec(usd["assets"].as_str().expect("assets")), dec("6000"));
    assert_eq!(dec(usd["liabilities"].as_str().expect("liab")), dec("-120"));
    assert_eq!(
        usd["by_account_type"],
        json!({"brokerage": "5000", "checking": "1000.00", "credit_card": "-120.00"})
    );
    // History: each active account's latest snapshot on or before each point.
    assert_eq!(
        history(usd),
        [
            point("2024-01-01", "500", "500", "0"),
            point("2024-02-01", "750", "800", "-50"),
            point("2024-03-01", "850", "900", "-50"),
        ]
    );
    let eur = currency(&body, "EUR");
    assert_eq!(eur["net_worth"], "200.00");
    assert_eq!(eur["liabilities"], "0");
    assert_eq!(eur["by_account_type"], json!({"savings": "200.00"}));
    assert_eq!(
        history(eur),
        [
            point("2024-01-01", "0", "0", "0"),
            point("2024-02-01", "0", "0", "0"),
            point("2024-03-01", "0", "0", "0"),
        ]
    );
}

async fn net_worth_intervals_count_back_from_to(app: TestApp) {
    let access = seeded(&app).await;
    let get = |query: &'static str| {
        let (app, access) = (&app, &access);
        async move {
            let body = app
                .get(&format!("/api/v1/net-worth?{query}"), Some(access))
                .await
                .expect(200);
            history(currency(&body, "USD"))
        }
    };
    // A snapshot at the last microsecond of a day counts for that day.
    assert_eq!(
        get("from=2024-02-09&to=2024-02-11&interval=day").await,
        [
            point("2024-02-09", "750", "800", "-50"),
            point("2024-02-10", "850", "900", "-50"),
            point("2024-02-11", "850", "900", "-50"),
        ]
    );
    assert_eq!(
        get("from=2024-01-01&to=2024-01-22&interval=WEEK").await,
        [
            point("2024-01-01", "500", "500", "0"),
            point("2024-01-08", "500", "500", "0"),
            point("2024-01-15", "800", "800", "0"),
            point("2024-01-22", "750", "800", "-50"),
        ]
    );
    // Counted back from `to`: `from` itself is a point only when the steps land on it; a
    // month from the 31st falls on each month's last day.
    let months: Vec<String> = get("from=2023-12-15&to=2024-03-31")
        .await
        .into_iter()
        .map(|(date, ..)| date)
        .collect();
    assert_eq!(
        months,
        ["2023-12-31", "2024-01-31", "2024-02-29", "2024-03-31"]
    );
    // Before every snapshot: zero.
    assert_eq!(
        get("from=2023-06-01&to=2023-06-01&interval=day").await,
        [point("2023-06-01", "0", "0", "0")]
    );
}

async fn net_worth_defaults_and_scope(app: TestApp) {
    let access = seeded(&app).await;
    // Defaults: a year back to today, monthly: 13 points, oldest first.
    let body = app
        .get("/api/v1/net-worth", Some(&access))
        .await
        .expect(200);
    let dates: Vec<String> = history(currency(&body, "USD"))
        .into_iter()
        .map(|(date, ..)| date)
        .collect();
    assert_eq!(dates.len(), 13);
    let mut sorted = dates.clone();
    sorted.sort();
    assert_eq!(dates, sorted);
    // Long after the last snapshots, the history holds the latest ones.
    let last = history(currency(&body, "USD")).pop().expect("a point");
    assert_eq!(
        (last.1, last.2, last.3),
        (dec("850"), dec("900"), dec("-50"))
    );

    // Another user sees none of it.
    let (_, other) = user(&app, "other@example.com").await;
    let empty = app.get("/api/v1/net-worth", Some(&other)).await.expect(200);
    assert_eq!(empty["currencies"], json!([]));
    let empty = app.get("/api/v1/portfolio", Some(&other)).await.expect(200);
    assert_eq!(empty["currencies"], json!([]));
    assert!(empty["as_of"].is_string());

    for path in ["/api/v1/net-worth", "/api/v1/portfolio"] {
        app.get(path, None)
            .await
            .expect_problem(401, "unauthorized");
    }
}

async fn net_worth_bounds_are_422(app: TestApp) {
    let (_, access) = user(&app, "bounds@example.com").await;
    for (query, field, code) in [
        ("from=2024-02-01&to=2024-01-31", "query.from", "after_to"),
        (
            "from=2020-01-01&to=2024-01-01&interval=day",
            "query.from",
            "too_many_points",
        ),
        (
            "from=1900-01-01&to=2200-12-31&interval=week",
            "query.from",
            "too_many_points",
        ),
        (
            "from=1899-12-31&to=1900-01-31",
            "query.from",
            "out_of_range",
        ),
        ("to=2201-01-01", "query.to", "out_of_range"),
        ("to=2024-13-01", "query.to", "invalid_date"),
        ("interval=year", "query.interval", "invalid_choice"),
        ("interval=", "query.interval", "invalid_choice"),
    ] {
        let problem = app
            .get(&format!("/api/v1/net-worth?{query}"), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{query}");
        assert_eq!(problem["errors"][0]["code"], code, "{query}");
    }
    // Exactly 1,000 points is allowed; the bounds themselves are accepted dates.
    let (other_id, other) = user(&app, "points@example.com").await;
    let connection = connection(&app, other_id).await;
    app.store
        .upsert_accounts(
            connection,
            &[account("A", AccountType::Checking, "USD", "1", true)],
            now(),
        )
        .await
        .expect("account");
    let body = app
        .get(
            "/api/v1/net-worth?from=2021-04-07&to=2024-01-01&interval=day",
            Some(&other),
        )
        .await
        .expect(200);
    assert_eq!(
        currency(&body, "USD")["history"].as_array().map(Vec::len),
        Some(1000)
    );
    app.get(
        "/api/v1/net-worth?from=1900-01-01&to=1900-01-01",
        Some(&other),
    )
    .await
    .expect(200);
}

#[expect(clippy::too_many_arguments, reason = "one row of a holdings table")]
fn holding(
    key: &str,
    symbol: &str,
    kind: AssetType,
    currency: &str,
    quantity: &str,
    value: &str,
    cost: Option<&str>,
    gain: Option<&str>,
) -> NewHolding {
    NewHolding {
        provider_holding_id: key.to_owned(),
        symbol: symbol.to_owned(),
        security_name: Some(format!("{} Corp", symbol.trim().to_uppercase())),
        asset_type: kind,
        quantity: dec(quantity),
        cost_basis: cost.map(dec),
        market_value: dec(value),
        currency: currency.to_owned(),
        average_price: None,
        current_price: None,
        unrealized_gain_loss: gain.map(dec),
    }
}

async fn portfolio_sums_per_symbol_and_currency(app: TestApp) {
    let (user_id, access) = user(&app, "portfolio@example.com").await;
    let connection = connection(&app, user_id).await;
    let ids = app
        .store
        .upsert_accounts(
            connection,
            &[
                account("A", AccountType::Brokerage, "USD", "0", true),
                account("B", AccountType::Ira, "USD", "0", true),
                account("C", AccountType::Brokerage, "USD", "0", false),
            ],
            now(),
        )
        .await
        .expect("accounts")
        .ids;
    let (a, b, closed) = (ids[0], ids[1], ids[2]);
    let mut in_a = vec![
        holding(
            "a-aapl",
            "aapl",
            AssetType::Equity,
            "USD",
            "10",
            "1500",
            Some("1000"),
            None,
        ),
        holding(
            "a-vti",
            "VTI",
            AssetType::Etf,
            "USD",
            "8",
            "2000",
            None,
            Some("100"),
        ),
        holding(
            "a-sap",
            "SAP",
            AssetType::Equity,
            "EUR",
            "2",
            "300.50",
            Some("250"),
            None,
        ),
        holding(
            "a-gone",
            "GONE",
            AssetType::Equity,
            "USD",
            "1",
            "7777",
            None,
            None,
        ),
    ];
    app.store
        .upsert_holdings(a, &in_a, now())
        .await
        .expect("holdings");
    // A position the provider no longer reports is inactive.
    in_a.pop();
    let keep: Vec<String> = in_a.iter().map(|h| h.provider_holding_id.clone()).collect();
    app.store
        .deactivate_missing_holdings(a, &keep, now())
        .await
        .expect("deactivate");
    let mut in_b = vec![holding(
        "b-aapl",
        " AAPL ",
        AssetType::Equity,
        "USD",
        "4",
        "500",
        Some("600"),
        None,
    )];
    for n in 1..=10 {
        in_b.push(holding(
            &format!("b-s{n:02}"),
            &format!("S{n:02}"),
            AssetType::MutualFund,
            "USD",
            "1",
            &n.to_string(),
            None,
            None,
        ));
    }
    app.store
        .upsert_holdings(b, &in_b, now())
        .await
        .expect("holdings");
    // Holdings of an inactive account do not count.
    app.store
        .upsert_holdings(
            closed,
            &[holding(
                "c-msft",
                "MSFT",
                AssetType::Equity,
                "USD",
                "1",
                "9999",
                None,
                None,
            )],
            now(),
        )
        .await
        .expect("holdings");

    let body = app
        .get("/api/v1/portfolio", Some(&access))
        .await
        .expect(200);
    assert!(body["as_of"].as_str().expect("as_of").ends_with('Z'));
    let usd = currency(&body, "USD");
    // 1500 + 2000 + 500 + (1 + … + 10).
    assert_eq!(dec(usd["market_value"].as_str().expect("mv")), dec("4055"));
    assert_eq!(dec(usd["cost_basis"].as_str().expect("cb")), dec("1600"));
    // AAPL in A: 1500 - 1000; VTI: reported 100; AAPL in B: 500 - 600.
    assert_eq!(
        dec(usd["unrealized_gain_loss"].as_str().expect("gain")),
        dec("500")
    );
    assert_eq!(
        usd["by_asset_type"],
        json!({"equity": "2000", "etf": "2000", "mutual_fund": "55"})
    );
    let top = usd["top_holdings"].as_array().expect("top");
    assert_eq!(top.len(), 10);
    let symbols: Vec<&str> = top
        .iter()
        .map(|h| h["symbol"].as_str().expect("symbol"))
        .collect();
    assert_eq!(
        symbols,
        [
            "AAPL", "VTI", "S10", "S09", "S08", "S07", "S06", "S05", "S04", "S03"
        ]
    );
    assert_eq!(
        top[0],
        json!({
            "symbol": "AAPL", "security_name": "AAPL Corp", "asset_type": "equity",
            "quantity": "14", "market_value": "2000", "cost_basis": "1600",
            "unrealized_gain_loss": "400", "account_count": 2
        })
    );
    assert_eq!(top[1]["cost_basis"], Value::Null);
    assert_eq!(top[1]["unrealized_gain_loss"], "100");
    assert_eq!(top[1]["account_count"], 1);

    let eur = currency(&body, "EUR");
    assert_eq!(eur["market_value"], "300.50");
    assert_eq!(eur["cost_basis"], "250");
    assert_eq!(eur["unrealized_gain_loss"], "50.50");
    assert_eq!(eur["top_holdings"][0]["symbol"], "SAP");
}

/// An OFX 1.x statement file around `body` (the message sets), from `org`.
fn ofx(org: &str, body: &str) -> String {
    format!(
        "OFXHEADER:100\r\nDATA:OFXSGML\r\nVERSION:102\r\nSECURITY:NONE\r\nENCODING:USASCII\r\n\
         CHARSET:1252\r\nCOMPRESSION:NONE\r\nOLDFILEUID:NONE\r\nNEWFILEUID:NONE\r\n\r\n\
         <OFX><SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS>\
         <DTSERVER>20240301<LANGUAGE>ENG<FI><ORG>{org}<FID>99</FI></SONRS></SIGNONMSGSRSV1>\
         {body}</OFX>"
    )
}

async fn accounts_by_type(app: &TestApp, access: &str) -> Value {
    app.get("/api/v1/accounts", Some(access)).await.expect(200)
}

async fn ofx_bank_and_credit_card_balances_keep_the_owner_sign(app: TestApp) {
    let (_, access) = user(&app, "ofx-signs@example.com").await;
    // OFX signs balances from the owner's view: an overdrawn checking account and a credit
    // card with 120.00 owed are written negative, a card in credit positive.
    let file = ofx(
        "Sign Bank",
        "<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS>\
         <CURDEF>USD<BANKACCTFROM><BANKID>1<ACCTID>1111<ACCTTYPE>CHECKING</BANKACCTFROM>\
         <LEDGERBAL><BALAMT>-15.25<DTASOF>20240229</LEDGERBAL></STMTRS></STMTTRNRS>\
         </BANKMSGSRSV1>\
         <CREDITCARDMSGSRSV1><CCSTMTTRNRS><TRNUID>2<STATUS><CODE>0<SEVERITY>INFO</STATUS>\
         <CCSTMTRS><CURDEF>USD<CCACCTFROM><ACCTID>2222</CCACCTFROM>\
         <LEDGERBAL><BALAMT>-120.00<DTASOF>20240229</LEDGERBAL></CCSTMTRS></CCSTMTTRNRS>\
         <CCSTMTTRNRS><TRNUID>3<STATUS><CODE>0<SEVERITY>INFO</STATUS>\
         <CCSTMTRS><CURDEF>USD<CCACCTFROM><ACCTID>3333</CCACCTFROM>\
         <LEDGERBAL><BALAMT>30.00<DTASOF>20240229</LEDGERBAL></CCSTMTRS></CCSTMTTRNRS>\
         </CREDITCARDMSGSRSV1>",
    );
    upload(&app, "signs.ofx", &file, &access).await.expect(201);
    let accounts = accounts_by_type(&app, &access).await;
    let mut balances: Vec<(String, String)> = accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .map(|a| {
            (
                a["account_number_masked"]
                    .as_str()
                    .expect("masked")
                    .to_owned(),
                a["balance_amount"].as_str().expect("balance").to_owned(),
            )
        })
        .collect();
    balances.sort();
    assert_eq!(
        balances,
        [
            ("****1111".to_owned(), "-15.25".to_owned()),
            ("****2222".to_owned(), "-120.00".to_owned()),
            ("****3333".to_owned(), "30.00".to_owned()),
        ]
    );
    let body = app
        .get(
            "/api/v1/net-worth?from=2024-02-28&to=2024-02-29&interval=day",
            Some(&access),
        )
        .await
        .expect(200);
    let usd = currency(&body, "USD");
    assert_eq!(dec(usd["liabilities"].as_str().expect("l")), dec("-135.25"));
    assert_eq!(dec(usd["assets"].as_str().expect("a")), dec("30"));
    assert_eq!(
        dec(usd["by_account_type"]["credit_card"].as_str().expect("cc")),
        dec("-90")
    );
    assert_eq!(
        history(usd),
        [
            point("2024-02-28", "0", "0", "0"),
            point("2024-02-29", "-105.25", "30", "-135.25"),
        ]
    );
}

async fn ofx_short_positions_are_negative(app: TestApp) {
    let (_, access) = user(&app, "ofx-short@example.com").await;
    // One long and one short position; the short one written with positive units and value,
    // as some brokers do, the long one plain.
    let file = ofx(
        "Sign Broker",
        "<INVSTMTMSGSRSV1><INVSTMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>\
         <INVSTMTRS><DTASOF>20240229<CURDEF>USD<INVACCTFROM><BROKERID>b.example\
         <ACCTID>4444</INVACCTFROM><INVPOSLIST>\
         <POSSTOCK><INVPOS><SECID><UNIQUEID>111111111<UNIQUEIDTYPE>CUSIP</SECID>\
         <HELDINACCT>CASH<POSTYPE>LONG<UNITS>10<UNITPRICE>100<MKTVAL>1000\
         <DTPRICEASOF>20240229</INVPOS></POSSTOCK>\
         <POSSTOCK><INVPOS><SECID><UNIQUEID>222222222<UNIQUEIDTYPE>CUSIP</SECID>\
         <HELDINACCT>MARGIN<POSTYPE>SHORT<UNITS>5<UNITPRICE>40<MKTVAL>200\
         <DTPRICEASOF>20240229</INVPOS></POSSTOCK>\
         </INVPOSLIST><INVBAL><AVAILCASH>500<MARGINBALANCE>0<SHORTBALANCE>0</INVBAL>\
         </INVSTMTRS></INVSTMTTRNRS></INVSTMTMSGSRSV1>\
         <SECLISTMSGSRSV1><SECLIST>\
         <STOCKINFO><SECINFO><SECID><UNIQUEID>111111111<UNIQUEIDTYPE>CUSIP</SECID>\
         <SECNAME>Long Co<TICKER>LONG</SECINFO></STOCKINFO>\
         <STOCKINFO><SECINFO><SECID><UNIQUEID>222222222<UNIQUEIDTYPE>CUSIP</SECID>\
         <SECNAME>Short Co<TICKER>SHRT</SECINFO></STOCKINFO>\
         </SECLIST></SECLISTMSGSRSV1>",
    );
    upload(&app, "short.ofx", &file, &access).await.expect(201);
    let holdings = app.get("/api/v1/holdings", Some(&access)).await.expect(200);
    let rows: Vec<(String, Decimal, Decimal)> = holdings["holdings"]
        .as_array()
        .expect("holdings")
        .iter()
        .map(|h| {
            (
                h["symbol"].as_str().expect("symbol").to_owned(),
                dec(h["quantity"].as_str().expect("quantity")),
                dec(h["market_value"].as_str().expect("value")),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("LONG".to_owned(), dec("10"), dec("1000")),
            ("SHRT".to_owned(), dec("-5"), dec("-200")),
        ]
    );
    // The account's balance: cash plus the positions, the short one owed.
    let accounts = accounts_by_type(&app, &access).await;
    assert_eq!(
        dec(accounts["accounts"][0]["balance_amount"]
            .as_str()
            .expect("balance")),
        dec("1300")
    );
    let portfolio = app
        .get("/api/v1/portfolio", Some(&access))
        .await
        .expect(200);
    let usd = currency(&portfolio, "USD");
    assert_eq!(dec(usd["market_value"].as_str().expect("mv")), dec("800"));
    let net = app
        .get("/api/v1/net-worth", Some(&access))
        .await
        .expect(200);
    assert_eq!(
        dec(currency(&net, "USD")["net_worth"].as_str().expect("nw")),
        dec("1300")
    );
}

mod schwab {
    use super::*;

    fn sandbox() -> aggregation_tests::Setup {
        aggregation_tests::sandbox_setup()
    }

    conformance!(setup = sandbox; schwab_short_positions_are_negative);

    fn amount(value: &Value) -> Decimal {
        dec(value.as_str().expect("decimal string"))
    }

    async fn schwab_short_positions_are_negative(app: TestApp) {
        let (_, access) = user(&app, "schwab-short@example.com").await;
        // The sandbox reports the short position's quantity and market value positive.
        assert!(app.sandbox().set_short_quantity("VTI", dec("20")));
        let connection = app.connect_sandbox(&access, None).await;
        let connection_id = connection["id"].as_str().expect("id");
        app.post(
            "/api/v1/accounts/syncs",
            &json!({"connection_id": connection_id}),
            Some(&access),
        )
        .await
        .expect(201);
        let accounts = app.get("/api/v1/accounts", Some(&access)).await.expect(200);
        let margin = accounts["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .find(|account| account["account_number_masked"] == "****5678")
            .expect("the sandbox's margin account")
            .clone();
        let margin_id = margin["id"].as_str().expect("id");
        app.post(
            &format!("/api/v1/accounts/{margin_id}/holdings/syncs"),
            &json!({}),
            Some(&access),
        )
        .await
        .expect(201);
        let holdings = app
            .get("/api/v1/holdings?symbol=vti", Some(&access))
            .await
            .expect(200);
        let vti = &holdings["holdings"][0];
        assert_eq!(amount(&vti["quantity"]), dec("-20"));
        // 20 units at 245.50, owed.
        assert_eq!(amount(&vti["market_value"]), dec("-4910"));

        // The liquidation value (the balance) is net of the short position: cash plus
        // AAPL 9506.00 plus SWVXX 1000.5 minus VTI 4910.00; its cash is the available funds.
        assert_eq!(
            amount(&margin["balance_amount"]) - amount(&margin["available_balance_amount"]),
            dec("5596.5")
        );
        let portfolio = app
            .get("/api/v1/portfolio", Some(&access))
            .await
            .expect(200);
        let usd = currency(&portfolio, "USD");
        assert_eq!(amount(&usd["market_value"]), dec("5596.5"));
        let top = usd["top_holdings"].as_array().expect("top");
        let last = top.last().expect("a holding");
        assert_eq!(last["symbol"], "VTI");
        assert_eq!(amount(&last["market_value"]), dec("-4910"));

        // Net worth: the accounts' balances as synced, and the snapshots they wrote.
        let total = accounts["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .fold(Decimal::ZERO, |sum, account| {
                sum + amount(&account["balance_amount"])
            });
        let net = app
            .get("/api/v1/net-worth", Some(&access))
            .await
            .expect(200);
        let usd = currency(&net, "USD");
        assert_eq!(amount(&usd["net_worth"]), total);
        let latest = usd["history"]
            .as_array()
            .and_then(|history| history.last())
            .expect("a point");
        assert_eq!(amount(&latest["net_worth"]), total);
    }
}

async fn statement_formats_keep_money_owed_negative(app: TestApp) {
    let (_, access) = user(&app, "format-signs@example.com").await;
    // An MT940 statement of an overdrawn account: a debit (`D`) closing balance is money owed.
    let mt940 = ":20:SIGNS\r\n:25:DE44500105175407324931\r\n:28C:1/1\r\n\
                 :60F:D240228EUR10,00\r\n:61:2402290229DR5,50NTRFNONREF\r\n:86:Fee\r\n\
                 :62F:D240229EUR15,50\r\n-\r\n";
    upload(&app, "signs.sta", mt940, &access).await.expect(201);
    // A QIF credit card owing 100.00, charged 20.00 more: it owes 120.00.
    let qif = "!Type:CCard\nD02/28/2024\nT-100.00\nPOpening Balance\n^\n\
               D02/29/2024\nT-20.00\nPCoffee Shop\n^\n";
    upload_with(
        &app,
        Some("card.qif"),
        qif.as_bytes(),
        &[("account_name", "Card"), ("currency", "USD")],
        &access,
    )
    .await
    .expect(201);
    // A CAMT.053 statement of an overdrawn account: a `DBIT` closing balance.
    let camt = r#"<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"><BkToCstmrStmt>
<GrpHdr><MsgId>SIGNS</MsgId><CreDtTm>2024-02-29T18:00:00</CreDtTm></GrpHdr>
<Stmt><Id>S1</Id><CreDtTm>2024-02-29T18:00:00</CreDtTm>
<Acct><Id><IBAN>FR7630006000011234567890189</IBAN></Id><Ccy>EUR</Ccy></Acct>
<Bal><Tp><CdOrPrtry><Cd>CLBD</Cd></CdOrPrtry></Tp><Amt Ccy="EUR">40.00</Amt>
<CdtDbtInd>DBIT</CdtDbtInd><Dt><Dt>2024-02-29</Dt></Dt></Bal>
<Ntry><Amt Ccy="EUR">40.00</Amt><CdtDbtInd>DBIT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>
<BookgDt><Dt>2024-02-29</Dt></BookgDt><AcctSvcrRef>REF-1</AcctSvcrRef></Ntry>
</Stmt></BkToCstmrStmt></Document>"#;
    upload(&app, "signs.xml", camt, &access).await.expect(201);
    // A CSV export whose balance column ends below zero.
    let csv = "Date,Description,Amount,Balance\n2024-02-28,Rent,-500.00,-200.00\n\
               2024-02-29,Refund,50.00,-150.00\n";
    upload_with(
        &app,
        Some("signs.csv"),
        csv.as_bytes(),
        &[("account_name", "Everyday"), ("currency", "GBP")],
        &access,
    )
    .await
    .expect(201);
    let body = app
        .get(
            "/api/v1/net-worth?from=2024-02-29&to=2024-02-29&interval=day",
            Some(&access),
        )
        .await
        .expect(200);
    let eur = currency(&body, "EUR");
    assert_eq!(dec(eur["liabilities"].as_str().expect("l")), dec("-55.50"));
    assert_eq!(dec(eur["net_worth"].as_str().expect("n")), dec("-55.50"));
    let gbp = currency(&body, "GBP");
    assert_eq!(dec(gbp["net_worth"].as_str().expect("n")), dec("-150.00"));
    let usd = currency(&body, "USD");
    assert_eq!(dec(usd["liabilities"].as_str().expect("l")), dec("-120.00"));
    assert_eq!(
        dec(usd["by_account_type"]["credit_card"].as_str().expect("cc")),
        dec("-120.00")
    );
}
