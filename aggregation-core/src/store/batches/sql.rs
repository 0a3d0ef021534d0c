//! The batch writer on SQL: a whole normalized batch written as one transaction (or, for a
//! large import into new accounts, as a few short ones).

use std::borrow::Cow;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, SqlStore, Tx, query, query_as};
use crate::store::events::sql::insert_events;
use crate::store::providers::sql::sync::{delete_removed_in, store_cursor_in};
use crate::store::records::sql::connections::{find_or_create_connection_in, mark_synced};
use crate::store::records::sql::reconcile::{Origin, write_transactions_in};
use crate::store::records::sql::upserts::{
    account_in, check_account_limit, delete_missing_pending_in, upsert_in,
};
use crate::store::records::sql::{deactivate_missing_holdings_in, insert_snapshot_in};
use crate::store::sql::{OptionalDec, Upserted};
use crate::store::{
    AbsentHoldings, AccountCounts, BatchAccount, BatchConnection, BatchCounts, BatchSnapshot,
    BatchStore, BatchTarget, FILE_IMPORT_PROVIDER, FeedUpdate, ImportOutcome, NewAccount,
    NewSnapshot, NewTransaction, NormalizedBatch, ProviderEnrichment, StatedBalances, StoreError,
    TransactionSource, UpsertCounts,
};

/// The window a change feed's batch hands the reconciler: empty, so a booked row takes over
/// a pending one only by the provider's link, never by the amount and date rule (a feed
/// carries only what changed, so a pending row absent from it has not disappeared).
const LINK_ONLY: (chrono::NaiveDate, chrono::NaiveDate) =
    (chrono::NaiveDate::MAX, chrono::NaiveDate::MIN);

