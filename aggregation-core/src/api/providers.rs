//! Provider connections: list, read, connect (OAuth authorization code flow), callback,
//! alias update, disconnect, and provider token refresh.
//!
//! Choices where the interface is silent: a callback for a user who already has a live
//! connection with the same provider and alias re-authorizes that connection in place (same
//! id, accounts kept) instead of creating a duplicate; it still answers 201. PATCH applies the
//! alias (`null` clears it, an absent field leaves it). Connecting a provider that does not use
//! OAuth (such as `file_import`) is 400, like its callback.
//!
//! The callback is public as the interface says, unless
//! [`Config::with_oauth_callback_requires_auth`](crate::Config::with_oauth_callback_requires_auth)
//! binds it to its user: then it needs the bearer token of the user who started connecting
//! (401 without one). A bearer token of another user is always answered like an unknown state
//! (400), and spends the state.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::Serialize;
use uuid::Uuid;

use super::extract::{JsonFields, QueryParams};
use super::{ApiResult, RequestContext, json, no_content, parse_path_uuid, require_user};
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::providers::connections::ConnectionError;
use crate::service::State;
use crate::store::ConnectionRecord;

/// Longest alias.
const MAX_ALIAS_CHARS: usize = 100;
/// Longest authorization code or state accepted on a callback.
const MAX_CALLBACK_PARAM_CHARS: usize = 2048;

impl From<ConnectionError> for ApiError {
    fn from(error: ConnectionError) -> Self {
        let detail = error.to_string();
        match error {
            ConnectionError::UnknownProvider(_)
            | ConnectionError::NotFound
            | ConnectionError::AccountNotInConnection => ApiError::new(ErrorCode::NotFound, detail),
            ConnectionError::NoOAuth(_)
            | ConnectionError::InvalidState
            | ConnectionError::MalformedState
            | ConnectionError::NotSyncable(_)
            | ConnectionError::NeedsReauthentication(_) => {
                ApiError::new(ErrorCode::CommandValidationFailed, detail)
            }
            ConnectionError::CoolingDown { retry_after_secs } => {
                ApiError::rate_limited_because(retry_after_secs, detail)
            }
            ConnectionError::Provider(provider) => {
                tracing::warn!(error = %provider, "provider call failed");
                ApiError::new(ErrorCode::ProviderError, detail)
            }
            ConnectionError::Credentials(crypto) => {
                tracing::error!(error = %crypto, "provider credential encryption failed");
                ApiError::new(
                    ErrorCode::CommandExecutionFailed,
                    "The provider credentials could not be encrypted or read.",
                )
            }
            ConnectionError::Store(store) => store.into(),
        }
    }
}

/// A connection as the API shows it.
#[derive(Serialize)]
pub(crate) struct ConnectionJson<'a> {
    id: Uuid,
    user_id: Uuid,
    provider_id: Uuid,
    provider_slug: &'a str,
    alias: Option<&'a str>,
    status: &'static str,
    is_connected: bool,
    needs_reauthentication: bool,
    connected_at: DateTime<Utc>,
    last_sync_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub(crate) fn connection_json(connection: &ConnectionRecord) -> ConnectionJson<'_> {
    ConnectionJson {
        id: connection.id,
        user_id: connection.user_id,
        provider_id: connection.provider_id,
        provider_slug: &connection.provider_slug,
        alias: connection.alias.as_deref(),
        status: connection.status.as_str(),
        is_connected: connection.is_connected(),
        needs_reauthentication: connection.status.needs_reauthentication(),
        connected_at: connection.connected_at,
        last_sync_at: connection.last_sync_at,
        created_at: connection.created_at,
        updated_at: connection.updated_at,
    }
}

#[derive(Serialize)]
struct ConnectionList<'a> {
    connections: Vec<ConnectionJson<'a>>,
    total_count: usize,
    active_count: usize,
}

/// `GET /api/v1/providers`
pub(crate) async fn list(state: &State, ctx: &RequestContext) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let active_only = query.bool("active_only", false);
    query.finish()?;
    let connections = state.connections.list(claims.sub, active_only).await?;
    json(
        StatusCode::OK,
        &ConnectionList {
            connections: connections.iter().map(connection_json).collect(),
            total_count: connections.len(),
            active_count: connections
                .iter()
                .filter(|connection| connection.is_connected())
                .count(),
        },
    )
}

/// `GET /api/v1/providers/{id}`
pub(crate) async fn get(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    let connection = state.connections.owned(claims.sub, id).await?;
    json(StatusCode::OK, &connection_json(&connection))
}

#[derive(Serialize)]
struct AuthorizationJson {
    authorization_url: String,
    state: String,
    expires_in: u64,
}

