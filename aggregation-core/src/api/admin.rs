//! Administration: token rotations, the security configuration and the jobs status.
//! Every endpoint needs a valid access token (401) of a user holding the admin role in the
//! store (403).

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::Serialize;
use uuid::Uuid;

use super::extract::JsonFields;
use super::{ApiResult, RequestContext, json, parse_path_uuid, require_user};
use crate::admin::AdminError;
use crate::auth::AccessClaims;
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::service::State;

/// Longest rotation reason.
const MAX_REASON_CHARS: usize = 500;

impl From<AdminError> for ApiError {
    fn from(error: AdminError) -> Self {
        let detail = error.to_string();
        match error {
            AdminError::NotAdmin => ApiError::new(ErrorCode::Forbidden, detail),
            AdminError::UnknownUser(_) | AdminError::UnknownEmail(_) => {
                ApiError::new(ErrorCode::NotFound, detail)
            }
            AdminError::RotationFailed(_) => {
                ApiError::new(ErrorCode::CommandExecutionFailed, detail)
            }
            AdminError::Store(store) => store.into(),
        }
    }
}

/// The caller's claims, once the store confirms they hold the admin role.
async fn require_admin(state: &State, ctx: &RequestContext) -> Result<AccessClaims, ApiError> {
    let claims = require_user(ctx)?;
    state.admin.require_admin(claims.sub).await?;
    Ok(claims)
}

/// The required `reason` of a rotation: 1..500 characters, not only whitespace.
fn reason(ctx: &RequestContext, body: &Bytes) -> Result<String, ApiError> {
    let mut fields = JsonFields::parse(ctx, body)?;
    let reason = fields.string("reason", 1, MAX_REASON_CHARS);
    let reason = match reason {
        Some(reason) if reason.trim().is_empty() => {
            fields.add_error(FieldError::new("reason", "too_short", "Must not be blank."));
            None
        }
        other => other,
    };
    fields.finish()?;
    reason.ok_or_else(ApiError::internal)
}

#[derive(Serialize)]
struct GlobalRotationJson {
    previous_version: i64,
    new_version: i64,
    grace_period_seconds: i64,
    message: String,
}

/// `POST /api/v1/admin/security/rotations`
pub(crate) async fn rotate_global(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let claims = require_admin(state, ctx).await?;
    let reason = reason(ctx, &body)?;
    let rotation = state.admin.rotate_global(claims.sub, &reason).await?;
    json(
        StatusCode::CREATED,
        &GlobalRotationJson {
            previous_version: rotation.previous_version,
            new_version: rotation.new_version,
            grace_period_seconds: rotation.grace_period_seconds,
            message: format!(
                "Global minimum token version raised from {} to {}. Refresh tokens issued \
                 before stay valid for {} seconds, then are rejected.",
                rotation.previous_version, rotation.new_version, rotation.grace_period_seconds
            ),
        },
    )
}

#[derive(Serialize)]
struct UserRotationJson {
    user_id: Uuid,
    previous_version: i64,
    new_version: i64,
    message: String,
}

/// `POST /api/v1/admin/users/{user_id}/rotations`
pub(crate) async fn rotate_user(
    state: &State,
    ctx: &RequestContext,
    user_id: &str,
    body: Bytes,
) -> ApiResult {
    let claims = require_admin(state, ctx).await?;
    let user_id = parse_path_uuid("user_id", user_id)?;
    let reason = reason(ctx, &body)?;
    let rotation = state
        .admin
        .rotate_user(claims.sub, user_id, &reason)
        .await?;
    json(
        StatusCode::CREATED,
        &UserRotationJson {
            user_id: rotation.user_id,
            previous_version: rotation.previous_version,
            new_version: rotation.new_version,
            message: format!(
                "Minimum token version of user {} raised from {} to {}; every refresh token \
                 issued to the user before now is rejected.",
                rotation.user_id, rotation.previous_version, rotation.new_version
            ),
        },
    )
}

#[derive(Serialize)]
struct SecurityConfigJson {
    global_min_token_version: i64,
    grace_period_seconds: i64,
    last_rotation_at: Option<DateTime<Utc>>,
    last_rotation_reason: Option<String>,
}

/// `GET /api/v1/admin/security/config`
pub(crate) async fn security_config(state: &State, ctx: &RequestContext) -> ApiResult {
    require_admin(state, ctx).await?;
    let config = state.admin.security_config().await?;
    json(
        StatusCode::OK,
        &SecurityConfigJson {
            global_min_token_version: config.global_min_token_version,
            grace_period_seconds: config.grace_period_seconds,
            last_rotation_at: config.last_rotation_at,
            last_rotation_reason: config.last_rotation_reason,
        },
    )
}

#[derive(Serialize)]
struct JobJson {
    name: String,
    enabled: bool,
    interval_seconds: Option<u64>,
    running: bool,
    last_started_at: Option<DateTime<Utc>>,
    last_finished_at: Option<DateTime<Utc>>,
    last_success_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    runs: i64,
    failures: i64,
    next_run_at: Option<DateTime<Utc>>,
}

#[derive(Serialize)]
struct JobsJson {
    healthy: bool,
    jobs: Vec<JobJson>,
}

/// `GET /api/v1/admin/jobs`
pub(crate) async fn jobs_status(state: &State, ctx: &RequestContext) -> ApiResult {
    require_admin(state, ctx).await?;
    let status = state.admin.jobs_status().await?;
    json(
        StatusCode::OK,
        &JobsJson {
            healthy: status.healthy,
            jobs: status
                .jobs
                .into_iter()
                .map(|job| JobJson {
                    name: job.name,
                    enabled: job.enabled,
                    interval_seconds: job.interval_seconds,
                    running: job.running,
                    last_started_at: job.last_started_at,
                    last_finished_at: job.last_finished_at,
                    last_success_at: job.last_success_at,
                    last_error: job.last_error,
                    runs: job.runs,
                    failures: job.failures,
                    next_run_at: job.next_run_at,
                })
                .collect(),
        },
    )
}
