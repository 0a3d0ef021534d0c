//! The one normalized batch every statement format maps to, and the one merge that assembles
//! it.
//!
//! A parsed file of any format ([`Normalize`]: an OFX document through `import::records`, a
//! file of the statement model through `import::parsed`) reads its statements in file order
//! and hands each one's account, transactions, holdings and balances to a [`BatchBuilder`].
//! The builder keeps one account per key (the `provider_account_id`): statements with the
//! same key are one account, their transactions are united by provider id (the later version
//! in the earlier place, [`keep_last_by_id`]), a later statement's holdings replace an earlier
//! one's when it states any, and the reported balances become the account's balance and its
//! snapshots by the format's [`BalanceHistory`]. The result is a [`ParsedBatch`]: the
//! store's [`NormalizedBatch`] (the one batch every source, provider syncs included, hands the
//! one writer) with the warnings the answer reports.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::store::{
    AbsentHoldings, AccountRecord, AccountType, BatchAccount, BatchConnection, BatchSnapshot,
    BatchTarget, NewAccount, NewHolding, NewTransaction, NormalizedBatch, SnapshotSource,
    StatedBalances, TransactionSource,
};

/// Why a parsed file cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The sign-on reports an error.
    #[error("the institution refused the sign-on (code {code}): {message}")]
    Signon { code: u32, message: String },
    /// The file has no statement.
    #[error("the file holds no statement")]
    NoStatement,
    /// `account_id` names one account, and the file holds statements of several.
    #[error(
        "the file holds statements of {count} accounts; account_id can name only one (import without it)"
    )]
    SeveralAccounts {
        /// How many accounts the file names.
        count: usize,
    },
    /// Amounts of the file add up past the largest amount there is
    /// (`79228162514264337593543950335`).
    #[error("the {what} add up past the largest amount that can be held")]
    Overflow {
        /// Which amounts, and where (`market values of security 123456789`).
        what: String,
    },
}

/// The refusal an overflow in `what` is.
pub(crate) fn overflow(what: impl Into<String>) -> Refusal {
    Refusal::Overflow { what: what.into() }
}

/// Something an import read but doubts: reported in the answer's `warnings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImportWarning {
    /// What it is about (`line 12`, `statement 2 (DE89…)`).
    pub(crate) item: String,
    /// What is wrong, in one sentence.
    pub(crate) message: String,
}

/// What the caller's parts say about accounts the file does not name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Defaults<'a> {
    /// `account_name`: the name of an account the file names none for.
    pub(crate) account_name: Option<&'a str>,
    /// The currency of an account the file states none for (`currency`, or the currency of
    /// the account chosen by `account_id`); `USD` when `None`.
    pub(crate) currency: Option<&'a str>,
}

/// The records of a parsed file and the warnings to report: what every format maps to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedBatch {
    /// What to write.
    pub(crate) batch: NormalizedBatch,
    /// The parser's warnings, then the mapping's, in file order.
    pub(crate) warnings: Vec<ImportWarning>,
}

/// A parsed file of any format, as the import maps it.
pub(crate) trait Normalize: Send {
    /// The records to write for the file, with the caller's `defaults`, or why it cannot be
    /// imported: unfinished, so that the caller frees the parsed file before
    /// [`BatchBuilder::finish`] (whose maps of every row's id would otherwise sit beside it).
    fn normalize(self: Box<Self>, defaults: &Defaults<'_>) -> Result<BatchBuilder, Refusal>;
}

/// The rows of a parsed statement in reading order, each handed out by value while the
/// vector behind them shrinks (an eighth at a time), so that the memory of the rows already
/// mapped is given back during the mapping: the parsed rows and the records made of them never
/// both sit in memory whole (with glibc's malloc a large vector shrinks in place).
pub(crate) struct Releasing<T> {
    /// The rows not handed out yet, last first.
    reversed: Vec<T>,
    /// The length below which the vector is shrunk next.
    shrink_below: usize,
}

impl<T> Releasing<T> {
    /// Hands out `rows` in their order.
    pub(crate) fn new(mut rows: Vec<T>) -> Self {
        rows.reverse();
        Self {
            shrink_below: Self::next_shrink(rows.len()),
            reversed: rows,
        }
    }

