//! Across the user's accounts: the transaction search, and spending per period and group.
//!
//! Spending adds up the user's transactions on active accounts, transfers excluded (rows
//! with `transfer_transaction_id`, paired by the reconciler), failed and cancelled ones too:
//! per currency, per period of the interval, money out (`amount < 0`, summed as a positive
//! total) per group, and income (`amount > 0`) apart. Every sum is exact (checked decimal
//! arithmetic): a sum past the largest decimal is refused, never wrapped or rounded.

use std::collections::{BTreeMap, HashMap};

use chrono::{Datelike as _, Days, Months, NaiveDate};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::worth::Interval;
use super::{RecordError, Records};
use crate::enums::string_enum;
use crate::store::{SpendingRow, TransactionPosition, TransactionRecord, TransactionSearch};

/// The most periods one spending summary holds.
pub(crate) const MAX_PERIODS: usize = 1_000;

/// How many rows a spending summary reads from the store at once.
const SPENDING_CHUNK: u32 = 10_000;

string_enum! {
    /// What spending is grouped by within a period.
    pub(crate) enum GroupBy {
        /// The category id (uncategorised rows form the `null` group).
        Category => "category",
        /// The merchant name (rows without one form the `null` group).
        Merchant => "merchant",
        /// The account id.
        Account => "account",
    }
}

/// Why the periods of a spending summary cannot be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PeriodsError {
    /// `from` is after `to`.
    #[error("from is after to")]
    AfterTo,
    /// The range holds more than [`MAX_PERIODS`] periods at this interval.
    #[error("more than {MAX_PERIODS} periods")]
    TooMany,
}

/// The first day of the period of `interval` holding `date`: the day itself, the Monday of
/// its ISO week, or the first of its month.
fn period_start(date: NaiveDate, interval: Interval) -> NaiveDate {
    match interval {
        Interval::Day => date,
        Interval::Week => date
            .checked_sub_days(Days::new(u64::from(date.weekday().num_days_from_monday())))
            .unwrap_or(date),
        Interval::Month => date.with_day(1).unwrap_or(date),
    }
}

/// The first day of the period after the one starting at `start`.
fn next_start(start: NaiveDate, interval: Interval) -> Option<NaiveDate> {
    match interval {
        Interval::Day => start.checked_add_days(Days::new(1)),
        Interval::Week => start.checked_add_days(Days::new(7)),
        Interval::Month => start.checked_add_months(Months::new(1)),
    }
}

/// The periods from `from` to `to` at `interval` as `(start, end)` days, oldest first: whole
/// calendar days, ISO weeks (Monday to Sunday) or calendar months, the first and last cut to
/// the range.
pub(crate) fn periods(
    from: NaiveDate,
    to: NaiveDate,
    interval: Interval,
) -> Result<Vec<(NaiveDate, NaiveDate)>, PeriodsError> {
    if from > to {
        return Err(PeriodsError::AfterTo);
    }
    let mut periods = Vec::new();
    let mut start = period_start(from, interval);
    while start <= to {
        if periods.len() == MAX_PERIODS {
            return Err(PeriodsError::TooMany);
        }
        let next = next_start(start, interval);
        let end = next
            .and_then(|next| next.pred_opt())
            .map_or(to, |end| end.min(to));
        periods.push((start.max(from), end));
        match next {
            Some(next) => start = next,
            None => break,
        }
    }
    Ok(periods)
}

/// A total and how many rows make it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// The sum (positive: money out is counted by its size).
    pub(crate) total: Decimal,
    /// The rows summed.
    pub(crate) count: u64,
}

impl Tally {
    /// Adds one row of this size; `None` past the largest decimal.
    fn add(&mut self, amount: Decimal) -> Option<()> {
        self.total = self.total.checked_add(amount)?;
        self.count += 1;
        Some(())
    }
}

/// One period of a currency's spending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeriodSpending {
    /// Its first day (within the range).
    pub(crate) start: NaiveDate,
    /// Its last day (within the range).
    pub(crate) end: NaiveDate,
    /// Money out, all groups together.
    pub(crate) spending: Tally,
    /// Money in.
    pub(crate) income: Tally,
    /// Money out per group (`None`: no category, or no merchant name), largest first.
    pub(crate) groups: Vec<(Option<String>, Tally)>,
}

/// One currency's spending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CurrencySpending {
    /// ISO 4217 code.
    pub(crate) currency: String,
    /// Money out over the whole range.
    pub(crate) spending: Tally,
    /// Money in over the whole range.
    pub(crate) income: Tally,
    /// Every period of the range, oldest first (empty ones included).
    pub(crate) periods: Vec<PeriodSpending>,
}

/// What a currency's rows add up to while they are read.
#[derive(Default)]
struct Sums {
    spending: Tally,
    income: Tally,
    /// Per period: money out, money in, money out per group.
    periods: Vec<(Tally, Tally, HashMap<Option<String>, Tally>)>,
}

impl Sums {
    fn add(&mut self, period: usize, group: Option<String>, amount: Decimal) -> Option<()> {
        let (out, income, groups) = self.periods.get_mut(period)?;
        if amount.is_sign_negative() {
            // Negating a decimal cannot overflow (its range is symmetric).
            let size = -amount;
            self.spending.add(size)?;
            out.add(size)?;
            groups.entry(group).or_default().add(size)?;
        } else {
            self.income.add(amount)?;
            income.add(amount)?;
        }
        Some(())
    }
}

