//! Conformance: the durable events (the store's outbox) and the audit trail over them,
//! `GET /api/v1/admin/audit-events`: each event type is listed after the action that causes
//! it, with its ids and counts and no secret; filters, keyset pages, admin only, retention.

use std::collections::BTreeSet;
use std::time::Duration;

use aggregation_core::jobs::{PURGE_EXPIRED, RunOutcome};
use aggregation_tests::{BANK_QFX, PASSWORD, Setup, TestApp, conformance, test_config, upload};
use http::Method;
use serde_json::{Value, json};

const ADMIN: &str = "auditor@example.com";
const AUDIT: &str = "/api/v1/admin/audit-events";

conformance!(
    config = admin_config;
    audit_list_is_for_admins_only,
    audit_filters_and_keyset_pages,
    bad_audit_filters_are_422,
    events_within_the_retention_survive_the_purge,
);

mod everything {
    use super::*;
    conformance!(setup = sandbox_with_admin; each_event_type_reaches_the_audit_trail);
}

mod short_retention {
    use super::*;
    conformance!(config = no_retention; the_purge_deletes_events_past_the_retention);
}

fn admin_config() -> aggregation_core::Config {
    test_config().with_admin_emails(vec![ADMIN.to_owned()])
}

fn no_retention() -> aggregation_core::Config {
    admin_config().with_audit_retention(Duration::ZERO)
}

/// The provider sandbox, an admin, and refresh-token reuse detected at once (no grace).
fn sandbox_with_admin() -> Setup {
    let mut setup = aggregation_tests::sandbox_setup();
    setup.config = setup
        .config
        .with_admin_emails(vec![ADMIN.to_owned()])
        .with_refresh_reuse_interval(Duration::ZERO);
    setup
}

fn text<'a>(body: &'a Value, field: &str) -> &'a str {
    body[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {body}"))
}

/// The audit page at `query` (`?…` or empty), as the admin sees it.
async fn audit(app: &TestApp, admin: &str, query: &str) -> Value {
    app.get(&format!("{AUDIT}{query}"), Some(admin))
        .await
        .expect(200)
}

/// Every event of the audit trail matching `query`, following `next_after` page by page.
async fn all_pages(app: &TestApp, admin: &str, query: &str, limit: u32) -> Vec<Value> {
    let mut events = Vec::new();
    let mut after = String::new();
    loop {
        let page = audit(app, admin, &format!("?limit={limit}{query}{after}")).await;
        let listed = page["events"].as_array().expect("events");
        assert!(listed.len() <= limit as usize);
        events.extend(listed.iter().cloned());
        match page["next_after"].as_str() {
            Some(next) => {
                assert_eq!(Some(next), listed.last().map(|event| text(event, "id")));
                after = format!("&after={next}");
            }
            None => return events,
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| text(event, "type")).collect()
}

/// Logs `email` in and out `times` times: that many `session.revoked` events.
async fn log_in_and_out(app: &TestApp, email: &str, times: usize) {
    for _ in 0..times {
        let tokens = app.login(email, PASSWORD).await;
        app.delete(
            "/api/v1/sessions/current",
            Some(&json!({"refresh_token": text(&tokens, "refresh_token")})),
            Some(text(&tokens, "access_token")),
        )
        .await
        .expect(204);
    }
}

/// Every key of a JSON value, at any depth.
fn keys(value: &Value, into: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                into.insert(key.clone());
                keys(inner, into);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| keys(item, into)),
        _ => {}
    }
}

async fn audit_list_is_for_admins_only(app: TestApp) {
    let (_, user, _) = app.user("mallory@example.com").await;
    app.get(AUDIT, None)
        .await
        .expect_problem(401, "unauthorized");
    app.get(AUDIT, Some("not-a-jwt"))
        .await
        .expect_problem(401, "unauthorized");
    app.get(AUDIT, Some(&user))
        .await
        .expect_problem(403, "forbidden");
    // The role is checked before the query: a non-admin learns nothing from a bad filter.
    app.get(&format!("{AUDIT}?limit=0"), Some(&user))
        .await
        .expect_problem(403, "forbidden");
    let (_, admin, _) = app.user(ADMIN).await;
    let page = audit(&app, &admin, "").await;
    assert_eq!(page["events"], json!([]));
    assert_eq!(page["next_after"], Value::Null);
}

