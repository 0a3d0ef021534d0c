//! Writing statements out as OFX 1.x SGML or OFX 2.x XML.
//!
//! The output is what [`parse_ofx`](super::parse_ofx) reads back to the same document for any
//! document the parser can produce, with these limits of the format: a statement's account
//! holds only the fields its account aggregate has (`CCACCTFROM` and `INVACCTFROM` have no
//! `BANKID`), buys and sells are written as `BUYSTOCK`/`SELLSTOCK`, investment transactions
//! carry no `NAME`, `CHECKNUM` or user date, `trn_type` of `INCOME`, `REINVEST` and other
//! investment transactions is not written, one security id has one `SECLIST` entry (the first
//! symbol and name seen for it), and years must have four digits.

use std::fmt::Write as _;

use chrono::{DateTime, Datelike, Offset as _, TimeZone, Timelike};
use quick_xml::escape::partial_escape;
use rust_decimal::Decimal;

use super::model::{
    OfxDocument, Position, PositionKind, SecurityId, Statement, StatementKind,
    StatementTransaction, TransactionKind,
};

/// Writes `doc` as an OFX 1.x (SGML, version 103) file: colon header, leaf elements not closed.
pub fn write_ofx1(doc: &OfxDocument) -> String {
    let mut w = Writer::new(false, doc);
    w.out.push_str(
        "OFXHEADER:100\nDATA:OFXSGML\nVERSION:103\nSECURITY:NONE\nENCODING:UTF-8\n\
         CHARSET:NONE\nCOMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n",
    );
    w.document(doc);
    w.out
}

/// Writes `doc` as an OFX 2.x (XML, version 220) file: XML declaration, `<?OFX?>` header,
/// every element closed.
pub fn write_ofx2(doc: &OfxDocument) -> String {
    let mut w = Writer::new(true, doc);
    w.out.push_str(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n\
         <?OFX OFXHEADER=\"200\" VERSION=\"220\" SECURITY=\"NONE\" OLDFILEUID=\"NONE\" \
         NEWFILEUID=\"NONE\"?>\n",
    );
    w.document(doc);
    w.out
}

struct Writer {
    out: String,
    xml: bool,
    trnuid: u64,
}

/// A security to list in `SECLIST`.
struct ListedSecurity<'a> {
    id: &'a SecurityId,
    symbol: Option<&'a str>,
    name: Option<&'a str>,
    info_tag: &'static str,
}

impl Writer {
    fn new(xml: bool, doc: &OfxDocument) -> Writer {
        let transactions: usize = doc.statements.iter().map(|s| s.transactions.len()).sum();
        Writer {
            out: String::with_capacity(1024 + transactions * 320),
            xml,
            trnuid: 0,
        }
    }

    fn open(&mut self, tag: &str) {
        self.out.push('<');
        self.out.push_str(tag);
        self.out.push_str(">\n");
    }

    fn close(&mut self, tag: &str) {
        self.out.push_str("</");
        self.out.push_str(tag);
        self.out.push_str(">\n");
    }

    fn leaf(&mut self, tag: &str, value: &str) {
        self.out.push('<');
        self.out.push_str(tag);
        self.out.push('>');
        self.out.push_str(&partial_escape(value));
        self.end_leaf(tag);
    }

    fn end_leaf(&mut self, tag: &str) {
        if self.xml {
            self.out.push_str("</");
            self.out.push_str(tag);
            self.out.push('>');
        }
        self.out.push('\n');
    }

