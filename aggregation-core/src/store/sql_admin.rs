//! Administration (the security configuration, refresh-token version rotations) and background
//! jobs (leases, run records, purge).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::events::insert_events;
use super::{BEGIN_WRITE, Db, SqlStore, Tx};
use crate::events::{Event, RaiseEvents};
use crate::store::{
    JobRunRecord, JobStore, NewTokenRotation, PurgeCounts, RotationOutcome, RotationScope,
    SecurityConfigRecord, SecurityStore, StoreError, TokenRotationRecord,
};

const SELECT_CONFIG: &str = "SELECT global_min_token_version, grace_period_seconds, \
     last_rotation_at, last_rotation_reason, updated_at FROM security_config WHERE id = 1";

/// Creates the configuration row when missing.
async fn insert_default_config<'c, E>(
    executor: E,
    grace_seconds: i64,
    at: DateTime<Utc>,
) -> Result<(), StoreError>
where
    E: sqlx::Executor<'c, Database = Db>,
{
    sqlx::query(
        "INSERT INTO security_config (id, global_min_token_version, grace_period_seconds, \
         updated_at) VALUES (1, 0, $1, $2) ON CONFLICT (id) DO NOTHING",
    )
    .bind(grace_seconds)
    .bind(at)
    .execute(executor)
    .await?;
    Ok(())
}

