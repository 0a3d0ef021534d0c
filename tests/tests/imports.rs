//! Conformance: `POST /api/v1/imports` with OFX/QFX files, read back through the record
//! endpoints.

use aggregation_core::events::DomainEvent;
use aggregation_tests::{
    BANK_QFX, BOUNDARY, Setup, TestApp, TestResponse, conformance, multipart, post_imports,
    test_config, upload,
};
use bytes::Bytes;
use http::{Method, Request, header};
use serde_json::Value;

conformance!(
    bank_qfx_import_reads_back,
    credit_card_ofx2_import,
    brokerage_positions_become_holdings,
    reimport_of_the_same_file_skips_everything,
    changed_amount_for_a_known_fitid_updates,
    csv_without_an_account_is_422_and_an_unknown_file_415,
    empty_file_is_400,
    doctype_is_400,
    malformed_file_is_400_with_the_line,
    signon_error_and_no_statement_are_400,
    no_token_is_401,
    another_users_import_makes_a_separate_connection,
    missing_file_part_is_422,
    non_multipart_body_is_422,
    evening_postings_keep_the_files_calendar_date,
    formats_are_public_and_list_every_format,
    holdings_adding_past_the_largest_decimal_are_400,
);

fn small_uploads() -> Setup {
    Setup {
        config: test_config().with_max_upload_bytes(1024),
        ..Setup::default()
    }
}

/// One large parse at a time and none waiting.
fn one_parse_at_a_time() -> Setup {
    Setup {
        config: test_config().with_parsing_limits(aggregation_core::WorkLimits {
            concurrent: 1,
            queued: 0,
        }),
        ..Setup::default()
    }
}

mod bounded_parsing {
    use super::*;

    conformance!(setup = one_parse_at_a_time; large_uploads_beyond_the_parse_queue_get_503);
}

/// The bank statement with `count` more transactions: large enough to be parsed off the
/// async workers.
fn large_bank_qfx(count: usize) -> String {
    let extra: String = (0..count)
        .map(|n| {
            format!(
                "<STMTTRN>\n<TRNTYPE>DEBIT\n<DTPOSTED>20240120\n<TRNAMT>-1.{:02}\n\
                 <FITID>bulk-{n}\n<NAME>Coffee shop number {n}\n</STMTTRN>\n",
                n % 100
            )
        })
        .collect();
    BANK_QFX.replace("</BANKTRANLIST>", &format!("{extra}</BANKTRANLIST>"))
}

async fn large_uploads_beyond_the_parse_queue_get_503(app: TestApp) {
    // Three users, two uploads each: within the per-user import limit, so only the parse
    // gate (shared by every user) refuses.
    let mut tokens = Vec::new();
    for n in 0..3 {
        tokens.push(access(&app, &format!("bulk-{n}@example.com")).await);
    }
    let file = large_bank_qfx(3_000);
    assert!(file.len() > 128 * 1024, "parsed on the blocking pool");
    let uploads = (0..6).map(|n| upload(&app, "big.qfx", &file, &tokens[n % 3]));
    let answers = futures_util::future::join_all(uploads).await;
    let mut busy = 0;
    let mut imported = [false; 3];
    for (n, answer) in answers.iter().enumerate() {
        if answer.status.as_u16() == 503 {
            busy += 1;
            answer.expect_problem(503, "service_unavailable");
            assert_eq!(answer.header("retry-after"), Some("1"));
        } else {
            answer.expect(201);
            imported[n % 3] = true;
        }
    }
    assert!(busy > 0, "six large parses at once overflow one slot");
    assert!(busy < 6, "the parse holding the slot completes");
    // The store holds what the successful uploads wrote, nothing half-done.
    for (token, imported) in tokens.iter().zip(imported) {
        if !imported {
            assert_eq!(
                accounts(&app, token).await,
                0,
                "a refused upload writes nothing"
            );
            continue;
        }
        let account = only_account(&app, token).await;
        let page = transactions(&app, token, account["id"].as_str().expect("id")).await;
        assert_eq!(page["total_count"], 3_003);
    }
}

async fn accounts(app: &TestApp, token: &str) -> u64 {
    let list = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    list["total_count"].as_u64().unwrap_or_default()
}

mod limited {
    use super::*;

    conformance!(
        setup = small_uploads;
        oversize_file_is_413,
        formats_report_the_configured_limit,
    );
}

