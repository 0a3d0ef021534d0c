//! The store as the service uses it: every call passes a circuit breaker and the store's
//! outage log, whatever the backend (SQLite, PostgreSQL, or an embedder's own [`Store`]).
//!
//! A store that cannot be reached used to cost every request the full store timeout (5 s
//! waiting for a pooled connection that never came). After [`FAILURES_TO_OPEN`] calls in a
//! row fail with [`StoreError::Unavailable`] the store is pinged in the background (a ping
//! that does not wait behind a saturated pool, see the SQL backends' `ping`), and only if
//! that ping fails too does the breaker open: calls fail at once with `Unavailable` (503 with
//! `Retry-After`), and a background task pings the store [`PROBE_EVERY`] after its last ping
//! ended, whether requests come or not. The first call or ping that gets an answer closes
//! it. Any answer counts, a conflict, a failed statement or a timed-out one included: the
//! store is reachable.
//!
//! A slow call is not an unreachable store: [`StoreError::Busy`] (a statement timeout, a lock
//! held past the busy timeout) is 503 for that call alone and never counts toward opening,
//! and a pool that timed out because every connection was busy with one user's slow reads
//! answers the confirming ping, so it does not open the breaker for everybody either.
//!
//! The outage is logged here, once when the first call fails, as a count every 10 s while it
//! lasts, and once when it ends ([`OutageLog`]), never once per call.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use uuid::Uuid;

use super::*;
use crate::events::{Event, RaiseEvents};
use crate::outage::OutageLog;

/// Calls in a row failing with [`StoreError::Unavailable`] after which a ping decides whether
/// the breaker opens.
pub(crate) const FAILURES_TO_OPEN: u32 = 3;

/// The pause between the end of one ping of an open breaker and the start of the next.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What an open breaker answers (the detail is never shown to clients).
const OPEN: &str = "the store is known to be down (circuit breaker open)";

/// A [`Store`] whose calls pass a circuit breaker and an outage log; see the module docs.
pub(crate) struct GuardedStore {
    inner: Arc<dyn Store>,
    breaker: Arc<Breaker>,
}

impl GuardedStore {
    /// Guards `inner`.
    pub(crate) fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            breaker: Arc::new(Breaker::default()),
        }
    }

    /// Runs `call` unless the breaker is open, and learns from its outcome.
    async fn guard<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if self.breaker.is_open() {
            let refused = StoreError::Unavailable(OPEN.to_owned());
            self.breaker.outage.failure(&refused);
            return Err(refused);
        }
        let outcome = call.await;
        if self.breaker.learn(&outcome) == Learned::Suspect {
            self.confirm().await;
        }
        outcome
    }

    /// Pings the store in the background: a failed ping opens the breaker, and then pings go
    /// on until one is answered, which closes it. Ends with the service (it holds neither the
    /// store nor the breaker alive). Without a Tokio runtime (an embedder calling from
    /// elsewhere) this call pings, and an open breaker lets the next call through as the
    /// probe.
    async fn confirm(&self) {
        let store = Arc::downgrade(&self.inner);
        let breaker = Arc::downgrade(&self.breaker);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(confirm_then_probe(store, breaker));
            return;
        }
        if self.breaker.confirm(&self.inner.ping().await) == Learned::Opened {
            self.breaker.half_open();
        }
    }
}

/// The ping that decides whether failed calls mean the store is unreachable; then, if it
/// is, the pings of the open breaker.
async fn confirm_then_probe(store: Weak<dyn Store>, breaker: Weak<Breaker>) {
    let (Some(pinged), Some(deciding)) = (store.upgrade(), breaker.upgrade()) else {
        return;
    };
    let ping = pinged.ping().await;
    if deciding.confirm(&ping) != Learned::Opened {
        return;
    }
    drop((pinged, deciding));
    probe(store, breaker).await;
}

async fn probe(store: Weak<dyn Store>, breaker: Weak<Breaker>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let (Some(store), Some(breaker)) = (store.upgrade(), breaker.upgrade()) else {
            return;
        };
        if !breaker.is_open() {
            // A call admitted before the breaker opened got an answer.
            return;
        }
        let outcome = store.ping().await;
        if breaker.learn(&outcome) == Learned::Closed {
            return;
        }
    }
}

