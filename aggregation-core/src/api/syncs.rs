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

use bytes::Bytes;
use http::StatusCode;
use serde::Serialize;

use super::accounts::owned_account;
use super::extract::JsonFields;
use super::providers::force_flag;
use super::{ApiResult, RequestContext, json, parse_path_uuid, require_user};
use crate::problem::{ApiError, FieldError};
use crate::providers::SyncItemError;
use crate::providers::sync::SyncReport;
use crate::service::State;

/// Sync statistics with the interface's prefixed aliases (`accounts_created`, ...).
#[derive(Serialize)]
struct Statistics<'a> {
    created: u64,
    updated: u64,
    unchanged: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    deactivated: Option<u64>,
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
    let mut message = format!(
        "Synced {kind}: {} created, {} updated, {} unchanged",
        counts.created, counts.updated, counts.unchanged
    );
    if with_deactivated {
        message.push_str(&format!(", {} deactivated", report.deactivated));
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
        errors: &report.errors,
        message,
        aliases,
    }
}

/// `POST /api/v1/accounts/syncs`
pub(crate) async fn accounts(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut fields = JsonFields::parse(ctx, &body)?;
    let connection_id = fields.uuid("connection_id");
    let force = fields.bool("force", false);
    fields.finish()?;
    let connection_id = connection_id.ok_or_else(ApiError::internal)?;
    let report = state
        .connections
        .sync_accounts_for_user(claims.sub, connection_id, force)
        .await?;
    json(StatusCode::CREATED, &statistics("accounts", &report, false))
}

/// `POST /api/v1/transactions/syncs`
pub(crate) async fn transactions(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut fields = JsonFields::parse(ctx, &body)?;
    let connection_id = fields.uuid("connection_id");
    let account_id = fields.optional_uuid("account_id");
    let start = fields.optional_date("start_date");
    let end = fields.optional_date("end_date");
    let force = fields.bool("force", false);
    if let (Some(start), Some(end)) = (start, end)
        && start > end
    {
        fields.add_error(FieldError::new(
            "start_date",
            "invalid_range",
            "Must not be after end_date.",
        ));
    }
    fields.finish()?;
    let connection_id = connection_id.ok_or_else(ApiError::internal)?;
    let report = state
        .connections
        .sync_transactions_for_user(claims.sub, connection_id, account_id, (start, end), force)
        .await?;
    json(
        StatusCode::CREATED,
        &statistics("transactions", &report, false),
    )
}

/// `POST /api/v1/accounts/{id}/holdings/syncs`
pub(crate) async fn holdings(
    state: &State,
    ctx: &RequestContext,
    id: &str,
    body: Bytes,
) -> ApiResult {
    let claims = require_user(ctx)?;
    let force = force_flag(ctx, &body)?;
    let account = owned_account(state, claims.sub, id).await?;
    let report = state
        .connections
        .sync_holdings_for_user(claims.sub, &account, force)
        .await?;
    json(StatusCode::CREATED, &statistics("holdings", &report, true))
}

#[derive(Serialize)]
struct ConnectionSyncJson<'a> {
    accounts: Statistics<'a>,
    transactions: Statistics<'a>,
    holdings: Statistics<'a>,
    message: String,
}

/// `POST /api/v1/providers/{id}/sync`
pub(crate) async fn connection(
    state: &State,
    ctx: &RequestContext,
    id: &str,
    body: Bytes,
) -> ApiResult {
    let claims = require_user(ctx)?;
    let id = parse_path_uuid("id", id)?;
    let force = force_flag(ctx, &body)?;
    let report = state
        .connections
        .sync_connection_for_user(claims.sub, id, force)
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
