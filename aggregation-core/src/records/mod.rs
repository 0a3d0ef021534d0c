//! Reading the records: accounts, transactions, holdings and balance snapshots, always scoped
//! to their owner. An unknown id and another user's id read alike, as not found.

pub(crate) mod categories;
pub(crate) mod matches;
pub(crate) mod rules;
pub(crate) mod search;
pub(crate) mod worth;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::{
    AccountFilter, AccountRecord, HoldingFilter, HoldingPage, Page, PageAfter, SnapshotRecord,
    SnapshotSource, Store, StoreError, TransactionQuery, TransactionRecord,
};

/// Why a record read failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// No account of the user has this id.
    #[error("Account not found.")]
    AccountNotFound,
    /// No transaction of the user has this id.
    #[error("Transaction not found.")]
    TransactionNotFound,
    /// No connection of the user has this id.
    #[error("Connection not found.")]
    ConnectionNotFound,
    /// A net worth history over this many accounts and points would cost more than
    /// [`MAX_ACCOUNT_POINTS`](worth::MAX_ACCOUNT_POINTS) balance look-ups.
    #[error(
        "The history over {accounts} accounts at {points} points is more than {} account \
         points; move from closer to to, or choose a longer interval.",
        worth::MAX_ACCOUNT_POINTS
    )]
    HistoryTooCostly {
        /// The active accounts.
        accounts: usize,
        /// The points asked for.
        points: usize,
    },
    /// The portfolio would add up more than
    /// [`MAX_PORTFOLIO_HOLDINGS`](worth::MAX_PORTFOLIO_HOLDINGS) active holdings.
    #[error(
        "The portfolio would add up {holdings} active holdings, more than {}; list them with \
         GET /api/v1/holdings, page by page.",
        worth::MAX_PORTFOLIO_HOLDINGS
    )]
    PortfolioTooCostly {
        /// The user's active holdings.
        holdings: u64,
    },
    /// A spending sum would pass the largest decimal.
    #[error("The amounts in this range add up past the largest decimal; choose a shorter range.")]
    SumTooLarge,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The record reads over a store.
#[derive(Clone)]
pub(crate) struct Records {
    store: Arc<dyn Store>,
}

impl Records {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// One of the user's accounts.
    pub(crate) async fn account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
    ) -> Result<AccountRecord, RecordError> {
        self.store
            .account_for_user(user_id, account_id)
            .await?
            .ok_or(RecordError::AccountNotFound)
    }

    /// The user's accounts matching the filter.
    pub(crate) async fn accounts(
        &self,
        user_id: Uuid,
        filter: &AccountFilter,
    ) -> Result<Vec<AccountRecord>, RecordError> {
        Ok(self.store.accounts_for_user(user_id, filter).await?)
    }

    /// The accounts of one of the user's connections matching the filter (whose own
    /// `connection_id` is replaced).
    pub(crate) async fn accounts_of_connection(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        filter: AccountFilter,
    ) -> Result<Vec<AccountRecord>, RecordError> {
        self.store
            .connection_for_user(user_id, connection_id)
            .await?
            .ok_or(RecordError::ConnectionNotFound)?;
        let filter = AccountFilter {
            connection_id: Some(connection_id),
            ..filter
        };
        self.accounts(user_id, &filter).await
    }

    /// One of the user's transactions.
    pub(crate) async fn transaction(
        &self,
        user_id: Uuid,
        transaction_id: Uuid,
    ) -> Result<TransactionRecord, RecordError> {
        self.store
            .transaction_for_user(user_id, transaction_id)
            .await?
            .ok_or(RecordError::TransactionNotFound)
    }

    /// The transactions of one of the user's accounts, as the query asks.
    pub(crate) async fn transactions_of_account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        query: &TransactionQuery,
    ) -> Result<Page<TransactionRecord>, RecordError> {
        let account = self.account(user_id, account_id).await?;
        Ok(self
            .store
            .transactions_for_account(user_id, account.id, query)
            .await?)
    }

    /// A page of the user's holdings matching the filter.
    pub(crate) async fn holdings(
        &self,
        user_id: Uuid,
        filter: &HoldingFilter,
        page: PageAfter,
    ) -> Result<HoldingPage, RecordError> {
        Ok(self.store.holdings_for_user(user_id, filter, page).await?)
    }

    /// The holdings of one of the user's accounts matching the filter (whose own `account_id`
    /// is replaced).
    pub(crate) async fn holdings_of_account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        filter: HoldingFilter,
        page: PageAfter,
    ) -> Result<HoldingPage, RecordError> {
        self.account(user_id, account_id).await?;
        let filter = HoldingFilter {
            account_id: Some(account_id),
            ..filter
        };
        self.holdings(user_id, &filter, page).await
    }

    /// The latest snapshot of each of the user's accounts.
    pub(crate) async fn latest_snapshots(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<SnapshotRecord>, RecordError> {
        Ok(self.store.latest_snapshots_for_user(user_id).await?)
    }

    /// A page of the snapshots of one of the user's accounts captured from `start` to `end`.
    pub(crate) async fn balance_history(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        (start, end): (DateTime<Utc>, DateTime<Utc>),
        source: Option<SnapshotSource>,
        page: PageAfter,
    ) -> Result<Page<SnapshotRecord>, RecordError> {
        self.account(user_id, account_id).await?;
        Ok(self
            .store
            .balance_history(user_id, account_id, start, end, source, page)
            .await?)
    }

    /// The `limit` newest snapshots of one of the user's accounts.
    pub(crate) async fn snapshots_of_account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        limit: u32,
        source: Option<SnapshotSource>,
    ) -> Result<Page<SnapshotRecord>, RecordError> {
        self.account(user_id, account_id).await?;
        Ok(self
            .store
            .snapshots_for_account(user_id, account_id, limit, source)
            .await?)
    }
}
