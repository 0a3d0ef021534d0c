//! A connection's provider credentials: decrypted only in memory, renewed shortly before
//! they expire (single-flight per connection in the process, compare-and-swap on the stored
//! ciphertext across instances), marked `expired` when the provider refuses them, and the
//! provider calls that use them, retried once with renewed credentials.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use super::{ConnectionError, Connections, seconds};
use crate::crypto::CryptoError;
use crate::dates;
use crate::events::{ConnectionExpired, DomainEvent, DurableEvent, Event};
use crate::providers::{
    ConnectMethod, Provider, ProviderCredentials, ProviderError, ProviderSecret,
};
use crate::store::{ConnectionRecord, ConnectionStatus, EncryptedCredentials, StoreError, now};

/// Access tokens this close to expiry are refreshed before use.
const EXPIRY_SLACK: TimeDelta = TimeDelta::seconds(60);

/// How long a refresh waits for another refresh of the same connection to finish.
const FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a refused refresh watches the stored credentials for another instance's
/// replacement before it marks the connection `expired` (the time between that instance's
/// provider answer and its store write), and how often it looks.
const REFUSAL_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
const REFUSAL_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The outcome of a token refresh request.
pub(crate) struct TokenRefresh {
    pub(crate) refreshed: bool,
    pub(crate) expires_at: DateTime<Utc>,
}

/// Decrypted provider credentials with the stored ciphertext they came from: the version a
/// renewal compares the stored credentials against.
pub(in crate::providers) struct HeldCredentials {
    pub(super) credentials: ProviderCredentials,
    pub(super) sealed: Vec<u8>,
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

/// The events of the expiry of `connection` because the provider says the user must sign in
/// again (Plaid's `ITEM_LOGIN_REQUIRED` webhook): `connection.expired` (reason
/// `login_required`).
pub(super) fn login_required_events(
    connection: &ConnectionRecord,
    at: DateTime<Utc>,
) -> Vec<Event> {
    expired_events(connection, at, "login_required")
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

impl Connections {
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

    /// The connection's credentials, renewed first when they are due within a minute. A
    /// consent that ended makes the connection `expired` (with `connection.expired`).
    pub(in crate::providers) async fn usable_tokens(
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

    pub(super) fn decrypt_tokens(
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
    pub(super) async fn expire_for(
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
    pub(in crate::providers) async fn call<T, F, Fut>(
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

pub(super) fn encrypt_credentials(
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
pub(super) fn encrypt_probe(keyring: &crate::crypto::Keyring) -> Result<(), CryptoError> {
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
