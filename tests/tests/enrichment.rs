//! Enrichment through the three fronts and both stores: the category list (the taxonomy and
//! the caller's own), creating and deleting categories of one's own (their transactions back to
//! uncategorised), and the caller's edits of a transaction's category, notes and merchant name,
//! which survive re-importing the same file and re-syncing (SimpleFIN's fake bridge). Nobody
//! sees, uses or deletes another user's categories or edits another user's transactions.

use aggregation_sandbox::CHECKING_ID;
use aggregation_tests::imports::{access, accounts, rows};
use aggregation_tests::simplefin::bridge;
use aggregation_tests::upload_with;
use aggregation_tests::{Setup, TestApp, conformance};
use http::Method;
use serde_json::{Value, json};

fn simplefin() -> Setup {
    aggregation_tests::simplefin::setup()
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

async fn patch(
    app: &TestApp,
    token: &str,
    transaction_id: &str,
    body: &Value,
) -> aggregation_tests::TestResponse {
    app.call(
        Method::PATCH,
        &format!("/api/v1/transactions/{transaction_id}"),
        Some(body),
        Some(token),
    )
    .await
}

/// A CSV statement of three card payments.
const STATEMENT: &str = "Date,Description,Amount\n2026-03-02,SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA,-4.75\n\
     2026-03-03,CORNER GROCERY 0231 SPRINGFIELD,-84.12\n2026-03-04,Team lunch Luigi's,-62.00\n";

/// Imports [`STATEMENT`] into the account named `Checking`: the account's rows.
async fn imported(app: &TestApp, token: &str) -> (String, Vec<Value>) {
    upload_with(
        app,
        Some("checking.csv"),
        STATEMENT.as_bytes(),
        &[("account_name", "Checking")],
        token,
    )
    .await
    .expect(201);
    let account = accounts(app, token).await;
    let account_id = id(&account[0]).to_owned();
    let transactions = rows(app, token, &account_id).await;
    assert_eq!(transactions.len(), 3, "{transactions:?}");
    (account_id, transactions)
}

fn by_amount<'a>(rows: &'a [Value], amount: &str) -> &'a Value {
    rows.iter()
        .find(|row| row["amount"] == amount)
        .expect("row of that amount")
}

fn categories(list: &Value) -> &Vec<Value> {
    list["categories"].as_array().expect("categories")
}

