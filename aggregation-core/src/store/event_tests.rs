//! The outbox ([`EventStore`] and the events the write paths add): one suite, run on in-memory
//! SQLite always and on PostgreSQL when `AGG_TEST_DATABASE_URL` is set.

use chrono::TimeDelta;
use uuid::Uuid;

#[cfg(feature = "postgres")]
use super::provider_tests::on_postgres;
#[cfg(feature = "sqlite")]
use super::provider_tests::sqlite_store;
use super::provider_tests::{
    Shared, SyncFixture, account, authorize, credentials, expired_events_of, is_other, suite,
    sync_events_of, transaction, user, write_sync,
};
use super::sql::EVENTS_PER_STATEMENT;
use super::*;
use crate::auth::password_reset_events;
use crate::auth::token_version::rotation_events;
use crate::events::{Event, EventType};
use crate::providers::connections::{connection_created_events, connection_deleted_events};
use crate::sessions::revocation_events;

suite!(
    revocations_write_one_event_per_session_revoked,
    password_reset_writes_its_events_and_a_failed_one_none,
    user_events_page_after_a_cursor,
    audit_filters_combine,
    purge_deletes_only_older_events,
    connection_writes_raise_their_events_only_when_they_apply,
    syncs_raise_their_event_and_a_rolled_back_one_none,
    rotations_raise_their_events,
    revoke_all_writes_an_event_and_a_delivery_per_session,
    revoke_all_beyond_one_statement_writes_every_event_and_delivery,
);

/// A live session of `user_id`, with its refresh token `token`.
pub(super) async fn session(store: &Shared, user_id: Uuid, token: &[u8]) -> Uuid {
    let id = Uuid::now_v7();
    let at = now();
    let expires_at = at + TimeDelta::days(1);
    store
        .create_session(
            &NewSession {
                id,
                user_id,
                device_info: None,
                ip_address: None,
                user_agent: None,
                created_at: at,
                expires_at,
            },
            &NewRefreshToken {
                digest: token.to_vec(),
                session_id: id,
                user_id,
                token_version: 0,
                issued_at: at,
                expires_at,
            },
        )
        .await
        .unwrap();
    id
}

fn all(limit: u32) -> AuditFilter {
    AuditFilter {
        limit,
        ..AuditFilter::default()
    }
}

