//! The reconciler: the one place every source's transactions are written through (each
//! provider's sync, each file format), so that one real transaction is one row whatever
//! reported it. Per account and batch, in the caller's transaction:
//!
//! 1. **Identity**: a provider id the account has (or holds back as a duplicate) is that row.
//! 2. **Pending to booked** (syncs): a new booked row takes over the pending row the provider
//!    links it to, or the single disappearing pending row the amount, date and merchant rule
//!    finds ([`books_pending`]); the row keeps its id.
//! 3. **Across sources**: a new row is compared with the account's rows of other origins of
//!    the same amount within [`DUPLICATE_WINDOW_DAYS`]; one strong candidate holds the row
//!    back as an `automatic` duplicate, anything weaker or ambiguous writes it with
//!    `suggested` matches.
//! 4. **Transfers**: each row created is paired with the single opposite row on another of
//!    the user's accounts within [`TRANSFER_WINDOW_DAYS`], or suggestions are recorded.
//!
//! Every candidate look-up reads date windows through the `(account_id, transaction_date,
//! ...)` indexes: one range per run of the batch's dates (each date widened by the rule's
//! days, overlapping ranges merged), so the cost follows the rows near the batch's dates,
//! never the account's size nor the history between two far-apart rows of one file.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::matching::{
    DUPLICATE_WINDOW_DAYS, PENDING_WINDOW_DAYS, SIMILARITY_THRESHOLD, STRONG_SIMILARITY,
    TRANSFER_WINDOW_DAYS, books_pending, description_similarity, transfer_legs, within_days,
};
use crate::store::backend::{Backend, QueryBuilder, Tx, query};
use crate::store::records::sql::upserts::{Sourced, upsert_transactions_in};
use crate::store::sql::{Upserted, currency, optional_text, text};
use crate::store::{
    CategorySource, MatchKind, MatchRecord, MatchStatus, NewTransaction, ProviderEnrichment,
    StoreError, TransactionSource, TransactionStatus, TransactionType,
};

/// The categories of a transfer's legs: money out, money in.
const TRANSFER_OUT: &str = "TRANSFER_OUT_ACCOUNT_TRANSFER";
const TRANSFER_IN: &str = "TRANSFER_IN_ACCOUNT_TRANSFER";

/// The most suggestions recorded for one incoming row.
const MAX_SUGGESTIONS: usize = 5;

/// Where a batch of transactions comes from.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct Origin<'a> {
    /// The kind of source.
    pub(in crate::store) source: TransactionSource,
    /// The provider's slug, or the file format's code.
    pub(in crate::store) name: &'a str,
}

/// What reconciling and writing one account's batch did.
#[derive(Debug, Default)]
pub(in crate::store) struct Reconciled {
    /// The row behind each input written or recognised, in input order (held-back
    /// duplicates have none).
    pub(in crate::store) outcomes: Vec<(Uuid, Upserted)>,
    /// Rows held back as another source's duplicates.
    pub(in crate::store) matched: u64,
    /// Booked rows that took over a pending row.
    pub(in crate::store) booked: u64,
    /// Transfers paired.
    pub(in crate::store) transfers: u64,
    /// The matches recorded.
    pub(in crate::store) matches: Vec<MatchRecord>,
}

/// A stored row the matcher compares with.
#[derive(Debug, sqlx::FromRow)]
struct Candidate {
    id: Uuid,
    provider_transaction_id: String,
    #[sqlx(try_from = "crate::store::sql::Dec")]
    amount: Decimal,
    currency: String,
    description: Option<String>,
    transaction_date: NaiveDate,
}

const CANDIDATE_COLUMNS: &str = "SELECT t.id, t.provider_transaction_id, t.amount, t.currency, \
     t.description, t.transaction_date";

/// A held-back duplicate as the match keeps it, to write it if the user rejects the match.
#[derive(Debug, Serialize, Deserialize)]
pub(in crate::store) struct HeldRow {
    provider_transaction_id: String,
    transaction_type: String,
    subtype: Option<String>,
    status: String,
    #[serde(with = "rust_decimal::serde::str")]
    amount: Decimal,
    currency: String,
    description: Option<String>,
    symbol: Option<String>,
    security_name: Option<String>,
    #[serde(with = "rust_decimal::serde::str_option")]
    quantity: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    unit_price: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    commission: Option<Decimal>,
    transaction_date: NaiveDate,
    settlement_date: Option<NaiveDate>,
    pending_transaction_id: Option<String>,
    source: String,
    origin: String,
}

