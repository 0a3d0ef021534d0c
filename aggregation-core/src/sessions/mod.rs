//! A user's sessions: listing them, reading one, revoking one, and revoking all but the
//! current one (reported as [`DomainEvent::SessionsRevoked`]).
//!
//! Sessions are created by login and ended by logout, refresh-token reuse and password reset
//! (see [`crate::auth`]); this module holds what their owner does with them directly.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{DomainEvent, Event, Events, SessionRevoked};
use crate::store::{RevokedSessions, SessionRecord, Store, StoreError, now};

/// The revocation reason recorded when the owner gives none for one session.
const DEFAULT_REVOKE_REASON: &str = "manual";
/// The revocation reason recorded when the owner gives none for all other sessions.
const DEFAULT_REVOKE_ALL_REASON: &str = "logout_all";

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// No session of the user has this id.
    #[error("Session not found.")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The sessions of a user, as listed.
pub(crate) struct SessionListing {
    /// The listed sessions.
    pub(crate) sessions: Vec<SessionRecord>,
    /// How many of them are neither revoked nor expired.
    pub(crate) active_count: usize,
}

/// Whether a session can still be used at `at`.
fn is_active(session: &SessionRecord, at: DateTime<Utc>) -> bool {
    session.revoked_at.is_none() && session.expires_at > at
}

/// The rule of every session revocation: one `session.revoked` event (with `reason`) per
/// live session revoked, in id order.
pub(crate) fn revocation_events(
    reason: &str,
    at: DateTime<Utc>,
) -> impl Fn(&RevokedSessions) -> Vec<Event> + Send + Sync + '_ {
    move |revoked| SessionRevoked::each(revoked.user_id, &revoked.session_ids, reason, at)
}

impl dyn Store {
    /// Revokes every session of the user except `keep`, with their tokens, and writes a
    /// `session.revoked` event for each live one, atomically: those events (one per live
    /// session revoked). [`SessionStore::revoke_user_sessions`](crate::store::SessionStore::revoke_user_sessions)
    /// with the service's rule, for callers outside the service (tests, tools).
    pub async fn revoke_all_sessions(
        &self,
        user_id: Uuid,
        keep: Option<Uuid>,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<Event>, StoreError> {
        let mut raised = Vec::new();
        self.revoke_user_sessions(
            user_id,
            keep,
            reason,
            now,
            &revocation_events(reason, now),
            &mut raised,
        )
        .await?;
        Ok(raised)
    }
}

/// The session use cases over a store.
#[derive(Clone)]
pub(crate) struct Sessions {
    store: Arc<dyn Store>,
    events: Events,
}

impl Sessions {
    pub(crate) fn new(store: Arc<dyn Store>, events: Events) -> Self {
        Self { store, events }
    }

    /// The user's sessions (only the usable ones with `active_only`).
    pub(crate) async fn list(
        &self,
        user_id: Uuid,
        active_only: bool,
    ) -> Result<SessionListing, SessionError> {
        let at = now();
        let sessions = self
            .store
            .sessions_for_user(user_id, active_only, at)
            .await?;
        let active_count = sessions
            .iter()
            .filter(|session| is_active(session, at))
            .count();
        Ok(SessionListing {
            sessions,
            active_count,
        })
    }

    /// One of the user's sessions.
    pub(crate) async fn get(
        &self,
        user_id: Uuid,
        session_id: Uuid,
    ) -> Result<SessionRecord, SessionError> {
        self.store
            .session_for_user(user_id, session_id)
            .await?
            .ok_or(SessionError::NotFound)
    }

    /// Revokes one of the user's sessions (`reason` defaults to `manual`); revoking one
    /// already revoked is no error.
    pub(crate) async fn revoke(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        reason: Option<&str>,
    ) -> Result<(), SessionError> {
        let (reason, at) = (reason.unwrap_or(DEFAULT_REVOKE_REASON), now());
        let mut revoked = Vec::new();
        let found = self
            .store
            .revoke_session(
                user_id,
                session_id,
                reason,
                at,
                &revocation_events(reason, at),
                &mut revoked,
            )
            .await?;
        if !found {
            return Err(SessionError::NotFound);
        }
        self.events.committed(&revoked);
        Ok(())
    }

    /// Revokes every session of the user but `current` (`reason` defaults to `logout_all`);
    /// how many were revoked.
    pub(crate) async fn revoke_all_but_current(
        &self,
        user_id: Uuid,
        current: Uuid,
        reason: Option<&str>,
    ) -> Result<u64, SessionError> {
        let (reason, at) = (reason.unwrap_or(DEFAULT_REVOKE_ALL_REASON), now());
        let mut revoked = Vec::new();
        let count = self
            .store
            .revoke_user_sessions(
                user_id,
                Some(current),
                reason,
                at,
                &revocation_events(reason, at),
                &mut revoked,
            )
            .await?;
        self.events.committed(&revoked);
        self.events
            .emit(&DomainEvent::SessionsRevoked { user_id, count });
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn session(revoked: bool, expires_in_secs: i64) -> SessionRecord {
        let at = Utc::now();
        SessionRecord {
            id: Uuid::now_v7(),
            user_id: Uuid::nil(),
            device_info: None,
            ip_address: None,
            location: None,
            created_at: at,
            last_activity_at: at,
            expires_at: at + TimeDelta::seconds(expires_in_secs),
            revoked_at: revoked.then_some(at),
            revoked_reason: None,
        }
    }

    /// A revocation's event is in the store and reaches the bus once committed.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn revocations_publish_their_stored_events() {
        use crate::store::{NewRefreshToken, NewSession, NewUser, SqliteStore};

        let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().await.unwrap());
        let bus = crate::events::EventBus::default();
        let sessions = Sessions::new(
            store.clone(),
            Events::new(Arc::new(crate::events::MemoryEventSink::new()), bus.clone()),
        );
        let user_id = Uuid::now_v7();
        let at = now();
        store
            .create_user(&NewUser {
                id: user_id,
                email: "ada@example.com".to_owned(),
                email_normalized: "ada@example.com".to_owned(),
                password_hash: "x".to_owned(),
                created_at: at,
            })
            .await
            .unwrap();
        let session_id = Uuid::now_v7();
        let expires_at = at + TimeDelta::hours(1);
        store
            .create_session(
                &NewSession {
                    id: session_id,
                    user_id,
                    device_info: None,
                    ip_address: None,
                    user_agent: None,
                    created_at: at,
                    expires_at,
                },
                &NewRefreshToken {
                    digest: vec![1],
                    session_id,
                    user_id,
                    token_version: 0,
                    issued_at: at,
                    expires_at,
                },
            )
            .await
            .unwrap();
        let mut published = bus.subscribe();
        sessions
            .revoke(user_id, session_id, Some("lost phone"))
            .await
            .unwrap();
        let event = published.try_recv().unwrap();
        let stored = store.user_events_after(user_id, None, 10).await.unwrap();
        assert_eq!(stored, [(*event).clone()]);
        assert_eq!(event.data["reason"], "lost phone");
        // Revoking it again changes nothing and publishes nothing.
        sessions.revoke(user_id, session_id, None).await.unwrap();
        assert!(published.try_recv().is_err());
    }

    #[test]
    fn revoked_and_expired_sessions_are_not_active() {
        let at = Utc::now();
        assert!(is_active(&session(false, 60), at));
        assert!(!is_active(&session(true, 60), at));
        assert!(!is_active(&session(false, -1), at));
    }
}