const CREDIT_CARD_OFX2: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<?OFX OFXHEADER="200" VERSION="220" SECURITY="NONE" OLDFILEUID="NONE" NEWFILEUID="NONE"?>
<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>
<DTSERVER>20240229</DTSERVER><LANGUAGE>ENG</LANGUAGE>
<FI><ORG>Card Co</ORG><FID>555</FID></FI></SONRS></SIGNONMSGSRSV1>
<CREDITCARDMSGSRSV1>
<CCSTMTTRNRS>
<TRNUID>1</TRNUID>
<STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>
<CCSTMTRS>
<CURDEF>USD</CURDEF>
<CCACCTFROM><ACCTID>4111111111111111</ACCTID></CCACCTFROM>
<BANKTRANLIST>
<DTSTART>20240201</DTSTART><DTEND>20240229</DTEND>
<STMTTRN><TRNTYPE>DEBIT</TRNTYPE><DTPOSTED>20240203</DTPOSTED><TRNAMT>-19.99</TRNAMT>
<FITID>CC1</FITID><NAME>Restaurant &amp; Bar</NAME></STMTTRN>
<STMTTRN><TRNTYPE>PAYMENT</TRNTYPE><DTPOSTED>20240220</DTPOSTED><TRNAMT>500</TRNAMT>
<FITID>CC2</FITID><NAME>Thank you</NAME></STMTTRN>
</BANKTRANLIST>
<LEDGERBAL><BALAMT>-250.10</BALAMT><DTASOF>20240229</DTASOF></LEDGERBAL>
</CCSTMTRS>
</CCSTMTTRNRS>
</CREDITCARDMSGSRSV1>
</OFX>
"#;

const BROKERAGE_OFX: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<?OFX OFXHEADER="200" VERSION="220" SECURITY="NONE" OLDFILEUID="NONE" NEWFILEUID="NONE"?>
<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>
<DTSERVER>20240131</DTSERVER><LANGUAGE>ENG</LANGUAGE>
<FI><ORG>Broker Inc</ORG><FID>7777</FID></FI></SONRS></SIGNONMSGSRSV1>
<INVSTMTMSGSRSV1>
<INVSTMTTRNRS>
<TRNUID>1</TRNUID>
<STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>
<INVSTMTRS>
<DTASOF>20240131160000.000[-5:EST]</DTASOF>
<CURDEF>USD</CURDEF>
<INVACCTFROM><BROKERID>broker.com</BROKERID><ACCTID>X-98765</ACCTID></INVACCTFROM>
<INVTRANLIST>
<DTSTART>20240101</DTSTART><DTEND>20240131</DTEND>
<BUYSTOCK>
  <INVBUY>
    <INVTRAN><FITID>B1</FITID><DTTRADE>20240102</DTTRADE><DTSETTLE>20240104</DTSETTLE><MEMO>Buy ACME</MEMO></INVTRAN>
    <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
    <UNITS>10</UNITS><UNITPRICE>12.5</UNITPRICE><COMMISSION>4.95</COMMISSION><TOTAL>-129.95</TOTAL>
    <SUBACCTSEC>CASH</SUBACCTSEC><SUBACCTFUND>CASH</SUBACCTFUND>
  </INVBUY>
  <BUYTYPE>BUY</BUYTYPE>
</BUYSTOCK>
<INCOME>
  <INVTRAN><FITID>I1</FITID><DTTRADE>20240115</DTTRADE></INVTRAN>
  <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <INCOMETYPE>DIV</INCOMETYPE><TOTAL>1.25</TOTAL>
  <SUBACCTSEC>CASH</SUBACCTSEC><SUBACCTFUND>CASH</SUBACCTFUND>
</INCOME>
<INVBANKTRAN>
  <STMTTRN><TRNTYPE>CREDIT</TRNTYPE><DTPOSTED>20240120</DTPOSTED><TRNAMT>500.00</TRNAMT>
  <FITID>C1</FITID><NAME>Deposit</NAME></STMTTRN>
  <SUBACCTFUND>CASH</SUBACCTFUND>
</INVBANKTRAN>
</INVTRANLIST>
<INVPOSLIST>
<POSSTOCK><INVPOS>
  <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>CASH</HELDINACCT><POSTYPE>LONG</POSTYPE><UNITS>10</UNITS><UNITPRICE>13.10</UNITPRICE>
  <MKTVAL>131.00</MKTVAL><DTPRICEASOF>20240131</DTPRICEASOF>
</INVPOS></POSSTOCK>
<POSMF><INVPOS>
  <SECID><UNIQUEID>000000002</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>CASH</HELDINACCT><POSTYPE>LONG</POSTYPE><UNITS>3.204</UNITS><UNITPRICE>31.90</UNITPRICE>
  <MKTVAL>102.21</MKTVAL><DTPRICEASOF>20240131</DTPRICEASOF>
