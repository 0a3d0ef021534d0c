//! Background jobs: `refresh_provider_tokens` (every 5 min), `purge_expired` (hourly),
//! `sync_connections` (off unless configured) and `deliver_webhooks` (every 5 s), run inside
//! the service when the host starts them. With the `webhooks` feature, the started jobs also
//! deliver each event's webhooks right after its commit (see [`JobRunner::spawn`]); the
//! `deliver_webhooks` schedule then retries and picks up what was raised elsewhere.
//!
//! ```no_run
//! # async fn demo(service: aggregation_core::AggregationService) {
//! let jobs = service.jobs().spawn();
//! // ... serve requests ...
//! jobs.shutdown().await; // lets a running job finish, then stops
//! # }
//! ```
//!
//! Every run goes through a lease in the store (`job_runs`): a runner takes it with one
//! conditional write, renews it every third of [`Config::job_lease_ttl`] while the job runs, and
//! releases it with the run's record. Instances sharing a database therefore never run the same
//! job at once, and the schedule is shared too: a job is due `interval` after its last start on
//! any instance. When an instance dies mid-run, its lease lapses after at most the lease
//! lifetime and the next due run on another instance takes over.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures_util::FutureExt as _;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use crate::config::Config;
use crate::dates;
use crate::providers::connections::Connections;
use crate::store::{JobRunRecord, Store, StoreError, now};

pub use crate::job_outcome::RunOutcome;

/// Name of the job that refreshes provider access tokens before they expire.
pub const REFRESH_PROVIDER_TOKENS: &str = "refresh_provider_tokens";
/// Name of the job that deletes expired tokens, states, old sessions and events past the audit
/// retention.
pub const PURGE_EXPIRED: &str = "purge_expired";
/// Name of the job that syncs every active provider connection.
pub const SYNC_CONNECTIONS: &str = "sync_connections";
/// Name of the job that sends due webhook deliveries (signed, retried with backoff).
///
/// Deliveries of an event committed on this instance start right after the commit, without
/// waiting for this job (see [`JobRunner::spawn`]). The job retries failed deliveries once
/// their backoff is due and sends those of events raised on instances not running the jobs,
/// at most 200 per run.
pub const DELIVER_WEBHOOKS: &str = "deliver_webhooks";
/// Name of the job that resumes users' erasures (`DELETE /api/v1/users/me`, `DELETE
/// /api/v1/admin/users/{id}`) that a crash or a restart interrupted, every minute. An erasure
/// is worked through right after its request; this job only picks up what was left
/// unfinished (each erasure is leased on its own record, so two instances never delete the
/// same user's rows at once). It is not one of the jobs `GET /api/v1/admin/jobs` lists.
pub const ERASE_USERS: &str = "erase_users";

/// How often [`ERASE_USERS`] looks for interrupted erasures.
const ERASE_USERS_EVERY: Duration = Duration::from_secs(60);

/// Why a job run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The job failed for its own reason.
    #[error("{0}")]
    Failed(String),
}

impl JobError {
    /// The text recorded as the run's `last_error` (store internals stay in the logs).
    fn recorded(&self) -> String {
        match self {
            Self::Store(StoreError::Unavailable(_)) => "the store is unavailable".to_owned(),
            Self::Store(StoreError::Busy(_)) => {
                "the store was busy; retried on the next run".to_owned()
            }
            Self::Store(_) => "the store failed (details in the service log)".to_owned(),
            Self::Failed(reason) => reason.clone(),
        }
    }
}

/// Why a runner could not run a job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobsError {
    /// No job has this name.
    #[error("no job is named {0:?}")]
    UnknownJob(String),
    /// The store failed while taking or releasing the lease.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a job has to work with.
pub struct JobContext {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    connections: Connections,
    /// Set by a built-in job that found nothing to do. Its run is then logged at debug level:
    /// the webhook job alone runs every 5 s, and an operator reads only the runs that did
    /// something or failed.
    idle: AtomicBool,
}

impl JobContext {
    /// The service's store.
    pub fn store(&self) -> &dyn Store {
        &*self.store
    }

