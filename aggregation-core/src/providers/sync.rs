//! Syncs of a connection's accounts, transactions and holdings into the records, for the
//! user who asks and for the scheduled job alike.
//!
//! Each sync claims a cool-down on its subject first ([`Config::sync_cooldown`]): within it a
//! sync without `force` is refused with [`ConnectionError::CoolingDown`], and a sync that fails
//! hands the claim back. A provider failure for one account lands in the report's `errors` and
//! the other accounts are still written; a failure of the whole call writes nothing. Everything
//! a sync fetched is mapped by one function ([`sync_batch`]) into the same normalized batch a
//! file import makes ([`NormalizedBatch`]), written by the one batch writer in one store
//! transaction, and reported as [`DomainEvent::ConnectionSynced`].
//!
//! [`Config::sync_cooldown`]: crate::Config::sync_cooldown

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::connections::{ConnectionError, Connections, HeldCredentials, seconds};
use super::{
    DateRange, FetchContext, Fetched, PresentUser, Provider, ProviderError, RequestBudget,
    SyncItemError,
};
use crate::dates;
use crate::events::{
    DomainEvent, DurableEvent, Event, HoldingCounts, RowCounts, SyncCompleted, SyncCompletedCounts,
};
use crate::store::{
    AbsentHoldings, AccountFilter, AccountRecord, AssetType, BatchAccount, BatchConnection,
    BatchCounts, BatchSnapshot, BatchTarget, ConnectionRecord, FeedUpdate, NewAccount, NewHolding,
    NewTransaction, NormalizedBatch, ProviderEnrichment, SnapshotSource, StoreError, SyncClaim,
    SyncKind, TransactionSource, UpsertCounts, now,
};

/// What one kind of sync did, with the items the provider answered that could not be used.
#[derive(Debug, Default, Clone)]
pub(crate) struct SyncReport {
    pub(crate) counts: UpsertCounts,
    pub(crate) deactivated: u64,
    /// Pending transactions deleted because the provider no longer returns them.
    pub(crate) removed: u64,
    /// Transactions recognised as another source's rows (not written again).
    pub(crate) matched: u64,
    /// Transfers paired between the user's accounts.
    pub(crate) transfers: u64,
    pub(crate) errors: Vec<SyncItemError>,
}

/// The three reports of a whole-connection sync.
#[derive(Debug, Default, Clone)]
pub(crate) struct ConnectionSyncReport {
    pub(crate) accounts: SyncReport,
    pub(crate) transactions: SyncReport,
    pub(crate) holdings: SyncReport,
}

/// The rule of a sync's events: its `sync.completed` event, with the counts.
pub(crate) fn sync_events(
    user_id: Uuid,
    connection_id: Uuid,
    at: DateTime<Utc>,
) -> impl Fn(&BatchCounts) -> Vec<Event> + Send + Sync {
    move |counts| {
        let mut events = vec![sync_completed(user_id, connection_id, counts).event_at(at)];
        events.extend(crate::records::matches::matches_events(&counts.matches, at));
        events
    }
}

/// The `sync.completed` event of a sync of the connection that wrote `counts`.
fn sync_completed(user_id: Uuid, connection_id: Uuid, counts: &BatchCounts) -> SyncCompleted {
    let rows = |counts: &UpsertCounts| RowCounts {
        created: counts.created,
        updated: counts.updated,
        unchanged: counts.unchanged,
    };
    SyncCompleted {
        user_id,
        connection_id,
        counts: SyncCompletedCounts {
            accounts: rows(&counts.accounts),
            transactions: rows(&counts.transactions),
            holdings: HoldingCounts {
                created: counts.holdings.created,
                updated: counts.holdings.updated,
                unchanged: counts.holdings.unchanged,
                deactivated: counts.holdings_deactivated,
            },
            snapshots_created: counts.snapshots_created,
        },
    }
}

/// What one background sync pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScheduledSyncs {
    /// Connections synced.
    pub(crate) synced: usize,
    /// Connections whose sync failed (each logged).
    pub(crate) failed: usize,
    /// Connections skipped because their provider's request budget is spent (each logged; a
    /// connection its user synced meanwhile is skipped silently and not counted).
    pub(crate) skipped: usize,
}

impl Connections {
    /// [`sync_accounts`](Self::sync_accounts) of one of the user's connections.
    pub(crate) async fn sync_accounts_for_user(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        present: PresentUser,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let connection = self.owned(user_id, connection_id).await?;
        self.sync_accounts(&connection, Some(present), force).await
    }

