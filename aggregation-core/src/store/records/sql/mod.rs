//! The financial records: connections, accounts, transactions, holdings and balance snapshots.
//!
//! Decimals are stored as text (their `Decimal` string, never a float) in both databases and
//! compared by value in Rust; every read joins `accounts → connections` to scope rows to the
//! caller. The upserts live in `sql_upserts.rs`, connections in `sql_connections.rs`.

pub(in crate::store) mod connections;
pub(in crate::store) mod enrich;
pub(in crate::store) mod matches;
pub(in crate::store) mod reconcile;
pub(in crate::store) mod rules;
pub(in crate::store) mod upserts;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, Executor, QueryBuilder, SqlStore, Tx, query_as};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::matches::{MatchRow, decide_in, list_query};
use crate::store::records::sql::upserts::{upsert_in, upsert_transactions_in};
use crate::store::sql::{count, counted, currency, currency as currency_code, optional_text, text};
use crate::store::{
    AccountFilter, AccountRecord, AccountStore, CustomCategoryRecord, HoldingFilter, HoldingPage,
    HoldingStore, MatchDecision, MatchFilter, MatchRecord, NewAccount, NewHolding, NewSnapshot,
    NewTransaction, Page, PageAfter, PointBalance, RuleRecord, SnapshotRecord, SnapshotSource,
    SnapshotStore, StoreError, TransactionEdit, TransactionEdited, TransactionPosition,
    TransactionQuery, TransactionRecord, TransactionStore, TransactionType, UpsertCounts,
};

pub(in crate::store) const SELECT_ACCOUNT: &str = "SELECT a.id, a.connection_id, a.provider_account_id, \
     a.account_number_masked, a.name, a.account_type, a.currency, a.balance_amount, \
     a.available_balance_amount, a.is_active, a.last_synced_at, a.created_at, a.updated_at";
pub(in crate::store) const SELECT_TRANSACTION: &str = "SELECT t.id, t.account_id, \
     t.provider_transaction_id, t.transaction_type, t.subtype, t.status, t.amount, t.currency, \
     t.description, t.symbol, t.security_name, t.quantity, t.unit_price, t.commission, \
     t.transaction_date, t.settlement_date, t.source, t.pending_transaction_id, \
     t.transfer_transaction_id, t.category, t.category_source, t.merchant_name, t.notes, \
     t.created_at, t.updated_at";
pub(in crate::store) const SELECT_HOLDING: &str = "SELECT h.id, h.account_id, h.provider_holding_id, \
     h.symbol, h.security_name, h.asset_type, h.quantity, h.cost_basis, h.market_value, \
     h.currency, h.average_price, h.current_price, h.unrealized_gain_loss, h.is_active, \
     h.last_synced_at, h.created_at, h.updated_at";
pub(in crate::store) const SELECT_SNAPSHOT: &str = "SELECT s.id, s.account_id, s.balance, s.available_balance, \
     s.holdings_value, s.cash_value, s.currency, s.source, s.captured_at";

/// Starts a query over the accounts of `user_id`, joined as `a` (and its connection as `c`).
fn user_accounts<B: Backend>(select: &str, user_id: Uuid) -> QueryBuilder<B> {
    let mut query = QueryBuilder::new(select);
    query
        .push(" FROM accounts a JOIN connections c ON c.id = a.connection_id AND c.user_id = ")
        .push_bind(user_id);
    query
}

#[async_trait]
impl<B: Backend> AccountStore for SqlStore<B> {
    async fn upsert_accounts(
        &self,
        connection_id: Uuid,
        accounts: &[NewAccount],
        now: DateTime<Utc>,
    ) -> Result<UpsertCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let done = upsert_in(&mut tx, connection_id, accounts, now).await?;
        tx.commit().await?;
        Ok(counted(done))
    }

    async fn account_for_user(
        &self,
        user_id: Uuid,
        account_id: Uuid,
    ) -> Result<Option<AccountRecord>, StoreError> {
        let mut query = user_accounts(SELECT_ACCOUNT, user_id);
        query.push(" WHERE a.id = ").push_bind(account_id);
        Ok(query.build_query_as().fetch_optional(&self.pool).await?)
    }

    async fn accounts_for_user(
        &self,
        user_id: Uuid,
        filter: &AccountFilter,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        let mut query = user_accounts(SELECT_ACCOUNT, user_id);
        query.push(" WHERE 1 = 1");
        if let Some(connection_id) = filter.connection_id {
            query
                .push(" AND a.connection_id = ")
                .push_bind(connection_id);
        }
        if filter.active_only {
            query.push(" AND a.is_active = ").push_bind(true);
        }
        if let Some(account_type) = filter.account_type {
            query
                .push(" AND a.account_type = ")
                .push_bind(account_type.as_str());
        }
        query.push(" ORDER BY a.name, a.id");
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }
}

