//! Sharing the event bus of several instances through Redis pub/sub (feature `redis`).
//!
//! Every event an instance publishes on its own bus is also published, tagged with the
//! instance's id, on one Redis channel (`<prefix>events`); each instance subscribes to that
//! channel and hands the events of *other* instances to its own bus. So an event raised on one
//! instance reaches an event stream open on another.
//!
//! Redis is never on the request path: a use case hands its events to a bounded queue that a
//! background task publishes from. When Redis is down or slow the relay carries on (a full
//! queue drops the relay copy, never the event: it is in the store, and clients of other
//! instances get it when they resume with `Last-Event-ID`); the subscriber reconnects by
//! itself, after a pause that doubles up to [`MAX_RESUBSCRIBE_DELAY`], with jitter so that
//! the instances of a fleet do not all reconnect at the same moment. Both tasks end when the
//! service (the last clone of its bus) is dropped.
//!
//! An outage of either side is logged like every backing service's ([`OutageLog`]): the first
//! failure in full, a count every 10 s while it lasts, one line when it ends; never a line
//! per attempt or per event.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt as _;
use rand::RngExt as _;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use uuid::Uuid;

use super::{Event, EventType};
use crate::outage::OutageLog;

/// Events that may wait for the publishing task before relay copies are dropped.
const RELAY_QUEUE: usize = 1024;

/// The bound on one `PUBLISH` (and on connecting for it).
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(1);

/// The first pause before subscribing again after a failure.
const FIRST_RESUBSCRIBE_DELAY: Duration = Duration::from_millis(250);

/// The longest pause between two attempts to subscribe again.
const MAX_RESUBSCRIBE_DELAY: Duration = Duration::from_secs(10);

/// Why a relay could not be configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventRelayError {
    /// The Redis URL cannot be used (the message does not repeat the URL, which may hold a
    /// password).
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(String),
}

/// Shares events between service instances through Redis pub/sub; give it to
/// [`AggregationServiceBuilder::event_relay`](crate::AggregationServiceBuilder::event_relay).
/// Instances share events when they use the same Redis and the same key prefix (and, for the
/// stream to make sense, the same database).
///
/// ```no_run
/// use aggregation_core::events::RedisEventRelay;
///
/// # fn demo() -> Result<(), aggregation_core::events::EventRelayError> {
/// let relay = RedisEventRelay::from_url("redis://127.0.0.1:6379", "aggregation:")?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisEventRelay {
    client: redis::Client,
    channel: String,
}

impl std::fmt::Debug for RedisEventRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEventRelay")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl RedisEventRelay {
    /// A relay over `client` on the channel `<key_prefix>events`. Does not connect.
    pub fn new(client: redis::Client, key_prefix: &str) -> Self {
        Self {
            client,
            channel: format!("{key_prefix}events"),
        }
    }

    /// A relay for a `redis://` or `rediss://` URL. Does not connect.
    ///
    /// # Errors
    /// [`EventRelayError::InvalidUrl`] when the URL cannot be used.
    pub fn from_url(url: &str, key_prefix: &str) -> Result<Self, EventRelayError> {
        let client =
            redis::Client::open(url).map_err(|e| EventRelayError::InvalidUrl(e.to_string()))?;
        Ok(Self::new(client, key_prefix))
    }

    /// The pub/sub channel.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Starts the publishing and subscribing tasks for `local` (the bus's own sender); the
    /// link hands them this instance's events and stops them when dropped. Needs a Tokio
    /// runtime.
    pub(crate) fn start(self, local: &broadcast::Sender<Arc<Event>>) -> RelayLink {
        let instance = Uuid::new_v4();
        let (outgoing, queue) = mpsc::channel(RELAY_QUEUE);
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(publish_loop(
            self.client.clone(),
            self.channel.clone(),
            instance,
            queue,
        ));
        tokio::spawn(subscribe_loop(self, instance, local.downgrade(), stopped));
        RelayLink {
            outgoing,
            _stop: stop,
        }
    }
}

/// The bus's end of a running relay.
#[derive(Debug)]
pub(crate) struct RelayLink {
    outgoing: mpsc::Sender<Arc<Event>>,
    /// Dropped with the link: the subscriber stops.
    _stop: oneshot::Sender<()>,
}

