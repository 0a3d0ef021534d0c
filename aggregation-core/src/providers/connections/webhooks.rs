//! Inbound provider webhooks (`POST /api/v1/provider-webhooks/{slug}`): the provider verifies
//! the request ([`Provider::verify_webhook`](crate::providers::Provider::verify_webhook)), the
//! connection is found by the digest of its webhook key, and what the webhook asks for runs
//! in the background (the answer does not wait for it): a sync (at most one queued per
//! connection), an expiry, a `connection.expiring` event, a revocation (`connection.revoked`).
//! Each status change is written with its event (and so its audit entry) in one transaction,
//! and none moves a disconnected connection.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use super::credentials::login_required_events;
use super::{ConnectionError, Connections};
use crate::crypto::token_digest;
use crate::events::{ConnectionExpiring, ConnectionRevoked, DurableEvent};
use crate::providers::{ProviderWebhook, WebhookRequest};
use crate::store::{ConnectionRecord, ConnectionStatus, SnapshotSource, now};

/// Per connection whose webhook-asked sync runs: whether one more is queued after it.
#[derive(Clone, Default)]
pub(super) struct QueuedSyncs(Arc<Mutex<HashMap<Uuid, bool>>>);

impl QueuedSyncs {
    /// Marks a sync of the connection wanted: `true` when none runs (the caller starts
    /// one), `false` when one runs (one more is queued after it, at most one).
    fn want(&self, connection_id: Uuid) -> bool {
        let Ok(mut running) = self.0.lock() else {
            return false;
        };
        match running.get_mut(&connection_id) {
            Some(again) => {
                *again = true;
                false
            }
            None => {
                running.insert(connection_id, false);
                true
            }
        }
    }

    /// After a sync of the connection: `true` when another was queued meanwhile (run it),
    /// else the connection is forgotten.
    fn again(&self, connection_id: Uuid) -> bool {
        let Ok(mut running) = self.0.lock() else {
            return false;
        };
        match running.get_mut(&connection_id) {
            Some(again) if *again => {
                *again = false;
                true
            }
            _ => {
                running.remove(&connection_id);
                false
            }
        }
    }
}

impl Connections {
    /// Receives a provider webhook: 404 ([`ConnectionError::UnknownProvider`]) for a slug
    /// that takes none, [`ConnectionError::WebhookRejected`] (401) when the provider does not
    /// verify it; otherwise what it asks for is started in the background and `Ok` answered.
    pub(crate) async fn receive_webhook(
        &self,
        slug: &str,
        headers: &BTreeMap<String, String>,
        body: &[u8],
    ) -> Result<(), ConnectionError> {
        let provider = self
            .providers
            .get(slug)
            .filter(|provider| provider.receives_webhooks())
            .cloned()
            .ok_or_else(|| ConnectionError::UnknownProvider(slug.to_owned()))?;
        let asked = match provider
            .verify_webhook(&WebhookRequest::new(headers, body))
            .await
        {
            Ok(asked) => asked,
            Err(error) => {
                tracing::info!(provider = %slug, error = %error, "a provider webhook was refused");
                return Err(ConnectionError::WebhookRejected);
            }
        };
        let key = match &asked {
            ProviderWebhook::Ignored => return Ok(()),
            ProviderWebhook::SyncAvailable { key }
            | ProviderWebhook::LoginRequired { key }
            | ProviderWebhook::Expiring { key, .. }
            | ProviderWebhook::Revoked { key } => key.clone(),
        };
        let this = self.clone();
        let slug = slug.to_owned();
        tokio::spawn(async move {
            let found = this
                .store
                .connection_by_webhook_key(&slug, &token_digest(&key))
                .await;
            match found {
                Ok(Some(connection)) => this.act_on_webhook(connection, asked).await,
                Ok(None) => {
                    tracing::info!(provider = %slug, "a provider webhook names no connection; ignored");
                }
                Err(error) => {
                    tracing::warn!(provider = %slug, error = %error, "a provider webhook's connection could not be read");
                }
            }
        });
        Ok(())
    }

    /// Does what a verified webhook asks of its connection.
    async fn act_on_webhook(&self, connection: ConnectionRecord, asked: ProviderWebhook) {
        let connection_id = connection.id;
        match asked {
            ProviderWebhook::SyncAvailable { .. } => self.queue_sync(connection),
            ProviderWebhook::LoginRequired { .. } => {
                if connection.status != ConnectionStatus::Active {
                    return;
                }
                match self.decrypt_tokens(&connection) {
                    Ok(held) => {
                        // Expired (the error the expiry answers is its success here).
                        let _ = self
                            .expire_for(&connection, &held, login_required_events)
                            .await;
                    }
                    Err(error) => {
                        tracing::warn!(%connection_id, error = %error, "a login-required webhook's connection has unreadable credentials");
                    }
                }
            }
            ProviderWebhook::Expiring { reason, .. } => {
                let expiring = ConnectionExpiring {
                    user_id: connection.user_id,
                    connection_id,
                    provider: connection.provider_slug.clone(),
                    reason,
                };
                let mut raised = Vec::new();
                match self
                    .store
                    .record_events(&[expiring.event_at(now())], &mut raised)
                    .await
                {
                    Ok(()) => self.events.committed(&raised),
                    Err(error) => {
                        tracing::warn!(%connection_id, error = %error, "connection.expiring could not be recorded");
                    }
                }
            }
            ProviderWebhook::Revoked { .. } => {
                let at = now();
                let revoked = ConnectionRevoked {
                    user_id: connection.user_id,
                    connection_id,
                    provider: connection.provider_slug.clone(),
                    reason: "permission_revoked".to_owned(),
                };
                let mut raised = Vec::new();
                // Not a disconnected one (a disconnect is final), nor twice.
                match self
                    .store
                    .revoke_connection(connection_id, at, &[revoked.event_at(at)], &mut raised)
                    .await
                {
                    Ok(_) => self.events.committed(&raised),
                    Err(error) => {
                        tracing::warn!(%connection_id, error = %error, "a revoked connection could not be marked");
                    }
                }
            }
            _ => {}
        }
    }

    /// Syncs the connection in the background: at most one sync runs and one more is queued
    /// per connection, whatever the number of webhooks.
    fn queue_sync(&self, connection: ConnectionRecord) {
        if connection.status != ConnectionStatus::Active || !self.webhook_syncs.want(connection.id)
        {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                // Forced: the provider said there is something new, so the cool-down of an
                // earlier sync does not hold it back.
                if let Err(error) = this
                    .sync_connection(&connection, SnapshotSource::ScheduledSync, None, true)
                    .await
                {
                    tracing::warn!(connection_id = %connection.id, error = %error, "a webhook-asked sync failed");
                }
                if !this.webhook_syncs.again(connection.id) {
                    break;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_one_sync_is_queued_per_connection() {
        let queued = QueuedSyncs::default();
        let id = Uuid::now_v7();
        assert!(queued.want(id));
        assert!(!queued.want(id));
        assert!(!queued.want(id));
        // One more after the running one, however many were asked for.
        assert!(queued.again(id));
        assert!(!queued.again(id));
        assert!(queued.want(id));
    }
}