    fn opt_leaf(&mut self, tag: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.leaf(tag, value);
        }
    }

    fn decimal(&mut self, tag: &str, value: &Decimal) {
        self.out.push('<');
        self.out.push_str(tag);
        self.out.push('>');
        let _ = write!(self.out, "{value}");
        self.end_leaf(tag);
    }

    fn opt_decimal(&mut self, tag: &str, value: Option<&Decimal>) {
        if let Some(value) = value {
            self.decimal(tag, value);
        }
    }

    /// Writes a date in its own offset, so a zoned date reads back with the same calendar day.
    fn date<Tz: TimeZone>(&mut self, tag: &str, value: &DateTime<Tz>) {
        self.out.push('<');
        self.out.push_str(tag);
        self.out.push('>');
        let _ = write!(
            self.out,
            "{:04}{:02}{:02}{:02}{:02}{:02}",
            value.year(),
            value.month(),
            value.day(),
            value.hour(),
            value.minute(),
            value.second()
        );
        let nanos = value.nanosecond();
        if nanos.is_multiple_of(1_000_000) && nanos != 0 {
            let _ = write!(self.out, ".{:03}", nanos / 1_000_000);
        } else if nanos != 0 {
            let _ = write!(self.out, ".{nanos:09}");
        }
        let minutes = value.offset().fix().local_minus_utc() / 60;
        if minutes == 0 {
            self.out.push_str("[0:GMT]");
        } else {
            let sign = if minutes < 0 { '-' } else { '+' };
            let (hours, rest) = (minutes.abs() / 60, minutes.abs() % 60);
            if rest == 0 {
                let _ = write!(self.out, "[{sign}{hours}]");
            } else {
                let _ = write!(self.out, "[{sign}{hours}.{rest:02}]");
            }
        }
        self.end_leaf(tag);
    }

    fn opt_date<Tz: TimeZone>(&mut self, tag: &str, value: Option<&DateTime<Tz>>) {
        if let Some(value) = value {
            self.date(tag, value);
        }
    }

    fn status_ok(&mut self) {
        self.open("STATUS");
        self.leaf("CODE", "0");
        self.leaf("SEVERITY", "INFO");
        self.close("STATUS");
    }

    fn document(&mut self, doc: &OfxDocument) {
        self.open("OFX");
        if let Some(signon) = &doc.signon {
            self.open("SIGNONMSGSRSV1");
            self.open("SONRS");
            self.open("STATUS");
            self.leaf("CODE", &signon.status_code.to_string());
            self.leaf("SEVERITY", &signon.severity);
            self.opt_leaf("MESSAGE", signon.message.as_deref());
            self.close("STATUS");
            self.leaf("DTSERVER", "20000101000000[0:GMT]");
            self.leaf("LANGUAGE", "ENG");
            if signon.org.is_some() || signon.fid.is_some() {
                self.open("FI");
                self.opt_leaf("ORG", signon.org.as_deref());
                self.opt_leaf("FID", signon.fid.as_deref());
                self.close("FI");
            }
            self.close("SONRS");
            self.close("SIGNONMSGSRSV1");
        }
        // Consecutive statements of one kind share a message set; file order is kept.
        let mut current: Option<StatementKind> = None;
        for statement in &doc.statements {
            if current != Some(statement.kind) {
                if let Some(kind) = current {
                    self.close(message_set(kind));
                }
                self.open(message_set(statement.kind));
                current = Some(statement.kind);
            }
            match statement.kind {
                StatementKind::Bank | StatementKind::CreditCard => self.bank_statement(statement),
                StatementKind::Investment => self.investment_statement(statement),
            }
        }
        if let Some(kind) = current {
            self.close(message_set(kind));
        }
        let securities = listed_securities(doc);
        if !securities.is_empty() {
            self.open("SECLISTMSGSRSV1");
            self.open("SECLIST");
            for security in &securities {
                self.open(security.info_tag);
                self.open("SECINFO");
                self.secid(security.id);
                self.opt_leaf("SECNAME", security.name);
                if let Some(symbol) = security.symbol.filter(|s| *s != security.id.unique_id) {
                    self.leaf("TICKER", symbol);
                }
                self.close("SECINFO");
                self.close(security.info_tag);
            }
            self.close("SECLIST");
            self.close("SECLISTMSGSRSV1");
        }
        self.close("OFX");
    }

    fn trnrs_start(&mut self, tag: &str) {
        self.open(tag);
        self.trnuid += 1;
        let trnuid = self.trnuid.to_string();
        self.leaf("TRNUID", &trnuid);
        self.status_ok();
    }

    fn bank_statement(&mut self, s: &Statement) {
        let credit_card = s.kind == StatementKind::CreditCard;
        let (trnrs, rs) = if credit_card {
            ("CCSTMTTRNRS", "CCSTMTRS")
        } else {
            ("STMTTRNRS", "STMTRS")
        };
        self.trnrs_start(trnrs);
        self.open(rs);
        self.leaf("CURDEF", &s.currency);
        let a = &s.account;
        if credit_card {
            if a.account_id.is_some() {
                self.open("CCACCTFROM");
                self.opt_leaf("ACCTID", a.account_id.as_deref());
                self.close("CCACCTFROM");
            }
        } else if a.bank_id.is_some()
            || a.branch_id.is_some()
            || a.account_id.is_some()
            || a.account_type.is_some()
        {
            self.open("BANKACCTFROM");
            self.opt_leaf("BANKID", a.bank_id.as_deref());
            self.opt_leaf("BRANCHID", a.branch_id.as_deref());
            self.opt_leaf("ACCTID", a.account_id.as_deref());
            self.opt_leaf("ACCTTYPE", a.account_type.as_deref());
            self.close("BANKACCTFROM");
        }
        if s.start.is_some() || s.end.is_some() || !s.transactions.is_empty() {
            self.open("BANKTRANLIST");
            self.opt_date("DTSTART", s.start.as_ref());
            self.opt_date("DTEND", s.end.as_ref());
            for t in &s.transactions {
                self.stmttrn(t);
            }
            self.close("BANKTRANLIST");
        }
        for (tag, balance) in [
            ("LEDGERBAL", &s.ledger_balance),
            ("AVAILBAL", &s.available_balance),
        ] {
            if let Some(balance) = balance {
                self.open(tag);
                self.decimal("BALAMT", &balance.amount);
                self.opt_date("DTASOF", balance.as_of.as_ref());
                self.close(tag);
            }
        }
        self.close(rs);
        self.close(trnrs);
    }

    fn stmttrn(&mut self, t: &StatementTransaction) {
        self.open("STMTTRN");
        let trn_type = match &t.kind {
            TransactionKind::Bank(kind) => kind.as_str(),
            _ => t.trn_type.as_deref().unwrap_or("OTHER"),
        };
        self.leaf("TRNTYPE", trn_type);
        self.date("DTPOSTED", &t.posted);
        self.opt_date("DTUSER", t.user_date.as_ref());
        self.opt_date("DTAVAIL", t.settled.as_ref());
        self.decimal("TRNAMT", &t.amount);
        self.leaf("FITID", &t.fit_id);
        self.opt_leaf("CHECKNUM", t.check_number.as_deref());
        self.opt_leaf("NAME", t.name.as_deref());
        self.opt_leaf("MEMO", t.memo.as_deref());
        self.currency(t.currency.as_deref());
        self.close("STMTTRN");
    }

    fn currency(&mut self, currency: Option<&str>) {
        if let Some(currency) = currency {
            self.open("CURRENCY");
            self.leaf("CURRATE", "1.0");
            self.leaf("CURSYM", currency);
            self.close("CURRENCY");
        }
    }

    fn secid(&mut self, id: &SecurityId) {
        self.open("SECID");
        self.leaf("UNIQUEID", &id.unique_id);
        self.leaf("UNIQUEIDTYPE", &id.unique_id_type);
        self.close("SECID");
    }

    fn investment_statement(&mut self, s: &Statement) {
        self.trnrs_start("INVSTMTTRNRS");
        self.open("INVSTMTRS");
        self.opt_date("DTASOF", s.as_of.as_ref());
        self.leaf("CURDEF", &s.currency);
        let a = &s.account;
        if a.broker_id.is_some() || a.account_id.is_some() {
            self.open("INVACCTFROM");
            self.opt_leaf("BROKERID", a.broker_id.as_deref());
            self.opt_leaf("ACCTID", a.account_id.as_deref());
            self.close("INVACCTFROM");
        }
        if s.start.is_some() || s.end.is_some() || !s.transactions.is_empty() {
            self.open("INVTRANLIST");
            self.opt_date("DTSTART", s.start.as_ref());
            self.opt_date("DTEND", s.end.as_ref());
            for t in &s.transactions {
                self.investment_transaction(t);
            }
            self.close("INVTRANLIST");
        }
        if !s.positions.is_empty() {
            self.open("INVPOSLIST");
            for p in &s.positions {
                self.position(p);
            }
            self.close("INVPOSLIST");
        }
        if let Some(b) = &s.investment_balance {
            self.open("INVBAL");
            self.opt_decimal("AVAILCASH", b.available_cash.as_ref());
            self.opt_decimal("MARGINBALANCE", b.margin_balance.as_ref());
            self.opt_decimal("SHORTBALANCE", b.short_balance.as_ref());
            self.opt_decimal("BUYPOWER", b.buying_power.as_ref());
            self.close("INVBAL");
        }
        self.close("INVSTMTRS");
        self.close("INVSTMTTRNRS");
    }

    fn invtran(&mut self, t: &StatementTransaction) {
        self.open("INVTRAN");
        self.leaf("FITID", &t.fit_id);
        self.date("DTTRADE", &t.posted);
        self.opt_date("DTSETTLE", t.settled.as_ref());
        self.opt_leaf("MEMO", t.memo.as_deref());
        self.close("INVTRAN");
    }

    /// `INVTRAN`, `SECID` and the amounts, in the order `INVBUY`/`INVSELL` have them.
    fn investment_body(&mut self, t: &StatementTransaction, write_total: bool) {
        self.invtran(t);
        if let Some(id) = &t.security_id {
            self.secid(id);
        }
        self.opt_leaf("INCOMETYPE", t.income_type.as_deref());
        self.opt_decimal("UNITS", t.units.as_ref());
        self.opt_decimal("UNITPRICE", t.unit_price.as_ref());
        self.opt_decimal("COMMISSION", t.commission.as_ref());
        if write_total {
            self.decimal("TOTAL", &t.amount);
        }
        self.currency(t.currency.as_deref());
    }

    fn investment_transaction(&mut self, t: &StatementTransaction) {
        match &t.kind {
            TransactionKind::Bank(_) => {
                self.open("INVBANKTRAN");
                self.stmttrn(t);
                self.leaf("SUBACCTFUND", "CASH");
                self.close("INVBANKTRAN");
            }
            TransactionKind::Buy | TransactionKind::Sell => {
                let (outer, inner, type_tag) = if t.kind == TransactionKind::Buy {
                    ("BUYSTOCK", "INVBUY", "BUYTYPE")
                } else {
                    ("SELLSTOCK", "INVSELL", "SELLTYPE")
                };
                self.open(outer);
                self.open(inner);
                self.investment_body(t, true);
                self.leaf("SUBACCTSEC", "CASH");
                self.leaf("SUBACCTFUND", "CASH");
                self.close(inner);
                self.opt_leaf(type_tag, t.trn_type.as_deref());
                self.close(outer);
            }
            TransactionKind::Transfer => {
                self.open("TRANSFER");
                self.investment_body(t, !t.amount.is_zero());
                self.leaf("SUBACCTSEC", "CASH");
                self.opt_leaf("TFERACTION", t.trn_type.as_deref());
                self.close("TRANSFER");
            }
            TransactionKind::Income | TransactionKind::Reinvest | TransactionKind::Other(_) => {
                let tag = match &t.kind {
                    TransactionKind::Income => "INCOME",
                    TransactionKind::Reinvest => "REINVEST",
                    TransactionKind::Other(tag) => tag.as_str(),
                    _ => "INVEXPENSE",
                };
                self.open(tag);
                self.investment_body(t, true);
                self.close(tag);
            }
        }
    }

    fn position(&mut self, p: &Position) {
        let tag = match p.asset_kind {
            PositionKind::Stock => "POSSTOCK",
            PositionKind::MutualFund => "POSMF",
            PositionKind::Debt => "POSDEBT",
            PositionKind::Option => "POSOPT",
            PositionKind::Other => "POSOTHER",
        };
        self.open(tag);
        self.open("INVPOS");
        self.secid(&p.security_id);
        self.opt_leaf("HELDINACCT", p.held_in.as_deref());
        self.opt_leaf("POSTYPE", p.long_short.as_deref());
        self.decimal("UNITS", &p.units);
        self.opt_decimal("UNITPRICE", p.unit_price.as_ref());
        self.opt_decimal("MKTVAL", p.market_value.as_ref());
        self.opt_date("DTPRICEASOF", p.price_as_of.as_ref());
        self.close("INVPOS");
        self.close(tag);
    }
}

