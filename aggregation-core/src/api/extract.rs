//! Extractors: what a handler takes from the request, each refusing it with the problem of
//! the current API when it cannot.
//!
//! - [`User`]: the verified bearer token's claims (401 without one); [`Caller`] for endpoints
//!   that are public but look at a token when one is sent.
//! - [`PathId`] / [`PathUserId`]: the `{id}` / `{user_id}` segment as a UUID (422 `path.id`).
//! - [`Json<T>`]: a JSON object body checked by `T`'s [`Validate`] (413 past the body limit;
//!   422 for another content type, malformed JSON or invalid fields); [`JsonOrEmpty<T>`] also
//!   takes an empty body as `{}`.
//! - [`Query<T>`]: the query string checked by `T`'s [`Validate`].
//! - [`ClientInfo`]: client IP and user agent, for sessions and emails.
//!
//! The request extensions they read, [`ClientIp`] and [`Caller`], are set once per request by
//! the layers of [`crate::service`].

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, header};
use http_body_util::{BodyExt as _, Collected, LengthLimitError, Limited};
use serde_json::{Map, Value};

use super::handler::{FromParts, FromRequest, ViaBody};
use super::router::Matched;
use super::validate::Validate;
use super::{RequestBody, parse_path_uuid};
use crate::app::App;
use crate::auth::{AccessClaims, ClientInfo};
use crate::problem::{ApiError, ErrorCode};

/// The client address of the request, behind trusted proxies (set by the client-IP layer);
/// `None` when unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientIp(pub(crate) Option<IpAddr>);

/// Who sent the request, by its bearer token (set by the bearer layer, which verifies the
/// token once for the rate limiter and the handlers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// No bearer token.
    Anonymous,
    /// A bearer token that does not verify (forged, expired, malformed).
    InvalidToken,
    /// A valid bearer token's claims (shared: every extractor of the request reads them).
    Authenticated(Arc<AccessClaims>),
}

impl Caller {
    /// The claims of a valid token.
    pub(crate) fn claims(&self) -> Option<&AccessClaims> {
        match self {
            Self::Authenticated(claims) => Some(claims),
            Self::Anonymous | Self::InvalidToken => None,
        }
    }
}

impl FromParts for Caller {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        Ok(parts
            .extensions
            .get::<Self>()
            .cloned()
            .unwrap_or(Self::Anonymous))
    }
}

/// The authenticated user: the claims of the request's valid access token, or 401.
pub(crate) struct User(pub(crate) Arc<AccessClaims>);

impl FromParts for User {
    async fn from_parts(parts: &Parts, app: &App) -> Result<Self, ApiError> {
        match parts.extensions.get::<Caller>() {
            // An erased user's tokens were all issued before the erasure: refused from the
            // moment it began.
            Some(Caller::Authenticated(claims)) if app.user_data.erased().contains(claims.sub) => {
                Err(ApiError::unauthorized())
            }
            Some(Caller::Authenticated(claims)) => Ok(Self(claims.clone())),
            _ => Err(ApiError::unauthorized()),
        }
    }
}

impl FromParts for ClientInfo {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        Ok(Self {
            ip: parts.extensions.get::<ClientIp>().and_then(|ip| ip.0),
            user_agent: header_str(&parts.headers, &header::USER_AGENT)
                .map(str::to_owned)
                .filter(|agent| !agent.trim().is_empty()),
        })
    }
}

/// A path parameter of the matched route; empty when the route has none of that name.
fn path_param<'p>(parts: &'p Parts, name: &str) -> &'p str {
    parts
        .extensions
        .get::<Matched>()
        .map_or("", |matched| matched.param(name))
}

/// The `{id}` segment of the path, a UUID (422 `path.id` otherwise).
pub(crate) struct PathId(pub(crate) uuid::Uuid);

impl FromParts for PathId {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        parse_path_uuid("id", path_param(parts, "id")).map(Self)
    }
}

/// The `{slug}` segment of the path, as sent (an unknown slug is the handler's 404).
pub(crate) struct PathSlug(pub(crate) String);

impl FromParts for PathSlug {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        Ok(Self(path_param(parts, "slug").to_owned()))
    }
}

/// The `{id}` segment of a category's path, as sent (`custom:<uuid>`; anything else is no
/// category of the caller's, the handler's 404).
pub(crate) struct PathCategoryId(pub(crate) String);

