//! Users' own data: the profile, the export and the erasure of everything a user owns.
//!
//! An erasure begins in one store transaction ([`UserDataStore::begin_user_erasure`]): the
//! erasure record, the user's token version raised, every session and refresh token revoked,
//! the roles removed, the email freed (so it can register again at once) and the
//! `user.deleted` audit event. From then on this instance refuses the user's access tokens
//! ([`ErasedUsers`]), and every other instance does once the committed event reaches it
//! through the event bus (and its relay, with Redis). Then the erasure is worked through:
//! each provider connection still holding credentials is disconnected (at the provider in
//! the background, as a disconnect does), and the user's rows are deleted in batches of
//! [`ERASURE_BATCH_ROWS`], each its own transaction, under a lease on the erasure record. A
//! crash or a restart leaves the record unfinished; the next run of the `erase_users` job
//! (or any erasure request) resumes it where it stopped. The user's row goes last.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::config::Config;
use crate::dates;
use crate::events::{DurableEvent as _, EventBus, EventType, Events, UserDeleted};
use crate::mail::{Email, MailQueue};
use crate::providers::connections::Connections;
use crate::store::{NewUserErasure, Store, StoreError, UserRecord, now};

/// Rows one erasure batch deletes at most: one short transaction each, so an erasure of a
/// million rows never holds a lock for long and others' writes interleave.
pub(crate) const ERASURE_BATCH_ROWS: u32 = 5_000;

/// Why an erasure could not be asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UserDataError {
    /// No such user, or its erasure has begun already.
    #[error("No such user.")]
    UnknownUser,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The users erased lately, whose access tokens are refused: every token of theirs was
/// issued before the erasure, so an entry is needed only as long as an access token lives.
#[derive(Debug, Clone)]
pub(crate) struct ErasedUsers {
    erased: Arc<Mutex<HashMap<Uuid, Instant>>>,
    /// How long an entry is kept: the access token lifetime and its leeway.
    keep: Duration,
}

impl ErasedUsers {
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            erased: Arc::default(),
            keep: config.access_token_ttl() + Duration::from_secs(60),
        }
    }

    /// Refuses the user's tokens from now on.
    pub(crate) fn mark(&self, user_id: Uuid) {
        let mut erased = self.erased.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = self.keep;
        erased.retain(|_, at| at.elapsed() < keep);
        erased.insert(user_id, Instant::now());
    }

    /// Whether the user's tokens are refused.
    pub(crate) fn contains(&self, user_id: Uuid) -> bool {
        self.erased
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&user_id)
    }

    /// Marks the user of every `user.deleted` event published on `bus` (this instance's and,
    /// with a relay, the others'), until the bus closes. Without a Tokio runtime, nothing.
    pub(crate) fn follow(&self, bus: &EventBus) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut events = bus.subscribe();
        let erased = self.clone();
        runtime.spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => {
                        if let (EventType::UserDeleted, Some(user_id)) =
                            (event.event_type, event.user_id)
                        {
                            erased.mark(user_id);
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(
                            missed,
                            "the erased-users follower lagged behind the event bus"
                        );
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
    }
}

/// What one pass over the pending erasures did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ErasureRun {
    /// Erasures finished.
    pub(crate) finished: u64,
    /// Rows deleted.
    pub(crate) deleted_rows: u64,
}

/// The use case: erasure requests and the work that follows.
#[derive(Clone)]
pub(crate) struct UserData {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    connections: Connections,
    mail: MailQueue,
    events: Events,
    erased: ErasedUsers,
    /// The lease owner of the erasures this instance works through.
    owner: Arc<str>,
}

