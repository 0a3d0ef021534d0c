//! Health checks for load balancers and orchestrators:
//!
//! - `GET /health`: 200 while the store answers (kept as it always was);
//! - `GET /health/live`: 200 while the process serves requests at all; asks nothing else, so
//!   a store outage never gets a healthy instance restarted;
//! - `GET /health/ready`: 200 while the store and the rate-limit store (Redis, when that is
//!   the store) answer; otherwise 503 `service_unavailable`, so traffic goes elsewhere until
//!   they answer again. Which dependency failed is logged, not answered.
//!
//! Choices made here:
//!
//! - The readiness answer is cached for [`READINESS_TTL`] (1 s), and at most one check runs at
//!   a time: callers arriving while one runs wait for its result instead of starting their
//!   own. However often probes (or anyone else) ask, an instance spends at most one store
//!   connection and one rate-limit store round trip per second on readiness. A failed check is
//!   cached the same way, so a dependency that went away is not asked again for a second.
//! - The three have a rate-limit policy per IP that is off by default (probes poll them); an
//!   override file can enable it (see [`PolicyTable`](crate::rate_limit::PolicyTable)).

use std::time::Duration;

use http::StatusCode;
use serde::Serialize;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::router::ApiState;
use super::routes::{Route, limited, route};
use super::{ApiResult, json};
use crate::app::App;
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::HEALTH_CHECK;

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/health" => health, limited(HEALTH_CHECK),
        "Whether the service and its store answer", [200: Health]),
    route!(GET "/health/live" => live, limited(HEALTH_CHECK),
        "Whether the process serves requests (asks no dependency)", [200: Health]),
    route!(GET "/health/ready" => ready, limited(HEALTH_CHECK),
        "Whether the store and the rate-limit store answer, i.e. the instance can take traffic \
         (answered from a check at most 1 s old)",
        [200: Health]),
];

/// How long a readiness result is answered before the dependencies are asked again.
pub(crate) const READINESS_TTL: Duration = Duration::from_secs(1);

#[derive(Serialize, utoipa::ToSchema)]
struct Health {
    status: &'static str,
}

const HEALTHY: Health = Health { status: "ok" };

/// `GET /health`
async fn health(state: &App) -> ApiResult {
    state.store.ping().await?;
    json(StatusCode::OK, &HEALTHY)
}

/// `GET /health/live`
async fn live(_state: &App) -> ApiResult {
    json(StatusCode::OK, &HEALTHY)
}

fn not_ready() -> ApiError {
    ApiError::new(
        ErrorCode::ServiceUnavailable,
        "The service is not ready to take requests. Try again shortly.",
    )
    .with_header(
        http::header::RETRY_AFTER,
        http::HeaderValue::from(super::STORE_RETRY_AFTER_SECONDS),
    )
}

/// `GET /health/ready`
async fn ready(state: &App, api: ApiState) -> ApiResult {
    let ready = api
        .readiness()
        .get_or_check(|| async {
            // Both at once: a slow store and a slow Redis cost the longer of their timeouts,
            // not the sum.
            let (store, limits) = tokio::join!(state.store.ping(), state.limits.ping());
            if let Err(error) = store {
                // The outage itself is logged once by the store's guard, not per check.
                tracing::debug!(error = %error, "not ready: the store does not answer");
                return false;
            }
            if let Err(error) = limits {
                tracing::debug!(error = %error, "not ready: the rate-limit store does not answer");
                return false;
            }
            true
        })
        .await;
    if !ready {
        return Err(not_ready());
    }
    json(StatusCode::OK, &HEALTHY)
}

/// The last readiness result and when it was taken. The lock is held across a check, so the
/// callers that arrive meanwhile queue behind it and then read its fresh result: one check
/// in flight at a time.
#[derive(Debug)]
pub(crate) struct Readiness {
    ttl: Duration,
    last: Mutex<Option<(Instant, bool)>>,
}

impl Default for Readiness {
    fn default() -> Self {
        Self::with_ttl(READINESS_TTL)
    }
}

impl Readiness {
    /// A cache answering each result for `ttl`.
    pub(crate) fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            last: Mutex::new(None),
        }
    }

    /// The cached result while it is younger than the TTL; otherwise runs `check` (once, for
    /// every caller waiting meanwhile) and caches what it says. A caller dropped while its
    /// check runs leaves nothing cached: the next caller checks again.
    pub(crate) async fn get_or_check<F, Fut>(&self, check: F) -> bool
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut last = self.last.lock().await;
        if let Some((taken, ready)) = *last
            && taken.elapsed() < self.ttl
        {
            return ready;
        }
        let ready = check().await;
        *last = Some((Instant::now(), ready));
        ready
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A check that counts its runs and answers `ready` once `gate` opens.
    async fn counted_check(runs: &AtomicUsize, gate: &tokio::sync::Notify, ready: bool) -> bool {
        runs.fetch_add(1, Ordering::SeqCst);
        gate.notified().await;
        ready
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_check_and_its_result_is_cached() {
        // A TTL no test outlives: every answer after the first comes from the cache.
        let readiness = Arc::new(Readiness::with_ttl(Duration::from_secs(3600)));
        let runs = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Notify::new());
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let (readiness, runs, gate) = (readiness.clone(), runs.clone(), gate.clone());
                tokio::spawn(async move {
                    readiness
                        .get_or_check(|| counted_check(&runs, &gate, true))
                        .await
                })
            })
            .collect();
        // Let every caller reach the cache: one runs the check, the others wait for it.
        while runs.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        gate.notify_one();
        for caller in callers {
            assert!(caller.await.expect("caller"));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "one check for all of them");
        // Within the TTL the result is answered as is, whatever a check would say now.
        let cached = readiness
            .get_or_check(|| counted_check(&runs, &gate, false))
            .await;
        assert!(cached);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_expired_result_is_checked_again_and_a_failure_is_cached_too() {
        let runs = AtomicUsize::new(0);
        let gate = tokio::sync::Notify::new();
        let expired = Readiness::with_ttl(Duration::ZERO);
        gate.notify_one();
        assert!(
            expired
                .get_or_check(|| counted_check(&runs, &gate, true))
                .await
        );
        gate.notify_one();
        assert!(
            !expired
                .get_or_check(|| counted_check(&runs, &gate, false))
                .await
        );
        assert_eq!(runs.load(Ordering::SeqCst), 2, "each caller checked");

        let cached = Readiness::with_ttl(Duration::from_secs(3600));
        gate.notify_one();
        assert!(
            !cached
                .get_or_check(|| counted_check(&runs, &gate, false))
                .await
        );
        assert!(
            !cached
                .get_or_check(|| counted_check(&runs, &gate, true))
                .await
        );
        assert_eq!(
            runs.load(Ordering::SeqCst),
            3,
            "the failure was answered from the cache"
        );
    }
}
