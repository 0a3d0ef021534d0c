#![doc = include_str!("../README.md")]

pub mod admin;
pub mod api;
pub(crate) mod app;
pub(crate) mod auth;
pub(crate) mod config;
pub mod crypto;
pub(crate) mod dates;
mod email;
pub mod enrich;
mod enums;
pub mod events;
pub mod import;
mod job_outcome;
pub mod jobs;
pub mod mail;
pub mod matching;
#[cfg(feature = "metrics")]
pub mod metrics;
mod mount;
mod outage;
mod outbound;
pub(crate) mod problem;
pub mod providers;
pub mod rate_limit;
pub(crate) mod records;
pub(crate) mod service;
pub(crate) mod sessions;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod user_data;
mod user_slots;
pub(crate) mod webhooks;
pub(crate) mod work;

// What an embedder names to build, configure and run the service, in one place.

#[doc(inline)]
pub use api::ResponseBody;
#[doc(inline)]
pub use config::{Config, ConfigError, LoginFailureLimit, WorkLimits};
#[doc(inline)]
pub use crypto::{CryptoError, Keyring};
#[doc(inline)]
#[cfg(feature = "redis")]
pub use events::RedisEventRelay;
#[doc(inline)]
pub use events::{DomainEvent, EventSink, TracingEventSink};
#[doc(inline)]
pub use jobs::{JobRunner, JobsError, JobsHandle};
#[doc(inline)]
#[cfg(feature = "smtp")]
pub use mail::SmtpMailer;
#[doc(inline)]
pub use mail::{
    Email, MailError, MailQueueHandle, MailShutdownError, Mailer, MemoryMailer, OutboxMailer,
};
#[doc(inline)]
pub use mount::Mount;
#[cfg(feature = "enablebanking")]
pub use providers::{EnableBankingConfig, EnableBankingProvider};
#[cfg(feature = "plaid")]
pub use providers::{PlaidConfig, PlaidProvider};
#[doc(inline)]
pub use providers::{Provider, ProviderCredentials, ProviderError, ProviderSecret};
#[doc(inline)]
#[cfg(feature = "schwab")]
pub use providers::{SchwabConfig, SchwabProvider};
#[doc(inline)]
#[cfg(feature = "simplefin")]
pub use providers::{SimplefinConfig, SimplefinProvider};
#[doc(no_inline)]
pub use rate_limit::IpNet;
#[doc(inline)]
#[cfg(feature = "redis")]
pub use rate_limit::RedisRateLimitStore;
#[doc(inline)]
pub use rate_limit::{
    CidrError, InMemoryRateLimitStore, Policy, PolicyError, PolicyTable, RateLimitStore,
    RateLimitStoreError, Scope, parse_cidr_list,
};
#[doc(inline)]
pub use service::{AggregationService, AggregationServiceBuilder, BuildError, PeerAddr};
#[doc(inline)]
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
#[doc(inline)]
#[cfg(feature = "postgres")]
pub use store::{PostgresStore, PostgresStoreBuilder, SchemaName};
#[doc(inline)]
pub use store::{Store, StoreError};

/// The sqlx the stores are built on: `SqliteStore::new` and `PostgresStore::new` take its
/// pools, so an embedder sharing a pool names the same version.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use sqlx;