async fn categories_are_listed_created_and_deleted(app: TestApp) {
    let token = access(&app, "categories@example.com").await;
    let list = app
        .get("/api/v1/categories", Some(&token))
        .await
        .expect(200);
    let coffee = categories(&list)
        .iter()
        .find(|category| category["id"] == "FOOD_AND_DRINK_COFFEE")
        .expect("the taxonomy's coffee");
    assert_eq!(coffee["primary"], "FOOD_AND_DRINK");
    assert_eq!(coffee["is_custom"], false);
    assert!(coffee["name"].as_str().is_some_and(|name| !name.is_empty()));
    let taxonomy = categories(&list).len();
    assert!(taxonomy > 100, "{taxonomy}");
    assert!(
        categories(&list)
            .iter()
            .all(|category| category["is_custom"] == false)
    );

    let created = app
        .post(
            "/api/v1/categories",
            &json!({"name": "  Team lunches ", "primary": "FOOD_AND_DRINK"}),
            Some(&token),
        )
        .await
        .expect(201);
    let custom_id = id(&created).to_owned();
    assert!(custom_id.starts_with("custom:"), "{created}");
    assert!(
        uuid::Uuid::parse_str(&custom_id["custom:".len()..]).is_ok(),
        "{created}"
    );
    assert_eq!(created["name"], "Team lunches");
    assert_eq!(created["primary"], "FOOD_AND_DRINK");
    assert_eq!(created["is_custom"], true);
    let list = app
        .get("/api/v1/categories", Some(&token))
        .await
        .expect(200);
    assert_eq!(categories(&list).len(), taxonomy + 1);
    assert_eq!(categories(&list)[taxonomy], created);

    // 422 for an unknown primary, a blank, overlong or missing name.
    for (body, field, code) in [
        (
            json!({"name": "X", "primary": "FOOD"}),
            "primary",
            "unknown_category",
        ),
        (
            json!({"name": "X", "primary": "FOOD_AND_DRINK_COFFEE"}),
            "primary",
            "unknown_category",
        ),
        (
            json!({"name": "   ", "primary": "FOOD_AND_DRINK"}),
            "name",
            "blank",
        ),
        (
            json!({"name": "", "primary": "FOOD_AND_DRINK"}),
            "name",
            "too_short",
        ),
        (
            json!({"name": "x".repeat(101), "primary": "FOOD_AND_DRINK"}),
            "name",
            "too_long",
        ),
        (json!({"primary": "FOOD_AND_DRINK"}), "name", "required"),
        (
            json!({"name": 5, "primary": "FOOD_AND_DRINK"}),
            "name",
            "invalid_type",
        ),
    ] {
        let problem = app
            .post("/api/v1/categories", &body, Some(&token))
            .await
            .expect_problem(422, "validation_failed");
        let errors = problem["errors"].as_array().expect("errors");
        assert!(
            errors
                .iter()
                .any(|error| error["field"] == field && error["code"] == code),
            "{body}: {problem}"
        );
    }

    // A transaction in the custom category goes back to uncategorised when it is deleted.
    let (account_id, transactions) = imported(&app, &token).await;
    let lunch = id(by_amount(&transactions, "-62.00")).to_owned();
    let edited = patch(&app, &token, &lunch, &json!({"category": custom_id}))
        .await
        .expect(200);
    assert_eq!(edited["category"], custom_id.as_str());
    assert_eq!(edited["category_source"], "user");

    // Another user neither sees, uses nor deletes it.
    let other = access(&app, "categories-other@example.com").await;
    let theirs = app
        .get("/api/v1/categories", Some(&other))
        .await
        .expect(200);
    assert_eq!(categories(&theirs).len(), taxonomy);
    app.delete(
        &format!("/api/v1/categories/{custom_id}"),
        None,
        Some(&other),
    )
    .await
    .expect_problem(404, "not_found");
    let (_, their_rows) = imported(&app, &other).await;
    let problem = patch(
        &app,
        &other,
        id(&their_rows[0]),
        &json!({"category": custom_id}),
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "category", "{problem}");

    app.delete(
        &format!("/api/v1/categories/{custom_id}"),
        None,
        Some(&token),
    )
    .await
    .expect(204);
    let after = rows(&app, &token, &account_id).await;
    let lunch_row = by_amount(&after, "-62.00");
    assert_eq!(lunch_row["category"], Value::Null, "{lunch_row}");
    assert_eq!(lunch_row["category_source"], Value::Null, "{lunch_row}");
    let list = app
        .get("/api/v1/categories", Some(&token))
        .await
        .expect(200);
    assert_eq!(categories(&list).len(), taxonomy);
    app.delete(
        &format!("/api/v1/categories/{custom_id}"),
        None,
        Some(&token),
    )
    .await
    .expect_problem(404, "not_found");
    // Taxonomy categories and ids of no shape are not the caller's to delete.
    for path in ["FOOD_AND_DRINK_COFFEE", "custom:nope", "x"] {
        app.delete(&format!("/api/v1/categories/{path}"), None, Some(&token))
            .await
            .expect_problem(404, "not_found");
    }
    app.get("/api/v1/categories", None)
        .await
        .expect_problem(401, "unauthorized");
}

