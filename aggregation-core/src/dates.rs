//! The calendar range the API accepts, and date arithmetic that saturates instead of panicking.
//!
//! Every date (`YYYY-MM-DD`) and date-time (RFC 3339) a request carries, in a query string or a
//! JSON body, must lie within [`EARLIEST_DATE`] and [`LATEST_DATE`]: the years 1900 to 2200,
//! inclusive. A date-time is compared after its conversion to UTC, so it must lie within
//! [`EARLIEST_INSTANT`] and [`LATEST_INSTANT`]. Anything outside is a 422 `validation_failed`
//! whose `errors` entry names the field (code `out_of_range`). Both stores keep every value in
//! that range, and date arithmetic on it cannot overflow.
//!
//! Timestamps computed from configured durations (token lifetimes, job intervals) saturate at
//! [`FAR_FUTURE`] and [`FAR_PAST`] instead of overflowing, however large the duration.

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, Utc};

/// Unwraps a constant date or time; a `None` fails the build, never a request.
macro_rules! constant {
    ($value:expr) => {
        match $value {
            Some(value) => value,
            None => panic!("invalid constant"),
        }
    };
}

/// The first day a request may name: 1900-01-01.
pub(crate) const EARLIEST_DATE: NaiveDate = constant!(NaiveDate::from_ymd_opt(1900, 1, 1));

/// The last day a request may name: 2200-12-31.
pub(crate) const LATEST_DATE: NaiveDate = constant!(NaiveDate::from_ymd_opt(2200, 12, 31));

/// The first instant a request may name: 1900-01-01T00:00:00Z.
pub(crate) const EARLIEST_INSTANT: DateTime<Utc> = EARLIEST_DATE.and_time(NaiveTime::MIN).and_utc();

/// The last instant a request may name: 2200-12-31T23:59:59.999999999Z.
pub(crate) const LATEST_INSTANT: DateTime<Utc> = LATEST_DATE
    .and_time(constant!(NaiveTime::from_hms_nano_opt(
        23,
        59,
        59,
        999_999_999
    )))
    .and_utc();

/// The earliest instant a computed timestamp takes: 0001-01-01T00:00:00Z.
pub(crate) const FAR_PAST: DateTime<Utc> = constant!(NaiveDate::from_ymd_opt(1, 1, 1))
    .and_time(NaiveTime::MIN)
    .and_utc();

/// The latest instant a computed timestamp takes: 9999-12-31T23:59:59.999999Z, the last one
/// both stores keep and order correctly.
pub(crate) const FAR_FUTURE: DateTime<Utc> = constant!(NaiveDate::from_ymd_opt(9999, 12, 31))
    .and_time(constant!(NaiveTime::from_hms_micro_opt(
        23, 59, 59, 999_999
    )))
    .and_utc();

/// Whether a request may carry this date (years 1900 to 2200).
pub(crate) fn is_accepted_date(date: NaiveDate) -> bool {
    (EARLIEST_DATE..=LATEST_DATE).contains(&date)
}

/// Whether a request may carry this instant (years 1900 to 2200 in UTC).
pub(crate) fn is_accepted_instant(at: DateTime<Utc>) -> bool {
    (EARLIEST_INSTANT..=LATEST_INSTANT).contains(&at)
}