impl FromParts for PathCategoryId {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        Ok(Self(path_param(parts, "id").to_owned()))
    }
}

/// The `{user_id}` segment of the path, a UUID (422 `path.user_id` otherwise).
pub(crate) struct PathUserId(pub(crate) uuid::Uuid);

impl FromParts for PathUserId {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        parse_path_uuid("user_id", path_param(parts, "user_id")).map(Self)
    }
}

/// The query string, checked by `T`.
pub(crate) struct Query<T: Validate>(pub(crate) T::Valid);

impl<T: Validate> FromParts for Query<T> {
    async fn from_parts(parts: &Parts, app: &App) -> Result<Self, ApiError> {
        let map = query_map(parts.uri.query());
        let raw: T = serde_json::from_value(Value::Object(map)).map_err(|error| {
            ApiError::field(
                "query",
                "invalid_type",
                format!("The query string could not be read: {error}"),
            )
        })?;
        raw.validate(&app.config).map(Self)
    }
}

/// The parameters of a query string, decoded (`+` as space, invalid escapes kept as
/// written), the last value of a repeated name winning; every value a JSON string.
pub(crate) fn query_map(query: Option<&str>) -> Map<String, Value> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .map(|(key, value)| (key.into_owned(), Value::String(value.into_owned())))
        .collect()
}

/// A JSON object body, checked by `T`.
pub(crate) struct Json<T: Validate>(pub(crate) T::Valid);

/// A JSON object body that may also be empty (then read as `{}`, whatever its content type),
/// checked by `T`.
pub(crate) struct JsonOrEmpty<T: Validate>(pub(crate) T::Valid);

/// Deserializes a body object into `T` and checks it.
fn validated<T: Validate>(map: Map<String, Value>, app: &App) -> Result<T::Valid, ApiError> {
    let raw: T = serde_json::from_value(Value::Object(map)).map_err(|error| {
        ApiError::field(
            "body",
            "invalid_type",
            format!("The request body could not be read: {error}"),
        )
    })?;
    raw.validate(&app.config)
}

impl<T: Validate + Send> FromRequest<ViaBody> for Json<T> {
    type Read = Bytes;

    async fn read(body: RequestBody, parts: &Parts, app: &App) -> Result<Bytes, ApiError> {
        read_body(&parts.headers, body, app.config.max_body_bytes()).await
    }

    async fn from_read(bytes: Bytes, parts: &Parts, app: &App) -> Result<Self, ApiError> {
        let map = parse_json_object(&parts.headers, &bytes, false)?;
        validated::<T>(map, app).map(Self)
    }
}

impl<T: Validate + Send> FromRequest<ViaBody> for JsonOrEmpty<T> {
    type Read = Bytes;

    async fn read(body: RequestBody, parts: &Parts, app: &App) -> Result<Bytes, ApiError> {
        read_body(&parts.headers, body, app.config.max_body_bytes()).await
    }

    async fn from_read(bytes: Bytes, parts: &Parts, app: &App) -> Result<Self, ApiError> {
        let map = parse_json_object(&parts.headers, &bytes, true)?;
        validated::<T>(map, app).map(Self)
    }
}

