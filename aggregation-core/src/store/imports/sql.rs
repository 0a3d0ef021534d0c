//! File imports on SQL: many records written as one transaction.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, SqlStore, Tx, query, query_as};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::connections::{find_or_create_connection_in, mark_synced};
use crate::store::records::sql::insert_snapshot_in;
use crate::store::records::sql::reconcile::{Origin, write_transactions_in};
use crate::store::records::sql::upserts::{account_in, check_account_limit, upsert_in, upsert_one};
use crate::store::sql::{OptionalDec, Upserted};
use crate::store::{
    FILE_IMPORT_PROVIDER, ImportAccount, ImportBatch, ImportCounts, ImportOutcome, ImportSnapshot,
    ImportStore, ImportedAccount, NewSnapshot, NewTransaction, SnapshotSource, StoreError,
    TransactionSource,
};

/// Whether the account has a `file_import` snapshot captured at the same instant with the same
/// figures.
async fn has_import_snapshot<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    snapshot: &ImportSnapshot,
) -> Result<bool, StoreError> {
    let stored: Vec<(
        crate::store::sql::Dec,
        OptionalDec,
        OptionalDec,
        OptionalDec,
    )> = query_as::<B, _>(
        "SELECT balance, available_balance, holdings_value, cash_value \
             FROM balance_snapshots WHERE account_id = $1 AND source = $2 AND captured_at = $3",
    )
    .bind(account_id)
    .bind(SnapshotSource::FileImport.as_str())
    .bind(snapshot.captured_at)
    .fetch_all(&mut **tx)
    .await?;
    Ok(stored
        .into_iter()
        .any(|(balance, available, holdings, cash)| {
            Decimal::from(balance) == snapshot.balance
                && Option::<Decimal>::from(available) == snapshot.available_balance
                && Option::<Decimal>::from(holdings) == snapshot.holdings_value
                && Option::<Decimal>::from(cash) == snapshot.cash_value
        }))
}

fn outcome(upserted: &Upserted) -> ImportOutcome {
    match upserted {
        Upserted::Created => ImportOutcome::Created,
        Upserted::Updated => ImportOutcome::Updated,
        Upserted::Unchanged => ImportOutcome::Unchanged,
    }
}

/// Upserts one account of an import.
async fn upsert_import_account<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    item: &ImportAccount,
    now: DateTime<Utc>,
) -> Result<(ImportedAccount, Upserted), StoreError> {
    let mut account = Cow::Borrowed(&item.account);
    if !item.balance_reported {
        // A file without a balance keeps the stored one.
        if let Some(stored) = account_in(tx, connection_id, &account.provider_account_id).await? {
            let account = account.to_mut();
            account.balance_amount = stored.balance_amount;
            account.available_balance_amount = stored.available_balance_amount;
        }
    }
    let (account_id, upserted) = upsert_one(tx, connection_id, &*account, now).await?;
    let done = ImportedAccount {
        account_id,
        provider_account_id: account.provider_account_id.clone(),
        outcome: outcome(&upserted),
        transactions_created: 0,
        transactions_updated: 0,
        transactions_skipped: 0,
        holdings_created: 0,
        holdings_updated: 0,
        snapshots_created: 0,
    };
    Ok((done, upserted))
}

/// Reconciles and writes `transactions` (all or some of an account's) into the account of
/// `done`, adding to its counts.
async fn import_transactions<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    origin: Origin<'_>,
    transactions: &[NewTransaction],
    now: DateTime<Utc>,
    done: &mut ImportedAccount,
    counts: &mut ImportCounts,
) -> Result<(), StoreError> {
    let reconciled = write_transactions_in(
        tx,
        user_id,
        done.account_id,
        transactions,
        origin,
        None,
        now,
    )
    .await?;
    counts.transactions_matched += reconciled.matched;
    counts.transfers += reconciled.transfers;
    counts.matches.extend(reconciled.matches);
    for (_, upserted) in reconciled.outcomes {
        match upserted {
            Upserted::Created => done.transactions_created += 1,
            Upserted::Updated => done.transactions_updated += 1,
            Upserted::Unchanged => done.transactions_skipped += 1,
        }
    }
    Ok(())
}

