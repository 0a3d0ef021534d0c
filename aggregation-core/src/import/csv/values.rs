//! Cell values: amounts in every local notation, and dates whose order is decided over the
//! whole file.

use chrono::NaiveDate;
use chrono::format::{self, Item, Parsed, StrftimeItems};
use rust_decimal::Decimal;
use std::str::FromStr;

/// Strips Excel's formula protection `="…"` and surrounding blanks from a cell.
pub(super) fn clean(cell: &str) -> &str {
    let cell = cell.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if let Some(inner) = cell
        .strip_prefix("=\"")
        .and_then(|rest| rest.strip_suffix('"'))
    {
        return inner.trim();
    }
    cell
}

/// Characters that separate digit groups besides `.` and `,`: spaces (also no-break and thin
/// spaces) and the Swiss apostrophe.
fn is_group_space(c: char) -> bool {
    matches!(
        c,
        ' ' | '\u{a0}' | '\u{202f}' | '\u{2009}' | '\'' | '\u{2019}'
    )
}

/// An amount cell reduced to its sign and its digits with their separators, or `None` when it
/// holds no digit or something that is not part of an amount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RawAmount {
    /// True when the cell says the amount is negative (`-`, trailing `-`, `(…)`, `DR`).
    pub(super) negative: bool,
    /// Digits, `.`, `,` and group spaces, in order.
    pub(super) body: String,
}

/// Reads the sign conventions of an amount cell: a leading or trailing `-`/`+`, the Unicode
/// minus, accounting parentheses, a `CR`/`DR` suffix, and currency symbols or codes before or
/// after the number.
pub(super) fn raw_amount(cell: &str) -> Option<RawAmount> {
    let cell = clean(cell);
    let mut text: String = cell
        .chars()
        .map(|c| if c == '\u{2212}' { '-' } else { c })
        .collect();
    let mut negative = false;
    let mut signs = 0;
    let upper = text.to_ascii_uppercase();
    let trimmed_upper = upper.trim_end();
    if trimmed_upper.ends_with("DR") || trimmed_upper.ends_with("CR") {
        let before = trimmed_upper[..trimmed_upper.len() - 2].trim_end();
        if before.ends_with(|c: char| c.is_ascii_digit()) {
            if trimmed_upper.ends_with("DR") {
                negative = true;
                signs += 1;
            }
            text.truncate(before.len());
        }
    }
    // Currency symbols and codes around the number go; letters inside it are an error.
    let is_noise = |c: char| {
        c.is_alphabetic() || matches!(c, '€' | '$' | '£' | '¥' | '₹' | '₩' | '₽' | '₺' | '¤')
    };
    let full = text.as_str();
    let text = full.trim_matches(|c: char| is_noise(c) || c.is_whitespace());
    // A currency code is at most three letters (`EUR`, `kr`, `CHF`); more is not an amount.
    let start = full.len()
        - full
            .trim_start_matches(|c: char| is_noise(c) || c.is_whitespace())
            .len();
    let prefix_letters = full[..start].chars().filter(|c| c.is_alphabetic()).count();
    let suffix_letters = full[start + text.len()..]
        .chars()
        .filter(|c| c.is_alphabetic())
        .count();
    if prefix_letters > 3 || suffix_letters > 3 {
        return None;
    }
    let mut body = String::new();
    let mut open = false;
    let mut closed = false;
    let mut seen_digit = false;
    let mut after_number = false;
    for c in text.chars() {
        match c {
            '0'..='9' => {
                if after_number || closed {
                    return None;
                }
                seen_digit = true;
                body.push(c);
            }
            '.' | ',' => {
                if after_number || closed {
                    return None;
                }
                body.push(c);
            }
            c if is_group_space(c) => {
                if seen_digit && !after_number {
                    body.push(' ');
                }
            }
            '-' | '+' => {
                if seen_digit {
                    after_number = true;
                }
                signs += 1;
                if c == '-' {
                    negative = !negative;
                }
            }
            '(' if !seen_digit && !open => open = true,
            ')' if open && seen_digit && !closed => {
                closed = true;
                negative = !negative;
                signs += 1;
            }
            c if is_noise(c) && !seen_digit => {}
            c if is_noise(c) && (after_number || closed) => {}
            _ => return None,
        }
    }
    if !seen_digit || (open && !closed) || signs > 1 {
        return None;
    }
    let body = body.trim_end().to_owned();
    Some(RawAmount { negative, body })
}

