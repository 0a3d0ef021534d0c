//! `GET /api/v1/events`: the caller's events as server-sent events.
//!
//! The answer is `200 text/event-stream` whose body never ends on its own while the client
//! stays: first an opening comment, then (when the request carries `Last-Event-ID`) every
//! event of the caller stored after that id, then the caller's events as they are published,
//! each as one frame:
//!
//! ```text
//! id: 0192f3c4-…
//! event: session.revoked
//! data: {"id":"0192f3c4-…","type":"session.revoked","occurred_at":"…","data":{…}}
//! ```
//!
//! An idle stream sends a comment (`: heartbeat`) every
//! [`Config::event_stream_heartbeat`](crate::Config::event_stream_heartbeat). Choices made
//! here:
//!
//! - A `Last-Event-ID` that is not a UUID is 422 `validation_failed` naming
//!   `header.last-event-id`: the stream only ever sends UUIDs, so another value is a client bug
//!   that silently replaying nothing (or everything) would hide. An empty one counts as absent
//!   (the SSE model's "no last event id").
//! - A user holds at most [`Config::event_streams_per_user`](crate::Config::event_streams_per_user)
//!   streams on one instance; one more is 429 with `Retry-After`. A slot frees when its client
//!   disconnects (the body is dropped).
//! - A listener that falls behind the in-process bus (it lagged) reads what it missed from the
//!   store after the last id it sent, so no event is dropped. Each event is sent at most once
//!   per stream: a live copy of an event is skipped when its id is among the ids the stream
//!   sent last (a bounded window, longer than the bus), not because its id sorts below what
//!   the store returned. Ids are taken when an event is made, so one committed late can sort
//!   below events committed before it; it is still sent when it arrives. Events are sent in
//!   id order within a catch-up read, and in commit order live.
//! - The stream ends when the access token that opened it expires, and after the frame saying
//!   that its own session was revoked: the client reconnects with a fresh token and
//!   `Last-Event-ID`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, StatusCode, header};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior, Sleep};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use uuid::Uuid;

use super::extract::User;
use super::handler::FromParts;
use super::openapi::{DescribeArg, OperationDoc};
use super::router::ApiState;
use super::routes::{Route, limited, route};
use super::{ApiResult, ResponseBody};
use crate::app::App;
use crate::auth::AccessClaims;
use crate::events::{EVENT_BUS_CAPACITY, Event, EventType};
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::API_READ;
use crate::store::Store;

pub(crate) const ROUTES: &[Route] = &[route!(GET "/api/v1/events" => open, limited(API_READ),
    "Stream the caller's events (server-sent events)",
    [200: EventStreamText as "text/event-stream"; RateLimitExceeded])];

/// Events read from the store per query while catching up.
const CATCH_UP_PAGE: u32 = 100;

/// How many sent event ids a stream remembers to skip a live copy of one it already sent.
/// A live copy of an event sent by a catch-up read is at most a bus length behind (the
/// receiver keeps no more after lagging), plus the page read meanwhile; the window covers
/// that. It fills only as events are sent, so a quiet stream stays small.
const REMEMBERED_IDS: usize = EVENT_BUS_CAPACITY + CATCH_UP_PAGE as usize;

/// `Retry-After` of a refusal past the per-user cap: slots free only when clients leave.
const CAP_RETRY_AFTER_SECS: u64 = 10;

/// The request header a reconnecting client names its last received event in.
const LAST_EVENT_ID: &str = "last-event-id";

/// The first chunk of every stream: the client knows the stream is open (and subscribed)
/// before any event happens, and proxies see bytes at once.
const OPENING: &[u8] = b": connected\n\n";

/// The comment sent when a stream was idle for a heartbeat interval.
const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// The body of `GET /api/v1/events` (for the OpenAPI document).
pub(crate) struct EventStreamText;

impl utoipa::PartialSchema for EventStreamText {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "Server-sent events: frames separated by a blank line, each `id: <event id>`, \
                 `event: <type>` and `data: <the event as JSON: id, type, user_id, \
                 occurred_at, data>`; lines starting with `:` are comments (the opening \
                 `: connected` and heartbeats).",
            ))
            .into()
    }
}

impl utoipa::ToSchema for EventStreamText {}

