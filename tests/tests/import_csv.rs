//! Conformance: CSV statements through `POST /api/v1/imports` (decisions.md "More statement
//! formats"): detection, the `mapping` part, identity and dedupe, closing balances, warnings,
//! and the 400/422 answers naming the line or the column. The fixtures are the parser's own
//! (`aggregation-core/src/import/csv/fixtures/`).

use aggregation_tests::imports::{access, rows, sorted_amounts};
use aggregation_tests::{TestApp, conformance, upload_with};
use serde_json::Value;

conformance!(
    german_export_with_preamble_reads_back,
    reimport_creates_nothing,
    overlapping_statements_never_duplicate,
    two_identical_rows_on_one_day_stay_two,
    closing_balance_becomes_the_account_balance,
    footer_lines_are_warnings,
    id_column_is_the_reference,
    mapping_reads_a_headerless_file,
    undecidable_dates_are_read_with_a_warning,
    a_bad_date_format_is_422_naming_it,
    card_export_signs_are_checked_against_transaction_types,
    a_broken_row_is_400_naming_the_line,
    encodings_and_layouts_are_detected,
    an_export_of_several_accounts_makes_one_account_each,
    a_merchants_payments_export_keeps_its_signs,
    other_code_pages_read_as_written,
);

const DE_PREAMBLE: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/de_preamble.csv");
const PIPE: &[u8] = include_bytes!("../../aggregation-core/src/import/csv/fixtures/pipe.csv");
const FOOTER: &[u8] = include_bytes!("../../aggregation-core/src/import/csv/fixtures/footer.csv");
const QUOTING: &[u8] = include_bytes!("../../aggregation-core/src/import/csv/fixtures/quoting.csv");
const HEADERLESS: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/headerless.csv");
const AMBIGUOUS: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/ambiguous.csv");
const UTF16: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/utf16le_bom_tab.csv");
const WIN1252: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/windows1252.csv");
const CARD_INVERTED: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/card_types_inverted.csv");
const CARD_CONFLICT: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/card_types_conflict.csv");
const AF_BIJ: &[u8] = include_bytes!("../../aggregation-core/src/import/csv/fixtures/af_bij.csv");
const RU_CP1251: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/ru_cp1251.csv");
const CZ_CP1250: &[u8] =
    include_bytes!("../../aggregation-core/src/import/csv/fixtures/cz_cp1250.csv");

async fn import(
    app: &TestApp,
    token: &str,
    name: &str,
    content: &[u8],
    parts: &[(&str, &str)],
) -> Value {
    let mut all = vec![("account_name", "Girokonto")];
    all.extend_from_slice(parts);
    upload_with(app, Some(name), content, &all, token)
        .await
        .expect(201)
}

async fn only_account(app: &TestApp, token: &str) -> Value {
    let list = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    assert_eq!(list["total_count"], 1, "{list}");
    list["accounts"][0].clone()
}

/// The account's transactions: amounts as text, sorted.
async fn amounts(app: &TestApp, token: &str, account_id: &str) -> Vec<String> {
    sorted_amounts(&rows(app, token, account_id).await)
}

fn id_of(account: &Value) -> &str {
    account["id"].as_str().expect("account id")
}

