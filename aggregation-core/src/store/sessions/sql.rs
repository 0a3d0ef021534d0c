//! Sessions and their refresh tokens.
//!
//! Every writer here takes the session row before its tokens, so that on PostgreSQL a refresh
//! racing a revocation waits for it instead of deadlocking.
//!
//! A revocation hands the sessions it revoked to the caller's rule and writes the events it
//! returns, in its transaction: only the transaction knows which sessions were live (a bulk
//! revocation finds them as it goes).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, QueryBuilder, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::events::sql::insert_events;
use crate::store::{
    NewRefreshToken, NewSession, RefreshTokenRecord, RevokedSessions, SessionRecord, SessionStore,
    StoreError,
};

const SELECT_SESSION: &str = "SELECT id, user_id, device_info, ip_address, location, \
     created_at, last_activity_at, expires_at, revoked_at, revoked_reason FROM sessions";

/// Revokes the user's sessions other than `keep` and their refresh tokens, and writes the
/// events `raise` returns for the live sessions revoked: how many live sessions, and those
/// events.
pub(in crate::store) async fn revoke_user_sessions<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    keep: Uuid,
    reason: &str,
    now: DateTime<Utc>,
    raise: &RaiseEvents<'_, RevokedSessions>,
) -> Result<(u64, Vec<Event>), StoreError> {
    // Sessions before their tokens (see the module documentation). Expired sessions are
    // closed too, so none of them can come back, but only live ones count as revoked.
    let closed: Vec<(Uuid, DateTime<Utc>)> = query_as::<B, _>(
        "UPDATE sessions SET revoked_at = $3, revoked_reason = $4 \
         WHERE user_id = $1 AND id <> $2 AND revoked_at IS NULL RETURNING id, expires_at",
    )
    .bind(user_id)
    .bind(keep)
    .bind(now)
    .bind(reason)
    .fetch_all(&mut **tx)
    .await?;
    query::<B>(
        "UPDATE refresh_tokens SET revoked_at = $3 \
         WHERE revoked_at IS NULL AND user_id = $1 AND session_id <> $2",
    )
    .bind(user_id)
    .bind(keep)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let mut closed: Vec<Uuid> = closed
        .into_iter()
        .filter(|(_, expires_at)| *expires_at > now)
        .map(|(session_id, _)| session_id)
        .collect();
    // RETURNING has no order; events follow the sessions' (time-ordered) ids.
    closed.sort();
    let revoked = closed.len() as u64;
    let events = raise(&RevokedSessions {
        user_id,
        session_ids: closed,
    });
    insert_events(tx, &events).await?;
    Ok((revoked, events))
}

/// Revokes one session of `user_id` and its refresh tokens, with the events `raise` returns
/// for it when it was not revoked already: the events written.
async fn revoke_one_session<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    session_id: Uuid,
    reason: &str,
    now: DateTime<Utc>,
    raise: &RaiseEvents<'_, RevokedSessions>,
) -> Result<Vec<Event>, StoreError> {
    let revoked = query::<B>(
        "UPDATE sessions SET revoked_at = $2, revoked_reason = $3 \
         WHERE id = $1 AND revoked_at IS NULL",
    )
    .bind(session_id)
    .bind(now)
    .bind(reason)
    .execute(&mut **tx)
    .await?;
    query::<B>(
        "UPDATE refresh_tokens SET revoked_at = $2 WHERE session_id = $1 AND revoked_at IS NULL",
    )
    .bind(session_id)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    if revoked.rows_affected() == 0 {
        return Ok(Vec::new());
    }
    let events = raise(&RevokedSessions {
        user_id,
        session_ids: vec![session_id],
    });
    insert_events(tx, &events).await?;
    Ok(events)
}