/// Writes the holdings and snapshots of one account of an import.
async fn import_holdings<B: Backend>(
    tx: &mut Tx<B>,
    item: &ImportAccount,
    now: DateTime<Utc>,
    done: &mut ImportedAccount,
    counts: &mut ImportCounts,
) -> Result<(), StoreError> {
    let account_id = done.account_id;
    for (_, upserted) in upsert_in(tx, account_id, &item.holdings, now).await? {
        match upserted {
            Upserted::Created => done.holdings_created += 1,
            Upserted::Updated => done.holdings_updated += 1,
            Upserted::Unchanged => counts.holdings_unchanged += 1,
        }
    }
    for snapshot in &item.snapshots {
        if has_import_snapshot(tx, account_id, snapshot).await? {
            continue;
        }
        let snapshot = NewSnapshot {
            account_id,
            balance: snapshot.balance,
            available_balance: snapshot.available_balance,
            holdings_value: snapshot.holdings_value,
            cash_value: snapshot.cash_value,
            currency: item.account.currency.clone(),
            source: SnapshotSource::FileImport,
            captured_at: snapshot.captured_at,
        };
        insert_snapshot_in(tx, &snapshot).await?;
        done.snapshots_created += 1;
    }
    Ok(())
}

/// Adds one account's counts to the import's.
fn count_account(counts: &mut ImportCounts, done: ImportedAccount, upserted: &Upserted) {
    match upserted {
        Upserted::Created => counts.accounts_created += 1,
        Upserted::Updated => counts.accounts_updated += 1,
        Upserted::Unchanged => counts.accounts_unchanged += 1,
    }
    counts.transactions_created += done.transactions_created;
    counts.transactions_updated += done.transactions_updated;
    counts.transactions_skipped += done.transactions_skipped;
    counts.holdings_created += done.holdings_created;
    counts.holdings_updated += done.holdings_updated;
    counts.snapshots_created += done.snapshots_created;
    counts.accounts.push(done);
}

/// Writes one account of an import with its transactions, holdings and snapshots.
async fn import_account<B: Backend>(
    tx: &mut Tx<B>,
    (user_id, connection_id): (Uuid, Uuid),
    origin: Origin<'_>,
    item: &ImportAccount,
    now: DateTime<Utc>,
    counts: &mut ImportCounts,
) -> Result<(), StoreError> {
    let (mut done, upserted) = upsert_import_account(tx, connection_id, item, now).await?;
    import_transactions(
        tx,
        user_id,
        origin,
        &item.transactions,
        now,
        &mut done,
        counts,
    )
    .await?;
    import_holdings(tx, item, now, &mut done, counts).await?;
    count_account(counts, done, &upserted);
    Ok(())
}

/// Whether the user owns the connection, and whether it is a `file_import` one.
async fn own_connection<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    connection_id: Uuid,
) -> Result<bool, StoreError> {
    let found: Option<(String,)> =
        query_as::<B, _>("SELECT provider_slug FROM connections WHERE id = $1 AND user_id = $2")
            .bind(connection_id)
            .bind(user_id)
            .fetch_optional(&mut **tx)
            .await?;
    match found {
        Some((slug,)) => Ok(slug == FILE_IMPORT_PROVIDER),
        None => Err(StoreError::Conflict(
            "the connection to import into no longer exists".to_owned(),
        )),
    }
}

