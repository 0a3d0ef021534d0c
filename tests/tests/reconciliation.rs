//! Reconciliation through the three fronts and both stores: one row per real transaction
//! whatever reported it. A file overlapping a SimpleFIN sync (the fake bridge) is not stored
//! twice, a booked row takes over its pending row, transfers between the user's accounts are
//! paired both ways, ambiguous duplicates are only suggested (two identical coffees stay two),
//! every decision can be reversed, and nobody sees or decides another user's matches. Dry
//! runs count what they would match; every match and decision is an event in the audit
//! trail; one user's rows never match another's; and the SimpleFIN sandbox's reconciliation
//! scenario shows a file then a sync, a tip and a transfer offline.

use aggregation_sandbox::{CHECKING_ID, RECONCILIATION_CHECKING_ID, RECONCILIATION_SAVINGS_ID};
use aggregation_tests::imports::{access, rows};
use aggregation_tests::simplefin::{Bridge, bridge};
use aggregation_tests::upload_with;
use aggregation_tests::{Setup, TestApp, conformance};
use serde_json::{Value, json};

fn simplefin() -> Setup {
    let mut setup = aggregation_tests::simplefin::setup();
    setup.config = setup.config.with_admin_emails(vec![ADMIN.to_owned()]);
    setup
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

/// A connected SimpleFIN connection after its accounts sync, and the checking account.
async fn synced(app: &TestApp, token: &str) -> (Bridge, Value, Value) {
    let bridge = bridge().await;
    let connection = app
        .post(
            "/api/v1/providers",
            &json!({"provider_slug": "simplefin", "alias": "Bank", "setup_token": bridge.sandbox.setup_token()}),
            Some(token),
        )
        .await
        .expect(201);
    app.post(
        "/api/v1/accounts/syncs",
        &json!({"connection_id": id(&connection)}),
        Some(token),
    )
    .await
    .expect(201);
    let accounts = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    let checking = accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|account| account["provider_account_id"] == CHECKING_ID)
        .cloned()
        .expect("checking");
    (bridge, connection, checking)
}

/// A transactions sync of the last 60 days (the first, unforced, is served by the accounts
/// sync's answer; a forced one asks the bridge afresh).
async fn sync_transactions(app: &TestApp, token: &str, connection: &Value, force: bool) -> Value {
    let today = chrono::Utc::now().date_naive();
    app.post(
        "/api/v1/transactions/syncs",
        &json!({
            "connection_id": id(connection),
            "start_date": (today - chrono::TimeDelta::days(60)).to_string(),
            "end_date": today.to_string(),
            "force": force,
        }),
        Some(token),
    )
    .await
    .expect(201)
}

/// The date `days` days ago (UTC), as the bridge dates its rows.
fn days_ago(days: i64) -> String {
    (chrono::Utc::now().date_naive() - chrono::TimeDelta::days(days)).to_string()
}

async fn matches(app: &TestApp, token: &str, query: &str) -> Vec<Value> {
    let list = app
        .get(&format!("/api/v1/transaction-matches{query}"), Some(token))
        .await
        .expect(200);
    list["matches"].as_array().cloned().expect("matches")
}

fn with_amount<'a>(rows: &'a [Value], amount: &str) -> Vec<&'a Value> {
    rows.iter().filter(|row| row["amount"] == amount).collect()
}

/// A CSV export of the checking account: two rows the bridge has (one with the bank's store
/// number), one it has under a weaker description, one older than anything synced.
fn checking_export() -> String {
    format!(
        "Date,Description,Amount\n{},Payroll ACME Corp,2000.00\n{},CORNER GROCERY 0231 SPRINGFIELD,-84.12\n\
         {},Rent Maple Apts,-1200.00\n{},Library fine,-15.00\n",
        days_ago(20),
        days_ago(3),
        days_ago(15),
        days_ago(40),
    )
}