async fn audit_filters_and_keyset_pages(app: TestApp) {
    let (_, admin, _) = app.user(ADMIN).await;
    let (alice, _, _) = app.user("alice@example.com").await;
    let (bob, _, _) = app.user("bob@example.com").await;
    log_in_and_out(&app, "alice@example.com", 3).await;
    log_in_and_out(&app, "bob@example.com", 2).await;

    let everything = all_pages(&app, &admin, "", 200).await;
    assert_eq!(everything.len(), 5);
    assert!(types(&everything).iter().all(|t| *t == "session.revoked"));
    // Oldest first: ids (UUIDv7) and times ascend.
    let ids: Vec<&str> = everything.iter().map(|event| text(event, "id")).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted);
    let times: Vec<&str> = everything.iter().map(|e| text(e, "occurred_at")).collect();
    assert!(times.iter().all(|at| at.ends_with('Z')));

    // Pages of two cover the same events once, in order; the last page says so.
    assert_eq!(all_pages(&app, &admin, "", 2).await, everything);
    let first = audit(&app, &admin, "?limit=2").await;
    assert_eq!(first["next_after"], everything[1]["id"]);
    let last = audit(&app, &admin, &format!("?after={}", ids[4])).await;
    assert_eq!(last, json!({"events": [], "next_after": null}));

    let of_alice = all_pages(&app, &admin, &format!("&user_id={alice}"), 2).await;
    assert_eq!(of_alice, everything[..3]);
    assert!(
        of_alice
            .iter()
            .all(|event| event["user_id"] == alice.as_str())
    );
    let of_bob = all_pages(&app, &admin, &format!("&user_id={bob}"), 200).await;
    assert_eq!(of_bob, everything[3..]);
    let revoked = all_pages(&app, &admin, "&type=session.revoked", 200).await;
    assert_eq!(revoked, everything);
    let changed = all_pages(&app, &admin, "&type=password.changed", 200).await;
    assert!(changed.is_empty());

    // since is inclusive, until exclusive; both in RFC 3339 (any offset).
    let pivot = text(&everything[3], "occurred_at");
    let encoded = pivot.replace('+', "%2B");
    let since = all_pages(&app, &admin, &format!("&since={encoded}"), 200).await;
    let until = all_pages(&app, &admin, &format!("&until={encoded}"), 200).await;
    assert!(since.contains(&everything[3]));
    assert!(!until.contains(&everything[3]));
    assert_eq!(since.len() + until.len(), everything.len());
    let window = all_pages(
        &app,
        &admin,
        &format!("&since=2000-01-01T00:00:00%2B02:00&until=2199-01-01&user_id={bob}"),
        200,
    )
    .await;
    assert_eq!(window, of_bob);
}

async fn bad_audit_filters_are_422(app: TestApp) {
    let (_, admin, _) = app.user(ADMIN).await;
    let cases = [
        ("user_id=nope", "query.user_id", "invalid_uuid"),
        ("after=123", "query.after", "invalid_uuid"),
        ("type=session.created", "query.type", "invalid_choice"),
        ("since=yesterday", "query.since", "invalid_datetime"),
        ("until=1899-12-31T23:00:00Z", "query.until", "out_of_range"),
        ("since=2201-01-01", "query.since", "out_of_range"),
        (
            "since=2026-02-01&until=2026-01-01",
            "query.since",
            "after_until",
        ),
        ("limit=0", "query.limit", "out_of_range"),
        ("limit=201", "query.limit", "out_of_range"),
        ("limit=ten", "query.limit", "invalid_integer"),
    ];
    for (query, field, code) in cases {
        let problem = app
            .get(&format!("{AUDIT}?{query}"), Some(&admin))
            .await
            .expect_problem(422, "validation_failed");
        let errors = problem["errors"].as_array().expect("errors");
        assert!(
            errors
                .iter()
                .any(|error| error["field"] == field && error["code"] == code),
            "{query}: {problem}"
        );
    }
    // Every bad filter at once: one 422 naming each.
    let problem = app
        .get(&format!("{AUDIT}?user_id=x&type=y&limit=0"), Some(&admin))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"].as_array().map(Vec::len), Some(3));
    // Limits at the bounds are fine.
    audit(&app, &admin, "?limit=1").await;
    audit(&app, &admin, "?limit=200").await;
}