    /// The service's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Marks the run as having found nothing to do, when `nothing_done` holds.
    fn idle_when(&self, nothing_done: bool) {
        self.idle.store(nothing_done, Ordering::Relaxed);
    }
}

/// A background job. Its runs never overlap, on one instance or across instances sharing a
/// store.
#[async_trait]
pub trait Job: Send + Sync + 'static {
    /// Runs once; a short summary of what was done on success.
    async fn run(&self, ctx: &JobContext) -> Result<String, JobError>;
}

struct Registered {
    name: String,
    every: Option<Duration>,
    job: Arc<dyn Job>,
}

/// The jobs of one service, ready to run on a schedule ([`JobRunner::spawn`]) or on demand
/// ([`JobRunner::run_once`]). Get one from [`crate::AggregationService::jobs`].
pub struct JobRunner {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    connections: Connections,
    owner: String,
    jobs: Vec<Registered>,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::Metrics>,
    /// The one HTTP client of webhook deliveries (the job's and the wake's), or why there is
    /// none.
    #[cfg(feature = "webhooks")]
    webhook_sender: Result<crate::webhooks::delivery::Deliverer, String>,
    /// The service's bus of committed events, which wakes webhook delivery.
    #[cfg(feature = "webhooks")]
    events: Option<crate::events::EventBus>,
}

