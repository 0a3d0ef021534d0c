//! Reading balance snapshots: the latest per account, an account's history over a period, and
//! an account's newest snapshots.

use chrono::{DateTime, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::cursor::{self, Listing};
use super::extract::{PathId, Query, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, ParameterSchema, Validate, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::{ApiError, FieldError};
use crate::rate_limit::policy::API_READ;
use crate::store::{PageAfter, SnapshotRecord, SnapshotSource};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/balance-snapshots" => latest, limited(API_READ),
        "The latest balance snapshot of each of the caller's accounts", [200: SnapshotList<'static>]),
    route!(GET "/api/v1/accounts/{id}/balance-history" => history, limited(API_READ),
        "The balance snapshots of an account over a period", [200: SnapshotHistory<'static>]),
    route!(GET "/api/v1/accounts/{id}/balance-snapshots" => list_for_account, limited(API_READ),
        "The newest balance snapshots of an account", [200: SnapshotList<'static>]),
];

/// Bounds and default of the per-account listing.
const MAX_LIMIT: i64 = 100;
const DEFAULT_LIMIT: u32 = 30;
/// The most snapshots one page of the history lists, and its default page size: every sync
/// and import adds one per account, so a long range is not bounded, the cost of one answer is.
const MAX_HISTORY_LIMIT: i64 = 1_000;
const DEFAULT_HISTORY_LIMIT: u32 = 1_000;

/// `start_date`, `end_date` (both required) and `source` of the balance history.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct HistoryQuery {
    /// A date-time (RFC 3339) or a date (`YYYY-MM-DD`, from its midnight UTC).
    #[param(schema_with = crate::api::openapi::schemas::instant)]
    start_date: Option<String>,
    /// A date-time (RFC 3339) or a date (`YYYY-MM-DD`, to its end, UTC).
    #[param(schema_with = crate::api::openapi::schemas::instant)]
    end_date: Option<String>,
    #[param(value_type = Option<SnapshotSource>, inline)]
    source: Option<String>,
    /// Page size, 1 to 1,000 (default 1,000); `has_more` and `next_cursor` name the next page.
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (with the same range and source): the page
    /// after it (23 URL-safe base64 characters; empty is the first page).
    #[param(value_type = Option<String>, pattern = "^([A-Za-z0-9_-]{23})?$",
        example = "UwGS86QREX2OnwARIjNEVWY")]
    cursor: Option<String>,
}

/// What the balance history asks for.
pub(crate) struct HistoryRange {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    source: Option<SnapshotSource>,
    page: PageAfter,
}

impl Validate for HistoryQuery {
    type Valid = HistoryRange;

    const REQUIRED_PARAMETERS: &'static [&'static str] = &["start_date", "end_date"];

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] = &[("limit", || {
        schemas::query_integer(1, Some(MAX_HISTORY_LIMIT))
    })];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let start = query::required_datetime("start_date", self.start_date, false);
        let end = query::required_datetime("end_date", self.end_date, true);
        let source = source(self.source);
        let ordered = match (&start, &end) {
            (Ok(start), Ok(end)) if start > end => Err(query::error(
                "start_date",
                "after_end_date",
                "Must not be after end_date.",
            )),
            _ => Ok(()),
        };
        let (start, end, source, (), limit, after) = (
            start,
            end,
            source,
            ordered,
            query::integer(
                "limit",
                self.limit,
                1,
                MAX_HISTORY_LIMIT,
                DEFAULT_HISTORY_LIMIT,
            ),
            cursor::parameter(Listing::BalanceHistory, self.cursor),
        )
            .all_valid()?;
        Ok(HistoryRange {
            start,
            end,
            source,
            page: PageAfter { limit, after },
        })
    }
}

/// `limit` and `source` of the per-account listing.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct ListQuery {
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
    #[param(value_type = Option<SnapshotSource>, inline)]
    source: Option<String>,
}