impl HeldRow {
    /// The JSON of a row held back.
    pub(in crate::store) fn json(item: &NewTransaction, origin: Origin<'_>) -> String {
        let row = Self {
            provider_transaction_id: item.provider_transaction_id.clone(),
            transaction_type: item.transaction_type.as_str().to_owned(),
            subtype: item.subtype.clone(),
            status: item.status.as_str().to_owned(),
            amount: item.amount,
            currency: item.currency.clone(),
            description: item.description.clone(),
            symbol: item.symbol.clone(),
            security_name: item.security_name.clone(),
            quantity: item.quantity,
            unit_price: item.unit_price,
            commission: item.commission,
            transaction_date: item.transaction_date,
            settlement_date: item.settlement_date,
            pending_transaction_id: item.pending_transaction_id.clone(),
            source: origin.source.as_str().to_owned(),
            origin: origin.name.to_owned(),
        };
        // Plain strings, decimals as strings and dates: serializing cannot fail.
        serde_json::to_string(&row).unwrap_or_default()
    }

    /// The row, its source and origin; `None` when the JSON is not a held row.
    pub(in crate::store) fn parse(
        json: &str,
    ) -> Option<(NewTransaction, TransactionSource, String)> {
        let row: Self = serde_json::from_str(json).ok()?;
        let item = NewTransaction {
            provider_transaction_id: row.provider_transaction_id,
            transaction_type: TransactionType::parse(&row.transaction_type)?,
            subtype: row.subtype,
            status: TransactionStatus::parse(&row.status)?,
            amount: row.amount,
            currency: row.currency,
            description: row.description,
            symbol: row.symbol,
            security_name: row.security_name,
            quantity: row.quantity,
            unit_price: row.unit_price,
            commission: row.commission,
            transaction_date: row.transaction_date,
            settlement_date: row.settlement_date,
            pending_transaction_id: row.pending_transaction_id,
            merchant_code: None,
        };
        Some((item, TransactionSource::parse(&row.source)?, row.origin))
    }
}

/// A match to record.
#[derive(Debug)]
pub(in crate::store) struct NewMatch {
    pub(in crate::store) kind: MatchKind,
    pub(in crate::store) status: MatchStatus,
    /// The row that was there first.
    pub(in crate::store) transaction_id: Uuid,
    /// The newer row, when written.
    pub(in crate::store) other_transaction_id: Option<Uuid>,
    /// The newer row's account and provider id.
    pub(in crate::store) account_id: Uuid,
    pub(in crate::store) provider_transaction_id: String,
    /// The held-back row's JSON.
    pub(in crate::store) held: Option<String>,
    pub(in crate::store) confidence: Decimal,
    pub(in crate::store) reason: String,
}

/// A score from 0 to 1 as a decimal of two places.
fn confidence(score: f64) -> Decimal {
    // The score lies within 0..=1, so the hundredths fit any integer.
    #[allow(clippy::cast_possible_truncation)]
    let hundredths = (score.clamp(0.0, 1.0) * 100.0).round() as i64;
    Decimal::new(hundredths, 2)
}

/// How alike two descriptions are, in whole percent, for reasons.
fn percent(score: f64) -> i64 {
    #[allow(clippy::cast_possible_truncation)]
    let percent = (score.clamp(0.0, 1.0) * 100.0).round() as i64;
    percent
}

/// The provider ids of `keys` the account has rows for.
async fn stored_keys<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    keys: &[&str],
) -> Result<HashSet<String>, StoreError> {
    let mut stored = HashSet::new();
    for chunk in keys.chunks(B::KEYS_PER_STATEMENT) {
        let mut lookup = QueryBuilder::<B>::new("SELECT t.provider_transaction_id FROM ");
        lookup.push_keyed_rows(
            chunk.iter().copied(),
            ("transactions", "t"),
            ("account_id", account_id),
            "provider_transaction_id",
        );
        let found: Vec<String> = lookup.build_query_scalar().fetch_all(&mut **tx).await?;
        stored.extend(found);
    }
    Ok(stored)
}

/// The provider ids of `keys` held back in the account as duplicates, with the row each
/// duplicates.
async fn held_keys<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    keys: &[&str],
) -> Result<HashMap<String, Uuid>, StoreError> {
    let mut held = HashMap::new();
    for chunk in keys.chunks(B::KEYS_PER_STATEMENT) {
        let mut lookup =
            QueryBuilder::<B>::new("SELECT m.provider_transaction_id, m.transaction_id FROM ");
        lookup
            .push_keyed_rows(
                chunk.iter().copied(),
                ("transaction_matches", "m"),
                ("account_id", account_id),
                "provider_transaction_id",
            )
            .push(" WHERE m.other_transaction_id IS NULL AND m.held IS NOT NULL");
        let found: Vec<(String, Uuid)> = lookup.build_query_as().fetch_all(&mut **tx).await?;
        held.extend(found);
    }
    Ok(held)
}

