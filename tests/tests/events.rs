//! Conformance: the domain events reach the embedder's sink with their key fields, and no
//! event carries a password or a token.

use aggregation_core::events::DomainEvent;
use aggregation_tests::{PASSWORD, Setup, TestApp, conformance};
use http::Method;
use serde_json::{Value, json};
use uuid::Uuid;

conformance!(
    account_events_carry_their_key_fields,
    password_reset_and_revocation_events,
);

mod providers {
    use super::*;
    conformance!(setup = sandbox; provider_events_carry_their_key_fields);
}

fn sandbox() -> Setup {
    aggregation_tests::sandbox_setup()
}

/// Every event but the rate limiter's, oldest first.
fn domain_events(app: &TestApp) -> Vec<DomainEvent> {
    app.events
        .events()
        .into_iter()
        .filter(|event| !matches!(event, DomainEvent::RateLimit(_)))
        .collect()
}

/// Asserts that no event, serialized or debug-printed, contains any of `secrets`.
#[track_caller]
fn assert_no_secrets(app: &TestApp, secrets: &[&str]) {
    for event in app.events.events() {
        let serialized = serde_json::to_string(&event).expect("events serialize");
        let debug = format!("{event:?}");
        for secret in secrets {
            assert!(!secret.is_empty());
            assert!(
                !serialized.contains(secret) && !debug.contains(secret),
                "an event carries a secret: {serialized}"
            );
        }
    }
}

fn uuid(text: &str) -> Uuid {
    Uuid::parse_str(text).expect("uuid")
}

fn str_field<'a>(body: &'a Value, field: &str) -> &'a str {
    body[field].as_str().expect(field)
}

async fn current_session(app: &TestApp, access: &str) -> Uuid {
    let sessions = app
        .get("/api/v1/sessions?active_only=false", Some(access))
        .await
        .expect(200);
    let current = sessions["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|session| session["is_current"] == true)
        .expect("the current session");
    uuid(str_field(current, "id"))
}

async fn account_events_carry_their_key_fields(app: TestApp) {
    let email = "eve@example.com";
    let user_id = uuid(&app.register(email).await);
    assert_eq!(
        domain_events(&app),
        [DomainEvent::UserRegistered { user_id }]
    );
    let unverified = app
        .post(
            "/api/v1/sessions",
            &json!({"email": email, "password": PASSWORD}),
            None,
        )
        .await;
    unverified.expect_problem(403, "forbidden");
    let verification = app.email_token(email, 1).await;
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": verification}),
        None,
    )
    .await
    .expect(201);
    let wrong_password = "Wr0ng-password!";
    app.post(
        "/api/v1/sessions",
        &json!({"email": email, "password": wrong_password}),
        None,
    )
    .await
    .expect_problem(401, "unauthorized");
    let tokens = app.login(email, PASSWORD).await;
    let access = str_field(&tokens, "access_token").to_owned();
    let refresh = str_field(&tokens, "refresh_token").to_owned();
    let session_id = current_session(&app, &access).await;
    let refreshed = app
        .post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .expect(201);
    let second_access = str_field(&refreshed, "access_token").to_owned();
    let second_refresh = str_field(&refreshed, "refresh_token").to_owned();
    app.delete(
        "/api/v1/sessions/current",
        Some(&json!({"refresh_token": second_refresh})),
        Some(&second_access),
    )
    .await
    .expect(204);

    assert_eq!(
        domain_events(&app),
        [
            DomainEvent::UserRegistered { user_id },
            DomainEvent::LoginFailed {
                reason: "email_not_verified"
            },
            DomainEvent::EmailVerified {
                user_id: Some(user_id)
            },
            DomainEvent::LoginFailed {
                reason: "invalid_credentials"
            },
            DomainEvent::LoginSucceeded {
                user_id,
                session_id
            },
            DomainEvent::TokenRefreshed {
                user_id,
                session_id
            },
            DomainEvent::LoggedOut { user_id },
        ]
    );
    // The serialized form names the event and its fields, for sinks that forward JSON.
    let login = serde_json::to_value(DomainEvent::LoginSucceeded {
        user_id,
        session_id,
    })
    .expect("serializes");
    assert_eq!(
        login,
        json!({
            "event": "LoginSucceeded",
            "user_id": user_id.to_string(),
            "session_id": session_id.to_string(),
        })
    );
    assert_no_secrets(
        &app,
        &[
            PASSWORD,
            wrong_password,
            &verification,
            &access,
            &refresh,
            &second_access,
            &second_refresh,
        ],
    );
}

