//! Random tokens and digests.
//!
//! Tokens handed to people (refresh, verification, reset) are random and stored only as their
//! SHA-256 digest, so a leaked database does not leak a usable token.

use base64::Engine as _;
use rand::RngExt as _;
use sha2::{Digest as _, Sha256};

#[cfg(feature = "testing")]
pub use stored::token_digest;
#[cfg(not(feature = "testing"))]
pub(crate) use stored::token_digest;

/// The digest under which tokens are stored: the crate's own, and public with the `testing`
/// feature for suites that look stored rows up (a store takes OAuth states by digest).
mod stored {
    use sha2::{Digest as _, Sha256};

    /// SHA-256 of a token, the form in which tokens are stored and looked up.
    #[cfg_attr(
        not(feature = "testing"),
        expect(unreachable_pub, reason = "public with the `testing` feature only")
    )]
    pub fn token_digest(token: &str) -> Vec<u8> {
        Sha256::digest(token.as_bytes()).to_vec()
    }
}

/// 32 random bytes, base64url without padding (43 characters): refresh tokens and OAuth states.
pub(crate) fn random_urlsafe_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// 32 random bytes as 64 lowercase hex characters: verification and reset tokens.
pub(crate) fn random_hex_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

/// 16 random bytes as 32 lower-case hex digits (ASCII): trace ids. On the stack, since every
/// request without an incoming trace id takes one.
pub(crate) fn random_trace_id() -> [u8; 32] {
    random_hex_digits::<16, 32>()
}

/// 8 random bytes as 16 lower-case hex digits (ASCII): span ids of `traceparent`.
pub(crate) fn random_span_id() -> [u8; 16] {
    random_hex_digits::<8, 16>()
}

/// `BYTES` random bytes as `DIGITS` (twice as many) lower-case hex digits.
fn random_hex_digits<const BYTES: usize, const DIGITS: usize>() -> [u8; DIGITS] {
    let bytes: [u8; BYTES] = rand::rng().random();
    let mut digits = [b'0'; DIGITS];
    // Only fails when DIGITS is not twice BYTES, which the callers above rule out.
    let _ = hex::encode_to_slice(bytes, &mut digits);
    digits
}

/// HMAC-SHA256 keyed with `key`: access tokens and webhook signatures.
pub(crate) fn hmac_sha256(key: &[u8]) -> hmac::Hmac<Sha256> {
    use hmac::KeyInit as _;
    match hmac::Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

/// Why a secret could not be encrypted or decrypted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// No encryption key is configured.
    #[error("no encryption key is configured")]
    NoKey,
    /// A key is not 32 bytes long.
    #[error("encryption key {0:?} must be 32 bytes")]
    KeyLength(String),
    /// Two keys share an id.
    #[error("encryption key id {0:?} is given twice")]
    DuplicateKeyId(String),
    /// The ciphertext names a key that is not configured.
    #[error("encryption key {0:?} is not configured")]
    UnknownKey(String),
    /// The ciphertext is damaged, or belongs to other associated data.
    #[error("the ciphertext does not authenticate")]
    Damaged,
}

const NONCE_LEN: usize = 12;

/// AES-256-GCM keys for secrets at rest (provider credentials, PKCE verifiers).
///
/// Each ciphertext is a random 96-bit nonce followed by the sealed message, and is bound to
/// associated data (the connection id, say) so it cannot be moved to another row. The first
/// key encrypts; every key decrypts what it encrypted, so keys rotate by putting a new one
/// first and keeping the old ones until their ciphertexts are rewritten.
#[derive(Clone, Default)]
pub struct Keyring {
    keys: Vec<(String, aes_gcm::Aes256Gcm)>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring")
            .field("key_ids", &self.key_ids().collect::<Vec<_>>())
            .finish()
    }
}

impl Keyring {
    /// A keyring from `(id, 32-byte key)` pairs; the first encrypts.
    pub fn new(keys: Vec<(String, Vec<u8>)>) -> Result<Self, CryptoError> {
        use aes_gcm::aead::KeyInit as _;
        let mut ring = Vec::with_capacity(keys.len());
        for (id, key) in keys {
            if ring.iter().any(|(existing, _)| *existing == id) {
                return Err(CryptoError::DuplicateKeyId(id));
            }
            let cipher = aes_gcm::Aes256Gcm::new_from_slice(&key)
                .map_err(|_| CryptoError::KeyLength(id.clone()))?;
            ring.push((id, cipher));
        }
        Ok(Self { keys: ring })
    }

