//! Users, credentials and sessions: registration, email verification, login, refresh-token
//! rotation with reuse detection, logout and password reset.
//!
//! Everything here works on plain values; `api/` turns results into HTTP responses.
//!
//! # Refresh-token reuse
//!
//! Presenting a refresh token that was already rotated away revokes its whole session (reason
//! `token_reuse`): whoever holds it may have stolen it. One exception keeps concurrent refreshes
//! safe. When a client sends the same token twice at once, exactly one request rotates it; the
//! other may read the token only after the winner committed and so see it as rotated. Within
//! [`Config::refresh_reuse_interval`] (default 2 s) of the rotation such a token is refused with
//! 401 and the session stays, so the winner's new refresh token keeps working. Later reuse
//! revokes the session. The cost is that a thief who replays a stolen token within that short
//! window is refused without the session being revoked.
//!
//! # Login timing
//!
//! A login with an unknown email verifies the password against a dummy argon2 hash, so that it
//! takes as long as a wrong password. That hash is computed (on the blocking pool) as soon as
//! the service is built, so the first such login does not pay for two hashes.
//!
//! # Failed-login throttle
//!
//! With [`Config::login_failure_limit`] (on by default: 10 failures, refilled at 10 per hour),
//! failed logins (unknown email or wrong password) are counted per account **and client
//! network** (the /24 of an IPv4 client, the /64 of an IPv6 one), and once a bucket is empty a
//! login with the **right** password fails too, with the very same
//! [`AuthError::InvalidCredentials`] a wrong password gets:
//!
//! * each network may fail at most the limit for one account;
//! * networks from which the account has not logged in within 30 days share one more bucket of
//!   the limit: once their failures used it up, every such network is refused;
//! * a network from which the account logged in within 30 days (a *known* network, remembered
//!   by a keyed digest in the store) is never refused because of other networks' failures, so
//!   strangers cannot lock the owner out of home.
//!
//! Unknown emails have buckets exactly like known ones, so the throttle tells nothing about
//! which accounts exist; a successful login takes no token. The password is verified first in
//! every case (the same argon2 work), and then each path makes the same store calls (one read
//! of the known networks, then the limiter: a failure records, the right password peeks), so
//! the answer's timing does not show whether the login was throttled either. See
//! [`LoginFailureLimit`](crate::LoginFailureLimit) and the `throttle` module.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use crate::config::Config;
use crate::crypto::{random_hex_token, random_urlsafe_token, token_digest};
use crate::dates;
use crate::email::normalize_email;
use crate::events::{DomainEvent, DurableEvent, Event, Events, PasswordChanged};
use crate::mail::{Email, MailPermit, MailQueue};
use crate::sessions::revocation_events;
use crate::store::{
    NewOneTimeToken, NewRefreshToken, NewSession, NewUser, RevokedSessions, Role, Store,
    StoreError, TokenCheck, TokenPurpose, UserRecord, now,
};

pub(crate) mod access_token;
pub(crate) mod device;
mod hashing;
pub(crate) mod password;
mod throttle;
pub(crate) mod token_version;

pub(crate) use access_token::AccessClaims;
use access_token::{AccessTokens, SigningError};
use hashing::PasswordHasher;
use password::PasswordError;
pub(crate) use throttle::known_network_span;
use throttle::{ClientNetwork, KnownNetworks, LoginThrottle};

/// Why an authentication operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum AuthError {
    /// Unknown email or wrong password (the two are indistinguishable on purpose).
    #[error("Email or password is incorrect.")]
    InvalidCredentials,
    /// The password is right but the email is not verified yet.
    #[error("The email address has not been verified yet.")]
    EmailNotVerified,
    /// An account with this email exists.
    #[error("An account with this email already exists.")]
    EmailTaken,
    /// The refresh token is unknown, expired, revoked, rotated away or below the minimum version.
    #[error("The refresh token is invalid or has expired.")]
    InvalidRefreshToken,
    /// No such verification or reset token.
    #[error("Token not found.")]
    TokenNotFound,
    /// The token expired.
    #[error("The token has expired.")]
    TokenExpired,
    /// The token was used already.
    #[error("The token has already been used.")]
    TokenUsed,
    /// The token's user no longer exists.
    #[error("User not found.")]
    UserNotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing failed.
    #[error(transparent)]
    Password(#[from] PasswordError),
    /// Signing an access token failed.
    #[error(transparent)]
    Signing(#[from] SigningError),
}

/// Who is making a request, as recorded on sessions and tokens.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientInfo {
    /// Client IP address.
    pub ip: Option<std::net::IpAddr>,
    /// Raw User-Agent header.
    pub user_agent: Option<String>,
}

