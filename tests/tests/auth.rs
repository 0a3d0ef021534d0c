//! Conformance: registration, email verification, login, refresh, logout and password reset.

use std::time::Duration;

use aggregation_core::Config;
use aggregation_tests::{PASSWORD, TestApp, conformance, test_config};
use http::Method;
use serde_json::json;

conformance!(
    register_sends_a_verification_email,
    register_refuses_a_taken_email_case_insensitively,
    register_validates_every_field,
    malformed_requests_are_422,
    login_requires_a_verified_email,
    verification_tokens_are_single_use,
    resend_verification_always_answers_the_same,
    login_failures_are_indistinguishable,
    login_returns_session_tokens,
    concurrent_refresh_succeeds_exactly_once,
    reuse_within_the_interval_keeps_the_session,
    refresh_failures_are_401,
    logout_revokes_only_the_refresh_token,
    password_reset_flow,
    password_reset_failures,
    password_reset_emails_are_capped,
    common_passwords_are_refused,
    logout_racing_refresh_never_fails,
);

async fn register_sends_a_verification_email(app: TestApp) {
    let body = app
        .post(
            "/api/v1/users",
            &json!({"email": "  Ada@Example.com ", "password": PASSWORD}),
            None,
        )
        .await
        .expect(201);
    assert_eq!(body["email"], "Ada@Example.com");
    assert!(body["id"].as_str().is_some_and(|id| id.len() == 36));
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("verification"))
    );
    let email = app.email("Ada@Example.com", 1).await;
    assert!(aggregation_tests::extract_hex_token(&email.text).is_some());
}

async fn register_refuses_a_taken_email_case_insensitively(app: TestApp) {
    app.register("grace@example.com").await;
    app.post(
        "/api/v1/users",
        &json!({"email": "GRACE@example.com", "password": PASSWORD}),
        None,
    )
    .await
    .expect_problem(409, "conflict");
}

async fn register_validates_every_field(app: TestApp) {
    let body = app
        .post(
            "/api/v1/users",
            &json!({"email": "not-an-email", "password": "short"}),
            None,
        )
        .await
        .expect_problem(422, "validation_failed");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert_eq!(fields, ["email", "password"]);
    for weak in [
        "alllowercase1!",
        "ALLUPPER1!",
        "NoDigits!!",
        "NoSpecial11",
        &"Aa1!".repeat(33),
    ] {
        let body = app
            .post(
                "/api/v1/users",
                &json!({"email": "weak@example.com", "password": weak}),
                None,
            )
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(body["errors"][0]["field"], "password");
    }
    let body = app
        .post("/api/v1/users", &json!({}), None)
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"].as_array().map(Vec::len), Some(2));
    assert_eq!(body["errors"][0]["code"], "required");
    app.post(
        "/api/v1/users",
        &json!({"email": 5, "password": PASSWORD}),
        None,
    )
    .await
    .expect_problem(422, "validation_failed");
    assert!(app.mailer.sent().is_empty());
}

async fn malformed_requests_are_422(app: TestApp) {
    let raw = |content_type: Option<&'static str>, body: &'static str| {
        let mut builder = http::Request::builder()
            .method(Method::POST)
            .uri("/api/v1/sessions");
        if let Some(content_type) = content_type {
            builder = builder.header("content-type", content_type);
        }
        builder
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                body.as_bytes(),
            )))
            .expect("request")
    };
    let body = app
        .send(raw(Some("application/json"), "{\"email\": "))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "body");
    assert_eq!(body["errors"][0]["code"], "malformed_json");
    let body = app
        .send(raw(Some("text/plain"), "{}"))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "header.content-type");
    app.send(raw(None, "{}"))
        .await
        .expect_problem(422, "validation_failed");
    app.send(raw(Some("application/json"), "[1, 2]"))
        .await
        .expect_problem(422, "validation_failed");
    app.send(raw(Some("application/json"), ""))
        .await
        .expect_problem(422, "validation_failed");
    let body = app
        .post(
            "/api/v1/sessions",
            &json!({"email": "a@example.com", "password": "x".repeat(129)}),
            None,
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "password");
    assert_eq!(body["errors"][0]["code"], "too_long");
}

