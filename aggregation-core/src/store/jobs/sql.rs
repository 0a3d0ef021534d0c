//! Background jobs on SQL: leases, run records, purge.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::backend::{Backend, SqlStore, query, query_as, query_scalar};
use crate::store::{JobRunRecord, JobStore, PurgeCounts, StoreError};

#[async_trait]
impl<B: Backend> JobStore for SqlStore<B> {
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
        let acquired: Option<String> = query_scalar::<B, _>(
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
        let renewed = query::<B>(
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
        let finished = query::<B>(
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
        Ok(query_as::<B, _>(
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
        let one_time_tokens = query::<B>("DELETE FROM one_time_tokens WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // Explicit rather than through ON DELETE CASCADE, so that a pool opened without
        // SQLite's foreign_keys pragma purges the same rows.
        query::<B>(
            "DELETE FROM refresh_tokens WHERE session_id IN ( \
                 SELECT id FROM sessions WHERE revoked_at <= $1 OR expires_at <= $1)",
        )
        .bind(retain_after)
        .execute(&mut *tx)
        .await?;
        let sessions =
            query::<B>("DELETE FROM sessions WHERE revoked_at <= $1 OR expires_at <= $1")
                .bind(retain_after)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        tx.commit().await?;
        let refresh_tokens = query::<B>("DELETE FROM refresh_tokens WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let oauth_states = query::<B>("DELETE FROM oauth_states WHERE expires_at <= $1")
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