async fn insert_rotation(
    tx: &mut Tx,
    rotation: &NewTokenRotation,
    scope: RotationScope,
    user_id: Option<Uuid>,
    outcome: RotationOutcome,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO token_rotations (id, scope, user_id, previous_version, new_version, \
         reason, initiated_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(rotation.id)
    .bind(scope.as_str())
    .bind(user_id)
    .bind(outcome.previous_version)
    .bind(outcome.new_version)
    .bind(&rotation.reason)
    .bind(rotation.initiated_by)
    .bind(rotation.at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Locks the configuration row (creating it when missing) for the rest of the transaction, so
/// that rotations are serialized; the global minimum.
async fn lock_config(
    tx: &mut Tx,
    grace_seconds: i64,
    at: DateTime<Utc>,
) -> Result<i64, StoreError> {
    insert_default_config(&mut **tx, grace_seconds, at).await?;
    Ok(sqlx::query_scalar(
        "UPDATE security_config SET updated_at = updated_at WHERE id = 1 \
         RETURNING global_min_token_version",
    )
    .fetch_one(&mut **tx)
    .await?)
}

#[async_trait]
impl SecurityStore for SqlStore {
    async fn security_config(&self) -> Result<Option<SecurityConfigRecord>, StoreError> {
        Ok(sqlx::query_as(SELECT_CONFIG)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn ensure_security_config(
        &self,
        default_grace_seconds: i64,
        at: DateTime<Utc>,
    ) -> Result<SecurityConfigRecord, StoreError> {
        if let Some(config) = self.security_config().await? {
            return Ok(config);
        }
        insert_default_config(&self.pool, default_grace_seconds, at).await?;
        Ok(sqlx::query_as(SELECT_CONFIG).fetch_one(&self.pool).await?)
    }

    async fn rotate_global_token_version(
        &self,
        rotation: &NewTokenRotation,
        raise: &RaiseEvents<'_, RotationOutcome>,
        raised: &mut Vec<Event>,
    ) -> Result<RotationOutcome, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        lock_config(&mut tx, rotation.grace_period_seconds, rotation.at).await?;
        let new_version: i64 = sqlx::query_scalar(
            "UPDATE security_config SET global_min_token_version = global_min_token_version + 1, \
             grace_period_seconds = $1, last_rotation_at = $2, last_rotation_reason = $3, \
             updated_at = $2 WHERE id = 1 RETURNING global_min_token_version",
        )
        .bind(rotation.grace_period_seconds)
        .bind(rotation.at)
        .bind(&rotation.reason)
        .fetch_one(&mut *tx)
        .await?;
        // Tokens of individually rotated users carry their (higher) user minimum; raising it
        // keeps the global rotation effective for them too.
        let raised_users: Vec<(Uuid, i64)> = sqlx::query_as(
            "UPDATE users SET min_token_version = min_token_version + 1, updated_at = $2 \
             WHERE min_token_version >= $1 RETURNING id, min_token_version",
        )
        .bind(new_version)
        .bind(rotation.at)
        .fetch_all(&mut *tx)
        .await?;
        let outcome = RotationOutcome {
            previous_version: new_version - 1,
            new_version,
        };
        insert_rotation(&mut tx, rotation, RotationScope::Global, None, outcome).await?;
        // One row per raised user: the audit trail, and what the grace period of this rotation
        // accepts for them (their minimum just before it).
        for (user_id, min_token_version) in raised_users {
            let per_user = NewTokenRotation {
                id: Uuid::now_v7(),
                ..rotation.clone()
            };
            let raise = RotationOutcome {
                previous_version: min_token_version - 1,
                new_version: min_token_version,
            };
            let scope = RotationScope::Global;
            insert_rotation(&mut tx, &per_user, scope, Some(user_id), raise).await?;
        }
        let events = raise(&outcome);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(outcome)
    }

    async fn rotate_user_token_version(
        &self,
        user_id: Uuid,
        rotation: &NewTokenRotation,
        raise: &RaiseEvents<'_, RotationOutcome>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<RotationOutcome>, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        let global = lock_config(&mut tx, rotation.grace_period_seconds, rotation.at).await?;
        let previous: Option<i64> =
            sqlx::query_scalar("SELECT min_token_version FROM users WHERE id = $1")
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(previous_version) = previous else {
            return Ok(None);
        };
        let new_version = previous_version.max(global) + 1;
        sqlx::query("UPDATE users SET min_token_version = $2, updated_at = $3 WHERE id = $1")
            .bind(user_id)
            .bind(new_version)
            .bind(rotation.at)
            .execute(&mut *tx)
            .await?;
        let outcome = RotationOutcome {
            previous_version,
            new_version,
        };
        insert_rotation(
            &mut tx,
            rotation,
            RotationScope::User,
            Some(user_id),
            outcome,
        )
        .await?;
        let events = raise(&outcome);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(Some(outcome))
    }

    async fn global_rotation_raised_from(
        &self,
        user_id: Uuid,
        min_token_version: i64,
    ) -> Result<Option<i64>, StoreError> {
        // Minimums only grow, so a global row that ends at the current minimum is the change
        // that set it: no user rotation came after.
        Ok(sqlx::query_scalar(
            "SELECT previous_version FROM token_rotations \
             WHERE user_id = $1 AND scope = $2 AND new_version = $3 LIMIT 1",
        )
        .bind(user_id)
        .bind(RotationScope::Global.as_str())
        .bind(min_token_version)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn token_rotations(&self, limit: u32) -> Result<Vec<TokenRotationRecord>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, scope, user_id, previous_version, new_version, reason, initiated_by, \
             created_at FROM token_rotations ORDER BY created_at DESC, id DESC LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }
}

#[async_trait]
impl JobStore for SqlStore {
    async fn try_acquire_job_lease(
        &self,
        name: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        due_before: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        // One statement: PostgreSQL re-checks the WHERE clause against the latest row version
        // after waiting for a concurrent writer, SQLite serializes writers, so at most one
        // caller sees its row come back.
        let acquired: Option<String> = sqlx::query_scalar(
            "INSERT INTO job_runs (name, lease_owner, lease_expires_at, last_started_at, runs, \
             failures) VALUES ($1, $2, $3, $4, 0, 0) \
             ON CONFLICT (name) DO UPDATE SET lease_owner = excluded.lease_owner, \
             lease_expires_at = excluded.lease_expires_at, \
             last_started_at = excluded.last_started_at \
             WHERE (job_runs.lease_owner IS NULL OR job_runs.lease_expires_at IS NULL \
                    OR job_runs.lease_expires_at <= $4) \
             AND (job_runs.last_started_at IS NULL OR job_runs.last_started_at <= $5) \
             RETURNING name",
        )
        .bind(name)
        .bind(owner)
        .bind(lease_until)
        .bind(now)
        .bind(due_before)
        .fetch_optional(&self.pool)
        .await?;
        Ok(acquired.is_some())
    }

    async fn renew_job_lease(
        &self,
        name: &str,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let renewed = sqlx::query(
            "UPDATE job_runs SET lease_expires_at = $3 WHERE name = $1 AND lease_owner = $2",
        )
        .bind(name)
        .bind(owner)
        .bind(lease_until)
        .execute(&self.pool)
        .await?;
        Ok(renewed.rows_affected() == 1)
    }

    async fn finish_job_run(
        &self,
        name: &str,
        owner: &str,
        at: DateTime<Utc>,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        let finished = sqlx::query(
            "UPDATE job_runs SET lease_owner = NULL, lease_expires_at = NULL, \
             last_finished_at = $3, \
             last_success_at = CASE WHEN $4 THEN $3 ELSE last_success_at END, \
             last_error = $5, runs = runs + 1, \
             failures = failures + CASE WHEN $4 THEN 0 ELSE 1 END \
             WHERE name = $1 AND lease_owner = $2",
        )
        .bind(name)
        .bind(owner)
        .bind(at)
        .bind(error.is_none())
        .bind(error)
        .execute(&self.pool)
        .await?;
        Ok(finished.rows_affected() == 1)
    }

    async fn job_runs(&self) -> Result<Vec<JobRunRecord>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT name, lease_owner, lease_expires_at, last_started_at, last_finished_at, \
             last_success_at, last_error, runs, failures FROM job_runs ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn purge_expired(
        &self,
        now: DateTime<Utc>,
        retain_after: DateTime<Utc>,
    ) -> Result<PurgeCounts, StoreError> {
        let one_time_tokens = sqlx::query("DELETE FROM one_time_tokens WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await?;
        // Explicit rather than through ON DELETE CASCADE, so that a pool opened without
        // SQLite's foreign_keys pragma purges the same rows.
        sqlx::query(
            "DELETE FROM refresh_tokens WHERE session_id IN ( \
                 SELECT id FROM sessions WHERE revoked_at <= $1 OR expires_at <= $1)",
        )
        .bind(retain_after)
        .execute(&mut *tx)
        .await?;
        let sessions =
            sqlx::query("DELETE FROM sessions WHERE revoked_at <= $1 OR expires_at <= $1")
                .bind(retain_after)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        tx.commit().await?;
        let refresh_tokens = sqlx::query("DELETE FROM refresh_tokens WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let oauth_states = sqlx::query("DELETE FROM oauth_states WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(PurgeCounts {
            one_time_tokens,
            refresh_tokens,
            sessions,
            oauth_states,
        })
    }
}
