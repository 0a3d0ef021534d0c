//! The reference server of the aggregation API.
//!
//! ```text
//! cargo run -p aggregation-examples --bin aggregation-server
//! ```
//!
//! With no configuration it serves on `127.0.0.1:8080` from a SQLite file under `./data/`,
//! limits requests in process, and writes emails as `.eml` files to `./data/outbox`.
//! `aggregation-server --help` lists every environment variable.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aggregation_core::metrics::Metrics;
use aggregation_core::{
    AggregationService, BuildError, Config, ConfigError, EnableBankingConfig,
    EnableBankingProvider, InMemoryRateLimitStore, IpNet, Keyring, LoginFailureLimit, Mailer,
    OutboxMailer, PlaidConfig, PlaidProvider, PolicyTable, PostgresStore, RedisEventRelay,
    RedisRateLimitStore, SchemaName, SchwabConfig, SchwabProvider, SimplefinConfig,
    SimplefinProvider, SmtpMailer, SqliteStore, Store, StoreError, WorkLimits, parse_cidr_list,
};
use aggregation_sandbox::{EnableBankingSandbox, PlaidSandbox, SchwabSandbox, SimplefinSandbox};
use base64::Engine as _;
use clap::{Parser, Subcommand};
use rand::RngExt as _;

mod log_event;
mod log_fields;
mod log_output;
mod log_time;
mod serve;

/// jemalloc rather than the system's malloc: its background thread hands the pages an import
/// freed back to the system within about ten seconds, where glibc's arenas keep most of them
/// (measured by `benches/load/import-memory.sh`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Where generated secrets and the default database live.
const DATA_DIR: &str = "data";

