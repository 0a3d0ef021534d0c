//! Random tokens and digests.
//!
//! Tokens handed to people (refresh, verification, reset) are random and stored only as their
//! SHA-256 digest, so a leaked database does not leak a usable token.

use base64::Engine as _;
use rand::RngExt as _;
use sha2::{Digest as _, Sha256};

/// SHA-256 of a token, the form in which tokens are stored and looked up.
pub fn token_digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// 32 random bytes, base64url without padding (43 characters): refresh tokens and OAuth states.
pub fn random_urlsafe_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// 32 random bytes as 64 lowercase hex characters: verification and reset tokens.
pub fn random_hex_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

/// 16 random bytes as 32 hex characters: trace ids.
pub fn random_trace_id() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

/// 8 random bytes as 16 hex characters: span ids of `traceparent`.
pub fn random_span_id() -> String {
    let bytes: [u8; 8] = rand::rng().random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_their_documented_shapes() {
        assert_eq!(random_urlsafe_token().len(), 43);
        let hex_token = random_hex_token();
        assert_eq!(hex_token.len(), 64);
        assert!(hex_token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(random_hex_token(), hex_token);
        assert_eq!(token_digest("abc").len(), 32);
    }
}
