//! CSV statements: one account's rows in a bank's own layout (or several accounts' rows, told
//! apart by an `Account` column).
//!
//! # What it reads
//!
//! A file of rows, one per transaction, below an optional preamble and a header row. With a
//! [`CsvMapping`] the caller names the columns (by header name or 0-based index) and may fix
//! the delimiter, decimal and thousands separators, date format, encoding and rows to skip;
//! without one, all of it is detected:
//!
//! - **Encoding**: a UTF-8, UTF-16 LE or UTF-16 BE byte order mark; UTF-16 without a mark by
//!   its NUL pattern; UTF-8 when the whole file is valid UTF-8; otherwise the single-byte code
//!   page its bytes above ASCII read best in: Windows-1252, or for Polish, Czech, Slovak and
//!   Hungarian exports Windows-1250, ISO-8859-2 or DOS 852 (see `import::codepage`).
//! - **Delimiter**: `,`, `;`, tab or `|`, from an Excel `sep=` first line, else the one that
//!   gives a recognized header row, else the one that splits the first rows most evenly.
//! - **Header row**: the first row (after `skip_rows`) that names a date column and an amount
//!   (or debit/credit) column, in English, German, French, Spanish, Italian or Dutch; the
//!   lines above it (account number, period, balance) are skipped.
//! - **Decimal separator**: the one every amount cell of the file agrees with (`1.234,56`,
//!   `12,5` and `1 234,56` say comma; `1,234.56` and `12.50` say dot); when no cell decides,
//!   comma for `;`-separated files and dot otherwise.
//! - **Date order**: over the whole file: a first number above 12 anywhere makes the file
//!   day-first, a second one month-first; dates written with dots are always day-first. When
//!   nothing decides, the mapping's `date_format` must: otherwise the import is refused (422
//!   naming the date column).
//!
//! Columns: date (required), value date, amount or debit and credit, a direction column
//! (`Af Bij`, `Debit/credit`, `S/H`), description, payee (and a payer column, used for money
//! in), memo, id (the bank's reference, the row's identity), balance (the latest row's becomes
//! the statement's closing balance), currency, transaction type (the entry's code) and status
//! (`Vorgemerkt`, `Pending`, … make the entry pending).
//!
//! # Choices
//!
//! - A mapping that does not fit the file (a column it names is not there, a `date_format`
//!   no date matches, an unknown encoding) is [`CsvError::Mapping`] naming the column; what the
//!   detection cannot decide is the same, naming `date` or `amount`. A file whose rows cannot
//!   be read (an amount that is no amount, a quote never closed, a bad date between good rows)
//!   is [`CsvError::Unreadable`] with the line.
//! - Debit and credit columns: a debit is money out whatever its sign is written as
//!   (`12,00` and `-12,00` are both −12.00); a credit keeps its sign. When both an amount and
//!   debit/credit columns exist, the amount is read and the others fill in when it is empty.
//! - Rows below the last transaction that are not transactions (totals, closing balance
//!   lines) are skipped with a warning; a row with neither date nor amount is skipped with a
//!   warning anywhere; a dated row without any amount is skipped with a warning.
//! - The file is read twice, streaming (once for the evidence, once for the entries); only
//!   the entries are kept.
//!
//! The quirks handled, each with its fixture and test, are listed in `csv/QUIRKS.md`.

mod headers;
mod shape;
mod text;
mod values;

#[cfg(test)]
mod tests;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use self::headers::{HeaderName, Role};
use self::text::{Chars, Encoding, Record, Records};
use self::values::{DateFormat, DateOrder, DecimalHint, OrderEvidence};
use super::model::{
    EntryStatus, ParseError, ParseWarning, ParsedAccount, ParsedBalance, ParsedEntry, ParsedFile,
    ParsedStatement,
};

/// How to read a CSV file, as the `mapping` part of an import gives it.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CsvMapping {
    /// The field delimiter: one character (`,`, `;`, `\t` or `tab`, `|`, …).
    pub(crate) delimiter: Option<String>,
    /// The decimal separator: `.` or `,`.
    pub(crate) decimal: Option<String>,
    /// The thousands separator: `.`, `,`, `'`, or a space.
    pub(crate) thousands: Option<String>,
    /// The date format: chrono's (`%d.%m.%Y`) or `DD.MM.YYYY`-style.
    pub(crate) date_format: Option<String>,
    /// The encoding: `utf-8`, `utf-16le`, `utf-16be`, `windows-1252` (or `iso-8859-1`),
    /// `windows-1250`, `iso-8859-2` or `cp852`.
    pub(crate) encoding: Option<String>,
    /// Rows to skip before the header row (or the first data row).
    pub(crate) skip_rows: Option<usize>,
    /// Which column holds what.
    pub(crate) columns: CsvColumns,
    /// Negate every amount (a credit card export listing purchases as positive).
    pub(crate) invert_sign: Option<bool>,
}

/// The columns of a [`CsvMapping`].
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CsvColumns {
    /// The booking date.
    pub(crate) date: ColumnRef,
    /// The signed amount.
    pub(crate) amount: Option<ColumnRef>,
    /// Money out (instead of `amount`).
    pub(crate) debit: Option<ColumnRef>,
    /// Money in (instead of `amount`).
    pub(crate) credit: Option<ColumnRef>,
    /// The description.
    pub(crate) description: Option<ColumnRef>,
    /// The other party.
    pub(crate) payee: Option<ColumnRef>,
    /// Extra text, appended to the description.
    pub(crate) memo: Option<ColumnRef>,
    /// The bank's own reference of the row.
    pub(crate) id: Option<ColumnRef>,
    /// The balance after the row.
    pub(crate) balance: Option<ColumnRef>,
    /// The currency of the row.
    pub(crate) currency: Option<ColumnRef>,
}