async fn login_requires_a_verified_email(app: TestApp) {
    app.register("unverified@example.com").await;
    let body = app
        .post(
            "/api/v1/sessions",
            &json!({"email": "unverified@example.com", "password": PASSWORD}),
            None,
        )
        .await
        .expect_problem(403, "forbidden");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("verified"))
    );
    // The 403 only comes after a correct password.
    app.post(
        "/api/v1/sessions",
        &json!({"email": "unverified@example.com", "password": "Wrong-passw0rd"}),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
}

async fn verification_tokens_are_single_use(app: TestApp) {
    app.register("linus@example.com").await;
    let token = app.email_token("linus@example.com", 1).await;
    let body = app
        .post(
            "/api/v1/email-verifications",
            &json!({"token": token}),
            None,
        )
        .await
        .expect(201);
    assert!(body["message"].is_string());
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": token}),
        None,
    )
    .await
    .expect_problem(400, "command_validation_failed");
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": "ab".repeat(32)}),
        None,
    )
    .await
    .expect_problem(404, "not_found");
    let body = app
        .post(
            "/api/v1/email-verifications",
            &json!({"token": "abc"}),
            None,
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "token");
    app.login("linus@example.com", PASSWORD).await;
}

async fn resend_verification_always_answers_the_same(app: TestApp) {
    app.register("margaret@example.com").await;
    let known = app
        .post(
            "/api/v1/email-verification-tokens",
            &json!({"email": "margaret@example.com"}),
            None,
        )
        .await
        .expect(201);
    let unknown = app
        .post(
            "/api/v1/email-verification-tokens",
            &json!({"email": "nobody@example.com"}),
            None,
        )
        .await
        .expect(201);
    assert_eq!(known, unknown);
    let token = app.email_token("margaret@example.com", 2).await;
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": token}),
        None,
    )
    .await
    .expect(201);
}

async fn login_failures_are_indistinguishable(app: TestApp) {
    app.register_verified("barbara@example.com").await;
    let wrong_password = app
        .post(
            "/api/v1/sessions",
            &json!({"email": "barbara@example.com", "password": "Wrong-passw0rd"}),
            None,
        )
        .await;
    let unknown_email = app
        .post(
            "/api/v1/sessions",
            &json!({"email": "nobody@example.com", "password": "Wrong-passw0rd"}),
            None,
        )
        .await;
    let first = wrong_password.expect_problem(401, "unauthorized");
    let second = unknown_email.expect_problem(401, "unauthorized");
    assert_eq!(first["detail"], second["detail"]);
    assert_eq!(first["detail"], "Email or password is incorrect.");
    assert_eq!(wrong_password.header("www-authenticate"), Some("Bearer"));
}

async fn login_returns_session_tokens(app: TestApp) {
    app.register_verified("ken@example.com").await;
    let tokens = app.login("KEN@example.com", PASSWORD).await;
    assert_eq!(tokens["token_type"], "bearer");
    assert_eq!(tokens["expires_in"], 900);
    assert_eq!(tokens["refresh_token"].as_str().map(str::len), Some(43));
    let access = tokens["access_token"].as_str().expect("access token");
    assert_eq!(access.split('.').count(), 3);
    let sessions = app.get("/api/v1/sessions", Some(access)).await.expect(200);
    assert_eq!(sessions["total_count"], 1);
    let session = &sessions["sessions"][0];
    assert_eq!(session["is_current"], true);
    assert_eq!(session["device_info"], "Firefox 128 on Linux");
    assert_eq!(session["ip_address"], "127.0.0.1");
}

/// Reuse is told from a lost race by the time since rotation; a short interval keeps the test
/// fast.
const SHORT_REUSE_INTERVAL: Duration = Duration::from_millis(200);

fn short_reuse_interval() -> Config {
    test_config().with_refresh_reuse_interval(SHORT_REUSE_INTERVAL)
}

mod reuse_detection {
    use super::*;

    conformance!(config = short_reuse_interval; refresh_rotates_and_reuse_revokes_the_session);
}

