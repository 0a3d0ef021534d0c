//! The life of a provider connection: the OAuth flow, encrypted credentials and their refresh,
//! and syncs of accounts, transactions and holdings into the records.
//!
//! Shared by the HTTP handlers and the background jobs, so both follow the same rules: tokens
//! are decrypted only in memory, refreshed shortly before they expire, a refused refresh marks
//! the connection `expired`, and every sync is written in one store transaction.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::flights::RefreshFlights;
use super::{
    AuthorizationRequest, DateRange, Fetched, Provider, ProviderError, ProviderTokens, Providers,
    SyncItemError,
};
use crate::config::Config;
use crate::crypto::{CryptoError, new_pkce_pair, random_urlsafe_token, token_digest};
use crate::dates;
use crate::events::{DomainEvent, EventSink};
use crate::store::{
    AccountFilter, AccountRecord, AssetType, ConnectionRecord, ConnectionStatus,
    EncryptedCredentials, FILE_IMPORT_PROVIDER, NewAccount, NewHolding, NewOAuthState,
    NewTransaction, SnapshotSource, Store, StoreError, SyncAccountData, SyncBatch, SyncClaim,
    SyncKind, SyncSnapshot, UpsertCounts, now,
};

/// Access tokens this close to expiry are refreshed before use.
const EXPIRY_SLACK: TimeDelta = TimeDelta::seconds(60);

