//! The values of single fields: dates, amounts, balances, `:25:`, `:61:` and `:86:`.

use std::str::FromStr;

use chrono::{Datelike, NaiveDate};
use rust_decimal::Decimal;

use crate::import::model::{EntryKind, ParsedBalance};

/// `YYMMDD`; years 80–99 are 19xx, the others 20xx.
pub(super) fn date6(s: &str) -> Option<NaiveDate> {
    match date6_lenient(s)? {
        (date, false) => Some(date),
        (_, true) => None,
    }
}

/// `YYMMDD` as [`date6`], except that a day past the end of its month (`160230`, a February
/// 30th some banks write) is read as the month's last day; `true` when it was moved.
pub(super) fn date6_lenient(s: &str) -> Option<(NaiveDate, bool)> {
    if s.len() != 6 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let yy: i32 = s[..2].parse().ok()?;
    let month: u32 = s[2..4].parse().ok()?;
    let day: u32 = s[4..].parse().ok()?;
    let year = if yy >= 80 { 1900 + yy } else { 2000 + yy };
    if let Some(date) = NaiveDate::from_ymd_opt(year, month, day) {
        return Some((date, false));
    }
    if !(1..=31).contains(&day) {
        return None;
    }
    // The last day of the month: the day before the first of the next one.
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)
    }?;
    Some((next.pred_opt()?, true))
}

/// An entry date `MMDD` next to its value date: the year of the three around the value
/// date's year that puts it closest (a value date of 31 December booked on 2 January is
/// booked in the next year, and the other way round).
pub(super) fn entry_date(mmdd: &str, value: NaiveDate) -> Option<NaiveDate> {
    let month: u32 = mmdd.get(..2)?.parse().ok()?;
    let day: u32 = mmdd.get(2..4)?.parse().ok()?;
    [value.year(), value.year() - 1, value.year() + 1]
        .into_iter()
        .filter_map(|y| NaiveDate::from_ymd_opt(y, month, day))
        .min_by_key(|d| (*d - value).num_days().abs())
}

/// A SWIFT amount: digits with a decimal comma (`1234,56`, `1000,`, `,50`); a decimal point is
/// tolerated when there is no comma. At most 15 characters, not counting the leading zeros
/// some banks pad it with (`0000000001000,89`).
pub(super) fn amount(s: &str) -> Option<Decimal> {
    let significant = s.trim_start_matches('0');
    if s.is_empty() || significant.len() > 15 {
        return None;
    }
    let sep = if s.contains(',') { ',' } else { '.' };
    let (int, frac) = s.split_once(sep).unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let text = if frac.is_empty() {
        int.to_owned()
    } else {
        format!("{int}.{frac}")
    };
    Decimal::from_str(&text).ok()
}

/// A balance `C251230EUR1234,56` (`:60F:`, `:60M:`, `:62F:`, `:62M:`, `:64:`, `:65:`).
pub(super) fn balance(value: &str) -> Result<ParsedBalance, String> {
    let v = value.trim();
    let (sign, rest) = match v.as_bytes().first() {
        Some(b'C') => (Decimal::ONE, &v[1..]),
        Some(b'D') => (Decimal::NEGATIVE_ONE, &v[1..]),
        _ => return Err(format!("balance `{v}` has no C/D mark")),
    };
    let date = rest
        .get(..6)
        .and_then(date6)
        .ok_or_else(|| format!("balance `{v}` has no valid YYMMDD date"))?;
    let currency = rest
        .get(6..9)
        .filter(|c| c.bytes().all(|b| b.is_ascii_alphabetic()))
        .ok_or_else(|| format!("balance `{v}` has no currency"))?;
    let figure = rest[9..].trim();
    let amount = amount(figure).ok_or_else(|| format!("balance `{v}` has no valid amount"))?;
    Ok(ParsedBalance {
        amount: sign * amount,
        date,
        currency: Some(currency.to_ascii_uppercase()),
    })
}

/// The currency of `:34F:` (`EURD0,00`, `PLN0`) or `:90D:`/`:90C:` (`12EUR1234,56`).
pub(super) fn currency_in(value: &str) -> Option<String> {
    let v = value
        .trim()
        .trim_start_matches(|c: char| c.is_ascii_digit());
    let c = v.get(..3)?;
    c.bytes()
        .all(|b| b.is_ascii_uppercase())
        .then(|| c.to_owned())
}

