//! Reading OFX amounts and dates.
//!
//! Both readers work on an already trimmed, entity-decoded element value and return a short
//! reason on failure; the caller adds the element name and the line.

use chrono::{
    DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, TimeZone as _, Utc,
};
use rust_decimal::Decimal;

/// Reads an amount.
///
/// Accepted: an optional `+` or `-`, digits with at most one decimal separator, which may be
/// `.` or `,` (`-30.000`, `+0012.50`, `.5`, `12,34`, `7.`), surrounding whitespace. The scale is
/// kept as written (`-3.77000` has scale 5; decimals compare by value). Rejected: currency
/// symbols and any other letters (`$120`, `R$ 5.326,43`), both separators or thousands
/// separators (`5.326,43`, `1,000,000`), a separator without digits (`.`), more than 28
/// significant digits.
pub(crate) fn parse_amount(raw: &str) -> Result<Decimal, &'static str> {
    let s = raw.trim();
    let bytes = s.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, bytes.get(1..).unwrap_or_default()),
        Some(b'+') => (false, bytes.get(1..).unwrap_or_default()),
        Some(_) => (false, bytes),
        None => return Err("empty amount"),
    };
    let mut mantissa: u128 = 0;
    let mut scale: u32 = 0;
    let mut seen_separator = false;
    let mut seen_digit = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                seen_digit = true;
                mantissa = mantissa
                    .checked_mul(10)
                    .and_then(|m| m.checked_add(u128::from(b - b'0')))
                    .ok_or("amount has too many digits")?;
                if seen_separator {
                    scale = scale.saturating_add(1);
                }
            }
            b'.' | b',' if !seen_separator => seen_separator = true,
            b'.' | b',' => return Err("amount has more than one separator"),
            _ => return Err("amount is not a number"),
        }
    }
    if !seen_digit {
        return Err("amount has no digits");
    }
    while scale > 28 && mantissa.is_multiple_of(10) {
        mantissa /= 10;
        scale -= 1;
    }
    let signed = i128::try_from(mantissa).map_err(|_| "amount has too many digits")?;
    let signed = if negative { -signed } else { signed };
    Decimal::try_from_i128_with_scale(signed, scale).map_err(|_| "amount has too many digits")
}

/// Reads a date and time.
///
/// `Ok(None)` for an empty value and for an all-zeros date (`00000000`, `00000000000000`).
///
/// Accepted forms (after leading whitespace):
/// - `YYYYMMDD`, `YYYYMMDDHH`, `YYYYMMDDHHMM`, `YYYYMMDDHHMMSS`; digits beyond 14 are a
///   fraction of a second (`2009021100000000`);
/// - a fraction after `.` or `:` (`.XXX`, `20180804093914:014`), up to nanoseconds;
/// - a zone `[offset]` or `[offset:NAME]` where offset is hours (`-5`, `0`, `-03`, `+5.5`,
///   `+5.30` = 5 h 30 min); an empty offset (`[-:EST]`) and no zone at all mean UTC; the zone
///   name is ignored; anything after the zone is ignored
///   (`20151006160000.000[-5:EST]160000.000[-5:EST]`);
/// - `DD/MM/YYYY` (read as `MM/DD/YYYY` only when the first number cannot be a day of that
///   month order, i.e. the second is above 12), and `YYYY-MM-DD`.
///
/// The result is the instant in UTC: `20240115120000[-5:EST]` is 17:00 UTC.
pub(crate) fn parse_date(raw: &str) -> Result<Option<DateTime<Utc>>, &'static str> {
    parse_zoned_date(raw).map(|date| date.map(|date| date.to_utc()))
}