async fn german_export_with_preamble_reads_back(app: TestApp) {
    let token = access(&app, "csv-de@example.com").await;
    let body = import(&app, &token, "umsaetze.csv", DE_PREAMBLE, &[]).await;
    assert_eq!(body["format"], "csv", "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    assert_eq!(body["accounts_created"], 1, "{body}");
    assert_eq!(body["transactions_created"], 3, "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(account["name"], "Girokonto", "{account}");
    assert_eq!(
        account["currency"], "EUR",
        "the header's (€) names it: {account}"
    );
    let mut expected = vec!["-2.5", "-85", "3100.00"];
    expected.sort_unstable();
    assert_eq!(amounts(&app, &token, id_of(&account)).await, expected);
}

async fn reimport_creates_nothing(app: TestApp) {
    let token = access(&app, "csv-again@example.com").await;
    import(&app, &token, "umsaetze.csv", DE_PREAMBLE, &[]).await;
    let body = import(&app, &token, "umsaetze.csv", DE_PREAMBLE, &[]).await;
    assert_eq!(body["transactions_created"], 0, "{body}");
    assert_eq!(body["transactions_skipped"], 3, "{body}");
    assert_eq!(body["accounts_created"], 0, "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(amounts(&app, &token, id_of(&account)).await.len(), 3);
}

async fn overlapping_statements_never_duplicate(app: TestApp) {
    let token = access(&app, "csv-overlap@example.com").await;
    let first = "Date,Description,Amount\n2024-05-01,Rent,-900.00\n2024-05-02,Coffee,-3.00\n2024-05-03,Salary,2000.00\n";
    let second = "Date,Description,Amount\n2024-05-02,Coffee,-3.00\n2024-05-03,Salary,2000.00\n2024-05-04,Books,-20.00\n";
    let body = import(&app, &token, "may-a.csv", first.as_bytes(), &[]).await;
    assert_eq!(body["transactions_created"], 3, "{body}");
    let account = only_account(&app, &token).await;
    let account_id = id_of(&account).to_owned();
    let body = upload_with(
        &app,
        Some("may-b.csv"),
        second.as_bytes(),
        &[("account_id", &account_id)],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(body["transactions_created"], 1, "{body}");
    assert_eq!(body["transactions_skipped"], 2, "{body}");
    assert_eq!(amounts(&app, &token, &account_id).await.len(), 4);
}

async fn two_identical_rows_on_one_day_stay_two(app: TestApp) {
    let token = access(&app, "csv-twins@example.com").await;
    let file = "Date,Description,Amount\n2024-06-01,Coffee,-3.00\n2024-06-01,Coffee,-3.00\n";
    let body = import(&app, &token, "twins.csv", file.as_bytes(), &[]).await;
    assert_eq!(body["transactions_created"], 2, "{body}");
    let body = import(&app, &token, "twins.csv", file.as_bytes(), &[]).await;
    assert_eq!(body["transactions_created"], 0, "{body}");
    assert_eq!(body["transactions_skipped"], 2, "{body}");
}

async fn closing_balance_becomes_the_account_balance(app: TestApp) {
    let token = access(&app, "csv-balance@example.com").await;
    let body = import(&app, &token, "pipe.csv", PIPE, &[("currency", "USD")]).await;
    assert_eq!(body["transactions_created"], 2, "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(account["balance_amount"], "959.90", "{account}");
}

async fn footer_lines_are_warnings(app: TestApp) {
    let token = access(&app, "csv-footer@example.com").await;
    let body = import(&app, &token, "konto.csv", FOOTER, &[]).await;
    assert_eq!(body["transactions_created"], 2, "{body}");
    let warnings = body["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{body}");
    assert_eq!(warnings[0]["item"], "line 4", "{body}");
}

async fn id_column_is_the_reference(app: TestApp) {
    let token = access(&app, "csv-id@example.com").await;
    let body = upload_with(
        &app,
        Some("ids.csv"),
        QUOTING,
        &[("account_name", "Checking"), ("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    let rows = &body["accounts"][0]["rows"];
    assert_eq!(rows[0]["provider_transaction_id"], "000123", "{body}");
    assert_eq!(rows[1]["provider_transaction_id"], "000124", "{body}");
    assert_eq!(rows[0]["amount"], "-60.00", "{body}");
}

async fn mapping_reads_a_headerless_file(app: TestApp) {
    let token = access(&app, "csv-mapping@example.com").await;
    let mapping = r#"{"date_format": "DD/MM/YYYY", "columns": {"date": 0, "description": 1, "amount": 2, "balance": 3}}"#;
    let body = import(
        &app,
        &token,
        "releve.csv",
        HEADERLESS,
        &[("mapping", mapping), ("currency", "EUR")],
    )
    .await;
    assert_eq!(body["transactions_created"], 2, "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(account["balance_amount"], "-133.96", "{account}");
    assert_eq!(account["currency"], "EUR", "{account}");
}

async fn undecidable_dates_are_read_with_a_warning(app: TestApp) {
    let token = access(&app, "csv-dates@example.com").await;
    // No date shows the order: read month first, and the warning says so.
    let body = upload_with(
        &app,
        Some("dates.csv"),
        AMBIGUOUS,
        &[("account_name", "Checking"), ("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    let warnings = body["warnings"].to_string();
    assert!(warnings.contains("month/day"), "{body}");
    assert!(warnings.contains("date_format"), "{body}");
    // A mapping that names a column the file lacks is 422 naming it.
    let problem = upload_with(
        &app,
        Some("dates.csv"),
        AMBIGUOUS,
        &[
            ("account_name", "Checking"),
            (
                "mapping",
                r#"{"columns": {"date": "Buchungstag", "amount": "Amount"}}"#,
            ),
        ],
        &token,
    )
    .await
    .expect_problem(422, "validation_failed");
    assert!(problem.to_string().contains("Buchungstag"), "{problem}");
}

async fn a_broken_row_is_400_naming_the_line(app: TestApp) {
    let token = access(&app, "csv-broken@example.com").await;
    let file = "Date,Description,Amount\n2024-01-01,A,-1.00\n2024-01-02,B,twelve\n";
    let response = upload_with(
        &app,
        Some("broken.csv"),
        file.as_bytes(),
        &[("account_name", "Checking")],
        &token,
    )
    .await;
    assert_eq!(response.status.as_u16(), 400, "{:?}", response.body);
    let text = format!("{:?}", response.body);
    assert!(text.contains("line 3"), "{text}");
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    assert_eq!(accounts["total_count"], 0, "nothing written");
}

async fn encodings_and_layouts_are_detected(app: TestApp) {
    let token = access(&app, "csv-layouts@example.com").await;
    for (name, content, created) in [
        ("unicode.txt", UTF16, 3),
        ("ansi.csv", WIN1252, 2),
        ("ing.csv", AF_BIJ, 2),
    ] {
        let body = upload_with(&app, Some(name), content, &[("account_name", name)], &token)
            .await
            .expect(201);
        assert_eq!(body["format"], "csv", "{name}: {body}");
        assert_eq!(body["transactions_created"], created, "{name}: {body}");
    }
}

async fn a_bad_date_format_is_422_naming_it(app: TestApp) {
    let token = access(&app, "csv-date-format@example.com").await;
    let long = format!(
        r#"{{"date_format": "%Y-%m-%d{}", "columns": {{"date": "Date", "amount": "Amount"}}}}"#,
        "%t".repeat(8000)
    );
    for mapping in [
        long.as_str(),
        r#"{"date_format": "%m/%d/%Y%Q", "columns": {"date": "Date", "amount": "Amount"}}"#,
    ] {
        let problem = upload_with(
            &app,
            Some("dates.csv"),
            AMBIGUOUS,
            &[("account_name", "Checking"), ("mapping", mapping)],
            &token,
        )
        .await
        .expect_problem(422, "validation_failed");
        assert_eq!(
            problem["errors"][0]["field"], "mapping.date_format",
            "{problem}"
        );
    }
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    assert_eq!(accounts["total_count"], 0, "nothing written");
}

async fn card_export_signs_are_checked_against_transaction_types(app: TestApp) {
    let token = access(&app, "csv-card-signs@example.com").await;
    // Charges written positive, payments negative: read as money out, with a warning.
    let body = import(&app, &token, "card.csv", CARD_INVERTED, &[]).await;
    assert!(body["warnings"].to_string().contains("negated"), "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(
        amounts(&app, &token, id_of(&account)).await,
        ["-25.00", "-61.30", "10.00", "200.00"]
    );
    // Types that contradict each other: 422 asking for mapping.invert_sign, nothing written.
    let problem = upload_with(
        &app,
        Some("card2.csv"),
        CARD_CONFLICT,
        &[("account_name", "Other card")],
        &token,
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(
        problem["errors"][0]["field"], "mapping.invert_sign",
        "{problem}"
    );
    let list = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    assert_eq!(list["total_count"], 1, "{list}");
}

async fn an_export_of_several_accounts_makes_one_account_each(app: TestApp) {
    let token = access(&app, "csv-several@example.com").await;
    let file = "Date,Description,Amount,Account Name\n\
                2024-05-01,Salary,2500.00,Everyday\n\
                2024-05-02,Move to savings,-400.00,Everyday\n\
                2024-05-02,Move from everyday,400.00,Rainy Day\n";
    let body = import(&app, &token, "budget.csv", file.as_bytes(), &[]).await;
    assert_eq!(body["accounts_created"], 2, "{body}");
    assert_eq!(body["transactions_created"], 3, "{body}");
    let list = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let mut names: Vec<(String, String)> = Vec::new();
    for account in list["accounts"].as_array().cloned().unwrap_or_default() {
        let name = account["name"].as_str().unwrap_or_default().to_owned();
        let rows = amounts(&app, &token, id_of(&account)).await.join(" ");
        names.push((name, rows));
    }
    names.sort();
    assert_eq!(
        names,
        [
            ("Everyday".to_owned(), "-400.00 2500.00".to_owned()),
            ("Rainy Day".to_owned(), "400.00".to_owned())
        ]
    );
    // Into one existing account: refused, naming account_id; nothing written.
    let account = list["accounts"][0]["id"].as_str().expect("id").to_owned();
    let refused = upload_with(
        &app,
        Some("budget.csv"),
        file.as_bytes(),
        &[("account_id", account.as_str())],
        &token,
    )
    .await
    .expect_problem(422, "validation_failed");
    assert!(refused.to_string().contains("account_id"), "{refused}");
}

async fn a_merchants_payments_export_keeps_its_signs(app: TestApp) {
    let token = access(&app, "csv-merchant@example.com").await;
    let file = "id,created,amount,fee,currency,card_id,customer_email\n\
                ch_a1,2024-03-04 10:15,40.00,1.46,eur,pm_x1,a@example.com\n\
                ch_a2,2024-03-05 11:20,12.50,0.66,eur,pm_x2,b@example.com\n";
    let body = import(&app, &token, "payments.csv", file.as_bytes(), &[]).await;
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(
        amounts(&app, &token, id_of(&account)).await,
        ["12.50", "40.00"]
    );
}

/// Files in single-byte code pages beyond Windows-1252 and the Central European ones: the
/// Cyrillic header names a mapping gives are found, and the text reads as written.
async fn other_code_pages_read_as_written(app: TestApp) {
    let token = access(&app, "csv-code-pages@example.com").await;
    let mapping = r#"{"columns": {"date": "Дата", "amount": "Сумма", "description": "Описание"}}"#;
    let body = import(
        &app,
        &token,
        "vypiska.csv",
        RU_CP1251,
        &[("mapping", mapping)],
    )
    .await;
    assert_eq!(body["transactions_created"], 3, "{body}");
    let account = only_account(&app, &token).await;
    let russian_rows = rows(&app, &token, id_of(&account)).await;
    let salary = russian_rows
        .iter()
        .find(|r| r["amount"] == "85000.00")
        .expect("the salary");
    assert_eq!(
        salary["description"], "Зарплата за декабрь, ООО «Ромашка»",
        "{salary}"
    );
    let body = upload_with(
        &app,
        Some("vypis.csv"),
        CZ_CP1250,
        &[("account_name", "Běžný účet")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(body["transactions_created"], 3, "{body}");
    let list = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let czech = list["accounts"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["name"] == "Běžný účet"))
        .expect("the Czech account");
    let rows = rows(&app, &token, id_of(czech)).await;
    assert!(
        rows.iter()
            .any(|r| r["description"] == "Příchozí úhrada nájem Jiří Dvořák"),
        "{rows:?}"
    );
}
