#![doc = include_str!("../README.md")]

pub mod admin;
pub mod api;
pub mod auth;
pub mod config;
pub mod crypto;
pub mod dates;
pub mod events;
pub mod import;
pub mod jobs;
pub mod mail;
pub mod problem;
pub mod providers;
pub mod rate_limit;
pub(crate) mod records;
pub mod service;
pub(crate) mod sessions;
pub mod store;
pub mod work;

pub use config::{Config, ConfigError, LoginFailureLimit, WorkLimits};
pub use service::{AggregationService, AggregationServiceBuilder, BuildError, PeerAddr};
