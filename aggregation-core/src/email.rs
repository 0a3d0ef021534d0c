//! Email addresses as account keys: how the configuration, sign-up, login and the admin grants
//! compare them.

/// Trims and lowercases an email: the key under which accounts are unique.
pub(crate) fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}