/// A column, by header name or by 0-based index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(untagged)]
pub(crate) enum ColumnRef {
    /// 0-based position.
    Index(usize),
    /// Header name (case and surrounding blanks ignored).
    Name(String),
}

impl Default for ColumnRef {
    fn default() -> Self {
        Self::Index(0)
    }
}

impl std::fmt::Display for ColumnRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Index(index) => write!(f, "{index}"),
            Self::Name(name) => f.write_str(name),
        }
    }
}

/// Why a CSV file cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CsvError {
    /// The file cannot be read (400, naming the line and the reason).
    #[error(transparent)]
    Unreadable(#[from] ParseError),
    /// The mapping does not fit the file, or detection cannot decide a column (422 naming the
    /// column).
    #[error("column {column}: {reason}")]
    Mapping {
        /// The column (or mapping field) at fault.
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// A field of the `mapping` itself is wrong for this file (422 naming that field, such
    /// as `mapping.date_format`).
    #[error("{field}: {reason}")]
    MappingField {
        /// The mapping field, as the request names it.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn mapping_error(column: impl Into<String>, reason: impl Into<String>) -> CsvError {
    CsvError::Mapping {
        column: column.into(),
        reason: reason.into(),
    }
}

/// How many records are looked at to find the delimiter and the header row.
const HEAD_RECORDS: usize = 100;
/// How many warnings are reported at most (one more says how many were left out).
const MAX_WARNINGS: usize = 50;
const DELIMITERS: [u8; 4] = [b',', b';', b'\t', b'|'];

/// True when `bytes` look like a CSV statement: a delimiter splits the first lines evenly and
/// a header names a date and an amount, or the rows hold dates and amounts. Looks only at the
/// first 8 KiB.
pub(crate) fn sniff(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    let (encoding, bom) = text::detect_encoding(head);
    let first = Chars::new(head, bom, encoding).find(|c| !c.is_whitespace());
    if matches!(first, None | Some('<' | '{' | '[' | '!' | ':')) {
        return false;
    }
    let (start, sep) = sep_line(head, bom, encoding);
    let candidates: Vec<u8> = sep.map_or_else(|| DELIMITERS.to_vec(), |d| vec![d]);
    candidates.into_iter().any(|delimiter| {
        let records: Vec<Record> = start
            .records(head, delimiter)
            .take(50)
            .map_while(Result::ok)
            .collect();
        if matches!(find_auto_header(&records, 0), Ok((_, _))) {
            return true;
        }
        let rows: Vec<&Record> = records.iter().filter(|r| r.fields.len() >= 2).collect();
        rows.len() >= 2
            && rows.iter().any(|r| {
                r.fields.iter().any(|f| values::date_parts(f).is_some())
                    && r.fields
                        .iter()
                        .any(|f| values::raw_amount(f).is_some() && values::date_parts(f).is_none())
            })
    })
}

/// Where the records of a file start: after its byte-order mark and, when it has one, Excel's
/// `sep=;` first line.
#[derive(Debug, Clone, Copy)]
struct Start {
    bom: usize,
    encoding: Encoding,
    sep_line: bool,
}

impl Start {
    /// The records of `bytes` split on `delimiter`.
    fn records<'a>(&self, bytes: &'a [u8], delimiter: u8) -> Records<'a> {
        let records = Records::new(bytes, self.bom, self.encoding, delimiter);
        if self.sep_line {
            records.after_first_line()
        } else {
            records
        }
    }
}

/// An Excel `sep=;` first line: where the records start, and the delimiter it names (when
/// that is an ASCII character, the only ones records are split on).
fn sep_line(bytes: &[u8], bom: usize, encoding: Encoding) -> (Start, Option<u8>) {
    let mut line = String::new();
    for c in Chars::new(bytes, bom, encoding) {
        if c == '\n' || c == '\r' || line.chars().count() > 8 {
            break;
        }
        line.push(c);
    }
    let mut start = Start {
        bom,
        encoding,
        sep_line: false,
    };
    let trimmed = line.trim().trim_matches('"');
    if let Some(rest) = trimmed
        .strip_prefix("sep=")
        .or(trimmed.strip_prefix("SEP="))
    {
        let mut rest = rest.chars();
        if let (Some(delimiter), None) = (rest.next(), rest.next()) {
            start.sep_line = true;
            return (start, u8::try_from(delimiter).ok().filter(u8::is_ascii));
        }
    }
    (start, None)
}

/// The columns of the file, resolved to indexes.
#[derive(Debug, Clone, Default)]
struct Columns {
    date: usize,
    date_name: String,
    value_date: Option<usize>,
    amount: Option<usize>,
    amount_name: String,
    debit: Option<usize>,
    credit: Option<usize>,
    direction: Option<usize>,
    description: Option<usize>,
    payee: Option<usize>,
    payer: Option<usize>,
    memo: Option<usize>,
    id: Option<usize>,
    balance: Option<usize>,
    currency: Option<usize>,
    code: Option<usize>,
    status: Option<usize>,
    /// The currency a header unit names (`Betrag (EUR)`).
    unit_currency: Option<String>,
    /// A header names a card (`Card No.`, `Card Member`): a card account's export.
    card: bool,
    /// The column naming each row's account (`Account`, `Account Name`) in an export of several
    /// accounts (Mint, budgeting apps); found by its header only.
    account: Option<usize>,
}