    /// [`sync_transactions`](Self::sync_transactions) of one of the user's connections, over
    /// [`transactions_range`](Self::transactions_range) of the given dates.
    pub(crate) async fn sync_transactions_for_user(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        account_id: Option<Uuid>,
        (start, end): (Option<NaiveDate>, Option<NaiveDate>),
        present: PresentUser,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let connection = self.owned(user_id, connection_id).await?;
        let range = self.transactions_range(start, end);
        self.sync_transactions(&connection, account_id, range, Some(present), force)
            .await
    }

    /// [`sync_holdings`](Self::sync_holdings) of one of the user's accounts (already read as
    /// theirs).
    pub(crate) async fn sync_holdings_for_user(
        &self,
        user_id: Uuid,
        account: &AccountRecord,
        present: PresentUser,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let connection = self.owned(user_id, account.connection_id).await?;
        self.sync_holdings(&connection, account, Some(present), force)
            .await
    }

    /// A whole-connection sync of one of the user's connections, asked for by the user.
    pub(crate) async fn sync_connection_for_user(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        present: PresentUser,
        force: bool,
    ) -> Result<ConnectionSyncReport, ConnectionError> {
        let connection = self.owned(user_id, connection_id).await?;
        self.sync_connection(
            &connection,
            SnapshotSource::ManualSync,
            Some(present),
            force,
        )
        .await
    }

    /// Refuses a sync the provider's request budget does not allow yet: the connection's
    /// bucket has no token left (it is paid up to more than `capacity - 1` intervals ahead),
    /// `force` or not (the limit is the provider's, not ours). Answers the budget the sync
    /// spends, if any.
    async fn within_budget(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        user_present: bool,
    ) -> Result<Option<RequestBudget>, ConnectionError> {
        let Some(budget) = provider
            .request_budget()
            .filter(|budget| budget.applies(user_present))
        else {
            return Ok(None);
        };
        let Some(paid_until) = self.store.request_budget_paid_until(connection.id).await? else {
            return Ok(Some(budget));
        };
        let interval = seconds(budget.interval());
        let allowance = i32::try_from(budget.requests.max(1) - 1)
            .ok()
            .and_then(|tokens| interval.checked_mul(tokens));
        let at = now();
        match allowance.and_then(|allowance| paid_until.checked_sub_signed(allowance)) {
            Some(next_token) if next_token > at => {
                let wait = (next_token - at).num_milliseconds().max(0);
                let retry_after_secs = u64::try_from(wait).unwrap_or(0).div_ceil(1000).max(1);
                Err(ConnectionError::BudgetSpent { retry_after_secs })
            }
            _ => Ok(Some(budget)),
        }
    }

    /// Runs a sync the connection's request budget allows ([`within_budget`](Self::within_budget))
    /// and charges the budget with the requests the provider counted on `context`, whether
    /// the sync succeeded or not (a failed request was sent all the same).
    async fn budgeted<T, Fut>(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        context: &FetchContext,
        sync: Fut,
    ) -> Result<T, ConnectionError>
    where
        Fut: Future<Output = Result<T, ConnectionError>>,
    {
        let user_present = context.present_user.is_some();
        let budget = self
            .within_budget(connection, provider, user_present)
            .await?;
        let result = sync.await;
        let sent = context.requests_sent();
        if let Some(budget) = budget
            && sent > 0
        {
            let cost = budget.interval().saturating_mul(sent);
            if let Err(error) = self
                .store
                .spend_request_budget(connection.id, now(), seconds(cost))
                .await
            {
                // The sync's records are written: losing one charge beats failing it.
                tracing::warn!(error = %error, connection_id = %connection.id, sent, "could not charge the provider's request budget");
            }
        }
        result
    }

    /// Claims the cool-down of a sync, runs it, and hands the claim back if it fails.
    async fn claimed<T, Fut>(
        &self,
        subject_id: Uuid,
        kind: SyncKind,
        force: bool,
        sync: Fut,
    ) -> Result<T, ConnectionError>
    where
        Fut: Future<Output = Result<T, ConnectionError>>,
    {
        let at = now();
        let cooldown = seconds(self.config.sync_cooldown());
        let previous = match self
            .store
            .claim_sync(subject_id, kind, at, cooldown, force)
            .await?
        {
            SyncClaim::Granted { previous } => previous,
            SyncClaim::CoolingDown { until } => {
                let wait = (until - at).num_milliseconds().max(0);
                let retry_after_secs = u64::try_from(wait).unwrap_or(0).div_ceil(1000).max(1);
                return Err(ConnectionError::CoolingDown { retry_after_secs });
            }
        };
        let result = sync.await;
        if result.is_err()
            && let Err(error) = self
                .store
                .release_sync(subject_id, kind, at, previous)
                .await
        {
            tracing::warn!(error = %error, %subject_id, "could not release a failed sync's claim");
        }
        result
    }