impl<B: Backend> SqlStore<B> {
    /// The newest-first page of one of the user's accounts: `limit` rows after `offset` rows,
    /// or after the position `after`, with the count of every matching row.
    async fn recent_page(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        transaction_type: Option<TransactionType>,
        limit: i64,
        offset: u64,
        after: Option<TransactionPosition>,
    ) -> Result<Page<TransactionRecord>, StoreError> {
        let scoped = |select: &str| {
            let mut scoped = user_accounts(select, user_id);
            scoped
                .push(" JOIN transactions t ON t.account_id = a.id WHERE a.id = ")
                .push_bind(account_id);
            scoped
        };
        let mut lister = scoped(SELECT_TRANSACTION);
        // Without a filter the count is the one kept on the account.
        let mut counter = match transaction_type {
            Some(transaction_type) => {
                let mut counter = scoped("SELECT COUNT(*)");
                for query in [&mut counter, &mut lister] {
                    query
                        .push(" AND t.transaction_type = ")
                        .push_bind(transaction_type.as_str());
                }
                counter
            }
            None => {
                let mut counter = user_accounts("SELECT a.transaction_count", user_id);
                counter.push(" WHERE a.id = ").push_bind(account_id);
                counter
            }
        };
        if let Some(after) = after {
            // As the date-range listing does, the other way round.
            lister.push_after_position(after, None, true);
        }
        lister
            .push(" ORDER BY t.transaction_date DESC, t.id DESC LIMIT ")
            .push_bind(limit)
            .push(" OFFSET ")
            .push_bind(i64::try_from(offset).unwrap_or(i64::MAX));
        // No row: not the user's account, so nothing to count.
        let total: Option<i64> = counter
            .build_query_scalar()
            .fetch_optional(&self.pool)
            .await?;
        Ok(Page {
            items: lister.build_query_as().fetch_all(&self.pool).await?,
            total_count: count(total.unwrap_or(0)),
        })
    }
}