/// The account of `:25:`: an IBAN (spaces removed when that makes a valid one) or
/// `BLZ/Konto`, a leading `/` dropped, and a currency suffix (`NL91ABNA0417164300EUR`,
/// `37040044/0532013000 EUR`) split off. Returns the identifier and the suffix currency.
pub(super) fn account(value: &str) -> (Option<String>, Option<String>) {
    let v = value.trim().trim_start_matches('/').trim();
    if v.is_empty() {
        return (None, None);
    }
    let compact: String = v.chars().filter(|c| !c.is_whitespace()).collect();
    if is_iban(&compact) {
        return (Some(compact), None);
    }
    // A currency suffix: three letters after a digit (or after a space).
    let n = compact.len();
    if n > 3 && compact.is_char_boundary(n - 3) {
        let (head, tail) = compact.split_at(n - 3);
        let suffix_ok = tail.bytes().all(|b| b.is_ascii_uppercase())
            && head.bytes().last().is_some_and(|b| b.is_ascii_digit());
        // Local account numbers: `BLZ/Konto`, `0067-00763`, Dutch `1291.99.348`.
        let local = head
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'/' | b'-' | b'.'));
        if suffix_ok && (is_iban(head) || local) {
            return (Some(head.to_owned()), Some(tail.to_owned()));
        }
    }
    (Some(v.to_owned()), None)
}

fn looks_like_iban(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 15
        && b[..2].iter().all(u8::is_ascii_uppercase)
        && b[2..4].iter().all(u8::is_ascii_digit)
        && b.iter().all(u8::is_ascii_alphanumeric)
}

/// ISO 13616 check digits (mod 97).
fn is_iban(s: &str) -> bool {
    if !looks_like_iban(s) || s.len() > 34 {
        return false;
    }
    let (head, tail) = s.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c.to_digit(36) {
            Some(v) => v,
            None => return false,
        };
        rem = if v < 10 {
            (rem * 10 + v) % 97
        } else {
            (rem * 100 + v) % 97
        };
    }
    rem == 1
}

/// The debit/credit mark of a `:61:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// `C`: money in.
    Credit,
    /// `D`: money out.
    Debit,
    /// `RC`: reversal of a credit, money out.
    ReversalCredit,
    /// `RD`: reversal of a debit, money in.
    ReversalDebit,
    /// `EC` (MT942): expected credit, money in, pending.
    ExpectedCredit,
    /// `ED` (MT942): expected debit, money out, pending.
    ExpectedDebit,
}

impl Mark {
    /// `+1` for money in, `-1` for money out.
    pub(super) fn sign(self) -> Decimal {
        match self {
            Self::Credit | Self::ReversalDebit | Self::ExpectedCredit => Decimal::ONE,
            Self::Debit | Self::ReversalCredit | Self::ExpectedDebit => Decimal::NEGATIVE_ONE,
        }
    }
}

/// A `:61:` statement line.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StatementLine {
    pub(super) value_date: NaiveDate,
    /// The value date as written when it is no date (`160230`) and was read as the month's
    /// last day.
    pub(super) moved_value_date: Option<String>,
    /// The entry (booking) date when stated and readable.
    pub(super) entry_date: Option<NaiveDate>,
    /// Whether an entry date was stated but could not be read.
    pub(super) bad_entry_date: bool,
    pub(super) mark: Mark,
    pub(super) amount: Decimal,
    /// `NTRF`, `N062`, `S020`, `FCHG`.
    pub(super) code: Option<String>,
    pub(super) customer_reference: Option<String>,
    pub(super) bank_reference: Option<String>,
    /// The supplementary details (the `:61:` line's second line).
    pub(super) details: Option<String>,
}

impl StatementLine {
    /// The entry's reference: the bank reference unless `NONREF`, else the customer reference
    /// unless `NONREF`.
    pub(super) fn reference(&self) -> Option<String> {
        let usable = |r: &Option<String>| {
            r.as_ref()
                .filter(|r| !r.is_empty() && !r.eq_ignore_ascii_case("NONREF"))
                .cloned()
        };
        usable(&self.bank_reference).or_else(|| usable(&self.customer_reference))
    }