/// [`parse_date`], keeping the file's own offset, so that the calendar date is the one the
/// file wrote: `20240105200000[-5:EST]` is January 5th there, though January 6th in UTC.
pub(crate) fn parse_zoned_date(raw: &str) -> Result<Option<DateTime<FixedOffset>>, &'static str> {
    let s = raw.trim();
    if s.is_empty() {
        return Ok(None);
    }
    let bytes = s.as_bytes();
    let digits_len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    match bytes.get(digits_len) {
        Some(b'/') => return parse_slashed(s).map(|date| Some(date.fixed_offset())),
        Some(b'-') if digits_len == 4 => {
            return parse_iso(s).map(|date| Some(date.fixed_offset()));
        }
        _ => {}
    }
    let digits = bytes.get(..digits_len).unwrap_or_default();
    if digits.iter().all(|&b| b == b'0') && digits_len >= 8 {
        return Ok(None);
    }
    if digits_len < 8 || digits_len == 9 || digits_len == 11 || digits_len == 13 {
        return Err("date is not YYYYMMDD[HHMMSS[.XXX]][zone]");
    }
    let num = |from: usize, len: usize| -> u32 {
        digits.get(from..from + len).map_or(0, |d| {
            d.iter().fold(0, |acc, &b| acc * 10 + u32::from(b - b'0'))
        })
    };
    let date = NaiveDate::from_ymd_opt(num(0, 4) as i32, num(4, 2), num(6, 2))
        .ok_or("date is not a calendar date")?;
    let (hour, minute, second) = (num(8, 2), num(10, 2), num(12, 2));
    let mut rest = bytes.get(digits_len..).unwrap_or_default();
    let mut nanos = fraction_nanos(digits.get(14..).unwrap_or_default());
    if let [b'.' | b':', tail @ ..] = rest {
        let n = tail.iter().take_while(|b| b.is_ascii_digit()).count();
        if n > 0 {
            if digits_len <= 14 {
                nanos = fraction_nanos(tail.get(..n).unwrap_or_default());
            }
            rest = tail.get(n..).unwrap_or_default();
        }
    }
    let time =
        NaiveTime::from_hms_nano_opt(hour, minute, second, nanos).ok_or("time is out of range")?;
    let offset_minutes = parse_zone(rest)?;
    let offset =
        FixedOffset::east_opt(offset_minutes * 60).ok_or("date has a zone offset out of range")?;
    let local = NaiveDateTime::new(date, time);
    let utc = local
        .checked_sub_signed(TimeDelta::minutes(i64::from(offset_minutes)))
        .ok_or("date is out of range")?;
    Ok(Some(offset.from_utc_datetime(&utc)))
}

/// Nanoseconds from fraction digits (only the first nine count).
fn fraction_nanos(digits: &[u8]) -> u32 {
    let mut nanos = 0u32;
    for i in 0..9 {
        let d = digits.get(i).map_or(0, |&b| u32::from(b - b'0'));
        nanos = nanos * 10 + d;
    }
    nanos
}

/// The UTC offset in minutes of a `[offset:NAME]` suffix (whitespace before it allowed,
/// anything after it ignored). No zone, or an empty offset, is UTC.
fn parse_zone(rest: &[u8]) -> Result<i32, &'static str> {
    let rest = rest.trim_ascii_start();
    let Some(inner) = rest.strip_prefix(b"[") else {
        return Ok(0);
    };
    let end = inner
        .iter()
        .position(|&b| b == b']' || b == b':')
        .unwrap_or(inner.len());
    let offset = inner.get(..end).unwrap_or_default().trim_ascii();
    let (negative, body) = match offset.first() {
        Some(b'-') => (true, offset.get(1..).unwrap_or_default()),
        Some(b'+') => (false, offset.get(1..).unwrap_or_default()),
        _ => (false, offset),
    };
    if body.is_empty() {
        return Ok(0);
    }
    let (hours, fraction) = match body.iter().position(|&b| b == b'.') {
        Some(dot) => (
            body.get(..dot).unwrap_or_default(),
            body.get(dot + 1..).unwrap_or_default(),
        ),
        None => (body, &[][..]),
    };
    if hours.is_empty()
        || hours.len() > 2
        || fraction.len() > 2
        || !hours.iter().chain(fraction).all(u8::is_ascii_digit)
    {
        return Err("date has an unreadable zone offset");
    }
    let h = hours
        .iter()
        .fold(0i32, |a, &b| a * 10 + i32::from(b - b'0'));
    let f = fraction
        .iter()
        .fold(0i32, |a, &b| a * 10 + i32::from(b - b'0'));
    // `.5` is half an hour; `.30` / `.45` are minutes.
    let minutes = match fraction.len() {
        1 => f * 6,
        _ => f,
    };
    if h > 14 || minutes >= 60 {
        return Err("date has a zone offset out of range");
    }
    let total = h * 60 + minutes;
    Ok(if negative { -total } else { total })
}