/// A header as a string, when it is one.
pub(crate) fn header_str<'h>(headers: &'h HeaderMap, name: &header::HeaderName) -> Option<&'h str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Whether a Content-Type names JSON (`application/json`, `application/*+json`, with params).
fn is_json_content_type(value: &str) -> bool {
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The object of a body that must be a JSON object sent as JSON; when `optional`, an empty
/// (or all whitespace) body is an empty object whatever its content type.
pub(crate) fn parse_json_object(
    headers: &HeaderMap,
    body: &[u8],
    optional: bool,
) -> Result<Map<String, Value>, ApiError> {
    let empty = body.iter().all(u8::is_ascii_whitespace);
    if optional && empty {
        return Ok(Map::new());
    }
    match header_str(headers, &header::CONTENT_TYPE) {
        Some(value) if is_json_content_type(value) => {}
        _ => {
            return Err(ApiError::field(
                "header.content-type",
                "unsupported_content_type",
                "The request body must be JSON, sent with Content-Type: application/json.",
            ));
        }
    }
    if empty {
        return Err(ApiError::field(
            "body",
            "required",
            "A JSON object body is required.",
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::field(
            "body",
            "invalid_type",
            "The request body must be a JSON object.",
        )),
        Err(error) => Err(ApiError::field(
            "body",
            "malformed_json",
            format!(
                "The request body is not valid JSON (line {}, column {}).",
                error.line(),
                error.column()
            ),
        )),
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that was already read, for a handler that reads it again.
pub(crate) fn buffered_body(bytes: Bytes) -> RequestBody {
    http_body_util::Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Reads a whole body, refusing it with 413 when its declared length or its bytes pass
/// `limit`.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: RequestBody,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("The request body is larger than {limit} bytes."),
        )
    };
    let declared =
        header_str(headers, &header::CONTENT_LENGTH).and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    // Boxed so that the future's `Send` is proven here, where every lifetime is known (the
    // compiler cannot prove it for `Collect<Limited<_>>` inside a generic caller).
    let collect: Pin<Box<dyn Future<Output = Result<Collected<Bytes>, BoxError>> + Send>> =
        Box::pin(Limited::new(body, limit).collect());
    match collect.await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(too_large()),
        Err(error) => Err(ApiError::field(
            "body",
            "unreadable",
            format!("The request body could not be read: {error}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::StreamBody;

    use super::*;

    fn body(bytes: &'static [u8]) -> RequestBody {
        buffered_body(Bytes::from_static(bytes))
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("Application/JSON; charset=utf-8"));
        assert!(is_json_content_type("application/merge-patch+json"));
        assert!(!is_json_content_type("text/plain"));
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_413_and_at_the_limit_are_read() {
        let headers = HeaderMap::new();
        let read = read_body(&headers, body(b"12345"), 5)
            .await
            .expect("at the limit");
        assert_eq!(read, Bytes::from_static(b"12345"));
        let error = read_body(&headers, body(b"123456"), 5)
            .await
            .expect_err("over");
        assert_eq!(error.code(), ErrorCode::PayloadTooLarge);
        assert_eq!(error.detail(), "The request body is larger than 5 bytes.");
        // The declared length alone is enough, before any byte is read.
        let mut declared = HeaderMap::new();
        declared.insert(header::CONTENT_LENGTH, http::HeaderValue::from_static("6"));
        let error = read_body(&declared, body(b""), 5)
            .await
            .expect_err("declared");
        assert_eq!(error.code(), ErrorCode::PayloadTooLarge);
    }

    #[tokio::test]
    async fn a_failing_body_is_unreadable() {
        let frames = futures_util::stream::iter([Err::<http_body::Frame<Bytes>, _>(Box::<
            dyn std::error::Error + Send + Sync,
        >::from(
            "connection reset",
        ))]);
        let failing = StreamBody::new(frames).boxed_unsync();
        let error = read_body(&HeaderMap::new(), failing, 5)
            .await
            .expect_err("unreadable");
        assert_eq!(error.errors()[0].code, "unreadable");
        assert_eq!(
            error.errors()[0].message,
            "The request body could not be read: connection reset"
        );
    }

    #[test]
    fn json_objects_only() {
        let mut json = HeaderMap::new();
        json.insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        let code = |headers: &HeaderMap, body: &[u8], optional| {
            parse_json_object(headers, body, optional)
                .expect_err("refused")
                .errors()[0]
                .code
        };
        assert_eq!(
            code(&HeaderMap::new(), b"{}", false),
            "unsupported_content_type"
        );
        assert_eq!(code(&json, b"  ", false), "required");
        assert_eq!(code(&json, b"[]", false), "invalid_type");
        assert_eq!(code(&json, b"{\"a\": ", false), "malformed_json");
        assert!(parse_json_object(&HeaderMap::new(), b" ", true).is_ok());
        let map = parse_json_object(&json, br#"{"a": 1, "a": 2}"#, false).expect("object");
        assert_eq!(map.get("a"), Some(&Value::from(2)));
    }

    #[test]
    fn queries_decode_and_the_last_value_wins() {
        let map = query_map(Some("a=1&&b=x+y%21&a=2&c&d=%zz"));
        assert_eq!(map.get("a"), Some(&Value::from("2")));
        assert_eq!(map.get("b"), Some(&Value::from("x y!")));
        assert_eq!(map.get("c"), Some(&Value::from("")));
        assert_eq!(map.get("d"), Some(&Value::from("%zz")));
        assert!(query_map(None).is_empty());
    }
}
