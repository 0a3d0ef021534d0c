//! Conformance: CAMT.052/053/054 files through `POST /api/v1/imports`, read back through the
//! record endpoints, on every front and store. The fixtures are the parser's own
//! (`aggregation-core/src/import/camt/fixtures/`), written for this project.

use aggregation_tests::imports::{access, accounts, rows};
use aggregation_tests::{TestApp, conformance, upload, upload_with};
use rust_decimal::Decimal;
use serde_json::Value;

const V02_STATEMENT: &str =
    include_str!("../../aggregation-core/src/import/camt/fixtures/v02_statement.xml");
const V08_STATEMENT: &str =
    include_str!("../../aggregation-core/src/import/camt/fixtures/v08_statement.xml");
const V08_REPORT: &str =
    include_str!("../../aggregation-core/src/import/camt/fixtures/v08_report.xml");
const V04_NOTIFICATION: &str =
    include_str!("../../aggregation-core/src/import/camt/fixtures/v04_notification.xml");
const REVERSAL: &str = include_str!("../../aggregation-core/src/import/camt/fixtures/reversal.xml");
const V01_REPORT: &str =
    include_str!("../../aggregation-core/src/import/camt/fixtures/v01_report.xml");

conformance!(
    camt053_reads_back_accounts_rows_and_balances,
    reimporting_a_camt_file_creates_nothing,
    overlapping_statements_never_duplicate,
    two_identical_rows_on_one_day_stay_two,
    camt052_pending_rows_are_pending,
    camt054_batches_split_and_warn,
    a_bank_style_reversal_is_a_warning,
    a_statement_that_does_not_balance_is_imported_with_a_warning,
    a_broken_camt_file_is_400_naming_line_and_reason,
    a_camt_dry_run_writes_nothing,
    amounts_adding_past_the_largest_decimal_are_400_naming_the_line,
    a_version_01_report_imports,
);

fn amount(value: &Value) -> Decimal {
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("an amount: {value}"))
}

fn dec(text: &str) -> Decimal {
    text.parse().expect("a decimal")
}

fn sum(rows: &[Value]) -> Decimal {
    rows.iter().map(|row| amount(&row["amount"])).sum()
}

