//! Password rules and the errors of hashing ([`super::hashing`] does the hashing).

use std::collections::HashSet;
use std::sync::OnceLock;

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

/// The spec's password rule: 8..128 characters with an upper-case letter, a lower-case letter,
/// a digit and a character that is neither letter nor digit, and not one of the 10,000 most
/// common passwords (case-insensitively). `None` when the password passes.
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
    let has_upper = password.chars().any(char::is_uppercase);
    let has_lower = password.chars().any(char::is_lowercase);
    let has_digit = password.chars().any(|c| c.is_numeric());
    let has_special = password.chars().any(|c| !c.is_alphanumeric());
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
