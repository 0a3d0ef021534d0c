//! The log of a backing service's outage (the store, the rate-limit store): one line when it
//! starts, with the first error; a count of the calls it failed every [`REPORT_EVERY`] while it
//! lasts; one line when it ends. Never a line per failed call, so an outage under load cannot
//! flood the log (a Redis outage used to write two lines per request).
//!
//! The ongoing count is written by the first failure after [`REPORT_EVERY`] has passed, so a
//! quiet outage writes nothing until a call fails again or one succeeds.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often an ongoing outage is reported.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(10);

/// One backing service's outage state; share it between every caller of that service.
#[derive(Debug)]
pub(crate) struct OutageLog {
    /// What is down, for the log lines ("store", "rate-limit store").
    dependency: &'static str,
    /// What the service does meanwhile, for the first line.
    meanwhile: &'static str,
    /// Whether an outage is under way: lets every successful call skip the lock.
    ongoing: AtomicBool,
    outage: Mutex<Option<Outage>>,
}

#[derive(Debug)]
struct Outage {
    started: Instant,
    reported: Instant,
    failed: u64,
    failed_since_report: u64,
}

/// What a call's outcome asks to write, decided under the lock and written after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Report {
    Nothing,
    Started,
    Ongoing { failed: u64, lasted: Duration },
    Ended { failed: u64, lasted: Duration },
}

impl OutageLog {
    /// The log of `dependency`'s outages; `meanwhile` says what the service does while it is
    /// down ("requests are answered 503").
    pub(crate) const fn new(dependency: &'static str, meanwhile: &'static str) -> Self {
        Self {
            dependency,
            meanwhile,
            ongoing: AtomicBool::new(false),
            outage: Mutex::new(None),
        }
    }

    /// Whether an outage is under way.
    pub(crate) fn is_ongoing(&self) -> bool {
        self.ongoing.load(Ordering::Relaxed)
    }

    /// A call failed because the service is down; `error` is logged only if it starts an
    /// outage.
    pub(crate) fn failure(&self, error: &dyn Display) {
        self.failure_started_by(error, || {
            tracing::error!(
                dependency = self.dependency,
                error = %error,
                "{} outage started: {}; logged again every {} s while it lasts",
                self.dependency,
                self.meanwhile,
                REPORT_EVERY.as_secs(),
            );
        });
    }

    /// [`OutageLog::failure`] for a caller that knows more about the failed call than the
    /// error (the rate limiter: the endpoint and the client): `log_start` writes the
    /// outage's first line, and runs only when this failure starts an outage. The count
    /// while it lasts and the line when it ends are the same as for every outage.
    pub(crate) fn failure_started_by(&self, error: &dyn Display, log_start: impl FnOnce()) {
        match self.failed_at(Instant::now()) {
            Report::Started => log_start(),
            Report::Ongoing { failed, lasted } => tracing::warn!(
                dependency = self.dependency,
                failed_calls = failed,
                outage_seconds = lasted.as_secs(),
                last_error = %error,
                "{} outage ongoing: {failed} calls failed in the last {} s",
                self.dependency,
                REPORT_EVERY.as_secs(),
            ),
            Report::Nothing | Report::Ended { .. } => {}
        }
    }

    /// A call succeeded: ends an outage under way.
    pub(crate) fn success(&self) {
        if !self.is_ongoing() {
            return;
        }
        if let Report::Ended { failed, lasted } = self.succeeded_at(Instant::now()) {
            tracing::warn!(
                dependency = self.dependency,
                failed_calls = failed,
                outage_seconds = lasted.as_secs(),
                "{} outage ended after {} ms; {failed} calls failed during it",
                self.dependency,
                lasted.as_millis(),
            );
        }
    }

    fn failed_at(&self, now: Instant) -> Report {
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(outage) = outage.as_mut() else {
            *outage = Some(Outage {
                started: now,
                reported: now,
                failed: 1,
                failed_since_report: 0,
            });
            self.ongoing.store(true, Ordering::Relaxed);
            return Report::Started;
        };
        outage.failed += 1;
        outage.failed_since_report += 1;
        if now.saturating_duration_since(outage.reported) < REPORT_EVERY {
            return Report::Nothing;
        }
        let failed = std::mem::take(&mut outage.failed_since_report);
        outage.reported = now;
        Report::Ongoing {
            failed,
            lasted: now.saturating_duration_since(outage.started),
        }
    }

    fn succeeded_at(&self, now: Instant) -> Report {
        let mut outage = self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        self.ongoing.store(false, Ordering::Relaxed);
        match outage.take() {
            Some(ended) => Report::Ended {
                failed: ended.failed,
                lasted: now.saturating_duration_since(ended.started),
            },
            None => Report::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_reports_its_start_a_count_every_period_and_its_end() {
        let log = OutageLog::new("store", "requests are answered 503");
        let start = Instant::now();
        assert_eq!(log.failed_at(start), Report::Started);
        for second in 1..10 {
            assert_eq!(
                log.failed_at(start + Duration::from_secs(second)),
                Report::Nothing
            );
        }
        assert_eq!(
            log.failed_at(start + REPORT_EVERY),
            Report::Ongoing {
                failed: 10,
                lasted: REPORT_EVERY
            }
        );
        assert_eq!(
            log.failed_at(start + REPORT_EVERY + Duration::from_secs(1)),
            Report::Nothing
        );
        assert!(log.is_ongoing());
        assert_eq!(
            log.succeeded_at(start + Duration::from_secs(12)),
            Report::Ended {
                failed: 12,
                lasted: Duration::from_secs(12)
            }
        );
        assert!(!log.is_ongoing());
        assert_eq!(log.succeeded_at(start), Report::Nothing);
        // The next failure starts a new outage.
        assert_eq!(
            log.failed_at(start + Duration::from_secs(20)),
            Report::Started
        );
    }

    #[test]
    fn a_hundred_failed_calls_write_one_line_and_the_recovery_one_more() {
        let captured = crate::testing::CapturedLog::default();
        let subscriber = captured.subscriber(tracing::Level::INFO);
        let log = OutageLog::new("rate-limit store", "requests are allowed unlimited");
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..100 {
                log.failure(&"connection refused");
            }
            log.success();
            log.success();
        });
        let lines = captured.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("ERROR"), "{}", lines[0]);
        assert!(
            lines[0].contains("rate-limit store outage started"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("connection refused"), "{}", lines[0]);
        assert!(lines[1].contains("outage ended"), "{}", lines[1]);
        assert!(lines[1].contains("100 calls failed"), "{}", lines[1]);
    }
}
