//! Net worth and the portfolio summary: what a personal-finance dashboard draws first.
//!
//! Balances are from the owner's point of view (money owed is negative), as every source
//! stores them. Per currency, never converted:
//!
//! - **Net worth now**: the balances of the user's active accounts; `assets` sums the positive
//!   ones, `liabilities` the negative ones (a negative amount, so `net_worth = assets +
//!   liabilities`), and `by_account_type` sums every balance per account type. Holdings count
//!   through their account's balance, never twice.
//! - **History**: points counted back from `to` by the interval (`to`, `to` − 1 interval, …,
//!   none before `from`), oldest first; at each point, each active account's latest balance
//!   snapshot captured on or before that date (through its end, UTC). One store query per
//!   currency ([`SnapshotStore::balances_at`](crate::store::SnapshotStore::balances_at)).
//!   Months step back by calendar month from `to` (a 31st falls back to the month's last day).
//! - **Portfolio**: the active holdings of active accounts: market value, cost basis (of the
//!   holdings that report one), unrealized gain or loss (reported, else market value minus
//!   cost basis, else not counted), market value per asset type, and the ten largest positions
//!   by market value, summed per symbol (trimmed, compared upper case) across accounts.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Days, Months, NaiveDate, NaiveTime, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::{RecordError, Records};
use crate::enums::string_enum;
use crate::store::{AccountFilter, AssetType, HoldingFilter, HoldingRecord, PageAfter};

/// The most history points one request may ask for.
pub(crate) const MAX_POINTS: usize = 1_000;

/// The most active accounts × points one history may cost: each is one balance look-up, so
/// this bounds the query's time (about a second) whatever the user holds. 250 accounts get
/// the full 1,000 daily points; 10,000 accounts get 25 (two years by month).
pub(crate) const MAX_ACCOUNT_POINTS: usize = 250_000;

/// The most active holdings one portfolio adds up (all held at once while it is computed);
/// beyond, it is refused rather than read.
pub(crate) const MAX_PORTFOLIO_HOLDINGS: u32 = 10_000;

/// How many positions the portfolio lists per currency.
pub(crate) const TOP_HOLDINGS: usize = 10;

string_enum! {
    /// The spacing of a net worth history.
    pub(crate) enum Interval {
        /// One point a day.
        Day => "day",
        /// One point every seven days.
        Week => "week",
        /// One point a calendar month.
        Month => "month",
    }
}

/// Why a history cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PointsError {
    /// `from` is after `to`.
    #[error("from is after to")]
    AfterTo,
    /// The range holds more than [`MAX_POINTS`] points at this interval.
    #[error("more than {MAX_POINTS} points")]
    TooMany,
}

/// The history dates from `from` to `to` at `interval`, counted back from `to`, oldest first.
pub(crate) fn points(
    from: NaiveDate,
    to: NaiveDate,
    interval: Interval,
) -> Result<Vec<NaiveDate>, PointsError> {
    if from > to {
        return Err(PointsError::AfterTo);
    }
    let mut dates = Vec::new();
    for step in 0u32.. {
        let date = match interval {
            Interval::Day => to.checked_sub_days(Days::new(u64::from(step))),
            Interval::Week => to.checked_sub_days(Days::new(7 * u64::from(step))),
            Interval::Month => to.checked_sub_months(Months::new(step)),
        };
        let Some(date) = date.filter(|date| *date >= from) else {
            break;
        };
        if dates.len() == MAX_POINTS {
            return Err(PointsError::TooMany);
        }
        dates.push(date);
    }
    dates.reverse();
    Ok(dates)
}

/// Assets, liabilities and their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Worth {
    /// Assets plus liabilities.
    pub(crate) net_worth: Decimal,
    /// The sum of the positive balances.
    pub(crate) assets: Decimal,
    /// The sum of the negative balances (negative or zero).
    pub(crate) liabilities: Decimal,
}