/// Writes the whole batch in `tx`; the caller commits or rolls back.
async fn write_batch<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    batch: &ImportBatch,
    now: DateTime<Utc>,
) -> Result<ImportCounts, StoreError> {
    let mut counts = ImportCounts::default();
    for institution in &batch.institutions {
        let (connection_id, file_import) = match institution.connection_id {
            Some(connection_id) => (
                connection_id,
                own_connection(tx, user_id, connection_id).await?,
            ),
            None => {
                let alias = Some(institution.alias.as_str());
                let (connection, _) =
                    find_or_create_connection_in(tx, user_id, FILE_IMPORT_PROVIDER, alias, now)
                        .await?;
                (connection.id, true)
            }
        };
        counts.connection_ids.push(connection_id);
        let origin = Origin {
            source: TransactionSource::Import,
            name: batch.origin.as_deref().unwrap_or(FILE_IMPORT_PROVIDER),
        };
        for item in &institution.accounts {
            import_account(tx, (user_id, connection_id), origin, item, now, &mut counts).await?;
        }
        // A provider's connection keeps its own sync time (its sync limits go by it).
        if file_import {
            mark_synced(tx, connection_id, now).await?;
        }
    }
    if let Some(limit) = batch.account_limit
        && counts.accounts_created > 0
    {
        check_account_limit(tx, user_id, limit).await?;
    }
    Ok(counts)
}

/// An import with more transactions than this, all into accounts it creates, writes them in
/// batches of this many rows, each its own short write transaction: no other writer waits
/// long for SQLite's write lock (`benches import-lock-hold` measures the longest hold).
pub(in crate::store) const ROWS_PER_WRITE: usize = 1_000;

/// The longest pause between two batches of an import written in batches (a third of the
/// batch's time, so about a quarter of the time the lock is free for other writers).
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// How old a staged account may be before it counts as abandoned (its import stopped
/// without cleaning up): far longer than any import takes.
const ABANDONED_AFTER: chrono::TimeDelta = chrono::TimeDelta::minutes(15);

/// An account an import created and is filling in batches, with the connection it created
/// for it (if it did).
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
struct Staged {
    account_id: Uuid,
    connection_id: Option<Uuid>,
}

