//! Conformance: the import framework of decisions.md "More statement formats" — format
//! detection and the `format` part, the parts `account_id`, `account_name`, `currency`,
//! `mapping` and `dry_run` with their 4xx rules, `format` and `warnings` in the answer, and an
//! OFX balance that cannot be read. Driven with OFX files (the format every build reads); the
//! other formats' own cases live in `import_<format>.rs`, and the mapping rules every format
//! shares (identity, dedupe, balance checks) are unit-tested in `aggregation-core`'s
//! `import::parsed` and `import::statement`.

use aggregation_core::events::DomainEvent;
use aggregation_tests::imports::access;
use aggregation_tests::{BANK_QFX, TestApp, conformance, upload, upload_with};
use serde_json::Value;

conformance!(
    content_decides_the_format_before_the_extension,
    the_format_part_overrides_detection,
    bad_parts_are_422_naming_each,
    account_id_must_be_the_callers,
    account_id_imports_into_that_account,
    files_that_name_no_account_need_one,
    a_dry_run_answers_200_and_writes_nothing,
    an_unreadable_ofx_balance_is_a_warning,
    the_formats_list_says_what_each_needs,
);

/// Text parts of an upload, as `upload_with` takes them.
type Parts<'a> = &'a [(&'a str, &'a str)];

/// The bank statement without Intuit's `INTU.BID` (plain OFX).
fn bank_ofx() -> String {
    BANK_QFX.replace("<INTU.BID>1234\n", "")
}

/// The bank statement for another account number, with other FITIDs.
fn other_account_ofx() -> String {
    bank_ofx()
        .replace("<ACCTID>123456789", "<ACCTID>555000111")
        .replace("<FITID>2024", "<FITID>B-2024")
}

async fn accounts(app: &TestApp, token: &str) -> Value {
    app.get("/api/v1/accounts", Some(token)).await.expect(200)
}