/// What an amount cell tells about the decimal separator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DecimalHint {
    /// The cell reads only with `.` as the decimal separator.
    Dot,
    /// The cell reads only with `,` as the decimal separator.
    Comma,
    /// Either (or no separator at all).
    Either,
}

/// The decimal separator a cell's body implies.
pub(super) fn decimal_hint(body: &str) -> DecimalHint {
    let last_dot = body.rfind('.');
    let last_comma = body.rfind(',');
    match (last_dot, last_comma) {
        (Some(d), Some(c)) => {
            if d > c {
                DecimalHint::Dot
            } else {
                DecimalHint::Comma
            }
        }
        (Some(d), None) => {
            single_separator_hint(body, '.', d, DecimalHint::Dot, DecimalHint::Comma)
        }
        (None, Some(c)) => {
            single_separator_hint(body, ',', c, DecimalHint::Comma, DecimalHint::Dot)
        }
        (None, None) => {
            if body.contains(' ') {
                // `1 234` groups digits: any decimal separator is fine.
                DecimalHint::Either
            } else {
                DecimalHint::Either
            }
        }
    }
}

fn single_separator_hint(
    body: &str,
    sep: char,
    last: usize,
    as_decimal: DecimalHint,
    as_group: DecimalHint,
) -> DecimalHint {
    if body.matches(sep).count() > 1 {
        return as_group;
    }
    let digits_after = body[last + 1..]
        .chars()
        .filter(char::is_ascii_digit)
        .count();
    if digits_after == 3 && body[..last].chars().any(|c| c.is_ascii_digit()) {
        DecimalHint::Either
    } else {
        as_decimal
    }
}

/// Turns a body into a decimal with `decimal` as the decimal separator and `thousands` (if
/// any) as an extra group separator. Group separators must not follow the decimal separator.
pub(super) fn to_decimal(
    raw: &RawAmount,
    decimal: char,
    thousands: Option<char>,
) -> Option<Decimal> {
    let mut number = String::with_capacity(raw.body.len() + 1);
    if raw.negative {
        number.push('-');
    }
    let mut seen_decimal = false;
    for c in raw.body.chars() {
        if c == decimal && Some(c) != thousands {
            if seen_decimal {
                return None;
            }
            seen_decimal = true;
            number.push('.');
        } else if c.is_ascii_digit() {
            number.push(c);
        } else if c == ' ' || Some(c) == thousands || c == '.' || c == ',' {
            if seen_decimal {
                return None;
            }
        } else {
            return None;
        }
    }
    if !groups_are_valid(&raw.body, decimal, thousands) {
        return None;
    }
    if number.ends_with('.') {
        number.pop();
    }
    if number.starts_with("-.") || number.starts_with('.') {
        number = number.replacen('.', "0.", 1);
    }
    Decimal::from_str(&number).ok()
}

/// Digit groups before the decimal separator: the first of 1 to 3 digits, the last of 3, any
/// between of 2 or 3 (Indian lakh grouping writes `1,23,456.00`).
fn groups_are_valid(body: &str, decimal: char, thousands: Option<char>) -> bool {
    let integer = match body.find(|c: char| c == decimal && Some(c) != thousands) {
        Some(at) => &body[..at],
        None => body,
    };
    let groups: Vec<&str> = integer.split(|c: char| !c.is_ascii_digit()).collect();
    if groups.len() < 2 {
        return true;
    }
    let last = groups.len() - 1;
    groups.iter().enumerate().all(|(i, group)| match i {
        0 => (1..=3).contains(&group.len()),
        i if i == last => group.len() == 3,
        _ => (2..=3).contains(&group.len()),
    })
}

/// The parts of a date cell before the order of day and month is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DateParts {
    /// Year first (`2024-03-01`, `20240301`): no doubt.
    Exact(NaiveDate),
    /// Two numbers and a year: `a` and `b` are day and month in an order to decide.
    Pair {
        /// The first number.
        a: u32,
        /// The second number.
        b: u32,
        /// The four-digit year.
        year: i32,
        /// True when written with dots (`01.03.2024`), which is always day first.
        dotted: bool,
    },
}

