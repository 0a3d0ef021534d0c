//! [`WebhookStore`]'s fair claim, the disabling of failing endpoints and the rotated secret:
//! one suite, run on in-memory SQLite always and on PostgreSQL when `AGG_TEST_DATABASE_URL` is
//! set.

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::event_tests::session;
#[cfg(feature = "postgres")]
use super::provider_tests::on_postgres;
#[cfg(feature = "sqlite")]
use super::provider_tests::sqlite_store;
use super::provider_tests::{Shared, suite, user};
use super::*;
use crate::events::EventType;
use crate::webhooks::webhook_disabled_events;

suite!(
    claims_take_turns_across_endpoints_within_their_cap,
    claims_skip_what_is_not_due_yet,
    one_users_many_endpoints_never_hold_back_another_users_first_delivery,
    an_endpoint_failing_long_enough_is_disabled_until_enabled,
    a_success_ends_the_failure_streak,
    a_replaced_secret_is_handed_out_until_it_expires,
);

/// An endpoint of `user_id` receiving every event type.
async fn endpoint(store: &Shared, user_id: Uuid) -> Uuid {
    let id = Uuid::now_v7();
    let endpoint = NewWebhookEndpoint {
        id,
        user_id,
        url: format!("https://hooks.example/{id}"),
        event_types: Vec::new(),
        encrypted_secret: vec![1; 28],
        secret_key_id: "current".to_owned(),
        created_at: now(),
    };
    assert!(store.create_webhook_endpoint(&endpoint, 10).await.unwrap());
    id
}

/// Raises `count` events of `user_id` (session revocations): one pending delivery each per
/// endpoint of the user.
async fn raise(store: &Shared, user_id: Uuid, count: usize) {
    for _ in 0..count {
        session(store, user_id, Uuid::now_v7().as_bytes()).await;
    }
    let revoked = store
        .revoke_all_sessions(user_id, None, "test", now())
        .await
        .unwrap();
    assert_eq!(revoked.len(), count);
}

/// A claim now of at most `limit`, `per_endpoint` at once per endpoint, users uncapped.
fn claim(limit: u32, per_endpoint: u32) -> DeliveryClaim {
    let at = now();
    DeliveryClaim {
        now: at,
        due_by: at,
        lease_until: at + TimeDelta::minutes(1),
        limit,
        per_endpoint,
        per_user: u32::MAX,
    }
}

/// How many of `claimed` are of `endpoint_id`.
fn of(claimed: &[ClaimedDelivery], endpoint_id: Uuid) -> usize {
    claimed
        .iter()
        .filter(|delivery| delivery.endpoint_id == endpoint_id)
        .count()
}

/// The result of an attempt at `delivery` at `at`.
fn attempt(delivery: &ClaimedDelivery, at: DateTime<Utc>, next: NextDelivery) -> WebhookAttempt {
    WebhookAttempt {
        endpoint_id: delivery.endpoint_id,
        event_id: delivery.event_id,
        attempted_at: at,
        status_code: (next == NextDelivery::Delivered).then_some(200),
        error: (next != NextDelivery::Delivered).then(|| "timeout".to_owned()),
        next,
    }
}

/// A cutoff no failure streak reaches back to: nothing is disabled.
fn never() -> DateTime<Utc> {
    now() - TimeDelta::days(365)
}

