//! The HTTP edge: routes, extraction and validation of requests, rendering of responses.
//! Every status code, header and body of the API is decided here.
//!
//! # Record reads
//!
//! Accounts, transactions, holdings and balance snapshots are always scoped to the caller (an
//! unknown or another user's id is 404, a non-UUID path id 422). Money and quantities are
//! decimal strings (`"1234.50"`), timestamps UTC with `Z`, dates `YYYY-MM-DD`; an unknown enum
//! value in a filter (`account_type`, `transaction_type`, `asset_type`, `source`, matched
//! case-insensitively) is 422. Choices this crate makes where the interface is silent:
//!
//! - Account and holding lists are not paged; `total_count` and `active_count` count the listed
//!   rows, and `total_balance_by_currency` / `total_market_value_by_currency` sum the listed rows
//!   per currency. Accounts (and the latest snapshots) are ordered by account name, holdings by
//!   symbol; `symbol` matches case-insensitively.
//! - `GET /accounts/{id}/transactions` with both `start_date` and `end_date` lists every
//!   transaction in that inclusive range oldest first; `limit`, `offset` and `transaction_type`
//!   are still validated but not applied, and the answer reports `limit` = rows returned,
//!   `offset` 0, `has_more` false. Otherwise it pages newest first, and a lone date is ignored.
//!   `has_more` is `offset + rows returned < total_count`.
//! - `balance-history` takes RFC 3339 date-times or plain dates; a plain `start_date` starts at
//!   its midnight UTC and a plain `end_date` covers its whole day (UTC).
//! - Every date and date-time a request carries, in the query or the body, lies within the
//!   years 1900 to 2200 ([`crate::dates::EARLIEST_DATE`] to [`crate::dates::LATEST_DATE`]; a
//!   date-time compared in UTC). Anything else is 422 `validation_failed` with an `errors`
//!   entry naming the field (`query.start_date`, `end_date`) and code `out_of_range`.
//! - `GET /accounts/{id}/balance-snapshots` reports in `total_count` every snapshot matching
//!   the `source` filter, not only the `limit` newest returned.

use std::net::IpAddr;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, header};
use http_body_util::{BodyExt as _, Full, combinators::UnsyncBoxBody};
use serde::Serialize;

use crate::auth::password::PasswordError;
use crate::auth::{AccessClaims, AuthError};
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::store::StoreError;
use crate::work::WorkError;

pub(crate) mod accounts;
pub(crate) mod admin;
pub(crate) mod auth;
pub(crate) mod extract;
pub(crate) mod holdings;
pub(crate) mod imports;
pub(crate) mod providers;
pub(crate) mod routes;
pub(crate) mod sessions;
pub(crate) mod snapshots;
pub(crate) mod syncs;
pub(crate) mod transactions;

/// The body type every response carries.
pub type ResponseBody = Full<Bytes>;
/// Incoming bodies, boxed once at the service boundary.
pub(crate) type RequestBody = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;
/// A handler's result.
pub(crate) type ApiResult = Result<http::Response<ResponseBody>, ApiError>;

/// What handlers know about the request besides its body.
pub(crate) struct RequestContext {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Option<String>,
    pub(crate) headers: HeaderMap,
    pub(crate) client_ip: Option<IpAddr>,
    /// The claims of the bearer token, verified once per request; `None` without a valid one.
    pub(crate) claims: Option<AccessClaims>,
}

impl RequestContext {
    pub(crate) fn header_str(&self, name: &header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The bearer token of the Authorization header, if there is one.
    pub(crate) fn bearer_token(&self) -> Option<&str> {
        let value = self.header_str(&header::AUTHORIZATION)?.trim();
        let (scheme, token) = value.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim())
            .filter(|token| !token.is_empty())
    }

    pub(crate) fn client_info(&self) -> crate::auth::ClientInfo {
        crate::auth::ClientInfo {
            ip_address: self.client_ip.map(|ip| ip.to_string()),
            user_agent: self
                .header_str(&header::USER_AGENT)
                .map(str::to_owned)
                .filter(|agent| !agent.trim().is_empty()),
        }
    }
}

/// A JSON response.
pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> ApiResult {
    let body = serde_json::to_vec(value).map_err(|error| {
        tracing::error!(error = %error, "response serialization failed");
        ApiError::internal()
    })?;
    http::Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|_| ApiError::internal())
}

/// A 204 response.
pub(crate) fn no_content() -> ApiResult {
    http::Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(Full::new(Bytes::new()))
        .map_err(|_| ApiError::internal())
}

/// Reads a whole body, refusing it with 413 as soon as it passes `limit` bytes.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    mut body: RequestBody,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("The request body is larger than {limit} bytes."),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let mut collected = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::field(
                "body",
                "unreadable",
                format!("The request body could not be read: {error}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if collected.len() + data.len() > limit {
                return Err(too_large());
            }
            collected.extend_from_slice(&data);
        }
    }
    Ok(collected.freeze())
}

/// The claims of the request's valid access token, or 401.
pub(crate) fn require_user(ctx: &RequestContext) -> Result<AccessClaims, ApiError> {
    ctx.claims.clone().ok_or_else(ApiError::unauthorized)
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) => ApiError::new(
                ErrorCode::ServiceUnavailable,
                "The service is temporarily unavailable. Try again shortly.",
            ),
            StoreError::Conflict(_) => {
                ApiError::new(ErrorCode::Conflict, "The resource already exists.")
            }
            StoreError::Other(_) => ApiError::internal(),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(error: AuthError) -> Self {
        let detail = error.to_string();
        match error {
            AuthError::InvalidCredentials | AuthError::InvalidRefreshToken => {
                ApiError::new(ErrorCode::Unauthorized, detail)
            }
            AuthError::EmailNotVerified => ApiError::new(ErrorCode::Forbidden, detail),
            AuthError::EmailTaken => ApiError::new(ErrorCode::Conflict, detail),
            AuthError::TokenNotFound | AuthError::UserNotFound => {
                ApiError::new(ErrorCode::NotFound, detail)
            }
            AuthError::TokenExpired | AuthError::TokenUsed => {
                ApiError::new(ErrorCode::CommandValidationFailed, detail)
            }
            AuthError::Store(store) => store.into(),
            AuthError::Password(PasswordError::Work(error)) => error.into(),
            AuthError::Password(error) => {
                tracing::error!(error = %error, "password hashing failed");
                ApiError::internal()
            }
            AuthError::Signing(error) => {
                tracing::error!(error = %error, "token signing failed");
                ApiError::internal()
            }
        }
    }
}

impl From<WorkError> for ApiError {
    fn from(error: WorkError) -> Self {
        match error {
            WorkError::Busy(kind) => {
                tracing::warn!(kind, "heavy work saturated; answering 503");
                ApiError::busy(1)
            }
            error => {
                tracing::error!(error = %error, "heavy work failed");
                ApiError::internal()
            }
        }
    }
}

/// 422 for a path id that is not a UUID.
pub(crate) fn parse_path_uuid(name: &str, value: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(value).map_err(|_| {
        ApiError::validation(vec![FieldError::new(
            format!("path.{name}"),
            "invalid_uuid",
            "Must be a UUID.",
        )])
    })
}
