//! Reading holdings: across the user's accounts, and of one account.

use chrono::{DateTime, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::accounts::sum_by_currency;
use super::cursor::{self, Listing};
use super::extract::{PathId, Query, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, ParameterSchema, Validate, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::ApiError;
use crate::rate_limit::policy::API_READ;
use crate::store::{AssetType, HoldingFilter, HoldingPage, HoldingRecord, PageAfter};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/holdings" => list, limited(API_READ),
        "List the holdings across the caller's accounts", [200: HoldingList<'static>]),
    route!(GET "/api/v1/accounts/{id}/holdings" => list_for_account, limited(API_READ),
        "List the holdings of one of the caller's accounts", [200: HoldingList<'static>]),
];

/// The most holdings one page lists, and the default page size: a user's holdings are not
/// bounded (every import and holdings sync may add positions), the cost of one answer is.
const MAX_LIMIT: i64 = 1_000;
const DEFAULT_LIMIT: u32 = 1_000;

/// The `active_only` (default true) and `asset_type` filters, `symbol` (matched
/// case-insensitively) across accounts, and the page.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct FilterQuery {
    #[param(value_type = Option<bool>)]
    active_only: Option<String>,
    #[param(value_type = Option<AssetType>, inline)]
    asset_type: Option<String>,
    symbol: Option<String>,
    /// Page size, 1 to 1,000 (default 1,000); `has_more` and `next_cursor` name the next page.
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (with the same filters): the page after it (23
    /// URL-safe base64 characters; empty is the first page).
    #[param(value_type = Option<String>, pattern = "^([A-Za-z0-9_-]{23})?$",
        example = "SAGS86QREX2OnwARIjNEVWY")]
    cursor: Option<String>,
}

impl Validate for FilterQuery {
    type Valid = (HoldingFilter, PageAfter);

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] =
        &[("limit", || schemas::query_integer(1, Some(MAX_LIMIT)))];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (active_only, asset_type, limit, after) = (
            query::flag("active_only", self.active_only, true),
            query::choice(
                "asset_type",
                self.asset_type,
                AssetType::ALL,
                AssetType::as_str,
            ),
            query::integer("limit", self.limit, 1, MAX_LIMIT, DEFAULT_LIMIT),
            cursor::parameter(Listing::Holdings, self.cursor),
        )
            .all_valid()?;
        let filter = HoldingFilter {
            account_id: None,
            active_only,
            asset_type,
            symbol: query::string(self.symbol),
        };
        Ok((filter, PageAfter { limit, after }))
    }
}

/// A holding as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct HoldingJson<'a> {
    id: Uuid,
    account_id: Uuid,
    provider_holding_id: &'a str,
    symbol: &'a str,
    security_name: Option<&'a str>,
    #[schema(value_type = AssetType)]
    asset_type: &'static str,
    #[serde(with = "rust_decimal::serde::str")]
    quantity: Decimal,
    #[serde(with = "rust_decimal::serde::str_option")]
    cost_basis: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str")]
    market_value: Decimal,
    currency: &'a str,
    #[serde(with = "rust_decimal::serde::str_option")]
    average_price: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    current_price: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    unrealized_gain_loss: Option<Decimal>,
    is_active: bool,
    last_synced_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub(crate) fn holding_json(holding: &HoldingRecord) -> HoldingJson<'_> {
    HoldingJson {
        id: holding.id,
        account_id: holding.account_id,
        provider_holding_id: &holding.provider_holding_id,
        symbol: &holding.symbol,
        security_name: holding.security_name.as_deref(),
        asset_type: holding.asset_type.as_str(),
        quantity: holding.quantity,
        cost_basis: holding.cost_basis,
        market_value: holding.market_value,
        currency: &holding.currency,
        average_price: holding.average_price,
        current_price: holding.current_price,
        unrealized_gain_loss: holding.unrealized_gain_loss,
        is_active: holding.is_active,
        last_synced_at: holding.last_synced_at,
        created_at: holding.created_at,
        updated_at: holding.updated_at,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct HoldingList<'a> {
    holdings: Vec<HoldingJson<'a>>,
    /// Every matching holding, not only this page.
    total_count: u64,
    /// The active ones among every matching holding.
    active_count: u64,
    /// Sum of `market_value` of the listed holdings (this page) per currency, as decimal
    /// strings.
    total_market_value_by_currency: std::collections::BTreeMap<&'a str, String>,
    /// Whether another page follows.
    has_more: bool,
    /// The `cursor` of the next page; null on the last.
    next_cursor: Option<String>,
}

fn holding_list(page: HoldingPage, limit: u32) -> ApiResult {
    let (holdings, next_cursor) =
        cursor::split_page(Listing::Holdings, page.items, limit, |holding| holding.id);
    json(
        StatusCode::OK,
        &HoldingList {
            holdings: holdings.iter().map(holding_json).collect(),
            total_count: page.total_count,
            active_count: page.active_count,
            total_market_value_by_currency: sum_by_currency(
                holdings
                    .iter()
                    .map(|holding| (holding.currency.as_str(), holding.market_value)),
            ),
            has_more: next_cursor.is_some(),
            next_cursor,
        },
    )
}

/// `GET /api/v1/holdings`
async fn list(
    state: &App,
    User(claims): User,
    Query((filter, page)): Query<FilterQuery>,
) -> ApiResult {
    let holdings = state.records.holdings(claims.sub, &filter, page).await?;
    holding_list(holdings, page.limit)
}

/// `GET /api/v1/accounts/{id}/holdings`
async fn list_for_account(
    state: &App,
    User(claims): User,
    PathId(account_id): PathId,
    Query((filter, page)): Query<FilterQuery>,
) -> ApiResult {
    // The account's listing takes no symbol filter.
    let filter = HoldingFilter {
        symbol: None,
        ..filter
    };
    let holdings = state
        .records
        .holdings_of_account(claims.sub, account_id, filter, page)
        .await?;
    holding_list(holdings, page.limit)
}