impl ClientInfo {
    /// The client IP address as sessions and tokens record it.
    fn ip_address(&self) -> Option<String> {
        self.ip.map(|ip| ip.to_string())
    }
}

/// A registered user.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    /// The new user's id.
    pub user_id: Uuid,
    /// The email as given.
    pub email: String,
}

/// Tokens handed out by login and refresh.
#[derive(Debug, Clone)]
pub(crate) struct IssuedTokens {
    /// JWT access token.
    pub access_token: String,
    /// Opaque refresh token.
    pub refresh_token: String,
    /// Seconds the access token lives.
    pub expires_in: i64,
}

/// The emails a stranger may ask for about an account, answered the same whether it exists.
#[derive(Debug, Clone, Copy)]
enum AccountEmail {
    /// Another verification token, for an unverified account.
    Verification,
    /// A password reset token.
    PasswordReset,
}

impl AccountEmail {
    /// What the log says when writing the email failed.
    fn failure(self) -> &'static str {
        match self {
            Self::Verification => "verification email request failed",
            Self::PasswordReset => "password reset request failed",
        }
    }
}

/// Raw User-Agent values longer than this are cut before they are stored.
const MAX_USER_AGENT_CHARS: usize = 512;

/// The rule of a password reset's events: `password.changed` (method `reset`), then a
/// `session.revoked` (reason `password_reset`) per live session revoked.
pub(crate) fn password_reset_events(
    at: DateTime<Utc>,
) -> impl Fn(&RevokedSessions) -> Vec<Event> + Send + Sync {
    move |revoked| {
        let changed = PasswordChanged {
            user_id: revoked.user_id,
            method: PasswordChanged::RESET.to_owned(),
        };
        let mut events = vec![changed.event_at(at)];
        events.extend(revocation_events("password_reset", at)(revoked));
        events
    }
}

/// The authentication operations over a store.
#[derive(Clone)]
pub(crate) struct Auth {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    tokens: AccessTokens,
    mail: MailQueue,
    events: Events,
    /// Verified against when the email is unknown, so that both failures take the same time.
    dummy_hash: Arc<tokio::sync::OnceCell<String>>,
    hasher: PasswordHasher,
    /// Failed logins per account and client network.
    throttle: LoginThrottle,
    /// The networks each account logged in from.
    known_networks: KnownNetworks,
}

/// `at + duration`, saturating instead of overflowing (however long the configured duration).
fn add(at: DateTime<Utc>, duration: std::time::Duration) -> DateTime<Utc> {
    dates::later(at, dates::delta(duration))
}