/// How the file is laid out.
#[derive(Debug, Clone)]
struct Layout {
    start: Start,
    delimiter: u8,
    /// Records (counted from `start`) before this one are preamble or header.
    first_data: usize,
    /// Whether a header row names the columns (else rows before the first date are skipped).
    has_header: bool,
    columns: Columns,
    /// What the detection decided that the user should hear about (a headerless file's
    /// columns).
    note: Option<String>,
}

impl Layout {
    fn records<'a>(&self, bytes: &'a [u8]) -> Records<'a> {
        self.start.records(bytes, self.delimiter)
    }
}

fn head(bytes: &[u8], start: Start, delimiter: u8) -> Vec<Record> {
    start
        .records(bytes, delimiter)
        .sniffing()
        .take(HEAD_RECORDS)
        .map_while(Result::ok)
        .collect()
}

/// How evenly `delimiter` splits the first records: rows sharing the most common field count
/// (at least 2) times that count. The records are read one at a time and not kept.
fn split_score(bytes: &[u8], start: Start, delimiter: u8) -> usize {
    let mut counts: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let records = start
        .records(bytes, delimiter)
        .sniffing()
        .take(HEAD_RECORDS)
        .map_while(Result::ok);
    for record in records.filter(|r| !r.is_blank()) {
        *counts.entry(record.fields.len()).or_default() += 1;
    }
    counts
        .into_iter()
        .filter(|(width, _)| *width >= 2)
        .map(|(width, rows)| width.saturating_mul(rows))
        .max()
        .unwrap_or(0)
}

/// The first record (from `skip` on) that names a date and an amount: its index and columns.
fn find_auto_header(records: &[Record], skip: usize) -> Result<(usize, Columns), CsvError> {
    let mut date_only: Option<usize> = None;
    let mut amount_only: Option<usize> = None;
    for (index, record) in records.iter().enumerate().skip(skip) {
        let names: Vec<HeaderName> = record
            .fields
            .iter()
            .map(|f| headers::normalize(f))
            .collect();
        let first = |role: Role| {
            names
                .iter()
                .position(|n| headers::role_of(&n.name) == Some(role))
        };
        // A file with only a value date (`Date de valeur`) books on it.
        let booking = first(Role::Date);
        let date = booking.or(first(Role::ValueDate));
        let amount = first(Role::Amount);
        let debit = first(Role::Debit);
        let credit = first(Role::Credit);
        let has_amount = amount.is_some() || debit.is_some() || credit.is_some();
        match (date, has_amount) {
            (Some(date), true) => {
                let unit_currency = [amount, debit, credit, first(Role::Balance)]
                    .into_iter()
                    .flatten()
                    .find_map(|i| names[i].unit.as_deref().and_then(headers::unit_currency));
                let columns = Columns {
                    date,
                    date_name: record.get(date).trim().to_owned(),
                    value_date: booking.and(first(Role::ValueDate)),
                    amount,
                    amount_name: amount
                        .or(debit)
                        .or(credit)
                        .map(|i| record.get(i).trim().to_owned())
                        .unwrap_or_default(),
                    debit,
                    credit,
                    direction: first(Role::Direction),
                    description: first(Role::Description),
                    payee: first(Role::Payee),
                    payer: first(Role::Payer),
                    memo: first(Role::Memo),
                    id: first(Role::Id),
                    balance: first(Role::Balance),
                    currency: first(Role::Currency),
                    code: first(Role::Code),
                    status: first(Role::Status),
                    unit_currency,
                    card: record.fields.iter().any(|f| headers::names_a_card(f))
                        && !record
                            .fields
                            .iter()
                            .any(|f| headers::names_merchant_side(f)),
                    account: record
                        .fields
                        .iter()
                        .position(|f| headers::names_an_account(f)),
                };
                return Ok((index, columns));
            }
            (Some(_), false) => {
                date_only.get_or_insert(record.line);
            }
            (None, true) => {
                amount_only.get_or_insert(record.line);
            }
            (None, false) => {}
        }
    }
    Err(match (date_only, amount_only) {
        (Some(line), _) => mapping_error(
            "amount",
            format!(
                "the header row on line {line} names no amount, debit or credit column; give a \
                 mapping"
            ),
        ),
        (None, Some(line)) => mapping_error(
            "date",
            format!("the header row on line {line} names no date column; give a mapping"),
        ),
        (None, None) => mapping_error(
            "date",
            "no header row names a date and an amount column; give a mapping",
        ),
    })
}

fn single_char(field: &str, value: &str) -> Result<char, CsvError> {
    let value = match value {
        "tab" | "\\t" | "TAB" => "\t",
        "space" => " ",
        v => v,
    };
    let mut chars = value.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c != '"' && c != '\n' && c != '\r' => Ok(c),
        _ => Err(mapping_error(
            field,
            format!("{value:?} is not a single character"),
        )),
    }
}

