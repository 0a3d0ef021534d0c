//! One SQL store, generic over its database: [`SqlStore<B>`] for `B` = `sqlx::Sqlite` or
//! `sqlx::Postgres`, compiled once.
//!
//! Generic sqlx code would have to restate, on every function, the bounds that make a value
//! bindable, a row decodable and a connection an executor, for every type it binds or reads:
//! Rust does not imply where-clauses. Instead, the sealed [`Driver`] trait (the methods behind
//! [`Backend`]) does the few backend-bound things concretely, once per database: begin a write
//! transaction, bind a value, execute, fetch rows as records or scalars. Its generic parameters
//! carry this module's own bounds, [`SqlParam`], [`SqlRow`] and [`SqlScalar`], whose supertraits
//! are sqlx's `Encode + Type`, `FromRow` and `Decode + Type` for each compiled backend, so that
//! inside an implementation for one database they are sqlx's bounds for it. The aggregate SQL
//! then reads like plain sqlx through the thin [`query`], [`query_as`], [`query_scalar`] and
//! [`QueryBuilder`] here, and a connection or pool is an [`Executor`].

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::{Pool, SqlSafeStr};

use super::StoreError;

/// A transaction of a backend.
pub(super) type Tx<B> = sqlx::Transaction<'static, B>;

/// A query of a backend as sqlx builds it.
pub(super) type RawQuery<B> = sqlx::query::Query<'static, B, <B as sqlx::Database>::Arguments>;

/// A database the SQL store runs on: `sqlx::Sqlite` (feature `sqlite`) or `sqlx::Postgres`
/// (feature `postgres`). Sealed: the store's SQL is written for these two.
pub trait Backend: Driver {}

impl<B: Driver> Backend for B {}

/// What each backend does concretely, so that the SQL above it is generic without sqlx's
/// bounds (see the module docs). Not nameable outside the crate, which seals [`Backend`].
pub trait Driver: sqlx::Database {
    /// What a store of this backend knows besides its pool: the PostgreSQL schema, nothing for
    /// SQLite.
    type Schema: fmt::Debug + Clone + Send + Sync + 'static;

    /// Starts a transaction that will write.
    const BEGIN_WRITE: &'static str;

    /// Whether one write transaction at a time holds the whole database (SQLite's write
    /// lock), so that a long writer makes every other one wait.
    const ONE_WRITER: bool;

    /// Counts the `applied_at` column, which only the former migration runner's table has.
    const LEGACY_MIGRATIONS_PROBE: &'static str;

    /// The transaction search's word condition (over the index of migration 0015) up to the
    /// bound words, each a double-quoted word (`"coffee" "oakland"`): every one must occur.
    const SEARCH_WORDS_OPEN: &'static str;

    /// The word condition as a test of each row of an account read newest first (closed
    /// by [`SEARCH_WORDS_CLOSE`](Self::SEARCH_WORDS_CLOSE) too).
    const SEARCH_WORDS_SCAN_OPEN: &'static str;

    /// What closes [`SEARCH_WORDS_OPEN`](Self::SEARCH_WORDS_OPEN) after the bound words.
    const SEARCH_WORDS_CLOSE: &'static str;

    /// How many rows of every user hold the bound words, counted up to the bound limit
    /// (`None`: the backend's planner chooses how to read them without it).
    const SEARCH_HITS_PROBE: Option<&'static str>;

    /// The SQL type a decimal stored as text is cast to for comparing amounts.
    const DECIMAL_TYPE: &'static str;

    /// Rows per multi-row statement that writes records (transactions, matches). At most 32
    /// parameters a row stay below SQLite's 32,766 and PostgreSQL's 65,535 bound parameters.
    const ROWS_PER_STATEMENT: usize;

    /// Keys (provider ids, row ids) per statement that looks rows up by a list of them.
    const KEYS_PER_STATEMENT: usize;

    /// Whether a list of keys is joined to their rows by a lateral subquery, so that the
    /// planner probes the index once per key instead of reading every row of the parent
    /// ([`QueryBuilder::push_keyed_rows`]).
    const LATERAL_KEY_PROBES: bool;

    /// The embedded migrations.
    fn migrator() -> Migrator;

    /// What must happen in the migration transaction before the migrations run.
    fn prepare_migration<'e>(
        schema: &'e Self::Schema,
        connection: &'e mut Self::Connection,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'e;