    /// The kind the SWIFT transaction type tells (`NTRF`, `NCHG`, `NINT`, …).
    pub(super) fn kind(&self) -> EntryKind {
        let Some(code) = self.code.as_deref().and_then(|c| c.get(1..)) else {
            return EntryKind::Other;
        };
        match code {
            "TRF" | "STO" | "DDT" | "CHK" | "RTI" | "CLR" | "CMI" | "CMS" | "CMT" | "BOE"
            | "BRF" | "COL" | "DCR" | "SAL" | "SSP" => EntryKind::Transfer,
            "INT" | "DIV" => EntryKind::Income,
            "CHG" | "COM" | "FEE" | "CHK1" => EntryKind::Fee,
            "SEC" => EntryKind::Trade,
            _ => EntryKind::Other,
        }
    }
}

/// Reads a `:61:` field: its first line, and the lines after it. A line broken before the
/// amount (`…CR` / `30,00N062NONREF`) is joined first.
pub(super) fn statement_line(first: &str, more: &[&str]) -> Result<StatementLine, String> {
    match statement_line_1(first.trim()) {
        Ok(mut line) => {
            line.details = join_details(more);
            Ok(line)
        }
        Err(e) => {
            let Some((next, rest)) = more.split_first() else {
                return Err(e);
            };
            let joined = format!("{}{}", first.trim(), next.trim());
            let mut line = statement_line_1(&joined).map_err(|_| e)?;
            line.details = join_details(rest);
            Ok(line)
        }
    }
}

fn join_details(lines: &[&str]) -> Option<String> {
    let text = lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty()).then_some(text)
}

fn statement_line_1(s: &str) -> Result<StatementLine, String> {
    let (value_date, moved) = s
        .get(..6)
        .and_then(date6_lenient)
        .ok_or_else(|| format!("statement line `{s}` has no valid YYMMDD value date"))?;
    let moved_value_date = moved.then(|| s[..6].to_owned());
    let mut rest = &s[6..];
    let mut entry = None;
    let mut bad_entry_date = false;
    if let Some(mmdd) = rest
        .get(..4)
        .filter(|m| m.bytes().all(|b| b.is_ascii_digit()))
    {
        entry = entry_date(mmdd, value_date);
        bad_entry_date = entry.is_none();
        rest = &rest[4..];
    } else if let Some(after) = rest.strip_prefix("    ") {
        // An entry date of four blanks (some banks): none stated.
        rest = after;
    }
    let (mark, after) = if let Some(r) = rest.strip_prefix("RC") {
        (Mark::ReversalCredit, r)
    } else if let Some(r) = rest.strip_prefix("RD") {
        (Mark::ReversalDebit, r)
    } else if let Some(r) = rest.strip_prefix("EC") {
        (Mark::ExpectedCredit, r)
    } else if let Some(r) = rest.strip_prefix("ED") {
        (Mark::ExpectedDebit, r)
    } else if let Some(r) = rest.strip_prefix('C') {
        (Mark::Credit, r)
    } else if let Some(r) = rest.strip_prefix('D') {
        (Mark::Debit, r)
    } else {
        return Err(format!(
            "statement line `{s}` has no debit/credit mark (C, D, RC, RD)"
        ));
    };
    rest = after;
    // The funds code: the third letter of the currency (`CR` for EUR in German files,
    // `DD212,39`).
    if rest.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) {
        rest = &rest[1..];
    }
    // A blank before the amount (Cuscal).
    rest = rest.strip_prefix(' ').unwrap_or(rest);
    let figure_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b',' || *b == b'.')
        .count();
    let figure = &rest[..figure_len];
    let amount = amount(figure)
        .ok_or_else(|| format!("statement line `{s}` has no valid amount (`{figure}`)"))?;
    rest = &rest[figure_len..];
    // Transaction type: a letter and three letters, digits or blanks. SWIFT says `N`, `F` or
    // `S` and three characters (`NTRF`, `N062`, `S020`); banks also write `S   `, `NOV `,
    // `MCI0`. Kept trimmed and upper case.
    let mut code = None;
    let b = rest.as_bytes();
    if b.len() >= 4
        && b[0].is_ascii_alphabetic()
        && b[1..4]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b' ')
    {
        code = Some(rest[..4].trim_end().to_ascii_uppercase());
        rest = &rest[4..];
    }
    let (customer, bank) = match rest.split_once("//") {
        Some((c, b)) => (c, Some(b)),
        None => (rest, None),
    };
    let clean = |r: &str| {
        let r = r.trim();
        (!r.is_empty()).then(|| r.to_owned())
    };
    Ok(StatementLine {
        value_date,
        moved_value_date,
        entry_date: entry,
        bad_entry_date,
        mark,
        amount,
        code,
        customer_reference: clean(customer),
        bank_reference: bank.and_then(clean),
        details: None,
    })
}

