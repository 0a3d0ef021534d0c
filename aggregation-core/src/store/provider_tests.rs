//! [`ProviderConnectionStore`], [`SyncStore`] and provider syncs through [`BatchStore`]: one suite, run on in-memory SQLite always and
//! on PostgreSQL when `AGG_TEST_DATABASE_URL` is set (each case in a schema of its own, dropped
//! after it, so cases run in parallel and leave nothing behind). The concurrent cases also run
//! on a SQLite file with several connections.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use futures_util::future::join_all;
use rust_decimal::Decimal;
use uuid::Uuid;

use super::*;
use crate::events::{Event, RaiseEvents};
use crate::providers::connections::{
    connection_created_events, connection_deleted_events, connection_expired_events,
};
use crate::providers::sync::sync_events;

/// The service's `sync.completed` rule for a sync of `connection_id`, its user read from
/// `store` (the nil id for an unknown connection, whose sync writes nothing).
pub(super) async fn sync_events_of(
    store: &Shared,
    connection_id: Uuid,
    at: DateTime<Utc>,
) -> impl Fn(&BatchCounts) -> Vec<Event> + Send + Sync + use<> {
    let user_id = store
        .connection_by_id(connection_id)
        .await
        .unwrap()
        .map_or_else(Uuid::nil, |connection| connection.user_id);
    sync_events(user_id, connection_id, at)
}

/// A provider sync's batch as the suite states it: the accounts the provider listed (upserted
/// first), then each account's rows.
#[derive(Debug, Clone, Default)]
pub(super) struct SyncFixture {
    /// The accounts fetched.
    pub(super) accounts: Vec<NewAccount>,
    /// Each account's rows (merged into its entry when the account was fetched).
    pub(super) per_account: Vec<BatchAccount>,
    /// Whether the connection's sync time moves.
    pub(super) mark_synced: bool,
    /// The account limit.
    pub(super) account_limit: Option<u64>,
    /// A change feed's update.
    pub(super) feed: Option<FeedUpdate>,
}

impl SyncFixture {
    /// The normalized batch of this sync into `connection_id`.
    pub(super) fn batch(&self, connection_id: Uuid) -> NormalizedBatch {
        let mut accounts: Vec<BatchAccount> = self
            .accounts
            .iter()
            .map(|account| BatchAccount {
                account: Some(account.clone()),
                balance_reported: true,
                absent_holdings: AbsentHoldings::Deactivated,
                ..BatchAccount::new(account.provider_account_id.clone())
            })
            .collect();
        for rows in &self.per_account {
            match accounts
                .iter_mut()
                .find(|item| item.provider_account_id == rows.provider_account_id)
            {
                Some(item) => {
                    item.transactions.clone_from(&rows.transactions);
                    item.pending_window = rows.pending_window;
                    item.holdings.clone_from(&rows.holdings);
                    item.snapshots.clone_from(&rows.snapshots);
                }
                None => accounts.push(rows.clone()),
            }
        }
        NormalizedBatch {
            source: TransactionSource::Sync,
            origin: None,
            account_limit: self.account_limit,
            connections: vec![BatchConnection {
                target: BatchTarget::Connection(connection_id),
                accounts,
                feed: self.feed.clone(),
                mark_synced: self.mark_synced,
            }],
        }
    }
}

/// Applies a sync of `connection_id` through the batch writer, for the connection's user (the
/// nil id for an unknown connection).
pub(super) async fn write_sync(
    store: &Shared,
    connection_id: Uuid,
    sync: &SyncFixture,
    at: DateTime<Utc>,
    raise: &RaiseEvents<'_, BatchCounts>,
    raised: &mut Vec<Event>,
) -> Result<BatchCounts, StoreError> {
    let user_id = store
        .connection_by_id(connection_id)
        .await?
        .map_or_else(Uuid::nil, |connection| connection.user_id);
    store
        .apply_batch(user_id, &sync.batch(connection_id), at, raise, raised)
        .await
}

/// The service's `connection.expired` events of an expiry of `connection_id`, read from
/// `store` (none for an unknown connection).
pub(super) async fn expired_events_of(
    store: &Shared,
    connection_id: Uuid,
    at: DateTime<Utc>,
) -> Vec<Event> {
    store
        .connection_by_id(connection_id)
        .await
        .unwrap()
        .map_or_else(Vec::new, |connection| {
            connection_expired_events(&connection, at)
        })
}

pub(super) type Shared = Arc<dyn Store>;

/// Declares each case once per backend.
macro_rules! suite {
    ($($case:ident),+ $(,)?) => {
        #[cfg(feature = "sqlite")]
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$case(super::sqlite_store().await).await;
                }
            )+
        }

        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    super::on_postgres(super::$case).await;
                }
            )+
        }
    };
}
pub(super) use suite;

suite!(
    oauth_state_is_taken_once,
    concurrent_takes_get_the_state_once,
    authorized_connection_is_created_then_reauthorized,
    a_connection_is_renewed_by_id,
    concurrent_callbacks_create_one_connection,
    disconnect_clears_credentials_and_is_idempotent,
    alias_update_moves_updated_at_only_on_change,
    connections_list_newest_first,
    credentials_and_status_updates_skip_disconnected,
    a_revocation_writes_its_event_once_and_skips_disconnected,
    credential_swaps_and_expiry_compare_the_previous_credentials,
    concurrent_swaps_from_one_version_apply_once,
    due_for_refresh_and_sync_selection,
    claim_sync_cools_down_forces_and_releases,
    concurrent_claims_grant_one,
    request_budgets_add_up_from_the_later_instant,
    sync_batch_counts_and_snapshots,
    sync_batch_rolls_back_on_unknown_account,
    purge_deletes_expired_oauth_states,
);

#[cfg(feature = "sqlite")]
pub(super) async fn sqlite_store() -> Shared {
    Arc::new(SqliteStore::in_memory().await.unwrap())
}

/// The concurrent cases again on a SQLite file with a pool of several connections, where
/// writers really contend (the in-memory store has a single connection).
#[cfg(feature = "sqlite")]
mod sqlite_file {
    macro_rules! contended {
        ($($case:ident),+ $(,)?) => {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::on_sqlite_file(super::$case).await;
                }
            )+
        };
    }

    contended!(
        concurrent_takes_get_the_state_once,
        concurrent_callbacks_create_one_connection,
        concurrent_claims_grant_one,
        concurrent_swaps_from_one_version_apply_once,
    );
}