    /// Creates sqlx's migrations table, named `table`, when missing.
    fn ensure_migrations_table<'e>(
        connection: &'e mut Self::Connection,
        table: &'e str,
    ) -> impl Future<Output = Result<(), MigrateError>> + Send + 'e;

    /// Applies the migrations not applied yet on `connection`.
    fn run_migrations<'e>(
        migrator: &'e Migrator,
        connection: &'e mut Self::Connection,
    ) -> impl Future<Output = Result<(), MigrateError>> + Send + 'e;

    /// Binds the next parameter of `query`.
    fn bind<'t, T: SqlParam<'t>>(query: RawQuery<Self>, value: T) -> RawQuery<Self>;

    /// Appends a parameter to a built query.
    fn push_bind<'t, T: SqlParam<'t>>(builder: &mut sqlx::QueryBuilder<Self>, value: T);

    /// The query a builder built (which it must not build again).
    fn build(builder: &mut sqlx::QueryBuilder<Self>) -> RawQuery<Self>;

    /// The query prepared for this run alone, not kept in the connection's statement cache
    /// (planned for the values of each run, on PostgreSQL).
    fn run_once(query: RawQuery<Self>) -> RawQuery<Self>;

    /// Runs a statement; the number of rows it affected.
    fn execute<'e>(
        query: RawQuery<Self>,
        on: Exec<'e, Self>,
    ) -> impl Future<Output = Result<Done, sqlx::Error>> + Send + 'e;

    /// Runs SQL text without preparing it (several statements, or DDL).
    fn execute_raw<'e>(
        sql: &'static str,
        on: Exec<'e, Self>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'e;

    /// Every row, as records.
    fn fetch_all<'e, R: SqlRow>(
        query: RawQuery<Self>,
        on: Exec<'e, Self>,
    ) -> impl Future<Output = Result<Vec<R>, sqlx::Error>> + Send + 'e;

    /// The first row as a record, if any.
    fn fetch_optional<'e, R: SqlRow>(
        query: RawQuery<Self>,
        on: Exec<'e, Self>,
    ) -> impl Future<Output = Result<Option<R>, sqlx::Error>> + Send + 'e;

    /// The first column of every row.
    fn fetch_all_scalars<'e, O: SqlScalar>(
        query: RawQuery<Self>,
        on: Exec<'e, Self>,
    ) -> impl Future<Output = Result<Vec<O>, sqlx::Error>> + Send + 'e;

    /// The first column of the first row, if any.
    fn fetch_optional_scalar<'e, O: SqlScalar>(
        query: RawQuery<Self>,
        on: Exec<'e, Self>,
    ) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send + 'e;
}

