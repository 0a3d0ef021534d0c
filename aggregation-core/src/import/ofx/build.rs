//! Building the model from the normalised event stream.
//!
//! The builder descends only into the aggregates it understands, in the places the OFX
//! specification puts them; every other aggregate (proprietary ones, `BALLIST`, `MFASSETCLASS`,
//! `INVOOLIST`, the other account of a `TRANSFER`, …) is skipped whole, and unknown leaves are
//! ignored. Elements outside `<OFX>` (header elements, trailing junk) are ignored.

use std::collections::HashMap;

use chrono::{DateTime, FixedOffset, Utc};
use rust_decimal::Decimal;

use super::model::{
    Balance, InvestmentBalance, OfxDocument, Position, PositionKind, SecurityId, Signon, Statement,
    StatementAccount, StatementKind, StatementTransaction, TransactionKind,
};
use super::sgml::{RawError, RawErrorKind, Sink};
use super::tags::Tag;
use super::values::{parse_amount, parse_code, parse_date, parse_zoned_date};

/// Why the file gave no statement, when it gave none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The sign-on was refused.
    Signon { code: u32, message: String },
    /// A statement request reported an error.
    Request { code: u32, message: String },
}

#[derive(Default)]
struct StatusBuilder {
    code: Option<u32>,
    severity: Option<String>,
    message: Option<String>,
}

#[derive(Default)]
struct SignonBuilder {
    status: Option<StatusBuilder>,
    org: Option<String>,
    fid: Option<String>,
}

struct TrnRsState {
    status: Option<StatusBuilder>,
    statements: usize,
}

struct TxnBuilder {
    pos: usize,
    kind: TransactionKind,
    fit_id: Option<String>,
    trn_type: Option<String>,
    posted: Option<DateTime<FixedOffset>>,
    user_date: Option<DateTime<Utc>>,
    settled: Option<DateTime<FixedOffset>>,
    amount: Option<Decimal>,
    name: Option<String>,
    payee_name: Option<String>,
    memo: Option<String>,
    check_number: Option<String>,
    security_id: Option<SecurityId>,
    units: Option<Decimal>,
    unit_price: Option<Decimal>,
    commission: Option<Decimal>,
    income_type: Option<String>,
    currency: Option<String>,
}

impl TxnBuilder {
    fn new(kind: TransactionKind, pos: usize) -> TxnBuilder {
        TxnBuilder {
            pos,
            kind,
            fit_id: None,
            trn_type: None,
            posted: None,
            user_date: None,
            settled: None,
            amount: None,
            name: None,
            payee_name: None,
            memo: None,
            check_number: None,
            security_id: None,
            units: None,
            unit_price: None,
            commission: None,
            income_type: None,
            currency: None,
        }
    }

    fn finish(self) -> Result<StatementTransaction, RawError> {
        let is_bank = matches!(self.kind, TransactionKind::Bank(_));
        let what = if is_bank {
            "<STMTTRN>"
        } else {
            "investment transaction"
        };
        let fit_id = self
            .fit_id
            .ok_or_else(|| RawError::malformed(self.pos, format!("{what} has no FITID")))?;
        let posted = self.posted.ok_or_else(|| {
            let field = if is_bank { "DTPOSTED" } else { "DTTRADE" };
            RawError::malformed(self.pos, format!("{what} has no {field}"))
        })?;
        let total_required = matches!(
            self.kind,
            TransactionKind::Buy
                | TransactionKind::Sell
                | TransactionKind::Income
                | TransactionKind::Reinvest
        );
        let amount = match self.amount {
            Some(amount) => amount,
            None if is_bank => {
                return Err(RawError::malformed(self.pos, "<STMTTRN> has no TRNAMT"));
            }
            None if total_required => {
                return Err(RawError::malformed(
                    self.pos,
                    format!("{what} has no TOTAL"),
                ));
            }
            None => Decimal::ZERO,
        };
        let kind = match self.kind {
            TransactionKind::Bank(_) => {
                TransactionKind::Bank(self.trn_type.clone().unwrap_or_else(|| "OTHER".into()))
            }
            other => other,
        };
        Ok(StatementTransaction {
            fit_id,
            kind,
            trn_type: self.trn_type,
            posted,
            user_date: self.user_date,
            settled: self.settled,
            amount,
            name: self.name.or(self.payee_name),
            memo: self.memo,
            check_number: self.check_number,
            symbol: None,
            security_name: None,
            security_id: self.security_id,
            units: self.units,
            unit_price: self.unit_price,
            commission: self.commission,
            income_type: self.income_type,
            currency: self.currency,
        })
    }
}