async fn refresh_rotates_and_reuse_revokes_the_session(app: TestApp) {
    let (_, access, refresh) = app.user("dennis@example.com").await;
    let rotated = app
        .post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect(201);
    let second = rotated["refresh_token"]
        .as_str()
        .expect("new refresh")
        .to_owned();
    assert_ne!(second, refresh);
    assert!(rotated["access_token"].is_string());
    tokio::time::sleep(SHORT_REUSE_INTERVAL * 2).await;
    // Presenting the rotated-away token again after the reuse interval is reuse: 401, and the
    // session is revoked.
    app.post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect_problem(401, "unauthorized");
    app.post("/api/v1/tokens", &json!({"refresh_token": second}), None)
        .await
        .expect_problem(401, "unauthorized");
    let sessions = app
        .get("/api/v1/sessions?active_only=false", Some(&access))
        .await
        .expect(200);
    assert_eq!(sessions["sessions"][0]["is_revoked"], true);
    assert_eq!(sessions["active_count"], 0);
}

async fn concurrent_refresh_succeeds_exactly_once(app: TestApp) {
    let (_, access, refresh) = app.user("ritchie@example.com").await;
    let body = json!({"refresh_token": refresh});
    let attempts = (0..8).map(|_| app.post("/api/v1/tokens", &body, None));
    let responses = futures_util::future::join_all(attempts).await;
    let created: Vec<_> = responses
        .iter()
        .filter(|r| r.status.as_u16() == 201)
        .collect();
    assert_eq!(created.len(), 1);
    for response in responses.iter().filter(|r| r.status.as_u16() != 201) {
        response.expect_problem(401, "unauthorized");
    }
    // The losers did not revoke the session: the winner's new refresh token still works.
    let winner = created[0].json()["refresh_token"]
        .as_str()
        .expect("new refresh token")
        .to_owned();
    app.post("/api/v1/tokens", &json!({"refresh_token": winner}), None)
        .await
        .expect(201);
    let sessions = app
        .get("/api/v1/sessions?active_only=false", Some(&access))
        .await
        .expect(200);
    assert_eq!(sessions["sessions"][0]["is_revoked"], false);
    assert_eq!(sessions["active_count"], 1);
}

/// A loser of a refresh race that reads after the winner committed presents a token rotated
/// away moments ago; that must not revoke the winner's session.
async fn reuse_within_the_interval_keeps_the_session(app: TestApp) {
    let (_, access, refresh) = app.user("thompson@example.com").await;
    let rotated = app
        .post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect(201);
    let second = rotated["refresh_token"]
        .as_str()
        .expect("new refresh")
        .to_owned();
    app.post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect_problem(401, "unauthorized");
    app.post("/api/v1/tokens", &json!({"refresh_token": second}), None)
        .await
        .expect(201);
    let sessions = app
        .get("/api/v1/sessions?active_only=false", Some(&access))
        .await
        .expect(200);
    assert_eq!(sessions["sessions"][0]["is_revoked"], false);
    assert_eq!(sessions["active_count"], 1);
}

async fn refresh_failures_are_401(app: TestApp) {
    app.post("/api/v1/tokens", &json!({"refresh_token": "unknown"}), None)
        .await
        .expect_problem(401, "unauthorized");
    app.post("/api/v1/tokens", &json!({"refresh_token": ""}), None)
        .await
        .expect_problem(422, "validation_failed");
}

