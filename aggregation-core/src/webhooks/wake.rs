//! Prompt delivery: a delivery pass as soon as an event is committed on this instance, instead
//! of at the next run of the `deliver_webhooks` job.
//!
//! [`JobRunner::spawn`](crate::jobs::JobRunner::spawn) starts two tasks beside the job
//! schedules. The listener reads the service's event bus and, for every event that can have
//! deliveries (one with a user), asks for a pass; the passer runs the job's own delivery code
//! ([`deliver_due`]: claim due deliveries with their lease, send, record) once per request.
//! Requests are coalesced by a [`Notify`]: one pass runs at a time and at most one more is
//! pending, however many events arrive, so a burst costs at most two passes and no task or
//! queue per event. A running pass hears the requests itself: while slow endpoints still
//! hold their slots it claims the deliveries of newly committed events at once, so nobody's
//! delivery waits for another endpoint's timeout. A listener that lags behind the bus has missed events whose deliveries
//! are in the store anyway, so a lag is one more request, never an error.
//!
//! The passes and the job (on this instance or another sharing the store) never send one
//! delivery twice at once: every sender claims rows through the per-row lease of
//! [`Store::claim_webhook_deliveries`](crate::store::WebhookStore::claim_webhook_deliveries).
//! The job stays the safety net: it sends retries whose backoff came due, deliveries of
//! events raised on instances without a running deliverer, and whatever a pass left.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use tokio::sync::{Notify, broadcast, watch};
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use super::delivery::{Deliverer, Wake, deliver_due};
use crate::config::Config;
use crate::events::{Event, EventBus};
use crate::store::Store;

/// Requests for a delivery pass, coalesced: requests made while a pass runs amount to one
/// more pass after it. Cheap to clone.
#[derive(Debug, Clone, Default)]
struct PassRequests(Arc<Notify>);

impl PassRequests {
    /// Asks for a pass; never waits and never allocates. `Notify` keeps at most one permit
    /// when nobody waits, which is the "one pending" bound.
    fn request(&self) {
        self.0.notify_one();
    }

    /// Runs `pass` once per coalesced request until `stop` changes (or its sender is gone).
    /// A pass that has started finishes first; a pending request is then dropped (the job
    /// sends what it would have).
    async fn serve<F, Fut>(&self, mut stop: watch::Receiver<bool>, mut pass: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                () = self.0.notified() => {}
            }
            if *stop.borrow() {
                break;
            }
            pass().await;
        }
    }
}

/// Whether an event can have webhook deliveries: only events with a user do (the outbox
/// queues none for a global rotation).
fn may_have_deliveries(event: &Event) -> bool {
    event.user_id.is_some()
}

