//! Conformance: webhooks (Standard Webhooks) registered through the API and delivered by the
//! jobs runner to a real receiver on a loopback socket that verifies every signature.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aggregation_core::Config;
use aggregation_core::jobs::{DELIVER_WEBHOOKS, PURGE_EXPIRED, RunOutcome};
use aggregation_core::store::{
    DeliveryClaim, NewRefreshToken, NewSession, NewUser, NewWebhookEndpoint, Store, now,
};
use aggregation_tests::receiver::{Hanging, Received, Receiver, verify_signature};
use aggregation_tests::{
    PASSWORD, SharedDatabase, TestApp, TestResponse, conformance, test_config,
};
use chrono::{DateTime, TimeDelta, Utc};
use http::Method;
use serde_json::{Value, json};
use uuid::Uuid;

const WEBHOOKS: &str = "/api/v1/webhooks";

/// The key ring every case encrypts secrets with.
fn keyring() -> aggregation_core::Keyring {
    aggregation_core::Keyring::new(vec![("test".into(), vec![7; 32])]).expect("a 32-byte key")
}

/// Receivers on loopback allowed; failed deliveries due again at once (at the next run).
fn local_receivers() -> Config {
    test_config()
        .with_keyring(keyring())
        .with_webhook_allow_private(true)
        .with_webhook_retry_delays(Duration::ZERO, Duration::from_secs(60))
}

/// Receivers on loopback allowed, the default backoff (10 s before the first retry).
fn local_receivers_default_backoff() -> Config {
    test_config()
        .with_keyring(keyring())
        .with_webhook_allow_private(true)
}

/// Receivers on loopback allowed, no retry after the maximum age of zero, finished
/// deliveries purged at the next purge.
fn local_receivers_no_retries() -> Config {
    local_receivers()
        .with_webhook_max_age(Duration::ZERO)
        .with_purge_retention(Duration::ZERO)
}

/// The service's defaults: only public addresses.
fn public_only() -> Config {
    test_config().with_keyring(keyring())
}

/// Receivers on loopback allowed, and the delivery job every hour: once its first run (at
/// start) is over, only the delivery that follows each commit can send anything within a test.
fn hourly_job() -> Config {
    local_receivers_default_backoff().with_deliver_webhooks_every(Some(Duration::from_secs(3600)))
}

/// Far above what delivery takes even on a loaded machine: a functional check (without the
/// wake the wait would be the job's hour), not a timing assertion.
const CEILING: Duration = Duration::from_secs(20);

conformance!(config = local_receivers;
    delivers_signed_events_to_a_local_receiver,
    failed_deliveries_are_retried_until_delivered,
    rotating_the_secret_signs_with_both_for_a_day,
    enabling_is_the_only_change_a_patch_makes,
    webhooks_belong_to_their_owner_and_deletion_stops_deliveries,
    an_instance_without_private_access_never_sends_there,
    metadata_addresses_are_refused_even_where_private_ones_are_allowed,
);

mod backoff {
    use super::*;
    conformance!(config = local_receivers_default_backoff; retries_wait_for_their_backoff);
}

/// Receivers on loopback allowed, failed deliveries due again at once, and an endpoint
/// disabled at its first failure (the 24 h of failures, shortened).
fn disabled_at_the_first_failure() -> Config {
    local_receivers().with_webhook_disable_after(Duration::ZERO)
}

mod disabling {
    use super::*;
    conformance!(config = disabled_at_the_first_failure;
        an_endpoint_failing_long_enough_is_disabled_until_enabled);
}

mod max_age {
    use super::*;
    conformance!(config = local_receivers_no_retries; deliveries_past_their_maximum_age_give_up);
}

mod prompt {
    use super::*;
    conformance!(config = hourly_job;
        deliveries_start_when_the_event_is_committed,
        a_burst_of_events_is_delivered_exactly_once,
        a_user_with_hanging_endpoints_holds_up_nobody_else,
    );
}

mod ssrf {
    use super::*;
    conformance!(config = public_only;
        private_addresses_and_bad_registrations_are_refused,
        every_spelling_of_loopback_and_metadata_is_refused,
        the_number_of_endpoints_is_capped,
    );
}

/// Registers a webhook; the answer (with its secret).
async fn register(app: &TestApp, access: &str, url: &str, event_types: Option<&[&str]>) -> Value {
    let mut body = json!({ "url": url });
    if let Some(types) = event_types {
        body["event_types"] = json!(types);
    }
    app.post(WEBHOOKS, &body, Some(access)).await.expect(201)
}

/// A user's webhook at a fresh receiver that trusts its secret.
struct Subscribed {
    receiver: Receiver,
    access: String,
    webhook_id: String,
    /// The registration's answer.
    created: Value,
}

/// Makes a verified, logged-in user with this email and registers a webhook for it at a fresh
/// receiver, which is told the secret.
async fn subscribe(app: &TestApp, email: &str, event_types: Option<&[&str]>) -> Subscribed {
    let receiver = Receiver::start().await;
    let (_, access, _) = app.user(email).await;
    let created = register(app, &access, &receiver.url, event_types).await;
    receiver.trust(str_of(&created, "secret"));
    Subscribed {
        receiver,
        access,
        webhook_id: str_of(&created, "id").to_owned(),
        created,
    }
}

/// Logs the user in once more and revokes that session from the first one: one
/// `session.revoked` event. The revoked session's id.
async fn revoke_a_session(app: &TestApp, email: &str, access: &str) -> String {
    let second = app.login(email, PASSWORD).await;
    let second_access = second["access_token"].as_str().expect("access");
    let sessions = app
        .get("/api/v1/sessions", Some(second_access))
        .await
        .expect(200);
    let session_id = sessions["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|session| session["is_current"] == true)
        .and_then(|session| session["id"].as_str())
        .expect("the second session")
        .to_owned();
    app.delete(
        &format!("/api/v1/sessions/{session_id}"),
        None,
        Some(access),
    )
    .await
    .expect(204);
    session_id
}

/// Runs the delivery job once; its summary.
async fn deliver(app: &TestApp) -> String {
    match app
        .service
        .jobs()
        .run_once(DELIVER_WEBHOOKS)
        .await
        .expect("the job exists")
    {
        RunOutcome::Succeeded(summary) => summary,
        other => panic!("deliver_webhooks: {other}"),
    }
}

/// The deliveries list of a webhook.
async fn deliveries(app: &TestApp, access: &str, webhook_id: &str) -> Vec<Value> {
    app.get(&format!("{WEBHOOKS}/{webhook_id}/deliveries"), Some(access))
        .await
        .expect(200)["deliveries"]
        .as_array()
        .expect("deliveries")
        .clone()
}

fn str_of<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {value}"))
}

