//! Conformance: MT940 and MT942 files through `POST /api/v1/imports` (decisions.md "More
//! statement formats"), on every front and store. The fixtures are the parser's own
//! (`aggregation-core/src/import/mt940/fixtures/`).

use aggregation_tests::imports::{
    access, accounts, count, rows, sorted_amounts as amounts, sorted_field,
};
use aggregation_tests::{TestApp, conformance, upload_with};
use rust_decimal::Decimal;
use serde_json::Value;

conformance!(
    german_statements_import_and_read_back,
    reimport_creates_nothing,
    overlapping_statements_never_duplicate,
    two_identical_rows_on_one_day_stay_two,
    bank_references_identify_rows,
    a_reference_reused_for_other_payments_keeps_every_row,
    identical_rows_on_the_next_page_of_a_statement_are_more_rows,
    mt942_lines_are_pending,
    a_balance_that_does_not_add_up_is_a_warning,
    a_broken_statement_line_is_400_naming_it,
    a_dry_run_writes_nothing,
    polish_code_pages_read_as_written,
    several_accounts_in_one_file_each_get_their_own,
    statement_lines_of_other_banks_import_with_a_warning,
);

const DE_SAVINGS_BANK: &[u8] =
    include_bytes!("../../aggregation-core/src/import/mt940/fixtures/de_savings_bank.sta");
const NL_BANK_SWIFT: &[u8] =
    include_bytes!("../../aggregation-core/src/import/mt940/fixtures/nl_bank_swift.sta");
const PL_BANK_942: &[u8] =
    include_bytes!("../../aggregation-core/src/import/mt940/fixtures/pl_bank_942.sta");
const PL_BANK_CP1250: &[u8] =
    include_bytes!("../../aggregation-core/src/import/mt940/fixtures/pl_bank_cp1250.sta");
const PL_BANK_CP852: &[u8] =
    include_bytes!("../../aggregation-core/src/import/mt940/fixtures/pl_bank_cp852.sta");
const MULTI_ACCOUNT: &[u8] =
    include_bytes!("../../aggregation-core/src/import/mt940/fixtures/multi_account.sta");
const OTHER_BANKS_61: &[u8] =
    include_bytes!("../../aggregation-core/src/import/mt940/fixtures/other_banks_61.sta");

async fn send(app: &TestApp, name: &str, bytes: &[u8], token: &str) -> Value {
    upload_with(app, Some(name), bytes, &[], token)
        .await
        .expect(201)
}

/// The German file's first statement alone (up to its `-` line).
fn first_statement_only() -> Vec<u8> {
    let text = String::from_utf8_lossy(DE_SAVINGS_BANK).into_owned();
    let end = text.find("\r\n-\r\n").expect("a separator") + "\r\n-\r\n".len();
    DE_SAVINGS_BANK[..end].to_vec()
}