/// Runs `case` on a fresh SQLite file in the temporary folder, removed afterwards.
#[cfg(feature = "sqlite")]
async fn on_sqlite_file<F, Fut>(case: F)
where
    F: FnOnce(Shared) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    use std::str::FromStr as _;
    use std::time::Duration;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    let path = std::env::temp_dir().join(format!("agg-providers-{}.db", Uuid::new_v4().simple()));
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .unwrap()
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .unwrap();
    let store = SqliteStore::new(pool.clone());
    let outcome = match store.migrate().await {
        Ok(()) => tokio::spawn(case(Arc::new(store))).await,
        Err(error) => tokio::spawn(async move { panic!("migrate: {error}") }).await,
    };
    pool.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

/// Runs `case` on a PostgreSQL store in a fresh schema, dropped afterwards (also when the case
/// panics); skips, saying so, when `AGG_TEST_DATABASE_URL` is unset.
#[cfg(feature = "postgres")]
pub(super) async fn on_postgres<F, Fut>(case: F)
where
    F: FnOnce(Shared) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Some(url) = super::migrate_tests::postgres_test_url() else {
        return;
    };
    let schema = format!("agg_providers_{}", Uuid::new_v4().simple());
    let run = async {
        let store = PostgresStore::builder(&url)
            .schema(SchemaName::new(&schema).unwrap())
            .connect()
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let pool = store.pool().clone();
        let outcome = tokio::spawn(case(Arc::new(store))).await;
        pool.close().await;
        if let Err(error) = outcome {
            std::panic::resume_unwind(error.into_panic());
        }
    };
    let (create, drop) = (
        format!("CREATE SCHEMA {schema}"),
        format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
    );
    super::migrate_tests::with_scratch(&url, create, drop, run).await;
}

pub(super) async fn user(store: &Shared) -> Uuid {
    let id = Uuid::now_v7();
    store
        .create_user(&NewUser {
            id,
            email: format!("{id}@example.com"),
            email_normalized: format!("{id}@example.com"),
            password_hash: "x".to_owned(),
            created_at: now(),
        })
        .await
        .unwrap();
    id
}

fn dec(text: &str) -> Decimal {
    text.parse().unwrap()
}

fn seconds(count: i64) -> TimeDelta {
    TimeDelta::seconds(count)
}

fn state(user_id: Uuid, digest: &[u8], expires_at: DateTime<Utc>) -> NewOAuthState {
    NewOAuthState {
        state_digest: digest.to_vec(),
        user_id,
        provider_slug: "schwab".to_owned(),
        alias: Some("Brokerage".to_owned()),
        redirect_uri: "https://app.example/callback".to_owned(),
        encrypted_pkce_verifier: Some(vec![1, 2, 3]),
        pkce_key_id: Some("k1".to_owned()),
        reauthorizes_connection_id: None,
        created_at: now(),
        expires_at,
    }
}

pub(super) fn credentials(tag: u8, expires_at: DateTime<Utc>) -> EncryptedCredentials {
    EncryptedCredentials {
        ciphertext: vec![tag; 8],
        key_id: format!("key-{tag}"),
        renew_at: Some(expires_at),
    }
}

/// Saves an authorized connection whose credentials expire at `expires_at`.
pub(super) async fn authorize(
    store: &Shared,
    user_id: Uuid,
    alias: Option<&str>,
    tag: u8,
    expires_at: DateTime<Utc>,
    at: DateTime<Utc>,
) -> (ConnectionRecord, bool) {
    store
        .save_authorized_connection(
            user_id,
            "schwab",
            alias,
            Uuid::now_v7(),
            &move |_| Ok(credentials(tag, expires_at)),
            at,
            &connection_created_events(at),
            &mut Vec::new(),
        )
        .await
        .unwrap()
}

pub(crate) fn account(provider_account_id: &str, balance: &str) -> NewAccount {
    NewAccount {
        provider_account_id: provider_account_id.to_owned(),
        account_number: Some(format!("9876{provider_account_id}")),
        name: format!("Account {provider_account_id}"),
        account_type: AccountType::Brokerage,
        currency: "usd".to_owned(),
        balance_amount: dec(balance),
        available_balance_amount: Some(dec("10.50")),
        is_active: true,
    }
}

pub(crate) fn transaction(provider_id: &str, amount: &str) -> NewTransaction {
    NewTransaction {
        provider_transaction_id: provider_id.to_owned(),
        transaction_type: TransactionType::Transfer,
        subtype: None,
        status: TransactionStatus::Settled,
        amount: dec(amount),
        currency: "USD".to_owned(),
        description: Some(format!("transfer {provider_id}")),
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: "2024-03-01".parse().unwrap(),
        settlement_date: None,
        pending_transaction_id: None,
        merchant_code: None,
    }
}

pub(crate) fn holding(provider_id: &str, value: &str) -> NewHolding {
    NewHolding {
        provider_holding_id: provider_id.to_owned(),
        symbol: provider_id.to_owned(),
        security_name: None,
        asset_type: AssetType::Equity,
        quantity: dec("2"),
        cost_basis: None,
        market_value: dec(value),
        currency: "USD".to_owned(),
        average_price: None,
        current_price: None,
        unrealized_gain_loss: None,
    }
}

pub(super) fn is_other<T: std::fmt::Debug>(result: &Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Other(_)))
}

async fn oauth_state_is_taken_once(store: Shared) {
    let user_id = user(&store).await;
    let mut stored = state(user_id, b"digest-1", now() + seconds(600));
    // A reauthorization's state names its connection; the column round-trips.
    stored.reauthorizes_connection_id = Some(Uuid::now_v7());
    store.insert_oauth_state(&stored).await.unwrap();
    assert!(
        matches!(
            store.insert_oauth_state(&stored).await,
            Err(StoreError::Conflict(_))
        ),
        "a digest is stored once"
    );
    let mut bare = state(user_id, b"digest-2", now() - seconds(1));
    bare.alias = None;
    bare.encrypted_pkce_verifier = None;
    bare.pkce_key_id = None;
    store.insert_oauth_state(&bare).await.unwrap();

    assert_eq!(
        store.take_oauth_state(b"digest-1").await.unwrap(),
        Some(stored)
    );
    assert_eq!(store.take_oauth_state(b"digest-1").await.unwrap(), None);
    assert_eq!(
        store.take_oauth_state(b"digest-2").await.unwrap(),
        Some(bare),
        "an expired state is returned too; the caller checks expires_at"
    );
    assert_eq!(store.take_oauth_state(b"unknown").await.unwrap(), None);
}

async fn concurrent_takes_get_the_state_once(store: Shared) {
    let user_id = user(&store).await;
    store
        .insert_oauth_state(&state(user_id, b"raced", now() + seconds(600)))
        .await
        .unwrap();
    let takes = (0..8).map(|_| {
        let store = store.clone();
        tokio::spawn(async move { store.take_oauth_state(b"raced").await.unwrap() })
    });
    let taken: Vec<_> = join_all(takes)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(taken.iter().filter(|taken| taken.is_some()).count(), 1);
}