async fn password_reset_and_revocation_events(app: TestApp) {
    let email = "mallory@example.com";
    let (user_id, access, refresh) = app.user(email).await;
    let user_id = uuid(&user_id);
    // A second session; from it, its owner revokes every other.
    let last = app.login(email, PASSWORD).await;
    let last_access = str_field(&last, "access_token").to_owned();
    let revoked = app
        .call(
            Method::DELETE,
            "/api/v1/sessions",
            Some(&json!({})),
            Some(&last_access),
        )
        .await
        .expect(200);
    assert_eq!(revoked["revoked_count"], 1);
    let new_password = "N3w-Passw0rd!";
    let reset = app.reset_password(email, 2, new_password).await;

    let events = domain_events(&app);
    assert!(
        events.contains(&DomainEvent::SessionsRevoked { user_id, count: 1 }),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&DomainEvent::PasswordReset { user_id }),
        "{events:?}"
    );
    assert_no_secrets(
        &app,
        &[
            PASSWORD,
            new_password,
            &reset,
            &access,
            &refresh,
            &last_access,
            str_field(&last, "refresh_token"),
        ],
    );
}

async fn provider_events_carry_their_key_fields(app: TestApp) {
    let (user_id, access, refresh) = app.user("pat@example.com").await;
    let user_id = uuid(&user_id);
    let query = app.authorized_callback_query(&access, None).await;
    let connection = app
        .call(
            Method::POST,
            &format!("/api/v1/providers/callback{query}"),
            None,
            None,
        )
        .await
        .expect(201);
    let connection_id = uuid(str_field(&connection, "id"));
    let synced = app
        .post(
            "/api/v1/accounts/syncs",
            &json!({"connection_id": connection_id}),
            Some(&access),
        )
        .await
        .expect(201);
    app.post(
        &format!("/api/v1/providers/{connection_id}/token-refreshes"),
        &json!({"force": true}),
        Some(&access),
    )
    .await
    .expect(201);
    app.delete(
        &format!("/api/v1/providers/{connection_id}"),
        None,
        Some(&access),
    )
    .await
    .expect(204);

    let events: Vec<DomainEvent> = domain_events(&app)
        .into_iter()
        .filter(|event| {
            !matches!(
                event,
                DomainEvent::UserRegistered { .. }
                    | DomainEvent::EmailVerified { .. }
                    | DomainEvent::LoginSucceeded { .. }
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            DomainEvent::ProviderConnected {
                user_id,
                connection_id,
                provider_slug: "schwab-sandbox".to_owned(),
                reauthorized: false,
            },
            DomainEvent::ConnectionSynced {
                user_id,
                connection_id,
                kind: "accounts",
                created: synced["created"].as_u64().expect("created"),
                updated: 0,
                unchanged: 0,
                deactivated: 0,
                errors: 0,
            },
            DomainEvent::ProviderTokensRefreshed {
                connection_id,
                succeeded: true,
            },
            DomainEvent::ProviderDisconnected {
                user_id,
                connection_id,
            },
        ]
    );
    // The OAuth code and state of the callback are secrets too.
    let (code, state) = query
        .trim_start_matches("?code=")
        .split_once("&state=")
        .expect("code and state");
    assert_no_secrets(&app, &[PASSWORD, &access, &refresh, code, state]);
}