fn month_from_name(name: &str) -> Option<u32> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let prefix: String = name.chars().take(3).collect();
    let months = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    if name.chars().count() < 3 {
        return None;
    }
    months
        .iter()
        .position(|m| *m == prefix)
        .and_then(|p| u32::try_from(p + 1).ok())
}

fn year_of(digits: &str) -> Option<i32> {
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let value: i32 = digits.parse().ok()?;
    match digits.len() {
        4 => Some(value),
        2 => Some(if value < 70 {
            2000 + value
        } else {
            1900 + value
        }),
        _ => None,
    }
}

fn small_number(digits: &str) -> Option<u32> {
    if digits.is_empty() || digits.len() > 2 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Reads the shape of a date cell: `YYYY-MM-DD` (also with `/` or `.`), `YYYYMMDD`,
/// `D.M.YYYY`, `D/M/YY`, `D-M-YYYY` (order decided later), `2 Jan 2024`, `02-Jan-24`,
/// `Jan 2, 2024`; a time after the date is ignored. `None` when the cell is not a date.
pub(super) fn date_parts(cell: &str) -> Option<DateParts> {
    let cell = clean(cell);
    if cell.is_empty() || cell.len() > 40 {
        return None;
    }
    if cell.bytes().any(|b| b.is_ascii_alphabetic() && b != b'T')
        && let Some(date) = named_month_date(cell)
    {
        return Some(DateParts::Exact(date));
    }
    let token = cell.split_whitespace().next()?;
    // ISO timestamps: `2024-03-01T10:00:00`.
    let token = match token.find('T') {
        Some(t) if t == 10 => &token[..t],
        _ => token,
    };
    if token.len() == 8 && token.chars().all(|c| c.is_ascii_digit()) {
        let year: i32 = token[..4].parse().ok()?;
        let month: u32 = token[4..6].parse().ok()?;
        let day: u32 = token[6..].parse().ok()?;
        if !(1900..=2200).contains(&year) {
            return None;
        }
        return NaiveDate::from_ymd_opt(year, month, day).map(DateParts::Exact);
    }
    let sep = token.chars().find(|c| matches!(c, '.' | '/' | '-'))?;
    let parts: Vec<&str> = token.trim_end_matches('.').split(sep).collect();
    if parts.len() != 3 {
        return None;
    }
    if parts[0].len() == 4 {
        let year = year_of(parts[0])?;
        let month = small_number(parts[1])?;
        let day = small_number(parts[2])?;
        return NaiveDate::from_ymd_opt(year, month, day).map(DateParts::Exact);
    }
    let a = small_number(parts[0])?;
    let b = small_number(parts[1])?;
    let year = year_of(parts[2])?;
    if a == 0 || b == 0 || a > 31 || b > 31 || (a > 12 && b > 12) {
        return None;
    }
    Some(DateParts::Pair {
        a,
        b,
        year,
        dotted: sep == '.',
    })
}

fn named_month_date(cell: &str) -> Option<NaiveDate> {
    let tokens: Vec<&str> = cell
        .split(|c: char| c.is_whitespace() || c == '-' || c == ',')
        .filter(|t| !t.is_empty())
        .take(4)
        .collect();
    if tokens.len() < 3 {
        return None;
    }
    // `2 Jan 2024`, `02-Jan-24`
    if let (Some(day), Some(month), Some(year)) = (
        small_number(tokens[0]),
        month_from_name(tokens[1]),
        year_of(tokens[2]),
    ) {
        return NaiveDate::from_ymd_opt(year, month, day);
    }
    // `Jan 2, 2024`
    if let (Some(month), Some(day), Some(year)) = (
        month_from_name(tokens[0]),
        small_number(tokens[1]),
        year_of(tokens[2]),
    ) {
        return NaiveDate::from_ymd_opt(year, month, day);
    }
    None
}

/// The order of day and month in the file's dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DateOrder {
    /// Day first (`31.01.2024`, `31/01/2024`).
    DayFirst,
    /// Month first (`01/31/2024`).
    MonthFirst,
}