impl std::fmt::Debug for JobRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRunner")
            .field("owner", &self.owner)
            .field(
                "jobs",
                &self
                    .jobs
                    .iter()
                    .map(|job| (&job.name, job.every))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The jobs every service has, with their configured intervals (`None`: off).
pub(crate) fn builtin_schedule(config: &Config) -> [(&'static str, Option<Duration>); 4] {
    [
        (
            REFRESH_PROVIDER_TOKENS,
            config.refresh_provider_tokens_every(),
        ),
        (PURGE_EXPIRED, config.purge_expired_every()),
        (SYNC_CONNECTIONS, config.sync_connections_every()),
        // Off in a build without the `webhooks` feature: it could only fail.
        (
            DELIVER_WEBHOOKS,
            config
                .deliver_webhooks_every()
                .filter(|_| cfg!(feature = "webhooks")),
        ),
    ]
}

/// `at + duration`, saturating instead of overflowing (however long the configured interval).
fn add(at: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    dates::later(at, dates::delta(duration))
}

/// `at - duration`, saturating instead of overflowing.
fn sub(at: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    dates::earlier(at, dates::delta(duration))
}

impl JobRunner {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        config: Arc<Config>,
        connections: Connections,
    ) -> Self {
        let mut runner = Self {
            #[cfg(feature = "webhooks")]
            webhook_sender: crate::webhooks::delivery::Sender::new(&config)
                .map(crate::webhooks::delivery::Deliverer::new),
            #[cfg(feature = "webhooks")]
            events: None,
            store,
            config,
            connections,
            owner: format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()),
            jobs: Vec::new(),
            #[cfg(feature = "metrics")]
            metrics: None,
        };
        for (name, every) in builtin_schedule(&runner.config) {
            let job: Arc<dyn Job> = match name {
                PURGE_EXPIRED => Arc::new(PurgeExpired),
                SYNC_CONNECTIONS => Arc::new(SyncConnections),
                DELIVER_WEBHOOKS => runner.deliver_webhooks_job(),
                _ => Arc::new(RefreshProviderTokens),
            };
            runner.jobs.push(Registered {
                name: name.to_owned(),
                every,
                job,
            });
        }
        runner
    }

    /// Registers [`ERASE_USERS`], which resumes interrupted erasures with `user_data`.
    pub(crate) fn with_user_data(mut self, user_data: crate::user_data::UserData) -> Self {
        self.jobs.push(Registered {
            name: ERASE_USERS.to_owned(),
            every: Some(ERASE_USERS_EVERY),
            job: Arc::new(EraseUsers(user_data)),
        });
        self
    }

    /// Counts every run into `metrics`.
    #[cfg(feature = "metrics")]
    pub(crate) fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Delivers webhooks right after each event published on `bus` (the service's), once
    /// spawned.
    #[cfg(feature = "webhooks")]
    pub(crate) fn with_event_bus(mut self, bus: crate::events::EventBus) -> Self {
        // The events delivery raises (`webhook.disabled`) reach the event stream.
        if let Ok(deliverer) = &self.webhook_sender {
            deliverer.publish_on(&bus);
        }
        self.events = Some(bus);
        self
    }

    /// The `deliver_webhooks` job: without the `webhooks` feature a job that fails saying so
    /// (deliveries stay queued for an instance built with it).
    fn deliver_webhooks_job(&self) -> Arc<dyn Job> {
        #[cfg(feature = "webhooks")]
        {
            Arc::new(DeliverWebhooks(self.webhook_sender.clone()))
        }
        #[cfg(not(feature = "webhooks"))]
        {
            Arc::new(DeliverWebhooks)
        }
    }

    /// Starts the prompt webhook delivery (`webhooks/wake.rs`) when delivery is on
    /// ([`Config::deliver_webhooks_every`]) and the runner has the service's event bus; its
    /// tasks, which end when `stop` changes. The runner lets go of the bus (it only needed a
    /// subscription), so the running jobs do not keep the service's bus alive.
    #[cfg(feature = "webhooks")]
    fn spawn_delivery_wake(&mut self, stop: &watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let (Some(bus), Some(_)) = (self.events.take(), self.config.deliver_webhooks_every())
        else {
            return Vec::new();
        };
        let Ok(sender) = &self.webhook_sender else {
            // Every run of the job records why there is no client; nothing to send with here.
            return Vec::new();
        };
        crate::webhooks::wake::spawn(
            &bus,
            self.store.clone(),
            self.config.clone(),
            sender.clone(),
            stop,
        )
        .into()
    }

    /// Adds a job (or replaces the one with this name) running every `every` (`None`: only
    /// through [`JobRunner::run_once`]).
    #[must_use]
    pub fn with_job(
        mut self,
        name: impl Into<String>,
        every: Option<Duration>,
        job: impl Job,
    ) -> Self {
        let name = name.into();
        self.jobs.retain(|registered| registered.name != name);
        self.jobs.push(Registered {
            name,
            every,
            job: Arc::new(job),
        });
        self
    }

    /// The lease owner id of this runner (process id and a random part).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Runs the named job now, whether or not it is due, unless another runner holds its
    /// lease ([`RunOutcome::Skipped`]). The run is recorded like a scheduled one.
    pub async fn run_once(&self, name: &str) -> Result<RunOutcome, JobsError> {
        let registered = self
            .jobs
            .iter()
            .find(|registered| registered.name == name)
            .ok_or_else(|| JobsError::UnknownJob(name.to_owned()))?;
        // Any earlier start counts as due.
        let due_before = add(now(), Duration::from_secs(24 * 3600));
        Ok(self.execute(registered, due_before).await?)
    }

    /// [`JobRunner::attempt`] inside a `job` span (job name and a fresh run id), so that what
    /// the job logs, provider calls included, can be tied to the run; counted into the metrics
    /// (feature `metrics`).
    async fn execute(
        &self,
        registered: &Registered,
        due_before: DateTime<Utc>,
    ) -> Result<RunOutcome, StoreError> {
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        let span = tracing::info_span!("job", job = %registered.name, run_id = %run_id);
        let attempt = self.attempt(registered, due_before).instrument(span).await;
        #[cfg(feature = "metrics")]
        if let (Some(metrics), Ok((outcome, ran_for))) = (&self.metrics, &attempt) {
            metrics.record_job(&registered.name, outcome, *ran_for);
        }
        attempt.map(|(outcome, _)| outcome)
    }

    /// Takes the lease, runs the job while renewing the lease, and records the run; the
    /// outcome, and how long the job ran when it did.
    async fn attempt(
        &self,
        registered: &Registered,
        due_before: DateTime<Utc>,
    ) -> Result<(RunOutcome, Option<Duration>), StoreError> {
        let name = registered.name.as_str();
        let ttl = self.config.job_lease_ttl();
        let started = now();
        if !self
            .store
            .try_acquire_job_lease(name, &self.owner, started, add(started, ttl), due_before)
            .await?
        {
            tracing::debug!(job = name, "job skipped: leased elsewhere or not due");
            return Ok((RunOutcome::Skipped, None));
        }
        // Whether the run does anything is known only at its end.
        tracing::debug!(job = name, "job started");
        let running_since = std::time::Instant::now();
        let ctx = JobContext {
            store: self.store.clone(),
            config: self.config.clone(),
            connections: self.connections.clone(),
            idle: AtomicBool::new(false),
        };
        let run = AssertUnwindSafe(registered.job.run(&ctx)).catch_unwind();
        tokio::pin!(run);
        let mut heartbeat = tokio::time::interval(ttl / 3);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        heartbeat.tick().await;
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                _ = heartbeat.tick() => {
                    match self.store.renew_job_lease(name, &self.owner, add(now(), ttl)).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(job = name, "job lease lost while running"),
                        Err(error) => tracing::warn!(job = name, error = %error, "job lease renewal failed"),
                    }
                }
            }
        };
        let ran_for = running_since.elapsed();
        let outcome = match result {
            Ok(Ok(summary)) => RunOutcome::Succeeded(summary),
            Ok(Err(error)) => {
                tracing::error!(job = name, error = %error, "job failed");
                RunOutcome::Failed(error.recorded())
            }
            Err(_) => {
                tracing::error!(job = name, "job panicked");
                RunOutcome::Failed("the job panicked".to_owned())
            }
        };
        let error = match &outcome {
            RunOutcome::Failed(error) => Some(error.as_str()),
            _ => None,
        };
        if !self
            .store
            .finish_job_run(name, &self.owner, now(), error)
            .await?
        {
            tracing::warn!(
                job = name,
                "job lease lapsed before the run finished; run not recorded"
            );
        }
        let idle = matches!(outcome, RunOutcome::Succeeded(_)) && ctx.idle.load(Ordering::Relaxed);
        if idle {
            tracing::debug!(job = name, outcome = %outcome, "job finished");
        } else {
            tracing::info!(job = name, outcome = %outcome, "job finished");
        }
        Ok((outcome, Some(ran_for)))
    }

    /// How long until the job is due according to the shared run record.
    async fn until_due(&self, name: &str, every: Duration) -> Result<Duration, StoreError> {
        let records = self.store.job_runs().await?;
        let last_started = records
            .iter()
            .find(|record| record.name == name)
            .and_then(|record| record.last_started_at);
        Ok(match last_started {
            None => Duration::ZERO,
            Some(at) => (add(at, every) - now()).to_std().unwrap_or(Duration::ZERO),
        })
    }

    /// The scheduling loop of one job.
    async fn schedule(
        self: Arc<Self>,
        index: usize,
        every: Duration,
        mut stop: watch::Receiver<bool>,
    ) {
        let Some(registered) = self.jobs.get(index) else {
            return;
        };
        let name = registered.name.as_str();
        // After a skip or a store failure, look again no sooner than this.
        let retry = every
            .min(Duration::from_secs(10))
            .max(Duration::from_millis(50));
        // Timers and clocks are not exact: a job counts as due this much early.
        let slack = (every / 50).min(Duration::from_secs(1));
        let mut backoff = Duration::ZERO;
        loop {
            let wait = match self.until_due(name, every).await {
                Ok(wait) => wait.max(backoff),
                Err(error) => {
                    tracing::warn!(job = name, error = %error, "reading the job schedule failed");
                    retry
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
            if *stop.borrow() {
                break;
            }
            let due_before = add(sub(now(), every), slack);
            backoff = match self.execute(registered, due_before).await {
                Ok(RunOutcome::Skipped) => retry,
                Ok(_) => Duration::ZERO,
                Err(error) => {
                    tracing::error!(job = name, error = %error, "job lease handling failed");
                    retry
                }
            };
        }
        tracing::debug!(job = name, "job schedule stopped");
    }

    /// Starts every job that has an interval on the current Tokio runtime. Must be called
    /// inside a runtime.
    ///
    /// With the `webhooks` feature and webhook delivery on
    /// ([`Config::deliver_webhooks_every`] is `Some`), this also starts delivering webhooks
    /// right after each commit: every event with a user published by this service from now on
    /// (or relayed to it from another instance) starts a delivery pass, the same claim, send
    /// and record as a run of [`DELIVER_WEBHOOKS`], without waiting for that job. Passes are
    /// coalesced (one at a time, at most one more pending, whatever the number of events) and
    /// never send a delivery that the job or another instance has claimed. The
    /// [`JobsHandle`] stops them with the schedules.
    pub fn spawn(self) -> JobsHandle {
        let (stop, receiver) = watch::channel(false);
        #[cfg(feature = "webhooks")]
        let (runner, wake) = {
            let mut runner = self;
            let wake = runner.spawn_delivery_wake(&receiver);
            (runner, wake)
        };
        #[cfg(not(feature = "webhooks"))]
        let (runner, wake) = (self, Vec::new());
        let runner = Arc::new(runner);
        let tasks = runner
            .jobs
            .iter()
            .enumerate()
            .filter_map(|(index, registered)| registered.every.map(|every| (index, every)))
            .map(|(index, every)| {
                tokio::spawn(runner.clone().schedule(index, every, receiver.clone()))
            })
            .chain(wake)
            .collect();
        JobsHandle { stop, tasks }
    }
}

/// The running jobs of a [`JobRunner::spawn`]. Dropping it stops the schedules as
/// [`JobsHandle::shutdown`] does, without waiting.
#[must_use = "dropping the handle stops the jobs"]
#[derive(Debug)]
pub struct JobsHandle {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl JobsHandle {
    /// Stops the schedules (and the webhook delivery that follows commits) and waits: a job
    /// that is running finishes (and is recorded) first, as does a delivery pass (its
    /// attempts recorded).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            if let Err(error) = task.await {
                tracing::error!(error = %error, "a job schedule ended abnormally");
            }
        }
    }
}

