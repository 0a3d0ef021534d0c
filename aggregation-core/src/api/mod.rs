//! The HTTP edge: routes, extraction and validation of requests, rendering of responses.
//! Every status code, header and body of the API is decided here.
//!
//! # Adding an endpoint
//!
//! One row in the `ROUTES` table of its resource module and one function beside it:
//!
//! ```text
//! route!(GET "/api/v1/sessions/{id}" => get, limited(API_READ), "Read one of the caller's sessions",
//!     [200: SessionJson<'static>]),
//!
//! async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult { ... }
//! ```
//!
//! The row is the endpoint's method, path template, built-in rate limit (read by
//! [`PolicyTable::builtin`](crate::rate_limit::PolicyTable::builtin)), summary and answers
//! (success statuses with their `#[derive(Serialize, utoipa::ToSchema)]` body, then the
//! problems the handler itself answers), listed by [`routes()`]; the OpenAPI document
//! ([`openapi_json`]) is generated from the rows and the handlers' argument types. The
//! handler's arguments are extractors (`extract.rs`): the caller, path ids, the query and the
//! body as serde types checked by a `Validate` implementation (`validate.rs`), every field
//! error in one 422; each also says what it documents (`openapi/describe.rs`). A new resource
//! module adds its table to `ROUTE_TABLES`.
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
//!   years 1900 to 2200 (a date-time compared in UTC). Anything else is 422
//!   `validation_failed` with an `errors` entry naming the field (`query.start_date`,
//!   `end_date`) and code `out_of_range`.
//! - `GET /accounts/{id}/balance-snapshots` reports in `total_count` every snapshot matching
//!   the `source` filter, not only the `limit` newest returned.

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use serde::Serialize;

use crate::auth::AuthError;
use crate::auth::password::PasswordError;
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::store::StoreError;
use crate::work::WorkError;

pub(crate) mod accounts;
pub(crate) mod admin;
pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod categories;
pub(crate) mod cursor;
pub(crate) mod events;
pub(crate) mod extract;
pub(crate) mod handler;
pub(crate) mod health;
pub(crate) mod holdings;
pub(crate) mod imports;
pub(crate) mod matches;
pub(crate) mod openapi;
pub(crate) mod provider_webhooks;
pub(crate) mod providers;
pub(crate) mod router;
pub(crate) mod routes;
pub(crate) mod rules;
pub(crate) mod running;
pub(crate) mod search;
pub(crate) mod sessions;
pub(crate) mod snapshots;
pub(crate) mod supported_providers;
pub(crate) mod syncs;
pub(crate) mod transactions;
pub(crate) mod users;
pub(crate) mod validate;
pub(crate) mod webhooks;
pub(crate) mod worth;

pub use routes::{RateLimit, Route, TargetId};

pub use body::ResponseBody;
/// Incoming bodies, boxed once at the service boundary.
pub(crate) type RequestBody = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;
/// A handler's result.
pub(crate) type ApiResult = Result<http::Response<ResponseBody>, ApiError>;

/// The route tables of the resource modules; a new module adds its table here.
const ROUTE_TABLES: &[&[Route]] = &[
    health::ROUTES,
    auth::ROUTES,
    sessions::ROUTES,
    admin::ROUTES,
    providers::ROUTES,
    provider_webhooks::ROUTES,
    supported_providers::ROUTES,
    accounts::ROUTES,
    syncs::ROUTES,
    transactions::ROUTES,
    matches::ROUTES,
    categories::ROUTES,
    rules::ROUTES,
    holdings::ROUTES,
    snapshots::ROUTES,
    imports::ROUTES,
    events::ROUTES,
    webhooks::ROUTES,
    openapi::ROUTES,
    worth::ROUTES,
    search::ROUTES,
    users::ROUTES,
];

/// Every endpoint of the API, one [`Route`] each: what the router serves and where the
/// built-in rate-limit policies come from.
pub fn routes() -> impl Iterator<Item = &'static Route> {
    ROUTE_TABLES.iter().flat_map(|table| table.iter())
}

/// The OpenAPI 3.1 document of [`routes()`], pretty-printed, its server at `base_url` (what
/// `GET /api/v1/openapi.json` serves, compact, for a service configured with that base URL,
/// except that a service also lists the provider slugs it connects where this document can
/// only say "a slug").
///
/// ```
/// let document = aggregation_core::api::openapi_json("https://api.example.com").unwrap();
/// assert!(document.contains("\"openapi\": \"3.1.0\""));
/// ```
pub fn openapi_json(base_url: &str) -> Result<String, serde_json::Error> {
    openapi::document(base_url, None).to_pretty_json()
}

/// The bytes first reserved for a JSON answer.
const JSON_BODY_CAPACITY: usize = 2048;

/// A JSON response.
pub(crate) fn json<T: Serialize>(status: StatusCode, value: &T) -> ApiResult {
    // Most answers fit: one allocation instead of doubling from serde_json's 128 bytes.
    let mut body = Vec::with_capacity(JSON_BODY_CAPACITY);
    serde_json::to_writer(&mut body, value).map_err(|error| {
        tracing::error!(error = %error, "response serialization failed");
        ApiError::internal()
    })?;
    http::Response::builder()
        .status(status)
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )
        .body(ResponseBody::full(body))
        .map_err(|_| ApiError::internal())
}

/// A 204 response.
pub(crate) fn no_content() -> ApiResult {
    http::Response::builder()
        .status(StatusCode::NO_CONTENT)
        .body(ResponseBody::empty())
        .map_err(|_| ApiError::internal())
}

/// `Retry-After` of a 503 for a store that cannot be reached: an open circuit breaker pings
/// the store every second, so a retry after that may find it back.
pub(crate) const STORE_RETRY_AFTER_SECONDS: u64 = 1;

/// What a write refused by the user's account cap answers.
pub(crate) fn account_limit_detail(limit: u64) -> String {
    format!(
        "This would leave you with more than {limit} accounts, the most one user may hold; \
         nothing was written. Disconnect what you no longer need first."
    )
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) | StoreError::Busy(_) => ApiError::new(
                ErrorCode::ServiceUnavailable,
                "The service is temporarily unavailable. Try again shortly.",
            )
            .with_header(
                header::RETRY_AFTER,
                http::HeaderValue::from(STORE_RETRY_AFTER_SECONDS),
            ),
            StoreError::Conflict(_) => {
                ApiError::new(ErrorCode::Conflict, "The resource already exists.")
            }
            StoreError::AccountLimit { limit } => {
                ApiError::new(ErrorCode::ValidationFailed, account_limit_detail(limit))
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