</INVPOS></POSMF>
<POSDEBT><INVPOS>
  <SECID><UNIQUEID>912828ZZ1</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>CASH</HELDINACCT><POSTYPE>LONG</POSTYPE><UNITS>1000</UNITS><UNITPRICE>99.5</UNITPRICE>
  <MKTVAL>995.00</MKTVAL><DTPRICEASOF>20240131</DTPRICEASOF>
</INVPOS></POSDEBT>
</INVPOSLIST>
<INVBAL><AVAILCASH>1000.00</AVAILCASH><MARGINBALANCE>0</MARGINBALANCE><SHORTBALANCE>0</SHORTBALANCE>
<BUYPOWER>2000</BUYPOWER></INVBAL>
</INVSTMTRS>
</INVSTMTTRNRS>
</INVSTMTMSGSRSV1>
<SECLISTMSGSRSV1><SECLIST>
<STOCKINFO><SECINFO><SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>Acme Corp</SECNAME><TICKER>ACME</TICKER></SECINFO></STOCKINFO>
<MFINFO><SECINFO><SECID><UNIQUEID>000000002</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>Big Fund</SECNAME><TICKER>BIGFX</TICKER></SECINFO></MFINFO>
<DEBTINFO><SECINFO><SECID><UNIQUEID>912828ZZ1</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>Treasury 2030</SECNAME></SECINFO><PARVALUE>1000</PARVALUE></DEBTINFO>
</SECLIST></SECLISTMSGSRSV1>
</OFX>
"#;

async fn access(app: &TestApp, email: &str) -> String {
    app.user(email).await.1
}

