//! Users, their roles, and single-use email tokens (verification and password reset).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, Executor, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::records::sql::connections::lock_user_in;
use crate::store::sessions::sql::revoke_user_sessions;
use crate::store::{
    NewOneTimeToken, NewUser, OneTimeTokenStore, RevokedSessions, Role, StoreError, TokenCheck,
    TokenPurpose, UserRecord, UserStore,
};

pub(in crate::store) const SELECT_USER: &str = "SELECT id, email, password_hash, email_verified_at, \
     min_token_version, created_at, updated_at FROM users";

#[async_trait]
impl<B: Backend> UserStore for SqlStore<B> {
    async fn create_user(&self, user: &NewUser) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        query::<B>(
            "INSERT INTO users (id, email, email_normalized, password_hash, \
             min_token_version, created_at, updated_at) VALUES ($1, $2, $3, $4, 0, $5, $5)",
        )
        .bind(user.id)
        .bind(&user.email)
        .bind(&user.email_normalized)
        .bind(&user.password_hash)
        .bind(user.created_at)
        .execute(&mut *tx)
        .await?;
        query::<B>("INSERT INTO user_roles (user_id, role, granted_at) VALUES ($1, $2, $3)")
            .bind(user.id)
            .bind(Role::User.as_str())
            .bind(user.created_at)
            .execute(&mut *tx)
            .await?;
        Ok(tx.commit().await?)
    }

    async fn user_by_email(
        &self,
        email_normalized: &str,
    ) -> Result<Option<UserRecord>, StoreError> {
        let sql = format!("{SELECT_USER} WHERE email_normalized = $1");
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(email_normalized)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn user_by_id(&self, id: Uuid) -> Result<Option<UserRecord>, StoreError> {
        let sql = format!("{SELECT_USER} WHERE id = $1");
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn user_roles(&self, id: Uuid) -> Result<Vec<Role>, StoreError> {
        let names: Vec<String> =
            query_scalar::<B, _>("SELECT role FROM user_roles WHERE user_id = $1")
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
        Ok(names.iter().filter_map(|name| Role::parse(name)).collect())
    }

    async fn grant_role(
        &self,
        id: Uuid,
        role: Role,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let inserted = query::<B>(
            "INSERT INTO user_roles (user_id, role, granted_at) \
             SELECT id, $2, $3 FROM users WHERE id = $1 \
             ON CONFLICT (user_id, role) DO NOTHING",
        )
        .bind(id)
        .bind(role.as_str())
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let options = self.pool.options();
        let saturated =
            self.pool.num_idle() == 0 && self.pool.size() >= options.get_max_connections();
        if !saturated {
            query::<B>("SELECT 1").execute(&self.pool).await?;
            return Ok(());
        }
        // Every pooled connection is taken (by slow calls, say): a ping through the pool
        // would wait behind them and fail like them, and the circuit breaker would take a
        // busy store for an unreachable one. A connection of its own asks the database.
        let connect_options = self.pool.connect_options();
        let mut connection = tokio::time::timeout(
            options.get_acquire_timeout(),
            <B::Connection as sqlx::Connection>::connect_with(&connect_options),
        )
        .await
        .map_err(|_| {
            StoreError::Unavailable("no connection within the acquire timeout".into())
        })??;
        let answered = query::<B>("SELECT 1").execute(&mut connection).await;
        let _ = sqlx::Connection::close(connection).await;
        answered?;
        Ok(())
    }
}

/// A token's user, expiry and use, and whether its user still exists.
type TokenState = (Uuid, DateTime<Utc>, Option<DateTime<Utc>>, Option<Uuid>);

/// Classifies a token that could not be consumed.
async fn classify_one_time_token<'c, B: Backend, E>(
    executor: E,
    digest: &[u8],
    purpose: TokenPurpose,
    now: DateTime<Utc>,
) -> Result<TokenCheck, StoreError>
where
    E: Executor<'c, B>,
{
    let row: Option<TokenState> = query_as::<B, _>(
        "SELECT t.user_id, t.expires_at, t.used_at, u.id AS existing_user \
         FROM one_time_tokens t LEFT JOIN users u ON u.id = t.user_id \
         WHERE t.digest = $1 AND t.purpose = $2",
    )
    .bind(digest)
    .bind(purpose.as_str())
    .fetch_optional(executor)
    .await?;
    Ok(match row {
        None => TokenCheck::Unknown,
        Some((_, _, Some(_), _)) => TokenCheck::AlreadyUsed,
        Some((_, expires_at, None, _)) if expires_at <= now => TokenCheck::Expired,
        Some((_, _, None, None)) => TokenCheck::UnknownUser,
        Some((user_id, _, None, Some(_))) => TokenCheck::Valid { user_id },
    })
}

