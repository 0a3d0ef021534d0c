//! Quicken Interchange Format (QIF): the `.qif` files of Quicken, Microsoft Money, GnuCash and
//! of banks' "download for Quicken" buttons.
//!
//! [`sniff`] recognises a file whose first non-blank line is a `!Type:`, `!Account`,
//! `!Option:` or `!Clear:` header, or which opens with a bank record (`D` date, a `T` amount,
//! `^`) and no header; [`parse`] reads it into a [`ParsedFile`].
//!
//! # What is read
//!
//! - Transaction sections `!Type:Bank`, `CCard`, `Cash`, `Oth A` (and the German `Oth S`),
//!   `Oth L`, `Invst` (and the older `Port`): one [`ParsedStatement`] per section that holds a
//!   record, its account kind from the header. Headers are matched case-insensitively, with
//!   spaces around them ignored.
//! - `!Account` blocks (`N` name; `T` type and `D` description are read past): outside an
//!   `!Option:AutoSwitch` … `!Clear:AutoSwitch` list, the block names the account of the
//!   sections that follow it; inside the list it is only a list entry and changes nothing,
//!   unless a `!Type:` section follows it directly (a list never cleared). Records right after
//!   a block, with no `!Type:` header, are a section of the block's `T` type (with a warning).
//! - Records before any header are a `!Type:Bank` section (with a warning).
//! - Lists `!Type:Cat`, `Class`, `Memorized`, `Prices`, `Budget`, `Invitem`, `Template`,
//!   `Bill`, `Invoice`, `Tax` are skipped; `!Type:Security` is read only to turn a security's
//!   name (`N`) into its symbol (`S`). An unknown `!Type:` is skipped with a warning.
//! - Bank-like records: `D` date, `T` amount (`U` when there is no `T`), `P` payee (the
//!   counterparty), `M` memo (the text), `N` number (the code), `C` cleared status (`*`, `c`,
//!   `X`, `R`, …; every record is booked), `L` category (`[Account]` makes the entry a
//!   transfer), splits `S`/`E`/`$` (or `£`; an `=` before a split amount is read past), and
//!   `^` ending the record. Other codes (`A` address, `F`,
//!   `X`, `%`, …) are read past.
//! - Investment records: `N` action, `Y` security, `I` price, `Q` quantity, `O` commission,
//!   `T` total (`U` when there is no `T`; quantity × price ± commission when there is
//!   neither), `P` payee, `M` memo, `L` and `$` (the transfer of the `…X` actions, read past).
//!
//! # Choices
//!
//! - **Dates** in every spelling met in exports: `12/31'99`, `12/31/99`, `12/31/1999`,
//!   `31.12.1999`, `1999-12-31`, `12-31-99`, `1/ 2/99` and `1/ 2' 8` with spaces, `19991231`,
//!   `12 May 2025` and `May 12, 2025`. The order of day and month is decided over the whole
//!   file: a first number above 12 anywhere means day first; else a second number above 12
//!   means month first; else dotted dates are day first and the others month first. Two-digit
//!   years below 50 are 20xx and the others 19xx, after a slash or Quicken's apostrophe alike
//!   (`12/31'05` is 2005, `8/25'93` is 1993).
//! - **Amounts**: `,` groups thousands and `.` is the decimal point, unless the file needs a
//!   decimal comma (an amount such as `12,5` or `1.234,56`, and none such as `12.5` or
//!   `1,234.56`); spaces and apostrophes group thousands; the doubled `--` of some exporters
//!   is one minus sign.
//! - **Splits**: a split record stays one entry with its total `T` (the sum of its `$` when
//!   there is no `T`); its parts are kept in the text (`category amount memo; …`); a blank
//!   part (empty `S` and zero `$`) is dropped; parts that do not add up to `T` are a warning.
//! - **Opening balance**: a first record whose payee is `Opening Balance` (Quicken writes one
//!   at the top of an account's export) is the account's first entry, as Quicken's register
//!   and other readers (GnuCash, quiffen) show it; the statement opens at zero the day before.
//!   Its `L[Name]` names the account when no `!Account` did. A statement with an opening
//!   balance record gets a closing balance computed from the entries, dated on the last entry;
//!   a statement without one gets no balances (QIF files state none).
//! - **Investment signs** are set by the action, whatever the sign written: buys (`Buy`,
//!   `BuyX`, `CvrShrt`, every `Reinv…`) are negative cash amounts and add units; sells
//!   (`Sell`, `SellX`, `ShtSell`) are positive and remove units; income (`Div`, `IntInc`,
//!   `CGLong`, `CGMid`, `CGShort`, `MiscInc`, `RtrnCap` and their `…X`) is positive; `MiscExp`
//!   and `MargInt` are negative fees; `XIn`/`ContribX` positive and `XOut`/`WithdrwX`
//!   negative transfers; `ShrsIn` and `ShrsOut` move units with a zero amount; `StkSplit`
//!   multiplies the units by its ratio `Q` (`2`, `2:1`, `3/2`). The action, upper case, is the
//!   entry's code. An unknown action keeps the written sign with a warning.
//! - **Positions** of an investment section come from the quantities: units summed per
//!   security (symbol when the `!Type:Security` list gives one), priced at the last `I` seen
//!   for it; no cost basis. Securities whose units come to zero are left out.
//! - **Text**: UTF-8 with or without a byte-order mark; bytes that are not UTF-8 are read in
//!   the single-byte code page they read best in (Windows-1252, or for Polish and other
//!   Central European exports Windows-1250, ISO-8859-2 or DOS 852; see `import::codepage`).
//!   Lines end in CRLF, LF or a lone CR. Blank lines, leading spaces and
//!   trailing spaces are ignored; a missing final `^` ends the last record anyway, as does a
//!   header; a second `D` line in a record starts a new record, with a warning.
//! - **Errors** (`400` naming the line): a record with no date or
//!   no amount, a date or amount that cannot be read, a date that does not exist in the
//!   file's day/month order, and numbers too large to add up. An empty file is an error at
//!   line 0.
//!
//! The quirks, where they were met and the fixture and test of each are listed in
//! `import/qif/QUIRKS.md`.

