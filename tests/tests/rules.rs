//! Transaction rules through the three fronts and both stores: creating, listing (priority
//! order), reading, changing and deleting them (another user's are 404); the 422s of
//! conditions and actions that make no sense; rules running on new and changed rows at a CSV
//! import and at a SimpleFIN sync, in priority order with stop_processing, never over a field
//! the user set; the preview (counts, saves nothing) and the application to existing rows;
//! patterns the linear-time engine refuses or runs fast; the heavy-read slots; the export.

use aggregation_sandbox::CHECKING_ID;
use aggregation_tests::imports::{access, accounts, import_rows, rows};
use aggregation_tests::simplefin::bridge;
use aggregation_tests::{Setup, TestApp, TestResponse, conformance, upload_with};
use http::Method;
use serde_json::{Value, json};

fn simplefin() -> Setup {
    aggregation_tests::simplefin::setup()
}

conformance!(setup = simplefin;
    rules_are_created_listed_changed_and_deleted,
    nonsense_rules_are_422_naming_the_field,
    rules_run_at_import_in_priority_order,
    rules_leave_fields_the_user_set,
    rules_run_at_a_simplefin_sync,
    a_duplicate_written_by_a_reject_gets_the_rules,
    preview_saves_nothing_and_apply_counts,
    patterns_are_bounded_and_linear,
    preview_takes_a_heavy_read_slot,
    export_holds_the_rules,
);

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

async fn create(app: &TestApp, token: &str, body: &Value) -> TestResponse {
    app.post("/api/v1/rules", body, Some(token)).await
}

async fn patch(app: &TestApp, token: &str, path: &str, body: &Value) -> TestResponse {
    app.call(Method::PATCH, path, Some(body), Some(token)).await
}

fn coffee_rule(priority: i64) -> Value {
    json!({
        "name": "Coffee",
        "conditions": [{"field": "description", "op": "contains", "value": "coffee"}],
        "actions": [{"set_category": "FOOD_AND_DRINK_COFFEE"}],
        "priority": priority,
    })
}

fn by_amount<'a>(rows: &'a [Value], amount: &str) -> &'a Value {
    rows.iter()
        .find(|row| row["amount"] == amount)
        .unwrap_or_else(|| panic!("a row of {amount} in {rows:?}"))
}

