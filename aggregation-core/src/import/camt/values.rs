//! Reading amounts, dates and indicators.

use std::str::FromStr;

use chrono::NaiveDate;
use rust_decimal::Decimal;

/// Reads an amount: digits with an optional `.` or `,` fraction, leading zeros, an optional
/// leading `+` or `-`. `None` when it is not such a number.
pub(super) fn amount(value: &str) -> Option<Decimal> {
    let value = value.trim();
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    let mut separators = 0;
    let mut any_digit = false;
    for b in digits.bytes() {
        match b {
            b'0'..=b'9' => any_digit = true,
            b'.' | b',' => separators += 1,
            _ => return None,
        }
    }
    if !any_digit || separators > 1 {
        return None;
    }
    // Leading zeros carry nothing and could push a long figure past Decimal's 28 digits.
    let trimmed = digits.trim_start_matches('0');
    let normal = if trimmed.is_empty() || trimmed.starts_with(['.', ',']) {
        format!("0{}", trimmed.replace(',', "."))
    } else {
        trimmed.replace(',', ".")
    };
    let normal = normal.strip_suffix('.').unwrap_or(&normal);
    let number = Decimal::from_str(normal).ok()?;
    Some(if negative { -number } else { number })
}

/// Reads a date or the date of a date-time: `YYYY-MM-DD` or `YYYYMMDD`, then anything (a zone,
/// a `T` and a time) that is ignored: the date is the one written, in the bank's time.
pub(super) fn date(value: &str) -> Option<NaiveDate> {
    let value = value.trim();
    let b = value.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let s = value.get(range)?;
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let (y, m, d, len) = if b.get(4) == Some(&b'-') && b.get(7) == Some(&b'-') {
        (digits(0..4)?, digits(5..7)?, digits(8..10)?, 10)
    } else {
        (digits(0..4)?, digits(4..6)?, digits(6..8)?, 8)
    };
    match b.get(len) {
        None | Some(b'T' | b't' | b' ' | b'Z' | b'z' | b'+' | b'-') => {}
        _ => return None,
    }
    NaiveDate::from_ymd_opt(i32::try_from(y).ok()?, m, d)
}

/// The sign a credit/debit indicator gives: `CRDT` 1, `DBIT` -1.
pub(super) fn credit_debit(value: &str) -> Option<Decimal> {
    match value.trim().to_ascii_uppercase().as_str() {
        "CRDT" => Some(Decimal::ONE),
        "DBIT" => Some(Decimal::NEGATIVE_ONE),
        _ => None,
    }
}

/// Reads an XML boolean (`true`, `1`; anything else is false).
pub(super) fn boolean(value: &str) -> bool {
    matches!(value.trim(), "true" | "1" | "TRUE" | "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn amounts() {
        assert_eq!(amount("000000000000149.87"), Some(dec("149.87")));
        assert_eq!(amount("12"), Some(dec("12")));
        assert_eq!(amount("+1.50"), Some(dec("1.50")));
        assert_eq!(amount("-3.1"), Some(dec("-3.1")));
        assert_eq!(amount("5,25"), Some(dec("5.25")));
        assert_eq!(amount(".5"), Some(dec("0.5")));
        assert_eq!(amount("7."), Some(dec("7")));
        assert_eq!(amount("0"), Some(dec("0")));
        assert_eq!(amount("000"), Some(dec("0")));
        for bad in [
            "",
            "-",
            ".",
            "1.000,00",
            "12 EUR",
            "1e5",
            "--1",
            "99999999999999999999999999999999",
        ] {
            assert_eq!(amount(bad), None, "{bad}");
        }
    }

    #[test]
    fn dates() {
        let d = NaiveDate::from_ymd_opt(2024, 3, 1).unwrap();
        for good in [
            "2024-03-01",
            "2024-03-01+01:00",
            "2024-03-01Z",
            "2024-03-01T23:59:59.999999999",
            "2024-03-01T10:00:00+02:00",
            "20240301",
            "20240301T18:38:47.137Z",
        ] {
            assert_eq!(date(good), Some(d), "{good}");
        }
        for bad in [
            "",
            "2024-13-01",
            "2024-02-30",
            "01.03.2024",
            "2024-3-1",
            "2024030",
        ] {
            assert_eq!(date(bad), None, "{bad}");
        }
    }

    #[test]
    fn indicators() {
        assert_eq!(credit_debit("DBIT"), Some(Decimal::NEGATIVE_ONE));
        assert_eq!(credit_debit(" crdt "), Some(Decimal::ONE));
        assert_eq!(credit_debit("D"), None);
        assert!(boolean("true"));
        assert!(!boolean("false"));
    }
}