    /// The configured key ids, the encrypting one first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(id, _)| id.as_str())
    }

    /// Encrypts `plaintext` bound to `associated_data` with the first key: the key id and
    /// nonce-prefixed ciphertext.
    pub fn encrypt(
        &self,
        plaintext: &[u8],
        associated_data: &[u8],
    ) -> Result<(String, Vec<u8>), CryptoError> {
        use aes_gcm::aead::{Aead as _, Payload};
        let (id, cipher) = self.keys.first().ok_or(CryptoError::NoKey)?;
        let nonce_bytes: [u8; NONCE_LEN] = rand::rng().random();
        let nonce = aes_gcm::Nonce::from(nonce_bytes);
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: associated_data,
                },
            )
            .map_err(|_| CryptoError::Damaged)?;
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce_bytes);
        out.extend_from_slice(&sealed);
        Ok((id.clone(), out))
    }

    /// Decrypts what [`encrypt`](Self::encrypt) produced with key `key_id` for the same
    /// associated data.
    pub fn decrypt(
        &self,
        key_id: &str,
        ciphertext: &[u8],
        associated_data: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        use aes_gcm::aead::{Aead as _, Payload};
        let (_, cipher) = self
            .keys
            .iter()
            .find(|(id, _)| id == key_id)
            .ok_or_else(|| CryptoError::UnknownKey(key_id.to_owned()))?;
        if ciphertext.len() < NONCE_LEN {
            return Err(CryptoError::Damaged);
        }
        let (nonce_bytes, sealed) = ciphertext.split_at(NONCE_LEN);
        let nonce_bytes: [u8; NONCE_LEN] =
            nonce_bytes.try_into().map_err(|_| CryptoError::Damaged)?;
        cipher
            .decrypt(
                &aes_gcm::Nonce::from(nonce_bytes),
                Payload {
                    msg: sealed,
                    aad: associated_data,
                },
            )
            .map_err(|_| CryptoError::Damaged)
    }
}

/// The PKCE S256 challenge of a verifier: base64url (no padding) of its SHA-256.
pub(crate) fn pkce_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A fresh PKCE pair, `(challenge, verifier)`: the verifier is 32 random bytes as base64url
/// (43 characters, RFC 7636 §4.1), the challenge its S256 [`pkce_challenge`].
pub(crate) fn new_pkce_pair() -> (String, String) {
    let verifier = random_urlsafe_token();
    (pkce_challenge(&verifier), verifier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_is_s256_as_oauth2_computes_it() {
        // RFC 7636 appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let (challenge, verifier) = oauth2::PkceCodeChallenge::new_random_sha256();
        assert_eq!(challenge.method().as_str(), "S256");
        assert_eq!(verifier.secret().len(), 43);
        assert_eq!(pkce_challenge(verifier.secret()), challenge.as_str());
    }

    #[test]
    fn pkce_pairs_are_fresh_s256_pairs_shaped_as_oauth2_makes_them() {
        let (challenge, verifier) = new_pkce_pair();
        let (oauth2_challenge, oauth2_verifier) = oauth2::PkceCodeChallenge::new_random_sha256();
        assert_eq!(verifier.len(), oauth2_verifier.secret().len());
        assert_eq!(challenge.len(), oauth2_challenge.as_str().len());
        assert_eq!(challenge, pkce_challenge(&verifier));
        assert!(
            verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_ne!(new_pkce_pair().1, verifier);
    }

    #[test]
    fn tokens_have_their_documented_shapes() {
        assert_eq!(random_urlsafe_token().len(), 43);
        let hex_token = random_hex_token();
        assert_eq!(hex_token.len(), 64);
        assert!(hex_token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(random_hex_token(), hex_token);
        assert_eq!(token_digest("abc").len(), 32);
    }

    #[test]
    fn keyring_round_trips_binds_associated_data_and_rotates() {
        let old = Keyring::new(vec![("k1".into(), vec![1; 32])]).unwrap();
        let (key_id, sealed) = old.encrypt(b"secret", b"connection-a").unwrap();
        assert_eq!(key_id, "k1");
        assert_ne!(&sealed[NONCE_LEN..], b"secret");
        assert_eq!(
            old.decrypt("k1", &sealed, b"connection-a").unwrap(),
            b"secret"
        );
        assert!(matches!(
            old.decrypt("k1", &sealed, b"connection-b"),
            Err(CryptoError::Damaged)
        ));
        assert!(matches!(
            old.decrypt("k1", &sealed[..5], b""),
            Err(CryptoError::Damaged)
        ));
        let rotated =
            Keyring::new(vec![("k2".into(), vec![2; 32]), ("k1".into(), vec![1; 32])]).unwrap();
        assert_eq!(
            rotated.decrypt("k1", &sealed, b"connection-a").unwrap(),
            b"secret"
        );
        assert_eq!(rotated.encrypt(b"x", b"").unwrap().0, "k2");
        assert!(matches!(
            Keyring::new(vec![("short".into(), vec![0; 16])]),
            Err(CryptoError::KeyLength(_))
        ));
        assert!(matches!(
            Keyring::default().encrypt(b"x", b""),
            Err(CryptoError::NoKey)
        ));
        assert!(matches!(
            rotated.decrypt("k9", &sealed, b""),
            Err(CryptoError::UnknownKey(_))
        ));
    }

    #[test]
    fn pkce_challenge_is_base64url_sha256() {
        // Expected value computed independently (Python hashlib + base64.urlsafe_b64encode).
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_bEhEYaEkXycM"),
            "OcL7E1BvooT_4JOFSkU0jMRvygj3JGoe4ndjLFBnbbQ"
        );
    }
}