/// The aggregation API reference server. Every option is read from its environment variable.
#[derive(Debug, Parser)]
#[command(name = "aggregation-server", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to listen on (host:port).
    #[arg(
        long,
        env = "AGG_BIND",
        default_value = "127.0.0.1:8080",
        value_parser = named::<SocketAddr>()
    )]
    bind: SocketAddr,
    /// sqlx URL: `sqlite://path?mode=rwc` or `postgres://…`. Default: a SQLite file under ./data/.
    #[arg(long, env = "AGG_DATABASE_URL")]
    database_url: Option<String>,
    /// PostgreSQL only: the schema holding the tables (created by the migration). Default:
    /// `aggregation`, or `public` for a database an earlier release migrated there. SQLite
    /// keeps its tables in its own file.
    #[arg(
        long,
        env = "AGG_DATABASE_SCHEMA",
        value_parser = named::<SchemaName>()
    )]
    database_schema: Option<SchemaName>,
    /// Absolute URL prefixing problem types and email links. Default: http://{AGG_BIND}.
    #[arg(long, env = "AGG_BASE_URL")]
    base_url: Option<String>,
    /// HS256 secret for access tokens (at least 32 bytes). Default: generated once into ./data/.
    #[arg(long, env = "AGG_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// Comma-separated `id:base64` keys (32 bytes each) encrypting provider credentials; the
    /// first encrypts. Default: generated once into ./data/.
    #[arg(long, env = "AGG_ENCRYPTION_KEYS", hide_env_values = true)]
    encryption_keys: Option<String>,
    /// lettre SMTP URL (smtp://host:port, ?tls=required for STARTTLS, smtps:// for TLS).
    /// Unset: emails are written to AGG_OUTBOX_DIR.
    #[arg(long, env = "AGG_SMTP_URL", hide_env_values = true)]
    smtp_url: Option<String>,
    /// Folder for .eml files when no SMTP server is set.
    #[arg(long, env = "AGG_OUTBOX_DIR", default_value = "./data/outbox")]
    outbox_dir: PathBuf,
    /// Sender mailbox, e.g. `Aggregation <noreply@example.com>`.
    #[arg(long, env = "AGG_MAIL_FROM", default_value = "noreply@localhost")]
    mail_from: String,
    /// Comma-separated emails holding the admin role (granted at start-up and at email
    /// verification, to verified accounts only).
    #[arg(long, env = "AGG_ADMIN_EMAILS", default_value = "")]
    admin_emails: String,
    /// Seconds after a global token rotation during which tokens one version behind still work.
    #[arg(
        long,
        env = "AGG_ROTATION_GRACE_SECONDS",
        default_value_t = 300,
        value_parser = named::<u64>()
    )]
    rotation_grace_seconds: u64,
    /// `off`, or a TOML file overriding rate-limit policies.
    #[arg(long, env = "AGG_RATE_LIMITS")]
    rate_limits: Option<String>,
    /// `redis://…` or `rediss://…`: share rate limits across instances through Redis.
    #[arg(long, env = "AGG_REDIS_URL", hide_env_values = true)]
    redis_url: Option<String>,
    /// Most rate-limit buckets held in process (without AGG_REDIS_URL); beyond it the buckets
    /// full again soonest are forgotten.
    #[arg(
        long,
        env = "AGG_RATE_LIMIT_MAX_BUCKETS",
        default_value_t = 100_000,
        value_parser = named::<usize>()
    )]
    rate_limit_max_buckets: usize,
    /// Failed logins per account (normalized email) and client network (IPv4 /24, IPv6 /64)
    /// before that network's logins are refused, the right password included, until one
    /// failure has refilled; networks the account has not logged in from within 30 days share
    /// as many more, and networks it has are never refused for others' failures; `0` turns
    /// this throttle off.
    #[arg(
        long,
        env = "AGG_LOGIN_MAX_FAILURES",
        default_value_t = 10,
        value_parser = named::<u32>()
    )]
    login_max_failures: u32,
    /// Seconds in which AGG_LOGIN_MAX_FAILURES failures refill (1 to 2592000).
    #[arg(
        long,
        env = "AGG_LOGIN_FAILURE_WINDOW_SECONDS",
        default_value_t = 3600,
        value_parser = named::<u64>()
    )]
    login_failure_window_seconds: u64,
    /// Comma-separated CIDRs of proxies whose X-Forwarded-For is read.
    #[arg(long, env = "AGG_TRUSTED_PROXIES", default_value = "")]
    trusted_proxies: String,
    /// Largest accepted upload in bytes.
    #[arg(
        long,
        env = "AGG_MAX_UPLOAD_BYTES",
        default_value_t = 10_485_760,
        value_parser = named::<usize>()
    )]
    max_upload_bytes: usize,
    /// Comma-separated redirect URIs a connect request may name; the first is the default.
    /// With AGG_SANDBOX=1 and none set: {AGG_BASE_URL}/sandbox/redirect.
    #[arg(long, env = "AGG_OAUTH_REDIRECT_URIS", default_value = "")]
    oauth_redirect_uris: String,
    /// Seconds an OAuth state stays valid.
    #[arg(
        long,
        env = "AGG_OAUTH_STATE_TTL",
        default_value_t = 600,
        value_parser = named::<u64>()
    )]
    oauth_state_ttl: u64,
    /// `1` requires POST /api/v1/providers/callback to carry the bearer token of the user who
    /// started connecting (401 without it; another user's token is answered as an unknown
    /// state); `0` leaves the callback public.
    #[arg(long, env = "AGG_OAUTH_CALLBACK_REQUIRES_AUTH", default_value = "1")]
    oauth_callback_requires_auth: String,
    /// `1` lets webhooks be registered for and delivered to loopback, private and link-local
    /// addresses (receivers on this host or its network); `0` allows public addresses only.
    /// Cloud metadata addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200...) are
    /// refused either way.
    #[arg(long, env = "AGG_WEBHOOK_ALLOW_PRIVATE", default_value = "0")]
    webhook_allow_private: String,
    /// Hours a failing webhook delivery is retried (with exponential backoff) before it is
    /// given up.
    #[arg(
        long,
        env = "AGG_WEBHOOK_MAX_AGE_HOURS",
        default_value_t = 24,
        value_parser = named::<u64>()
    )]
    webhook_max_age_hours: u64,
    /// Hours a webhook endpoint may fail every attempt (from its first failure after its last
    /// success) before it is disabled until its owner enables it again.
    #[arg(
        long,
        env = "AGG_WEBHOOK_DISABLE_AFTER_HOURS",
        default_value_t = 24,
        value_parser = named::<u64>()
    )]
    webhook_disable_after_hours: u64,
    /// Schwab API address.
    #[arg(
        long,
        env = "AGG_SCHWAB_BASE_URL",
        default_value = "https://api.schwabapi.com"
    )]
    schwab_base_url: String,
    /// Schwab OAuth client id; Schwab is offered only when id and secret are set.
    #[arg(long, env = "AGG_SCHWAB_CLIENT_ID")]
    schwab_client_id: Option<String>,
    /// Schwab OAuth client secret.
    #[arg(long, env = "AGG_SCHWAB_CLIENT_SECRET", hide_env_values = true)]
    schwab_client_secret: Option<String>,
    /// `1` serves a Schwab-compatible sandbox under /sandbox/schwab and offers it as the
    /// `schwab-sandbox` provider, a SimpleFIN-compatible bridge under /sandbox/simplefin
    /// offered as `simplefin-sandbox` (its page, /sandbox/simplefin/, shows a setup token),
    /// an Enable Banking-compatible API under /sandbox/enablebanking offered as
    /// `enablebanking-sandbox` (two banks, FI and DE, with an approval page), and a
    /// Plaid-compatible API under /sandbox/plaid offered as `plaid-sandbox` (a Link page for
    /// `user_good` / `pass_good`, a scripted change feed, signed webhooks).
    #[arg(long, env = "AGG_SANDBOX", default_value = "0")]
    sandbox: String,
    /// `1` offers the `simplefin` provider (SimpleFIN Bridge; no application credentials).
    #[arg(long, env = "AGG_SIMPLEFIN", default_value = "0")]
    simplefin: String,
    /// Comma-separated hosts a SimpleFIN setup token may name.
    #[arg(
        long,
        env = "AGG_SIMPLEFIN_BRIDGE_HOSTS",
        default_value = "bridge.simplefin.org,beta-bridge.simplefin.org"
    )]
    simplefin_bridge_hosts: String,
    /// Test only: `1` accepts `http://` SimpleFIN claim and access URLs (and private
    /// addresses) on the allowed hosts.
    #[arg(long, env = "AGG_SIMPLEFIN_ALLOW_HTTP", default_value = "0")]
    simplefin_allow_http: String,
    /// Seconds one SimpleFIN bridge answer may take (at least 1): a bridge that hangs costs a
    /// sync this long, then the sync answers 502.
    #[arg(
        long,
        env = "AGG_SIMPLEFIN_TIMEOUT_SECONDS",
        default_value_t = 20,
        value_parser = named::<u64>()
    )]
    simplefin_timeout_seconds: u64,
    /// Enable Banking application id (from its control panel); the `enablebanking`
    /// provider is offered only when it and AGG_ENABLEBANKING_KEY_FILE are set.
    #[arg(long, env = "AGG_ENABLEBANKING_APP_ID")]
    enablebanking_app_id: Option<String>,
    /// PEM file of the Enable Banking application's RSA private key, read once at start.
    #[arg(long, env = "AGG_ENABLEBANKING_KEY_FILE")]
    enablebanking_key_file: Option<PathBuf>,
    /// Enable Banking API address.
    #[arg(
        long,
        env = "AGG_ENABLEBANKING_BASE_URL",
        default_value = "https://api.enablebanking.com"
    )]
    enablebanking_base_url: String,
    /// Plaid application client id; the `plaid` provider is offered only when it and
    /// AGG_PLAID_SECRET are set.
    #[arg(long, env = "AGG_PLAID_CLIENT_ID")]
    plaid_client_id: Option<String>,
    /// Plaid application secret (of the environment AGG_PLAID_BASE_URL names).
    #[arg(long, env = "AGG_PLAID_SECRET", hide_env_values = true)]
    plaid_secret: Option<String>,
    /// Plaid API address (`https://sandbox.plaid.com` for Plaid's own sandbox).
    #[arg(
        long,
        env = "AGG_PLAID_BASE_URL",
        default_value = "https://production.plaid.com"
    )]
    plaid_base_url: String,
    /// Where Plaid sends its webhooks: this server's
    /// `/api/v1/provider-webhooks/plaid` as Plaid reaches it.
    #[arg(long, env = "AGG_PLAID_WEBHOOK_URL")]
    plaid_webhook_url: Option<String>,
    /// Comma-separated ISO country codes Plaid Link offers institutions of.
    #[arg(long, env = "AGG_PLAID_COUNTRY_CODES", default_value = "US")]
    plaid_country_codes: String,
    /// Test only: `1` accepts an `http://` AGG_PLAID_BASE_URL.
    #[arg(long, env = "AGG_PLAID_ALLOW_HTTP", default_value = "0")]
    plaid_allow_http: String,
    /// Seconds between background syncs of every connection; unset: no background sync.
    #[arg(
        long,
        env = "AGG_SYNC_INTERVAL_SECONDS",
        value_parser = named::<u64>()
    )]
    sync_interval_seconds: Option<u64>,
    /// Absolute lifetime of a session in days: refreshing stops working this long after login.
    #[arg(
        long,
        env = "AGG_SESSION_MAX_DAYS",
        default_value_t = 90,
        value_parser = named::<u32>()
    )]
    session_max_days: u32,
    /// Seconds between heartbeat comments of an idle event stream (`GET /api/v1/events`).
    #[arg(
        long,
        env = "AGG_EVENT_HEARTBEAT_SECONDS",
        default_value_t = 15,
        value_parser = named::<u64>()
    )]
    event_heartbeat_seconds: u64,
    /// Event streams one user may hold open at once on this instance; one more answers 429.
    #[arg(
        long,
        env = "AGG_EVENT_STREAMS_PER_USER",
        default_value_t = 5,
        value_parser = named::<usize>()
    )]
    event_streams_per_user: usize,
    /// Days durable events (the audit trail of GET /api/v1/admin/audit-events) are kept before
    /// the purge job deletes them.
    #[arg(
        long,
        env = "AGG_AUDIT_RETENTION_DAYS",
        default_value_t = 365,
        value_parser = named::<u32>()
    )]
    audit_retention_days: u32,
    /// Seconds a client has to send a request's head (slow clients are disconnected); also
    /// how long a new connection may take to show its protocol, and how long an idle
    /// connection stays open (HTTP/1 between requests, HTTP/2 with no request in flight).
    #[arg(
        long,
        env = "AGG_HEADER_TIMEOUT_SECONDS",
        default_value_t = 10,
        value_parser = named::<u64>()
    )]
    header_timeout_seconds: u64,
    /// Seconds a client has to send a request's whole body, from the start of the request.
    #[arg(
        long,
        env = "AGG_BODY_TIMEOUT_SECONDS",
        default_value_t = 60,
        value_parser = named::<u64>()
    )]
    body_timeout_seconds: u64,
    /// Most connections open at once; beyond it new connections wait in the listen backlog
    /// until one closes.
    #[arg(
        long,
        env = "AGG_MAX_CONNECTIONS",
        default_value_t = 10_000,
        value_parser = named::<u32>()
    )]
    max_connections: u32,
    /// Most accounts one user may hold (an integer, at least 1); an import or provider sync
    /// that would create more answers 422 and writes nothing.
    #[arg(
        long,
        env = "AGG_MAX_ACCOUNTS_PER_USER",
        default_value_t = 10_000,
        value_parser = named::<u64>()
    )]
    max_accounts_per_user: u64,
    /// Seconds a shutdown waits for in-flight requests and jobs before abandoning them.
    #[arg(
        long,
        env = "AGG_SHUTDOWN_SECONDS",
        default_value_t = 25,
        value_parser = named::<u64>()
    )]
    shutdown_seconds: u64,
    /// Password hashes (login, registration, reset) computed at once. Default: one per core.
    #[arg(
        long,
        env = "AGG_HASH_CONCURRENCY",
        value_parser = named::<usize>()
    )]
    hash_concurrency: Option<usize>,
    /// Password hashes that may wait for a free slot; beyond them requests answer 503 with
    /// Retry-After. Default: 32 per running slot.
    #[arg(
        long,
        env = "AGG_HASH_QUEUE",
        value_parser = named::<usize>()
    )]
    hash_queue: Option<usize>,
    /// tracing filter, e.g. `info` or `aggregation_core=debug,info`.
    #[arg(long, env = "AGG_LOG", default_value = "info")]
    log: String,
    /// Log line format: `text` (for people), or `json` (one object per line with the fields of
    /// the request or job span, such as `trace_id`, for log collectors).
    #[arg(
        long,
        env = "AGG_LOG_FORMAT",
        default_value = "text",
        value_parser = named::<LogFormat>()
    )]
    log_format: LogFormat,
    /// `1` serves the request and job metrics at GET /metrics in the Prometheus text format
    /// (keep that path away from the public: put a proxy rule or a firewall in front of it).
    #[arg(long, env = "AGG_METRICS", default_value = "0")]
    metrics: String,
}