impl Validate for ListQuery {
    type Valid = (u32, Option<SnapshotSource>);

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] =
        &[("limit", || schemas::query_integer(1, Some(MAX_LIMIT)))];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        (
            query::integer("limit", self.limit, 1, MAX_LIMIT, DEFAULT_LIMIT),
            source(self.source),
        )
            .all_valid()
    }
}

/// A snapshot as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct SnapshotJson<'a> {
    id: Uuid,
    account_id: Uuid,
    #[serde(with = "rust_decimal::serde::str")]
    balance: Decimal,
    #[serde(with = "rust_decimal::serde::str_option")]
    available_balance: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    holdings_value: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    cash_value: Option<Decimal>,
    currency: &'a str,
    #[schema(value_type = SnapshotSource)]
    source: &'static str,
    captured_at: DateTime<Utc>,
}

pub(crate) fn snapshot_json(snapshot: &SnapshotRecord) -> SnapshotJson<'_> {
    SnapshotJson {
        id: snapshot.id,
        account_id: snapshot.account_id,
        balance: snapshot.balance,
        available_balance: snapshot.available_balance,
        holdings_value: snapshot.holdings_value,
        cash_value: snapshot.cash_value,
        currency: &snapshot.currency,
        source: snapshot.source.as_str(),
        captured_at: snapshot.captured_at,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct SnapshotList<'a> {
    snapshots: Vec<SnapshotJson<'a>>,
    total_count: u64,
}

/// A page of an account's balance history.
#[derive(Serialize, utoipa::ToSchema)]
struct SnapshotHistory<'a> {
    snapshots: Vec<SnapshotJson<'a>>,
    /// Every snapshot of the range, not only this page.
    total_count: u64,
    /// Whether another page follows.
    has_more: bool,
    /// The `cursor` of the next page; null on the last.
    next_cursor: Option<String>,
}

fn snapshot_list(snapshots: &[SnapshotRecord], total_count: u64) -> ApiResult {
    json(
        StatusCode::OK,
        &SnapshotList {
            snapshots: snapshots.iter().map(snapshot_json).collect(),
            total_count,
        },
    )
}

fn source(raw: Option<String>) -> Result<Option<SnapshotSource>, FieldError> {
    query::choice("source", raw, SnapshotSource::ALL, SnapshotSource::as_str)
}

/// `GET /api/v1/balance-snapshots`
async fn latest(state: &App, User(claims): User) -> ApiResult {
    let snapshots = state.records.latest_snapshots(claims.sub).await?;
    snapshot_list(&snapshots, snapshots.len() as u64)
}

/// `GET /api/v1/accounts/{id}/balance-history`
///
/// `start_date` and `end_date` are required; each is an RFC 3339 date-time or a plain date
/// (`start_date` from its first microsecond, `end_date` through its last, UTC).
async fn history(
    state: &App,
    User(claims): User,
    PathId(account_id): PathId,
    Query(range): Query<HistoryQuery>,
) -> ApiResult {
    let page = state
        .records
        .balance_history(
            claims.sub,
            account_id,
            (range.start, range.end),
            range.source,
            range.page,
        )
        .await?;
    let (snapshots, next_cursor) = cursor::split_page(
        Listing::BalanceHistory,
        page.items,
        range.page.limit,
        |snapshot| snapshot.id,
    );
    json(
        StatusCode::OK,
        &SnapshotHistory {
            snapshots: snapshots.iter().map(snapshot_json).collect(),
            total_count: page.total_count,
            has_more: next_cursor.is_some(),
            next_cursor,
        },
    )
}

/// `GET /api/v1/accounts/{id}/balance-snapshots`
async fn list_for_account(
    state: &App,
    User(claims): User,
    PathId(account_id): PathId,
    Query((limit, source)): Query<ListQuery>,
) -> ApiResult {
    let page = state
        .records
        .snapshots_of_account(claims.sub, account_id, limit, source)
        .await?;
    snapshot_list(&page.items, page.total_count)
}