async fn delivers_signed_events_to_a_local_receiver(app: TestApp) {
    let email = "hooks@example.com";
    let Subscribed {
        receiver,
        access,
        webhook_id,
        created,
    } = subscribe(&app, email, Some(&["session.revoked"])).await;
    let secret = str_of(&created, "secret").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(created["url"], receiver.url.as_str());
    assert_eq!(created["event_types"], json!(["session.revoked"]));

    // The secret is shown once: neither the list nor the read carries it.
    let listed = app.get(WEBHOOKS, Some(&access)).await.expect(200);
    assert_eq!(listed["total_count"], 1);
    assert_eq!(listed["webhooks"][0]["id"], webhook_id.as_str());
    assert!(listed["webhooks"][0].get("secret").is_none());
    let read = app
        .get(&format!("{WEBHOOKS}/{webhook_id}"), Some(&access))
        .await
        .expect(200);
    assert!(read.get("secret").is_none());
    assert!(!listed.to_string().contains(&secret[6..]));

    let session_id = revoke_a_session(&app, email, &access).await;
    assert!(
        receiver.received().is_empty(),
        "nothing is sent before the job runs"
    );
    let summary = deliver(&app).await;
    assert!(summary.starts_with("delivered 1 "), "{summary}");

    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert!(request.verified, "the signature verifies: {request:?}");
    assert!(verify_signature(
        &secret,
        &request.id,
        &request.timestamp,
        &request.body,
        &request.signature
    ));
    assert!(request.signature.starts_with("v1,"));
    assert_eq!(request.content_type, "application/json");
    let sent_at: i64 = request.timestamp.parse().expect("Unix seconds");
    assert!((chrono::Utc::now().timestamp() - sent_at).abs() < 300);
    let body = request.json();
    let mut keys: Vec<&str> = body
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["data", "id", "occurred_at", "type"]);
    assert_eq!(
        body["id"],
        request.id.as_str(),
        "webhook-id is the event id"
    );
    assert_eq!(body["type"], "session.revoked");
    assert_eq!(body["data"]["session_id"], session_id.as_str());
    assert!(str_of(&body, "occurred_at").ends_with('Z'));

    let listed = deliveries(&app, &access, &webhook_id).await;
    assert_eq!(listed.len(), 1);
    let delivery = &listed[0];
    assert_eq!(delivery["event_id"], request.id.as_str());
    assert_eq!(delivery["event_type"], "session.revoked");
    assert_eq!(delivery["status"], "delivered");
    assert_eq!(delivery["attempt_count"], 1);
    assert_eq!(delivery["next_attempt_at"], Value::Null);
    assert!(delivery["delivered_at"].is_string());
    let attempts = delivery["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["status_code"], 204);
    assert_eq!(attempts[0]["error"], Value::Null);
    assert!(attempts[0]["attempted_at"].is_string());

    // Delivered once: another run sends nothing more.
    let summary = deliver(&app).await;
    assert!(summary.starts_with("delivered 0 "), "{summary}");
    assert_eq!(receiver.received().len(), 1);
}

