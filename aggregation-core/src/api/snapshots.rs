//! Reading balance snapshots: the latest per account, an account's history over a period, and
//! an account's newest snapshots.

use chrono::{DateTime, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use super::extract::QueryParams;
use super::{ApiResult, RequestContext, json, parse_path_uuid, require_user};
use crate::service::State;
use crate::store::{SnapshotRecord, SnapshotSource};

/// Bounds and default of the per-account listing.
const MAX_LIMIT: i64 = 100;
const DEFAULT_LIMIT: i64 = 30;

/// A snapshot as the API shows it.
#[derive(Serialize)]
struct SnapshotJson<'a> {
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
    source: &'static str,
    captured_at: DateTime<Utc>,
}

fn snapshot_json(snapshot: &SnapshotRecord) -> SnapshotJson<'_> {
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

#[derive(Serialize)]
struct SnapshotList<'a> {
    snapshots: Vec<SnapshotJson<'a>>,
    total_count: u64,
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

fn source(query: &mut QueryParams) -> Option<SnapshotSource> {
    query.choice("source", SnapshotSource::ALL, SnapshotSource::as_str)
}

/// `GET /api/v1/balance-snapshots`
pub(crate) async fn latest(state: &State, ctx: &RequestContext) -> ApiResult {
    let claims = require_user(ctx)?;
    let snapshots = state.records.latest_snapshots(claims.sub).await?;
    snapshot_list(&snapshots, snapshots.len() as u64)
}

/// `GET /api/v1/accounts/{id}/balance-history`
///
/// `start_date` and `end_date` are required; each is an RFC 3339 date-time or a plain date
/// (`start_date` from its first microsecond, `end_date` through its last, UTC).
pub(crate) async fn history(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let account_id = parse_path_uuid("id", id)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let start = query.required_datetime("start_date", false);
    let end = query.required_datetime("end_date", true);
    let source = source(&mut query);
    let period = match (start, end) {
        (Some(start), Some(end)) if start > end => {
            query.add_error(
                "start_date",
                "after_end_date",
                "Must not be after end_date.",
            );
            None
        }
        (Some(start), Some(end)) => Some((start, end)),
        _ => None,
    };
    query.finish()?;
    // Without a period, finish() has already refused the missing or malformed date.
    let (start, end) = period.ok_or_else(crate::problem::ApiError::internal)?;
    let snapshots = state
        .records
        .balance_history(claims.sub, account_id, start, end, source)
        .await?;
    snapshot_list(&snapshots, snapshots.len() as u64)
}

/// `GET /api/v1/accounts/{id}/balance-snapshots`
pub(crate) async fn list_for_account(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let account_id = parse_path_uuid("id", id)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let limit = query.integer("limit", 1, MAX_LIMIT, DEFAULT_LIMIT);
    let source = source(&mut query);
    query.finish()?;
    let page = state
        .records
        .snapshots_of_account(
            claims.sub,
            account_id,
            u32::try_from(limit).unwrap_or(30),
            source,
        )
        .await?;
    snapshot_list(&page.items, page.total_count)
}
