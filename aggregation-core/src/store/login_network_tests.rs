//! [`LoginNetworkStore`]: one suite, run on in-memory SQLite always and on PostgreSQL when
//! `AGG_TEST_DATABASE_URL` is set.

use chrono::TimeDelta;
use uuid::Uuid;

#[cfg(feature = "postgres")]
use super::provider_tests::on_postgres;
#[cfg(feature = "sqlite")]
use super::provider_tests::sqlite_store;
use super::provider_tests::{Shared, suite, user};
use super::*;

suite!(
    a_login_is_remembered_per_user_and_network,
    an_earlier_login_does_not_move_the_time_back,
    each_user_keeps_only_the_most_recent_networks,
    purge_deletes_networks_unused_since_the_cutoff,
    a_network_needs_an_existing_user,
);

async fn a_login_is_remembered_per_user_and_network(store: Shared) {
    let (ada, grace) = (user(&store).await, user(&store).await);
    let at = now();
    assert_eq!(
        store
            .login_network_last_success(ada, b"home")
            .await
            .unwrap(),
        None
    );
    store
        .record_login_network(ada, b"home", at, 8)
        .await
        .unwrap();
    assert_eq!(
        store
            .login_network_last_success(ada, b"home")
            .await
            .unwrap(),
        Some(at)
    );
    assert_eq!(
        store
            .login_network_last_success(ada, b"work")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .login_network_last_success(grace, b"home")
            .await
            .unwrap(),
        None
    );
    // An unknown user is simply unknown.
    assert_eq!(
        store
            .login_network_last_success(Uuid::nil(), b"home")
            .await
            .unwrap(),
        None
    );
    let later = at + TimeDelta::hours(1);
    store
        .record_login_network(ada, b"home", later, 8)
        .await
        .unwrap();
    assert_eq!(
        store
            .login_network_last_success(ada, b"home")
            .await
            .unwrap(),
        Some(later)
    );
}

async fn an_earlier_login_does_not_move_the_time_back(store: Shared) {
    let ada = user(&store).await;
    let at = now();
    store
        .record_login_network(ada, b"home", at, 8)
        .await
        .unwrap();
    // A slower instance finishing a login that began earlier.
    store
        .record_login_network(ada, b"home", at - TimeDelta::seconds(5), 8)
        .await
        .unwrap();
    assert_eq!(
        store
            .login_network_last_success(ada, b"home")
            .await
            .unwrap(),
        Some(at)
    );
}

async fn each_user_keeps_only_the_most_recent_networks(store: Shared) {
    let (ada, grace) = (user(&store).await, user(&store).await);
    let start = now() - TimeDelta::days(1);
    store
        .record_login_network(grace, b"n0", start, 2)
        .await
        .unwrap();
    for index in 0..5_u8 {
        let at = start + TimeDelta::minutes(i64::from(index));
        store
            .record_login_network(ada, &[b'n', b'0' + index], at, 3)
            .await
            .unwrap();
    }
    // The first network used again: now the most recent.
    let latest = start + TimeDelta::hours(1);
    store
        .record_login_network(ada, b"n0", latest, 3)
        .await
        .unwrap();
    let mut kept = Vec::new();
    for index in 0..5_u8 {
        let digest = [b'n', b'0' + index];
        if store
            .login_network_last_success(ada, &digest)
            .await
            .unwrap()
            .is_some()
        {
            kept.push(index);
        }
    }
    assert_eq!(kept, [0, 3, 4]);
    // Another user's networks are not counted against this one.
    assert_eq!(
        store
            .login_network_last_success(grace, b"n0")
            .await
            .unwrap(),
        Some(start)
    );
}

async fn purge_deletes_networks_unused_since_the_cutoff(store: Shared) {
    let ada = user(&store).await;
    let cutoff = now() - TimeDelta::days(30);
    store
        .record_login_network(ada, b"old", cutoff - TimeDelta::seconds(1), 8)
        .await
        .unwrap();
    store
        .record_login_network(ada, b"at-cutoff", cutoff, 8)
        .await
        .unwrap();
    store
        .record_login_network(ada, b"recent", cutoff + TimeDelta::seconds(1), 8)
        .await
        .unwrap();
    assert_eq!(store.purge_login_networks_before(cutoff).await.unwrap(), 2);
    for (digest, kept) in [
        (&b"old"[..], false),
        (&b"at-cutoff"[..], false),
        (&b"recent"[..], true),
    ] {
        let found = store.login_network_last_success(ada, digest).await.unwrap();
        assert_eq!(found.is_some(), kept, "{}", String::from_utf8_lossy(digest));
    }
}

async fn a_network_needs_an_existing_user(store: Shared) {
    // Recorded only after a successful login, so always for a user; the foreign key makes the
    // rows go with the user.
    assert!(
        store
            .record_login_network(Uuid::now_v7(), b"home", now(), 8)
            .await
            .is_err()
    );
}