/// How log lines are written (`AGG_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("expected text or json, got {other:?}")),
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the API (the default).
    Serve,
    /// Print the OpenAPI 3.1 document to stdout (no database, no listener):
    /// `aggregation-server openapi > openapi.json`. Its server is AGG_BASE_URL (default
    /// http://{AGG_BIND}).
    Openapi,
    /// Grant the admin role to the user registered with EMAIL.
    GrantAdmin {
        /// The user's email.
        email: String,
    },
}

/// A start-up failure, named so the operator knows which setting to fix.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("{variable}: {message}")]
    Setting {
        variable: &'static str,
        message: String,
    },
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Build(#[from] BuildError),
}

/// A clap value parser of a trimmed `T` whose errors name the argument's environment variable:
/// clap's own name only the command-line flag, while the server is configured through the
/// environment.
fn named<T>() -> Named<T> {
    Named(PhantomData)
}

/// The parser [`named`] makes.
struct Named<T>(PhantomData<fn() -> T>);

impl<T> Clone for Named<T> {
    fn clone(&self) -> Self {
        Self(PhantomData)
    }
}

impl<T> clap::builder::TypedValueParser for Named<T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Display,
{
    type Value = T;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let variable = arg
            .and_then(clap::Arg::get_env)
            .map(|variable| variable.to_string_lossy().into_owned())
            .unwrap_or_default();
        // clap's parser for a function renders the failure as for any other value.
        let parse = move |value: &str| {
            value
                .trim()
                .parse::<T>()
                .map_err(|error| format!("{variable}: {error}"))
        };
        clap::builder::TypedValueParser::parse_ref(&parse, command, arg, value)
    }
}