fn counts(body: &Value) -> [u64; 7] {
    [
        "accounts_created",
        "accounts_updated",
        "transactions_created",
        "transactions_updated",
        "transactions_skipped",
        "holdings_created",
        "holdings_updated",
    ]
    .map(|key| {
        body[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {body}"))
    })
}

async fn only_account(app: &TestApp, token: &str) -> Value {
    let list = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    assert_eq!(list["total_count"], 1, "{list}");
    list["accounts"][0].clone()
}

async fn transactions(app: &TestApp, token: &str, account_id: &str) -> Value {
    app.get(
        &format!("/api/v1/accounts/{account_id}/transactions"),
        Some(token),
    )
    .await
    .expect(200)
}

async fn bank_qfx_import_reads_back(app: TestApp) {
    let token = access(&app, "bank@example.com").await;
    let body = upload(&app, "statement.qfx", BANK_QFX, &token)
        .await
        .expect(201);
    assert_eq!(counts(&body), [1, 0, 3, 0, 0, 0, 0], "{body}");
    let mut keys: Vec<&str> = body
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "accounts_created",
            "accounts_updated",
            "connection_id",
            "format",
            "holdings_created",
            "holdings_updated",
            "matched",
            "message",
            "transactions_created",
            "transactions_skipped",
            "transactions_updated",
            "transfers",
            "warnings",
        ],
        "exactly the keys of decisions.md (nine, then format and warnings, then the \
         reconciliation's matched and transfers): {body}"
    );
    assert_eq!(body["matched"], 0);
    assert_eq!(body["transfers"], 0);
    assert_eq!(body["format"], "qfx");
    assert_eq!(body["warnings"], serde_json::json!([]));
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("First Bank"))
    );
    let connection_id = body["connection_id"].as_str().expect("connection id");

    let account = only_account(&app, &token).await;
    assert_eq!(account["connection_id"], connection_id);
    assert_eq!(account["provider_account_id"], "123456789");
    assert_eq!(account["account_number_masked"], "****6789");
    assert_eq!(account["name"], "First Bank Checking ****6789");
    assert_eq!(account["account_type"], "checking");
    assert_eq!(account["currency"], "USD");
    assert_eq!(account["balance_amount"], "1952.50");
    assert_eq!(account["available_balance_amount"], "1900.00");
    assert_eq!(account["is_active"], true);
    let account_id = account["id"].as_str().expect("id");

    let listed = transactions(&app, &token, account_id).await;
    assert_eq!(listed["total_count"], 3);
    let rows = listed["transactions"].as_array().expect("rows");
    // Newest first.
    assert_eq!(rows[0]["provider_transaction_id"], "20240131-1");
    assert_eq!(rows[0]["transaction_type"], "fee");
    assert_eq!(rows[0]["subtype"], "SRVCHG");
    assert_eq!(rows[1]["transaction_type"], "transfer");
    assert_eq!(rows[1]["amount"], "2000.00");
    assert_eq!(rows[2]["description"], "Grocery Store - Card 1234");
    assert_eq!(rows[2]["amount"], "-42.50");
    assert_eq!(rows[2]["status"], "settled");
    assert_eq!(rows[2]["transaction_date"], "2024-01-05");
    assert_eq!(rows[2]["transaction_type"], "other");

    let by_connection = app
        .get(
            &format!("/api/v1/providers/{connection_id}/accounts"),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(by_connection["accounts"][0]["id"], account_id);

    let snapshots = app
        .get(
            &format!("/api/v1/accounts/{account_id}/balance-snapshots"),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(snapshots["total_count"], 1, "{snapshots}");
    assert_eq!(snapshots["snapshots"][0]["source"], "file_import");
    assert_eq!(snapshots["snapshots"][0]["balance"], "1952.50");
    assert_eq!(snapshots["snapshots"][0]["available_balance"], "1900.00");
    assert_eq!(
        snapshots["snapshots"][0]["captured_at"],
        "2024-01-31T00:00:00Z"
    );
}

async fn credit_card_ofx2_import(app: TestApp) {
    let token = access(&app, "card@example.com").await;
    let body = upload(&app, "CARD.OFX", CREDIT_CARD_OFX2, &token)
        .await
        .expect(201);
    assert_eq!(counts(&body), [1, 0, 2, 0, 0, 0, 0], "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(account["account_type"], "credit_card");
    assert_eq!(account["name"], "Card Co Credit Card ****1111");
    assert_eq!(account["account_number_masked"], "****1111");
    assert_eq!(account["balance_amount"], "-250.10");
    assert_eq!(account["available_balance_amount"], Value::Null);
    let listed = transactions(&app, &token, account["id"].as_str().expect("id")).await;
    let rows = listed["transactions"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["description"], "Restaurant & Bar");
    assert_eq!(rows[1]["amount"], "-19.99");
    assert_eq!(rows[0]["subtype"], "PAYMENT");
}

async fn brokerage_positions_become_holdings(app: TestApp) {
    let token = access(&app, "broker@example.com").await;
    let body = upload(&app, "brokerage.qfx", BROKERAGE_OFX, &token)
        .await
        .expect(201);
    assert_eq!(counts(&body), [1, 0, 3, 0, 0, 3, 0], "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(account["account_type"], "brokerage");
    assert_eq!(account["name"], "Broker Inc Brokerage ****8765");
    // AVAILCASH 1000.00 + 131.00 + 102.21 + 995.00.
    assert_eq!(account["balance_amount"], "2228.21");
    assert_eq!(account["available_balance_amount"], "1000.00");

    let holdings = app.get("/api/v1/holdings", Some(&token)).await.expect(200);
    assert_eq!(holdings["total_count"], 3, "{holdings}");
    let rows = holdings["holdings"].as_array().expect("rows");
    let find = |symbol: &str| {
        rows.iter()
            .find(|row| row["symbol"] == symbol)
            .unwrap_or_else(|| panic!("{symbol} in {holdings}"))
    };
    let acme = find("ACME");
    assert_eq!(acme["provider_holding_id"], "000000001");
    assert_eq!(acme["asset_type"], "equity");
    assert_eq!(acme["security_name"], "Acme Corp");
    assert_eq!(acme["quantity"], "10");
    assert_eq!(acme["current_price"], "13.10");
    assert_eq!(acme["market_value"], "131.00");
    assert_eq!(find("BIGFX")["asset_type"], "mutual_fund");
    // No ticker: the CUSIP is the symbol.
    assert_eq!(find("912828ZZ1")["asset_type"], "fixed_income");

    let listed = transactions(&app, &token, account["id"].as_str().expect("id")).await;
    let rows = listed["transactions"].as_array().expect("rows");
    let buy = rows
        .iter()
        .find(|row| row["provider_transaction_id"] == "B1")
        .expect("buy");
    assert_eq!(buy["transaction_type"], "trade");
    assert_eq!(buy["subtype"], "BUY");
    assert_eq!(buy["symbol"], "ACME");
    assert_eq!(buy["security_name"], "Acme Corp");
    assert_eq!(buy["quantity"], "10");
    assert_eq!(buy["unit_price"], "12.5");
    assert_eq!(buy["commission"], "4.95");
    assert_eq!(buy["amount"], "-129.95");
    assert_eq!(buy["transaction_date"], "2024-01-02");
    assert_eq!(buy["settlement_date"], "2024-01-04");
    let income = rows
        .iter()
        .find(|row| row["provider_transaction_id"] == "I1")
        .expect("income");
    assert_eq!(income["transaction_type"], "income");
    assert_eq!(income["subtype"], "DIV");

    let snapshots = app
        .get("/api/v1/balance-snapshots", Some(&token))
        .await
        .expect(200);
    let snapshot = &snapshots["snapshots"][0];
    assert_eq!(snapshot["source"], "file_import");
    assert_eq!(snapshot["holdings_value"], "1228.21");
    assert_eq!(snapshot["cash_value"], "1000.00");
}

async fn reimport_of_the_same_file_skips_everything(app: TestApp) {
    let token = access(&app, "again@example.com").await;
    let first = upload(&app, "statement.qfx", BANK_QFX, &token)
        .await
        .expect(201);
    let before = only_account(&app, &token).await;
    let second = upload(&app, "statement.qfx", BANK_QFX, &token)
        .await
        .expect(201);
    assert_eq!(counts(&second), [0, 0, 0, 0, 3, 0, 0], "{second}");
    assert_eq!(second["connection_id"], first["connection_id"]);
    let imports: Vec<(u64, u64)> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::StatementImported {
                format: "qfx",
                transactions_created,
                transactions_skipped,
                ..
            } => Some((transactions_created, transactions_skipped)),
            _ => None,
        })
        .collect();
    assert_eq!(imports, [(3, 0), (0, 3)]);
    let after = only_account(&app, &token).await;
    for field in ["id", "balance_amount", "name", "created_at", "updated_at"] {
        assert_eq!(before[field], after[field], "{field}");
    }
    let listed = transactions(&app, &token, after["id"].as_str().expect("id")).await;
    assert_eq!(listed["total_count"], 3);
    let snapshots = app
        .get(
            &format!(
                "/api/v1/accounts/{}/balance-snapshots",
                after["id"].as_str().expect("id")
            ),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(
        snapshots["total_count"], 1,
        "the same snapshot is not recorded twice"
    );

    let brokerage = upload(&app, "brokerage.qfx", BROKERAGE_OFX, &token)
        .await
        .expect(201);
    assert_ne!(brokerage["connection_id"], first["connection_id"]);
    let again = upload(&app, "brokerage.qfx", BROKERAGE_OFX, &token)
        .await
        .expect(201);
    assert_eq!(counts(&again), [0, 0, 0, 0, 3, 0, 0], "{again}");
}

async fn changed_amount_for_a_known_fitid_updates(app: TestApp) {
    let token = access(&app, "changed@example.com").await;
    upload(&app, "statement.qfx", BANK_QFX, &token)
        .await
        .expect(201);
    let changed = BANK_QFX
        .replace("<TRNAMT>-42.50", "<TRNAMT>-45.00")
        .replace("<BALAMT>1952.50", "<BALAMT>1950.00");
    let body = upload(&app, "statement.qfx", &changed, &token)
        .await
        .expect(201);
    assert_eq!(counts(&body), [0, 1, 0, 1, 2, 0, 0], "{body}");
    let account = only_account(&app, &token).await;
    assert_eq!(account["balance_amount"], "1950.00");
    let listed = transactions(&app, &token, account["id"].as_str().expect("id")).await;
    assert_eq!(listed["total_count"], 3, "updated, not duplicated");
    let grocery = listed["transactions"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|row| row["provider_transaction_id"] == "20240105-1")
        .expect("grocery")
        .clone();
    assert_eq!(grocery["amount"], "-45.00");
}

async fn csv_without_an_account_is_422_and_an_unknown_file_415(app: TestApp) {
    let token = access(&app, "csv@example.com").await;
    // decisions.md "More statement formats": a CSV file is a format now, and one without
    // account_id or account_name is 422.
    let response = upload(&app, "statement.csv", "date,amount\n2024-01-01,1\n", &token).await;
    let body = response.expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "account_id", "{body}");
    // A file that no format's content or extension matches stays 415, listing the formats.
    let response = upload(&app, "statement.pdf", "%PDF-1.4 not a statement", &token).await;
    let body = response.expect_problem(415, "unsupported_media_type");
    assert_eq!(body["title"], "Unsupported Media Type");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains(".qfx, .ofx") && detail.contains("mt940")),
        "{body}"
    );
}

