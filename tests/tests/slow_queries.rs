//! Conformance: one user's slow queries are 503 for that user's requests alone. Another
//! user's requests stay 200, and the store's circuit breaker stays closed (decisions.md, "One
//! user's work never hurts another's").
//!
//! The slow queries are the heavy user's net-worth history (`balances_at`), made slow and
//! failing by [`SlowStore`] the way a store busy with them fails them: first a pool that
//! timed out while every connection was taken (which counts toward the breaker, so the
//! breaker pings the store, which answers), then statement timeouts (which never count).

use std::sync::Arc;
use std::time::Duration;

use aggregation_core::store::{AccountType, NewAccount, StoreError, now};
use aggregation_core::testing::SlowStore;
use aggregation_tests::{PASSWORD, Setup, TestApp, TestResponse, conformance};
use uuid::Uuid;

conformance!(setup = slow_history; one_users_slow_queries_leave_another_users_requests_at_200);

/// Calls of the store's circuit-breaker threshold that fail the way a busy pool does.
const BUSY_POOL_CALLS: u64 = 3;

fn slow_history() -> Setup {
    Setup {
        wrap_store: Some(|store| {
            Arc::new(SlowStore::new(
                store,
                &["balances_at"],
                Duration::from_millis(100),
                timed_out,
            ))
        }),
        ..Setup::default()
    }
}

/// How the `call`th slow query fails.
fn timed_out(call: u64) -> StoreError {
    if call <= BUSY_POOL_CALLS {
        StoreError::Unavailable("pool timed out while waiting for an open connection".to_owned())
    } else {
        StoreError::Busy("canceling statement due to statement timeout".to_owned())
    }
}

const HISTORY: &str = "/api/v1/net-worth?from=2024-01-01&to=2024-03-01&interval=month";

/// A user with one account, whose net worth therefore reads a history.
async fn heavy_user(app: &TestApp) -> String {
    let (id, access, _) = app.user("heavy@example.com").await;
    let user_id: Uuid = id.parse().expect("user id");
    let connection = app.active_connection(user_id, "schwab", None).await;
    app.store
        .upsert_accounts(
            connection.id,
            &[NewAccount {
                provider_account_id: "CHK".to_owned(),
                account_number: None,
                name: "Checking".to_owned(),
                account_type: AccountType::Checking,
                currency: "USD".to_owned(),
                balance_amount: "1000".parse().expect("decimal"),
                available_balance_amount: None,
                is_active: true,
            }],
            now(),
        )
        .await
        .expect("account");
    access
}

#[track_caller]
fn assert_slow_query_refused(response: &TestResponse) {
    response.expect_problem(503, "service_unavailable");
    assert_eq!(response.header("retry-after"), Some("1"));
}

async fn one_users_slow_queries_leave_another_users_requests_at_200(app: TestApp) {
    let heavy = heavy_user(&app).await;
    let (_, light, _) = app.user("light@example.com").await;
    app.get("/api/v1/accounts", Some(&light)).await.expect(200);

    // As many failures in a row as open the breaker of an unreachable store: the breaker
    // pings, the store answers, and it stays closed.
    for _ in 0..BUSY_POOL_CALLS {
        assert_slow_query_refused(&app.get(HISTORY, Some(&heavy)).await);
    }
    // The ping runs in the background; the other user is served meanwhile and after it.
    for _ in 0..10 {
        app.get("/api/v1/accounts", Some(&light)).await.expect(200);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Statement timeouts, interleaved with the other user's reads and writes and in a row.
    for round in 0..6 {
        assert_slow_query_refused(&app.get(HISTORY, Some(&heavy)).await);
        app.get("/api/v1/accounts", Some(&light)).await.expect(200);
        if round == 0 {
            for _ in 0..5 {
                assert_slow_query_refused(&app.get(HISTORY, Some(&heavy)).await);
            }
        }
    }
    app.login("light@example.com", PASSWORD).await;
    // The heavy user's other requests are answered too: only the slow query is refused.
    app.get("/api/v1/accounts", Some(&heavy)).await.expect(200);
    // Ready: the breaker never opened.
    app.get("/health/ready", None).await.expect(200);
}
