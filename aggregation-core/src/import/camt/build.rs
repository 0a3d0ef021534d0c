//! Building statements from the element events: one statement, balance, entry and transaction
//! detail at a time, each finished when its end tag is read.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::reader::Tag;
use super::text::tidy;
use super::values;
use crate::import::model::{
    AccountKind, EntryKind, EntryStatus, ParseError, ParseWarning, ParsedAccount, ParsedBalance,
    ParsedEntry, ParsedFile, ParsedStatement, check_statement_sums, checked_sum,
};

/// References that identify nothing.
const PLACEHOLDER_REFERENCES: [&str; 4] = ["NOTPROVIDED", "NOT PROVIDED", "NONREF", "NONE"];

/// Collects the file.
#[derive(Default)]
pub(super) struct Builder {
    file: ParsedFile,
    seen_message: bool,
    /// `GrpHdr/CreDtTm`: the last resort for an entry's date.
    header_created: Option<NaiveDate>,
    /// The `Ccy` attribute of the `Amt` element being read.
    amount_currency: Option<String>,
    statement: Option<StatementState>,
    balance: Option<BalanceState>,
    entry: Option<EntryState>,
    detail: Option<DetailState>,
}

#[derive(Default)]
struct StatementState {
    /// Index of the `Stmt`/`Rpt`/`Ntfctn` element in the stack.
    depth: usize,
    iban: Option<String>,
    other_id: Option<String>,
    currency: Option<String>,
    name: Option<String>,
    kind: Option<String>,
    servicer_name: Option<String>,
    servicer_bic: Option<String>,
    to_date: Option<NaiveDate>,
    created: Option<NaiveDate>,
    opening: Option<Balance>,
    closing: Option<Balance>,
    available: Option<Balance>,
    rows: Vec<Row>,
    /// The first currency seen on a balance or an entry.
    seen_currency: Option<String>,
}

/// A balance, and whether it came from the preferred code (`OPBD`, `CLBD`, `CLAV`) rather than
/// the fallback (`PRCD`, `ITBD`, `ITAV`).
struct Balance {
    balance: ParsedBalance,
    preferred: bool,
}

struct Row {
    entry: ParsedEntry,
    reversal: bool,
}

#[derive(Default)]
struct BalanceState {
    depth: usize,
    line: usize,
    code: Option<String>,
    proprietary: Option<String>,
    amount: Option<String>,
    currency: Option<String>,
    sign: Option<String>,
    date: Option<String>,
}

#[derive(Default, Clone)]
struct Code {
    domain: Option<String>,
    family: Option<String>,
    sub_family: Option<String>,
    proprietary: Option<String>,
}

impl Code {
    fn leaf(&mut self, path: &[Tag], value: &str) {
        let slot = match path {
            [Tag::Domn, Tag::Cd] => &mut self.domain,
            [Tag::Domn, Tag::Fmly, Tag::Cd] => &mut self.family,
            [Tag::Domn, Tag::Fmly, Tag::SubFmlyCd] => &mut self.sub_family,
            [Tag::Prtry, Tag::Cd] => &mut self.proprietary,
            _ => return,
        };
        *slot = Some(tidy(value));
    }

    fn is_empty(&self) -> bool {
        self.domain.is_none() && self.proprietary.is_none()
    }

    /// `Domn/Fmly/SubFmly`, else the proprietary code.
    fn render(&self) -> Option<String> {
        if let Some(domain) = &self.domain {
            let mut code = domain.clone();
            for part in [&self.family, &self.sub_family].into_iter().flatten() {
                code.push('/');
                code.push_str(part);
            }
            return Some(code);
        }
        self.proprietary.clone()
    }

    fn kind(&self) -> EntryKind {
        let is = |codes: &[&str]| {
            [&self.family, &self.sub_family]
                .into_iter()
                .flatten()
                .any(|c| codes.contains(&c.to_ascii_uppercase().as_str()))
        };
        if is(&["CHRG", "FEES", "COMM", "COMT"]) {
            EntryKind::Fee
        } else if is(&["INTR"]) {
            EntryKind::Income
        } else if self
            .domain
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case("PMNT"))
        {
            EntryKind::Transfer
        } else {
            EntryKind::Other
        }
    }
}