/// `DD/MM/YYYY` (or `MM/DD/YYYY` when the second number is above 12), optionally followed by
/// a time part that is ignored.
fn parse_slashed(s: &str) -> Result<DateTime<Utc>, &'static str> {
    let date_part = s.split_whitespace().next().unwrap_or("");
    let mut parts = date_part.split('/');
    let (Some(a), Some(b), Some(y), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("date is not DD/MM/YYYY");
    };
    let small = |p: &str| -> Result<u32, &'static str> {
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|c| c.is_ascii_digit()) {
            return Err("date is not DD/MM/YYYY");
        }
        p.parse().map_err(|_| "date is not DD/MM/YYYY")
    };
    let (a, b) = (small(a)?, small(b)?);
    if y.len() != 4 || !y.bytes().all(|c| c.is_ascii_digit()) {
        return Err("date is not DD/MM/YYYY");
    }
    let year: i32 = y.parse().map_err(|_| "date is not DD/MM/YYYY")?;
    let (day, month) = if b > 12 && a <= 12 { (b, a) } else { (a, b) };
    NaiveDate::from_ymd_opt(year, month, day)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
        .ok_or("date is not a calendar date")
}

/// `YYYY-MM-DD`, optionally followed by anything (ignored).
fn parse_iso(s: &str) -> Result<DateTime<Utc>, &'static str> {
    let date_part = s.get(..10).ok_or("date is not YYYY-MM-DD")?;
    NaiveDate::parse_from_str(date_part, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
        .ok_or("date is not YYYY-MM-DD")
}

