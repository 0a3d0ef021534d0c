//! The in-process delivery of committed [`Event`]s to whoever listens right now (the event
//! stream, the webhook deliverer). The outbox in the store stays the record: a listener that
//! falls behind the bounded channel catches up from there.

use std::sync::Arc;

use tokio::sync::broadcast;

use super::{DomainEvent, Event, EventSink};

/// How many events the bus holds for its slowest listener before that listener lags (and
/// must read the missed ones from the store).
pub(crate) const EVENT_BUS_CAPACITY: usize = 1024;

/// A bounded broadcast of committed events. Use cases publish after their transaction
/// committed; every subscriber sees each event once, in publication order, unless it lags.
#[derive(Debug, Clone)]
pub(crate) struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
    /// Shares the events with other instances, once attached (shared by every clone).
    #[cfg(feature = "redis")]
    relay: Arc<std::sync::OnceLock<super::relay::RelayLink>>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new(EVENT_BUS_CAPACITY)
    }
}

impl EventBus {
    /// A bus keeping at most `capacity` events (at least one) for a slow listener.
    pub(crate) fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(1));
        Self {
            sender,
            #[cfg(feature = "redis")]
            relay: Arc::default(),
        }
    }

    /// Shares this bus with the other instances on `relay` from now on (once: a second relay
    /// is ignored with a warning). Needs a Tokio runtime.
    #[cfg(feature = "redis")]
    pub(crate) fn attach_relay(&self, relay: super::RedisEventRelay) {
        if self.relay.get().is_some() {
            tracing::warn!("an event relay is attached already; ignoring another");
            return;
        }
        let _ = self.relay.set(relay.start(&self.sender));
    }

    /// Hands committed events to the current subscribers (none listening is no error: the
    /// events are in the store already).
    pub(crate) fn publish(&self, events: &[Event]) {
        for event in events {
            let event = Arc::new(event.clone());
            #[cfg(feature = "redis")]
            if let Some(relay) = self.relay.get() {
                relay.forward(&event);
            }
            // Err only means nobody is subscribed right now.
            let _ = self.sender.send(event);
        }
    }

    /// A receiver of every event published from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }

    /// A handle that publishes on this bus while the service holds it, without keeping it
    /// alive (so its listeners still see it close when the service goes).
    #[cfg(feature = "webhooks")]
    pub(crate) fn downgrade(&self) -> WeakEventBus {
        WeakEventBus {
            sender: self.sender.downgrade(),
            #[cfg(feature = "redis")]
            relay: self.relay.clone(),
        }
    }
}

/// What a use case reports through: the sink of [`DomainEvent`]s and the bus of committed
/// durable events, one handle.
#[derive(Clone)]
pub(crate) struct Events {
    sink: Arc<dyn EventSink>,
    bus: EventBus,
}

impl Events {
    /// Reports to `sink` and publishes on `bus`.
    pub(crate) fn new(sink: Arc<dyn EventSink>, bus: EventBus) -> Self {
        Self { sink, bus }
    }

    /// Reports an event that has no durable form.
    pub(crate) fn emit(&self, event: &DomainEvent) {
        self.sink.emit(event);
    }

    /// Publishes durable events once their transaction committed, then reports each one that
    /// has an in-process form ([`DomainEvent::of_committed`]) to the sink.
    pub(crate) fn committed(&self, events: &[Event]) {
        self.bus.publish(events);
        for event in events {
            if let Some(report) = DomainEvent::of_committed(event) {
                self.sink.emit(&report);
            }
        }
    }
}

/// An [`EventBus`] that does not keep the bus alive ([`EventBus::downgrade`]).
#[cfg(feature = "webhooks")]
#[derive(Debug, Clone)]
pub(crate) struct WeakEventBus {
    sender: broadcast::WeakSender<Arc<Event>>,
    #[cfg(feature = "redis")]
    relay: Arc<std::sync::OnceLock<super::relay::RelayLink>>,
}

#[cfg(feature = "webhooks")]
impl WeakEventBus {
    /// The bus, unless the service let go of it.
    pub(crate) fn upgrade(&self) -> Option<EventBus> {
        Some(EventBus {
            sender: self.sender.upgrade()?,
            #[cfg(feature = "redis")]
            relay: self.relay.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::events::EventType;

    #[tokio::test]
    async fn subscribers_get_published_events_in_order() {
        let bus = EventBus::new(4);
        bus.publish(&[Event::new(
            EventType::PasswordChanged,
            None,
            Utc::now(),
            json!({}),
        )]);
        let mut receiver = bus.subscribe();
        let first = Event::new(EventType::PasswordChanged, None, Utc::now(), json!({}));
        let second = Event::new(EventType::SessionRevoked, None, Utc::now(), json!({}));
        bus.publish(&[first.clone(), second.clone()]);
        assert_eq!(*receiver.recv().await.unwrap(), first);
        assert_eq!(*receiver.recv().await.unwrap(), second);
    }

    #[tokio::test]
    async fn a_slow_subscriber_lags_instead_of_growing_the_queue() {
        let bus = EventBus::new(2);
        let mut receiver = bus.subscribe();
        let events: Vec<Event> = (0..5)
            .map(|_| Event::new(EventType::PasswordChanged, None, Utc::now(), json!({})))
            .collect();
        bus.publish(&events);
        assert!(matches!(
            receiver.recv().await,
            Err(broadcast::error::RecvError::Lagged(3))
        ));
        assert_eq!(*receiver.recv().await.unwrap(), events[3]);
    }
}