/// The group of a row.
fn group_of(row: &mut SpendingRow, group_by: GroupBy) -> Option<String> {
    match group_by {
        GroupBy::Category => row.category.take(),
        GroupBy::Merchant => row.merchant_name.take(),
        GroupBy::Account => Some(row.account_id.to_string()),
    }
}

impl Records {
    /// The user's transactions on active accounts matching `search`, newest first, up to
    /// `search.limit + 1` (the extra row tells that more follow).
    pub(crate) async fn search_transactions(
        &self,
        user_id: Uuid,
        search: &TransactionSearch,
    ) -> Result<Vec<TransactionRecord>, RecordError> {
        Ok(self.store.search_transactions(user_id, search).await?)
    }

    /// The user's spending over `periods` (from [`periods`]), per currency (by code).
    pub(crate) async fn spending(
        &self,
        user_id: Uuid,
        periods: &[(NaiveDate, NaiveDate)],
        group_by: GroupBy,
    ) -> Result<Vec<CurrencySpending>, RecordError> {
        let (Some((from, _)), Some((_, to))) = (periods.first(), periods.last()) else {
            return Ok(Vec::new());
        };
        let mut by_currency: BTreeMap<String, Sums> = BTreeMap::new();
        let mut after: Option<TransactionPosition> = None;
        loop {
            let rows = self
                .store
                .spending_rows(user_id, *from, *to, after, SPENDING_CHUNK)
                .await?;
            let full = rows.len() >= usize::try_from(SPENDING_CHUNK).unwrap_or(usize::MAX);
            for mut row in rows {
                after = Some(TransactionPosition {
                    transaction_date: row.transaction_date,
                    id: row.id,
                });
                if row.amount.is_zero() {
                    continue;
                }
                // The period whose start is the last one on or before the row's date.
                let Some(period) = periods
                    .partition_point(|(start, _)| *start <= row.transaction_date)
                    .checked_sub(1)
                else {
                    continue;
                };
                let group = group_of(&mut row, group_by);
                let sums = by_currency
                    .entry(std::mem::take(&mut row.currency))
                    .or_insert_with(|| Sums {
                        periods: vec![Default::default(); periods.len()],
                        ..Sums::default()
                    });
                sums.add(period, group, row.amount)
                    .ok_or(RecordError::SumTooLarge)?;
            }
            if !full {
                break;
            }
        }
        Ok(by_currency
            .into_iter()
            .map(|(currency, sums)| CurrencySpending {
                currency,
                spending: sums.spending,
                income: sums.income,
                periods: periods
                    .iter()
                    .zip(sums.periods)
                    .map(|((start, end), (spending, income, groups))| {
                        let mut groups: Vec<(Option<String>, Tally)> = groups.into_iter().collect();
                        // Largest first; ties by key, the `null` group last.
                        groups.sort_by(|(a_key, a), (b_key, b)| {
                            b.total.cmp(&a.total).then_with(|| match (a_key, b_key) {
                                (Some(a), Some(b)) => a.cmp(b),
                                (Some(_), None) => std::cmp::Ordering::Less,
                                (None, Some(_)) => std::cmp::Ordering::Greater,
                                (None, None) => std::cmp::Ordering::Equal,
                            })
                        });
                        PeriodSpending {
                            start: *start,
                            end: *end,
                            spending,
                            income,
                            groups,
                        }
                    })
                    .collect(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        text.parse().expect("date")
    }

    #[test]
    fn months_are_calendar_months_cut_to_the_range() {
        let months = periods(day("2026-01-15"), day("2026-03-10"), Interval::Month).expect("ok");
        assert_eq!(
            months,
            [
                (day("2026-01-15"), day("2026-01-31")),
                (day("2026-02-01"), day("2026-02-28")),
                (day("2026-03-01"), day("2026-03-10")),
            ]
        );
    }

    #[test]
    fn weeks_run_monday_to_sunday() {
        // 2026-01-01 is a Thursday.
        let weeks = periods(day("2026-01-01"), day("2026-01-12"), Interval::Week).expect("ok");
        assert_eq!(
            weeks,
            [
                (day("2026-01-01"), day("2026-01-04")),
                (day("2026-01-05"), day("2026-01-11")),
                (day("2026-01-12"), day("2026-01-12")),
            ]
        );
    }

    #[test]
    fn at_most_a_thousand_periods() {
        let from = day("2024-01-01");
        let last = from.checked_add_days(Days::new(999)).expect("date");
        assert_eq!(
            periods(from, last, Interval::Day).map(|p| p.len()),
            Ok(1_000)
        );
        let beyond = last.succ_opt().expect("date");
        assert_eq!(
            periods(from, beyond, Interval::Day),
            Err(PeriodsError::TooMany)
        );
        assert_eq!(
            periods(beyond, from, Interval::Day),
            Err(PeriodsError::AfterTo)
        );
        assert_eq!(
            periods(day("2026-02-02"), day("2026-02-02"), Interval::Month).map(|p| p.len()),
            Ok(1)
        );
    }

    #[test]
    fn sums_are_checked() {
        let mut sums = Sums {
            periods: vec![Default::default(); 1],
            ..Sums::default()
        };
        assert_eq!(sums.add(0, None, Decimal::MIN), Some(()));
        assert_eq!(sums.add(0, None, Decimal::MIN), None);
        assert_eq!(sums.add(1, None, Decimal::ONE), None);
        assert_eq!(sums.income, Tally::default());
    }
}