async fn empty_file_is_400(app: TestApp) {
    let token = access(&app, "empty@example.com").await;
    let body = upload(&app, "statement.qfx", "", &token)
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("empty")));
    upload(&app, "statement.ofx", " \r\n\t", &token)
        .await
        .expect_problem(400, "command_validation_failed");
}

async fn oversize_file_is_413(app: TestApp) {
    let token = access(&app, "big@example.com").await;
    upload(&app, "statement.qfx", &BANK_QFX.repeat(3), &token)
        .await
        .expect_problem(413, "payload_too_large");
    assert_eq!(
        app.get("/api/v1/accounts", Some(&token)).await.expect(200)["total_count"],
        0
    );
}

async fn doctype_is_400(app: TestApp) {
    let token = access(&app, "doctype@example.com").await;
    let file = CREDIT_CARD_OFX2.replace(
        "<OFX>\n<SIGNONMSGSRSV1>",
        "<!DOCTYPE OFX [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>\n<OFX>\n<SIGNONMSGSRSV1>",
    );
    let body = upload(&app, "statement.ofx", &file, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("line 3") && d.contains("not accepted")),
        "{body}"
    );
}

async fn malformed_file_is_400_with_the_line(app: TestApp) {
    let token = access(&app, "malformed@example.com").await;
    let file = BANK_QFX.replace("<TRNAMT>-42.50", "<TRNAMT>$42.50");
    let line = file
        .lines()
        .position(|line| line.contains("$42.50"))
        .expect("line")
        + 1;
    let body = upload(&app, "statement.qfx", &file, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    let detail = body["detail"].as_str().expect("detail");
    assert!(detail.contains(&format!("line {line}")), "{detail}");
    assert!(detail.contains("TRNAMT"), "{detail}");
    upload(&app, "statement.qfx", "just some text", &token)
        .await
        .expect_problem(400, "command_validation_failed");
    assert_eq!(
        app.get("/api/v1/accounts", Some(&token)).await.expect(200)["total_count"],
        0
    );
}

async fn signon_error_and_no_statement_are_400(app: TestApp) {
    let token = access(&app, "signon@example.com").await;
    let start = BANK_QFX.find("<BANKMSGSRSV1>").expect("bank messages");
    let end = BANK_QFX.find("</OFX>").expect("end");
    let signon_only = format!("{}{}", &BANK_QFX[..start], &BANK_QFX[end..]);
    let refused =
        signon_only.replacen("<CODE>0\n<SEVERITY>INFO", "<CODE>15500\n<SEVERITY>ERROR", 1);
    let body = upload(&app, "statement.qfx", &refused, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        body["detail"].as_str().is_some_and(|d| d.contains("15500")),
        "{body}"
    );
    let body = upload(&app, "statement.qfx", &signon_only, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("no statement")),
        "{body}"
    );
}