fn message_set(kind: StatementKind) -> &'static str {
    match kind {
        StatementKind::Bank => "BANKMSGSRSV1",
        StatementKind::CreditCard => "CREDITCARDMSGSRSV1",
        StatementKind::Investment => "INVSTMTMSGSRSV1",
    }
}

/// Every security named by a position or transaction, once, in order of first appearance.
fn listed_securities(doc: &OfxDocument) -> Vec<ListedSecurity<'_>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for s in &doc.statements {
        for p in &s.positions {
            if seen.insert(&p.security_id) {
                out.push(ListedSecurity {
                    id: &p.security_id,
                    symbol: Some(&p.symbol),
                    name: p.security_name.as_deref(),
                    info_tag: match p.asset_kind {
                        PositionKind::Stock => "STOCKINFO",
                        PositionKind::MutualFund => "MFINFO",
                        PositionKind::Debt => "DEBTINFO",
                        PositionKind::Option => "OPTINFO",
                        PositionKind::Other => "OTHERINFO",
                    },
                });
            }
        }
        for t in &s.transactions {
            if let Some(id) = &t.security_id
                && seen.insert(id)
            {
                out.push(ListedSecurity {
                    id,
                    symbol: t.symbol.as_deref(),
                    name: t.security_name.as_deref(),
                    info_tag: "STOCKINFO",
                });
            }
        }
    }
    out
}