/// What `:86:` says about an entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Details {
    /// Purpose text.
    pub(super) text: Option<String>,
    /// The other party's name.
    pub(super) counterparty: Option<String>,
}

/// Reads `:86:`, its lines as they are in the file. German structured (`166?00…?20…?32…`, also
/// with `~` or `<` as the separator, as Polish banks write it), Dutch structured
/// (`/TRTP/…/NAME/…/REMI/…`), or free text.
pub(super) fn details(first: &str, more: &[&str]) -> Details {
    let mut all = Vec::with_capacity(more.len() + 1);
    all.push(first);
    all.extend_from_slice(more);
    // Structured forms were cut at a fixed width: the cut carries no space.
    let tight: String = all.concat();
    let tight = tight.trim();
    if let Some(sep) = german_separator(tight) {
        return german(tight, sep);
    }
    if tight.starts_with('/') && DUTCH_KEYS.iter().any(|k| tight.contains(&format!("/{k}/"))) {
        return dutch(tight);
    }
    // Free text: lines are joined with a space, except after a full 65-character line, which
    // was cut where the width ran out.
    let mut text = String::new();
    for (k, l) in all.iter().enumerate() {
        if k > 0 && !text.is_empty() && all[k - 1].chars().count() < 65 {
            text.push(' ');
        }
        text.push_str(if k == 0 { l.trim_start() } else { l });
    }
    let text = collapse(&text);
    Details {
        text: (!text.is_empty()).then_some(text),
        counterparty: None,
    }
}

/// `NNN?` / `NNN~` / `NNN<` followed by two digits, or the separator first.
fn german_separator(s: &str) -> Option<char> {
    let b = s.as_bytes();
    let sep_at = |i: usize| -> Option<char> {
        let c = *b.get(i)?;
        let ok = matches!(c, b'?' | b'~' | b'<')
            && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            && b.get(i + 2).is_some_and(u8::is_ascii_digit);
        ok.then_some(char::from(c))
    };
    if b.len() >= 3 && b[..3].iter().all(u8::is_ascii_digit) {
        sep_at(3)
    } else {
        sep_at(0)
    }
}

/// SEPA keywords German banks write into the purpose (`EREF+…SVWZ+…`).
const SEPA_KEYS: [&str; 12] = [
    "EREF+", "KREF+", "MREF+", "CRED+", "DEBT+", "SVWZ+", "ABWA+", "ABWE+", "COAM+", "OAMT+",
    "IBAN+", "BIC+",
];

fn german(s: &str, sep: char) -> Details {
    let mut purpose = String::new();
    let mut name = String::new();
    let mut posting = String::new();
    // Split on the separator followed by two digits; a separator without them is text.
    let mut parts: Vec<(u8, String)> = Vec::new();
    let mut chars = s.char_indices().peekable();
    let mut current: Option<(u8, String)> = None;
    while let Some((i, c)) = chars.next() {
        if c == sep {
            let key = s
                .get(i + 1..i + 3)
                .filter(|k| k.bytes().all(|b| b.is_ascii_digit()));
            if let Some(key) = key.and_then(|k| k.parse::<u8>().ok()) {
                if let Some(p) = current.take() {
                    parts.push(p);
                }
                current = Some((key, String::new()));
                chars.next();
                chars.next();
                continue;
            }
        }
        if let Some((_, text)) = current.as_mut() {
            text.push(c);
        }
    }
    if let Some(p) = current.take() {
        parts.push(p);
    }
    for (key, value) in parts {
        match key {
            0 => posting.push_str(&value),
            20..=29 | 60..=63 => purpose.push_str(&value),
            32 | 33 => name.push_str(&value),
            _ => {}
        }
    }
    let purpose = collapse(&purpose);
    let text = sepa_purpose(&purpose).unwrap_or(purpose);
    let text = if text.is_empty() {
        collapse(&posting)
    } else {
        text
    };
    let name = collapse(&name);
    Details {
        text: (!text.is_empty()).then_some(text),
        counterparty: (!name.is_empty()).then_some(name),
    }
}