impl UserData {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        config: Arc<Config>,
        connections: Connections,
        mail: MailQueue,
        events: Events,
        erased: ErasedUsers,
    ) -> Self {
        Self {
            store,
            config,
            connections,
            mail,
            events,
            erased,
            owner: format!("erasure-{}-{}", std::process::id(), Uuid::new_v4().simple()).into(),
        }
    }

    /// The users whose tokens are refused.
    pub(crate) fn erased(&self) -> &ErasedUsers {
        &self.erased
    }

    /// Begins erasing the user (see the [module docs](self)), confirms it by email, and works
    /// it through in the background. `requested_by`: the administrator who asked.
    pub(crate) async fn erase(
        &self,
        user_id: Uuid,
        requested_by: Option<Uuid>,
    ) -> Result<(), UserDataError> {
        let at = now();
        let events = [UserDeleted { user_id }.event_at(at)];
        let erasure = NewUserErasure {
            user_id,
            requested_by,
            requested_at: at,
        };
        let user = self
            .store
            .begin_user_erasure(&erasure, &events)
            .await?
            .ok_or(UserDataError::UnknownUser)?;
        self.erased.mark(user_id);
        self.events.committed(&events);
        self.mail.enqueue(confirmation_email(&user, at));
        tracing::info!(user_id = %user_id, by_admin = requested_by.is_some(), "user erasure begun");
        let worker = self.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = worker.work_through(Some(user_id)).await {
                    // The erasure job resumes it.
                    tracing::warn!(user_id = %user_id, error = %error, "user erasure interrupted");
                }
            });
        }
        Ok(())
    }

    /// Works through the pending erasures (with `only`, that user's alone) until none is left
    /// that this instance can lease.
    pub(crate) async fn work_through(&self, only: Option<Uuid>) -> Result<ErasureRun, StoreError> {
        let mut run = ErasureRun::default();
        loop {
            let at = now();
            let Some(user_id) = self
                .store
                .claim_user_erasure(only, &self.owner, at, self.lease_until(at))
                .await?
            else {
                return Ok(run);
            };
            self.erased.mark(user_id);
            match self.erase_claimed(user_id).await? {
                Some(deleted) => {
                    run.finished += 1;
                    run.deleted_rows += deleted;
                }
                None => {
                    tracing::warn!(user_id = %user_id, "user erasure lease lost; left to its new owner");
                    return Ok(run);
                }
            }
            if only.is_some() {
                return Ok(run);
            }
        }
    }

    fn lease_until(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        dates::later(at, dates::delta(self.config.job_lease_ttl()))
    }

    /// Disconnects the user's connections, deletes every row in batches, then the user: the
    /// rows deleted; `None` when the lease was lost on the way.
    async fn erase_claimed(&self, user_id: Uuid) -> Result<Option<u64>, StoreError> {
        let started = Instant::now();
        for connection in self.store.connections_for_user(user_id, false).await? {
            if connection.encrypted_credentials.is_none() {
                continue;
            }
            // Best effort: the provider call runs in the background, and a connection that
            // cannot be disconnected is deleted all the same.
            if let Err(error) = self.connections.disconnect(user_id, connection.id).await {
                tracing::warn!(
                    user_id = %user_id,
                    connection_id = %connection.id,
                    error = %error,
                    "disconnecting a connection of an erased user failed"
                );
            }
        }
        let mut deleted = 0;
        loop {
            let lease_until = self.lease_until(now());
            match self
                .store
                .erase_user_batch(user_id, &self.owner, ERASURE_BATCH_ROWS, lease_until)
                .await?
            {
                None => return Ok(None),
                Some(0) => break,
                Some(rows) => deleted += rows,
            }
        }
        if !self
            .store
            .finish_user_erasure(user_id, &self.owner, now())
            .await?
        {
            return Ok(None);
        }
        tracing::info!(
            user_id = %user_id,
            deleted_rows = deleted,
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "user erasure finished"
        );
        Ok(Some(deleted))
    }

    /// The user with the roles, for `GET /users/me`; `None` when there is none (erased).
    pub(crate) async fn profile(
        &self,
        user_id: Uuid,
    ) -> Result<Option<(UserRecord, Vec<crate::store::Role>)>, StoreError> {
        let Some(user) = self.store.user_by_id(user_id).await? else {
            return Ok(None);
        };
        if self.store.user_erasure(user_id).await?.is_some() {
            return Ok(None);
        }
        let roles = self.store.user_roles(user_id).await?;
        Ok(Some((user, roles)))
    }
}

/// The email confirming an erasure, sent to the address the account had.
fn confirmation_email(user: &UserRecord, at: DateTime<Utc>) -> Email {
    Email::new(
        user.email.clone(),
        "Your account was deleted",
        format!(
            "Your account and everything it held were deleted at {} (UTC) as asked: \
             sessions, provider connections, accounts, transactions, holdings, balance \
             history, webhooks and events.\n\nProvider connections were disconnected at the \
             providers. You can register again with this email address at any time; the new \
             account starts empty.\n\nIf you did not ask for this, contact support.\n",
            at.format("%Y-%m-%d %H:%M")
        ),
    )
}
