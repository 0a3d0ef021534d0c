//! Syncs from a provider: accounts, transactions, one account's holdings, and the whole
//! connection. Each answers 201 with sync statistics; a sync of the same subject within the
//! cool-down (5 minutes) without `force` is 429 with `Retry-After`.
//!
//! Choices where the interface is silent: a transactions sync without `start_date` reaches
//! back 90 days (configurable) from `end_date` or today, never before 1900-01-01;
//! `start_date` after `end_date` is 422, and so is a date outside the years 1900 to 2200.
//! A provider failure for one account lands in `errors` and the other accounts are still
//! written; a failure of the whole call (refused tokens, provider down) is 502 and writes
//! nothing. A failed sync does not start the cool-down.

use chrono::NaiveDate;
use http::StatusCode;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::accounts::owned_account;
use super::extract::{Json, JsonOrEmpty, PathId, User};
use super::providers::ForceBody;
use super::routes::{Route, limited, limited_by_body_connection, route};
use super::validate::{AllValid as _, Field, Validate, body};
use super::{ApiResult, json};
use crate::app::App;
use crate::auth::ClientInfo;
use crate::config::Config;
use crate::problem::{ApiError, FieldError};
use crate::providers::sync::SyncReport;
use crate::providers::{PresentUser, SyncItemError};
use crate::rate_limit::policy::{HOLDINGS_SYNC, PROVIDER_SYNC};