/// Whether the account has a snapshot of this source captured at the same instant with the
/// same figures.
async fn has_snapshot<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    snapshot: &BatchSnapshot,
    stated: &StatedBalances,
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
    .bind(snapshot.source.as_str())
    .bind(stated.captured_at)
    .fetch_all(&mut **tx)
    .await?;
    Ok(stored
        .into_iter()
        .any(|(balance, available, holdings, cash)| {
            Decimal::from(balance) == stated.balance
                && Option::<Decimal>::from(available) == stated.available_balance
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

/// One connection of a batch as written: its id, its provider slug, and whether the batch
/// created it.
#[derive(Debug, Clone)]
struct Target {
    id: Uuid,
    provider_slug: String,
    created: bool,
}

/// Finds (and locks) or creates the connection a part of the batch goes into.
async fn target_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    source: TransactionSource,
    target: &BatchTarget,
    now: DateTime<Utc>,
) -> Result<Target, StoreError> {
    match target {
        BatchTarget::Connection(connection_id) => {
            // Locks the connection's row (PostgreSQL) so batches into one connection are
            // applied one after the other; SQLite's BEGIN IMMEDIATE serializes writers.
            let found: Option<(String,)> = query_as::<B, _>(
                "UPDATE connections SET updated_at = updated_at \
                 WHERE id = $1 AND user_id = $2 RETURNING provider_slug",
            )
            .bind(connection_id)
            .bind(user_id)
            .fetch_optional(&mut **tx)
            .await?;
            match found {
                Some((provider_slug,)) => Ok(Target {
                    id: *connection_id,
                    provider_slug,
                    created: false,
                }),
                None => Err(match source {
                    TransactionSource::Import => StoreError::Conflict(
                        "the connection to import into no longer exists".to_owned(),
                    ),
                    TransactionSource::Sync => {
                        StoreError::Other(format!("unknown connection {connection_id}"))
                    }
                }),
            }
        }
        BatchTarget::FileImport { alias } => {
            let (connection, created) = find_or_create_connection_in(
                tx,
                user_id,
                FILE_IMPORT_PROVIDER,
                Some(alias.as_str()),
                now,
            )
            .await?;
            Ok(Target {
                id: connection.id,
                provider_slug: FILE_IMPORT_PROVIDER.to_owned(),
                created,
            })
        }
    }
}

/// Upserts the accounts of one part of the batch that state their fields (an account whose
/// source states no balance keeps the stored one) and finds the others, adding one entry per
/// account to `counts.per_account`; each account's id with what was done to it.
async fn upsert_accounts_in<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    accounts: &[BatchAccount],
    now: DateTime<Utc>,
    counts: &mut BatchCounts,
) -> Result<Vec<(Uuid, Option<Upserted>)>, StoreError> {
    let mut stated: Vec<Cow<'_, NewAccount>> = Vec::new();
    for item in accounts {
        let Some(new) = &item.account else { continue };
        let mut account = Cow::Borrowed(new);
        if !item.balance_reported {
            // A source without a balance keeps the stored one.
            if let Some(stored) = account_in(tx, connection_id, &new.provider_account_id).await? {
                let account = account.to_mut();
                account.balance_amount = stored.balance_amount;
                account.available_balance_amount = stored.available_balance_amount;
            }
        }
        stated.push(account);
    }
    let stated: Vec<NewAccount> = stated.into_iter().map(Cow::into_owned).collect();
    let mut upserted = upsert_in(tx, connection_id, &stated, now)
        .await?
        .into_iter();
    let mut done = Vec::with_capacity(accounts.len());
    for item in accounts {
        let (account_id, outcome_of) = if item.account.is_some() {
            let Some((account_id, upserted)) = upserted.next() else {
                return Err(StoreError::Other(format!(
                    "no outcome for account {:?}",
                    item.provider_account_id
                )));
            };
            tally_one(&mut counts.accounts, account_id, &upserted);
            (account_id, Some(upserted))
        } else {
            match account_in(tx, connection_id, &item.provider_account_id).await? {
                Some(account) => (account.id, None),
                None => {
                    return Err(StoreError::Other(format!(
                        "unknown account {:?} in connection {connection_id}",
                        item.provider_account_id
                    )));
                }
            }
        };
        counts.per_account.push(AccountCounts {
            account_id,
            provider_account_id: item.provider_account_id.clone(),
            outcome: outcome_of.as_ref().map(outcome),
            transactions_created: 0,
            transactions_updated: 0,
            transactions_skipped: 0,
            holdings_created: 0,
            holdings_updated: 0,
            snapshots_created: 0,
        });
        done.push((account_id, outcome_of));
    }
    Ok(done)
}

/// Adds one upsert to `counts`.
fn tally_one(counts: &mut UpsertCounts, id: Uuid, upserted: &Upserted) {
    match upserted {
        Upserted::Created => counts.created += 1,
        Upserted::Updated => counts.updated += 1,
        Upserted::Unchanged => counts.unchanged += 1,
    }
    counts.ids.push(id);
}

/// Where one account of the batch is written, and how its transactions are reconciled.
#[derive(Debug, Clone, Copy)]
struct Place<'a> {
    user_id: Uuid,
    account_id: Uuid,
    /// Its entry in `counts.per_account`.
    index: usize,
    origin: Origin<'a>,
    /// Its key within its connection.
    provider_account_id: &'a str,
    /// The change feed's update its part carries, if any.
    feed: Option<&'a FeedUpdate>,
}

/// Reconciles and writes `transactions` (all or some of an account's) into the account,
/// adding to the counts.
async fn write_rows_in<B: Backend>(
    tx: &mut Tx<B>,
    place: Place<'_>,
    transactions: &[NewTransaction],
    pending_window: Option<(chrono::NaiveDate, chrono::NaiveDate)>,
    now: DateTime<Utc>,
    counts: &mut BatchCounts,
) -> Result<(), StoreError> {
    let enrichment: Vec<&ProviderEnrichment> = place
        .feed
        .map(|feed| {
            feed.enrichment
                .iter()
                .filter(|row| row.provider_account_id == place.provider_account_id)
                .collect()
        })
        .unwrap_or_default();
    let reconciled = write_transactions_in(
        tx,
        place.user_id,
        place.account_id,
        transactions,
        place.origin,
        if place.feed.is_some() {
            Some(LINK_ONLY)
        } else {
            pending_window
        },
        &enrichment,
        now,
    )
    .await?;
    counts.transactions_matched += reconciled.matched;
    counts.transactions_booked += reconciled.booked;
    counts.transfers += reconciled.transfers;
    counts.matches.extend(reconciled.matches);
    for (id, upserted) in reconciled.outcomes {
        tally_one(&mut counts.transactions, id, &upserted);
        if let Some(done) = counts.per_account.get_mut(place.index) {
            match upserted {
                Upserted::Created => done.transactions_created += 1,
                Upserted::Updated => done.transactions_updated += 1,
                Upserted::Unchanged => done.transactions_skipped += 1,
            }
        }
    }
    Ok(())
}

