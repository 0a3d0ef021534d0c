//! The life of a provider connection: the OAuth flow, listing, renaming and disconnecting,
//! and encrypted credentials with their refresh. The syncs that use those credentials are in
//! [`super::sync`].
//!
//! Shared by the HTTP handlers and the background jobs, so both follow the same rules: tokens
//! are decrypted only in memory, refreshed shortly before they expire, and a refused refresh
//! marks the connection `expired`.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::flights::RefreshFlights;
use super::{
    AuthorizationRequest, ConnectMethod, Institution, Provider, ProviderCredentials, ProviderError,
    ProviderSecret, Providers,
};
use crate::config::Config;
use crate::crypto::{CryptoError, new_pkce_pair, random_urlsafe_token, token_digest};
use crate::dates;
use crate::events::{
    ConnectionCreated, ConnectionDeleted, ConnectionExpired, DomainEvent, DurableEvent, Event,
    Events,
};
use crate::store::{
    ConnectionRecord, ConnectionStatus, EncryptedCredentials, FILE_IMPORT_PROVIDER, NewOAuthState,
    Store, StoreError, now,
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
    #[error("The provider {0:?} connects with a setup token, not through OAuth.")]
    NeedsSetupToken(String),
    #[error("The setup token was refused: {0}")]
    SetupTokenRefused(String),
    #[error("{}", refusal_detail(error, description.as_deref()))]
    RefusedAtProvider {
        error: String,
        description: Option<String>,
    },
    #[error("The provider {0:?} has no institutions to list.")]
    NoInstitutions(String),
    #[error("The provider's credentials do not refresh; connect it again when they expire.")]
    NotRefreshable,
    #[error("The authorization state is invalid or expired.")]
    InvalidState,
    #[error("The stored authorization could not be read; start connecting again.")]
    MalformedState,
    #[error("Connections of {0:?} are fed by file imports and have nothing to sync.")]
    NotSyncable(String),
    #[error("The connection is {0}; connect the provider again.")]
    NeedsReauthentication(ConnectionStatus),
    #[error("Connection not found.")]
    NotFound,
    #[error("The account is not part of this connection.")]
    AccountNotInConnection,
    #[error("This was synced less than the cool-down ago; retry later or pass force.")]
    CoolingDown { retry_after_secs: u64 },
    #[error("The provider's request budget is spent; retry later.")]
    BudgetSpent { retry_after_secs: u64 },
    #[error("The provider failed: {0}")]
    Provider(#[from] ProviderError),
    #[error("The credentials could not be encrypted or decrypted: {0}")]
    Credentials(#[from] CryptoError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a callback carrying the provider's error answers: it names the error.
fn refusal_detail(error: &str, description: Option<&str>) -> String {
    match description {
        Some(description) => format!(
            "The authorization was not granted at the provider: {error} ({description}). Nothing was connected; start connecting again."
        ),
        None => format!(
            "The authorization was not granted at the provider: {error}. Nothing was connected; start connecting again."
        ),
    }
}

/// The address a user is sent to, and the state that comes back.
pub(crate) struct Authorization {
    pub(crate) authorization_url: String,
    pub(crate) state: String,
    pub(crate) expires_in: u64,
}

/// The outcome of a token refresh request.
pub(crate) struct TokenRefresh {
    pub(crate) refreshed: bool,
    pub(crate) expires_at: DateTime<Utc>,
}

/// Decrypted provider credentials with the stored ciphertext they came from: the version a
/// renewal compares the stored credentials against.
pub(super) struct HeldCredentials {
    credentials: ProviderCredentials,
    sealed: Vec<u8>,
}

/// The credentials' shape before secrets were opaque (an OAuth token pair), as connections
/// stored by earlier releases still hold them.
#[derive(serde::Deserialize)]
struct LegacyTokens {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    expires_at: DateTime<Utc>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    consent_expires_at: Option<DateTime<Utc>>,
}

impl From<LegacyTokens> for ProviderCredentials {
    /// The tokens become a secret with the same field names, which is how the built-in
    /// providers read their secrets; the access token's expiry is when to renew.
    fn from(legacy: LegacyTokens) -> Self {
        let mut secret = serde_json::Map::new();
        secret.insert("access_token".to_owned(), legacy.access_token.into());
        if let Some(refresh_token) = legacy.refresh_token {
            secret.insert("refresh_token".to_owned(), refresh_token.into());
        }
        if let Some(scope) = legacy.scope {
            secret.insert("scope".to_owned(), scope.into());
        }
        Self {
            secret: ProviderSecret::from_json(serde_json::Value::Object(secret)),
            renew_at: Some(legacy.expires_at),
            consent_expires_at: legacy.consent_expires_at,
        }
    }
}

/// Decrypts a connection's stored credentials: the current shape, or the token pair earlier
/// releases stored (read as a secret with the same field names).
pub(crate) fn open_credentials(
    keyring: &crate::crypto::Keyring,
    connection_id: Uuid,
    key_id: &str,
    sealed: &[u8],
) -> Result<ProviderCredentials, CryptoError> {
    let plain = keyring.decrypt(key_id, sealed, connection_id.as_bytes())?;
    if let Ok(credentials) = serde_json::from_slice::<ProviderCredentials>(&plain) {
        return Ok(credentials);
    }
    serde_json::from_slice::<LegacyTokens>(&plain)
        .map(ProviderCredentials::from)
        .map_err(|_| CryptoError::Damaged)
}

/// The rule of an authorization's events: `connection.created` of the connection saved
/// (`reauthorized` when it existed).
pub(crate) fn connection_created_events(
    at: DateTime<Utc>,
) -> impl Fn(&(ConnectionRecord, bool)) -> Vec<Event> + Send + Sync {
    move |(record, created)| {
        let authorized = ConnectionCreated {
            user_id: record.user_id,
            connection_id: record.id,
            provider: record.provider_slug.clone(),
            reauthorized: !created,
        };
        vec![authorized.event_at(at)]
    }
}

/// The rule of a disconnection's events: `connection.deleted` of the connection.
pub(crate) fn connection_deleted_events(
    at: DateTime<Utc>,
) -> impl Fn(&ConnectionRecord) -> Vec<Event> + Send + Sync {
    move |record| {
        let deleted = ConnectionDeleted {
            user_id: record.user_id,
            connection_id: record.id,
            provider: record.provider_slug.clone(),
        };
        vec![deleted.event_at(at)]
    }
}

/// The events of the expiry of `connection` after its provider refused the refresh:
/// `connection.expired` (reason `refresh_refused`).
pub(crate) fn connection_expired_events(
    connection: &ConnectionRecord,
    at: DateTime<Utc>,
) -> Vec<Event> {
    expired_events(connection, at, "refresh_refused")
}

/// The events of the expiry of `connection` because the user's consent ended:
/// `connection.expired` (reason `consent_expired`).
fn consent_expired_events(connection: &ConnectionRecord, at: DateTime<Utc>) -> Vec<Event> {
    expired_events(connection, at, "consent_expired")
}

/// The events of the expiry of `connection` because the provider refused credentials that
/// cannot be renewed (the user revoked the access at the provider, as at a SimpleFIN bridge):
/// `connection.expired` (reason `access_revoked`).
fn access_revoked_events(connection: &ConnectionRecord, at: DateTime<Utc>) -> Vec<Event> {
    expired_events(connection, at, "access_revoked")
}

/// `connection.expired` of `connection`, for `reason` (`refresh_refused`, `consent_expired`,
/// `access_revoked`).
fn expired_events(connection: &ConnectionRecord, at: DateTime<Utc>, reason: &str) -> Vec<Event> {
    let expired = ConnectionExpired {
        user_id: connection.user_id,
        connection_id: connection.id,
        provider: connection.provider_slug.clone(),
        reason: reason.to_owned(),
    };
    vec![expired.event_at(at)]
}

/// One provider as `GET /supported-providers` lists it.
pub(crate) struct SupportedProvider {
    pub(crate) slug: String,
    pub(crate) name: String,
    pub(crate) connect: ConnectMethod,
    pub(crate) countries: Vec<String>,
    pub(crate) needs_institution: bool,
}

/// How long a provider's institutions of one country are kept.
const INSTITUTIONS_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Institutions lists by provider and country, with when they were fetched.
type InstitutionCache =
    std::collections::HashMap<(String, String), (tokio::time::Instant, Arc<Vec<Institution>>)>;

/// Everything a connection operation needs; cheap to clone.
#[derive(Clone)]
pub(crate) struct Connections {
    pub(super) store: Arc<dyn Store>,
    providers: Arc<Providers>,
    pub(super) config: Arc<Config>,
    pub(super) events: Events,
    flights: RefreshFlights,
    institutions: Arc<std::sync::Mutex<InstitutionCache>>,
}

pub(super) fn seconds(duration: std::time::Duration) -> TimeDelta {
    dates::delta(duration)
}

impl Connections {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        providers: Arc<Providers>,
        config: Arc<Config>,
        events: Events,
    ) -> Self {
        Self {
            store,
            providers,
            config,
            events,
            flights: RefreshFlights::default(),
            institutions: Arc::default(),
        }
    }

    /// The user's connections (only the connected ones with `active_only`).
    pub(crate) async fn list(
        &self,
        user_id: Uuid,
        active_only: bool,
    ) -> Result<Vec<ConnectionRecord>, ConnectionError> {
        Ok(self
            .store
            .connections_for_user(user_id, active_only)
            .await?)
    }

    /// One of the user's connections.
    pub(crate) async fn owned(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
    ) -> Result<ConnectionRecord, ConnectionError> {
        self.store
            .connection_for_user(user_id, connection_id)
            .await?
            .ok_or(ConnectionError::NotFound)
    }

    /// Updates one of the user's connections: `alias` absent leaves it, `Some(None)` or a
    /// blank alias clears it (the interface stores "empty when none").
    pub(crate) async fn update(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        alias: Option<Option<String>>,
    ) -> Result<ConnectionRecord, ConnectionError> {
        let Some(alias) = alias else {
            return self.owned(user_id, connection_id).await;
        };
        let alias = alias.filter(|alias| !alias.trim().is_empty());
        self.store
            .update_connection_alias(user_id, connection_id, alias.as_deref(), now())
            .await?
            .ok_or(ConnectionError::NotFound)
    }

    /// Disconnects one of the user's connections: its credentials are dropped, its records
    /// kept.
    pub(crate) async fn disconnect(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
    ) -> Result<(), ConnectionError> {
        let connection = self.owned(user_id, connection_id).await?;
        // Read before the store drops them, for the provider to end what they grant.
        let held = self.decrypt_tokens(&connection).ok();
        let mut raised = Vec::new();
        let at = now();
        let raise = connection_deleted_events(at);
        self.store
            .disconnect_connection(user_id, connection_id, at, &raise, &mut raised)
            .await?
            .ok_or(ConnectionError::NotFound)?;
        if raised.is_empty() {
            // Disconnected already (by this request's twin, perhaps): nothing more to end.
            return Ok(());
        }
        self.events.committed(&raised);
        self.events.emit(&DomainEvent::ProviderDisconnected {
            user_id,
            connection_id,
        });
        let provider = self.providers.get(&connection.provider_slug).cloned();
        if let (Some(held), Some(provider)) = (held, provider) {
            // In the background: the answer does not wait for a slow or hung provider (its
            // own timeouts bound the call), and the connection is gone either way.
            let slug = connection.provider_slug;
            tokio::spawn(async move {
                if let Err(error) = provider.disconnect(&held.credentials).await {
                    tracing::warn!(
                        connection_id = %connection_id,
                        provider = %slug,
                        error = %error,
                        "the provider could not end the disconnected connection's access"
                    );
                }
            });
        }
        Ok(())
    }

    /// [`refresh_tokens`](Self::refresh_tokens) of one of the user's connections.
    pub(crate) async fn refresh_tokens_for_user(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        force: bool,
    ) -> Result<TokenRefresh, ConnectionError> {
        let connection = self.owned(user_id, connection_id).await?;
        self.refresh_tokens(&connection, force).await
    }

    /// The slugs a connect accepts: the providers offered that connect through OAuth or a
    /// setup token, in order.
    pub(crate) fn oauth_slugs(&self) -> Vec<String> {
        self.providers
            .slugs()
            .filter(|slug| self.connectable(slug).is_ok())
            .map(str::to_owned)
            .collect()
    }

    /// The providers a user may connect, in slug order.
    pub(crate) fn supported(&self) -> Vec<SupportedProvider> {
        self.providers
            .all()
            .filter(|provider| self.connectable(provider.slug()).is_ok())
            .map(|provider| SupportedProvider {
                slug: provider.slug().to_owned(),
                name: provider.name().to_owned(),
                connect: provider.connect_method(),
                countries: provider.countries(),
                needs_institution: provider.needs_institution(),
            })
            .collect()
    }

    /// The institutions of a provider in one country (upper case), from the cache when
    /// fetched within the hour.
    pub(crate) async fn institutions(
        &self,
        slug: &str,
        country: &str,
    ) -> Result<Arc<Vec<Institution>>, ConnectionError> {
        let provider = self.connectable(slug)?;
        if !provider.needs_institution() {
            return Err(ConnectionError::NoInstitutions(slug.to_owned()));
        }
        let key = (slug.to_owned(), country.to_owned());
        let cached = self
            .institutions
            .lock()
            .map_err(|_| ProviderError::Http("the institutions cache is poisoned".to_owned()))?
            .get(&key)
            .filter(|(at, _)| at.elapsed() < INSTITUTIONS_TTL)
            .map(|(_, list)| list.clone());
        if let Some(list) = cached {
            return Ok(list);
        }
        let list = Arc::new(match provider.institutions(country).await {
            Err(ProviderError::Unsupported(_)) => {
                return Err(ConnectionError::NoInstitutions(slug.to_owned()));
            }
            other => other?,
        });
        if let Ok(mut cache) = self.institutions.lock() {
            cache.retain(|_, (at, _)| at.elapsed() < INSTITUTIONS_TTL);
            cache.insert(key, (tokio::time::Instant::now(), list.clone()));
        }
        Ok(list)
    }

    /// The provider with this slug that a user may connect (through OAuth or a setup token).
    pub(crate) fn connectable(&self, slug: &str) -> Result<Arc<dyn Provider>, ConnectionError> {
        if slug == FILE_IMPORT_PROVIDER {
            return Err(ConnectionError::NoOAuth(slug.to_owned()));
        }
        let provider = self
            .providers
            .get(slug)
            .ok_or_else(|| ConnectionError::UnknownProvider(slug.to_owned()))?;
        match provider.connect_method() {
            ConnectMethod::SetupToken => Ok(provider.clone()),
            _ if provider.supports_oauth() => Ok(provider.clone()),
            _ => Err(ConnectionError::NoOAuth(slug.to_owned())),
        }
    }

    /// Whether the server offers a provider with this slug that connects through OAuth.
    pub(crate) fn offers_oauth(&self, slug: &str) -> Result<(), ConnectionError> {
        self.oauth_provider(slug).map(drop)
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
        if provider.connect_method() == ConnectMethod::SetupToken {
            return Err(ConnectionError::NeedsSetupToken(slug.to_owned()));
        }
        if !provider.supports_oauth() {
            return Err(ConnectionError::NoOAuth(slug.to_owned()));
        }
        Ok(provider.clone())
    }

    /// The provider behind a connection that can be synced now.
    pub(super) fn syncable(
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
        self.connectable(&connection.provider_slug)
    }

    /// Connects a setup-token provider: the provider claims the token, and the credentials it
    /// grants are stored encrypted on the user's connection with this slug and alias (created,
    /// or renewed in place like an OAuth re-authorization). The connection, and whether it was
    /// created.
    pub(crate) async fn connect_with_setup_token(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<String>,
        setup_token: &str,
    ) -> Result<(ConnectionRecord, bool), ConnectionError> {
        let provider = self.connectable(provider_slug)?;
        if provider.connect_method() != ConnectMethod::SetupToken {
            return Err(ConnectionError::SetupTokenRefused(format!(
                "the provider {provider_slug:?} connects through OAuth, not with a setup token"
            )));
        }
        // Fail before the claim (which spends the token) when no key can encrypt.
        encrypt_probe(self.config.keyring())?;
        let credentials = match provider.claim_setup_token(setup_token).await {
            Err(ProviderError::InvalidGrant(reason)) => {
                return Err(ConnectionError::SetupTokenRefused(reason));
            }
            other => other?,
        };
        self.save_credentials(user_id, provider_slug, alias.as_deref(), credentials)
            .await
    }

    /// Renews a setup-token connection with a new token: the same connection (id, accounts,
    /// records) gets the new credentials and is `active` again.
    pub(crate) async fn renew_with_setup_token(
        &self,
        connection: &ConnectionRecord,
        setup_token: &str,
    ) -> Result<ConnectionRecord, ConnectionError> {
        if connection.status == ConnectionStatus::Disconnected {
            return Err(ConnectionError::NeedsReauthentication(connection.status));
        }
        let (renewed, _created) = self
            .connect_with_setup_token(
                connection.user_id,
                &connection.provider_slug,
                connection.alias.clone(),
                setup_token,
            )
            .await?;
        Ok(renewed)
    }

    /// Stores credentials on the user's connection with this slug and alias, created or
    /// renewed, with its `connection.created` event.
    async fn save_credentials(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<&str>,
        credentials: ProviderCredentials,
    ) -> Result<(ConnectionRecord, bool), ConnectionError> {
        let at = now();
        let keyring = self.config.keyring().clone();
        let encrypt = move |connection_id: Uuid| {
            encrypt_credentials(&keyring, connection_id, &credentials)
                .map_err(|error| StoreError::Other(format!("credential encryption: {error}")))
        };
        let mut raised = Vec::new();
        let raise = connection_created_events(at);
        let (connection, created) = self
            .store
            .save_authorized_connection(
                user_id,
                provider_slug,
                alias,
                Uuid::now_v7(),
                &encrypt,
                at,
                &raise,
                &mut raised,
            )
            .await?;
        // Reported as `ProviderConnected`, from its `connection.created` event.
        self.events.committed(&raised);
        Ok((connection, created))
    }

    /// Starts connecting: stores the state (as its digest, with the PKCE verifier encrypted)
    /// and returns the provider's authorization address. `institution_id` is the institution
    /// the user chose, `reauthorizing` the credentials of the connection being renewed.
    pub(crate) async fn start_authorization(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<String>,
        redirect_uri: String,
        institution_id: Option<&str>,
        reauthorizing: Option<&ProviderCredentials>,
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
        let authorization_url = provider
            .begin_authorization(
                &AuthorizationRequest::new(&state, &redirect_uri)
                    .with_pkce_challenge(challenge.as_deref())
                    .with_institution(institution_id)
                    .with_reauthorizing(reauthorizing),
            )
            .await?;
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

    /// Starts authorizing an existing connection again: a state for the connection's provider
    /// and alias, so the callback finds this very connection (the live one of that provider
    /// and alias; see [`complete_authorization`](Self::complete_authorization)) and renews its
    /// credentials in place (same id, accounts and records; status back to `active`).
    /// A disconnected connection cannot be renewed: connect again.
    pub(crate) async fn start_reauthorization(
        &self,
        connection: &ConnectionRecord,
        redirect_uri: String,
    ) -> Result<Authorization, ConnectionError> {
        if connection.status == ConnectionStatus::Disconnected {
            return Err(ConnectionError::NeedsReauthentication(connection.status));
        }
        // An expired connection keeps its credentials; the provider may need them again.
        let held = self.decrypt_tokens(connection).ok();
        self.start_authorization(
            connection.user_id,
            &connection.provider_slug,
            connection.alias.clone(),
            redirect_uri,
            None,
            held.as_ref().map(|held| &held.credentials),
        )
        .await
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
        let stored = self.take_state(state, caller).await?;
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
        let credentials = provider
            .exchange_code(code, &stored.redirect_uri, verifier.as_deref())
            .await?;
        // Fail before writing anything when no key can encrypt.
        encrypt_probe(self.config.keyring())?;
        self.save_credentials(
            stored.user_id,
            &stored.provider_slug,
            stored.alias.as_deref(),
            credentials,
        )
        .await
    }

    /// Consumes a callback's state (a live one, of the caller's user when a caller is known).
    async fn take_state(
        &self,
        state: &str,
        caller: Option<Uuid>,
    ) -> Result<crate::store::OAuthStateRecord, ConnectionError> {
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
        Ok(stored)
    }

    /// A callback that brought the provider's error (the user refused at the provider)
    /// instead of a code: the state is consumed, nothing is created or changed, and the answer
    /// names the provider's error. An invalid state is answered as such first.
    pub(crate) async fn refuse_authorization(
        &self,
        state: &str,
        caller: Option<Uuid>,
        error: &str,
        description: Option<&str>,
    ) -> ConnectionError {
        match self.take_state(state, caller).await {
            Ok(stored) => {
                tracing::info!(
                    user_id = %stored.user_id,
                    provider = %stored.provider_slug,
                    error,
                    "an authorization was not granted at the provider"
                );
                ConnectionError::RefusedAtProvider {
                    error: error.to_owned(),
                    description: description.map(str::to_owned),
                }
            }
            Err(error) => error,
        }
    }

    /// The connection's credentials, renewed first when they are due within a minute. A
    /// consent that ended makes the connection `expired` (with `connection.expired`).
    pub(super) async fn usable_tokens(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
    ) -> Result<HeldCredentials, ConnectionError> {
        let held = self.decrypt_tokens(connection)?;
        if held
            .credentials
            .consent_expires_at
            .is_some_and(|end| end <= now())
        {
            return self
                .expire_for(connection, &held, consent_expired_events)
                .await;
        }
        let due = dates::later(now(), EXPIRY_SLACK);
        if held.credentials.renew_at.is_some_and(|at| at <= due) {
            self.refresh_with(connection, provider, &held).await
        } else {
            Ok(held)
        }
    }

    fn decrypt_tokens(
        &self,
        connection: &ConnectionRecord,
    ) -> Result<HeldCredentials, ConnectionError> {
        let (Some(sealed), Some(key_id)) = (
            connection.encrypted_credentials.as_deref(),
            connection.credentials_key_id.as_deref(),
        ) else {
            return Err(ConnectionError::NeedsReauthentication(connection.status));
        };
        let credentials = open_credentials(self.config.keyring(), connection.id, key_id, sealed)?;
        Ok(HeldCredentials {
            credentials,
            sealed: sealed.to_vec(),
        })
    }

    /// The connection as stored now, with its tokens; an error when it can no longer be used
    /// (disconnected, expired, gone).
    async fn stored_tokens(&self, connection_id: Uuid) -> Result<HeldCredentials, ConnectionError> {
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
        seen: &HeldCredentials,
    ) -> Result<HeldCredentials, ConnectionError> {
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
        match provider.renew_credentials(&stored.credentials).await {
            Ok(fresh) => {
                let credentials =
                    encrypt_credentials(self.config.keyring(), connection.id, &fresh)?;
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
                Ok(HeldCredentials {
                    credentials: fresh,
                    sealed: credentials.ciphertext,
                })
            }
            // Nothing can renew them: the user must authorize again.
            Err(ProviderError::Unsupported(_)) => self.expire(connection, &stored).await,
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
        stale: &HeldCredentials,
    ) -> Result<Option<HeldCredentials>, ConnectionError> {
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
        stored: &HeldCredentials,
    ) -> Result<HeldCredentials, ConnectionError> {
        self.expire_for(connection, stored, connection_expired_events)
            .await
    }

    /// [`expire`](Self::expire) with the events `events` makes.
    async fn expire_for(
        &self,
        connection: &ConnectionRecord,
        stored: &HeldCredentials,
        events: fn(&ConnectionRecord, DateTime<Utc>) -> Vec<Event>,
    ) -> Result<HeldCredentials, ConnectionError> {
        let mut raised = Vec::new();
        let at = now();
        let expired = self
            .store
            .expire_connection_credentials(
                connection.id,
                &stored.sealed,
                at,
                &events(connection, at),
                &mut raised,
            )
            .await?;
        // An expiry is reported as a failed `ProviderTokensRefreshed`, from its event.
        self.events.committed(&raised);
        if !expired {
            return self.replaced_since(connection.id, stored).await;
        }
        Err(ConnectionError::NeedsReauthentication(
            ConnectionStatus::Expired,
        ))
    }

    /// The stored tokens after a conditional write found the credentials changed: the new
    /// ones when the connection is still usable, else why not.
    async fn replaced_since(
        &self,
        connection_id: Uuid,
        stale: &HeldCredentials,
    ) -> Result<HeldCredentials, ConnectionError> {
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
        if provider.connect_method() != ConnectMethod::OAuth {
            return Err(ConnectionError::NotRefreshable);
        }
        let Some(renew_at) = held.credentials.renew_at else {
            // Credentials that never need renewing have nothing to refresh.
            return Err(ConnectionError::NotRefreshable);
        };
        let margin = seconds(self.config.token_refresh_margin());
        if !force && renew_at > dates::later(now(), margin) {
            return Ok(TokenRefresh {
                refreshed: false,
                expires_at: renew_at,
            });
        }
        let fresh = self.refresh_with(connection, &provider, &held).await?;
        Ok(TokenRefresh {
            refreshed: true,
            // Renewed credentials that no longer need renewing: a far horizon would mislead.
            expires_at: fresh.credentials.renew_at.unwrap_or(renew_at),
        })
    }

    /// Calls the provider with the credentials; when it refuses them, renews them once and
    /// tries again.
    pub(super) async fn call<T, F, Fut>(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldCredentials,
        request: F,
    ) -> Result<T, ConnectionError>
    where
        F: Fn(ProviderCredentials) -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        match request(tokens.credentials.clone()).await {
            Err(ProviderError::InvalidGrant(_) | ProviderError::Unauthorized)
                if provider.connect_method() != ConnectMethod::OAuth =>
            {
                // A secret that cannot be refreshed was revoked: the user must connect again.
                self.expire_for(connection, tokens, access_revoked_events)
                    .await?;
                Err(ConnectionError::NeedsReauthentication(
                    ConnectionStatus::Expired,
                ))
            }
            Err(ProviderError::Unauthorized) => {
                *tokens = self.refresh_with(connection, provider, tokens).await?;
                Ok(request(tokens.credentials.clone()).await?)
            }
            other => Ok(other?),
        }
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
}

fn encrypt_credentials(
    keyring: &crate::crypto::Keyring,
    connection_id: Uuid,
    credentials: &ProviderCredentials,
) -> Result<EncryptedCredentials, CryptoError> {
    let plain = serde_json::to_vec(credentials).map_err(|_| CryptoError::Damaged)?;
    let (key_id, ciphertext) = keyring.encrypt(&plain, connection_id.as_bytes())?;
    Ok(EncryptedCredentials {
        ciphertext,
        key_id,
        renew_at: credentials.renew_at.map(crate::dates::truncate_to_micros),
    })
}

/// Fails when no key is configured, before a callback writes anything.
fn encrypt_probe(keyring: &crate::crypto::Keyring) -> Result<(), CryptoError> {
    keyring.encrypt(b"", b"").map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Credentials as the release before opaque secrets encrypted them.
    fn sealed_legacy(
        keyring: &crate::crypto::Keyring,
        connection_id: Uuid,
        legacy: &serde_json::Value,
    ) -> (String, Vec<u8>) {
        let plain = serde_json::to_vec(legacy).expect("JSON");
        keyring
            .encrypt(&plain, connection_id.as_bytes())
            .expect("encrypted")
    }

    fn keyring() -> crate::crypto::Keyring {
        crate::crypto::Keyring::new(vec![("k1".to_owned(), vec![7; 32])]).expect("a keyring")
    }

    #[test]
    fn token_pairs_stored_by_earlier_releases_still_open() {
        let keyring = keyring();
        let id = Uuid::now_v7();
        let legacy = serde_json::json!({
            "access_token": "old-access",
            "refresh_token": "old-refresh",
            "expires_at": "2026-03-01T12:00:00Z",
            "scope": "api",
            "consent_expires_at": "2026-09-01T00:00:00Z",
        });
        let (key_id, sealed) = sealed_legacy(&keyring, id, &legacy);
        let credentials = open_credentials(&keyring, id, &key_id, &sealed).expect("opens");
        assert_eq!(
            credentials.renew_at,
            Some("2026-03-01T12:00:00Z".parse().expect("an instant"))
        );
        assert_eq!(
            credentials.consent_expires_at,
            Some("2026-09-01T00:00:00Z".parse().expect("an instant"))
        );
        assert_eq!(
            credentials.secret.as_json(),
            &serde_json::json!({
                "access_token": "old-access",
                "refresh_token": "old-refresh",
                "scope": "api",
            })
        );
        assert!(!format!("{credentials:?}").contains("old-"));

        // The oldest shape: no consent end, no refresh token, no scope.
        let oldest = serde_json::json!({
            "access_token": "https://u:p@bridge.example/simplefin",
            "refresh_token": null,
            "expires_at": "2126-01-01T00:00:00Z",
            "scope": null,
        });
        let (key_id, sealed) = sealed_legacy(&keyring, id, &oldest);
        let credentials = open_credentials(&keyring, id, &key_id, &sealed).expect("opens");
        assert_eq!(credentials.consent_expires_at, None);
        assert_eq!(
            credentials.secret.as_json(),
            &serde_json::json!({"access_token": "https://u:p@bridge.example/simplefin"})
        );

        // Bound to its connection, as before.
        assert!(open_credentials(&keyring, Uuid::now_v7(), &key_id, &sealed).is_err());
    }

    #[test]
    fn credentials_round_trip_and_other_json_is_damaged() {
        let keyring = keyring();
        let id = Uuid::now_v7();
        let credentials = ProviderCredentials {
            secret: ProviderSecret::from_json(serde_json::json!({"session": "s-1", "n": [1]})),
            renew_at: None,
            consent_expires_at: Some("2026-09-01T00:00:00Z".parse().expect("an instant")),
        };
        let sealed = encrypt_credentials(&keyring, id, &credentials).expect("encrypted");
        assert_eq!(sealed.renew_at, None);
        let opened =
            open_credentials(&keyring, id, &sealed.key_id, &sealed.ciphertext).expect("opens");
        assert_eq!(opened, credentials);

        let (key_id, junk) = sealed_legacy(&keyring, id, &serde_json::json!({"token": 1}));
        assert!(matches!(
            open_credentials(&keyring, id, &key_id, &junk),
            Err(CryptoError::Damaged)
        ));
    }
}