/// `POST /api/v1/providers`
pub(crate) async fn connect(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut fields = JsonFields::parse(ctx, &body)?;
    let slug = fields.string("provider_slug", 1, 100);
    let alias = fields.optional_string("alias", 0, MAX_ALIAS_CHARS);
    let requested = fields.optional_string("redirect_uri", 1, 2048);
    let allowed = state.config.oauth_redirect_uris();
    let redirect_uri = match requested {
        Some(uri) if allowed.contains(&uri) => Some(uri),
        Some(_) => {
            fields.add_error(FieldError::new(
                "redirect_uri",
                "not_allowed",
                "Must be one of the configured redirect URIs.",
            ));
            None
        }
        None => {
            let default = allowed.first().cloned();
            if default.is_none() {
                fields.add_error(FieldError::new(
                    "redirect_uri",
                    "not_configured",
                    "No redirect URI is configured on this server.",
                ));
            }
            default
        }
    };
    fields.finish()?;
    let (Some(slug), Some(redirect_uri)) = (slug, redirect_uri) else {
        return Err(ApiError::internal());
    };
    // An empty alias means none, as the interface stores "empty when none".
    let alias = alias.filter(|alias| !alias.trim().is_empty());
    let authorization = state
        .connections
        .start_authorization(claims.sub, &slug, alias, redirect_uri)
        .await?;
    json(
        StatusCode::CREATED,
        &AuthorizationJson {
            authorization_url: authorization.authorization_url,
            state: authorization.state,
            expires_in: authorization.expires_in,
        },
    )
}

/// `POST /api/v1/providers/callback?code=…&state=…`
pub(crate) async fn callback(state: &State, ctx: &RequestContext) -> ApiResult {
    if state.config.oauth_callback_requires_auth() {
        require_user(ctx)?;
    }
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let code = query.string("code");
    let oauth_state = query.string("state");
    for (name, value) in [("code", &code), ("state", &oauth_state)] {
        match value {
            None => query.add_error(name, "required", "This query parameter is required."),
            Some(value) if value.len() > MAX_CALLBACK_PARAM_CHARS => query.add_error(
                name,
                "too_long",
                format!("Must be at most {MAX_CALLBACK_PARAM_CHARS} characters long."),
            ),
            Some(_) => {}
        }
    }
    query.finish()?;
    let (Some(code), Some(oauth_state)) = (code, oauth_state) else {
        return Err(ApiError::internal());
    };
    // Public unless configured otherwise; a bearer token, when sent, must be the state's
    // user's, and another user's is answered as an unknown state.
    let caller = match (ctx.bearer_token(), &ctx.claims) {
        (Some(_), None) => return Err(ApiError::unauthorized()),
        (_, claims) => claims.as_ref().map(|claims| claims.sub),
    };
    let (connection, _created) = state
        .connections
        .complete_authorization(&code, &oauth_state, caller)
        .await?;
    json(StatusCode::CREATED, &connection_json(&connection))
}

/// `PATCH /api/v1/providers/{id}`
pub(crate) async fn update(
    state: &State,
    ctx: &RequestContext,
    id: &str,
    body: Bytes,
) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    let mut fields = JsonFields::parse(ctx, &body)?;
    let alias = fields.nullable_string("alias", 0, MAX_ALIAS_CHARS);
    fields.finish()?;
    let connection = state.connections.update(claims.sub, id, alias).await?;
    json(StatusCode::OK, &connection_json(&connection))
}

/// `DELETE /api/v1/providers/{id}`
pub(crate) async fn disconnect(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    state.connections.disconnect(claims.sub, id).await?;
    no_content()
}

#[derive(Serialize)]
struct TokenRefreshJson {
    success: bool,
    message: &'static str,
    expires_at: DateTime<Utc>,
}

/// `POST /api/v1/providers/{id}/token-refreshes`
pub(crate) async fn refresh_tokens(
    state: &State,
    ctx: &RequestContext,
    id: &str,
    body: Bytes,
) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    let force = force_flag(ctx, &body)?;
    let outcome = state
        .connections
        .refresh_tokens_for_user(claims.sub, id, force)
        .await?;
    json(
        StatusCode::CREATED,
        &TokenRefreshJson {
            success: true,
            message: if outcome.refreshed {
                "Provider tokens refreshed."
            } else {
                "Provider tokens are still valid; pass force to refresh them anyway."
            },
            expires_at: outcome.expires_at,
        },
    )
}

/// The `force` flag of a body that may be absent (`{force?}`).
pub(crate) fn force_flag(ctx: &RequestContext, body: &Bytes) -> Result<bool, ApiError> {
    let mut fields = JsonFields::parse_optional(ctx, body)?;
    let force = fields.bool("force", false);
    fields.finish()?;
    Ok(force)
}