async fn logout_revokes_only_the_refresh_token(app: TestApp) {
    let (_, access, refresh) = app.user("bjarne@example.com").await;
    app.delete(
        "/api/v1/sessions/current",
        Some(&json!({"refresh_token": refresh})),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
    app.delete(
        "/api/v1/sessions/current",
        Some(&json!({"refresh_token": refresh})),
        Some("forged.token.value"),
    )
    .await
    .expect_problem(401, "unauthorized");
    app.delete(
        "/api/v1/sessions/current",
        Some(&json!({"refresh_token": refresh})),
        Some(&access),
    )
    .await
    .expect(204);
    // An unknown refresh token is still 204.
    app.delete(
        "/api/v1/sessions/current",
        Some(&json!({"refresh_token": "never-issued"})),
        Some(&access),
    )
    .await
    .expect(204);
    app.post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect_problem(401, "unauthorized");
    // The access token stays valid until it expires.
    app.get("/api/v1/sessions", Some(&access)).await.expect(200);
}

async fn password_reset_flow(app: TestApp) {
    let (_, access, refresh) = app.user("frances@example.com").await;
    let known = app
        .post(
            "/api/v1/password-reset-tokens",
            &json!({"email": "frances@example.com"}),
            None,
        )
        .await
        .expect(201);
    let unknown = app
        .post(
            "/api/v1/password-reset-tokens",
            &json!({"email": "nobody@example.com"}),
            None,
        )
        .await
        .expect(201);
    assert_eq!(known, unknown);
    // Email 1 was the verification; email 2 is the reset.
    let token = app.email_token("frances@example.com", 2).await;
    let new_password = "N3w-Passw0rd!";
    app.post(
        "/api/v1/password-resets",
        &json!({"token": token, "new_password": new_password}),
        None,
    )
    .await
    .expect(201);
    app.post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect_problem(401, "unauthorized");
    let sessions = app
        .get("/api/v1/sessions?active_only=false", Some(&access))
        .await
        .expect(200);
    assert_eq!(sessions["active_count"], 0);
    app.post(
        "/api/v1/sessions",
        &json!({"email": "frances@example.com", "password": PASSWORD}),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
    app.login("frances@example.com", new_password).await;
    app.post(
        "/api/v1/password-resets",
        &json!({"token": token, "new_password": "An0ther-Pass!"}),
        None,
    )
    .await
    .expect_problem(400, "command_validation_failed");
}

async fn password_reset_failures(app: TestApp) {
    app.post(
        "/api/v1/password-resets",
        &json!({"token": "cd".repeat(32), "new_password": "N3w-Passw0rd!"}),
        None,
    )
    .await
    .expect_problem(404, "not_found");
    let body = app
        .post(
            "/api/v1/password-resets",
            &json!({"token": "cd".repeat(32), "new_password": "weak"}),
            None,
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "new_password");
    app.post(
        "/api/v1/password-reset-tokens",
        &json!({"email": "bad"}),
        None,
    )
    .await
    .expect_problem(422, "validation_failed");
}

async fn password_reset_emails_are_capped(app: TestApp) {
    app.register_verified("edsger@example.com").await;
    for _ in 0..5 {
        app.post(
            "/api/v1/password-reset-tokens",
            &json!({"email": "edsger@example.com"}),
            None,
        )
        .await
        .expect(201);
    }
    // 1 verification + 3 resets; the 4th and 5th requests send nothing.
    app.email("edsger@example.com", 4).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        app.mailer
            .sent()
            .iter()
            .filter(|e| e.to == "edsger@example.com")
            .count(),
        4
    );
}

async fn common_passwords_are_refused(app: TestApp) {
    let body = app
        .post(
            "/api/v1/users",
            &json!({"email": "common@example.com", "password": "P@ssw0rD"}),
            None,
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "password");
    assert_eq!(body["errors"][0]["code"], "too_common");
    app.register_verified("reset@example.com").await;
    app.post(
        "/api/v1/password-reset-tokens",
        &json!({"email": "reset@example.com"}),
        None,
    )
    .await
    .expect(201);
    let token = app.email_token("reset@example.com", 2).await;
    let body = app
        .post(
            "/api/v1/password-resets",
            &json!({"token": token, "new_password": "p@SSw0rd"}),
            None,
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "new_password");
}

/// A logout and a refresh of one session at once: on PostgreSQL both take the session's row
/// before its tokens, so neither deadlocks into a 500.
async fn logout_racing_refresh_never_fails(app: TestApp) {
    let (_, elsewhere, _) = app.user("racer@example.com").await;
    for _ in 0..8 {
        let tokens = app.login("racer@example.com", PASSWORD).await;
        let access = tokens["access_token"].as_str().expect("access").to_owned();
        let refresh = json!({"refresh_token": tokens["refresh_token"]});
        let (rotated, logged_out, revoked_all) = tokio::join!(
            app.post("/api/v1/tokens", &refresh, None),
            app.delete("/api/v1/sessions/current", Some(&refresh), Some(&access)),
            app.delete("/api/v1/sessions", None, Some(&elsewhere)),
        );
        assert!(
            [201, 401].contains(&rotated.status.as_u16()),
            "refresh: {rotated:?}"
        );
        assert_eq!(logged_out.status.as_u16(), 204, "logout: {logged_out:?}");
        assert!(
            revoked_all.status.is_success(),
            "revoke all: {revoked_all:?}"
        );
    }
}

/// Sessions that end one second after login, however often they are refreshed.
fn one_second_sessions() -> Config {
    test_config().with_session_max_lifetime(Duration::from_secs(1))
}

mod absolute_lifetime {
    use super::*;

    conformance!(config = one_second_sessions; refresh_stops_at_the_absolute_lifetime);
}

async fn refresh_stops_at_the_absolute_lifetime(app: TestApp) {
    let (_, _, refresh) = app.user("finite@example.com").await;
    let rotated = app
        .post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect(201);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    app.post(
        "/api/v1/tokens",
        &json!({"refresh_token": rotated["refresh_token"]}),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
    // A new login starts a new lifetime.
    let tokens = app.login("finite@example.com", PASSWORD).await;
    app.post(
        "/api/v1/tokens",
        &json!({"refresh_token": tokens["refresh_token"]}),
        None,
    )
    .await
    .expect(201);
}

/// One password hash at a time and one waiting: a burst of logins overflows at once.
fn one_hash_at_a_time() -> Config {
    test_config().with_hashing_limits(aggregation_core::WorkLimits {
        concurrent: 1,
        queued: 1,
    })
}

mod bounded_hashing {
    use super::*;

    conformance!(config = one_hash_at_a_time; login_storms_get_503_with_retry_after);
}

async fn login_storms_get_503_with_retry_after(app: TestApp) {
    app.register_verified("storm@example.com").await;
    let body = json!({"email": "storm@example.com", "password": PASSWORD});
    let storm = (0..16).map(|_| app.post("/api/v1/sessions", &body, None));
    let answers = futures_util::future::join_all(storm).await;
    let mut busy = 0;
    for answer in &answers {
        match answer.status.as_u16() {
            201 => {}
            503 => {
                busy += 1;
                answer.expect_problem(503, "service_unavailable");
                assert_eq!(answer.header("retry-after"), Some("1"));
            }
            other => panic!("unexpected {other}: {answer:?}"),
        }
    }
    assert!(busy > 0, "16 logins at once overflow 1 running + 1 queued");
    assert!(busy < 16, "the running and the queued login succeed");
    // Once the burst is over, logins work again.
    app.login("storm@example.com", PASSWORD).await;
}

/// Three failed logins per account and hour, so the case stays short.
fn three_failures_an_hour() -> Config {
    test_config().with_login_failure_limit(Some(
        aggregation_core::LoginFailureLimit::new(3, Duration::from_secs(3600))
            .expect("valid limit"),
    ))
}

mod login_throttle {
    use super::*;
    conformance!(
        config = three_failures_an_hour;
        failed_logins_throttle_the_account,
        successful_logins_do_not_count,
    );
}

async fn attempt(app: &TestApp, email: &str, password: &str) -> aggregation_tests::TestResponse {
    app.post(
        "/api/v1/sessions",
        &json!({"email": email, "password": password}),
        None,
    )
    .await
}

/// What a client can compare between two refused logins: everything but the trace id.
fn refusal(response: &aggregation_tests::TestResponse) -> (u16, serde_json::Value, Vec<String>) {
    let mut body = response.expect_problem(401, "unauthorized");
    body["trace_id"] = serde_json::Value::Null;
    let mut headers: Vec<String> = response
        .headers
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "traceparent" | "date"))
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or_default()))
        .collect();
    headers.sort();
    (response.status.as_u16(), body, headers)
}

