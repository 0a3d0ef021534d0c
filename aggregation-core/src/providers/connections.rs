//! The life of a provider connection: listing, renaming and disconnecting here; the connect
//! flows (OAuth, setup tokens) in `connect`; the encrypted credentials with their renewal,
//! expiry and the provider calls that use them in `credentials`. The syncs that use those
//! credentials are in [`super::sync`].
//!
//! Shared by the HTTP handlers and the background jobs, so both follow the same rules: tokens
//! are decrypted only in memory, refreshed shortly before they expire, and a refused refresh
//! marks the connection `expired`.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::flights::RefreshFlights;
use super::{ConnectMethod, Institution, Provider, ProviderError, Providers};
use crate::config::Config;
use crate::crypto::CryptoError;
use crate::dates;
use crate::events::{ConnectionDeleted, DomainEvent, DurableEvent, Event, Events};
use crate::store::{
    ConnectionRecord, ConnectionStatus, FILE_IMPORT_PROVIDER, Store, StoreError, now,
};

mod connect;
mod webhooks;

pub(crate) use connect::Authorization;
mod credentials;

#[cfg(test)]
pub(crate) use connect::connection_created_events;
pub(super) use credentials::HeldCredentials;
#[cfg(test)]
pub(crate) use credentials::{connection_expired_events, open_credentials};

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
    #[error("The public token was refused: {0}")]
    PublicTokenRefused(String),
    #[error("The callback needs a {0} for this provider.")]
    MissingGrant(&'static str),
    #[error("The webhook could not be verified as the provider's.")]
    WebhookRejected,
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
    /// Connections whose webhook-asked sync runs, and whether another is queued after it.
    webhook_syncs: webhooks::QueuedSyncs,
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
            webhook_syncs: webhooks::QueuedSyncs::default(),
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
}