/// Deletes the account's pending rows dated in its window that `transactions` lacks (not
/// for a change feed's part, whose rows are only what changed).
async fn delete_absent_pending_in<B: Backend>(
    tx: &mut Tx<B>,
    place: Place<'_>,
    item: &BatchAccount,
    counts: &mut BatchCounts,
) -> Result<(), StoreError> {
    if let (Some(transactions), Some(window)) = (&item.transactions, item.pending_window)
        && place.feed.is_none()
    {
        let keep: std::collections::HashSet<&str> = transactions
            .iter()
            .map(|transaction| transaction.provider_transaction_id.as_str())
            .collect();
        counts.transactions_removed +=
            delete_missing_pending_in(tx, place.account_id, &keep, window).await?;
    }
    Ok(())
}

/// Writes the holdings and snapshots of one account of the batch.
async fn write_holdings_in<B: Backend>(
    tx: &mut Tx<B>,
    place: Place<'_>,
    (connection_id, item): (Uuid, &BatchAccount),
    now: DateTime<Utc>,
    counts: &mut BatchCounts,
) -> Result<(), StoreError> {
    let account_id = place.account_id;
    if let Some(holdings) = &item.holdings {
        for (id, upserted) in upsert_in(tx, account_id, holdings, now).await? {
            tally_one(&mut counts.holdings, id, &upserted);
            if let Some(done) = counts.per_account.get_mut(place.index) {
                match upserted {
                    Upserted::Created => done.holdings_created += 1,
                    Upserted::Updated => done.holdings_updated += 1,
                    Upserted::Unchanged => {}
                }
            }
        }
        if item.absent_holdings == AbsentHoldings::Deactivated {
            let keep: Vec<String> = holdings
                .iter()
                .map(|holding| holding.provider_holding_id.clone())
                .collect();
            counts.holdings_deactivated +=
                deactivate_missing_holdings_in::<B, _>(&mut **tx, account_id, &keep, now).await?;
        }
    }
    for snapshot in &item.snapshots {
        let snapshot = match &snapshot.stated {
            Some(stated) => {
                if has_snapshot(tx, account_id, snapshot, stated).await? {
                    continue;
                }
                let currency = match &item.account {
                    Some(account) => account.currency.clone(),
                    None => stored_account(tx, connection_id, item).await?.currency,
                };
                NewSnapshot {
                    account_id,
                    balance: stated.balance,
                    available_balance: stated.available_balance,
                    holdings_value: snapshot.holdings_value,
                    cash_value: snapshot.cash_value,
                    currency,
                    source: snapshot.source,
                    captured_at: stated.captured_at,
                }
            }
            None => {
                let account = stored_account(tx, connection_id, item).await?;
                NewSnapshot {
                    account_id,
                    balance: account.balance_amount,
                    available_balance: account.available_balance_amount,
                    holdings_value: snapshot.holdings_value,
                    cash_value: snapshot.cash_value,
                    currency: account.currency,
                    source: snapshot.source,
                    captured_at: now,
                }
            }
        };
        insert_snapshot_in(tx, &snapshot).await?;
        counts.snapshots_created += 1;
        if let Some(done) = counts.per_account.get_mut(place.index) {
            done.snapshots_created += 1;
        }
    }
    Ok(())
}

/// The account's row as the batch left it so far.
async fn stored_account<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    item: &BatchAccount,
) -> Result<crate::store::AccountRecord, StoreError> {
    account_in(tx, connection_id, &item.provider_account_id)
        .await?
        .ok_or_else(|| {
            StoreError::Other(format!(
                "unknown account {:?} in connection {connection_id}",
                item.provider_account_id
            ))
        })
}

