//! Conformance: `POST /api/v1/imports` with QIF files (the fixtures of
//! `aggregation-core/src/import/qif/fixtures/`), read back through the record endpoints, on the
//! three fronts and both stores.

use aggregation_tests::imports::{access, accounts, count, rows, sorted_amounts as amounts};
use aggregation_tests::{TestApp, conformance, upload_with};
use serde_json::Value;

conformance!(
    a_bank_file_reads_back_with_its_balances,
    reimporting_creates_nothing,
    overlapping_exports_never_duplicate,
    two_identical_rows_on_one_day_stay_two,
    an_investment_file_gives_trades_and_holdings,
    parser_warnings_are_in_the_answer,
    every_account_of_a_multi_account_file,
    a_dry_run_writes_nothing,
    a_broken_file_is_400_naming_line_and_reason,
    a_file_naming_no_account_needs_one,
);

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            "../../aggregation-core/src/import/qif/fixtures/",
            $name
        ))
        .as_slice()
    };
}

async fn transactions(app: &TestApp, token: &str, account: &Value) -> Vec<Value> {
    rows(app, token, account["id"].as_str().expect("id")).await
}

async fn a_bank_file_reads_back_with_its_balances(app: TestApp) {
    let token = access(&app, "qif-bank@example.com").await;
    let body = upload_with(
        &app,
        Some("checking.qif"),
        fixture!("opening_balance_named.qif"),
        &[("account_name", "Fallback name")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(body["format"], "qif", "{body}");
    assert_eq!(count(&body, "accounts_created"), 1, "{body}");
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    let list = accounts(&app, &token).await;
    assert_eq!(list.len(), 1);
    let account = &list[0];
    // The opening balance record names the account and is its first transaction.
    assert_eq!(account["name"], "Everyday Checking");
    assert_eq!(account["account_type"], "checking");
    assert_eq!(account["currency"], "USD");
    assert_eq!(account["balance_amount"], "1350.25");
    let rows = transactions(&app, &token, account).await;
    assert_eq!(amounts(&rows), vec!["-200.00", "1500.00", "50.25"]);
    let id = account["id"].as_str().expect("id");
    let snapshots = app
        .get(
            &format!("/api/v1/accounts/{id}/balance-snapshots"),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(snapshots["total_count"], 1, "{snapshots}");
    assert_eq!(snapshots["snapshots"][0]["source"], "file_import");
    assert_eq!(snapshots["snapshots"][0]["balance"], "1350.25");
}

async fn reimporting_creates_nothing(app: TestApp) {
    let token = access(&app, "qif-again@example.com").await;
    let parts = [("account_name", "Card"), ("currency", "EUR")];
    let first = upload_with(&app, Some("a.qif"), fixture!("splits.qif"), &parts, &token)
        .await
        .expect(201);
    assert_eq!(count(&first, "transactions_created"), 3, "{first}");
    let again = upload_with(&app, Some("a.qif"), fixture!("splits.qif"), &parts, &token)
        .await
        .expect(201);
    assert_eq!(count(&again, "accounts_created"), 0, "{again}");
    assert_eq!(count(&again, "transactions_created"), 0, "{again}");
    assert_eq!(count(&again, "transactions_updated"), 0, "{again}");
    assert_eq!(count(&again, "transactions_skipped"), 3, "{again}");
    let list = accounts(&app, &token).await;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["currency"], "EUR");
    assert_eq!(transactions(&app, &token, &list[0]).await.len(), 3);
}

/// Two exports of one account whose periods overlap by two records.
const JANUARY: &str = "!Type:Bank\nD1/ 2'24\nT-10.00\nPBakery\n^\nD1/ 9'24\nT-20.00\nPGrocer\n^\n\
                       D1/16'24\nT-30.00\nPPharmacy\n^\n";
const LATE_JANUARY: &str = "!Type:Bank\nD1/ 9'24\nT-20.00\nPGrocer\n^\nD1/16'24\nT-30.00\n\
                            PPharmacy\n^\nD1/23'24\nT-40.00\nPCinema\n^\n";

async fn overlapping_exports_never_duplicate(app: TestApp) {
    let token = access(&app, "qif-overlap@example.com").await;
    let parts = [("account_name", "Checking")];
    let first = upload_with(&app, Some("jan.qif"), JANUARY.as_bytes(), &parts, &token)
        .await
        .expect(201);
    assert_eq!(count(&first, "transactions_created"), 3, "{first}");
    let second = upload_with(
        &app,
        Some("late.qif"),
        LATE_JANUARY.as_bytes(),
        &parts,
        &token,
    )
    .await
    .expect(201);
    assert_eq!(count(&second, "transactions_created"), 1, "{second}");
    assert_eq!(count(&second, "transactions_skipped"), 2, "{second}");
    let list = accounts(&app, &token).await;
    assert_eq!(list.len(), 1);
    let rows = transactions(&app, &token, &list[0]).await;
    assert_eq!(amounts(&rows), vec!["-10.00", "-20.00", "-30.00", "-40.00"]);
    // The same account imported by its id gives the same identities.
    let id = list[0]["id"].as_str().expect("id").to_owned();
    let third = upload_with(
        &app,
        Some("jan.qif"),
        JANUARY.as_bytes(),
        &[("account_id", &id)],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(count(&third, "transactions_created"), 0, "{third}");
}

async fn two_identical_rows_on_one_day_stay_two(app: TestApp) {
    let token = access(&app, "qif-twins@example.com").await;
    let body = upload_with(
        &app,
        Some("activity.qif"),
        fixture!("amex_blank_lines.qif"),
        &[("account_name", "Amex")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    let list = accounts(&app, &token).await;
    assert_eq!(list[0]["account_type"], "credit_card");
    let rows = transactions(&app, &token, &list[0]).await;
    assert_eq!(amounts(&rows), vec!["-50.19", "-50.19", "-99.19"]);
    let again = upload_with(
        &app,
        Some("activity.qif"),
        fixture!("amex_blank_lines.qif"),
        &[("account_name", "Amex")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(count(&again, "transactions_created"), 0, "{again}");
}

async fn an_investment_file_gives_trades_and_holdings(app: TestApp) {
    let token = access(&app, "qif-invest@example.com").await;
    let body = upload_with(
        &app,
        Some("brokerage.qif"),
        fixture!("invest.qif"),
        &[("account_name", "Brokerage")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(count(&body, "transactions_created"), 10, "{body}");
    assert_eq!(count(&body, "holdings_created"), 1, "{body}");
    let list = accounts(&app, &token).await;
    assert_eq!(list[0]["account_type"], "brokerage");
    let rows = transactions(&app, &token, &list[0]).await;
    let buy = rows
        .iter()
        .find(|row| row["subtype"] == "BUY")
        .expect("the buy");
    assert_eq!(buy["amount"], "-1004.95");
    assert_eq!(buy["transaction_type"], "trade");
    assert_eq!(buy["symbol"], "ACME");
    let holdings = app.get("/api/v1/holdings", Some(&token)).await.expect(200);
    assert_eq!(holdings["total_count"], 1, "{holdings}");
    let acme = &holdings["holdings"][0];
    assert_eq!(acme["symbol"], "ACME");
    assert_eq!(acme["quantity"], "52");
    assert_eq!(acme["market_value"], "780.00");
}

async fn parser_warnings_are_in_the_answer(app: TestApp) {
    let token = access(&app, "qif-warn@example.com").await;
    let body = upload_with(
        &app,
        Some("splits.qif"),
        fixture!("splits.qif"),
        &[("account_name", "Checking")],
        &token,
    )
    .await
    .expect(201);
    let warnings = body["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{body}");
    assert_eq!(warnings[0]["item"], "line 23");
    assert!(
        warnings[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("-9.00"),
        "{body}"
    );
}

async fn every_account_of_a_multi_account_file(app: TestApp) {
    let token = access(&app, "qif-multi@example.com").await;
    let body = upload_with(
        &app,
        Some("export.qif"),
        fixture!("autoswitch.qif"),
        &[("account_name", "Unused")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(count(&body, "accounts_created"), 2, "{body}");
    let mut names: Vec<(String, String)> = accounts(&app, &token)
        .await
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap_or_default().to_owned(),
                a["account_type"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ("Checking".to_owned(), "checking".to_owned()),
            ("Visa".to_owned(), "credit_card".to_owned())
        ]
    );
}

async fn a_dry_run_writes_nothing(app: TestApp) {
    let token = access(&app, "qif-dry@example.com").await;
    let body = upload_with(
        &app,
        Some("checking.qif"),
        fixture!("opening_balance_named.qif"),
        &[("account_name", "Checking"), ("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    assert_eq!(body["format"], "qif", "{body}");
    assert!(accounts(&app, &token).await.is_empty());
}

async fn a_broken_file_is_400_naming_line_and_reason(app: TestApp) {
    let token = access(&app, "qif-broken@example.com").await;
    let cases: [(&str, &str, &str); 3] = [
        ("!Type:Bank\nD1/1/2024\nTabc\n^\n", "line 3", "abc"),
        (
            "!Type:Bank\nD1/1/2024\nT-1\n^\nD13/45/2024\nT1\n^\n",
            "line 5",
            "13/45/2024",
        ),
        ("!Type:Bank\nPNo date\nT-1\n^\n", "line 2", "date"),
    ];
    for (file, line, reason) in cases {
        let body = upload_with(
            &app,
            Some("broken.qif"),
            file.as_bytes(),
            &[("account_name", "Checking")],
            &token,
        )
        .await
        .expect_problem(400, "command_validation_failed");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(line), "{line}: {detail}");
        assert!(detail.contains(reason), "{reason}: {detail}");
    }
    assert!(accounts(&app, &token).await.is_empty());
}

async fn a_file_naming_no_account_needs_one(app: TestApp) {
    let token = access(&app, "qif-noname@example.com").await;
    upload_with(&app, Some("x.qif"), JANUARY.as_bytes(), &[], &token)
        .await
        .expect(422);
    assert!(accounts(&app, &token).await.is_empty());
}
