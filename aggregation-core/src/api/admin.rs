//! Administration: token rotations, the security configuration and the jobs status.
//! Every endpoint needs a valid access token (401) of a user holding the admin role in the
//! store (403).

use chrono::{DateTime, Utc};
use http::StatusCode;
use http::request::Parts;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::extract::{Json, PathUserId, User};
use super::handler::FromParts;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, Field, Validate, body};
use super::{ApiResult, json};
use crate::admin::AdminError;
use crate::app::App;
use crate::auth::AccessClaims;
use crate::config::Config;
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::rate_limit::policy::{API_READ, API_WRITE};

pub(crate) const ROUTES: &[Route] = &[
    route!(POST "/api/v1/admin/security/rotations" => rotate_global, limited(API_WRITE),
        "Raise the global minimum token version", [201: GlobalRotationJson]),
    route!(POST "/api/v1/admin/users/{user_id}/rotations" => rotate_user, limited(API_WRITE),
        "Raise one user's minimum token version", [201: UserRotationJson]),
    route!(GET "/api/v1/admin/security/config" => security_config, limited(API_READ),
        "The token security configuration", [200: SecurityConfigJson]),
    route!(GET "/api/v1/admin/jobs" => jobs_status, limited(API_READ),
        "The status of the background jobs", [200: JobsJson]),
];

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

/// The caller: a valid access token (401) of a user the store confirms holds the admin role
/// (403).
pub(crate) struct Admin(AccessClaims);

impl FromParts for Admin {
    async fn from_parts(parts: &Parts, state: &App) -> Result<Self, ApiError> {
        let User(claims) = User::from_parts(parts, state).await?;
        state.admin.require_admin(claims.sub).await?;
        Ok(Self(claims))
    }
}

/// The required `reason` of a rotation: 1..500 characters, not only whitespace.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct ReasonBody {
    #[schema(value_type = String, required = true, min_length = 1, max_length = 500, example = "Suspected token leak")]
    reason: Field,
}

impl Validate for ReasonBody {
    type Valid = String;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let reason = body::string("reason", self.reason, 1, MAX_REASON_CHARS).and_then(|reason| {
            if reason.trim().is_empty() {
                Err(FieldError::new("reason", "too_short", "Must not be blank."))
            } else {
                Ok(reason)
            }
        });
        reason.all_valid()
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct GlobalRotationJson {
    previous_version: i64,
    new_version: i64,
    grace_period_seconds: i64,
    message: String,
}

/// `POST /api/v1/admin/security/rotations`
async fn rotate_global(
    state: &App,
    Admin(claims): Admin,
    Json(reason): Json<ReasonBody>,
) -> ApiResult {
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

#[derive(Serialize, utoipa::ToSchema)]
struct UserRotationJson {
    user_id: Uuid,
    previous_version: i64,
    new_version: i64,
    message: String,
}

/// `POST /api/v1/admin/users/{user_id}/rotations`
async fn rotate_user(
    state: &App,
    Admin(claims): Admin,
    PathUserId(user_id): PathUserId,
    Json(reason): Json<ReasonBody>,
) -> ApiResult {
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

#[derive(Serialize, utoipa::ToSchema)]
struct SecurityConfigJson {
    global_min_token_version: i64,
    grace_period_seconds: i64,
    last_rotation_at: Option<DateTime<Utc>>,
    last_rotation_reason: Option<String>,
}

/// `GET /api/v1/admin/security/config`
async fn security_config(state: &App, _: Admin) -> ApiResult {
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

#[derive(Serialize, utoipa::ToSchema)]
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

#[derive(Serialize, utoipa::ToSchema)]
struct JobsJson {
    healthy: bool,
    jobs: Vec<JobJson>,
}

/// `GET /api/v1/admin/jobs`
async fn jobs_status(state: &App, _: Admin) -> ApiResult {
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