async fn claims_take_turns_across_endpoints_within_their_cap(store: Shared) {
    let busy_user = user(&store).await;
    let busy: Vec<Uuid> = [
        endpoint(&store, busy_user).await,
        endpoint(&store, busy_user).await,
    ]
    .into();
    raise(&store, busy_user, 6).await;
    let quiet_user = user(&store).await;
    let quiet = endpoint(&store, quiet_user).await;
    raise(&store, quiet_user, 1).await;

    // Three slots: every endpoint's first turn before anyone's second, whatever is older.
    let first = store.claim_webhook_deliveries(&claim(3, 2)).await.unwrap();
    assert_eq!(first.len(), 3);
    assert_eq!(
        (of(&first, busy[0]), of(&first, busy[1]), of(&first, quiet)),
        (1, 1, 1)
    );

    // Plenty of slots: the busy endpoints reach their cap of two (one each leased already).
    let second = store.claim_webhook_deliveries(&claim(50, 2)).await.unwrap();
    assert_eq!((of(&second, busy[0]), of(&second, busy[1])), (1, 1));
    assert_eq!(second.len(), 2);
    assert!(
        store
            .claim_webhook_deliveries(&claim(50, 2))
            .await
            .unwrap()
            .is_empty(),
        "every endpoint is at its cap or has nothing due"
    );

    // An answered delivery frees its endpoint's slot, for that endpoint only.
    let answered = first
        .iter()
        .find(|delivery| delivery.endpoint_id == busy[0])
        .unwrap();
    store
        .record_webhook_attempts(
            &[attempt(answered, now(), NextDelivery::Delivered)],
            never(),
            &webhook_disabled_events,
            &mut Vec::new(),
        )
        .await
        .unwrap();
    let third = store.claim_webhook_deliveries(&claim(50, 2)).await.unwrap();
    assert_eq!(third.len(), 1);
    assert_eq!(third[0].endpoint_id, busy[0]);
    assert_ne!(third[0].event_id, answered.event_id);
}

/// User A has ten endpoints whose deliveries hang (their leases never end within the test);
/// user B raises one event afterwards. B's delivery is in the very next claim, A never holds
/// more than the per-user cap, and what A leases does not grow while its deliveries hang.
async fn one_users_many_endpoints_never_hold_back_another_users_first_delivery(store: Shared) {
    const PER_USER: u32 = 4;
    let fair = |limit| DeliveryClaim {
        per_user: PER_USER,
        ..claim(limit, 2)
    };
    let noisy = user(&store).await;
    let mut noisy_endpoints = Vec::new();
    for _ in 0..10 {
        noisy_endpoints.push(endpoint(&store, noisy).await);
    }
    raise(&store, noisy, 5).await;

    // A alone: within its cap, round-robin over its endpoints (one each, four endpoints).
    let first = store.claim_webhook_deliveries(&fair(64)).await.unwrap();
    assert_eq!(first.len(), PER_USER as usize);
    assert!(
        noisy_endpoints
            .iter()
            .all(|endpoint| of(&first, *endpoint) <= 1)
    );
    // Its deliveries hang: another claim gives A nothing more.
    assert!(
        store
            .claim_webhook_deliveries(&fair(64))
            .await
            .unwrap()
            .is_empty()
    );

    let quiet = user(&store).await;
    let quiet_endpoint = endpoint(&store, quiet).await;
    raise(&store, quiet, 1).await;
    // One slot only, and A has forty-six deliveries older than B's: B's comes first.
    let next = store.claim_webhook_deliveries(&fair(1)).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].endpoint_id, quiet_endpoint);

    // A's hung deliveries fail and are due again at once: A gets its cap again, no more.
    let failed: Vec<WebhookAttempt> = first
        .iter()
        .map(|delivery| attempt(delivery, now(), NextDelivery::RetryAt(now())))
        .collect();
    store
        .record_webhook_attempts(&failed, never(), &webhook_disabled_events, &mut Vec::new())
        .await
        .unwrap();
    let again = store.claim_webhook_deliveries(&fair(64)).await.unwrap();
    assert_eq!(again.len(), PER_USER as usize);
    assert!(
        again
            .iter()
            .all(|delivery| noisy_endpoints.contains(&delivery.endpoint_id))
    );
}

