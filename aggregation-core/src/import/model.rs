//! The statement model every non-OFX parser produces (CSV, QIF, CAMT.052/053/054,
//! MT940/942): accounts with their entries, balances and positions, as the file states them.
//!
//! A parser only reads: it never invents identities, never checks balances and never decides
//! which account of the caller a file goes into. Those rules are applied once, for every
//! format, when a [`ParsedFile`] is mapped to the records an import writes.

use chrono::NaiveDate;
use rust_decimal::Decimal;

/// What a parser read from one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ParsedFile {
    /// The institution the file names (CAMT `Svcr`, MT940 sender), if any.
    pub(crate) institution: Option<String>,
    /// Every statement (CAMT `Stmt`/`Rpt`/`Ntfctn`, MT940 `:20:` block, QIF `!Type` section,
    /// the one statement of a CSV file), in file order.
    pub(crate) statements: Vec<ParsedStatement>,
    /// What the parser read but doubts (a balance it could not read, a skipped line), in file
    /// order. Reported in the import answer; never a reason to refuse the file.
    pub(crate) warnings: Vec<ParseWarning>,
}

/// One statement: one account over one period.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ParsedStatement {
    /// The account the statement is about.
    pub(crate) account: ParsedAccount,
    /// Opening balance (CAMT `OPBD`/`PRCD`, MT940 `:60F:`/`:60M:`, QIF opening balance).
    pub(crate) opening: Option<ParsedBalance>,
    /// Closing booked balance (CAMT `CLBD`, MT940 `:62F:`/`:62M:`, CSV last `balance`).
    pub(crate) closing: Option<ParsedBalance>,
    /// Closing available balance (CAMT `CLAV`, MT940 `:64:`).
    pub(crate) available: Option<ParsedBalance>,
    /// Entries in file order.
    pub(crate) entries: Vec<ParsedEntry>,
    /// Positions held at the end of the statement (QIF investment accounts).
    pub(crate) positions: Vec<ParsedPosition>,
    /// The statement is the next page of the one before it (an MT940 page opening at an
    /// intermediate `:60M:` balance): identical rows on both pages are different rows.
    pub(crate) continues: bool,
}

/// What a file says about an account. Every field may be missing: QIF and CSV files name no
/// account at all, and the caller's `account_id` or `account_name` fills the gap.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ParsedAccount {
    /// The account's identifier in the file: IBAN, else the other id (CAMT `Othr/Id`, MT940
    /// `:25:`). The account's upsert key when present.
    pub(crate) identifier: Option<String>,
    /// The account's name (CAMT `Nm`, QIF `!Account` `N`).
    pub(crate) name: Option<String>,
    /// ISO 4217 code (CAMT `Ccy`, MT940 balance currency), upper case.
    pub(crate) currency: Option<String>,
    /// The kind the file states (QIF `!Type`); `None` when the file does not say.
    pub(crate) kind: Option<AccountKind>,
}

/// The kind of account a file states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AccountKind {
    /// Current or checking account (QIF `Bank`, CAMT/MT940 statements).
    Checking,
    /// Savings account.
    Savings,
    /// Credit card (QIF `CCard`).
    CreditCard,
    /// Cash (QIF `Cash`).
    Cash,
    /// Other asset (QIF `Oth A`).
    OtherAsset,
    /// Other liability (QIF `Oth L`).
    OtherLiability,
    /// Investment account (QIF `Invst`).
    Investment,
}

/// A balance at a date.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedBalance {
    /// Signed amount from the owner's point of view (debit balances negative).
    pub(crate) amount: Decimal,
    /// The date the balance held at (end of that day).
    pub(crate) date: NaiveDate,
    /// ISO 4217 code of the balance, upper case, if stated.
    pub(crate) currency: Option<String>,
}

/// Whether an entry is booked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum EntryStatus {
    /// Booked (CAMT `BOOK`, MT940 `:61:`, QIF/CSV rows).
    #[default]
    Booked,
    /// Pending or informational (CAMT `PDNG`/`INFO`, MT942 lines).
    Pending,
}

