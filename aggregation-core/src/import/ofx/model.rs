//! Output types of the OFX parser.

use chrono::{DateTime, FixedOffset, Utc};
use rust_decimal::Decimal;

/// Everything the parser took from one OFX/QFX file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OfxDocument {
    /// The sign-on response (`SONRS`), when the file has one.
    pub signon: Option<Signon>,
    /// Every statement in the file, in file order (bank, credit card and investment alike).
    pub statements: Vec<Statement>,
    /// What was read but doubted, in file order: a balance amount that cannot be read
    /// (`<BALAMT>R$ 5.326,43`) is left out of its statement and reported here, so the
    /// statement's transactions are still imported.
    pub warnings: Vec<OfxWarning>,
}

/// Something in the file that was read but doubted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfxWarning {
    /// 1-based line of the value.
    pub line: usize,
    /// What is wrong and what was done about it.
    pub message: String,
}

/// The sign-on response (`SIGNONMSGSRSV1/SONRS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signon {
    /// `STATUS/CODE`: 0 is success (15500 is "signon invalid", 15000 "must change password", …).
    pub status_code: u32,
    /// `STATUS/SEVERITY`: `INFO`, `WARN` or `ERROR` (`INFO` when absent).
    pub severity: String,
    /// `STATUS/MESSAGE`, when given.
    pub message: Option<String>,
    /// `FI/ORG`: the institution's name, used as the import connection's alias.
    pub org: Option<String>,
    /// `FI/FID`: the institution's id.
    pub fid: Option<String>,
}

/// Which kind of statement response a [`Statement`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatementKind {
    /// `STMTRS` (checking, savings, money market, credit line, CD).
    Bank,
    /// `CCSTMTRS`.
    CreditCard,
    /// `INVSTMTRS`.
    Investment,
}

/// The account a statement is for (`BANKACCTFROM`, `CCACCTFROM` or `INVACCTFROM`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatementAccount {
    /// `ACCTID`; `None` when the statement names no account.
    pub account_id: Option<String>,
    /// `BANKID` (routing number) of a bank account.
    pub bank_id: Option<String>,
    /// `BRANCHID` of a bank account.
    pub branch_id: Option<String>,
    /// `BROKERID` of an investment account.
    pub broker_id: Option<String>,
    /// The raw `ACCTTYPE` of a bank account (`CHECKING`, `SAVINGS`, `MONEYMRKT`, `CREDITLINE`,
    /// `CD`, …); always `CREDITCARD` for a credit-card statement and `INVESTMENT` for an
    /// investment statement; `None` for a bank statement that gives no type.
    pub account_type: Option<String>,
}

/// The identifier of a security (`SECID`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecurityId {
    /// `UNIQUEID`, e.g. a CUSIP.
    pub unique_id: String,
    /// `UNIQUEIDTYPE`, e.g. `CUSIP` or `ISIN` (empty when the file leaves it out).
    pub unique_id_type: String,
}

/// One statement: a bank, credit-card or investment account's activity and balances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Which statement response this came from.
    pub kind: StatementKind,
    /// `CURDEF`, the statement's default currency (`USD` when absent).
    pub currency: String,
    /// The account the statement is for.
    pub account: StatementAccount,
    /// Transactions in file order (`BANKTRANLIST/STMTTRN`, or `INVTRANLIST` entries).
    pub transactions: Vec<StatementTransaction>,
    /// Positions (`INVPOSLIST`) of an investment statement.
    pub positions: Vec<Position>,
    /// `LEDGERBAL`.
    pub ledger_balance: Option<Balance>,
    /// `AVAILBAL`.
    pub available_balance: Option<Balance>,
    /// `INVBAL` of an investment statement.
    pub investment_balance: Option<InvestmentBalance>,
    /// `DTSTART` of the transaction list.
    pub start: Option<DateTime<Utc>>,
    /// `DTEND` of the transaction list.
    pub end: Option<DateTime<Utc>>,
    /// `DTASOF` of an investment statement (the date its positions and balances hold at).
    pub as_of: Option<DateTime<Utc>>,
}

/// What kind of transaction a [`StatementTransaction`] is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TransactionKind {
    /// A bank or credit-card line (`STMTTRN`), also a cash line of an investment statement
    /// (`INVBANKTRAN`); carries the raw `TRNTYPE` (`DEBIT`, `CREDIT`, `INT`, …; `OTHER` when
    /// the file leaves it out).
    Bank(String),
    /// `BUYSTOCK`, `BUYMF`, `BUYDEBT`, `BUYOPT`, `BUYOTHER`.
    Buy,
    /// `SELLSTOCK`, `SELLMF`, `SELLDEBT`, `SELLOPT`, `SELLOTHER`.
    Sell,
    /// `INCOME` (dividends, interest, capital gains distributions).
    Income,
    /// `REINVEST`.
    Reinvest,
    /// `TRANSFER` (securities moved in or out).
    Transfer,
    /// Any other investment transaction, by its tag name (`INVEXPENSE`, `MARGININTEREST`,
    /// `RETOFCAP`, `SPLIT`, `CLOSUREOPT`, `JRNLFUND`, `JRNLSEC`, …).
    Other(String),
}