/// The `SVWZ+` part of a purpose that uses the SEPA keywords, when it has one.
fn sepa_purpose(purpose: &str) -> Option<String> {
    if !SEPA_KEYS.iter().any(|k| purpose.starts_with(k)) {
        return None;
    }
    let start = purpose.find("SVWZ+")? + "SVWZ+".len();
    let rest = &purpose[start..];
    let end = SEPA_KEYS
        .iter()
        .filter_map(|k| rest.find(k))
        .min()
        .unwrap_or(rest.len());
    let text = collapse(&rest[..end]);
    (!text.is_empty()).then_some(text)
}

/// Keys of the Dutch structured `:86:` (ABN AMRO, ING, Rabobank, Deutsche Bank NL).
const DUTCH_KEYS: [&str; 22] = [
    "TRTP", "IBAN", "BIC", "NAME", "REMI", "EREF", "MARF", "CSID", "ORDP", "BENM", "CNTP", "PURP",
    "RTRN", "ISDT", "ADDR", "ID", "ULTC", "ULTD", "ULTB", "ULTA", "SVCL", "CDTRREF",
];

fn dutch(s: &str) -> Details {
    let tokens: Vec<&str> = s.split('/').collect();
    let mut fields: Vec<(&str, Vec<&str>)> = Vec::new();
    for t in tokens.iter().skip(1) {
        if DUTCH_KEYS.contains(t) {
            fields.push((t, Vec::new()));
        } else if let Some((_, values)) = fields.last_mut() {
            values.push(t);
        }
    }
    let value = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.join("/").trim_matches('/').trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    // Rabobank nests the other party: `/CNTP/iban/bic/name/city/`; the name may be empty.
    let counterparty = value("NAME").or_else(|| {
        fields
            .iter()
            .find(|(k, _)| *k == "CNTP")
            .and_then(|(_, v)| v.get(2).map(|n| n.trim().to_owned()))
            .filter(|n| !n.is_empty())
    });
    let text = value("REMI").map(|r| {
        // Rabobank: `/REMI/USTD//text/`; structured creditor references `STRD/CUR/ref`.
        let r = r.strip_prefix("USTD//").unwrap_or(&r);
        collapse(r)
    });
    Details {
        text: text.filter(|t| !t.is_empty()),
        counterparty: counterparty.map(|c| collapse(&c)),
    }
}

/// Trims and collapses runs of blanks into one space.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).expect("date")
    }

    #[test]
    fn amounts() {
        assert_eq!(amount("1234,56"), Some(Decimal::new(123_456, 2)));
        assert_eq!(amount("1000,"), Some(Decimal::new(1000, 0)));
        assert_eq!(amount(",5"), Some(Decimal::new(5, 1)));
        assert_eq!(amount("12.5"), Some(Decimal::new(125, 1)));
        assert_eq!(amount(","), None);
        assert_eq!(amount("1,2,3"), None);
        assert_eq!(amount(""), None);
        assert_eq!(amount("1234567890123456"), None);
    }

    #[test]
    fn iban_check() {
        assert!(is_iban("DE89370400440532013000"));
        assert!(!is_iban("DE89370400440532013001"));
        assert!(is_iban("NL91ABNA0417164300"));
    }

    #[test]
    fn entry_dates_roll_over() {
        assert_eq!(entry_date("0105", d(2014, 12, 31)), Some(d(2015, 1, 5)));
        assert_eq!(entry_date("1230", d(2026, 1, 1)), Some(d(2025, 12, 30)));
        assert_eq!(entry_date("0701", d(2019, 6, 29)), Some(d(2019, 7, 1)));
        assert_eq!(entry_date("0229", d(2024, 3, 1)), Some(d(2024, 2, 29)));
        assert_eq!(entry_date("1340", d(2024, 3, 1)), None);
    }
}