/// The `Last-Event-ID` request header: where a reconnecting client resumes.
pub(crate) struct LastEventId(pub(crate) Option<Uuid>);

impl FromParts for LastEventId {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(LAST_EVENT_ID) else {
            return Ok(Self(None));
        };
        // An empty id is what the SSE model calls "no last event id".
        if value.as_bytes().iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(None));
        }
        value
            .to_str()
            .ok()
            .and_then(|value| Uuid::parse_str(value.trim()).ok())
            .map(|id| Self(Some(id)))
            .ok_or_else(|| {
                ApiError::field(
                    "header.last-event-id",
                    "invalid_uuid",
                    "Must be the id of an event this stream sent (a UUID).",
                )
            })
    }
}

impl DescribeArg for LastEventId {
    fn describe(doc: &mut OperationDoc) {
        doc.optional_header(
            "Last-Event-ID",
            "The id of the last event received (a UUID; empty means none): the stream first \
             sends the caller's events stored after it.",
            crate::api::openapi::schemas::uuid(),
        );
        doc.error(ErrorCode::ValidationFailed);
    }
}

async fn open(
    app: &App,
    api: ApiState,
    User(claims): User,
    LastEventId(resume_after): LastEventId,
) -> ApiResult {
    let Some(slot) = api
        .streams()
        .acquire(claims.sub, app.config.event_streams_per_user())
    else {
        return Err(ApiError::rate_limited_because(
            CAP_RETRY_AFTER_SECS,
            format!(
                "At most {} event streams may be open at once; close one first.",
                app.config.event_streams_per_user()
            ),
        ));
    };
    // Subscribe before the first store read, so nothing committed in between is missed.
    let receiver = app.bus.subscribe();
    let stream = EventStream::new(
        &claims,
        resume_after,
        app.store.clone(),
        receiver,
        app.config.event_stream_heartbeat(),
        slot,
    );
    http::Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        // Tells nginx-style proxies not to buffer the stream.
        .header("x-accel-buffering", HeaderValue::from_static("no"))
        .body(ResponseBody::stream(stream.into_chunks()))
        .map_err(|_| ApiError::internal())
}

/// The open event streams per user on this instance, for the per-user cap. Holds one entry
/// per user with an open stream, so it is bounded by the open connections.
#[derive(Debug, Clone)]
pub(crate) struct StreamSlots {
    open: Arc<Mutex<HashMap<Uuid, usize>>>,
    /// Becomes `true` when the host shuts down: every stream ends.
    closing: watch::Sender<bool>,
}

impl Default for StreamSlots {
    fn default() -> Self {
        Self {
            open: Arc::default(),
            closing: watch::Sender::new(false),
        }
    }
}

impl StreamSlots {
    /// Ends every open stream (and every stream opened from now on) after its current frame.
    pub(crate) fn close_all(&self) {
        self.closing.send_replace(true);
    }

    /// A slot for one more stream of `user`, unless `cap` are open already.
    fn acquire(&self, user: Uuid, cap: usize) -> Option<StreamSlot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(user).or_insert(0);
        if *count >= cap {
            if *count == 0 {
                open.remove(&user);
            }
            return None;
        }
        *count += 1;
        Some(StreamSlot {
            slots: self.clone(),
            user,
        })
    }

    /// How many streams of `user` are open.
    #[cfg(test)]
    fn open(&self, user: Uuid) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&user).copied().unwrap_or(0)
    }
}

/// One open stream, counted until dropped.
#[derive(Debug)]
struct StreamSlot {
    slots: StreamSlots,
    user: Uuid,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.user);
            }
        }
    }
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

/// The state of one stream, producing its chunks one at a time as the body is polled.
struct EventStream {
    user_id: Uuid,
    session_id: Uuid,
    store: Arc<dyn Store>,
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
    /// The last frame was sent; the stream ends at the next poll.
    finished: bool,
    _slot: StreamSlot,
}

