//! The event stream's logic, apart from HTTP: one user's committed events, first those
//! stored after a resumption point (catch-up), then those published live, each sent once.
//!
//! A listener that falls behind the in-process bus (it lagged) reads what it missed from the
//! store after the last id it sent, so no event is dropped. Each event is sent at most once
//! per stream: a live copy of an event is skipped when its id is among the ids the stream
//! sent last (a bounded window, longer than the bus), not because its id sorts below what the
//! store returned. Ids are taken when an event is made, so one committed late can sort below
//! events committed before it; it is still sent when it arrives. Events are sent in id order
//! within a catch-up read, and in commit order live. The stream ends when the access token
//! that opened it expires, after the revocation of its own session, and when the host closes.

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep};
use uuid::Uuid;

use async_trait::async_trait;

use super::{EVENT_BUS_CAPACITY, Event, EventType};

/// Events read from the store per query while catching up.
const CATCH_UP_PAGE: u32 = 100;

/// How many sent event ids a stream remembers to skip a live copy of one it already sent.
/// A live copy of an event sent by a catch-up read is at most a bus length behind (the
/// receiver keeps no more after lagging), plus the page read meanwhile; the window covers
/// that. It fills only as events are sent, so a quiet stream stays small.
const REMEMBERED_IDS: usize = EVENT_BUS_CAPACITY + CATCH_UP_PAGE as usize;

/// Where a stream reads the events it missed: the store's outbox (the store implements it).
#[async_trait]
pub(crate) trait MissedEvents: Send + Sync {
    /// The user's events with an id greater than `after`, oldest first, at most `limit`.
    async fn user_events_after(
        &self,
        user_id: Uuid,
        after: Uuid,
        limit: u32,
    ) -> Result<Vec<Event>, Box<dyn std::error::Error + Send + Sync>>;
}

/// What a stream yields, in order: `Opened` first, then events and heartbeats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StreamItem {
    /// The stream is open (and subscribed), before any event.
    Opened,
    /// An event of the stream's user, sent once.
    Event(Event),
    /// The stream was idle for a heartbeat interval.
    Heartbeat,
}

/// Who a stream is for and how long it may run: the claims of the access token that opened it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamOwner {
    /// The user whose events are sent.
    pub(crate) user_id: Uuid,
    /// The session of the token: its revocation is the last event sent.
    pub(crate) session_id: Uuid,
    /// When the token expires (seconds since the epoch): the stream ends then.
    pub(crate) expires_at: i64,
}

/// The ids a stream sent last, oldest forgotten first.
#[derive(Debug, Default)]
struct RecentIds {
    order: VecDeque<Uuid>,
    set: HashSet<Uuid>,
}

impl RecentIds {
    fn contains(&self, id: Uuid) -> bool {
        self.set.contains(&id)
    }

    fn insert(&mut self, id: Uuid) {
        if self.set.insert(id) {
            self.order.push_back(id);
            if self.order.len() > REMEMBERED_IDS
                && let Some(oldest) = self.order.pop_front()
            {
                self.set.remove(&oldest);
            }
        }
    }
}

/// The smallest UUIDv7 of the current millisecond: the cursor of a stream opened without
/// `Last-Event-ID` (a lagging listener catches up from there, not from the beginning).
fn now_floor_v7() -> Uuid {
    let millis = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6] = 0x70;
    bytes[8] = 0x80;
    Uuid::from_bytes(bytes)
}

/// The state of one stream, producing its items one at a time as they are polled.
pub(crate) struct EventStream {
    user_id: Uuid,
    session_id: Uuid,
    store: Box<dyn MissedEvents>,
    receiver: broadcast::Receiver<Arc<Event>>,
    heartbeat: Interval,
    /// When the access token that opened the stream expires.
    expiry: Pin<Box<Sleep>>,
    /// Turns `true` when the host shuts down.
    closing: watch::Receiver<bool>,
    /// The greatest id sent (or the resumption point): catching up reads after it.
    cursor: Uuid,
    /// Whether events must be read from the store (resumption, or after lagging).
    catching_up: bool,
    /// Events read from the store, not sent yet (at most one page).
    page: VecDeque<Event>,
    sent: RecentIds,
    opened: bool,
    /// The last event was sent; the stream ends at the next poll.
    finished: bool,
    /// What the caller keeps alive while the stream lives (the HTTP edge's slot).
    _held: Box<dyn Send + Sync>,
}