    async fn fetch_accounts(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldCredentials,
        context: &FetchContext,
    ) -> Result<Fetched<NewAccount>, ConnectionError> {
        let p = provider.clone();
        self.call(connection, provider, tokens, move |credentials| {
            let (p, context) = (p.clone(), context.clone());
            async move { p.fetch_accounts(&credentials, &context).await }
        })
        .await
    }

    async fn fetch_transactions(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldCredentials,
        account: &str,
        range: DateRange,
        context: &FetchContext,
    ) -> Result<Fetched<NewTransaction>, ConnectionError> {
        let p = provider.clone();
        let account = account.to_owned();
        self.call(connection, provider, tokens, move |credentials| {
            let (p, account, context) = (p.clone(), account.clone(), context.clone());
            async move {
                p.fetch_transactions(&credentials, &account, range, &context)
                    .await
            }
        })
        .await
    }

    async fn fetch_holdings(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldCredentials,
        account: &str,
        context: &FetchContext,
    ) -> Result<Fetched<NewHolding>, ConnectionError> {
        let p = provider.clone();
        let account = account.to_owned();
        self.call(connection, provider, tokens, move |credentials| {
            let (p, account, context) = (p.clone(), account.clone(), context.clone());
            async move { p.fetch_holdings(&credentials, &account, &context).await }
        })
        .await
    }

    /// A change-feed provider's changes since the connection's stored cursor, sorted by
    /// account: each account of `accounts` gets its list (empty when nothing changed), a
    /// change for an account the batch does not write lands in `errors`. The update that
    /// stores the new cursor with the removals.
    async fn fetch_feed(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        tokens: &mut HeldCredentials,
        accounts: &[String],
        context: &FetchContext,
    ) -> Result<
        (
            std::collections::HashMap<String, Vec<NewTransaction>>,
            FeedUpdate,
            Vec<SyncItemError>,
        ),
        ConnectionError,
    > {
        let cursor = self.store.sync_cursor(connection.id).await?;
        let p = provider.clone();
        let changes = self
            .call(connection, provider, tokens, move |credentials| {
                let (p, context, cursor) = (p.clone(), context.clone(), cursor.clone());
                async move {
                    p.fetch_changes(&credentials, cursor.as_deref(), &context)
                        .await
                }
            })
            .await?;
        let mut by_account: std::collections::HashMap<String, Vec<NewTransaction>> = accounts
            .iter()
            .map(|account| (account.clone(), Vec::new()))
            .collect();
        let mut errors = changes.errors;
        let mut enrichment = Vec::new();
        for changed in changes.transactions {
            let Some(rows) = by_account.get_mut(&changed.provider_account_id) else {
                errors.push(SyncItemError {
                    item: changed.transaction.provider_transaction_id.clone(),
                    message: "the transaction's account is not one of the connection's".to_owned(),
                });
                continue;
            };
            enrichment.push(ProviderEnrichment {
                provider_account_id: changed.provider_account_id.clone(),
                provider_transaction_id: changed.transaction.provider_transaction_id.clone(),
                category: changed.category,
                merchant_name: changed.merchant_name,
            });
            // A later change of the same row wins.
            rows.retain(|row| {
                row.provider_transaction_id != changed.transaction.provider_transaction_id
            });
            rows.push(changed.transaction);
        }
        let update = FeedUpdate {
            cursor: changes.next_cursor,
            removed: changes
                .removed
                .into_iter()
                .map(|removed| (removed.provider_account_id, removed.provider_transaction_id))
                .collect(),
            enrichment,
        };
        Ok((by_account, update, errors))
    }

