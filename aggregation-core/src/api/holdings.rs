//! Reading holdings: across the user's accounts, and of one account.

use chrono::{DateTime, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use super::accounts::sum_by_currency;
use super::extract::QueryParams;
use super::{ApiResult, RequestContext, json, parse_path_uuid, require_user};
use crate::service::State;
use crate::store::{AssetType, HoldingFilter, HoldingRecord};

/// A holding as the API shows it.
#[derive(Serialize)]
struct HoldingJson<'a> {
    id: Uuid,
    account_id: Uuid,
    provider_holding_id: &'a str,
    symbol: &'a str,
    security_name: Option<&'a str>,
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

fn holding_json(holding: &HoldingRecord) -> HoldingJson<'_> {
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

#[derive(Serialize)]
struct HoldingList<'a> {
    holdings: Vec<HoldingJson<'a>>,
    total_count: usize,
    active_count: usize,
    /// Sum of `market_value` of the listed holdings per currency, as decimal strings.
    total_market_value_by_currency: std::collections::BTreeMap<&'a str, String>,
}

fn holding_list(holdings: &[HoldingRecord]) -> ApiResult {
    json(
        StatusCode::OK,
        &HoldingList {
            holdings: holdings.iter().map(holding_json).collect(),
            total_count: holdings.len(),
            active_count: holdings.iter().filter(|holding| holding.is_active).count(),
            total_market_value_by_currency: sum_by_currency(
                holdings
                    .iter()
                    .map(|holding| (holding.currency.as_str(), holding.market_value)),
            ),
        },
    )
}

/// `GET /api/v1/holdings`
pub(crate) async fn list(state: &State, ctx: &RequestContext) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let filter = HoldingFilter {
        account_id: None,
        active_only: query.bool("active_only", true),
        asset_type: query.choice("asset_type", AssetType::ALL, AssetType::as_str),
        symbol: query.string("symbol"),
    };
    query.finish()?;
    let holdings = state.records.holdings(claims.sub, &filter).await?;
    holding_list(&holdings)
}

/// `GET /api/v1/accounts/{id}/holdings`
pub(crate) async fn list_for_account(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let account_id = parse_path_uuid("id", id)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let filter = HoldingFilter {
        account_id: Some(account_id),
        active_only: query.bool("active_only", true),
        asset_type: query.choice("asset_type", AssetType::ALL, AssetType::as_str),
        symbol: None,
    };
    query.finish()?;
    let holdings = state
        .records
        .holdings_of_account(claims.sub, account_id, filter)
        .await?;
    holding_list(&holdings)
}
