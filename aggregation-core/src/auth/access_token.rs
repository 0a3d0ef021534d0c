//! Access tokens: HS256 JWTs with the claims of `decisions.md`, validated with the algorithm
//! pinned, issuer and audience checked, and at most 5 s of leeway.
//!
//! Tokens are signed with `jsonwebtoken` and verified here, on every authenticated request:
//! with the HMAC key schedule computed once (rather than per token), and the header and the
//! claims decoded once each (`jsonwebtoken::decode` parses both twice). The checks are the
//! ones `jsonwebtoken::decode` makes with this module's former `Validation` (HS256 only, the
//! signature, `exp` with [`LEEWAY_SECONDS`], `iss`, `aud`, the required claims); a test holds
//! the two to the same verdicts.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac as _};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

use crate::config::Config;
use crate::crypto::hmac_sha256;

/// The claims of an access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AccessClaims {
    /// The user id.
    pub sub: Uuid,
    /// The user's email.
    pub email: String,
    /// The user's roles (`user`, `admin`).
    pub roles: Vec<String>,
    /// The session the token was issued for.
    pub session_id: Uuid,
    /// Issue time (Unix seconds).
    pub iat: i64,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Unique token id.
    pub jti: Uuid,
    /// Issuer.
    pub iss: String,
    /// Audience.
    pub aud: String,
}

#[cfg(test)]
impl AccessClaims {
    /// Claims of a `user` session for unit tests, which never sign or verify them: issuer and
    /// audience are `test`, and the token expires in an hour.
    pub(crate) fn for_tests(user_id: Uuid, session_id: Uuid) -> Self {
        Self {
            sub: user_id,
            email: "ada@example.com".to_owned(),
            roles: vec!["user".to_owned()],
            session_id,
            iat: 0,
            exp: chrono::Utc::now().timestamp() + 3600,
            jti: Uuid::now_v7(),
            iss: "test".to_owned(),
            aud: "test".to_owned(),
        }
    }
}

/// Why an access token could not be issued.
#[derive(Debug, thiserror::Error)]
#[error("access token could not be signed: {0}")]
pub(crate) struct SigningError(String);

/// How long past its `exp` a token is still accepted (clock skew between instances).
const LEEWAY_SECONDS: i64 = 5;

/// The one field of a token's header that is checked.
#[derive(Deserialize)]
struct TokenHeader {
    alg: String,
}

/// Signs and verifies access tokens.
#[derive(Clone)]
pub(crate) struct AccessTokens {
    encoding: EncodingKey,
    /// The HMAC keyed with the secret, cloned for each verification.
    verifier: Hmac<Sha256>,
    issuer: String,
    audience: String,
    ttl_seconds: i64,
}