impl EventStream {
    /// A stream for `owner`, resuming after `resume_after` (from the current instant when
    /// `None`), reading missed events from `store` and live ones from `receiver` (subscribed
    /// before the first store read, so nothing committed in between is missed). It ends when
    /// `closing` turns `true`; `held` is dropped with it.
    pub(crate) fn new(
        owner: StreamOwner,
        resume_after: Option<Uuid>,
        store: Box<dyn MissedEvents>,
        receiver: broadcast::Receiver<Arc<Event>>,
        heartbeat_every: Duration,
        closing: watch::Receiver<bool>,
        held: Box<dyn Send + Sync>,
    ) -> Self {
        let mut heartbeat =
            tokio::time::interval_at(Instant::now() + heartbeat_every, heartbeat_every);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let remaining =
            u64::try_from(owner.expires_at - chrono::Utc::now().timestamp()).unwrap_or(0);
        Self {
            user_id: owner.user_id,
            session_id: owner.session_id,
            store,
            receiver,
            heartbeat,
            expiry: Box::pin(tokio::time::sleep(Duration::from_secs(remaining))),
            closing,
            cursor: resume_after.unwrap_or_else(now_floor_v7),
            catching_up: resume_after.is_some(),
            page: VecDeque::new(),
            sent: RecentIds::default(),
            opened: false,
            finished: false,
            _held: held,
        }
    }

