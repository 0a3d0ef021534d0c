//! The spec's three rate-limit domain events and where they go.
//!
//! ```
//! use aggregation_core::rate_limit::RateLimitEvent;
//!
//! let e = RateLimitEvent::Attempted {
//!     endpoint: "POST /api/v1/sessions".into(),
//!     identifier: "203.0.113.9".into(),
//!     scope: "IP".into(),
//!     cost: 1,
//! };
//! assert_eq!(e.name(), "RateLimitCheckAttempted");
//! ```

#[cfg(test)]
use std::sync::Mutex;

use serde::Serialize;

/// One event around a rate-limit check, with the spec's field names. Serialized with an
/// `event` field holding the spec's event name (`RateLimitCheckAttempted`, …).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event")]
#[non_exhaustive]
pub enum RateLimitEvent {
    /// `RateLimitCheckAttempted`: before each check.
    #[serde(rename = "RateLimitCheckAttempted")]
    Attempted {
        /// `METHOD /route/template`.
        endpoint: String,
        /// Whose bucket: an IP, a user id, `user:provider`, or `global`.
        identifier: String,
        /// `IP`, `USER`, `USER_PROVIDER`, `USER_ACCOUNT` or `GLOBAL` (the scope applied, after
        /// any fallback to IP).
        scope: String,
        /// Tokens the request costs.
        cost: u32,
    },
    /// `RateLimitCheckAllowed`: the request was allowed.
    #[serde(rename = "RateLimitCheckAllowed")]
    Allowed {
        /// `METHOD /route/template`.
        endpoint: String,
        /// Whose bucket.
        identifier: String,
        /// The scope applied.
        scope: String,
        /// Tokens left, rounded down.
        remaining_tokens: u64,
        /// Time spent in the check, milliseconds.
        execution_time_ms: f64,
    },
    /// `RateLimitCheckDenied`: the request was refused.
    #[serde(rename = "RateLimitCheckDenied")]
    Denied {
        /// `METHOD /route/template`.
        endpoint: String,
        /// Whose bucket.
        identifier: String,
        /// The scope applied.
        scope: String,
        /// Seconds until the request could be allowed.
        retry_after: f64,
        /// Time spent in the check, milliseconds.
        execution_time_ms: f64,
    },
}

impl RateLimitEvent {
    /// The spec's event name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Attempted { .. } => "RateLimitCheckAttempted",
            Self::Allowed { .. } => "RateLimitCheckAllowed",
            Self::Denied { .. } => "RateLimitCheckDenied",
        }
    }
}

/// Receives rate-limit events. Called inline on the request path: keep it cheap and never
/// block.
pub(crate) trait RateLimitEvents: Send + Sync {
    /// Handle one event.
    fn emit(&self, event: &RateLimitEvent);
}

/// Writes every event with `tracing` at debug level.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TracingEvents;

impl RateLimitEvents for TracingEvents {
    fn emit(&self, event: &RateLimitEvent) {
        match event {
            RateLimitEvent::Attempted {
                endpoint,
                identifier,
                scope,
                cost,
            } => tracing::debug!(
                event = event.name(),
                endpoint = %endpoint,
                identifier = %identifier,
                scope = %scope,
                cost = *cost,
            ),
            RateLimitEvent::Allowed {
                endpoint,
                identifier,
                scope,
                remaining_tokens,
                execution_time_ms,
            } => tracing::debug!(
                event = event.name(),
                endpoint = %endpoint,
                identifier = %identifier,
                scope = %scope,
                remaining_tokens = *remaining_tokens,
                execution_time_ms = *execution_time_ms,
            ),
            RateLimitEvent::Denied {
                endpoint,
                identifier,
                scope,
                retry_after,
                execution_time_ms,
            } => tracing::debug!(
                event = event.name(),
                endpoint = %endpoint,
                identifier = %identifier,
                scope = %scope,
                retry_after = *retry_after,
                execution_time_ms = *execution_time_ms,
            ),
        }
    }
}

/// Drops every event (benchmarks, or when events are not wanted).
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NoopEvents;

#[cfg(test)]
impl RateLimitEvents for NoopEvents {
    fn emit(&self, _event: &RateLimitEvent) {}
}

/// Keeps every event in memory, for tests.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct RecordingEvents {
    events: Mutex<Vec<RateLimitEvent>>,
}

#[cfg(test)]
impl RecordingEvents {
    /// An empty recorder.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Take the events recorded so far, oldest first.
    pub(crate) fn take(&self) -> Vec<RateLimitEvent> {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *events)
    }
}

#[cfg(test)]
impl RateLimitEvents for RecordingEvents {
    fn emit(&self, event: &RateLimitEvent) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event.clone());
    }
}