/// Claims a live token inside a transaction; the user id when claimed.
async fn claim_one_time_token<B: Backend>(
    tx: &mut Tx<B>,
    digest: &[u8],
    purpose: TokenPurpose,
    now: DateTime<Utc>,
) -> Result<Result<Uuid, TokenCheck>, StoreError> {
    let claimed: Option<Uuid> = query_scalar::<B, _>(
        "UPDATE one_time_tokens SET used_at = $3 \
         WHERE digest = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3 \
         RETURNING user_id",
    )
    .bind(digest)
    .bind(purpose.as_str())
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    match claimed {
        Some(user_id) => Ok(Ok(user_id)),
        None => Ok(Err(classify_one_time_token::<B, _>(
            &mut **tx, digest, purpose, now,
        )
        .await?)),
    }
}

async fn insert_one_time_token<'c, B: Backend, E>(
    executor: E,
    token: &NewOneTimeToken,
) -> Result<(), StoreError>
where
    E: Executor<'c, B>,
{
    query::<B>(
        "INSERT INTO one_time_tokens (digest, purpose, user_id, created_at, \
         expires_at, ip_address, user_agent) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(token.digest.as_slice())
    .bind(token.purpose.as_str())
    .bind(token.user_id)
    .bind(token.created_at)
    .bind(token.expires_at)
    .bind(token.ip_address.as_deref())
    .bind(token.user_agent.as_deref())
    .execute(executor)
    .await?;
    Ok(())
}

#[async_trait]
impl<B: Backend> OneTimeTokenStore for SqlStore<B> {
    async fn insert_one_time_token(&self, token: &NewOneTimeToken) -> Result<(), StoreError> {
        insert_one_time_token(&self.pool, token).await
    }

    async fn insert_one_time_token_capped(
        &self,
        token: &NewOneTimeToken,
        cap: u64,
        since: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // Concurrent requests count one by one.
        lock_user_in(&mut tx, token.user_id).await?;
        let issued: i64 = query_scalar::<B, _>(
            "SELECT COUNT(*) FROM one_time_tokens \
             WHERE user_id = $1 AND purpose = $2 AND created_at > $3",
        )
        .bind(token.user_id)
        .bind(token.purpose.as_str())
        .bind(since)
        .fetch_one(&mut *tx)
        .await?;
        if u64::try_from(issued).unwrap_or(u64::MAX) >= cap {
            return Ok(false);
        }
        insert_one_time_token::<B, _>(&mut *tx, token).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn check_one_time_token(
        &self,
        digest: &[u8],
        purpose: TokenPurpose,
        now: DateTime<Utc>,
    ) -> Result<TokenCheck, StoreError> {
        classify_one_time_token(&self.pool, digest, purpose, now).await
    }

    async fn verify_email(
        &self,
        digest: &[u8],
        now: DateTime<Utc>,
    ) -> Result<TokenCheck, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let purpose = TokenPurpose::EmailVerification;
        let user_id = match claim_one_time_token(&mut tx, digest, purpose, now).await? {
            Ok(user_id) => user_id,
            Err(check) => return Ok(check),
        };
        let updated = query::<B>(
            "UPDATE users SET email_verified_at = COALESCE(email_verified_at, $2), \
             updated_at = $2 WHERE id = $1",
        )
        .bind(user_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            return Ok(TokenCheck::UnknownUser);
        }
        tx.commit().await?;
        Ok(TokenCheck::Consumed { user_id })
    }

    async fn reset_password(
        &self,
        digest: &[u8],
        password_hash: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<TokenCheck, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let purpose = TokenPurpose::PasswordReset;
        let user_id = match claim_one_time_token(&mut tx, digest, purpose, now).await? {
            Ok(user_id) => user_id,
            Err(check) => return Ok(check),
        };
        let updated =
            query::<B>("UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1")
                .bind(user_id)
                .bind(password_hash)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        if updated.rows_affected() == 0 {
            return Ok(TokenCheck::UnknownUser);
        }
        let (_, events) =
            revoke_user_sessions(&mut tx, user_id, Uuid::nil(), "password_reset", now, raise)
                .await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(TokenCheck::Consumed { user_id })
    }
}