async fn no_token_is_401(app: TestApp) {
    let response = post_imports(
        &app,
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        multipart(&[("file", Some("statement.qfx"), BANK_QFX.as_bytes())]),
        None,
    )
    .await;
    response.expect_problem(401, "unauthorized");
    assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    post_imports(
        &app,
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        multipart(&[("file", Some("statement.qfx"), BANK_QFX.as_bytes())]),
        Some("not-a-token"),
    )
    .await
    .expect_problem(401, "unauthorized");
}

async fn another_users_import_makes_a_separate_connection(app: TestApp) {
    let alice = access(&app, "alice@example.com").await;
    let bob = access(&app, "bob@example.com").await;
    let first = upload(&app, "statement.qfx", BANK_QFX, &alice)
        .await
        .expect(201);
    let second = upload(&app, "statement.qfx", BANK_QFX, &bob)
        .await
        .expect(201);
    assert_eq!(counts(&second), [1, 0, 3, 0, 0, 0, 0], "{second}");
    assert_ne!(first["connection_id"], second["connection_id"]);
    let alice_account = only_account(&app, &alice).await;
    let bob_account = only_account(&app, &bob).await;
    assert_ne!(alice_account["id"], bob_account["id"]);
    assert_eq!(alice_account["connection_id"], first["connection_id"]);
    app.get(
        &format!(
            "/api/v1/accounts/{}",
            alice_account["id"].as_str().expect("id")
        ),
        Some(&bob),
    )
    .await
    .expect_problem(404, "not_found");
}

async fn missing_file_part_is_422(app: TestApp) {
    let token = access(&app, "nofile@example.com").await;
    let body = post_imports(
        &app,
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        multipart(&[
            ("note", None, b"hello"),
            ("document", Some("statement.qfx"), BANK_QFX.as_bytes()),
        ]),
        Some(&token),
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "file");
}

async fn non_multipart_body_is_422(app: TestApp) {
    let token = access(&app, "json@example.com").await;
    let body = post_imports(
        &app,
        "application/json",
        br#"{"file": "statement.qfx"}"#.to_vec(),
        Some(&token),
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "header.content-type");
    post_imports(
        &app,
        "text/plain",
        BANK_QFX.as_bytes().to_vec(),
        Some(&token),
    )
    .await
    .expect_problem(422, "validation_failed");
}