/// Removes staged accounts with everything written into them (and their connections when
/// created for them and left empty): rows on other accounts paired with theirs as transfers
/// are unpaired first.
async fn discard_staged<B: Backend>(tx: &mut Tx<B>, staged: &[Staged]) -> Result<(), StoreError> {
    for row in staged {
        query::<B>(
            "UPDATE transactions SET transfer_transaction_id = NULL WHERE transfer_transaction_id \
             IN (SELECT id FROM transactions WHERE account_id = $1) AND account_id <> $1",
        )
        .bind(row.account_id)
        .execute(&mut **tx)
        .await?;
        query::<B>("DELETE FROM accounts WHERE id = $1")
            .bind(row.account_id)
            .execute(&mut **tx)
            .await?;
    }
    for connection_id in staged.iter().filter_map(|row| row.connection_id) {
        query::<B>(
            "DELETE FROM connections WHERE id = $1 \
             AND NOT EXISTS (SELECT 1 FROM accounts WHERE connection_id = $1)",
        )
        .bind(connection_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Removes what imports that stopped half-way (the process ended while they wrote in
/// batches) left: the user's staged accounts older than [`ABANDONED_AFTER`], or everyone's
/// when `user_id` is `None`.
pub(in crate::store) async fn discard_abandoned<B: Backend>(
    pool: &sqlx::Pool<B>,
    user_id: Option<Uuid>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let before = now - ABANDONED_AFTER;
    let mut tx = pool.begin_with(B::BEGIN_WRITE).await?;
    let staged: Vec<Staged> = match user_id {
        Some(user_id) => {
            query_as::<B, _>(
                "SELECT account_id, connection_id FROM import_staging \
                 WHERE user_id = $1 AND started_at < $2",
            )
            .bind(user_id)
            .bind(before)
            .fetch_all(&mut *tx)
            .await?
        }
        None => {
            query_as::<B, _>(
                "SELECT account_id, connection_id FROM import_staging WHERE started_at < $1",
            )
            .bind(before)
            .fetch_all(&mut *tx)
            .await?
        }
    };
    if !staged.is_empty() {
        tracing::warn!(
            accounts = staged.len(),
            "removing what abandoned imports left"
        );
        discard_staged(&mut tx, &staged).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Begins one of the later write transactions of an import written in batches. Other
/// writers get the lock between batches, so it may be busy for a while: one busy answer is
/// tried again twice before the import fails (and its staged accounts go).
async fn begin_write<B: Backend>(pool: &sqlx::Pool<B>) -> Result<Tx<B>, StoreError> {
    let mut attempts = 0;
    loop {
        match pool.begin_with(B::BEGIN_WRITE).await {
            Ok(tx) => return Ok(tx),
            Err(error) => match StoreError::from(error) {
                StoreError::Busy(_) if attempts < 2 => attempts += 1,
                other => return Err(other),
            },
        }
    }
}

/// The accounts of a batch being written in batches: each account's counts so far, its
/// upsert outcome, and where it is in the batch.
struct Plan<'a> {
    /// Per institution: its connection and whether it is a `file_import` one.
    connections: Vec<(Uuid, bool)>,
    /// Per account, in batch order.
    accounts: Vec<(ImportedAccount, Upserted, &'a ImportAccount)>,
}

/// The first of the write transactions of an import written in batches: connections and
/// accounts, holdings and snapshots, the account limit, and the staging rows. `None` (and
/// nothing written) when an account exists already: then the import is written in one
/// transaction, as a small one is.
async fn begin_in_batches<'a, B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    import_id: Uuid,
    batch: &'a ImportBatch,
    now: DateTime<Utc>,
    counts: &mut ImportCounts,
) -> Result<Option<Plan<'a>>, StoreError> {
    let mut plan = Plan {
        connections: Vec::new(),
        accounts: Vec::new(),
    };
    for institution in &batch.institutions {
        // Only accounts of connections the import finds or creates: an import into a
        // provider's connection names an account that exists.
        if institution.connection_id.is_some() {
            return Ok(None);
        }
        let alias = Some(institution.alias.as_str());
        let (connection, created) =
            find_or_create_connection_in(tx, user_id, FILE_IMPORT_PROVIDER, alias, now).await?;
        plan.connections.push((connection.id, true));
        counts.connection_ids.push(connection.id);
        for item in &institution.accounts {
            let (mut done, upserted) = upsert_import_account(tx, connection.id, item, now).await?;
            if upserted != Upserted::Created {
                return Ok(None);
            }
            query::<B>(
                "INSERT INTO import_staging (account_id, import_id, user_id, connection_id, \
                 started_at) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(done.account_id)
            .bind(import_id)
            .bind(user_id)
            .bind(created.then_some(connection.id))
            .bind(now)
            .execute(&mut **tx)
            .await?;
            import_holdings(tx, item, now, &mut done, counts).await?;
            plan.accounts.push((done, upserted, item));
        }
    }
    if let Some(limit) = batch.account_limit
        && !plan.accounts.is_empty()
    {
        check_account_limit(tx, user_id, limit).await?;
    }
    Ok(Some(plan))
}

/// Applies a large import whose accounts are all new in bounded write transactions: the
/// accounts first (staged), then each account's transactions [`ROWS_PER_WRITE`] at a time,
/// then the events and the end of staging. A failure on the way removes the staged accounts
/// with everything written into them. `None` (nothing written) when the batch does not
/// qualify.
async fn apply_in_batches<B: Backend>(
    pool: &sqlx::Pool<B>,
    user_id: Uuid,
    batch: &ImportBatch,
    now: DateTime<Utc>,
    raise: &RaiseEvents<'_, ImportCounts>,
) -> Result<Option<(ImportCounts, Vec<Event>)>, StoreError> {
    discard_abandoned(pool, Some(user_id), now).await?;
    let import_id = Uuid::now_v7();
    let mut counts = ImportCounts::default();
    let mut longest = Duration::ZERO;
    let started = Instant::now();
    let mut tx = pool.begin_with(B::BEGIN_WRITE).await?;
    let Some(mut plan) =
        begin_in_batches(&mut tx, user_id, import_id, batch, now, &mut counts).await?
    else {
        tx.rollback().await?;
        return Ok(None);
    };
    tx.commit().await?;
    longest = longest.max(started.elapsed());
    let origin = Origin {
        source: TransactionSource::Import,
        name: batch.origin.as_deref().unwrap_or(FILE_IMPORT_PROVIDER),
    };
    let written = async {
        for (done, _, item) in &mut plan.accounts {
            for chunk in item.transactions.chunks(ROWS_PER_WRITE) {
                let started = Instant::now();
                let mut tx = begin_write(pool).await?;
                import_transactions(&mut tx, user_id, origin, chunk, now, done, &mut counts)
                    .await?;
                tx.commit().await?;
                let held = started.elapsed();
                longest = longest.max(held);
                // Room for the writers that waited: SQLite's busy handler retries every 100
                // ms at most, and would seldom find the lock free between two batches.
                tokio::time::sleep((held / 3).min(MAX_PAUSE)).await;
            }
        }
        let started = Instant::now();
        let mut tx = begin_write(pool).await?;
        for (connection_id, file_import) in &plan.connections {
            if *file_import {
                mark_synced(&mut tx, *connection_id, now).await?;
            }
        }
        for (done, upserted, _) in plan.accounts.drain(..) {
            count_account(&mut counts, done, &upserted);
        }
        let events = raise(&counts);
        insert_events(&mut tx, &events).await?;
        query::<B>("DELETE FROM import_staging WHERE import_id = $1")
            .bind(import_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        longest = longest.max(started.elapsed());
        Ok::<_, StoreError>(events)
    }
    .await;
    match written {
        Ok(events) => {
            tracing::debug!(
                held_ms = u64::try_from(longest.as_millis()).unwrap_or(u64::MAX),
                transactions = counts.transactions_created
                    + counts.transactions_updated
                    + counts.transactions_skipped,
                "import written in batches; longest write transaction"
            );
            Ok(Some((counts, events)))
        }
        Err(error) => {
            // All or nothing: what the batches wrote goes (else the next large import of the
            // user, or the next start, removes it once it counts as abandoned).
            let discarded = async {
                let mut tx = pool.begin_with(B::BEGIN_WRITE).await?;
                let staged: Vec<Staged> = query_as::<B, _>(
                    "SELECT account_id, connection_id FROM import_staging WHERE import_id = $1",
                )
                .bind(import_id)
                .fetch_all(&mut *tx)
                .await?;
                discard_staged(&mut tx, &staged).await?;
                tx.commit().await?;
                Ok::<_, StoreError>(())
            }
            .await;
            if let Err(cleanup) = discarded {
                tracing::warn!(error = %cleanup, "an import that failed half-way is left staged");
            }
            Err(error)
        }
    }
}

#[async_trait]
impl<B: Backend> ImportStore for SqlStore<B> {
    async fn apply_import(
        &self,
        user_id: Uuid,
        batch: &ImportBatch,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, ImportCounts>,
        raised: &mut Vec<Event>,
    ) -> Result<ImportCounts, StoreError> {
        let rows: usize = batch
            .institutions
            .iter()
            .flat_map(|institution| &institution.accounts)
            .map(|account| account.transactions.len())
            .sum();
        if rows > ROWS_PER_WRITE
            && let Some((counts, events)) =
                apply_in_batches(&self.pool, user_id, batch, now, raise).await?
        {
            raised.extend(events);
            return Ok(counts);
        }
        // The write lock (SQLite's `BEGIN IMMEDIATE`) is held from here to the commit: how
        // long is logged at debug, for `benches import-lock-hold` and operators.
        let started = Instant::now();
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let counts = write_batch(&mut tx, user_id, batch, now).await?;
        let events = raise(&counts);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        tracing::debug!(
            held_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            transactions = counts.transactions_created
                + counts.transactions_updated
                + counts.transactions_skipped,
            "import write transaction committed"
        );
        raised.extend(events);
        Ok(counts)
    }

    async fn preview_import(
        &self,
        user_id: Uuid,
        batch: &ImportBatch,
        now: DateTime<Utc>,
    ) -> Result<ImportCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let counts = write_batch(&mut tx, user_id, batch, now).await?;
        tx.rollback().await?;
        Ok(counts)
    }
}