/// A QIF line's date (`M/D/YYYY`) `days` days ago.
fn qif_date(days: i64) -> String {
    let date = chrono::Utc::now().date_naive() - chrono::TimeDelta::days(days);
    date.format("%-m/%-d/%Y").to_string()
}

async fn a_file_overlapping_a_sync_is_not_stored_twice(app: TestApp) {
    let token = access(&app, "overlap@example.com").await;
    let (_bridge, connection, checking) = synced(&app, &token).await;
    let account_id = id(&checking).to_owned();
    assert!(rows(&app, &token, &account_id).await.is_empty());
    // Last year's export first: nothing to match yet (a dry run says the same, writing nothing).
    let file = checking_export();
    let parts = [("account_id", account_id.as_str())];
    let mut dry_parts = parts.to_vec();
    dry_parts.push(("dry_run", "true"));
    let dry = upload_with(
        &app,
        Some("checking.csv"),
        file.as_bytes(),
        &dry_parts,
        &token,
    )
    .await
    .expect(200);
    assert_eq!(dry["matched"], 0, "{dry}");
    assert_eq!(dry["transfers"], 0, "{dry}");
    assert_eq!(dry["transactions_created"], 4, "{dry}");
    assert!(rows(&app, &token, &account_id).await.is_empty());
    let imported = upload_with(&app, Some("checking.csv"), file.as_bytes(), &parts, &token)
        .await
        .expect(201);
    assert_eq!(imported["transactions_created"], 4, "{imported}");
    assert_eq!(imported["matched"], 0, "{imported}");
    let imported_rows = rows(&app, &token, &account_id).await;
    assert!(imported_rows.iter().all(|row| row["source"] == "import"));

    // Then the sync: payroll and grocery are the file's rows (not written again), the rent is
    // only alike enough to suggest, the pending coffee is new.
    let synced_now = sync_transactions(&app, &token, &connection, false).await;
    assert_eq!(synced_now["matched"], 2, "{synced_now}");
    assert_eq!(synced_now["created"], 5, "{synced_now}");
    let after = rows(&app, &token, &account_id).await;
    assert_eq!(after.len(), 6, "{after:?}");
    assert_eq!(with_amount(&after, "2000.00").len(), 1);
    assert_eq!(with_amount(&after, "-84.12").len(), 1);
    assert_eq!(with_amount(&after, "-1200.00").len(), 2);
    assert_eq!(with_amount(&after, "-4.75")[0]["source"], "sync");
    let automatic = matches(&app, &token, "?status=automatic&kind=duplicate").await;
    assert_eq!(automatic.len(), 2, "{automatic:?}");
    for found in &automatic {
        let ids = found["transaction_ids"].as_array().expect("ids");
        assert_eq!(ids.len(), 1, "the held-back row is not written");
        let kept = after
            .iter()
            .find(|row| row["id"] == ids[0])
            .expect("kept row");
        assert_eq!(kept["source"], "import");
        let confidence = found["confidence"].as_f64().expect("confidence");
        assert!((0.8..=1.0).contains(&confidence), "{found}");
        assert!(found["reason"].as_str().is_some_and(|r| !r.is_empty()));
    }
    let suggested = matches(&app, &token, "?status=suggested").await;
    assert_eq!(suggested.len(), 1, "{suggested:?}");
    assert_eq!(suggested[0]["kind"], "duplicate");
    assert_eq!(
        suggested[0]["transaction_ids"].as_array().map(Vec::len),
        Some(2)
    );

    // Importing the file again, and syncing again (the coffee books meanwhile), adds nothing.
    let again = upload_with(&app, Some("checking.csv"), file.as_bytes(), &parts, &token)
        .await
        .expect(201);
    assert_eq!(again["transactions_created"], 0, "{again}");
    assert_eq!(again["matched"], 0, "{again}");
    let resync = sync_transactions(&app, &token, &connection, true).await;
    assert_eq!(resync["created"], 0, "{resync}");
    assert_eq!(resync["matched"], 0, "{resync}");
    assert_eq!(rows(&app, &token, &account_id).await.len(), 6);

    // The other way round: another format's file naming the synced coffee matches it.
    let qif = format!(
        "!Type:Bank\nD{}\nT-4.75\nPBlue Bottle Coffee\n^\n",
        qif_date(1)
    );
    let late = upload_with(&app, Some("recent.qif"), qif.as_bytes(), &parts, &token)
        .await
        .expect(201);
    assert_eq!(late["matched"], 1, "{late}");
    assert_eq!(late["transactions_created"], 0, "{late}");
    let last = rows(&app, &token, &account_id).await;
    assert_eq!(last.len(), 6, "{last:?}");
    assert_eq!(with_amount(&last, "-4.75").len(), 1);
    assert_eq!(matches(&app, &token, "").await.len(), 4);
}

