//! Standard Webhooks signatures: `whsec_` secrets and the `v1` HMAC-SHA256 signature of
//! `"{webhook-id}.{webhook-timestamp}.{body}"`.

use base64::Engine as _;
use rand::RngExt as _;

/// The prefix of a secret as handed to the user.
const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a new secret (the specification asks for 24 to 64).
const SECRET_BYTES: usize = 32;

/// A signing secret: the raw key bytes. Never logged (its `Debug` is redacted).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SigningSecret(Vec<u8>);

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

impl SigningSecret {
    /// A fresh random secret.
    pub(crate) fn generate() -> Self {
        let bytes: [u8; SECRET_BYTES] = rand::rng().random();
        Self(bytes.to_vec())
    }

    /// The secret from its stored (decrypted) key bytes.
    #[cfg(any(feature = "webhooks", test))]
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// The key bytes, to encrypt for storage.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The form handed to the user once: `whsec_` and the standard base64 of the key.
    pub(crate) fn to_whsec(&self) -> String {
        format!(
            "{SECRET_PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(&self.0)
        )
    }

    /// The `webhook-signature` header value of a message: `v1,` and the standard base64 of
    /// HMAC-SHA256 over `"{id}.{timestamp}.{body}"`.
    #[cfg(any(feature = "webhooks", test))]
    pub(crate) fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        use hmac::Mac as _;
        let mut mac = crate::crypto::hmac_sha256(&self.0);
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        let digest = mac.finalize().into_bytes();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }
}

/// The secrets that sign an attempt: the endpoint's current one, and for a while after a
/// rotation the one it replaced.
#[cfg(feature = "webhooks")]
#[derive(Debug, Clone)]
pub(crate) struct SigningSecrets {
    /// The current secret.
    pub(crate) current: SigningSecret,
    /// The secret before the last rotation, while it still signs.
    pub(crate) previous: Option<SigningSecret>,
}

#[cfg(feature = "webhooks")]
impl SigningSecrets {
    /// The `webhook-signature` header value: the current secret's `v1,` signature, then the
    /// previous secret's, space-separated as Standard Webhooks allows, so a receiver that
    /// still knows only the previous secret verifies the delivery too.
    pub(crate) fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let current = self.current.sign(id, timestamp, body);
        match &self.previous {
            Some(previous) => format!("{current} {}", previous.sign(id, timestamp, body)),
            None => current,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The secret of the Standard Webhooks reference libraries' signing test.
    fn reference_secret() -> SigningSecret {
        let key = base64::engine::general_purpose::STANDARD
            .decode("C2FVsBQIhrscChlQIMV+b5sSYspob7oD")
            .expect("base64");
        SigningSecret::from_bytes(key)
    }

    #[test]
    fn signs_the_standard_webhooks_reference_vector() {
        let secret = reference_secret();
        assert_eq!(secret.to_whsec(), "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD");
        assert_eq!(
            secret.sign(
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1_649_367_553,
                br#"{"email":"test@example.com","username":"test_user"}"#,
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn generated_secrets_are_fresh_whsec_keys_and_never_debug_printed() {
        let secret = SigningSecret::generate();
        assert_eq!(secret.as_bytes().len(), SECRET_BYTES);
        let whsec = secret.to_whsec();
        let key = base64::engine::general_purpose::STANDARD
            .decode(whsec.strip_prefix("whsec_").expect("prefix"))
            .expect("base64");
        assert_eq!(key, secret.as_bytes());
        assert_ne!(SigningSecret::generate(), secret);
        assert!(!format!("{secret:?}").contains(&whsec[6..]));
        // Another id, time or body changes the signature.
        let base = secret.sign("a", 1, b"{}");
        assert_ne!(secret.sign("b", 1, b"{}"), base);
        assert_ne!(secret.sign("a", 2, b"{}"), base);
        assert_ne!(secret.sign("a", 1, b"{ }"), base);
    }

    #[cfg(feature = "webhooks")]
    #[test]
    fn a_previous_secret_signs_beside_the_current_one() {
        let current = SigningSecret::generate();
        let previous = reference_secret();
        let both = SigningSecrets {
            current: current.clone(),
            previous: Some(previous.clone()),
        };
        let header = both.sign("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1_649_367_553, b"{}");
        let signatures: Vec<&str> = header.split(' ').collect();
        assert_eq!(
            signatures,
            [
                current.sign("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1_649_367_553, b"{}"),
                previous.sign("msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1_649_367_553, b"{}"),
            ]
        );
        let alone = SigningSecrets {
            current: current.clone(),
            previous: None,
        };
        assert_eq!(alone.sign("a", 1, b"{}"), current.sign("a", 1, b"{}"));
    }
}