struct RefreshProviderTokens;

#[async_trait]
impl Job for RefreshProviderTokens {
    async fn run(&self, ctx: &JobContext) -> Result<String, JobError> {
        let (refreshed, failed) = ctx.connections.refresh_due_tokens().await?;
        ctx.idle_when(refreshed == 0 && failed == 0);
        let summary = format!("refreshed tokens of {refreshed} connections, {failed} failed");
        if failed > 0 && refreshed == 0 {
            return Err(JobError::Failed(summary));
        }
        Ok(summary)
    }
}

struct SyncConnections;

#[async_trait]
impl Job for SyncConnections {
    async fn run(&self, ctx: &JobContext) -> Result<String, JobError> {
        // Connections synced within the job's own interval are not due; without an interval
        // (run on demand), any connection not synced in the last minute is.
        let every = ctx
            .config()
            .sync_connections_every()
            .unwrap_or(Duration::from_secs(60));
        let crate::providers::sync::ScheduledSyncs {
            synced,
            failed,
            skipped,
        } = ctx.connections.sync_due_connections(every).await?;
        ctx.idle_when(synced == 0 && failed == 0);
        let summary = format!(
            "synced {synced} connections, {failed} failed, {skipped} skipped (provider request budget spent)"
        );
        if failed > 0 && synced == 0 {
            return Err(JobError::Failed(summary));
        }
        Ok(summary)
    }
}