    /// Transactions sync of a change-feed provider: its accounts (so the feed's accounts
    /// exist) and every change since the stored cursor, written with the new cursor.
    async fn sync_feed_transactions(
        &self,
        connection: &ConnectionRecord,
        provider: &Arc<dyn Provider>,
        context: &FetchContext,
    ) -> Result<SyncReport, ConnectionError> {
        let mut tokens = self.usable_tokens(connection, provider).await?;
        let accounts = self
            .fetch_accounts(connection, provider, &mut tokens, context)
            .await?;
        let ids: Vec<String> = accounts
            .items
            .iter()
            .map(|account| account.provider_account_id.clone())
            .collect();
        let (mut by_account, feed, mut errors) = self
            .fetch_feed(connection, provider, &mut tokens, &ids, context)
            .await?;
        errors.extend(accounts.errors);
        let transactions = ids
            .iter()
            .map(|id| (id.clone(), by_account.remove(id).unwrap_or_default()))
            .collect();
        let batch = sync_batch(
            connection.id,
            Synced {
                accounts: accounts.items,
                transactions,
                feed: Some(feed),
                account_limit: Some(self.config.max_accounts_per_user()),
                ..Synced::default()
            },
        );
        let counts = self.write_batch(connection, &batch).await?;
        let report = SyncReport {
            counts: counts.transactions,
            deactivated: 0,
            removed: counts.transactions_removed,
            matched: counts.transactions_matched,
            transfers: counts.transfers,
            errors,
        };
        self.emit_synced(connection, "transactions", &report);
        Ok(report)
    }