impl AccessTokens {
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            encoding: EncodingKey::from_secret(config.jwt_secret()),
            verifier: hmac_sha256(config.jwt_secret()),
            issuer: config.jwt_issuer().to_owned(),
            audience: config.jwt_audience().to_owned(),
            ttl_seconds: i64::try_from(config.access_token_ttl().as_secs()).unwrap_or(900),
        }
    }

    /// Seconds an access token lives.
    pub(crate) fn ttl_seconds(&self) -> i64 {
        self.ttl_seconds
    }

    pub(crate) fn issue(
        &self,
        user_id: Uuid,
        email: &str,
        roles: Vec<String>,
        session_id: Uuid,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<String, SigningError> {
        let iat = now.timestamp();
        let claims = AccessClaims {
            sub: user_id,
            email: email.to_owned(),
            roles,
            session_id,
            iat,
            exp: iat.saturating_add(self.ttl_seconds),
            jti: Uuid::now_v7(),
            iss: self.issuer.clone(),
            aud: self.audience.clone(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|error| SigningError(error.to_string()))
    }

    /// The claims of a valid token; `None` for anything forged, expired or malformed.
    pub(crate) fn verify(&self, token: &str) -> Option<AccessClaims> {
        // Three base64url parts: a fourth dot lands in a part and fails its decoding.
        let (message, signature) = token.rsplit_once('.')?;
        let (header, payload) = message.split_once('.')?;
        let header: TokenHeader = decode_part(header)?;
        if header.alg != "HS256" {
            return None;
        }
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let mut mac = self.verifier.clone();
        mac.update(message.as_bytes());
        // Compared in constant time.
        mac.verify_slice(&signature).ok()?;
        // Every claim is required by the type: one missing, or of another type, fails here.
        let claims: AccessClaims = decode_part(payload)?;
        let now = chrono::Utc::now().timestamp();
        let valid = claims.exp >= now.saturating_sub(LEEWAY_SECONDS)
            && claims.iss == self.issuer
            && claims.aud == self.audience;
        valid.then_some(claims)
    }
}

/// A base64url (unpadded) JSON part of a token.
fn decode_part<T: serde::de::DeserializeOwned>(part: &str) -> Option<T> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(secret: &[u8]) -> AccessTokens {
        let config = Config::new("http://localhost:8080", secret.to_vec()).expect("valid config");
        AccessTokens::new(&config)
    }

    #[test]
    fn issued_tokens_verify_and_forgeries_do_not() {
        let issuer = tokens(&[7; 32]);
        let user = Uuid::now_v7();
        let session = Uuid::now_v7();
        let token = issuer
            .issue(
                user,
                "a@b.c",
                vec!["user".into()],
                session,
                chrono::Utc::now(),
            )
            .expect("signs");
        let claims = issuer.verify(&token).expect("verifies");
        assert_eq!(claims.sub, user);
        assert_eq!(claims.session_id, session);
        assert_eq!(claims.exp - claims.iat, 900);
        assert!(tokens(&[8; 32]).verify(&token).is_none());
        assert!(issuer.verify("not.a.token").is_none());
        let expired = issuer
            .issue(
                user,
                "a@b.c",
                vec![],
                session,
                chrono::Utc::now() - chrono::TimeDelta::seconds(1000),
            )
            .expect("signs");
        assert!(issuer.verify(&expired).is_none());
    }

    /// What `jsonwebtoken::decode` answered with the validation this module used before it
    /// verified tokens itself.
    fn jsonwebtoken_verdict(secret: &[u8], token: &str) -> Option<AccessClaims> {
        let config = Config::new("http://localhost:8080", secret.to_vec()).expect("valid config");
        let mut validation = jsonwebtoken::Validation::new(Algorithm::HS256);
        validation.leeway = 5;
        validation.set_issuer(&[config.jwt_issuer()]);
        validation.set_audience(&[config.jwt_audience()]);
        validation.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        jsonwebtoken::decode::<AccessClaims>(
            token,
            &jsonwebtoken::DecodingKey::from_secret(secret),
            &validation,
        )
        .ok()
        .map(|data| data.claims)
    }

    /// Signs any header and claims (JSON text, as sent) with `secret`.
    fn signed(secret: &[u8], header: &str, claims: &str) -> String {
        let message = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims)
        );
        let mut mac = hmac_sha256(secret);
        mac.update(message.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{message}.{signature}")
    }

    #[test]
    fn verdicts_are_those_of_jsonwebtoken() {
        let secret = [7_u8; 32];
        let verifier = tokens(&secret);
        let now = chrono::Utc::now().timestamp();
        let claims = |exp: i64, iss: &str, aud: &str| {
            format!(
                r#"{{"sub":"0190b5c8-7c1e-7cc4-9f3e-3f0a3f0a3f0a","email":"a@b.c","roles":["user"],"session_id":"0190b5c8-7c1e-7cc4-9f3e-3f0a3f0a3f0b","iat":{iat},"exp":{exp},"jti":"0190b5c8-7c1e-7cc4-9f3e-3f0a3f0a3f0c","iss":"{iss}","aud":"{aud}"}}"#,
                iat = exp - 900
            )
        };
        let issuer = "http://localhost:8080";
        let audience = "http://localhost:8080/api/v1";
        let good = claims(now + 600, issuer, audience);
        let hs256 = r#"{"typ":"JWT","alg":"HS256"}"#;
        let issued = verifier
            .issue(
                Uuid::now_v7(),
                "a@b.c",
                vec!["user".to_owned(), "admin".to_owned()],
                Uuid::now_v7(),
                chrono::Utc::now(),
            )
            .expect("signs");
        let valid = signed(&secret, hs256, &good);
        let mut cases = vec![
            ("issued", issued.clone()),
            ("hand-signed", valid.clone()),
            ("alg first", signed(&secret, r#"{"alg":"HS256"}"#, &good)),
            (
                "no typ, kid",
                signed(&secret, r#"{"alg":"HS256","kid":"k1"}"#, &good),
            ),
            ("alg none", signed(&secret, r#"{"alg":"none"}"#, &good)),
            ("alg HS384", signed(&secret, r#"{"alg":"HS384"}"#, &good)),
            ("alg missing", signed(&secret, r#"{"typ":"JWT"}"#, &good)),
            ("header not JSON", signed(&secret, "HS256", &good)),
            ("claims not JSON", signed(&secret, hs256, "claims")),
            ("other key", signed(&[8; 32], hs256, &good)),
            (
                "expired",
                signed(&secret, hs256, &claims(now - 60, issuer, audience)),
            ),
            (
                "within leeway",
                signed(&secret, hs256, &claims(now - 2, issuer, audience)),
            ),
            (
                "other issuer",
                signed(&secret, hs256, &claims(now + 60, "http://evil", audience)),
            ),
            (
                "other audience",
                signed(&secret, hs256, &claims(now + 60, issuer, issuer)),
            ),
            (
                "audience list",
                signed(
                    &secret,
                    hs256,
                    &good.replace(
                        &format!(r#""aud":"{audience}""#),
                        &format!(r#""aud":["{audience}"]"#),
                    ),
                ),
            ),
            (
                "exp missing",
                signed(
                    &secret,
                    hs256,
                    &good.replace(&format!(r#","exp":{}"#, now + 600), ""),
                ),
            ),
            (
                "exp text",
                signed(
                    &secret,
                    hs256,
                    &good.replace(&format!("{}", now + 600), &format!(r#""{}""#, now + 600)),
                ),
            ),
            (
                "exp negative",
                signed(&secret, hs256, &claims(-5, issuer, audience)),
            ),
            (
                "sub missing",
                signed(
                    &secret,
                    hs256,
                    &good.replace(r#""sub":"0190b5c8-7c1e-7cc4-9f3e-3f0a3f0a3f0a","#, ""),
                ),
            ),
            (
                "two parts",
                valid
                    .rsplit_once('.')
                    .map(|(message, _)| message.to_owned())
                    .unwrap_or_default(),
            ),
            (
                "four parts",
                format!("{valid}.{}", URL_SAFE_NO_PAD.encode("x")),
            ),
            ("padded signature", format!("{valid}=")),
            ("empty", String::new()),
            ("dots", "..".to_owned()),
        ];
        // Every single-character change of a valid token.
        for at in 0..valid.len() {
            let mut bytes = valid.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            if let Ok(mutated) = String::from_utf8(bytes) {
                cases.push(("mutated", mutated));
            }
        }
        for (name, token) in &cases {
            assert_eq!(
                verifier.verify(token),
                jsonwebtoken_verdict(&secret, token),
                "{name}: {token}"
            );
        }
        assert!(verifier.verify(&issued).is_some());
        assert!(verifier.verify(&valid).is_some());
    }
}