#[async_trait]
impl<B: Backend> TransactionStore for SqlStore<B> {
    async fn upsert_transactions(
        &self,
        account_id: Uuid,
        transactions: &[NewTransaction],
        now: DateTime<Utc>,
    ) -> Result<UpsertCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let done = upsert_transactions_in(&mut tx, account_id, transactions, now).await?;
        tx.commit().await?;
        Ok(counted(done))
    }

    async fn transaction_for_user(
        &self,
        user_id: Uuid,
        transaction_id: Uuid,
    ) -> Result<Option<TransactionRecord>, StoreError> {
        let mut query = user_accounts(SELECT_TRANSACTION, user_id);
        query
            .push(" JOIN transactions t ON t.account_id = a.id WHERE t.id = ")
            .push_bind(transaction_id);
        Ok(query.build_query_as().fetch_optional(&self.pool).await?)
    }

    async fn transactions_for_account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        query: &TransactionQuery,
    ) -> Result<Page<TransactionRecord>, StoreError> {
        let scoped = |select: &str| {
            let mut scoped = user_accounts(select, user_id);
            scoped
                .push(" JOIN transactions t ON t.account_id = a.id WHERE a.id = ")
                .push_bind(account_id);
            scoped
        };
        match *query {
            TransactionQuery::Recent {
                transaction_type,
                limit,
                offset,
            } => {
                self.recent_page(
                    user_id,
                    account_id,
                    transaction_type,
                    i64::from(limit),
                    offset,
                    None,
                )
                .await
            }
            // One row more: whether more follow.
            TransactionQuery::RecentAfter {
                transaction_type,
                limit,
                after,
            } => {
                self.recent_page(
                    user_id,
                    account_id,
                    transaction_type,
                    i64::from(limit) + 1,
                    0,
                    Some(after),
                )
                .await
            }
            TransactionQuery::DateRange {
                start,
                end,
                limit,
                after,
            } => {
                let mut lister = scoped(SELECT_TRANSACTION);
                let mut counter = scoped("SELECT COUNT(*)");
                for query in [&mut lister, &mut counter] {
                    query.push(" AND t.transaction_date <= ").push_bind(end);
                }
                counter.push(" AND t.transaction_date >= ").push_bind(start);
                match after {
                    Some(after) => lister.push_after_position(after, Some(start), false),
                    None => lister.push(" AND t.transaction_date >= ").push_bind(start),
                };
                lister
                    .push(" ORDER BY t.transaction_date, t.id LIMIT ")
                    .push_bind(i64::from(limit) + 1);
                let total: i64 = counter.build_query_scalar().fetch_one(&self.pool).await?;
                let items: Vec<TransactionRecord> =
                    lister.build_query_as().fetch_all(&self.pool).await?;
                Ok(Page {
                    items,
                    total_count: count(total),
                })
            }
        }
    }

    async fn transaction_matches(
        &self,
        user_id: Uuid,
        filter: &MatchFilter,
    ) -> Result<Vec<MatchRecord>, StoreError> {
        self.matches_of(user_id, filter).await
    }

    async fn decide_match(
        &self,
        user_id: Uuid,
        match_id: Uuid,
        decision: MatchDecision,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, MatchRecord>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<MatchRecord>, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let Some((record, changed)) = decide_in(&mut tx, user_id, match_id, decision, now).await?
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        let events = if changed { raise(&record) } else { Vec::new() };
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(Some(record))
    }

    async fn custom_categories(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<CustomCategoryRecord>, StoreError> {
        self.custom_categories_of(user_id).await
    }

    async fn create_custom_category(
        &self,
        category: &CustomCategoryRecord,
        limit: u64,
    ) -> Result<bool, StoreError> {
        self.create_category(category, limit).await
    }

    async fn delete_custom_category(
        &self,
        user_id: Uuid,
        category_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<u64>, StoreError> {
        self.delete_category(user_id, category_id, now).await
    }

    async fn edit_transaction(
        &self,
        user_id: Uuid,
        transaction_id: Uuid,
        edit: &TransactionEdit,
        now: DateTime<Utc>,
    ) -> Result<TransactionEdited, StoreError> {
        self.edit(user_id, transaction_id, edit, now).await
    }

    async fn rules(&self, user_id: Uuid) -> Result<Vec<RuleRecord>, StoreError> {
        self.rules_of(user_id).await
    }

    async fn create_rule(&self, rule: &RuleRecord, limit: u64) -> Result<bool, StoreError> {
        self.insert_rule(rule, limit).await
    }

    async fn update_rule(&self, rule: &RuleRecord) -> Result<bool, StoreError> {
        self.rewrite_rule(rule).await
    }

    async fn delete_rule(&self, user_id: Uuid, rule_id: Uuid) -> Result<bool, StoreError> {
        self.remove_rule(user_id, rule_id).await
    }

    async fn preview_rule(
        &self,
        user_id: Uuid,
        rule: &crate::enrich::rules::Rule,
        sample: usize,
    ) -> Result<crate::enrich::rules::RulePreview, StoreError> {
        self.preview(user_id, rule, sample).await
    }

    async fn apply_rule(
        &self,
        user_id: Uuid,
        rule: &crate::enrich::rules::Rule,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.apply(user_id, rule, now).await
    }
}

impl<B: Backend> SqlStore<B> {
    /// The user's matches in the filter (see [`TransactionStore::transaction_matches`]).
    async fn matches_of(
        &self,
        user_id: Uuid,
        filter: &MatchFilter,
    ) -> Result<Vec<MatchRecord>, StoreError> {
        let rows: Vec<MatchRow> = list_query::<B>(user_id, filter)
            .build_query_as()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(MatchRow::record).collect()
    }
}

#[async_trait]
impl<B: Backend> HoldingStore for SqlStore<B> {
    async fn upsert_holdings(
        &self,
        account_id: Uuid,
        holdings: &[NewHolding],
        now: DateTime<Utc>,
    ) -> Result<UpsertCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let done = upsert_in(&mut tx, account_id, holdings, now).await?;
        tx.commit().await?;
        Ok(counted(done))
    }

    async fn deactivate_missing_holdings(
        &self,
        account_id: Uuid,
        keep_provider_ids: &[String],
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        deactivate_missing_holdings_in(&self.pool, account_id, keep_provider_ids, now).await
    }

    async fn holdings_for_user(
        &self,
        user_id: Uuid,
        filter: &HoldingFilter,
        page: PageAfter,
    ) -> Result<HoldingPage, StoreError> {
        let scoped = |select: &str| {
            let mut query = user_accounts(select, user_id);
            query.push(" JOIN holdings h ON h.account_id = a.id WHERE 1 = 1");
            if let Some(account_id) = filter.account_id {
                query.push(" AND a.id = ").push_bind(account_id);
            }
            if filter.active_only {
                query.push(" AND h.is_active = ").push_bind(true);
            }
            if let Some(asset_type) = filter.asset_type {
                query
                    .push(" AND h.asset_type = ")
                    .push_bind(asset_type.as_str());
            }
            if let Some(symbol) = &filter.symbol {
                query
                    .push(" AND UPPER(h.symbol) = ")
                    .push_bind(symbol.trim().to_uppercase());
            }
            query
        };
        let (total, active): (i64, i64) =
            scoped("SELECT COUNT(*), COALESCE(SUM(CASE WHEN h.is_active THEN 1 ELSE 0 END), 0)")
                .build_query_as()
                .fetch_one(&self.pool)
                .await?;
        let counted_page = |items| HoldingPage {
            items,
            total_count: count(total),
            active_count: count(active),
        };
        let mut lister = scoped(SELECT_HOLDING);
        if let Some(after) = page.after {
            // The position is the holding's symbol as stored now, found among the user's own
            // (in the filter's account, when it names one).
            let mut position = user_accounts("SELECT h.symbol", user_id);
            position
                .push(" JOIN holdings h ON h.account_id = a.id WHERE h.id = ")
                .push_bind(after);
            if let Some(account_id) = filter.account_id {
                position.push(" AND a.id = ").push_bind(account_id);
            }
            let symbol: Option<String> = position
                .build_query_scalar()
                .fetch_optional(&self.pool)
                .await?;
            let Some(symbol) = symbol else {
                return Ok(counted_page(Vec::new()));
            };
            lister
                .push(" AND (h.symbol > ")
                .push_bind(symbol.clone())
                .push(" OR (h.symbol = ")
                .push_bind(symbol)
                .push(" AND h.id > ")
                .push_bind(after)
                .push("))");
        }
        lister
            .push(" ORDER BY h.symbol, h.id LIMIT ")
            .push_bind(i64::from(page.limit) + 1);
        Ok(counted_page(
            lister.build_query_as().fetch_all(&self.pool).await?,
        ))
    }
}

