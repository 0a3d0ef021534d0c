//! The connect flows: OAuth 2.0 (the authorization address with PKCE, the callback, a
//! refusal at the provider, reauthorization) and setup tokens (connect and renew), each ending
//! with the credentials saved encrypted and `connection.created`.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::credentials::{encrypt_credentials, encrypt_probe};
use super::{ConnectionError, Connections, seconds};
use crate::crypto::{new_pkce_pair, random_urlsafe_token, token_digest};
use crate::dates;
use crate::events::{ConnectionCreated, DurableEvent, Event};
use crate::providers::{
    AuthorizationRequest, ConnectMethod, Provider, ProviderCredentials, ProviderError,
};
use crate::store::{
    ConnectionRecord, ConnectionStatus, FILE_IMPORT_PROVIDER, NewOAuthState, OAuthStateRecord,
    StoreError, now,
};

/// The address a user is sent to, and the state that comes back.
pub(crate) struct Authorization {
    pub(crate) authorization_url: String,
    pub(crate) state: String,
    pub(crate) expires_in: u64,
}

/// A reauthorization being started: the connection it renews and its stored credentials
/// (when they can be read; the provider may need them, as Plaid's update mode does).
struct Renewal<'a> {
    connection_id: Uuid,
    credentials: Option<&'a ProviderCredentials>,
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