async fn failed_deliveries_are_retried_until_delivered(app: TestApp) {
    let email = "retry@example.com";
    // No event_types: every type.
    let Subscribed {
        receiver,
        access,
        webhook_id,
        created,
    } = subscribe(&app, email, None).await;
    assert_eq!(created["event_types"], json!([]));
    receiver.answer_with(&[500, 503]);

    revoke_a_session(&app, email, &access).await;
    let first = deliver(&app).await;
    assert!(first.contains("1 to retry"), "{first}");
    let listed = deliveries(&app, &access, &webhook_id).await;
    let revoked: Vec<&Value> = listed
        .iter()
        .filter(|delivery| delivery["event_type"] == "session.revoked")
        .collect();
    assert_eq!(revoked.len(), 1, "{listed:?}");
    assert_eq!(revoked[0]["status"], "pending");
    assert_eq!(revoked[0]["attempts"][0]["status_code"], 500);
    assert_eq!(revoked[0]["attempts"][0]["error"], "http_status");
    assert!(revoked[0]["next_attempt_at"].is_string());

    deliver(&app).await;
    deliver(&app).await;
    let received = receiver.received();
    let ids: Vec<&str> = received
        .iter()
        .filter(|request| request.json()["type"] == "session.revoked")
        .map(|request| request.id.as_str())
        .collect();
    assert_eq!(ids.len(), 3, "two failures, then delivered");
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "every retry carries the same webhook-id"
    );
    assert!(received.iter().all(|request| request.verified));
    let listed = deliveries(&app, &access, &webhook_id).await;
    let delivery = listed
        .iter()
        .find(|delivery| delivery["event_id"] == ids[0])
        .expect("the delivery");
    assert_eq!(delivery["status"], "delivered");
    assert_eq!(delivery["attempt_count"], 3);
    let codes: Vec<&Value> = delivery["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|attempt| &attempt["status_code"])
        .collect();
    assert_eq!(codes, [&json!(500), &json!(503), &json!(204)]);
    // Failures for less than a day leave the endpoint enabled.
    let shown = app
        .get(&format!("{WEBHOOKS}/{webhook_id}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(shown["enabled"], true);
}

async fn retries_wait_for_their_backoff(app: TestApp) {
    let email = "backoff@example.com";
    let Subscribed {
        receiver,
        access,
        webhook_id,
        ..
    } = subscribe(&app, email, Some(&["session.revoked"])).await;
    receiver.answer_with(&[500]);

    revoke_a_session(&app, email, &access).await;
    deliver(&app).await;
    // The retry is due 10 s after the failure: a run right now sends nothing.
    let summary = deliver(&app).await;
    assert_eq!(summary, "delivered 0 webhooks, 0 to retry, 0 given up");
    assert_eq!(receiver.received().len(), 1);
    let listed = deliveries(&app, &access, &webhook_id).await;
    assert_eq!(listed[0]["status"], "pending");
    assert_eq!(listed[0]["attempt_count"], 1);
    let attempted: chrono::DateTime<chrono::Utc> = listed[0]["attempts"][0]["attempted_at"]
        .as_str()
        .and_then(|at| at.parse().ok())
        .expect("attempted_at");
    let due: chrono::DateTime<chrono::Utc> = listed[0]["next_attempt_at"]
        .as_str()
        .and_then(|at| at.parse().ok())
        .expect("next_attempt_at");
    assert_eq!(due - attempted, chrono::TimeDelta::seconds(10));
}

async fn deliveries_past_their_maximum_age_give_up(app: TestApp) {
    let email = "old@example.com";
    let Subscribed {
        receiver,
        access,
        webhook_id,
        ..
    } = subscribe(&app, email, Some(&["session.revoked"])).await;
    receiver.answer_with(&[500]);

    revoke_a_session(&app, email, &access).await;
    let summary = deliver(&app).await;
    assert!(summary.ends_with("1 given up"), "{summary}");
    deliver(&app).await;
    assert_eq!(receiver.received().len(), 1);
    let listed = deliveries(&app, &access, &webhook_id).await;
    assert_eq!(listed[0]["status"], "failed");
    assert_eq!(listed[0]["next_attempt_at"], Value::Null);
    assert_eq!(listed[0]["attempts"][0]["status_code"], 500);

    // Finished deliveries go with the purge once past the retention.
    let outcome = app
        .service
        .jobs()
        .run_once(PURGE_EXPIRED)
        .await
        .expect("the job exists");
    assert!(
        matches!(&outcome, RunOutcome::Succeeded(summary) if summary.contains(", 1 webhook deliveries")),
        "{outcome}"
    );
    assert!(deliveries(&app, &access, &webhook_id).await.is_empty());
}

async fn rotating_the_secret_signs_with_both_for_a_day(app: TestApp) {
    let email = "rotate@example.com";
    let Subscribed {
        receiver,
        access,
        webhook_id,
        created,
    } = subscribe(&app, email, Some(&["session.revoked"])).await;
    let old_secret = str_of(&created, "secret").to_owned();
    assert_eq!(created["enabled"], true);

    let rotated = app
        .post(
            &format!("{WEBHOOKS}/{webhook_id}/secret-rotations"),
            &json!({}),
            Some(&access),
        )
        .await
        .expect(201);
    let new_secret = str_of(&rotated, "secret").to_owned();
    assert!(new_secret.starts_with("whsec_"));
    assert_ne!(new_secret, old_secret);
    assert_eq!(rotated["webhook_id"], webhook_id.as_str());
    assert!(rotated["rotated_at"].is_string());
    assert!(rotated["previous_secret_expires_at"].is_string());
    let shown = app
        .get(&format!("{WEBHOOKS}/{webhook_id}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(
        shown["previous_secret_expires_at"],
        rotated["previous_secret_expires_at"]
    );

    // A receiver still holding the old secret accepts the delivery: both secrets sign it.
    revoke_a_session(&app, email, &access).await;
    deliver(&app).await;
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert!(received[0].verified, "{:?}", received[0]);
    let signatures: Vec<&str> = received[0].signature.split(' ').collect();
    assert_eq!(signatures.len(), 2, "{}", received[0].signature);
    assert!(
        signatures
            .iter()
            .all(|signature| signature.starts_with("v1,"))
    );
    for (secret, signature) in [(&new_secret, signatures[0]), (&old_secret, signatures[1])] {
        assert!(verify_signature(
            secret,
            &received[0].id,
            &received[0].timestamp,
            &received[0].body,
            signature
        ));
    }
    let listed = deliveries(&app, &access, &webhook_id).await;
    assert_eq!(listed[0]["status"], "delivered");

    // Rotated again: the secret before stops at once, the one it replaced signs beside the
    // newest, so a receiver still on the first secret refuses.
    let third = app
        .post(
            &format!("{WEBHOOKS}/{webhook_id}/secret-rotations"),
            &json!({}),
            Some(&access),
        )
        .await
        .expect(201);
    let third_secret = str_of(&third, "secret").to_owned();
    revoke_a_session(&app, email, &access).await;
    deliver(&app).await;
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert!(!received[1].verified, "the first secret no longer signs");
    for secret in [&third_secret, &new_secret] {
        assert!(verify_signature(
            secret,
            &received[1].id,
            &received[1].timestamp,
            &received[1].body,
            &received[1].signature
        ));
    }
    receiver.trust(&new_secret);
    deliver(&app).await;
    let received = receiver.received();
    assert_eq!(received.len(), 3);
    assert!(received[2].verified);
    assert_eq!(received[2].id, received[1].id);
}

/// `PATCH /webhooks/{id}` of a webhook.
async fn patch(app: &TestApp, access: &str, webhook_id: &str, body: &Value) -> TestResponse {
    app.call(
        Method::PATCH,
        &format!("{WEBHOOKS}/{webhook_id}"),
        Some(body),
        Some(access),
    )
    .await
}

async fn enabling_is_the_only_change_a_patch_makes(app: TestApp) {
    let Subscribed {
        access, webhook_id, ..
    } = subscribe(&app, "patch@example.com", None).await;
    for (body, code) in [
        (json!({}), "required"),
        (json!({ "enabled": null }), "required"),
        (json!({ "enabled": false }), "invalid_value"),
        (json!({ "enabled": "true" }), "invalid_type"),
        (json!({ "enabled": 1 }), "invalid_type"),
    ] {
        let refused = patch(&app, &access, &webhook_id, &body)
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(
            refused["errors"][0]["field"], "enabled",
            "{body}: {refused}"
        );
        assert_eq!(refused["errors"][0]["code"], code, "{body}");
    }
    let refused = patch(&app, &access, &webhook_id, &json!([true])).await;
    assert_eq!(
        refused.status.as_u16(),
        422,
        "{body:?}",
        body = refused.body
    );

    // Enabling an enabled endpoint changes nothing.
    let shown = app
        .get(&format!("{WEBHOOKS}/{webhook_id}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(shown["enabled"], true);
    assert_eq!(shown["disabled_at"], Value::Null);
    let patched = patch(&app, &access, &webhook_id, &json!({ "enabled": true }))
        .await
        .expect(200);
    assert_eq!(patched, shown);

    // Another user's webhook, or none: 404; no token: 401.
    let (_, stranger, _) = app.user("patch-stranger@example.com").await;
    patch(&app, &stranger, &webhook_id, &json!({ "enabled": true }))
        .await
        .expect_problem(404, "not_found");
    patch(
        &app,
        &access,
        &Uuid::now_v7().to_string(),
        &json!({ "enabled": true }),
    )
    .await
    .expect_problem(404, "not_found");
    app.call(
        Method::PATCH,
        &format!("{WEBHOOKS}/{webhook_id}"),
        Some(&json!({ "enabled": true })),
        None,
    )
    .await
    .expect(401);
}

async fn an_endpoint_failing_long_enough_is_disabled_until_enabled(app: TestApp) {
    let email = "disabled@example.com";
    let Subscribed {
        receiver: failing,
        access,
        webhook_id,
        ..
    } = subscribe(&app, email, Some(&["session.revoked"])).await;
    // Another endpoint of the owner hears of the disabling.
    let watcher = Receiver::start().await;
    let created = register(&app, &access, &watcher.url, Some(&["webhook.disabled"])).await;
    watcher.trust(str_of(&created, "secret"));
    failing.answer_with(&[500]);

    // With the failure window at zero, the first failure disables.
    revoke_a_session(&app, email, &access).await;
    let summary = deliver(&app).await;
    assert!(summary.starts_with("delivered 0 "), "{summary}");
    let shown = app
        .get(&format!("{WEBHOOKS}/{webhook_id}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(shown["enabled"], false, "{shown}");
    assert!(shown["disabled_at"].is_string(), "{shown}");
    let listed = deliveries(&app, &access, &webhook_id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["status"], "failed", "its queue is given up");

    // The owner hears of it: a `webhook.disabled` event with the webhook's id.
    deliver(&app).await;
    let heard = received_at_least(&watcher, 1, CEILING).await;
    assert!(heard[0].verified);
    let event = heard[0].json();
    assert_eq!(event["type"], "webhook.disabled");
    assert_eq!(event["data"], json!({ "webhook_id": webhook_id }));

    // Nothing is queued or sent while it is disabled.
    revoke_a_session(&app, email, &access).await;
    deliver(&app).await;
    assert_eq!(failing.received().len(), 1);
    assert_eq!(deliveries(&app, &access, &webhook_id).await.len(), 1);

    // Enabled again by its owner, it receives what is raised from then on.
    let enabled = patch(&app, &access, &webhook_id, &json!({ "enabled": true }))
        .await
        .expect(200);
    assert_eq!(enabled["enabled"], true);
    assert_eq!(enabled["disabled_at"], Value::Null);
    revoke_a_session(&app, email, &access).await;
    let summary = deliver(&app).await;
    assert!(summary.starts_with("delivered 1 "), "{summary}");
    let received = failing.received();
    assert_eq!(received.len(), 2);
    assert!(received[1].verified);
}

/// Ten endpoints of one user that never answer hold the user's four sending slots together
/// (at most two each); another user's delivery goes out meanwhile, long before any of theirs
/// times out.
async fn a_user_with_hanging_endpoints_holds_up_nobody_else(app: TestApp) {
    const HANGING: usize = 10;
    const EVENTS: usize = 3;
    /// The per-user cap of deliveries in flight (`PER_USER_IN_FLIGHT`).
    const PER_USER: usize = 4;
    let hanging_email = "hanging@example.com";
    let (_, hanging_access, _) = app.user(hanging_email).await;
    let mut hanging = Vec::with_capacity(HANGING);
    for _ in 0..HANGING {
        let endpoint = Hanging::start().await;
        let created = register(&app, &hanging_access, &endpoint.url, None).await;
        hanging.push((endpoint, str_of(&created, "id").to_owned()));
    }
    let other_email = "patient@example.com";
    let Subscribed { receiver, .. } =
        subscribe(&app, other_email, Some(&["session.revoked"])).await;
    let jobs = app.service.jobs().spawn();
    first_job_run_over(&app).await;

    for _ in 0..EVENTS {
        log_in_and_out(&app, hanging_email).await;
    }
    // The hanging user's endpoints get four attempts in flight together, and no more.
    let in_flight = |hanging: &[(Hanging, String)]| -> usize {
        hanging
            .iter()
            .map(|(endpoint, _)| endpoint.connections())
            .sum()
    };
    let deadline = tokio::time::Instant::now() + CEILING;
    while in_flight(&hanging) < PER_USER {
        assert!(
            tokio::time::Instant::now() < deadline,
            "attempts in flight: {:?}",
            hanging
                .iter()
                .map(|(endpoint, _)| endpoint.connections())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    log_in_and_out(&app, other_email).await;
    let received = received_at_least(&receiver, 1, CEILING).await;
    assert!(received[0].verified);
    // It came while the hanging endpoints still held their slots: none of their attempts has
    // ended (each ends only at the request timeout), and none got a fifth.
    assert_eq!(in_flight(&hanging), PER_USER, "four in flight per user");
    for (endpoint, webhook_id) in &hanging {
        assert!(
            endpoint.connections() <= 2,
            "at most two in flight per endpoint"
        );
        let listed = deliveries(&app, &hanging_access, webhook_id).await;
        assert_eq!(listed.len(), EVENTS);
        assert!(
            listed.iter().all(|delivery| delivery["attempt_count"] == 0),
            "no attempt of the hanging endpoints ended before the other delivery: {listed:?}"
        );
    }
    drop(hanging);
    jobs.shutdown().await;
}

async fn webhooks_belong_to_their_owner_and_deletion_stops_deliveries(app: TestApp) {
    let email = "owner@example.com";
    let Subscribed {
        receiver,
        access,
        webhook_id,
        ..
    } = subscribe(&app, email, None).await;
    let (_, other_access, _) = app.user("other@example.com").await;

    let path = format!("{WEBHOOKS}/{webhook_id}");
    app.get(&path, Some(&other_access))
        .await
        .expect_problem(404, "not_found");
    app.get(&format!("{path}/deliveries"), Some(&other_access))
        .await
        .expect_problem(404, "not_found");
    app.post(
        &format!("{path}/secret-rotations"),
        &json!({}),
        Some(&other_access),
    )
    .await
    .expect_problem(404, "not_found");
    app.delete(&path, None, Some(&other_access))
        .await
        .expect_problem(404, "not_found");
    let others = app.get(WEBHOOKS, Some(&other_access)).await.expect(200);
    assert_eq!(others["total_count"], 0);
    app.get(WEBHOOKS, None)
        .await
        .expect_problem(401, "unauthorized");
    app.get(&format!("{WEBHOOKS}/not-a-uuid"), Some(&access))
        .await
        .expect_problem(422, "validation_failed");

    // Another user's events never reach this endpoint.
    revoke_a_session(&app, "other@example.com", &other_access).await;
    deliver(&app).await;
    assert!(receiver.received().is_empty());

    app.delete(&path, None, Some(&access)).await.expect(204);
    app.get(&path, Some(&access))
        .await
        .expect_problem(404, "not_found");
    app.delete(&path, None, Some(&access))
        .await
        .expect_problem(404, "not_found");
    revoke_a_session(&app, email, &access).await;
    deliver(&app).await;
    assert!(
        receiver.received().is_empty(),
        "a deleted webhook receives nothing"
    );
}

async fn private_addresses_and_bad_registrations_are_refused(app: TestApp) {
    let (_, access, _) = app.user("ssrf@example.com").await;
    for url in [
        "http://127.0.0.1:9000/hooks",
        "http://[::1]:9000/hooks",
        "http://10.0.0.5/hooks",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:192.168.0.1]/hooks",
        "http://localhost:9000/hooks",
    ] {
        let refused = app
            .post(WEBHOOKS, &json!({ "url": url }), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(refused["errors"][0]["field"], "url", "{url}: {refused}");
        assert_eq!(refused["errors"][0]["code"], "private_address", "{url}");
    }
    for url in [
        json!("ftp://hooks.example.com/x"),
        json!("/relative"),
        json!("https://user:pass@hooks.example.com/x"),
        json!(format!("https://hooks.example.com/{}", "a".repeat(2048))),
        json!(42),
    ] {
        let refused = app
            .post(WEBHOOKS, &json!({ "url": url }), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(refused["errors"][0]["field"], "url", "{url}: {refused}");
    }
    let refused = app
        .post(WEBHOOKS, &json!({}), Some(&access))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(refused["errors"][0]["code"], "required");
    let refused = app
        .post(
            WEBHOOKS,
            &json!({ "url": "http://127.0.0.1/x", "event_types": ["session.revoked", "user.exploded"] }),
            Some(&access),
        )
        .await
        .expect_problem(422, "validation_failed");
    let fields: Vec<&str> = refused["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|error| error["field"].as_str())
        .collect();
    assert_eq!(
        fields,
        ["url", "event_types[1]"],
        "every field error at once"
    );
    assert_eq!(refused["errors"][1]["code"], "unknown_event_type");
    app.post(
        WEBHOOKS,
        &json!({ "url": "https://hooks.example.com/x", "event_types": "session.revoked" }),
        Some(&access),
    )
    .await
    .expect_problem(422, "validation_failed");

    // A public host is accepted; duplicates in event_types collapse.
    let created = register(
        &app,
        &access,
        "https://hooks.example.com/aggregation?token=abc",
        Some(&["session.revoked", "import.completed", "session.revoked"]),
    )
    .await;
    assert_eq!(
        created["event_types"],
        json!(["session.revoked", "import.completed"])
    );
    let listed = app.get(WEBHOOKS, Some(&access)).await.expect(200);
    assert_eq!(listed["total_count"], 1);
}

async fn the_number_of_endpoints_is_capped(app: TestApp) {
    let (_, access, _) = app.user("many@example.com").await;
    for index in 0..10 {
        register(
            &app,
            &access,
            &format!("https://hooks.example.com/{index}"),
            None,
        )
        .await;
    }
    app.post(
        WEBHOOKS,
        &json!({ "url": "https://hooks.example.com/10" }),
        Some(&access),
    )
    .await
    .expect_problem(409, "conflict");
    let listed = app.get(WEBHOOKS, Some(&access)).await.expect(200);
    assert_eq!(listed["total_count"], 10);
}

/// Spellings of loopback addresses that WHATWG parsing normalizes (and the HTTP client would
/// dial): refused where only public addresses are allowed, like every [`METADATA`] one.
const LOOPBACK: &[&str] = &[
    "http://127.0.0.1:9000/hooks",
    "http://2130706433:9000/hooks",
    "http://0x7f000001:9000/hooks",
    "http://0x7f.0.0.1:9000/hooks",
    "http://127.1:9000/hooks",
    "http://127.0.1:9000/hooks",
    "http://0177.0.0.1:9000/hooks",
    "http://0177.0.0.01:9000/hooks",
    "http://017700000001:9000/hooks",
    "http://127.0.0.1.:9000/hooks",
    "http://127%2e0%2e0%2e1:9000/hooks",
    "http://127\u{3002}0\u{3002}0\u{3002}1:9000/hooks",
    "http://0.0.0.0:9000/hooks",
    "http://[::1]:9000/hooks",
    "http://[0:0:0:0:0:0:0:1]:9000/hooks",
    "http://[::ffff:127.0.0.1]:9000/hooks",
    "http://[::ffff:7f00:1]:9000/hooks",
    "http://[::127.0.0.1]:9000/hooks",
    "http://[64:ff9b::127.0.0.1]:9000/hooks",
    "http://[2002:7f00:1::1]:9000/hooks",
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:9000/hooks",
    "http://localhost:9000/hooks",
    "http://LOCALHOST:9000/hooks",
    "http://localhost.:9000/hooks",
    "http://Api.LocalHost.:9000/hooks",
];

/// Spellings of cloud metadata (and unspecified) addresses: refused even where private
/// addresses are allowed.
const METADATA: &[&str] = &[
    "http://0:9000/hooks",
    "http://[::]:9000/hooks",
    "http://169.254.169.254/latest/meta-data",
    "http://2852039166/latest/meta-data",
    "http://0xa9fea9fe/latest/meta-data",
    "http://0251.0376.0251.0376/latest/meta-data",
    "http://169.254.169.254./latest/meta-data",
    "http://[::ffff:169.254.169.254]/latest/meta-data",
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
    "http://[64:ff9b:1::a9fe:a9fe]/latest/meta-data",
    "http://[2002:a9fe:a9fe::]/latest/meta-data",
    "http://[fd00:ec2::254]/latest/meta-data",
    "http://100.100.100.200/latest/meta-data",
    "http://1684301000/latest/meta-data",
    "http://metadata.google.internal/computeMetadata/v1/",
];

/// Registers `url` and expects 422 `private_address` on `url`.
async fn refused_as_private(app: &TestApp, access: &str, url: &str) {
    let refused = app
        .post(WEBHOOKS, &json!({ "url": url }), Some(access))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(refused["errors"][0]["field"], "url", "{url}: {refused}");
    assert_eq!(refused["errors"][0]["code"], "private_address", "{url}");
}

async fn every_spelling_of_loopback_and_metadata_is_refused(app: TestApp) {
    let (_, access, _) = app.user("spellings@example.com").await;
    for url in LOOPBACK.iter().chain(METADATA) {
        refused_as_private(&app, &access, url).await;
    }
    // Spellings WHATWG parsing rewrites into another host are not accepted at all.
    for url in [
        "http:\\\\127.0.0.1\\hooks",
        "http://127.0.0.1\\@hooks.example.com/",
        "https:///127.0.0.1/hooks",
        "http://hooks.example.com@127.0.0.1/hooks",
        "http://[fe80::1%25eth0]/hooks",
        "http://0x100000000/hooks",
    ] {
        let refused = app
            .post(WEBHOOKS, &json!({ "url": url }), Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(refused["errors"][0]["code"], "invalid_url", "{url}");
    }
    let listed = app.get(WEBHOOKS, Some(&access)).await.expect(200);
    assert_eq!(listed["total_count"], 0);
    // Names that only look alike are registered (what they resolve to is judged when sending).
    for url in [
        "https://localhost.example.com/hooks",
        "https://0x7f.example.com/hooks",
        "https://HOOKS.example.com./hooks",
    ] {
        register(&app, &access, url, None).await;
    }
}

async fn metadata_addresses_are_refused_even_where_private_ones_are_allowed(app: TestApp) {
    let (_, access, _) = app.user("metadata@example.com").await;
    for url in METADATA {
        refused_as_private(&app, &access, url).await;
    }
    for url in [
        "http://2130706433:9000/hooks",
        "http://127.1:9000/hooks",
        "http://[::1]:9000/hooks",
        "http://10.0.0.5/hooks",
        "http://169.254.1.1/hooks",
        "http://localhost:9000/hooks",
    ] {
        register(&app, &access, url, None).await;
    }
}

async fn an_instance_without_private_access_never_sends_there(app: TestApp) {
    let email = "guarded@example.com";
    let (_, access, _) = app.user(email).await;
    // Registered where private addresses are allowed, each a spelling of a loopback receiver...
    let mut endpoints = Vec::new();
    for spelling in [
        "127.0.0.1",
        "2130706433",
        "0x7f.1",
        "0177.0.0.01",
        "127.0.0.1.",
        "localhost",
    ] {
        let receiver = Receiver::start().await;
        let url = receiver.url.replacen("127.0.0.1", spelling, 1);
        let created = register(&app, &access, &url, None).await;
        receiver.trust(str_of(&created, "secret"));
        endpoints.push((url, receiver, str_of(&created, "id").to_owned()));
    }
    revoke_a_session(&app, email, &access).await;

    // ...and delivered by an instance over the same store that does not allow them: the
    // delivery-time guard refuses every address, nothing is sent, and the attempt records only
    // `connect_failed`.
    let guarded = SharedDatabase::service(
        &app.store,
        public_only().with_webhook_retry_delays(Duration::ZERO, Duration::from_secs(60)),
    );
    let outcome = guarded
        .jobs()
        .run_once(DELIVER_WEBHOOKS)
        .await
        .expect("the job exists");
    let expected = format!("{} to retry", endpoints.len());
    assert!(
        matches!(&outcome, RunOutcome::Succeeded(summary) if summary.contains(&expected)),
        "{outcome}"
    );
    for (url, receiver, webhook_id) in &endpoints {
        assert!(receiver.received().is_empty(), "{url}");
        let listed = deliveries(&app, &access, webhook_id).await;
        let attempt = &listed[0]["attempts"][0];
        assert_eq!(attempt["status_code"], Value::Null, "{url}");
        assert_eq!(attempt["error"], "connect_failed", "{url}");
        assert_eq!(listed[0]["status"], "pending", "{url}");
    }

    // The instance that allows them delivers the retries, whatever the spelling.
    deliver(&app).await;
    for (url, receiver, webhook_id) in &endpoints {
        let received = receiver.received();
        assert_eq!(received.len(), 1, "{url}");
        assert!(received[0].verified, "{url}");
        let listed = deliveries(&app, &access, webhook_id).await;
        assert_eq!(listed[0]["status"], "delivered", "{url}");
        assert_eq!(listed[0]["attempts"][1]["error"], Value::Null, "{url}");
    }
}

/// Waits (at most `ceiling`) until `receiver` got `count` requests; what it got.
async fn received_at_least(receiver: &Receiver, count: usize, ceiling: Duration) -> Vec<Received> {
    let deadline = tokio::time::Instant::now() + ceiling;
    loop {
        let received = receiver.received();
        if received.len() >= count {
            return received;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {count} deliveries arrived within {ceiling:?}",
            received.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The deliveries list of a webhook once none is pending (at most [`CEILING`]).
async fn settled_deliveries(app: &TestApp, access: &str, webhook_id: &str) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + CEILING;
    loop {
        let listed = deliveries(app, access, webhook_id).await;
        if listed
            .iter()
            .all(|delivery| delivery["status"] != "pending")
            || tokio::time::Instant::now() >= deadline
        {
            return listed;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the schedule's first `deliver_webhooks` run (due at once: it never ran) has
/// finished, so that the job's next run is an hour away.
async fn first_job_run_over(app: &TestApp) {
    let deadline = tokio::time::Instant::now() + CEILING;
    loop {
        let finished = app
            .store
            .job_runs()
            .await
            .expect("job records")
            .iter()
            .any(|record| record.name == DELIVER_WEBHOOKS && record.last_finished_at.is_some());
        if finished {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "the job never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many runs of `deliver_webhooks` are recorded.
async fn job_runs(app: &TestApp) -> i64 {
    app.store
        .job_runs()
        .await
        .expect("job records")
        .iter()
        .find(|record| record.name == DELIVER_WEBHOOKS)
        .map_or(0, |record| record.runs)
}

/// Logs `email` in and out: one `session.revoked` event (reason `logout`).
async fn log_in_and_out(app: &TestApp, email: &str) {
    let tokens = app.login(email, PASSWORD).await;
    app.delete(
        "/api/v1/sessions/current",
        Some(&json!({ "refresh_token": str_of(&tokens, "refresh_token") })),
        Some(str_of(&tokens, "access_token")),
    )
    .await
    .expect(204);
}

async fn deliveries_start_when_the_event_is_committed(app: TestApp) {
    let email = "prompt@example.com";
    let Subscribed {
        receiver,
        access,
        webhook_id,
        ..
    } = subscribe(&app, email, Some(&["session.revoked"])).await;
    let jobs = app.service.jobs().spawn();
    first_job_run_over(&app).await;
    assert_eq!(job_runs(&app).await, 1);

    log_in_and_out(&app, email).await;
    let received = received_at_least(&receiver, 1, CEILING).await;
    assert_eq!(received.len(), 1);
    assert!(received[0].verified, "{:?}", received[0]);
    let body = received[0].json();
    assert_eq!(body["type"], "session.revoked");
    assert_eq!(body["data"]["reason"], "logout");
    // The receiver answered; the attempt is recorded right after the answer arrives.
    let listed = settled_deliveries(&app, &access, &webhook_id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["status"], "delivered");
    assert_eq!(listed[0]["attempt_count"], 1);
    assert_eq!(job_runs(&app).await, 1, "the job did not run again");

    // Stopped with the jobs: a later event waits for the next runner.
    jobs.shutdown().await;
    log_in_and_out(&app, email).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        receiver.received().len(),
        1,
        "nothing sent after the shutdown"
    );
    let summary = deliver(&app).await;
    assert!(summary.starts_with("delivered 1 "), "{summary}");
    assert_eq!(receiver.received().len(), 2);
}

/// Creates `count` live sessions of the user directly in the store (no password hashing);
/// their ids.
async fn sessions_of(store: &Arc<dyn Store>, user_id: Uuid, count: usize) -> Vec<Uuid> {
    let at = now();
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let id = Uuid::now_v7();
        let session = NewSession {
            id,
            user_id,
            device_info: None,
            ip_address: None,
            user_agent: None,
            created_at: at,
            expires_at: at + TimeDelta::days(1),
        };
        let token = NewRefreshToken {
            digest: [Uuid::new_v4().as_bytes().as_slice(), id.as_bytes()].concat(),
            session_id: id,
            user_id,
            token_version: 0,
            issued_at: at,
            expires_at: at + TimeDelta::days(1),
        };
        store
            .create_session(&session, &token)
            .await
            .expect("session");
        ids.push(id);
    }
    ids
}

async fn a_burst_of_events_is_delivered_exactly_once(app: TestApp) {
    const SINGLE: usize = 200;
    // Many more than one endpoint has in flight at once, raised at once.
    const AT_ONCE: usize = 450;
    let email = "burst@example.com";
    let Subscribed {
        receiver, access, ..
    } = subscribe(&app, email, Some(&["session.revoked"])).await;
    let user_id = app
        .store
        .user_by_email(email)
        .await
        .expect("store")
        .expect("the user")
        .id;
    let first = app.service.jobs().spawn();
    first_job_run_over(&app).await;

    // One revocation of many sessions: its events are all committed (and due) before the
    // first pass claims, and the one endpoint takes at most two at a time, so they all
    // arrive only because a pass goes on claiming as its attempts are answered.
    let at_once = sessions_of(&app.store, user_id, AT_ONCE).await;
    let bulk = app
        .delete("/api/v1/sessions", None, Some(&access))
        .await
        .expect(200);
    assert_eq!(bulk["revoked_count"], AT_ONCE);
    received_at_least(&receiver, AT_ONCE, CEILING * 3).await;

    // Single events with a second runner, as a second instance would have: the passes of
    // both race for every delivery.
    let second = app.service.jobs().spawn();
    let single = sessions_of(&app.store, user_id, SINGLE).await;
    for id in &single {
        app.delete(&format!("/api/v1/sessions/{id}"), None, Some(&access))
            .await
            .expect(204);
    }
    let total = SINGLE + AT_ONCE;
    received_at_least(&receiver, total, CEILING * 3).await;
    // Anything sent twice would arrive about now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received = receiver.received();
    assert!(received.iter().all(|request| request.verified));
    let ids: HashSet<&str> = received.iter().map(|request| request.id.as_str()).collect();
    assert_eq!(
        (received.len(), ids.len()),
        (total, total),
        "every event exactly once"
    );
    let revoked: HashSet<String> = received
        .iter()
        .map(|request| str_of(&request.json()["data"], "session_id").to_owned())
        .collect();
    let expected: HashSet<String> = single
        .iter()
        .chain(&at_once)
        .map(ToString::to_string)
        .collect();
    assert_eq!(revoked, expected);
    assert_eq!(job_runs(&app).await, 1, "the job did not run again");
    first.shutdown().await;
    second.shutdown().await;
}

/// A claim at `at` of at most `limit` deliveries, however many of one endpoint.
fn unlimited_per_endpoint(at: DateTime<Utc>, limit: u32) -> DeliveryClaim {
    DeliveryClaim {
        now: at,
        due_by: at,
        lease_until: at + TimeDelta::minutes(5),
        limit,
        per_endpoint: u32::MAX,
        per_user: u32::MAX,
    }
}

/// Two pools over one database (two instances): claims racing for the same due deliveries
/// never hand one out twice while its lease holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_never_hand_out_one_delivery_twice() {
    const DELIVERIES: usize = 300;
    let shared = SharedDatabase::open().await;
    let at = now();
    let user_id = Uuid::now_v7();
    shared
        .first
        .create_user(&NewUser {
            id: user_id,
            email: "claims@example.com".to_owned(),
            email_normalized: "claims@example.com".to_owned(),
            password_hash: "not used".to_owned(),
            created_at: at,
        })
        .await
        .expect("user");
    let created = shared
        .first
        .create_webhook_endpoint(
            &NewWebhookEndpoint {
                id: Uuid::now_v7(),
                user_id,
                url: "https://hooks.example.com/x".to_owned(),
                event_types: Vec::new(),
                encrypted_secret: vec![0; 44],
                secret_key_id: "test".to_owned(),
                created_at: at,
            },
            10,
        )
        .await
        .expect("endpoint");
    assert!(created);
    sessions_of(&shared.first, user_id, DELIVERIES).await;
    let events = shared
        .first
        .revoke_all_sessions(user_id, None, "claims", now())
        .await
        .expect("revoked");
    assert_eq!(events.len(), DELIVERIES);

    let claimed = Arc::new(Mutex::new(Vec::new()));
    let claimers: Vec<_> = (0..8)
        .map(|index| {
            let store = if index % 2 == 0 {
                shared.first.clone()
            } else {
                shared.second.clone()
            };
            let claimed = claimed.clone();
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + CEILING;
                while claimed.lock().expect("claims").len() < DELIVERIES {
                    assert!(tokio::time::Instant::now() < deadline, "claims stalled");
                    let at = now();
                    let batch = store
                        .claim_webhook_deliveries(&unlimited_per_endpoint(at, 7))
                        .await
                        .expect("claim");
                    claimed.lock().expect("claims").extend(
                        batch
                            .into_iter()
                            .map(|delivery| (delivery.endpoint_id, delivery.event_id)),
                    );
                }
            })
        })
        .collect();
    for claimer in claimers {
        claimer.await.expect("claimer");
    }
    let claimed = claimed.lock().expect("claims").clone();
    let distinct: HashSet<_> = claimed.iter().collect();
    assert_eq!(
        (claimed.len(), distinct.len()),
        (DELIVERIES, DELIVERIES),
        "on {:?}",
        shared.backend
    );
    // Everything is leased now: one more claim gets nothing.
    let at = now();
    let more = shared
        .second
        .claim_webhook_deliveries(&unlimited_per_endpoint(at, 7))
        .await
        .expect("claim");
    assert!(more.is_empty());
    shared.cleanup().await;
}

/// Two pools over one database (two instances): claims racing with the per-endpoint cap never
/// lease more than that cap of one endpoint's deliveries at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_keep_the_per_endpoint_cap() {
    const ENDPOINTS: usize = 3;
    const EVENTS: usize = 20;
    const CAP: u32 = 2;
    let shared = SharedDatabase::open().await;
    let at = now();
    let user_id = Uuid::now_v7();
    shared
        .first
        .create_user(&NewUser {
            id: user_id,
            email: "capped@example.com".to_owned(),
            email_normalized: "capped@example.com".to_owned(),
            password_hash: "not used".to_owned(),
            created_at: at,
        })
        .await
        .expect("user");
    for index in 0..ENDPOINTS {
        let created = shared
            .first
            .create_webhook_endpoint(
                &NewWebhookEndpoint {
                    id: Uuid::now_v7(),
                    user_id,
                    url: format!("https://hooks.example.com/{index}"),
                    event_types: Vec::new(),
                    encrypted_secret: vec![0; 44],
                    secret_key_id: "test".to_owned(),
                    created_at: at,
                },
                10,
            )
            .await
            .expect("endpoint");
        assert!(created);
    }
    sessions_of(&shared.first, user_id, EVENTS).await;
    shared
        .first
        .revoke_all_sessions(user_id, None, "capped", now())
        .await
        .expect("revoked");

    let claimers: Vec<_> = (0..8)
        .map(|index| {
            let store = if index % 2 == 0 {
                shared.first.clone()
            } else {
                shared.second.clone()
            };
            tokio::spawn(async move {
                let mut claimed = Vec::new();
                for _ in 0..5 {
                    let at = now();
                    let batch = store
                        .claim_webhook_deliveries(&DeliveryClaim {
                            now: at,
                            due_by: at,
                            lease_until: at + TimeDelta::minutes(5),
                            limit: 4,
                            per_endpoint: CAP,
                            per_user: u32::MAX,
                        })
                        .await
                        .expect("claim");
                    claimed.extend(batch.into_iter().map(|delivery| delivery.endpoint_id));
                }
                claimed
            })
        })
        .collect();
    let mut per_endpoint: std::collections::HashMap<Uuid, usize> = std::collections::HashMap::new();
    for claimer in claimers {
        for endpoint_id in claimer.await.expect("claimer") {
            *per_endpoint.entry(endpoint_id).or_default() += 1;
        }
    }
    assert_eq!(per_endpoint.len(), ENDPOINTS, "on {:?}", shared.backend);
    assert!(
        per_endpoint.values().all(|count| *count == CAP as usize),
        "{per_endpoint:?} on {:?}",
        shared.backend
    );
    shared.cleanup().await;
}
