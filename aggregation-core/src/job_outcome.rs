//! How a background job's run ended: what the runner ([`crate::jobs`]) answers and, with the
//! feature `metrics`, the metrics count; kept apart so that neither depends on the other.

/// How one attempt to run a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// It ran and succeeded.
    Succeeded(String),
    /// It ran and failed (also recorded as `last_error`).
    Failed(String),
    /// It did not run: another runner holds the lease (or, for scheduled runs, it is not due).
    Skipped,
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Succeeded(summary) => write!(f, "succeeded: {summary}"),
            Self::Failed(error) => write!(f, "failed: {error}"),
            Self::Skipped => f.write_str("skipped: leased"),
        }
    }
}