/// What an outcome did to the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Learned {
    Nothing,
    /// Enough calls failed in a row: a ping decides ([`Breaker::confirm`]).
    Suspect,
    Opened,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed {
        failures_in_a_row: u32,
    },
    /// Calls failed in a row; a ping is under way, and calls still go through meanwhile.
    Checking,
    Open,
}

#[derive(Debug)]
struct Breaker {
    state: Mutex<State>,
    outage: OutageLog,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::Closed {
                failures_in_a_row: 0,
            }),
            outage: OutageLog::new(
                "store",
                "requests that need it are answered 503 service_unavailable",
            ),
        }
    }
}

impl Breaker {
    fn is_open(&self) -> bool {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) == State::Open
    }

    /// One more failure closes it again: the next call is the probe.
    fn half_open(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = State::Closed {
            failures_in_a_row: FAILURES_TO_OPEN - 1,
        };
    }

    fn learn<T>(&self, outcome: &Result<T, StoreError>) -> Learned {
        match outcome {
            Err(error @ StoreError::Unavailable(_)) => {
                self.outage.failure(error);
                self.failed()
            }
            // The store answered, even if it refused the statement or gave up a slow one.
            Ok(_) | Err(_) => {
                let closed = self.answered();
                if closed == Learned::Closed {
                    tracing::warn!("store circuit breaker closed: the store answers again");
                }
                self.outage.success();
                closed
            }
        }
    }

    /// The ping after [`Learned::Suspect`]: opens the breaker if it failed (and no call got
    /// an answer meanwhile), closes it again otherwise.
    fn confirm(&self, ping: &Result<(), StoreError>) -> Learned {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if *state != State::Checking {
            return Learned::Nothing;
        }
        if let Err(error @ StoreError::Unavailable(_)) = ping {
            *state = State::Open;
            drop(state);
            self.outage.failure(error);
            tracing::warn!(
                failures = FAILURES_TO_OPEN,
                probe_every_ms = PROBE_EVERY.as_millis(),
                "store circuit breaker open: calls fail at once until a background ping gets \
                 an answer"
            );
            return Learned::Opened;
        }
        *state = State::Closed {
            failures_in_a_row: 0,
        };
        drop(state);
        tracing::info!(
            failures = FAILURES_TO_OPEN,
            "store calls failed in a row but a ping was answered: the store is busy, not \
             down; the circuit breaker stays closed"
        );
        Learned::Nothing
    }

    fn failed(&self) -> Learned {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match *state {
            State::Closed { failures_in_a_row } if failures_in_a_row + 1 >= FAILURES_TO_OPEN => {
                *state = State::Checking;
                Learned::Suspect
            }
            State::Closed { failures_in_a_row } => {
                *state = State::Closed {
                    failures_in_a_row: failures_in_a_row + 1,
                };
                Learned::Nothing
            }
            State::Checking | State::Open => Learned::Nothing,
        }
    }

    fn answered(&self) -> Learned {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let was_open = *state == State::Open;
        *state = State::Closed {
            failures_in_a_row: 0,
        };
        if was_open {
            Learned::Closed
        } else {
            Learned::Nothing
        }
    }
}

/// Implements an aggregate trait for [`GuardedStore`]: each method passes the inner store's
/// through [`GuardedStore::guard`].
macro_rules! guarded {
    ($trait:ident { $(fn $name:ident($($arg:ident: $ty:ty),*) -> $ok:ty;)+ }) => {
        #[async_trait]
        impl $trait for GuardedStore {
            $(
                async fn $name(&self, $($arg: $ty),*) -> Result<$ok, StoreError> {
                    self.guard(self.inner.$name($($arg),*)).await
                }
            )+
        }
    };
}