struct PosBuilder {
    pos: usize,
    kind: PositionKind,
    security_id: Option<SecurityId>,
    units: Option<Decimal>,
    unit_price: Option<Decimal>,
    market_value: Option<Decimal>,
    price_as_of: Option<DateTime<Utc>>,
    held_in: Option<String>,
    long_short: Option<String>,
}

impl PosBuilder {
    fn finish(self) -> Result<Position, RawError> {
        let security_id = self
            .security_id
            .ok_or_else(|| RawError::malformed(self.pos, "position has no SECID"))?;
        let units = self
            .units
            .ok_or_else(|| RawError::malformed(self.pos, "position has no UNITS"))?;
        Ok(Position {
            symbol: security_id.unique_id.clone(),
            security_name: None,
            security_id,
            asset_kind: self.kind,
            units,
            unit_price: self.unit_price,
            market_value: self.market_value,
            price_as_of: self.price_as_of,
            held_in: self.held_in,
            long_short: self.long_short,
        })
    }
}

#[derive(Default)]
struct SecIdBuilder {
    unique_id: Option<String>,
    unique_id_type: Option<String>,
}

#[derive(Default)]
struct SecBuilder {
    security_id: Option<SecurityId>,
    name: Option<String>,
    ticker: Option<String>,
}

#[derive(Default)]
struct BalBuilder {
    amount: Option<Decimal>,
    as_of: Option<DateTime<Utc>>,
}

/// What `SECLIST` says about one security.
#[derive(Clone)]
struct SecInfo {
    name: Option<String>,
    ticker: Option<String>,
}

/// Receives the normalised events and builds an [`OfxDocument`].
#[derive(Default)]
pub(crate) struct Builder {
    /// The aggregates descended into, innermost last.
    stack: Vec<Tag>,
    /// Depth inside a skipped aggregate (0 when not skipping).
    skip: usize,
    in_ofx: bool,
    seen_ofx: bool,
    signon: Option<Signon>,
    signon_b: Option<SignonBuilder>,
    status: Option<StatusBuilder>,
    trnrs: Option<TrnRsState>,
    failures: Vec<(u32, String)>,
    statements: Vec<Statement>,
    stmt: Option<Statement>,
    bal: Option<BalBuilder>,
    txn: Option<TxnBuilder>,
    position: Option<PosBuilder>,
    secid: Option<SecIdBuilder>,
    sec: Option<SecBuilder>,
    securities: HashMap<SecurityId, SecInfo>,
    /// Balances that could not be read: (byte offset, what was wrong).
    warnings: Vec<(usize, String)>,
}