async fn edits_survive_reimport(app: TestApp) {
    let token = access(&app, "edits@example.com").await;
    let (account_id, transactions) = imported(&app, &token).await;
    let coffee = id(by_amount(&transactions, "-4.75")).to_owned();
    let grocery = id(by_amount(&transactions, "-84.12")).to_owned();

    let edited = patch(
        &app,
        &token,
        &coffee,
        &json!({"category": "FOOD_AND_DRINK_COFFEE", "notes": "with Sam", "merchant_name": "Blue Bottle"}),
    )
    .await
    .expect(200);
    assert_eq!(edited["id"], coffee.as_str());
    assert_eq!(edited["category"], "FOOD_AND_DRINK_COFFEE");
    assert_eq!(edited["category_source"], "user");
    assert_eq!(edited["notes"], "with Sam");
    assert_eq!(edited["merchant_name"], "Blue Bottle");
    // Only the fields sent change; null clears.
    let notes_only = patch(&app, &token, &grocery, &json!({"notes": "weekly"}))
        .await
        .expect(200);
    assert_eq!(notes_only["notes"], "weekly");
    assert_eq!(notes_only["category_source"], Value::Null);
    let cleared = patch(&app, &token, &grocery, &json!({"notes": null}))
        .await
        .expect(200);
    assert_eq!(cleared["notes"], Value::Null);
    let read = app
        .get(&format!("/api/v1/transactions/{coffee}"), Some(&token))
        .await
        .expect(200);
    assert_eq!(read, edited);

    // The same file again changes none of it.
    let again = upload_with(
        &app,
        Some("checking.csv"),
        STATEMENT.as_bytes(),
        &[("account_id", account_id.as_str())],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(again["transactions_created"], 0, "{again}");
    let after = rows(&app, &token, &account_id).await;
    let coffee_row = by_amount(&after, "-4.75");
    assert_eq!(coffee_row["category"], "FOOD_AND_DRINK_COFFEE");
    assert_eq!(coffee_row["category_source"], "user");
    assert_eq!(coffee_row["notes"], "with Sam");
    assert_eq!(coffee_row["merchant_name"], "Blue Bottle");
    assert_eq!(by_amount(&after, "-84.12")["notes"], Value::Null);

    // Clearing the category is the user's choice too.
    let uncategorised = patch(&app, &token, &coffee, &json!({"category": null}))
        .await
        .expect(200);
    assert_eq!(uncategorised["category"], Value::Null);
    assert_eq!(uncategorised["notes"], "with Sam");

    // 422: an unknown category, a primary id, an empty body, wrong types, overlong notes.
    for (body, field) in [
        (
            json!({"category": "FOOD_AND_DRINK_NOT_A_THING"}),
            "category",
        ),
        (json!({"category": "FOOD_AND_DRINK"}), "category"),
        (
            json!({"category": format!("custom:{}", uuid::Uuid::now_v7())}),
            "category",
        ),
        (json!({}), "category"),
        (json!({"notes": 3}), "notes"),
        (json!({"merchant_name": ""}), "merchant_name"),
        (json!({"notes": "x".repeat(2001)}), "notes"),
    ] {
        let problem = patch(&app, &token, &coffee, &body)
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    // Another user's transaction, an unknown one and a malformed id.
    let other = access(&app, "edits-other@example.com").await;
    patch(&app, &other, &coffee, &json!({"notes": "mine"}))
        .await
        .expect_problem(404, "not_found");
    patch(
        &app,
        &token,
        &uuid::Uuid::now_v7().to_string(),
        &json!({"notes": "x"}),
    )
    .await
    .expect_problem(404, "not_found");
    patch(&app, &token, "nope", &json!({"notes": "x"}))
        .await
        .expect_problem(422, "validation_failed");
    let unchanged = app
        .get(&format!("/api/v1/transactions/{coffee}"), Some(&token))
        .await
        .expect(200);
    assert_eq!(unchanged["notes"], "with Sam");
}

async fn edits_survive_resync(app: TestApp) {
    let token = access(&app, "resync-edits@example.com").await;
    let bridge = bridge().await;
    let connection = app
        .post(
            "/api/v1/providers",
            &json!({"provider_slug": "simplefin", "alias": "Bank", "setup_token": bridge.sandbox.setup_token()}),
            Some(&token),
        )
        .await
        .expect(201);
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": id(&connection)}),
        Some(&token),
    )
    .await
    .expect(201);
    let checking = accounts(&app, &token)
        .await
        .into_iter()
        .find(|account| account["provider_account_id"] == CHECKING_ID)
        .expect("checking");
    let account_id = id(&checking).to_owned();
    let sync = |force: bool| {
        let today = chrono::Utc::now().date_naive();
        json!({
            "connection_id": id(&connection),
            "start_date": (today - chrono::TimeDelta::days(60)).to_string(),
            "end_date": today.to_string(),
            "force": force,
        })
    };
    app.post("/api/v1/transactions/syncs", &sync(false), Some(&token))
        .await
        .expect(201);
    let synced = rows(&app, &token, &account_id).await;
    let rent = id(by_amount(&synced, "-1200.00")).to_owned();
    let coffee = id(by_amount(&synced, "-4.75")).to_owned();
    patch(
        &app,
        &token,
        &rent,
        &json!({"category": "RENT_AND_UTILITIES_RENT", "notes": "March", "merchant_name": "Maple Apartments"}),
    )
    .await
    .expect(200);
    // The pending coffee books under another id on the next sync: the booked row keeps the
    // pending row's id, and the user's notes with it.
    patch(&app, &token, &coffee, &json!({"notes": "latte"}))
        .await
        .expect(200);
    let resynced = app
        .post("/api/v1/transactions/syncs", &sync(true), Some(&token))
        .await
        .expect(201);
    assert_eq!(resynced["created"], 0, "{resynced}");
    let after = rows(&app, &token, &account_id).await;
    let rent_row = by_amount(&after, "-1200.00");
    assert_eq!(rent_row["id"], rent.as_str());
    assert_eq!(rent_row["category"], "RENT_AND_UTILITIES_RENT");
    assert_eq!(rent_row["category_source"], "user");
    assert_eq!(rent_row["notes"], "March");
    assert_eq!(rent_row["merchant_name"], "Maple Apartments");
    let coffee_row = by_amount(&after, "-4.75");
    assert_eq!(coffee_row["id"], coffee.as_str());
    assert_eq!(coffee_row["status"], "settled");
    assert_eq!(coffee_row["notes"], "latte");
}

/// A CAMT.053 statement whose salary entry carries the bank transaction code `PMNT/RCDT/SALA`.
const CAMT_STATEMENT: &str =
    include_str!("../../aggregation-core/src/import/camt/fixtures/v08_statement.xml");

async fn new_rows_are_enriched_by_codes_transfers_and_descriptions(app: TestApp) {
    let token = access(&app, "codes@example.com").await;
    // A merchant from the description.
    let (checking_id, transactions) = imported(&app, &token).await;
    let coffee = by_amount(&transactions, "-4.75");
    assert_eq!(coffee["merchant_name"], "Blue Bottle Coffee", "{coffee}");
    assert_eq!(coffee["category"], Value::Null, "{coffee}");

    // The bank transaction code of a CAMT entry names its category.
    upload_with(
        &app,
        Some("statement.xml"),
        CAMT_STATEMENT.as_bytes(),
        &[],
        &token,
    )
    .await
    .expect(201);
    let camt_account = accounts(&app, &token)
        .await
        .into_iter()
        .find(|account| account["id"] != checking_id.as_str())
        .expect("the statement's account");
    let camt_rows = rows(&app, &token, id(&camt_account)).await;
    let salary = by_amount(&camt_rows, "1000.00");
    assert_eq!(salary["category"], "INCOME_WAGES", "{salary}");
    assert_eq!(salary["category_source"], "bank_code", "{salary}");
    // The user beats the code, and a re-import of the file keeps the user's choice.
    let salary_id = id(salary).to_owned();
    patch(
        &app,
        &token,
        &salary_id,
        &json!({"category": "INCOME_OTHER_INCOME"}),
    )
    .await
    .expect(200);
    upload_with(
        &app,
        Some("statement.xml"),
        CAMT_STATEMENT.as_bytes(),
        &[("account_id", id(&camt_account))],
        &token,
    )
    .await
    .expect(201);
    let again = app
        .get(&format!("/api/v1/transactions/{salary_id}"), Some(&token))
        .await
        .expect(200);
    assert_eq!(again["category"], "INCOME_OTHER_INCOME", "{again}");
    assert_eq!(again["category_source"], "user", "{again}");

    // A transfer between two of the user's accounts: each leg gets its transfer category,
    // unless the user chose one.
    let day = "2026-04-10";
    upload_with(
        &app,
        Some("out.csv"),
        format!("Date,Description,Amount\n{day},Online transfer to savings,-500.00\n").as_bytes(),
        &[("account_id", checking_id.as_str())],
        &token,
    )
    .await
    .expect(201);
    let savings = upload_with(
        &app,
        Some("savings.csv"),
        format!("Date,Description,Amount\n{day},Transfer from checking,500.00\n").as_bytes(),
        &[("account_name", "Savings")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(savings["transfers"], 1, "{savings}");
    let out_leg = by_amount(&rows(&app, &token, &checking_id).await, "-500.00").clone();
    assert_eq!(
        out_leg["category"], "TRANSFER_OUT_ACCOUNT_TRANSFER",
        "{out_leg}"
    );
    assert_eq!(out_leg["category_source"], "transfer", "{out_leg}");
    let in_leg = app
        .get(
            &format!(
                "/api/v1/transactions/{}",
                out_leg["transfer_transaction_id"].as_str().expect("paired")
            ),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(
        in_leg["category"], "TRANSFER_IN_ACCOUNT_TRANSFER",
        "{in_leg}"
    );
    assert_eq!(in_leg["category_source"], "transfer", "{in_leg}");
}

conformance!(setup = simplefin;
    categories_are_listed_created_and_deleted,
    edits_survive_reimport,
    edits_survive_resync,
    new_rows_are_enriched_by_codes_transfers_and_descriptions,
);
