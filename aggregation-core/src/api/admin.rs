//! Administration: token rotations, the security configuration, the jobs status and the audit
//! trail. Every endpoint needs a valid access token (401) of a user holding the admin role in
//! the store (403).
//!
//! # Audit trail
//!
//! `GET /api/v1/admin/audit-events` lists the durable events of every user (the store's outbox),
//! oldest first, in keyset pages: `{"events": [...], "next_after": id | null}`. Pass
//! `next_after` as `after` for the next page; it is `null` on the last one. Filters, combined:
//! `user_id`, `type` (an event type), `since` (inclusive) and `until` (exclusive), each an
//! RFC 3339 date-time or a plain date (its midnight UTC) within the accepted years, and `limit`
//! (1 to 200, default 50). `since` after `until` is 422. Events are kept for
//! [`Config::audit_retention`] (`AGG_AUDIT_RETENTION_DAYS`, default 365 days).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use http::StatusCode;
use http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::ObjectBuilder;
use uuid::Uuid;

use super::extract::{Json, PathUserId, Query, User};
use super::handler::FromParts;
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, Field, ParameterSchema, Validate, body, query};
use super::{ApiResult, json};
use crate::admin::AdminError;
use crate::app::App;
use crate::auth::AccessClaims;
use crate::config::Config;
use crate::events::{Event, EventType};
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::rate_limit::policy::{API_READ, API_WRITE};
use crate::store::AuditFilter;

pub(crate) const ROUTES: &[Route] = &[
    route!(POST "/api/v1/admin/security/rotations" => rotate_global, limited(API_WRITE),
        "Raise the global minimum token version", [201: GlobalRotationJson]),
    route!(POST "/api/v1/admin/users/{user_id}/rotations" => rotate_user, limited(API_WRITE),
        "Raise one user's minimum token version", [201: UserRotationJson]),
    route!(GET "/api/v1/admin/security/config" => security_config, limited(API_READ),
        "The token security configuration", [200: SecurityConfigJson]),
    route!(GET "/api/v1/admin/jobs" => jobs_status, limited(API_READ),
        "The status of the background jobs", [200: JobsJson]),
    route!(GET "/api/v1/admin/audit-events" => audit_events, limited(API_READ),
        "The audit trail: every user's durable events, oldest first, in keyset pages",
        [200: AuditEventsJson]),
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
pub(crate) struct Admin(pub(crate) Arc<AccessClaims>);

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
    #[schema(required = true, schema_with = reason_schema)]
    reason: Field,
}

fn reason_schema() -> ObjectBuilder {
    schemas::with_example(
        schemas::text(1, MAX_REASON_CHARS, false),
        "Suspected token leak",
    )
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

/// Bounds and default of an audit page.
const MAX_AUDIT_LIMIT: i64 = 200;
const DEFAULT_AUDIT_LIMIT: u32 = 50;

/// The filters and page of `GET /api/v1/admin/audit-events`.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct AuditQuery {
    /// Only events of this user.
    #[param(schema_with = crate::api::openapi::schemas::uuid)]
    user_id: Option<String>,
    /// Only events of this type.
    #[param(rename = "type", value_type = Option<EventType>, inline)]
    #[serde(rename = "type")]
    event_type: Option<String>,
    /// Only events at or after this instant (RFC 3339, or a date: its midnight UTC).
    #[param(schema_with = crate::api::openapi::schemas::instant)]
    since: Option<String>,
    /// Only events before this instant (RFC 3339, or a date: its midnight UTC).
    #[param(schema_with = crate::api::openapi::schemas::instant)]
    until: Option<String>,
    /// The `next_after` of the previous page: only events after this one.
    #[param(schema_with = crate::api::openapi::schemas::uuid)]
    after: Option<String>,
    /// Events per page.
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
}

impl Validate for AuditQuery {
    type Valid = AuditFilter;

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] =
        &[("limit", || schemas::query_integer(1, Some(MAX_AUDIT_LIMIT)))];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let since = query::datetime("since", self.since, false);
        let until = query::datetime("until", self.until, false);
        let ordered = match (&since, &until) {
            (Ok(Some(since)), Ok(Some(until))) if since > until => Err(query::error(
                "since",
                "after_until",
                "Must not be after until.",
            )),
            _ => Ok(()),
        };
        let (user_id, event_type, since, until, after, limit, ()) = (
            query::uuid("user_id", self.user_id),
            query::choice("type", self.event_type, EventType::ALL, EventType::as_str),
            since,
            until,
            query::uuid("after", self.after),
            query::integer("limit", self.limit, 1, MAX_AUDIT_LIMIT, DEFAULT_AUDIT_LIMIT),
            ordered,
        )
            .all_valid()?;
        Ok(AuditFilter {
            user_id,
            event_type,
            since,
            until,
            after,
            limit,
        })
    }
}