/// A `std` duration as a signed one, saturating at `TimeDelta::MAX`.
pub(crate) fn delta(duration: std::time::Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

/// `at + by`, saturating within [`FAR_PAST`]..=[`FAR_FUTURE`].
pub(crate) fn later(at: DateTime<Utc>, by: TimeDelta) -> DateTime<Utc> {
    match at.checked_add_signed(by) {
        Some(sum) => sum.clamp(FAR_PAST, FAR_FUTURE),
        None if by < TimeDelta::zero() => FAR_PAST,
        None => FAR_FUTURE,
    }
}

/// `at - by`, saturating within [`FAR_PAST`]..=[`FAR_FUTURE`].
pub(crate) fn earlier(at: DateTime<Utc>, by: TimeDelta) -> DateTime<Utc> {
    match at.checked_sub_signed(by) {
        Some(difference) => difference.clamp(FAR_PAST, FAR_FUTURE),
        None if by < TimeDelta::zero() => FAR_FUTURE,
        None => FAR_PAST,
    }
}

/// `day - days`, never before [`EARLIEST_DATE`].
pub(crate) fn days_before(day: NaiveDate, days: u32) -> NaiveDate {
    day.checked_sub_days(chrono::Days::new(u64::from(days)))
        .unwrap_or(EARLIEST_DATE)
        .max(EARLIEST_DATE)
}

/// Truncates a timestamp to microseconds, the precision both stores keep.
pub(crate) fn truncate_to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound as _;
    at.duration_trunc(TimeDelta::microseconds(1)).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_example_holds() {
        use chrono::NaiveDate;

        assert_eq!(EARLIEST_DATE.to_string(), "1900-01-01");
        assert_eq!(LATEST_DATE.to_string(), "2200-12-31");
        let leap_day = NaiveDate::from_ymd_opt(2024, 2, 29).expect("a real day");
        assert!(is_accepted_date(leap_day));
        let too_early = NaiveDate::from_ymd_opt(1899, 12, 31).expect("a real day");
        assert!(!is_accepted_date(too_early));
    }

    #[test]
    fn bounds_are_the_documented_ones() {
        assert_eq!(EARLIEST_INSTANT.to_rfc3339(), "1900-01-01T00:00:00+00:00");
        assert_eq!(
            LATEST_INSTANT.to_rfc3339(),
            "2200-12-31T23:59:59.999999999+00:00"
        );
        assert_eq!(FAR_PAST.to_rfc3339(), "0001-01-01T00:00:00+00:00");
        assert_eq!(FAR_FUTURE.to_rfc3339(), "9999-12-31T23:59:59.999999+00:00");
        assert!(is_accepted_instant(EARLIEST_INSTANT));
        assert!(is_accepted_instant(LATEST_INSTANT));
        assert!(!is_accepted_instant(
            EARLIEST_INSTANT - TimeDelta::nanoseconds(1)
        ));
        assert!(!is_accepted_instant(
            LATEST_INSTANT + TimeDelta::nanoseconds(1)
        ));
        assert!(is_accepted_date(EARLIEST_DATE) && is_accepted_date(LATEST_DATE));
        assert!(!is_accepted_date(NaiveDate::MIN) && !is_accepted_date(NaiveDate::MAX));
    }

    #[test]
    fn arithmetic_saturates() {
        let at = EARLIEST_INSTANT;
        assert_eq!(later(at, TimeDelta::hours(1)), at + TimeDelta::hours(1));
        assert_eq!(earlier(at, TimeDelta::hours(1)), at - TimeDelta::hours(1));
        assert_eq!(later(at, TimeDelta::MAX), FAR_FUTURE);
        assert_eq!(later(at, TimeDelta::MIN), FAR_PAST);
        assert_eq!(earlier(at, TimeDelta::MAX), FAR_PAST);
        assert_eq!(earlier(at, TimeDelta::MIN), FAR_FUTURE);
        assert_eq!(
            later(DateTime::<Utc>::MAX_UTC, TimeDelta::zero()),
            FAR_FUTURE
        );
        assert_eq!(delta(std::time::Duration::MAX), TimeDelta::MAX);
        assert_eq!(days_before(LATEST_DATE, u32::MAX), EARLIEST_DATE);
        assert_eq!(days_before(NaiveDate::MIN, 90), EARLIEST_DATE);
        let day = NaiveDate::from_ymd_opt(2024, 3, 1).expect("day");
        assert_eq!(
            days_before(day, 1),
            NaiveDate::from_ymd_opt(2024, 2, 29).expect("day")
        );
    }
}
