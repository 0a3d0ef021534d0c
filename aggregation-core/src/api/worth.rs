//! Net worth over time and the portfolio summary (see [`crate::records::worth`] for how they
//! are computed).

use std::collections::BTreeMap;

use chrono::{DateTime, Months, NaiveDate, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::extract::{Query, User};
use super::routes::{Route, limited, route};
use super::running::HeavyRead;
use super::validate::{AllValid as _, Validate, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::{ApiError, FieldError};
use crate::rate_limit::policy::API_READ;
use crate::records::worth::{
    self, CurrencyPortfolio, CurrencyWorth, Interval, MAX_POINTS, PointsError, TopHolding, Worth,
};
use crate::store::{AccountType, AssetType};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/net-worth" => net_worth, limited(API_READ),
        "The caller's net worth now and over time, per currency", [200: NetWorthJson]),
    route!(GET "/api/v1/portfolio" => portfolio, limited(API_READ),
        "The caller's holdings summed up, per currency", [200: PortfolioJson]),
];

/// `from`, `to` (dates, defaults one year back to today, UTC) and `interval` (default
/// `month`) of the net worth history.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct NetWorthQuery {
    /// The first date the history may start at (`YYYY-MM-DD`); default: `to` minus a year.
    #[param(schema_with = crate::api::openapi::schemas::date)]
    from: Option<String>,
    /// The last point of the history (`YYYY-MM-DD`); points are counted back from it.
    /// Default: today (UTC).
    #[param(schema_with = crate::api::openapi::schemas::date)]
    to: Option<String>,
    /// The spacing of the points; default `month`.
    #[param(value_type = Option<Interval>, inline)]
    interval: Option<String>,
}

impl Validate for NetWorthQuery {
    type Valid = Vec<NaiveDate>;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (from, to, interval) = (
            query::date("from", self.from),
            query::date("to", self.to),
            interval(self.interval),
        )
            .all_valid()?;
        let to = to.unwrap_or_else(|| crate::store::now().date_naive());
        let from = from.unwrap_or_else(|| {
            to.checked_sub_months(Months::new(12))
                .unwrap_or(to)
                .max(crate::dates::EARLIEST_DATE)
        });
        worth::points(from, to, interval.unwrap_or(Interval::Month)).map_err(|error| {
            let error = match error {
                PointsError::AfterTo => query::error("from", "after_to", "Must not be after to."),
                PointsError::TooMany => query::error(
                    "from",
                    "too_many_points",
                    format!(
                        "The range holds more than {MAX_POINTS} points at this interval; \
                         move from closer to to, or choose a longer interval."
                    ),
                ),
            };
            ApiError::validation(vec![error])
        })
    }
}

/// An interval name (ASCII case-insensitive); an unknown one, the empty one included, is
/// `invalid_choice` listing the allowed ones.
fn interval(raw: Option<String>) -> Result<Option<Interval>, FieldError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    Interval::parse(&raw.trim().to_ascii_lowercase())
        .map(Some)
        .ok_or_else(|| {
            let allowed: Vec<&str> = Interval::ALL.iter().map(|value| value.as_str()).collect();
            query::error(
                "interval",
                "invalid_choice",
                format!("Must be one of: {}.", allowed.join(", ")),
            )
        })
}

/// Net worth, assets and liabilities, as decimal strings.
#[derive(Serialize, utoipa::ToSchema)]
struct WorthPointJson {
    /// The point's date.
    date: NaiveDate,
    /// Assets plus liabilities.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    net_worth: Decimal,
    /// The sum of the positive balances.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    assets: Decimal,
    /// The sum of the negative balances (zero or negative).
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    liabilities: Decimal,
}

/// The net worth of one currency.
#[derive(Serialize, utoipa::ToSchema)]
struct CurrencyWorthJson {
    /// ISO 4217 code.
    currency: String,
    /// Assets plus liabilities, from the active accounts' balances.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    net_worth: Decimal,
    /// The sum of the positive balances.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    assets: Decimal,
    /// The sum of the negative balances (zero or negative).
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    liabilities: Decimal,
    /// Every balance summed per account type (only the types present), as decimal strings.
    #[schema(value_type = BTreeMap<AccountType, String>)]
    by_account_type: BTreeMap<&'static str, String>,
    /// One point per interval, oldest first, counted back from `to`.
    history: Vec<WorthPointJson>,
}

/// `GET /api/v1/net-worth`
#[derive(Serialize, utoipa::ToSchema)]
struct NetWorthJson {
    /// One entry per currency of the active accounts, by code; no conversion.
    currencies: Vec<CurrencyWorthJson>,
    /// When the figures were computed.
    as_of: DateTime<Utc>,
}