fn names(list: &Value) -> Vec<&str> {
    list["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|rule| rule["name"].as_str().unwrap_or_default())
        .collect()
}

async fn rules_are_created_listed_changed_and_deleted(app: TestApp) {
    let token = access(&app, "rules-crud@example.com").await;
    let created = create(
        &app,
        &token,
        &json!({
            "name": "  Groceries ",
            "conditions": [
                {"field": "description", "op": "starts_with", "value": "corner"},
                {"field": "amount", "op": "between", "value": ["-200", -1]},
            ],
            "actions": [{"set_category": "FOOD_AND_DRINK_GROCERIES"}, {"set_notes": "weekly"}],
            "priority": 5,
            "stop_processing": true,
        }),
    )
    .await
    .expect(201);
    assert!(uuid::Uuid::parse_str(id(&created)).is_ok(), "{created}");
    assert_eq!(created["name"], "Groceries");
    assert_eq!(created["priority"], 5);
    assert_eq!(created["stop_processing"], true);
    assert_eq!(
        created["conditions"][1],
        json!({"field": "amount", "op": "between", "value": ["-200", -1]})
    );
    assert_eq!(
        created["actions"],
        json!([{"set_category": "FOOD_AND_DRINK_GROCERIES"}, {"set_notes": "weekly"}])
    );
    let first = create(&app, &token, &coffee_rule(-1)).await.expect(201);
    // Defaults: priority 0, no stop.
    let plain = create(
        &app,
        &token,
        &json!({
            "name": "Notes",
            "conditions": [{"field": "currency", "op": "equals", "value": "usd"}],
            "actions": [{"set_notes": "dollars"}],
        }),
    )
    .await
    .expect(201);
    assert_eq!(plain["priority"], 0);
    assert_eq!(plain["stop_processing"], false);

    let list = app.get("/api/v1/rules", Some(&token)).await.expect(200);
    assert_eq!(names(&list), ["Coffee", "Notes", "Groceries"]);
    let path = format!("/api/v1/rules/{}", id(&created));
    assert_eq!(app.get(&path, Some(&token)).await.expect(200), created);

    let changed = patch(
        &app,
        &token,
        &path,
        &json!({"priority": -5, "name": "Food"}),
    )
    .await
    .expect(200);
    assert_eq!(changed["name"], "Food");
    assert_eq!(changed["priority"], -5);
    assert_eq!(changed["conditions"], created["conditions"]);
    assert_eq!(changed["created_at"], created["created_at"]);
    let list = app.get("/api/v1/rules", Some(&token)).await.expect(200);
    assert_eq!(names(&list), ["Food", "Coffee", "Notes"]);

    // Another user's rule is nobody else's: 404 everywhere.
    let other = access(&app, "rules-crud-other@example.com").await;
    app.get(&path, Some(&other))
        .await
        .expect_problem(404, "not_found");
    patch(&app, &other, &path, &json!({"name": "Mine"}))
        .await
        .expect_problem(404, "not_found");
    app.delete(&path, None, Some(&other))
        .await
        .expect_problem(404, "not_found");
    app.post(&format!("{path}/apply"), &json!({}), Some(&other))
        .await
        .expect_problem(404, "not_found");
    let theirs = app.get("/api/v1/rules", Some(&other)).await.expect(200);
    assert_eq!(theirs["rules"], json!([]));
    app.get("/api/v1/rules/nope", Some(&token))
        .await
        .expect_problem(422, "validation_failed");

    app.delete(&path, None, Some(&token)).await.expect(204);
    app.get(&path, Some(&token))
        .await
        .expect_problem(404, "not_found");
    app.delete(&format!("/api/v1/rules/{}", id(&first)), None, Some(&token))
        .await
        .expect(204);
    let list = app.get("/api/v1/rules", Some(&token)).await.expect(200);
    assert_eq!(names(&list), ["Notes"]);
}

async fn nonsense_rules_are_422_naming_the_field(app: TestApp) {
    let token = access(&app, "rules-422@example.com").await;
    let rule = |conditions: Value, actions: Value| json!({"name": "R", "conditions": conditions, "actions": actions});
    let notes = json!([{"set_notes": "n"}]);
    let text = |op: &str, value: Value| json!([{"field": "description", "op": op, "value": value}]);
    let other = access(&app, "rules-422-other@example.com").await;
    let theirs = app
        .post(
            "/api/v1/categories",
            &json!({"name": "Theirs", "primary": "FOOD_AND_DRINK"}),
            Some(&other),
        )
        .await
        .expect(201);
    for (body, field, code) in [
        (
            rule(
                json!([{"field": "payee", "op": "equals", "value": "x"}]),
                notes.clone(),
            ),
            "conditions[0].field",
            "unknown_field",
        ),
        (
            rule(
                json!([{"field": "amount", "op": "contains", "value": "1"}]),
                notes.clone(),
            ),
            "conditions[0].op",
            "invalid_op",
        ),
        (
            rule(text("gt", json!("1")), notes.clone()),
            "conditions[0].op",
            "invalid_op",
        ),
        (
            rule(
                json!([{"field": "account_id", "op": "contains", "value": "x"}]),
                notes.clone(),
            ),
            "conditions[0].op",
            "invalid_op",
        ),
        (
            rule(
                json!([
                    {"field": "description", "op": "contains", "value": "x"},
                    {"field": "amount", "op": "between", "value": [10, 1]},
                ]),
                notes.clone(),
            ),
            "conditions[1].value",
            "invalid_range",
        ),
        (
            rule(
                json!([{"field": "amount", "op": "gt", "value": "ten"}]),
                notes.clone(),
            ),
            "conditions[0].value",
            "invalid_decimal",
        ),
        (
            rule(text("regex", json!("(unclosed")), notes.clone()),
            "conditions[0].value",
            "invalid_regex",
        ),
        (
            rule(text("regex", json!("x".repeat(501))), notes.clone()),
            "conditions[0].value",
            "too_long",
        ),
        (
            rule(text("contains", json!(3)), notes.clone()),
            "conditions[0].value",
            "invalid_type",
        ),
        (rule(json!([]), notes.clone()), "conditions", "too_short"),
        (
            rule(
                json!(
                    (0..21)
                        .map(|_| json!({"field": "description", "op": "contains", "value": "x"}))
                        .collect::<Vec<_>>()
                ),
                notes.clone(),
            ),
            "conditions",
            "too_many",
        ),
        (
            rule(text("contains", json!("x")), json!([{"set_colour": "red"}])),
            "actions[0].set_colour",
            "invalid_action",
        ),
        (
            rule(
                text("contains", json!("x")),
                json!([{"set_notes": "a"}, {"set_notes": "b"}]),
            ),
            "actions[1].set_notes",
            "duplicate_action",
        ),
        (
            rule(
                text("contains", json!("x")),
                json!([{"set_category": "FOOD_AND_DRINK"}]),
            ),
            "actions[0].set_category",
            "unknown_category",
        ),
        (
            rule(
                text("contains", json!("x")),
                json!([{"set_category": theirs["id"]}]),
            ),
            "actions[0].set_category",
            "unknown_category",
        ),
        (
            json!({"name": " ", "conditions": text("contains", json!("x")), "actions": notes}),
            "name",
            "blank",
        ),
        (
            json!({"name": "R", "actions": notes}),
            "conditions",
            "required",
        ),
        (
            json!({"name": "R", "conditions": text("contains", json!("x")), "actions": notes, "priority": 1.5}),
            "priority",
            "out_of_range",
        ),
    ] {
        let problem = create(&app, &token, &body)
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
        assert_eq!(problem["errors"][0]["code"], code, "{body}: {problem}");
        // The preview checks the same.
        let problem = app
            .post("/api/v1/rules/preview", &body, Some(&token))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    // The caller's own category is fine.
    let mine = app
        .post(
            "/api/v1/categories",
            &json!({"name": "Mine", "primary": "FOOD_AND_DRINK"}),
            Some(&token),
        )
        .await
        .expect(201);
    let created = create(
        &app,
        &token,
        &rule(
            text("contains", json!("x")),
            json!([{"set_category": mine["id"]}]),
        ),
    )
    .await
    .expect(201);
    // A change is checked the same way, and a null is not a value.
    let path = format!("/api/v1/rules/{}", id(&created));
    let problem = patch(
        &app,
        &token,
        &path,
        &json!({"actions": [{"set_category": "NOPE"}]}),
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "actions[0].set_category");
    let problem = patch(&app, &token, &path, &json!({"conditions": null}))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "conditions");
    assert_eq!(app.get(&path, Some(&token)).await.expect(200), created);
}

async fn rules_run_at_import_in_priority_order(app: TestApp) {
    let token = access(&app, "rules-import@example.com").await;
    // Runs first: coffee, and stops there for the coffee rows.
    create(
        &app,
        &token,
        &json!({
            "name": "Coffee",
            "conditions": [{"field": "description", "op": "regex", "value": r"coffee|\bcafe\b"}],
            "actions": [{"set_category": "FOOD_AND_DRINK_COFFEE"}, {"set_merchant_name": "Coffee shop"}],
            "priority": 1,
            "stop_processing": true,
        }),
    )
    .await
    .expect(201);
    // Runs second: every card payment under 100 gets notes (not the coffee: stopped).
    create(
        &app,
        &token,
        &json!({
            "name": "Small",
            "conditions": [{"field": "amount", "op": "gt", "value": -100}, {"field": "amount", "op": "lt", "value": 0}],
            "actions": [{"set_notes": "small"}, {"set_category": "GENERAL_MERCHANDISE_OTHER_GENERAL_MERCHANDISE"}],
            "priority": 2,
        }),
    )
    .await
    .expect(201);
    // Runs last, and sees what the earlier rules set.
    create(
        &app,
        &token,
        &json!({
            "name": "Groceries",
            "conditions": [
                {"field": "category", "op": "equals", "value": "general_merchandise_other_general_merchandise"},
                {"field": "merchant_name", "op": "contains", "value": "grocery"},
            ],
            "actions": [{"set_category": "FOOD_AND_DRINK_GROCERIES"}],
            "priority": 3,
        }),
    )
    .await
    .expect(201);
    let account_id = import_rows(
        &app,
        &token,
        "Checking",
        "USD",
        &[
            (
                "2026-03-02",
                "SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA",
                "-4.75",
            ),
            ("2026-03-03", "CORNER GROCERY 0231 SPRINGFIELD", "-84.12"),
            ("2026-03-04", "Fuel station 12", "-45.00"),
            ("2026-03-05", "Rent", "-1200.00"),
        ],
    )
    .await;
    let rows = rows(&app, &token, &account_id).await;
    let coffee = by_amount(&rows, "-4.75");
    assert_eq!(coffee["category"], "FOOD_AND_DRINK_COFFEE", "{coffee}");
    assert_eq!(coffee["category_source"], "rule", "{coffee}");
    assert_eq!(coffee["merchant_name"], "Coffee shop", "{coffee}");
    assert_eq!(coffee["notes"], Value::Null, "stopped: {coffee}");
    let grocery = by_amount(&rows, "-84.12");
    assert_eq!(grocery["category"], "FOOD_AND_DRINK_GROCERIES", "{grocery}");
    assert_eq!(grocery["notes"], "small", "{grocery}");
    let fuel = by_amount(&rows, "-45.00");
    assert_eq!(
        fuel["category"], "GENERAL_MERCHANDISE_OTHER_GENERAL_MERCHANDISE",
        "{fuel}"
    );
    assert_eq!(fuel["category_source"], "rule", "{fuel}");
    let rent = by_amount(&rows, "-1200.00");
    assert_eq!(rent["category"], Value::Null, "{rent}");
    assert_eq!(rent["notes"], Value::Null, "{rent}");
}

async fn rules_leave_fields_the_user_set(app: TestApp) {
    let token = access(&app, "rules-user@example.com").await;
    let statement = |description: &str| {
        format!("Date,Description,Amount,ID\n2026-03-02,{description},-4.75,bank-1\n")
    };
    upload_with(
        &app,
        Some("statement.csv"),
        statement("Coffee").as_bytes(),
        &[("account_name", "Checking")],
        &token,
    )
    .await
    .expect(201);
    let account_id = id(&accounts(&app, &token).await[0]).to_owned();
    let row = rows(&app, &token, &account_id).await[0].clone();
    let row_id = id(&row).to_owned();
    patch(
        &app,
        &token,
        &format!("/api/v1/transactions/{row_id}"),
        &json!({"category": "FOOD_AND_DRINK_RESTAURANT"}),
    )
    .await
    .expect(200);
    let rule = create(
        &app,
        &token,
        &json!({
            "name": "Coffee",
            "conditions": [{"field": "description", "op": "contains", "value": "coffee"}],
            "actions": [{"set_category": "FOOD_AND_DRINK_COFFEE"}, {"set_notes": "by rule"}],
        }),
    )
    .await
    .expect(201);
    // The bank changes the row (same id, new text): the rule runs on the changed row but
    // leaves the category the user chose.
    let again = upload_with(
        &app,
        Some("statement.csv"),
        statement("Coffee beans").as_bytes(),
        &[("account_id", account_id.as_str())],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(again["transactions_updated"], 1, "{again}");
    let read = app
        .get(&format!("/api/v1/transactions/{row_id}"), Some(&token))
        .await
        .expect(200);
    assert_eq!(read["description"], "Coffee beans");
    assert_eq!(read["category"], "FOOD_AND_DRINK_RESTAURANT", "{read}");
    assert_eq!(read["category_source"], "user", "{read}");
    assert_eq!(read["notes"], "by rule", "{read}");
    // Applying it changes nothing more.
    let applied = app
        .post(
            &format!("/api/v1/rules/{}/apply", id(&rule)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(applied["changed"], 0, "{applied}");
}

async fn rules_run_at_a_simplefin_sync(app: TestApp) {
    let token = access(&app, "rules-sync@example.com").await;
    create(
        &app,
        &token,
        &json!({
            "name": "Rent",
            "conditions": [
                {"field": "description", "op": "starts_with", "value": "rent"},
                {"field": "currency", "op": "equals", "value": "usd"},
            ],
            "actions": [{"set_category": "RENT_AND_UTILITIES_RENT"}, {"set_merchant_name": "Maple Apartments"}],
        }),
    )
    .await
    .expect(201);
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
    let today = chrono::Utc::now().date_naive();
    app.post(
        "/api/v1/transactions/syncs",
        &json!({
            "connection_id": id(&connection),
            "start_date": (today - chrono::TimeDelta::days(60)).to_string(),
            "end_date": today.to_string(),
        }),
        Some(&token),
    )
    .await
    .expect(201);
    let checking = accounts(&app, &token)
        .await
        .into_iter()
        .find(|account| account["provider_account_id"] == CHECKING_ID)
        .expect("checking");
    let synced = rows(&app, &token, id(&checking)).await;
    let rent = by_amount(&synced, "-1200.00");
    assert_eq!(rent["category"], "RENT_AND_UTILITIES_RENT", "{rent}");
    assert_eq!(rent["category_source"], "rule", "{rent}");
    assert_eq!(rent["merchant_name"], "Maple Apartments", "{rent}");
    let groceries = by_amount(&synced, "-84.12");
    assert_ne!(groceries["category_source"], "rule", "{groceries}");
}

async fn a_duplicate_written_by_a_reject_gets_the_rules(app: TestApp) {
    let token = access(&app, "rules-reject@example.com").await;
    let account_id = import_rows(
        &app,
        &token,
        "Checking",
        "USD",
        &[("2026-03-05", "Lunch Spot", "-12.00")],
    )
    .await;
    // Created after the CSV row was written (and never applied to it).
    create(
        &app,
        &token,
        &json!({
            "name": "Lunch",
            "conditions": [{"field": "description", "op": "contains", "value": "lunch"}],
            "actions": [{"set_notes": "lunch rule"}],
        }),
    )
    .await
    .expect(201);
    // Another format's row of the same lunch is held back as its duplicate.
    let qif = "!Type:Bank\nD3/6/2026\nT-12.00\nPLUNCH SPOT\n^\n";
    let imported = upload_with(
        &app,
        Some("lunch.qif"),
        qif.as_bytes(),
        &[("account_id", account_id.as_str())],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(imported["matched"], 1, "{imported}");
    let list = app
        .get("/api/v1/transaction-matches?status=automatic", Some(&token))
        .await
        .expect(200);
    let match_id = id(&list["matches"][0]).to_owned();
    // Rejected, the held-back row is written as a new row: the rules run on it.
    app.post(
        &format!("/api/v1/transaction-matches/{match_id}/reject"),
        &json!({}),
        Some(&token),
    )
    .await
    .expect(200);
    let rows = rows(&app, &token, &account_id).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let written = rows
        .iter()
        .find(|row| row["description"] == "LUNCH SPOT")
        .expect("the written duplicate");
    assert_eq!(written["notes"], "lunch rule", "{written}");
    let first = rows
        .iter()
        .find(|row| row["description"] == "Lunch Spot")
        .expect("the CSV row");
    assert_eq!(first["notes"], Value::Null, "{first}");
}

async fn preview_saves_nothing_and_apply_counts(app: TestApp) {
    let token = access(&app, "rules-preview@example.com").await;
    let rows_in: Vec<(String, String, String)> = (0..60)
        .map(|n| {
            (
                format!("2026-03-{:02}", n % 28 + 1),
                format!("Blue Bottle Coffee {n}"),
                format!("-{}.50", n + 1),
            )
        })
        .chain([(
            "2026-03-01".to_owned(),
            "Hardware store".to_owned(),
            "-9.99".to_owned(),
        )])
        .collect();
    let borrowed: Vec<(&str, &str, &str)> = rows_in
        .iter()
        .map(|(date, text, amount)| (date.as_str(), text.as_str(), amount.as_str()))
        .collect();
    let account_id = import_rows(&app, &token, "Checking", "USD", &borrowed).await;
    let body = coffee_rule(0);
    let preview = app
        .post("/api/v1/rules/preview", &body, Some(&token))
        .await
        .expect(200);
    assert_eq!(preview["count"], 60, "{preview}");
    let sample = preview["transactions"].as_array().expect("transactions");
    assert_eq!(sample.len(), 50);
    let first = &sample[0];
    assert_eq!(first["before"]["category"], Value::Null, "{first}");
    assert_eq!(
        first["after"]["category"], "FOOD_AND_DRINK_COFFEE",
        "{first}"
    );
    assert_eq!(
        first["before"]["merchant_name"],
        first["after"]["merchant_name"]
    );
    // Nothing was saved: no rule, no row changed.
    let list = app.get("/api/v1/rules", Some(&token)).await.expect(200);
    assert_eq!(list["rules"], json!([]));
    let read = app
        .get(&format!("/api/v1/transactions/{}", id(first)), Some(&token))
        .await
        .expect(200);
    assert_eq!(read["category"], Value::Null, "{read}");

    // A row the user categorised is not counted.
    patch(
        &app,
        &token,
        &format!("/api/v1/transactions/{}", id(first)),
        &json!({"category": "FOOD_AND_DRINK_RESTAURANT"}),
    )
    .await
    .expect(200);
    let rule = create(&app, &token, &body).await.expect(201);
    let apply = format!("/api/v1/rules/{}/apply", id(&rule));
    let applied = app.post(&apply, &json!({}), Some(&token)).await.expect(200);
    assert_eq!(applied["changed"], 59, "{applied}");
    let after = rows(&app, &token, &account_id).await;
    let coffees = after
        .iter()
        .filter(|row| row["category"] == "FOOD_AND_DRINK_COFFEE")
        .count();
    assert_eq!(coffees, 59);
    assert!(
        after
            .iter()
            .filter(|row| row["category"] == "FOOD_AND_DRINK_COFFEE")
            .all(|row| row["category_source"] == "rule")
    );
    assert_eq!(by_amount(&after, "-9.99")["category"], Value::Null);
    let read = app
        .get(&format!("/api/v1/transactions/{}", id(first)), Some(&token))
        .await
        .expect(200);
    assert_eq!(read["category"], "FOOD_AND_DRINK_RESTAURANT", "{read}");
    // Applied again, it changes nothing; the preview now counts nothing either.
    let again = app.post(&apply, &json!({}), Some(&token)).await.expect(200);
    assert_eq!(again["changed"], 0, "{again}");
    let preview = app
        .post("/api/v1/rules/preview", &body, Some(&token))
        .await
        .expect(200);
    assert_eq!(preview["count"], 0, "{preview}");
    assert_eq!(preview["transactions"], json!([]));
    // An account condition narrows it to that account.
    let scoped = app
        .post(
            "/api/v1/rules/preview",
            &json!({
                "name": "Scoped",
                "conditions": [{"field": "account_id", "op": "equals", "value": account_id}],
                "actions": [{"set_notes": "checking"}],
            }),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(scoped["count"], 61, "{scoped}");
    let elsewhere = app
        .post(
            "/api/v1/rules/preview",
            &json!({
                "name": "Scoped",
                "conditions": [{"field": "account_id", "op": "equals", "value": uuid::Uuid::now_v7()}],
                "actions": [{"set_notes": "checking"}],
            }),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(elsewhere["count"], 0, "{elsewhere}");
}

async fn patterns_are_bounded_and_linear(app: TestApp) {
    let token = access(&app, "rules-regex@example.com").await;
    // Short to write, too big once compiled (Unicode word classes, repeated).
    let problem = create(
        &app,
        &token,
        &json!({
            "name": "Big",
            "conditions": [{"field": "description", "op": "regex", "value": r"\w{500}"}],
            "actions": [{"set_notes": "big"}],
        }),
    )
    .await
    .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "conditions[0].value");
    assert_eq!(problem["errors"][0]["code"], "regex_too_big");
    // Nested repetition that backtracking engines take exponential time on.
    let long = format!("{}!", "a".repeat(20_000));
    import_rows(
        &app,
        &token,
        "Checking",
        "USD",
        &[
            ("2026-03-02", long.as_str(), "-1.00"),
            ("2026-03-03", "aaaa", "-2.00"),
        ],
    )
    .await;
    let nested = json!({
        "name": "Nested",
        "conditions": [{"field": "description", "op": "regex", "value": "(a+)+$"}],
        "actions": [{"set_notes": "only a"}],
    });
    let preview = app
        .post("/api/v1/rules/preview", &nested, Some(&token))
        .await
        .expect(200);
    assert_eq!(preview["count"], 1, "{preview}");
    assert_eq!(preview["transactions"][0]["after"]["notes"], "only a");
    create(&app, &token, &nested).await.expect(201);
    // At import too: the long row is written and the rule answered.
    let account = import_rows(
        &app,
        &token,
        "Second",
        "USD",
        &[
            ("2026-03-04", long.as_str(), "-3.00"),
            ("2026-03-05", "aaa", "-4.00"),
        ],
    )
    .await;
    let second = rows(&app, &token, &account).await;
    assert_eq!(by_amount(&second, "-3.00")["notes"], Value::Null);
    assert_eq!(by_amount(&second, "-4.00")["notes"], "only a");
}

async fn preview_takes_a_heavy_read_slot(app: TestApp) {
    // Preview and apply take one of the caller's heavy-read slots (as the search and the
    // export do), so the document names their 429.
    let document = app.get("/api/v1/openapi.json", None).await.expect(200);
    let responses = |path: &str, method: &str| document["paths"][path][method]["responses"].clone();
    for (path, method) in [
        ("/api/v1/rules/preview", "post"),
        ("/api/v1/rules/{id}/apply", "post"),
        ("/api/v1/transactions", "get"),
    ] {
        assert!(
            responses(path, method).get("429").is_some(),
            "{method} {path}: {}",
            responses(path, method)
        );
    }
    for (path, method) in [("/api/v1/rules", "post"), ("/api/v1/rules/{id}", "get")] {
        assert!(responses(path, method).is_object(), "{method} {path}");
    }
    // Within the caller's slots, previews one after the other all answer.
    let token = access(&app, "rules-slots@example.com").await;
    for _ in 0..3 {
        app.post("/api/v1/rules/preview", &coffee_rule(0), Some(&token))
            .await
            .expect(200);
    }
}

async fn export_holds_the_rules(app: TestApp) {
    let token = access(&app, "rules-export@example.com").await;
    create(&app, &token, &coffee_rule(3)).await.expect(201);
    create(&app, &token, &coffee_rule(1)).await.expect(201);
    let list = app.get("/api/v1/rules", Some(&token)).await.expect(200);
    let export = app
        .get("/api/v1/users/me/export", Some(&token))
        .await
        .expect(200);
    assert_eq!(export["rules"], list["rules"]);
    assert_eq!(export["rules"].as_array().map(Vec::len), Some(2));
}