/// Reads a whole non-negative number (status codes).
pub(crate) fn parse_code(raw: &str) -> Result<u32, &'static str> {
    let s = raw.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("status code is not a number");
    }
    s.parse().map_err(|_| "status code is out of range")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn utc(y: i32, mo: u32, da: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, da, h, mi, s).unwrap()
    }

    #[test]
    fn amounts() {
        assert_eq!(parse_amount("-30.000"), Ok(d("-30")));
        assert_eq!(parse_amount("-30.000").unwrap().scale(), 3);
        assert_eq!(parse_amount("-3.77000"), Ok(d("-3.77")));
        assert_eq!(parse_amount("+0012.50"), Ok(d("12.5")));
        assert_eq!(parse_amount("  .5\t"), Ok(d("0.5")));
        assert_eq!(parse_amount("-.25"), Ok(d("-0.25")));
        assert_eq!(parse_amount("12,34"), Ok(d("12.34")));
        assert_eq!(parse_amount("-1234,5"), Ok(d("-1234.5")));
        assert_eq!(parse_amount("7."), Ok(d("7")));
        assert_eq!(parse_amount("000"), Ok(d("0")));
        assert_eq!(parse_amount("-0.00"), Ok(Decimal::ZERO));
        assert_eq!(
            parse_amount("1.00000000000000000000000000000000"),
            Ok(Decimal::ONE)
        );
        for bad in [
            "$120",
            "  .  ",
            "R$ 5.326,43",
            "5.326,43",
            "1,000,000",
            "",
            "-",
            "+",
            "1e5",
            "12 34",
            "--1",
            "99999999999999999999999999999999999999999",
        ] {
            assert!(parse_amount(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn dates_plain_forms() {
        assert_eq!(parse_date("20240115"), Ok(Some(utc(2024, 1, 15, 0, 0, 0))));
        assert_eq!(
            parse_date("202401151230"),
            Ok(Some(utc(2024, 1, 15, 12, 30, 0)))
        );
        assert_eq!(
            parse_date("20240115123045"),
            Ok(Some(utc(2024, 1, 15, 12, 30, 45)))
        );
        assert_eq!(
            parse_date("2024011512"),
            Ok(Some(utc(2024, 1, 15, 12, 0, 0)))
        );
        assert_eq!(
            parse_date("   20240115123045"),
            Ok(Some(utc(2024, 1, 15, 12, 30, 45)))
        );
    }

    #[test]
    fn dates_fractions() {
        let with_ms = utc(2018, 8, 4, 9, 39, 14) + TimeDelta::milliseconds(14);
        assert_eq!(parse_date("20180804093914.014"), Ok(Some(with_ms)));
        assert_eq!(parse_date("20180804093914:014"), Ok(Some(with_ms)));
        assert_eq!(
            parse_date("2009021100000000[-5:EST]"),
            Ok(Some(utc(2009, 2, 11, 5, 0, 0)))
        );
        assert_eq!(
            parse_date("20090211000000123[0:GMT]"),
            Ok(Some(
                utc(2009, 2, 11, 0, 0, 0) + TimeDelta::milliseconds(123)
            ))
        );
        assert_eq!(
            parse_date("20240115123045.123456789"),
            Ok(Some(
                utc(2024, 1, 15, 12, 30, 45) + TimeDelta::nanoseconds(123_456_789)
            ))
        );
    }

    #[test]
    fn dates_zones() {
        let noon = |h| Ok(Some(utc(2024, 1, 15, h, 0, 0)));
        assert_eq!(parse_date("20240115120000[-5:EST]"), noon(17));
        assert_eq!(parse_date("20240115120000.000[-5:EST]"), noon(17));
        assert_eq!(parse_date("20240115120000[0:GMT]"), noon(12));
        assert_eq!(parse_date("20240115120000[-03:EST]"), noon(15));
        assert_eq!(parse_date("20240115120000[-3:BRT]"), noon(15));
        assert_eq!(parse_date("20240115120000[+2]"), noon(10));
        assert_eq!(parse_date("20240115120000 [-5:EST]"), noon(17));
        assert_eq!(parse_date("20240115120000[-:EST]"), noon(12));
        assert_eq!(parse_date("20240115120000[:EST]"), noon(12));
        assert_eq!(
            parse_date("20240115120000[+5.30:IST]"),
            Ok(Some(utc(2024, 1, 15, 6, 30, 0)))
        );
        assert_eq!(
            parse_date("20240115120000[+5.5:IST]"),
            Ok(Some(utc(2024, 1, 15, 6, 30, 0)))
        );
        assert_eq!(
            parse_date("20151006160000.000[-5:EST]160000.000[-5:EST]"),
            Ok(Some(utc(2015, 10, 6, 21, 0, 0)))
        );
        assert_eq!(parse_date("20240115[-5:EST]"), noon(5));
        assert!(parse_date("20240115120000[x:EST]").is_err());
        assert!(parse_date("20240115120000[-99:EST]").is_err());
    }

    #[test]
    fn dates_other_forms_and_missing() {
        assert_eq!(
            parse_date("15/01/2024"),
            Ok(Some(utc(2024, 1, 15, 0, 0, 0)))
        );
        assert_eq!(
            parse_date("01/15/2024"),
            Ok(Some(utc(2024, 1, 15, 0, 0, 0)))
        );
        assert_eq!(parse_date("05/01/2024"), Ok(Some(utc(2024, 1, 5, 0, 0, 0))));
        assert_eq!(
            parse_date("2024-01-15"),
            Ok(Some(utc(2024, 1, 15, 0, 0, 0)))
        );
        assert_eq!(parse_date("00000000"), Ok(None));
        assert_eq!(parse_date("00000000000000"), Ok(None));
        assert_eq!(parse_date("00000000000000.000[-5:EST]"), Ok(None));
        assert_eq!(parse_date(""), Ok(None));
        assert_eq!(parse_date("   "), Ok(None));
        for bad in [
            "2024",
            "202401",
            "20241301",
            "20240230",
            "20240115250000",
            "202401151",
            "x20240115",
            "32/01/2024",
            "1/2/24",
            "2024-13-01",
        ] {
            assert!(parse_date(bad).is_err(), "{bad:?} accepted");
        }
    }
}