/// What becomes of one input row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Written by the upsert (new, or its identity's row).
    Write,
    /// Held back as another source's duplicate.
    Held,
    /// Took over this pending row.
    Booked(Uuid),
    /// Sent again while held back as a duplicate of this row: nothing to do.
    Resent(Uuid),
}

/// The date ranges around the rows `indices` names: each row's date widened by `before` and
/// `after` days, ranges that overlap or touch merged, in date order. Empty without rows.
fn windows(
    items: &[NewTransaction],
    indices: &[usize],
    before: i64,
    after: i64,
) -> Vec<(NaiveDate, NaiveDate)> {
    date_ranges(
        indices.iter().map(|&i| items[i].transaction_date).collect(),
        before,
        after,
    )
}

/// Each date widened by `before` and `after` days, ranges that overlap or touch merged, in
/// date order.
fn date_ranges(mut dates: Vec<NaiveDate>, before: i64, after: i64) -> Vec<(NaiveDate, NaiveDate)> {
    dates.sort_unstable();
    dates.dedup();
    let mut ranges: Vec<(NaiveDate, NaiveDate)> = Vec::new();
    for date in dates {
        let (start, end) = (date - Duration::days(before), date + Duration::days(after));
        match ranges.last_mut() {
            Some((_, last_end)) if start <= *last_end + Duration::days(1) => {
                *last_end = end.max(*last_end);
            }
            _ => ranges.push((start, end)),
        }
    }
    ranges
}

/// Reconciles one account's batch and writes it: identity, pending to booked (with
/// `pending_window`, a sync's complete window), duplicates across origins, transfers. The
/// matches it makes are recorded; the account's transaction count follows the rows created.
#[allow(clippy::too_many_arguments)]
pub(in crate::store) async fn write_transactions_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    account_id: Uuid,
    items: &[NewTransaction],
    origin: Origin<'_>,
    pending_window: Option<(NaiveDate, NaiveDate)>,
    enrichment: &[&ProviderEnrichment],
    now: DateTime<Utc>,
) -> Result<Reconciled, StoreError> {
    let mut done = Reconciled::default();
    if items.is_empty() {
        return Ok(done);
    }
    let keys: Vec<&str> = items
        .iter()
        .map(|item| item.provider_transaction_id.as_str())
        .collect();
    let stored = stored_keys(tx, account_id, &keys).await?;
    let held = held_keys(tx, account_id, &keys).await?;
    let mut fates = vec![Fate::Write; items.len()];
    let mut seen = HashSet::with_capacity(items.len());
    let mut fresh = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        if let Some(kept) = held.get(*key) {
            fates[index] = Fate::Resent(*kept);
        } else if seen.insert(*key) && !stored.contains(*key) {
            fresh.push(index);
        }
    }
    let mut matches = Vec::new();
    let mut suggestions: HashMap<usize, Vec<NewMatch>> = HashMap::new();
    if !fresh.is_empty() {
        if let Some(pending_window) = pending_window
            && origin.source == TransactionSource::Sync
        {
            done.booked = take_over_pending(
                tx,
                account_id,
                items,
                &keys,
                &fresh,
                pending_window,
                origin,
                now,
                &mut fates,
            )
            .await?;
        }
        done.matched = find_duplicates(
            tx,
            account_id,
            items,
            &fresh,
            origin,
            &mut fates,
            &mut matches,
            &mut suggestions,
        )
        .await?;
    }
    let written: Vec<usize> = fates
        .iter()
        .enumerate()
        .filter(|(_, fate)| **fate == Fate::Write)
        .map(|(index, _)| index)
        .collect();
    let rows: Vec<Sourced<'_>> = written
        .iter()
        .map(|&index| Sourced {
            item: &items[index],
            source: origin.source,
            origin: origin.name,
        })
        .collect();
    let outcomes = upsert_transactions_in(tx, account_id, &rows, now).await?;
    let mut written_outcomes = written.iter().copied().zip(outcomes).peekable();
    let mut created = Vec::new();
    for (index, fate) in fates.iter().enumerate() {
        match *fate {
            Fate::Write => {
                let Some((_, (id, outcome))) =
                    written_outcomes.next_if(|(written, _)| *written == index)
                else {
                    return Err(StoreError::Other(format!("no outcome for row {index}")));
                };
                if outcome == Upserted::Created {
                    created.push((index, id));
                }
                if let Some(suggested) = suggestions.remove(&index) {
                    matches.extend(suggested.into_iter().map(|mut suggestion| {
                        suggestion.other_transaction_id = Some(id);
                        suggestion
                    }));
                }
                done.outcomes.push((id, outcome));
            }
            Fate::Booked(id) => done.outcomes.push((id, Upserted::Updated)),
            Fate::Resent(kept) => done.outcomes.push((kept, Upserted::Unchanged)),
            Fate::Held => {}
        }
    }
    // The provider's enrichment, then the user's rules (which have the last word), then
    // transfer pairing (which yields to any category).
    enrich_from_provider_in(tx, account_id, enrichment).await?;
    super::rules::run_rules_in(tx, user_id, &done.outcomes, now).await?;
    done.transfers = pair_transfers(tx, user_id, account_id, items, &created, &mut matches).await?;
    done.matches = insert_matches(tx, user_id, &matches, now).await?;
    Ok(done)
}