/// One entry of a statement.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ParsedEntry {
    /// The bank's own reference for the entry, when it has one that identifies it (CAMT
    /// `AcctSvcrRef` else `TxId`, MT940 bank reference unless `NONREF`, CSV `id` column). When
    /// `None`, the importer derives an identity from account, date, amount, text and ordinal.
    pub(crate) reference: Option<String>,
    /// Booking (or posting) date.
    pub(crate) date: NaiveDate,
    /// Value date, if stated and different.
    pub(crate) value_date: Option<NaiveDate>,
    /// Signed amount: negative is money out of the account.
    pub(crate) amount: Decimal,
    /// ISO 4217 code of the amount, upper case, if stated.
    pub(crate) currency: Option<String>,
    /// Booked or pending.
    pub(crate) status: EntryStatus,
    /// The other party (CAMT `Dbtr`/`Cdtr` `Nm`, MT940 `?32`/`?33`, QIF `P`, CSV payee).
    pub(crate) counterparty: Option<String>,
    /// Free text (CAMT `Ustrd`, MT940 `:86:` text or `?20`–`?29`, QIF `M`, CSV description
    /// and memo).
    pub(crate) text: Option<String>,
    /// The bank's transaction code or QIF action (`BUY`, `NTRF`, `DDT`, …), kept as the
    /// transaction's subtype.
    pub(crate) code: Option<String>,
    /// The kind of the entry, when the format tells it.
    pub(crate) kind: EntryKind,
    /// Security symbol or name (QIF investment `Y`).
    pub(crate) security: Option<String>,
    /// Units (QIF `Q`).
    pub(crate) quantity: Option<Decimal>,
    /// Price per unit (QIF `I`).
    pub(crate) unit_price: Option<Decimal>,
    /// Commission (QIF `O`).
    pub(crate) commission: Option<Decimal>,
    /// The 1-based line of the file the entry starts on (for warnings).
    pub(crate) line: usize,
}

/// The kind of an entry, mapped to the transaction types of the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum EntryKind {
    /// Buy, sell, reinvestment.
    Trade,
    /// Transfer between accounts, deposits and withdrawals.
    Transfer,
    /// Interest, dividends.
    Income,
    /// Fees and charges.
    Fee,
    /// Anything else.
    #[default]
    Other,
}

/// A position held (QIF investment accounts).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedPosition {
    /// Symbol, else the security's name.
    pub(crate) security: String,
    /// Units held.
    pub(crate) quantity: Decimal,
    /// Latest price per unit, if known.
    pub(crate) unit_price: Option<Decimal>,
    /// Market value, if known.
    pub(crate) market_value: Option<Decimal>,
    /// Total cost, if known.
    pub(crate) cost_basis: Option<Decimal>,
}

/// Something a parser read but doubts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseWarning {
    /// What it is about, e.g. `line 12` or `statement 2`.
    pub(crate) item: String,
    /// What is wrong, in one sentence.
    pub(crate) message: String,
}

/// Why a file cannot be read at all: answered 400 naming the line and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub(crate) struct ParseError {
    /// The 1-based line the problem is on (0 when it is about the file as a whole).
    pub(crate) line: usize,
    /// What is wrong.
    pub(crate) reason: String,
}

impl ParseError {
    /// An error at `line` (1-based; 0 for the whole file).
    pub(crate) fn new(line: usize, reason: impl Into<String>) -> Self {
        Self {
            line,
            reason: reason.into(),
        }
    }
}

/// Adds `amount` to `total`, or the error an overflow is: the file's amounts add up past the
/// largest amount there is (`79228162514264337593543950335`), at `line`.
pub(crate) fn checked_sum(
    total: Decimal,
    amount: Decimal,
    line: usize,
) -> Result<Decimal, ParseError> {
    total.checked_add(amount).ok_or_else(|| {
        ParseError::new(
            line,
            format!(
                "the amounts add up past the largest amount that can be held ({}) here",
                Decimal::MAX
            ),
        )
    })
}

/// Checks that the statement's amounts can be added up: its opening balance (zero when it has
/// none) plus every entry, in file order, as the balance check and every later sum add them.
/// The error names the line of the entry where the sum overflows.
pub(crate) fn check_statement_sums(statement: &ParsedStatement) -> Result<(), ParseError> {
    let mut total = statement
        .opening
        .as_ref()
        .map_or(Decimal::ZERO, |opening| opening.amount);
    for entry in &statement.entries {
        total = checked_sum(total, entry.amount, entry.line)?;
    }
    Ok(())
}