/// How long a refresh waits for another refresh of the same connection to finish.
const FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a refused refresh watches the stored credentials for another instance's
/// replacement before it marks the connection `expired` (the time between that instance's
/// provider answer and its store write), and how often it looks.
const REFUSAL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
const REFUSAL_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Why a connection operation failed. Each maps to one problem code at the HTTP edge.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectionError {
    #[error("The provider {0:?} is not supported.")]
    UnknownProvider(String),
    #[error("The provider {0:?} does not connect through OAuth.")]
    NoOAuth(String),
    #[error("The authorization state is invalid or expired.")]
    InvalidState,
    #[error("The stored authorization could not be read; start connecting again.")]
    MalformedState,
    #[error("Connections of {0:?} are fed by file imports and have nothing to sync.")]
    NotSyncable(String),
    #[error("The connection is {0}; connect the provider again.")]
    NeedsReauthentication(ConnectionStatus),
    #[error("The account is not part of this connection.")]
    AccountNotInConnection,
    #[error("This was synced less than the cool-down ago; retry later or pass force.")]
    CoolingDown { retry_after_secs: u64 },
    #[error("The provider failed: {0}")]
    Provider(#[from] ProviderError),
    #[error("The credentials could not be encrypted or decrypted: {0}")]
    Credentials(#[from] CryptoError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The address a user is sent to, and the state that comes back.
pub(crate) struct Authorization {
    pub(crate) authorization_url: String,
    pub(crate) state: String,
    pub(crate) expires_in: u64,
}

/// What one kind of sync did, with the items the provider answered that could not be used.
#[derive(Debug, Default, Clone)]
pub(crate) struct SyncReport {
    pub(crate) counts: UpsertCounts,
    pub(crate) deactivated: u64,
    pub(crate) errors: Vec<SyncItemError>,
}

/// The three reports of a whole-connection sync.
#[derive(Debug, Default, Clone)]
pub(crate) struct ConnectionSyncReport {
    pub(crate) accounts: SyncReport,
    pub(crate) transactions: SyncReport,
    pub(crate) holdings: SyncReport,
}

/// The outcome of a token refresh request.
pub(crate) struct TokenRefresh {
    pub(crate) refreshed: bool,
    pub(crate) expires_at: DateTime<Utc>,
}

/// Decrypted provider tokens with the stored ciphertext they came from: the version a
/// refresh compares the stored credentials against.
struct HeldTokens {
    tokens: ProviderTokens,
    sealed: Vec<u8>,
}

/// Everything a connection operation needs; cheap to clone.
#[derive(Clone)]
pub(crate) struct Connections {
    store: Arc<dyn Store>,
    providers: Arc<Providers>,
    config: Arc<Config>,
    events: Arc<dyn EventSink>,
    flights: RefreshFlights,
}

fn seconds(duration: std::time::Duration) -> TimeDelta {
    dates::delta(duration)
}

impl Connections {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        providers: Arc<Providers>,
        config: Arc<Config>,
        events: Arc<dyn EventSink>,
    ) -> Self {
        Self {
            store,
            providers,
            config,
            events,
            flights: RefreshFlights::default(),
        }
    }

    /// The provider with this slug that connects through OAuth.
    fn oauth_provider(&self, slug: &str) -> Result<Arc<dyn Provider>, ConnectionError> {
        if slug == FILE_IMPORT_PROVIDER {
            return Err(ConnectionError::NoOAuth(slug.to_owned()));
        }
        let provider = self
            .providers
            .get(slug)
            .ok_or_else(|| ConnectionError::UnknownProvider(slug.to_owned()))?;
        if !provider.supports_oauth() {
            return Err(ConnectionError::NoOAuth(slug.to_owned()));
        }
        Ok(provider.clone())
    }

    /// The provider behind a connection that can be synced now.
    fn syncable(
        &self,
        connection: &ConnectionRecord,
    ) -> Result<Arc<dyn Provider>, ConnectionError> {
        if connection.provider_slug == FILE_IMPORT_PROVIDER {
            return Err(ConnectionError::NotSyncable(
                connection.provider_slug.clone(),
            ));
        }
        if connection.status != ConnectionStatus::Active {
            return Err(ConnectionError::NeedsReauthentication(connection.status));
        }
        self.oauth_provider(&connection.provider_slug)
    }

    /// Starts connecting: stores the state (as its digest, with the PKCE verifier encrypted)
    /// and returns the provider's authorization address.
    pub(crate) async fn start_authorization(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<String>,
        redirect_uri: String,
    ) -> Result<Authorization, ConnectionError> {
        let provider = self.oauth_provider(provider_slug)?;
        let state = random_urlsafe_token();
        let state_digest = token_digest(&state);
        // A fresh verifier per connect (32 random bytes, base64url: RFC 7636 §4.1), kept only
        // encrypted, bound to the state's digest; only its S256 challenge leaves the service
        // before the code exchange.
        let (challenge, encrypted_verifier) = if provider.supports_pkce() {
            let (challenge, verifier) = new_pkce_pair();
            let (key_id, sealed) = self
                .config
                .keyring()
                .encrypt(verifier.as_bytes(), &state_digest)?;
            (Some(challenge), Some((key_id, sealed)))
        } else {
            (None, None)
        };
        let authorization_url = provider.authorization_url(&AuthorizationRequest {
            state: &state,
            redirect_uri: &redirect_uri,
            pkce_challenge: challenge.as_deref(),
        })?;
        let ttl = self.config.oauth_state_ttl();
        let created_at = now();
        let (pkce_key_id, encrypted_pkce_verifier) = encrypted_verifier.unzip();
        self.store
            .insert_oauth_state(&NewOAuthState {
                state_digest,
                user_id,
                provider_slug: provider_slug.to_owned(),
                alias,
                redirect_uri,
                encrypted_pkce_verifier,
                pkce_key_id,
                created_at,
                expires_at: dates::later(created_at, seconds(ttl)),
            })
            .await?;
        Ok(Authorization {
            authorization_url,
            state,
            expires_in: ttl.as_secs(),
        })
    }

    /// Finishes connecting: consumes the state, exchanges the code and stores the connection
    /// with its encrypted credentials. `caller` is the user of a bearer token sent along, if
    /// any. The connection, and whether it was created (rather than re-authorized).
    pub(crate) async fn complete_authorization(
        &self,
        code: &str,
        state: &str,
        caller: Option<Uuid>,
    ) -> Result<(ConnectionRecord, bool), ConnectionError> {
        let at = now();
        let stored = self
            .store
            .take_oauth_state(&token_digest(state))
            .await?
            .filter(|stored| stored.expires_at > at)
            .ok_or(ConnectionError::InvalidState)?;
        if caller.is_some_and(|caller| caller != stored.user_id) {
            // Answered as an unknown state, so the caller learns nothing about it; the state
            // is spent all the same.
            tracing::warn!(
                "an OAuth callback carried the bearer token of another user than the state's; refused"
            );
            return Err(ConnectionError::InvalidState);
        }
        let verifier = match (&stored.encrypted_pkce_verifier, &stored.pkce_key_id) {
            (Some(sealed), Some(key_id)) => {
                let plain = self
                    .config
                    .keyring()
                    .decrypt(key_id, sealed, &stored.state_digest)
                    .map_err(|_| ConnectionError::MalformedState)?;
                Some(String::from_utf8(plain).map_err(|_| ConnectionError::MalformedState)?)
            }
            (None, None) => None,
            _ => return Err(ConnectionError::MalformedState),
        };
        let provider = self.oauth_provider(&stored.provider_slug)?;
        let tokens = provider
            .exchange_code(code, &stored.redirect_uri, verifier.as_deref())
            .await?;
        let keyring = self.config.keyring().clone();
        let encrypt = move |connection_id: Uuid| {
            encrypt_tokens(&keyring, connection_id, &tokens)
                .map_err(|error| StoreError::Other(format!("credential encryption: {error}")))
        };
        // Fail before writing anything when no key can encrypt.
        encrypt_probe(self.config.keyring())?;
        let (connection, created) = self
            .store
            .save_authorized_connection(
                stored.user_id,
                &stored.provider_slug,
                stored.alias.as_deref(),
                Uuid::now_v7(),
                &encrypt,
                at,
            )
            .await?;
        self.events.emit(&DomainEvent::ProviderConnected {
            user_id: stored.user_id,
            connection_id: connection.id,
            provider_slug: connection.provider_slug.clone(),
            reauthorized: !created,
        });
        Ok((connection, created))
    }

    /// The connection's tokens, refreshed first when they expire within a minute.
    async fn usable_tokens(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
    ) -> Result<HeldTokens, ConnectionError> {
        let held = self.decrypt_tokens(connection)?;
        if held.tokens.expires_at <= dates::later(now(), EXPIRY_SLACK) {
            self.refresh_with(connection, provider, &held).await
        } else {
            Ok(held)
        }
    }

    fn decrypt_tokens(&self, connection: &ConnectionRecord) -> Result<HeldTokens, ConnectionError> {
        let (Some(sealed), Some(key_id)) = (
            connection.encrypted_credentials.as_deref(),
            connection.credentials_key_id.as_deref(),
        ) else {
            return Err(ConnectionError::NeedsReauthentication(connection.status));
        };
        let plain = self
            .config
            .keyring()
            .decrypt(key_id, sealed, connection.id.as_bytes())?;
        let tokens = serde_json::from_slice(&plain)
            .map_err(|_| ConnectionError::Credentials(CryptoError::Damaged))?;
        Ok(HeldTokens {
            tokens,
            sealed: sealed.to_vec(),
        })
    }

    /// The connection as stored now, with its tokens; an error when it can no longer be used
    /// (disconnected, expired, gone).
    async fn stored_tokens(&self, connection_id: Uuid) -> Result<HeldTokens, ConnectionError> {
        let current = self.store.connection_by_id(connection_id).await?.ok_or(
            ConnectionError::NeedsReauthentication(ConnectionStatus::Disconnected),
        )?;
        if current.status != ConnectionStatus::Active {
            return Err(ConnectionError::NeedsReauthentication(current.status));
        }
        self.decrypt_tokens(&current)
    }

    /// Refreshes the tokens the caller holds (`seen`), single-flight: under the connection's
    /// flight the stored credentials are read again, and when another refresh replaced them
    /// meanwhile those are used instead of presenting the same refresh token twice. The result
    /// is stored with a compare-and-swap on the credentials it started from, so a refresh that
    /// loses a race with another instance reads the winner's tokens rather than overwriting
    /// them; a refused refresh marks the connection `expired` only when nobody replaced the
    /// credentials meanwhile.
    async fn refresh_with(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        seen: &HeldTokens,
    ) -> Result<HeldTokens, ConnectionError> {
        let _flight = self
            .flights
            .acquire(connection.id, FLIGHT_WAIT)
            .await
            .map_err(|error| ProviderError::Http(error.to_string()))?;
        let stored = self.stored_tokens(connection.id).await?;
        if stored.sealed != seen.sealed {
            // Another flight (here or on another instance) refreshed already.
            return Ok(stored);
        }
        let Some(refresh_token) = stored.tokens.refresh_token.as_deref() else {
            return self.expire(connection, &stored).await;
        };
        match provider.refresh_tokens(refresh_token).await {
            Ok(mut fresh) => {
                if fresh.refresh_token.is_none() {
                    fresh.refresh_token = stored.tokens.refresh_token.clone();
                }
                let credentials = encrypt_tokens(self.config.keyring(), connection.id, &fresh)?;
                let swapped = self
                    .store
                    .replace_connection_credentials(
                        connection.id,
                        &stored.sealed,
                        &credentials,
                        now(),
                    )
                    .await?;
                if !swapped {
                    // Lost to another writer: its credentials are the live ones.
                    tracing::info!(connection_id = %connection.id, "provider tokens were replaced during a refresh; using the stored ones");
                    return self.replaced_since(connection.id, &stored).await;
                }
                self.events.emit(&DomainEvent::ProviderTokensRefreshed {
                    connection_id: connection.id,
                    succeeded: true,
                });
                Ok(HeldTokens {
                    tokens: fresh,
                    sealed: credentials.ciphertext,
                })
            }
            Err(ProviderError::InvalidGrant(reason)) => {
                // Another instance may have rotated this refresh token a moment ago and not
                // yet stored the result: give it the grace to do so before concluding.
                if let Some(replaced) = self.replaced_within_grace(connection.id, &stored).await? {
                    return Ok(replaced);
                }
                match self.expire(connection, &stored).await {
                    Err(ConnectionError::NeedsReauthentication(ConnectionStatus::Expired)) => {
                        Err(ProviderError::InvalidGrant(reason).into())
                    }
                    other => other,
                }
            }
            Err(error) => {
                self.events.emit(&DomainEvent::ProviderTokensRefreshed {
                    connection_id: connection.id,
                    succeeded: false,
                });
                Err(error.into())
            }
        }
    }

    /// Watches the stored credentials for [`REFUSAL_GRACE`]: the replacement of `stale` when
    /// one appears (a refresh on another instance that won the race with the same refresh
    /// token), `None` when none did. In-process rivals need no wait: they finished under the
    /// flight before this one read the credentials.
    async fn replaced_within_grace(
        &self,
        connection_id: Uuid,
        stale: &HeldTokens,
    ) -> Result<Option<HeldTokens>, ConnectionError> {
        let deadline = tokio::time::Instant::now() + REFUSAL_GRACE;
        loop {
            let current = self.stored_tokens(connection_id).await?;
            if current.sealed != stale.sealed {
                return Ok(Some(current));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(REFUSAL_POLL).await;
        }
    }

    /// Marks the connection `expired` because the refresh of `stored` cannot work, unless the
    /// credentials were replaced meanwhile (then those are returned).
    async fn expire(
        &self,
        connection: &ConnectionRecord,
        stored: &HeldTokens,
    ) -> Result<HeldTokens, ConnectionError> {
        let expired = self
            .store
            .expire_connection_credentials(connection.id, &stored.sealed, now())
            .await?;
        if !expired {
            return self.replaced_since(connection.id, stored).await;
        }
        self.events.emit(&DomainEvent::ProviderTokensRefreshed {
            connection_id: connection.id,
            succeeded: false,
        });
        Err(ConnectionError::NeedsReauthentication(
            ConnectionStatus::Expired,
        ))
    }

    /// The stored tokens after a conditional write found the credentials changed: the new
    /// ones when the connection is still usable, else why not.
    async fn replaced_since(
        &self,
        connection_id: Uuid,
        stale: &HeldTokens,
    ) -> Result<HeldTokens, ConnectionError> {
        let stored = self.stored_tokens(connection_id).await?;
        if stored.sealed == stale.sealed {
            // Unchanged credentials yet the write did not apply: the status moved.
            return Err(ConnectionError::NeedsReauthentication(
                ConnectionStatus::Expired,
            ));
        }
        Ok(stored)
    }

    /// Refreshes the connection's provider tokens: always when `force`, otherwise only when
    /// they expire within the refresh margin. A refresh that found the tokens already
    /// refreshed by a concurrent one reports those.
    pub(crate) async fn refresh_tokens(
        &self,
        connection: &ConnectionRecord,
        force: bool,
    ) -> Result<TokenRefresh, ConnectionError> {
        let provider = self.syncable(connection)?;
        let held = self.decrypt_tokens(connection)?;
        let margin = seconds(self.config.token_refresh_margin());
        if !force && held.tokens.expires_at > dates::later(now(), margin) {
            return Ok(TokenRefresh {
                refreshed: false,
                expires_at: held.tokens.expires_at,
            });
        }
        let fresh = self.refresh_with(connection, &provider, &held).await?;
        Ok(TokenRefresh {
            refreshed: true,
            expires_at: fresh.tokens.expires_at,
        })
    }

    /// Calls the provider with the access token; when it refuses the token, refreshes once
    /// and tries again.
    async fn call<T, F, Fut>(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldTokens,
        request: F,
    ) -> Result<T, ConnectionError>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        match request(tokens.tokens.access_token.clone()).await {
            Err(ProviderError::Unauthorized) => {
                *tokens = self.refresh_with(connection, provider, tokens).await?;
                Ok(request(tokens.tokens.access_token.clone()).await?)
            }
            other => Ok(other?),
        }
    }

    /// Claims the cool-down of a sync, runs it, and hands the claim back if it fails.
    async fn claimed<T, Fut>(
        &self,
        subject_id: Uuid,
        kind: SyncKind,
        force: bool,
        sync: Fut,
    ) -> Result<T, ConnectionError>
    where
        Fut: Future<Output = Result<T, ConnectionError>>,
    {
        let at = now();
        let cooldown = seconds(self.config.sync_cooldown());
        let previous = match self
            .store
            .claim_sync(subject_id, kind, at, cooldown, force)
            .await?
        {
            SyncClaim::Granted { previous } => previous,
            SyncClaim::CoolingDown { until } => {
                let wait = (until - at).num_milliseconds().max(0);
                let retry_after_secs = u64::try_from(wait).unwrap_or(0).div_ceil(1000).max(1);
                return Err(ConnectionError::CoolingDown { retry_after_secs });
            }
        };
        let result = sync.await;
        if result.is_err()
            && let Err(error) = self
                .store
                .release_sync(subject_id, kind, at, previous)
                .await
        {
            tracing::warn!(error = %error, %subject_id, "could not release a failed sync's claim");
        }
        result
    }

    async fn fetch_accounts(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldTokens,
    ) -> Result<Fetched<NewAccount>, ConnectionError> {
        let p = provider.clone();
        self.call(connection, provider, tokens, move |token| {
            let p = p.clone();
            async move { p.accounts(&token).await }
        })
        .await
    }

    async fn fetch_transactions(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldTokens,
        account: &str,
        range: DateRange,
    ) -> Result<Fetched<NewTransaction>, ConnectionError> {
        let p = provider.clone();
        let account = account.to_owned();
        self.call(connection, provider, tokens, move |token| {
            let (p, account) = (p.clone(), account.clone());
            async move { p.transactions(&token, &account, range).await }
        })
        .await
    }

    async fn fetch_holdings(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldTokens,
        account: &str,
    ) -> Result<Fetched<NewHolding>, ConnectionError> {
        let p = provider.clone();
        let account = account.to_owned();
        self.call(connection, provider, tokens, move |token| {
            let (p, account) = (p.clone(), account.clone());
            async move { p.holdings(&token, &account).await }
        })
        .await
    }

    /// Accounts sync: upserts the provider's accounts and records a snapshot of each.
    pub(crate) async fn sync_accounts(
        &self,
        connection: &ConnectionRecord,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        self.claimed(connection.id, SyncKind::Accounts, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let fetched = self
                .fetch_accounts(connection, &provider, &mut tokens)
                .await?;
            let per_account = fetched
                .items
                .iter()
                .map(|account| SyncAccountData {
                    provider_account_id: account.provider_account_id.clone(),
                    transactions: None,
                    holdings: None,
                    snapshot: Some(SyncSnapshot {
                        source: SnapshotSource::AccountSync,
                        holdings_value: None,
                        cash_value: None,
                    }),
                })
                .collect();
            let batch = SyncBatch {
                accounts: fetched.items,
                per_account,
                mark_synced: true,
            };
            let counts = self.store.apply_sync(connection.id, &batch, now()).await?;
            let report = SyncReport {
                counts: counts.accounts,
                deactivated: 0,
                errors: fetched.errors,
            };
            self.emit_synced(connection, "accounts", &report);
            Ok(report)
        })
        .await
    }

    /// The range a transactions sync covers: the given dates, defaulting to the configured
    /// window back from `end` (or today). A default start never reaches before
    /// [`dates::EARLIEST_DATE`], however large the window.
    pub(crate) fn transactions_range(
        &self,
        start: Option<NaiveDate>,
        end: Option<NaiveDate>,
    ) -> DateRange {
        let end = end.unwrap_or_else(|| now().date_naive());
        let window = self.config.transactions_sync_window_days();
        let start = start.unwrap_or_else(|| dates::days_before(end, window));
        DateRange { start, end }
    }

    /// The connection's stored accounts (all of them, or the one asked for).
    async fn stored_accounts(
        &self,
        connection: &ConnectionRecord,
        only: Option<Uuid>,
    ) -> Result<Vec<AccountRecord>, ConnectionError> {
        let accounts = self
            .store
            .accounts_for_user(
                connection.user_id,
                &AccountFilter {
                    connection_id: Some(connection.id),
                    active_only: false,
                    account_type: None,
                },
            )
            .await?;
        match only {
            None => Ok(accounts),
            Some(id) => {
                let account = accounts
                    .into_iter()
                    .find(|account| account.id == id)
                    .ok_or(ConnectionError::AccountNotInConnection)?;
                Ok(vec![account])
            }
        }
    }

    /// Transactions sync: upserts each account's transactions in the range. An account the
    /// provider fails for is reported in `errors`; the others are still written.
    pub(crate) async fn sync_transactions(
        &self,
        connection: &ConnectionRecord,
        account_id: Option<Uuid>,
        range: DateRange,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        let accounts = self.stored_accounts(connection, account_id).await?;
        self.claimed(connection.id, SyncKind::Transactions, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let mut errors = Vec::new();
            let mut per_account = Vec::new();
            for account in &accounts {
                let fetched = self
                    .fetch_transactions(
                        connection,
                        &provider,
                        &mut tokens,
                        &account.provider_account_id,
                        range,
                    )
                    .await;
                if let Some(transactions) = per_item(fetched, &account.id.to_string(), &mut errors)?
                {
                    per_account.push(SyncAccountData {
                        provider_account_id: account.provider_account_id.clone(),
                        transactions: Some(transactions),
                        holdings: None,
                        snapshot: None,
                    });
                }
            }
            if per_account.is_empty() && !accounts.is_empty() {
                return Err(ConnectionError::Provider(ProviderError::Http(
                    "every account's transactions request failed".to_owned(),
                )));
            }
            let batch = SyncBatch {
                accounts: Vec::new(),
                per_account,
                mark_synced: true,
            };
            let counts = self.store.apply_sync(connection.id, &batch, now()).await?;
            let report = SyncReport {
                counts: counts.transactions,
                deactivated: 0,
                errors,
            };
            self.emit_synced(connection, "transactions", &report);
            Ok(report)
        })
        .await
    }

    /// Holdings sync of one account: upserts its positions, deactivates the ones the provider
    /// no longer lists, and records a snapshot with their market value.
    pub(crate) async fn sync_holdings(
        &self,
        connection: &ConnectionRecord,
        account: &AccountRecord,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        self.claimed(account.id, SyncKind::Holdings, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let fetched = self
                .fetch_holdings(
                    connection,
                    &provider,
                    &mut tokens,
                    &account.provider_account_id,
                )
                .await?;
            let snapshot = holdings_snapshot(SnapshotSource::HoldingsSync, &fetched.items);
            let batch = SyncBatch {
                accounts: Vec::new(),
                per_account: vec![SyncAccountData {
                    provider_account_id: account.provider_account_id.clone(),
                    transactions: None,
                    holdings: Some(fetched.items),
                    snapshot: Some(snapshot),
                }],
                mark_synced: true,
            };
            let counts = self.store.apply_sync(connection.id, &batch, now()).await?;
            let report = SyncReport {
                counts: counts.holdings,
                deactivated: counts.holdings_deactivated,
                errors: fetched.errors,
            };
            self.emit_synced(connection, "holdings", &report);
            Ok(report)
        })
        .await
    }

    /// Whole-connection sync: accounts, then each account's transactions and holdings, all
    /// written in one store transaction with one snapshot per account (`source`).
    pub(crate) async fn sync_connection(
        &self,
        connection: &ConnectionRecord,
        source: SnapshotSource,
        force: bool,
    ) -> Result<ConnectionSyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        self.claimed(connection.id, SyncKind::Connection, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let accounts = self
                .fetch_accounts(connection, &provider, &mut tokens)
                .await?;
            let range = self.transactions_range(None, None);
            let mut transaction_errors = Vec::new();
            let mut holding_errors = Vec::new();
            let mut per_account = Vec::new();
            for account in &accounts.items {
                let id = &account.provider_account_id;
                let transactions = per_item(
                    self.fetch_transactions(connection, &provider, &mut tokens, id, range)
                        .await,
                    id,
                    &mut transaction_errors,
                )?;
                let holdings = per_item(
                    self.fetch_holdings(connection, &provider, &mut tokens, id)
                        .await,
                    id,
                    &mut holding_errors,
                )?;
                let snapshot = match &holdings {
                    Some(items) => holdings_snapshot(source, items),
                    None => SyncSnapshot {
                        source,
                        holdings_value: None,
                        cash_value: None,
                    },
                };
                per_account.push(SyncAccountData {
                    provider_account_id: id.clone(),
                    transactions,
                    holdings,
                    snapshot: Some(snapshot),
                });
            }
            let batch = SyncBatch {
                accounts: accounts.items,
                per_account,
                mark_synced: true,
            };
            let counts = self.store.apply_sync(connection.id, &batch, now()).await?;
            let report = ConnectionSyncReport {
                accounts: SyncReport {
                    counts: counts.accounts,
                    deactivated: 0,
                    errors: accounts.errors,
                },
                transactions: SyncReport {
                    counts: counts.transactions,
                    deactivated: 0,
                    errors: transaction_errors,
                },
                holdings: SyncReport {
                    counts: counts.holdings,
                    deactivated: counts.holdings_deactivated,
                    errors: holding_errors,
                },
            };
            self.emit_synced(connection, "accounts", &report.accounts);
            self.emit_synced(connection, "transactions", &report.transactions);
            self.emit_synced(connection, "holdings", &report.holdings);
            Ok(report)
        })
        .await
    }

    fn emit_synced(&self, connection: &ConnectionRecord, kind: &'static str, report: &SyncReport) {
        self.events.emit(&DomainEvent::ConnectionSynced {
            user_id: connection.user_id,
            connection_id: connection.id,
            kind,
            created: report.counts.created,
            updated: report.counts.updated,
            unchanged: report.counts.unchanged,
            deactivated: report.deactivated,
            errors: report.errors.len() as u64,
        });
    }

    /// The background refresh: every active connection whose tokens expire within the margin.
    /// How many were refreshed and how many failed.
    pub(crate) async fn refresh_due_tokens(&self) -> Result<(usize, usize), StoreError> {
        let before = dates::later(now(), seconds(self.config.token_refresh_margin()));
        let due = self
            .store
            .connections_due_for_token_refresh(before, 500)
            .await?;
        let (mut refreshed, mut failed) = (0, 0);
        for connection in &due {
            match self.refresh_tokens(connection, true).await {
                Ok(_) => refreshed += 1,
                Err(ConnectionError::Store(error)) => return Err(error),
                Err(error) => {
                    failed += 1;
                    tracing::warn!(connection_id = %connection.id, error = %error, "provider token refresh failed");
                }
            }
        }
        Ok((refreshed, failed))
    }

    /// The background sync: every active connection not synced within `every`. How many were
    /// synced and how many failed (a connection synced by its user meanwhile is skipped).
    pub(crate) async fn sync_due_connections(
        &self,
        every: std::time::Duration,
    ) -> Result<(usize, usize), StoreError> {
        let due = self
            .store
            .connections_due_for_sync(dates::earlier(now(), seconds(every)), 500)
            .await?;
        let (mut synced, mut failed) = (0, 0);
        for connection in &due {
            match self
                .sync_connection(connection, SnapshotSource::ScheduledSync, false)
                .await
            {
                Ok(_) => synced += 1,
                Err(ConnectionError::CoolingDown { .. }) => {}
                Err(ConnectionError::Store(error)) => return Err(error),
                Err(error) => {
                    failed += 1;
                    tracing::warn!(connection_id = %connection.id, error = %error, "scheduled connection sync failed");
                }
            }
        }
        Ok((synced, failed))
    }
}

