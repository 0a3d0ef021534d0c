//! A small embedded migration runner shared by both backends.
//!
//! Each migration runs in its own transaction and is recorded in `aggregation_migrations`;
//! applied migrations are skipped, so `migrate()` is safe to call at every start.

/// One embedded migration.
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) description: &'static str,
    pub(crate) sql: &'static str,
}

/// Declares the embedded migrations of a backend folder.
macro_rules! migrations {
    ($dir:literal: $($version:literal => $name:literal),+ $(,)?) => {
        &[$($crate::store::migrate::Migration {
            version: $version,
            description: $name,
            sql: include_str!(concat!("../../migrations/", $dir, "/", $name, ".sql")),
        }),+]
    };
}
pub(crate) use migrations;
