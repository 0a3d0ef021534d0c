//! Password rules and the errors of hashing ([`super::hashing`] does the hashing).

use std::collections::HashSet;
use std::sync::OnceLock;

use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory as _};

use crate::problem::FieldError;

/// Shortest accepted password, in Unicode characters.
pub(crate) const MIN_PASSWORD_CHARS: usize = 8;
/// Longest accepted password, in Unicode characters; never truncated.
pub(crate) const MAX_PASSWORD_CHARS: usize = 128;

/// Why hashing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum PasswordError {
    /// The hasher failed.
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// Too many hashes are running or waiting; the request may be retried shortly.
    #[error(transparent)]
    Work(#[from] crate::work::WorkError),
}

/// The 10,000 most common passwords, most common first, one a line, in lower case: the head of
/// the list Django ships (`common-passwords.txt.gz`, from Royce Williams' breach corpus study).
const COMMON_PASSWORDS: &str = include_str!("common-passwords.txt");

/// Whether `password`, compared case-insensitively, is one of [`COMMON_PASSWORDS`].
pub(crate) fn is_common_password(password: &str) -> bool {
    static COMMON: OnceLock<HashSet<&'static str>> = OnceLock::new();
    let common = COMMON.get_or_init(|| COMMON_PASSWORDS.lines().collect());
    common.contains(password.to_lowercase().as_str())
}

/// An upper-case letter, as a pattern class: Unicode general category `Lu`.
pub(crate) const UPPER_CASE_LETTER_CLASS: &str = r"\p{Lu}";
/// A lower-case letter: general category `Ll`.
pub(crate) const LOWER_CASE_LETTER_CLASS: &str = r"\p{Ll}";
/// A digit: general category `N` (`Nd`, `Nl`, `No`).
pub(crate) const DIGIT_CLASS: &str = r"\p{N}";
/// Neither letter (`L`) nor digit (`N`).
pub(crate) const SPECIAL_CLASS: &str = r"[^\p{L}\p{N}]";

/// Whether `c` is in [`UPPER_CASE_LETTER_CLASS`].
fn is_upper_case_letter(c: char) -> bool {
    c.general_category() == GeneralCategory::UppercaseLetter
}

/// Whether `c` is in [`LOWER_CASE_LETTER_CLASS`].
fn is_lower_case_letter(c: char) -> bool {
    c.general_category() == GeneralCategory::LowercaseLetter
}

/// Whether `c` is in [`DIGIT_CLASS`].
fn is_digit(c: char) -> bool {
    c.general_category_group() == GeneralCategoryGroup::Number
}

/// Whether `c` is in [`SPECIAL_CLASS`].
fn is_special(c: char) -> bool {
    !matches!(
        c.general_category_group(),
        GeneralCategoryGroup::Letter | GeneralCategoryGroup::Number
    )
}

/// The spec's password rule: 8..128 characters with an upper-case letter, a lower-case letter,
/// a digit and a character that is neither letter nor digit, and not one of the 10,000 most
/// common passwords (case-insensitively). `None` when the password passes. The classes are
/// Unicode general categories, the ones the OpenAPI document's pattern names
/// (the `*_CLASS` constants, which the OpenAPI document's password pattern is made of), so a
/// client's check and the server's agree.
pub(crate) fn check_password_rule(field: &str, password: &str) -> Option<FieldError> {
    let length = password.chars().count();
    if length < MIN_PASSWORD_CHARS {
        return Some(FieldError::new(
            field,
            "too_short",
            format!("Must be at least {MIN_PASSWORD_CHARS} characters long."),
        ));
    }
    if length > MAX_PASSWORD_CHARS {
        return Some(FieldError::new(
            field,
            "too_long",
            format!("Must be at most {MAX_PASSWORD_CHARS} characters long."),
        ));
    }
    let has_upper = password.chars().any(is_upper_case_letter);
    let has_lower = password.chars().any(is_lower_case_letter);
    let has_digit = password.chars().any(is_digit);
    let has_special = password.chars().any(is_special);
    if !(has_upper && has_lower && has_digit && has_special) {
        return Some(FieldError::new(
            field,
            "too_weak",
            "Must contain an upper-case letter, a lower-case letter, a digit and a special character.",
        ));
    }
    is_common_password(password).then(|| {
        FieldError::new(
            field,
            "too_common",
            "Is one of the most common passwords; choose another.",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_needs_every_character_class() {
        assert!(check_password_rule("password", "Str0ng!pass").is_none());
        assert!(check_password_rule("password", "Sh0rt!").is_some());
        assert!(check_password_rule("password", "nouppercase1!").is_some());
        assert!(check_password_rule("password", "NoDigits!!").is_some());
        assert!(check_password_rule("password", "NoSpecial11").is_some());
        assert!(check_password_rule("password", &"Aa1!".repeat(33)).is_some());
        assert!(check_password_rule("password", &"Aa1!".repeat(32)).is_none());
        assert!(check_password_rule("password", "Ünïcödé1€").is_none());
        // Letters by general category: a circled letter is a symbol, a feminine ordinal
        // indicator no lower-case letter, a combining accent no letter at all.
        assert!(check_password_rule("password", "ⓐbcdefg1!").is_some());
        assert!(check_password_rule("password", "Ⓐbcdefg1!").is_some());
        assert!(check_password_rule("password", "ªBCDEFG1!").is_some());
        assert!(check_password_rule("password", "Abcdefg1\u{301}").is_none());
        assert!(check_password_rule("password", "Abcdefg½!").is_none());
    }

    /// Every assigned code point is in each published class exactly when the rule says so,
    /// read by a regex engine with Unicode classes (all of planes 0 and 1, a sample beyond).
    #[test]
    fn rule_classes_are_the_published_pattern_classes() {
        let unassigned = regex::Regex::new(r"^\p{Cn}$").expect("compiles");
        /// A published class and the rule's test of it.
        type Class = (&'static str, fn(char) -> bool);
        let classes: [Class; 4] = [
            (UPPER_CASE_LETTER_CLASS, is_upper_case_letter),
            (LOWER_CASE_LETTER_CLASS, is_lower_case_letter),
            (DIGIT_CLASS, is_digit),
            (SPECIAL_CLASS, is_special),
        ];
        let code_points = (0..0x2_0000).chain((0x2_0000..=0x10_FFFF).step_by(97));
        let chars: Vec<char> = code_points.filter_map(char::from_u32).collect();
        for (class, rule) in classes {
            let pattern = regex::Regex::new(&format!("^{class}$")).expect("compiles");
            let mut buffer = [0; 4];
            for &c in &chars {
                let text = c.encode_utf8(&mut buffer);
                // Code points one Unicode version assigns and the other not yet.
                if unassigned.is_match(text) || c.general_category() == GeneralCategory::Unassigned
                {
                    continue;
                }
                // U+0295 is `Ll` in Unicode 16 (the regex crate), `Lo` from 17 on (the rule's
                // tables): a client engine's Unicode version is the residual gap.
                if c == '\u{295}' {
                    continue;
                }
                assert_eq!(
                    pattern.is_match(text),
                    rule(c),
                    "{class} and U+{:04X}",
                    u32::from(c)
                );
            }
        }
    }

    #[test]
    fn common_passwords_are_refused_in_any_case() {
        assert!(is_common_password("password1"));
        assert!(is_common_password("PassWord1"));
        let refused = check_password_rule("new_password", "P@ssw0rd").expect("refused");
        assert_eq!(refused.code, "too_common");
        assert!(check_password_rule("password", "P@ssw0rd-for-me").is_none());
        assert_eq!(COMMON_PASSWORDS.lines().count(), 10_000);
    }
}