    /// The length below which a vector of `len` rows left is shrunk: an eighth fewer.
    fn next_shrink(len: usize) -> usize {
        len - len / 8
    }
}

impl<T> Iterator for Releasing<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let row = self.reversed.pop()?;
        if self.reversed.len() < self.shrink_below {
            self.reversed.shrink_to_fit();
            self.shrink_below = Self::next_shrink(self.reversed.len());
        }
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.reversed.len(), Some(self.reversed.len()))
    }
}

/// How an account's reported balances become its balance and its snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BalanceHistory {
    /// The balance of the last statement that reports one is the account's, and its one
    /// snapshot (OFX: a statement's balance is the account's as of the download).
    LastReported,
    /// Every reported balance is a snapshot, one per capture time (the later report on a
    /// tie); the account's balance is the latest by time, in report order on a tie (closing
    /// balances of dated statements).
    PerCapture,
}

/// A balance a statement reports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReportedBalance {
    /// The balance.
    pub(crate) balance: Decimal,
    /// The available balance, if stated.
    pub(crate) available: Option<Decimal>,
    /// The market value of the holdings, if stated.
    pub(crate) holdings_value: Option<Decimal>,
    /// The cash, if stated.
    pub(crate) cash: Option<Decimal>,
    /// When it held; the import's time when the file does not say.
    pub(crate) as_of: Option<DateTime<Utc>>,
}

/// One account being assembled from the file's statements.
#[derive(Debug)]
pub(crate) struct AccountBuilder {
    account: NewAccount,
    /// In reading order, restated ids included (see [`keep_last_by_id`]).
    transactions: Vec<NewTransaction>,
    holdings: Vec<NewHolding>,
    /// In reading order.
    balances: Vec<ReportedBalance>,
}

impl AccountBuilder {
    /// The account's currency (as its first statement stated it).
    pub(crate) fn currency(&self) -> &str {
        &self.account.currency
    }

    /// Adds a statement's transactions (`expected` of them, at most), after the earlier
    /// statements' ones.
    pub(crate) fn add_transactions(
        &mut self,
        expected: usize,
        rows: impl IntoIterator<Item = NewTransaction>,
    ) {
        // Reserved at once: a regrown vector briefly holds its old and its new copy.
        self.transactions.reserve(expected);
        self.transactions.extend(rows);
    }

    /// A statement's holdings: they replace the earlier statements' ones, unless it states
    /// none.
    pub(crate) fn replace_holdings(&mut self, holdings: Vec<NewHolding>) {
        if !holdings.is_empty() {
            self.holdings = holdings;
        }
    }

    /// A balance a statement reports.
    pub(crate) fn report_balance(&mut self, balance: ReportedBalance) {
        self.balances.push(balance);
    }

    /// The account with its balance, transactions (one per id), holdings and snapshots.
    fn finish(mut self, history: BalanceHistory, now: DateTime<Utc>) -> BatchAccount {
        keep_last_by_id(&mut self.transactions);
        let captured = |balance: &ReportedBalance| BatchSnapshot {
            source: SnapshotSource::FileImport,
            stated: Some(StatedBalances {
                balance: balance.balance,
                available_balance: balance.available,
                captured_at: crate::dates::truncate_to_micros(balance.as_of.unwrap_or(now)),
            }),
            holdings_value: balance.holdings_value,
            cash_value: balance.cash,
        };
        let snapshots: Vec<BatchSnapshot> = match history {
            BalanceHistory::LastReported => {
                self.balances.last().map(captured).into_iter().collect()
            }
            BalanceHistory::PerCapture => {
                let mut by_time: Vec<BatchSnapshot> = Vec::new();
                for snapshot in self.balances.iter().map(captured) {
                    match by_time
                        .iter_mut()
                        .find(|kept| captured_at(kept) == captured_at(&snapshot))
                    {
                        Some(slot) => *slot = snapshot,
                        None => by_time.push(snapshot),
                    }
                }
                // Stable: at equal times the later report stays later.
                by_time.sort_by_key(captured_at);
                by_time
            }
        };
        let mut account = self.account;
        if let Some(latest) = snapshots.last().and_then(|latest| latest.stated.as_ref()) {
            account.balance_amount = latest.balance;
            account.available_balance_amount = latest.available_balance;
        }
        imported_account(
            account,
            !snapshots.is_empty(),
            self.transactions,
            self.holdings,
            snapshots,
        )
    }
}

