//! What both embedding examples share: the settings the host reads from its environment, and
//! the aggregation service it builds from them. Only the mounting differs between frameworks
//! (`axum.rs`, `actix.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use aggregation_core::{
    AggregationService, BuildError, Config, ConfigError, CryptoError, JobsHandle, Keyring,
    MailError, MailQueueHandle, MailShutdownError, OutboxMailer, SmtpMailer, SqliteStore,
    StoreError,
};
use base64::Engine as _;

/// How long a shutdown waits for queued emails (verification, password reset) to be sent.
const MAIL_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the host could not start or stop cleanly; each setting error names its variable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostError {
    /// A required variable is not set.
    #[error("{0} is not set")]
    Missing(&'static str),
    /// A variable is set to something unusable.
    #[error("{variable}: {message}")]
    Invalid {
        /// The variable's name.
        variable: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// The database could not be opened or migrated.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The service could not be assembled.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Binding or serving failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Queued emails were not all sent before the shutdown deadline.
    #[error(transparent)]
    MailDrain(#[from] MailShutdownError),
}

fn invalid(variable: &'static str, message: impl std::fmt::Display) -> HostError {
    HostError::Invalid {
        variable,
        message: message.to_string(),
    }
}

/// Where the host listens and how it configures the aggregation API.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// `AGG_BIND`; default `127.0.0.1:3000`.
    pub(crate) bind: SocketAddr,
    /// `AGG_BASE_URL`: prefixes problem types and email links; default `http://{bind}`.
    pub(crate) base_url: String,
    /// `AGG_DATABASE_URL`; default a SQLite file beside the host.
    pub(crate) database_url: String,
    /// `AGG_JWT_SECRET` (at least 32 bytes): signs access tokens. Required.
    pub(crate) jwt_secret: Vec<u8>,
    /// `AGG_ENCRYPTION_KEYS` (`id:base64` 32-byte keys, comma-separated, the first encrypts):
    /// encrypts provider credentials. Required: without it a provider callback fails after
    /// the authorization code was already exchanged.
    pub(crate) encryption_keys: Vec<(String, Vec<u8>)>,
    /// `AGG_OAUTH_REDIRECT_URIS`: where providers send the user back; without any, connecting
    /// a provider answers 422. Default: the host's own `/connected` page.
    pub(crate) redirect_uris: Vec<String>,
    /// `AGG_SMTP_URL`; unset: emails are written as `.eml` files to `outbox_dir`.
    pub(crate) smtp_url: Option<String>,
    /// `AGG_OUTBOX_DIR`; default `./outbox`.
    pub(crate) outbox_dir: PathBuf,
    /// `AGG_MAIL_FROM`; default `noreply@localhost`.
    pub(crate) mail_from: String,
    /// `APP_CORS_ORIGINS`: the host's browser front ends allowed to call the API
    /// cross-origin (comma-separated origins); default none.
    pub(crate) cors_origins: Vec<String>,
}

impl Settings {
    /// Reads the settings from the environment.
    pub(crate) fn from_env() -> Result<Self, HostError> {
        let var = |name: &'static str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let bind: SocketAddr = var("AGG_BIND")
            .unwrap_or_else(|| "127.0.0.1:3000".to_owned())
            .parse()
            .map_err(|e| invalid("AGG_BIND", e))?;
        let base_url = var("AGG_BASE_URL").unwrap_or_else(|| format!("http://{bind}"));
        let redirect_uris = match var("AGG_OAUTH_REDIRECT_URIS") {
            Some(list) => items(&list).map(str::to_owned).collect(),
            None => vec![format!("{base_url}/connected")],
        };
        Ok(Self {
            bind,
            database_url: var("AGG_DATABASE_URL")
                .unwrap_or_else(|| "sqlite://host-app.db?mode=rwc".to_owned()),
            jwt_secret: var("AGG_JWT_SECRET")
                .ok_or(HostError::Missing("AGG_JWT_SECRET"))?
                .into_bytes(),
            encryption_keys: parse_keys(
                &var("AGG_ENCRYPTION_KEYS").ok_or(HostError::Missing("AGG_ENCRYPTION_KEYS"))?,
            )?,
            redirect_uris,
            smtp_url: var("AGG_SMTP_URL"),
            outbox_dir: var("AGG_OUTBOX_DIR")
                .unwrap_or_else(|| "outbox".to_owned())
                .into(),
            mail_from: var("AGG_MAIL_FROM").unwrap_or_else(|| "noreply@localhost".to_owned()),
            cors_origins: parse_origins(&var("APP_CORS_ORIGINS").unwrap_or_default())?,
            base_url,
        })
    }
}

/// The non-empty items of a comma-separated list.
fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

/// `https://app.example.com,http://localhost:5173`: each origin named (no wildcard), so that
/// the CORS layers of both frameworks accept it.
fn parse_origins(list: &str) -> Result<Vec<String>, HostError> {
    items(list)
        .map(|origin| {
            let host = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"))
                .unwrap_or_default();
            let plain = |c: char| c.is_ascii_graphic() && !matches!(c, '/' | '*' | '"');
            if !host.is_empty() && host.chars().all(plain) {
                Ok(origin.to_owned())
            } else {
                Err(invalid(
                    "APP_CORS_ORIGINS",
                    format!("{origin:?} is not an origin such as https://app.example.com"),
                ))
            }
        })
        .collect()
}

/// `k2:BASE64,k1:BASE64` into key-ring entries, the encrypting key first.
fn parse_keys(list: &str) -> Result<Vec<(String, Vec<u8>)>, HostError> {
    items(list)
        .map(|entry| {
            let (id, key) = entry
                .split_once(':')
                .ok_or_else(|| invalid("AGG_ENCRYPTION_KEYS", "each key is id:base64"))?;
            let key = base64::engine::general_purpose::STANDARD
                .decode(key.trim())
                .map_err(|e| invalid("AGG_ENCRYPTION_KEYS", format!("key {id}: {e}")))?;
            Ok((id.trim().to_owned(), key))
        })
        .collect()
}

/// The service, and what runs beside it until the server has stopped.
pub(crate) struct Started {
    /// What the framework mounts.
    pub(crate) service: AggregationService,
    /// The background jobs: provider token refreshes, the purge of expired tokens and old
    /// sessions, and background syncs when configured. Instances sharing a database share one
    /// schedule.
    pub(crate) jobs: JobsHandle,
    /// The queue that sends emails off the request path.
    pub(crate) mail: MailQueueHandle,
}

/// Everything before serving: the TLS provider, the service, its jobs.
pub(crate) async fn start(settings: &Settings) -> Result<Started, HostError> {
    // Once, before any TLS client starts (SMTP, PostgreSQL, provider APIs): with a second
    // provider in the build (a dependency bringing ring), rustls cannot pick one itself.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let service = build_service(settings).await?;
    let jobs = service.jobs().spawn();
    let mail = service.mail_queue();
    Ok(Started {
        service,
        jobs,
        mail,
    })
}

/// Everything after serving, once no request is in flight any more: lets a running job
/// finish, then sends what is queued (emails still queued would otherwise be lost).
pub(crate) async fn stop(jobs: JobsHandle, mail: MailQueueHandle) -> Result<(), HostError> {
    jobs.shutdown().await;
    mail.shutdown(MAIL_DRAIN_TIMEOUT).await?;
    Ok(())
}

/// The process's exit code, with the failure logged.
pub(crate) fn exit_code(outcome: Result<(), HostError>) -> std::process::ExitCode {
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Opens (and migrates) the store and assembles the service. Must run inside the Tokio
/// runtime that keeps running while the host serves: the mail queue's task lives on it.
async fn build_service(settings: &Settings) -> Result<AggregationService, HostError> {
    let store = SqliteStore::connect(&settings.database_url).await?;
    store.migrate().await?;
    let keyring = Keyring::new(settings.encryption_keys.clone())
        .map_err(|e: CryptoError| invalid("AGG_ENCRYPTION_KEYS", e))?;
    let config = Config::new(&settings.base_url, settings.jwt_secret.clone())
        .map_err(|e: ConfigError| match e {
            ConfigError::BaseUrl(_) => invalid("AGG_BASE_URL", e),
            _ => invalid("AGG_JWT_SECRET", e),
        })?
        .with_mail_from(settings.mail_from.clone())
        .with_keyring(keyring)
        .with_oauth_redirect_uris(settings.redirect_uris.clone());
    let builder = AggregationService::builder(config).store(store);
    let builder = match &settings.smtp_url {
        Some(url) => builder.mailer(
            SmtpMailer::from_url(url, &settings.mail_from)
                .map_err(|e: MailError| invalid("AGG_SMTP_URL", e))?,
        ),
        None => builder.mailer(OutboxMailer::new(&settings.outbox_dir, &settings.mail_from)),
    };
    Ok(builder.build()?)
}

/// The host's own page at the redirect URI: the provider sends the user's browser here with
/// `code` and `state`, and the host's front end finishes connecting by posting them to
/// `/api/v1/providers/callback` with the user's bearer token.
pub(crate) fn connected_page(query: Option<&str>) -> String {
    format!(
        "Authorized. Finish with POST /api/v1/providers/callback?{} as the connecting user.",
        query.unwrap_or_default()
    )
}

/// Settings for the smoke tests: a fresh SQLite file and outbox in `dir`.
#[cfg(test)]
pub(crate) fn test_settings(dir: &std::path::Path) -> Settings {
    let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    Settings {
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        base_url: "http://127.0.0.1:3000".to_owned(),
        database_url: format!("sqlite://{}?mode=rwc", dir.join("host.db").display()),
        jwt_secret: b"a-test-secret-of-at-least-32-bytes-long".to_vec(),
        encryption_keys: parse_keys(&format!("k1:{key}")).expect("a valid key list"),
        redirect_uris: vec!["http://127.0.0.1:3000/connected".to_owned()],
        smtp_url: None,
        outbox_dir: dir.join("outbox"),
        mail_from: "noreply@localhost".to_owned(),
        cors_origins: vec!["https://app.example.com".to_owned()],
    }
}

/// The `.eml` files the outbox mailer wrote.
#[cfg(test)]
pub(crate) fn sent_emails(settings: &Settings) -> usize {
    std::fs::read_dir(&settings.outbox_dir)
        .map(|entries| entries.filter_map(Result::ok).count())
        .unwrap_or(0)
}

/// A registration body the API accepts (201, and one verification email queued).
#[cfg(test)]
pub(crate) const REGISTRATION: &str = r#"{"email":"ada@example.com","password":"Corr3ct-Horse!"}"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn variable(error: HostError) -> &'static str {
        match error {
            HostError::Invalid { variable, .. } | HostError::Missing(variable) => variable,
            other => panic!("expected a setting error, got {other}"),
        }
    }

    #[test]
    fn malformed_settings_name_their_variable() {
        for origins in [
            "*",
            "app.example.com",
            "https://app.example.com/",
            "http://",
        ] {
            let error = parse_origins(origins).expect_err(origins);
            assert_eq!(variable(error), "APP_CORS_ORIGINS", "{origins}");
        }
        for keys in ["k1", "k1:not base64!"] {
            let error = parse_keys(keys).expect_err(keys);
            assert_eq!(variable(error), "AGG_ENCRYPTION_KEYS", "{keys}");
        }
        assert_eq!(
            parse_origins(" https://app.example.com, http://localhost:5173 ").ok(),
            Some(vec![
                "https://app.example.com".to_owned(),
                "http://localhost:5173".to_owned()
            ])
        );
    }
}