/// Calls the macro `$apply` once per store trait with the trait's methods, in the shape
/// `Trait { fn name(arg: Type, ...) -> Ok; ... }`: what a wrapper of a whole [`Store`] needs to
/// delegate every method (this guard, and the fault-injecting store of the `testing`
/// module). A method added to a store trait gets a line here.
macro_rules! for_each_store_trait {
    ($apply:ident) => {
        $apply! { UserStore {
            fn create_user(user: &NewUser) -> ();
            fn user_by_email(email_normalized: &str) -> Option<UserRecord>;
            fn user_by_id(id: Uuid) -> Option<UserRecord>;
            fn user_roles(id: Uuid) -> Vec<Role>;
            fn grant_role(id: Uuid, role: Role, at: DateTime<Utc>) -> bool;
            fn ping() -> ();
        }}
        $apply! { OneTimeTokenStore {
            fn insert_one_time_token(token: &NewOneTimeToken) -> ();
            fn insert_one_time_token_capped(
                token: &NewOneTimeToken,
                cap: u64,
                since: DateTime<Utc>
            ) -> bool;
            fn check_one_time_token(digest: &[u8], purpose: TokenPurpose, now: DateTime<Utc>) -> TokenCheck;
            fn verify_email(digest: &[u8], now: DateTime<Utc>) -> TokenCheck;
            fn reset_password(
                digest: &[u8],
                password_hash: &str,
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, RevokedSessions>,
                raised: &mut Vec<Event>
            ) -> TokenCheck;
        }}
        $apply! { SessionStore {
            fn create_session(session: &NewSession, token: &NewRefreshToken) -> ();
            fn refresh_token(digest: &[u8]) -> Option<RefreshTokenRecord>;
            fn rotate_refresh_token(
                old_digest: &[u8],
                new_token: &NewRefreshToken,
                now: DateTime<Utc>
            ) -> bool;
            fn revoke_session(
                user_id: Uuid,
                session_id: Uuid,
                reason: &str,
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, RevokedSessions>,
                raised: &mut Vec<Event>
            ) -> bool;
            fn revoke_session_by_token(
                user_id: Uuid,
                digest: &[u8],
                reason: &str,
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, RevokedSessions>,
                raised: &mut Vec<Event>
            ) -> bool;
            fn revoke_user_sessions(
                user_id: Uuid,
                keep: Option<Uuid>,
                reason: &str,
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, RevokedSessions>,
                raised: &mut Vec<Event>
            ) -> u64;
            fn sessions_for_user(
                user_id: Uuid,
                active_only: bool,
                now: DateTime<Utc>
            ) -> Vec<SessionRecord>;
            fn session_for_user(user_id: Uuid, session_id: Uuid) -> Option<SessionRecord>;
        }}
        $apply! { SecurityStore {
            fn security_config() -> Option<SecurityConfigRecord>;
            fn ensure_security_config(
                default_grace_seconds: i64,
                at: DateTime<Utc>
            ) -> SecurityConfigRecord;
            fn rotate_global_token_version(
                rotation: &NewTokenRotation,
                raise: &RaiseEvents<'_, RotationOutcome>,
                raised: &mut Vec<Event>
            ) -> RotationOutcome;
            fn rotate_user_token_version(
                user_id: Uuid,
                rotation: &NewTokenRotation,
                raise: &RaiseEvents<'_, RotationOutcome>,
                raised: &mut Vec<Event>
            ) -> Option<RotationOutcome>;
            fn token_rotations(limit: u32) -> Vec<TokenRotationRecord>;
            fn global_rotation_raised_from(user_id: Uuid, min_token_version: i64) -> Option<i64>;
        }}
        $apply! { JobStore {
            fn try_acquire_job_lease(
                name: &str,
                owner: &str,
                now: DateTime<Utc>,
                lease_until: DateTime<Utc>,
                due_before: DateTime<Utc>
            ) -> bool;
            fn renew_job_lease(name: &str, owner: &str, lease_until: DateTime<Utc>) -> bool;
            fn finish_job_run(name: &str, owner: &str, at: DateTime<Utc>, error: Option<&str>) -> bool;
            fn job_runs() -> Vec<JobRunRecord>;
            fn purge_expired(now: DateTime<Utc>, retain_after: DateTime<Utc>) -> PurgeCounts;
        }}
        $apply! { EventStore {
            fn user_events_after(user_id: Uuid, after: Option<Uuid>, limit: u32) -> Vec<Event>;
            fn audit_events(filter: &AuditFilter) -> Vec<Event>;
            fn purge_events_before(cutoff: DateTime<Utc>) -> u64;
        }}
        $apply! { BatchStore {
            fn apply_batch(
                user_id: Uuid,
                batch: &NormalizedBatch,
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, BatchCounts>,
                raised: &mut Vec<Event>
            ) -> BatchCounts;
            fn preview_batch(user_id: Uuid, batch: &NormalizedBatch, now: DateTime<Utc>) -> BatchCounts;
        }}
        $apply! { ProviderConnectionStore {
            fn insert_oauth_state(state: &NewOAuthState) -> ();
            fn take_oauth_state(state_digest: &[u8]) -> Option<OAuthStateRecord>;
            fn connections_for_user(user_id: Uuid, active_only: bool) -> Vec<ConnectionRecord>;
            fn connection_by_id(connection_id: Uuid) -> Option<ConnectionRecord>;
            fn save_authorized_connection(
                user_id: Uuid,
                provider_slug: &str,
                alias: Option<&str>,
                new_id: Uuid,
                credentials_for: &(dyn Fn(Uuid) -> Result<EncryptedCredentials, StoreError> + Send + Sync),
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, (ConnectionRecord, bool)>,
                raised: &mut Vec<Event>
            ) -> (ConnectionRecord, bool);
            fn renew_authorized_connection(
                user_id: Uuid,
                connection_id: Uuid,
                credentials_for: &(dyn Fn(Uuid) -> Result<EncryptedCredentials, StoreError> + Send + Sync),
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, (ConnectionRecord, bool)>,
                raised: &mut Vec<Event>
            ) -> Option<ConnectionRecord>;
            fn update_connection_alias(
                user_id: Uuid,
                connection_id: Uuid,
                alias: Option<&str>,
                now: DateTime<Utc>
            ) -> Option<ConnectionRecord>;
            fn disconnect_connection(
                user_id: Uuid,
                connection_id: Uuid,
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, ConnectionRecord>,
                raised: &mut Vec<Event>
            ) -> Option<ConnectionRecord>;
            fn replace_connection_credentials(
                connection_id: Uuid,
                previous: &[u8],
                credentials: &EncryptedCredentials,
                now: DateTime<Utc>
            ) -> bool;
            fn expire_connection_credentials(
                connection_id: Uuid,
                previous: &[u8],
                now: DateTime<Utc>,
                events: &[Event],
                raised: &mut Vec<Event>
            ) -> bool;
            fn revoke_connection(
                connection_id: Uuid,
                now: DateTime<Utc>,
                events: &[Event],
                raised: &mut Vec<Event>
            ) -> bool;
            fn set_connection_status(
                connection_id: Uuid,
                status: ConnectionStatus,
                now: DateTime<Utc>
            ) -> bool;
            fn connections_due_for_token_refresh(
                before: DateTime<Utc>,
                limit: u32
            ) -> Vec<ConnectionRecord>;
            fn connections_due_for_sync(synced_before: DateTime<Utc>, limit: u32) -> Vec<ConnectionRecord>;
            fn claim_sync(
                subject_id: Uuid,
                kind: SyncKind,
                now: DateTime<Utc>,
                cooldown: chrono::TimeDelta,
                force: bool
            ) -> SyncClaim;
            fn release_sync(
                subject_id: Uuid,
                kind: SyncKind,
                claimed_at: DateTime<Utc>,
                previous: Option<DateTime<Utc>>
            ) -> ();
            fn request_budget_paid_until(connection_id: Uuid) -> Option<DateTime<Utc>>;
            fn spend_request_budget(
                connection_id: Uuid,
                now: DateTime<Utc>,
                cost: chrono::TimeDelta
            ) -> ();
        }}
        $apply! { SyncStore {
            fn sync_cursor(connection_id: Uuid) -> Option<String>;
            fn set_webhook_key(
                connection_id: Uuid,
                provider_slug: &str,
                key_digest: &[u8]
            ) -> ();
            fn connection_by_webhook_key(
                provider_slug: &str,
                key_digest: &[u8]
            ) -> Option<ConnectionRecord>;
            fn record_events(events: &[Event], raised: &mut Vec<Event>) -> ();
        }}
        $apply! { ConnectionStore {
            fn create_connection(connection: &NewConnection) -> ConnectionRecord;
            fn find_or_create_connection(
                user_id: Uuid,
                provider_slug: &str,
                alias: Option<&str>,
                now: DateTime<Utc>
            ) -> ConnectionRecord;
            fn connection_for_user(user_id: Uuid, connection_id: Uuid) -> Option<ConnectionRecord>;
        }}
        $apply! { AccountStore {
            fn upsert_accounts(
                connection_id: Uuid,
                accounts: &[NewAccount],
                now: DateTime<Utc>
            ) -> UpsertCounts;
            fn account_for_user(user_id: Uuid, account_id: Uuid) -> Option<AccountRecord>;
            fn accounts_for_user(user_id: Uuid, filter: &AccountFilter) -> Vec<AccountRecord>;
        }}
        $apply! { TransactionStore {
            fn upsert_transactions(
                account_id: Uuid,
                transactions: &[NewTransaction],
                now: DateTime<Utc>
            ) -> UpsertCounts;
            fn transaction_for_user(user_id: Uuid, transaction_id: Uuid) -> Option<TransactionRecord>;
            fn transactions_for_account(
                user_id: Uuid,
                account_id: Uuid,
                query: &TransactionQuery
            ) -> Page<TransactionRecord>;
            fn transaction_matches(user_id: Uuid, filter: &MatchFilter) -> Vec<MatchRecord>;
            fn decide_match(
                user_id: Uuid,
                match_id: Uuid,
                decision: MatchDecision,
                now: DateTime<Utc>,
                raise: &RaiseEvents<'_, MatchRecord>,
                raised: &mut Vec<Event>
            ) -> Option<MatchRecord>;
            fn custom_categories(user_id: Uuid) -> Vec<CustomCategoryRecord>;
            fn create_custom_category(category: &CustomCategoryRecord, limit: u64) -> bool;
            fn delete_custom_category(
                user_id: Uuid,
                category_id: Uuid,
                now: DateTime<Utc>
            ) -> Option<u64>;
            fn edit_transaction(
                user_id: Uuid,
                transaction_id: Uuid,
                edit: &TransactionEdit,
                now: DateTime<Utc>
            ) -> TransactionEdited;
            fn rules(user_id: Uuid) -> Vec<RuleRecord>;
            fn create_rule(rule: &RuleRecord, limit: u64) -> bool;
            fn update_rule(rule: &RuleRecord) -> bool;
            fn delete_rule(user_id: Uuid, rule_id: Uuid) -> bool;
            fn preview_rule(
                user_id: Uuid,
                rule: &crate::enrich::rules::Rule,
                sample: usize
            ) -> crate::enrich::rules::RulePreview;
            fn apply_rule(
                user_id: Uuid,
                rule: &crate::enrich::rules::Rule,
                now: DateTime<Utc>
            ) -> u64;
        }}
        $apply! { HoldingStore {
            fn upsert_holdings(
                account_id: Uuid,
                holdings: &[NewHolding],
                now: DateTime<Utc>
            ) -> UpsertCounts;
            fn deactivate_missing_holdings(
                account_id: Uuid,
                keep_provider_ids: &[String],
                now: DateTime<Utc>
            ) -> u64;
            fn holdings_for_user(
                user_id: Uuid,
                filter: &HoldingFilter,
                page: PageAfter
            ) -> HoldingPage;
        }}
        $apply! { SnapshotStore {
            fn insert_snapshot(snapshot: &NewSnapshot) -> SnapshotRecord;
            fn latest_snapshots_for_user(user_id: Uuid) -> Vec<SnapshotRecord>;
            fn balance_history(
                user_id: Uuid,
                account_id: Uuid,
                start: DateTime<Utc>,
                end: DateTime<Utc>,
                source: Option<SnapshotSource>,
                page: PageAfter
            ) -> Page<SnapshotRecord>;
            fn snapshots_for_account(
                user_id: Uuid,
                account_id: Uuid,
                limit: u32,
                source: Option<SnapshotSource>
            ) -> Page<SnapshotRecord>;
            fn balances_at(
                user_id: Uuid,
                currency: &str,
                points: &[DateTime<Utc>]
            ) -> Vec<PointBalance>;
        }}
        $apply! { LoginNetworkStore {
            fn login_network_last_success(user_id: Uuid, network_digest: &[u8]) -> Option<DateTime<Utc>>;
            fn record_login_network(
                user_id: Uuid,
                network_digest: &[u8],
                at: DateTime<Utc>,
                keep: u32
            ) -> ();
            fn purge_login_networks_before(cutoff: DateTime<Utc>) -> u64;
        }}
        $apply! { UserDataStore {
            fn begin_user_erasure(erasure: &NewUserErasure, events: &[Event]) -> Option<UserRecord>;
            fn claim_user_erasure(
                user_id: Option<Uuid>,
                owner: &str,
                now: DateTime<Utc>,
                lease_until: DateTime<Utc>
            ) -> Option<Uuid>;
            fn erase_user_batch(
                user_id: Uuid,
                owner: &str,
                limit: u32,
                lease_until: DateTime<Utc>
            ) -> Option<u64>;
            fn finish_user_erasure(user_id: Uuid, owner: &str, at: DateTime<Utc>) -> bool;
            fn user_erasure(user_id: Uuid) -> Option<UserErasureRecord>;
            fn users_erased_since(since: DateTime<Utc>) -> Vec<Uuid>;
            fn export_accounts(user_id: Uuid, after: Option<Uuid>, limit: u32) -> Vec<AccountRecord>;
            fn export_transactions(
                user_id: Uuid,
                account_id: Uuid,
                after: Option<TransactionPosition>,
                limit: u32
            ) -> Vec<TransactionRecord>;
            fn export_holdings(
                user_id: Uuid,
                account_id: Uuid,
                after: Option<Uuid>,
                limit: u32
            ) -> Vec<HoldingRecord>;
            fn export_snapshots(
                user_id: Uuid,
                account_id: Uuid,
                after: Option<Uuid>,
                limit: u32
            ) -> Vec<SnapshotRecord>;
        }}
        $apply! { WebhookStore {
            fn create_webhook_endpoint(endpoint: &NewWebhookEndpoint, cap: u32) -> bool;
            fn webhook_endpoints(user_id: Uuid) -> Vec<WebhookEndpointRecord>;
            fn webhook_endpoint(user_id: Uuid, endpoint_id: Uuid) -> Option<WebhookEndpointRecord>;
            fn delete_webhook_endpoint(user_id: Uuid, endpoint_id: Uuid) -> bool;
            fn replace_webhook_secret(
                user_id: Uuid,
                endpoint_id: Uuid,
                encrypted_secret: &[u8],
                secret_key_id: &str,
                at: DateTime<Utc>,
                previous_until: DateTime<Utc>
            ) -> Option<WebhookEndpointRecord>;
            fn webhook_deliveries(
                user_id: Uuid,
                endpoint_id: Uuid,
                limit: u32
            ) -> Option<Vec<WebhookDeliveryRecord>>;
            fn enable_webhook_endpoint(
                user_id: Uuid,
                endpoint_id: Uuid,
                at: DateTime<Utc>
            ) -> Option<WebhookEndpointRecord>;
            fn claim_webhook_deliveries(claim: &DeliveryClaim) -> Vec<ClaimedDelivery>;
            fn record_webhook_attempts(
                attempts: &[WebhookAttempt],
                disable_failing_since: DateTime<Utc>,
                raise: &RaiseEvents<'_, DisabledWebhook>,
                raised: &mut Vec<Event>
            ) -> ();
            fn purge_webhook_deliveries_before(cutoff: DateTime<Utc>) -> u64;
        }}
        $apply! { SearchStore {
            fn search_transactions(user_id: Uuid, search: &TransactionSearch) -> Vec<TransactionRecord>;
            fn spending_rows(
                user_id: Uuid,
                from: NaiveDate,
                to: NaiveDate,
                after: Option<TransactionPosition>,
                limit: u32
            ) -> Vec<SpendingRow>;
        }}
    };
}
#[cfg(feature = "testing")]
pub(crate) use for_each_store_trait;