#[derive(Default)]
struct EntryState {
    depth: usize,
    line: usize,
    amount: Option<Decimal>,
    currency: Option<String>,
    sign: Option<Decimal>,
    reversal: bool,
    status: Option<String>,
    booking: Option<NaiveDate>,
    value: Option<NaiveDate>,
    reference: Option<String>,
    code: Code,
    additional: Option<String>,
    details: Vec<DetailState>,
}

#[derive(Default)]
struct DetailState {
    depth: usize,
    line: usize,
    servicer_reference: Option<String>,
    transaction_id: Option<String>,
    amount: Option<(Decimal, Option<String>)>,
    transaction_amount: Option<(Decimal, Option<String>)>,
    sign: Option<Decimal>,
    code: Code,
    debtor: Option<String>,
    creditor: Option<String>,
    unstructured: Vec<String>,
    structured_reference: Option<String>,
    additional: Option<String>,
}

impl DetailState {
    fn leaf(&mut self, path: &[Tag], value: &str, currency: Option<String>) {
        match path {
            [Tag::Refs, Tag::AcctSvcrRef] => self.servicer_reference = reference(value),
            [Tag::Refs, Tag::TxId] => self.transaction_id = reference(value),
            [Tag::Amt] => self.amount = values::amount(value).map(|a| (a, currency)),
            [Tag::AmtDtls, Tag::TxAmt, Tag::Amt] => {
                self.transaction_amount = values::amount(value).map(|a| (a, currency));
            }
            [Tag::CdtDbtInd] => self.sign = values::credit_debit(value),
            [Tag::BkTxCd, rest @ ..] => self.code.leaf(rest, value),
            [Tag::RltdPties, Tag::Dbtr, Tag::Nm]
            | [Tag::RltdPties, Tag::Dbtr, Tag::Pty, Tag::Nm] => self.debtor = non_empty(value),
            [Tag::RltdPties, Tag::Cdtr, Tag::Nm]
            | [Tag::RltdPties, Tag::Cdtr, Tag::Pty, Tag::Nm] => self.creditor = non_empty(value),
            [Tag::RmtInf, Tag::Ustrd] => self.unstructured.extend(non_empty(value)),
            [Tag::RmtInf, Tag::Strd, Tag::CdtrRefInf, Tag::Ref]
                if self.structured_reference.is_none() =>
            {
                self.structured_reference = non_empty(value);
            }
            [Tag::AddtlTxInf] => self.additional = non_empty(value),
            _ => {}
        }
    }

    /// The detail's signed amount, when it has one in `currency` (or in no stated currency).
    fn signed_amount(&self, entry_sign: Decimal, currency: Option<&str>) -> Option<Decimal> {
        let (amount, detail_currency) =
            self.amount.as_ref().or(self.transaction_amount.as_ref())?;
        if let (Some(detail), Some(entry)) = (detail_currency.as_deref(), currency)
            && detail != entry
        {
            return None;
        }
        Some(*amount * self.sign.unwrap_or(entry_sign))
    }

    /// The remittance text of the detail: `Ustrd` lines, else the structured reference.
    fn remittance(&self) -> Option<String> {
        if self.unstructured.is_empty() {
            self.structured_reference.clone()
        } else {
            Some(self.unstructured.join(" "))
        }
    }

    /// The other party, seen from the account: the debtor of money in, the creditor of money
    /// out.
    fn counterparty(&self, sign: Decimal) -> Option<String> {
        if sign.is_sign_negative() {
            self.creditor.clone()
        } else {
            self.debtor.clone()
        }
    }
}

fn non_empty(value: &str) -> Option<String> {
    let value = tidy(value);
    (!value.is_empty()).then_some(value)
}