#[cfg(feature = "webhooks")]
struct DeliverWebhooks(Result<crate::webhooks::delivery::Deliverer, String>);

#[cfg(feature = "webhooks")]
#[async_trait]
impl Job for DeliverWebhooks {
    async fn run(&self, ctx: &JobContext) -> Result<String, JobError> {
        let sender = self
            .0
            .as_ref()
            .map_err(|error| JobError::Failed(format!("no HTTP client: {error}")))?;
        let run =
            crate::webhooks::delivery::deliver_due(ctx.store(), ctx.config(), sender, None).await?;
        ctx.idle_when(run.attempted() == 0);
        Ok(format!(
            "delivered {} webhooks, {} to retry, {} given up",
            run.delivered, run.retrying, run.given_up
        ))
    }
}

#[cfg(not(feature = "webhooks"))]
struct DeliverWebhooks;

#[cfg(not(feature = "webhooks"))]
#[async_trait]
impl Job for DeliverWebhooks {
    async fn run(&self, _: &JobContext) -> Result<String, JobError> {
        Err(JobError::Failed(
            "this build has no webhooks feature: deliveries stay queued".to_owned(),
        ))
    }
}

struct EraseUsers(crate::user_data::UserData);

#[async_trait]
impl Job for EraseUsers {
    async fn run(&self, ctx: &JobContext) -> Result<String, JobError> {
        let run = self.0.work_through(None).await?;
        ctx.idle_when(run.finished == 0);
        Ok(format!(
            "finished {} user erasures, {} rows deleted",
            run.finished, run.deleted_rows
        ))
    }
}

