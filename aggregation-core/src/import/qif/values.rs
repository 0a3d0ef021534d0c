//! Turning QIF's text into values: the file's bytes into lines, dates, and amounts.
//!
//! Dates and amounts are read in two steps, because QIF writes neither the order of day and
//! month nor the decimal separator anywhere: every date and amount of the file is first
//! [scanned](DateStyle::observe) as written, the file's conventions are decided over all of
//! them, and only then is each value read.

use std::borrow::Cow;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::import::codepage;

/// The file as text: a UTF-8 byte-order mark is dropped; valid UTF-8 is read as UTF-8, and
/// every byte that is not part of a valid UTF-8 sequence in the single-byte code page those
/// bytes read best in (Windows-1252, Windows-1250, ISO-8859-2 or DOS 852; see
/// `import::codepage`). Never fails.
pub(super) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    codepage::decode_mixed(bytes)
}

/// The lines of the text with their 1-based numbers: `\r\n`, `\n` and a lone `\r` (old Mac
/// exports) all end a line.
pub(super) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let lone_cr = !text.contains('\n');
    text.split(move |c| c == '\n' || (lone_cr && c == '\r'))
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .enumerate()
        .map(|(i, line)| (i + 1, line))
}

// ---------------------------------------------------------------------------------------------
// Dates

/// A date as written, before the file's day/month order is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RawDate {
    /// Year first (`1999-12-31`, `19991231`): unambiguous.
    Ymd(i32, u32, u32),
    /// A month name (`12 May 2025`, `May 12, 2025`): unambiguous.
    Named(i32, u32, u32),
    /// Two numbers and a year (`12/31'99`, `31.12.1999`): day and month order decided per
    /// file. `dotted` tells the `31.12.1999` spelling.
    Ambiguous {
        /// The first number.
        first: u32,
        /// The second number.
        second: u32,
        /// The full year.
        year: i32,
        /// Written with dots.
        dotted: bool,
    },
}

/// One token of a date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    /// Digits, with their count.
    Num(u32, usize),
    /// Letters.
    Word(&'a str),
    /// The apostrophe of `12/31'99`.
    Apostrophe,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

fn month_named(word: &str) -> Option<u32> {
    let lower = word.to_ascii_lowercase();
    let prefix = lower.get(..3)?;
    let index = MONTHS.iter().position(|m| *m == prefix)?;
    u32::try_from(index + 1).ok()
}

fn tokens(s: &str) -> Option<Vec<Tok<'_>>> {
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let digits = s.get(start..i)?;
            if digits.len() > 8 {
                return None;
            }
            out.push(Tok::Num(digits.parse().ok()?, digits.len()));
        } else if b.is_ascii_alphabetic() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            out.push(Tok::Word(s.get(start..i)?));
        } else {
            match b {
                b'\'' => out.push(Tok::Apostrophe),
                b'/' | b'-' | b'.' | b' ' | b',' | b'\t' => {}
                _ => return None,
            }
            i += 1;
        }
        if out.len() > 5 {
            return None;
        }
    }
    Some(out)
}

/// The full year of a year written after a slash, dash or dot: two digits (or one) below 50
/// are 20xx, from 50 on 19xx; four digits as written.
fn full_year(value: u32, digits: usize) -> Option<i32> {
    let value = i32::try_from(value).ok()?;
    match digits {
        1 | 2 if value < 50 => Some(2000 + value),
        1 | 2 => Some(1900 + value),
        4 => Some(value),
        _ => None,
    }
}

/// The full year of a year written after an apostrophe (`12/31'05`, `8/25'93`): Quicken
/// writes the apostrophe for the years from 2000 on, but other exporters write it for every
/// year, so two digits follow the same window as after a slash (below 50 are 20xx).
fn apostrophe_year(value: u32, digits: usize) -> Option<i32> {
    full_year(value, digits)
}

impl RawDate {
    /// Reads a date as written, or `None` when it is no date spelling this parser knows.
    pub(super) fn scan(s: &str) -> Option<Self> {
        let s = s.trim();
        let toks = tokens(s)?;
        match toks.as_slice() {
            [Tok::Num(v, 8)] => Some(Self::Ymd(
                i32::try_from(v / 10_000).ok()?,
                (v / 100) % 100,
                v % 100,
            )),
            [Tok::Num(y, 4), Tok::Num(m, _), Tok::Num(d, _)] => {
                Some(Self::Ymd(i32::try_from(*y).ok()?, *m, *d))
            }
            [Tok::Num(a, _), Tok::Num(b, _), Tok::Num(y, n)] => Some(Self::Ambiguous {
                first: *a,
                second: *b,
                year: full_year(*y, *n)?,
                dotted: s.contains('.'),
            }),
            [
                Tok::Num(a, _),
                Tok::Num(b, _),
                Tok::Apostrophe,
                Tok::Num(y, n),
            ] => Some(Self::Ambiguous {
                first: *a,
                second: *b,
                year: apostrophe_year(*y, *n)?,
                dotted: s.contains('.'),
            }),
            [Tok::Num(d, _), Tok::Word(m), Tok::Num(y, n)] => {
                Some(Self::Named(full_year(*y, *n)?, month_named(m)?, *d))
            }
            [
                Tok::Num(d, _),
                Tok::Word(m),
                Tok::Apostrophe,
                Tok::Num(y, n),
            ] => Some(Self::Named(apostrophe_year(*y, *n)?, month_named(m)?, *d)),
            [Tok::Word(m), Tok::Num(d, _), Tok::Num(y, n)] => {
                Some(Self::Named(full_year(*y, *n)?, month_named(m)?, *d))
            }
            _ => None,
        }
    }
}