/// Resolves the mapping's columns against the head of the file.
fn mapped_layout(
    mapping: &CsvMapping,
    records: &[Record],
    skip: usize,
) -> Result<(usize, bool, Columns), CsvError> {
    let cols = &mapping.columns;
    if cols.amount.is_none() && cols.debit.is_none() && cols.credit.is_none() {
        return Err(mapping_error(
            "amount",
            "the mapping names neither amount nor debit and credit",
        ));
    }
    let named: Vec<&str> = [
        Some(&cols.date),
        cols.amount.as_ref(),
        cols.debit.as_ref(),
        cols.credit.as_ref(),
        cols.description.as_ref(),
        cols.payee.as_ref(),
        cols.memo.as_ref(),
        cols.id.as_ref(),
        cols.balance.as_ref(),
        cols.currency.as_ref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|c| match c {
        ColumnRef::Name(name) => Some(name.as_str()),
        ColumnRef::Index(_) => None,
    })
    .collect();
    let matches = |field: &str, name: &str| {
        let field = values::clean(field);
        field.eq_ignore_ascii_case(name.trim())
            || field.to_lowercase() == name.trim().to_lowercase()
            || headers::normalize(field) == headers::normalize(name)
    };
    let header = match named.first() {
        None => None,
        Some(first) => {
            let found = records
                .iter()
                .enumerate()
                .skip(skip)
                .find(|(_, r)| r.fields.iter().any(|f| matches(f, first)));
            match found {
                Some((index, record)) => Some((index, record)),
                None => {
                    return Err(mapping_error(
                        *first,
                        "no header row in the file names this column",
                    ));
                }
            }
        }
    };
    let widest = records
        .iter()
        .skip(skip)
        .map(|r| r.fields.len())
        .max()
        .unwrap_or(0);
    let resolve = |column: &ColumnRef| -> Result<usize, CsvError> {
        match column {
            ColumnRef::Index(index) => {
                let width = header.map_or(widest, |(_, h)| h.fields.len().max(widest));
                if *index < width {
                    Ok(*index)
                } else {
                    Err(mapping_error(
                        index.to_string(),
                        format!("the file has only {width} columns"),
                    ))
                }
            }
            ColumnRef::Name(name) => header
                .and_then(|(_, h)| h.fields.iter().position(|f| matches(f, name)))
                .ok_or_else(|| mapping_error(name.clone(), "the header row has no such column")),
        }
    };
    let optional = |column: &Option<ColumnRef>| column.as_ref().map(resolve).transpose();
    let date = resolve(&cols.date)?;
    let amount = optional(&cols.amount)?;
    let debit = optional(&cols.debit)?;
    let credit = optional(&cols.credit)?;
    let balance = optional(&cols.balance)?;
    let unit_currency = header.and_then(|(_, h)| {
        [amount, debit, credit, balance]
            .into_iter()
            .flatten()
            .find_map(|i| {
                headers::normalize(h.get(i))
                    .unit
                    .as_deref()
                    .and_then(headers::unit_currency)
            })
    });
    let name_of = |index: usize, column: &ColumnRef| {
        header.map_or_else(
            || column.to_string(),
            |(_, h)| h.get(index).trim().to_owned(),
        )
    };
    let amount_ref = cols
        .amount
        .as_ref()
        .or(cols.debit.as_ref())
        .or(cols.credit.as_ref());
    let columns = Columns {
        date,
        date_name: name_of(date, &cols.date),
        amount,
        amount_name: match (amount.or(debit).or(credit), amount_ref) {
            (Some(i), Some(c)) => name_of(i, c),
            _ => String::new(),
        },
        debit,
        credit,
        description: optional(&cols.description)?,
        payee: optional(&cols.payee)?,
        memo: optional(&cols.memo)?,
        id: optional(&cols.id)?,
        balance,
        currency: optional(&cols.currency)?,
        unit_currency,
        ..Columns::default()
    };
    // Without a header, rows before the first date are skipped as they come.
    let first_data = header.map_or(skip, |(index, _)| index + 1);
    Ok((first_data, header.is_some(), columns))
}