async fn evening_postings_keep_the_files_calendar_date(app: TestApp) {
    let token = access(&app, "evening@example.com").await;
    // 20:00 in New York on January 5th is already January 6th in UTC.
    let file = BANK_QFX.replacen(
        "<DTPOSTED>20240105120000[-5:EST]",
        "<DTPOSTED>20240105200000[-5:EST]",
        1,
    );
    assert_ne!(
        file, BANK_QFX,
        "the fixture has the posting this case moves"
    );
    upload(&app, "statement.qfx", &file, &token)
        .await
        .expect(201);
    let account = only_account(&app, &token).await;
    let listed = transactions(&app, &token, account["id"].as_str().expect("id")).await;
    let dates: Vec<&str> = listed["transactions"]
        .as_array()
        .expect("transactions")
        .iter()
        .filter_map(|line| line["transaction_date"].as_str())
        .collect();
    assert!(dates.contains(&"2024-01-05"), "{dates:?}");
    assert!(!dates.contains(&"2024-01-06"), "{dates:?}");
}

/// The formats list of decisions.md ("Imports", "More statement formats") with `limit` as
/// the upload limit.
fn expected_formats(limit: usize) -> Value {
    let format = |code: &str, name: &str, extensions: &[&str], requires: &[&str]| {
        serde_json::json!({
            "format": code,
            "name": name,
            "extensions": extensions,
            "provider_slugs": ["file_import"],
            "max_size_bytes": limit,
            "requires": requires,
        })
    };
    let account = ["account_id|account_name"];
    serde_json::json!({
        "formats": [
            format("qfx", "Quicken Financial Exchange", &[".qfx"], &[]),
            format("ofx", "Open Financial Exchange", &[".ofx"], &[]),
            format("qif", "Quicken Interchange Format", &[".qif"], &account),
            format("csv", "Comma-Separated Values", &[".csv", ".tsv", ".txt"], &account),
            format(
                "camt.052",
                "ISO 20022 Bank to Customer Account Report (camt.052)",
                &[".xml", ".052"],
                &[],
            ),
            format(
                "camt.053",
                "ISO 20022 Bank to Customer Statement (camt.053)",
                &[".xml", ".053"],
                &[],
            ),
            format(
                "camt.054",
                "ISO 20022 Bank to Customer Debit/Credit Notification (camt.054)",
                &[".xml", ".054"],
                &[],
            ),
            format(
                "mt940",
                "SWIFT MT940 Customer Statement",
                &[".sta", ".mt940", ".940", ".txt"],
                &[],
            ),
            format(
                "mt942",
                "SWIFT MT942 Interim Transaction Report",
                &[".mt942", ".942", ".txt"],
                &[],
            ),
        ]
    })
}

async fn formats_are_public_and_list_every_format(app: TestApp) {
    let body = app.get("/api/v1/imports/formats", None).await.expect(200);
    assert_eq!(
        body,
        expected_formats(test_config().max_upload_bytes()),
        "{body}"
    );
    assert_eq!(body["formats"].as_array().map(Vec::len), Some(9));
    assert_eq!(body["formats"][0]["max_size_bytes"], 10 * 1024 * 1024);
    // A token changes nothing.
    let token = access(&app, "formats@example.com").await;
    assert_eq!(
        app.get("/api/v1/imports/formats", Some(&token))
            .await
            .expect(200),
        body
    );
}

async fn formats_report_the_configured_limit(app: TestApp) {
    let body = app.get("/api/v1/imports/formats", None).await.expect(200);
    assert_eq!(body, expected_formats(1024), "{body}");
}

/// Uploads that are refused while streaming, against the bare service with a body that counts
/// what is pulled out of it.
mod streaming {
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use aggregation_core::PeerAddr;
    use aggregation_tests::{Backend, Target, run_setup};
    use http_body_util::BodyExt;
    use hyper::body::{Body, Frame};
    use tower::ServiceExt;

    use super::*;

    /// The upload limit of these cases.
    const LIMIT: usize = 1024 * 1024;
    /// Bytes handed out per poll.
    const CHUNK: usize = 64 * 1024;
    /// What the client would send in all: far more than the limit.
    const TOTAL: usize = 50 * 1024 * 1024;

    static FILLER: [u8; CHUNK] = [b'x'; CHUNK];

    fn one_mib_uploads() -> Setup {
        Setup {
            config: test_config().with_max_upload_bytes(LIMIT),
            ..Setup::default()
        }
    }