impl RelayLink {
    /// Queues an event published on this instance for the other instances; never waits.
    pub(crate) fn forward(&self, event: &Arc<Event>) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.outgoing.try_send(event.clone()) {
            tracing::warn!(
                event_id = %event.id,
                "event relay queue full (Redis slow or down); other instances miss this event live"
            );
        }
    }
}

/// What crosses Redis: the publishing instance and the event.
#[derive(Serialize, Deserialize)]
struct RelayMessage {
    instance: Uuid,
    event: WireEvent,
}

/// An [`Event`] on the wire.
#[derive(Serialize, Deserialize)]
struct WireEvent {
    id: Uuid,
    #[serde(rename = "type")]
    event_type: String,
    user_id: Option<Uuid>,
    occurred_at: DateTime<Utc>,
    data: Value,
}

impl From<&Event> for WireEvent {
    fn from(event: &Event) -> Self {
        Self {
            id: event.id,
            event_type: event.event_type.as_str().to_owned(),
            user_id: event.user_id,
            occurred_at: event.occurred_at,
            data: event.data.clone(),
        }
    }
}

impl WireEvent {
    /// The event; `None` for a type this instance does not know (a newer instance's).
    fn into_event(self) -> Option<Event> {
        let mut event = Event::new(
            EventType::parse(&self.event_type)?,
            self.user_id,
            self.occurred_at,
            self.data,
        );
        event.id = self.id;
        Some(event)
    }
}

/// Publishes this instance's events until the bus is dropped.
async fn publish_loop(
    client: redis::Client,
    channel: String,
    instance: Uuid,
    mut queue: mpsc::Receiver<Arc<Event>>,
) {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(PUBLISH_TIMEOUT))
        .set_response_timeout(Some(PUBLISH_TIMEOUT))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    let outage = OutageLog::new(
        "event relay publishing (Redis)",
        "events raised here reach event streams on other instances only when their clients \
         resume",
    );
    let mut connection: Option<ConnectionManager> = None;
    while let Some(event) = queue.recv().await {
        let message = RelayMessage {
            instance,
            event: WireEvent::from(event.as_ref()),
        };
        let Ok(payload) = serde_json::to_string(&message) else {
            continue;
        };
        if connection.is_none() {
            match client.get_connection_manager_lazy(config.clone()) {
                Ok(manager) => connection = Some(manager),
                Err(error) => {
                    outage.failure(&error);
                    continue;
                }
            }
        }
        let Some(manager) = connection.as_mut() else {
            continue;
        };
        let published: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(&channel)
            .arg(payload)
            .query_async(manager)
            .await;
        match published {
            Ok(_) => outage.success(),
            Err(error) => outage.failure(&error),
        }
    }
}

/// The pauses between attempts to subscribe: doubling from [`FIRST_RESUBSCRIBE_DELAY`] up to
/// [`MAX_RESUBSCRIBE_DELAY`], each one drawn between half of its step and the whole step
/// (jitter), back to the first step once a subscription succeeds.
#[derive(Debug)]
struct Backoff {
    step: Duration,
}

impl Backoff {
    fn new() -> Self {
        Self {
            step: FIRST_RESUBSCRIBE_DELAY,
        }
    }

    /// The pause before the next attempt; the one after it is longer.
    fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = (step * 2).min(MAX_RESUBSCRIBE_DELAY);
        let half = step / 2;
        half + half.mul_f64(rand::rng().random_range(0.0..=1.0))
    }

    /// A subscription succeeded: the next failure is retried soon again.
    fn reset(&mut self) {
        self.step = FIRST_RESUBSCRIBE_DELAY;
    }
}

