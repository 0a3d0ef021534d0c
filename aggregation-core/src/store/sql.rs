//! The SQL both backends share. `$n` placeholders, `ON CONFLICT` and `RETURNING` work on SQLite
//! and PostgreSQL alike, so one macro body implements every store trait for both pool types.

use super::StoreError;

/// Converts a sqlx error into the coarse [`StoreError`], logging the detail.
///
/// Every way a call can run out of time (no pooled connection within the acquire timeout, a
/// PostgreSQL `statement_timeout`, a SQLite lock still held when the busy timeout ends) is
/// [`StoreError::Unavailable`], which the API answers with 503.
pub(crate) fn store_error(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            tracing::error!(error = %error, "store unavailable");
            StoreError::Unavailable(error.to_string())
        }
        sqlx::Error::Database(database) if timed_out(database.as_ref()) => {
            tracing::error!(error = %error, "store call timed out");
            StoreError::Unavailable(error.to_string())
        }
        sqlx::Error::Database(database) if database.is_unique_violation() => {
            StoreError::Conflict(database.message().to_owned())
        }
        sqlx::Error::Database(database) if lost_a_race(database.as_ref()) => {
            // Writers take rows in one order, so this is rare; the client may simply retry.
            tracing::warn!(error = %error, "concurrent write conflict");
            StoreError::Unavailable(error.to_string())
        }
        _ => {
            tracing::error!(error = %error, "store failure");
            StoreError::Other(error.to_string())
        }
    }
}

/// Whether PostgreSQL gave up a transaction for a concurrent one: `deadlock_detected` (40P01)
/// or `serialization_failure` (40001).
fn lost_a_race(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "postgres")]
    if let Some(error) = error.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        return matches!(error.code(), "40P01" | "40001");
    }
    let _ = error;
    false
}

/// Whether a database error means the call ran out of time rather than failed.
fn timed_out(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "postgres")]
    if let Some(error) = error.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        // query_canceled: what `statement_timeout` raises.
        return error.code() == "57014";
    }
    #[cfg(feature = "sqlite")]
    if let Some(error) = error.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
        use sqlx::error::DatabaseError as _;
        const SQLITE_BUSY: i32 = 5;
        const SQLITE_LOCKED: i32 = 6;
        // The primary result code is the low byte of the extended one.
        let primary = error
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .map(|code| code & 0xff);
        return matches!(primary, Some(SQLITE_BUSY | SQLITE_LOCKED));
    }
    false
}