/// Writes the provider's category and merchant name onto rows of the account a change feed
/// upserted, before the user's rules run on them (so a rule's merchant name or category is
/// the last word, and its conditions read the provider's merchant name). The provider's
/// merchant name replaces the one derived from the description; its category (when the
/// taxonomy knows it) takes precedence over merchant and bank codes and transfer pairing,
/// never over the user's choice or a rule's. What the provider said is kept in
/// `provider_category` whatever else decides the category.
async fn enrich_from_provider_in<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    enrichment: &[&ProviderEnrichment],
) -> Result<(), StoreError> {
    for row in enrichment {
        if row.category.is_none() && row.merchant_name.is_none() {
            continue;
        }
        let category = row
            .category
            .as_deref()
            .filter(|id| crate::enrich::taxonomy::category(id).is_some());
        let merchant_name = row
            .merchant_name
            .as_deref()
            .map(str::trim)
            .filter(|name| !name.is_empty());
        query::<B>(
            "UPDATE transactions SET \
             provider_category = COALESCE($1, provider_category), \
             merchant_name = CASE WHEN merchant_name_by_user OR $2 IS NULL \
                 THEN merchant_name ELSE $2 END, \
             category_source = CASE WHEN category_by_user OR $3 IS NULL \
                 OR category_source = 'rule' THEN category_source ELSE 'provider' END, \
             category = CASE WHEN category_by_user OR $3 IS NULL \
                 OR category_source = 'rule' THEN category ELSE $3 END \
             WHERE provider_transaction_id = $4 AND account_id = $5",
        )
        .bind(row.category.as_deref())
        .bind(merchant_name)
        .bind(category)
        .bind(row.provider_transaction_id.as_str())
        .bind(account_id)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// The pending rows booked rows of the batch take over (the provider's link, else the
/// amount, date and merchant rule on the pending rows of the window that the batch no longer
/// has); rewrites each in place, so it keeps its id. How many were taken over.
#[allow(clippy::too_many_arguments)]
async fn take_over_pending<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    items: &[NewTransaction],
    keys: &[&str],
    fresh: &[usize],
    (window_start, window_end): (NaiveDate, NaiveDate),
    origin: Origin<'_>,
    now: DateTime<Utc>,
    fates: &mut [Fate],
) -> Result<u64, StoreError> {
    let booked: Vec<usize> = fresh
        .iter()
        .copied()
        .filter(|&index| items[index].status != TransactionStatus::Pending)
        .collect();
    let mut pending: Vec<Candidate> = Vec::new();
    for (first, last) in windows(items, &booked, PENDING_WINDOW_DAYS, 0) {
        let mut lookup = QueryBuilder::<B>::new(format!(
            "{CANDIDATE_COLUMNS} FROM transactions t WHERE t.account_id = "
        ));
        lookup
            .push_bind(account_id)
            .push(" AND t.status = ")
            .push_bind(TransactionStatus::Pending.as_str())
            .push(" AND t.transaction_date >= ")
            .push_bind(first)
            .push(" AND t.transaction_date <= ")
            .push_bind(last);
        let found: Vec<Candidate> = lookup.build_query_as().fetch_all(&mut **tx).await?;
        pending.extend(found);
    }
    let linked: Vec<&str> = booked
        .iter()
        .filter_map(|&index| items[index].pending_transaction_id.as_deref())
        .collect();
    for chunk in linked.chunks(B::KEYS_PER_STATEMENT) {
        let mut lookup = QueryBuilder::<B>::new(format!("{CANDIDATE_COLUMNS} FROM "));
        lookup
            .push_keyed_rows(
                chunk.iter().copied(),
                ("transactions", "t"),
                ("account_id", account_id),
                "provider_transaction_id",
            )
            .push(" WHERE t.status = ")
            .push_bind(TransactionStatus::Pending.as_str());
        let found: Vec<Candidate> = lookup.build_query_as().fetch_all(&mut **tx).await?;
        pending.extend(found);
    }
    if pending.is_empty() {
        return Ok(0);
    }
    // A pending row the batch still reports has not booked.
    let reported: HashSet<&str> = keys.iter().copied().collect();
    let mut taken = HashSet::new();
    let mut count = 0;
    for index in booked {
        let item = &items[index];
        let linked = item.pending_transaction_id.as_deref().and_then(|link| {
            pending.iter().find(|row| {
                row.provider_transaction_id == link
                    && !reported.contains(link)
                    && !taken.contains(&row.id)
            })
        });
        let pending_row = match linked {
            Some(row) => Some(row),
            None => {
                let mut found = pending.iter().filter(|row| {
                    !taken.contains(&row.id)
                        && !reported.contains(row.provider_transaction_id.as_str())
                        && (window_start..=window_end).contains(&row.transaction_date)
                        && row.currency.eq_ignore_ascii_case(&item.currency)
                        && books_pending(
                            (row.amount, row.transaction_date, row.description.as_deref()),
                            (
                                item.amount,
                                item.transaction_date,
                                item.description.as_deref(),
                            ),
                        )
                });
                match (found.next(), found.next()) {
                    (Some(row), None) => Some(row),
                    _ => None,
                }
            }
        };
        let Some(pending_row) = pending_row else {
            continue;
        };
        take_over(tx, pending_row, item, origin, now).await?;
        taken.insert(pending_row.id);
        fates[index] = Fate::Booked(pending_row.id);
        count += 1;
    }
    Ok(count)
}

/// Rewrites the pending row as the booked one, keeping its id (and so whatever the user set
/// on it), remembering the pending provider id.
async fn take_over<B: Backend>(
    tx: &mut Tx<B>,
    pending: &Candidate,
    item: &NewTransaction,
    origin: Origin<'_>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    query::<B>(
        "UPDATE transactions SET provider_transaction_id = $1, transaction_type = $2, \
         subtype = $3, status = $4, amount = $5, currency = $6, description = $7, symbol = $8, \
         security_name = $9, quantity = $10, unit_price = $11, commission = $12, \
         transaction_date = $13, settlement_date = $14, pending_transaction_id = $15, \
         source = $16, origin = $17, updated_at = $18 WHERE id = $19",
    )
    .bind(item.provider_transaction_id.as_str())
    .bind(item.transaction_type.as_str())
    .bind(item.subtype.as_deref())
    .bind(item.status.as_str())
    .bind(text(item.amount))
    .bind(currency(&item.currency))
    .bind(item.description.as_deref())
    .bind(item.symbol.as_deref())
    .bind(item.security_name.as_deref())
    .bind(optional_text(item.quantity))
    .bind(optional_text(item.unit_price))
    .bind(optional_text(item.commission))
    .bind(item.transaction_date)
    .bind(item.settlement_date)
    .bind(pending.provider_transaction_id.as_str())
    .bind(origin.source.as_str())
    .bind(origin.name)
    .bind(now)
    .bind(pending.id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The rows among `ids` already in an applied duplicate match (either side), and the
/// (kept row, incoming provider id) pairs the user rejected.
async fn duplicate_links<B: Backend>(
    tx: &mut Tx<B>,
    ids: &[Uuid],
) -> Result<(HashSet<Uuid>, HashSet<(Uuid, String)>), StoreError> {
    let mut claimed = HashSet::new();
    let mut rejected = HashSet::new();
    for chunk in ids.chunks(B::KEYS_PER_STATEMENT) {
        let mut lookup = QueryBuilder::<B>::new(
            "SELECT transaction_id, other_transaction_id, status, provider_transaction_id \
             FROM transaction_matches WHERE kind = ",
        );
        lookup
            .push_bind(MatchKind::Duplicate.as_str())
            .push(" AND (transaction_id IN (");
        let mut listed = lookup.separated(", ");
        for id in chunk {
            listed.push_bind(*id);
        }
        lookup.push(") OR other_transaction_id IN (");
        let mut listed = lookup.separated(", ");
        for id in chunk {
            listed.push_bind(*id);
        }
        lookup.push("))");
        let found: Vec<(Uuid, Option<Uuid>, String, String)> =
            lookup.build_query_as().fetch_all(&mut **tx).await?;
        for (kept, other, status, key) in found {
            match MatchStatus::parse(&status) {
                Some(MatchStatus::Automatic | MatchStatus::Accepted) => {
                    claimed.insert(kept);
                    claimed.extend(other);
                }
                Some(MatchStatus::Rejected) => {
                    rejected.insert((kept, key));
                }
                _ => {}
            }
        }
    }
    Ok((claimed, rejected))
}

/// Compares the new rows with the account's rows of other origins: one strong candidate
/// holds the row back (an `automatic` match), several or a weak one give `suggested` matches
/// (recorded once the row is written). How many rows were held back.
#[allow(clippy::too_many_arguments)]
async fn find_duplicates<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    items: &[NewTransaction],
    fresh: &[usize],
    origin: Origin<'_>,
    fates: &mut [Fate],
    matches: &mut Vec<NewMatch>,
    suggestions: &mut HashMap<usize, Vec<NewMatch>>,
) -> Result<u64, StoreError> {
    let incoming: Vec<usize> = fresh
        .iter()
        .copied()
        .filter(|&index| fates[index] == Fate::Write)
        .collect();
    let mut candidates: Vec<Candidate> = Vec::new();
    for (first, last) in windows(
        items,
        &incoming,
        DUPLICATE_WINDOW_DAYS,
        DUPLICATE_WINDOW_DAYS,
    ) {
        let mut lookup = QueryBuilder::<B>::new(format!(
            "{CANDIDATE_COLUMNS} FROM transactions t WHERE t.account_id = "
        ));
        lookup
            .push_bind(account_id)
            .push(" AND t.transaction_date >= ")
            .push_bind(first)
            .push(" AND t.transaction_date <= ")
            .push_bind(last)
            .push(" AND t.origin <> ")
            .push_bind(origin.name);
        let found: Vec<Candidate> = lookup.build_query_as().fetch_all(&mut **tx).await?;
        candidates.extend(found);
    }
    if candidates.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = candidates.iter().map(|candidate| candidate.id).collect();
    let (mut claimed, rejected) = duplicate_links(tx, &ids).await?;
    let mut by_amount: HashMap<Decimal, Vec<&Candidate>> = HashMap::new();
    for candidate in &candidates {
        by_amount
            .entry(candidate.amount.normalize())
            .or_default()
            .push(candidate);
    }
    let mut held = 0;
    for index in incoming {
        let item = &items[index];
        let Some(same_amount) = by_amount.get(&item.amount.normalize()) else {
            continue;
        };
        let mut found: Vec<(&Candidate, f64)> = same_amount
            .iter()
            .filter(|candidate| {
                !claimed.contains(&candidate.id)
                    && candidate.currency.eq_ignore_ascii_case(&item.currency)
                    && within_days(
                        candidate.transaction_date,
                        item.transaction_date,
                        DUPLICATE_WINDOW_DAYS,
                    )
                    && !rejected.contains(&(candidate.id, item.provider_transaction_id.clone()))
            })
            .map(|candidate| {
                let score = description_similarity(
                    candidate.description.as_deref(),
                    item.description.as_deref(),
                );
                (*candidate, score)
            })
            .filter(|(_, score)| *score >= SIMILARITY_THRESHOLD)
            .collect();
        found.sort_by(|left, right| right.1.total_cmp(&left.1));
        let several = found.len();
        let days = |candidate: &Candidate| {
            (candidate.transaction_date - item.transaction_date)
                .num_days()
                .abs()
        };
        match found.as_slice() {
            [] => {}
            [(candidate, score)] if *score >= STRONG_SIMILARITY => {
                claimed.insert(candidate.id);
                fates[index] = Fate::Held;
                held += 1;
                matches.push(NewMatch {
                    kind: MatchKind::Duplicate,
                    status: MatchStatus::Automatic,
                    transaction_id: candidate.id,
                    other_transaction_id: None,
                    account_id,
                    provider_transaction_id: item.provider_transaction_id.clone(),
                    held: Some(HeldRow::json(item, origin)),
                    confidence: confidence(*score),
                    reason: format!(
                        "Another source's row of the same amount, dated {} days apart, with a \
                         description {}% alike.",
                        days(candidate),
                        percent(*score)
                    ),
                });
            }
            _ => {
                let suggested = found
                    .iter()
                    .take(MAX_SUGGESTIONS)
                    .map(|(candidate, score)| {
                        let reason = if several > 1 {
                            format!(
                                "One of {several} rows of other sources with the same amount \
                                 within {DUPLICATE_WINDOW_DAYS} days (dated {} days apart, \
                                 description {}% alike).",
                                days(candidate),
                                percent(*score)
                            )
                        } else {
                            format!(
                                "Another source's row of the same amount, dated {} days \
                                 apart, but the descriptions are only {}% alike.",
                                days(candidate),
                                percent(*score)
                            )
                        };
                        // Precision is irrelevant at these sizes (at most a handful).
                        #[allow(clippy::cast_precision_loss)]
                        let share = *score / several as f64;
                        NewMatch {
                            kind: MatchKind::Duplicate,
                            status: MatchStatus::Suggested,
                            transaction_id: candidate.id,
                            other_transaction_id: None,
                            account_id,
                            provider_transaction_id: item.provider_transaction_id.clone(),
                            held: None,
                            confidence: confidence(share),
                            reason,
                        }
                    })
                    .collect();
                suggestions.insert(index, suggested);
            }
        }
    }
    Ok(held)
}

/// A new row as a transfer leg.
fn leg_of(item: &NewTransaction) -> (Decimal, &str, NaiveDate) {
    (item.amount, item.currency.as_str(), item.transaction_date)
}

/// A stored row as a transfer leg.
fn leg_of_candidate(row: &Candidate) -> (Decimal, &str, NaiveDate) {
    (row.amount, row.currency.as_str(), row.transaction_date)
}

/// Pairs each row `created` (input index and id) with the single row of opposite amount on
/// another of the user's accounts within the window, when that row has no other rival among
/// the created rows either (`automatic`, both get `transfer_transaction_id`); ambiguous
/// pairings are `suggested`. How many pairs were made.
async fn pair_transfers<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    account_id: Uuid,
    items: &[NewTransaction],
    created: &[(usize, Uuid)],
    matches: &mut Vec<NewMatch>,
) -> Result<u64, StoreError> {
    let legs: Vec<(usize, Uuid)> = created
        .iter()
        .copied()
        .filter(|(index, _)| {
            let item = &items[*index];
            item.status != TransactionStatus::Pending && !item.amount.is_zero()
        })
        .collect();
    let indices: Vec<usize> = legs.iter().map(|(index, _)| *index).collect();
    let mut candidates: Vec<Candidate> = Vec::new();
    for (first, last) in windows(items, &indices, TRANSFER_WINDOW_DAYS, TRANSFER_WINDOW_DAYS) {
        // From the user's connections to their accounts to each account's date range
        // (`transactions_reconcile`). "Not paired yet" is written so that no index can serve
        // it: as a plain `IS NULL` SQLite's planner chose `transactions_transfer` for it, a
        // scan of every unpaired row of every user.
        let mut lookup = QueryBuilder::<B>::new(format!(
            "{CANDIDATE_COLUMNS} FROM transactions t JOIN accounts a ON a.id = t.account_id \
             JOIN connections c ON c.id = a.connection_id WHERE c.user_id = "
        ));
        lookup
            .push_bind(user_id)
            .push(" AND t.account_id <> ")
            .push_bind(account_id)
            .push(" AND t.transaction_date >= ")
            .push_bind(first)
            .push(" AND t.transaction_date <= ")
            .push_bind(last)
            .push(
                " AND (CASE WHEN t.transfer_transaction_id IS NULL THEN 1 ELSE 0 END) = 1 \
                 AND t.status <> ",
            )
            .push_bind(TransactionStatus::Pending.as_str());
        let found: Vec<Candidate> = lookup.build_query_as().fetch_all(&mut **tx).await?;
        candidates.extend(found);
    }
    if candidates.is_empty() {
        return Ok(0);
    }
    let mut by_amount: HashMap<Decimal, Vec<&Candidate>> = HashMap::new();
    for candidate in &candidates {
        by_amount
            .entry(candidate.amount.normalize())
            .or_default()
            .push(candidate);
    }
    let mut legs_by_amount: HashMap<Decimal, Vec<(usize, Uuid)>> = HashMap::new();
    for leg in &legs {
        legs_by_amount
            .entry(items[leg.0].amount.normalize())
            .or_default()
            .push(*leg);
    }
    let mut paired: HashSet<Uuid> = HashSet::new();
    let mut pairs = 0;
    for (index, id) in &legs {
        let item = &items[*index];
        let Some(opposite) = by_amount.get(&(-item.amount).normalize()) else {
            continue;
        };
        let found: Vec<&Candidate> = opposite
            .iter()
            .copied()
            .filter(|row| {
                !paired.contains(&row.id) && transfer_legs(leg_of(item), leg_of_candidate(row))
            })
            .collect();
        let rivals = |row: &Candidate| {
            legs_by_amount
                .get(&item.amount.normalize())
                .map_or(0, |same| {
                    same.iter()
                        .filter(|(other, other_id)| {
                            !paired.contains(other_id)
                                && transfer_legs(leg_of(&items[*other]), leg_of_candidate(row))
                        })
                        .count()
                })
        };
        let days = |row: &Candidate| {
            (row.transaction_date - item.transaction_date)
                .num_days()
                .abs()
        };
        match found.as_slice() {
            [] => {}
            [row] if rivals(row) == 1 => {
                // Both legs, and the transfer category on a leg nothing else categorised
                // (transfer pairing is last in precedence; a user's choice stays).
                for (leg, other) in [(*id, row.id), (row.id, *id)] {
                    query::<B>(
                        "UPDATE transactions SET transfer_transaction_id = $1, \
                         category = CASE WHEN category IS NULL AND NOT category_by_user \
                             THEN CASE WHEN amount LIKE '-%' THEN $3 ELSE $4 END \
                             ELSE category END, \
                         category_source = CASE WHEN category IS NULL AND NOT category_by_user \
                             THEN $5 ELSE category_source END \
                         WHERE id = $2",
                    )
                    .bind(other)
                    .bind(leg)
                    .bind(TRANSFER_OUT)
                    .bind(TRANSFER_IN)
                    .bind(CategorySource::Transfer.as_str())
                    .execute(&mut **tx)
                    .await?;
                }
                paired.insert(*id);
                paired.insert(row.id);
                pairs += 1;
                #[allow(clippy::cast_precision_loss)]
                let score = 1.0 - 0.05 * days(row) as f64;
                matches.push(NewMatch {
                    kind: MatchKind::Transfer,
                    status: MatchStatus::Automatic,
                    transaction_id: row.id,
                    other_transaction_id: Some(*id),
                    account_id,
                    provider_transaction_id: item.provider_transaction_id.clone(),
                    held: None,
                    confidence: confidence(score),
                    reason: format!(
                        "Opposite amounts in {} on two of your accounts, dated {} days apart.",
                        currency(&item.currency),
                        days(row)
                    ),
                });
            }
            _ => {
                let several = found.len().max(rivals(found[0]));
                for row in found.iter().take(MAX_SUGGESTIONS) {
                    #[allow(clippy::cast_precision_loss)]
                    let score = (1.0 - 0.05 * days(row) as f64) / several as f64;
                    matches.push(NewMatch {
                        kind: MatchKind::Transfer,
                        status: MatchStatus::Suggested,
                        transaction_id: row.id,
                        other_transaction_id: Some(*id),
                        account_id,
                        provider_transaction_id: item.provider_transaction_id.clone(),
                        held: None,
                        confidence: confidence(score),
                        reason: format!(
                            "One of several rows of opposite amount in {} on your other \
                             accounts within {TRANSFER_WINDOW_DAYS} days (dated {} days apart).",
                            currency(&item.currency),
                            days(row)
                        ),
                    });
                }
            }
        }
    }
    Ok(pairs)
}