    /// Accounts sync: upserts the provider's accounts and records a snapshot of each.
    pub(crate) async fn sync_accounts(
        &self,
        connection: &ConnectionRecord,
        present: Option<PresentUser>,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        let context = FetchContext::new(connection.id, present, force)
            .with_upcoming_transactions(Some(self.transactions_range(None, None)));
        let sync = self.claimed(connection.id, SyncKind::Accounts, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let fetched = self
                .fetch_accounts(connection, &provider, &mut tokens, &context)
                .await?;
            let batch = sync_batch(
                connection.id,
                Synced {
                    accounts: fetched.items,
                    snapshot: Some(SnapshotSource::AccountSync),
                    account_limit: Some(self.config.max_accounts_per_user()),
                    ..Synced::default()
                },
            );
            let counts = self.write_batch(connection, &batch).await?;
            let report = SyncReport {
                counts: counts.accounts,
                deactivated: 0,
                removed: 0,
                matched: 0,
                transfers: 0,
                errors: fetched.errors,
            };
            self.emit_synced(connection, "accounts", &report);
            Ok(report)
        });
        self.budgeted(connection, &provider, &context, sync).await
    }

    /// The range a transactions sync covers: the given dates, defaulting to the configured
    /// window back from `end` (or today). A default start never reaches before
    /// [`dates::EARLIEST_DATE`], however large the window.
    pub(crate) fn transactions_range(
        &self,
        start: Option<NaiveDate>,
        end: Option<NaiveDate>,
    ) -> DateRange {
        let end = end.unwrap_or_else(|| now().date_naive());
        let window = self.config.transactions_sync_window_days();
        let start = start.unwrap_or_else(|| dates::days_before(end, window));
        DateRange { start, end }
    }

    /// The connection's stored accounts (all of them, or the one asked for).
    async fn stored_accounts(
        &self,
        connection: &ConnectionRecord,
        only: Option<Uuid>,
    ) -> Result<Vec<AccountRecord>, ConnectionError> {
        let accounts = self
            .store
            .accounts_for_user(
                connection.user_id,
                &AccountFilter {
                    connection_id: Some(connection.id),
                    active_only: false,
                    account_type: None,
                },
            )
            .await?;
        match only {
            None => Ok(accounts),
            Some(id) => {
                let account = accounts
                    .into_iter()
                    .find(|account| account.id == id)
                    .ok_or(ConnectionError::AccountNotInConnection)?;
                Ok(vec![account])
            }
        }
    }

    /// Transactions sync: upserts each account's transactions in the range. An account the
    /// provider fails for is reported in `errors`; the others are still written.
    pub(crate) async fn sync_transactions(
        &self,
        connection: &ConnectionRecord,
        account_id: Option<Uuid>,
        range: DateRange,
        present: Option<PresentUser>,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        let context = FetchContext::new(connection.id, present, force);
        if provider.change_feed() {
            // A feed covers the whole connection: one account (or a range) cannot be
            // synced alone without losing the others' changes past the cursor.
            if let Some(account_id) = account_id {
                self.stored_accounts(connection, Some(account_id)).await?;
            }
            let sync = self.claimed(
                connection.id,
                SyncKind::Transactions,
                force,
                self.sync_feed_transactions(connection, &provider, &context),
            );
            return self.budgeted(connection, &provider, &context, sync).await;
        }
        let accounts = self.stored_accounts(connection, account_id).await?;
        let sync = self.claimed(connection.id, SyncKind::Transactions, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let mut errors = Vec::new();
            let mut fetched_rows = Vec::new();
            for account in &accounts {
                let fetched = self
                    .fetch_transactions(
                        connection,
                        &provider,
                        &mut tokens,
                        &account.provider_account_id,
                        range,
                        &context,
                    )
                    .await;
                if let Some(transactions) = per_item(fetched, &account.id.to_string(), &mut errors)?
                {
                    fetched_rows.push((account.provider_account_id.clone(), transactions));
                }
            }
            if fetched_rows.is_empty() && !accounts.is_empty() {
                return Err(ConnectionError::Provider(ProviderError::Http(
                    "every account's transactions request failed".to_owned(),
                )));
            }
            let batch = sync_batch(
                connection.id,
                Synced {
                    transactions: fetched_rows,
                    window: Some(range),
                    ..Synced::default()
                },
            );
            let counts = self.write_batch(connection, &batch).await?;
            let report = SyncReport {
                counts: counts.transactions,
                deactivated: 0,
                removed: counts.transactions_removed,
                matched: counts.transactions_matched,
                transfers: counts.transfers,
                errors,
            };
            self.emit_synced(connection, "transactions", &report);
            Ok(report)
        });
        self.budgeted(connection, &provider, &context, sync).await
    }

    /// Holdings sync of one account: upserts its positions, deactivates the ones the provider
    /// no longer lists, and records a snapshot with their market value.
    pub(crate) async fn sync_holdings(
        &self,
        connection: &ConnectionRecord,
        account: &AccountRecord,
        present: Option<PresentUser>,
        force: bool,
    ) -> Result<SyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        let context = FetchContext::new(connection.id, present, force);
        let sync = self.claimed(account.id, SyncKind::Holdings, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let fetched = self
                .fetch_holdings(
                    connection,
                    &provider,
                    &mut tokens,
                    &account.provider_account_id,
                    &context,
                )
                .await?;
            let batch = sync_batch(
                connection.id,
                Synced {
                    holdings: vec![(account.provider_account_id.clone(), fetched.items)],
                    snapshot: Some(SnapshotSource::HoldingsSync),
                    ..Synced::default()
                },
            );
            let counts = self.write_batch(connection, &batch).await?;
            let report = SyncReport {
                counts: counts.holdings,
                deactivated: counts.holdings_deactivated,
                removed: 0,
                matched: 0,
                transfers: 0,
                errors: fetched.errors,
            };
            self.emit_synced(connection, "holdings", &report);
            Ok(report)
        });
        self.budgeted(connection, &provider, &context, sync).await
    }

    /// Whole-connection sync: accounts, then each account's transactions and holdings, all
    /// written in one store transaction with one snapshot per account (`source`).
    pub(crate) async fn sync_connection(
        &self,
        connection: &ConnectionRecord,
        source: SnapshotSource,
        present: Option<PresentUser>,
        force: bool,
    ) -> Result<ConnectionSyncReport, ConnectionError> {
        let provider = self.syncable(connection)?;
        let range = self.transactions_range(None, None);
        let context = FetchContext::new(connection.id, present, force)
            .with_upcoming_transactions(Some(range));
        let sync = self.claimed(connection.id, SyncKind::Connection, force, async {
            let mut tokens = self.usable_tokens(connection, &provider).await?;
            let accounts = self
                .fetch_accounts(connection, &provider, &mut tokens, &context)
                .await?;
            let mut transaction_errors = Vec::new();
            let mut holding_errors = Vec::new();
            let mut fetched_rows = Vec::new();
            let mut fetched_holdings = Vec::new();
            let (mut fed, feed) = if provider.change_feed() {
                let ids: Vec<String> = accounts
                    .items
                    .iter()
                    .map(|account| account.provider_account_id.clone())
                    .collect();
                let (fed, feed, errors) = self
                    .fetch_feed(connection, &provider, &mut tokens, &ids, &context)
                    .await?;
                transaction_errors.extend(errors);
                (Some(fed), Some(feed))
            } else {
                (None, None)
            };
            for account in &accounts.items {
                let id = &account.provider_account_id;
                let transactions = match fed.as_mut() {
                    Some(fed) => Some(fed.remove(id).unwrap_or_default()),
                    None => per_item(
                        self.fetch_transactions(
                            connection,
                            &provider,
                            &mut tokens,
                            id,
                            range,
                            &context,
                        )
                        .await,
                        id,
                        &mut transaction_errors,
                    )?,
                };
                let holdings = per_item(
                    self.fetch_holdings(connection, &provider, &mut tokens, id, &context)
                        .await,
                    id,
                    &mut holding_errors,
                )?;
                if let Some(transactions) = transactions {
                    fetched_rows.push((id.clone(), transactions));
                }
                if let Some(holdings) = holdings {
                    fetched_holdings.push((id.clone(), holdings));
                }
            }
            let batch = sync_batch(
                connection.id,
                Synced {
                    accounts: accounts.items,
                    transactions: fetched_rows,
                    window: Some(range),
                    holdings: fetched_holdings,
                    snapshot: Some(source),
                    feed,
                    account_limit: Some(self.config.max_accounts_per_user()),
                },
            );
            let counts = self.write_batch(connection, &batch).await?;
            let report = ConnectionSyncReport {
                accounts: SyncReport {
                    counts: counts.accounts,
                    deactivated: 0,
                    removed: 0,
                    matched: 0,
                    transfers: 0,
                    errors: accounts.errors,
                },
                transactions: SyncReport {
                    counts: counts.transactions,
                    deactivated: 0,
                    removed: counts.transactions_removed,
                    matched: counts.transactions_matched,
                    transfers: counts.transfers,
                    errors: transaction_errors,
                },
                holdings: SyncReport {
                    counts: counts.holdings,
                    deactivated: counts.holdings_deactivated,
                    removed: 0,
                    matched: 0,
                    transfers: 0,
                    errors: holding_errors,
                },
            };
            self.emit_synced(connection, "accounts", &report.accounts);
            self.emit_synced(connection, "transactions", &report.transactions);
            self.emit_synced(connection, "holdings", &report.holdings);
            Ok(report)
        });
        self.budgeted(connection, &provider, &context, sync).await
    }

    /// Writes a sync batch (with its `sync.completed` event) and publishes the event once
    /// committed.
    async fn write_batch(
        &self,
        connection: &ConnectionRecord,
        batch: &NormalizedBatch,
    ) -> Result<BatchCounts, StoreError> {
        let mut raised = Vec::new();
        let at = now();
        let raise = sync_events(connection.user_id, connection.id, at);
        let counts = self
            .store
            .apply_batch(connection.user_id, batch, at, &raise, &mut raised)
            .await?;
        self.events.committed(&raised);
        Ok(counts)
    }

    fn emit_synced(&self, connection: &ConnectionRecord, kind: &'static str, report: &SyncReport) {
        self.events.emit(&DomainEvent::ConnectionSynced {
            user_id: connection.user_id,
            connection_id: connection.id,
            kind,
            created: report.counts.created,
            updated: report.counts.updated,
            unchanged: report.counts.unchanged,
            deactivated: report.deactivated,
            errors: report.errors.len() as u64,
        });
    }

    /// The background sync: every active connection not synced within `every`.
    pub(crate) async fn sync_due_connections(
        &self,
        every: std::time::Duration,
    ) -> Result<ScheduledSyncs, StoreError> {
        let due = self
            .store
            .connections_due_for_sync(dates::earlier(now(), seconds(every)), 500)
            .await?;
        let mut done = ScheduledSyncs::default();
        for connection in &due {
            match self
                .sync_connection(connection, SnapshotSource::ScheduledSync, None, false)
                .await
            {
                Ok(_) => done.synced += 1,
                Err(ConnectionError::CoolingDown { .. }) => {}
                Err(ConnectionError::BudgetSpent { retry_after_secs }) => {
                    done.skipped += 1;
                    // Debug: a pass may meet the same connection every minute until its budget frees.
                    tracing::debug!(connection_id = %connection.id, provider = %connection.provider_slug, retry_after_secs, "scheduled connection sync skipped: the provider's request budget is spent");
                }
                // The user's account cap refuses this connection only; the pass goes on.
                Err(ConnectionError::Store(error @ StoreError::AccountLimit { .. })) => {
                    done.failed += 1;
                    tracing::warn!(connection_id = %connection.id, error = %error, "scheduled connection sync refused: the user's account limit");
                }
                Err(ConnectionError::Store(error)) => return Err(error),
                Err(error) => {
                    done.failed += 1;
                    tracing::warn!(connection_id = %connection.id, error = %error, "scheduled connection sync failed");
                }
            }
        }
        Ok(done)
    }
}