/// `(type, session_id, reason)` of each stored event of the user.
async fn revocations(store: &Shared, user_id: Uuid) -> Vec<(EventType, String, String)> {
    store
        .user_events_after(user_id, None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|event| {
            (
                event.event_type,
                event.data["session_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                event.data["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn revocations_write_one_event_per_session_revoked(store: Shared) {
    let user_id = user(&store).await;
    let first = session(&store, user_id, b"one").await;
    let second = session(&store, user_id, b"two").await;
    let third = session(&store, user_id, b"three").await;
    let kept = session(&store, user_id, b"four").await;

    let mut written = Vec::new();
    let found = store
        .revoke_session_by_token(
            user_id,
            b"one",
            "logout",
            now(),
            &revocation_events("logout", now()),
            &mut written,
        )
        .await
        .unwrap();
    assert!(found);
    assert_eq!(written.len(), 1);
    // Already revoked: nothing new.
    let mut again = Vec::new();
    let found = store
        .revoke_session(
            user_id,
            first,
            "manual",
            now(),
            &revocation_events("manual", now()),
            &mut again,
        )
        .await
        .unwrap();
    assert!(found);
    assert_eq!(again, Vec::new());
    // Another user's token or session: nothing.
    let stranger = user(&store).await;
    let mut nothing = Vec::new();
    assert!(
        !store
            .revoke_session_by_token(
                stranger,
                b"two",
                "logout",
                now(),
                &revocation_events("logout", now()),
                &mut nothing,
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .revoke_session(
                stranger,
                second,
                "manual",
                now(),
                &revocation_events("manual", now()),
                &mut nothing,
            )
            .await
            .unwrap()
    );
    let bulk = store
        .revoke_all_sessions(user_id, Some(kept), "logout_all", now())
        .await
        .unwrap();
    assert_eq!(bulk.len(), 2);

    let expected = vec![
        (
            EventType::SessionRevoked,
            first.to_string(),
            "logout".to_owned(),
        ),
        (
            EventType::SessionRevoked,
            second.to_string(),
            "logout_all".to_owned(),
        ),
        (
            EventType::SessionRevoked,
            third.to_string(),
            "logout_all".to_owned(),
        ),
    ];
    assert_eq!(revocations(&store, user_id).await, expected);
    assert!(revocations(&store, stranger).await.is_empty());
    let stored = store.user_events_after(user_id, None, 100).await.unwrap();
    let returned: Vec<Event> = written.into_iter().chain(bulk).collect();
    assert_eq!(
        stored, returned,
        "the store hands back exactly what it wrote"
    );
}

async fn password_reset_writes_its_events_and_a_failed_one_none(store: Shared) {
    let user_id = user(&store).await;
    let live = session(&store, user_id, b"live").await;
    let at = now();
    store
        .insert_one_time_token(&NewOneTimeToken {
            digest: b"reset".to_vec(),
            purpose: TokenPurpose::PasswordReset,
            user_id,
            created_at: at,
            expires_at: at + TimeDelta::hours(1),
            ip_address: None,
            user_agent: None,
        })
        .await
        .unwrap();
    let mut events = Vec::new();
    let check = store
        .reset_password(
            b"unknown",
            "new-hash",
            now(),
            &password_reset_events(now()),
            &mut events,
        )
        .await
        .unwrap();
    assert_eq!((check, events), (TokenCheck::Unknown, Vec::new()));
    assert!(store.audit_events(&all(100)).await.unwrap().is_empty());

    let mut events = Vec::new();
    let check = store
        .reset_password(
            b"reset",
            "new-hash",
            now(),
            &password_reset_events(now()),
            &mut events,
        )
        .await
        .unwrap();
    assert_eq!(check, TokenCheck::Consumed { user_id });
    let stored = store.user_events_after(user_id, None, 100).await.unwrap();
    assert_eq!(stored, events);
    let types: Vec<EventType> = stored.iter().map(|event| event.event_type).collect();
    assert_eq!(
        types,
        [EventType::PasswordChanged, EventType::SessionRevoked]
    );
    assert_eq!(stored[0].data, serde_json::json!({"method": "reset"}));
    assert_eq!(stored[1].data["session_id"], live.to_string());
    assert_eq!(stored[1].data["reason"], "password_reset");
    let text = serde_json::to_string(&stored.iter().map(Event::body).collect::<Vec<_>>()).unwrap();
    assert!(!text.contains("new-hash"), "no secret in a payload: {text}");

    // The token is used up: a second reset writes nothing.
    let mut events = Vec::new();
    let check = store
        .reset_password(
            b"reset",
            "other-hash",
            now(),
            &password_reset_events(now()),
            &mut events,
        )
        .await
        .unwrap();
    assert_eq!((check, events), (TokenCheck::AlreadyUsed, Vec::new()));
    assert_eq!(store.audit_events(&all(100)).await.unwrap().len(), 2);
}

/// Revokes `count` fresh sessions of the user one by one; their events, in order.
async fn raise(store: &Shared, user_id: Uuid, count: usize) -> Vec<Event> {
    let mut events = Vec::new();
    for index in 0..count {
        let token = format!("{user_id}-{index}");
        session(store, user_id, token.as_bytes()).await;
        let mut written = Vec::new();
        let found = store
            .revoke_session_by_token(
                user_id,
                token.as_bytes(),
                "logout",
                now(),
                &revocation_events("logout", now()),
                &mut written,
            )
            .await
            .unwrap();
        assert!(found);
        events.extend(written);
    }
    events
}

async fn user_events_page_after_a_cursor(store: Shared) {
    let user_id = user(&store).await;
    let other = user(&store).await;
    let mine = raise(&store, user_id, 5).await;
    raise(&store, other, 2).await;

    let first = store.user_events_after(user_id, None, 2).await.unwrap();
    assert_eq!(first, mine[..2]);
    let rest = store
        .user_events_after(user_id, Some(first[1].id), 10)
        .await
        .unwrap();
    assert_eq!(rest, mine[2..]);
    let none = store
        .user_events_after(user_id, Some(mine[4].id), 10)
        .await
        .unwrap();
    assert!(none.is_empty());
}

async fn audit_filters_combine(store: Shared) {
    let alice = user(&store).await;
    let bob = user(&store).await;
    let mut everything = raise(&store, alice, 2).await;
    everything.extend(raise(&store, bob, 2).await);
    let reset = {
        let at = now();
        store
            .insert_one_time_token(&NewOneTimeToken {
                digest: b"bob-reset".to_vec(),
                purpose: TokenPurpose::PasswordReset,
                user_id: bob,
                created_at: at,
                expires_at: at + TimeDelta::hours(1),
                ip_address: None,
                user_agent: None,
            })
            .await
            .unwrap();
        let mut reset = Vec::new();
        store
            .reset_password(
                b"bob-reset",
                "hash",
                now(),
                &password_reset_events(now()),
                &mut reset,
            )
            .await
            .unwrap();
        reset
    };
    everything.extend(reset);

    assert_eq!(store.audit_events(&all(100)).await.unwrap(), everything);
    let by_user = AuditFilter {
        user_id: Some(alice),
        ..all(100)
    };
    assert_eq!(store.audit_events(&by_user).await.unwrap(), everything[..2]);
    let by_type = AuditFilter {
        event_type: Some(EventType::PasswordChanged),
        ..all(100)
    };
    let changed = store.audit_events(&by_type).await.unwrap();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].user_id, Some(bob));
    let by_both = AuditFilter {
        user_id: Some(alice),
        event_type: Some(EventType::PasswordChanged),
        ..all(100)
    };
    assert!(store.audit_events(&by_both).await.unwrap().is_empty());

    // Time range: since inclusive, until exclusive.
    let pivot = everything[2].occurred_at;
    let since = AuditFilter {
        since: Some(pivot),
        ..all(100)
    };
    let from_pivot = store.audit_events(&since).await.unwrap();
    assert!(from_pivot.iter().all(|event| event.occurred_at >= pivot));
    assert!(from_pivot.contains(&everything[2]));
    let until = AuditFilter {
        until: Some(pivot),
        ..all(100)
    };
    let before_pivot = store.audit_events(&until).await.unwrap();
    assert!(before_pivot.iter().all(|event| event.occurred_at < pivot));
    assert_eq!(from_pivot.len() + before_pivot.len(), everything.len());

    // Keyset pages of two cover everything once, in order.
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .audit_events(&AuditFilter { after, ..all(2) })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|event| event.id);
        paged.extend(page);
    }
    assert_eq!(paged, everything);
}

async fn purge_deletes_only_older_events(store: Shared) {
    let user_id = user(&store).await;
    let events = raise(&store, user_id, 3).await;
    let cutoff = events[1].occurred_at;
    assert_eq!(
        store
            .purge_events_before(cutoff - TimeDelta::days(1))
            .await
            .unwrap(),
        0
    );
    let purged = store.purge_events_before(cutoff).await.unwrap();
    let left = store.audit_events(&all(100)).await.unwrap();
    assert_eq!(purged as usize + left.len(), 3);
    assert!(left.iter().all(|event| event.occurred_at >= cutoff));
    assert!(left.contains(&events[1]) && left.contains(&events[2]));
}

/// The stored events of the user, as `(type, data)`.
async fn stored(store: &Shared, user_id: Uuid) -> Vec<Event> {
    store.user_events_after(user_id, None, 100).await.unwrap()
}

async fn connection_writes_raise_their_events_only_when_they_apply(store: Shared) {
    let user_id = user(&store).await;
    let stranger = user(&store).await;
    let t0 = now();
    let expires = t0 + TimeDelta::hours(1);
    let mut raised = Vec::new();
    // Authorized, then authorized again (credentials tagged 1, then 2).
    let mut saved = Vec::new();
    for tag in [1, 2] {
        let connection = store
            .save_authorized_connection(
                user_id,
                "schwab",
                Some("Main"),
                Uuid::now_v7(),
                &move |_| Ok(credentials(tag, expires)),
                t0,
                &connection_created_events(t0),
                &mut raised,
            )
            .await
            .unwrap();
        saved.push(connection);
    }
    let [(created, true), (again, false)] = saved.as_slice() else {
        panic!("created, then re-authorized: {saved:?}");
    };
    assert_eq!(again.id, created.id);
    // Not the stored credentials, or not the owner: nothing changes, no event.
    assert!(
        !store
            .expire_connection_credentials(
                created.id,
                &[1; 8],
                t0,
                &expired_events_of(&store, created.id, t0).await,
                &mut raised
            )
            .await
            .unwrap()
    );
    assert!(
        store
            .disconnect_connection(
                stranger,
                created.id,
                t0,
                &connection_deleted_events(t0),
                &mut raised
            )
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(raised.len(), 2);
    assert!(
        store
            .expire_connection_credentials(
                created.id,
                &[2; 8],
                t0,
                &expired_events_of(&store, created.id, t0).await,
                &mut raised
            )
            .await
            .unwrap()
    );
    store
        .disconnect_connection(
            user_id,
            created.id,
            t0,
            &connection_deleted_events(t0),
            &mut raised,
        )
        .await
        .unwrap()
        .unwrap();
    // Disconnected already: returned as it is, no second event.
    store
        .disconnect_connection(
            user_id,
            created.id,
            t0,
            &connection_deleted_events(t0),
            &mut raised,
        )
        .await
        .unwrap()
        .unwrap();

    let events = stored(&store, user_id).await;
    assert_eq!(events, raised, "what was raised is what was stored");
    let types: Vec<EventType> = events.iter().map(|event| event.event_type).collect();
    assert_eq!(
        types,
        [
            EventType::ConnectionCreated,
            EventType::ConnectionCreated,
            EventType::ConnectionExpired,
            EventType::ConnectionDeleted,
        ]
    );
    let id = created.id.to_string();
    assert_eq!(
        events[0].data,
        serde_json::json!({"connection_id": id, "provider": "schwab", "reauthorized": false})
    );
    assert_eq!(events[1].data["reauthorized"], true);
    assert_eq!(
        events[2].data,
        serde_json::json!({"connection_id": id, "provider": "schwab", "reason": "refresh_refused"})
    );
    assert_eq!(
        events[3].data,
        serde_json::json!({"connection_id": id, "provider": "schwab"})
    );
    assert!(stored(&store, stranger).await.is_empty());
}

async fn syncs_raise_their_event_and_a_rolled_back_one_none(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, None, 1, t0, t0).await;
    let before = stored(&store, user_id).await;
    // Transactions of one account (with the account itself, when given).
    let sync_batch = |new: Option<NewAccount>, account_id: &str, transactions| SyncFixture {
        accounts: new.into_iter().collect(),
        per_account: vec![BatchAccount {
            account: None,
            balance_reported: false,
            absent_holdings: AbsentHoldings::Deactivated,
            provider_account_id: account_id.to_owned(),
            transactions: Some(transactions),
            pending_window: None,
            holdings: None,
            snapshots: Vec::new(),
        }],
        mark_synced: true,
        account_limit: None,
        feed: None,
    };
    let batch = sync_batch(
        Some(account("A", "10")),
        "A",
        vec![transaction("t1", "1"), transaction("t2", "2")],
    );
    let mut raised = Vec::new();
    let counts = write_sync(
        &store,
        connection.id,
        &batch,
        t0,
        &sync_events_of(&store, connection.id, t0).await,
        &mut raised,
    )
    .await
    .unwrap();
    assert_eq!(counts.transactions.created, 2);
    assert_eq!(raised.len(), 1);
    let event = &raised[0];
    assert_eq!(event.event_type, EventType::SyncCompleted);
    assert_eq!(event.user_id, Some(user_id));
    assert_eq!(event.data["connection_id"], connection.id.to_string());
    assert_eq!(
        event.data["counts"]["accounts"],
        serde_json::json!({"created": 1, "updated": 0, "unchanged": 0})
    );
    assert_eq!(event.data["counts"]["transactions"]["created"], 2);
    assert_eq!(event.data["counts"]["holdings"]["deactivated"], 0);

    // A batch naming an unknown account rolls back: no records and no event.
    let failing = sync_batch(None, "unknown", vec![transaction("t3", "3")]);
    let mut none = Vec::new();
    assert!(is_other(
        &write_sync(
            &store,
            connection.id,
            &failing,
            t0,
            &sync_events_of(&store, connection.id, t0).await,
            &mut none
        )
        .await
    ));
    assert!(none.is_empty());
    let mut expected = before;
    expected.extend(raised);
    assert_eq!(stored(&store, user_id).await, expected);
}

async fn rotations_raise_their_events(store: Shared) {
    let admin = user(&store).await;
    let target = user(&store).await;
    let rotation = |reason: &str| NewTokenRotation {
        id: Uuid::now_v7(),
        reason: reason.to_owned(),
        initiated_by: Some(admin),
        grace_period_seconds: 60,
        at: now(),
    };
    let mut raised = Vec::new();
    let unknown = store
        .rotate_user_token_version(
            Uuid::now_v7(),
            &rotation("gone"),
            &rotation_events(&rotation("gone"), RotationScope::User, Some(Uuid::now_v7())),
            &mut raised,
        )
        .await
        .unwrap();
    assert!(unknown.is_none() && raised.is_empty());
    let for_user = rotation("lost laptop");
    let outcome = store
        .rotate_user_token_version(
            target,
            &for_user,
            &rotation_events(&for_user, RotationScope::User, Some(target)),
            &mut raised,
        )
        .await
        .unwrap()
        .unwrap();
    let global = rotation("key rollover");
    let global_outcome = store
        .rotate_global_token_version(
            &global,
            &rotation_events(&global, RotationScope::Global, None),
            &mut raised,
        )
        .await
        .unwrap();

    assert_eq!(store.audit_events(&all(100)).await.unwrap(), raised);
    assert_eq!(raised[0].user_id, Some(target));
    assert_eq!(
        raised[0].data,
        serde_json::json!({
            "rotation_id": for_user.id,
            "scope": "user",
            "target_user_id": target,
            "previous_version": outcome.previous_version,
            "new_version": outcome.new_version,
            "initiated_by": admin,
        })
    );
    assert_eq!(raised[1].user_id, None);
    assert_eq!(raised[1].data["scope"], "global");
    assert_eq!(raised[1].data["rotation_id"], global.id.to_string());
    assert_eq!(raised[1].data["new_version"], global_outcome.new_version);
    let text = serde_json::to_string(&raised.iter().map(Event::body).collect::<Vec<_>>()).unwrap();
    assert!(
        !text.contains("laptop"),
        "the reason stays in the rotation audit rows"
    );
}

/// A webhook endpoint of `user_id` receiving `types` (every type when empty); its id.
async fn endpoint(store: &Shared, user_id: Uuid, types: &[&str]) -> Uuid {
    let id = Uuid::now_v7();
    let endpoint = NewWebhookEndpoint {
        id,
        user_id,
        url: "https://hooks.example/in".to_owned(),
        event_types: types.iter().map(|name| (*name).to_owned()).collect(),
        encrypted_secret: vec![7; 28],
        secret_key_id: "k1".to_owned(),
        created_at: now(),
    };
    assert!(store.create_webhook_endpoint(&endpoint, 10).await.unwrap());
    id
}

/// `(event, type, status, attempt count, created at, next attempt at)` of each delivery of
/// the endpoint, oldest event first.
type DeliveryFields = (
    Uuid,
    String,
    DeliveryStatus,
    i32,
    chrono::DateTime<chrono::Utc>,
    Option<chrono::DateTime<chrono::Utc>>,
);

async fn deliveries(store: &Shared, user_id: Uuid, endpoint_id: Uuid) -> Vec<DeliveryFields> {
    let mut listed: Vec<DeliveryFields> = store
        .webhook_deliveries(user_id, endpoint_id, 10_000)
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|delivery| {
            (
                delivery.event_id,
                delivery.event_type,
                delivery.status,
                delivery.attempt_count,
                delivery.created_at,
                delivery.next_attempt_at,
            )
        })
        .collect();
    listed.sort_by_key(|fields| fields.0);
    listed
}

/// Revokes every session but one of a user with `count` more live sessions and two matching
/// endpoints (one for `session.revoked`, one for every type): one event per session, and one
/// pending delivery per event and matching endpoint, with the payload the outbox always
/// stored; nothing for an endpoint of other types or of another user.
async fn revoke_all_fans_out(store: Shared, count: usize) {
    let user_id = user(&store).await;
    let subscribed = endpoint(&store, user_id, &["session.revoked"]).await;
    let every_type = endpoint(&store, user_id, &[]).await;
    let other_types = endpoint(&store, user_id, &["password.changed", "sync.completed"]).await;
    let stranger = user(&store).await;
    let strangers = endpoint(&store, stranger, &[]).await;
    session(&store, stranger, b"stranger").await;
    let kept = session(&store, user_id, b"kept").await;
    for index in 0..count {
        session(&store, user_id, format!("{user_id}-{index}").as_bytes()).await;
    }

    let revoked = store
        .revoke_all_sessions(user_id, Some(kept), "logout_all", now())
        .await
        .unwrap();
    assert_eq!(revoked.len(), count);
    let limit = u32::try_from(count + 10).unwrap();
    let stored = store.user_events_after(user_id, None, limit).await.unwrap();
    assert_eq!(stored, revoked, "every event stored, in order");
    let expected: Vec<DeliveryFields> = revoked
        .iter()
        .map(|event| {
            (
                event.id,
                "session.revoked".to_owned(),
                DeliveryStatus::Pending,
                0,
                event.occurred_at,
                Some(event.occurred_at),
            )
        })
        .collect();
    assert_eq!(deliveries(&store, user_id, subscribed).await, expected);
    assert_eq!(deliveries(&store, user_id, every_type).await, expected);
    assert!(deliveries(&store, user_id, other_types).await.is_empty());
    assert!(deliveries(&store, stranger, strangers).await.is_empty());

    // The payload is the exact text receivers are sent and verify the signature over.
    let claim_limit = u32::try_from(count * 3).unwrap();
    let claimed = store
        .claim_webhook_deliveries(&DeliveryClaim {
            now: now(),
            due_by: now(),
            lease_until: now() + TimeDelta::minutes(5),
            limit: claim_limit,
            per_endpoint: claim_limit,
            per_user: claim_limit,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), count * 2);
    for delivery in claimed {
        let event = revoked
            .iter()
            .find(|event| event.id == delivery.event_id)
            .unwrap();
        let payload = serde_json::json!({
            "id": event.id,
            "type": event.event_type.as_str(),
            "occurred_at": event.occurred_at,
            "data": event.data,
        })
        .to_string();
        assert_eq!(delivery.payload, payload);
    }
}

async fn revoke_all_writes_an_event_and_a_delivery_per_session(store: Shared) {
    revoke_all_fans_out(store, 300).await;
}

/// More events than one statement takes: the chunks together write them all.
async fn revoke_all_beyond_one_statement_writes_every_event_and_delivery(store: Shared) {
    revoke_all_fans_out(store, EVENTS_PER_STATEMENT + 1).await;
}

/// When the event cannot be written, the change it belongs to is rolled back with it (here the
/// outbox refuses every insert: the disconnect stays undone), and so are the events already
/// written when their webhook deliveries cannot be.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_failed_event_write_rolls_its_change_back() {
    let sqlite = SqliteStore::in_memory().await.unwrap();
    let pool = sqlite.pool().clone();
    sqlx::query(
        "CREATE TRIGGER refuse_events BEFORE INSERT ON events \
         BEGIN SELECT RAISE(ABORT, 'outbox refused'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let store: Shared = std::sync::Arc::new(sqlite);
    let user_id = user(&store).await;
    let t0 = now();
    // Authorizing raises connection.created: refused, so no connection either.
    let mut raised = Vec::new();
    let saved = store
        .save_authorized_connection(
            user_id,
            "schwab",
            None,
            Uuid::now_v7(),
            &move |_| Ok(credentials(1, t0)),
            t0,
            &connection_created_events(t0),
            &mut raised,
        )
        .await;
    assert!(saved.is_err());
    assert!(raised.is_empty());
    assert!(
        store
            .connections_for_user(user_id, false)
            .await
            .unwrap()
            .is_empty()
    );
    // A logout cannot revoke its session without its event.
    session(&store, user_id, b"live").await;
    assert!(
        store
            .revoke_session_by_token(
                user_id,
                b"live",
                "logout",
                now(),
                &revocation_events("logout", now()),
                &mut Vec::new(),
            )
            .await
            .is_err()
    );
    let sessions = store.sessions_for_user(user_id, true, now()).await.unwrap();
    assert_eq!(sessions.len(), 1, "the session is still live");

    // Events written, then their webhook fan-out refused: the events go with the revocation.
    sqlx::raw_sql(
        "DROP TRIGGER refuse_events; \
         CREATE TRIGGER refuse_deliveries BEFORE INSERT ON webhook_deliveries \
         BEGIN SELECT RAISE(ABORT, 'deliveries refused'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let hooked = endpoint(&store, user_id, &["session.revoked"]).await;
    for index in 0..3 {
        session(&store, user_id, format!("more-{index}").as_bytes()).await;
    }
    assert!(
        store
            .revoke_all_sessions(user_id, None, "logout_all", now())
            .await
            .is_err()
    );
    assert!(stored(&store, user_id).await.is_empty(), "no event left");
    assert!(deliveries(&store, user_id, hooked).await.is_empty());
    let sessions = store.sessions_for_user(user_id, true, now()).await.unwrap();
    assert_eq!(sessions.len(), 4, "every session is still live");
}