/// The origin of the batch's rows written into `target`.
fn origin_of<'a>(batch: &'a NormalizedBatch, target: &'a Target) -> Origin<'a> {
    Origin {
        source: batch.source,
        name: batch.origin.as_deref().unwrap_or(&target.provider_slug),
    }
}

/// Whether a part's connection gets the batch's time as its last sync: an import leaves a
/// provider's connection's time as it is (its sync limits go by it).
fn marks_synced(batch: &NormalizedBatch, part: &BatchConnection, target: &Target) -> bool {
    part.mark_synced
        && (batch.source == TransactionSource::Sync || target.provider_slug == FILE_IMPORT_PROVIDER)
}

/// Checks the batch's account limit once it created accounts.
async fn check_limit_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    batch: &NormalizedBatch,
    counts: &BatchCounts,
) -> Result<(), StoreError> {
    if let Some(limit) = batch.account_limit
        && counts.accounts.created > 0
    {
        check_account_limit(tx, user_id, limit).await?;
    }
    Ok(())
}

/// Writes one part of the batch (one connection's accounts with their rows, its feed update
/// and sync time).
async fn write_part_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    batch: &NormalizedBatch,
    part: &BatchConnection,
    now: DateTime<Utc>,
    counts: &mut BatchCounts,
) -> Result<(), StoreError> {
    let target = target_in(tx, user_id, batch.source, &part.target, now).await?;
    counts.connection_ids.push(target.id);
    let first = counts.per_account.len();
    let accounts = upsert_accounts_in(tx, target.id, &part.accounts, now, counts).await?;
    check_limit_in(tx, user_id, batch, counts).await?;
    let origin = origin_of(batch, &target);
    for (offset, (item, (account_id, _))) in part.accounts.iter().zip(accounts).enumerate() {
        let place = Place {
            user_id,
            account_id,
            index: first + offset,
            origin,
            provider_account_id: &item.provider_account_id,
            feed: part.feed.as_ref(),
        };
        if let Some(transactions) = &item.transactions {
            write_rows_in(tx, place, transactions, item.pending_window, now, counts).await?;
            delete_absent_pending_in(tx, place, item, counts).await?;
        }
        write_holdings_in(tx, place, (target.id, item), now, counts).await?;
    }
    if let Some(feed) = &part.feed {
        counts.transactions_removed += delete_removed_in(tx, target.id, &feed.removed).await?;
        store_cursor_in(tx, target.id, &feed.cursor, now).await?;
    }
    if marks_synced(batch, part, &target) {
        mark_synced(tx, target.id, now).await?;
    }
    Ok(())
}

/// Writes the whole batch in `tx`; the caller commits or rolls back.
async fn write_batch<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    batch: &NormalizedBatch,
    now: DateTime<Utc>,
) -> Result<BatchCounts, StoreError> {
    let mut counts = BatchCounts::default();
    for part in &batch.connections {
        write_part_in(tx, user_id, batch, part, now, &mut counts).await?;
    }
    Ok(counts)
}

/// An import with more transactions than this, all into accounts it creates, writes them in
/// batches, each its own short write transaction: no other writer waits long for SQLite's
/// write lock (`benches import-lock-hold` measures the longest hold). The first batch has
/// this many rows; the next ones as many as [`BATCH_TIME`] holds.
pub(in crate::store) const ROWS_PER_WRITE: usize = 1_000;

/// How long one batch of an import written in batches should hold its write transaction: the
/// rows of the next batch follow from the time the last one took per row, within
/// [`BATCH_ROWS`]. Fewer, fuller batches cost the import less (each commit flushes and
/// merges the search index and may checkpoint SQLite's log); shorter ones cost the other
/// writers less.
const BATCH_TIME: Duration = Duration::from_millis(150);

/// The fewest and the most rows of one batch.
const BATCH_ROWS: (usize, usize) = (200, 10_000);

/// The rows of the batch after one of `rows` that took `held`: as many as [`BATCH_TIME`]
/// holds at that pace, within [`BATCH_ROWS`].
fn next_batch_rows(rows: usize, held: Duration) -> usize {
    let held = held.as_nanos();
    if held == 0 {
        return BATCH_ROWS.1;
    }
    let fitting = (rows as u128).saturating_mul(BATCH_TIME.as_nanos()) / held;
    usize::try_from(fitting)
        .unwrap_or(usize::MAX)
        .clamp(BATCH_ROWS.0, BATCH_ROWS.1)
}