/// Declares a bound that is sqlx's for one backend when its feature is on, and holds for every
/// type when it is off, so that a build with one backend asks nothing of the other.
macro_rules! per_backend_bound {
    ($(#[$doc:meta])* $name:ident, $feature:literal, $($bound:tt)+) => {
        $(#[$doc])*
        #[cfg(feature = $feature)]
        pub trait $name: $($bound)+ {}
        #[cfg(feature = $feature)]
        impl<T: ?Sized + $($bound)+> $name for T {}
        $(#[$doc])*
        #[cfg(not(feature = $feature))]
        pub trait $name {}
        #[cfg(not(feature = $feature))]
        impl<T: ?Sized> $name for T {}
    };
    ($(#[$doc:meta])* $name:ident<$lt:lifetime>, $feature:literal, $($bound:tt)+) => {
        $(#[$doc])*
        #[cfg(feature = $feature)]
        pub trait $name<$lt>: $($bound)+ {}
        #[cfg(feature = $feature)]
        impl<$lt, T: ?Sized + $($bound)+> $name<$lt> for T {}
        $(#[$doc])*
        #[cfg(not(feature = $feature))]
        pub trait $name<$lt> {}
        #[cfg(not(feature = $feature))]
        impl<$lt, T: ?Sized> $name<$lt> for T {}
    };
}

per_backend_bound!(
    /// A value SQLite can bind.
    SqliteParam<'t>, "sqlite", sqlx::Encode<'t, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>
);
per_backend_bound!(
    /// A value PostgreSQL can bind.
    PostgresParam<'t>, "postgres", sqlx::Encode<'t, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>
);
per_backend_bound!(
    /// A record a SQLite row decodes into.
    SqliteRecord, "sqlite", for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
);
per_backend_bound!(
    /// A record a PostgreSQL row decodes into.
    PostgresRecord, "postgres", for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
);
per_backend_bound!(
    /// A column SQLite decodes.
    SqliteColumn, "sqlite", for<'r> sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>
);
per_backend_bound!(
    /// A column PostgreSQL decodes.
    PostgresColumn, "postgres", for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>
);

/// A value every compiled backend can bind (`'t`: what its encoding borrows, as in sqlx).
pub trait SqlParam<'t>: SqliteParam<'t> + PostgresParam<'t> {}

impl<'t, T: SqliteParam<'t> + PostgresParam<'t>> SqlParam<'t> for T {}

/// A record every compiled backend's rows decode into (a `FromRow` type or a tuple).
pub trait SqlRow: SqliteRecord + PostgresRecord + Send + Unpin + 'static {}

impl<T: SqliteRecord + PostgresRecord + Send + Unpin + 'static> SqlRow for T {}

/// A single column every compiled backend decodes.
pub trait SqlScalar: SqliteColumn + PostgresColumn + Send + Unpin + 'static {}

impl<T: SqliteColumn + PostgresColumn + Send + Unpin + 'static> SqlScalar for T {}

/// Where a statement runs: the pool (a connection of its own) or a connection, usually the
/// open transaction.
pub enum Exec<'e, B: sqlx::Database> {
    /// Any pooled connection.
    Pool(&'e Pool<B>),
    /// This connection.
    Connection(&'e mut B::Connection),
}

/// What a statement can run on: `&pool`, `&mut *tx` or `&mut **tx`.
pub(super) trait Executor<'e, B: Backend>: Send + 'e {
    /// Where the statement runs.
    fn into_exec(self) -> Exec<'e, B>;
}

impl<'e, B: Backend> Executor<'e, B> for &'e Pool<B> {
    fn into_exec(self) -> Exec<'e, B> {
        Exec::Pool(self)
    }
}

impl<'e, B: Backend> Executor<'e, B> for &'e mut B::Connection {
    fn into_exec(self) -> Exec<'e, B> {
        Exec::Connection(self)
    }
}

/// The outcome of a statement.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// Rows inserted, updated or deleted.
    pub(super) rows_affected: u64,
}

impl Done {
    /// Rows inserted, updated or deleted.
    pub(super) fn rows_affected(&self) -> u64 {
        self.rows_affected
    }
}

/// A statement with its parameters, as `sqlx::query` makes.
#[must_use = "a query does nothing until executed"]
pub(super) struct Query<B: Backend>(RawQuery<B>);

/// A query whose rows decode into `R`, as `sqlx::query_as` makes.
#[must_use = "a query does nothing until executed"]
pub(super) struct QueryAs<B: Backend, R>(RawQuery<B>, PhantomData<fn() -> R>);

/// A query whose first column decodes into `O`, as `sqlx::query_scalar` makes.
#[must_use = "a query does nothing until executed"]
pub(super) struct QueryScalar<B: Backend, O>(RawQuery<B>, PhantomData<fn() -> O>);

/// A statement, prepared and cached like `sqlx::query`.
pub(super) fn query<B: Backend>(sql: impl SqlSafeStr) -> Query<B> {
    Query(sqlx::query(sql))
}

/// A query of records, like `sqlx::query_as`.
pub(super) fn query_as<B: Backend, R: SqlRow>(sql: impl SqlSafeStr) -> QueryAs<B, R> {
    QueryAs(sqlx::query(sql), PhantomData)
}

/// A query of one column, like `sqlx::query_scalar`.
pub(super) fn query_scalar<B: Backend, O: SqlScalar>(sql: impl SqlSafeStr) -> QueryScalar<B, O> {
    QueryScalar(sqlx::query(sql), PhantomData)
}

/// SQL text run without preparing it, like `sqlx::raw_sql`.
pub(super) fn raw_sql(sql: &'static str) -> RawSql {
    RawSql(sql)
}

/// SQL text from [`raw_sql`].
pub(super) struct RawSql(&'static str);

impl RawSql {
    /// Runs it.
    pub(super) fn execute<'e, B: Backend>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'e {
        B::execute_raw(self.0, on.into_exec())
    }
}

impl<B: Backend> Query<B> {
    /// Binds the next parameter.
    pub(super) fn bind<'t, T: SqlParam<'t>>(self, value: T) -> Self {
        Self(B::bind(self.0, value))
    }

    /// Runs it; the rows affected.
    pub(super) fn execute<'e>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<Done, sqlx::Error>> + Send + 'e {
        B::execute(self.0, on.into_exec())
    }
}

impl<B: Backend, R: SqlRow> QueryAs<B, R> {
    /// Binds the next parameter.
    pub(super) fn bind<'t, T: SqlParam<'t>>(self, value: T) -> Self {
        Self(B::bind(self.0, value), PhantomData)
    }

    /// Every row.
    pub(super) fn fetch_all<'e>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<Vec<R>, sqlx::Error>> + Send + 'e {
        B::fetch_all(self.0, on.into_exec())
    }

    /// The first row, if any.
    pub(super) fn fetch_optional<'e>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<Option<R>, sqlx::Error>> + Send + 'e {
        B::fetch_optional(self.0, on.into_exec())
    }

    /// The first row; `RowNotFound` when there is none.
    pub(super) fn fetch_one<'e>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<R, sqlx::Error>> + Send + 'e {
        let row = B::fetch_optional(self.0, on.into_exec());
        async move { row.await?.ok_or(sqlx::Error::RowNotFound) }
    }
}

impl<B: Backend, O: SqlScalar> QueryScalar<B, O> {
    /// Binds the next parameter.
    pub(super) fn bind<'t, T: SqlParam<'t>>(self, value: T) -> Self {
        Self(B::bind(self.0, value), PhantomData)
    }

    /// The first column of every row.
    pub(super) fn fetch_all<'e>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<Vec<O>, sqlx::Error>> + Send + 'e {
        B::fetch_all_scalars(self.0, on.into_exec())
    }

    /// The first column of the first row, if any.
    pub(super) fn fetch_optional<'e>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send + 'e {
        B::fetch_optional_scalar(self.0, on.into_exec())
    }

    /// The first column of the first row; `RowNotFound` when there is none.
    pub(super) fn fetch_one<'e>(
        self,
        on: impl Executor<'e, B>,
    ) -> impl Future<Output = Result<O, sqlx::Error>> + Send + 'e {
        let value = B::fetch_optional_scalar(self.0, on.into_exec());
        async move { value.await?.ok_or(sqlx::Error::RowNotFound) }
    }
}

/// The most parameters of a built statement that is kept prepared whatever its shape (see
/// [`QueryBuilder::build`]).
const KEPT_PARAMETERS: usize = 64;

/// sqlx's `QueryBuilder` (same SQL text, `?` or `$n` placeholders as the backend wants), with
/// binds bounded by [`SqlParam`].
pub(super) struct QueryBuilder<B: Backend> {
    builder: sqlx::QueryBuilder<B>,
    /// Whether the statement is planned for each run's values rather than prepared once
    /// and kept (see [`QueryBuilder::push_keyed_rows`]).
    planned_per_run: bool,
    /// Parameters pushed so far.
    parameters: usize,
    /// Tuples of the `VALUES` lists pushed so far.
    tuples: usize,
}

impl<B: Backend> QueryBuilder<B> {
    /// Starts with `init`, with room for the clauses that follow (one allocation for the
    /// whole statement rather than one per doubling).
    pub(super) fn new(init: impl AsRef<str>) -> Self {
        let init = init.as_ref();
        let mut sql = String::with_capacity(init.len() + 256);
        sql.push_str(init);
        Self {
            builder: sqlx::QueryBuilder::new(sql),
            planned_per_run: false,
            parameters: 0,
            tuples: 0,
        }
    }

    /// Appends SQL text.
    pub(super) fn push(&mut self, sql: impl fmt::Display) -> &mut Self {
        self.builder.push(sql);
        self
    }

    /// Appends a parameter.
    pub(super) fn push_bind<'t, T: SqlParam<'t>>(&mut self, value: T) -> &mut Self {
        B::push_bind(&mut self.builder, value);
        self.parameters += 1;
        self
    }

    /// A list whose items are separated by `separator`.
    pub(super) fn separated(&mut self, separator: &'static str) -> Separated<'_, B> {
        Separated {
            builder: self,
            separator,
            push_separator: false,
        }
    }

    /// Appends `VALUES (…), (…)`, one tuple per item, filled by `push_tuple`.
    pub(super) fn push_values<I, F>(&mut self, tuples: I, mut push_tuple: F) -> &mut Self
    where
        I: IntoIterator,
        F: FnMut(Separated<'_, B>, I::Item),
    {
        self.push("VALUES ");
        let mut first = true;
        for tuple in tuples {
            self.push(if first { "(" } else { ", (" });
            first = false;
            push_tuple(self.separated(", "), tuple);
            self.push(")");
            self.tuples += 1;
        }
        self
    }

    /// Appends the rows of `table` (named `alias`) under `parent` whose `key` column is one of
    /// `keys`, as a `FROM` clause: `(VALUES ($1), …) AS keys` joined to the table, each key
    /// found by one probe of the `(parent, key)` index, whatever the table holds. `key IN
    /// (…)` would not do: PostgreSQL's generic plan of a list of parameters scans every row of
    /// the parent and compares each with the whole list (2 s for 1,000 keys against an account
    /// of 60,000 rows). A plain join would not either: with statistics taken before an import
    /// filled the account, PostgreSQL hashes every row of the parent for each batch (33 ms per
    /// 260 keys at 50,000 rows, growing with the account), so there each key's rows are read by
    /// a lateral subquery that the planner may not flatten (`OFFSET 0`), and the statement is
    /// planned for each run instead of kept prepared: a plan kept from when the table was
    /// nearly empty probed the wrong index of the two that start with the parent (every row of
    /// the account read for each key, 250 ms per 128 keys at 50,000 rows). The caller may go
    /// on with `WHERE` on `alias`'s columns. `keys` must not be empty.
    pub(super) fn push_keyed_rows<'t, K: SqlParam<'t>, P: SqlParam<'t>>(
        &mut self,
        keys: impl IntoIterator<Item = K>,
        (table, alias): (&str, &str),
        (parent_column, parent): (&str, P),
        key_column: &str,
    ) -> &mut Self {
        self.push("(");
        self.push_values(keys, |mut row, key| {
            row.push_bind(key);
        });
        if B::LATERAL_KEY_PROBES {
            self.planned_per_run = true;
            self.push(format_args!(
                ") AS keys CROSS JOIN LATERAL (SELECT * FROM {table} WHERE {parent_column} = "
            ))
            .push_bind(parent)
            .push(format_args!(
                " AND {key_column} = keys.column1 OFFSET 0) AS {alias}"
            ))
        } else {
            self.push(format_args!(
                ") AS keys JOIN {table} {alias} ON {alias}.{key_column} = keys.column1 \
                 AND {alias}.{parent_column} = "
            ))
            .push_bind(parent)
        }
    }

    /// Appends the keyset condition of a page that goes on after the row at `after` in
    /// `(t.transaction_date, t.id)` order (`newest_first`: the other way), within `range`'s
    /// bound on that side if the query has one (which the caller then leaves out). Both arms
    /// are spelled out rather than as a row comparison (the same text on both backends),
    /// behind one bound on the date alone, the tighter of the position's and the range's:
    /// that bound is what lets SQLite seek the `(account_id, transaction_date, id)` index to
    /// the position instead of reading every row before it (page 20,000 of a 1,000,000-row
    /// account took 144 ms without it, more than by `offset`), and SQLite seeks with the
    /// first of two bounds on one side, not the tighter.
    pub(super) fn push_after_position(
        &mut self,
        after: crate::store::TransactionPosition,
        range: Option<chrono::NaiveDate>,
        newest_first: bool,
    ) -> &mut Self {
        let (date, id) = (after.transaction_date, after.id);
        let (bound, before) = if newest_first {
            (range.map_or(date, |end| end.min(date)), "<")
        } else {
            (range.map_or(date, |start| start.max(date)), ">")
        };
        self.push(format_args!(" AND t.transaction_date {before}= "))
            .push_bind(bound)
            .push(format_args!(" AND (t.transaction_date {before} "))
            .push_bind(date)
            .push(" OR (t.transaction_date = ")
            .push_bind(date)
            .push(format_args!(" AND t.id {before} "))
            .push_bind(id)
            .push("))")
    }

    /// The statement. It is kept prepared (sqlx caches 100 statements per connection) when its
    /// text recurs: at most [`KEPT_PARAMETERS`] parameters, or a `VALUES` list of exactly
    /// [`Driver::ROWS_PER_STATEMENT`] or [`Driver::KEYS_PER_STATEMENT`] tuples, a full chunk.
    /// Any other long list (the last chunk of a batch, whose length differs from one import to
    /// the next) is prepared for its run and freed: kept, each length was a statement of its
    /// own, and SQLite's compiled program of a long list is large (about 120 MB of prepared
    /// remainders at the peak of one 10 MB CSV import).
    pub(super) fn build(&mut self) -> Query<B> {
        Query(self.take())
    }

    /// The query of records.
    pub(super) fn build_query_as<R: SqlRow>(&mut self) -> QueryAs<B, R> {
        QueryAs(self.take(), PhantomData)
    }

    /// The query of one column.
    pub(super) fn build_query_scalar<O: SqlScalar>(&mut self) -> QueryScalar<B, O> {
        QueryScalar(self.take(), PhantomData)
    }

    fn take(&mut self) -> RawQuery<B> {
        let query = B::build(&mut self.builder);
        let recurs = self.parameters <= KEPT_PARAMETERS
            || self.tuples == B::ROWS_PER_STATEMENT
            || self.tuples == B::KEYS_PER_STATEMENT;
        if self.planned_per_run || !recurs {
            B::run_once(query)
        } else {
            query
        }
    }
}

/// A list in a [`QueryBuilder`], like sqlx's `Separated`.
pub(super) struct Separated<'b, B: Backend> {
    builder: &'b mut QueryBuilder<B>,
    separator: &'static str,
    push_separator: bool,
}

impl<B: Backend> Separated<'_, B> {
    /// Appends the separator when not first, then a parameter.
    pub(super) fn push_bind<'t, T: SqlParam<'t>>(&mut self, value: T) -> &mut Self {
        if self.push_separator {
            self.builder.push(self.separator);
        }
        self.builder.push_bind(value);
        self.push_separator = true;
        self
    }
}