impl Worth {
    fn add(&mut self, balance: Decimal) {
        if balance.is_sign_negative() {
            self.liabilities = self.liabilities.saturating_add(balance);
        } else {
            self.assets = self.assets.saturating_add(balance);
        }
        self.net_worth = self.net_worth.saturating_add(balance);
    }
}

/// The net worth of one currency.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CurrencyWorth {
    /// ISO 4217 code.
    pub(crate) currency: String,
    /// Now, from the accounts' balances.
    pub(crate) now: Worth,
    /// Every balance summed per account type.
    pub(crate) by_account_type: BTreeMap<&'static str, Decimal>,
    /// One entry per point, oldest first.
    pub(crate) history: Vec<(NaiveDate, Worth)>,
}

/// The net worth of a user, per currency.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NetWorth {
    /// One entry per currency of the active accounts, by code.
    pub(crate) currencies: Vec<CurrencyWorth>,
    /// When it was computed.
    pub(crate) as_of: DateTime<Utc>,
}

/// One position summed across accounts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TopHolding {
    /// The symbol, upper case.
    pub(crate) symbol: String,
    /// The first security name seen.
    pub(crate) security_name: Option<String>,
    /// The first asset type seen.
    pub(crate) asset_type: AssetType,
    /// Units, summed.
    pub(crate) quantity: Decimal,
    /// Market value, summed.
    pub(crate) market_value: Decimal,
    /// Cost basis of the positions that report one; `None` when none does.
    pub(crate) cost_basis: Option<Decimal>,
    /// Unrealized gain or loss of the positions that report or imply one.
    pub(crate) unrealized_gain_loss: Option<Decimal>,
    /// How many accounts hold it.
    pub(crate) account_count: usize,
}

/// The portfolio of one currency.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CurrencyPortfolio {
    /// ISO 4217 code.
    pub(crate) currency: String,
    /// Market value of every position.
    pub(crate) market_value: Decimal,
    /// Cost basis of the positions that report one.
    pub(crate) cost_basis: Decimal,
    /// Unrealized gain or loss of the positions that report or imply one.
    pub(crate) unrealized_gain_loss: Decimal,
    /// Market value per asset type.
    pub(crate) by_asset_type: BTreeMap<&'static str, Decimal>,
    /// Up to [`TOP_HOLDINGS`] positions, largest market value first (then symbol).
    pub(crate) top_holdings: Vec<TopHolding>,
}

/// The portfolio of a user, per currency.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Portfolio {
    /// One entry per currency of the holdings, by code.
    pub(crate) currencies: Vec<CurrencyPortfolio>,
    /// When it was computed.
    pub(crate) as_of: DateTime<Utc>,
}

/// The end of a day, UTC: the first instant of the next one (exclusive).
fn end_of(date: NaiveDate) -> DateTime<Utc> {
    date.checked_add_days(Days::new(1))
        .unwrap_or(date)
        .and_time(NaiveTime::MIN)
        .and_utc()
}

fn add_to(map: &mut BTreeMap<&'static str, Decimal>, key: &'static str, amount: Decimal) {
    let sum = map.entry(key).or_default();
    *sum = sum.saturating_add(amount);
}

fn optional_add(sum: Option<Decimal>, amount: Option<Decimal>) -> Option<Decimal> {
    match (sum, amount) {
        (Some(sum), Some(amount)) => Some(sum.saturating_add(amount)),
        (sum, amount) => sum.or(amount),
    }
}

/// A holding's unrealized gain or loss: reported, else market value minus cost basis.
fn gain(holding: &HoldingRecord) -> Option<Decimal> {
    holding.unrealized_gain_loss.or_else(|| {
        holding
            .cost_basis
            .map(|cost| holding.market_value.saturating_sub(cost))
    })
}