async fn failed_logins_throttle_the_account(app: TestApp) {
    let target = "target@example.com";
    app.register_verified(target).await;
    app.register_verified("bystander@example.com").await;
    let wrong = refusal(&attempt(&app, target, "Wrong-passw0rd").await);
    for _ in 0..2 {
        assert_eq!(
            refusal(&attempt(&app, target, "Wrong-passw0rd").await),
            wrong
        );
    }
    // Three failures: now the right password gets exactly the answer of a wrong one, however
    // the email is spelled.
    for spelling in [target, "  TARGET@example.com "] {
        assert_eq!(refusal(&attempt(&app, spelling, PASSWORD).await), wrong);
    }
    assert_eq!(
        refusal(&attempt(&app, target, "Wrong-passw0rd").await),
        wrong
    );
    // Another account is not affected.
    app.login("bystander@example.com", PASSWORD).await;
    // An unknown email is throttled exactly like a known one: the same answers throughout.
    let unknown = "nobody@example.com";
    for password in [
        "Wrong-passw0rd",
        "Wrong-passw0rd",
        "Wrong-passw0rd",
        PASSWORD,
        PASSWORD,
    ] {
        assert_eq!(refusal(&attempt(&app, unknown, password).await), wrong);
    }
    // An unverified account's right password is refused as wrong, not as unverified.
    app.register("unverified@example.com").await;
    attempt(&app, "unverified@example.com", PASSWORD)
        .await
        .expect_problem(403, "forbidden");
    for _ in 0..3 {
        attempt(&app, "unverified@example.com", "Wrong-passw0rd")
            .await
            .expect_problem(401, "unauthorized");
    }
    assert_eq!(
        refusal(&attempt(&app, "unverified@example.com", PASSWORD).await),
        wrong
    );

    let reasons: Vec<&str> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            aggregation_core::events::DomainEvent::LoginFailed { reason } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasons
            .iter()
            .filter(|r| **r == "too_many_failures")
            .count(),
        3
    );
}