struct PurgeExpired;

#[async_trait]
impl Job for PurgeExpired {
    async fn run(&self, ctx: &JobContext) -> Result<String, JobError> {
        let at = now();
        let counts = ctx
            .store()
            .purge_expired(at, sub(at, ctx.config().purge_retention()))
            .await?;
        let events = ctx
            .store()
            .purge_events_before(sub(at, ctx.config().audit_retention()))
            .await?;
        // Finished webhook deliveries (with their attempts) are kept as long as sessions.
        let deliveries = ctx
            .store()
            .purge_webhook_deliveries_before(sub(at, ctx.config().purge_retention()))
            .await?;
        // A network unused for longer is no longer known to the login throttle anyway.
        let login_networks = ctx
            .store()
            .purge_login_networks_before(crate::dates::earlier(
                at,
                crate::auth::known_network_span(),
            ))
            .await?;
        ctx.idle_when(
            [
                counts.one_time_tokens,
                counts.refresh_tokens,
                counts.sessions,
                counts.oauth_states,
                events,
                deliveries,
                login_networks,
            ]
            .iter()
            .all(|&deleted| deleted == 0),
        );
        Ok(format!(
            "deleted {} one-time tokens, {} refresh tokens, {} sessions, {} OAuth states, \
             {events} events, {deliveries} webhook deliveries, {login_networks} login networks",
            counts.one_time_tokens, counts.refresh_tokens, counts.sessions, counts.oauth_states
        ))
    }
}

/// The state of one built-in job, from the shared run records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    /// Job name.
    pub name: String,
    /// Whether it runs on a schedule.
    pub enabled: bool,
    /// Its interval; `None` when off.
    pub interval_seconds: Option<u64>,
    /// Whether a runner holds its lease now.
    pub running: bool,
    /// Start of the latest run.
    pub last_started_at: Option<DateTime<Utc>>,
    /// End of the latest finished run.
    pub last_finished_at: Option<DateTime<Utc>>,
    /// End of the latest successful run.
    pub last_success_at: Option<DateTime<Utc>>,
    /// Error of the latest run; `None` when it succeeded.
    pub last_error: Option<String>,
    /// Finished runs.
    pub runs: i64,
    /// Failed runs.
    pub failures: i64,
    /// When it is due next (interval after its last start); `None` when off or never started.
    pub next_run_at: Option<DateTime<Utc>>,
}

/// The state of the background jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobsStatus {
    /// `false` when an enabled job's latest run failed, a job is overdue by more than one
    /// interval, or a lease lapsed mid-run (an instance died).
    pub healthy: bool,
    /// The built-in jobs.
    pub jobs: Vec<JobStatus>,
}