/// Records the matches; what was recorded.
pub(in crate::store) async fn insert_matches<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    matches: &[NewMatch],
    now: DateTime<Utc>,
) -> Result<Vec<MatchRecord>, StoreError> {
    let mut records = Vec::with_capacity(matches.len());
    for chunk in matches.chunks(B::ROWS_PER_STATEMENT) {
        let ids: Vec<Uuid> = chunk.iter().map(|_| Uuid::now_v7()).collect();
        let mut insert = QueryBuilder::<B>::new(
            "INSERT INTO transaction_matches (id, user_id, kind, status, transaction_id, \
             other_transaction_id, account_id, provider_transaction_id, held, confidence, \
             reason, created_at, updated_at) ",
        );
        insert.push_values(ids.iter().zip(chunk), |mut row, (id, new)| {
            row.push_bind(*id)
                .push_bind(user_id)
                .push_bind(new.kind.as_str())
                .push_bind(new.status.as_str())
                .push_bind(new.transaction_id)
                .push_bind(new.other_transaction_id)
                .push_bind(new.account_id)
                .push_bind(new.provider_transaction_id.as_str())
                .push_bind(new.held.as_deref())
                .push_bind(text(new.confidence))
                .push_bind(new.reason.as_str())
                .push_bind(now)
                .push_bind(now);
        });
        insert.build().execute(&mut **tx).await?;
        records.extend(ids.iter().zip(chunk).map(|(id, new)| {
            MatchRecord {
                id: *id,
                user_id,
                kind: new.kind,
                status: new.status,
                transaction_ids: std::iter::once(new.transaction_id)
                    .chain(new.other_transaction_id)
                    .collect(),
                confidence: new.confidence,
                reason: new.reason.clone(),
                created_at: now,
                updated_at: now,
            }
        }));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::date_ranges;

    fn day(month: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, month, day).expect("date")
    }

    #[test]
    fn dates_near_each_other_are_one_range_and_far_ones_stay_apart() {
        assert!(date_ranges(Vec::new(), 3, 3).is_empty());
        // Out of order, repeated, within one window of each other: one range.
        let near = vec![day(3, 5), day(3, 1), day(3, 5), day(3, 8)];
        assert_eq!(date_ranges(near, 3, 3), [(day(2, 26), day(3, 11))]);
        // Ranges that only touch merge too; a year apart are two look-ups, not the year.
        let touching = vec![day(3, 1), day(3, 8)];
        assert_eq!(date_ranges(touching, 3, 3), [(day(2, 26), day(3, 11))]);
        let far = vec![day(1, 10), day(12, 20)];
        assert_eq!(
            date_ranges(far, 7, 0),
            [(day(1, 3), day(1, 10)), (day(12, 13), day(12, 20))]
        );
    }
}