fn problem_fields(body: &Value) -> Vec<String> {
    body["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|error| error["field"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn content_decides_the_format_before_the_extension(app: TestApp) {
    let token = access(&app, "detect@example.com").await;
    // OFX content under a CSV name is OFX: content first.
    let body = upload(&app, "export.csv", &bank_ofx(), &token)
        .await
        .expect(201);
    assert_eq!(body["format"], "ofx", "{body}");
    assert_eq!(body["warnings"], serde_json::json!([]));
    assert_eq!(body["transactions_created"], 3);
    // Intuit's INTU.BID makes an OFX file QFX, whatever its name says.
    let body = upload(&app, "statement.ofx", BANK_QFX, &token)
        .await
        .expect(201);
    assert_eq!(body["format"], "qfx", "{body}");
    assert_eq!(body["transactions_skipped"], 3);
    // So does the .qfx extension; and no file name at all is fine when the content tells.
    let body = upload(&app, "statement.QFX", &bank_ofx(), &token)
        .await
        .expect(201);
    assert_eq!(body["format"], "qfx", "{body}");
    let body = upload_with(&app, None, bank_ofx().as_bytes(), &[], &token)
        .await
        .expect(201);
    assert_eq!(body["format"], "ofx", "{body}");
    // Content that says nothing and a name that names nothing: 415 listing the formats.
    let problem = upload(&app, "notes.txt", "just some words\n", &token)
        .await
        .expect_problem(415, "unsupported_media_type");
    let detail = problem["detail"].as_str().unwrap_or_default();
    for code in [
        "qfx", "ofx", "qif", "csv", "camt.052", "camt.053", "camt.054", "mt940", "mt942",
    ] {
        assert!(detail.contains(code), "{code} in {detail}");
    }
}

async fn the_format_part_overrides_detection(app: TestApp) {
    let token = access(&app, "override@example.com").await;
    let body = upload_with(
        &app,
        Some("statement.qfx"),
        BANK_QFX.as_bytes(),
        &[("format", "OFX")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(body["format"], "ofx", "the part wins, in any case: {body}");
    // Named CAMT, an OFX file does not read as CAMT: 400, nothing written.
    let problem = upload_with(
        &app,
        Some("statement.qfx"),
        other_account_ofx().as_bytes(),
        &[("format", "camt.053")],
        &token,
    )
    .await
    .expect_problem(400, "command_validation_failed");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("camt.053")),
        "{problem}"
    );
    assert_eq!(accounts(&app, &token).await["total_count"], 1);
}

async fn bad_parts_are_422_naming_each(app: TestApp) {
    let token = access(&app, "parts@example.com").await;
    let long_name = "n".repeat(201);
    let cases: [(Parts<'_>, &[&str]); 8] = [
        (&[("format", "pdf")], &["format"]),
        (&[("account_id", "42")], &["account_id"]),
        (&[("account_name", long_name.as_str())], &["account_name"]),
        (&[("account_name", "  ")], &["account_name"]),
        (&[("currency", "usd")], &["currency"]),
        (&[("currency", "EURO")], &["currency"]),
        (&[("dry_run", "maybe")], &["dry_run"]),
        (
            &[("account_id", "7"), ("currency", "1"), ("dry_run", "x")],
            &["account_id", "currency", "dry_run"],
        ),
    ];
    for (parts, fields) in cases {
        let problem = upload_with(&app, Some("a.ofx"), bank_ofx().as_bytes(), parts, &token)
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem_fields(&problem), fields, "{parts:?}: {problem}");
    }
    // A mapping is for CSV files only, and must be a mapping.
    let problem = upload_with(
        &app,
        Some("a.ofx"),
        bank_ofx().as_bytes(),
        &[("mapping", r#"{"columns": {"date": 0, "amount": 1}}"#)],
        &token,
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(problem_fields(&problem), ["mapping"], "{problem}");
    for mapping in [
        "{not json",
        r#"{"columns": {"amount": 1}}"#,
        r#"{"columns": {"date": 0}, "colour": 1}"#,
    ] {
        let problem = upload_with(
            &app,
            Some("a.csv"),
            b"Date,Amount\n2024-01-02,1.00\n",
            &[("account_name", "Checking"), ("mapping", mapping)],
            &token,
        )
        .await
        .expect_problem(422, "validation_failed");
        assert_eq!(
            problem_fields(&problem),
            ["mapping"],
            "{mapping}: {problem}"
        );
    }
    // account_name and currency are for a new account; with account_id they are refused.
    let problem = upload_with(
        &app,
        Some("a.ofx"),
        bank_ofx().as_bytes(),
        &[
            ("account_id", "0192f3a4-5b6c-7d8e-9f00-112233445566"),
            ("account_name", "Checking"),
            ("currency", "EUR"),
        ],
        &token,
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(problem_fields(&problem), ["account_name", "currency"]);
    assert_eq!(
        accounts(&app, &token).await["total_count"],
        0,
        "nothing written"
    );
}

async fn account_id_must_be_the_callers(app: TestApp) {
    let owner = access(&app, "owner@example.com").await;
    upload(&app, "statement.ofx", &bank_ofx(), &owner)
        .await
        .expect(201);
    let account_id = accounts(&app, &owner).await["accounts"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let stranger = access(&app, "stranger@example.com").await;
    for id in [account_id.as_str(), "0192f3a4-5b6c-7d8e-9f00-112233445566"] {
        upload_with(
            &app,
            Some("statement.ofx"),
            other_account_ofx().as_bytes(),
            &[("account_id", id)],
            &stranger,
        )
        .await
        .expect_problem(404, "not_found");
    }
    assert_eq!(accounts(&app, &stranger).await["total_count"], 0);
}

async fn account_id_imports_into_that_account(app: TestApp) {
    let token = access(&app, "into@example.com").await;
    let first = upload(&app, "statement.ofx", &bank_ofx(), &token)
        .await
        .expect(201);
    let account = accounts(&app, &token).await["accounts"][0].clone();
    let account_id = account["id"].as_str().expect("id");
    let body = upload_with(
        &app,
        Some("statement.ofx"),
        other_account_ofx().as_bytes(),
        &[("account_id", account_id)],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(body["connection_id"], first["connection_id"], "{body}");
    assert_eq!(body["accounts_created"], 0, "{body}");
    assert_eq!(body["transactions_created"], 3, "{body}");
    let listed = accounts(&app, &token).await;
    assert_eq!(listed["total_count"], 1, "{listed}");
    assert_eq!(
        listed["accounts"][0]["provider_account_id"], "123456789",
        "the chosen account keeps its identity"
    );
    assert_eq!(listed["accounts"][0]["name"], account["name"]);
    let rows = app
        .get(
            &format!("/api/v1/accounts/{account_id}/transactions"),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(rows["total_count"], 6, "{rows}");
}

async fn files_that_name_no_account_need_one(app: TestApp) {
    let token = access(&app, "noaccount@example.com").await;
    for (name, content) in [
        (
            "export.qif",
            "!Type:Bank\nD01/02/2024\nT-1.00\nPCoffee\n^\n",
        ),
        ("export.csv", "Date,Amount\n2024-01-02,-1.00\n"),
    ] {
        let problem = upload(&app, name, content, &token)
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(
            problem_fields(&problem),
            ["account_id"],
            "{name}: {problem}"
        );
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains("account_name")),
            "{problem}"
        );
    }
    // The format part names a format that needs an account just as well.
    let problem = upload_with(
        &app,
        Some("export.dat"),
        b"Date,Amount\n2024-01-02,-1.00\n",
        &[("format", "csv")],
        &token,
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(problem_fields(&problem), ["account_id"], "{problem}");
}

async fn a_dry_run_answers_200_and_writes_nothing(app: TestApp) {
    let token = access(&app, "dry@example.com").await;
    let before = app.events.events().len();
    let body = upload_with(
        &app,
        Some("statement.qfx"),
        BANK_QFX.as_bytes(),
        &[("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    assert_eq!(body["dry_run"], true, "{body}");
    assert_eq!(body["connection_id"], Value::Null);
    assert_eq!(body["format"], "qfx");
    assert_eq!(body["accounts_created"], 1);
    assert_eq!(body["transactions_created"], 3);
    assert_eq!(body["warnings"], serde_json::json!([]));
    let account = &body["accounts"][0];
    assert_eq!(account["account_id"], Value::Null, "it would be created");
    assert_eq!(account["outcome"], "created");
    assert_eq!(account["provider_account_id"], "123456789");
    assert_eq!(account["name"], "First Bank Checking ****6789");
    assert_eq!(account["balance_amount"], "1952.50");
    assert_eq!(account["transactions_in_file"], 3);
    assert_eq!(account["rows"].as_array().map(Vec::len), Some(3));
    assert_eq!(account["rows"][0]["provider_transaction_id"], "20240105-1");
    assert_eq!(account["rows"][0]["amount"], "-42.50");
    assert_eq!(
        accounts(&app, &token).await["total_count"],
        0,
        "nothing written"
    );
    let providers = app.get("/api/v1/providers", Some(&token)).await.expect(200);
    assert_eq!(providers["total_count"], 0, "no connection: {providers}");
    assert!(
        !app.events.events()[before..]
            .iter()
            .any(|event| matches!(event, DomainEvent::StatementImported { .. })),
        "no event for a dry run"
    );

    // After the import, the same dry run finds everything in place.
    let imported = upload(&app, "statement.qfx", BANK_QFX, &token)
        .await
        .expect(201);
    let body = upload_with(
        &app,
        Some("statement.qfx"),
        BANK_QFX.as_bytes(),
        &[("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    assert_eq!(body["transactions_skipped"], 3, "{body}");
    assert_eq!(body["transactions_created"], 0);
    assert_eq!(body["connection_id"], Value::Null);
    let listed = accounts(&app, &token).await;
    assert_eq!(
        body["accounts"][0]["account_id"],
        listed["accounts"][0]["id"]
    );
    assert_eq!(body["accounts"][0]["outcome"], "unchanged");
    assert!(imported["connection_id"].is_string());
    // dry_run=false is an ordinary import.
    upload_with(
        &app,
        Some("statement.qfx"),
        BANK_QFX.as_bytes(),
        &[("dry_run", "false")],
        &token,
    )
    .await
    .expect(201);
}

async fn an_unreadable_ofx_balance_is_a_warning(app: TestApp) {
    let token = access(&app, "balamt@example.com").await;
    let file = BANK_QFX.replace("<BALAMT>1952.50", "<BALAMT>R$ 5.326,43");
    let line = file
        .lines()
        .position(|line| line.contains("R$ 5.326,43"))
        .expect("the line")
        + 1;
    let body = upload(&app, "statement.qfx", &file, &token)
        .await
        .expect(201);
    assert_eq!(body["transactions_created"], 3, "{body}");
    let warnings = body["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{body}");
    assert_eq!(warnings[0]["item"], format!("line {line}"));
    assert!(
        warnings[0]["message"]
            .as_str()
            .is_some_and(|message| message.contains("BALAMT")),
        "{body}"
    );
    let account = &accounts(&app, &token).await["accounts"][0];
    assert_eq!(
        account["balance_amount"], "0",
        "no balance was read: {account}"
    );
}

async fn the_formats_list_says_what_each_needs(app: TestApp) {
    let body = app.get("/api/v1/imports/formats", None).await.expect(200);
    let formats = body["formats"].as_array().expect("formats");
    let needs: Vec<(String, Value)> = formats
        .iter()
        .map(|format| {
            (
                format["format"].as_str().unwrap_or_default().to_owned(),
                format["requires"].clone(),
            )
        })
        .collect();
    for (code, requires) in needs {
        let expected = if code == "qif" || code == "csv" {
            serde_json::json!(["account_id|account_name"])
        } else {
            serde_json::json!([])
        };
        assert_eq!(requires, expected, "{code}");
    }
}
