//! Conformance: one user's work never hurts another's (decisions.md): the accounts an import
//! may name and a user may hold, the cost of a net worth history, and how many imports of one
//! user run at once; on every front and store.

use aggregation_tests::imports::{access, accounts, count};
use aggregation_tests::{
    BANK_QFX, Setup, TestApp, conformance, hold_upload, sandbox_setup, test_config, upload,
};
use serde_json::json;

conformance!(
    an_import_naming_more_than_1000_accounts_is_422_and_writes_nothing,
    a_net_worth_history_past_the_cost_budget_is_422,
);

/// A small per-user cap, so the cases stay fast.
const CAP: u64 = 3;

fn small_cap() -> Setup {
    Setup {
        config: test_config().with_max_accounts_per_user(CAP),
        ..Setup::default()
    }
}

fn small_cap_with_sandbox() -> Setup {
    let setup = sandbox_setup();
    Setup {
        config: setup.config.clone().with_max_accounts_per_user(CAP),
        ..setup
    }
}

mod per_user_cap {
    use super::*;

    conformance!(setup = small_cap;
        an_import_past_the_users_account_cap_is_422_and_writes_nothing,
        three_concurrent_imports_of_one_user_are_one_too_many,
    );
}

mod per_user_cap_and_provider {
    use super::*;

    conformance!(setup = small_cap_with_sandbox;
        a_provider_sync_past_the_users_account_cap_is_422_and_writes_nothing,
    );
}

/// The bank statement with `accounts` statements, each of its own account (`ACCTID`
/// `prefix-N`).
fn statement_of_accounts(prefix: &str, accounts: usize) -> String {
    let start = BANK_QFX.find("<STMTTRNRS>").expect("a statement");
    let end = BANK_QFX.find("</STMTTRNRS>").expect("its end") + "</STMTTRNRS>\n".len();
    let statement = &BANK_QFX[start..end];
    let statements: String = (0..accounts)
        .map(|n| statement.replace("<ACCTID>123456789", &format!("<ACCTID>{prefix}-{n}")))
        .collect();
    format!("{}{statements}{}", &BANK_QFX[..start], &BANK_QFX[end..])
}

async fn an_import_naming_more_than_1000_accounts_is_422_and_writes_nothing(app: TestApp) {
    let token = access(&app, "many-accounts@example.com").await;
    let refused = upload(&app, "many.qfx", &statement_of_accounts("a", 1_001), &token).await;
    let body = refused.expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "file", "{body}");
    assert_eq!(body["errors"][0]["code"], "too_many_accounts", "{body}");
    assert!(accounts(&app, &token).await.is_empty(), "nothing written");
    // A dry run is refused the same way.
    let preview = aggregation_tests::upload_with(
        &app,
        Some("many.qfx"),
        statement_of_accounts("a", 1_001).as_bytes(),
        &[("dry_run", "true")],
        &token,
    )
    .await;
    preview.expect_problem(422, "validation_failed");
    // A thousand is within the cap.
    let body = upload(&app, "many.qfx", &statement_of_accounts("a", 1_000), &token)
        .await
        .expect(201);
    assert_eq!(count(&body, "accounts_created"), 1_000, "{body}");
}

async fn an_import_past_the_users_account_cap_is_422_and_writes_nothing(app: TestApp) {
    let token = access(&app, "capped@example.com").await;
    let body = upload(&app, "two.qfx", &statement_of_accounts("first", 2), &token)
        .await
        .expect(201);
    assert_eq!(count(&body, "accounts_created"), 2, "{body}");
    // Two more would make four: refused, and neither the accounts nor their rows are written.
    let refused = upload(
        &app,
        "more.qfx",
        &statement_of_accounts("second", 2),
        &token,
    )
    .await;
    let body = refused.expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "file", "{body}");
    assert_eq!(body["errors"][0]["code"], "account_limit", "{body}");
    let held = accounts(&app, &token).await;
    assert_eq!(held.len(), 2, "nothing written: {held:?}");
    // Importing what the user holds already creates nothing and passes; one more fits.
    let again = upload(&app, "two.qfx", &statement_of_accounts("first", 2), &token)
        .await
        .expect(201);
    assert_eq!(count(&again, "transactions_skipped"), 6, "{again}");
    upload(&app, "one.qfx", &statement_of_accounts("third", 1), &token)
        .await
        .expect(201);
    // The cap is per user.
    let other = access(&app, "uncapped@example.com").await;
    upload(&app, "two.qfx", &statement_of_accounts("first", 2), &other)
        .await
        .expect(201);
}