async fn a_booked_row_takes_over_its_pending_row(app: TestApp) {
    let token = access(&app, "booked@example.com").await;
    let (_bridge, connection, checking) = synced(&app, &token).await;
    let account_id = id(&checking).to_owned();
    sync_transactions(&app, &token, &connection, false).await;
    let before = rows(&app, &token, &account_id).await;
    let pending = with_amount(&before, "-4.75");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["status"], "pending");
    let pending_id = pending[0]["id"].clone();
    // The bridge books it under a new id: the booked row keeps the pending row's id.
    let booked = sync_transactions(&app, &token, &connection, true).await;
    assert_eq!(booked["created"], 0, "{booked}");
    assert_eq!(booked["updated"], 1, "{booked}");
    assert_eq!(booked["removed"], 0, "{booked}");
    let after = rows(&app, &token, &account_id).await;
    assert_eq!(after.len(), before.len());
    let coffee = with_amount(&after, "-4.75");
    assert_eq!(coffee.len(), 1);
    assert_eq!(coffee[0]["id"], pending_id);
    assert_eq!(coffee[0]["status"], "settled");
    assert_eq!(coffee[0]["provider_transaction_id"], "sbx-t-booked-coffee");
    assert_eq!(coffee[0]["pending_transaction_id"], "sbx-t-pending-coffee");
    let read = app
        .get(
            &format!("/api/v1/transactions/{}", pending_id.as_str().expect("id")),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(read["provider_transaction_id"], "sbx-t-booked-coffee");
    let again = sync_transactions(&app, &token, &connection, true).await;
    assert_eq!(again["created"], 0, "{again}");
    assert_eq!(again["updated"], 0, "{again}");
}

