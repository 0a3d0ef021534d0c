//! Access tokens: HS256 JWTs with the claims of `decisions.md`, validated with the algorithm
//! pinned, issuer and audience checked, and at most 5 s of leeway.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::Config;

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

/// Signs and verifies access tokens.
#[derive(Clone)]
pub(crate) struct AccessTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    issuer: String,
    audience: String,
    ttl_seconds: i64,
}

impl AccessTokens {
    pub(crate) fn new(config: &Config) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 5;
        validation.set_issuer(&[config.jwt_issuer()]);
        validation.set_audience(&[config.jwt_audience()]);
        validation.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
        Self {
            encoding: EncodingKey::from_secret(config.jwt_secret()),
            decoding: DecodingKey::from_secret(config.jwt_secret()),
            validation,
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
        jsonwebtoken::decode::<AccessClaims>(token, &self.decoding, &self.validation)
            .ok()
            .map(|data| data.claims)
    }
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
}