impl Auth {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        config: Arc<Config>,
        mail: MailQueue,
        events: Events,
        limits: Arc<dyn crate::rate_limit::RateLimitStore>,
    ) -> Self {
        let auth = Self {
            hasher: PasswordHasher::new(config.hashing_limits()),
            tokens: AccessTokens::new(&config),
            throttle: LoginThrottle::new(&config, limits),
            known_networks: KnownNetworks::new(&config, store.clone()),
            store,
            config,
            mail,
            events,
            dummy_hash: Arc::new(tokio::sync::OnceCell::new()),
        };
        // Starts the dummy hash now; a login that comes before it is done waits on this same
        // initialization instead of hashing a second time.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let warm = auth.clone();
            runtime.spawn(async move {
                if let Err(error) = warm.dummy_hash().await {
                    tracing::warn!(error = %error, "computing the dummy password hash failed");
                }
            });
        }
        auth
    }

    /// Verifies an access token.
    pub(crate) fn verify_access_token(&self, token: &str) -> Option<AccessClaims> {
        self.tokens.verify(token)
    }

    pub(crate) async fn register(
        &self,
        email: &str,
        password: &str,
        client: &ClientInfo,
    ) -> Result<Registration, AuthError> {
        let email = email.trim().to_owned();
        let password_hash = self.hasher.hash(password).await?;
        let user = NewUser {
            id: Uuid::now_v7(),
            email_normalized: normalize_email(&email),
            email,
            password_hash,
            created_at: now(),
        };
        match self.store.create_user(&user).await {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => return Err(AuthError::EmailTaken),
            Err(error) => return Err(error.into()),
        }
        let email = self
            .verification_email(user.id, &user.email, client, None)
            .await?;
        if let Some(email) = email {
            self.mail.enqueue(email);
        }
        self.events
            .emit(&DomainEvent::UserRegistered { user_id: user.id });
        Ok(Registration {
            user_id: user.id,
            email: user.email,
        })
    }

    /// Issues a verification token and writes its email; with `cap`, only while the user was
    /// sent fewer than that many in the last hour (`None` when the cap is reached).
    async fn verification_email(
        &self,
        user_id: Uuid,
        email: &str,
        client: &ClientInfo,
        cap: Option<u64>,
    ) -> Result<Option<Email>, AuthError> {
        let token = random_hex_token();
        let created_at = now();
        let record = NewOneTimeToken {
            digest: token_digest(&token),
            purpose: TokenPurpose::EmailVerification,
            user_id,
            created_at,
            expires_at: add(created_at, self.config.verification_token_ttl()),
            ip_address: client.ip_address(),
            user_agent: client.user_agent.clone(),
        };
        match cap {
            None => self.store.insert_one_time_token(&record).await?,
            Some(cap) => {
                let since = dates::earlier(created_at, TimeDelta::hours(1));
                if !self
                    .store
                    .insert_one_time_token_capped(&record, cap, since)
                    .await?
                {
                    return Ok(None);
                }
            }
        }
        let base = self.config.base_url();
        let hours = self.config.verification_token_ttl().as_secs() / 3600;
        Ok(Some(Email::new(
            email,
            "Verify your email address",
            format!(
                "Welcome!\n\nConfirm your email address with this verification token:\n\n    \
                 {token}\n\nSend it as {{\"token\": \"{token}\"}} to POST \
                 {base}/api/v1/email-verifications.\nThe token expires in {hours} hours.\n\n\
                 If you did not register, ignore this email.\n"
            ),
        )))
    }

    pub(crate) async fn verify_email(&self, token: &str) -> Result<(), AuthError> {
        match self.store.verify_email(&token_digest(token), now()).await? {
            TokenCheck::Consumed { user_id } | TokenCheck::Valid { user_id } => {
                self.grant_configured_admin(user_id).await?;
                self.events.emit(&DomainEvent::EmailVerified {
                    user_id: Some(user_id),
                });
                Ok(())
            }
            other => Err(token_failure(other)),
        }
    }

    /// Grants the admin role to a user whose (now verified) email `AGG_ADMIN_EMAILS` names.
    /// Only at verification: whoever registers an admin's address first has not proven they
    /// own it.
    async fn grant_configured_admin(&self, user_id: Uuid) -> Result<(), AuthError> {
        if self.config.admin_emails().is_empty() {
            return Ok(());
        }
        let Some(user) = self.store.user_by_id(user_id).await? else {
            return Ok(());
        };
        if user.email_verified_at.is_some()
            && self.config.is_admin_email(&user.email)
            && self.store.grant_role(user.id, Role::Admin, now()).await?
        {
            tracing::info!(user_id = %user.id, "admin role granted at email verification");
        }
        Ok(())
    }

    /// Sends a new verification token when the account exists and is unverified, at most
    /// `reset_emails_per_hour` an hour; otherwise does nothing. The work runs in the
    /// background so that the answer takes the same time either way.
    pub(crate) fn resend_verification(&self, email: &str, client: ClientInfo) {
        self.email_account_in_background(email, client, AccountEmail::Verification);
    }

    /// The one send path of the emails a stranger may ask for: the lookup and the writing run
    /// in a background task, into a place in the mail queue reserved before the task starts
    /// (so a mail-queue shutdown waits for the task).
    fn email_account_in_background(&self, email: &str, client: ClientInfo, kind: AccountEmail) {
        let auth = self.clone();
        let email = normalize_email(email);
        let permit = self.mail.reserve();
        tokio::spawn(async move {
            if let Err(error) = auth.email_account(&email, &client, permit, kind).await {
                tracing::error!(error = %error, "{}", kind.failure());
            }
        });
    }

    async fn email_account(
        &self,
        email: &str,
        client: &ClientInfo,
        permit: Option<MailPermit>,
        kind: AccountEmail,
    ) -> Result<(), AuthError> {
        let Some(permit) = permit else {
            return Ok(());
        };
        let Some(user) = self.store.user_by_email(email).await? else {
            return Ok(());
        };
        let written = match kind {
            AccountEmail::Verification => self.verification_email_again(&user, client).await?,
            AccountEmail::PasswordReset => self.password_reset_email(&user, client).await?,
        };
        if let Some(email) = written {
            permit.send(email);
        }
        Ok(())
    }

    /// A new verification email for an unverified account, within the hourly cap.
    async fn verification_email_again(
        &self,
        user: &UserRecord,
        client: &ClientInfo,
    ) -> Result<Option<Email>, AuthError> {
        if user.email_verified_at.is_some() {
            return Ok(None);
        }
        let cap = u64::from(self.config.reset_emails_per_hour());
        self.verification_email(user.id, &user.email, client, Some(cap))
            .await
    }

    async fn dummy_hash(&self) -> Result<&str, AuthError> {
        let hash = self
            .dummy_hash
            .get_or_try_init(|| self.hasher.hash("dummy password for timing"))
            .await?;
        Ok(hash.as_str())
    }

    /// Checks the password of a signed-in user (before an erasure): the user, or
    /// [`AuthError::InvalidCredentials`] for a wrong password or a user that is gone.
    pub(crate) async fn confirm_password(
        &self,
        user_id: Uuid,
        password: &str,
    ) -> Result<UserRecord, AuthError> {
        let Some(user) = self.store.user_by_id(user_id).await? else {
            return Err(AuthError::InvalidCredentials);
        };
        if user.password_hash.is_empty()
            || !self.hasher.verify(&user.password_hash, password).await?
        {
            return Err(AuthError::InvalidCredentials);
        }
        Ok(user)
    }

    pub(crate) async fn login(
        &self,
        email: &str,
        password: &str,
        client: &ClientInfo,
    ) -> Result<IssuedTokens, AuthError> {
        let normalized = normalize_email(email);
        let network = ClientNetwork::of(client.ip);
        let user = self.store.user_by_email(&normalized).await?;
        let Some(user) = user else {
            let dummy = self.dummy_hash().await?.to_owned();
            self.hasher.verify(&dummy, password).await?;
            // The same read as for an account, so that an unknown email takes as long.
            let known = self.is_known_network(Uuid::nil(), network).await?;
            self.throttle
                .record_failure(&normalized, network, known)
                .await;
            return Err(self.login_failed(AuthError::InvalidCredentials));
        };
        let verified = self.hasher.verify(&user.password_hash, password).await?;
        let known = self.is_known_network(user.id, network).await?;
        if !verified {
            self.throttle
                .record_failure(&normalized, network, known)
                .await;
            return Err(self.login_failed(AuthError::InvalidCredentials));
        }
        if let Some(refusal) = self.throttle.refusal(&normalized, network, known).await {
            // The right password, but too many failures: the answer of a wrong password, so
            // the throttle reveals neither the account nor the password.
            tracing::warn!(
                user_id = %user.id,
                refused_by = refusal.as_str(),
                known_network = known,
                "login refused: too many failed logins for this account"
            );
            self.events.emit(&DomainEvent::LoginFailed {
                reason: "too_many_failures",
            });
            return Err(AuthError::InvalidCredentials);
        }
        if user.email_verified_at.is_none() {
            return Err(self.login_failed(AuthError::EmailNotVerified));
        }
        let created_at = now();
        let session_id = Uuid::now_v7();
        let refresh_token = random_urlsafe_token();
        let expires_at = add(created_at, self.config.refresh_token_ttl())
            .min(add(created_at, self.config.session_max_lifetime()));
        let user_agent = client
            .user_agent
            .as_deref()
            .map(|agent| agent.chars().take(MAX_USER_AGENT_CHARS).collect::<String>());
        self.store
            .create_session(
                &NewSession {
                    id: session_id,
                    user_id: user.id,
                    device_info: user_agent.as_deref().and_then(device::device_info),
                    ip_address: client.ip_address(),
                    user_agent,
                    created_at,
                    expires_at,
                },
                &NewRefreshToken {
                    digest: token_digest(&refresh_token),
                    session_id,
                    user_id: user.id,
                    token_version: token_version::floor(
                        self.store.security_config().await?.as_ref(),
                        &user,
                    ),
                    issued_at: created_at,
                    expires_at,
                },
            )
            .await?;
        self.remember_network(user.id, network, created_at).await;
        self.events.emit(&DomainEvent::LoginSucceeded {
            user_id: user.id,
            session_id,
        });
        self.issue_access(&user, session_id, refresh_token, created_at)
            .await
    }

    /// Whether the account logged in from this network within
    /// [`throttle::KNOWN_NETWORK_DAYS`] days; no read while the throttle is off, which then
    /// needs no known networks.
    async fn is_known_network(
        &self,
        user_id: Uuid,
        network: ClientNetwork,
    ) -> Result<bool, AuthError> {
        if !self.throttle.is_on() {
            return Ok(false);
        }
        Ok(self
            .known_networks
            .is_known(user_id, network, now())
            .await?)
    }

    /// Remembers the network of a successful login. The login stands when this fails: the
    /// network is then remembered at the next one.
    async fn remember_network(&self, user_id: Uuid, network: ClientNetwork, at: DateTime<Utc>) {
        if !self.throttle.is_on() {
            return;
        }
        if let Err(error) = self.known_networks.remember(user_id, network, at).await {
            tracing::warn!(
                user_id = %user_id,
                error = %error,
                "remembering the network of a login failed"
            );
        }
    }

    fn login_failed(&self, error: AuthError) -> AuthError {
        let reason = match error {
            AuthError::EmailNotVerified => "email_not_verified",
            _ => "invalid_credentials",
        };
        self.events.emit(&DomainEvent::LoginFailed { reason });
        error
    }

    async fn issue_access(
        &self,
        user: &UserRecord,
        session_id: Uuid,
        refresh_token: String,
        at: DateTime<Utc>,
    ) -> Result<IssuedTokens, AuthError> {
        let mut roles: Vec<String> = self
            .store
            .user_roles(user.id)
            .await?
            .into_iter()
            .map(|role| role.as_str().to_owned())
            .collect();
        if roles.is_empty() {
            roles.push(Role::User.as_str().to_owned());
        }
        roles.sort();
        let access_token = self
            .tokens
            .issue(user.id, &user.email, roles, session_id, at)?;
        Ok(IssuedTokens {
            access_token,
            refresh_token,
            expires_in: self.tokens.ttl_seconds(),
        })
    }

    pub(crate) async fn refresh(&self, refresh_token: &str) -> Result<IssuedTokens, AuthError> {
        let digest = token_digest(refresh_token);
        let at = now();
        let Some(record) = self.store.refresh_token(&digest).await? else {
            return Err(AuthError::InvalidRefreshToken);
        };
        if let Some(rotated_at) = record.rotated_at {
            if at < add(rotated_at, self.config.refresh_reuse_interval()) {
                // Most likely a concurrent refresh with the same token that read after the
                // winner committed: not evidence of theft, so the session stays.
                return Err(AuthError::InvalidRefreshToken);
            }
            // A token that was already exchanged is being presented again: whoever holds it
            // may have stolen it, so the whole session goes.
            if record.session_revoked_at.is_none() {
                tracing::warn!(session_id = %record.session_id, "refresh token reuse detected; session revoked");
                let raise = revocation_events("token_reuse", at);
                let mut revoked = Vec::new();
                self.store
                    .revoke_session(
                        record.user_id,
                        record.session_id,
                        "token_reuse",
                        at,
                        &raise,
                        &mut revoked,
                    )
                    .await?;
                self.events.committed(&revoked);
                self.events.emit(&DomainEvent::RefreshTokenReused {
                    user_id: record.user_id,
                    session_id: record.session_id,
                });
            }
            return Err(AuthError::InvalidRefreshToken);
        }
        let session_ends_at = add(
            record.session_created_at,
            self.config.session_max_lifetime(),
        );
        if record.revoked_at.is_some()
            || record.session_revoked_at.is_some()
            || record.expires_at <= at
            || session_ends_at <= at
        {
            return Err(AuthError::InvalidRefreshToken);
        }
        let Some(user) = self.store.user_by_id(record.user_id).await? else {
            return Err(AuthError::InvalidRefreshToken);
        };
        let security = self.store.security_config().await?;
        if !token_version::is_current(
            &*self.store,
            security.as_ref(),
            &user,
            record.token_version,
            at,
        )
        .await?
        {
            return Err(AuthError::InvalidRefreshToken);
        }
        let new_refresh_token = random_urlsafe_token();
        let rotated = self
            .store
            .rotate_refresh_token(
                &digest,
                &NewRefreshToken {
                    digest: token_digest(&new_refresh_token),
                    session_id: record.session_id,
                    user_id: user.id,
                    token_version: token_version::floor(security.as_ref(), &user),
                    issued_at: at,
                    expires_at: add(at, self.config.refresh_token_ttl()).min(session_ends_at),
                },
                at,
            )
            .await?;
        if !rotated {
            // A concurrent refresh with the same token won the race; that is not evidence of
            // theft, so the session stays, but this caller gets nothing.
            return Err(AuthError::InvalidRefreshToken);
        }
        self.events.emit(&DomainEvent::TokenRefreshed {
            user_id: user.id,
            session_id: record.session_id,
        });
        self.issue_access(&user, record.session_id, new_refresh_token, at)
            .await
    }

    /// Revokes the presented refresh token's session if it is the caller's; silent otherwise.
    pub(crate) async fn logout(&self, user_id: Uuid, refresh_token: &str) -> Result<(), AuthError> {
        let (digest, at) = (token_digest(refresh_token), now());
        let raise = revocation_events("logout", at);
        let mut revoked = Vec::new();
        self.store
            .revoke_session_by_token(user_id, &digest, "logout", at, &raise, &mut revoked)
            .await?;
        self.events.committed(&revoked);
        self.events.emit(&DomainEvent::LoggedOut { user_id });
        Ok(())
    }

    /// Sends a reset token when the account exists (at most `reset_emails_per_hour` an hour).
    /// The work runs in the background so that the answer takes the same time either way.
    pub(crate) fn request_password_reset(&self, email: &str, client: ClientInfo) {
        self.email_account_in_background(email, client, AccountEmail::PasswordReset);
    }

    /// A password reset email with a new token, within the hourly cap.
    async fn password_reset_email(
        &self,
        user: &UserRecord,
        client: &ClientInfo,
    ) -> Result<Option<Email>, AuthError> {
        let token = random_hex_token();
        let created_at = now();
        let issued = self
            .store
            .insert_one_time_token_capped(
                &NewOneTimeToken {
                    digest: token_digest(&token),
                    purpose: TokenPurpose::PasswordReset,
                    user_id: user.id,
                    created_at,
                    expires_at: add(created_at, self.config.reset_token_ttl()),
                    ip_address: client.ip_address(),
                    user_agent: client.user_agent.clone(),
                },
                u64::from(self.config.reset_emails_per_hour()),
                dates::earlier(created_at, TimeDelta::hours(1)),
            )
            .await?;
        if !issued {
            return Ok(None);
        }
        let base = self.config.base_url();
        let minutes = self.config.reset_token_ttl().as_secs() / 60;
        Ok(Some(Email::new(
            &user.email,
            "Reset your password",
            format!(
                "Someone asked to reset the password of this account.\n\nReset token:\n\n    \
                 {token}\n\nSend it with your new password as {{\"token\": \"{token}\", \
                 \"new_password\": \"...\"}} to POST {base}/api/v1/password-resets.\n\
                 The token expires in {minutes} minutes and works once. Resetting signs out \
                 every session.\n\nIf this was not you, ignore this email.\n"
            ),
        )))
    }

    pub(crate) async fn reset_password(
        &self,
        token: &str,
        new_password: &str,
    ) -> Result<(), AuthError> {
        let digest = token_digest(token);
        let check = self
            .store
            .check_one_time_token(&digest, TokenPurpose::PasswordReset, now())
            .await?;
        if !matches!(check, TokenCheck::Valid { .. }) {
            return Err(token_failure(check));
        }
        let password_hash = self.hasher.hash(new_password).await?;
        let at = now();
        let mut events = Vec::new();
        let check = self
            .store
            .reset_password(
                &digest,
                &password_hash,
                at,
                &password_reset_events(at),
                &mut events,
            )
            .await?;
        // Reported as `PasswordReset`, from its `password.changed` event.
        self.events.committed(&events);
        match check {
            TokenCheck::Consumed { .. } | TokenCheck::Valid { .. } => Ok(()),
            other => Err(token_failure(other)),
        }
    }
}

fn token_failure(check: TokenCheck) -> AuthError {
    match check {
        TokenCheck::Expired => AuthError::TokenExpired,
        TokenCheck::AlreadyUsed => AuthError::TokenUsed,
        TokenCheck::UnknownUser => AuthError::UserNotFound,
        TokenCheck::Unknown | TokenCheck::Consumed { .. } | TokenCheck::Valid { .. } => {
            AuthError::TokenNotFound
        }
    }
}
