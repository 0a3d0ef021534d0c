//! Listing and revoking sessions.

use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::ObjectBuilder;
use uuid::Uuid;

use super::extract::{JsonOrEmpty, PathId, Query, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{ActiveOnlyQuery, AllValid as _, Field, Validate, body};
use super::{ApiResult, json, no_content};
use crate::app::App;
use crate::config::Config;
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::{API_READ, API_WRITE};
use crate::sessions::SessionError;
use crate::store::SessionRecord;

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/sessions" => list, limited(API_READ), "List the caller's sessions", [200: SessionList<'static>]),
    route!(GET "/api/v1/sessions/{id}" => get, limited(API_READ),
        "Read one of the caller's sessions", [200: SessionJson<'static>]),
    route!(DELETE "/api/v1/sessions/{id}" => revoke, limited(API_WRITE),
        "Revoke one of the caller's sessions", [204]),
    route!(DELETE "/api/v1/sessions" => revoke_all, limited(API_WRITE),
        "Revoke every session of the caller but the current one", [200: BulkRevoke]),
];

/// Longest revoke reason.
const MAX_REASON_CHARS: usize = 255;

/// `{reason?}` of a revocation, the body itself optional.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct RevokeBody {
    #[schema(schema_with = reason_schema)]
    reason: Field,
}

fn reason_schema() -> ObjectBuilder {
    schemas::text(1, MAX_REASON_CHARS, true)
}

impl Validate for RevokeBody {
    type Valid = Option<String>;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        body::optional_string("reason", self.reason, 1, MAX_REASON_CHARS).all_valid()
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct SessionJson<'a> {
    id: Uuid,
    device_info: Option<&'a str>,
    ip_address: Option<&'a str>,
    location: Option<&'a str>,
    created_at: DateTime<Utc>,
    last_activity_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    is_current: bool,
    is_revoked: bool,
}

pub(crate) fn session_json(session: &SessionRecord, current: Uuid) -> SessionJson<'_> {
    SessionJson {
        id: session.id,
        device_info: session.device_info.as_deref(),
        ip_address: session.ip_address.as_deref(),
        location: session.location.as_deref(),
        created_at: session.created_at,
        last_activity_at: session.last_activity_at,
        expires_at: session.expires_at,
        is_current: session.id == current,
        is_revoked: session.revoked_at.is_some(),
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct SessionList<'a> {
    sessions: Vec<SessionJson<'a>>,
    total_count: usize,
    active_count: usize,
}

impl From<SessionError> for ApiError {
    fn from(error: SessionError) -> Self {
        match error {
            SessionError::NotFound => ApiError::new(ErrorCode::NotFound, error.to_string()),
            SessionError::Store(store) => store.into(),
        }
    }
}

/// `GET /api/v1/sessions`
async fn list(
    state: &App,
    User(claims): User,
    Query(active_only): Query<ActiveOnlyQuery<true>>,
) -> ApiResult {
    let listing = state.sessions.list(claims.sub, active_only).await?;
    let (sessions, active_count) = (listing.sessions, listing.active_count);
    json(
        StatusCode::OK,
        &SessionList {
            total_count: sessions.len(),
            active_count,
            sessions: sessions
                .iter()
                .map(|session| session_json(session, claims.session_id))
                .collect(),
        },
    )
}

/// `GET /api/v1/sessions/{id}`
async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let session = state.sessions.get(claims.sub, id).await?;
    json(StatusCode::OK, &session_json(&session, claims.session_id))
}

/// `DELETE /api/v1/sessions/{id}`
async fn revoke(
    state: &App,
    User(claims): User,
    PathId(id): PathId,
    JsonOrEmpty(reason): JsonOrEmpty<RevokeBody>,
) -> ApiResult {
    state
        .sessions
        .revoke(claims.sub, id, reason.as_deref())
        .await?;
    no_content()
}

#[derive(Serialize, utoipa::ToSchema)]
struct BulkRevoke {
    revoked_count: u64,
    message: String,
}

/// `DELETE /api/v1/sessions`
async fn revoke_all(
    state: &App,
    User(claims): User,
    JsonOrEmpty(reason): JsonOrEmpty<RevokeBody>,
) -> ApiResult {
    let revoked_count = state
        .sessions
        .revoke_all_but_current(claims.sub, claims.session_id, reason.as_deref())
        .await?;
    json(
        StatusCode::OK,
        &BulkRevoke {
            revoked_count,
            message: format!(
                "Revoked {revoked_count} other sessions; this session stays signed in."
            ),
        },
    )
}