    /// The items as a stream; dropping it drops the state (and what it holds).
    pub(crate) fn into_items(
        self,
    ) -> impl futures_util::Stream<Item = StreamItem> + Send + 'static {
        futures_util::stream::unfold(self, |mut stream| async move {
            let item = stream.next_item().await?;
            Some((item, stream))
        })
    }

    /// The next item to send; `None` ends the stream.
    async fn next_item(&mut self) -> Option<StreamItem> {
        loop {
            if self.finished || *self.closing.borrow() {
                return None;
            }
            if !self.opened {
                self.opened = true;
                return Some(StreamItem::Opened);
            }
            if let Some(event) = self.page.pop_front() {
                if self.take(&event) {
                    return Some(StreamItem::Event(event));
                }
                continue;
            }
            if self.catching_up {
                self.read_page().await?;
                continue;
            }
            tokio::select! {
                biased;
                () = &mut self.expiry => return None,
                _ = self.closing.changed() => return None,
                received = self.receiver.recv() => match received {
                    Ok(event) => {
                        // A copy of an event a catch-up read sent is skipped by `take`: by id,
                        // never by comparing with the cursor, which a late commit sorts below.
                        if event.user_id == Some(self.user_id) && self.take(&event) {
                            return Some(StreamItem::Event(Event::clone(&event)));
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(missed, "event stream lagged; catching up from the store");
                        self.catching_up = true;
                    }
                    // The service is gone.
                    Err(RecvError::Closed) => return None,
                },
                _ = self.heartbeat.tick() => return Some(StreamItem::Heartbeat),
            }
        }
    }

    /// Reads the next page after the cursor; `None` (ending the stream) when the store
    /// fails: the client reconnects with `Last-Event-ID` and resumes.
    async fn read_page(&mut self) -> Option<()> {
        let events = match self
            .store
            .user_events_after(self.user_id, self.cursor, CATCH_UP_PAGE)
            .await
        {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(error = %error, "event stream could not read the store; closing it");
                return None;
            }
        };
        if events.len() < CATCH_UP_PAGE as usize {
            self.catching_up = false;
        }
        if let Some(last) = events.last() {
            // The page is sent before the next read, so the cursor moves past it either way.
            self.cursor = self.cursor.max(last.id);
        }
        self.page.extend(events);
        Some(())
    }

    /// Whether to send `event`: not when this stream sent it already. Marks the stream
    /// finished after the revocation of its own session.
    fn take(&mut self, event: &Event) -> bool {
        if self.sent.contains(event.id) {
            return false;
        }
        self.sent.insert(event.id);
        self.cursor = self.cursor.max(event.id);
        self.heartbeat.reset();
        if event.event_type == EventType::SessionRevoked
            && event.data.get("session_id").and_then(|id| id.as_str())
                == Some(self.session_id.to_string().as_str())
        {
            self.finished = true;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::events::{EventBus, SessionRevoked};

    #[test]
    fn recent_ids_are_bounded() {
        let mut recent = RecentIds::default();
        let first = Uuid::now_v7();
        recent.insert(first);
        for _ in 0..REMEMBERED_IDS {
            recent.insert(Uuid::now_v7());
        }
        assert!(!recent.contains(first));
        assert_eq!(recent.set.len(), REMEMBERED_IDS);
    }

    #[test]
    fn the_floor_cursor_sorts_before_ids_made_after_it() {
        let floor = now_floor_v7();
        assert_eq!(floor.get_version_num(), 7);
        assert!(floor < Uuid::now_v7());
    }

    /// The committed events, read back in id order as the store's outbox does.
    #[derive(Clone, Default)]
    struct Outbox(Arc<Mutex<Vec<Event>>>);

    impl Outbox {
        fn commit(&self, events: &[Event]) {
            let mut stored = self.0.lock().expect("lock");
            stored.extend_from_slice(events);
            stored.sort_by_key(|event| event.id);
        }
    }

    #[async_trait]
    impl MissedEvents for Outbox {
        async fn user_events_after(
            &self,
            user_id: Uuid,
            after: Uuid,
            limit: u32,
        ) -> Result<Vec<Event>, Box<dyn std::error::Error + Send + Sync>> {
            let stored = self.0.lock().expect("lock");
            Ok(stored
                .iter()
                .filter(|event| event.user_id == Some(user_id) && event.id > after)
                .take(limit as usize)
                .cloned()
                .collect())
        }
    }

    /// A stream of `user_id` opened with a token of `session_id` (valid for an hour), which
    /// holds `held` and ends when `closing` turns `true`.
    fn open(
        user_id: Uuid,
        session_id: Uuid,
        resume_after: Option<Uuid>,
        outbox: &Outbox,
        bus: &EventBus,
        closing: watch::Receiver<bool>,
        held: Arc<()>,
    ) -> EventStream {
        let owner = StreamOwner {
            user_id,
            session_id,
            expires_at: chrono::Utc::now().timestamp() + 3600,
        };
        EventStream::new(
            owner,
            resume_after,
            Box::new(outbox.clone()),
            bus.subscribe(),
            Duration::from_secs(3600),
            closing,
            Box::new(held),
        )
    }

    /// The revocation of `session_id`, committed to `outbox`: its events.
    fn revoke(outbox: &Outbox, user_id: Uuid, session_id: Uuid) -> Vec<Event> {
        let events = SessionRevoked::each(user_id, &[session_id], "test", chrono::Utc::now());
        outbox.commit(&events);
        events
    }

    fn password_changed(user_id: Uuid) -> Event {
        Event::new(
            EventType::PasswordChanged,
            Some(user_id),
            chrono::Utc::now(),
            serde_json::Value::Object(serde_json::Map::new()),
        )
    }

    /// The ids of the events read until `count` came (other items skipped).
    async fn event_ids(stream: &mut EventStream, count: usize) -> Vec<Uuid> {
        let mut ids = Vec::new();
        while ids.len() < count {
            if let StreamItem::Event(event) = stream.next_item().await.expect("the stream goes on")
            {
                ids.push(event.id);
            }
        }
        ids
    }

    fn sessions(count: usize) -> Vec<Uuid> {
        (0..count).map(|_| Uuid::now_v7()).collect()
    }

    #[tokio::test]
    async fn a_lagging_stream_catches_up_from_the_store_without_repeats_and_ends_with_its_session()
    {
        let outbox = Outbox::default();
        let user_id = Uuid::now_v7();
        let sessions = sessions(7);
        let (own_session, others) = sessions.split_last().expect("sessions");
        // A bus of 2: the six revocations below make the stream's receiver lag.
        let bus = EventBus::new(2);
        let (_closing, closed) = watch::channel(false);
        let held = Arc::new(());
        let mut stream = open(
            user_id,
            *own_session,
            None,
            &outbox,
            &bus,
            closed,
            held.clone(),
        );
        assert_eq!(stream.next_item().await, Some(StreamItem::Opened));
        let mut stored = Vec::new();
        for session in others {
            let events = revoke(&outbox, user_id, *session);
            bus.publish(&events);
            stored.extend(events.iter().map(|event| event.id));
        }
        assert_eq!(stored.len(), 6);
        assert_eq!(
            event_ids(&mut stream, 6).await,
            stored,
            "all, in order, from the store"
        );
        // The two events still in the receiver were sent already: the next event is the
        // revocation of the stream's own session, after which the stream ends.
        let last = revoke(&outbox, user_id, *own_session);
        bus.publish(&last);
        assert_eq!(event_ids(&mut stream, 1).await, [last[0].id]);
        assert!(
            stream.next_item().await.is_none(),
            "its session was revoked"
        );
        drop(stream);
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "what it held (the slot) is freed"
        );
    }

    /// An event committed late behind newer ones: its id (taken when its transaction began)
    /// is older than events another transaction committed first. A stream that lagged and
    /// read those newer events from the store still sends the late one when it arrives live.
    #[tokio::test]
    async fn an_event_committed_late_behind_newer_ids_is_sent_after_a_catch_up() {
        let outbox = Outbox::default();
        let user_id = Uuid::now_v7();
        let sessions = sessions(6);
        let (own_session, others) = sessions.split_last().expect("sessions");
        // A bus of 4: the five revocations below make the stream's receiver lag.
        let bus = EventBus::new(4);
        let (_closing, closed) = watch::channel(false);
        let mut stream = open(
            user_id,
            *own_session,
            None,
            &outbox,
            &bus,
            closed,
            Arc::new(()),
        );
        assert_eq!(stream.next_item().await, Some(StreamItem::Opened));
        // Its id is taken now; its transaction commits only after the revocations below.
        let late = password_changed(user_id);
        let mut stored = Vec::new();
        for session in others {
            let events = revoke(&outbox, user_id, *session);
            bus.publish(&events);
            stored.extend(events.iter().map(|event| event.id));
        }
        assert!(
            stored.iter().all(|id| late.id < *id),
            "the late id is older"
        );
        assert_eq!(
            event_ids(&mut stream, 5).await,
            stored,
            "caught up from the store"
        );
        // Two more after it, so a stream that drops the late one still yields two events.
        let next = [password_changed(user_id), password_changed(user_id)];
        bus.publish(std::slice::from_ref(&late));
        bus.publish(&next);
        assert_eq!(
            event_ids(&mut stream, 2).await,
            [late.id, next[0].id],
            "the late event is not taken for one already read"
        );
        assert_eq!(event_ids(&mut stream, 1).await, [next[1].id]);
    }

    #[tokio::test]
    async fn a_resumed_stream_replays_then_skips_live_copies_and_ends_when_the_host_closes() {
        let outbox = Outbox::default();
        let user_id = Uuid::now_v7();
        let sessions = sessions(4);
        let bus = EventBus::new(16);
        let mut ids = Vec::new();
        for session in &sessions[..3] {
            let events = revoke(&outbox, user_id, *session);
            ids.extend(events.iter().map(|event| event.id));
        }
        let (closing, closed) = watch::channel(false);
        let mut stream = open(
            user_id,
            sessions[3],
            Some(ids[0]),
            &outbox,
            &bus,
            closed,
            Arc::new(()),
        );
        // The last two are also published live while the stream replays them.
        let live_copies = outbox
            .user_events_after(user_id, ids[0], 10)
            .await
            .expect("events");
        bus.publish(&live_copies);
        let other_user = password_changed(Uuid::now_v7());
        bus.publish(std::slice::from_ref(&other_user));
        assert_eq!(stream.next_item().await, Some(StreamItem::Opened));
        assert_eq!(event_ids(&mut stream, 2).await, ids[1..]);
        let next = password_changed(user_id);
        bus.publish(std::slice::from_ref(&next));
        assert_eq!(
            event_ids(&mut stream, 1).await,
            [next.id],
            "no repeats, no other user's"
        );
        closing.send_replace(true);
        assert!(
            stream.next_item().await.is_none(),
            "the host closed the streams"
        );
    }
}
