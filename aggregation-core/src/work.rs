//! Bounded CPU- and memory-heavy work on tokio's blocking pool.
//!
//! Password hashing takes 19 MiB and tens of milliseconds of one core; parsing a large OFX file
//! takes a core as well. Left unbounded, a login storm starts one blocking thread per request,
//! each with its own memory, until the process holds gigabytes. A [`WorkGate`] lets at most
//! `concurrent` jobs run and `queued` more wait; past that the caller is told to come back
//! later ([`WorkError::Busy`], answered as 503 with `Retry-After`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Semaphore;

use crate::config::WorkLimits;

/// Why heavy work did not run to completion.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkError {
    /// As many jobs as allowed are running and waiting already.
    #[error("too much {0} is running or waiting already")]
    Busy(&'static str),
    /// The blocking task panicked or was cancelled.
    #[error("{kind} failed: {reason}")]
    Failed {
        /// The kind of work.
        kind: &'static str,
        /// What the runtime reported.
        reason: String,
    },
}

/// Admits heavy jobs within [`WorkLimits`] and runs them on the blocking pool.
#[derive(Debug, Clone)]
pub(crate) struct WorkGate {
    kind: &'static str,
    running: Arc<Semaphore>,
    admitted: Arc<AtomicUsize>,
    capacity: usize,
}

/// A place among the admitted jobs, given back when the job ends or its caller gives up.
struct Admission(Arc<AtomicUsize>);

impl Drop for Admission {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl WorkGate {
    /// A gate for `kind` work ("password hashing", "OFX parsing") within `limits`.
    pub(crate) fn new(kind: &'static str, limits: WorkLimits) -> Self {
        let concurrent = limits.concurrent.max(1);
        Self {
            kind,
            running: Arc::new(Semaphore::new(concurrent)),
            admitted: Arc::new(AtomicUsize::new(0)),
            capacity: concurrent.saturating_add(limits.queued),
        }
    }

    fn admit(&self) -> Result<Admission, WorkError> {
        let admitted = self.admitted.fetch_add(1, Ordering::AcqRel);
        let admission = Admission(Arc::clone(&self.admitted));
        if admitted >= self.capacity {
            return Err(WorkError::Busy(self.kind));
        }
        Ok(admission)
    }

    /// Runs `job` on the blocking pool once a slot is free, or refuses at once when the queue
    /// is full. The slot stays taken until the job returns, even when the caller stops waiting,
    /// so an abandoned request cannot make room for more work than the limits allow.
    pub(crate) async fn run<T, F>(&self, job: F) -> Result<T, WorkError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let admission = self.admit()?;
        let permit = Arc::clone(&self.running)
            .acquire_owned()
            .await
            .map_err(|error| WorkError::Failed {
                kind: self.kind,
                reason: error.to_string(),
            })?;
        tokio::task::spawn_blocking(move || {
            let _slot = (permit, admission);
            job()
        })
        .await
        .map_err(|error| WorkError::Failed {
            kind: self.kind,
            reason: error.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let (release, wait) = mpsc::channel::<()>();
        let wait = Arc::new(std::sync::Mutex::new(wait));
        let blocker = {
            let gate = gate.clone();
            let wait = Arc::clone(&wait);
            tokio::spawn(async move {
                gate.run(move || wait.lock().map(|rx| rx.recv().is_ok()).unwrap_or(false))
                    .await
            })
        };
        let queued = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.run(|| 7).await })
        };
        // Both the running and the queued job hold their places before the third arrives.
        while gate.admitted.load(Ordering::Acquire) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(matches!(gate.run(|| 1).await, Err(WorkError::Busy(_))));
        release.send(()).expect("the blocker waits");
        assert!(blocker.await.expect("joined").expect("ran"));
        assert_eq!(queued.await.expect("joined").expect("ran"), 7);
        assert_eq!(gate.run(|| 3).await.expect("room again"), 3);
        assert_eq!(gate.admitted.load(Ordering::Acquire), 0);
    }
}