/// What the dates of a column seen so far say about their order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct OrderEvidence {
    /// A first number above 12 was seen: day first.
    pub(super) day_first: bool,
    /// A second number above 12 was seen: month first.
    pub(super) month_first: bool,
    /// A cell with two numbers both at most 12 was seen.
    pub(super) ambiguous: bool,
    /// Every ambiguous cell was written with dots.
    pub(super) undotted: bool,
}

impl OrderEvidence {
    /// Takes one date cell into account.
    pub(super) fn add(&mut self, parts: DateParts) {
        if let DateParts::Pair { a, b, dotted, .. } = parts {
            if a > 12 {
                self.day_first = true;
            } else if b > 12 {
                self.month_first = true;
            } else {
                self.ambiguous = true;
                if !dotted {
                    self.undotted = true;
                }
            }
        }
    }
}

/// The date of `parts` in `order`.
pub(super) fn resolve(parts: DateParts, order: Option<DateOrder>) -> Option<NaiveDate> {
    match parts {
        DateParts::Exact(date) => Some(date),
        DateParts::Pair { a, b, year, dotted } => {
            let order = if dotted {
                Some(DateOrder::DayFirst)
            } else {
                order
            };
            match order? {
                DateOrder::DayFirst => NaiveDate::from_ymd_opt(year, b, a),
                DateOrder::MonthFirst => NaiveDate::from_ymd_opt(year, a, b),
            }
        }
    }
}

/// Turns a mapping's `date_format` into a chrono format: chrono's own (`%d.%m.%Y`) is taken as
/// it is; otherwise `YYYY`, `YY`, `MMM`, `MM`/`M`, `DD`/`D` are the year, month and day and
/// everything else is literal.
pub(super) fn chrono_format(format: &str) -> String {
    if format.contains('%') {
        return format.to_owned();
    }
    let chars: Vec<char> = format.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let mut run = 1;
        while i + run < chars.len() && chars[i + run] == c {
            run += 1;
        }
        match (c.to_ascii_uppercase(), run) {
            ('Y', 4) => out.push_str("%Y"),
            ('Y', 2) => out.push_str("%y"),
            ('M', 3) => out.push_str("%b"),
            ('M', 1 | 2) => out.push_str("%m"),
            ('D', 1 | 2) => out.push_str("%d"),
            _ => {
                for _ in 0..run {
                    out.push(c);
                }
            }
        }
        i += run;
    }
    out
}

/// The longest `date_format` a mapping may give, in characters.
pub(super) const MAX_DATE_FORMAT: usize = 64;

/// A mapping's `date_format`, read once per file into chrono's items.
#[derive(Debug, Clone)]
pub(super) struct DateFormat {
    items: Vec<Item<'static>>,
}

impl DateFormat {
    /// Reads a `date_format` (chrono's `%d.%m.%Y` or `DD.MM.YYYY`-style): at most
    /// [`MAX_DATE_FORMAT`] characters of known chrono specifiers, else the reason it is refused.
    pub(super) fn new(format: &str) -> Result<Self, String> {
        if format.chars().count() > MAX_DATE_FORMAT {
            return Err(format!("is longer than {MAX_DATE_FORMAT} characters"));
        }
        let chrono = chrono_format(format);
        let items = StrftimeItems::new(&chrono)
            .parse_to_owned()
            .map_err(|_| format!("{format:?} holds a specifier chrono does not know"))?;
        Ok(Self { items })
    }

    /// A date read with the format (a time part after the date is ignored).
    pub(super) fn parse(&self, cell: &str) -> Option<NaiveDate> {
        let cell = clean(cell);
        let mut parsed = Parsed::new();
        if format::parse(&mut parsed, cell, self.items.iter()).is_ok() {
            return parsed.to_naive_date().ok();
        }
        // A time after the date: the rest must start with a blank or `T`.
        let mut parsed = Parsed::new();
        let rest = format::parse_and_remainder(&mut parsed, cell, self.items.iter()).ok()?;
        if rest.starts_with(char::is_whitespace) || rest.starts_with('T') {
            parsed.to_naive_date().ok()
        } else {
            None
        }
    }
}