use std::collections::HashMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::model::{
    AccountKind, EntryKind, ParseError, ParseWarning, ParsedAccount, ParsedBalance, ParsedEntry,
    ParsedFile, ParsedPosition, ParsedStatement,
};

mod values;

use values::{DateStyle, NumberStyle, RawDate};

/// How many bytes [`sniff`] looks at.
const SNIFF_BYTES: usize = 4096;

/// Whether the bytes look like a QIF file: the first non-blank line is a QIF header.
pub(crate) fn sniff(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    let text = values::decode(head);
    values::lines(&text)
        .map(|(_, line)| clean(line))
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .is_some_and(|line| {
            let lower = line.to_ascii_lowercase();
            ["!type:", "!account", "!option:", "!clear:"]
                .iter()
                .any(|h| lower.starts_with(h))
        })
        || headerless_records(&text)
}

/// Whether the text opens with bank records and no header: a first line `D` and a date, the
/// record's lines all of the form `X value`, a `T` or `U` amount among them and a `^` ending
/// the record within the first lines.
fn headerless_records(text: &str) -> bool {
    let mut lines = values::lines(text)
        .map(|(_, line)| clean(line))
        .filter(|line| !line.is_empty() && !line.starts_with('#'));
    let Some(first) = lines.next() else {
        return false;
    };
    if first
        .strip_prefix('D')
        .is_none_or(|date| RawDate::scan(date).is_none())
    {
        return false;
    }
    let mut amount = false;
    for line in lines.take(20) {
        if line == "^" {
            return amount;
        }
        let mut chars = line.chars();
        match chars.next() {
            Some('T' | 'U') => amount |= NumberStyle::default().amount(chars.as_str()).is_some(),
            Some(code) if code.is_ascii_uppercase() || "$%".contains(code) => {}
            _ => return false,
        }
    }
    false
}

/// Reads a QIF file: see the module documentation.
///
/// The text is read twice, one line at a time and holding one record at a time: the first
/// pass decides the file's date and number conventions and reads the security list, the
/// second turns each record into an entry as soon as it ends.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedFile, ParseError> {
    let text = values::decode(bytes);
    if text.trim().is_empty() {
        return Err(ParseError::new(0, "the file is empty"));
    }
    let mut scan = Builder::new(Pass::Scan);
    scan.run(&text)?;
    let mut build = Builder::new(Pass::Build);
    build.dates = scan.dates;
    build.numbers = scan.numbers;
    build.securities = std::mem::take(&mut scan.securities);
    build.run(&text)?;
    Ok(ParsedFile {
        institution: None,
        statements: build.statements,
        warnings: build.warnings,
    })
}

/// A line without the spaces (and stray byte-order marks) around it.
fn clean(line: &str) -> &str {
    line.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

// ---------------------------------------------------------------------------------------------
// Step 1: headers, sections and records

/// One `X value` line of a record.
#[derive(Debug, Clone, Copy)]
struct Field<'a> {
    code: char,
    value: &'a str,
    line: usize,
}