async fn german_statements_import_and_read_back(app: TestApp) {
    let token = access(&app, "mt940-de@example.com").await;
    let body = send(&app, "umsaetze.sta", DE_SAVINGS_BANK, &token).await;
    assert_eq!(body["format"], "mt940", "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    assert_eq!(count(&body, "accounts_created"), 1, "{body}");
    assert_eq!(count(&body, "transactions_created"), 5, "{body}");
    let accounts = accounts(&app, &token).await;
    assert_eq!(accounts.len(), 1);
    let account = &accounts[0];
    assert_eq!(account["provider_account_id"], "10020030/0123456789");
    assert_eq!(account["currency"], "EUR");
    assert_eq!(account["balance_amount"], "3987.10");
    let id = account["id"].as_str().expect("id");
    let rows = rows(&app, &token, id).await;
    assert_eq!(
        amounts(&rows),
        ["-3.00", "-42.50", "-9.90", "2500.00", "42.50"]
    );
    // Newest first: the fee of 5 January, then the reversal (money back in).
    let fee_dec = rows
        .iter()
        .find(|r| r["amount"] == "-9.90")
        .expect("the December fee");
    // Value date 31 December, booked 2 January of the next year.
    assert_eq!(fee_dec["transaction_date"], "2026-01-02");
    assert_eq!(fee_dec["currency"], "EUR");
    let salary = rows
        .iter()
        .find(|r| r["amount"] == "2500.00")
        .expect("the salary");
    assert_eq!(salary["status"], "settled");
    assert!(
        salary["description"]
            .as_str()
            .is_some_and(|d| d.contains("Gehalt Dezember 2025")),
        "{salary}"
    );
}

async fn reimport_creates_nothing(app: TestApp) {
    let token = access(&app, "mt940-again@example.com").await;
    send(&app, "a.sta", DE_SAVINGS_BANK, &token).await;
    let body = send(&app, "a.sta", DE_SAVINGS_BANK, &token).await;
    assert_eq!(count(&body, "accounts_created"), 0, "{body}");
    assert_eq!(count(&body, "transactions_created"), 0, "{body}");
    assert_eq!(count(&body, "transactions_skipped"), 5, "{body}");
}

async fn overlapping_statements_never_duplicate(app: TestApp) {
    let token = access(&app, "mt940-overlap@example.com").await;
    let body = send(&app, "day1.sta", &first_statement_only(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    let body = send(&app, "both.sta", DE_SAVINGS_BANK, &token).await;
    assert_eq!(count(&body, "transactions_created"), 2, "{body}");
    assert_eq!(count(&body, "transactions_skipped"), 3, "{body}");
    let accounts = accounts(&app, &token).await;
    assert_eq!(accounts.len(), 1);
    let id = accounts[0]["id"].as_str().expect("id");
    assert_eq!(rows(&app, &token, id).await.len(), 5);
}

async fn two_identical_rows_on_one_day_stay_two(app: TestApp) {
    let token = access(&app, "mt940-coffee@example.com").await;
    let file = ":20:A\r\n:25:DE89370400440532013000\r\n:60F:C250301EUR10,00\r\n\
:61:2503030303DR3,20N106NONREF\r\n:86:106?00KARTENZAHLUNG?20Cafe am Markt\r\n\
:61:2503030303DR3,20N106NONREF\r\n:86:106?00KARTENZAHLUNG?20Cafe am Markt\r\n\
:62F:C250303EUR3,60\r\n-\r\n";
    let body = send(&app, "coffee.sta", file.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 2, "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    let body = send(&app, "coffee.sta", file.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 0, "{body}");
    assert_eq!(count(&body, "transactions_skipped"), 2, "{body}");
}

async fn bank_references_identify_rows(app: TestApp) {
    let token = access(&app, "mt940-nl@example.com").await;
    let body = send(&app, "mt940.swi", NL_BANK_SWIFT, &token).await;
    assert_eq!(body["format"], "mt940", "{body}");
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    let accounts = accounts(&app, &token).await;
    let account = &accounts[0];
    assert_eq!(account["provider_account_id"], "NL91ABNA0417164300");
    assert_eq!(account["balance_amount"], "1093.05");
    let id = account["id"].as_str().expect("id");
    let rows = rows(&app, &token, id).await;
    let ids: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["provider_transaction_id"].as_str())
        .collect();
    assert!(
        ids.iter().any(|i| i.contains("B5L01XYZ99Q1")),
        "the bank reference is the identity: {ids:?}"
    );
    // The same reference with another text is the same transaction: updated, not added.
    let changed =
        String::from_utf8_lossy(NL_BANK_SWIFT).replace("Factuur 2025-887", "Factuur 2025-888");
    let body = send(&app, "mt940.swi", changed.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 0, "{body}");
}

async fn a_reference_reused_for_other_payments_keeps_every_row(app: TestApp) {
    let token = access(&app, "mt940-reused@example.com").await;
    // The customer reference is the counterparty's account number, the same on every payment
    // to it: three payments (two on one day), not one restated three times.
    let file = ":20:B\r\n:25:NL02ABNA0123456789\r\n:60F:C250401EUR500,00\r\n\
:61:2504020402D20,00NIOB0987654321\r\n:86:0987654321 J. Jansen huur\r\n\
:61:2504020402D5,00NIOB0987654321\r\n:86:0987654321 J. Jansen borg\r\n\
:61:2504090409D20,00NIOB0987654321\r\n:86:0987654321 J. Jansen huur\r\n\
:62F:C250409EUR455,00\r\n-\r\n";
    let body = send(&app, "reused.sta", file.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    let list = accounts(&app, &token).await;
    let id = list[0]["id"].as_str().expect("id");
    assert_eq!(
        amounts(&rows(&app, &token, id).await),
        ["-20.00", "-20.00", "-5.00"]
    );
    let body = send(&app, "reused.sta", file.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 0, "{body}");
    assert_eq!(count(&body, "transactions_skipped"), 3, "{body}");
}

async fn identical_rows_on_the_next_page_of_a_statement_are_more_rows(app: TestApp) {
    let token = access(&app, "mt940-pages@example.com").await;
    // One statement over two pages (`:62M:` then `:60M:`): three identical fees, two on the
    // first page and one on the second, are three rows; an overlapping next statement (`:60F:`)
    // restating the first page's rows adds nothing.
    let pages = ":20:P1\r\n:25:DE89370400440532013000\r\n:28C:7/1\r\n:60F:C250401EUR100,00\r\n\
:61:2504020402DR2,50NCHGNONREF\r\n:86:Kontofuehrung\r\n\
:61:2504020402DR2,50NCHGNONREF\r\n:86:Kontofuehrung\r\n\
:62M:C250402EUR95,00\r\n-\r\n\
:20:P1\r\n:25:DE89370400440532013000\r\n:28C:7/2\r\n:60M:C250402EUR95,00\r\n\
:61:2504020402DR2,50NCHGNONREF\r\n:86:Kontofuehrung\r\n\
:62F:C250402EUR92,50\r\n-\r\n";
    let body = send(&app, "pages.sta", pages.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    let body = send(&app, "pages.sta", pages.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 0, "{body}");
}

async fn mt942_lines_are_pending(app: TestApp) {
    let token = access(&app, "mt942@example.com").await;
    let body = send(&app, "interim.sta", PL_BANK_942, &token).await;
    assert_eq!(body["format"], "mt942", "{body}");
    assert_eq!(count(&body, "transactions_created"), 2, "{body}");
    let accounts = accounts(&app, &token).await;
    assert_eq!(accounts[0]["currency"], "PLN");
    let id = accounts[0]["id"].as_str().expect("id");
    let rows = rows(&app, &token, id).await;
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["status"] == "pending"), "{rows:?}");
    assert_eq!(amounts(&rows), ["-150.00", "49.20"]);
}

async fn a_balance_that_does_not_add_up_is_a_warning(app: TestApp) {
    let token = access(&app, "mt940-mismatch@example.com").await;
    let file = String::from_utf8_lossy(NL_BANK_SWIFT)
        .replace(":62F:C251202EUR1093,05", ":62F:C251202EUR1093,06");
    let body = send(&app, "mismatch.sta", file.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    let warnings = body["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{body}");
    // An unreadable balance is a warning too, and the entries are still imported.
    let token = access(&app, "mt940-unreadable@example.com").await;
    let file = String::from_utf8_lossy(NL_BANK_SWIFT)
        .replace(":60F:C251130EUR1000,00", ":60F:C251130EUR1.000,00");
    let body = send(&app, "unreadable.sta", file.as_bytes(), &token).await;
    assert_eq!(count(&body, "transactions_created"), 3, "{body}");
    let warnings = body["warnings"].as_array().expect("warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w["item"].as_str().is_some_and(|i| i.contains("line 7"))),
        "{body}"
    );
}

async fn a_broken_statement_line_is_400_naming_it(app: TestApp) {
    let token = access(&app, "mt940-broken@example.com").await;
    let file = ":20:A\r\n:25:DE89370400440532013000\r\n:60F:C250301EUR10,00\r\n\
:61:2513030303DR3,20N106NONREF\r\n:62F:C250303EUR6,80\r\n";
    let body = upload_with(&app, Some("broken.sta"), file.as_bytes(), &[], &token)
        .await
        .expect_problem(400, "command_validation_failed");
    let detail = body["detail"].as_str().expect("detail");
    assert!(detail.contains("line 4"), "{detail}");
    assert!(detail.contains("value date"), "{detail}");
    assert!(accounts(&app, &token).await.is_empty());
}

async fn a_dry_run_writes_nothing(app: TestApp) {
    let token = access(&app, "mt940-dry@example.com").await;
    let body = upload_with(
        &app,
        Some("umsaetze.sta"),
        DE_SAVINGS_BANK,
        &[("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    assert_eq!(body["dry_run"], true, "{body}");
    assert_eq!(count(&body, "transactions_created"), 5, "{body}");
    assert!(accounts(&app, &token).await.is_empty());
}

/// A Polish statement in Windows-1250, then the same statement in DOS code page 852: both
/// read as written (`Zażółć gęślą jaźń`, not `Za¿ó³æ`), and the second is the same rows.
async fn polish_code_pages_read_as_written(app: TestApp) {
    let token = access(&app, "mt940-pl@example.com").await;
    let body = send(&app, "wyciag.sta", PL_BANK_CP1250, &token).await;
    assert_eq!(body["format"], "mt940", "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    assert_eq!(count(&body, "transactions_created"), 2, "{body}");
    let accounts = accounts(&app, &token).await;
    assert_eq!(accounts.len(), 1);
    assert_eq!(
        accounts[0]["provider_account_id"],
        "PL27114020040000300201355387"
    );
    assert_eq!(accounts[0]["currency"], "PLN");
    assert_eq!(accounts[0]["balance_amount"], "870.50");
    let id = accounts[0]["id"].as_str().expect("id");
    let expected = [
        "JÓZEF ŚLĄSKI ul. Żeromskiego 5 - Zwrot za bilety",
        "Spółka Łódź Sp. z o.o. - Zażółć gęślą jaźń faktura 7/2025",
    ];
    assert_eq!(
        sorted_field(&rows(&app, &token, id).await, "description"),
        expected
    );
    let body = send(&app, "wyciag-dos.sta", PL_BANK_CP852, &token).await;
    assert_eq!(count(&body, "transactions_created"), 0, "{body}");
    assert_eq!(count(&body, "transactions_skipped"), 2, "{body}");
    assert_eq!(
        sorted_field(&rows(&app, &token, id).await, "description"),
        expected
    );
}

async fn several_accounts_in_one_file_each_get_their_own(app: TestApp) {
    let token = access(&app, "mt940-multi@example.com").await;
    let body = send(&app, "konten.sta", MULTI_ACCOUNT, &token).await;
    assert_eq!(body["format"], "mt940", "{body}");
    assert_eq!(count(&body, "accounts_created"), 3, "{body}");
    assert_eq!(count(&body, "transactions_created"), 5, "{body}");
    let accounts = accounts(&app, &token).await;
    // Balances compared as numbers: SQLite keeps `0.00` as `0`.
    let mut named: Vec<(String, String, Decimal)> = accounts
        .iter()
        .map(|a| {
            (
                a["provider_account_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                a["currency"].as_str().unwrap_or_default().to_owned(),
                a["balance_amount"]
                    .as_str()
                    .and_then(|b| b.parse().ok())
                    .unwrap_or(Decimal::MAX),
            )
        })
        .collect();
    named.sort();
    assert_eq!(
        named,
        [
            ("1234.56.789".to_owned(), "EUR".to_owned(), Decimal::ZERO),
            (
                "CH9300762011623852957".to_owned(),
                "CHF".to_owned(),
                Decimal::new(4250, 2)
            ),
            (
                "DE44500105175407324931".to_owned(),
                "EUR".to_owned(),
                Decimal::new(80, 0)
            ),
        ],
        "no statement lands in an unnamed account"
    );
    for account in &accounts {
        let id = account["id"].as_str().expect("id");
        let rows = rows(&app, &token, id).await;
        let expected: &[&str] = match account["currency"].as_str() {
            Some("CHF") => &["-7.50"],
            _ if account["provider_account_id"] == "1234.56.789" => &["-2.00", "10.00"],
            _ => &["-25.00", "5.00"],
        };
        assert_eq!(amounts(&rows), expected, "{account}");
    }
    // Reading the same file again creates nothing.
    let body = send(&app, "konten.sta", MULTI_ACCOUNT, &token).await;
    assert_eq!(count(&body, "accounts_created"), 0, "{body}");
    assert_eq!(count(&body, "transactions_created"), 0, "{body}");
}

async fn statement_lines_of_other_banks_import_with_a_warning(app: TestApp) {
    let token = access(&app, "mt940-other@example.com").await;
    let body = send(&app, "februar.sta", OTHER_BANKS_61, &token).await;
    assert_eq!(count(&body, "transactions_created"), 5, "{body}");
    let warnings = body["warnings"].as_array().cloned().unwrap_or_default();
    assert!(
        warnings
            .iter()
            .any(|w| w["message"].as_str().is_some_and(|m| m.contains("160230"))),
        "{body}"
    );
    let accounts = accounts(&app, &token).await;
    assert_eq!(accounts[0]["balance_amount"], "2298.50");
    let id = accounts[0]["id"].as_str().expect("id");
    let rows = rows(&app, &token, id).await;
    assert_eq!(
        amounts(&rows),
        ["-212.39", "-3.00", "0.50", "12.50", "1500.00"]
    );
    let rent = rows
        .iter()
        .find(|r| r["amount"] == "-212.39")
        .expect("the rent");
    assert_eq!(rent["transaction_date"], "2016-03-01");
}