/// Sorts a fetch for one account: its items (with their item errors added to `errors`), or
/// `None` with the failure added to `errors` when it concerns only that account (the provider
/// failed for it), or the error when it concerns the whole connection.
fn per_item<T>(
    fetched: Result<Fetched<T>, ConnectionError>,
    item: &str,
    errors: &mut Vec<SyncItemError>,
) -> Result<Option<Vec<T>>, ConnectionError> {
    match fetched {
        Ok(fetched) => {
            errors.extend(fetched.errors);
            Ok(Some(fetched.items))
        }
        Err(ConnectionError::Provider(
            error @ (ProviderError::Http(_) | ProviderError::InvalidResponse(_)),
        )) => {
            errors.push(SyncItemError {
                item: item.to_owned(),
                message: error.to_string(),
            });
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// A snapshot carrying the market value of the holdings (and the cash-equivalent part).
fn holdings_snapshot(source: SnapshotSource, holdings: Option<&[NewHolding]>) -> BatchSnapshot {
    let total = |holdings: &[NewHolding], cash_only: bool| {
        holdings
            .iter()
            .filter(|holding| !cash_only || holding.asset_type == AssetType::CashEquivalent)
            .fold(Decimal::ZERO, |sum, holding| {
                sum.saturating_add(holding.market_value)
            })
    };
    BatchSnapshot {
        source,
        stated: None,
        holdings_value: holdings.map(|holdings| total(holdings, false)),
        cash_value: holdings.map(|holdings| total(holdings, true)),
    }
}

/// What one sync fetched from the provider, as [`sync_batch`] maps it into a batch.
#[derive(Debug, Default)]
struct Synced {
    /// The provider's accounts, when they were fetched: upserted, in this order.
    accounts: Vec<NewAccount>,
    /// Transactions by `provider_account_id`, for each account they were fetched for.
    transactions: Vec<(String, Vec<NewTransaction>)>,
    /// The range the transactions were fetched for. The provider's answer is complete for
    /// it, so pending rows dated in it that it lacks go (not with a change feed, whose
    /// answer is only what changed).
    window: Option<DateRange>,
    /// Holdings by `provider_account_id`, for each account they were fetched for: the
    /// provider's complete list, so stored ones it lacks are deactivated.
    holdings: Vec<(String, Vec<NewHolding>)>,
    /// The snapshot every account of the batch gets (with the market value of its holdings
    /// when they were fetched), if any.
    snapshot: Option<SnapshotSource>,
    /// A change feed's cursor, removals and enrichment.
    feed: Option<FeedUpdate>,
    /// The most accounts the user may hold afterwards, when the sync may create accounts.
    account_limit: Option<u64>,
}

/// The first entry of `list` keyed `key`, taken out.
fn take_keyed<T>(list: &mut Vec<(String, T)>, key: &str) -> Option<T> {
    let at = list.iter().position(|(id, _)| id == key)?;
    Some(list.remove(at).1)
}

/// The one mapping of a provider's fetched items into the normalized batch the writer
/// applies to the connection: the fetched accounts first (each with its rows), then the
/// stored accounts rows were fetched for; every account's holdings list complete, its
/// transactions complete for the window, its snapshot taken from the account as written.
fn sync_batch(connection_id: Uuid, synced: Synced) -> NormalizedBatch {
    let Synced {
        accounts,
        mut transactions,
        window,
        mut holdings,
        snapshot,
        feed,
        account_limit,
    } = synced;
    let mut items: Vec<BatchAccount> = accounts
        .into_iter()
        .map(|account| BatchAccount {
            provider_account_id: account.provider_account_id.clone(),
            account: Some(account),
            balance_reported: true,
            ..BatchAccount::new(String::new())
        })
        .collect();
    let stored: Vec<String> = transactions
        .iter()
        .map(|(id, _)| id)
        .chain(holdings.iter().map(|(id, _)| id))
        .cloned()
        .collect();
    for id in stored {
        if !items.iter().any(|item| item.provider_account_id == id) {
            items.push(BatchAccount::new(id));
        }
    }
    for item in &mut items {
        item.transactions = take_keyed(&mut transactions, &item.provider_account_id);
        item.pending_window = window
            .filter(|_| item.transactions.is_some() && feed.is_none())
            .map(|range| (range.start, range.end));
        item.holdings = take_keyed(&mut holdings, &item.provider_account_id);
        item.absent_holdings = AbsentHoldings::Deactivated;
        if let Some(source) = snapshot {
            item.snapshots
                .push(holdings_snapshot(source, item.holdings.as_deref()));
        }
    }
    NormalizedBatch {
        source: TransactionSource::Sync,
        origin: None,
        account_limit,
        connections: vec![BatchConnection {
            target: BatchTarget::Connection(connection_id),
            accounts: items,
            feed,
            mark_synced: true,
        }],
    }
}

#[cfg(all(test, any(feature = "sqlite", feature = "postgres")))]
mod tests {
    use super::*;
    use crate::store::provider_tests::{account, holding, transaction};

    fn day(text: &str) -> NaiveDate {
        text.parse().expect("date")
    }

    fn keys(batch: &NormalizedBatch) -> Vec<&str> {
        batch.connections[0]
            .accounts
            .iter()
            .map(|item| item.provider_account_id.as_str())
            .collect()
    }

    #[test]
    fn fetched_accounts_come_first_then_the_stored_ones_rows_were_fetched_for() {
        let connection_id = Uuid::now_v7();
        let mut cash = holding("cash", "5.00");
        cash.asset_type = AssetType::CashEquivalent;
        let batch = sync_batch(
            connection_id,
            Synced {
                accounts: vec![account("b", "1.00"), account("a", "2.00")],
                transactions: vec![
                    ("a".to_owned(), vec![transaction("t1", "-3.00")]),
                    ("stored".to_owned(), vec![transaction("t2", "4.00")]),
                ],
                window: Some(DateRange {
                    start: day("2024-01-01"),
                    end: day("2024-01-31"),
                }),
                holdings: vec![
                    ("stored".to_owned(), vec![holding("h1", "10.00"), cash]),
                    ("held-only".to_owned(), Vec::new()),
                ],
                snapshot: Some(SnapshotSource::ManualSync),
                feed: None,
                account_limit: Some(7),
            },
        );
        assert_eq!(batch.source, TransactionSource::Sync);
        assert_eq!(batch.account_limit, Some(7));
        assert_eq!(batch.connections.len(), 1);
        let part = &batch.connections[0];
        assert_eq!(part.target, BatchTarget::Connection(connection_id));
        assert!(part.mark_synced);
        // Fetched accounts in the provider's order; a stored account named by both rows and
        // holdings appears once.
        assert_eq!(keys(&batch), ["b", "a", "stored", "held-only"]);
        let [b, a, stored, held_only] = &part.accounts[..] else {
            panic!("four accounts");
        };
        assert!(b.account.is_some() && b.balance_reported);
        assert!(stored.account.is_none() && !stored.balance_reported);
        // Rows go to their account; only an account with rows gets the complete window.
        assert_eq!(b.transactions, None);
        assert_eq!(b.pending_window, None);
        assert_eq!(a.transactions.as_ref().map(Vec::len), Some(1));
        assert_eq!(
            a.pending_window,
            Some((day("2024-01-01"), day("2024-01-31")))
        );
        assert_eq!(stored.transactions.as_ref().map(Vec::len), Some(1));
        // Holdings lists are complete: absent ones are deactivated, an empty list included.
        assert_eq!(stored.holdings.as_ref().map(Vec::len), Some(2));
        assert_eq!(held_only.holdings.as_ref().map(Vec::len), Some(0));
        assert!(
            part.accounts
                .iter()
                .all(|item| item.absent_holdings == AbsentHoldings::Deactivated)
        );
        // Every account gets the snapshot; its values are those of the holdings fetched.
        let snapshot = &stored.snapshots[0];
        assert_eq!(snapshot.source, SnapshotSource::ManualSync);
        assert_eq!(snapshot.stated, None);
        assert_eq!(snapshot.holdings_value, Some(Decimal::new(1500, 2)));
        assert_eq!(snapshot.cash_value, Some(Decimal::new(500, 2)));
        assert_eq!(b.snapshots.len(), 1);
        assert_eq!(b.snapshots[0].holdings_value, None);
    }

    #[test]
    fn a_change_feed_carries_no_pending_window_and_no_snapshot_without_a_source() {
        let feed = FeedUpdate {
            cursor: "c1".to_owned(),
            ..FeedUpdate::default()
        };
        let batch = sync_batch(
            Uuid::now_v7(),
            Synced {
                transactions: vec![("a".to_owned(), vec![transaction("t1", "-3.00")])],
                window: Some(DateRange {
                    start: day("2024-01-01"),
                    end: day("2024-01-31"),
                }),
                feed: Some(feed.clone()),
                ..Synced::default()
            },
        );
        let part = &batch.connections[0];
        assert_eq!(part.feed, Some(feed));
        assert_eq!(keys(&batch), ["a"]);
        assert_eq!(part.accounts[0].pending_window, None);
        assert!(part.accounts[0].snapshots.is_empty());
        assert_eq!(batch.account_limit, None);
    }
}