/// The lines of one record, up to its `^`.
#[derive(Debug, Clone, Default)]
struct Record<'a> {
    line: usize,
    fields: Vec<Field<'a>>,
}

/// What the records under the current header are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No header yet.
    Start,
    /// Records of a transaction section.
    Transactions,
    /// `!Account` blocks.
    Accounts,
    /// `!Type:Security` list.
    Securities,
    /// A list that is skipped.
    Skipped,
}

/// Which of the two passes over the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Decides the conventions and reads the security list.
    Scan,
    /// Reads the entries.
    Build,
}

const SKIPPED_LISTS: [&str; 10] = [
    "cat",
    "class",
    "memorized",
    "prices",
    "budget",
    "invitem",
    "template",
    "bill",
    "invoice",
    "tax",
];

/// Codes whose values are numbers.
const NUMBER_CODES: [char; 7] = ['T', 'U', '$', '£', 'I', 'Q', 'O'];

fn section_kind(name: &str) -> Option<AccountKind> {
    Some(match name.to_ascii_lowercase().as_str() {
        "bank" => AccountKind::Checking,
        "ccard" => AccountKind::CreditCard,
        "cash" => AccountKind::Cash,
        "oth a" | "oth s" => AccountKind::OtherAsset,
        "oth l" => AccountKind::OtherLiability,
        "invst" | "port" => AccountKind::Investment,
        _ => return None,
    })
}

/// One pass over the lines.
struct Builder<'a> {
    pass: Pass,
    mode: Mode,
    record: Option<Record<'a>>,
    /// Inside `!Option:AutoSwitch` … `!Clear:AutoSwitch`.
    account_list: bool,
    /// The account named by the last `!Account` block outside the list.
    current_name: Option<String>,
    /// The name of the last record of the `!Account` block being read.
    block_name: Option<String>,
    /// The type (`T`) of that record, when it names a transaction section.
    block_kind: Option<AccountKind>,
    dates: DateStyle,
    numbers: NumberStyle,
    /// Security name → symbol, from `!Type:Security`.
    securities: HashMap<String, String>,
    /// The section being read (second pass).
    section: Option<SectionState>,
    statements: Vec<ParsedStatement>,
    warnings: Vec<ParseWarning>,
}

