//! The timestamp of a log line, written as `tracing_subscriber`'s default `SystemTime` timer
//! writes it (`2026-11-27T09:25:20.123456Z`, UTC, microseconds), with the date and time of day
//! worked out once a second.
//!
//! The default timer converts the whole time to a calendar date and formats seven padded numbers
//! for every line. Here each thread keeps the text up to the second and only the microseconds
//! are written per line. Times the cached form cannot hold (before 1970, after 9999) go to the
//! default timer, so the text is the same byte for byte in every case.

use std::cell::RefCell;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{Datelike as _, NaiveDate};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

/// See the [module docs](self).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CachedSecondTime;

/// `YYYY-MM-DDTHH:MM:SS.uuuuuuZ`
const LENGTH: usize = 27;
/// Where the microseconds start (after the `.`).
const MICROS_AT: usize = 20;
/// 9999-12-31T23:59:59Z, the last second written with four year digits.
const LAST_SECOND: u64 = 253_402_300_799;

struct Cached {
    second: u64,
    text: [u8; LENGTH],
}

thread_local! {
    static CACHED: RefCell<Cached> = const {
        RefCell::new(Cached { second: u64::MAX, text: [b'0'; LENGTH] })
    };
}

impl FormatTime for CachedSecondTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        let now = SystemTime::now();
        let Ok(since_epoch) = now.duration_since(UNIX_EPOCH) else {
            return tracing_subscriber::fmt::time::SystemTime.format_time(w);
        };
        let second = since_epoch.as_secs();
        if second > LAST_SECOND {
            return tracing_subscriber::fmt::time::SystemTime.format_time(w);
        }
        let micros = since_epoch.subsec_micros();
        CACHED.with(|cached| {
            let mut cached = cached.borrow_mut();
            if cached.second != second {
                cached.text = seconds_text(second);
                cached.second = second;
            }
            write_digits(&mut cached.text[MICROS_AT..MICROS_AT + 6], micros);
            // Only ASCII digits and separators are ever written to the buffer.
            w.write_str(std::str::from_utf8(&cached.text).map_err(|_| fmt::Error)?)
        })
    }
}

/// The whole timestamp for `second` (seconds since 1970, at most [`LAST_SECOND`]), with zero
/// microseconds.
fn seconds_text(second: u64) -> [u8; LENGTH] {
    let date = civil_date(second / 86_400);
    let of_day = second % 86_400;
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    write_digits(&mut text[0..4], date.year().unsigned_abs());
    write_digits(&mut text[5..7], date.month());
    write_digits(&mut text[8..10], date.day());
    write_digits(&mut text[11..13], (of_day / 3600) as u32);
    write_digits(&mut text[14..16], (of_day % 3600 / 60) as u32);
    write_digits(&mut text[17..19], (of_day % 60) as u32);
    text
}

/// Writes `value` zero padded into all of `digits` (its high digits beyond the slice dropped).
fn write_digits(digits: &mut [u8], mut value: u32) {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The date `days` after 1970-01-01 (at most [`LAST_SECOND`]'s, which chrono holds).
fn civil_date(days: u64) -> NaiveDate {
    let days = chrono::Days::new(days);
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .and_then(|epoch| epoch.checked_add_days(days))
        .unwrap_or(NaiveDate::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn formatted(timer: &impl FormatTime) -> String {
        let mut text = String::new();
        timer
            .format_time(&mut Writer::new(&mut text))
            .expect("formatting into a String does not fail");
        text
    }

    #[test]
    fn known_seconds_are_written_as_their_calendar_dates() {
        let cases = [
            (0, "1970-01-01T00:00:00.000000Z"),
            (951_782_399, "2000-02-28T23:59:59.000000Z"),
            (951_782_400, "2000-02-29T00:00:00.000000Z"),
            (951_868_800, "2000-03-01T00:00:00.000000Z"),
            (4_107_542_399, "2100-02-28T23:59:59.000000Z"),
            (4_107_542_400, "2100-03-01T00:00:00.000000Z"),
            (1_795_771_520, "2026-11-27T09:25:20.000000Z"),
            (LAST_SECOND, "9999-12-31T23:59:59.000000Z"),
        ];
        for (second, expected) in cases {
            assert_eq!(
                std::str::from_utf8(&seconds_text(second)).expect("ASCII"),
                expected,
                "second {second}"
            );
        }
    }

    #[test]
    fn every_day_of_four_centuries_follows_the_previous_one() {
        let ymd = |date: NaiveDate| (date.year().unsigned_abs(), date.month(), date.day());
        let mut previous = ymd(civil_date(0));
        assert_eq!(previous, (1970, 1, 1));
        for days in 1..146_097 * 2 {
            let date = ymd(civil_date(days));
            let (year, month, day) = previous;
            let next_day = (year, month, day + 1);
            let next_month = (year, month + 1, 1);
            let next_year = (year + 1, 1, 1);
            assert!(
                date == next_day || (day >= 28 && date == next_month) || date == next_year,
                "day {days}: {date:?} after {previous:?}"
            );
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
            if date != next_day {
                let month_length = match month {
                    2 if leap => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                assert_eq!(day, month_length, "{previous:?} ends its month");
            }
            previous = date;
        }
    }

    #[test]
    fn the_text_is_the_default_timers_between_two_readings() {
        for _ in 0..1000 {
            let before = formatted(&CachedSecondTime);
            let default = formatted(&tracing_subscriber::fmt::time::SystemTime);
            let after = formatted(&CachedSecondTime);
            assert_eq!(before.len(), LENGTH);
            assert_eq!(default.len(), LENGTH);
            assert_eq!(after.len(), LENGTH);
            // One fixed-width format: text order is time order.
            assert!(
                before <= default && default <= after,
                "{before} / {default} / {after}"
            );
            // The same second in all three readings shares the cached date and time of day.
            if before[..MICROS_AT] == after[..MICROS_AT] {
                assert_eq!(before[..MICROS_AT], default[..MICROS_AT]);
            }
        }
    }
}