/// The longest pause between two batches of an import written in batches while other
/// connections are in use (a third of the batch's time, so about a quarter of the time the
/// lock is free for other writers).
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

/// The accounts of a batch being written in batches: where each one's transactions go.
struct Plan<'a> {
    /// Per part: its connection and whether it gets the batch's time as its last sync.
    connections: Vec<(Uuid, bool)>,
    /// Per account, in batch order: where it is written, and its transactions.
    accounts: Vec<(Place<'a>, &'a [NewTransaction])>,
}

/// Whether the batch may be written in batches: an import without a change feed or a pending
/// window, with more rows than one write batch (whose accounts
/// [`begin_in_batches`] then checks).
fn in_batches(batch: &NormalizedBatch) -> bool {
    if batch.source != TransactionSource::Import {
        return false;
    }
    let mut rows = 0;
    for part in &batch.connections {
        if part.feed.is_some() {
            return false;
        }
        for account in &part.accounts {
            if account.pending_window.is_some() {
                return false;
            }
            rows += account.transactions.as_ref().map_or(0, Vec::len);
        }
    }
    rows > ROWS_PER_WRITE
}

/// The first of the write transactions of an import written in batches: connections and
/// accounts, holdings and snapshots, the account limit, and the staging rows. `None` (and
/// nothing written) when an account exists already: then the import is written in one
/// transaction, as a small one is.
async fn begin_in_batches<'a, B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    import_id: Uuid,
    batch: &'a NormalizedBatch,
    now: DateTime<Utc>,
    counts: &mut BatchCounts,
) -> Result<Option<Plan<'a>>, StoreError> {
    let mut plan = Plan {
        connections: Vec::new(),
        accounts: Vec::new(),
    };
    let origin = Origin {
        source: batch.source,
        name: batch.origin.as_deref().unwrap_or(FILE_IMPORT_PROVIDER),
    };
    for part in &batch.connections {
        // Only accounts of connections the import finds or creates: an import into a
        // provider's connection names an account that exists.
        if matches!(part.target, BatchTarget::Connection(_)) {
            return Ok(None);
        }
        let target = target_in(tx, user_id, batch.source, &part.target, now).await?;
        counts.connection_ids.push(target.id);
        plan.connections
            .push((target.id, marks_synced(batch, part, &target)));
        let first = counts.per_account.len();
        let accounts = upsert_accounts_in(tx, target.id, &part.accounts, now, counts).await?;
        for (offset, (item, (account_id, upserted))) in
            part.accounts.iter().zip(accounts).enumerate()
        {
            if upserted != Some(Upserted::Created) {
                return Ok(None);
            }
            query::<B>(
                "INSERT INTO import_staging (account_id, import_id, user_id, connection_id, \
                 started_at) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(account_id)
            .bind(import_id)
            .bind(user_id)
            .bind(target.created.then_some(target.id))
            .bind(now)
            .execute(&mut **tx)
            .await?;
            let place = Place {
                user_id,
                account_id,
                index: first + offset,
                origin,
                provider_account_id: &item.provider_account_id,
                feed: None,
            };
            write_holdings_in(tx, place, (target.id, item), now, counts).await?;
            plan.accounts
                .push((place, item.transactions.as_deref().unwrap_or_default()));
        }
    }
    check_limit_in(tx, user_id, batch, counts).await?;
    Ok(Some(plan))
}

/// Whether a writer of this process may be waiting for the write lock an import's batch holds
/// (called while the batch's transaction is open): only on a backend of [one
/// writer](crate::store::backend::Driver::ONE_WRITER), and only while another connection of
/// the pool is in use (a waiting writer holds one; a reader counts too, and costs a pause it
/// did not need). Alone, an import writes its batches back to back.
fn others_use_the_store<B: Backend>(pool: &sqlx::Pool<B>) -> bool {
    B::ONE_WRITER
        && usize::try_from(pool.size()).unwrap_or(usize::MAX) > pool.num_idle().saturating_add(1)
}

