//! Transaction matches on SQL: reading them back, and the user's decisions, each applied in
//! the caller's transaction so that the rows and the match change together.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::backend::{Backend, QueryBuilder, Tx, query, query_as};
use crate::store::records::sql::SELECT_TRANSACTION;
use crate::store::records::sql::reconcile::{HeldRow, Origin};
use crate::store::records::sql::upserts::{Sourced, upsert_transactions_in};
use crate::store::{
    CategorySource, MatchDecision, MatchFilter, MatchKind, MatchRecord, MatchStatus,
    NewTransaction, StoreError, TransactionRecord,
};

/// A stored match.
#[derive(Debug, sqlx::FromRow)]
pub(in crate::store) struct MatchRow {
    id: Uuid,
    user_id: Uuid,
    kind: String,
    status: String,
    transaction_id: Uuid,
    other_transaction_id: Option<Uuid>,
    account_id: Uuid,
    held: Option<String>,
    confidence: String,
    reason: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub(in crate::store) const MATCH_COLUMNS: &str = "id, user_id, kind, status, transaction_id, \
     other_transaction_id, account_id, held, confidence, reason, created_at, updated_at";

impl MatchRow {
    /// The record; [`StoreError::Other`] for a row this version does not understand.
    pub(in crate::store) fn record(&self) -> Result<MatchRecord, StoreError> {
        let unreadable = || StoreError::Other(format!("unreadable transaction match {}", self.id));
        Ok(MatchRecord {
            id: self.id,
            user_id: self.user_id,
            kind: MatchKind::parse(&self.kind).ok_or_else(unreadable)?,
            status: MatchStatus::parse(&self.status).ok_or_else(unreadable)?,
            transaction_ids: std::iter::once(self.transaction_id)
                .chain(self.other_transaction_id)
                .collect(),
            confidence: self.confidence.parse().map_err(|_| unreadable())?,
            reason: self.reason.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// The query listing the user's matches in the filter, newest first, `limit + 1` of them.
pub(in crate::store) fn list_query<B: Backend>(
    user_id: Uuid,
    filter: &MatchFilter,
) -> QueryBuilder<B> {
    let mut list = QueryBuilder::<B>::new(format!(
        "SELECT {MATCH_COLUMNS} FROM transaction_matches WHERE user_id = "
    ));
    list.push_bind(user_id);
    if let Some(status) = filter.status {
        list.push(" AND status = ").push_bind(status.as_str());
    }
    if let Some(kind) = filter.kind {
        list.push(" AND kind = ").push_bind(kind.as_str());
    }
    if let Some(before) = filter.before {
        list.push(" AND id < ").push_bind(before);
    }
    list.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(filter.limit) + 1);
    list
}

/// Rewrites a stored row as what a provider or file reports, to keep it in a match.
fn reported(stored: TransactionRecord) -> NewTransaction {
    NewTransaction {
        provider_transaction_id: stored.provider_transaction_id,
        transaction_type: stored.transaction_type,
        subtype: stored.subtype,
        status: stored.status,
        amount: stored.amount,
        currency: stored.currency,
        description: stored.description,
        symbol: stored.symbol,
        security_name: stored.security_name,
        quantity: stored.quantity,
        unit_price: stored.unit_price,
        commission: stored.commission,
        transaction_date: stored.transaction_date,
        settlement_date: stored.settlement_date,
        pending_transaction_id: stored.pending_transaction_id,
        merchant_code: None,
    }
}

/// Takes a duplicate's newer row out of the account and into the match.
async fn hold_back<B: Backend>(
    tx: &mut Tx<B>,
    match_id: Uuid,
    newer: Uuid,
) -> Result<(), StoreError> {
    let stored: Option<TransactionRecord> = query_as::<B, _>(sqlx::AssertSqlSafe(format!(
        "{SELECT_TRANSACTION} FROM transactions t WHERE t.id = $1"
    )))
    .bind(newer)
    .fetch_optional(&mut **tx)
    .await?;
    let found: Option<(String,)> =
        query_as::<B, _>("SELECT origin FROM transactions WHERE id = $1")
            .bind(newer)
            .fetch_optional(&mut **tx)
            .await?;
    let (Some(stored), Some((origin,))) = (stored, found) else {
        return Err(StoreError::Conflict(
            "the newer row of this match no longer exists".to_owned(),
        ));
    };
    let account_id = stored.account_id;
    let origin_of = Origin {
        source: stored.source,
        name: &origin,
    };
    let held = HeldRow::json(&reported(stored), origin_of);
    query::<B>(
        "UPDATE transaction_matches SET other_transaction_id = NULL, held = $1 WHERE id = $2",
    )
    .bind(held)
    .bind(match_id)
    .execute(&mut **tx)
    .await?;
    query::<B>(
        "UPDATE transactions SET transfer_transaction_id = NULL WHERE transfer_transaction_id = $1",
    )
    .bind(newer)
    .execute(&mut **tx)
    .await?;
    query::<B>("DELETE FROM transactions WHERE id = $1")
        .bind(newer)
        .execute(&mut **tx)
        .await?;
    query::<B>("UPDATE accounts SET transaction_count = transaction_count - 1 WHERE id = $1")
        .bind(account_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Writes a duplicate held back in the match into its account, running the user's rules on it.
async fn write_held<B: Backend>(
    tx: &mut Tx<B>,
    row: &MatchRow,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let Some((item, source, origin)) = row.held.as_deref().and_then(HeldRow::parse) else {
        return Err(StoreError::Other(format!(
            "transaction match {} holds no row",
            row.id
        )));
    };
    let sourced = Sourced {
        item: &item,
        source,
        origin: &origin,
    };
    let done =
        upsert_transactions_in(tx, row.account_id, std::slice::from_ref(&sourced), now).await?;
    let Some(&(written, _)) = done.first() else {
        return Err(StoreError::Other(format!(
            "no row written for match {}",
            row.id
        )));
    };
    // A row written now is a new row: the user's rules run on it as at any sync or import.
    super::rules::run_rules_in(tx, row.user_id, &done, now).await?;
    query::<B>(
        "UPDATE transaction_matches SET other_transaction_id = $1, held = NULL WHERE id = $2",
    )
    .bind(written)
    .bind(row.id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Sets (or, with `paired` false, clears) the two legs' `transfer_transaction_id`; a leg
/// already paired elsewhere is [`StoreError::Conflict`].
async fn pair<B: Backend>(
    tx: &mut Tx<B>,
    first: Uuid,
    second: Uuid,
    paired: bool,
) -> Result<(), StoreError> {
    for (leg, other) in [(first, second), (second, first)] {
        let changed = if paired {
            // The transfer category on a leg nothing else categorised (last in precedence).
            query::<B>(
                "UPDATE transactions SET transfer_transaction_id = $1, \
                 category = CASE WHEN category IS NULL AND NOT category_by_user \
                     THEN CASE WHEN amount LIKE '-%' THEN $3 ELSE $4 END ELSE category END, \
                 category_source = CASE WHEN category IS NULL AND NOT category_by_user \
                     THEN $5 ELSE category_source END \
                 WHERE id = $2 AND (transfer_transaction_id IS NULL OR transfer_transaction_id = $1)",
            )
            .bind(other)
            .bind(leg)
            .bind("TRANSFER_OUT_ACCOUNT_TRANSFER")
            .bind("TRANSFER_IN_ACCOUNT_TRANSFER")
            .bind(CategorySource::Transfer.as_str())
            .execute(&mut **tx)
            .await?
            .rows_affected()
        } else {
            // Unpaired, a leg loses the category the pairing gave it.
            query::<B>(
                "UPDATE transactions SET transfer_transaction_id = NULL, \
                 category = CASE WHEN category_source = $3 THEN NULL ELSE category END, \
                 category_source = CASE WHEN category_source = $3 THEN NULL \
                     ELSE category_source END \
                 WHERE id = $1 AND transfer_transaction_id = $2",
            )
            .bind(leg)
            .bind(other)
            .bind(CategorySource::Transfer.as_str())
            .execute(&mut **tx)
            .await?;
            1
        };
        if changed == 0 {
            return Err(StoreError::Conflict(
                "a leg of this transfer is paired with another transaction".to_owned(),
            ));
        }
    }
    Ok(())
}

/// Applies the user's decision to their match: the match as it stands afterwards and
/// whether anything changed; `None` when the user has no such match.
pub(in crate::store) async fn decide_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    match_id: Uuid,
    decision: MatchDecision,
    now: DateTime<Utc>,
) -> Result<Option<(MatchRecord, bool)>, StoreError> {
    // Locks the match (PostgreSQL) so two decisions on it run one after the other.
    let locked: Option<MatchRow> = query_as::<B, _>(sqlx::AssertSqlSafe(format!(
        "UPDATE transaction_matches SET updated_at = updated_at WHERE id = $1 AND user_id = $2 \
         RETURNING {MATCH_COLUMNS}"
    )))
    .bind(match_id)
    .bind(user_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = locked else {
        return Ok(None);
    };
    let current = row.record()?;
    let target = match decision {
        MatchDecision::Accept => MatchStatus::Accepted,
        MatchDecision::Reject => MatchStatus::Rejected,
    };
    // Already as decided, or accepting what the reconciler applied: nothing to change.
    if current.status == target {
        return Ok(Some((current, false)));
    }
    let applied = matches!(
        current.status,
        MatchStatus::Automatic | MatchStatus::Accepted
    );
    match (current.kind, decision) {
        (MatchKind::Duplicate, MatchDecision::Accept) => {
            if let Some(newer) = row.other_transaction_id {
                hold_back(tx, row.id, newer).await?;
            }
        }
        (MatchKind::Duplicate, MatchDecision::Reject) => {
            if row.other_transaction_id.is_none() {
                write_held(tx, &row, now).await?;
            }
        }
        (MatchKind::Transfer, decision) => {
            let Some(other) = row.other_transaction_id else {
                return Err(StoreError::Conflict(
                    "a leg of this transfer no longer exists".to_owned(),
                ));
            };
            match decision {
                MatchDecision::Accept if !applied => {
                    pair(tx, row.transaction_id, other, true).await?;
                }
                MatchDecision::Reject if applied => {
                    pair(tx, row.transaction_id, other, false).await?;
                }
                _ => {}
            }
        }
    }
    query::<B>("UPDATE transaction_matches SET status = $1, updated_at = $2 WHERE id = $3")
        .bind(target.as_str())
        .bind(now)
        .bind(row.id)
        .execute(&mut **tx)
        .await?;
    let decided: MatchRow = query_as::<B, _>(sqlx::AssertSqlSafe(format!(
        "SELECT {MATCH_COLUMNS} FROM transaction_matches WHERE id = $1"
    )))
    .bind(row.id)
    .fetch_one(&mut **tx)
    .await?;
    Ok(Some((decided.record()?, true)))
}
