//! Bounded CPU- and memory-heavy work on threads of its own.
//!
//! Password hashing takes 19 MiB and tens of milliseconds of one core; parsing a large OFX file
//! takes a core as well. Left unbounded, a login storm starts one blocking thread per request,
//! each with its own memory, until the process holds gigabytes. A [`WorkGate`] owns
//! `concurrent` worker threads and a queue of `queued` jobs; a job that finds the queue full is
//! refused at once ([`WorkError::Busy`], answered as 503 with `Retry-After`).
//!
//! The workers run at the lowest scheduling priority the OS gives an unprivileged thread
//! (`SCHED_BATCH`, nice 19 on Linux): when the cores are all hashing, a request that needs a
//! few microseconds of CPU (a read, a refresh) still gets it at once, and the hashes take the
//! rest. Alone, a low-priority thread runs as fast as any other.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};

use crate::config::WorkLimits;

/// Why heavy work did not run to completion.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum WorkError {
    /// As many jobs as allowed are running and waiting already.
    #[error("too much {0} is running or waiting already")]
    Busy(&'static str),
    /// The job panicked, or no worker thread could be started.
    #[error("{kind} failed: {reason}")]
    Failed {
        /// The kind of work.
        kind: &'static str,
        /// What went wrong.
        reason: String,
    },
}

/// A job as the workers see it: it sends its own result.
type Job = Box<dyn FnOnce() + Send>;

/// Admits heavy jobs within [`WorkLimits`] (at most `concurrent + queued` running or waiting)
/// and runs them on its own worker threads.
///
/// Cheap to clone. The workers stop once every clone is dropped and the queue is empty.
#[derive(Debug, Clone)]
pub(crate) struct WorkGate {
    kind: &'static str,
    jobs: SyncSender<Job>,
    /// Jobs running or waiting, against `capacity`: counted here rather than by the channel,
    /// so that a worker thread still starting does not shrink the queue.
    admitted: Arc<AtomicUsize>,
    capacity: usize,
}

/// A place among the admitted jobs, given back when the job has run or was dropped unrun.
struct Admission(Arc<AtomicUsize>);

/// How many jobs a [`WorkGate`] has running or waiting, for a job that wants to know whether
/// others follow it.
#[derive(Debug, Clone)]
pub(crate) struct Occupancy(Arc<AtomicUsize>);

impl Occupancy {
    /// Jobs running or waiting now (a running job counts itself until it returns).
    pub(crate) fn admitted(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl WorkGate {
    /// A gate for `kind` work ("password hashing", "OFX parsing") within `limits`: starts
    /// `limits.concurrent` (at least one) worker threads.
    pub(crate) fn new(kind: &'static str, limits: WorkLimits) -> Self {
        let concurrent = limits.concurrent.max(1);
        let capacity = concurrent.saturating_add(limits.queued);
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(capacity);
        let queue = Arc::new(Mutex::new(queue));
        let mut started = 0;
        for index in 0..concurrent {
            let queue = Arc::clone(&queue);
            let spawned = std::thread::Builder::new()
                .name(format!("aggregation-work-{index}"))
                .spawn(move || work(&queue));
            match spawned {
                Ok(_) => started += 1,
                Err(error) => tracing::error!(kind, error = %error, "could not start a worker"),
            }
        }
        if started == 0 {
            // Nothing would ever take a job: let every job fail instead of waiting forever.
            drop(queue);
        }
        Self {
            kind,
            jobs,
            admitted: Arc::new(AtomicUsize::new(0)),
            capacity,
        }
    }

    /// The gate's count of running and waiting jobs.
    pub(crate) fn occupancy(&self) -> Occupancy {
        Occupancy(Arc::clone(&self.admitted))
    }

    /// Runs `job` on a worker once one is free, or refuses at once when the queue is full. A
    /// job whose caller stopped waiting before a worker took it is skipped.
    pub(crate) async fn run<T, F>(&self, job: F) -> Result<T, WorkError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let admission = Admission(Arc::clone(&self.admitted));
        if self.admitted.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            return Err(WorkError::Busy(self.kind));
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            if reply.is_closed() {
                return;
            }
            let outcome = job();
            // The place is given back before the caller hears the answer: a caller that goes on
            // to the next job must find it free, even when this low-priority worker is then
            // descheduled for a while (a login right after a registration was refused as busy).
            drop(admission);
            let _ = reply.send(outcome);
        });
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(WorkError::Busy(self.kind)),
            Err(TrySendError::Disconnected(_)) => {
                return Err(self.failed("no worker thread is running"));
            }
        }
        answer.await.map_err(|_| self.failed("the job panicked"))
    }

    fn failed(&self, reason: &str) -> WorkError {
        WorkError::Failed {
            kind: self.kind,
            reason: reason.to_owned(),
        }
    }
}

/// A worker: takes jobs until every sender is gone.
fn work(queue: &Mutex<Receiver<Job>>) {
    lower_priority();
    loop {
        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = next else { return };
        // A panicking job drops its reply (its caller sees `Failed`); the worker carries on.
        if std::panic::catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!("a heavy job panicked");
        }
    }
}

/// Puts the calling thread behind request handling: `SCHED_BATCH` at the lowest priority.
#[cfg(unix)]
fn lower_priority() {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    let lowered = set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch),
    );
    if let Err(error) = lowered {
        tracing::debug!(error = ?error, "could not lower a worker's priority");
    }
}

#[cfg(not(unix))]
fn lower_priority() {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future as _;
    use std::sync::mpsc;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refuses_beyond_running_plus_queued_and_recovers() {
        let gate = WorkGate::new(
            "test work",
            WorkLimits {
                concurrent: 1,
                queued: 1,
            },
        );
        let (started, wait_started) = mpsc::channel::<()>();
        let (release, wait) = mpsc::channel::<()>();
        let blocker = {
            let gate = gate.clone();
            tokio::spawn(async move {
                gate.run(move || {
                    let _ = started.send(());
                    wait.recv().is_ok()
                })
                .await
            })
        };
        wait_started
            .recv_timeout(Duration::from_secs(10))
            .expect("the worker took the first job");
        // Polled once, the second job takes the one place in the queue.
        let mut queued = std::pin::pin!(gate.run(|| 7));
        let first_poll =
            std::future::poll_fn(|cx| std::task::Poll::Ready(queued.as_mut().poll(cx))).await;
        assert!(first_poll.is_pending());
        assert!(matches!(gate.run(|| 1).await, Err(WorkError::Busy(_))));
        release.send(()).expect("the blocker waits");
        assert!(blocker.await.expect("joined").expect("ran"));
        assert_eq!(queued.await.expect("ran"), 7);
        assert_eq!(gate.run(|| 3).await.expect("room again"), 3);
    }

    #[tokio::test]
    async fn a_job_gives_its_place_back_before_its_caller_hears_the_answer() {
        let gate = WorkGate::new(
            "test work",
            WorkLimits {
                concurrent: 1,
                queued: 0,
            },
        );
        for round in 0..100 {
            assert_eq!(gate.run(move || round).await.expect("room"), round);
            assert_eq!(gate.occupancy().admitted(), 0, "round {round}");
        }
    }

    #[tokio::test]
    async fn a_panicking_job_fails_alone() {
        let gate = WorkGate::new(
            "test work",
            WorkLimits {
                concurrent: 1,
                queued: 4,
            },
        );
        let failed = gate.run(|| -> u8 { panic!("boom") }).await;
        assert!(matches!(failed, Err(WorkError::Failed { .. })));
        assert_eq!(gate.run(|| 5).await.expect("the worker lives on"), 5);
    }
}