async fn authorized_connection_is_created_then_reauthorized(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let asked = Mutex::new(Vec::new());
    let new_id = Uuid::now_v7();
    let (created, was_created) = store
        .save_authorized_connection(
            user_id,
            "schwab",
            Some("Main"),
            new_id,
            &|id| {
                asked.lock().unwrap().push(id);
                Ok(credentials(1, t0 + seconds(1800)))
            },
            t0,
            &connection_created_events(t0),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert!(was_created);
    assert_eq!(created.id, new_id);
    assert_eq!(asked.lock().unwrap().as_slice(), &[new_id]);
    assert_eq!(created.status, ConnectionStatus::Active);
    assert_eq!(created.provider_id, provider_id("schwab"));
    assert_eq!(created.encrypted_credentials, Some(vec![1; 8]));
    assert_eq!(created.credentials_key_id.as_deref(), Some("key-1"));
    assert_eq!(created.credentials_expires_at, Some(t0 + seconds(1800)));
    assert_eq!((created.connected_at, created.created_at), (t0, t0));
    let stored = store.connection_by_id(new_id).await.unwrap().unwrap();
    assert_eq!(
        stored.credentials_expires_at,
        created.credentials_expires_at
    );
    assert_eq!(stored.encrypted_credentials, created.encrypted_credentials);

    // An expired connection is re-authorized in place, with its id.
    assert!(
        store
            .set_connection_status(created.id, ConnectionStatus::Expired, t0)
            .await
            .unwrap()
    );
    let t1 = t0 + seconds(60);
    let other_id = Uuid::now_v7();
    let (again, was_created) = store
        .save_authorized_connection(
            user_id,
            "schwab",
            Some("Main"),
            other_id,
            &|id| {
                asked.lock().unwrap().push(id);
                Ok(credentials(2, t1 + seconds(1800)))
            },
            t1,
            &connection_created_events(t1),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert!(!was_created);
    assert_eq!(again.id, created.id);
    assert_eq!(asked.lock().unwrap().last(), Some(&created.id));
    assert_eq!(again.status, ConnectionStatus::Active);
    assert_eq!(again.encrypted_credentials, Some(vec![2; 8]));
    assert_eq!(again.credentials_key_id.as_deref(), Some("key-2"));
    assert_eq!(again.credentials_expires_at, Some(t1 + seconds(1800)));
    assert_eq!((again.connected_at, again.updated_at), (t1, t1));
    assert_eq!(again.created_at, t0);
    assert!(store.connection_by_id(other_id).await.unwrap().is_none());

    // Another alias, or none, is another connection; so is one after a disconnect.
    let (no_alias, was_created) = authorize(&store, user_id, None, 3, t1, t1).await;
    assert!(was_created);
    assert_ne!(no_alias.id, created.id);
    let (same, was_created) = authorize(&store, user_id, None, 4, t1, t1).await;
    assert!(!was_created);
    assert_eq!(same.id, no_alias.id);
    store
        .disconnect_connection(
            user_id,
            created.id,
            t1,
            &connection_deleted_events(t1),
            &mut Vec::new(),
        )
        .await
        .unwrap()
        .unwrap();
    let (fresh, was_created) = authorize(&store, user_id, Some("Main"), 5, t1, t1).await;
    assert!(was_created);
    assert_ne!(fresh.id, created.id);
    assert_eq!(
        store
            .connections_for_user(user_id, false)
            .await
            .unwrap()
            .len(),
        3
    );

    // Failures write nothing.
    let failed = store
        .save_authorized_connection(
            user_id,
            "schwab",
            Some("Failing"),
            Uuid::now_v7(),
            &|_| Err(StoreError::Other("no key".to_owned())),
            t1,
            &connection_created_events(t1),
            &mut Vec::new(),
        )
        .await;
    assert!(is_other(&failed));
    let unknown_user = store
        .save_authorized_connection(
            Uuid::now_v7(),
            "schwab",
            None,
            Uuid::now_v7(),
            &|_| Ok(credentials(6, t1)),
            t1,
            &connection_created_events(t1),
            &mut Vec::new(),
        )
        .await;
    assert!(is_other(&unknown_user));
    assert_eq!(
        store
            .connections_for_user(user_id, false)
            .await
            .unwrap()
            .len(),
        3
    );
}

async fn a_connection_is_renewed_by_id(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (renewed, _) = authorize(&store, user_id, Some("Main"), 1, t0, t0).await;
    // Another live connection of the same slug and alias (an alias changed to it): the
    // renewal by id leaves it alone.
    let (other, _) = authorize(&store, user_id, Some("Other"), 2, t0, t0).await;
    store
        .update_connection_alias(user_id, other.id, Some("Main"), t0)
        .await
        .unwrap()
        .unwrap();
    assert!(
        store
            .set_connection_status(renewed.id, ConnectionStatus::Expired, t0)
            .await
            .unwrap()
    );
    let t1 = t0 + seconds(60);
    let asked = Mutex::new(Vec::new());
    let mut raised = Vec::new();
    let again = store
        .renew_authorized_connection(
            user_id,
            renewed.id,
            &|id| {
                asked.lock().unwrap().push(id);
                Ok(credentials(3, t1 + seconds(1800)))
            },
            t1,
            &connection_created_events(t1),
            &mut raised,
        )
        .await
        .unwrap()
        .expect("renewed");
    assert_eq!(asked.lock().unwrap().as_slice(), &[renewed.id]);
    assert_eq!(again.id, renewed.id);
    assert_eq!(again.status, ConnectionStatus::Active);
    assert_eq!(again.encrypted_credentials, Some(vec![3; 8]));
    assert_eq!((again.connected_at, again.updated_at), (t1, t1));
    assert_eq!(again.created_at, t0);
    assert_eq!(raised.len(), 1);
    assert_eq!(raised[0].data["reauthorized"], true);
    let untouched = store.connection_by_id(other.id).await.unwrap().unwrap();
    assert_eq!(untouched.encrypted_credentials, Some(vec![2; 8]));

    // Another user's, an unknown or a disconnected connection: nothing written.
    let stranger = user(&store).await;
    let renew = |user_id: Uuid, connection_id: Uuid| {
        let store = store.clone();
        async move {
            let mut raised = Vec::new();
            let renewed = store
                .renew_authorized_connection(
                    user_id,
                    connection_id,
                    &|_| Ok(credentials(4, t1)),
                    t1,
                    &connection_created_events(t1),
                    &mut raised,
                )
                .await
                .unwrap();
            (renewed.is_some(), raised.len())
        }
    };
    assert_eq!(renew(stranger, renewed.id).await, (false, 0));
    assert_eq!(renew(user_id, Uuid::now_v7()).await, (false, 0));
    store
        .disconnect_connection(
            user_id,
            renewed.id,
            t1,
            &connection_deleted_events(t1),
            &mut Vec::new(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renew(user_id, renewed.id).await, (false, 0));
    let gone = store.connection_by_id(renewed.id).await.unwrap().unwrap();
    assert_eq!(gone.status, ConnectionStatus::Disconnected);
    assert_eq!(gone.encrypted_credentials, None);
}

async fn concurrent_callbacks_create_one_connection(store: Shared) {
    let user_id = user(&store).await;
    let at = now();
    let saves = (0..8u8).map(|tag| {
        let store = store.clone();
        tokio::spawn(async move { authorize(&store, user_id, Some("Raced"), tag, at, at).await })
    });
    let saved: Vec<_> = join_all(saves)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(saved.iter().filter(|(_, created)| *created).count(), 1);
    assert!(saved.iter().all(|(record, _)| record.id == saved[0].0.id));
    assert_eq!(
        store
            .connections_for_user(user_id, false)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn disconnect_clears_credentials_and_is_idempotent(store: Shared) {
    let user_id = user(&store).await;
    let other_user = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, Some("Main"), 1, t0, t0).await;
    assert!(
        store
            .disconnect_connection(
                other_user,
                connection.id,
                t0,
                &connection_deleted_events(t0),
                &mut Vec::new()
            )
            .await
            .unwrap()
            .is_none(),
        "foreign"
    );
    assert!(
        store
            .disconnect_connection(
                user_id,
                Uuid::now_v7(),
                t0,
                &connection_deleted_events(t0),
                &mut Vec::new()
            )
            .await
            .unwrap()
            .is_none(),
        "unknown"
    );
    let t1 = t0 + seconds(5);
    let gone = store
        .disconnect_connection(
            user_id,
            connection.id,
            t1,
            &connection_deleted_events(t1),
            &mut Vec::new(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.status, ConnectionStatus::Disconnected);
    assert_eq!(gone.encrypted_credentials, None);
    assert_eq!(gone.credentials_key_id, None);
    assert_eq!(gone.credentials_expires_at, None);
    assert_eq!(gone.updated_at, t1);
    let again = store
        .disconnect_connection(
            user_id,
            connection.id,
            t1 + seconds(5),
            &connection_deleted_events(t1 + seconds(5)),
            &mut Vec::new(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.status, ConnectionStatus::Disconnected);
    assert_eq!(again.updated_at, t1, "returned as it is");
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.encrypted_credentials, None);
    assert_eq!(stored.credentials_expires_at, None);
}

async fn alias_update_moves_updated_at_only_on_change(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, Some("Old"), 1, t0, t0).await;
    let t1 = t0 + seconds(1);
    let renamed = store
        .update_connection_alias(user_id, connection.id, Some("New"), t1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renamed.alias.as_deref(), Some("New"));
    assert_eq!(renamed.updated_at, t1);
    let same = store
        .update_connection_alias(user_id, connection.id, Some("New"), t1 + seconds(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(same.updated_at, t1, "unchanged alias");
    let cleared = store
        .update_connection_alias(user_id, connection.id, None, t1 + seconds(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cleared.alias, None);
    assert_eq!(cleared.updated_at, t1 + seconds(2));
    let still = store
        .update_connection_alias(user_id, connection.id, None, t1 + seconds(3))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        still.updated_at,
        t1 + seconds(2),
        "None to None is no change"
    );
    let other_user = user(&store).await;
    assert!(
        store
            .update_connection_alias(other_user, connection.id, Some("Mine"), t1)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .update_connection_alias(user_id, Uuid::now_v7(), Some("X"), t1)
            .await
            .unwrap()
            .is_none()
    );
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.alias, None);
}

async fn connections_list_newest_first(store: Shared) {
    let user_id = user(&store).await;
    let other_user = user(&store).await;
    let t0 = now();
    let (first, _) = authorize(&store, user_id, Some("A"), 1, t0, t0).await;
    let (second, _) = authorize(&store, user_id, Some("B"), 2, t0, t0 + seconds(1)).await;
    let (third, _) = authorize(&store, user_id, Some("C"), 3, t0, t0 + seconds(1)).await;
    authorize(&store, other_user, Some("A"), 4, t0, t0).await;
    store
        .set_connection_status(second.id, ConnectionStatus::Revoked, t0)
        .await
        .unwrap();
    let ids = |list: Vec<ConnectionRecord>| list.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let mut same_instant = [second.id, third.id];
    same_instant.sort();
    assert_eq!(
        ids(store.connections_for_user(user_id, false).await.unwrap()),
        vec![same_instant[1], same_instant[0], first.id]
    );
    assert_eq!(
        ids(store.connections_for_user(user_id, true).await.unwrap()),
        vec![third.id, first.id]
    );
    assert!(
        store
            .connections_for_user(Uuid::now_v7(), false)
            .await
            .unwrap()
            .is_empty()
    );
    let by_id = store.connection_by_id(second.id).await.unwrap().unwrap();
    assert_eq!(by_id.user_id, user_id);
    assert_eq!(by_id.status, ConnectionStatus::Revoked);
    assert!(
        store
            .connection_by_id(Uuid::now_v7())
            .await
            .unwrap()
            .is_none()
    );
}

async fn credentials_and_status_updates_skip_disconnected(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, Some("Main"), 1, t0, t0).await;
    let t1 = t0 + seconds(10);
    assert!(
        store
            .replace_connection_credentials(
                connection.id,
                &[1; 8],
                &credentials(9, t1 + seconds(3600)),
                t1
            )
            .await
            .unwrap()
    );
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.encrypted_credentials, Some(vec![9; 8]));
    assert_eq!(stored.credentials_key_id.as_deref(), Some("key-9"));
    assert_eq!(stored.credentials_expires_at, Some(t1 + seconds(3600)));
    assert_eq!(stored.updated_at, t1);
    assert!(
        store
            .set_connection_status(connection.id, ConnectionStatus::Failed, t1)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .connection_by_id(connection.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        ConnectionStatus::Failed
    );
    assert!(
        !store
            .set_connection_status(Uuid::now_v7(), ConnectionStatus::Active, t1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .replace_connection_credentials(Uuid::now_v7(), &[1; 8], &credentials(9, t1), t1)
            .await
            .unwrap()
    );
    store
        .disconnect_connection(
            user_id,
            connection.id,
            t1,
            &connection_deleted_events(t1),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert!(
        !store
            .replace_connection_credentials(connection.id, &[9; 8], &credentials(8, t1), t1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_connection_status(connection.id, ConnectionStatus::Active, t1)
            .await
            .unwrap()
    );
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, ConnectionStatus::Disconnected);
    assert_eq!(stored.encrypted_credentials, None);

    // Disconnecting through the status clears the credentials too.
    let (other, _) = authorize(&store, user_id, Some("Other"), 2, t0, t0).await;
    assert!(
        store
            .set_connection_status(other.id, ConnectionStatus::Disconnected, t1)
            .await
            .unwrap()
    );
    let stored = store.connection_by_id(other.id).await.unwrap().unwrap();
    assert_eq!(stored.status, ConnectionStatus::Disconnected);
    assert_eq!(
        (stored.encrypted_credentials, stored.credentials_key_id),
        (None, None)
    );
}

async fn a_revocation_writes_its_event_once_and_skips_disconnected(store: Shared) {
    use crate::events::{DurableEvent as _, EventType};
    let user_id = user(&store).await;
    let at = now();
    let (connection, _) = authorize(&store, user_id, Some("Main"), 1, at, at).await;
    let revoked = |connection_id: Uuid| {
        crate::events::ConnectionRevoked {
            user_id,
            connection_id,
            provider: "schwab".to_owned(),
            reason: "permission_revoked".to_owned(),
        }
        .event_at(at)
    };
    let revocations = |store: Shared| async move {
        store
            .user_events_after(user_id, None, 100)
            .await
            .unwrap()
            .into_iter()
            .filter(|event| event.event_type == EventType::ConnectionRevoked)
            .count()
    };
    // An expired connection is revoked, with its event.
    assert!(
        store
            .set_connection_status(connection.id, ConnectionStatus::Expired, at)
            .await
            .unwrap()
    );
    let mut raised = Vec::new();
    let event = revoked(connection.id);
    assert!(
        store
            .revoke_connection(connection.id, at, std::slice::from_ref(&event), &mut raised)
            .await
            .unwrap()
    );
    assert_eq!(raised, [event]);
    let read = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.status, ConnectionStatus::Revoked);
    assert_eq!(revocations(store.clone()).await, 1);
    // Again: nothing written, no second event.
    let mut raised = Vec::new();
    assert!(
        !store
            .revoke_connection(connection.id, at, &[revoked(connection.id)], &mut raised)
            .await
            .unwrap()
    );
    assert!(raised.is_empty());
    assert_eq!(revocations(store.clone()).await, 1);

    // A disconnected connection stays disconnected; an unknown one is nothing.
    let (other, _) = authorize(&store, user_id, Some("Other"), 2, at, at).await;
    store
        .disconnect_connection(
            user_id,
            other.id,
            at,
            &connection_deleted_events(at),
            &mut Vec::new(),
        )
        .await
        .unwrap()
        .unwrap();
    for id in [other.id, Uuid::now_v7()] {
        assert!(
            !store
                .revoke_connection(id, at, &[revoked(id)], &mut Vec::new())
                .await
                .unwrap()
        );
    }
    let read = store.connection_by_id(other.id).await.unwrap().unwrap();
    assert_eq!(read.status, ConnectionStatus::Disconnected);
    assert_eq!(revocations(store.clone()).await, 1);
}

async fn credential_swaps_and_expiry_compare_the_previous_credentials(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, None, 1, t0, t0).await;
    let t1 = t0 + seconds(10);
    // A swap from credentials that are no longer stored writes nothing.
    assert!(
        !store
            .replace_connection_credentials(connection.id, &[7; 8], &credentials(2, t1), t1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .expire_connection_credentials(
                connection.id,
                &[7; 8],
                t1,
                &expired_events_of(&store, connection.id, t1).await,
                &mut Vec::new()
            )
            .await
            .unwrap()
    );
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.encrypted_credentials, Some(vec![1; 8]));
    assert_eq!(stored.status, ConnectionStatus::Active);
    assert_eq!(stored.updated_at, t0);
    // From the stored ones it applies, once.
    assert!(
        store
            .replace_connection_credentials(connection.id, &[1; 8], &credentials(2, t1), t1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .replace_connection_credentials(connection.id, &[1; 8], &credentials(3, t1), t1)
            .await
            .unwrap()
    );
    // Expiry from the replaced credentials is refused; from the live ones it applies.
    assert!(
        !store
            .expire_connection_credentials(
                connection.id,
                &[1; 8],
                t1,
                &expired_events_of(&store, connection.id, t1).await,
                &mut Vec::new()
            )
            .await
            .unwrap()
    );
    assert!(
        store
            .expire_connection_credentials(
                connection.id,
                &[2; 8],
                t1,
                &expired_events_of(&store, connection.id, t1).await,
                &mut Vec::new()
            )
            .await
            .unwrap()
    );
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, ConnectionStatus::Expired);
    assert_eq!(
        stored.encrypted_credentials,
        Some(vec![2; 8]),
        "kept for audit"
    );
    assert_eq!(stored.updated_at, t1);
    // Only an active connection expires.
    assert!(
        !store
            .expire_connection_credentials(
                connection.id,
                &[2; 8],
                t1,
                &expired_events_of(&store, connection.id, t1).await,
                &mut Vec::new()
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .expire_connection_credentials(
                Uuid::now_v7(),
                &[2; 8],
                t1,
                &expired_events_of(&store, Uuid::now_v7(), t1).await,
                &mut Vec::new()
            )
            .await
            .unwrap()
    );
    // A refresh from the credentials it was expired with (a refusal on another instance that
    // raced the refresh) makes it active again.
    assert!(
        store
            .replace_connection_credentials(connection.id, &[2; 8], &credentials(3, t1), t1)
            .await
            .unwrap()
    );
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, ConnectionStatus::Active);
    assert_eq!(stored.encrypted_credentials, Some(vec![3; 8]));
}

async fn concurrent_swaps_from_one_version_apply_once(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, None, 1, t0, t0).await;
    let swaps = (2..12u8).map(|tag| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .replace_connection_credentials(connection.id, &[1; 8], &credentials(tag, t0), t0)
                .await
                .unwrap()
        })
    });
    let swapped: Vec<bool> = join_all(swaps)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(swapped.iter().filter(|won| **won).count(), 1, "{swapped:?}");
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    let live = stored.encrypted_credentials.clone().unwrap();
    assert_ne!(live, vec![1; 8]);

    // Expiries from one version: one applies.
    let expiries = (0..5).map(|_| {
        let (store, live) = (store.clone(), live.clone());
        tokio::spawn(async move {
            store
                .expire_connection_credentials(
                    connection.id,
                    &live,
                    t0,
                    &expired_events_of(&store, connection.id, t0).await,
                    &mut Vec::new(),
                )
                .await
                .unwrap()
        })
    });
    let expired: Vec<bool> = join_all(expiries)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(expired.iter().filter(|won| **won).count(), 1, "{expired:?}");
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, ConnectionStatus::Expired);
}

