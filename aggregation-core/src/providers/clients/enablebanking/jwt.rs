//! The application's JWT: RS256 with the application's private key, `kid` the application
//! id, `iss` `enablebanking.com`, `aud` `api.enablebanking.com`, valid for an hour and reused
//! until five minutes before it ends (one signature an hour, not one per request).

use std::sync::Mutex;

use base64::Engine as _;
use chrono::{DateTime, TimeDelta, Utc};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

use crate::providers::ProviderError;

/// Issuer of the application JWT.
pub(super) const ISSUER: &str = "enablebanking.com";
/// Audience of the application JWT.
pub(super) const AUDIENCE: &str = "api.enablebanking.com";
/// How long a signed JWT is valid (the API accepts at most a day; an hour limits a leak).
const LIFETIME: TimeDelta = TimeDelta::hours(1);
/// A cached JWT this close to its end is signed again.
const RENEW_BEFORE: TimeDelta = TimeDelta::minutes(5);

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
}

struct Signed {
    token: String,
    expires_at: DateTime<Utc>,
}

/// Signs and caches the application JWT.
pub(super) struct ApplicationToken {
    application_id: String,
    key: EncodingKey,
    cached: Mutex<Option<Signed>>,
    #[cfg(test)]
    signatures: std::sync::atomic::AtomicU32,
}

impl ApplicationToken {
    /// A signer with this key (PEM, PKCS#1 or PKCS#8 RSA), checked by signing once.
    /// [`ProviderError::Configuration`] when the key is not a usable RSA private key.
    pub(super) fn new(application_id: &str, private_key_pem: &[u8]) -> Result<Self, ProviderError> {
        if application_id.trim().is_empty() {
            return Err(ProviderError::Configuration(
                "the Enable Banking application id is empty".to_owned(),
            ));
        }
        let key = EncodingKey::from_rsa_der(&rsa_private_key_der(private_key_pem)?);
        let signer = Self {
            application_id: application_id.trim().to_owned(),
            key,
            cached: Mutex::new(None),
            #[cfg(test)]
            signatures: std::sync::atomic::AtomicU32::new(0),
        };
        let first = signer.sign(Utc::now()).map_err(|error| {
            ProviderError::Configuration(format!(
                "the Enable Banking private key cannot sign: {error}"
            ))
        })?;
        if let Ok(mut cached) = signer.cached.lock() {
            *cached = Some(first);
        }
        Ok(signer)
    }

    /// The application id (the JWT's `kid`).
    pub(super) fn application_id(&self) -> &str {
        &self.application_id
    }

    /// A valid JWT: the cached one, or a new one when it ends within five minutes.
    pub(super) fn bearer(&self) -> Result<String, ProviderError> {
        let now = Utc::now();
        let mut cached = self
            .cached
            .lock()
            .map_err(|_| ProviderError::Configuration("the JWT cache is poisoned".to_owned()))?;
        if let Some(signed) = cached.as_ref()
            && signed.expires_at - now > RENEW_BEFORE
        {
            return Ok(signed.token.clone());
        }
        let signed = self.sign(now).map_err(|error| {
            ProviderError::Configuration(format!("the application JWT cannot be signed: {error}"))
        })?;
        let token = signed.token.clone();
        *cached = Some(signed);
        Ok(token)
    }

    fn sign(&self, now: DateTime<Utc>) -> Result<Signed, jsonwebtoken::errors::Error> {
        let expires_at = now + LIFETIME;
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.application_id.clone());
        let claims = Claims {
            iss: ISSUER,
            aud: AUDIENCE,
            iat: now.timestamp(),
            exp: expires_at.timestamp(),
        };
        let token = jsonwebtoken::encode(&header, &claims, &self.key)?;
        #[cfg(test)]
        self.signatures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Signed { token, expires_at })
    }

    /// How many JWTs were signed.
    #[cfg(test)]
    pub(super) fn signatures(&self) -> u32 {
        self.signatures.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Makes the cached JWT look as if it ended within `left`.
    #[cfg(test)]
    pub(super) fn age_cached(&self, left: TimeDelta) {
        if let Ok(mut cached) = self.cached.lock()
            && let Some(signed) = cached.as_mut()
        {
            signed.expires_at = Utc::now() + left;
        }
    }
}

/// The PKCS#1 DER of an RSA private key in PEM, PKCS#1 (`RSA PRIVATE KEY`) or unencrypted
/// PKCS#8 (`PRIVATE KEY`). Read here rather than through jsonwebtoken's PEM feature, which
/// would add two ASN.1 crates for these few lines.
fn rsa_private_key_der(pem: &[u8]) -> Result<Vec<u8>, ProviderError> {
    let refused = |why: &str| {
        ProviderError::Configuration(format!(
            "the Enable Banking private key is not an RSA private key in PEM: {why}"
        ))
    };
    let text = std::str::from_utf8(pem).map_err(|_| refused("not text"))?;
    let begin = text
        .find("-----BEGIN ")
        .ok_or_else(|| refused("no BEGIN line"))?;
    let rest = &text[begin + "-----BEGIN ".len()..];
    let label_end = rest
        .find("-----")
        .ok_or_else(|| refused("a damaged BEGIN line"))?;
    let label = &rest[..label_end];
    let body_and_end = &rest[label_end + "-----".len()..];
    let end = body_and_end
        .find("-----END ")
        .ok_or_else(|| refused("no END line"))?;
    let body: String = body_and_end[..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| refused("the body is not base64"))?;
    match label {
        "RSA PRIVATE KEY" => Ok(der),
        "PRIVATE KEY" => pkcs8_rsa_key(&der).ok_or_else(|| refused("not a PKCS#8 RSA key")),
        "ENCRYPTED PRIVATE KEY" => Err(refused("encrypted keys are not supported")),
        other => Err(refused(&format!("a {other} is not a private key"))),
    }
}