impl Connections {
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
            ConnectMethod::SetupToken | ConnectMethod::Link => Ok(provider.clone()),
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
        match provider.connect_method() {
            ConnectMethod::SetupToken => {
                return Err(ConnectionError::NeedsSetupToken(slug.to_owned()));
            }
            // A link provider starts and finishes through the same states and callback.
            ConnectMethod::Link => return Ok(provider.clone()),
            _ => {}
        }
        if !provider.supports_oauth() {
            return Err(ConnectionError::NoOAuth(slug.to_owned()));
        }
        Ok(provider.clone())
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
        let webhook_key = self.webhook_key_of(provider_slug, &credentials);
        let encrypt = self.encrypter(credentials);
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
        self.authorized(&connection, &raised, webhook_key).await?;
        Ok((connection, created))
    }

    /// Renews the credentials of exactly this connection of the user (the one a
    /// reauthorization was started for), with its `connection.created` event (`reauthorized`).
    /// A connection disconnected since cannot be renewed: connect again.
    async fn renew_credentials(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        provider_slug: &str,
        credentials: ProviderCredentials,
    ) -> Result<ConnectionRecord, ConnectionError> {
        let at = now();
        let webhook_key = self.webhook_key_of(provider_slug, &credentials);
        let encrypt = self.encrypter(credentials);
        let mut raised = Vec::new();
        let raise = connection_created_events(at);
        let connection = self
            .store
            .renew_authorized_connection(user_id, connection_id, &encrypt, at, &raise, &mut raised)
            .await?
            .ok_or(ConnectionError::NeedsReauthentication(
                ConnectionStatus::Disconnected,
            ))?;
        self.authorized(&connection, &raised, webhook_key).await?;
        Ok(connection)
    }

    /// Stores the credentials a callback brought: on the connection its reauthorization was
    /// started for, else on the user's connection with the state's slug and alias (created
    /// or renewed). The connection, and whether it was created.
    async fn save_for_state(
        &self,
        stored: &OAuthStateRecord,
        credentials: ProviderCredentials,
    ) -> Result<(ConnectionRecord, bool), ConnectionError> {
        match stored.reauthorizes_connection_id {
            Some(connection_id) => {
                let renewed = self
                    .renew_credentials(
                        stored.user_id,
                        connection_id,
                        &stored.provider_slug,
                        credentials,
                    )
                    .await?;
                Ok((renewed, false))
            }
            None => {
                self.save_credentials(
                    stored.user_id,
                    &stored.provider_slug,
                    stored.alias.as_deref(),
                    credentials,
                )
                .await
            }
        }
    }

    /// What the provider's webhooks will name a connection with these credentials by.
    fn webhook_key_of(
        &self,
        provider_slug: &str,
        credentials: &ProviderCredentials,
    ) -> Option<String> {
        self.providers
            .get(provider_slug)
            .and_then(|provider| provider.webhook_key(credentials))
    }

    /// Encrypts the credentials for the connection id the store gives.
    fn encrypter(
        &self,
        credentials: ProviderCredentials,
    ) -> impl Fn(Uuid) -> Result<crate::store::EncryptedCredentials, StoreError> + Send + Sync + use<>
    {
        let keyring = self.config.keyring().clone();
        move |connection_id: Uuid| {
            encrypt_credentials(&keyring, connection_id, &credentials)
                .map_err(|error| StoreError::Other(format!("credential encryption: {error}")))
        }
    }

    /// After credentials were saved: the committed events published and the webhook key
    /// recorded.
    async fn authorized(
        &self,
        connection: &ConnectionRecord,
        raised: &[crate::events::Event],
        webhook_key: Option<String>,
    ) -> Result<(), ConnectionError> {
        // Reported as `ProviderConnected`, from its `connection.created` event.
        self.events.committed(raised);
        if let Some(key) = webhook_key {
            // Only its digest: what the provider's webhooks find the connection by.
            self.store
                .set_webhook_key(
                    connection.id,
                    &connection.provider_slug,
                    &token_digest(&key),
                )
                .await?;
        }
        Ok(())
    }

    /// Starts connecting: stores the state (as its digest, with the PKCE verifier encrypted)
    /// and returns the provider's authorization address. `institution_id` is the institution
    /// the user chose.
    pub(crate) async fn start_authorization(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<String>,
        redirect_uri: String,
        institution_id: Option<&str>,
    ) -> Result<Authorization, ConnectionError> {
        self.begin(
            user_id,
            provider_slug,
            alias,
            redirect_uri,
            institution_id,
            None,
        )
        .await
    }

    /// [`start_authorization`](Self::start_authorization), of a fresh connect (`renewal`
    /// `None`) or of a reauthorization (the state then names the connection it renews).
    async fn begin(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<String>,
        redirect_uri: String,
        institution_id: Option<&str>,
        renewal: Option<Renewal<'_>>,
    ) -> Result<Authorization, ConnectionError> {
        let reauthorizing = renewal.as_ref().and_then(|renewal| renewal.credentials);
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
                    .with_reauthorizing(reauthorizing)
                    .with_user(Some(user_id)),
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
                reauthorizes_connection_id: renewal.map(|renewal| renewal.connection_id),
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

    /// Starts authorizing an existing connection again: a state that names the connection, so
    /// the callback renews exactly this one's credentials in place (same id, accounts and
    /// records; status back to `active`). A disconnected connection cannot be renewed:
    /// connect again.
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
        self.begin(
            connection.user_id,
            &connection.provider_slug,
            connection.alias.clone(),
            redirect_uri,
            None,
            Some(Renewal {
                connection_id: connection.id,
                credentials: held.as_ref().map(|held| &held.credentials),
            }),
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
        if provider.connect_method() == ConnectMethod::Link {
            return Err(ConnectionError::MissingGrant("public_token"));
        }
        let credentials = provider
            .exchange_code(code, &stored.redirect_uri, verifier.as_deref())
            .await?;
        // Fail before writing anything when no key can encrypt.
        encrypt_probe(self.config.keyring())?;
        self.save_for_state(&stored, credentials).await
    }

    /// Finishes connecting a [`ConnectMethod::Link`] provider: consumes the state, exchanges
    /// the `public_token` its widget gave and stores the connection with its encrypted
    /// credentials. Without a `public_token` (the widget ran in update mode for a
    /// reauthorization) the connection the reauthorization was started for keeps its stored
    /// credentials and is `active` again; a state of a fresh connect needs the token.
    pub(crate) async fn complete_link(
        &self,
        public_token: Option<&str>,
        state: &str,
        caller: Option<Uuid>,
    ) -> Result<(ConnectionRecord, bool), ConnectionError> {
        let stored = self.take_state(state, caller).await?;
        let provider = self.oauth_provider(&stored.provider_slug)?;
        if provider.connect_method() != ConnectMethod::Link {
            return Err(ConnectionError::MissingGrant("code"));
        }
        let credentials = match public_token {
            Some(public_token) => {
                // Fail before the exchange (which spends the token) when no key can encrypt.
                encrypt_probe(self.config.keyring())?;
                match provider.exchange_public_token(public_token).await {
                    Err(ProviderError::InvalidGrant(reason)) => {
                        return Err(ConnectionError::PublicTokenRefused(reason));
                    }
                    other => other?,
                }
            }
            None => {
                // Only a reauthorization finishes without one: a fresh connect's state must
                // not bring back (and reactivate) a connection Link never saw.
                let connection_id = stored
                    .reauthorizes_connection_id
                    .ok_or(ConnectionError::MissingGrant("public_token"))?;
                let renewed = self
                    .store
                    .connection_by_id(connection_id)
                    .await?
                    .filter(|connection| {
                        connection.user_id == stored.user_id
                            && connection.status != ConnectionStatus::Disconnected
                    })
                    .ok_or(ConnectionError::NeedsReauthentication(
                        ConnectionStatus::Disconnected,
                    ))?;
                self.decrypt_tokens(&renewed)?.credentials
            }
        };
        self.save_for_state(&stored, credentials).await
    }

    /// Consumes a callback's state (a live one, of the caller's user when a caller is known).
    async fn take_state(
        &self,
        state: &str,
        caller: Option<Uuid>,
    ) -> Result<OAuthStateRecord, ConnectionError> {
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
}