/// Works out encoding, delimiter, header and columns.
fn layout(bytes: &[u8], mapping: Option<&CsvMapping>) -> Result<Layout, CsvError> {
    let (encoding, bom) = match mapping.and_then(|m| m.encoding.as_deref()) {
        Some(label) => {
            let encoding = Encoding::from_label(label).ok_or_else(|| {
                mapping_error(
                    "encoding",
                    format!(
                        "{label:?} is not one of utf-8, utf-16le, utf-16be, windows-1252, \
                         iso-8859-1, windows-1250, iso-8859-2, cp852"
                    ),
                )
            })?;
            (encoding, text::bom_len(bytes, encoding))
        }
        None => text::detect_encoding(bytes),
    };
    if Chars::new(bytes, bom, encoding).all(char::is_whitespace) {
        return Err(ParseError::new(0, "the file is empty").into());
    }
    let (start, sep) = sep_line(bytes, bom, encoding);
    let explicit = match mapping.and_then(|m| m.delimiter.as_deref()) {
        Some(value) => {
            let delimiter = single_char("delimiter", value)?;
            Some(
                u8::try_from(delimiter)
                    .ok()
                    .filter(u8::is_ascii)
                    .ok_or_else(|| {
                        mapping_error("delimiter", format!("{value:?} is not an ASCII character"))
                    })?,
            )
        }
        None => sep,
    };
    let skip = mapping.and_then(|m| m.skip_rows).unwrap_or(0);
    // One delimiter candidate at a time: scored while streaming, then its head read for the
    // header only when it is tried; never four heads held at once.
    let candidates: Vec<u8> = match explicit {
        Some(d) => vec![d],
        None => {
            let mut scored: Vec<(usize, u8)> = DELIMITERS
                .iter()
                .map(|&d| (split_score(bytes, start, d), d))
                .collect();
            scored.sort_by_key(|scored| std::cmp::Reverse(scored.0));
            scored.into_iter().map(|(_, d)| d).collect()
        }
    };
    let mut first_error = None;
    for delimiter in &candidates {
        let records = &head(bytes, start, *delimiter);
        let found = match mapping {
            Some(mapping) => mapped_layout(mapping, records, skip),
            None => {
                find_auto_header(records, skip).map(|(index, columns)| (index + 1, true, columns))
            }
        };
        match found {
            Ok((first_data, has_header, columns)) => {
                return Ok(Layout {
                    start,
                    delimiter: *delimiter,
                    first_data,
                    has_header,
                    columns,
                    note: None,
                });
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    // No header row: the first record may already be a transaction.
    if mapping.is_none() {
        for delimiter in &candidates {
            let records = head(bytes, start, *delimiter);
            if let Some((columns, note)) = shape::headerless_columns(&records, skip) {
                return Ok(Layout {
                    start,
                    delimiter: *delimiter,
                    first_data: skip,
                    has_header: false,
                    columns,
                    note: Some(note),
                });
            }
        }
    }
    Err(first_error.unwrap_or_else(|| mapping_error("date", "no header row found")))
}

/// Warnings with a cap.
#[derive(Debug, Default)]
struct Warnings {
    list: Vec<ParseWarning>,
    dropped: usize,
}

impl Warnings {
    fn push(&mut self, line: usize, message: impl Into<String>) {
        if self.list.len() < MAX_WARNINGS {
            self.list.push(ParseWarning {
                item: format!("line {line}"),
                message: message.into(),
            });
        } else {
            self.dropped += 1;
        }
    }

    /// A warning about the whole file (a detection's choice).
    fn push_file(&mut self, message: impl Into<String>) {
        self.list.push(ParseWarning {
            item: "file".to_owned(),
            message: message.into(),
        });
    }

    fn finish(mut self) -> Vec<ParseWarning> {
        if self.dropped > 0 {
            self.list.push(ParseWarning {
                item: "file".to_owned(),
                message: format!("{} more warnings left out", self.dropped),
            });
        }
        self.list
    }
}

/// Whether a date cell starts a transaction row.
fn is_dated(cell: &str, format: Option<&DateFormat>) -> bool {
    values::date_parts(cell).is_some() || format.is_some_and(|f| f.parse(cell).is_some())
}

/// Walks the data rows: skips blank rows, the preamble, and rows below the last transaction
/// that are not transactions; calls `on_row` for each transaction row.
fn walk(
    bytes: &[u8],
    layout: &Layout,
    format: Option<&DateFormat>,
    warnings: &mut Warnings,
    mut on_row: impl FnMut(&Record, &mut Warnings) -> Result<(), CsvError>,
) -> Result<(), CsvError> {
    let columns = &layout.columns;
    let mut seen_data = false;
    // The first non-transaction row after a transaction, and how many followed it.
    let mut trailing: Option<(usize, String)> = None;
    let mut trailing_count = 0usize;
    for (index, record) in layout.records(bytes).enumerate() {
        let record = record.map_err(|error| {
            let (line, reason) = error.describe();
            ParseError::new(line, reason)
        })?;
        if index < layout.first_data || record.is_blank() {
            continue;
        }
        let date_cell = record.get(columns.date);
        if is_dated(date_cell, format) {
            if let Some((line, reason)) = trailing.take() {
                return Err(ParseError::new(line, reason).into());
            }
            seen_data = true;
            on_row(&record, warnings)?;
            continue;
        }
        if !seen_data && !layout.has_header {
            // The header or preamble of a file read through an index mapping.
            continue;
        }
        if headers::is_pending_date(date_cell) {
            // Order histories write `pending` where the date of a charge not yet made goes.
            warnings.push(
                record.line,
                "a row dated \"pending\" is not booked yet and is skipped",
            );
            continue;
        }
        let amount_like = [columns.amount, columns.debit, columns.credit]
            .into_iter()
            .flatten()
            .any(|i| {
                let cell = values::clean(record.get(i));
                !cell.is_empty() && values::raw_amount(cell).is_some()
            });
        if !amount_like {
            // A second header line, a sub-heading, a note: no transaction to lose.
            if seen_data {
                warnings.push(
                    record.line,
                    "a row with neither a date nor an amount is skipped",
                );
            }
            continue;
        }
        if trailing.is_none() {
            let shown: String = values::clean(date_cell).chars().take(40).collect();
            trailing = Some((
                record.line,
                format!(
                    "{shown:?} in column {} is not a date",
                    if columns.date_name.is_empty() {
                        "date"
                    } else {
                        &columns.date_name
                    }
                ),
            ));
            trailing_count = 0;
        }
        trailing_count += 1;
    }
    if let Some((line, _)) = trailing {
        warnings.push(
            line,
            format!(
                "{trailing_count} line(s) below the last transaction are not transactions and \
                 were skipped"
            ),
        );
    }
    Ok(())
}

/// What the first pass learned.
#[derive(Debug, Default)]
struct Evidence {
    order: OrderEvidence,
    dot: usize,
    comma: usize,
    /// Filled cells of the transaction type column, and how many of them are `debit` or
    /// `credit` words.
    code_cells: usize,
    code_directions: usize,
    /// Amount cells written positive and negative (zeros left out).
    positive: usize,
    negative: usize,
    /// Rows whose transaction type (`Sale`, `Payment`) agrees with the written sign (a
    /// charge negative, a payment positive), and rows where it does not.
    type_agrees: usize,
    type_disagrees: usize,
}

impl Evidence {
    /// Takes the amount cell and the transaction type of one row into account.
    fn observe_sign(&mut self, amount: &values::RawAmount, code: Option<&str>) {
        if !amount.body.chars().any(|c| c.is_ascii_digit() && c != '0') {
            return;
        }
        if amount.negative {
            self.negative += 1;
        } else {
            self.positive += 1;
        }
        match code.and_then(headers::card_type) {
            Some(headers::CardType::Charge) if amount.negative => self.type_agrees += 1,
            Some(headers::CardType::Payment) if !amount.negative => self.type_agrees += 1,
            Some(_) => self.type_disagrees += 1,
            None => {}
        }
    }
}

/// How the written sign of the amount column becomes the entry's sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignRule {
    /// As written (or set by a direction column).
    AsWritten,
    /// Negated: the export writes money out as positive.
    Invert,
    /// Set by the transaction type column, whose cells are all `debit` or `credit`.
    TypeIsDirection,
}

/// Decides the sign rule: the mapping's `invert_sign` when it gives one; else a type column of
/// `debit`/`credit` words; else what a card export's transaction types (`Sale`, `Payment`)
/// say against the written signs; else a card export (a header naming a card) whose amounts
/// are mostly positive lists charges as positive. A warning says what was decided; types that
/// contradict each other are a 422 asking for `mapping.invert_sign`.
fn sign_rule(
    mapping: Option<&CsvMapping>,
    columns: &Columns,
    evidence: &Evidence,
    amount_name: &str,
) -> Result<(SignRule, Option<String>), CsvError> {
    if let Some(invert) = mapping.and_then(|m| m.invert_sign) {
        return Ok((
            if invert {
                SignRule::Invert
            } else {
                SignRule::AsWritten
            },
            None,
        ));
    }
    if columns.amount.is_none() || columns.direction.is_some() {
        return Ok((SignRule::AsWritten, None));
    }
    if evidence.code_cells > 0 && evidence.code_directions == evidence.code_cells {
        return Ok((SignRule::TypeIsDirection, None));
    }
    let (agree, disagree) = (evidence.type_agrees, evidence.type_disagrees);
    const INVERTED: &str = "give mapping.invert_sign (true or false) to say how to read them";
    if agree + disagree > 0 {
        if disagree.saturating_mul(10) <= agree {
            return Ok((SignRule::AsWritten, None));
        }
        if agree.saturating_mul(10) <= disagree {
            return Ok((
                SignRule::Invert,
                Some(format!(
                    "the transaction types say charges are written positive and payments \
                     negative: every amount of column {amount_name} is negated; give \
                     mapping.invert_sign false to keep the signs as written"
                )),
            ));
        }
        return Err(CsvError::MappingField {
            field: "mapping.invert_sign",
            reason: format!(
                "the transaction types of column {amount_name} agree with the written signs \
                 on {agree} rows and contradict them on {disagree}; {INVERTED}"
            ),
        });
    }
    if columns.card && evidence.positive > evidence.negative {
        return Ok((
            SignRule::Invert,
            Some(format!(
                "a card export whose amounts are mostly positive lists charges as positive: \
                 every amount of column {amount_name} is negated; give mapping.invert_sign \
                 false to keep the signs as written"
            )),
        ));
    }
    Ok((SignRule::AsWritten, None))
}

/// The separators amounts are read with.
#[derive(Debug, Clone, Copy)]
struct NumberFormat {
    decimal: char,
    thousands: Option<char>,
}

fn number_format(
    mapping: Option<&CsvMapping>,
    evidence: &Evidence,
    delimiter: u8,
) -> Result<NumberFormat, CsvError> {
    let decimal = match mapping.and_then(|m| m.decimal.as_deref()) {
        Some(value) => {
            let c = single_char("decimal", value)?;
            if c != '.' && c != ',' {
                return Err(mapping_error("decimal", format!("{value:?} is not . or ,")));
            }
            c
        }
        None => {
            if evidence.comma > evidence.dot {
                ','
            } else if evidence.dot > evidence.comma {
                '.'
            } else if delimiter == b';' {
                ','
            } else {
                '.'
            }
        }
    };
    let thousands = match mapping.and_then(|m| m.thousands.as_deref()) {
        Some("") => None,
        Some(value) => {
            let c = single_char("thousands", value)?;
            if c == decimal || c.is_ascii_digit() {
                return Err(mapping_error(
                    "thousands",
                    format!("{value:?} cannot separate thousands when {decimal:?} is the decimal"),
                ));
            }
            Some(c)
        }
        None => None,
    };
    Ok(NumberFormat { decimal, thousands })
}

/// The file's day/month order, and a warning when nothing in the file decided it: then a
/// file of `;`-separated or decimal-comma amounts (European) is read day first, any other
/// month first.
fn date_order(
    evidence: &OrderEvidence,
    columns: &Columns,
    european: bool,
) -> Result<(Option<DateOrder>, Option<String>), CsvError> {
    let decided = match (evidence.day_first, evidence.month_first) {
        (true, true) => Err(mapping_error(
            columns.date_name.clone(),
            "the dates put the day first on some rows and the month first on others; give \
             date_format",
        )),
        (true, false) => Ok(Some(DateOrder::DayFirst)),
        (false, true) => Ok(Some(DateOrder::MonthFirst)),
        (false, false) if evidence.ambiguous && evidence.undotted => {
            let (order, spelled) = if european {
                (DateOrder::DayFirst, "day/month")
            } else {
                (DateOrder::MonthFirst, "month/day")
            };
            return Ok((
                Some(order),
                Some(format!(
                    "no date in column {} shows whether the day or the month comes first: they \
                     are read as {spelled}; give mapping.date_format to read them otherwise",
                    columns.date_name
                )),
            ));
        }
        (false, false) => Ok(None),
    };
    decided.map(|order| (order, None))
}

fn read_amount(cell: &str, format: NumberFormat) -> Option<Decimal> {
    let raw = values::raw_amount(cell)?;
    values::to_decimal(&raw, format.decimal, format.thousands)
}

fn non_empty(record: &Record, column: Option<usize>) -> Option<&str> {
    column
        .map(|i| values::clean(record.get(i)))
        .filter(|cell| !cell.is_empty())
}

/// The closing balance: the balance of the latest row (by date; among rows of that date, the
/// last one in the file's order).
#[derive(Debug, Default)]
struct Closing {
    first_date: Option<NaiveDate>,
    last_date: Option<NaiveDate>,
    max_date: Option<NaiveDate>,
    first_at_max: Option<Decimal>,
    last_at_max: Option<Decimal>,
}

impl Closing {
    fn add(&mut self, date: NaiveDate, balance: Option<Decimal>) {
        self.first_date.get_or_insert(date);
        self.last_date = Some(date);
        let Some(balance) = balance else {
            return;
        };
        if self.max_date.is_none_or(|max| date > max) {
            self.max_date = Some(date);
            self.first_at_max = Some(balance);
        }
        if self.max_date == Some(date) {
            self.last_at_max = Some(balance);
        }
    }

    fn balance(&self, currency: Option<String>) -> Option<ParsedBalance> {
        let date = self.max_date?;
        let descending = matches!((self.first_date, self.last_date), (Some(f), Some(l)) if l < f);
        let amount = if descending {
            self.first_at_max
        } else {
            self.last_at_max
        }?;
        Some(ParsedBalance {
            amount,
            date,
            currency,
        })
    }
}

/// Reads a CSV statement.
pub(crate) fn parse(bytes: &[u8], mapping: Option<&CsvMapping>) -> Result<ParsedFile, CsvError> {
    // The format is read once here, not once per row.
    let date_format = mapping
        .and_then(|m| m.date_format.as_deref())
        .map(|written| {
            DateFormat::new(written).map_err(|reason| CsvError::MappingField {
                field: "mapping.date_format",
                reason,
            })
        })
        .transpose()?;
    let format = date_format.as_ref();
    let layout = layout(bytes, mapping)?;
    let columns = &layout.columns;
    let mut warnings = Warnings::default();

    // First pass: the evidence for date order and decimal separator.
    let mut evidence = Evidence::default();
    let mut matched_format = false;
    walk(
        bytes,
        &layout,
        format,
        &mut Warnings::default(),
        |record, _| {
            let date_cell = record.get(columns.date);
            match format {
                Some(format) => {
                    matched_format |= format.parse(date_cell).is_some();
                }
                None => {
                    if let Some(parts) = values::date_parts(date_cell) {
                        evidence.order.add(parts);
                    }
                }
            }
            let code = non_empty(record, columns.code);
            if let Some(code) = code {
                evidence.code_cells += 1;
                if headers::direction_is_out(code).is_some() {
                    evidence.code_directions += 1;
                }
            }
            if let Some(raw) = non_empty(record, columns.amount).and_then(values::raw_amount) {
                evidence.observe_sign(&raw, code);
            }
            for column in [
                columns.amount,
                columns.debit,
                columns.credit,
                columns.balance,
            ] {
                if let Some(raw) = non_empty(record, column).and_then(values::raw_amount) {
                    match values::decimal_hint(&raw.body) {
                        DecimalHint::Dot => evidence.dot += 1,
                        DecimalHint::Comma => evidence.comma += 1,
                        DecimalHint::Either => {}
                    }
                }
            }
            Ok(())
        },
    )?;
    let numbers = number_format(mapping, &evidence, layout.delimiter)?;
    if let Some(note) = &layout.note {
        warnings.push_file(note.clone());
    }
    let order = match format {
        Some(_) => None,
        None => {
            let european = layout.delimiter == b';' || numbers.decimal == ',';
            let (order, note) = date_order(&evidence.order, columns, european)?;
            if let Some(note) = note {
                warnings.push_file(note);
            }
            order
        }
    };
    let amount_name = if columns.amount_name.is_empty() {
        "amount".to_owned()
    } else {
        columns.amount_name.clone()
    };
    let (sign, note) = sign_rule(mapping, columns, &evidence, &amount_name)?;
    if let Some(note) = note {
        warnings.push_file(note);
    }
    let invert = sign == SignRule::Invert;
    let direction_column = if sign == SignRule::TypeIsDirection {
        columns.code
    } else {
        columns.direction
    };

    // Second pass: the entries.
    let mut entries = Vec::new();
    let mut rows: Vec<RowAccount> = Vec::new();
    walk(bytes, &layout, format, &mut warnings, |record, warnings| {
        let line = record.line;
        let date_cell = values::clean(record.get(columns.date));
        let date = match format {
            Some(format) => format.parse(date_cell).ok_or_else(|| {
                mapping_error(
                    columns.date_name.clone(),
                    format!(
                        "{date_cell:?} on line {line} does not match date_format {:?}",
                        mapping.and_then(|m| m.date_format.as_deref()).unwrap_or("")
                    ),
                )
            })?,
            None => values::date_parts(date_cell)
                .and_then(|parts| values::resolve(parts, order))
                .ok_or_else(|| {
                    ParseError::new(line, format!("{date_cell:?} is not a valid date"))
                })?,
        };
        let value_date = non_empty(record, columns.value_date).and_then(|cell| match format {
            Some(format) => format.parse(cell),
            None => values::date_parts(cell).and_then(|p| values::resolve(p, order)),
        });
        let parse_cell = |cell: &str, name: &str| {
            read_amount(cell, numbers).ok_or_else(|| {
                CsvError::from(ParseError::new(
                    line,
                    format!("{cell:?} in column {name} is not an amount"),
                ))
            })
        };
        let mut amount = match non_empty(record, columns.amount) {
            Some(cell) => {
                let value = parse_cell(cell, &amount_name)?;
                match non_empty(record, direction_column) {
                    Some(direction) => match headers::direction_is_out(direction) {
                        Some(true) => -value.abs(),
                        Some(false) => value.abs(),
                        None => {
                            return Err(ParseError::new(
                                line,
                                format!("{direction:?} says neither money in nor money out"),
                            )
                            .into());
                        }
                    },
                    None => value,
                }
            }
            None => {
                let debit = non_empty(record, columns.debit)
                    .map(|cell| parse_cell(cell, "debit"))
                    .transpose()?;
                let credit = non_empty(record, columns.credit)
                    .map(|cell| parse_cell(cell, "credit"))
                    .transpose()?;
                match (debit, credit) {
                    (None, None) => {
                        warnings.push(line, "a dated row without an amount is skipped");
                        return Ok(());
                    }
                    (debit, credit) => {
                        let out = debit.map_or(Decimal::ZERO, |d| -d.abs());
                        out.checked_add(credit.unwrap_or(Decimal::ZERO))
                            .ok_or_else(|| ParseError::new(line, "the amount is too large"))?
                    }
                }
            }
        };
        if invert {
            amount = -amount;
        }
        let balance = match non_empty(record, columns.balance) {
            Some(cell) => {
                let balance = read_amount(cell, numbers);
                if balance.is_none() {
                    warnings.push(line, format!("balance {cell:?} cannot be read"));
                }
                balance
            }
            None => None,
        };
        let currency = non_empty(record, columns.currency).map(str::to_uppercase);
        rows.push(RowAccount {
            account: non_empty(record, columns.account).map(str::to_owned),
            balance,
        });
        let payee = non_empty(record, columns.payee);
        let payer = non_empty(record, columns.payer);
        let counterparty = if amount.is_sign_negative() {
            payee.or(payer)
        } else {
            payer.or(payee)
        };
        let text: Vec<&str> = [
            non_empty(record, columns.description),
            non_empty(record, columns.memo),
        ]
        .into_iter()
        .flatten()
        .collect();
        let status = if non_empty(record, columns.status).is_some_and(headers::status_is_pending) {
            EntryStatus::Pending
        } else {
            EntryStatus::Booked
        };
        entries.push(ParsedEntry {
            reference: non_empty(record, columns.id).map(str::to_owned),
            date,
            value_date: value_date.filter(|v| *v != date),
            amount,
            currency,
            status,
            counterparty: counterparty.map(str::to_owned),
            text: (!text.is_empty()).then(|| text.join(" ")),
            code: non_empty(record, columns.code).map(str::to_owned),
            line,
            ..ParsedEntry::default()
        });
        Ok(())
    })?;
    if format.is_some() && !matched_format && !entries.is_empty() {
        return Err(mapping_error(
            columns.date_name.clone(),
            "no date in the file matches date_format",
        ));
    }
    let statements = statements_by_account(entries, rows, columns.unit_currency.as_ref());
    if statements.len() > 1 {
        warnings.push_file(format!(
            "the account column names {} accounts: each is imported as its own account",
            statements.len()
        ));
    }
    Ok(ParsedFile {
        institution: None,
        statements,
        warnings: warnings.finish(),
    })
}

/// What a row says of its account beside its entry.
struct RowAccount {
    /// The account column's cell, when the file has one.
    account: Option<String>,
    /// The running balance after the row.
    balance: Option<Decimal>,
}

/// The entries as statements: one, or one per account when an account column names two or
/// more (in the order they first appear). Each statement's currency is its rows' one currency,
/// else the header's unit; its closing balance is its own rows' latest.
fn statements_by_account(
    entries: Vec<ParsedEntry>,
    rows: Vec<RowAccount>,
    unit_currency: Option<&String>,
) -> Vec<ParsedStatement> {
    /// One account's rows: its name, entries, closing and the one currency they name.
    struct Group {
        name: Option<String>,
        entries: Vec<ParsedEntry>,
        closing: Closing,
        currencies: Option<Option<String>>,
    }
    impl Group {
        fn new(name: Option<String>) -> Self {
            Self {
                name,
                entries: Vec::new(),
                closing: Closing::default(),
                currencies: None,
            }
        }

        /// Counts `entry` (with its row's balance) in the closing and the currency.
        fn note(&mut self, entry: &ParsedEntry, balance: Option<Decimal>) {
            self.closing.add(entry.date, balance);
            match &self.currencies {
                None => self.currencies = Some(entry.currency.clone()),
                Some(seen) if *seen != entry.currency => self.currencies = Some(None),
                Some(_) => {}
            }
        }
    }
    let split = {
        let mut distinct = rows.iter().filter_map(|r| r.account.as_deref());
        distinct
            .next()
            .is_some_and(|first| distinct.any(|other| other != first))
    };
    let groups = if split {
        let mut index: std::collections::HashMap<Option<String>, usize> =
            std::collections::HashMap::new();
        let mut groups: Vec<Group> = Vec::new();
        for (entry, row) in entries.into_iter().zip(rows) {
            let at = *index.entry(row.account.clone()).or_insert_with(|| {
                groups.push(Group::new(row.account));
                groups.len() - 1
            });
            groups[at].note(&entry, row.balance);
            groups[at].entries.push(entry);
        }
        groups
    } else {
        // One account: its entries stay in the vector they were read into, rather than
        // moved one by one into another that grows beside it (twice the rows at the peak).
        let mut group = Group::new(None);
        for (entry, row) in entries.iter().zip(rows) {
            group.note(entry, row.balance);
        }
        group.entries = entries;
        group.entries.shrink_to_fit();
        vec![group]
    };
    groups
        .into_iter()
        .map(|group| {
            let currency = group
                .currencies
                .flatten()
                .filter(|c| c.len() == 3 && c.chars().all(|ch| ch.is_ascii_alphabetic()))
                .or_else(|| unit_currency.cloned());
            ParsedStatement {
                account: ParsedAccount {
                    name: group.name,
                    currency: currency.clone(),
                    ..ParsedAccount::default()
                },
                closing: group.closing.balance(currency),
                entries: group.entries,
                ..ParsedStatement::default()
            }
        })
        .collect()
}