/// Sorts a fetch for one account: its items (with their item errors added to `errors`), or
/// `None` with the failure added to `errors` when it concerns only that account (the provider
/// failed for it), or the error when it concerns the whole connection.
fn per_item<T>(
    fetched: Result<Fetched<T>, ConnectionError>,
    item: &str,
    errors: &mut Vec<SyncItemError>,
) -> Result<Option<Vec<T>>, ConnectionError> {
    match fetched {
        Ok(fetched) => {
            errors.extend(fetched.errors);
            Ok(Some(fetched.items))
        }
        Err(ConnectionError::Provider(
            error @ (ProviderError::Http(_) | ProviderError::InvalidResponse(_)),
        )) => {
            errors.push(SyncItemError {
                item: item.to_owned(),
                message: error.to_string(),
            });
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// A snapshot carrying the market value of the holdings (and the cash-equivalent part).
fn holdings_snapshot(source: SnapshotSource, holdings: &[NewHolding]) -> SyncSnapshot {
    let total = |cash_only: bool| {
        holdings
            .iter()
            .filter(|holding| !cash_only || holding.asset_type == AssetType::CashEquivalent)
            .fold(Decimal::ZERO, |sum, holding| {
                sum.saturating_add(holding.market_value)
            })
    };
    SyncSnapshot {
        source,
        holdings_value: Some(total(false)),
        cash_value: Some(total(true)),
    }
}

fn encrypt_tokens(
    keyring: &crate::crypto::Keyring,
    connection_id: Uuid,
    tokens: &ProviderTokens,
) -> Result<EncryptedCredentials, CryptoError> {
    let plain = serde_json::to_vec(tokens).map_err(|_| CryptoError::Damaged)?;
    let (key_id, ciphertext) = keyring.encrypt(&plain, connection_id.as_bytes())?;
    Ok(EncryptedCredentials {
        ciphertext,
        key_id,
        access_expires_at: crate::store::truncate_to_micros(tokens.expires_at),
    })
}

/// Fails when no key is configured, before a callback writes anything.
fn encrypt_probe(keyring: &crate::crypto::Keyring) -> Result<(), CryptoError> {
    keyring.encrypt(b"", b"").map(drop)
}
