//! Listing and revoking sessions.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::Serialize;
use uuid::Uuid;

use super::extract::{JsonFields, QueryParams};
use super::{ApiResult, RequestContext, json, no_content, parse_path_uuid, require_user};
use crate::problem::{ApiError, ErrorCode};
use crate::service::State;
use crate::sessions::SessionError;
use crate::store::SessionRecord;

/// Longest revoke reason.
const MAX_REASON_CHARS: usize = 255;

#[derive(Serialize)]
struct SessionJson<'a> {
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

fn session_json(session: &SessionRecord, current: Uuid) -> SessionJson<'_> {
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

#[derive(Serialize)]
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
pub(crate) async fn list(state: &State, ctx: &RequestContext) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let active_only = query.bool("active_only", true);
    query.finish()?;
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
pub(crate) async fn get(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    let session = state.sessions.get(claims.sub, id).await?;
    json(StatusCode::OK, &session_json(&session, claims.session_id))
}

fn reason(ctx: &RequestContext, body: &Bytes) -> Result<Option<String>, ApiError> {
    let mut fields = JsonFields::parse_optional(ctx, body)?;
    let reason = fields.optional_string("reason", 1, MAX_REASON_CHARS);
    fields.finish()?;
    Ok(reason)
}

/// `DELETE /api/v1/sessions/{id}`
pub(crate) async fn revoke(
    state: &State,
    ctx: &RequestContext,
    id: &str,
    body: Bytes,
) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    let reason = reason(ctx, &body)?;
    state
        .sessions
        .revoke(claims.sub, id, reason.as_deref())
        .await?;
    no_content()
}

#[derive(Serialize)]
struct BulkRevoke {
    revoked_count: u64,
    message: String,
}

/// `DELETE /api/v1/sessions`
pub(crate) async fn revoke_all(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let claims = require_user(ctx)?;
    let reason = reason(ctx, &body)?;
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