async fn a_provider_sync_past_the_users_account_cap_is_422_and_writes_nothing(app: TestApp) {
    let (_, token, _) = app.user("capped-sync@example.com").await;
    upload(&app, "two.qfx", &statement_of_accounts("file", 2), &token)
        .await
        .expect(201);
    let connection = app.connect_sandbox(&token, None).await;
    let connection_id = connection["id"].as_str().expect("id");
    // The sandbox's two accounts would make four.
    let refused = app
        .post(
            "/api/v1/accounts/syncs",
            &json!({"connection_id": connection_id}),
            Some(&token),
        )
        .await;
    refused.expect_problem(422, "validation_failed");
    assert_eq!(accounts(&app, &token).await.len(), 2, "nothing written");
}

async fn three_concurrent_imports_of_one_user_are_one_too_many(app: TestApp) {
    let ada = access(&app, "ada-imports@example.com").await;
    let bob = access(&app, "bob-imports@example.com").await;
    // Two of Ada's uploads are admitted and left reading their bodies.
    let mut held = [
        hold_upload(&app, "held.qfx", BANK_QFX, &ada).await,
        hold_upload(&app, "held.qfx", BANK_QFX, &ada).await,
    ];
    // A third is refused once both hold their slots. Until then the third may run (201), or
    // take a slot first so that a held one is refused: that one is started again.
    let pause = std::time::Duration::from_millis(20);
    let mut refused = None;
    for _ in 0..200 {
        // Time for the holders to be admitted before the third is sent.
        tokio::time::sleep(pause).await;
        let mut restarted = false;
        for slot in &mut held {
            if slot.answered() {
                *slot = hold_upload(&app, "held.qfx", BANK_QFX, &ada).await;
                restarted = true;
            }
        }
        if restarted {
            continue;
        }
        let answer = upload(&app, "third.qfx", BANK_QFX, &ada).await;
        if answer.status.as_u16() == 429 {
            refused = Some(answer);
            break;
        }
        assert_eq!(answer.status.as_u16(), 201, "{:?}", answer.json());
    }
    let refused = refused.expect("the third import is refused while two run");
    let body = refused.expect_problem(429, "rate_limit_exceeded");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(body["retry_after"], 1, "{body}");
    // Another user's import at the same time goes through.
    upload(&app, "bob.qfx", BANK_QFX, &bob).await.expect(201);
    // Once the held uploads end, Ada imports again.
    drop(held);
    let mut answered = 0;
    for _ in 0..200 {
        let answer = upload(&app, "after.qfx", BANK_QFX, &ada).await;
        answered = answer.status.as_u16();
        if answered == 201 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(answered, 201, "a slot frees when its import ends");
}

async fn a_net_worth_history_past_the_cost_budget_is_422(app: TestApp) {
    let token = access(&app, "worth-budget@example.com").await;
    // 300 accounts × 1,000 daily points is past the budget of 250,000 account points.
    upload(&app, "many.qfx", &statement_of_accounts("w", 300), &token)
        .await
        .expect(201);
    let refused = app
        .get(
            "/api/v1/net-worth?from=2022-01-01&to=2024-09-26&interval=day",
            Some(&token),
        )
        .await;
    let body = refused.expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "query.from", "{body}");
    assert_eq!(body["errors"][0]["code"], "too_costly", "{body}");
    // A coarser interval over the same range is within it.
    let body = app
        .get(
            "/api/v1/net-worth?from=2022-01-01&to=2024-09-26&interval=month",
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(
        body["currencies"][0]["history"].as_array().map(Vec::len),
        Some(33)
    );
}
