//! Reading accounts: the user's accounts, one account, and the accounts of one connection.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use super::extract::QueryParams;
use super::{ApiResult, RequestContext, json, parse_path_uuid, require_user};
use crate::problem::{ApiError, ErrorCode};
use crate::records::RecordError;
use crate::service::State;
use crate::store::{AccountFilter, AccountRecord, AccountType};

/// An account as the API shows it.
#[derive(Serialize)]
struct AccountJson<'a> {
    id: Uuid,
    connection_id: Uuid,
    provider_account_id: &'a str,
    account_number_masked: Option<&'a str>,
    name: &'a str,
    account_type: &'static str,
    currency: &'a str,
    #[serde(with = "rust_decimal::serde::str")]
    balance_amount: Decimal,
    #[serde(with = "rust_decimal::serde::str_option")]
    available_balance_amount: Option<Decimal>,
    is_active: bool,
    last_synced_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn account_json(account: &AccountRecord) -> AccountJson<'_> {
    AccountJson {
        id: account.id,
        connection_id: account.connection_id,
        provider_account_id: &account.provider_account_id,
        account_number_masked: account.account_number_masked.as_deref(),
        name: &account.name,
        account_type: account.account_type.as_str(),
        currency: &account.currency,
        balance_amount: account.balance_amount,
        available_balance_amount: account.available_balance_amount,
        is_active: account.is_active,
        last_synced_at: account.last_synced_at,
        created_at: account.created_at,
        updated_at: account.updated_at,
    }
}

#[derive(Serialize)]
struct AccountList<'a> {
    accounts: Vec<AccountJson<'a>>,
    total_count: usize,
    active_count: usize,
    /// Sum of `balance_amount` of the listed accounts per currency, as decimal strings.
    total_balance_by_currency: BTreeMap<&'a str, String>,
}

/// Sums amounts per currency, rendering each sum as a decimal string.
pub(crate) fn sum_by_currency<'a>(
    rows: impl Iterator<Item = (&'a str, Decimal)>,
) -> BTreeMap<&'a str, String> {
    let mut sums: BTreeMap<&str, Decimal> = BTreeMap::new();
    for (currency, amount) in rows {
        let sum = sums.entry(currency).or_default();
        *sum = sum.saturating_add(amount);
    }
    sums.into_iter()
        .map(|(currency, sum)| (currency, sum.to_string()))
        .collect()
}

fn account_list(accounts: &[AccountRecord]) -> ApiResult {
    json(
        StatusCode::OK,
        &AccountList {
            accounts: accounts.iter().map(account_json).collect(),
            total_count: accounts.len(),
            active_count: accounts.iter().filter(|account| account.is_active).count(),
            total_balance_by_currency: sum_by_currency(
                accounts
                    .iter()
                    .map(|account| (account.currency.as_str(), account.balance_amount)),
            ),
        },
    )
}

impl From<RecordError> for ApiError {
    fn from(error: RecordError) -> Self {
        match error {
            RecordError::AccountNotFound
            | RecordError::TransactionNotFound
            | RecordError::ConnectionNotFound => {
                ApiError::new(ErrorCode::NotFound, error.to_string())
            }
            RecordError::Store(store) => store.into(),
        }
    }
}

/// The caller's account with this path id: 422 for a non-UUID, 404 for unknown or foreign.
pub(crate) async fn owned_account(
    state: &State,
    user_id: Uuid,
    id: &str,
) -> Result<AccountRecord, ApiError> {
    let id = parse_path_uuid("id", id)?;
    Ok(state.records.account(user_id, id).await?)
}

/// The `active_only` (default false) and `account_type` filters.
fn filter(query: &mut QueryParams) -> AccountFilter {
    AccountFilter {
        connection_id: None,
        active_only: query.bool("active_only", false),
        account_type: query.choice("account_type", AccountType::ALL, AccountType::as_str),
    }
}

/// `GET /api/v1/accounts`
pub(crate) async fn list(state: &State, ctx: &RequestContext) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let filter = filter(&mut query);
    query.finish()?;
    let accounts = state.records.accounts(claims.sub, &filter).await?;
    account_list(&accounts)
}

/// `GET /api/v1/accounts/{id}`
pub(crate) async fn get(state: &State, ctx: &RequestContext, id: &str) -> ApiResult {
    let claims = require_user(ctx)?;
    let account = owned_account(state, claims.sub, id).await?;
    json(StatusCode::OK, &account_json(&account))
}

/// `GET /api/v1/providers/{id}/accounts`
pub(crate) async fn list_for_connection(
    state: &State,
    ctx: &RequestContext,
    id: &str,
) -> ApiResult {
    let claims = require_user(ctx)?;
    let connection_id = parse_path_uuid("id", id)?;
    let mut query = QueryParams::parse(ctx.query.as_deref());
    let filter = filter(&mut query);
    query.finish()?;
    let accounts = state
        .records
        .accounts_of_connection(claims.sub, connection_id, filter)
        .await?;
    account_list(&accounts)
}
