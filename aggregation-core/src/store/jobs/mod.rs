//! The store side of background jobs: leases, run records, and the housekeeping they do.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// The run record and lease of one background job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct JobRunRecord {
    /// Job name.
    pub name: String,
    /// The runner holding the lease, while one does.
    pub lease_owner: Option<String>,
    /// When the lease lapses unless renewed.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// Start of the latest run.
    pub last_started_at: Option<DateTime<Utc>>,
    /// End of the latest finished run.
    pub last_finished_at: Option<DateTime<Utc>>,
    /// End of the latest successful run.
    pub last_success_at: Option<DateTime<Utc>>,
    /// Error of the latest finished run; `None` when it succeeded.
    pub last_error: Option<String>,
    /// Finished runs.
    pub runs: i64,
    /// Finished runs that failed.
    pub failures: i64,
}

/// How many rows a purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeCounts {
    /// Expired verification and reset tokens.
    pub one_time_tokens: u64,
    /// Refresh tokens past their expiry (besides those of deleted sessions).
    pub refresh_tokens: u64,
    /// Sessions revoked or expired before the retention cut-off (with their refresh tokens).
    pub sessions: u64,
    /// Expired OAuth state values.
    pub oauth_states: u64,
}

/// The store side of background jobs: leases, run records, and the housekeeping they do.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Takes the lease of job `name` for `owner` until `lease_until`, and records `now` as the
    /// run's start, in one conditional write. Succeeds only when no live lease exists (none, or
    /// its `lease_expires_at` <= `now`) and the job last started at or before `due_before` (or
    /// never). `false` when either condition fails. Atomic across processes sharing the
    /// database: of concurrent callers at most one gets `true`.
    async fn try_acquire_job_lease(
        &self,
        name: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        due_before: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Extends a lease `owner` still holds; `false` when it holds it no more.
    async fn renew_job_lease(
        &self,
        name: &str,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Records the end of a run (`error` `None` for success: counts, times, last error) and
    /// releases the lease, in one write. `false` (and nothing written) when `owner` no longer
    /// holds the lease.
    async fn finish_job_run(
        &self,
        name: &str,
        owner: &str,
        at: DateTime<Utc>,
        error: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Every job's run record, by name.
    async fn job_runs(&self) -> Result<Vec<JobRunRecord>, StoreError>;

    /// Deletes expired single-use tokens and refresh tokens (`expires_at <= now`), sessions
    /// revoked or expired at or before `retain_after` with their refresh tokens, and expired
    /// OAuth states (`expires_at <= now`). Each kind is deleted atomically.
    async fn purge_expired(
        &self,
        now: DateTime<Utc>,
        retain_after: DateTime<Utc>,
    ) -> Result<PurgeCounts, StoreError>;
}