/// A reference, unless it is empty or a placeholder.
fn reference(value: &str) -> Option<String> {
    let value = tidy(value);
    if value.is_empty()
        || PLACEHOLDER_REFERENCES
            .iter()
            .any(|p| value.eq_ignore_ascii_case(p))
    {
        None
    } else {
        Some(value)
    }
}

/// Joins text parts with ` / `, leaving out empty parts and parts already in the text.
fn join_text<'a>(parts: impl IntoIterator<Item = Option<&'a str>>) -> Option<String> {
    let mut out = String::new();
    for part in parts.into_iter().flatten() {
        if part.is_empty() || out.contains(part) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(" / ");
        }
        out.push_str(part);
    }
    (!out.is_empty()).then_some(out)
}

fn warning(line: usize, message: impl Into<String>) -> ParseWarning {
    ParseWarning {
        item: format!("line {line}"),
        message: message.into(),
    }
}

impl Builder {
    /// An element opened; `stack` ends with it.
    pub(super) fn start(
        &mut self,
        stack: &[Tag],
        line: usize,
        currency: Option<String>,
    ) -> Result<(), ParseError> {
        let depth = stack.len() - 1;
        let Some(&tag) = stack.last() else {
            return Ok(());
        };
        let parent = depth.checked_sub(1).and_then(|i| stack.get(i)).copied();
        match tag {
            Tag::Amt => self.amount_currency = currency,
            Tag::Message if depth <= 1 => self.seen_message = true,
            Tag::Statement if parent == Some(Tag::Message) && self.statement.is_none() => {
                self.statement = Some(StatementState {
                    depth,
                    ..StatementState::default()
                });
            }
            Tag::Bal if self.is_statement_child(depth) => {
                self.balance = Some(BalanceState {
                    depth,
                    line,
                    ..BalanceState::default()
                });
            }
            Tag::Ntry if self.is_statement_child(depth) => {
                self.entry = Some(EntryState {
                    depth,
                    line,
                    ..EntryState::default()
                });
            }
            Tag::TxDtls
                if parent == Some(Tag::NtryDtls)
                    && self.entry.as_ref().is_some_and(|e| e.depth + 2 == depth) =>
            {
                self.detail = Some(DetailState {
                    depth,
                    line,
                    ..DetailState::default()
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn is_statement_child(&self, depth: usize) -> bool {
        self.statement
            .as_ref()
            .is_some_and(|s| s.depth + 1 == depth)
            && self.entry.is_none()
            && self.balance.is_none()
    }

    /// An element closes with `value` as its trimmed text; `stack` still ends with it.
    pub(super) fn end(
        &mut self,
        stack: &[Tag],
        value: &str,
        line: usize,
    ) -> Result<(), ParseError> {
        let depth = stack.len() - 1;
        let currency = if stack.last() == Some(&Tag::Amt) {
            self.amount_currency.take()
        } else {
            None
        };
        if let Some(detail) = &mut self.detail {
            if depth == detail.depth {
                if let (Some(detail), Some(entry)) = (self.detail.take(), self.entry.as_mut()) {
                    entry.details.push(detail);
                }
                return Ok(());
            }
            if !value.is_empty() {
                detail.leaf(&stack[detail.depth + 1..], value, currency);
            }
            return Ok(());
        }
        if let Some(base) = self.entry.as_ref().map(|e| e.depth) {
            if depth == base {
                return self.finish_entry();
            }
            if !value.is_empty() {
                self.entry_leaf(&stack[base + 1..], value, currency, line)?;
            }
            return Ok(());
        }
        if let Some(balance) = &mut self.balance {
            if depth == balance.depth {
                self.finish_balance();
                return Ok(());
            }
            if !value.is_empty() {
                let value = tidy(value);
                match &stack[balance.depth + 1..] {
                    // 001.01 writes the code without `CdOrPrtry`.
                    [Tag::Tp, Tag::CdOrPrtry, Tag::Cd] | [Tag::Tp, Tag::Cd] => {
                        balance.code = Some(value);
                    }
                    [Tag::Tp, Tag::CdOrPrtry, Tag::Prtry] => balance.proprietary = Some(value),
                    [Tag::Amt] => {
                        balance.amount = Some(value);
                        balance.currency = currency;
                    }
                    [Tag::CdtDbtInd] => balance.sign = Some(value),
                    [Tag::Dt, Tag::Dt | Tag::DtTm] => balance.date = Some(value),
                    _ => {}
                }
            }
            return Ok(());
        }
        if let Some(statement) = &mut self.statement {
            if depth == statement.depth {
                return self.finish_statement();
            }
            if !value.is_empty() {
                let value = tidy(value);
                match &stack[statement.depth + 1..] {
                    [Tag::Acct, Tag::Id, Tag::Iban] => {
                        statement.iban = Some(value.replace(' ', "").to_ascii_uppercase());
                    }
                    [Tag::Acct, Tag::Id, Tag::Othr | Tag::PrtryAcct, Tag::Id]
                    | [Tag::Acct, Tag::Id, Tag::Bban | Tag::Upic] => {
                        statement.other_id = Some(value)
                    }
                    [Tag::Acct, Tag::Ccy] => statement.currency = Some(value.to_ascii_uppercase()),
                    [Tag::Acct, Tag::Nm] => statement.name = Some(value),
                    [Tag::Acct, Tag::Tp, Tag::Cd] => statement.kind = Some(value),
                    [Tag::Acct, Tag::Svcr, Tag::FinInstnId, Tag::Nm] => {
                        statement.servicer_name = Some(value);
                    }
                    [Tag::Acct, Tag::Svcr, Tag::FinInstnId, Tag::Bic] => {
                        statement.servicer_bic = Some(value);
                    }
                    [Tag::FrToDt, Tag::ToDtTm] => statement.to_date = values::date(&value),
                    [Tag::CreDtTm] => statement.created = values::date(&value),
                    _ => {}
                }
            }
            return Ok(());
        }
        if stack.len() == 3
            && stack.get(1) == Some(&Tag::Message)
            && stack.get(2) == Some(&Tag::CreDtTm)
        {
            self.header_created = values::date(value);
        }
        Ok(())
    }

    fn entry_leaf(
        &mut self,
        path: &[Tag],
        value: &str,
        currency: Option<String>,
        line: usize,
    ) -> Result<(), ParseError> {
        let Some(entry) = self.entry.as_mut() else {
            return Ok(());
        };
        match path {
            [Tag::Amt] => {
                let amount = values::amount(value).ok_or_else(|| {
                    ParseError::new(line, format!("the entry amount {value:?} cannot be read"))
                })?;
                entry.amount = Some(amount);
                entry.currency = currency;
            }
            [Tag::CdtDbtInd] => {
                entry.sign = Some(values::credit_debit(value).ok_or_else(|| {
                    ParseError::new(
                        line,
                        format!("the credit/debit indicator {value:?} is neither CRDT nor DBIT"),
                    )
                })?);
            }
            [Tag::RvslInd] => entry.reversal = values::boolean(value),
            [Tag::Sts] | [Tag::Sts, Tag::Cd | Tag::Prtry] => {
                entry.status = Some(tidy(value).to_ascii_uppercase());
            }
            [Tag::BookgDt, Tag::Dt | Tag::DtTm] => {
                entry.booking = Some(values::date(value).ok_or_else(|| {
                    ParseError::new(line, format!("the booking date {value:?} cannot be read"))
                })?);
            }
            [Tag::ValDt, Tag::Dt | Tag::DtTm] => match values::date(value) {
                Some(date) => entry.value = Some(date),
                None => self.file.warnings.push(warning(
                    line,
                    format!("the value date {value:?} cannot be read: left out"),
                )),
            },
            [Tag::AcctSvcrRef] => entry.reference = reference(value),
            [Tag::BkTxCd, rest @ ..] => entry.code.leaf(rest, value),
            [Tag::AddtlNtryInf] => entry.additional = non_empty(value),
            _ => {}
        }
        Ok(())
    }

    fn finish_balance(&mut self) {
        let Some(balance) = self.balance.take() else {
            return;
        };
        let Some(statement) = self.statement.as_mut() else {
            return;
        };
        let line = balance.line;
        let Some(code) = balance.code.or(balance.proprietary) else {
            self.file
                .warnings
                .push(warning(line, "a balance without a type is left out"));
            return;
        };
        let code = code.to_ascii_uppercase();
        let (preferred, fallback) = match code.as_str() {
            "OPBD" => (true, false),
            "PRCD" | "ITBD" | "ITAV" => (false, true),
            "CLBD" | "CLAV" => (true, false),
            _ => return,
        };
        let amount = balance.amount.as_deref().and_then(values::amount);
        let Some(amount) = amount else {
            self.file.warnings.push(warning(
                line,
                format!(
                    "the {code} balance amount {:?} cannot be read: left out",
                    balance.amount.unwrap_or_default()
                ),
            ));
            return;
        };
        let Some(date) = balance.date.as_deref().and_then(values::date) else {
            self.file.warnings.push(warning(
                line,
                format!(
                    "the {code} balance date {:?} cannot be read: left out",
                    balance.date.unwrap_or_default()
                ),
            ));
            return;
        };
        let sign = match balance.sign.as_deref().map(values::credit_debit) {
            Some(Some(sign)) => sign,
            _ => {
                self.file.warnings.push(warning(
                    line,
                    format!("the {code} balance has no CRDT/DBIT indicator: read as a credit"),
                ));
                Decimal::ONE
            }
        };
        // OPBD holds at the start of its day: the end of the day before.
        let date = if code == "OPBD" {
            date.pred_opt().unwrap_or(date)
        } else {
            date
        };
        if statement.seen_currency.is_none() {
            statement.seen_currency.clone_from(&balance.currency);
        }
        let parsed = Balance {
            balance: ParsedBalance {
                amount: amount * sign,
                date,
                currency: balance.currency,
            },
            preferred,
        };
        let slot = match code.as_str() {
            "OPBD" | "PRCD" => &mut statement.opening,
            "CLBD" | "ITBD" => &mut statement.closing,
            _ => &mut statement.available,
        };
        let replace = match slot {
            None => true,
            Some(existing) => preferred && !existing.preferred,
        };
        if replace && (preferred || fallback) {
            *slot = Some(parsed);
        }
    }

    fn finish_entry(&mut self) -> Result<(), ParseError> {
        let Some(entry) = self.entry.take() else {
            return Ok(());
        };
        let Some(statement) = self.statement.as_mut() else {
            return Ok(());
        };
        let line = entry.line;
        let amount = entry
            .amount
            .ok_or_else(|| ParseError::new(line, "the entry has no amount (Amt)"))?;
        let sign = entry.sign.ok_or_else(|| {
            ParseError::new(line, "the entry has no credit/debit indicator (CdtDbtInd)")
        })?;
        let signed = amount * sign;
        let currency = entry
            .currency
            .clone()
            .or_else(|| statement.currency.clone());
        if statement.seen_currency.is_none() {
            statement.seen_currency.clone_from(&entry.currency);
        }
        let status = match entry.status.as_deref() {
            Some("BOOK") => EntryStatus::Booked,
            Some("PDNG" | "INFO" | "FUTR") => EntryStatus::Pending,
            other => {
                self.file.warnings.push(warning(
                    line,
                    format!(
                        "the entry status {:?} is not BOOK, PDNG or INFO: read as booked",
                        other.unwrap_or_default()
                    ),
                ));
                EntryStatus::Booked
            }
        };
        let fallback_date = statement
            .to_date
            .or(statement.created)
            .or(self.header_created);
        let date = match entry.booking.or(entry.value) {
            Some(date) => date,
            None => {
                let date = fallback_date.ok_or_else(|| {
                    ParseError::new(line, "the entry has neither a booking nor a value date")
                })?;
                self.file.warnings.push(warning(
                    line,
                    format!(
                        "the entry has neither a booking nor a value date: dated {date}, the \
                         statement's date"
                    ),
                ));
                date
            }
        };
        let value_date = entry.value.filter(|v| *v != date);
        let base = ParsedEntry {
            date,
            value_date,
            currency: currency.clone(),
            status,
            line,
            ..ParsedEntry::default()
        };
        let details = &entry.details;
        if details.len() >= 2 {
            let amounts: Option<Vec<Decimal>> = details
                .iter()
                .map(|d| d.signed_amount(sign, currency.as_deref()))
                .collect();
            // The details' sum, checked: amounts near the largest decimal must not overflow.
            let total = match &amounts {
                Some(amounts) => {
                    let mut total = Decimal::ZERO;
                    for (detail, amount) in details.iter().zip(amounts) {
                        total = checked_sum(total, *amount, detail.line)?;
                    }
                    Some(total)
                }
                None => None,
            };
            match (amounts, total) {
                (Some(amounts), Some(total)) if total == signed => {
                    let mut rows = Vec::with_capacity(details.len());
                    for (index, (detail, amount)) in details.iter().zip(amounts).enumerate() {
                        let row_sign = detail.sign.unwrap_or(sign);
                        let code = if detail.code.is_empty() {
                            &entry.code
                        } else {
                            &detail.code
                        };
                        let remittance = detail.remittance();
                        rows.push(Row {
                            entry: ParsedEntry {
                                reference: detail
                                    .servicer_reference
                                    .clone()
                                    .or_else(|| detail.transaction_id.clone())
                                    .or_else(|| {
                                        entry
                                            .reference
                                            .as_ref()
                                            .map(|r| format!("{r}/{}", index + 1))
                                    }),
                                amount,
                                counterparty: detail.counterparty(row_sign),
                                text: join_text([
                                    remittance.as_deref(),
                                    detail.additional.as_deref(),
                                    entry.additional.as_deref(),
                                ]),
                                code: code.render(),
                                kind: code.kind(),
                                line: detail.line,
                                ..base.clone()
                            },
                            reversal: entry.reversal,
                        });
                    }
                    statement.rows.extend(rows);
                    return Ok(());
                }
                (Some(_), Some(total)) => self.file.warnings.push(warning(
                    line,
                    format!(
                        "the amounts of the entry's {} transaction details add up to {total}, \
                         not to its amount {signed}: kept as one row",
                        details.len(),
                    ),
                )),
                _ => self.file.warnings.push(warning(
                    line,
                    format!(
                        "the entry's {} transaction details do not all have an amount in the \
                         entry's currency: kept as one row",
                        details.len()
                    ),
                )),
            }
        }
        // One row for the entry.
        let single = (details.len() == 1).then(|| &details[0]);
        let reference = entry.reference.clone().or_else(|| {
            single.and_then(|d| {
                d.servicer_reference
                    .clone()
                    .or_else(|| d.transaction_id.clone())
            })
        });
        let counterparty = {
            let mut names = details.iter().map(|d| d.counterparty(sign));
            let first = names.next().flatten();
            if names.all(|n| n == first) {
                first
            } else {
                None
            }
        };
        // Each distinct text once, in file order; a set keeps this linear in the number of
        // details (a batch can have tens of thousands).
        let mut seen: HashSet<String> = HashSet::new();
        let mut remittance = String::new();
        for text in details.iter().filter_map(DetailState::remittance) {
            if text.is_empty() || seen.contains(&text) {
                continue;
            }
            if !remittance.is_empty() {
                remittance.push_str(" / ");
            }
            remittance.push_str(&text);
            seen.insert(text);
        }
        let remittance = (!remittance.is_empty()).then_some(remittance);
        let code = match single {
            Some(detail) if !detail.code.is_empty() => detail.code.clone(),
            _ => entry.code.clone(),
        };
        statement.rows.push(Row {
            entry: ParsedEntry {
                reference,
                amount: signed,
                counterparty,
                text: join_text([
                    remittance.as_deref(),
                    single.and_then(|d| d.additional.as_deref()),
                    entry.additional.as_deref(),
                ]),
                code: code.render(),
                kind: code.kind(),
                ..base
            },
            reversal: entry.reversal,
        });
        Ok(())
    }

    fn finish_statement(&mut self) -> Result<(), ParseError> {
        let Some(mut statement) = self.statement.take() else {
            return Ok(());
        };
        let number = self.file.statements.len() + 1;
        let item = format!("statement {number}");
        if let (Some(opening), Some(closing)) = (&statement.opening, &statement.closing) {
            // Opening plus the booked entries, checked: an overflow names the entry's line.
            let balance = |flip: bool| -> Result<Decimal, ParseError> {
                let mut total = opening.balance.amount;
                for row in statement
                    .rows
                    .iter()
                    .filter(|r| r.entry.status == EntryStatus::Booked)
                {
                    let amount = if flip && row.reversal {
                        -row.entry.amount
                    } else {
                        row.entry.amount
                    };
                    total = checked_sum(total, amount, row.entry.line)?;
                }
                Ok(total)
            };
            let closing = closing.balance.amount;
            let reversals = statement.rows.iter().any(|r| r.reversal);
            if balance(false)? != closing && reversals && balance(true)? == closing {
                for row in statement.rows.iter_mut().filter(|r| r.reversal) {
                    row.entry.amount = -row.entry.amount;
                }
                self.file.warnings.push(ParseWarning {
                    item: item.clone(),
                    message: "the statement balances only with its reversal entries (RvslInd) \
                              counted against their CdtDbtInd: their signs were flipped"
                        .to_owned(),
                });
            }
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for row in &statement.rows {
            if let Some(reference) = row.entry.reference.as_deref() {
                *counts.entry(reference).or_default() += 1;
            }
        }
        let mut repeated: Vec<(String, usize)> = counts
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(r, n)| (r.to_owned(), n))
            .collect();
        repeated.sort();
        // One pass over the rows whatever the number of repeated references.
        let dropped: HashSet<&str> = repeated.iter().map(|(r, _)| r.as_str()).collect();
        for row in &mut statement.rows {
            if row
                .entry
                .reference
                .as_deref()
                .is_some_and(|r| dropped.contains(r))
            {
                row.entry.reference = None;
            }
        }
        for (reference, times) in &repeated {
            self.file.warnings.push(ParseWarning {
                item: item.clone(),
                message: format!(
                    "the reference {reference:?} is on {times} entries: they are identified by \
                     their content instead"
                ),
            });
        }
        if self.file.institution.is_none() {
            self.file.institution = statement
                .servicer_name
                .clone()
                .or_else(|| statement.servicer_bic.clone());
        }
        let kind = match statement.kind.as_deref() {
            Some("SVGS") => AccountKind::Savings,
            Some("CARD") => AccountKind::CreditCard,
            _ => AccountKind::Checking,
        };
        let currency = statement.currency.take().or(statement.seen_currency.take());
        let parsed = ParsedStatement {
            account: ParsedAccount {
                identifier: statement.iban.take().or(statement.other_id.take()),
                name: statement.name.take(),
                currency,
                kind: Some(kind),
            },
            opening: statement.opening.take().map(|b| b.balance),
            closing: statement.closing.take().map(|b| b.balance),
            available: statement.available.take().map(|b| b.balance),
            entries: statement.rows.into_iter().map(|r| r.entry).collect(),
            positions: Vec::new(),
            continues: false,
        };
        check_statement_sums(&parsed)?;
        self.file.statements.push(parsed);
        Ok(())
    }

    /// The file, once the document has been read.
    pub(super) fn finish(mut self) -> Result<ParsedFile, ParseError> {
        if !self.seen_message {
            return Err(ParseError::new(
                0,
                "not a CAMT document: it has no BkToCstmrStmt, BkToCstmrAcctRpt or \
                 BkToCstmrDbtCdtNtfctn element",
            ));
        }
        if self.file.statements.is_empty() {
            self.file.warnings.push(ParseWarning {
                item: "file".to_owned(),
                message: "the message has no statement (Stmt, Rpt or Ntfctn)".to_owned(),
            });
        }
        Ok(self.file)
    }
}
