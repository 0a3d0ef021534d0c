//! Reading transactions: one transaction, and the transactions of an account.

use chrono::{DateTime, NaiveDate, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use super::extract::QueryParams;
use super::{ApiResult, RequestContext, json, parse_path_uuid, require_user};
use crate::service::State;
use crate::store::{TransactionQuery, TransactionRecord, TransactionType};

/// Page size bounds and default of the by-account listing.
const MAX_LIMIT: i64 = 100;
const DEFAULT_LIMIT: i64 = 50;

/// A transaction as the API shows it.
#[derive(Serialize)]
struct TransactionJson<'a> {
    id: Uuid,
    account_id: Uuid,
    provider_transaction_id: &'a str,
    transaction_type: &'static str,
    subtype: Option<&'a str>,
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

#[derive(Serialize)]
struct TransactionList<'a> {
    transactions: Vec<TransactionJson<'a>>,
    total_count: u64,
    limit: u64,
    offset: u64,
    has_more: bool,
}

/// `GET /api/v1/transactions/{id}`
pub(crate) async fn get(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    let transaction = state.records.transaction(claims.sub, id).await?;
    json(StatusCode::OK, &transaction_json(&transaction))
}

/// `GET /api/v1/accounts/{id}/transactions`
///
/// With both `start_date` and `end_date`: every transaction dated in that inclusive range,
/// oldest first; `limit`, `offset` and `transaction_type` are validated but not applied, and
/// the answer reports `limit` = the number returned, `offset` 0, `has_more` false. Otherwise:
/// one page newest first with `limit`, `offset` and `transaction_type`; a lone date is ignored.
pub(crate) async fn list_for_account(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let account_id = parse_path_uuid("id", id)?;
    let mut params = QueryParams::parse(ctx.query.as_deref());
    let limit = params.integer("limit", 1, MAX_LIMIT, DEFAULT_LIMIT);
    let offset = params.integer("offset", 0, i64::MAX, 0);
    let transaction_type = params.choice(
        "transaction_type",
        TransactionType::ALL,
        TransactionType::as_str,
    );
    let start = params.date("start_date");
    let end = params.date("end_date");
    let range = match (start, end) {
        (Some(start), Some(end)) if start > end => {
            params.add_error(
                "start_date",
                "after_end_date",
                "Must not be after end_date.",
            );
            None
        }
        (Some(start), Some(end)) => Some(TransactionQuery::DateRange { start, end }),
        _ => None,
    };
    params.finish()?;
    let query = range.unwrap_or(TransactionQuery::Recent {
        transaction_type,
        limit: u32::try_from(limit).unwrap_or(50),
        offset: u64::try_from(offset).unwrap_or(0),
    });
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