async fn claims_skip_what_is_not_due_yet(store: Shared) {
    // Nothing at all: the plain read answers.
    assert!(
        store
            .claim_webhook_deliveries(&claim(10, 2))
            .await
            .unwrap()
            .is_empty()
    );
    let user_id = user(&store).await;
    endpoint(&store, user_id).await;
    raise(&store, user_id, 1).await;
    let mut early = claim(10, 2);
    early.due_by = now() - TimeDelta::hours(1);
    assert!(
        store
            .claim_webhook_deliveries(&early)
            .await
            .unwrap()
            .is_empty(),
        "raised after the horizon"
    );
    assert_eq!(
        store
            .claim_webhook_deliveries(&claim(10, 2))
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn an_endpoint_failing_long_enough_is_disabled_until_enabled(store: Shared) {
    let user_id = user(&store).await;
    let failing = endpoint(&store, user_id).await;
    let healthy = endpoint(&store, user_id).await;
    raise(&store, user_id, 3).await;
    let claimed = store
        .claim_webhook_deliveries(&claim(100, 1))
        .await
        .unwrap();
    let failed_at = now() - TimeDelta::hours(25);
    let first = claimed
        .iter()
        .find(|delivery| delivery.endpoint_id == failing)
        .unwrap()
        .clone();
    // The first failure, 25 h ago, starts the streak; a cutoff before it disables nothing.
    let retry = NextDelivery::RetryAt(now());
    let mut raised = Vec::new();
    store
        .record_webhook_attempts(
            &[attempt(&first, failed_at, retry)],
            never(),
            &webhook_disabled_events,
            &mut raised,
        )
        .await
        .unwrap();
    assert!(raised.is_empty());
    assert!(
        store
            .webhook_endpoint(user_id, failing)
            .await
            .unwrap()
            .unwrap()
            .disabled_at
            .is_none()
    );

    // Failing again with a streak older than the cutoff: disabled, its queue given up.
    let again = now();
    let mut raised = Vec::new();
    store
        .record_webhook_attempts(
            &[attempt(&first, again, retry)],
            again - TimeDelta::hours(24),
            &webhook_disabled_events,
            &mut raised,
        )
        .await
        .unwrap();
    assert_eq!(raised.len(), 1);
    assert_eq!(raised[0].event_type, EventType::WebhookDisabled);
    assert_eq!(raised[0].user_id, Some(user_id));
    assert_eq!(raised[0].data["webhook_id"], failing.to_string());
    let stored = store.user_events_after(user_id, None, 100).await.unwrap();
    assert!(stored.iter().any(|event| event.id == raised[0].id));
    let disabled = store
        .webhook_endpoint(user_id, failing)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(disabled.disabled_at, Some(again));
    let queue = store
        .webhook_deliveries(user_id, failing, 100)
        .await
        .unwrap()
        .unwrap();
    assert!(
        queue
            .iter()
            .all(|delivery| delivery.status == DeliveryStatus::Failed),
        "nothing left pending"
    );

    // Nothing is claimed or queued for it while disabled; the healthy endpoint goes on (and
    // hears of the disabling).
    let claimable = store
        .claim_webhook_deliveries(&claim(100, 100))
        .await
        .unwrap();
    assert_eq!(of(&claimable, failing), 0);
    assert!(of(&claimable, healthy) > 0);
    assert!(
        claimable
            .iter()
            .any(|delivery| delivery.event_id == raised[0].id),
        "the other endpoint receives webhook.disabled"
    );
    raise(&store, user_id, 1).await;
    let queued = store
        .webhook_deliveries(user_id, failing, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(queued.len(), queue.len(), "nothing queued while disabled");

    // Enabled by its owner (a stranger's call changes nothing): queued again from then on.
    let stranger = user(&store).await;
    assert!(
        store
            .enable_webhook_endpoint(stranger, failing, now())
            .await
            .unwrap()
            .is_none()
    );
    let enabled_at = now();
    let enabled = store
        .enable_webhook_endpoint(user_id, failing, enabled_at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(enabled.disabled_at, None);
    assert_eq!(enabled.updated_at, enabled_at);
    let again = store
        .enable_webhook_endpoint(user_id, failing, now() + TimeDelta::seconds(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.updated_at, enabled_at,
        "enabling twice changes nothing"
    );
    raise(&store, user_id, 1).await;
    let requeued = store
        .webhook_deliveries(user_id, failing, 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(requeued.len(), queue.len() + 1);
    // The streak started over: one more failure does not disable it.
    let fresh = store
        .claim_webhook_deliveries(&claim(100, 100))
        .await
        .unwrap();
    let fresh = fresh
        .iter()
        .find(|delivery| delivery.endpoint_id == failing)
        .unwrap();
    let mut raised = Vec::new();
    store
        .record_webhook_attempts(
            &[attempt(fresh, now(), retry)],
            now() - TimeDelta::hours(24),
            &webhook_disabled_events,
            &mut raised,
        )
        .await
        .unwrap();
    assert!(raised.is_empty());
}

async fn a_success_ends_the_failure_streak(store: Shared) {
    let user_id = user(&store).await;
    let flaky = endpoint(&store, user_id).await;
    raise(&store, user_id, 3).await;
    let claimed = store.claim_webhook_deliveries(&claim(3, 3)).await.unwrap();
    assert_eq!(claimed.len(), 3);
    let long_ago = now() - TimeDelta::hours(30);
    let retry = NextDelivery::RetryAt(now() + TimeDelta::hours(1));
    // Failed 30 h ago, answered since: the streak is over, a new failure starts another.
    store
        .record_webhook_attempts(
            &[
                attempt(&claimed[0], long_ago, retry),
                attempt(&claimed[1], now(), NextDelivery::Delivered),
            ],
            never(),
            &webhook_disabled_events,
            &mut Vec::new(),
        )
        .await
        .unwrap();
    let mut raised = Vec::new();
    store
        .record_webhook_attempts(
            &[attempt(&claimed[2], now(), retry)],
            now() - TimeDelta::hours(24),
            &webhook_disabled_events,
            &mut raised,
        )
        .await
        .unwrap();
    assert!(raised.is_empty());
    let endpoint = store
        .webhook_endpoint(user_id, flaky)
        .await
        .unwrap()
        .unwrap();
    assert!(endpoint.disabled_at.is_none());
}

async fn a_replaced_secret_is_handed_out_until_it_expires(store: Shared) {
    let user_id = user(&store).await;
    let rotated = endpoint(&store, user_id).await;
    raise(&store, user_id, 2).await;
    let at = now();
    let endpoint = store
        .replace_webhook_secret(
            user_id,
            rotated,
            &[2; 28],
            "next",
            at,
            at + TimeDelta::hours(24),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(endpoint.encrypted_secret, vec![2; 28]);
    assert_eq!(endpoint.secret_key_id, "next");
    assert_eq!(
        endpoint.previous_secret_expires_at,
        Some(at + TimeDelta::hours(24))
    );
    let claimed = store.claim_webhook_deliveries(&claim(1, 2)).await.unwrap();
    assert_eq!(claimed[0].encrypted_secret, vec![2; 28]);
    assert_eq!(
        claimed[0].previous_secret,
        Some((vec![1; 28], "current".to_owned()))
    );

    // Rotated again with the previous secret already expired: only the current one signs.
    let at = now();
    store
        .replace_webhook_secret(user_id, rotated, &[3; 28], "third", at, at)
        .await
        .unwrap()
        .unwrap();
    let claimed = store.claim_webhook_deliveries(&claim(1, 2)).await.unwrap();
    assert_eq!(claimed[0].encrypted_secret, vec![3; 28]);
    assert_eq!(claimed[0].previous_secret, None);
    // Another user's endpoint: nothing replaced.
    let stranger = user(&store).await;
    assert!(
        store
            .replace_webhook_secret(stranger, rotated, &[4; 28], "x", at, at)
            .await
            .unwrap()
            .is_none()
    );
}

/// With nothing due, a claim is a plain read: it answers while another connection holds the
/// SQLite write lock (a write transaction would wait for that lock and then fail as busy).
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_claim_with_nothing_due_takes_no_write_lock() {
    use std::str::FromStr as _;
    use std::time::Duration;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    let path = std::env::temp_dir().join(format!("agg-claims-{}.db", Uuid::new_v4().simple()));
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .unwrap()
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_millis(200));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .unwrap();
    let store = SqliteStore::new(pool.clone());
    store.migrate().await.unwrap();
    let mut writer = pool.acquire().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *writer)
        .await
        .unwrap();

    let claimed = store.claim_webhook_deliveries(&claim(10, 2)).await;

    sqlx::query("ROLLBACK").execute(&mut *writer).await.unwrap();
    drop(writer);
    pool.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    assert!(claimed.expect("no write lock needed").is_empty());
}
