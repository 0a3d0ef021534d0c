//! The rules that decide whether two transaction rows are the same real transaction: a
//! booked row replacing a pending one, one source's row duplicating another's, or the two
//! legs of a transfer between the user's own accounts.
//!
//! The rules are pure functions over amounts, dates and descriptions, so the store applies
//! them the same way to every source (each provider's sync, each file format), and the bench
//! measures them on their own. Why each window and threshold is what it is: see the README's
//! "Reconciliation" section.
//!
//! ```
//! use aggregation_core::matching::{description_similarity, SIMILARITY_THRESHOLD};
//!
//! let score = description_similarity(Some("STARBUCKS STORE 1234 SEATTLE WA"), Some("Starbucks"));
//! assert!(score >= SIMILARITY_THRESHOLD);
//! assert!(description_similarity(Some("Starbucks"), Some("Shell Oil 5521")) < SIMILARITY_THRESHOLD);
//! ```

use chrono::NaiveDate;
use rust_decimal::Decimal;

/// A booked row takes over a pending row dated up to this many days before it: card
/// authorisations usually settle within two to five business days.
pub const PENDING_WINDOW_DAYS: i64 = 7;
/// A row of one source duplicates another source's row dated up to this many days apart:
/// banks and aggregators date the same payment by authorisation, posting or value date.
pub const DUPLICATE_WINDOW_DAYS: i64 = 3;
/// Two legs of a transfer are dated up to this many days apart: an ACH transfer between
/// banks takes up to three business days, plus a weekend day.
pub const TRANSFER_WINDOW_DAYS: i64 = 4;
/// A booked amount may differ from the pending one by this share of it (tips on card
/// payments at restaurants, fuel pre-authorisations), when the merchant is the same.
pub const TIP_TOLERANCE: Decimal = Decimal::from_parts(20, 0, 0, false, 2);
/// Descriptions at least this similar (0 to 1) make a candidate duplicate, or the same
/// merchant for the tip rule.
pub const SIMILARITY_THRESHOLD: f64 = 0.5;
/// A single candidate at least this similar is an automatic duplicate; a weaker one is only
/// suggested to the user.
pub const STRONG_SIMILARITY: f64 = 0.8;
/// The similarity of two rows that both have no description: equal amounts and dates alone
/// are a suggestion, never an automatic merge.
const NO_DESCRIPTIONS: f64 = SIMILARITY_THRESHOLD;
/// The similarity of descriptions where every word of the shorter one is in the longer one
/// ("Starbucks" and "STARBUCKS STORE 1234 SEATTLE WA"): strong, short of identical.
const CONTAINED: f64 = 0.9;

/// The words of a description that name the payee: lower-case letters and digits, without
/// words of one character or only digits (store, card and reference numbers, which one
/// source prints and another leaves out).
pub fn description_words(description: &str) -> Vec<String> {
    description
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() > 1 && !word.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        .collect()
}

/// The character pairs of the words, each word padded with a space on either side so that
/// word boundaries count.
fn bigrams(words: &[String]) -> Vec<(char, char)> {
    let mut pairs = Vec::new();
    for word in words {
        let chars: Vec<char> = std::iter::once(' ')
            .chain(word.chars())
            .chain(std::iter::once(' '))
            .collect();
        pairs.extend(chars.windows(2).map(|pair| (pair[0], pair[1])));
    }
    pairs.sort_unstable();
    pairs
}