    /// A multipart upload whose `file` part never ends: the part's headers, then filler up to
    /// `TOTAL` bytes, `CHUNK` bytes per poll. `pulled` counts every byte handed out.
    struct CountingBody {
        head: Option<Bytes>,
        remaining: usize,
        pulled: Arc<AtomicUsize>,
    }

    impl Body for CountingBody {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            let chunk = match self.head.take() {
                Some(head) => head,
                None if self.remaining == 0 => return Poll::Ready(None),
                None => {
                    let size = self.remaining.min(CHUNK);
                    self.remaining -= size;
                    Bytes::from_static(&FILLER[..size])
                }
            };
            self.pulled.fetch_add(chunk.len(), Ordering::SeqCst);
            Poll::Ready(Some(Ok(Frame::data(chunk))))
        }
    }

    /// Sends the never-ending upload, with `Content-Length: declared` when given; returns the
    /// response and how many bytes the service pulled from the body.
    async fn send_stream(
        app: &TestApp,
        token: &str,
        declared: Option<usize>,
    ) -> (TestResponse, usize) {
        let head = format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"statement.qfx\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        );
        let pulled = Arc::new(AtomicUsize::new(0));
        let body = CountingBody {
            remaining: TOTAL - head.len(),
            head: Some(Bytes::from(head)),
            pulled: pulled.clone(),
        };
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri("/api/v1/imports")
            .header(
                header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={BOUNDARY}"),
            )
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .extension(PeerAddr(SocketAddr::from(([127, 0, 0, 1], 40_000))));
        if let Some(length) = declared {
            builder = builder.header(header::CONTENT_LENGTH, length);
        }
        let response = app
            .service
            .clone()
            .oneshot(builder.body(body).expect("request"))
            .await
            .expect("infallible service");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        let response = TestResponse {
            status: parts.status,
            headers: parts.headers,
            body,
        };
        (response, pulled.load(Ordering::SeqCst))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn declared_length_over_the_limit_is_413_before_reading() {
        run_setup(
            Target::Bare,
            Backend::Sqlite,
            one_mib_uploads(),
            |app| async move {
                let token = access(&app, "declared@example.com").await;
                let (response, pulled) = send_stream(&app, &token, Some(TOTAL)).await;
                response.expect_problem(413, "payload_too_large");
                assert_eq!(pulled, 0, "not one byte of the body is read");
            },
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chunked_upload_over_the_limit_is_413_after_the_limit() {
        run_setup(
            Target::Bare,
            Backend::Sqlite,
            one_mib_uploads(),
            |app| async move {
                let token = access(&app, "chunked@example.com").await;
                let (response, pulled) = send_stream(&app, &token, None).await;
                response.expect_problem(413, "payload_too_large");
                // The limit, the chunk that crosses it, and room for the part's headers.
                let bound = LIMIT + CHUNK + 4 * 1024;
                assert!(
                    pulled > LIMIT && pulled <= bound,
                    "pulled {pulled} bytes of {TOTAL}; expected above {LIMIT}, at most {bound}"
                );
            },
        )
        .await;
    }
}

async fn holdings_adding_past_the_largest_decimal_are_400(app: TestApp) {
    let token = access(&app, "ofx-overflow@example.com").await;
    // One security held in two sub-accounts, each at the largest decimal there is.
    let position = "<POSSTOCK><INVPOS><SECID><UNIQUEID>123456789<UNIQUEIDTYPE>CUSIP</SECID>\
                    <HELDINACCT>CASH<POSTYPE>LONG<UNITS>1<UNITPRICE>1\
                    <MKTVAL>79228162514264337593543950335<DTPRICEASOF>20240131</INVPOS></POSSTOCK>\n";
    let file = format!(
        "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\n\n<OFX>\n<SIGNONMSGSRSV1><SONRS><STATUS>\
         <CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20240131<LANGUAGE>ENG<FI><ORG>Broker</FI>\
         </SONRS></SIGNONMSGSRSV1>\n<INVSTMTMSGSRSV1><INVSTMTTRNRS><TRNUID>1<STATUS><CODE>0\
         <SEVERITY>INFO</STATUS><INVSTMTRS><DTASOF>20240131<CURDEF>USD<INVACCTFROM><BROKERID>\
         broker.example<ACCTID>INV-1</INVACCTFROM>\n<INVPOSLIST>\n{position}{position}\
         </INVPOSLIST>\n</INVSTMTRS></INVSTMTTRNRS></INVSTMTMSGSRSV1></OFX>\n"
    );
    let body = upload(&app, "broker.ofx", &file, &token)
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("largest amount") && d.contains("123456789")),
        "{body}"
    );
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    assert_eq!(accounts["total_count"], 0, "nothing written: {accounts}");
}