/// The order of day and month of a file's ambiguous dates, decided over all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DateStyle {
    /// A first number above 12 was seen: day first.
    first_above_12: bool,
    /// A second number above 12 was seen: month first.
    second_above_12: bool,
    /// A date with dots was seen (`31.12.1999`): day first when nothing else decides.
    dotted: bool,
}

impl DateStyle {
    /// Takes one date of the file into account.
    pub(super) fn observe(&mut self, date: RawDate) {
        if let RawDate::Ambiguous {
            first,
            second,
            dotted,
            ..
        } = date
        {
            self.first_above_12 |= first > 12;
            self.second_above_12 |= second > 12;
            self.dotted |= dotted;
        }
    }

    /// Whether the file writes the day first: a first number above 12 anywhere decides it;
    /// else a second number above 12 means month first; else dotted dates are day first
    /// (European) and the others month first (Quicken's US order).
    pub(super) fn day_first(self) -> bool {
        if self.first_above_12 {
            true
        } else if self.second_above_12 {
            false
        } else {
            self.dotted
        }
    }

    /// The calendar date, or `None` when it does not exist (`2/30/2024`, month 13).
    pub(super) fn resolve(self, date: RawDate) -> Option<NaiveDate> {
        let (y, m, d) = match date {
            RawDate::Ymd(y, m, d) | RawDate::Named(y, m, d) => (y, m, d),
            RawDate::Ambiguous {
                first,
                second,
                year,
                ..
            } => {
                if self.day_first() {
                    (year, second, first)
                } else {
                    (year, first, second)
                }
            }
        };
        NaiveDate::from_ymd_opt(y, m, d)
    }
}

// ---------------------------------------------------------------------------------------------
// Amounts

/// The decimal separator of a file's amounts, decided over all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct NumberStyle {
    /// An amount can only be read with a decimal point (`1,234.56`, `12.5`).
    point: bool,
    /// An amount can only be read with a decimal comma (`1.234,56`, `12,5`).
    comma: bool,
}

/// Drops the grouping characters that are never a decimal separator: spaces, no-break spaces
/// and the Swiss apostrophe.
fn without_spaces(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | '\u{a0}' | '\u{202f}' | '\'' | '\t'))
        .collect()
}

/// Drops the `=` some exporters write before a split's amount (`$=746.36`).
fn without_equals(s: &str) -> &str {
    let s = s.trim_start();
    s.strip_prefix('=').unwrap_or(s)
}

impl NumberStyle {
    /// Takes one amount of the file into account.
    pub(super) fn observe(&mut self, s: &str) {
        let s = without_spaces(without_equals(s));
        let last_dot = s.rfind('.');
        let last_comma = s.rfind(',');
        match (last_dot, last_comma) {
            (Some(d), Some(c)) => {
                if d > c {
                    self.point = true;
                } else {
                    self.comma = true;
                }
            }
            (Some(d), None) => {
                let decimals = s.len() - d - 1;
                if s.matches('.').count() > 1 {
                    self.comma = true;
                } else if decimals != 3 {
                    self.point = true;
                }
            }
            (None, Some(c)) => {
                let decimals = s.len() - c - 1;
                if s.matches(',').count() > 1 {
                    self.point = true;
                } else if decimals != 3 {
                    self.comma = true;
                }
            }
            (None, None) => {}
        }
    }

    /// Whether the file's decimal separator is the comma: only when some amount needs it and
    /// none needs the point. An undecided file (`1,000` only) uses the point.
    pub(super) fn decimal_comma(self) -> bool {
        self.comma && !self.point
    }