/// The methods of [`Driver`] that read the same for both backends, sqlx doing the rest;
/// expanded inside each backend's implementation, where sqlx's bounds are concrete.
macro_rules! sqlx_driver_methods {
    () => {
        fn bind<'t, T: $crate::store::backend::SqlParam<'t>>(
            query: $crate::store::backend::RawQuery<Self>,
            value: T,
        ) -> $crate::store::backend::RawQuery<Self> {
            query.bind(value)
        }

        fn push_bind<'t, T: $crate::store::backend::SqlParam<'t>>(
            builder: &mut sqlx::QueryBuilder<Self>,
            value: T,
        ) {
            builder.push_bind(value);
        }

        fn run_once(
            query: $crate::store::backend::RawQuery<Self>,
        ) -> $crate::store::backend::RawQuery<Self> {
            query.persistent(false)
        }

        fn build(builder: &mut sqlx::QueryBuilder<Self>) -> $crate::store::backend::RawQuery<Self> {
            use sqlx::Execute as _;
            let mut built = builder.build();
            // A builder's arguments are always there, taken once; binding fails loudly in it.
            let arguments = built.take_arguments().ok().flatten().unwrap_or_default();
            sqlx::query_with(built.sql(), arguments)
        }

        async fn execute<'e>(
            query: $crate::store::backend::RawQuery<Self>,
            on: $crate::store::backend::Exec<'e, Self>,
        ) -> Result<$crate::store::backend::Done, sqlx::Error> {
            let done = match on {
                $crate::store::backend::Exec::Pool(pool) => query.execute(pool).await?,
                $crate::store::backend::Exec::Connection(connection) => {
                    query.execute(connection).await?
                }
            };
            Ok($crate::store::backend::Done {
                rows_affected: done.rows_affected(),
            })
        }

        async fn execute_raw<'e>(
            sql: &'static str,
            on: $crate::store::backend::Exec<'e, Self>,
        ) -> Result<(), sqlx::Error> {
            match on {
                $crate::store::backend::Exec::Pool(pool) => {
                    sqlx::raw_sql(sql).execute(pool).await?
                }
                $crate::store::backend::Exec::Connection(connection) => {
                    sqlx::raw_sql(sql).execute(connection).await?
                }
            };
            Ok(())
        }

        async fn fetch_all<'e, R: $crate::store::backend::SqlRow>(
            query: $crate::store::backend::RawQuery<Self>,
            on: $crate::store::backend::Exec<'e, Self>,
        ) -> Result<Vec<R>, sqlx::Error> {
            let query = query.try_map(|row| R::from_row(&row));
            match on {
                $crate::store::backend::Exec::Pool(pool) => query.fetch_all(pool).await,
                $crate::store::backend::Exec::Connection(connection) => {
                    query.fetch_all(connection).await
                }
            }
        }

        async fn fetch_optional<'e, R: $crate::store::backend::SqlRow>(
            query: $crate::store::backend::RawQuery<Self>,
            on: $crate::store::backend::Exec<'e, Self>,
        ) -> Result<Option<R>, sqlx::Error> {
            let query = query.try_map(|row| R::from_row(&row));
            match on {
                $crate::store::backend::Exec::Pool(pool) => query.fetch_optional(pool).await,
                $crate::store::backend::Exec::Connection(connection) => {
                    query.fetch_optional(connection).await
                }
            }
        }

        async fn fetch_all_scalars<'e, O: $crate::store::backend::SqlScalar>(
            query: $crate::store::backend::RawQuery<Self>,
            on: $crate::store::backend::Exec<'e, Self>,
        ) -> Result<Vec<O>, sqlx::Error> {
            let query =
                query.try_map(|row| sqlx::FromRow::from_row(&row).map(|(value,): (O,)| value));
            match on {
                $crate::store::backend::Exec::Pool(pool) => query.fetch_all(pool).await,
                $crate::store::backend::Exec::Connection(connection) => {
                    query.fetch_all(connection).await
                }
            }
        }

        async fn fetch_optional_scalar<'e, O: $crate::store::backend::SqlScalar>(
            query: $crate::store::backend::RawQuery<Self>,
            on: $crate::store::backend::Exec<'e, Self>,
        ) -> Result<Option<O>, sqlx::Error> {
            let query =
                query.try_map(|row| sqlx::FromRow::from_row(&row).map(|(value,): (O,)| value));
            match on {
                $crate::store::backend::Exec::Pool(pool) => query.fetch_optional(pool).await,
                $crate::store::backend::Exec::Connection(connection) => {
                    query.fetch_optional(connection).await
                }
            }
        }
    };
}
pub(super) use sqlx_driver_methods;