async fn successful_logins_do_not_count(app: TestApp) {
    let email = "regular@example.com";
    app.register_verified(email).await;
    for _ in 0..5 {
        app.login(email, PASSWORD).await;
    }
    for _ in 0..2 {
        attempt(&app, email, "Wrong-passw0rd")
            .await
            .expect_problem(401, "unauthorized");
    }
    // Two of three failures used: the right password still works, and costs nothing.
    for _ in 0..3 {
        app.login(email, PASSWORD).await;
    }
    attempt(&app, email, "Wrong-passw0rd")
        .await
        .expect_problem(401, "unauthorized");
    attempt(&app, email, PASSWORD)
        .await
        .expect_problem(401, "unauthorized");
}

/// Behind a trusted proxy on loopback, so each case picks its clients' addresses with
/// `X-Forwarded-For`; the default throttle (10 failures an hour per bucket).
fn behind_a_proxy() -> aggregation_tests::Setup {
    aggregation_tests::Setup {
        config: test_config().with_trusted_proxies(
            aggregation_core::rate_limit::parse_cidr_list("127.0.0.0/8, ::1/128")
                .expect("valid CIDR list"),
        ),
        ..aggregation_tests::Setup::default()
    }
}

mod login_networks {
    use super::*;
    conformance!(
        setup = behind_a_proxy;
        strangers_cannot_lock_the_owner_out_of_a_known_network,
        unknown_networks_are_refused_after_ten_distributed_failures,
        one_network_fails_at_most_ten_times,
        ipv6_clients_are_grouped_by_slash_64,
        purge_forgets_networks_unused_for_30_days,
    );

    /// The same cases with the buckets in Redis (`AGG_TEST_REDIS_URL`), on every target.
    mod redis {
        use std::sync::Arc;

        use aggregation_core::rate_limit::RedisRateLimitStore;
        use aggregation_tests::{Backend, Target, delete_redis_keys, redis_url, run_setup};

        use super::super::*;