pub(crate) const ROUTES: &[Route] = &[
    route!(POST "/api/v1/providers/{id}/sync" => connection, limited(PROVIDER_SYNC),
        "Sync a connection's accounts, transactions and holdings", [201: ConnectionSyncJson<'static>; CommandValidationFailed, ProviderError]),
    route!(POST "/api/v1/accounts/syncs" => accounts, limited_by_body_connection(PROVIDER_SYNC),
        "Sync the accounts of a connection", [201: Statistics<'static>; NotFound, CommandValidationFailed, ProviderError]),
    route!(POST "/api/v1/transactions/syncs" => transactions,
        limited_by_body_connection(PROVIDER_SYNC), "Sync the transactions of a connection", [201: Statistics<'static>; NotFound, CommandValidationFailed, ProviderError]),
    route!(POST "/api/v1/accounts/{id}/holdings/syncs" => holdings, limited(HOLDINGS_SYNC),
        "Sync the holdings of an account", [201: Statistics<'static>; CommandValidationFailed, ProviderError]),
];

/// `{connection_id, force?}` of an accounts sync.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct AccountsSyncBody {
    #[schema(required = true, schema_with = crate::api::openapi::schemas::uuid)]
    connection_id: Field,
    #[schema(value_type = Option<bool>)]
    force: Field,
}

impl Validate for AccountsSyncBody {
    type Valid = (Uuid, bool);

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        (
            body::uuid("connection_id", self.connection_id),
            body::flag("force", self.force, false),
        )
            .all_valid()
    }
}

/// `{connection_id, account_id?, start_date?, end_date?, force?}` of a transactions sync.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct TransactionsSyncBody {
    #[schema(required = true, schema_with = crate::api::openapi::schemas::uuid)]
    connection_id: Field,
    #[schema(schema_with = crate::api::openapi::schemas::nullable_uuid)]
    account_id: Field,
    #[schema(schema_with = crate::api::openapi::schemas::nullable_date)]
    start_date: Field,
    #[schema(schema_with = crate::api::openapi::schemas::nullable_date)]
    end_date: Field,
    #[schema(value_type = Option<bool>)]
    force: Field,
}

/// What a transactions sync asks for.
pub(crate) struct TransactionsSync {
    connection_id: Uuid,
    account_id: Option<Uuid>,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
    force: bool,
}

impl Validate for TransactionsSyncBody {
    type Valid = TransactionsSync;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let start = body::optional_date("start_date", self.start_date);
        let end = body::optional_date("end_date", self.end_date);
        let ordered = match (&start, &end) {
            (Ok(Some(start)), Ok(Some(end))) if start > end => Err(FieldError::new(
                "start_date",
                "invalid_range",
                "Must not be after end_date.",
            )),
            _ => Ok(()),
        };
        let (connection_id, account_id, start, end, force, ()) = (
            body::uuid("connection_id", self.connection_id),
            body::optional_uuid("account_id", self.account_id),
            start,
            end,
            body::flag("force", self.force, false),
            ordered,
        )
            .all_valid()?;
        Ok(TransactionsSync {
            connection_id,
            account_id,
            start,
            end,
            force,
        })
    }
}

/// Sync statistics with the interface's prefixed aliases (`accounts_created`, ...).
#[derive(Serialize, utoipa::ToSchema)]
struct Statistics<'a> {
    created: u64,
    updated: u64,
    unchanged: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    deactivated: Option<u64>,
    /// Pending transactions deleted because the provider no longer returns them for the
    /// synced window (transactions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    removed: Option<u64>,
    /// Transactions recognised as rows another source (a file import, another provider)
    /// wrote already: not written again (transactions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    matched: Option<u64>,
    /// Transfers paired between the caller's accounts (transactions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    transfers: Option<u64>,
    errors: &'a [SyncItemError],
    message: String,
    #[serde(flatten)]
    aliases: serde_json::Map<String, serde_json::Value>,
}

fn statistics<'a>(kind: &str, report: &'a SyncReport, with_deactivated: bool) -> Statistics<'a> {
    let counts = &report.counts;
    let mut aliases = serde_json::Map::new();
    aliases.insert(format!("{kind}_created"), counts.created.into());
    aliases.insert(format!("{kind}_updated"), counts.updated.into());
    aliases.insert(format!("{kind}_unchanged"), counts.unchanged.into());
    if with_deactivated {
        aliases.insert(format!("{kind}_deactivated"), report.deactivated.into());
    }
    let with_removed = kind == "transactions";
    if with_removed {
        aliases.insert(format!("{kind}_removed"), report.removed.into());
        aliases.insert(format!("{kind}_matched"), report.matched.into());
    }
    let mut message = format!(
        "Synced {kind}: {} created, {} updated, {} unchanged",
        counts.created, counts.updated, counts.unchanged
    );
    if with_deactivated {
        message.push_str(&format!(", {} deactivated", report.deactivated));
    }
    if with_removed && report.removed > 0 {
        message.push_str(&format!(", {} pending removed", report.removed));
    }
    if !report.errors.is_empty() {
        message.push_str(&format!(", {} skipped with errors", report.errors.len()));
    }
    message.push('.');
    Statistics {
        created: counts.created,
        updated: counts.updated,
        unchanged: counts.unchanged,
        deactivated: with_deactivated.then_some(report.deactivated),
        removed: with_removed.then_some(report.removed),
        matched: with_removed.then_some(report.matched),
        transfers: with_removed.then_some(report.transfers),
        errors: &report.errors,
        message,
        aliases,
    }
}

/// The user asking for a sync, as the provider may tell it (PSD2's PSU headers).
fn present(client: ClientInfo) -> PresentUser {
    PresentUser::new(client.ip, client.user_agent)
}

/// `POST /api/v1/accounts/syncs`
async fn accounts(
    state: &App,
    User(claims): User,
    client: ClientInfo,
    Json((connection_id, force)): Json<AccountsSyncBody>,
) -> ApiResult {
    let report = state
        .connections
        .sync_accounts_for_user(claims.sub, connection_id, present(client), force)
        .await?;
    json(StatusCode::CREATED, &statistics("accounts", &report, false))
}

/// `POST /api/v1/transactions/syncs`
async fn transactions(
    state: &App,
    User(claims): User,
    client: ClientInfo,
    Json(TransactionsSync {
        connection_id,
        account_id,
        start,
        end,
        force,
    }): Json<TransactionsSyncBody>,
) -> ApiResult {
    let report = state
        .connections
        .sync_transactions_for_user(
            claims.sub,
            connection_id,
            account_id,
            (start, end),
            present(client),
            force,
        )
        .await?;
    json(
        StatusCode::CREATED,
        &statistics("transactions", &report, false),
    )
}

/// `POST /api/v1/accounts/{id}/holdings/syncs`
async fn holdings(
    state: &App,
    User(claims): User,
    client: ClientInfo,
    id: Result<PathId, ApiError>,
    JsonOrEmpty(force): JsonOrEmpty<ForceBody>,
) -> ApiResult {
    // The body is judged before the path id here.
    let PathId(id) = id?;
    let account = owned_account(state, claims.sub, id).await?;
    let report = state
        .connections
        .sync_holdings_for_user(claims.sub, &account, present(client), force)
        .await?;
    json(StatusCode::CREATED, &statistics("holdings", &report, true))
}

#[derive(Serialize, utoipa::ToSchema)]
struct ConnectionSyncJson<'a> {
    accounts: Statistics<'a>,
    transactions: Statistics<'a>,
    holdings: Statistics<'a>,
    message: String,
}

/// `POST /api/v1/providers/{id}/sync`
async fn connection(
    state: &App,
    User(claims): User,
    client: ClientInfo,
    PathId(id): PathId,
    JsonOrEmpty(force): JsonOrEmpty<ForceBody>,
) -> ApiResult {
    let report = state
        .connections
        .sync_connection_for_user(claims.sub, id, present(client), force)
        .await?;
    let message = format!(
        "Synced {} accounts, {} transactions and {} holdings.",
        report.accounts.counts.ids.len(),
        report.transactions.counts.ids.len(),
        report.holdings.counts.ids.len(),
    );
    json(
        StatusCode::CREATED,
        &ConnectionSyncJson {
            accounts: statistics("accounts", &report.accounts, false),
            transactions: statistics("transactions", &report.transactions, false),
            holdings: statistics("holdings", &report.holdings, true),
            message,
        },
    )
}