for_each_store_trait!(guarded);

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (at most 5 s) for the background ping to open the breaker.
    async fn open_soon(guarded: &GuardedStore) {
        for _ in 0..100 {
            if guarded.breaker.is_open() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the breaker did not open");
    }

    impl GuardedStore {
        fn spawn_probe_for_test(&self) {
            tokio::spawn(probe(
                Arc::downgrade(&self.inner),
                Arc::downgrade(&self.breaker),
            ));
        }
    }

    fn unavailable() -> Result<(), StoreError> {
        Err(StoreError::Unavailable("pool timed out".to_owned()))
    }

    #[test]
    fn opens_after_failures_in_a_row_and_closes_on_the_first_answer() {
        let breaker = Breaker::default();
        for _ in 1..FAILURES_TO_OPEN {
            assert_eq!(breaker.learn(&unavailable()), Learned::Nothing);
            assert!(!breaker.is_open());
        }
        assert_eq!(breaker.learn(&unavailable()), Learned::Suspect);
        assert!(!breaker.is_open(), "open only once a ping fails too");
        assert_eq!(breaker.confirm(&unavailable()), Learned::Opened);
        assert!(breaker.is_open());
        // A failed ping keeps it open; the first answer closes it.
        assert_eq!(breaker.learn(&unavailable()), Learned::Nothing);
        assert!(breaker.is_open());
        assert_eq!(breaker.learn(&Ok(())), Learned::Closed);
        assert!(!breaker.is_open());
    }

    #[test]
    fn failures_with_an_answered_ping_leave_it_closed() {
        let breaker = Breaker::default();
        for _ in 0..5 {
            for _ in 1..FAILURES_TO_OPEN {
                breaker.learn(&unavailable());
            }
            assert_eq!(breaker.learn(&unavailable()), Learned::Suspect);
            // A pool timed out because every connection was busy; the ping got an answer.
            assert_eq!(breaker.confirm(&Ok(())), Learned::Nothing);
            assert!(!breaker.is_open());
        }
        // A call answered while the ping was under way: the ping no longer decides.
        for _ in 0..FAILURES_TO_OPEN {
            breaker.learn(&unavailable());
        }
        breaker.learn(&Ok(()));
        assert_eq!(breaker.confirm(&unavailable()), Learned::Nothing);
        assert!(!breaker.is_open());
    }

    #[test]
    fn slow_calls_never_open_it() {
        let breaker = Breaker::default();
        for _ in 0..100 {
            let busy = Err::<(), _>(StoreError::Busy(
                "canceling statement due to statement \
                                                       timeout"
                    .to_owned(),
            ));
            assert_eq!(breaker.learn(&busy), Learned::Nothing);
        }
        assert!(!breaker.is_open());
        assert_eq!(
            *breaker.state.lock().unwrap(),
            State::Closed {
                failures_in_a_row: 0
            }
        );
    }

    #[test]
    fn any_answer_resets_the_count_and_only_unavailability_counts() {
        let breaker = Breaker::default();
        for _ in 0..10 {
            for _ in 1..FAILURES_TO_OPEN {
                breaker.learn(&unavailable());
            }
            // The store answered, if only to refuse: it is reachable.
            breaker.learn(&Err::<(), _>(StoreError::Conflict("taken".to_owned())));
            breaker.learn(&Err::<(), _>(StoreError::Other("bad row".to_owned())));
            assert!(!breaker.is_open());
        }
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn an_unreachable_store_is_refused_at_once_once_open() {
        let store = super::super::SqliteStore::in_memory()
            .await
            .expect("in-memory SQLite");
        store.pool().close().await;
        let guarded = GuardedStore::new(Arc::new(store));
        for _ in 0..FAILURES_TO_OPEN {
            let error = guarded.ping().await.expect_err("closed pool");
            assert!(!error.to_string().contains(OPEN), "{error}");
        }
        // The confirming ping fails as well.
        open_soon(&guarded).await;
        for _ in 0..10 {
            let error = guarded.user_by_id(Uuid::nil()).await.expect_err("open");
            assert!(
                matches!(&error, StoreError::Unavailable(detail) if detail == OPEN),
                "{error}"
            );
        }
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn the_background_ping_closes_the_breaker_without_any_request() {
        let store = super::super::SqliteStore::in_memory()
            .await
            .expect("in-memory SQLite");
        let guarded = GuardedStore::new(Arc::new(store));
        for _ in 0..FAILURES_TO_OPEN {
            let outcome = guarded.guard(async { unavailable() }).await;
            assert!(outcome.is_err());
        }
        // The store answers the confirming ping: the breaker never opens.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!guarded.breaker.is_open());
        // Opened by hand, the ping alone closes it.
        *guarded.breaker.state.lock().unwrap() = State::Open;
        guarded.spawn_probe_for_test();
        // No call comes; the ping alone notices the store answers.
        let mut waited = 0;
        while guarded.breaker.is_open() && waited < 300 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            waited += 1;
        }
        assert!(!guarded.breaker.is_open(), "still open after 30 s");
        guarded.ping().await.expect("closed again");
    }
}