/// Implements every store trait for `$store`, a struct with a `pool: sqlx::Pool<$db>` field.
/// `$begin_write` starts a transaction that will write (SQLite needs `BEGIN IMMEDIATE` so a
/// read-then-write transaction cannot fail to upgrade its lock).
macro_rules! impl_sql_store {
    ($store:ty, $db:ty, $begin_write:literal) => {
        use $crate::store::sql::store_error;
        use $crate::store::{
            NewOneTimeToken, NewRefreshToken, NewSession, NewUser, OneTimeTokenStore,
            RefreshTokenRecord, Role, SessionRecord, SessionStore, StoreError, TokenCheck,
            TokenPurpose, UserRecord, UserStore,
        };
        use chrono::{DateTime, Utc};
        use sqlx::Row as _;
        use uuid::Uuid;

        type DbRow = <$db as sqlx::Database>::Row;

        const USER_COLUMNS: &str = "id, email, password_hash, email_verified_at, \
             min_token_version, created_at, updated_at";
        const SESSION_COLUMNS: &str = "id, user_id, device_info, ip_address, location, \
             created_at, last_activity_at, expires_at, revoked_at, revoked_reason";

        fn user_from_row(row: &DbRow) -> Result<UserRecord, sqlx::Error> {
            Ok(UserRecord {
                id: row.try_get("id")?,
                email: row.try_get("email")?,
                password_hash: row.try_get("password_hash")?,
                email_verified_at: row.try_get("email_verified_at")?,
                min_token_version: row.try_get("min_token_version")?,
                created_at: row.try_get("created_at")?,
                updated_at: row.try_get("updated_at")?,
            })
        }

        fn session_from_row(row: &DbRow) -> Result<SessionRecord, sqlx::Error> {
            Ok(SessionRecord {
                id: row.try_get("id")?,
                user_id: row.try_get("user_id")?,
                device_info: row.try_get("device_info")?,
                ip_address: row.try_get("ip_address")?,
                location: row.try_get("location")?,
                created_at: row.try_get("created_at")?,
                last_activity_at: row.try_get("last_activity_at")?,
                expires_at: row.try_get("expires_at")?,
                revoked_at: row.try_get("revoked_at")?,
                revoked_reason: row.try_get("revoked_reason")?,
            })
        }

        /// Classifies a token that could not be consumed.
        async fn classify_one_time_token<'c, E>(
            executor: E,
            digest: &[u8],
            purpose: TokenPurpose,
            now: DateTime<Utc>,
        ) -> Result<TokenCheck, sqlx::Error>
        where
            E: sqlx::Executor<'c, Database = $db>,
        {
            let row = sqlx::query(
                "SELECT t.user_id, t.expires_at, t.used_at, u.id AS existing_user \
                 FROM one_time_tokens t LEFT JOIN users u ON u.id = t.user_id \
                 WHERE t.digest = $1 AND t.purpose = $2",
            )
            .bind(digest)
            .bind(purpose.as_str())
            .fetch_optional(executor)
            .await?;
            let Some(row) = row else {
                return Ok(TokenCheck::Unknown);
            };
            let used_at: Option<DateTime<Utc>> = row.try_get("used_at")?;
            let expires_at: DateTime<Utc> = row.try_get("expires_at")?;
            let existing_user: Option<Uuid> = row.try_get("existing_user")?;
            Ok(if used_at.is_some() {
                TokenCheck::AlreadyUsed
            } else if expires_at <= now {
                TokenCheck::Expired
            } else if existing_user.is_none() {
                TokenCheck::UnknownUser
            } else {
                TokenCheck::Valid {
                    user_id: row.try_get("user_id")?,
                }
            })
        }

        /// Claims a live token inside a transaction; the user id when claimed.
        async fn claim_one_time_token(
            tx: &mut sqlx::Transaction<'static, $db>,
            digest: &[u8],
            purpose: TokenPurpose,
            now: DateTime<Utc>,
        ) -> Result<Result<Uuid, TokenCheck>, sqlx::Error> {
            let claimed = sqlx::query(
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
                Some(row) => Ok(Ok(row.try_get("user_id")?)),
                None => Ok(Err(
                    classify_one_time_token(&mut **tx, digest, purpose, now).await?
                )),
            }
        }

        /// Revokes sessions matching `filter` (a WHERE fragment over `$1` user, `$2` kept
        /// session, `$3` now) and their refresh tokens; the number of sessions revoked.
        async fn revoke_user_sessions(
            tx: &mut sqlx::Transaction<'static, $db>,
            user_id: Uuid,
            keep: Uuid,
            reason: &str,
            now: DateTime<Utc>,
        ) -> Result<u64, sqlx::Error> {
            // Sessions before their tokens, the order every writer here takes, so that a
            // refresh racing this revocation on PostgreSQL waits instead of deadlocking.
            let live = sqlx::query(
                "UPDATE sessions SET revoked_at = $3, revoked_reason = $4 \
                 WHERE user_id = $1 AND id <> $2 AND revoked_at IS NULL AND expires_at > $3",
            )
            .bind(user_id)
            .bind(keep)
            .bind(now)
            .bind(reason)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            // Expired sessions are closed too, so none of them can come back, but only live
            // ones count as revoked.
            sqlx::query(
                "UPDATE sessions SET revoked_at = $3, revoked_reason = $4 \
                 WHERE user_id = $1 AND id <> $2 AND revoked_at IS NULL",
            )
            .bind(user_id)
            .bind(keep)
            .bind(now)
            .bind(reason)
            .execute(&mut **tx)
            .await?;
            sqlx::query(
                "UPDATE refresh_tokens SET revoked_at = $3 \
                 WHERE revoked_at IS NULL AND user_id = $1 AND session_id <> $2",
            )
            .bind(user_id)
            .bind(keep)
            .bind(now)
            .execute(&mut **tx)
            .await?;
            Ok(live)
        }

        impl $store {
            /// Applies the embedded migrations that are not applied yet, each in its own
            /// transaction; safe to call at every start, from several processes at once.
            pub async fn migrate(&self) -> Result<(), StoreError> {
                let mut connection = self.pool.acquire().await.map_err(store_error)?;
                sqlx::raw_sql(MIGRATIONS_TABLE)
                    .execute(&mut *connection)
                    .await
                    .map_err(store_error)?;
                for migration in MIGRATIONS {
                    let mut tx = sqlx::Connection::begin_with(&mut *connection, $begin_write)
                        .await
                        .map_err(store_error)?;
                    if let Some(lock) = MIGRATION_LOCK {
                        sqlx::raw_sql(lock).execute(&mut *tx).await.map_err(store_error)?;
                    }
                    let applied: Option<i64> = sqlx::query_scalar(
                        "SELECT version FROM aggregation_migrations WHERE version = $1",
                    )
                    .bind(migration.version)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                    if applied.is_some() {
                        continue;
                    }
                    sqlx::raw_sql(migration.sql)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    sqlx::query(
                        "INSERT INTO aggregation_migrations (version, description, applied_at) \
                         VALUES ($1, $2, $3)",
                    )
                    .bind(migration.version)
                    .bind(migration.description)
                    .bind($crate::store::now())
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                    tx.commit().await.map_err(store_error)?;
                }
                Ok(())
            }

            /// The underlying pool.
            pub fn pool(&self) -> &sqlx::Pool<$db> {
                &self.pool
            }
        }

        #[async_trait::async_trait]
        impl UserStore for $store {
            async fn create_user(&self, user: &NewUser) -> Result<(), StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                sqlx::query(
                    "INSERT INTO users (id, email, email_normalized, password_hash, \
                     min_token_version, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, 0, $5, $5)",
                )
                .bind(user.id)
                .bind(&user.email)
                .bind(&user.email_normalized)
                .bind(&user.password_hash)
                .bind(user.created_at)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                sqlx::query("INSERT INTO user_roles (user_id, role, granted_at) VALUES ($1, $2, $3)")
                    .bind(user.id)
                    .bind(Role::User.as_str())
                    .bind(user.created_at)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(store_error)
            }

            async fn user_by_email(
                &self,
                email_normalized: &str,
            ) -> Result<Option<UserRecord>, StoreError> {
                let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE email_normalized = $1");
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(email_normalized)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(store_error)?;
                row.as_ref()
                    .map(user_from_row)
                    .transpose()
                    .map_err(store_error)
            }

            async fn user_by_id(&self, id: Uuid) -> Result<Option<UserRecord>, StoreError> {
                let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(store_error)?;
                row.as_ref()
                    .map(user_from_row)
                    .transpose()
                    .map_err(store_error)
            }

            async fn user_roles(&self, id: Uuid) -> Result<Vec<Role>, StoreError> {
                let rows = sqlx::query("SELECT role FROM user_roles WHERE user_id = $1")
                    .bind(id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(store_error)?;
                let mut roles = Vec::with_capacity(rows.len());
                for row in &rows {
                    let name: String = row.try_get("role").map_err(store_error)?;
                    if let Some(role) = Role::parse(&name) {
                        roles.push(role);
                    }
                }
                Ok(roles)
            }

            async fn grant_role(
                &self,
                id: Uuid,
                role: Role,
                at: DateTime<Utc>,
            ) -> Result<bool, StoreError> {
                let inserted = sqlx::query(
                    "INSERT INTO user_roles (user_id, role, granted_at) \
                     SELECT id, $2, $3 FROM users WHERE id = $1 \
                     ON CONFLICT (user_id, role) DO NOTHING",
                )
                .bind(id)
                .bind(role.as_str())
                .bind(at)
                .execute(&self.pool)
                .await
                .map_err(store_error)?;
                Ok(inserted.rows_affected() == 1)
            }

            async fn ping(&self) -> Result<(), StoreError> {
                sqlx::query("SELECT 1")
                    .execute(&self.pool)
                    .await
                    .map(|_| ())
                    .map_err(store_error)
            }
        }

        #[async_trait::async_trait]
        impl OneTimeTokenStore for $store {
            async fn insert_one_time_token(
                &self,
                token: &NewOneTimeToken,
            ) -> Result<(), StoreError> {
                insert_one_time_token(&self.pool, token).await.map_err(store_error)
            }

            async fn insert_one_time_token_capped(
                &self,
                token: &NewOneTimeToken,
                cap: u64,
                since: DateTime<Utc>,
            ) -> Result<bool, StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                // Locks the user's row (PostgreSQL) so concurrent requests count one by one;
                // SQLite's BEGIN IMMEDIATE already serializes writers.
                sqlx::query("UPDATE users SET updated_at = updated_at WHERE id = $1")
                    .bind(token.user_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                let issued: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM one_time_tokens \
                     WHERE user_id = $1 AND purpose = $2 AND created_at > $3",
                )
                .bind(token.user_id)
                .bind(token.purpose.as_str())
                .bind(since)
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
                if u64::try_from(issued).unwrap_or(u64::MAX) >= cap {
                    return Ok(false);
                }
                insert_one_time_token(&mut *tx, token).await.map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(true)
            }

            async fn check_one_time_token(
                &self,
                digest: &[u8],
                purpose: TokenPurpose,
                now: DateTime<Utc>,
            ) -> Result<TokenCheck, StoreError> {
                classify_one_time_token(&self.pool, digest, purpose, now)
                    .await
                    .map_err(store_error)
            }

            async fn verify_email(
                &self,
                digest: &[u8],
                now: DateTime<Utc>,
            ) -> Result<TokenCheck, StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                let user_id = match claim_one_time_token(
                    &mut tx,
                    digest,
                    TokenPurpose::EmailVerification,
                    now,
                )
                .await
                .map_err(store_error)?
                {
                    Ok(user_id) => user_id,
                    Err(check) => return Ok(check),
                };
                let updated = sqlx::query(
                    "UPDATE users SET email_verified_at = COALESCE(email_verified_at, $2), \
                     updated_at = $2 WHERE id = $1",
                )
                .bind(user_id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                if updated.rows_affected() == 0 {
                    return Ok(TokenCheck::UnknownUser);
                }
                tx.commit().await.map_err(store_error)?;
                Ok(TokenCheck::Consumed { user_id })
            }

            async fn reset_password(
                &self,
                digest: &[u8],
                password_hash: &str,
                now: DateTime<Utc>,
            ) -> Result<TokenCheck, StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                let user_id =
                    match claim_one_time_token(&mut tx, digest, TokenPurpose::PasswordReset, now)
                        .await
                        .map_err(store_error)?
                    {
                        Ok(user_id) => user_id,
                        Err(check) => return Ok(check),
                    };
                let updated = sqlx::query(
                    "UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1",
                )
                .bind(user_id)
                .bind(password_hash)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                if updated.rows_affected() == 0 {
                    return Ok(TokenCheck::UnknownUser);
                }
                revoke_user_sessions(&mut tx, user_id, Uuid::nil(), "password_reset", now)
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(TokenCheck::Consumed { user_id })
            }
        }

        #[async_trait::async_trait]
        impl SessionStore for $store {
            async fn create_session(
                &self,
                session: &NewSession,
                token: &NewRefreshToken,
            ) -> Result<(), StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                sqlx::query(
                    "INSERT INTO sessions (id, user_id, device_info, ip_address, user_agent, \
                     created_at, last_activity_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6, $7)",
                )
                .bind(session.id)
                .bind(session.user_id)
                .bind(session.device_info.as_deref())
                .bind(session.ip_address.as_deref())
                .bind(session.user_agent.as_deref())
                .bind(session.created_at)
                .bind(session.expires_at)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                insert_refresh_token(&mut tx, token).await.map_err(store_error)?;
                tx.commit().await.map_err(store_error)
            }

            async fn refresh_token(
                &self,
                digest: &[u8],
            ) -> Result<Option<RefreshTokenRecord>, StoreError> {
                let row = sqlx::query(
                    "SELECT t.session_id, t.user_id, t.token_version, t.expires_at, \
                     t.rotated_at, t.revoked_at, s.revoked_at AS session_revoked_at, \
                     s.created_at AS session_created_at \
                     FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id \
                     WHERE t.digest = $1",
                )
                .bind(digest)
                .fetch_optional(&self.pool)
                .await
                .map_err(store_error)?;
                let Some(row) = row else { return Ok(None) };
                let record = (|| -> Result<RefreshTokenRecord, sqlx::Error> {
                    Ok(RefreshTokenRecord {
                        session_id: row.try_get("session_id")?,
                        user_id: row.try_get("user_id")?,
                        token_version: row.try_get("token_version")?,
                        expires_at: row.try_get("expires_at")?,
                        rotated_at: row.try_get("rotated_at")?,
                        revoked_at: row.try_get("revoked_at")?,
                        session_revoked_at: row.try_get("session_revoked_at")?,
                        session_created_at: row.try_get("session_created_at")?,
                    })
                })()
                .map_err(store_error)?;
                Ok(Some(record))
            }

            async fn rotate_refresh_token(
                &self,
                old_digest: &[u8],
                new_token: &NewRefreshToken,
                now: DateTime<Utc>,
            ) -> Result<bool, StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                // The session row first, then its tokens: the order revocations take too, so
                // a logout racing this refresh on PostgreSQL waits for it instead of
                // deadlocking. Nothing is kept unless the token rotates below.
                let live_session = sqlx::query(
                    "UPDATE sessions SET last_activity_at = $2, expires_at = $3 \
                     WHERE id = $1 AND revoked_at IS NULL",
                )
                .bind(new_token.session_id)
                .bind(now)
                .bind(new_token.expires_at)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                if live_session.rows_affected() != 1 {
                    return Ok(false);
                }
                let rotated = sqlx::query(
                    "UPDATE refresh_tokens SET rotated_at = $2 \
                     WHERE digest = $1 AND rotated_at IS NULL AND revoked_at IS NULL \
                     AND expires_at > $2 AND session_id = $3",
                )
                .bind(old_digest)
                .bind(now)
                .bind(new_token.session_id)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                if rotated.rows_affected() != 1 {
                    return Ok(false);
                }
                insert_refresh_token(&mut tx, new_token).await.map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(true)
            }

            async fn revoke_session(
                &self,
                user_id: Uuid,
                session_id: Uuid,
                reason: &str,
                now: DateTime<Utc>,
            ) -> Result<Option<bool>, StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                let row = sqlx::query(
                    "SELECT revoked_at FROM sessions WHERE id = $1 AND user_id = $2",
                )
                .bind(session_id)
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
                let Some(row) = row else { return Ok(None) };
                let revoked_at: Option<DateTime<Utc>> =
                    row.try_get("revoked_at").map_err(store_error)?;
                if revoked_at.is_some() {
                    return Ok(Some(false));
                }
                revoke_one_session(&mut tx, session_id, reason, now)
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(Some(true))
            }

            async fn revoke_session_by_token(
                &self,
                user_id: Uuid,
                digest: &[u8],
                reason: &str,
                now: DateTime<Utc>,
            ) -> Result<bool, StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                let row = sqlx::query(
                    "SELECT session_id FROM refresh_tokens WHERE digest = $1 AND user_id = $2",
                )
                .bind(digest)
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
                let Some(row) = row else { return Ok(false) };
                let session_id: Uuid = row.try_get("session_id").map_err(store_error)?;
                revoke_one_session(&mut tx, session_id, reason, now)
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(true)
            }

            async fn revoke_all_sessions(
                &self,
                user_id: Uuid,
                keep: Option<Uuid>,
                reason: &str,
                now: DateTime<Utc>,
            ) -> Result<u64, StoreError> {
                let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                let count = revoke_user_sessions(
                    &mut tx,
                    user_id,
                    keep.unwrap_or_else(Uuid::nil),
                    reason,
                    now,
                )
                .await
                .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(count)
            }

            async fn sessions_for_user(
                &self,
                user_id: Uuid,
                active_only: bool,
                now: DateTime<Utc>,
            ) -> Result<Vec<SessionRecord>, StoreError> {
                let filter = if active_only {
                    "AND revoked_at IS NULL AND expires_at > $2"
                } else {
                    ""
                };
                let sql = format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = $1 {filter} \
                     ORDER BY created_at DESC, id DESC"
                );
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(user_id);
                if active_only {
                    query = query.bind(now);
                }
                let rows = query
                    .fetch_all(&self.pool)
                    .await
                    .map_err(store_error)?;
                rows.iter()
                    .map(session_from_row)
                    .collect::<Result<_, _>>()
                    .map_err(store_error)
            }

            async fn session_for_user(
                &self,
                user_id: Uuid,
                session_id: Uuid,
            ) -> Result<Option<SessionRecord>, StoreError> {
                let sql = format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1 AND user_id = $2"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(session_id)
                    .bind(user_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(store_error)?;
                row.as_ref()
                    .map(session_from_row)
                    .transpose()
                    .map_err(store_error)
            }
        }

        async fn insert_one_time_token<'c, E>(
            executor: E,
            token: &NewOneTimeToken,
        ) -> Result<(), sqlx::Error>
        where
            E: sqlx::Executor<'c, Database = $db>,
        {
            sqlx::query(
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
            .await
            .map(|_| ())
        }

        async fn insert_refresh_token(
            tx: &mut sqlx::Transaction<'static, $db>,
            token: &NewRefreshToken,
        ) -> Result<(), sqlx::Error> {
            sqlx::query(
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
            .await
            .map(|_| ())
        }

        async fn revoke_one_session(
            tx: &mut sqlx::Transaction<'static, $db>,
            session_id: Uuid,
            reason: &str,
            now: DateTime<Utc>,
        ) -> Result<(), sqlx::Error> {
            sqlx::query(
                "UPDATE sessions SET revoked_at = $2, revoked_reason = $3 \
                 WHERE id = $1 AND revoked_at IS NULL",
            )
            .bind(session_id)
            .bind(now)
            .bind(reason)
            .execute(&mut **tx)
            .await?;
            sqlx::query(
                "UPDATE refresh_tokens SET revoked_at = $2 \
                 WHERE session_id = $1 AND revoked_at IS NULL",
            )
            .bind(session_id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
            Ok(())
        }
    };
}
pub(crate) use impl_sql_store;