/// The OID of rsaEncryption (1.2.840.113549.1.1.1), DER-encoded.
const RSA_ENCRYPTION_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// The RSAPrivateKey inside a PKCS#8 PrivateKeyInfo:
/// `SEQUENCE { INTEGER version, SEQUENCE { OID, ... }, OCTET STRING key, ... }`.
fn pkcs8_rsa_key(der: &[u8]) -> Option<Vec<u8>> {
    let (0x30, info, _) = der_element(der)? else {
        return None;
    };
    let (0x02, _, rest) = der_element(info)? else {
        return None;
    };
    let (0x30, algorithm, rest) = der_element(rest)? else {
        return None;
    };
    let (0x06, oid, _) = der_element(algorithm)? else {
        return None;
    };
    let (0x04, key, _) = der_element(rest)? else {
        return None;
    };
    (oid == RSA_ENCRYPTION_OID).then(|| key.to_vec())
}

/// One DER element: its tag, its content and what follows it.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, rest) = rest.split_at(count);
        let length = bytes
            .iter()
            .fold(0usize, |length, byte| (length << 8) | usize::from(*byte));
        (length, rest)
    };
    if rest.len() < length {
        return None;
    }
    let (content, rest) = rest.split_at(length);
    Some((tag, content, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    /// The public key's DER (SubjectPublicKeyInfo, which jsonwebtoken's RSA verification
    /// reads from its inner PKCS#1 key).
    fn public_key_der() -> Vec<u8> {
        let body: String = TEST_PUBLIC_KEY
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("base64");
        // SEQUENCE { SEQUENCE algorithm, BIT STRING { 0 unused bits, RSAPublicKey } }
        let (_, info, _) = der_element(&der).expect("spki");
        let (_, _, rest) = der_element(info).expect("algorithm");
        let (_, bits, _) = der_element(rest).expect("bit string");
        bits[1..].to_vec()
    }

    use super::super::{TEST_KEY, TEST_PUBLIC_KEY};

    #[derive(serde::Deserialize)]
    struct Read {
        iss: String,
        aud: String,
        iat: i64,
        exp: i64,
    }

    #[test]
    fn the_jwt_names_the_application_and_verifies() {
        let signer = ApplicationToken::new("app-123", TEST_KEY.as_bytes()).expect("signer");
        let token = signer.bearer().expect("token");
        let header = jsonwebtoken::decode_header(&token).expect("header");
        assert_eq!(header.alg, Algorithm::RS256);
        assert_eq!(header.kid.as_deref(), Some("app-123"));
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_audience(&[AUDIENCE]);
        validation.set_issuer(&[ISSUER]);
        let key = DecodingKey::from_rsa_der(&public_key_der());
        let claims = jsonwebtoken::decode::<Read>(&token, &key, &validation)
            .expect("verifies")
            .claims;
        assert_eq!(
            (claims.iss.as_str(), claims.aud.as_str()),
            (ISSUER, AUDIENCE)
        );
        assert!(claims.exp - claims.iat <= 3600);
        assert!(claims.exp > Utc::now().timestamp());
    }

    #[test]
    fn the_jwt_is_reused_until_close_to_its_end() {
        let signer = ApplicationToken::new("app-123", TEST_KEY.as_bytes()).expect("signer");
        let first = signer.bearer().expect("token");
        for _ in 0..10 {
            assert_eq!(signer.bearer().expect("token"), first);
        }
        assert_eq!(signer.signatures(), 1);
        signer.age_cached(TimeDelta::minutes(4));
        let renewed = signer.bearer().expect("token");
        assert_eq!(signer.signatures(), 2);
        assert_eq!(signer.bearer().expect("token"), renewed);
    }

    #[test]
    fn pkcs1_keys_sign_too() {
        let pkcs8 = rsa_private_key_der(TEST_KEY.as_bytes()).expect("pkcs8");
        let body = base64::engine::general_purpose::STANDARD.encode(&pkcs8);
        let pkcs1 =
            format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\n");
        let signer = ApplicationToken::new("app", pkcs1.as_bytes()).expect("signer");
        assert!(signer.bearer().is_ok());
    }

    #[test]
    fn bad_keys_are_refused() {
        for bad in ["", "not a key", TEST_PUBLIC_KEY] {
            assert!(matches!(
                ApplicationToken::new("app", bad.as_bytes()),
                Err(ProviderError::Configuration(_))
            ));
        }
        assert!(ApplicationToken::new(" ", TEST_KEY.as_bytes()).is_err());
    }
}
