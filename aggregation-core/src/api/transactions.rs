//! Reading transactions: one transaction, and the transactions of an account.

use chrono::{DateTime, NaiveDate, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::extract::{PathId, Query, User};
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, Validate, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::ApiError;
use crate::rate_limit::policy::API_READ;
use crate::store::{TransactionQuery, TransactionRecord, TransactionType};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/transactions/{id}" => get, limited(API_READ),
        "Read one of the caller's transactions", [200: TransactionJson<'static>]),
    route!(GET "/api/v1/accounts/{id}/transactions" => list_for_account, limited(API_READ),
        "List the transactions of one of the caller's accounts", [200: TransactionList<'static>]),
];

/// Page size bounds and default of the by-account listing.
const MAX_LIMIT: i64 = 100;
const DEFAULT_LIMIT: u32 = 50;

/// `limit`, `offset`, `transaction_type`, `start_date` and `end_date` of the by-account
/// listing.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct ListQuery {
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    #[param(value_type = Option<i64>, minimum = 0)]
    offset: Option<String>,
    #[param(value_type = Option<TransactionType>, inline)]
    transaction_type: Option<String>,
    #[param(schema_with = crate::api::openapi::schemas::date)]
    start_date: Option<String>,
    #[param(schema_with = crate::api::openapi::schemas::date)]
    end_date: Option<String>,
}

impl Validate for ListQuery {
    /// The date range when both dates are given, else the page.
    type Valid = TransactionQuery;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let start = query::date("start_date", self.start_date);
        let end = query::date("end_date", self.end_date);
        let ordered = match (&start, &end) {
            (Ok(Some(start)), Ok(Some(end))) if start > end => Err(query::error(
                "start_date",
                "after_end_date",
                "Must not be after end_date.",
            )),
            _ => Ok(()),
        };
        let (limit, offset, transaction_type, start, end, ()) = (
            query::integer("limit", self.limit, 1, MAX_LIMIT, DEFAULT_LIMIT),
            query::integer("offset", self.offset, 0, i64::MAX, 0u64),
            query::choice(
                "transaction_type",
                self.transaction_type,
                TransactionType::ALL,
                TransactionType::as_str,
            ),
            start,
            end,
            ordered,
        )
            .all_valid()?;
        Ok(match (start, end) {
            (Some(start), Some(end)) => TransactionQuery::DateRange { start, end },
            _ => TransactionQuery::Recent {
                transaction_type,
                limit,
                offset,
            },
        })
    }
}

/// A transaction as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0192f3a4-1111-7d8e-9f00-112233445566", "account_id": "0192f3a4-5b6c-7d8e-9f00-112233445566", "provider_transaction_id": "T-20260115-001", "transaction_type": "trade", "subtype": "buy", "status": "settled", "amount": "-1523.40", "currency": "USD", "description": "Bought 10 VTI", "symbol": "VTI", "security_name": "Vanguard Total Stock Market ETF", "quantity": "10", "unit_price": "152.34", "commission": "0.00", "transaction_date": "2026-01-15", "settlement_date": "2026-01-16", "created_at": "2026-01-15T21:00:00Z", "updated_at": "2026-01-15T21:00:00Z"}))]
struct TransactionJson<'a> {
    id: Uuid,
    account_id: Uuid,
    provider_transaction_id: &'a str,
    #[schema(value_type = TransactionType)]
    transaction_type: &'static str,
    subtype: Option<&'a str>,
    #[schema(value_type = crate::store::TransactionStatus)]
    status: &'static str,
    #[serde(with = "rust_decimal::serde::str")]
    amount: Decimal,
    currency: &'a str,
    description: Option<&'a str>,
    symbol: Option<&'a str>,
    security_name: Option<&'a str>,
    #[serde(with = "rust_decimal::serde::str_option")]
    quantity: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    unit_price: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    commission: Option<Decimal>,
    transaction_date: NaiveDate,
    settlement_date: Option<NaiveDate>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn transaction_json(transaction: &TransactionRecord) -> TransactionJson<'_> {
    TransactionJson {
        id: transaction.id,
        account_id: transaction.account_id,
        provider_transaction_id: &transaction.provider_transaction_id,
        transaction_type: transaction.transaction_type.as_str(),
        subtype: transaction.subtype.as_deref(),
        status: transaction.status.as_str(),
        amount: transaction.amount,
        currency: &transaction.currency,
        description: transaction.description.as_deref(),
        symbol: transaction.symbol.as_deref(),
        security_name: transaction.security_name.as_deref(),
        quantity: transaction.quantity,
        unit_price: transaction.unit_price,
        commission: transaction.commission,
        transaction_date: transaction.transaction_date,
        settlement_date: transaction.settlement_date,
        created_at: transaction.created_at,
        updated_at: transaction.updated_at,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct TransactionList<'a> {
    transactions: Vec<TransactionJson<'a>>,
    total_count: u64,
    limit: u64,
    offset: u64,
    has_more: bool,
}

/// `GET /api/v1/transactions/{id}`
async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let transaction = state.records.transaction(claims.sub, id).await?;
    json(StatusCode::OK, &transaction_json(&transaction))
}

/// `GET /api/v1/accounts/{id}/transactions`
///
/// With both `start_date` and `end_date`: every transaction dated in that inclusive range,
/// oldest first; `limit`, `offset` and `transaction_type` are validated but not applied, and
/// the answer reports `limit` = the number returned, `offset` 0, `has_more` false. Otherwise:
/// one page newest first with `limit`, `offset` and `transaction_type`; a lone date is ignored.
async fn list_for_account(
    state: &App,
    User(claims): User,
    PathId(account_id): PathId,
    Query(query): Query<ListQuery>,
) -> ApiResult {
    let page = state
        .records
        .transactions_of_account(claims.sub, account_id, &query)
        .await?;
    let returned = page.items.len() as u64;
    let (limit, offset) = match query {
        TransactionQuery::Recent { limit, offset, .. } => (u64::from(limit), offset),
        _ => (returned, 0),
    };
    json(
        StatusCode::OK,
        &TransactionList {
            transactions: page.items.iter().map(transaction_json).collect(),
            total_count: page.total_count,
            limit,
            offset,
            has_more: offset.saturating_add(returned) < page.total_count,
        },
    )
}
