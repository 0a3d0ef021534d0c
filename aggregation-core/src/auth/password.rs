//! Password rules and argon2id hashing, off the async worker threads.

use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};
use argon2::{Algorithm, Argon2, Params, Version};

use crate::problem::FieldError;

/// Shortest accepted password, in Unicode characters.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Longest accepted password, in Unicode characters; never truncated.
pub const MAX_PASSWORD_CHARS: usize = 128;

/// Why hashing failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PasswordError {
    /// The hasher failed or its task was cancelled.
    #[error("password hashing failed: {0}")]
    Hashing(String),
}

/// The spec's password rule: 8..128 characters with an upper-case letter, a lower-case letter,
/// a digit and a character that is neither letter nor digit. `None` when the password passes.
pub fn check_password_rule(field: &str, password: &str) -> Option<FieldError> {
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
    if has_upper && has_lower && has_digit && has_special {
        None
    } else {
        Some(FieldError::new(
            field,
            "too_weak",
            "Must contain an upper-case letter, a lower-case letter, a digit and a special character.",
        ))
    }
}

fn hasher() -> Argon2<'static> {
    // OWASP's argon2id recommendation: 19 MiB, 2 passes, 1 lane.
    let params = Params::new(19_456, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Hashes a password with argon2id on the blocking pool.
pub async fn hash_password(password: &str) -> Result<String, PasswordError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        hasher()
            .hash_password(password.as_bytes())
            .map(|hash| hash.to_string())
            .map_err(|error| PasswordError::Hashing(error.to_string()))
    })
    .await
    .map_err(|error| PasswordError::Hashing(error.to_string()))?
}

/// Checks a password against a stored hash on the blocking pool. A malformed hash never matches.
pub async fn verify_password(hash: &str, password: &str) -> bool {
    let hash = hash.to_owned();
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        hasher()
            .verify_password(password.as_bytes(), hash.as_str())
            .is_ok()
    })
    .await
    .unwrap_or(false)
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

    #[tokio::test]
    async fn hashes_verify_and_reject() {
        let hash = hash_password("Str0ng!pass").await.expect("hashing works");
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(verify_password(&hash, "Str0ng!pass").await);
        assert!(!verify_password(&hash, "Str0ng!pasS").await);
        assert!(!verify_password("not a hash", "Str0ng!pass").await);
    }
}
