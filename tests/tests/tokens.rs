//! Conformance: one-time tokens (email verification, password reset) that are expired, used,
//! unknown or presented to the wrong endpoint.

use std::time::Duration;

use aggregation_tests::{PASSWORD, TestApp, conformance};
use serde_json::json;

conformance!(
    used_reset_tokens_are_400,
    unknown_tokens_are_404,
    tokens_do_not_cross_purposes,
);

/// Past a TTL of one second, with margin for a slow store.
const PAST_TTL: Duration = Duration::from_millis(1_500);

const NEW_PASSWORD: &str = "N3w-Passw0rd!";

async fn reset(app: &TestApp, token: &str, new_password: &str) -> aggregation_tests::TestResponse {
    app.post(
        "/api/v1/password-resets",
        &json!({"token": token, "new_password": new_password}),
        None,
    )
    .await
}

/// Asks for a reset email for a verified user: the token of the `count`-th email to them.
async fn reset_token(app: &TestApp, email: &str, count: usize) -> String {
    app.post(
        "/api/v1/password-reset-tokens",
        &json!({"email": email}),
        None,
    )
    .await
    .expect(201);
    app.email_token(email, count).await
}

async fn used_reset_tokens_are_400(app: TestApp) {
    let email = "used@example.com";
    app.register_verified(email).await;
    let token = reset_token(&app, email, 2).await;
    reset(&app, &token, NEW_PASSWORD).await.expect(201);
    let body = reset(&app, &token, "An0ther-Passw0rd!")
        .await
        .expect_problem(400, "command_validation_failed");
    assert_eq!(body["instance"], "/api/v1/password-resets");
    // The second use changed nothing.
    app.login(email, NEW_PASSWORD).await;
    app.post(
        "/api/v1/sessions",
        &json!({"email": email, "password": "An0ther-Passw0rd!"}),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
    // A fresh token still works after a used one.
    let fresh = reset_token(&app, email, 3).await;
    assert_ne!(fresh, token);
    reset(&app, &fresh, PASSWORD).await.expect(201);
    app.login(email, PASSWORD).await;
}

async fn unknown_tokens_are_404(app: TestApp) {
    app.register_verified("known@example.com").await;
    for unknown in ["0".repeat(64), "ab".repeat(32), "AB".repeat(32)] {
        let body = reset(&app, &unknown, NEW_PASSWORD)
            .await
            .expect_problem(404, "not_found");
        assert_eq!(body["instance"], "/api/v1/password-resets");
        app.post(
            "/api/v1/email-verifications",
            &json!({"token": unknown}),
            None,
        )
        .await
        .expect_problem(404, "not_found");
    }
    // Not 64 hex characters: the request alone shows it, so 422 rather than 404.
    for malformed in ["a".repeat(63), "a".repeat(65), "g".repeat(64)] {
        let body = reset(&app, &malformed, NEW_PASSWORD)
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(body["errors"][0]["field"], "token");
    }
}

async fn tokens_do_not_cross_purposes(app: TestApp) {
    let email = "purposes@example.com";
    app.register(email).await;
    let verification = app.email_token(email, 1).await;
    // A verification token is no reset token.
    reset(&app, &verification, NEW_PASSWORD)
        .await
        .expect_problem(404, "not_found");
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": verification}),
        None,
    )
    .await
    .expect(201);
    let reset_token = reset_token(&app, email, 2).await;
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": reset_token}),
        None,
    )
    .await
    .expect_problem(404, "not_found");
    // Neither refusal spent the token.
    reset(&app, &reset_token, NEW_PASSWORD).await.expect(201);
}

/// Verification tokens that live one second.
mod expired_verification {
    use super::*;

    fn short_verification_ttl() -> aggregation_core::Config {
        aggregation_tests::test_config().with_verification_token_ttl(Duration::from_secs(1))
    }

    conformance!(config = short_verification_ttl; verification_tokens_expire);

    async fn verification_tokens_expire(app: TestApp) {
        let email = "late@example.com";
        app.register(email).await;
        let token = app.email_token(email, 1).await;
        tokio::time::sleep(PAST_TTL).await;
        for _ in 0..2 {
            // Still expired (not unknown) when presented again.
            let body = app
                .post(
                    "/api/v1/email-verifications",
                    &json!({"token": token}),
                    None,
                )
                .await
                .expect_problem(400, "command_validation_failed");
            assert_eq!(body["instance"], "/api/v1/email-verifications");
        }
        // The email stays unverified.
        app.post(
            "/api/v1/sessions",
            &json!({"email": email, "password": PASSWORD}),
            None,
        )
        .await
        .expect_problem(403, "forbidden");
    }
}

/// Reset tokens that live one second.
mod expired_reset {
    use super::*;

    fn short_reset_ttl() -> aggregation_core::Config {
        aggregation_tests::test_config().with_reset_token_ttl(Duration::from_secs(1))
    }

    conformance!(config = short_reset_ttl; reset_tokens_expire);

    async fn reset_tokens_expire(app: TestApp) {
        let email = "slow@example.com";
        let (_, _, refresh) = app.user(email).await;
        let token = reset_token(&app, email, 2).await;
        tokio::time::sleep(PAST_TTL).await;
        for _ in 0..2 {
            let body = reset(&app, &token, NEW_PASSWORD)
                .await
                .expect_problem(400, "command_validation_failed");
            assert_eq!(body["instance"], "/api/v1/password-resets");
        }
        // Nothing changed: the old password works, the new one does not, sessions live on.
        app.login(email, PASSWORD).await;
        app.post(
            "/api/v1/sessions",
            &json!({"email": email, "password": NEW_PASSWORD}),
            None,
        )
        .await
        .expect_problem(401, "unauthorized");
        app.post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
            .await
            .expect(201);
    }
}
