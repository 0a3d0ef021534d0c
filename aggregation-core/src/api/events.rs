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
//! - Which events are sent and when (catch-up from the store after lagging, each event once,
//!   the end of the stream) is the event stream's logic in `events::stream`; this module is
//!   its HTTP edge. The stream ends when the access token that opened it expires, and after
//!   the frame saying that its own session was revoked: the client reconnects with a fresh
//!   token and `Last-Event-ID`.

use bytes::Bytes;
use futures_util::StreamExt as _;
use http::request::Parts;
use http::{HeaderValue, StatusCode, header};
use tokio::sync::watch;
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
use crate::events::stream::StreamOwner;
use crate::events::{Event, EventStream, StreamItem};
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::API_READ;
use crate::user_slots::{UserSlot, UserSlots};

pub(crate) const ROUTES: &[Route] = &[route!(GET "/api/v1/events" => open, limited(API_READ),
    "Stream the caller's events (server-sent events)",
    [200: EventStreamText as "text/event-stream"; RateLimitExceeded])];

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
    let owner = StreamOwner {
        user_id: claims.sub,
        session_id: claims.session_id,
        expires_at: claims.exp,
    };
    let closing = slot.slots.closing.subscribe();
    let stream = EventStream::new(
        owner,
        resume_after,
        Box::new(app.store.clone()),
        receiver,
        app.config.event_stream_heartbeat(),
        closing,
        Box::new(slot),
    );
    http::Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        // Tells nginx-style proxies not to buffer the stream.
        .header("x-accel-buffering", HeaderValue::from_static("no"))
        .body(ResponseBody::stream(stream.into_items().map(sse_chunk)))
        .map_err(|_| ApiError::internal())
}

/// The open event streams per user on this instance, for the per-user cap. Holds one entry
/// per user with an open stream, so it is bounded by the open connections.
#[derive(Debug, Clone)]
pub(crate) struct StreamSlots {
    open: UserSlots,
    /// Becomes `true` when the host shuts down: every stream ends.
    closing: watch::Sender<bool>,
}

impl Default for StreamSlots {
    fn default() -> Self {
        Self {
            // The cap is the configuration's, given at each call; the map is bounded by the
            // open connections.
            open: UserSlots::new(1, usize::MAX),
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
        let slot = self.open.try_acquire_up_to(user, cap).ok()?;
        Some(StreamSlot {
            slots: self.clone(),
            _open: slot,
        })
    }

    /// How many streams of `user` are open.
    #[cfg(test)]
    fn open(&self, user: Uuid) -> usize {
        self.open.running(user)
    }
}

/// One open stream, counted until dropped.
#[derive(Debug)]
struct StreamSlot {
    slots: StreamSlots,
    _open: UserSlot,
}

/// One item of a stream as the chunk sent for it.
fn sse_chunk(item: StreamItem) -> Bytes {
    match item {
        StreamItem::Opened => Bytes::from_static(OPENING),
        StreamItem::Heartbeat => Bytes::from_static(HEARTBEAT),
        StreamItem::Event(event) => sse_frame(&event),
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
    use crate::events::EventType;

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
        assert_eq!(slots.open.users(), 0, "no entry kept");
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
}