        async fn on_redis<F, Fut>(case: F)
        where
            F: Fn(TestApp) -> Fut + Copy + Send + 'static,
            Fut: std::future::Future<Output = ()> + Send + 'static,
        {
            let Some(url) = redis_url() else { return };
            let prefix = format!("aggtest:{}:", uuid::Uuid::new_v4().simple());
            for target in [Target::Bare, Target::Axum, Target::Actix] {
                let limits =
                    RedisRateLimitStore::from_url(&url, prefix.clone(), Duration::from_secs(2))
                        .expect("redis store");
                let setup = aggregation_tests::Setup {
                    rate_limit_store: Some(Arc::new(limits)),
                    ..behind_a_proxy()
                };
                run_setup(target, Backend::Sqlite, setup, case).await;
                delete_redis_keys(&url, &prefix).await;
            }
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn strangers_cannot_lock_the_owner_out_of_a_known_network() {
            on_redis(super::super::strangers_cannot_lock_the_owner_out_of_a_known_network).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn unknown_networks_are_refused_after_ten_distributed_failures() {
            on_redis(super::super::unknown_networks_are_refused_after_ten_distributed_failures)
                .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn one_network_fails_at_most_ten_times() {
            on_redis(super::super::one_network_fails_at_most_ten_times).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn ipv6_clients_are_grouped_by_slash_64() {
            on_redis(super::super::ipv6_clients_are_grouped_by_slash_64).await;
        }
    }
}

/// A login from `client`, as the trusted proxy on loopback forwards it.
async fn attempt_from(
    app: &TestApp,
    client: &str,
    email: &str,
    password: &str,
) -> aggregation_tests::TestResponse {
    app.send(
        http::Request::builder()
            .method(Method::POST)
            .uri("/api/v1/sessions")
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("x-forwarded-for", client)
            .body(http_body_util::Full::new(bytes::Bytes::from(
                json!({"email": email, "password": password}).to_string(),
            )))
            .expect("request"),
    )
    .await
}

const OWNER: &str = "owner@example.com";
const WRONG: &str = "Wrong-passw0rd";

/// The owner's home network, where they logged in before the attack.
const HOME: &str = "198.51.100.7";

/// How many `too_many_failures` refusals the service reported.
fn refusals_reported(app: &TestApp) -> usize {
    app.events
        .events()
        .into_iter()
        .filter(|event| {
            matches!(
                event,
                aggregation_core::events::DomainEvent::LoginFailed {
                    reason: "too_many_failures"
                }
            )
        })
        .count()
}

async fn strangers_cannot_lock_the_owner_out_of_a_known_network(app: TestApp) {
    app.register_verified(OWNER).await;
    attempt_from(&app, HOME, OWNER, PASSWORD).await.expect(201);
    let wrong = refusal(&attempt_from(&app, "203.0.0.5", OWNER, WRONG).await);
    // Thirty wrong passwords from thirty networks.
    for third in 1..30 {
        let stranger = format!("203.0.{third}.5");
        assert_eq!(
            refusal(&attempt_from(&app, &stranger, OWNER, WRONG).await),
            wrong
        );
    }
    // The owner at home is not locked out, from any address of the home /24.
    attempt_from(&app, HOME, OWNER, PASSWORD).await.expect(201);
    attempt_from(&app, "198.51.100.201", OWNER, PASSWORD)
        .await
        .expect(201);
    // A network the owner never used is refused, exactly as a wrong password is.
    assert_eq!(
        refusal(&attempt_from(&app, "192.0.2.44", OWNER, PASSWORD).await),
        wrong
    );
    assert_eq!(refusals_reported(&app), 1);
}

async fn unknown_networks_are_refused_after_ten_distributed_failures(app: TestApp) {
    app.register_verified(OWNER).await;
    attempt_from(&app, HOME, OWNER, PASSWORD).await.expect(201);
    let wrong = refusal(&attempt_from(&app, "203.0.0.5", OWNER, WRONG).await);
    for third in 1..9 {
        let stranger = format!("203.0.{third}.5");
        assert_eq!(
            refusal(&attempt_from(&app, &stranger, OWNER, WRONG).await),
            wrong
        );
    }
    // Nine failures from unknown networks: a tenth network still logs in, and is known from
    // now on.
    let hotel = "192.0.2.80";
    attempt_from(&app, hotel, OWNER, PASSWORD).await.expect(201);
    assert_eq!(
        refusal(&attempt_from(&app, "203.0.9.5", OWNER, WRONG).await),
        wrong
    );
    // Ten: every unknown network is refused, the right password included, whether it failed
    // before or not.
    for stranger in ["233.252.0.1", "203.0.3.5", "203.0.9.77"] {
        assert_eq!(
            refusal(&attempt_from(&app, stranger, OWNER, PASSWORD).await),
            wrong,
            "{stranger}"
        );
        assert_eq!(
            refusal(&attempt_from(&app, stranger, OWNER, WRONG).await),
            wrong
        );
    }
    // Known networks carry on.
    attempt_from(&app, HOME, OWNER, PASSWORD).await.expect(201);
    attempt_from(&app, hotel, OWNER, PASSWORD).await.expect(201);
    assert_eq!(refusals_reported(&app), 3);
    // Another account is not concerned.
    app.register_verified("bystander@example.com").await;
    attempt_from(&app, "233.252.0.1", "bystander@example.com", PASSWORD)
        .await
        .expect(201);
}

async fn one_network_fails_at_most_ten_times(app: TestApp) {
    app.register_verified(OWNER).await;
    let office = "192.0.2.10";
    attempt_from(&app, HOME, OWNER, PASSWORD).await.expect(201);
    attempt_from(&app, office, OWNER, PASSWORD)
        .await
        .expect(201);
    // Ten failures from ten addresses of the home /24.
    let wrong = refusal(&attempt_from(&app, "198.51.100.100", OWNER, WRONG).await);
    for host in 101..110 {
        let neighbour = format!("198.51.100.{host}");
        assert_eq!(
            refusal(&attempt_from(&app, &neighbour, OWNER, WRONG).await),
            wrong
        );
    }
    // The home network has used up its own failures: refused, right password included.
    assert_eq!(
        refusal(&attempt_from(&app, HOME, OWNER, PASSWORD).await),
        wrong
    );
    // The office is another network.
    attempt_from(&app, office, OWNER, PASSWORD)
        .await
        .expect(201);
    // A known network's failures are not counted against the unknown ones.
    attempt_from(&app, "203.0.113.9", OWNER, PASSWORD)
        .await
        .expect(201);
    // An unknown network is capped the same way: ten failures from one /24 and it is refused.
    let stranger = "233.252.0.";
    app.register_verified("second@example.com").await;
    for host in 0..10 {
        assert_eq!(
            refusal(
                &attempt_from(
                    &app,
                    &format!("{stranger}{host}"),
                    "second@example.com",
                    WRONG
                )
                .await
            ),
            wrong
        );
    }
    assert_eq!(
        refusal(
            &attempt_from(
                &app,
                &format!("{stranger}200"),
                "second@example.com",
                PASSWORD
            )
            .await
        ),
        wrong
    );
    assert_eq!(refusals_reported(&app), 2);
}

async fn ipv6_clients_are_grouped_by_slash_64(app: TestApp) {
    app.register_verified(OWNER).await;
    let home = "2001:db8:1:2::10";
    attempt_from(&app, home, OWNER, PASSWORD).await.expect(201);
    // Ten failures from ten other /64s use up the unknown networks' bucket.
    let wrong = refusal(&attempt_from(&app, "2001:db8:ff:0::1", OWNER, WRONG).await);
    for index in 1..10 {
        let stranger = format!("2001:db8:ff:{index:x}::1");
        assert_eq!(
            refusal(&attempt_from(&app, &stranger, OWNER, WRONG).await),
            wrong
        );
    }
    // Any address of the home /64 is home.
    attempt_from(&app, "2001:db8:1:2:abcd:ef01:2345:6789", OWNER, PASSWORD)
        .await
        .expect(201);
    // The next /64 is another, unknown, network.
    assert_eq!(
        refusal(&attempt_from(&app, "2001:db8:1:3::10", OWNER, PASSWORD).await),
        wrong
    );
    // Ten failures from ten addresses of the home /64 use up its own bucket.
    for host in 0..10 {
        let neighbour = format!("2001:db8:1:2::{:x}", 0x100 + host);
        assert_eq!(
            refusal(&attempt_from(&app, &neighbour, OWNER, WRONG).await),
            wrong
        );
    }
    assert_eq!(
        refusal(&attempt_from(&app, home, OWNER, PASSWORD).await),
        wrong
    );
    assert_eq!(refusals_reported(&app), 2);
}

async fn purge_forgets_networks_unused_for_30_days(app: TestApp) {
    use aggregation_core::store::now;
    use chrono::TimeDelta;

    let user_id: uuid::Uuid = app.register_verified(OWNER).await.parse().expect("user id");
    let at = now();
    let (stale, fresh) = (
        at - TimeDelta::days(30) - TimeDelta::minutes(1),
        at - TimeDelta::days(29),
    );
    for (digest, last_success) in [(&b"stale"[..], stale), (&b"fresh"[..], fresh)] {
        app.store
            .record_login_network(user_id, digest, last_success, 50)
            .await
            .expect("seed network");
    }
    let outcome = app
        .service
        .jobs()
        .run_once("purge_expired")
        .await
        .expect("runs");
    assert!(
        outcome.to_string().contains("1 login networks"),
        "{outcome}"
    );
    let remaining = |digest: &'static [u8]| {
        let store = app.store.clone();
        async move {
            store
                .login_network_last_success(user_id, digest)
                .await
                .expect("read")
        }
    };
    assert_eq!(remaining(b"stale").await, None);
    assert_eq!(remaining(b"fresh").await, Some(fresh));
}