async fn due_for_refresh_and_sync_selection(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (late, _) = authorize(&store, user_id, Some("late"), 1, t0 + seconds(3600), t0).await;
    let (soon, _) = authorize(&store, user_id, Some("soon"), 2, t0 + seconds(60), t0).await;
    let (past, _) = authorize(&store, user_id, Some("past"), 3, t0 - seconds(60), t0).await;
    let (at_bound, _) = authorize(&store, user_id, Some("bound"), 4, t0 + seconds(300), t0).await;
    let (failed, _) = authorize(&store, user_id, Some("failed"), 5, t0 - seconds(60), t0).await;
    store
        .set_connection_status(failed.id, ConnectionStatus::Failed, t0)
        .await
        .unwrap();
    let (gone, _) = authorize(&store, user_id, Some("gone"), 6, t0 - seconds(60), t0).await;
    store
        .disconnect_connection(
            user_id,
            gone.id,
            t0,
            &connection_deleted_events(t0),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    // Without credentials (like an import's connection): never due.
    let bare = store
        .find_or_create_connection(user_id, "file_import", Some("Bank"), t0)
        .await
        .unwrap();

    let ids = |list: Vec<ConnectionRecord>| list.into_iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .connections_due_for_token_refresh(t0 + seconds(300), 10)
            .await
            .unwrap()),
        vec![past.id, soon.id, at_bound.id]
    );
    assert_eq!(
        ids(store
            .connections_due_for_token_refresh(t0 + seconds(300), 2)
            .await
            .unwrap()),
        vec![past.id, soon.id]
    );
    assert!(
        store
            .connections_due_for_token_refresh(t0 - seconds(61), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Sync: never-synced first (by id), then the least recently synced.
    let mark = |connection_id: Uuid, at: DateTime<Utc>| {
        let store = store.clone();
        async move {
            write_sync(
                &store,
                connection_id,
                &SyncFixture {
                    mark_synced: true,
                    ..SyncFixture::default()
                },
                at,
                &sync_events_of(&store, connection_id, at).await,
                &mut Vec::new(),
            )
            .await
            .unwrap();
        }
    };
    mark(late.id, t0 - seconds(100)).await;
    mark(soon.id, t0 - seconds(200)).await;
    mark(past.id, t0 - seconds(10)).await;
    mark(bare.id, t0 - seconds(1000)).await;
    let due = ids(store
        .connections_due_for_sync(t0 - seconds(50), 10)
        .await
        .unwrap());
    assert_eq!(due, vec![at_bound.id, soon.id, late.id]);
    let due = ids(store
        .connections_due_for_sync(t0 - seconds(100), 10)
        .await
        .unwrap());
    assert_eq!(
        due,
        vec![at_bound.id, soon.id],
        "synced exactly at the bound: not due"
    );
    let due = ids(store.connections_due_for_sync(t0, 1).await.unwrap());
    assert_eq!(due, vec![at_bound.id]);
    let stored = store.connection_by_id(soon.id).await.unwrap().unwrap();
    assert_eq!(stored.last_sync_at, Some(t0 - seconds(200)));
}

/// A request budget's paid-until instant: none while nothing was spent; each spend starts
/// from the later of it and now; concurrent spends all count.
async fn request_budgets_add_up_from_the_later_instant(store: Shared) {
    let user_id = user(&store).await;
    let t0 = crate::dates::truncate_to_micros(now());
    let (connection, _) = authorize(&store, user_id, None, 1, t0 + seconds(3600), t0).await;
    let id = connection.id;
    assert_eq!(store.request_budget_paid_until(id).await.unwrap(), None);
    let hour = seconds(3600);
    store.spend_request_budget(id, t0, hour).await.unwrap();
    assert_eq!(
        store.request_budget_paid_until(id).await.unwrap(),
        Some(t0 + hour)
    );
    // Still owed: the next request is paid from where the last one ended.
    store
        .spend_request_budget(id, t0 + seconds(600), hour)
        .await
        .unwrap();
    let owed = t0 + hour + hour;
    assert_eq!(
        store.request_budget_paid_until(id).await.unwrap(),
        Some(owed)
    );
    // Refilled meanwhile: paid from now.
    let later = t0 + seconds(5 * 3600);
    store.spend_request_budget(id, later, hour).await.unwrap();
    assert_eq!(
        store.request_budget_paid_until(id).await.unwrap(),
        Some(later + hour)
    );
    // Another connection's budget is its own; concurrent spends add up.
    let someone_else = user(&store).await;
    let (other, _) = authorize(&store, someone_else, None, 2, t0 + hour, t0).await;
    assert_ne!(other.id, id);
    let spends = (0..8).map(|_| {
        let store = store.clone();
        async move { store.spend_request_budget(other.id, t0, seconds(1)).await }
    });
    for spent in join_all(spends).await {
        spent.unwrap();
    }
    assert_eq!(
        store.request_budget_paid_until(other.id).await.unwrap(),
        Some(t0 + seconds(8))
    );
    assert_eq!(
        store.request_budget_paid_until(id).await.unwrap(),
        Some(later + hour)
    );
}

async fn claim_sync_cools_down_forces_and_releases(store: Shared) {
    let subject = Uuid::now_v7();
    let cooldown = seconds(300);
    let t0 = now();
    let claim = |at: DateTime<Utc>, force: bool| {
        let store = store.clone();
        async move {
            store
                .claim_sync(subject, SyncKind::Transactions, at, cooldown, force)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        claim(t0, false).await,
        SyncClaim::Granted { previous: None }
    );
    assert_eq!(
        claim(t0 + seconds(10), false).await,
        SyncClaim::CoolingDown {
            until: t0 + cooldown
        }
    );
    // Other kinds and subjects have cool-downs of their own.
    assert_eq!(
        store
            .claim_sync(subject, SyncKind::Holdings, t0, cooldown, false)
            .await
            .unwrap(),
        SyncClaim::Granted { previous: None }
    );
    assert_eq!(
        store
            .claim_sync(Uuid::now_v7(), SyncKind::Transactions, t0, cooldown, false)
            .await
            .unwrap(),
        SyncClaim::Granted { previous: None }
    );
    let t1 = t0 + cooldown;
    assert_eq!(
        claim(t1, false).await,
        SyncClaim::Granted { previous: Some(t0) },
        "granted once the cool-down has passed"
    );
    let t2 = t1 + seconds(1);
    assert_eq!(
        claim(t2, true).await,
        SyncClaim::Granted { previous: Some(t1) },
        "forced inside the cool-down"
    );

    // A failed sync hands its claim back, only if the claim is still its own.
    store
        .release_sync(subject, SyncKind::Transactions, t1, Some(t0))
        .await
        .unwrap();
    assert_eq!(
        claim(t2 + seconds(1), false).await,
        SyncClaim::CoolingDown {
            until: t2 + cooldown
        },
        "a stale release changes nothing"
    );
    store
        .release_sync(subject, SyncKind::Transactions, t2, Some(t1))
        .await
        .unwrap();
    assert_eq!(
        claim(t1 + seconds(10), false).await,
        SyncClaim::CoolingDown {
            until: t1 + cooldown
        },
        "back to the previous start"
    );
    let t3 = t1 + cooldown;
    assert_eq!(
        claim(t3, false).await,
        SyncClaim::Granted { previous: Some(t1) }
    );
    store
        .release_sync(subject, SyncKind::Transactions, t3, Some(t1))
        .await
        .unwrap();
    let first = Uuid::now_v7();
    assert_eq!(
        store
            .claim_sync(first, SyncKind::Connection, t0, cooldown, false)
            .await
            .unwrap(),
        SyncClaim::Granted { previous: None }
    );
    store
        .release_sync(first, SyncKind::Connection, t0, None)
        .await
        .unwrap();
    assert_eq!(
        store
            .claim_sync(
                first,
                SyncKind::Connection,
                t0 + seconds(1),
                cooldown,
                false
            )
            .await
            .unwrap(),
        SyncClaim::Granted { previous: None },
        "released without a previous start: as if never synced"
    );
}

async fn concurrent_claims_grant_one(store: Shared) {
    let subject = Uuid::now_v7();
    let t0 = now();
    let claims = (0..8i64).map(|step| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .claim_sync(
                    subject,
                    SyncKind::Connection,
                    t0 + TimeDelta::milliseconds(step),
                    seconds(60),
                    false,
                )
                .await
                .unwrap()
        })
    });
    let answers: Vec<_> = join_all(claims)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let granted: Vec<_> = answers
        .iter()
        .filter(|answer| matches!(answer, SyncClaim::Granted { .. }))
        .collect();
    assert_eq!(granted, vec![&SyncClaim::Granted { previous: None }]);
    // After the cool-down, concurrent claims again grant one, which sees the previous start.
    let later = t0 + seconds(120);
    let claims = (0..8).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .claim_sync(subject, SyncKind::Connection, later, seconds(60), false)
                .await
                .unwrap()
        })
    });
    let answers: Vec<_> = join_all(claims)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let granted: Vec<_> = answers
        .iter()
        .filter_map(|answer| match answer {
            SyncClaim::Granted { previous } => Some(*previous),
            SyncClaim::CoolingDown { until } => {
                assert_eq!(*until, later + seconds(60));
                None
            }
        })
        .collect();
    assert_eq!(granted.len(), 1);
    let previous = granted[0].unwrap();
    assert!(previous >= t0 && previous < t0 + seconds(1));
}

