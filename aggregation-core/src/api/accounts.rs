//! Reading accounts: the user's accounts, one account, and the accounts of one connection.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
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
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::API_READ;
use crate::records::RecordError;
use crate::store::{AccountFilter, AccountRecord, AccountType};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/accounts" => list, limited(API_READ), "List the caller's accounts", [200: AccountList<'static>]),
    route!(GET "/api/v1/accounts/{id}" => get, limited(API_READ),
        "Read one of the caller's accounts", [200: AccountJson<'static>]),
    route!(GET "/api/v1/providers/{id}/accounts" => list_for_connection, limited(API_READ),
        "List the accounts of one of the caller's connections", [200: AccountList<'static>]),
];

/// An account as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0192f3a4-5b6c-7d8e-9f00-112233445566", "connection_id": "0192f3a4-0000-7d8e-9f00-112233445566", "provider_account_id": "8821-4410", "account_number_masked": "****4410", "name": "Individual Brokerage", "account_type": "brokerage", "currency": "USD", "balance_amount": "15234.50", "available_balance_amount": "1200.00", "is_active": true, "last_synced_at": "2026-01-31T14:05:00Z", "created_at": "2026-01-02T09:00:00Z", "updated_at": "2026-01-31T14:05:00Z"}))]
pub(crate) struct AccountJson<'a> {
    id: Uuid,
    connection_id: Uuid,
    provider_account_id: &'a str,
    account_number_masked: Option<&'a str>,
    name: &'a str,
    #[schema(value_type = AccountType)]
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

pub(crate) fn account_json(account: &AccountRecord) -> AccountJson<'_> {
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

#[derive(Serialize, utoipa::ToSchema)]
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
            RecordError::HistoryTooCostly { .. } => {
                ApiError::validation(vec![crate::api::validate::query::error(
                    "from",
                    "too_costly",
                    error.to_string(),
                )])
            }
            RecordError::PortfolioTooCostly { .. } | RecordError::SumTooLarge => {
                ApiError::new(ErrorCode::CommandValidationFailed, error.to_string())
            }
            RecordError::Store(store) => store.into(),
        }
    }
}

/// The caller's account with this id: 404 for unknown or foreign.
pub(crate) async fn owned_account(
    state: &App,
    user_id: Uuid,
    id: Uuid,
) -> Result<AccountRecord, ApiError> {
    Ok(state.records.account(user_id, id).await?)
}

/// The `active_only` (default false) and `account_type` filters.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct FilterQuery {
    #[param(value_type = Option<bool>)]
    active_only: Option<String>,
    #[param(value_type = Option<AccountType>, inline)]
    account_type: Option<String>,
}

impl Validate for FilterQuery {
    type Valid = AccountFilter;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (active_only, account_type) = (
            query::flag("active_only", self.active_only, false),
            query::choice(
                "account_type",
                self.account_type,
                AccountType::ALL,
                AccountType::as_str,
            ),
        )
            .all_valid()?;
        Ok(AccountFilter {
            connection_id: None,
            active_only,
            account_type,
        })
    }
}

/// `GET /api/v1/accounts`
async fn list(state: &App, User(claims): User, Query(filter): Query<FilterQuery>) -> ApiResult {
    let accounts = state.records.accounts(claims.sub, &filter).await?;
    account_list(&accounts)
}

/// `GET /api/v1/accounts/{id}`
async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let account = owned_account(state, claims.sub, id).await?;
    json(StatusCode::OK, &account_json(&account))
}

/// `GET /api/v1/providers/{id}/accounts`
async fn list_for_connection(
    state: &App,
    User(claims): User,
    PathId(connection_id): PathId,
    Query(filter): Query<FilterQuery>,
) -> ApiResult {
    let accounts = state
        .records
        .accounts_of_connection(claims.sub, connection_id, filter)
        .await?;
    account_list(&accounts)
}