/// The Sørensen–Dice coefficient of two sorted multisets of bigrams.
fn dice(left: &[(char, char)], right: &[(char, char)]) -> f64 {
    if left.is_empty() || right.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < left.len() && j < right.len() {
        match left[i].cmp(&right[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    // Both lengths are far below 2^52, so the conversions are exact.
    (2 * common) as f64 / (left.len() + right.len()) as f64
}

/// How alike two descriptions are, from 0 (nothing in common) to 1 (the same words): the
/// Sørensen–Dice coefficient of their character pairs, raised to 0.9 when every word of one
/// is among the other's. Case, punctuation, numbers and one-letter words are ignored.
pub fn description_similarity(left: Option<&str>, right: Option<&str>) -> f64 {
    let left = description_words(left.unwrap_or_default());
    let right = description_words(right.unwrap_or_default());
    match (left.is_empty(), right.is_empty()) {
        (true, true) => return NO_DESCRIPTIONS,
        (true, false) | (false, true) => return 0.0,
        (false, false) => {}
    }
    if left == right {
        return 1.0;
    }
    let score = dice(&bigrams(&left), &bigrams(&right));
    let (shorter, longer) = if left.len() <= right.len() {
        (&left, &right)
    } else {
        (&right, &left)
    };
    if shorter.iter().all(|word| longer.contains(word)) {
        score.max(CONTAINED)
    } else {
        score
    }
}

/// Whether two dates are at most `days` apart, either way.
pub fn within_days(left: NaiveDate, right: NaiveDate, days: i64) -> bool {
    (left - right).num_days().abs() <= days
}

/// Whether a booked row may take over a pending one by the amount, date and merchant rule:
/// dated the same day or up to [`PENDING_WINDOW_DAYS`] after it, with the same amount, or an
/// amount of the same sign within [`TIP_TOLERANCE`] of it and the same merchant.
pub fn books_pending(
    pending: (Decimal, NaiveDate, Option<&str>),
    booked: (Decimal, NaiveDate, Option<&str>),
) -> bool {
    let (pending_amount, pending_date, pending_text) = pending;
    let (booked_amount, booked_date, booked_text) = booked;
    let days = (booked_date - pending_date).num_days();
    if !(0..=PENDING_WINDOW_DAYS).contains(&days) {
        return false;
    }
    if pending_amount == booked_amount {
        return true;
    }
    let same_sign = pending_amount.is_sign_negative() == booked_amount.is_sign_negative();
    let tolerance = pending_amount.abs() * TIP_TOLERANCE;
    same_sign
        && !pending_amount.is_zero()
        && (booked_amount - pending_amount).abs() <= tolerance
        && description_similarity(pending_text, booked_text) >= SIMILARITY_THRESHOLD
}

/// Whether two rows may be the two legs of one transfer: opposite non-zero amounts in the
/// same currency (compared upper case), dated at most [`TRANSFER_WINDOW_DAYS`] apart.
pub fn transfer_legs(left: (Decimal, &str, NaiveDate), right: (Decimal, &str, NaiveDate)) -> bool {
    !left.0.is_zero()
        && left.0 == -right.0
        && left.1.eq_ignore_ascii_case(right.1)
        && within_days(left.2, right.2, TRANSFER_WINDOW_DAYS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, day).expect("date")
    }

    fn amount(text: &str) -> Decimal {
        text.parse().expect("decimal")
    }

    #[test]
    fn similar_descriptions_score_above_the_threshold_and_others_below() {
        let same = description_similarity(Some("Coffee Shop"), Some("COFFEE SHOP"));
        assert!((same - 1.0).abs() < f64::EPSILON);
        assert!(
            description_similarity(Some("SQ *BLUE BOTTLE 0042"), Some("Blue Bottle"))
                >= STRONG_SIMILARITY
        );
        assert!(
            description_similarity(Some("AMAZON MKTPLACE PMTS"), Some("Amazon Marketplace"))
                >= SIMILARITY_THRESHOLD
        );
        assert!(description_similarity(Some("Rent March"), Some("Grocery Outlet")) < 0.1);
        let shared_word = description_similarity(Some("Shell Oil"), Some("Shell Cafe"));
        assert!((SIMILARITY_THRESHOLD..STRONG_SIMILARITY).contains(&shared_word));
        let amazon =
            description_similarity(Some("AMAZON MKTPLACE PMTS"), Some("Amazon Marketplace"));
        assert!((amazon - 0.7).abs() < 0.01, "{amazon}");
        assert!(description_similarity(Some("Rent"), None) < SIMILARITY_THRESHOLD);
        let none = description_similarity(None, Some("  12345 "));
        assert!((SIMILARITY_THRESHOLD..STRONG_SIMILARITY).contains(&none));
    }

    #[test]
    fn the_tip_rule_takes_amounts_within_a_fifth_with_the_same_merchant() {
        let pending = (amount("-40.00"), date(10), Some("Trattoria Roma"));
        assert!(books_pending(
            pending,
            (amount("-46.00"), date(12), Some("TRATTORIA ROMA NYC"))
        ));
        assert!(books_pending(
            pending,
            (amount("-40"), date(10), Some("other text"))
        ));
        assert!(!books_pending(
            pending,
            (amount("-46.00"), date(12), Some("Shell"))
        ));
        assert!(!books_pending(
            pending,
            (amount("-48.01"), date(12), Some("Trattoria Roma"))
        ));
        assert!(!books_pending(
            pending,
            (amount("-40.00"), date(18), Some("Trattoria Roma"))
        ));
        assert!(!books_pending(
            pending,
            (amount("-40.00"), date(9), Some("Trattoria Roma"))
        ));
        assert!(!books_pending(
            pending,
            (amount("40.00"), date(10), Some("Trattoria Roma"))
        ));
    }

    #[test]
    fn transfer_legs_are_opposite_in_one_currency_within_four_days() {
        let out = (amount("-500.00"), "USD", date(1));
        assert!(transfer_legs(out, (amount("500"), "usd", date(5))));
        assert!(!transfer_legs(out, (amount("500"), "USD", date(6))));
        assert!(!transfer_legs(out, (amount("-500"), "USD", date(1))));
        assert!(!transfer_legs(out, (amount("500"), "EUR", date(1))));
        assert!(!transfer_legs(
            (Decimal::ZERO, "USD", date(1)),
            (Decimal::ZERO, "USD", date(1))
        ));
    }
}