/// Raises two events, runs the purge, and checks it deleted `deleted` of them: the summary says
/// so and the audit trail keeps the others.
async fn purge_deletes(app: &TestApp, deleted: usize) {
    let (_, admin, _) = app.user(ADMIN).await;
    app.user("purged@example.com").await;
    log_in_and_out(app, "purged@example.com", 2).await;
    let before = all_pages(app, &admin, "", 200).await;
    assert_eq!(before.len(), 2);
    let outcome = app
        .service
        .jobs()
        .run_once(PURGE_EXPIRED)
        .await
        .expect("runs");
    let summary = format!(" {deleted} events");
    assert!(
        matches!(&outcome, RunOutcome::Succeeded(done) if done.contains(&summary)),
        "{outcome}"
    );
    assert_eq!(all_pages(app, &admin, "", 200).await, before[deleted..]);
}

async fn events_within_the_retention_survive_the_purge(app: TestApp) {
    purge_deletes(&app, 0).await;
}

async fn the_purge_deletes_events_past_the_retention(app: TestApp) {
    // A retention of zero: everything that happened before the run is past it.
    purge_deletes(&app, 2).await;
}

async fn each_event_type_reaches_the_audit_trail(app: TestApp) {
    let (admin_id, admin, _) = app.user(ADMIN).await;
    let email = "pat@example.com";
    let (user_id, access, first_refresh) = app.user(email).await;
    let mut secrets = vec![PASSWORD.to_owned(), access.clone(), first_refresh.clone()];

    // connection.created, sync.completed, connection.expired, again connection.created
    // (re-authorized), connection.deleted.
    let query = app.authorized_callback_query(&access, None).await;
    secrets.extend(
        query
            .trim_start_matches("?code=")
            .split('&')
            .map(|part| part.trim_start_matches("state=").to_owned()),
    );
    let connection = app
        .call(
            Method::POST,
            &format!("/api/v1/providers/callback{query}"),
            None,
            None,
        )
        .await
        .expect(201);
    let connection_id = text(&connection, "id").to_owned();
    let synced = app
        .post(
            "/api/v1/accounts/syncs",
            &json!({"connection_id": connection_id}),
            Some(&access),
        )
        .await
        .expect(201);
    app.sandbox().revoke_refresh_tokens();
    app.post(
        &format!("/api/v1/providers/{connection_id}/token-refreshes"),
        &json!({"force": true}),
        Some(&access),
    )
    .await
    .expect_problem(502, "provider_error");
    let again = app.connect_sandbox(&access, None).await;
    assert_eq!(again["id"], connection["id"]);
    app.delete(
        &format!("/api/v1/providers/{connection_id}"),
        None,
        Some(&access),
    )
    .await
    .expect(204);

    // import.completed
    let imported = upload(&app, "statement.qfx", BANK_QFX, &access)
        .await
        .expect(201);

    // session.revoked: refresh-token reuse, then a logout.
    let rotated = app
        .post(
            "/api/v1/tokens",
            &json!({"refresh_token": first_refresh}),
            None,
        )
        .await
        .expect(201);
    secrets.push(text(&rotated, "refresh_token").to_owned());
    app.post(
        "/api/v1/tokens",
        &json!({"refresh_token": first_refresh}),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
    let second = app.login(email, PASSWORD).await;
    secrets.push(text(&second, "refresh_token").to_owned());
    app.delete(
        "/api/v1/sessions/current",
        Some(&json!({"refresh_token": text(&second, "refresh_token")})),
        Some(text(&second, "access_token")),
    )
    .await
    .expect(204);

    // password.changed, with session.revoked for the session still live.
    let live = app.login(email, PASSWORD).await;
    secrets.push(text(&live, "refresh_token").to_owned());
    let new_password = "N3w-Passw0rd!";
    secrets.push(app.reset_password(email, 2, new_password).await);
    secrets.push(new_password.to_owned());

    // security.rotation, of the user and global.
    app.post(
        &format!("/api/v1/admin/users/{user_id}/rotations"),
        &json!({"reason": "lost laptop"}),
        Some(&admin),
    )
    .await
    .expect(201);
    app.post(
        "/api/v1/admin/security/rotations",
        &json!({"reason": "key rollover"}),
        Some(&admin),
    )
    .await
    .expect(201);

    let mine = all_pages(&app, &admin, &format!("&user_id={user_id}"), 200).await;
    assert_eq!(
        types(&mine),
        [
            "connection.created",
            "sync.completed",
            "connection.expired",
            "connection.created",
            "connection.deleted",
            "import.completed",
            "session.revoked",
            "session.revoked",
            "password.changed",
            "session.revoked",
            "security.rotation",
        ]
    );
    let data: Vec<&Value> = mine.iter().map(|event| &event["data"]).collect();
    assert_eq!(
        *data[0],
        json!({"connection_id": connection_id, "provider": "schwab-sandbox", "reauthorized": false})
    );
    assert_eq!(data[1]["connection_id"], connection_id.as_str());
    assert_eq!(
        data[1]["counts"]["accounts"]["created"], synced["created"],
        "{synced}"
    );
    assert_eq!(
        *data[2],
        json!({"connection_id": connection_id, "provider": "schwab-sandbox", "reason": "refresh_refused"})
    );
    assert_eq!(data[3]["reauthorized"], true);
    assert_eq!(
        *data[4],
        json!({"connection_id": connection_id, "provider": "schwab-sandbox"})
    );
    assert_eq!(
        data[5]["counts"]["transactions"]["created"], imported["transactions_created"],
        "{imported}"
    );
    assert_eq!(data[5]["connection_ids"].as_array().map(Vec::len), Some(1));
    let reasons: Vec<&Value> = [6, 7, 9].iter().map(|at| &data[*at]["reason"]).collect();
    assert_eq!(
        reasons,
        [
            &json!("token_reuse"),
            &json!("logout"),
            &json!("password_reset")
        ]
    );
    assert_eq!(*data[8], json!({"method": "reset"}));
    assert_eq!(data[10]["scope"], "user");
    assert_eq!(data[10]["target_user_id"], user_id.as_str());
    assert_eq!(data[10]["initiated_by"], admin_id.as_str());
    assert!(data[10]["new_version"].as_i64() > data[10]["previous_version"].as_i64());
    assert!(
        mine.iter()
            .all(|event| event["user_id"] == user_id.as_str())
    );

    // The global rotation concerns no user.
    let rotations = all_pages(&app, &admin, "&type=security.rotation", 200).await;
    assert_eq!(rotations.len(), 2);
    assert_eq!(rotations[1]["user_id"], Value::Null);
    assert_eq!(rotations[1]["data"]["scope"], "global");

    // No secret in any payload: no token, password or OAuth value, and no key naming one.
    let everything = serde_json::to_string(&all_pages(&app, &admin, "", 200).await).expect("json");
    for secret in &secrets {
        assert!(!secret.is_empty());
        assert!(
            !everything.contains(secret.as_str()),
            "a payload carries a secret"
        );
    }
    let mut names = BTreeSet::new();
    keys(
        &serde_json::from_str::<Value>(&everything).expect("json"),
        &mut names,
    );
    for name in &names {
        for word in ["token", "secret", "password", "credential", "code", "state"] {
            assert!(!name.contains(word), "a payload field named {name}");
        }
    }
}