fn strings(map: BTreeMap<&'static str, Decimal>) -> BTreeMap<&'static str, String> {
    map.into_iter()
        .map(|(key, amount)| (key, amount.to_string()))
        .collect()
}

fn worth_json(worth: CurrencyWorth) -> CurrencyWorthJson {
    let Worth {
        net_worth,
        assets,
        liabilities,
    } = worth.now;
    CurrencyWorthJson {
        currency: worth.currency,
        net_worth,
        assets,
        liabilities,
        by_account_type: strings(worth.by_account_type),
        history: worth
            .history
            .into_iter()
            .map(|(date, point)| WorthPointJson {
                date,
                net_worth: point.net_worth,
                assets: point.assets,
                liabilities: point.liabilities,
            })
            .collect(),
    }
}

/// One position summed across accounts.
#[derive(Serialize, utoipa::ToSchema)]
struct TopHoldingJson {
    /// The symbol, upper case.
    symbol: String,
    /// The security's name, as the first position seen names it.
    security_name: Option<String>,
    /// The kind of security, as the first position seen says.
    #[schema(value_type = AssetType)]
    asset_type: &'static str,
    /// Units, summed.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    quantity: Decimal,
    /// Market value, summed.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    market_value: Decimal,
    /// Cost basis of the positions that report one; null when none does.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    cost_basis: Option<Decimal>,
    /// Unrealized gain or loss of the positions that report or imply one; null when none does.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    unrealized_gain_loss: Option<Decimal>,
    /// How many of the caller's accounts hold it.
    account_count: usize,
}

/// The portfolio of one currency.
#[derive(Serialize, utoipa::ToSchema)]
struct CurrencyPortfolioJson {
    /// ISO 4217 code.
    currency: String,
    /// Market value of every active holding.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    market_value: Decimal,
    /// Cost basis of the holdings that report one.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    cost_basis: Decimal,
    /// Unrealized gain or loss: reported, else market value minus cost basis.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    unrealized_gain_loss: Decimal,
    /// Market value per asset type (only the types present), as decimal strings.
    #[schema(value_type = BTreeMap<AssetType, String>)]
    by_asset_type: BTreeMap<&'static str, String>,
    /// Up to 10 positions by market value, summed per symbol across accounts.
    top_holdings: Vec<TopHoldingJson>,
}

/// `GET /api/v1/portfolio`
#[derive(Serialize, utoipa::ToSchema)]
struct PortfolioJson {
    /// One entry per currency of the holdings, by code; no conversion.
    currencies: Vec<CurrencyPortfolioJson>,
    /// When the figures were computed.
    as_of: DateTime<Utc>,
}

fn top_holding_json(holding: TopHolding) -> TopHoldingJson {
    TopHoldingJson {
        symbol: holding.symbol,
        security_name: holding.security_name,
        asset_type: holding.asset_type.as_str(),
        quantity: holding.quantity,
        market_value: holding.market_value,
        cost_basis: holding.cost_basis,
        unrealized_gain_loss: holding.unrealized_gain_loss,
        account_count: holding.account_count,
    }
}

fn portfolio_json(portfolio: CurrencyPortfolio) -> CurrencyPortfolioJson {
    CurrencyPortfolioJson {
        currency: portfolio.currency,
        market_value: portfolio.market_value,
        cost_basis: portfolio.cost_basis,
        unrealized_gain_loss: portfolio.unrealized_gain_loss,
        by_asset_type: strings(portfolio.by_asset_type),
        top_holdings: portfolio
            .top_holdings
            .into_iter()
            .map(top_holding_json)
            .collect(),
    }
}

/// `GET /api/v1/net-worth`
async fn net_worth(
    state: &App,
    User(claims): User,
    Query(points): Query<NetWorthQuery>,
    _slot: HeavyRead,
) -> ApiResult {
    let worth = state.records.net_worth(claims.sub, &points).await?;
    json(
        StatusCode::OK,
        &NetWorthJson {
            currencies: worth.currencies.into_iter().map(worth_json).collect(),
            as_of: worth.as_of,
        },
    )
}

/// `GET /api/v1/portfolio`
async fn portfolio(state: &App, User(claims): User, _slot: HeavyRead) -> ApiResult {
    let portfolio = state.records.portfolio(claims.sub).await?;
    json(
        StatusCode::OK,
        &PortfolioJson {
            currencies: portfolio
                .currencies
                .into_iter()
                .map(portfolio_json)
                .collect(),
            as_of: portfolio.as_of,
        },
    )
}