    /// Reads an amount with the file's separators: the other separator, spaces and
    /// apostrophes group thousands; a leading `+`, `-` or the doubled `--` of some exporters
    /// (read as one minus) sign it. `None` when it is not a number.
    pub(super) fn amount(self, s: &str) -> Option<Decimal> {
        let s = without_spaces(without_equals(s));
        let (negative, digits) = if let Some(rest) = s.strip_prefix("--") {
            (true, rest)
        } else if let Some(rest) = s.strip_prefix('-') {
            (true, rest)
        } else if let Some(rest) = s.strip_prefix('+') {
            (false, rest)
        } else {
            (false, s.as_str())
        };
        let (decimal, group) = if self.decimal_comma() {
            (',', '.')
        } else {
            ('.', ',')
        };
        let mut plain = String::with_capacity(digits.len() + 1);
        if negative {
            plain.push('-');
        }
        let mut seen_decimal = false;
        let mut seen_digit = false;
        for c in digits.chars() {
            if c.is_ascii_digit() {
                seen_digit = true;
                plain.push(c);
            } else if c == decimal && !seen_decimal {
                seen_decimal = true;
                plain.push('.');
            } else if c == group && !seen_decimal && seen_digit {
                // a thousands separator
            } else {
                return None;
            }
        }
        if !seen_digit {
            return None;
        }
        plain.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(style: DateStyle, s: &str) -> Option<NaiveDate> {
        style.resolve(RawDate::scan(s)?)
    }

    fn ymd(y: i32, m: u32, d: u32) -> Option<NaiveDate> {
        NaiveDate::from_ymd_opt(y, m, d)
    }

    #[test]
    fn every_spelling_of_a_date() {
        let us = DateStyle::default();
        assert_eq!(date(us, "12/31'99"), ymd(1999, 12, 31));
        assert_eq!(date(us, "8/25'93"), ymd(1993, 8, 25));
        assert_eq!(date(us, "12/31'05"), ymd(2005, 12, 31));
        assert_eq!(date(us, "1/ 2' 8"), ymd(2008, 1, 2));
        assert_eq!(date(us, "12/31/99"), ymd(1999, 12, 31));
        assert_eq!(date(us, "12/31/49"), ymd(2049, 12, 31));
        assert_eq!(date(us, "12/31/1999"), ymd(1999, 12, 31));
        assert_eq!(date(us, "1999-12-31"), ymd(1999, 12, 31));
        assert_eq!(date(us, "1/ 2/99"), ymd(1999, 1, 2));
        assert_eq!(date(us, "12-31-99"), ymd(1999, 12, 31));
        assert_eq!(date(us, "19991231"), ymd(1999, 12, 31));
        assert_eq!(date(us, "12 May 2025"), ymd(2025, 5, 12));
        assert_eq!(date(us, "May 12, 2025"), ymd(2025, 5, 12));
        assert_eq!(
            date(us, "28.02'2009"),
            None,
            "day first is not decided here"
        );
        let mut dots = DateStyle::default();
        dots.observe(RawDate::Ambiguous {
            first: 1,
            second: 2,
            year: 1999,
            dotted: true,
        });
        assert_eq!(date(dots, "31.12.1999"), ymd(1999, 12, 31));
        assert_eq!(date(dots, "28.02'2009"), ymd(2009, 2, 28));
        assert_eq!(date(us, "2/30/2024"), None);
        assert_eq!(RawDate::scan("yesterday"), None);
        assert_eq!(RawDate::scan("1/2/345"), None);
        assert_eq!(RawDate::scan(""), None);
    }

    #[test]
    fn day_first_decided_by_any_first_number_above_12() {
        let mut style = DateStyle::default();
        for s in ["01/02/2020", "13/02/2020", "05/06/2020"] {
            style.observe(RawDate::scan(s).expect("scanned"));
        }
        assert!(style.day_first());
        assert_eq!(date(style, "01/02/2020"), ymd(2020, 2, 1));
        let mut style = DateStyle::default();
        style.observe(RawDate::scan("01/13/2020").expect("scanned"));
        assert!(!style.day_first());
    }

    #[test]
    fn amounts_with_grouping_and_decimal_comma() {
        let point = NumberStyle::default();
        assert_eq!(point.amount("-1,234.56"), "-1234.56".parse().ok());
        assert_eq!(point.amount("--60.00"), "-60.00".parse().ok());
        assert_eq!(point.amount("1 000 000.00"), "1000000.00".parse().ok());
        assert_eq!(point.amount("+5"), "5".parse().ok());
        assert_eq!(point.amount("1.2.3"), None);
        assert_eq!(point.amount("-"), None);
        assert_eq!(point.amount("$5"), None);
        let mut comma = NumberStyle::default();
        comma.observe("1.234,56");
        comma.observe("1.000");
        assert!(comma.decimal_comma());
        assert_eq!(comma.amount("-1.234,56"), "-1234.56".parse().ok());
        assert_eq!(comma.amount("1.000"), "1000".parse().ok());
        let mut ambiguous = NumberStyle::default();
        ambiguous.observe("1,000");
        assert!(!ambiguous.decimal_comma());
        let mut mixed = NumberStyle::default();
        mixed.observe("12,5");
        mixed.observe("3.25");
        assert!(!mixed.decimal_comma());
    }

    #[test]
    fn decoding_and_lines() {
        assert_eq!(decode(b"\xEF\xBB\xBFCaf\xC3\xA9"), "Café");
        assert_eq!(decode(b"Caf\xE9 \x80"), "Café €");
        let text = "a\r\nb\nc";
        let got: Vec<_> = lines(text).collect();
        assert_eq!(got, vec![(1, "a"), (2, "b"), (3, "c")]);
        let got: Vec<_> = lines("a\rb").collect();
        assert_eq!(got, vec![(1, "a"), (2, "b")]);
    }
}