/// Subscribes to the channel (again after every failure, with [`Backoff`]) and hands other
/// instances' events to the local bus, until `stopped` resolves or the bus is gone.
async fn subscribe_loop(
    relay: RedisEventRelay,
    instance: Uuid,
    local: broadcast::WeakSender<Arc<Event>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let outage = OutageLog::new(
        "event relay subscription (Redis)",
        "events raised on other instances reach event streams here only when their clients \
         resume; subscribing again with backoff",
    );
    let mut backoff = Backoff::new();
    loop {
        let ended = tokio::select! {
            _ = &mut stopped => return,
            ended = relay_messages(&relay, instance, &local, || {
                outage.success();
                backoff.reset();
            }) => ended,
        };
        match ended {
            Ok(()) => return,
            Err(error) => outage.failure(&error),
        }
        let delay = backoff.next_delay();
        tokio::select! {
            _ = &mut stopped => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// One subscription: `Ok` when the bus is gone, `Err` when Redis failed. `subscribed` runs
/// once the subscription holds.
async fn relay_messages(
    relay: &RedisEventRelay,
    instance: Uuid,
    local: &broadcast::WeakSender<Arc<Event>>,
    subscribed: impl FnOnce(),
) -> redis::RedisResult<()> {
    let mut pubsub = relay.client.get_async_pubsub().await?;
    pubsub.subscribe(&relay.channel).await?;
    subscribed();
    let mut messages = pubsub.into_on_message();
    while let Some(message) = messages.next().await {
        let Some(sender) = local.upgrade() else {
            return Ok(());
        };
        let relayed = serde_json::from_slice::<RelayMessage>(message.get_payload_bytes());
        match relayed {
            Ok(relayed) if relayed.instance == instance => {}
            Ok(relayed) => {
                if let Some(event) = relayed.event.into_event() {
                    // Err only means nobody listens on this instance right now.
                    let _ = sender.send(Arc::new(event));
                }
            }
            Err(error) => tracing::warn!(error = %error, "event relay ignored a malformed message"),
        }
    }
    Err(redis::RedisError::from((
        redis::ErrorKind::Io,
        "pub/sub connection closed",
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_cross_the_wire_unchanged() {
        let event = Event::new(
            EventType::SessionRevoked,
            Some(Uuid::now_v7()),
            Utc::now(),
            json!({"session_id": Uuid::now_v7(), "reason": "logout"}),
        );
        let message = RelayMessage {
            instance: Uuid::new_v4(),
            event: WireEvent::from(&event),
        };
        let wire = serde_json::to_vec(&message).expect("serialize");
        let back: RelayMessage = serde_json::from_slice(&wire).expect("deserialize");
        assert_eq!(back.instance, message.instance);
        assert_eq!(back.event.into_event(), Some(event));
    }

    #[test]
    fn the_backoff_doubles_with_jitter_up_to_its_bound_and_starts_over() {
        let mut backoff = Backoff::new();
        let mut step = FIRST_RESUBSCRIBE_DELAY;
        for _ in 0..12 {
            let delay = backoff.next_delay();
            assert!(
                delay >= step / 2 && delay <= step,
                "{delay:?} for step {step:?}"
            );
            step = (step * 2).min(MAX_RESUBSCRIBE_DELAY);
        }
        assert_eq!(step, MAX_RESUBSCRIBE_DELAY);
        backoff.reset();
        assert!(backoff.next_delay() <= FIRST_RESUBSCRIBE_DELAY);
    }

    /// Redis refusing connections for two seconds: the subscriber tries again at least three
    /// times (pauses of at most 0.25, 0.5 and 1 s), and its outage is one line, not one per
    /// attempt.
    #[tokio::test]
    async fn a_redis_outage_is_one_line_while_the_subscriber_retries() {
        let captured = crate::testing::CapturedLog::default();
        let _guard = tracing::subscriber::set_default(captured.subscriber(tracing::Level::INFO));
        // Nothing listens on port 1.
        let relay = RedisEventRelay::from_url("redis://127.0.0.1:1", "agg:").expect("URL");
        let (local, _receiver) = broadcast::channel(4);
        let (stop, stopped) = oneshot::channel();
        let subscriber = tokio::spawn(subscribe_loop(
            relay,
            Uuid::new_v4(),
            local.downgrade(),
            stopped,
        ));
        tokio::time::sleep(Duration::from_secs(2)).await;
        drop(stop);
        subscriber.await.expect("the subscriber stops");
        let lines = captured.lines();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].contains("ERROR"), "{}", lines[0]);
        assert!(
            lines[0].contains("event relay subscription (Redis) outage started"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn unknown_types_are_skipped() {
        let wire = WireEvent {
            id: Uuid::now_v7(),
            event_type: "from.the.future".to_owned(),
            user_id: None,
            occurred_at: Utc::now(),
            data: json!({}),
        };
        assert!(wire.into_event().is_none());
    }
}