fn warnings(body: &Value) -> Vec<(String, String)> {
    body["warnings"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|w| {
                    (
                        w["item"].as_str().unwrap_or_default().to_owned(),
                        w["message"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A camt.053.001.08 day statement for one IBAN, with the given balances and entries.
fn statement(opening: &str, closing: &str, day: &str, entries: &[(&str, &str, &str)]) -> String {
    let mut body = String::new();
    for (amount, cdi, reference) in entries {
        body.push_str(&format!(
            "<Ntry><Amt Ccy=\"EUR\">{amount}</Amt><CdtDbtInd>{cdi}</CdtDbtInd>\
             <Sts><Cd>BOOK</Cd></Sts><BookgDt><Dt>{day}</Dt></BookgDt>\
             <AcctSvcrRef>{reference}</AcctSvcrRef><NtryDtls><TxDtls><RltdPties><Cdtr><Pty>\
             <Nm>Corner Cafe</Nm></Pty></Cdtr></RltdPties><RmtInf><Ustrd>Coffee</Ustrd>\
             </RmtInf></TxDtls></NtryDtls></Ntry>\n"
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.08\">\n\
         <BkToCstmrStmt><GrpHdr><MsgId>M</MsgId><CreDtTm>{day}T20:00:00</CreDtTm></GrpHdr>\n\
         <Stmt><Id>S-{day}</Id><Acct><Id><IBAN>DE44500105175407324931</IBAN></Id><Ccy>EUR</Ccy>\
         </Acct>\n\
         <Bal><Tp><CdOrPrtry><Cd>OPBD</Cd></CdOrPrtry></Tp><Amt Ccy=\"EUR\">{opening}</Amt>\
         <CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>{day}</Dt></Dt></Bal>\n\
         <Bal><Tp><CdOrPrtry><Cd>CLBD</Cd></CdOrPrtry></Tp><Amt Ccy=\"EUR\">{closing}</Amt>\
         <CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>{day}</Dt></Dt></Bal>\n\
         {body}</Stmt></BkToCstmrStmt></Document>\n"
    )
}

async fn camt053_reads_back_accounts_rows_and_balances(app: TestApp) {
    let token = access(&app, "camt053@example.com").await;
    // The content decides: an .xml (or any) name reads as camt.053.
    let body = upload(&app, "statement.xml", V02_STATEMENT, &token)
        .await
        .expect(201);
    assert_eq!(body["format"], "camt.053", "{body}");
    assert_eq!(body["accounts_created"], 1, "{body}");
    assert_eq!(body["transactions_created"], 5, "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    let listed = accounts(&app, &token).await;
    assert_eq!(listed.len(), 1);
    let account = &listed[0];
    assert_eq!(account["provider_account_id"], "NL91ABNA0417164300");
    assert_eq!(account["currency"], "EUR");
    assert_eq!(amount(&account["balance_amount"]), dec("53.87"));
    let account_id = account["id"].as_str().expect("id");
    let rows = rows(&app, &token, account_id).await;
    assert_eq!(rows.len(), 5);
    // Opening 149.87 plus the rows is the closing 53.87.
    assert_eq!(sum(&rows), dec("-96.00"));
    let rent = rows
        .iter()
        .find(|row| row["provider_transaction_id"] == "T-1")
        .expect("the first detail of the batch is a row");
    assert_eq!(rent["amount"], "-200.00");
    assert_eq!(rent["transaction_date"], "2024-03-05");
    let salary = rows
        .iter()
        .find(|row| row["provider_transaction_id"] == "REF-0001")
        .expect("REF-0001");
    assert_eq!(salary["amount"], "250.00");
    assert_eq!(salary["subtype"], "PMNT/RCDT/ESCT");
    let snapshots = app
        .get(
            &format!("/api/v1/accounts/{account_id}/balance-snapshots"),
            Some(&token),
        )
        .await
        .expect(200);
    let newest = &snapshots["snapshots"][0];
    assert_eq!(amount(&newest["balance"]), dec("53.87"), "{snapshots}");
    assert_eq!(newest["source"], "file_import");
}

async fn reimporting_a_camt_file_creates_nothing(app: TestApp) {
    let token = access(&app, "again@example.com").await;
    for file in [V02_STATEMENT, V08_STATEMENT, V04_NOTIFICATION] {
        let first = upload(&app, "a.xml", file, &token).await.expect(201);
        let created = first["transactions_created"].as_u64().expect("count");
        assert!(created > 0, "{first}");
        let again = upload(&app, "a.xml", file, &token).await.expect(201);
        assert_eq!(again["transactions_created"], 0, "{again}");
        assert_eq!(again["accounts_created"], 0, "{again}");
        assert_eq!(again["transactions_skipped"], created, "{again}");
    }
    assert_eq!(accounts(&app, &token).await.len(), 3);
}

async fn overlapping_statements_never_duplicate(app: TestApp) {
    let token = access(&app, "overlap@example.com").await;
    let first = statement(
        "100.00",
        "94.00",
        "2024-04-02",
        &[("2.50", "DBIT", "A-1"), ("3.50", "DBIT", "A-2")],
    );
    // The next file repeats A-2 (the bank's export overlapped) and adds A-3.
    let second = statement(
        "94.00",
        "90.00",
        "2024-04-02",
        &[("3.50", "DBIT", "A-2"), ("4.00", "DBIT", "A-3")],
    );
    let body = upload(&app, "one.xml", &first, &token).await.expect(201);
    assert_eq!(body["transactions_created"], 2, "{body}");
    let body = upload(&app, "two.xml", &second, &token).await.expect(201);
    assert_eq!(body["transactions_created"], 1, "{body}");
    assert_eq!(body["transactions_skipped"], 1, "{body}");
    let listed = accounts(&app, &token).await;
    assert_eq!(listed.len(), 1, "one IBAN, one account");
    let rows = rows(&app, &token, listed[0]["id"].as_str().expect("id")).await;
    assert_eq!(rows.len(), 3);
    assert_eq!(sum(&rows), dec("-10.00"));
}

async fn two_identical_rows_on_one_day_stay_two(app: TestApp) {
    let token = access(&app, "coffee@example.com").await;
    // No reference (NOTPROVIDED): the rows are told apart by their ordinal.
    let file = statement(
        "10.00",
        "5.00",
        "2024-04-03",
        &[
            ("2.50", "DBIT", "NOTPROVIDED"),
            ("2.50", "DBIT", "NOTPROVIDED"),
        ],
    );
    let body = upload(&app, "coffee.xml", &file, &token).await.expect(201);
    assert_eq!(body["transactions_created"], 2, "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]), "{body}");
    let again = upload(&app, "coffee.xml", &file, &token).await.expect(201);
    assert_eq!(again["transactions_created"], 0, "{again}");
    let listed = accounts(&app, &token).await;
    let rows = rows(&app, &token, listed[0]["id"].as_str().expect("id")).await;
    assert_eq!(rows.len(), 2);
}

async fn camt052_pending_rows_are_pending(app: TestApp) {
    let token = access(&app, "report@example.com").await;
    let body = upload(&app, "report.xml", V08_REPORT, &token)
        .await
        .expect(201);
    assert_eq!(body["format"], "camt.052", "{body}");
    assert_eq!(body["transactions_created"], 3, "{body}");
    let found = warnings(&body);
    assert!(
        found.iter().any(|(item, message)| item.starts_with("line ")
            && message.contains("neither a booking nor a value date")),
        "{body}"
    );
    let listed = accounts(&app, &token).await;
    assert_eq!(listed[0]["provider_account_id"], "0012345678");
    assert_eq!(listed[0]["currency"], "CHF");
    let rows = rows(&app, &token, listed[0]["id"].as_str().expect("id")).await;
    let pending = rows.iter().filter(|row| row["status"] == "pending").count();
    assert_eq!(pending, 2, "{rows:?}");
}

async fn camt054_batches_split_and_warn(app: TestApp) {
    let token = access(&app, "notify@example.com").await;
    let body = upload_with(
        &app,
        Some("notification.054"),
        V04_NOTIFICATION.as_bytes(),
        &[],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(body["format"], "camt.054", "{body}");
    assert_eq!(body["transactions_created"], 4, "{body}");
    // The warning names the line of the entry's <Ntry>, the one before its amount.
    let line = V04_NOTIFICATION
        .lines()
        .position(|l| l.contains("1526.00"))
        .expect("the entry");
    let found = warnings(&body);
    assert!(
        found
            .iter()
            .any(|(item, message)| *item == format!("line {line}")
                && message.contains("kept as one row")),
        "{body}"
    );
    let listed = accounts(&app, &token).await;
    let rows = rows(&app, &token, listed[0]["id"].as_str().expect("id")).await;
    let mut ids: Vec<&str> = rows
        .iter()
        .filter_map(|row| row["provider_transaction_id"].as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["OUT-BATCH-2", "QR-1", "QR-2", "QR-3"]);
    assert_eq!(sum(&rows), dec("-926.00"));
}

async fn a_bank_style_reversal_is_a_warning(app: TestApp) {
    let token = access(&app, "reversal@example.com").await;
    let body = upload(&app, "reversal.xml", REVERSAL, &token)
        .await
        .expect(201);
    let found = warnings(&body);
    assert_eq!(found.len(), 1, "{body}");
    assert!(found[0].1.contains("RvslInd"), "{body}");
    let listed = accounts(&app, &token).await;
    assert_eq!(amount(&listed[0]["balance_amount"]), dec("80.00"));
    let rows = rows(&app, &token, listed[0]["id"].as_str().expect("id")).await;
    assert_eq!(sum(&rows), dec("-20.00"));
}

async fn a_statement_that_does_not_balance_is_imported_with_a_warning(app: TestApp) {
    let token = access(&app, "unbalanced@example.com").await;
    let file = statement("100.00", "50.00", "2024-04-04", &[("2.50", "DBIT", "U-1")]);
    let body = upload(&app, "u.xml", &file, &token).await.expect(201);
    assert_eq!(body["transactions_created"], 1, "{body}");
    assert_eq!(warnings(&body).len(), 1, "{body}");
}

async fn a_broken_camt_file_is_400_naming_line_and_reason(app: TestApp) {
    let token = access(&app, "broken@example.com").await;
    let broken = V08_STATEMENT.replace(
        "<Amt Ccy=\"EUR\">12.30</Amt>",
        "<Amt Ccy=\"EUR\">12,30 EUR</Amt>",
    );
    let line = broken
        .lines()
        .position(|l| l.contains("12,30 EUR"))
        .expect("the line")
        + 1;
    let problem = upload(&app, "broken.xml", &broken, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(&format!("line {line}")), "{problem}");
    assert!(detail.contains("12,30 EUR"), "{problem}");
    let doctype = V02_STATEMENT.replace(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE Document [<!ENTITY e \"x\">]>\n",
    );
    let problem = upload(&app, "doctype.xml", &doctype, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("line 2")),
        "{problem}"
    );
    assert!(accounts(&app, &token).await.is_empty(), "nothing written");
}

async fn a_camt_dry_run_writes_nothing(app: TestApp) {
    let token = access(&app, "dry-camt@example.com").await;
    let body = upload_with(
        &app,
        Some("statement.xml"),
        V08_STATEMENT.as_bytes(),
        &[("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    assert_eq!(body["format"], "camt.053", "{body}");
    assert_eq!(body["transactions_created"], 3, "{body}");
    assert!(accounts(&app, &token).await.is_empty());
}

/// The largest decimal there is: two of them overflow any sum.
const LARGEST: &str = "79228162514264337593543950335";

async fn amounts_adding_past_the_largest_decimal_are_400_naming_the_line(app: TestApp) {
    let token = access(&app, "overflow@example.com").await;
    // An entry whose two transaction details add past the largest decimal.
    let details = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.08\">\n\
         <BkToCstmrStmt><GrpHdr><MsgId>M</MsgId><CreDtTm>2024-01-31T20:00:00</CreDtTm></GrpHdr>\n\
         <Stmt><Id>S</Id><Acct><Id><IBAN>DE44500105175407324931</IBAN></Id></Acct>\n\
         <Ntry><Amt Ccy=\"EUR\">{LARGEST}</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts>BOOK</Sts>\
         <BookgDt><Dt>2024-01-31</Dt></BookgDt><NtryDtls>\n\
         <TxDtls><Amt Ccy=\"EUR\">{LARGEST}</Amt></TxDtls>\n\
         <TxDtls><Amt Ccy=\"EUR\">{LARGEST}</Amt></TxDtls>\n\
         </NtryDtls></Ntry></Stmt></BkToCstmrStmt></Document>\n"
    );
    // Both sizes: inline parsing and the parsing threads (64 KiB and more).
    let padded = details.replace(
        "<Id>S</Id>",
        &format!("<Id>S</Id><!--{}-->", "x".repeat(70_000)),
    );
    for file in [&details, &padded] {
        let problem = upload(&app, "overflow.xml", file, &token)
            .await
            .expect_problem(400, "command_validation_failed");
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("line 7"), "{problem}");
        assert!(detail.contains("largest amount"), "{problem}");
    }
    // An opening balance at the largest decimal plus one entry.
    let opening = statement(LARGEST, LARGEST, "2024-01-31", &[("1.00", "CRDT", "R1")]);
    let problem = upload(&app, "opening.xml", &opening, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("line 7"), "{problem}");
    assert!(accounts(&app, &token).await.is_empty(), "nothing written");
}

async fn a_version_01_report_imports(app: TestApp) {
    let token = access(&app, "camt-v01@example.com").await;
    let body = upload(&app, "report.xml", V01_REPORT, &token)
        .await
        .expect(201);
    assert_eq!(body["format"], "camt.052", "{body}");
    assert_eq!(body["transactions_created"], 3, "{body}");
    assert!(warnings(&body).is_empty(), "{body}");
    let accounts = accounts(&app, &token).await;
    assert_eq!(accounts.len(), 1);
    assert_eq!(accounts[0]["provider_account_id"], "0012-8844-01");
    assert_eq!(accounts[0]["currency"], "EUR");
    assert_eq!(accounts[0]["balance_amount"], "2319.55");
    let id = accounts[0]["id"].as_str().expect("id");
    let rows = rows(&app, &token, id).await;
    assert_eq!(sum(&rows), dec("-135.45"));
}