#[async_trait]
impl<B: Backend> SnapshotStore for SqlStore<B> {
    async fn insert_snapshot(&self, snapshot: &NewSnapshot) -> Result<SnapshotRecord, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let record = insert_snapshot_in(&mut tx, snapshot).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn latest_snapshots_for_user(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<SnapshotRecord>, StoreError> {
        let mut query = user_accounts(SELECT_SNAPSHOT, user_id);
        query.push(
            " JOIN balance_snapshots s ON s.id = ( \
                 SELECT l.id FROM balance_snapshots l WHERE l.account_id = a.id \
                 ORDER BY l.captured_at DESC, l.id DESC LIMIT 1) \
             ORDER BY a.name, a.id",
        );
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn balance_history(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        source: Option<SnapshotSource>,
        page: PageAfter,
    ) -> Result<Page<SnapshotRecord>, StoreError> {
        let scoped = |select: &str| {
            let mut query = user_accounts(select, user_id);
            query
                .push(" JOIN balance_snapshots s ON s.account_id = a.id WHERE a.id = ")
                .push_bind(account_id)
                .push(" AND s.captured_at >= ")
                .push_bind(start)
                .push(" AND s.captured_at <= ")
                .push_bind(end);
            if let Some(source) = source {
                query.push(" AND s.source = ").push_bind(source.as_str());
            }
            query
        };
        let total: i64 = scoped("SELECT COUNT(*)")
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await?;
        let mut lister = scoped(SELECT_SNAPSHOT);
        if let Some(after) = page.after {
            let mut position = user_accounts("SELECT s.captured_at", user_id);
            position
                .push(" JOIN balance_snapshots s ON s.account_id = a.id WHERE a.id = ")
                .push_bind(account_id)
                .push(" AND s.id = ")
                .push_bind(after);
            let captured_at: Option<DateTime<Utc>> = position
                .build_query_scalar()
                .fetch_optional(&self.pool)
                .await?;
            let Some(captured_at) = captured_at else {
                return Ok(Page {
                    items: Vec::new(),
                    total_count: count(total),
                });
            };
            // Spelled out rather than as a row comparison, like the transactions' pages.
            lister
                .push(" AND (s.captured_at > ")
                .push_bind(captured_at)
                .push(" OR (s.captured_at = ")
                .push_bind(captured_at)
                .push(" AND s.id > ")
                .push_bind(after)
                .push("))");
        }
        lister
            .push(" ORDER BY s.captured_at, s.id LIMIT ")
            .push_bind(i64::from(page.limit) + 1);
        Ok(Page {
            items: lister.build_query_as().fetch_all(&self.pool).await?,
            total_count: count(total),
        })
    }

    async fn snapshots_for_account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        limit: u32,
        source: Option<SnapshotSource>,
    ) -> Result<Page<SnapshotRecord>, StoreError> {
        let scoped = |select: &str| {
            let mut query = user_accounts(select, user_id);
            query
                .push(" JOIN balance_snapshots s ON s.account_id = a.id WHERE a.id = ")
                .push_bind(account_id);
            if let Some(source) = source {
                query.push(" AND s.source = ").push_bind(source.as_str());
            }
            query
        };
        let total: i64 = scoped("SELECT COUNT(*)")
            .build_query_scalar()
            .fetch_one(&self.pool)
            .await?;
        let mut lister = scoped(SELECT_SNAPSHOT);
        lister
            .push(" ORDER BY s.captured_at DESC, s.id DESC LIMIT ")
            .push_bind(i64::from(limit));
        Ok(Page {
            items: lister.build_query_as().fetch_all(&self.pool).await?,
            total_count: count(total),
        })
    }

    async fn balances_at(
        &self,
        user_id: Uuid,
        currency: &str,
        points: &[DateTime<Utc>],
    ) -> Result<Vec<PointBalance>, StoreError> {
        if points.is_empty() {
            return Ok(Vec::new());
        }
        // The points as a table of (index, instant), crossed with the accounts; each pair
        // finds its snapshot through the (account_id, captured_at, id) index, newest first.
        let mut query = QueryBuilder::<B>::new("WITH points (point, upto) AS (");
        query.push_values(points.iter().enumerate(), |mut row, (index, upto)| {
            row.push_bind(i64::try_from(index).unwrap_or(i64::MAX))
                .push_bind(*upto);
        });
        query
            .push(
                ") SELECT p.point, a.id AS account_id, a.account_type, s.balance \
                 FROM accounts a JOIN connections c ON c.id = a.connection_id AND c.user_id = ",
            )
            .push_bind(user_id)
            .push(
                " CROSS JOIN points p JOIN balance_snapshots s ON s.id = ( \
                     SELECT l.id FROM balance_snapshots l \
                     WHERE l.account_id = a.id AND l.captured_at < p.upto \
                     ORDER BY l.captured_at DESC, l.id DESC LIMIT 1) \
                 WHERE a.is_active = ",
            )
            .push_bind(true)
            .push(" AND a.currency = ")
            .push_bind(currency_code(currency))
            .push(" ORDER BY p.point, a.id");
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }
}

/// Marks inactive every active holding of the account whose provider id is not in
/// `keep_provider_ids` (all of them when it is empty), in one statement; the number
/// deactivated.
pub(in crate::store) async fn deactivate_missing_holdings_in<'c, B: Backend, E>(
    executor: E,
    account_id: Uuid,
    keep_provider_ids: &[String],
    now: DateTime<Utc>,
) -> Result<u64, StoreError>
where
    E: Executor<'c, B>,
{
    let mut query = QueryBuilder::<B>::new("UPDATE holdings SET is_active = ");
    query
        .push_bind(false)
        .push(", updated_at = ")
        .push_bind(now)
        .push(" WHERE account_id = ")
        .push_bind(account_id)
        .push(" AND is_active = ")
        .push_bind(true);
    if !keep_provider_ids.is_empty() {
        query.push(" AND provider_holding_id NOT IN (");
        let mut kept = query.separated(", ");
        for keep in keep_provider_ids {
            kept.push_bind(keep.as_str());
        }
        query.push(")");
    }
    Ok(query.build().execute(executor).await?.rows_affected())
}

pub(in crate::store) async fn insert_snapshot_in<B: Backend>(
    tx: &mut Tx<B>,
    snapshot: &NewSnapshot,
) -> Result<SnapshotRecord, StoreError> {
    Ok(query_as::<B, _>(
        "INSERT INTO balance_snapshots (id, account_id, balance, available_balance, \
         holdings_value, cash_value, currency, source, captured_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id, account_id, balance, \
         available_balance, holdings_value, cash_value, currency, source, captured_at",
    )
    .bind(Uuid::now_v7())
    .bind(snapshot.account_id)
    .bind(text(snapshot.balance))
    .bind(optional_text(snapshot.available_balance))
    .bind(optional_text(snapshot.holdings_value))
    .bind(optional_text(snapshot.cash_value))
    .bind(currency(&snapshot.currency))
    .bind(snapshot.source.as_str())
    .bind(snapshot.captured_at)
    .fetch_one(&mut **tx)
    .await?)
}