/// The built-in jobs' state from the store's run records.
pub async fn status(store: &dyn Store, config: &Config) -> Result<JobsStatus, StoreError> {
    let records = store.job_runs().await?;
    let at = now();
    let mut healthy = true;
    let jobs = builtin_schedule(config)
        .into_iter()
        .map(|(name, every)| {
            let record = records
                .iter()
                .find(|record| record.name == name)
                .cloned()
                .unwrap_or_else(|| JobRunRecord {
                    name: name.to_owned(),
                    lease_owner: None,
                    lease_expires_at: None,
                    last_started_at: None,
                    last_finished_at: None,
                    last_success_at: None,
                    last_error: None,
                    runs: 0,
                    failures: 0,
                });
            let leased = record.lease_owner.is_some();
            let running = leased && record.lease_expires_at.is_some_and(|until| until > at);
            let next_run_at = every.and_then(|every| record.last_started_at.map(|s| add(s, every)));
            if let Some(every) = every {
                let overdue = next_run_at
                    .is_some_and(|next| add(add(next, every), config.job_lease_ttl()) < at);
                if record.last_error.is_some() || overdue || (leased && !running) {
                    healthy = false;
                }
            }
            JobStatus {
                name: record.name,
                enabled: every.is_some(),
                interval_seconds: every.map(|every| every.as_secs()),
                running,
                last_started_at: record.last_started_at,
                last_finished_at: record.last_finished_at,
                last_success_at: record.last_success_at,
                last_error: record.last_error,
                runs: record.runs,
                failures: record.failures,
                next_run_at,
            }
        })
        .collect();
    Ok(JobsStatus { healthy, jobs })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use tracing::Level;

    use super::*;
    use crate::AggregationService;
    use crate::mail::MemoryMailer;
    use crate::store::SqliteStore;
    use crate::testing::CapturedLog;

    /// A job that always has done something (a custom job never reports itself idle).
    struct DidSomething;

    #[async_trait]
    impl Job for DidSomething {
        async fn run(&self, _: &JobContext) -> Result<String, JobError> {
            Ok("did one thing".to_owned())
        }
    }

    /// A job that always fails.
    struct AlwaysFails;

    #[async_trait]
    impl Job for AlwaysFails {
        async fn run(&self, _: &JobContext) -> Result<String, JobError> {
            Err(JobError::Failed("nothing works".to_owned()))
        }
    }

    /// The jobs of a service over an empty store, where the built-in jobs find nothing to do.
    async fn runner() -> JobRunner {
        let config = Config::new("http://localhost:8080", vec![7; 32]).expect("config");
        AggregationService::builder(config)
            .store(SqliteStore::in_memory().await.expect("store"))
            .mailer(MemoryMailer::new())
            .build()
            .expect("service")
            .jobs()
            .with_job("did_something", None, DidSomething)
            .with_job("always_fails", None, AlwaysFails)
    }

    /// What one run of `job` logs at `level` and above (the test runtime runs on this thread).
    async fn logged(runner: &JobRunner, job: &str, level: Level) -> Vec<String> {
        let captured = CapturedLog::default();
        let guard = tracing::subscriber::set_default(captured.subscriber(level));
        runner.run_once(job).await.expect("runs");
        drop(guard);
        captured.lines()
    }

    #[tokio::test]
    async fn an_idle_run_logs_at_debug_only() {
        let runner = runner().await;
        let mut idle = vec![PURGE_EXPIRED, REFRESH_PROVIDER_TOKENS, SYNC_CONNECTIONS];
        if cfg!(feature = "webhooks") {
            idle.push(DELIVER_WEBHOOKS);
        }
        for job in idle {
            let info = logged(&runner, job, Level::INFO).await;
            assert!(info.is_empty(), "{job} logged at info: {info:#?}");
            let debug = logged(&runner, job, Level::DEBUG).await;
            assert!(
                debug
                    .iter()
                    .any(|line| line.contains("DEBUG") && line.contains("job finished")),
                "{job}: {debug:#?}"
            );
        }
    }

    #[tokio::test]
    async fn a_run_that_did_something_or_failed_logs_at_info() {
        let runner = runner().await;
        let info = logged(&runner, "did_something", Level::INFO).await;
        assert_eq!(info.len(), 1, "{info:#?}");
        assert!(info[0].contains("INFO"), "{}", info[0]);
        assert!(
            info[0].contains("job finished") && info[0].contains("succeeded: did one thing"),
            "{}",
            info[0]
        );
        let info = logged(&runner, "always_fails", Level::INFO).await;
        assert!(
            info.iter()
                .any(|line| line.contains("ERROR") && line.contains("job failed")),
            "{info:#?}"
        );
        assert!(
            info.iter().any(|line| line.contains("INFO")
                && line.contains("job finished")
                && line.contains("failed: nothing works")),
            "{info:#?}"
        );
    }
}
