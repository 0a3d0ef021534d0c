//! Conformance: `GET /api/v1/events`, the caller's events as server-sent events. Every frame is
//! read while the stream is still open, which proves that no front buffers the body.

use std::time::Duration;

use aggregation_tests::{
    BANK_QFX, PASSWORD, Setup, SseBlock, SseEvent, TestApp, TestStream, conformance, upload,
};
use serde_json::Value;

conformance!(
    events_arrive_while_the_stream_is_open,
    an_import_reports_its_counts_on_the_stream,
    another_users_events_never_arrive,
    last_event_id_replays_exactly_the_missed_events,
    bad_requests_get_problems,
);

mod heartbeat {
    use super::*;
    conformance!(setup = heartbeat_setup; idle_streams_send_heartbeats);
}

mod capped {
    use super::*;
    conformance!(setup = capped_setup; the_stream_cap_frees_a_slot_when_a_client_leaves);
}

const EVENTS: &str = "/api/v1/events";

/// Opens the caller's stream and reads its opening comment.
async fn open(app: &TestApp, access: &str, last_event_id: Option<&str>) -> TestStream {
    let headers: Vec<(&str, &str)> = last_event_id
        .map(|id| ("last-event-id", id))
        .into_iter()
        .collect();
    let mut stream = app.open_stream(EVENTS, Some(access), &headers).await;
    assert_eq!(stream.status.as_u16(), 200, "the stream opens");
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    assert_eq!(stream.header("cache-control"), Some("no-cache"));
    assert_eq!(
        stream.next_block().await,
        Some(SseBlock::Comment("connected".to_owned()))
    );
    stream
}

/// Raises one `session.revoked` event for the user: logs in once more and logs that session
/// out. The revoked session's id.
async fn revoke_a_session(app: &TestApp, email: &str) -> String {
    let tokens = app.login(email, PASSWORD).await;
    let access = tokens["access_token"].as_str().expect("access");
    let list = app
        .get("/api/v1/sessions?active_only=false", Some(access))
        .await
        .expect(200);
    let session = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|session| session["is_current"] == true)
        .and_then(|session| session["id"].as_str())
        .expect("the current session")
        .to_owned();
    let refresh = serde_json::json!({"refresh_token": tokens["refresh_token"]});
    app.delete("/api/v1/sessions/current", Some(&refresh), Some(access))
        .await
        .expect(204);
    session
}

#[track_caller]
fn assert_revoked(event: &SseEvent, session: &str, user: &str) {
    assert_eq!(event.event, "session.revoked", "{event:?}");
    assert_eq!(event.data["id"], Value::from(event.id.as_str()));
    assert_eq!(event.data["type"], "session.revoked");
    assert_eq!(event.data["user_id"], user);
    assert_eq!(event.data["data"]["session_id"], session, "{event:?}");
    assert!(event.data["occurred_at"].as_str().is_some());
}

async fn events_arrive_while_the_stream_is_open(app: TestApp) {
    let (ada, access, _) = app.user("ada@example.com").await;
    let mut stream = open(&app, &access, None).await;
    let first = revoke_a_session(&app, "ada@example.com").await;
    assert_revoked(&stream.next_event().await, &first, &ada);
    let second = revoke_a_session(&app, "ada@example.com").await;
    let event = stream.next_event().await;
    assert_revoked(&event, &second, &ada);
}

async fn an_import_reports_its_counts_on_the_stream(app: TestApp) {
    let (ada, access, _) = app.user("ada@example.com").await;
    let mut stream = open(&app, &access, None).await;
    let imported = upload(&app, "statement.qfx", BANK_QFX, &access)
        .await
        .expect(201);
    let event = stream.next_event().await;
    assert_eq!(event.event, "import.completed", "{event:?}");
    assert_eq!(event.data["user_id"], Value::from(ada.as_str()));
    assert_eq!(
        event.data["data"]["connection_ids"][0], imported["connection_id"],
        "{event:?}"
    );
    assert_eq!(
        event.data["data"]["counts"]["transactions"]["created"], imported["transactions_created"],
        "{event:?}"
    );
}