/// A `1`/`0` (or `true`/`false`) setting; empty is `0`.
fn flag(variable: &'static str, value: &str) -> Result<bool, StartError> {
    match value.trim() {
        "1" | "true" => Ok(true),
        "0" | "false" | "" => Ok(false),
        other => Err(setting(variable, format!("expected 1 or 0, got {other:?}"))),
    }
}

/// Whether a setting is an http(s) URL.
fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

fn setting(variable: &'static str, message: impl std::fmt::Display) -> StartError {
    StartError::Setting {
        variable,
        message: message.to_string(),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Openapi) = cli.command {
        return print_openapi(&cli);
    }
    // Logging is not set up yet, so this one failure goes to stderr directly.
    let filter = match tracing_subscriber::EnvFilter::try_new(&cli.log) {
        Ok(filter) => filter,
        Err(error) => {
            eprintln!("{}", setting("AGG_LOG", format!("{:?}: {error}", cli.log)));
            return std::process::ExitCode::FAILURE;
        }
    };
    // Lines go through a writer thread (see `log_output`); dropped last, `_flush` writes out
    // whatever is still buffered, the final error line included.
    let (output, _flush) = log_output::stdout();
    let logs = tracing_subscriber::fmt()
        .with_timer(log_time::CachedSecondTime)
        .with_writer(output);
    macro_rules! init_logs {
        ($logs:expr) => {
            match cli.log_format {
                LogFormat::Text => $logs
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                    .fmt_fields(log_fields::PlainFields)
                    .event_format(log_event::TextLine::new(log_time::CachedSecondTime))
                    .init(),
                // The event's fields at the top level, beside `span` (the innermost span's
                // fields) and `spans` (every span it is in, outermost first).
                LogFormat::Json => $logs.json().flatten_event(true).init(),
            }
        };
    }
    // A filter that is one level for every target (the default, `info`) lets through exactly
    // what that level does; `EnvFilter` would also track each span entered on every poll, for
    // span directives it does not have.
    match cli.log.parse::<tracing_subscriber::filter::LevelFilter>() {
        Ok(level) => init_logs!(logs.with_max_level(level)),
        Err(_) => init_logs!(logs.with_env_filter(filter)),
    }
    // One TLS backend for every client (SMTP, PostgreSQL, Redis).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(error = %error, "could not start the runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(cli));
    // Blocking work still running (a password hash, a parse) past the shutdown deadline is
    // abandoned rather than waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Writes the OpenAPI document for the configured base URL to stdout.
fn print_openapi(cli: &Cli) -> std::process::ExitCode {
    use std::io::Write as _;
    let base_url = cli
        .base_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", cli.bind));
    let written = aggregation_core::api::openapi_json(&base_url)
        .map_err(std::io::Error::from)
        .and_then(|document| writeln!(std::io::stdout().lock(), "{document}"));
    match written {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("openapi: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), StartError> {
    let store = open_store(cli.database_url.as_deref(), cli.database_schema.clone()).await?;
    match &cli.command {
        Some(Command::GrantAdmin { email }) => return grant_admin(store.as_ref(), email).await,
        Some(Command::Serve | Command::Openapi) | None => {}
    }
    // Validated whichever mailer is used, so that a typo is found before the first email.
    cli.mail_from
        .parse::<lettre::message::Mailbox>()
        .map_err(|e| {
            setting(
                "AGG_MAIL_FROM",
                format!(
                    "{:?} is not a mailbox such as `Aggregation <noreply@example.com>` ({e})",
                    cli.mail_from
                ),
            )
        })?;
    if cli.max_connections == 0 {
        return Err(setting("AGG_MAX_CONNECTIONS", "must be at least 1"));
    }
    if cli.max_accounts_per_user == 0 {
        return Err(setting("AGG_MAX_ACCOUNTS_PER_USER", "must be at least 1"));
    }
    let sandbox = flag("AGG_SANDBOX", &cli.sandbox)?;
    let simplefin = flag("AGG_SIMPLEFIN", &cli.simplefin)?;
    let simplefin_allow_http = flag("AGG_SIMPLEFIN_ALLOW_HTTP", &cli.simplefin_allow_http)?;
    let serve_metrics = flag("AGG_METRICS", &cli.metrics)?;
    let keyring = Keyring::new(encryption_keys(cli.encryption_keys.as_deref())?)
        .map_err(|e| setting("AGG_ENCRYPTION_KEYS", e))?;
    // Bound first so that with port 0 the default base URL names the port actually used.
    let listener = tokio::net::TcpListener::bind(cli.bind)
        .await
        .map_err(|e| setting("AGG_BIND", e))?;
    let address = listener.local_addr()?;
    let config = config(&cli, address, sandbox)?.with_keyring(keyring);
    let enablebanking_sandbox = sandbox.then(|| {
        EnableBankingSandbox::new(format!(
            "{}{ENABLEBANKING_SANDBOX_PREFIX}",
            config.base_url()
        ))
    });
    let plaid_sandbox = sandbox.then(|| {
        let base = format!("{}{PLAID_SANDBOX_PREFIX}", config.base_url());
        let webhook = format!(
            "{}/api/v1/provider-webhooks/plaid-sandbox",
            config.base_url()
        );
        (PlaidSandbox::new(base.clone()), format!("{base}/"), webhook)
    });
    let simplefin_sandbox = sandbox.then(|| {
        let base = format!("{}{SIMPLEFIN_SANDBOX_PREFIX}", config.base_url());
        (SimplefinSandbox::new(base.clone()), format!("{base}/"))
    });
    let sandbox = sandbox.then(|| {
        (
            SchwabSandbox::new(),
            format!("{}{SANDBOX_PREFIX}", config.base_url()),
        )
    });
    let mut builder = AggregationService::builder(config)
        .shared_store(store)
        .rate_limit_policies(rate_limit_policies(cli.rate_limits.as_deref())?);
    builder = match &cli.smtp_url {
        Some(url) => builder.mailer(
            SmtpMailer::from_url(url, &cli.mail_from).map_err(|e| setting("AGG_SMTP_URL", e))?,
        ),
        None => {
            tracing::info!(dir = %cli.outbox_dir.display(), "emails are written to the outbox folder");
            builder.mailer(outbox(&cli.outbox_dir, &cli.mail_from))
        }
    };
    if let Some(url) = &cli.redis_url {
        let limits = RedisRateLimitStore::from_url(
            url,
            "aggregation:".to_owned(),
            RedisRateLimitStore::DEFAULT_TIMEOUT,
        )
        .map_err(|e| setting("AGG_REDIS_URL", e))?;
        builder = builder.rate_limit_store(Arc::new(limits));
        let relay = RedisEventRelay::from_url(url, "aggregation:")
            .map_err(|e| setting("AGG_REDIS_URL", e))?;
        builder = builder.event_relay(relay);
        tracing::info!("rate limits and live events are shared through Redis");
    } else {
        builder = builder.rate_limit_store(Arc::new(
            InMemoryRateLimitStore::new().with_max_buckets(cli.rate_limit_max_buckets),
        ));
    }
    match (&cli.schwab_client_id, &cli.schwab_client_secret) {
        (Some(id), Some(secret)) if !id.is_empty() && !secret.is_empty() => {
            if !is_http_url(&cli.schwab_base_url) {
                return Err(setting("AGG_SCHWAB_BASE_URL", "expected an http(s) URL"));
            }
            let provider = SchwabProvider::new(SchwabConfig::new(
                cli.schwab_base_url.clone(),
                id.clone(),
                secret.clone(),
            ))
            .map_err(|e| setting("AGG_SCHWAB_BASE_URL", e))?;
            builder = builder.provider(provider);
            tracing::info!("provider schwab offered");
        }
        (None, None) => {}
        _ => {
            return Err(setting(
                "AGG_SCHWAB_CLIENT_ID",
                "set both AGG_SCHWAB_CLIENT_ID and AGG_SCHWAB_CLIENT_SECRET, or neither",
            ));
        }
    }
    if let Some((sandbox, base)) = &sandbox {
        let provider = SchwabProvider::new(sandbox.config(base.clone()))
            .map_err(|e| setting("AGG_SANDBOX", e))?;
        builder = builder.provider(provider);
        tracing::info!(base = %base, "provider schwab-sandbox offered, served by this server");
    }
    if simplefin {
        let bridge_hosts: Vec<String> = cli
            .simplefin_bridge_hosts
            .split(',')
            .map(|host| host.trim().to_owned())
            .filter(|host| !host.is_empty())
            .collect();
        if cli.simplefin_timeout_seconds == 0 {
            return Err(setting(
                "AGG_SIMPLEFIN_TIMEOUT_SECONDS",
                "must be at least 1 second",
            ));
        }
        let request_timeout = Duration::from_secs(cli.simplefin_timeout_seconds);
        let defaults = SimplefinConfig::default();
        let provider = SimplefinProvider::new(SimplefinConfig {
            bridge_hosts,
            allow_http: simplefin_allow_http,
            connect_timeout: defaults.connect_timeout.min(request_timeout),
            request_timeout,
            ..defaults
        })
        .map_err(|e| setting("AGG_SIMPLEFIN_BRIDGE_HOSTS", e))?;
        builder = builder.provider(provider);
        if simplefin_allow_http {
            tracing::warn!(
                "AGG_SIMPLEFIN_ALLOW_HTTP=1: SimpleFIN setup tokens may name http:// and private addresses (test only)"
            );
        }
        tracing::info!("provider simplefin offered");
    }
    if let Some((bridge, page)) = &simplefin_sandbox {
        let provider =
            SimplefinProvider::new(bridge.config()).map_err(|e| setting("AGG_SANDBOX", e))?;
        builder = builder.provider(provider);
        tracing::info!(page = %page, "provider simplefin-sandbox offered, served by this server; its page shows a setup token");
    }
    builder = enable_banking(&cli, builder)?;
    builder = plaid(&cli, builder)?;
    if let Some((api, page, webhook)) = &plaid_sandbox {
        let provider = PlaidProvider::new(api.config(Some(webhook.clone())))
            .map_err(|e| setting("AGG_SANDBOX", e))?;
        builder = builder.provider(provider);
        tracing::info!(page = %page, "provider plaid-sandbox offered, served by this server; its Link page signs in user_good / pass_good");
    }
    if let Some(api) = &enablebanking_sandbox {
        let mut sandbox_config =
            EnableBankingConfig::new(api.application_id(), api.private_key_pem())
                .with_base_url(api.base_url());
        sandbox_config.slug = "enablebanking-sandbox".to_owned();
        sandbox_config.name = "Enable Banking (sandbox)".to_owned();
        sandbox_config.countries = vec!["DE".to_owned(), "FI".to_owned()];
        // Unlimited, so a demo can sync again and watch pending rows book.
        sandbox_config.budget = None;
        let provider =
            EnableBankingProvider::new(sandbox_config).map_err(|e| setting("AGG_SANDBOX", e))?;
        builder = builder.provider(provider);
        tracing::info!(base = %api.base_url(), "provider enablebanking-sandbox offered, served by this server");
    }
    let service = builder.build()?;
    // Users registered before AGG_ADMIN_EMAILS named them get the role now; later
    // registrations get it as they register.
    match service.grant_configured_admins().await {
        Ok(granted) if granted > 0 => {
            tracing::info!(granted, "admin role granted from AGG_ADMIN_EMAILS")
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(error = %error, "could not grant admin roles"),
    }
    let jobs = service.jobs().spawn();
    let mail = service.mail_queue();
    let metrics = serve_metrics.then(|| service.metrics());
    let streams = service.clone();
    tracing::info!("listening on http://{address}");
    let mut router =
        aggregation_axum::router_with(service, aggregation_axum::Mount::api().with_fallback());
    if let Some(metrics) = metrics {
        // Beside the API, not in it: without AGG_METRICS the path is the API's 404 like any
        // other unknown path.
        router = router.route(
            METRICS_PATH,
            axum::routing::get(move || async move {
                (
                    [(http::header::CONTENT_TYPE, Metrics::CONTENT_TYPE)],
                    metrics.render(),
                )
            }),
        );
        tracing::info!("metrics are served at {METRICS_PATH}");
    }
    if let Some((sandbox, _)) = sandbox {
        router = router
            .nest_service(SANDBOX_PREFIX, sandbox)
            .route("/sandbox/redirect", axum::routing::get(sandbox_redirect));
    }
    if let Some((api, _, _)) = plaid_sandbox {
        router = router.nest_service(PLAID_SANDBOX_PREFIX, api);
    }
    if let Some((bridge, _)) = simplefin_sandbox {
        router = router.nest_service(SIMPLEFIN_SANDBOX_PREFIX, bridge);
    }
    if let Some(api) = enablebanking_sandbox {
        router = router.nest_service(ENABLEBANKING_SANDBOX_PREFIX, api);
    }
    let timeouts = serve::Timeouts {
        header_read: Duration::from_secs(cli.header_timeout_seconds.max(1)),
        body_read: Duration::from_secs(cli.body_timeout_seconds.max(1)),
        shutdown: Duration::from_secs(cli.shutdown_seconds),
    };
    // Event streams never end by themselves: end them at the signal, so that the graceful
    // shutdown waits only for ordinary requests.
    let signal = async move {
        shutdown_signal().await;
        streams.end_event_streams();
    };
    let drained = serve::serve(listener, router, timeouts, cli.max_connections, signal).await;
    // One deadline for the whole shutdown, counted from the signal: requests, jobs, mail.
    let deadline = drained.deadline;
    if tokio::time::timeout_at(deadline, jobs.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown deadline passed; abandoning running jobs");
    }
    // Requests (and the jobs) have finished, so nothing queues mail any more.
    let mail_deadline = deadline
        .saturating_duration_since(tokio::time::Instant::now())
        .min(MAIL_DRAIN_TIMEOUT)
        .max(Duration::from_secs(1));
    if let Err(error) = mail.shutdown(mail_deadline).await {
        tracing::error!(error = %error, "queued emails were not all sent");
    }
    if drained.abandoned {
        tracing::warn!("stopped with connections abandoned at the deadline");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Offers `enablebanking` when its application id and key file are set (both or neither).
/// The key is read here, once; one that cannot sign stops the server.
fn enable_banking(
    cli: &Cli,
    builder: aggregation_core::AggregationServiceBuilder,
) -> Result<aggregation_core::AggregationServiceBuilder, StartError> {
    let app_id = cli
        .enablebanking_app_id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty());
    let (app_id, key_file) = match (app_id, &cli.enablebanking_key_file) {
        (None, None) => return Ok(builder),
        (Some(app_id), Some(key_file)) => (app_id, key_file),
        (app_id, _) => {
            let missing = if app_id.is_none() {
                "AGG_ENABLEBANKING_APP_ID"
            } else {
                "AGG_ENABLEBANKING_KEY_FILE"
            };
            return Err(setting(
                missing,
                "set both AGG_ENABLEBANKING_APP_ID and AGG_ENABLEBANKING_KEY_FILE, or neither",
            ));
        }
    };
    let base_url = cli.enablebanking_base_url.trim();
    if !is_http_url(base_url) {
        return Err(setting(
            "AGG_ENABLEBANKING_BASE_URL",
            "expected an http(s) URL",
        ));
    }
    warn_if_readable_by_others(key_file);
    let config = EnableBankingConfig::from_key_file(app_id, key_file)
        .map_err(|e| setting("AGG_ENABLEBANKING_KEY_FILE", e))?
        .with_base_url(base_url);
    let provider =
        EnableBankingProvider::new(config).map_err(|e| setting("AGG_ENABLEBANKING_KEY_FILE", e))?;
    tracing::info!("provider enablebanking offered");
    Ok(builder.provider(provider))
}

/// Offers `plaid` when its client id and secret are set (both or neither).
fn plaid(
    cli: &Cli,
    builder: aggregation_core::AggregationServiceBuilder,
) -> Result<aggregation_core::AggregationServiceBuilder, StartError> {
    let present = |value: &Option<String>| {
        value
            .as_deref()
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    };
    let (client_id, secret) = match (present(&cli.plaid_client_id), present(&cli.plaid_secret)) {
        (None, None) => return Ok(builder),
        (Some(client_id), Some(secret)) => (client_id, secret),
        (client_id, _) => {
            let missing = if client_id.is_none() {
                "AGG_PLAID_CLIENT_ID"
            } else {
                "AGG_PLAID_SECRET"
            };
            return Err(setting(
                missing,
                "set both AGG_PLAID_CLIENT_ID and AGG_PLAID_SECRET, or neither",
            ));
        }
    };
    let allow_http = flag("AGG_PLAID_ALLOW_HTTP", &cli.plaid_allow_http)?;
    let base_url = cli.plaid_base_url.trim();
    if !is_http_url(base_url) {
        return Err(setting("AGG_PLAID_BASE_URL", "expected an https URL"));
    }
    let countries: Vec<String> = cli
        .plaid_country_codes
        .split(',')
        .map(|code| code.trim().to_ascii_uppercase())
        .filter(|code| !code.is_empty())
        .collect();
    if countries.is_empty()
        || countries
            .iter()
            .any(|code| code.len() != 2 || !code.bytes().all(|b| b.is_ascii_uppercase()))
    {
        return Err(setting(
            "AGG_PLAID_COUNTRY_CODES",
            "expected two-letter country codes separated by commas, such as US,CA",
        ));
    }
    let webhook_url = present(&cli.plaid_webhook_url);
    if let Some(url) = &webhook_url
        && !is_http_url(url)
    {
        return Err(setting("AGG_PLAID_WEBHOOK_URL", "expected an http(s) URL"));
    }
    let config = PlaidConfig::new(client_id, secret)
        .with_base_url(base_url)
        .with_webhook_url(webhook_url)
        .with_country_codes(countries)
        .with_allow_http(allow_http);
    let provider = PlaidProvider::new(config).map_err(|e| setting("AGG_PLAID_BASE_URL", e))?;
    if allow_http {
        tracing::warn!("AGG_PLAID_ALLOW_HTTP=1: Plaid may be reached over plain HTTP (test only)");
    }
    tracing::info!("provider plaid offered");
    Ok(builder.provider(provider))
}

/// Warns at start when the Enable Banking private key file may be read by its group or by
/// others (any of the mode's `0o077` bits): the key signs every request as the application.
fn warn_if_readable_by_others(key_file: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(metadata) = std::fs::metadata(key_file) {
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %key_file.display(),
                    mode = format!("{mode:o}"),
                    "AGG_ENABLEBANKING_KEY_FILE is readable by its group or others; restrict it (chmod 600)"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = key_file;
}

/// How long a shutdown waits for queued emails to be sent.
const MAIL_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the metrics are served with `AGG_METRICS=1`.
const METRICS_PATH: &str = "/metrics";

/// Where the sandbox provider is served.
const SANDBOX_PREFIX: &str = "/sandbox/schwab";

/// Where the SimpleFIN sandbox bridge is served.
const SIMPLEFIN_SANDBOX_PREFIX: &str = "/sandbox/simplefin";

/// Where the Plaid sandbox API and its Link page are served.
const PLAID_SANDBOX_PREFIX: &str = "/sandbox/plaid";

/// Where the Enable Banking sandbox API is served.
const ENABLEBANKING_SANDBOX_PREFIX: &str = "/sandbox/enablebanking";

/// The sandbox's default redirect target: shows the code and state to post to the callback
/// (with the bearer token of the user who connects, unless
/// AGG_OAUTH_CALLBACK_REQUIRES_AUTH=0), standing in for the embedding application's page.
async fn sandbox_redirect(
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> ([(http::header::HeaderName, &'static str); 1], String) {
    let query = query.unwrap_or_default();
    let body = serde_json::json!({
        "message": "Authorized. Finish connecting with POST /api/v1/providers/callback and this query, as the user who started connecting (bearer token).",
        "callback": format!("/api/v1/providers/callback?{query}"),
    });
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}

fn outbox(dir: &Path, from: &str) -> impl Mailer {
    OutboxMailer::new(dir, from)
}

fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

fn config(cli: &Cli, address: SocketAddr, sandbox: bool) -> Result<Config, StartError> {
    let base_url = cli
        .base_url
        .clone()
        .unwrap_or_else(|| format!("http://{address}"));
    let jwt_secret = match &cli.jwt_secret {
        Some(secret) => secret.clone().into_bytes(),
        None => generated_secret("jwt-secret", "AGG_JWT_SECRET", || {
            let bytes: [u8; 48] = rand::rng().random();
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        })?
        .into_bytes(),
    };
    let trusted: Vec<IpNet> =
        parse_cidr_list(&cli.trusted_proxies).map_err(|e| setting("AGG_TRUSTED_PROXIES", e))?;
    let login_failure_limit = match cli.login_max_failures {
        0 => None,
        failures => Some(
            LoginFailureLimit::new(
                failures,
                Duration::from_secs(cli.login_failure_window_seconds),
            )
            .map_err(|e| setting("AGG_LOGIN_FAILURE_WINDOW_SECONDS", e))?,
        ),
    };
    let config = Config::new(&base_url, jwt_secret)
        .map_err(|e| match e {
            ConfigError::BaseUrl(_) => setting("AGG_BASE_URL", e),
            _ => setting("AGG_JWT_SECRET", e),
        })?
        .with_mail_from(cli.mail_from.clone())
        .with_rotation_grace(Duration::from_secs(cli.rotation_grace_seconds))
        .with_max_upload_bytes(cli.max_upload_bytes)
        .with_trusted_proxies(trusted)
        .with_login_failure_limit(login_failure_limit)
        .with_admin_emails(split_list(&cli.admin_emails))
        .with_oauth_state_ttl(Duration::from_secs(cli.oauth_state_ttl))
        .with_oauth_callback_requires_auth(flag(
            "AGG_OAUTH_CALLBACK_REQUIRES_AUTH",
            &cli.oauth_callback_requires_auth,
        )?)
        .with_sync_connections_every(cli.sync_interval_seconds.map(Duration::from_secs))
        .with_webhook_allow_private(flag(
            "AGG_WEBHOOK_ALLOW_PRIVATE",
            &cli.webhook_allow_private,
        )?)
        .with_webhook_max_age(Duration::from_secs(
            cli.webhook_max_age_hours.saturating_mul(3600),
        ))
        .with_webhook_disable_after(Duration::from_secs(
            cli.webhook_disable_after_hours.saturating_mul(3600),
        ))
        .with_audit_retention(Duration::from_secs(
            u64::from(cli.audit_retention_days).saturating_mul(24 * 3600),
        ))
        .with_session_max_lifetime(Duration::from_secs(
            u64::from(cli.session_max_days).saturating_mul(24 * 3600),
        ))
        .with_hashing_limits(hashing_limits(cli)?)
        .with_event_stream_heartbeat(Duration::from_secs(cli.event_heartbeat_seconds.max(1)))
        .with_event_streams_per_user(cli.event_streams_per_user)
        .with_max_accounts_per_user(cli.max_accounts_per_user);
    let mut redirect_uris = split_list(&cli.oauth_redirect_uris);
    for uri in &redirect_uris {
        if !is_http_url(uri) {
            return Err(setting(
                "AGG_OAUTH_REDIRECT_URIS",
                format!("{uri:?} is not an http(s) URL"),
            ));
        }
    }
    if redirect_uris.is_empty() && sandbox {
        redirect_uris.push(format!("{}/sandbox/redirect", config.base_url()));
    }
    Ok(config.with_oauth_redirect_uris(redirect_uris))
}

/// `AGG_HASH_CONCURRENCY` and `AGG_HASH_QUEUE` over the per-core default.
fn hashing_limits(cli: &Cli) -> Result<WorkLimits, StartError> {
    let default = WorkLimits::per_core();
    let concurrent = cli.hash_concurrency.unwrap_or(default.concurrent);
    if concurrent == 0 {
        return Err(setting("AGG_HASH_CONCURRENCY", "must be at least 1"));
    }
    let queued = cli
        .hash_queue
        .unwrap_or_else(|| concurrent.saturating_mul(WorkLimits::DEFAULT_QUEUED_PER_SLOT));
    Ok(WorkLimits { concurrent, queued })
}

/// Parses `AGG_ENCRYPTION_KEYS` (or generates it once) so a malformed value stops the start.
fn encryption_keys(value: Option<&str>) -> Result<Vec<(String, Vec<u8>)>, StartError> {
    let value = match value {
        Some(value) => value.to_owned(),
        None => generated_secret("encryption-keys", "AGG_ENCRYPTION_KEYS", || {
            let bytes: [u8; 32] = rand::rng().random();
            format!(
                "k1:{}",
                base64::engine::general_purpose::STANDARD.encode(bytes)
            )
        })?,
    };
    let mut keys = Vec::new();
    for entry in split_list(&value) {
        let (id, encoded) = entry
            .split_once(':')
            .ok_or_else(|| setting("AGG_ENCRYPTION_KEYS", "each key is id:base64"))?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| setting("AGG_ENCRYPTION_KEYS", format!("key {id}: {e}")))?;
        if key.len() != 32 {
            return Err(setting(
                "AGG_ENCRYPTION_KEYS",
                format!("key {id} is {} bytes, not 32", key.len()),
            ));
        }
        keys.push((id.trim().to_owned(), key));
    }
    if keys.is_empty() {
        return Err(setting("AGG_ENCRYPTION_KEYS", "no key given"));
    }
    Ok(keys)
}

/// Reads a secret generated on an earlier start, or generates and stores it (mode 0600).
fn generated_secret(
    file: &str,
    variable: &'static str,
    generate: impl FnOnce() -> String,
) -> Result<String, StartError> {
    let path = Path::new(DATA_DIR).join(file);
    if let Ok(existing) = std::fs::read_to_string(&path) {
        return Ok(existing.trim().to_owned());
    }
    std::fs::create_dir_all(DATA_DIR)?;
    let secret = generate();
    write_private(&path, &secret)?;
    tracing::warn!(
        path = %path.display(),
        "{variable} is not set: generated a secret and stored it there; set {variable} in production"
    );
    Ok(secret)
}

#[cfg(unix)]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents.as_bytes())
}

#[cfg(not(unix))]
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    std::fs::write(path, contents)
}

fn rate_limit_policies(value: Option<&str>) -> Result<PolicyTable, StartError> {
    match value.map(str::trim) {
        None | Some("") => Ok(PolicyTable::builtin()),
        Some("off") => {
            tracing::warn!("rate limiting is off (AGG_RATE_LIMITS=off)");
            Ok(PolicyTable::disabled())
        }
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| setting("AGG_RATE_LIMITS", format!("{path}: {e}")))?;
            PolicyTable::builtin()
                .with_overrides_toml(&text)
                .map_err(|e| setting("AGG_RATE_LIMITS", format!("{path}: {e}")))
        }
    }
}

async fn open_store(
    url: Option<&str>,
    schema: Option<SchemaName>,
) -> Result<Arc<dyn Store>, StartError> {
    let url = match url {
        Some(url) => url.to_owned(),
        None => {
            std::fs::create_dir_all(DATA_DIR)?;
            format!("sqlite://{DATA_DIR}/aggregation.db?mode=rwc")
        }
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let builder = PostgresStore::builder(&url);
        let store = match schema {
            Some(schema) => builder.schema(schema),
            None => builder,
        }
        .connect()
        .await?;
        store.migrate().await?;
        Ok(Arc::new(store))
    } else if url.starts_with("sqlite:") {
        if schema.is_some() {
            tracing::warn!(
                "AGG_DATABASE_SCHEMA is ignored: SQLite keeps its tables in its own file"
            );
        }
        let store = SqliteStore::connect(&url).await?;
        store.migrate().await?;
        Ok(Arc::new(store))
    } else {
        Err(setting(
            "AGG_DATABASE_URL",
            "expected sqlite://… or postgres://…",
        ))
    }
}

async fn grant_admin(store: &dyn Store, email: &str) -> Result<(), StartError> {
    match aggregation_core::admin::grant_admin_by_email(store, email).await {
        Ok(true) => tracing::info!(email, "admin role granted"),
        Ok(false) => tracing::info!(email, "already an admin"),
        Err(error) => return Err(setting("grant-admin", error)),
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutting down; in-flight requests finish");
}