/// Assembles the [`ParsedBatch`] of one file: its institution's accounts, one per key.
#[derive(Debug)]
pub(crate) struct BatchBuilder {
    institution: String,
    history: BalanceHistory,
    accounts: Vec<AccountBuilder>,
    by_key: HashMap<String, usize>,
    warnings: Vec<ImportWarning>,
}

impl BatchBuilder {
    /// A batch of the institution's accounts whose balances follow `history`.
    pub(crate) fn new(institution: String, history: BalanceHistory) -> Self {
        Self {
            institution,
            history,
            accounts: Vec::new(),
            by_key: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// The institution's name.
    pub(crate) fn institution(&self) -> &str {
        &self.institution
    }

    /// Reports a warning (in the order reported).
    pub(crate) fn warn(&mut self, warning: ImportWarning) {
        self.warnings.push(warning);
    }

    /// The account with this key (its `provider_account_id`): the one an earlier statement
    /// made, else a new one, `new` making its record from the key (with a zero balance).
    pub(crate) fn account(
        &mut self,
        key: String,
        new: impl FnOnce(String) -> NewAccount,
    ) -> &mut AccountBuilder {
        let at = match self.by_key.entry(key) {
            Entry::Occupied(known) => *known.get(),
            Entry::Vacant(slot) => {
                let account = new(slot.key().clone());
                self.accounts.push(AccountBuilder {
                    account,
                    transactions: Vec::new(),
                    holdings: Vec::new(),
                    balances: Vec::new(),
                });
                *slot.insert(self.accounts.len() - 1)
            }
        };
        // `at` is the position of an account pushed above or before.
        &mut self.accounts[at]
    }

    /// The batch: one institution with its accounts in the order first read.
    pub(crate) fn finish(self, now: DateTime<Utc>) -> ParsedBatch {
        let history = self.history;
        let accounts = self
            .accounts
            .into_iter()
            .map(|account| account.finish(history, now))
            .collect();
        ParsedBatch {
            batch: NormalizedBatch {
                connections: vec![imported_connection(
                    BatchTarget::FileImport {
                        alias: self.institution,
                    },
                    accounts,
                )],
                ..NormalizedBatch::new(TransactionSource::Import)
            },
            warnings: self.warnings,
        }
    }
}

/// The name of an account the file gives none for: `<institution> <Type> ****1234`, without
/// the number when the file states none.
pub(crate) fn account_name(institution: &str, kind: AccountType, number: Option<&str>) -> String {
    match number {
        Some(number) => format!(
            "{institution} {} {}",
            type_label(kind),
            crate::store::mask_account_number(number)
        ),
        None => format!("{institution} {}", type_label(kind)),
    }
}

/// The account an import was told to write into (`account_id`), as the record to upsert: its
/// own key and fields, with the file's balance when the file reports one.
pub(crate) fn existing_account(
    record: &AccountRecord,
    balance: Option<(Decimal, Option<Decimal>)>,
) -> NewAccount {
    let (balance_amount, available_balance_amount) =
        balance.unwrap_or((record.balance_amount, record.available_balance_amount));
    NewAccount {
        provider_account_id: record.provider_account_id.clone(),
        account_number: record.account_number_masked.clone(),
        name: record.name.clone(),
        account_type: record.account_type,
        currency: record.currency.clone(),
        balance_amount,
        available_balance_amount,
        is_active: record.is_active,
    }
}

/// Points a batch of one account at the account the caller chose (`account_id`): its
/// connection, its key and fields; the file's transactions, holdings and balances.
pub(crate) fn into_existing(
    mut batch: NormalizedBatch,
    record: &AccountRecord,
) -> Result<NormalizedBatch, Refusal> {
    let mut accounts: Vec<BatchAccount> = batch
        .connections
        .drain(..)
        .flat_map(|part| part.accounts)
        .collect();
    if accounts.len() > 1 {
        return Err(Refusal::SeveralAccounts {
            count: accounts.len(),
        });
    }
    let Some(mut only) = accounts.pop() else {
        return Err(Refusal::NoStatement);
    };
    let balance = only
        .account
        .as_ref()
        .filter(|_| only.balance_reported)
        .map(|account| (account.balance_amount, account.available_balance_amount));
    let account = existing_account(record, balance);
    only.provider_account_id = account.provider_account_id.clone();
    only.account = Some(account);
    batch.connections = vec![imported_connection(
        BatchTarget::Connection(record.connection_id),
        vec![only],
    )];
    Ok(batch)
}

/// An account of an imported file in the batch: its fields (with the balance when the file
/// reports one), all its transactions, the holdings it states (others are left as they are)
/// and its snapshots.
pub(crate) fn imported_account(
    account: NewAccount,
    balance_reported: bool,
    transactions: Vec<NewTransaction>,
    holdings: Vec<NewHolding>,
    snapshots: Vec<BatchSnapshot>,
) -> BatchAccount {
    BatchAccount {
        provider_account_id: account.provider_account_id.clone(),
        account: Some(account),
        balance_reported,
        transactions: Some(transactions),
        pending_window: None,
        holdings: Some(holdings),
        absent_holdings: AbsentHoldings::Kept,
        snapshots,
    }
}

/// The part of an import's batch that goes into `target`: its accounts, no change feed, and
/// the connection's sync time moved (a provider's connection keeps its own).
fn imported_connection(target: BatchTarget, accounts: Vec<BatchAccount>) -> BatchConnection {
    BatchConnection {
        target,
        accounts,
        feed: None,
        mark_synced: true,
    }
}

/// When a snapshot of a file held.
fn captured_at(snapshot: &BatchSnapshot) -> Option<DateTime<Utc>> {
    snapshot.stated.as_ref().map(|stated| stated.captured_at)
}

/// Removes NUL characters and surrounding whitespace; `None` when nothing is left.
pub(crate) fn clean(text: &str) -> Option<String> {
    let text = text.trim();
    let cleaned = if text.contains('\0') {
        text.replace('\0', "")
    } else {
        text.to_owned()
    };
    (!cleaned.is_empty()).then_some(cleaned)
}

/// [`clean`] of an optional text.
pub(crate) fn clean_opt(text: Option<&str>) -> Option<String> {
    text.and_then(clean)
}

/// The account type as a name part (`Checking`, `Credit Card`).
pub(crate) fn type_label(kind: AccountType) -> &'static str {
    match kind {
        AccountType::Checking => "Checking",
        AccountType::Savings => "Savings",
        AccountType::MoneyMarket => "Money Market",
        AccountType::Cd => "CD",
        AccountType::LineOfCredit => "Line of Credit",
        AccountType::CreditCard => "Credit Card",
        AccountType::Brokerage => "Brokerage",
        _ => "Account",
    }
}

/// Keeps one transaction per provider id: the last one read, in the place of the first (a later
/// statement of an account restates an earlier one). A row whose id repeats with another date
/// or amount is another transaction, not a restatement (banks reuse references: MT940 customer
/// references naming the counterparty, `EREF`, constant OFX FITIDs): it keeps its place under
/// the id suffixed `#2`, `#3`, … in reading order, so nothing read is dropped and a re-import
/// gives the same ids. One pass over the account's rows with maps that borrow their ids, rather
/// than maps of copied ids kept while the file is read.
pub(crate) fn keep_last_by_id(transactions: &mut Vec<NewTransaction>) {
    tell_reused_ids_apart(transactions);
    let mut restated: Vec<(usize, usize)> = Vec::new();
    let mut first: HashMap<&str, usize> = HashMap::with_capacity(transactions.len());
    for (at, item) in transactions.iter().enumerate() {
        match first.entry(item.provider_transaction_id.as_str()) {
            Entry::Occupied(earlier) => restated.push((*earlier.get(), at)),
            Entry::Vacant(slot) => {
                slot.insert(at);
            }
        }
    }
    drop(first);
    if restated.is_empty() {
        return;
    }
    let mut dropped = vec![false; transactions.len()];
    // In reading order, so the first place ends up with the last version.
    for (earlier, later) in restated {
        transactions.swap(earlier, later);
        if let Some(flag) = dropped.get_mut(later) {
            *flag = true;
        }
    }
    let mut at = 0;
    transactions.retain(|_| {
        let keep = !dropped.get(at).copied().unwrap_or_default();
        at += 1;
        keep
    });
}

/// Suffixes the id of every row whose id an earlier row carries with another date or amount:
/// `#n` for the n-th distinct (date, amount) of that id.
fn tell_reused_ids_apart(transactions: &mut [NewTransaction]) {
    type Version = (chrono::NaiveDate, Decimal);
    let mut renamed: Vec<(usize, usize)> = Vec::new();
    // The first version of each id, and the others in reading order (an empty `Vec` does not
    // allocate, so the common unique id costs one map entry).
    let mut versions: HashMap<&str, (Version, Vec<Version>)> =
        HashMap::with_capacity(transactions.len());
    for (at, item) in transactions.iter().enumerate() {
        let version = (item.transaction_date, item.amount);
        match versions.entry(item.provider_transaction_id.as_str()) {
            Entry::Vacant(slot) => {
                slot.insert((version, Vec::new()));
            }
            Entry::Occupied(mut seen) => {
                let (first, others) = seen.get_mut();
                if *first == version {
                    continue;
                }
                let ordinal = match others.iter().position(|v| *v == version) {
                    Some(index) => index + 2,
                    None => {
                        others.push(version);
                        others.len() + 1
                    }
                };
                renamed.push((at, ordinal));
            }
        }
    }
    drop(versions);
    for (at, ordinal) in renamed {
        if let Some(item) = transactions.get_mut(at) {
            item.provider_transaction_id = format!("{}#{ordinal}", item.provider_transaction_id);
        }
    }
}

#[cfg(test)]
impl BatchAccount {
    /// The account's fields (an imported account always states them).
    pub(crate) fn fields(&self) -> &NewAccount {
        self.account
            .as_ref()
            .expect("an imported account states its fields")
    }