/// A store on SQL through sqlx, the same SQL for every [`Backend`]: use it as
/// `SqliteStore` (feature `sqlite`) or `PostgresStore` (feature `postgres`), which add
/// their backend's constructors.
pub struct SqlStore<B: Backend> {
    pub(super) pool: Pool<B>,
    /// What `migrate` needs besides the pool: the PostgreSQL schema to create.
    pub(super) schema: B::Schema,
}

impl<B: Backend> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            schema: self.schema.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for SqlStore<B> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("SqlStore")
            .field("backend", &B::NAME)
            .field("pool", &self.pool)
            .field("schema", &self.schema)
            .finish()
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::{Driver as _, KEPT_PARAMETERS, QueryBuilder};

    type Lite = sqlx::Sqlite;

    /// Whether the statement of `rows` one-column tuples is kept prepared.
    fn kept_with_rows(rows: usize) -> bool {
        let mut insert = QueryBuilder::<Lite>::new("INSERT INTO t (a) ");
        insert.push_values(0..rows, |mut row, value| {
            row.push_bind(i64::try_from(value).unwrap_or_default());
        });
        sqlx::Execute::persistent(&insert.build().0)
    }

    #[test]
    fn short_statements_and_full_chunks_are_kept_prepared_other_long_lists_are_not() {
        assert!(kept_with_rows(1));
        assert!(kept_with_rows(KEPT_PARAMETERS));
        assert!(!kept_with_rows(KEPT_PARAMETERS + 1));
        assert!(!kept_with_rows(Lite::ROWS_PER_STATEMENT - 1));
        assert!(kept_with_rows(Lite::ROWS_PER_STATEMENT));
        assert!(kept_with_rows(Lite::KEYS_PER_STATEMENT));
    }

    #[test]
    fn a_long_list_of_parameters_outside_values_is_not_kept() {
        let mut select = QueryBuilder::<Lite>::new("SELECT 1 FROM t WHERE a IN (");
        let mut listed = select.separated(", ");
        for value in 0..=KEPT_PARAMETERS {
            listed.push_bind(i64::try_from(value).unwrap_or_default());
        }
        select.push(")");
        assert!(!sqlx::Execute::persistent(&select.build().0));
    }
}