async fn another_users_events_never_arrive(app: TestApp) {
    let (ada, ada_access, _) = app.user("ada@example.com").await;
    let (_, bob_access, _) = app.user("bob@example.com").await;
    let mut ada_stream = open(&app, &ada_access, None).await;
    let mut bob_stream = open(&app, &bob_access, None).await;
    revoke_a_session(&app, "bob@example.com").await;
    // Bob's stream has it; Ada's next event is her own.
    assert_eq!(bob_stream.next_event().await.event, "session.revoked");
    let own = revoke_a_session(&app, "ada@example.com").await;
    assert_revoked(&ada_stream.next_event().await, &own, &ada);
}

async fn last_event_id_replays_exactly_the_missed_events(app: TestApp) {
    let (ada, access, _) = app.user("ada@example.com").await;
    let mut stream = open(&app, &access, None).await;
    revoke_a_session(&app, "ada@example.com").await;
    let seen = stream.next_event().await;
    drop(stream);
    let missed = [
        revoke_a_session(&app, "ada@example.com").await,
        revoke_a_session(&app, "ada@example.com").await,
    ];
    let mut resumed = open(&app, &access, Some(&seen.id)).await;
    let replayed = [resumed.next_event().await, resumed.next_event().await];
    assert_revoked(&replayed[0], &missed[0], &ada);
    assert_revoked(&replayed[1], &missed[1], &ada);
    assert!(replayed[0].id < replayed[1].id, "in id order");
    // Nothing else was replayed: the next frame is the next live event.
    let live = revoke_a_session(&app, "ada@example.com").await;
    let live_event = resumed.next_event().await;
    assert_revoked(&live_event, &live, &ada);
    // Resuming from the newest event replays nothing: the next frame is the next event.
    drop(resumed);
    let mut caught_up = open(&app, &access, Some(&live_event.id)).await;
    let next = revoke_a_session(&app, "ada@example.com").await;
    assert_revoked(&caught_up.next_event().await, &next, &ada);
}

async fn bad_requests_get_problems(app: TestApp) {
    let anonymous = app.open_stream(EVENTS, None, &[]).await;
    anonymous
        .into_response()
        .await
        .expect_problem(401, "unauthorized");
    let (_, access, _) = app.user("ada@example.com").await;
    let malformed = app
        .open_stream(EVENTS, Some(&access), &[("last-event-id", "42")])
        .await;
    let body = malformed
        .into_response()
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "header.last-event-id", "{body}");
    // An empty one means none.
    drop(open(&app, &access, Some("")).await);
}

fn heartbeat_setup() -> Setup {
    Setup {
        config: aggregation_tests::test_config()
            .with_event_stream_heartbeat(Duration::from_millis(50)),
        ..Setup::default()
    }
}

async fn idle_streams_send_heartbeats(app: TestApp) {
    let (_, access, _) = app.user("ada@example.com").await;
    let mut stream = open(&app, &access, None).await;
    for _ in 0..2 {
        assert_eq!(
            stream.next_block().await,
            Some(SseBlock::Comment("heartbeat".to_owned()))
        );
    }
}

fn capped_setup() -> Setup {
    Setup {
        config: aggregation_tests::test_config()
            .with_event_streams_per_user(2)
            // Heartbeats make the servers notice a client that left (a write fails).
            .with_event_stream_heartbeat(Duration::from_millis(50)),
        ..Setup::default()
    }
}

async fn the_stream_cap_frees_a_slot_when_a_client_leaves(app: TestApp) {
    let (_, access, _) = app.user("ada@example.com").await;
    let (_, bob_access, _) = app.user("bob@example.com").await;
    let first = open(&app, &access, None).await;
    let _second = open(&app, &access, None).await;
    let refused = app.open_stream(EVENTS, Some(&access), &[]).await;
    let refused = refused.into_response().await;
    let body = refused.expect_problem(429, "rate_limit_exceeded");
    assert!(refused.header("retry-after").is_some());
    assert!(body["retry_after"].as_u64().is_some_and(|secs| secs >= 1));
    // The cap is per user.
    let _bob = open(&app, &bob_access, None).await;
    // A client leaves: its slot frees once the server notices (at once for the bare
    // service, at the next heartbeat write behind a socket).
    drop(first);
    let mut attempts = 0;
    loop {
        let retry = app.open_stream(EVENTS, Some(&access), &[]).await;
        if retry.status.as_u16() == 200 {
            break;
        }
        retry
            .into_response()
            .await
            .expect_problem(429, "rate_limit_exceeded");
        attempts += 1;
        assert!(
            attempts < 200,
            "the slot of the closed stream is never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