/// One transaction of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementTransaction {
    /// `FITID`, the institution's id of the transaction (never empty).
    pub fit_id: String,
    /// What kind of transaction this is.
    pub kind: TransactionKind,
    /// The raw type detail: `TRNTYPE` for bank lines, `BUYTYPE`/`SELLTYPE`/`OPTBUYTYPE`/
    /// `OPTSELLTYPE` for trades, `TFERACTION` for transfers.
    pub trn_type: Option<String>,
    /// `DTPOSTED` (bank lines) or `DTTRADE` (investment transactions), in the file's own
    /// offset: `posted.date_naive()` is the calendar date the file wrote.
    pub posted: DateTime<FixedOffset>,
    /// `DTUSER` of a bank line.
    pub user_date: Option<DateTime<Utc>>,
    /// `DTSETTLE` of an investment transaction, `DTAVAIL` of a bank line, in the file's offset.
    pub settled: Option<DateTime<FixedOffset>>,
    /// Negative = money out. `TRNAMT` of bank lines, `TOTAL` of investment transactions (zero
    /// when an investment transaction that needs none, such as `TRANSFER`, has no `TOTAL`).
    pub amount: rust_decimal::Decimal,
    /// `NAME` (or `PAYEE/NAME`) of a bank line.
    pub name: Option<String>,
    /// `MEMO`.
    pub memo: Option<String>,
    /// `CHECKNUM`.
    pub check_number: Option<String>,
    /// The security's `TICKER` from `SECLIST`, else its `UNIQUEID`.
    pub symbol: Option<String>,
    /// The security's `SECNAME` from `SECLIST`.
    pub security_name: Option<String>,
    /// The security's `SECID`.
    pub security_id: Option<SecurityId>,
    /// `UNITS`.
    pub units: Option<Decimal>,
    /// `UNITPRICE`.
    pub unit_price: Option<Decimal>,
    /// `COMMISSION`.
    pub commission: Option<Decimal>,
    /// `INCOMETYPE` of `INCOME` and `REINVEST` (`DIV`, `INTEREST`, `CGLONG`, …).
    pub income_type: Option<String>,
    /// `CURRENCY/CURSYM` or `ORIGCURRENCY/CURSYM`, when the transaction is not in the
    /// statement's currency.
    pub currency: Option<String>,
}

/// What kind of security a [`Position`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PositionKind {
    /// `POSSTOCK`.
    Stock,
    /// `POSMF`.
    MutualFund,
    /// `POSDEBT`.
    Debt,
    /// `POSOPT`.
    Option,
    /// `POSOTHER`.
    Other,
}

/// One position of an investment statement (`INVPOSLIST`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The security's `TICKER` from `SECLIST`, else its `UNIQUEID`.
    pub symbol: String,
    /// The security's `SECNAME` from `SECLIST`.
    pub security_name: Option<String>,
    /// The security's `SECID`.
    pub security_id: SecurityId,
    /// Which position aggregate this came from.
    pub asset_kind: PositionKind,
    /// `UNITS` (negative for a short position in some files).
    pub units: Decimal,
    /// `UNITPRICE`.
    pub unit_price: Option<Decimal>,
    /// `MKTVAL`.
    pub market_value: Option<Decimal>,
    /// `DTPRICEASOF`.
    pub price_as_of: Option<DateTime<Utc>>,
    /// `HELDINACCT`: `CASH`, `MARGIN`, `SHORT` or `OTHER`.
    pub held_in: Option<String>,
    /// `POSTYPE`: `LONG` or `SHORT`.
    pub long_short: Option<String>,
}

/// A balance with the time it holds at (`LEDGERBAL`, `AVAILBAL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Balance {
    /// `BALAMT`.
    pub amount: Decimal,
    /// `DTASOF`.
    pub as_of: Option<DateTime<Utc>>,
}

/// The cash balances of an investment account (`INVBAL`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InvestmentBalance {
    /// `AVAILCASH`.
    pub available_cash: Option<Decimal>,
    /// `MARGINBALANCE`.
    pub margin_balance: Option<Decimal>,
    /// `SHORTBALANCE`.
    pub short_balance: Option<Decimal>,
    /// `BUYPOWER`.
    pub buying_power: Option<Decimal>,
}