async fn insert_refresh_token<B: Backend>(
    tx: &mut Tx<B>,
    token: &NewRefreshToken,
) -> Result<(), StoreError> {
    query::<B>(
        "INSERT INTO refresh_tokens (digest, session_id, user_id, token_version, \
         issued_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(token.digest.as_slice())
    .bind(token.session_id)
    .bind(token.user_id)
    .bind(token.token_version)
    .bind(token.issued_at)
    .bind(token.expires_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[async_trait]
impl<B: Backend> SessionStore for SqlStore<B> {
    async fn create_session(
        &self,
        session: &NewSession,
        token: &NewRefreshToken,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        query::<B>(
            "INSERT INTO sessions (id, user_id, device_info, ip_address, user_agent, \
             created_at, last_activity_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $6, $7)",
        )
        .bind(session.id)
        .bind(session.user_id)
        .bind(session.device_info.as_deref())
        .bind(session.ip_address.as_deref())
        .bind(session.user_agent.as_deref())
        .bind(session.created_at)
        .bind(session.expires_at)
        .execute(&mut *tx)
        .await?;
        insert_refresh_token(&mut tx, token).await?;
        Ok(tx.commit().await?)
    }

    async fn refresh_token(&self, digest: &[u8]) -> Result<Option<RefreshTokenRecord>, StoreError> {
        Ok(query_as::<B, _>(
            "SELECT t.session_id, t.user_id, t.token_version, t.expires_at, \
             t.rotated_at, t.revoked_at, s.revoked_at AS session_revoked_at, \
             s.created_at AS session_created_at \
             FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id \
             WHERE t.digest = $1",
        )
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn rotate_refresh_token(
        &self,
        old_digest: &[u8],
        new_token: &NewRefreshToken,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // The session row first, then its tokens: the order revocations take too, so a logout
        // racing this refresh on PostgreSQL waits for it instead of deadlocking. Nothing is
        // kept unless the token rotates below.
        let live_session = query::<B>(
            "UPDATE sessions SET last_activity_at = $2, expires_at = $3 \
             WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(new_token.session_id)
        .bind(now)
        .bind(new_token.expires_at)
        .execute(&mut *tx)
        .await?;
        if live_session.rows_affected() != 1 {
            return Ok(false);
        }
        let rotated = query::<B>(
            "UPDATE refresh_tokens SET rotated_at = $2 \
             WHERE digest = $1 AND rotated_at IS NULL AND revoked_at IS NULL \
             AND expires_at > $2 AND session_id = $3",
        )
        .bind(old_digest)
        .bind(now)
        .bind(new_token.session_id)
        .execute(&mut *tx)
        .await?;
        if rotated.rows_affected() != 1 {
            return Ok(false);
        }
        insert_refresh_token(&mut tx, new_token).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn revoke_session(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let revoked_at: Option<Option<DateTime<Utc>>> =
            query_scalar::<B, _>("SELECT revoked_at FROM sessions WHERE id = $1 AND user_id = $2")
                .bind(session_id)
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await?;
        match revoked_at {
            None => return Ok(false),
            Some(Some(_)) => return Ok(true),
            Some(None) => {}
        }
        let events = revoke_one_session(&mut tx, user_id, session_id, reason, now, raise).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(true)
    }

    async fn revoke_session_by_token(
        &self,
        user_id: Uuid,
        digest: &[u8],
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let session_id: Option<Uuid> = query_scalar::<B, _>(
            "SELECT session_id FROM refresh_tokens WHERE digest = $1 AND user_id = $2",
        )
        .bind(digest)
        .bind(user_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(session_id) = session_id else {
            return Ok(false);
        };
        let events = revoke_one_session(&mut tx, user_id, session_id, reason, now, raise).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(true)
    }

    async fn revoke_user_sessions(
        &self,
        user_id: Uuid,
        keep: Option<Uuid>,
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let keep = keep.unwrap_or_else(Uuid::nil);
        let (revoked, events) =
            revoke_user_sessions(&mut tx, user_id, keep, reason, now, raise).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(revoked)
    }

    async fn sessions_for_user(
        &self,
        user_id: Uuid,
        active_only: bool,
        now: DateTime<Utc>,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        let mut query = QueryBuilder::<B>::new(SELECT_SESSION);
        query.push(" WHERE user_id = ").push_bind(user_id);
        if active_only {
            query
                .push(" AND revoked_at IS NULL AND expires_at > ")
                .push_bind(now);
        }
        query.push(" ORDER BY created_at DESC, id DESC");
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn session_for_user(
        &self,
        user_id: Uuid,
        session_id: Uuid,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let sql = format!("{SELECT_SESSION} WHERE id = $1 AND user_id = $2");
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(session_id)
            .bind(user_id)
            .fetch_optional(&self.pool)
            .await?)
    }
}