async fn sync_batch_counts_and_snapshots(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, Some("Main"), 1, t0, t0).await;
    let t1 = t0 + seconds(1);
    let first = SyncFixture {
        accounts: vec![account("A", "100.00"), account("B", "5")],
        per_account: vec![
            BatchAccount {
                account: None,
                balance_reported: false,
                absent_holdings: AbsentHoldings::Deactivated,
                provider_account_id: "A".to_owned(),
                transactions: Some(vec![transaction("t1", "-1.00"), transaction("t2", "2.5")]),
                pending_window: None,
                holdings: Some(vec![holding("AAPL", "380"), holding("MSFT", "800")]),
                snapshots: vec![BatchSnapshot {
                    stated: None,
                    source: SnapshotSource::ManualSync,
                    holdings_value: Some(dec("1180")),
                    cash_value: Some(dec("100.00")),
                }],
            },
            BatchAccount {
                account: None,
                balance_reported: false,
                absent_holdings: AbsentHoldings::Deactivated,
                provider_account_id: "B".to_owned(),
                transactions: None,
                pending_window: None,
                holdings: None,
                snapshots: vec![BatchSnapshot {
                    stated: None,
                    source: SnapshotSource::AccountSync,
                    holdings_value: None,
                    cash_value: None,
                }],
            },
        ],
        mark_synced: true,
        account_limit: None,
        feed: None,
    };
    let counts = write_sync(
        &store,
        connection.id,
        &first,
        t1,
        &sync_events_of(&store, connection.id, t1).await,
        &mut Vec::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        (
            counts.accounts.created,
            counts.transactions.created,
            counts.holdings.created,
            counts.holdings_deactivated,
            counts.snapshots_created
        ),
        (2, 2, 2, 0, 2)
    );
    assert_eq!(counts.accounts.ids.len(), 2);
    let synced = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(synced.last_sync_at, Some(t1));

    let accounts = store
        .accounts_for_user(
            user_id,
            &AccountFilter {
                connection_id: Some(connection.id),
                ..AccountFilter::default()
            },
        )
        .await
        .unwrap();
    let account_a = accounts
        .iter()
        .find(|account| account.provider_account_id == "A")
        .unwrap()
        .clone();
    assert_eq!(account_a.id, counts.accounts.ids[0]);

    // Second sync: A's balance changes, B is the same; t1 unchanged, t2 changed, t3 new;
    // AAPL unchanged, MSFT gone.
    let t2 = t1 + seconds(1);
    let second = SyncFixture {
        accounts: vec![account("A", "150.25"), account("B", "5.00")],
        per_account: vec![BatchAccount {
            account: None,
            balance_reported: false,
            absent_holdings: AbsentHoldings::Deactivated,
            provider_account_id: "A".to_owned(),
            transactions: Some(vec![
                transaction("t1", "-1.00"),
                transaction("t2", "3"),
                transaction("t3", "4"),
            ]),
            pending_window: None,
            holdings: Some(vec![holding("AAPL", "380")]),
            snapshots: vec![BatchSnapshot {
                stated: None,
                source: SnapshotSource::ScheduledSync,
                holdings_value: Some(dec("380")),
                cash_value: None,
            }],
        }],
        mark_synced: false,
        account_limit: None,
        feed: None,
    };
    let counts = write_sync(
        &store,
        connection.id,
        &second,
        t2,
        &sync_events_of(&store, connection.id, t2).await,
        &mut Vec::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        (
            counts.accounts.created,
            counts.accounts.updated,
            counts.accounts.unchanged
        ),
        (0, 1, 1)
    );
    assert_eq!(
        (
            counts.transactions.created,
            counts.transactions.updated,
            counts.transactions.unchanged
        ),
        (1, 1, 1)
    );
    assert_eq!(
        (
            counts.holdings.created,
            counts.holdings.updated,
            counts.holdings.unchanged
        ),
        (0, 0, 1)
    );
    assert_eq!(counts.holdings_deactivated, 1);
    assert_eq!(counts.snapshots_created, 1);
    let unsynced = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(unsynced.last_sync_at, Some(t1), "mark_synced false");

    let page = store
        .transactions_for_account(
            user_id,
            account_a.id,
            &TransactionQuery::Recent {
                transaction_type: None,
                limit: 10,
                offset: 0,
            },
        )
        .await
        .unwrap();
    assert_eq!((page.items.len(), page.total_count), (3, 3));
    let holdings = store
        .holdings_for_user(
            user_id,
            &HoldingFilter {
                account_id: Some(account_a.id),
                ..HoldingFilter::default()
            },
            PageAfter::first(100),
        )
        .await
        .unwrap()
        .items;
    let active: Vec<_> = holdings
        .iter()
        .map(|h| (h.symbol.as_str(), h.is_active))
        .collect();
    assert_eq!(active, vec![("AAPL", true), ("MSFT", false)]);

    let snapshots = store
        .snapshots_for_account(user_id, account_a.id, 10, None)
        .await
        .unwrap();
    assert_eq!(snapshots.total_count, 2);
    let latest = &snapshots.items[0];
    assert_eq!(
        latest.balance,
        dec("150.25"),
        "the balance after the upsert"
    );
    assert_eq!(latest.available_balance, Some(dec("10.50")));
    assert_eq!(latest.holdings_value, Some(dec("380")));
    assert_eq!(latest.cash_value, None);
    assert_eq!(latest.currency, "USD");
    assert_eq!(latest.source, SnapshotSource::ScheduledSync);
    assert_eq!(latest.captured_at, t2);
    let earliest = &snapshots.items[1];
    assert_eq!(
        (earliest.balance, earliest.cash_value, earliest.source),
        (dec("100"), Some(dec("100")), SnapshotSource::ManualSync)
    );

    // Holdings synced as an empty list deactivate every active holding.
    let third = SyncFixture {
        per_account: vec![BatchAccount {
            account: None,
            balance_reported: false,
            absent_holdings: AbsentHoldings::Deactivated,
            provider_account_id: "A".to_owned(),
            transactions: None,
            pending_window: None,
            holdings: Some(Vec::new()),
            snapshots: Vec::new(),
        }],
        ..SyncFixture::default()
    };
    let counts = write_sync(
        &store,
        connection.id,
        &third,
        t2 + seconds(1),
        &sync_events_of(&store, connection.id, t2 + seconds(1)).await,
        &mut Vec::new(),
    )
    .await
    .unwrap();
    assert_eq!(counts.holdings_deactivated, 1);
    assert_eq!(counts.snapshots_created, 0);
}