/// One durable event: the wire form the audit list, webhooks and the event stream share
/// ([`Event::body`]).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({
    "id": "0192f3a4-5b6c-7d8e-9f00-112233445566",
    "type": "session.revoked",
    "user_id": "0192f3a4-0000-7d8e-9f00-112233445566",
    "occurred_at": "2026-01-31T14:05:00.123456Z",
    "data": {"session_id": "0192f3a4-1111-7d8e-9f00-112233445566", "reason": "logout"}
}))]
struct EventJson {
    /// Event id (UUIDv7: ordered by time).
    id: Uuid,
    /// What happened.
    #[serde(rename = "type")]
    #[schema(value_type = EventType)]
    event_type: &'static str,
    /// The user it concerns; `null` only for a global `security.rotation`.
    user_id: Option<Uuid>,
    /// When it happened.
    occurred_at: DateTime<Utc>,
    /// Ids and counts, never secrets, by `type`:
    /// `import.completed`: `connection_ids`, `counts` (`accounts`, `transactions`, `holdings`,
    /// each `{created, updated, unchanged}`, and `snapshots_created`);
    /// `sync.completed`: `connection_id`, `counts` (`accounts`, `transactions`, `holdings`
    /// each `{created, updated, unchanged}`, holdings also `deactivated`, and
    /// `snapshots_created`);
    /// `connection.created`: `connection_id`, `provider`, `reauthorized`;
    /// `connection.expired`: `connection_id`, `provider`, `reason` (`refresh_refused`,
    /// `consent_expired`, `access_revoked`, `login_required`);
    /// `connection.expiring`: `connection_id`, `provider`, `reason` (`pending_expiration`,
    /// `pending_disconnect`);
    /// `connection.revoked`: `connection_id`, `provider`, `reason` (`permission_revoked`);
    /// `connection.deleted`: `connection_id`, `provider`;
    /// `session.revoked`: `session_id`, `reason` (`logout`, `token_reuse`, `password_reset`,
    /// `logout_all`, `manual`, or the reason the user gave);
    /// `password.changed`: `method` (`reset`);
    /// `security.rotation`: `rotation_id`, `scope` (`global` or `user`), `target_user_id`,
    /// `previous_version`, `new_version`, `initiated_by`.
    #[schema(value_type = Object)]
    data: serde_json::Value,
}

impl From<&Event> for EventJson {
    fn from(event: &Event) -> Self {
        Self {
            id: event.id,
            event_type: event.event_type.as_str(),
            user_id: event.user_id,
            occurred_at: event.occurred_at,
            data: event.data.clone(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct AuditEventsJson {
    /// The page, oldest first.
    events: Vec<EventJson>,
    /// The id to pass as `after` for the next page; `null` on the last page.
    next_after: Option<Uuid>,
}

/// `GET /api/v1/admin/audit-events`
async fn audit_events(state: &App, _: Admin, Query(filter): Query<AuditQuery>) -> ApiResult {
    let limit = filter.limit;
    // One more than the page shows whether another page follows.
    let probe = AuditFilter {
        limit: limit.saturating_add(1),
        ..filter
    };
    let mut events = state.admin.audit_events(&probe).await?;
    let more = events.len() > limit as usize;
    events.truncate(limit as usize);
    let next_after = if more {
        events.last().map(|event| event.id)
    } else {
        None
    };
    json(
        StatusCode::OK,
        &AuditEventsJson {
            events: events.iter().map(EventJson::from).collect(),
            next_after,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_entry_is_the_shared_wire_form() {
        let event = Event::new(
            EventType::ConnectionDeleted,
            Some(Uuid::now_v7()),
            Utc::now(),
            serde_json::json!({"connection_id": Uuid::now_v7(), "provider": "schwab"}),
        );
        let listed = serde_json::to_value(EventJson::from(&event)).unwrap();
        assert_eq!(listed, event.body());
    }

    #[test]
    fn the_openapi_document_describes_the_audit_list_and_the_event_body() {
        let document: serde_json::Value =
            serde_json::from_str(&crate::api::openapi_json("https://api.example").unwrap())
                .unwrap();
        let operation = &document["paths"]["/api/v1/admin/audit-events"]["get"];
        let names: Vec<&str> = operation["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|parameter| parameter["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["user_id", "type", "since", "until", "after", "limit"]
        );
        let text = document.to_string();
        for documented in [
            "session.revoked",
            "security.rotation",
            "`sync.completed`: `connection_id`",
            "next_after",
        ] {
            assert!(text.contains(documented), "{documented} is documented");
        }
    }
}