impl Records {
    /// The user's net worth now and at each of `dates` (oldest first), per currency.
    pub(crate) async fn net_worth(
        &self,
        user_id: Uuid,
        dates: &[NaiveDate],
    ) -> Result<NetWorth, RecordError> {
        let as_of = crate::store::now();
        let filter = AccountFilter {
            active_only: true,
            ..AccountFilter::default()
        };
        let accounts = self.store.accounts_for_user(user_id, &filter).await?;
        if accounts.len().saturating_mul(dates.len()) > MAX_ACCOUNT_POINTS {
            return Err(RecordError::HistoryTooCostly {
                accounts: accounts.len(),
                points: dates.len(),
            });
        }
        let mut by_currency: BTreeMap<&str, (Worth, BTreeMap<&'static str, Decimal>)> =
            BTreeMap::new();
        for account in &accounts {
            let (now, by_type) = by_currency.entry(account.currency.as_str()).or_default();
            now.add(account.balance_amount);
            add_to(
                by_type,
                account.account_type.as_str(),
                account.balance_amount,
            );
        }
        let ends: Vec<DateTime<Utc>> = dates.iter().copied().map(end_of).collect();
        let mut currencies = Vec::with_capacity(by_currency.len());
        for (currency, (now, by_account_type)) in by_currency {
            let mut history: Vec<(NaiveDate, Worth)> =
                dates.iter().map(|date| (*date, Worth::default())).collect();
            for row in self.store.balances_at(user_id, currency, &ends).await? {
                let point = usize::try_from(row.point).ok();
                if let Some((_, worth)) = point.and_then(|point| history.get_mut(point)) {
                    worth.add(row.balance);
                }
            }
            currencies.push(CurrencyWorth {
                currency: currency.to_owned(),
                now,
                by_account_type,
                history,
            });
        }
        Ok(NetWorth { currencies, as_of })
    }

    /// The user's portfolio: the active holdings of the active accounts, per currency.
    pub(crate) async fn portfolio(&self, user_id: Uuid) -> Result<Portfolio, RecordError> {
        let as_of = crate::store::now();
        let account_filter = AccountFilter {
            active_only: true,
            ..AccountFilter::default()
        };
        let active: HashSet<Uuid> = self
            .store
            .accounts_for_user(user_id, &account_filter)
            .await?
            .into_iter()
            .map(|account| account.id)
            .collect();
        let holding_filter = HoldingFilter {
            active_only: true,
            ..HoldingFilter::default()
        };
        let page = self
            .store
            .holdings_for_user(
                user_id,
                &holding_filter,
                PageAfter::first(MAX_PORTFOLIO_HOLDINGS),
            )
            .await?;
        if page.total_count > u64::from(MAX_PORTFOLIO_HOLDINGS) {
            return Err(RecordError::PortfolioTooCostly {
                holdings: page.total_count,
            });
        }
        let holdings = page.items;
        let mut by_currency: BTreeMap<&str, Vec<&HoldingRecord>> = BTreeMap::new();
        for holding in holdings
            .iter()
            .filter(|holding| active.contains(&holding.account_id))
        {
            by_currency
                .entry(holding.currency.as_str())
                .or_default()
                .push(holding);
        }
        let currencies = by_currency
            .into_iter()
            .map(|(currency, holdings)| currency_portfolio(currency, &holdings))
            .collect();
        Ok(Portfolio { currencies, as_of })
    }
}

fn currency_portfolio(currency: &str, holdings: &[&HoldingRecord]) -> CurrencyPortfolio {
    let mut market_value = Decimal::ZERO;
    let mut cost_basis = Decimal::ZERO;
    let mut unrealized = Decimal::ZERO;
    let mut by_asset_type = BTreeMap::new();
    let mut positions: Vec<TopHolding> = Vec::new();
    let mut index: HashMap<String, (usize, HashSet<Uuid>)> = HashMap::new();
    for holding in holdings {
        let gain = gain(holding);
        market_value = market_value.saturating_add(holding.market_value);
        cost_basis = cost_basis.saturating_add(holding.cost_basis.unwrap_or_default());
        unrealized = unrealized.saturating_add(gain.unwrap_or_default());
        add_to(
            &mut by_asset_type,
            holding.asset_type.as_str(),
            holding.market_value,
        );
        let symbol = holding.symbol.trim().to_uppercase();
        let (at, accounts) = index.entry(symbol.clone()).or_insert_with(|| {
            positions.push(TopHolding {
                symbol,
                security_name: holding.security_name.clone(),
                asset_type: holding.asset_type,
                quantity: Decimal::ZERO,
                market_value: Decimal::ZERO,
                cost_basis: None,
                unrealized_gain_loss: None,
                account_count: 0,
            });
            (positions.len() - 1, HashSet::new())
        });
        accounts.insert(holding.account_id);
        if let Some(position) = positions.get_mut(*at) {
            position.quantity = position.quantity.saturating_add(holding.quantity);
            position.market_value = position.market_value.saturating_add(holding.market_value);
            position.cost_basis = optional_add(position.cost_basis, holding.cost_basis);
            position.unrealized_gain_loss = optional_add(position.unrealized_gain_loss, gain);
            position.account_count = accounts.len();
        }
    }
    positions.sort_by(|a, b| {
        b.market_value
            .cmp(&a.market_value)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    positions.truncate(TOP_HOLDINGS);
    CurrencyPortfolio {
        currency: currency.to_owned(),
        market_value,
        cost_basis,
        unrealized_gain_loss: unrealized,
        by_asset_type,
        top_holdings: positions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        text.parse().expect("date")
    }

    #[test]
    fn points_count_back_from_to() {
        let months = points(day("2024-01-15"), day("2024-05-31"), Interval::Month).expect("ok");
        // Counted back from the 31st: each month's last day, none before `from`.
        assert_eq!(
            months,
            [
                "2024-01-31",
                "2024-02-29",
                "2024-03-31",
                "2024-04-30",
                "2024-05-31"
            ]
            .map(day)
        );
        let weeks = points(day("2024-01-01"), day("2024-01-20"), Interval::Week).expect("ok");
        assert_eq!(weeks, ["2024-01-06", "2024-01-13", "2024-01-20"].map(day));
        let one = points(day("2024-01-01"), day("2024-01-01"), Interval::Day).expect("ok");
        assert_eq!(one, [day("2024-01-01")]);
        assert_eq!(
            points(day("2024-01-02"), day("2024-01-01"), Interval::Day),
            Err(PointsError::AfterTo)
        );
    }

    #[test]
    fn at_most_a_thousand_points() {
        let to = day("2024-12-31");
        let from = to.checked_sub_days(Days::new(999)).expect("date");
        assert_eq!(points(from, to, Interval::Day).map(|p| p.len()), Ok(1000));
        let before = from.pred_opt().expect("date");
        assert_eq!(points(before, to, Interval::Day), Err(PointsError::TooMany));
        assert_eq!(
            points(day("1900-01-01"), day("2200-12-31"), Interval::Month),
            Err(PointsError::TooMany)
        );
        assert_eq!(
            points(day("1900-01-01"), day("2200-12-31"), Interval::Day),
            Err(PointsError::TooMany)
        );
    }

    #[test]
    fn worth_splits_assets_and_liabilities() {
        let mut worth = Worth::default();
        for balance in ["100.50", "-20.25", "0", "-0.25"] {
            worth.add(balance.parse().expect("decimal"));
        }
        assert_eq!(worth.assets.to_string(), "100.50");
        assert_eq!(worth.liabilities.to_string(), "-20.50");
        assert_eq!(worth.net_worth.to_string(), "80.00");
        assert_eq!(
            end_of(day("2200-12-31")).to_rfc3339(),
            "2201-01-01T00:00:00+00:00"
        );
    }
}