/// Requests a pass for every event on `events` that may have deliveries, and for every lag,
/// until `stop` changes or the bus is gone.
async fn listen(
    mut events: broadcast::Receiver<Arc<Event>>,
    requests: PassRequests,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let received = tokio::select! {
            biased;
            _ = stop.changed() => break,
            received = events.recv() => received,
        };
        match received {
            Ok(event) if !may_have_deliveries(&event) => {}
            // Lagged: events were missed, their deliveries are in the store: one pass covers them.
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => requests.request(),
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}

/// One wake-triggered pass ([`deliver_due`] told of later commits through `requests`, so it
/// claims their deliveries too while earlier ones are still in flight). It ends once nothing
/// it claimed is in flight and nothing more is due, or, after `stop`, once what is in flight
/// is recorded.
async fn pass(
    store: &dyn Store,
    config: &Config,
    deliverer: &Deliverer,
    requests: &PassRequests,
    stop: watch::Receiver<bool>,
) {
    let wake = Wake {
        more: &requests.0,
        stop,
    };
    match deliver_due(store, config, deliverer, Some(wake)).await {
        Ok(run) if run.attempted() > 0 => tracing::debug!(
            delivered = run.delivered,
            retrying = run.retrying,
            given_up = run.given_up,
            "webhook deliveries sent after a commit"
        ),
        Ok(_) => {}
        // The job sends them at its next run.
        Err(error) => tracing::warn!(error = %error, "webhook delivery after a commit failed"),
    }
}

/// Starts the listener and the passer; both end when `stop` changes. The subscription is
/// taken before this returns, so every event published afterwards is seen.
pub(crate) fn spawn(
    bus: &EventBus,
    store: Arc<dyn Store>,
    config: Arc<Config>,
    deliverer: Deliverer,
    stop: &watch::Receiver<bool>,
) -> [JoinHandle<()>; 2] {
    let requests = PassRequests::default();
    let listener = tokio::spawn(listen(bus.subscribe(), requests.clone(), stop.clone()));
    let passes_stop = stop.clone();
    let passer = tokio::spawn(async move {
        let serving = requests.clone();
        serving
            .serve(passes_stop.clone(), || {
                // Cheap clones (`Arc`s; the HTTP client is one too) owned by the pass.
                let (store, config, deliverer, requests, stop) = (
                    store.clone(),
                    config.clone(),
                    deliverer.clone(),
                    requests.clone(),
                    passes_stop.clone(),
                );
                async move {
                    // A panic ends this pass, not the prompt delivery (as a job's run).
                    let run = AssertUnwindSafe(pass(&*store, &config, &deliverer, &requests, stop));
                    if run.catch_unwind().await.is_err() {
                        tracing::error!("webhook delivery after a commit panicked");
                    }
                }
                .instrument(tracing::debug_span!("webhook_wake"))
            })
            .await;
        tracing::debug!("webhook delivery wake stopped");
    });
    [listener, passer]
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use chrono::Utc;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::events::EventType;

    /// Counts passes and the most that ever ran at once; each pass waits for `gate`.
    #[derive(Default)]
    struct Probe {
        started: AtomicUsize,
        running: AtomicUsize,
        most_at_once: AtomicUsize,
        gate: Notify,
    }

    impl Probe {
        async fn pass(&self) {
            self.started.fetch_add(1, Ordering::SeqCst);
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_at_once.fetch_max(now, Ordering::SeqCst);
            self.gate.notified().await;
            self.running.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Waits until `probe` has started `count` passes (at most 5 s).
    async fn started(probe: &Probe, count: usize) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while probe.started.load(Ordering::SeqCst) < count {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the pass started");
    }

    fn serve(probe: &Arc<Probe>, requests: &PassRequests) -> (watch::Sender<bool>, JoinHandle<()>) {
        let (stop, stopped) = watch::channel(false);
        let requests = requests.clone();
        let probe = probe.clone();
        let task = tokio::spawn(async move {
            requests
                .serve(stopped, || {
                    let probe = probe.clone();
                    async move { probe.pass().await }
                })
                .await;
        });
        (stop, task)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_coalesce_into_one_pass_in_flight_and_one_pending() {
        let probe = Arc::new(Probe::default());
        let requests = PassRequests::default();
        let (stop, task) = serve(&probe, &requests);

        requests.request();
        started(&probe, 1).await;
        // A burst while the first pass runs: one more pass, not ten thousand.
        for _ in 0..10_000 {
            requests.request();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            probe.started.load(Ordering::SeqCst),
            1,
            "one pass in flight"
        );
        probe.gate.notify_one();
        started(&probe, 2).await;
        probe.gate.notify_one();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(probe.started.load(Ordering::SeqCst), 2, "one pending pass");
        assert_eq!(probe.most_at_once.load(Ordering::SeqCst), 1);
        assert_eq!(probe.running.load(Ordering::SeqCst), 0);

        // Idle again: the next request runs a pass at once.
        requests.request();
        started(&probe, 3).await;
        probe.gate.notify_one();

        stop.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stopped")
            .expect("no panic");
        assert_eq!(probe.started.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_in_flight_finishes_before_the_stop() {
        let probe = Arc::new(Probe::default());
        let requests = PassRequests::default();
        let (stop, task) = serve(&probe, &requests);
        requests.request();
        started(&probe, 1).await;
        requests.request();
        stop.send_replace(true);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!task.is_finished(), "the running pass is not cut off");
        probe.gate.notify_one();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stopped")
            .expect("no panic");
        assert_eq!(
            probe.started.load(Ordering::SeqCst),
            1,
            "no pass after the stop"
        );
    }

    /// Whether a pass was requested (a permit is there, or comes within 200 ms); takes it.
    async fn requested(requests: &PassRequests) -> bool {
        tokio::time::timeout(Duration::from_millis(200), requests.0.notified())
            .await
            .is_ok()
    }

    fn event(user_id: Option<Uuid>) -> Event {
        Event::new(EventType::SessionRevoked, user_id, Utc::now(), json!({}))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_listener_requests_passes_for_user_events_and_lags() {
        let bus = EventBus::new(4);
        let requests = PassRequests::default();
        let (stop, stopped) = watch::channel(false);
        let listener = tokio::spawn(listen(bus.subscribe(), requests.clone(), stopped.clone()));

        // A global event (no user) has no deliveries: no pass.
        bus.publish(&[event(None)]);
        assert!(
            !requested(&requests).await,
            "no pass for an event without a user"
        );

        bus.publish(&[event(Some(Uuid::now_v7()))]);
        assert!(requested(&requests).await, "a pass for a user's event");

        // Many more than the bus holds: one pass is asked for (the requests coalesce).
        let burst: Vec<Event> = (0..100).map(|_| event(Some(Uuid::now_v7()))).collect();
        bus.publish(&burst);
        assert!(requested(&requests).await, "a pass after a burst");

        stop.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), listener)
            .await
            .expect("stopped")
            .expect("no panic");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lag_requests_a_pass() {
        let bus = EventBus::new(2);
        let events = bus.subscribe();
        // Missed: a user's event, then more than the bus holds of events without deliveries.
        // Only the lag can tell the listener about the first.
        bus.publish(&[event(Some(Uuid::now_v7()))]);
        bus.publish(&(0..5).map(|_| event(None)).collect::<Vec<_>>());
        let requests = PassRequests::default();
        let (stop, stopped) = watch::channel(false);
        let listener = tokio::spawn(listen(events, requests.clone(), stopped));
        assert!(requested(&requests).await, "a pass after the lag");
        assert!(!requested(&requests).await, "one pass");
        stop.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), listener)
            .await
            .expect("stopped")
            .expect("no panic");
    }
}