    /// The account's transactions.
    pub(crate) fn rows(&self) -> &[NewTransaction] {
        self.transactions.as_deref().unwrap_or_default()
    }

    /// The account's holdings.
    pub(crate) fn positions(&self) -> &[NewHolding] {
        self.holdings.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
impl BatchSnapshot {
    /// The balances an imported file states.
    pub(crate) fn balances(&self) -> &StatedBalances {
        self.stated
            .as_ref()
            .expect("an imported snapshot states its balances")
    }
}

#[cfg(test)]
mod tests {
    use super::Releasing;

    #[test]
    fn releasing_hands_out_every_row_in_order_and_gives_back_the_memory_behind_them() {
        let mut releasing = Releasing::new((0..1000).collect::<Vec<u32>>());
        assert_eq!(releasing.size_hint(), (1000, Some(1000)));
        let first: Vec<u32> = releasing.by_ref().take(600).collect();
        assert_eq!(first, (0..600).collect::<Vec<_>>());
        // Never more than an eighth of the rows left over, plus the one handed out last.
        assert!(releasing.reversed.capacity() <= 400 * 8 / 7 + 1);
        let rest: Vec<u32> = releasing.collect();
        assert_eq!(rest, (600..1000).collect::<Vec<_>>());
        assert_eq!(Releasing::new(Vec::<u32>::new()).next(), None);
    }
}