impl<'a> Builder<'a> {
    fn new(pass: Pass) -> Self {
        Self {
            pass,
            mode: Mode::Start,
            record: None,
            account_list: false,
            current_name: None,
            block_name: None,
            block_kind: None,
            dates: DateStyle::default(),
            numbers: NumberStyle::default(),
            securities: HashMap::new(),
            section: None,
            statements: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn run(&mut self, text: &'a str) -> Result<(), ParseError> {
        for (number, raw) in values::lines(text) {
            let line = clean(raw);
            let mut chars = line.chars();
            let Some(code) = chars.next() else {
                continue;
            };
            match code {
                // No field code is `#`: files written by hand or by scripts carry comment lines.
                '#' => continue,
                '!' => self.header(line, number)?,
                '^' => self.end_record()?,
                _ if self.mode == Mode::Start => {
                    self.implicit_section(
                        AccountKind::Checking,
                        number,
                        "records before any !Type header are read as !Type:Bank",
                    );
                    self.push_field(code, chars.as_str(), number);
                }
                // Records after an `!Account` block without a `!Type:` header: the block's
                // own type (`TBank`, `TCCard`, …) tells the section.
                'D' if self.mode == Mode::Accounts && self.record.is_none() => {
                    let kind = self.block_kind.unwrap_or(AccountKind::Checking);
                    self.current_name = self.block_name.clone().or(self.current_name.take());
                    self.implicit_section(
                        kind,
                        number,
                        "records after an !Account block without a !Type header are read in the \
                         block's account type",
                    );
                    self.push_field(code, chars.as_str(), number);
                }
                'D' if self.mode == Mode::Transactions
                    && self.record.as_ref().is_some_and(|r| {
                        r.fields.iter().any(|f| f.code == 'D')
                            && r.fields.last().is_none_or(|f| f.code != 'S')
                    }) =>
                {
                    // A second date: the `^` between two records is missing.
                    self.warn(
                        number,
                        "a second date without a ^ before it starts a new record".to_owned(),
                    );
                    self.end_record()?;
                    self.record = Some(Record {
                        line: number,
                        fields: vec![Field {
                            code,
                            value: chars.as_str().trim(),
                            line: number,
                        }],
                    });
                }
                _ => self.push_field(code, chars.as_str(), number),
            }
        }
        // A missing final `^` ends the last record anyway.
        self.end_record()?;
        self.end_section()
    }

    /// Adds one `X value` line to the record being read (starting one when none is).
    fn push_field(&mut self, code: char, value: &'a str, line: usize) {
        self.record
            .get_or_insert_with(|| Record {
                line,
                fields: Vec::new(),
            })
            .fields
            .push(Field {
                code,
                value: value.trim(),
                line,
            });
    }

    /// Starts a transaction section no header opened, with a warning saying how it is read.
    fn implicit_section(&mut self, kind: AccountKind, line: usize, message: &str) {
        self.warn(line, message.to_owned());
        if self.pass == Pass::Build {
            self.section = Some(SectionState::new(kind, self.current_name.clone()));
        }
        self.mode = Mode::Transactions;
    }

    fn end_record(&mut self) -> Result<(), ParseError> {
        let Some(record) = self.record.take() else {
            return Ok(());
        };
        match (self.mode, self.pass) {
            (Mode::Transactions, Pass::Scan) => {
                for field in &record.fields {
                    if field.code == 'D' && !field.value.is_empty() {
                        let date = RawDate::scan(field.value).ok_or_else(|| {
                            ParseError::new(
                                field.line,
                                format!("date {:?} is not a date", field.value),
                            )
                        })?;
                        self.dates.observe(date);
                    } else if NUMBER_CODES.contains(&field.code) {
                        self.numbers.observe(field.value);
                    }
                }
            }
            (Mode::Transactions, Pass::Build) => {
                let reader = Reader {
                    dates: self.dates,
                    numbers: self.numbers,
                    securities: &self.securities,
                };
                if let Some(section) = self.section.as_mut() {
                    section.push(&reader, &record, &mut self.warnings)?;
                }
            }
            (Mode::Accounts, _) => {
                if let Some(name) = value_of(&record, 'N') {
                    if !self.account_list {
                        self.current_name = Some(name.to_owned());
                    }
                    self.block_name = Some(name.to_owned());
                    self.block_kind = value_of(&record, 'T').and_then(section_kind);
                }
            }
            (Mode::Securities, Pass::Scan) => {
                if let (Some(name), Some(symbol)) = (value_of(&record, 'N'), value_of(&record, 'S'))
                {
                    self.securities.insert(name.to_owned(), symbol.to_owned());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn end_section(&mut self) -> Result<(), ParseError> {
        if let Some(section) = self.section.take()
            && let Some(statement) = section.finish()?
        {
            self.statements.push(statement);
        }
        Ok(())
    }

    fn warn(&mut self, line: usize, message: String) {
        if self.pass == Pass::Build {
            self.warnings.push(warning(line, message));
        }
    }

    fn header(&mut self, line: &str, number: usize) -> Result<(), ParseError> {
        self.end_record()?;
        self.end_section()?;
        let lower = line.to_ascii_lowercase();
        if let Some(name) = lower.strip_prefix("!type:") {
            let name = name.trim();
            if let Some(kind) = section_kind(name) {
                // An `!Account` block right before a section names it, even when the file
                // never cleared its AutoSwitch list.
                if self.mode == Mode::Accounts && self.block_name.is_some() {
                    self.current_name = self.block_name.clone();
                }
                if self.pass == Pass::Build {
                    self.section = Some(SectionState::new(kind, self.current_name.clone()));
                }
                self.mode = Mode::Transactions;
            } else if name == "security" {
                self.mode = Mode::Securities;
            } else {
                if !SKIPPED_LISTS.contains(&name) {
                    self.warn(
                        number,
                        format!("unknown section {line:?}: its records are skipped"),
                    );
                }
                self.mode = Mode::Skipped;
            }
        } else if lower.trim_end() == "!account" {
            if self.mode != Mode::Accounts {
                self.block_name = None;
                self.block_kind = None;
            }
            self.mode = Mode::Accounts;
        } else if lower.starts_with("!option:autoswitch") {
            self.account_list = true;
            self.mode = Mode::Skipped;
        } else if lower.starts_with("!clear:autoswitch") {
            self.account_list = false;
            self.mode = Mode::Skipped;
        } else {
            if !lower.starts_with("!option:") && !lower.starts_with("!clear:") {
                self.warn(
                    number,
                    format!("unknown header {line:?}: what follows it is skipped"),
                );
            }
            self.mode = Mode::Skipped;
        }
        Ok(())
    }
}

fn value_of<'a>(record: &Record<'a>, code: char) -> Option<&'a str> {
    record
        .fields
        .iter()
        .find(|f| f.code == code && !f.value.is_empty())
        .map(|f| f.value)
}

fn warning(line: usize, message: impl Into<String>) -> ParseWarning {
    ParseWarning {
        item: format!("line {line}"),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Step 3: records into entries

/// One part of a split record.
#[derive(Debug, Default)]
struct Split<'a> {
    category: &'a str,
    memo: &'a str,
    amount: Option<Decimal>,
}

/// What a record says, values read.
#[derive(Debug, Default)]
struct Fields<'a> {
    date: Option<NaiveDate>,
    total: Option<Decimal>,
    alternative: Option<Decimal>,
    payee: Option<&'a str>,
    memo: Option<&'a str>,
    number: Option<&'a str>,
    cleared: Option<(&'a str, usize)>,
    category: Option<&'a str>,
    splits: Vec<Split<'a>>,
    security: Option<&'a str>,
    price: Option<Decimal>,
    quantity: Option<(&'a str, usize)>,
    commission: Option<Decimal>,
}

struct Reader<'s> {
    dates: DateStyle,
    numbers: NumberStyle,
    securities: &'s HashMap<String, String>,
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

fn overflow(line: usize) -> ParseError {
    ParseError::new(line, "the amounts are too large to add up")
}

impl Reader<'_> {
    fn amount(&self, field: &Field<'_>) -> Result<Option<Decimal>, ParseError> {
        if field.value.is_empty() {
            return Ok(None);
        }
        self.numbers.amount(field.value).map(Some).ok_or_else(|| {
            ParseError::new(
                field.line,
                format!("amount {:?} is not a number", field.value),
            )
        })
    }

    fn date(&self, field: &Field<'_>) -> Result<NaiveDate, ParseError> {
        let order = if self.dates.day_first() {
            "day/month"
        } else {
            "month/day"
        };
        RawDate::scan(field.value)
            .and_then(|raw| self.dates.resolve(raw))
            .ok_or_else(|| {
                ParseError::new(
                    field.line,
                    format!(
                        "date {:?} does not exist in the file's {order} order",
                        field.value
                    ),
                )
            })
    }

    fn fields<'a>(&self, record: &Record<'a>, invest: bool) -> Result<Fields<'a>, ParseError> {
        let mut out = Fields::default();
        let mut previous = None;
        for field in &record.fields {
            let value = field.value;
            let after_split = previous == Some('S');
            previous = Some(field.code);
            match field.code {
                // A date right after a split's category is that split's own date (Quicken
                // writes one for a part paid on another day): the record keeps its own.
                'D' if after_split => {}
                'D' if !value.is_empty() => {
                    out.date.get_or_insert(self.date(field)?);
                }
                'T' => out.total = out.total.or(self.amount(field)?),
                'U' => out.alternative = out.alternative.or(self.amount(field)?),
                'P' => out.payee = out.payee.or(non_empty(value)),
                'M' => out.memo = out.memo.or(non_empty(value)),
                'N' => out.number = out.number.or(non_empty(value)),
                'C' => out.cleared = Some((value, field.line)),
                'L' => out.category = out.category.or(non_empty(value)),
                'Y' => out.security = out.security.or(non_empty(value)),
                'I' => out.price = out.price.or(self.amount(field)?),
                'Q' => out.quantity = non_empty(value).map(|v| (v, field.line)),
                'O' => out.commission = out.commission.or(self.amount(field)?),
                'S' if !invest => out.splits.push(Split {
                    category: value,
                    ..Split::default()
                }),
                'E' if !invest => match out.splits.last_mut() {
                    Some(split) if split.memo.is_empty() && split.amount.is_none() => {
                        split.memo = value;
                    }
                    _ => out.splits.push(Split {
                        memo: value,
                        ..Split::default()
                    }),
                },
                '$' | '£' if !invest => {
                    let amount = self.amount(field)?;
                    match out.splits.last_mut() {
                        Some(split) if split.amount.is_none() => split.amount = amount,
                        _ => out.splits.push(Split {
                            amount,
                            ..Split::default()
                        }),
                    }
                }
                _ => {}
            }
        }
        out.splits.retain(|s| {
            !(s.category.is_empty() && s.memo.is_empty() && s.amount.unwrap_or_default().is_zero())
        });
        Ok(out)
    }

    fn investment_entry(
        &self,
        record: &Record<'_>,
        date: NaiveDate,
        fields: &Fields<'_>,
        holdings: &mut Holdings,
        warnings: &mut Vec<ParseWarning>,
    ) -> Result<ParsedEntry, ParseError> {
        let action_text = fields.number.unwrap_or("");
        let action = Action::of(action_text);
        if action == Action::Unknown && !action_text.is_empty() {
            warnings.push(warning(
                record.line,
                format!("unknown investment action {action_text:?}: its amount is kept as written"),
            ));
        }
        let security = fields.security.map(|name| {
            self.securities
                .get(name)
                .cloned()
                .unwrap_or_else(|| name.to_owned())
        });
        let (quantity, ratio) = match fields.quantity {
            Some((text, line)) if action == Action::Split => (None, Some(split_ratio(text, line)?)),
            Some((text, line)) => {
                let q = self.numbers.amount(text).ok_or_else(|| {
                    ParseError::new(line, format!("quantity {text:?} is not a number"))
                })?;
                (Some(q), None)
            }
            None => (None, None),
        };
        let signed_quantity = quantity.map(|q| match action.units() {
            Units::Add => q.abs(),
            Units::Remove => -q.abs(),
            Units::None => q,
        });
        let line = record.line;
        let written = fields.total.or(fields.alternative);
        let gross = match written {
            Some(total) => total,
            None => match (quantity, fields.price) {
                (Some(q), Some(p)) if action.units() != Units::None => {
                    let value = q.abs().checked_mul(p.abs()).ok_or_else(|| overflow(line))?;
                    let commission = fields.commission.unwrap_or_default().abs();
                    if action.units() == Units::Add {
                        value.checked_add(commission)
                    } else {
                        value.checked_sub(commission)
                    }
                    .ok_or_else(|| overflow(line))?
                }
                _ => Decimal::ZERO,
            },
        };
        let amount = match action.cash() {
            Cash::In => gross.abs(),
            Cash::Out => -gross.abs(),
            Cash::Zero => Decimal::ZERO,
            Cash::AsWritten => gross,
        };
        if let Some(security) = &security {
            holdings.apply(security, signed_quantity, ratio, fields.price, line)?;
        }
        Ok(ParsedEntry {
            reference: None,
            date,
            value_date: None,
            amount,
            currency: None,
            status: super::model::EntryStatus::Booked,
            counterparty: fields.payee.map(str::to_owned),
            text: fields.memo.map(str::to_owned),
            code: non_empty(action_text).map(str::to_uppercase),
            kind: action.kind(),
            security,
            quantity: signed_quantity,
            unit_price: fields.price,
            commission: fields.commission,
            line,
        })
    }
}

/// Cleared statuses Quicken, MS Money and GnuCash write.
const CLEARED: [&str; 8] = ["", "*", "c", "C", "x", "X", "R", "r"];

fn check_cleared(fields: &Fields<'_>, warnings: &mut Vec<ParseWarning>) {
    if let Some((status, line)) = fields.cleared
        && !CLEARED.contains(&status)
    {
        warnings.push(warning(
            line,
            format!("unknown cleared status {status:?}: the entry is read as booked"),
        ));
    }
}

/// The amount of a bank-like record: `T`, else `U`, else the sum of its splits.
fn bank_amount(fields: &Fields<'_>, line: usize) -> Result<Decimal, ParseError> {
    if let Some(amount) = fields.total.or(fields.alternative) {
        return Ok(amount);
    }
    if fields.splits.iter().any(|s| s.amount.is_some()) {
        return split_sum(&fields.splits, line);
    }
    Err(ParseError::new(line, "a record without an amount (T)"))
}

fn split_sum(splits: &[Split<'_>], line: usize) -> Result<Decimal, ParseError> {
    splits.iter().try_fold(Decimal::ZERO, |sum, s| {
        sum.checked_add(s.amount.unwrap_or_default())
            .ok_or_else(|| overflow(line))
    })
}

fn bank_entry(
    record: &Record<'_>,
    date: NaiveDate,
    fields: &Fields<'_>,
    warnings: &mut Vec<ParseWarning>,
) -> Result<ParsedEntry, ParseError> {
    let amount = bank_amount(fields, record.line)?;
    let mut text = fields.memo.map(str::to_owned);
    if !fields.splits.is_empty() {
        let sum = split_sum(&fields.splits, record.line)?;
        if sum != amount {
            warnings.push(warning(
                record.line,
                format!("the splits add up to {sum}, the record's total is {amount}"),
            ));
        }
        let parts: Vec<String> = fields
            .splits
            .iter()
            .map(|s| {
                let mut part = s.category.to_owned();
                if let Some(amount) = s.amount {
                    if !part.is_empty() {
                        part.push(' ');
                    }
                    part.push_str(&amount.to_string());
                }
                if !s.memo.is_empty() {
                    if !part.is_empty() {
                        part.push(' ');
                    }
                    part.push_str(s.memo);
                }
                part
            })
            .collect();
        let parts = format!("split: {}", parts.join("; "));
        text = Some(match text {
            Some(memo) => format!("{memo} ({parts})"),
            None => parts,
        });
    }
    let transfer = fields.category.is_some_and(|c| c.starts_with('['))
        || fields.splits.iter().all(|s| s.category.starts_with('[')) && !fields.splits.is_empty();
    Ok(ParsedEntry {
        reference: None,
        date,
        value_date: None,
        amount,
        currency: None,
        status: super::model::EntryStatus::Booked,
        counterparty: fields.payee.map(str::to_owned),
        text,
        code: fields.number.map(str::to_owned),
        kind: if transfer {
            EntryKind::Transfer
        } else {
            EntryKind::Other
        },
        security: None,
        quantity: None,
        unit_price: None,
        commission: None,
        line: record.line,
    })
}

/// The statement of the section being read.
#[derive(Debug)]
struct SectionState {
    kind: AccountKind,
    name: Option<String>,
    records: usize,
    opening: Option<ParsedBalance>,
    entries: Vec<ParsedEntry>,
    holdings: Holdings,
}

impl SectionState {
    fn new(kind: AccountKind, name: Option<String>) -> Self {
        Self {
            kind,
            name,
            records: 0,
            opening: None,
            entries: Vec::new(),
            holdings: Holdings::default(),
        }
    }

    fn push(
        &mut self,
        reader: &Reader<'_>,
        record: &Record<'_>,
        warnings: &mut Vec<ParseWarning>,
    ) -> Result<(), ParseError> {
        let invest = self.kind == AccountKind::Investment;
        let first = self.records == 0;
        self.records += 1;
        let fields = reader.fields(record, invest)?;
        check_cleared(&fields, warnings);
        let Some(date) = fields.date else {
            return Err(ParseError::new(record.line, "a record without a date (D)"));
        };
        if first
            && !invest
            && fields
                .payee
                .is_some_and(|p| p.eq_ignore_ascii_case("opening balance"))
        {
            // The record is the account's first transaction, as Quicken's register, GnuCash
            // and other readers show it; before it the account held nothing.
            self.opening = Some(ParsedBalance {
                amount: Decimal::ZERO,
                date: date.pred_opt().unwrap_or(date),
                currency: None,
            });
            if self.name.is_none() {
                self.name = fields
                    .category
                    .and_then(|c| c.strip_prefix('['))
                    .and_then(|c| c.strip_suffix(']'))
                    .and_then(|c| non_empty(c.trim()))
                    .map(str::to_owned);
            }
        }
        let entry = if invest {
            reader.investment_entry(record, date, &fields, &mut self.holdings, warnings)?
        } else {
            bank_entry(record, date, &fields, warnings)?
        };
        self.entries.push(entry);
        Ok(())
    }

    fn finish(self) -> Result<Option<ParsedStatement>, ParseError> {
        if self.entries.is_empty() && self.opening.is_none() {
            return Ok(None);
        }
        let closing = match &self.opening {
            Some(open) => {
                let mut amount = open.amount;
                for entry in &self.entries {
                    amount = amount
                        .checked_add(entry.amount)
                        .ok_or_else(|| overflow(entry.line))?;
                }
                let date = self
                    .entries
                    .iter()
                    .map(|e| e.date)
                    .max()
                    .unwrap_or_else(|| open.date.succ_opt().unwrap_or(open.date));
                Some(ParsedBalance {
                    amount,
                    date,
                    currency: None,
                })
            }
            None => None,
        };
        Ok(Some(ParsedStatement {
            account: ParsedAccount {
                identifier: None,
                name: self.name,
                currency: None,
                kind: Some(self.kind),
            },
            opening: self.opening,
            closing,
            available: None,
            positions: self.holdings.positions(),
            entries: self.entries,
            continues: false,
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Investment actions and positions

/// What an investment action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Buy,
    Sell,
    Income,
    Expense,
    TransferIn,
    TransferOut,
    SharesIn,
    SharesOut,
    Split,
    Cash,
    NoCash,
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cash {
    In,
    Out,
    Zero,
    AsWritten,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Units {
    Add,
    Remove,
    None,
}

impl Action {
    fn of(text: &str) -> Self {
        let lower = text.trim().to_ascii_lowercase();
        let known = |base: &str| -> Option<Self> {
            Some(match base {
                "buy" | "cvrshrt" | "reinvdiv" | "reinvint" | "reinvlg" | "reinvmd" | "reinvsh" => {
                    Self::Buy
                }
                "sell" | "shtsell" => Self::Sell,
                "div" | "intinc" | "cglong" | "cgmid" | "cgshort" | "miscinc" | "rtrncap" => {
                    Self::Income
                }
                "miscexp" | "margint" => Self::Expense,
                "xin" | "contrib" => Self::TransferIn,
                "xout" | "withdrw" => Self::TransferOut,
                "shrsin" => Self::SharesIn,
                "shrsout" => Self::SharesOut,
                "stksplit" => Self::Split,
                "cash" => Self::Cash,
                "reminder" | "grant" | "vest" | "exercise" | "expire" => Self::NoCash,
                _ => return None,
            })
        };
        known(&lower)
            .or_else(|| lower.strip_suffix('x').and_then(known))
            .unwrap_or(Self::Unknown)
    }

    fn cash(self) -> Cash {
        match self {
            Self::Sell | Self::Income | Self::TransferIn => Cash::In,
            Self::Buy | Self::Expense | Self::TransferOut => Cash::Out,
            Self::SharesIn | Self::SharesOut | Self::Split | Self::NoCash => Cash::Zero,
            Self::Cash | Self::Unknown => Cash::AsWritten,
        }
    }

    fn units(self) -> Units {
        match self {
            Self::Buy | Self::SharesIn => Units::Add,
            Self::Sell | Self::SharesOut => Units::Remove,
            _ => Units::None,
        }
    }

    fn kind(self) -> EntryKind {
        match self {
            Self::Buy | Self::Sell => EntryKind::Trade,
            Self::Income => EntryKind::Income,
            Self::Expense => EntryKind::Fee,
            Self::TransferIn | Self::TransferOut | Self::SharesIn | Self::SharesOut => {
                EntryKind::Transfer
            }
            Self::Split | Self::Cash | Self::NoCash | Self::Unknown => EntryKind::Other,
        }
    }
}

/// A stock split's ratio: `2`, `2:1` or `3/2`.
fn split_ratio(text: &str, line: usize) -> Result<Decimal, ParseError> {
    let bad = || ParseError::new(line, format!("split ratio {text:?} is not a ratio"));
    let number = |s: &str| -> Option<Decimal> { s.trim().parse::<Decimal>().ok() };
    let ratio = match text.split_once([':', '/']) {
        Some((new, old)) => {
            let (new, old) = (number(new).ok_or_else(bad)?, number(old).ok_or_else(bad)?);
            new.checked_div(old).ok_or_else(bad)?
        }
        None => number(text).ok_or_else(bad)?,
    };
    if ratio <= Decimal::ZERO {
        return Err(bad());
    }
    Ok(ratio)
}

/// Units per security, in order of first appearance.
#[derive(Debug, Default)]
struct Holdings {
    order: Vec<String>,
    held: HashMap<String, (Decimal, Option<Decimal>)>,
}

impl Holdings {
    fn apply(
        &mut self,
        security: &str,
        quantity: Option<Decimal>,
        ratio: Option<Decimal>,
        price: Option<Decimal>,
        line: usize,
    ) -> Result<(), ParseError> {
        let (units, last_price) = match self.held.get_mut(security) {
            Some(held) => held,
            None => {
                self.order.push(security.to_owned());
                self.held
                    .entry(security.to_owned())
                    .or_insert((Decimal::ZERO, None))
            }
        };
        if let Some(q) = quantity {
            *units = units.checked_add(q).ok_or_else(|| overflow(line))?;
        }
        if let Some(r) = ratio {
            *units = units.checked_mul(r).ok_or_else(|| overflow(line))?;
        }
        if let Some(p) = price.filter(|p| !p.is_zero()) {
            *last_price = Some(p.abs());
        }
        Ok(())
    }

    fn positions(&self) -> Vec<ParsedPosition> {
        self.order
            .iter()
            .filter_map(|security| {
                let (units, price) = self.held.get(security)?;
                if units.is_zero() {
                    return None;
                }
                Some(ParsedPosition {
                    security: security.clone(),
                    quantity: units.normalize(),
                    unit_price: *price,
                    market_value: price
                        .and_then(|p| units.checked_mul(p))
                        .map(|v| v.round_dp(2)),
                    cost_basis: None,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