/// Applies a large import whose accounts are all new in bounded write transactions: the
/// accounts first (staged), then each account's transactions in batches of about
/// [`BATCH_TIME`] each,
/// then the events and the end of staging. A failure on the way removes the staged accounts
/// with everything written into them. `None` (nothing written) when the batch does not
/// qualify.
async fn apply_in_batches<B: Backend>(
    pool: &sqlx::Pool<B>,
    user_id: Uuid,
    batch: &NormalizedBatch,
    now: DateTime<Utc>,
    raise: &RaiseEvents<'_, BatchCounts>,
) -> Result<Option<(BatchCounts, Vec<Event>)>, StoreError> {
    discard_abandoned(pool, Some(user_id), now).await?;
    let import_id = Uuid::now_v7();
    let mut counts = BatchCounts::default();
    let mut longest = Duration::ZERO;
    let started = Instant::now();
    let mut tx = pool.begin_with(B::BEGIN_WRITE).await?;
    let Some(plan) = begin_in_batches(&mut tx, user_id, import_id, batch, now, &mut counts).await?
    else {
        tx.rollback().await?;
        return Ok(None);
    };
    tx.commit().await?;
    longest = longest.max(started.elapsed());
    let written = async {
        for (place, transactions) in &plan.accounts {
            let mut rest: &[NewTransaction] = transactions;
            let mut rows = ROWS_PER_WRITE;
            while !rest.is_empty() {
                let (chunk, after) = rest.split_at(rows.min(rest.len()));
                rest = after;
                let started = Instant::now();
                let mut tx = begin_write(pool).await?;
                write_rows_in(&mut tx, *place, chunk, None, now, &mut counts).await?;
                // Read while this batch's connection is surely out of the pool.
                let others_waiting = others_use_the_store(pool);
                tx.commit().await?;
                let held = started.elapsed();
                longest = longest.max(held);
                rows = next_batch_rows(chunk.len(), held);
                if others_waiting {
                    // Room for the writers that waited: SQLite's busy handler retries every
                    // 100 ms at most, and would seldom find the lock free between two
                    // batches.
                    tokio::time::sleep((held / 3).min(MAX_PAUSE)).await;
                }
            }
        }
        let started = Instant::now();
        let mut tx = begin_write(pool).await?;
        for (connection_id, marks) in &plan.connections {
            if *marks {
                mark_synced(&mut tx, *connection_id, now).await?;
            }
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
                transactions = counts.transactions.ids.len(),
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
impl<B: Backend> BatchStore for SqlStore<B> {
    async fn apply_batch(
        &self,
        user_id: Uuid,
        batch: &NormalizedBatch,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, BatchCounts>,
        raised: &mut Vec<Event>,
    ) -> Result<BatchCounts, StoreError> {
        if in_batches(batch)
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
            transactions = counts.transactions.ids.len(),
            "batch write transaction committed"
        );
        raised.extend(events);
        Ok(counts)
    }

    async fn preview_batch(
        &self,
        user_id: Uuid,
        batch: &NormalizedBatch,
        now: DateTime<Utc>,
    ) -> Result<BatchCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let counts = write_batch(&mut tx, user_id, batch, now).await?;
        tx.rollback().await?;
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{BATCH_ROWS, BATCH_TIME, next_batch_rows};

    #[test]
    fn a_batch_holds_about_the_batch_time_within_its_bounds() {
        // 1,000 rows in 50 ms: three times as many fit in 150 ms.
        assert_eq!(BATCH_TIME, Duration::from_millis(150));
        assert_eq!(next_batch_rows(1_000, Duration::from_millis(50)), 3_000);
        // Slower than the batch time: fewer rows, never below the floor.
        assert_eq!(next_batch_rows(1_000, Duration::from_millis(300)), 500);
        assert_eq!(
            next_batch_rows(1_000, Duration::from_secs(60)),
            BATCH_ROWS.0
        );
        // Instant or very fast batches: the ceiling.
        assert_eq!(next_batch_rows(1_000, Duration::ZERO), BATCH_ROWS.1);
        assert_eq!(
            next_batch_rows(1_000, Duration::from_micros(1)),
            BATCH_ROWS.1
        );
    }
}