impl EventStream {
    fn new(
        claims: &AccessClaims,
        resume_after: Option<Uuid>,
        store: Arc<dyn Store>,
        receiver: broadcast::Receiver<Arc<Event>>,
        heartbeat_every: Duration,
        slot: StreamSlot,
    ) -> Self {
        let mut heartbeat =
            tokio::time::interval_at(Instant::now() + heartbeat_every, heartbeat_every);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let remaining = u64::try_from(claims.exp - chrono::Utc::now().timestamp()).unwrap_or(0);
        Self {
            user_id: claims.sub,
            session_id: claims.session_id,
            store,
            receiver,
            heartbeat,
            expiry: Box::pin(tokio::time::sleep(Duration::from_secs(remaining))),
            closing: slot.slots.closing.subscribe(),
            cursor: resume_after.unwrap_or_else(now_floor_v7),
            catching_up: resume_after.is_some(),
            page: VecDeque::new(),
            sent: RecentIds::default(),
            opened: false,
            finished: false,
            _slot: slot,
        }
    }

    /// The chunks of the body; dropping it drops the state (and frees the slot).
    fn into_chunks(self) -> impl futures_util::Stream<Item = Bytes> + Send + 'static {
        futures_util::stream::unfold(self, |mut stream| async move {
            let chunk = stream.next_chunk().await?;
            Some((chunk, stream))
        })
    }

    /// The next chunk to send; `None` ends the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if self.finished || *self.closing.borrow() {
                return None;
            }
            if !self.opened {
                self.opened = true;
                return Some(Bytes::from_static(OPENING));
            }
            if let Some(event) = self.page.pop_front() {
                if let Some(frame) = self.frame(&event) {
                    return Some(frame);
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
                        // A copy of an event a catch-up read sent is skipped by `frame`: by id,
                        // never by comparing with the cursor, which a late commit sorts below.
                        if event.user_id == Some(self.user_id)
                            && let Some(frame) = self.frame(&event)
                        {
                            return Some(frame);
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::debug!(missed, "event stream lagged; catching up from the store");
                        self.catching_up = true;
                    }
                    // The service is gone.
                    Err(RecvError::Closed) => return None,
                },
                _ = self.heartbeat.tick() => return Some(Bytes::from_static(HEARTBEAT)),
            }
        }
    }

    /// Reads the next page after the cursor; `None` (ending the stream) when the store
    /// fails: the client reconnects with `Last-Event-ID` and resumes.
    async fn read_page(&mut self) -> Option<()> {
        let events = match self
            .store
            .user_events_after(self.user_id, Some(self.cursor), CATCH_UP_PAGE)
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

    /// The frame of an event, unless this stream sent it already. Marks the stream finished
    /// after the revocation of its own session.
    fn frame(&mut self, event: &Event) -> Option<Bytes> {
        if self.sent.contains(event.id) {
            return None;
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
        Some(sse_frame(event))
    }
}

/// One event as a server-sent-events frame. The JSON is on one line (serde escapes line
/// breaks inside strings), so one `data:` line carries it.
fn sse_frame(event: &Event) -> Bytes {
    let data = serde_json::to_string(&event.body()).unwrap_or_else(|_| "{}".to_owned());
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {data}\n\n",
        event.id,
        event.event_type.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "sqlite")]
    use crate::events::EventBus;

    #[test]
    fn slots_cap_per_user_and_free_on_drop() {
        let slots = StreamSlots::default();
        let (ada, bob) = (Uuid::now_v7(), Uuid::now_v7());
        let first = slots.acquire(ada, 2).expect("first");
        let second = slots.acquire(ada, 2).expect("second");
        assert!(slots.acquire(ada, 2).is_none(), "third refused");
        assert!(
            slots.acquire(bob, 2).is_some(),
            "another user has own slots"
        );
        drop(first);
        assert_eq!(slots.open(ada), 1);
        let third = slots.acquire(ada, 2).expect("a freed slot");
        drop((second, third));
        assert_eq!(slots.open(ada), 0);
        assert!(slots.open.lock().expect("lock").is_empty(), "no entry kept");
    }

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

    #[test]
    fn frames_carry_id_type_and_one_line_of_json() {
        let event = Event::new(
            EventType::PasswordChanged,
            Some(Uuid::now_v7()),
            chrono::Utc::now(),
            serde_json::json!({"note": "line\nbreak"}),
        );
        let frame = String::from_utf8(sse_frame(&event).to_vec()).expect("utf-8");
        let lines: Vec<&str> = frame.split('\n').collect();
        assert_eq!(lines[0], format!("id: {}", event.id));
        assert_eq!(lines[1], "event: password.changed");
        let data: serde_json::Value =
            serde_json::from_str(lines[2].strip_prefix("data: ").expect("data")).expect("json");
        assert_eq!(data["data"]["note"], "line\nbreak");
        assert_eq!(&lines[3..], ["", ""]);
    }

    /// A user with `count` live sessions in `store`: the user and the sessions' ids.
    #[cfg(feature = "sqlite")]
    async fn user_with_sessions(store: &dyn Store, count: usize) -> (Uuid, Vec<Uuid>) {
        use crate::store::{NewRefreshToken, NewSession, NewUser, now};
        let user_id = Uuid::now_v7();
        store
            .create_user(&NewUser {
                id: user_id,
                email: format!("{user_id}@example.com"),
                email_normalized: format!("{user_id}@example.com"),
                password_hash: "x".to_owned(),
                created_at: now(),
            })
            .await
            .expect("user");
        let mut sessions = Vec::new();
        for index in 0..count {
            let id = Uuid::now_v7();
            let expires_at = now() + chrono::TimeDelta::days(1);
            let session = NewSession {
                id,
                user_id,
                device_info: None,
                ip_address: None,
                user_agent: None,
                created_at: now(),
                expires_at,
            };
            let token = NewRefreshToken {
                digest: format!("token-{user_id}-{index}").into_bytes(),
                session_id: id,
                user_id,
                token_version: 0,
                issued_at: now(),
                expires_at,
            };
            store
                .create_session(&session, &token)
                .await
                .expect("session");
            sessions.push(id);
        }
        (user_id, sessions)
    }

    #[cfg(feature = "sqlite")]
    fn claims(user_id: Uuid, session_id: Uuid) -> AccessClaims {
        AccessClaims::for_tests(user_id, session_id)
    }

    /// The id of each frame in chunks read until `count` frames came (comments skipped).
    #[cfg(feature = "sqlite")]
    async fn frame_ids(stream: &mut EventStream, count: usize) -> Vec<Uuid> {
        let mut ids = Vec::new();
        while ids.len() < count {
            let chunk = stream.next_chunk().await.expect("the stream goes on");
            let text = String::from_utf8(chunk.to_vec()).expect("UTF-8");
            if let Some(id) = text.strip_prefix("id: ").and_then(|rest| rest.get(..36)) {
                ids.push(Uuid::parse_str(id).expect("id"));
            }
        }
        ids
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_lagging_stream_catches_up_from_the_store_without_repeats_and_ends_with_its_session()
    {
        let store: Arc<dyn Store> =
            Arc::new(crate::store::SqliteStore::in_memory().await.expect("store"));
        let (user_id, sessions) = user_with_sessions(store.as_ref(), 7).await;
        let (own_session, others) = sessions.split_last().expect("sessions");
        // A bus of 2: the six revocations below make the stream's receiver lag.
        let bus = EventBus::new(2);
        let slots = StreamSlots::default();
        let mut stream = EventStream::new(
            &claims(user_id, *own_session),
            None,
            store.clone(),
            bus.subscribe(),
            Duration::from_secs(3600),
            slots.acquire(user_id, 1).expect("a slot"),
        );
        assert_eq!(stream.next_chunk().await.as_deref(), Some(OPENING));
        let mut stored = Vec::new();
        for session in others {
            let events = store
                .revoke_session(user_id, *session, "test", chrono::Utc::now())
                .await
                .expect("revoke")
                .expect("a session");
            bus.publish(&events);
            stored.extend(events.iter().map(|event| event.id));
        }
        assert_eq!(stored.len(), 6);
        assert_eq!(
            frame_ids(&mut stream, 6).await,
            stored,
            "all, in order, from the store"
        );
        // The two events still in the receiver were sent already: the next frame is the next
        // event, the revocation of the stream's own session, after which the stream ends.
        let last = store
            .revoke_session(user_id, *own_session, "test", chrono::Utc::now())
            .await
            .expect("revoke")
            .expect("a session");
        bus.publish(&last);
        assert_eq!(frame_ids(&mut stream, 1).await, [last[0].id]);
        assert!(
            stream.next_chunk().await.is_none(),
            "its session was revoked"
        );
        drop(stream);
        assert_eq!(slots.open(user_id), 0, "the slot is free");
    }

    /// An event committed late behind newer ones: its id (taken when its transaction began)
    /// is older than events another transaction committed first. A stream that lagged and
    /// read those newer events from the store still sends the late one when it arrives live.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn an_event_committed_late_behind_newer_ids_is_sent_after_a_catch_up() {
        let store: Arc<dyn Store> =
            Arc::new(crate::store::SqliteStore::in_memory().await.expect("store"));
        let (user_id, sessions) = user_with_sessions(store.as_ref(), 6).await;
        let (own_session, others) = sessions.split_last().expect("sessions");
        // A bus of 4: the five revocations below make the stream's receiver lag.
        let bus = EventBus::new(4);
        let slots = StreamSlots::default();
        let mut stream = EventStream::new(
            &claims(user_id, *own_session),
            None,
            store.clone(),
            bus.subscribe(),
            Duration::from_secs(3600),
            slots.acquire(user_id, 1).expect("a slot"),
        );
        assert_eq!(stream.next_chunk().await.as_deref(), Some(OPENING));
        // Its id is taken now; its transaction commits only after the revocations below.
        let late = Event::new(
            EventType::PasswordChanged,
            Some(user_id),
            chrono::Utc::now(),
            serde_json::json!({}),
        );
        let mut stored = Vec::new();
        for session in others {
            let events = store
                .revoke_session(user_id, *session, "test", chrono::Utc::now())
                .await
                .expect("revoke")
                .expect("a session");
            bus.publish(&events);
            stored.extend(events.iter().map(|event| event.id));
        }
        assert!(
            stored.iter().all(|id| late.id < *id),
            "the late id is older"
        );
        assert_eq!(
            frame_ids(&mut stream, 5).await,
            stored,
            "caught up from the store"
        );
        // Two more after it, so a stream that drops the late one still yields two frames.
        let next: Vec<Event> = (0..2)
            .map(|_| {
                Event::new(
                    EventType::PasswordChanged,
                    Some(user_id),
                    chrono::Utc::now(),
                    serde_json::json!({}),
                )
            })
            .collect();
        bus.publish(std::slice::from_ref(&late));
        bus.publish(&next);
        assert_eq!(
            frame_ids(&mut stream, 2).await,
            [late.id, next[0].id],
            "the late event is not taken for one already read"
        );
        assert_eq!(frame_ids(&mut stream, 1).await, [next[1].id]);
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_resumed_stream_replays_then_skips_live_copies_and_ends_when_the_host_closes() {
        let store: Arc<dyn Store> =
            Arc::new(crate::store::SqliteStore::in_memory().await.expect("store"));
        let (user_id, sessions) = user_with_sessions(store.as_ref(), 4).await;
        let bus = EventBus::new(16);
        let mut ids = Vec::new();
        for session in &sessions[..3] {
            let events = store
                .revoke_session(user_id, *session, "test", chrono::Utc::now())
                .await
                .expect("revoke")
                .expect("a session");
            ids.extend(events.iter().map(|event| event.id));
        }
        let slots = StreamSlots::default();
        let mut stream = EventStream::new(
            &claims(user_id, sessions[3]),
            Some(ids[0]),
            store.clone(),
            bus.subscribe(),
            Duration::from_secs(3600),
            slots.acquire(user_id, 1).expect("a slot"),
        );
        // The last two are also published live while the stream replays them.
        let live_copies: Vec<Event> = store
            .user_events_after(user_id, Some(ids[0]), 10)
            .await
            .expect("events");
        bus.publish(&live_copies);
        let other_user = Event::new(
            EventType::PasswordChanged,
            Some(Uuid::now_v7()),
            chrono::Utc::now(),
            serde_json::json!({}),
        );
        bus.publish(std::slice::from_ref(&other_user));
        assert_eq!(stream.next_chunk().await.as_deref(), Some(OPENING));
        assert_eq!(frame_ids(&mut stream, 2).await, ids[1..]);
        let next = Event::new(
            EventType::PasswordChanged,
            Some(user_id),
            chrono::Utc::now(),
            serde_json::json!({}),
        );
        bus.publish(std::slice::from_ref(&next));
        assert_eq!(
            frame_ids(&mut stream, 1).await,
            [next.id],
            "no repeats, no other user's"
        );
        slots.close_all();
        assert!(
            stream.next_chunk().await.is_none(),
            "the host closed the streams"
        );
    }
}