async fn transfers_between_own_accounts_are_paired_both_ways(app: TestApp) {
    let token = access(&app, "transfer@example.com").await;
    let checking = "Date,Description,Amount\n2026-03-02,Transfer to savings,-500.00\n\
                    2026-03-02,Groceries,-61.20\n";
    let savings = "Date,Description,Amount\n2026-03-04,Transfer from checking,500.00\n";
    let first = upload_with(
        &app,
        Some("checking.csv"),
        checking.as_bytes(),
        &[("account_name", "Checking")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(first["transfers"], 0);
    let second = upload_with(
        &app,
        Some("savings.csv"),
        savings.as_bytes(),
        &[("account_name", "Savings")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(second["transfers"], 1, "{second}");
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let all: Vec<Value> = accounts["accounts"].as_array().cloned().expect("accounts");
    let named = |name: &str| {
        all.iter()
            .find(|account| account["name"] == name)
            .map(|account| id(account).to_owned())
            .expect("account")
    };
    let out_rows = rows(&app, &token, &named("Checking")).await;
    let in_rows = rows(&app, &token, &named("Savings")).await;
    let out_leg = with_amount(&out_rows, "-500.00")[0].clone();
    let in_leg = with_amount(&in_rows, "500.00")[0].clone();
    assert_eq!(out_leg["transfer_transaction_id"], in_leg["id"]);
    assert_eq!(in_leg["transfer_transaction_id"], out_leg["id"]);
    assert!(with_amount(&out_rows, "-61.20")[0]["transfer_transaction_id"].is_null());
    let transfers = matches(&app, &token, "?kind=transfer").await;
    assert_eq!(transfers.len(), 1);
    assert_eq!(transfers[0]["status"], "automatic");
    let match_id = id(&transfers[0]).to_owned();

    // Rejecting unpairs both legs; accepting pairs them again.
    let rejected = app
        .post(
            &format!("/api/v1/transaction-matches/{match_id}/reject"),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(rejected["status"], "rejected");
    let read = |leg: &Value| {
        let path = format!("/api/v1/transactions/{}", id(leg));
        let app = &app;
        let token = token.clone();
        async move { app.get(&path, Some(&token)).await.expect(200) }
    };
    assert!(read(&out_leg).await["transfer_transaction_id"].is_null());
    assert!(read(&in_leg).await["transfer_transaction_id"].is_null());
    // Importing the same files again proposes nothing new.
    let again = upload_with(
        &app,
        Some("savings.csv"),
        savings.as_bytes(),
        &[("account_id", &named("Savings"))],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(again["transfers"], 0);
    assert_eq!(matches(&app, &token, "?kind=transfer").await.len(), 1);
    let accepted = app
        .post(
            &format!("/api/v1/transaction-matches/{match_id}/accept"),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(accepted["status"], "accepted");
    assert_eq!(
        read(&out_leg).await["transfer_transaction_id"],
        in_leg["id"]
    );
    assert_eq!(
        read(&in_leg).await["transfer_transaction_id"],
        out_leg["id"]
    );
}

async fn ambiguous_duplicates_are_suggested_and_decisions_reverse(app: TestApp) {
    let token = access(&app, "ambiguous@example.com").await;
    let csv = "Date,Description,Amount\n2026-03-05,Coffee House,-3.50\n2026-03-05,Coffee House,-3.50\n\
               2026-03-05,Lunch Spot,-12.00\n";
    upload_with(
        &app,
        Some("joint.csv"),
        csv.as_bytes(),
        &[("account_name", "Joint")],
        &token,
    )
    .await
    .expect(201);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let account_id = id(&accounts["accounts"][0]).to_owned();
    // Two identical coffees on one day stay two.
    assert_eq!(
        with_amount(&rows(&app, &token, &account_id).await, "-3.50").len(),
        2
    );
    let qif =
        "!Type:Bank\nD3/5/2026\nT-3.50\nPCOFFEE HOUSE\n^\nD3/6/2026\nT-12.00\nPLUNCH SPOT\n^\n";
    let imported = upload_with(
        &app,
        Some("joint.qif"),
        qif.as_bytes(),
        &[("account_id", account_id.as_str())],
        &token,
    )
    .await
    .expect(201);
    // The lunch has one candidate; the coffee has two, so it is written and suggested twice.
    assert_eq!(imported["matched"], 1, "{imported}");
    assert_eq!(imported["transactions_created"], 1, "{imported}");
    let listed = rows(&app, &token, &account_id).await;
    assert_eq!(with_amount(&listed, "-3.50").len(), 3);
    assert_eq!(with_amount(&listed, "-12.00").len(), 1);
    let suggested = matches(&app, &token, "?status=suggested&kind=duplicate").await;
    assert_eq!(suggested.len(), 2, "{suggested:?}");

    // Accepting one suggestion deletes the newer row; the other suggestion goes with it.
    let chosen = id(&suggested[0]).to_owned();
    let accepted = app
        .post(
            &format!("/api/v1/transaction-matches/{chosen}/accept"),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(accepted["status"], "accepted");
    assert_eq!(
        accepted["transaction_ids"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        with_amount(&rows(&app, &token, &account_id).await, "-3.50").len(),
        2
    );
    assert!(matches(&app, &token, "?status=suggested").await.is_empty());
    // Rejecting it afterwards writes the row again.
    let rejected = app
        .post(
            &format!("/api/v1/transaction-matches/{chosen}/reject"),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(
        rejected["transaction_ids"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(
        with_amount(&rows(&app, &token, &account_id).await, "-3.50").len(),
        3
    );

    // The lunch's automatic match, rejected, writes the held-back row; accepted, removes it.
    let automatic = matches(&app, &token, "?status=automatic").await;
    assert_eq!(automatic.len(), 1);
    let lunch = id(&automatic[0]).to_owned();
    let decide = |verb: &str| {
        let path = format!("/api/v1/transaction-matches/{lunch}/{verb}");
        let (app, token) = (&app, token.clone());
        async move { app.post(&path, &json!({}), Some(&token)).await.expect(200) }
    };
    assert_eq!(decide("reject").await["status"], "rejected");
    assert_eq!(decide("reject").await["status"], "rejected");
    assert_eq!(
        with_amount(&rows(&app, &token, &account_id).await, "-12.00").len(),
        2
    );
    assert_eq!(decide("accept").await["status"], "accepted");
    assert_eq!(
        with_amount(&rows(&app, &token, &account_id).await, "-12.00").len(),
        1
    );
    // Importing the QIF again creates nothing: its rows are known, written or held back.
    let again = upload_with(
        &app,
        Some("joint.qif"),
        qif.as_bytes(),
        &[("account_id", account_id.as_str())],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(again["transactions_created"], 0, "{again}");
    assert_eq!(again["matched"], 0, "{again}");

    // Paging: one a page, then the next.
    let first = app
        .get("/api/v1/transaction-matches?limit=1", Some(&token))
        .await
        .expect(200);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("next cursor")
        .to_owned();
    let next = app
        .get(
            &format!("/api/v1/transaction-matches?limit=1&cursor={cursor}"),
            Some(&token),
        )
        .await
        .expect(200);
    assert_ne!(first["matches"][0]["id"], next["matches"][0]["id"]);
    app.get("/api/v1/transaction-matches?status=maybe", Some(&token))
        .await
        .expect_problem(422, "validation_failed");
    app.get("/api/v1/transaction-matches?cursor=nope", Some(&token))
        .await
        .expect_problem(422, "validation_failed");

    // Another user sees none of it and decides none of it.
    let other = access(&app, "stranger@example.com").await;
    assert!(matches(&app, &other, "").await.is_empty());
    app.post(
        &format!("/api/v1/transaction-matches/{lunch}/reject"),
        &json!({}),
        Some(&other),
    )
    .await
    .expect_problem(404, "not_found");
    app.get("/api/v1/transaction-matches", None)
        .await
        .expect_problem(401, "unauthorized");
    assert_eq!(
        with_amount(&rows(&app, &token, &account_id).await, "-12.00").len(),
        1
    );
}

/// An administrator, to read the audit trail.
const ADMIN: &str = "reconciliation-admin@example.com";

/// The user's audit events of one type, oldest first.
async fn audited(app: &TestApp, admin: &str, user_id: &str, kind: &str) -> Vec<Value> {
    let page = app
        .get(
            &format!("/api/v1/admin/audit-events?limit=200&user_id={user_id}&type={kind}"),
            Some(admin),
        )
        .await
        .expect(200);
    page["events"].as_array().cloned().expect("events")
}

/// The caller's account of this name.
async fn account_named(app: &TestApp, token: &str, name: &str) -> String {
    let accounts = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|account| account["name"] == name)
        .map(|account| id(account).to_owned())
        .expect("account")
}

async fn dry_runs_count_matches_and_every_decision_is_audited(app: TestApp) {
    let (_, admin, _) = app.user(ADMIN).await;
    let (user_id, token, _) = app.user("audited@example.com").await;
    let checking = "Date,Description,Amount\n2026-03-02,Transfer to savings,-500.00\n\
                    2026-03-03,Corner Grocery,-84.12\n";
    upload_with(
        &app,
        Some("checking.csv"),
        checking.as_bytes(),
        &[("account_name", "Checking")],
        &token,
    )
    .await
    .expect(201);
    // The incoming leg, dated after the outgoing one, in a dry run first: counted, not kept.
    let savings = "Date,Description,Amount\n2026-03-05,Transfer from checking,500.00\n";
    let dry = upload_with(
        &app,
        Some("savings.csv"),
        savings.as_bytes(),
        &[("account_name", "Savings"), ("dry_run", "true")],
        &token,
    )
    .await
    .expect(200);
    assert_eq!(dry["transfers"], 1, "{dry}");
    assert_eq!(dry["matched"], 0, "{dry}");
    assert!(matches(&app, &token, "").await.is_empty());
    assert!(
        audited(&app, &admin, &user_id, "transactions.matched")
            .await
            .is_empty()
    );
    let saved = upload_with(
        &app,
        Some("savings.csv"),
        savings.as_bytes(),
        &[("account_name", "Savings")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(saved["transfers"], 1, "{saved}");
    let checking_id = account_named(&app, &token, "Checking").await;

    // Another format's grocery row: a dry run counts it as matched, then the import holds it.
    let qif = "!Type:Bank\nD3/3/2026\nT-84.12\nPCORNER GROCERY\n^\n";
    let parts = [("account_id", checking_id.as_str())];
    let mut dry_parts = parts.to_vec();
    dry_parts.push(("dry_run", "true"));
    let dry = upload_with(&app, Some("recent.qif"), qif.as_bytes(), &dry_parts, &token)
        .await
        .expect(200);
    assert_eq!(dry["matched"], 1, "{dry}");
    assert_eq!(dry["transactions_created"], 0, "{dry}");
    assert_eq!(
        matches(&app, &token, "").await.len(),
        1,
        "a dry run records nothing"
    );
    let held = upload_with(&app, Some("recent.qif"), qif.as_bytes(), &parts, &token)
        .await
        .expect(201);
    assert_eq!(held["matched"], 1, "{held}");

    // One `transactions.matched` per match made, naming it.
    let made = audited(&app, &admin, &user_id, "transactions.matched").await;
    assert_eq!(made.len(), 2, "{made:?}");
    let listed = matches(&app, &token, "").await;
    for event in &made {
        let data = &event["data"];
        assert_eq!(data["status"], "automatic", "{event}");
        assert!(
            listed
                .iter()
                .any(|found| found["id"] == data["match_id"] && found["kind"] == data["kind"]),
            "{event} names a listed match"
        );
    }
    let duplicate = matches(&app, &token, "?kind=duplicate").await;
    let duplicate_id = id(&duplicate[0]).to_owned();

    // Rejecting writes the held row and is `transactions.unmatched`; accepting is
    // `transactions.matched` again and removes it.
    let decide = |verb: &str| {
        let path = format!("/api/v1/transaction-matches/{duplicate_id}/{verb}");
        let (app, token) = (&app, token.clone());
        async move { app.post(&path, &json!({}), Some(&token)).await.expect(200) }
    };
    decide("reject").await;
    assert_eq!(
        with_amount(&rows(&app, &token, &checking_id).await, "-84.12").len(),
        2
    );
    let unmatched = audited(&app, &admin, &user_id, "transactions.unmatched").await;
    assert_eq!(unmatched.len(), 1, "{unmatched:?}");
    assert_eq!(unmatched[0]["data"]["match_id"], duplicate_id.as_str());
    assert_eq!(unmatched[0]["data"]["status"], "rejected");
    decide("accept").await;
    assert_eq!(
        with_amount(&rows(&app, &token, &checking_id).await, "-84.12").len(),
        1
    );
    let made = audited(&app, &admin, &user_id, "transactions.matched").await;
    assert_eq!(made.len(), 3, "{made:?}");
    assert_eq!(made[2]["data"]["status"], "accepted");
    assert_eq!(made[2]["data"]["match_id"], duplicate_id.as_str());
}

async fn one_users_rows_never_match_another_users(app: TestApp) {
    let alice = access(&app, "alice-rows@example.com").await;
    let bob = access(&app, "bob-rows@example.com").await;
    let checking = "Date,Description,Amount\n2026-04-01,Transfer to savings,-250.00\n\
                    2026-04-02,Corner Grocery,-30.00\n";
    let savings = "Date,Description,Amount\n2026-04-02,Transfer from checking,250.00\n";
    upload_with(
        &app,
        Some("checking.csv"),
        checking.as_bytes(),
        &[("account_name", "Checking")],
        &alice,
    )
    .await
    .expect(201);
    // Bob's opposite amount in the window is not Alice's transfer leg.
    let bobs = upload_with(
        &app,
        Some("savings.csv"),
        savings.as_bytes(),
        &[("account_name", "Savings")],
        &bob,
    )
    .await
    .expect(201);
    assert_eq!(bobs["transfers"], 0, "{bobs}");
    // Nor is Bob's copy of Alice's statement, in another format, her duplicate.
    let qif = "!Type:Bank\nD4/2/2026\nT-30.00\nPCORNER GROCERY\n^\n";
    let copy = upload_with(
        &app,
        Some("copy.qif"),
        qif.as_bytes(),
        &[("account_name", "Checking")],
        &bob,
    )
    .await
    .expect(201);
    assert_eq!(copy["matched"], 0, "{copy}");
    assert_eq!(copy["transactions_created"], 1, "{copy}");
    assert!(matches(&app, &alice, "").await.is_empty());
    assert!(matches(&app, &bob, "").await.is_empty());
    let alice_checking = account_named(&app, &alice, "Checking").await;
    assert!(
        rows(&app, &alice, &alice_checking)
            .await
            .iter()
            .all(|row| row["transfer_transaction_id"].is_null())
    );
    // Bob cannot read Alice's rows by id either way.
    let alice_rows = rows(&app, &alice, &alice_checking).await;
    app.get(
        &format!("/api/v1/transactions/{}", id(&alice_rows[0])),
        Some(&bob),
    )
    .await
    .expect_problem(404, "not_found");
}

async fn the_sandbox_scenario_shows_file_then_sync_the_tip_and_a_transfer(app: TestApp) {
    let token = access(&app, "scenario@example.com").await;
    let bridge = bridge().await;
    let connection = app
        .post(
            "/api/v1/providers",
            &json!({"provider_slug": "simplefin", "alias": "Scenario",
                    "setup_token": bridge.sandbox.reconciliation_setup_token()}),
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
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let provider_account = |wanted: &str| {
        accounts["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .find(|account| account["provider_account_id"] == wanted)
            .map(|account| id(account).to_owned())
            .expect("scenario account")
    };
    let checking = provider_account(RECONCILIATION_CHECKING_ID);
    let savings = provider_account(RECONCILIATION_SAVINGS_ID);
    assert!(
        accounts["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .all(|account| account["provider_account_id"] != CHECKING_ID),
        "the scenario's token sees the scenario's accounts only"
    );

    // File then sync: the sample export into the checking account first.
    let sample = bridge.sandbox.sample_csv();
    let imported = upload_with(
        &app,
        Some("sample.csv"),
        sample.as_bytes(),
        &[("account_id", checking.as_str())],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(imported["transactions_created"], 3, "{imported}");
    let synced = sync_transactions(&app, &token, &connection, false).await;
    assert_eq!(synced["matched"], 2, "{synced}");
    assert_eq!(synced["transfers"], 1, "{synced}");
    let checking_rows = rows(&app, &token, &checking).await;
    assert_eq!(with_amount(&checking_rows, "2000.00").len(), 1);
    assert_eq!(with_amount(&checking_rows, "-84.12").len(), 1);
    let out_leg = with_amount(&checking_rows, "-500.00")[0].clone();
    let in_leg = with_amount(&rows(&app, &token, &savings).await, "500.00")[0].clone();
    assert_eq!(out_leg["transfer_transaction_id"], in_leg["id"]);
    assert_eq!(in_leg["transfer_transaction_id"], out_leg["id"]);
    let dinner = with_amount(&checking_rows, "-40.00");
    assert_eq!(dinner.len(), 1, "{checking_rows:?}");
    assert_eq!(dinner[0]["status"], "pending");
    let dinner_id = dinner[0]["id"].clone();

    // The next sync books it with a tip: the same row, its id kept, the booked amount.
    let booked = sync_transactions(&app, &token, &connection, true).await;
    assert_eq!(booked["created"], 0, "{booked}");
    assert_eq!(booked["updated"], 1, "{booked}");
    assert_eq!(booked["removed"], 0, "{booked}");
    let after = rows(&app, &token, &checking).await;
    assert_eq!(after.len(), checking_rows.len());
    assert!(with_amount(&after, "-40.00").is_empty());
    let tipped = with_amount(&after, "-46.00");
    assert_eq!(tipped.len(), 1, "{after:?}");
    assert_eq!(tipped[0]["id"], dinner_id);
    assert_eq!(tipped[0]["status"], "settled");
    assert_eq!(
        tipped[0]["provider_transaction_id"],
        "sbx-rec-booked-dinner"
    );
    assert_eq!(
        tipped[0]["pending_transaction_id"],
        "sbx-rec-pending-dinner"
    );
}

async fn a_transfer_pairs_whichever_leg_comes_first(app: TestApp) {
    let token = access(&app, "incoming-first@example.com").await;
    // The incoming leg first, dated before the outgoing one; then the outgoing leg.
    let savings = "Date,Description,Amount\n2026-05-01,Transfer from checking,75.00\n";
    let checking = "Date,Description,Amount\n2026-05-03,Transfer to savings,-75.00\n\
                    2026-05-03,Bakery,-75.50\n";
    let first = upload_with(
        &app,
        Some("savings.csv"),
        savings.as_bytes(),
        &[("account_name", "Savings")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(first["transfers"], 0, "{first}");
    let second = upload_with(
        &app,
        Some("checking.csv"),
        checking.as_bytes(),
        &[("account_name", "Checking")],
        &token,
    )
    .await
    .expect(201);
    assert_eq!(second["transfers"], 1, "{second}");
    let in_leg = with_amount(
        &rows(&app, &token, &account_named(&app, &token, "Savings").await).await,
        "75.00",
    )[0]
    .clone();
    let out_rows = rows(&app, &token, &account_named(&app, &token, "Checking").await).await;
    let out_leg = with_amount(&out_rows, "-75.00")[0].clone();
    assert_eq!(in_leg["transfer_transaction_id"], out_leg["id"]);
    assert_eq!(out_leg["transfer_transaction_id"], in_leg["id"]);
    assert!(with_amount(&out_rows, "-75.50")[0]["transfer_transaction_id"].is_null());
    let transfers = matches(&app, &token, "?kind=transfer&status=automatic").await;
    assert_eq!(transfers.len(), 1, "{transfers:?}");
}

conformance!(setup = simplefin;
    a_file_overlapping_a_sync_is_not_stored_twice,
    a_booked_row_takes_over_its_pending_row,
    transfers_between_own_accounts_are_paired_both_ways,
    ambiguous_duplicates_are_suggested_and_decisions_reverse,
    dry_runs_count_matches_and_every_decision_is_audited,
    one_users_rows_never_match_another_users,
    the_sandbox_scenario_shows_file_then_sync_the_tip_and_a_transfer,
    a_transfer_pairs_whichever_leg_comes_first,
);