async fn sync_batch_rolls_back_on_unknown_account(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    let (connection, _) = authorize(&store, user_id, Some("Main"), 1, t0, t0).await;
    let failing = SyncFixture {
        accounts: vec![account("A", "1")],
        per_account: vec![
            BatchAccount {
                account: None,
                balance_reported: false,
                absent_holdings: AbsentHoldings::Deactivated,
                provider_account_id: "A".to_owned(),
                transactions: Some(vec![transaction("t1", "1")]),
                pending_window: None,
                holdings: Some(vec![holding("AAPL", "1")]),
                snapshots: vec![BatchSnapshot {
                    stated: None,
                    source: SnapshotSource::ManualSync,
                    holdings_value: None,
                    cash_value: None,
                }],
            },
            BatchAccount {
                account: None,
                balance_reported: false,
                absent_holdings: AbsentHoldings::Deactivated,
                provider_account_id: "unknown".to_owned(),
                transactions: Some(vec![transaction("t2", "1")]),
                pending_window: None,
                holdings: None,
                snapshots: Vec::new(),
            },
        ],
        mark_synced: true,
        account_limit: None,
        feed: None,
    };
    assert!(is_other(
        &write_sync(
            &store,
            connection.id,
            &failing,
            t0,
            &sync_events_of(&store, connection.id, t0).await,
            &mut Vec::new()
        )
        .await
    ));
    assert!(
        store
            .accounts_for_user(user_id, &AccountFilter::default())
            .await
            .unwrap()
            .is_empty(),
        "nothing written"
    );
    assert!(
        store
            .holdings_for_user(user_id, &HoldingFilter::default(), PageAfter::first(100))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        store
            .latest_snapshots_for_user(user_id)
            .await
            .unwrap()
            .is_empty()
    );
    let stored = store
        .connection_by_id(connection.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.last_sync_at, None);
    assert_eq!(stored.updated_at, t0);

    // Once the account exists, a batch naming only it succeeds.
    let mut fixed = failing.clone();
    fixed.per_account.pop();
    let counts = write_sync(
        &store,
        connection.id,
        &fixed,
        t0,
        &sync_events_of(&store, connection.id, t0).await,
        &mut Vec::new(),
    )
    .await
    .unwrap();
    assert_eq!(counts.transactions.created, 1);
    assert!(is_other(
        &write_sync(
            &store,
            Uuid::now_v7(),
            &SyncFixture::default(),
            t0,
            &sync_events_of(&store, Uuid::now_v7(), t0).await,
            &mut Vec::new()
        )
        .await
    ));
}

async fn purge_deletes_expired_oauth_states(store: Shared) {
    let user_id = user(&store).await;
    let t0 = now();
    store
        .insert_oauth_state(&state(user_id, b"expired", t0 - seconds(1)))
        .await
        .unwrap();
    store
        .insert_oauth_state(&state(user_id, b"at-now", t0))
        .await
        .unwrap();
    store
        .insert_oauth_state(&state(user_id, b"live", t0 + seconds(600)))
        .await
        .unwrap();
    let counts = store.purge_expired(t0, t0 - seconds(86_400)).await.unwrap();
    assert_eq!(counts.oauth_states, 2);
    assert!(store.take_oauth_state(b"expired").await.unwrap().is_none());
    assert!(store.take_oauth_state(b"at-now").await.unwrap().is_none());
    assert!(store.take_oauth_state(b"live").await.unwrap().is_some());
}