fn text(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

fn amount(tag: Tag, value: &str, pos: usize) -> Result<Option<Decimal>, RawError> {
    if value.is_empty() {
        return Ok(None);
    }
    parse_amount(value)
        .map(Some)
        .map_err(|why| RawError::malformed(pos, format!("{why} in <{}>: {value:?}", tag.name())))
}

/// A balance amount: one that cannot be read is recorded in `warnings` and counts as absent,
/// so the statement's transactions are still imported.
fn balance_amount(
    tag: Tag,
    value: &str,
    pos: usize,
    warnings: &mut Vec<(usize, String)>,
) -> Option<Decimal> {
    amount(tag, value, pos).unwrap_or_else(|error| {
        let message = match error.kind {
            RawErrorKind::Malformed(message) => message,
            RawErrorKind::Doctype | RawErrorKind::Entity => format!("unreadable <{}>", tag.name()),
        };
        warnings.push((pos, format!("{message}; the balance is ignored")));
        None
    })
}

fn date(tag: Tag, value: &str, pos: usize) -> Result<Option<DateTime<Utc>>, RawError> {
    parse_date(value)
        .map_err(|why| RawError::malformed(pos, format!("{why} in <{}>: {value:?}", tag.name())))
}

fn zoned_date(
    tag: Tag,
    value: &str,
    pos: usize,
) -> Result<Option<DateTime<FixedOffset>>, RawError> {
    parse_zoned_date(value)
        .map_err(|why| RawError::malformed(pos, format!("{why} in <{}>: {value:?}", tag.name())))
}

fn statement_kind(tag: Tag) -> Option<StatementKind> {
    match tag {
        Tag::StmtRs => Some(StatementKind::Bank),
        Tag::CcStmtRs => Some(StatementKind::CreditCard),
        Tag::InvStmtRs => Some(StatementKind::Investment),
        _ => None,
    }
}

fn position_kind(tag: Tag) -> Option<PositionKind> {
    match tag {
        Tag::PosStock => Some(PositionKind::Stock),
        Tag::PosMf => Some(PositionKind::MutualFund),
        Tag::PosDebt => Some(PositionKind::Debt),
        Tag::PosOpt => Some(PositionKind::Option),
        Tag::PosOther => Some(PositionKind::Other),
        _ => None,
    }
}

/// The kind of an investment transaction aggregate (inside `INVTRANLIST`).
fn investment_kind(tag: Tag, name: &str) -> Option<TransactionKind> {
    Some(match tag {
        Tag::BuyStock | Tag::BuyMf | Tag::BuyDebt | Tag::BuyOpt | Tag::BuyOther => {
            TransactionKind::Buy
        }
        Tag::SellStock | Tag::SellMf | Tag::SellDebt | Tag::SellOpt | Tag::SellOther => {
            TransactionKind::Sell
        }
        Tag::Income => TransactionKind::Income,
        Tag::Reinvest => TransactionKind::Reinvest,
        Tag::Transfer => TransactionKind::Transfer,
        Tag::Other => TransactionKind::Other(name.to_ascii_uppercase()),
        _ => return None,
    })
}

fn is_investment_txn(tag: Tag) -> bool {
    matches!(
        tag,
        Tag::BuyStock
            | Tag::BuyMf
            | Tag::BuyDebt
            | Tag::BuyOpt
            | Tag::BuyOther
            | Tag::SellStock
            | Tag::SellMf
            | Tag::SellDebt
            | Tag::SellOpt
            | Tag::SellOther
            | Tag::Income
            | Tag::Reinvest
            | Tag::Transfer
            | Tag::Other
    )
}

fn is_message_set(tag: Tag) -> bool {
    matches!(tag, Tag::BankMsgs | Tag::CcMsgs | Tag::InvMsgs)
}

fn is_trnrs(tag: Tag) -> bool {
    matches!(tag, Tag::StmtTrnRs | Tag::CcStmtTrnRs | Tag::InvStmtTrnRs)
}

fn is_secinfo_holder(tag: Tag) -> bool {
    matches!(
        tag,
        Tag::StockInfo | Tag::MfInfo | Tag::DebtInfo | Tag::OptInfo | Tag::OtherInfo
    )
}

/// Whether the builder descends into `child` inside `parent` (inside `<OFX>`).
fn accepts(parent: Tag, child: Tag) -> bool {
    use Tag as T;
    match parent {
        T::Ofx => matches!(
            child,
            T::SignonMsgs | T::BankMsgs | T::CcMsgs | T::InvMsgs | T::SecListMsgs
        ),
        T::SignonMsgs => child == T::Sonrs,
        T::Sonrs => matches!(child, T::Status | T::Fi),
        p if is_message_set(p) => is_trnrs(child) || statement_kind(child).is_some(),
        p if is_trnrs(p) => child == T::Status || statement_kind(child).is_some(),
        T::StmtRs | T::CcStmtRs => matches!(
            child,
            T::BankAcctFrom | T::CcAcctFrom | T::BankTranList | T::LedgerBal | T::AvailBal
        ),
        T::InvStmtRs => matches!(
            child,
            T::InvAcctFrom | T::InvTranList | T::InvPosList | T::InvBal
        ),
        T::BankTranList | T::InvBankTran => child == T::StmtTrn,
        T::StmtTrn => matches!(child, T::Payee | T::Currency | T::OrigCurrency),
        T::InvTranList => child == T::InvBankTran || is_investment_txn(child),
        p if is_investment_txn(p) => matches!(
            child,
            T::InvBuy | T::InvSell | T::InvTran | T::SecId | T::Currency | T::OrigCurrency
        ),
        T::InvBuy | T::InvSell => {
            matches!(child, T::InvTran | T::SecId | T::Currency | T::OrigCurrency)
        }
        T::InvPosList => position_kind(child).is_some(),
        p if position_kind(p).is_some() => child == T::InvPos,
        T::InvPos => child == T::SecId,
        T::SecListMsgs => child == T::SecList,
        T::SecList => is_secinfo_holder(child),
        p if is_secinfo_holder(p) => child == T::SecInfo,
        T::SecInfo => child == T::SecId,
        _ => false,
    }
}

fn new_statement(kind: StatementKind) -> Statement {
    let account_type = match kind {
        StatementKind::Bank => None,
        StatementKind::CreditCard => Some("CREDITCARD".to_owned()),
        StatementKind::Investment => Some("INVESTMENT".to_owned()),
    };
    Statement {
        kind,
        currency: String::new(),
        account: StatementAccount {
            account_type,
            ..StatementAccount::default()
        },
        transactions: Vec::new(),
        positions: Vec::new(),
        ledger_balance: None,
        available_balance: None,
        investment_balance: None,
        start: None,
        end: None,
        as_of: None,
    }
}

impl Builder {
    /// Whether an `<OFX>` element was seen.
    pub(crate) fn seen_ofx(&self) -> bool {
        self.seen_ofx
    }

    /// The balances that could not be read, as (byte offset, message), in file order.
    pub(crate) fn take_warnings(&mut self) -> Vec<(usize, String)> {
        std::mem::take(&mut self.warnings)
    }

    /// The document, once every event was received.
    pub(crate) fn finish(mut self) -> Result<OfxDocument, Failure> {
        self.resolve_securities();
        if self.statements.is_empty() {
            if let Some(signon) = &self.signon
                && signon.status_code != 0
            {
                return Err(Failure::Signon {
                    code: signon.status_code,
                    message: signon
                        .message
                        .clone()
                        .unwrap_or_else(|| signon.severity.clone()),
                });
            }
            if let Some((code, message)) = self.failures.first() {
                return Err(Failure::Request {
                    code: *code,
                    message: message.clone(),
                });
            }
        }
        Ok(OfxDocument {
            signon: self.signon,
            statements: self.statements,
            warnings: Vec::new(),
        })
    }

    /// Names securities through `SECLIST` (which may come after the statements).
    fn resolve_securities(&mut self) {
        let mut by_unique_id: HashMap<&str, &SecInfo> = HashMap::new();
        for (id, info) in &self.securities {
            by_unique_id.entry(id.unique_id.as_str()).or_insert(info);
        }
        let lookup = |id: &SecurityId| -> Option<SecInfo> {
            self.securities
                .get(id)
                .or_else(|| by_unique_id.get(id.unique_id.as_str()).copied())
                .cloned()
        };
        for statement in &mut self.statements {
            for txn in &mut statement.transactions {
                let Some(id) = &txn.security_id else {
                    continue;
                };
                let info = lookup(id);
                txn.symbol = Some(
                    info.as_ref()
                        .and_then(|i| i.ticker.clone())
                        .unwrap_or_else(|| id.unique_id.clone()),
                );
                txn.security_name = info.and_then(|i| i.name);
            }
            for position in &mut statement.positions {
                let info = lookup(&position.security_id);
                if let Some(ticker) = info.as_ref().and_then(|i| i.ticker.clone()) {
                    position.symbol = ticker;
                }
                position.security_name = info.and_then(|i| i.name);
            }
        }
    }

    fn stmt_leaf(
        &mut self,
        parent: Tag,
        tag: Tag,
        value: &str,
        pos: usize,
    ) -> Result<(), RawError> {
        let warnings = &mut self.warnings;
        let Some(stmt) = self.stmt.as_mut() else {
            return Ok(());
        };
        match (parent, tag) {
            (Tag::StmtRs | Tag::CcStmtRs | Tag::InvStmtRs, Tag::CurDef) => {
                stmt.currency = value.to_owned();
            }
            (Tag::InvStmtRs, Tag::DtAsOf) => stmt.as_of = date(tag, value, pos)?,
            (Tag::BankAcctFrom | Tag::CcAcctFrom | Tag::InvAcctFrom, _) => {
                let account = &mut stmt.account;
                match tag {
                    Tag::AcctId => account.account_id = text(value),
                    Tag::BankId => account.bank_id = text(value),
                    Tag::BranchId => account.branch_id = text(value),
                    Tag::BrokerId => account.broker_id = text(value),
                    Tag::AcctType if stmt.kind == StatementKind::Bank => {
                        account.account_type = text(value);
                    }
                    _ => {}
                }
            }
            (Tag::BankTranList | Tag::InvTranList, Tag::DtStart) => {
                stmt.start = date(tag, value, pos)?;
            }
            (Tag::BankTranList | Tag::InvTranList, Tag::DtEnd) => {
                stmt.end = date(tag, value, pos)?;
            }
            (Tag::InvBal, _) => {
                let bal = stmt.investment_balance.get_or_insert_with(Default::default);
                match tag {
                    Tag::AvailCash => {
                        bal.available_cash = balance_amount(tag, value, pos, warnings);
                    }
                    Tag::MarginBalance => {
                        bal.margin_balance = balance_amount(tag, value, pos, warnings);
                    }
                    Tag::ShortBalance => {
                        bal.short_balance = balance_amount(tag, value, pos, warnings);
                    }
                    Tag::BuyPower => bal.buying_power = balance_amount(tag, value, pos, warnings),
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn txn_leaf(&mut self, parent: Tag, tag: Tag, value: &str, pos: usize) -> Result<(), RawError> {
        let Some(txn) = self.txn.as_mut() else {
            return Ok(());
        };
        match parent {
            Tag::StmtTrn => match tag {
                Tag::TrnType => txn.trn_type = text(value),
                Tag::DtPosted => {
                    txn.posted = zoned_date(tag, value, pos)?;
                    if txn.posted.is_none() {
                        return Err(RawError::malformed(pos, "<DTPOSTED> is empty"));
                    }
                }
                Tag::DtUser => txn.user_date = date(tag, value, pos)?,
                Tag::DtAvail => txn.settled = zoned_date(tag, value, pos)?,
                Tag::TrnAmt => txn.amount = amount(tag, value, pos)?,
                Tag::FitId => txn.fit_id = text(value),
                Tag::CheckNum => txn.check_number = text(value),
                Tag::Name => txn.name = text(value),
                Tag::Memo => txn.memo = text(value),
                // Written as leaves by some institutions: `<PAYEE>Name`, `<CURRENCY>EUR`.
                Tag::Payee => txn.payee_name = text(value),
                Tag::Currency | Tag::OrigCurrency => txn.currency = text(value),
                _ => {}
            },
            Tag::Payee if tag == Tag::Name => txn.payee_name = text(value),
            Tag::Currency | Tag::OrigCurrency if tag == Tag::CurSym => {
                txn.currency = text(value);
            }
            Tag::Payee | Tag::Currency | Tag::OrigCurrency => {}
            Tag::InvTran => match tag {
                Tag::FitId => txn.fit_id = text(value),
                Tag::DtTrade => {
                    txn.posted = zoned_date(tag, value, pos)?;
                    if txn.posted.is_none() {
                        return Err(RawError::malformed(pos, "<DTTRADE> is empty"));
                    }
                }
                Tag::DtSettle => txn.settled = zoned_date(tag, value, pos)?,
                Tag::Memo => txn.memo = text(value),
                _ => {}
            },
            _ => match tag {
                Tag::Units => txn.units = amount(tag, value, pos)?,
                Tag::UnitPrice => txn.unit_price = amount(tag, value, pos)?,
                Tag::Commission => txn.commission = amount(tag, value, pos)?,
                Tag::Total => txn.amount = amount(tag, value, pos)?,
                Tag::IncomeType => txn.income_type = text(value),
                Tag::Currency | Tag::OrigCurrency => txn.currency = text(value),
                Tag::BuyType
                | Tag::SellType
                | Tag::OptBuyType
                | Tag::OptSellType
                | Tag::TferAction => txn.trn_type = text(value),
                _ => {}
            },
        }
        Ok(())
    }

    fn position_leaf(&mut self, tag: Tag, value: &str, pos: usize) -> Result<(), RawError> {
        let Some(p) = self.position.as_mut() else {
            return Ok(());
        };
        match tag {
            Tag::HeldInAcct => p.held_in = text(value),
            Tag::PosType => p.long_short = text(value),
            Tag::Units => p.units = amount(tag, value, pos)?,
            Tag::UnitPrice => p.unit_price = amount(tag, value, pos)?,
            Tag::MktVal => p.market_value = amount(tag, value, pos)?,
            Tag::DtPriceAsOf => p.price_as_of = date(tag, value, pos)?,
            _ => {}
        }
        Ok(())
    }

    fn close_status(&mut self) {
        let Some(status) = self.status.take() else {
            return;
        };
        match self.stack.last() {
            Some(Tag::Sonrs) => {
                if let Some(s) = self.signon_b.as_mut() {
                    s.status = Some(status);
                }
            }
            Some(&p) if is_trnrs(p) => {
                if let Some(t) = self.trnrs.as_mut() {
                    t.status = Some(status);
                }
            }
            _ => {}
        }
    }

    fn close_secid(&mut self) {
        let Some(b) = self.secid.take() else {
            return;
        };
        let Some(unique_id) = b.unique_id else {
            return;
        };
        let id = SecurityId {
            unique_id,
            unique_id_type: b.unique_id_type.unwrap_or_default(),
        };
        match self.stack.last() {
            Some(Tag::SecInfo) => {
                if let Some(sec) = self.sec.as_mut() {
                    sec.security_id = Some(id);
                }
            }
            Some(Tag::InvPos) => {
                if let Some(p) = self.position.as_mut() {
                    p.security_id = Some(id);
                }
            }
            _ => {
                if let Some(t) = self.txn.as_mut() {
                    t.security_id = Some(id);
                }
            }
        }
    }
}

impl Sink for Builder {
    fn open(&mut self, tag: Tag, name: &str, pos: usize) -> Result<(), RawError> {
        if self.skip > 0 {
            self.skip += 1;
            return Ok(());
        }
        if !self.in_ofx {
            // Outside <OFX> every element is entered, to find <OFX> inside header wrappers.
            if tag == Tag::Ofx {
                self.in_ofx = true;
                self.seen_ofx = true;
            }
            self.stack.push(tag);
            return Ok(());
        }
        let parent = self.stack.last().copied().unwrap_or(Tag::Ofx);
        // Proprietary aggregates (`INTU.XXX`, …) are never entered.
        let proprietary = tag == Tag::Other && name.contains('.');
        if proprietary || !accepts(parent, tag) {
            self.skip = 1;
            return Ok(());
        }
        self.stack.push(tag);
        match tag {
            Tag::Sonrs => self.signon_b = Some(SignonBuilder::default()),
            Tag::Status => self.status = Some(StatusBuilder::default()),
            t if is_trnrs(t) => {
                self.trnrs = Some(TrnRsState {
                    status: None,
                    statements: 0,
                });
            }
            Tag::LedgerBal | Tag::AvailBal => self.bal = Some(BalBuilder::default()),
            Tag::StmtTrn => {
                self.txn = Some(TxnBuilder::new(TransactionKind::Bank(String::new()), pos));
            }
            Tag::SecId => self.secid = Some(SecIdBuilder::default()),
            Tag::InvBal => {
                if let Some(stmt) = self.stmt.as_mut() {
                    stmt.investment_balance
                        .get_or_insert_with(InvestmentBalance::default);
                }
            }
            Tag::SecInfo => {}
            t => {
                if let Some(kind) = statement_kind(t) {
                    self.stmt = Some(new_statement(kind));
                } else if let Some(kind) = position_kind(t) {
                    self.position = Some(PosBuilder {
                        pos,
                        kind,
                        security_id: None,
                        units: None,
                        unit_price: None,
                        market_value: None,
                        price_as_of: None,
                        held_in: None,
                        long_short: None,
                    });
                } else if is_secinfo_holder(t) {
                    self.sec = Some(SecBuilder::default());
                } else if parent == Tag::InvTranList
                    && let Some(kind) = investment_kind(t, name)
                {
                    self.txn = Some(TxnBuilder::new(kind, pos));
                }
            }
        }
        Ok(())
    }

    fn close(&mut self, tag: Tag, _pos: usize) -> Result<(), RawError> {
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(());
        }
        let Some(closed) = self.stack.pop() else {
            return Ok(());
        };
        if !self.in_ofx {
            return Ok(());
        }
        // The reader closes aggregates innermost first, so `closed` is `tag`.
        let _ = tag;
        let parent = self.stack.last().copied();
        match closed {
            Tag::Ofx => self.in_ofx = false,
            Tag::Status => self.close_status(),
            Tag::Sonrs => {
                if let Some(b) = self.signon_b.take()
                    && self.signon.is_none()
                {
                    let status = b.status.unwrap_or_default();
                    self.signon = Some(Signon {
                        status_code: status.code.unwrap_or(0),
                        severity: status.severity.unwrap_or_else(|| "INFO".to_owned()),
                        message: status.message,
                        org: b.org,
                        fid: b.fid,
                    });
                }
            }
            t if is_trnrs(t) => {
                if let Some(state) = self.trnrs.take()
                    && state.statements == 0
                    && let Some(status) = state.status
                    && let Some(code) = status.code.filter(|&c| c != 0)
                {
                    let message = status
                        .message
                        .or(status.severity)
                        .unwrap_or_else(|| "error".to_owned());
                    self.failures.push((code, message));
                }
            }
            Tag::LedgerBal | Tag::AvailBal => {
                if let (Some(b), Some(stmt)) = (self.bal.take(), self.stmt.as_mut())
                    && let Some(amount) = b.amount
                {
                    let balance = Some(Balance {
                        amount,
                        as_of: b.as_of,
                    });
                    if closed == Tag::LedgerBal {
                        stmt.ledger_balance = balance;
                    } else {
                        stmt.available_balance = balance;
                    }
                }
            }
            Tag::StmtTrn => {
                if let Some(b) = self.txn.take() {
                    let txn = b.finish()?;
                    if let Some(stmt) = self.stmt.as_mut() {
                        stmt.transactions.push(txn);
                    }
                }
            }
            Tag::SecId => self.close_secid(),
            Tag::SecInfo => {}
            t => {
                if statement_kind(t).is_some() {
                    if let Some(mut stmt) = self.stmt.take() {
                        if stmt.currency.is_empty() {
                            stmt.currency = "USD".to_owned();
                        }
                        self.statements.push(stmt);
                        if let Some(state) = self.trnrs.as_mut() {
                            state.statements += 1;
                        }
                    }
                } else if position_kind(t).is_some() {
                    if let Some(b) = self.position.take() {
                        let position = b.finish()?;
                        if let Some(stmt) = self.stmt.as_mut() {
                            stmt.positions.push(position);
                        }
                    }
                } else if is_secinfo_holder(t) {
                    if let Some(SecBuilder {
                        security_id: Some(id),
                        name,
                        ticker,
                    }) = self.sec.take()
                    {
                        self.securities.insert(id, SecInfo { name, ticker });
                    }
                } else if parent == Some(Tag::InvTranList)
                    && is_investment_txn(t)
                    && let Some(b) = self.txn.take()
                {
                    let txn = b.finish()?;
                    if let Some(stmt) = self.stmt.as_mut() {
                        stmt.transactions.push(txn);
                    }
                }
            }
        }
        Ok(())
    }

    fn leaf(&mut self, tag: Tag, value: &str, pos: usize) -> Result<(), RawError> {
        if self.skip > 0 || !self.in_ofx {
            return Ok(());
        }
        let Some(&parent) = self.stack.last() else {
            return Ok(());
        };
        match parent {
            Tag::Status => {
                if let Some(s) = self.status.as_mut() {
                    match tag {
                        Tag::Code => {
                            s.code = Some(parse_code(value).map_err(|why| {
                                RawError::malformed(pos, format!("{why} in <CODE>: {value:?}"))
                            })?);
                        }
                        Tag::Severity => s.severity = text(value),
                        Tag::Message => s.message = text(value),
                        _ => {}
                    }
                }
            }
            Tag::Fi => {
                if let Some(s) = self.signon_b.as_mut() {
                    match tag {
                        Tag::Org => s.org = text(value),
                        Tag::Fid => s.fid = text(value),
                        _ => {}
                    }
                }
            }
            Tag::LedgerBal | Tag::AvailBal => {
                if let Some(b) = self.bal.as_mut() {
                    match tag {
                        Tag::BalAmt => {
                            b.amount = balance_amount(tag, value, pos, &mut self.warnings);
                        }
                        Tag::DtAsOf => b.as_of = date(tag, value, pos)?,
                        _ => {}
                    }
                }
            }
            Tag::SecId => {
                if let Some(s) = self.secid.as_mut() {
                    match tag {
                        Tag::UniqueId => s.unique_id = text(value),
                        Tag::UniqueIdType => s.unique_id_type = text(value),
                        _ => {}
                    }
                }
            }
            Tag::SecInfo => {
                if let Some(s) = self.sec.as_mut() {
                    match tag {
                        Tag::SecName => s.name = text(value),
                        Tag::Ticker => s.ticker = text(value),
                        _ => {}
                    }
                }
            }
            Tag::InvPos => self.position_leaf(tag, value, pos)?,
            Tag::StmtTrn | Tag::Payee | Tag::Currency | Tag::OrigCurrency | Tag::InvTran => {
                self.txn_leaf(parent, tag, value, pos)?;
            }
            Tag::InvBuy | Tag::InvSell => self.txn_leaf(parent, tag, value, pos)?,
            p if is_investment_txn(p) => self.txn_leaf(parent, tag, value, pos)?,
            _ => self.stmt_leaf(parent, tag, value, pos)?,
        }
        Ok(())
    }
}
