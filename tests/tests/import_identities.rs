//! Conformance: the rows an import wrote before the import pipeline became one (OFX and the
//! statement-model formats mapped by one merge, issue 39) keep their identities. The fixtures
//! under `tests/fixtures/identities/` hold the rows (user, connections, accounts,
//! transactions, holdings, balance snapshots) that the import code before that change (the
//! mapping of `b6a6348`) wrote for [`FILES`], dumped from SQLite (`sqlite3`, insert mode with
//! column names) and from PostgreSQL (`pg_dump --data-only --column-inserts`, the store's
//! default schema `aggregation`). Each case migrates a fresh database of its backend, loads
//! them, logs in as their user and imports the same files again: no account, transaction or
//! holding is created or updated, and the accounts are the fixture's, ids and balances.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use aggregation_core::store::{PostgresStore, SqliteStore, Store};
use aggregation_core::testing::ThrowawayDatabase;
use aggregation_tests::imports::count;
use aggregation_tests::{
    BANK_QFX, Backend, PASSWORD, Setup, Target, TestApp, postgres_url, run_setup, upload_with,
};
use futures_util::FutureExt as _;
use serde_json::Value;

/// The fixture's user (its password is the suite's [`PASSWORD`]).
const EMAIL: &str = "identities@example.com";

/// The rows of the SQLite fixture.
const SQLITE_ROWS: &str = include_str!("../fixtures/identities/sqlite.sql");

/// The rows of the PostgreSQL fixture.
const POSTGRES_ROWS: &str = include_str!("../fixtures/identities/postgres.sql");

/// An investment statement (OFX 1.x SGML): two positions, a buy and a dividend.
const BROKERAGE_OFX: &str = "OFXHEADER:100
DATA:OFXSGML
VERSION:102

<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS>
<DTSERVER>20240229<LANGUAGE>ENG<FI><ORG>Example Brokerage<FID>9001</FI></SONRS></SIGNONMSGSRSV1>
<INVSTMTMSGSRSV1><INVSTMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<INVSTMTRS><DTASOF>20240229<CURDEF>USD
<INVACCTFROM><BROKERID>broker.example<ACCTID>X-7781</INVACCTFROM>
<INVTRANLIST><DTSTART>20240201<DTEND>20240229
<BUYSTOCK><INVBUY><INVTRAN><FITID>T-100<DTTRADE>20240205</INVTRAN>
<SECID><UNIQUEID>000000001<UNIQUEIDTYPE>CUSIP</SECID><UNITS>10<UNITPRICE>12.50
<COMMISSION>1.00<TOTAL>-126.00<SUBACCTSEC>CASH<SUBACCTFUND>CASH</INVBUY>
<BUYTYPE>BUY</BUYSTOCK>
<INCOME><INVTRAN><FITID>T-101<DTTRADE>20240220</INVTRAN>
<SECID><UNIQUEID>000000002<UNIQUEIDTYPE>CUSIP</SECID><INCOMETYPE>DIV<TOTAL>3.20
<SUBACCTSEC>CASH<SUBACCTFUND>CASH</INCOME>
</INVTRANLIST>
<INVPOSLIST>
<POSSTOCK><INVPOS><SECID><UNIQUEID>000000001<UNIQUEIDTYPE>CUSIP</SECID>
<HELDINACCT>CASH<POSTYPE>LONG<UNITS>10<UNITPRICE>13.00<MKTVAL>130.00
<DTPRICEASOF>20240229</INVPOS></POSSTOCK>
<POSMF><INVPOS><SECID><UNIQUEID>000000002<UNIQUEIDTYPE>CUSIP</SECID>
<HELDINACCT>CASH<POSTYPE>LONG<UNITS>4.5<UNITPRICE>20.00<MKTVAL>90.00
<DTPRICEASOF>20240229</INVPOS></POSMF>
</INVPOSLIST>
<INVBAL><AVAILCASH>250.00<MARGINBALANCE>0<SHORTBALANCE>0</INVBAL>
</INVSTMTRS></INVSTMTTRNRS></INVSTMTMSGSRSV1>
<SECLISTMSGSRSV1><SECLIST>
<STOCKINFO><SECINFO><SECID><UNIQUEID>000000001<UNIQUEIDTYPE>CUSIP</SECID>
<SECNAME>Example Corp<TICKER>EXMP</SECINFO></STOCKINFO>
<MFINFO><SECINFO><SECID><UNIQUEID>000000002<UNIQUEIDTYPE>CUSIP</SECID>
<SECNAME>Example Index Fund<TICKER>EXIF</SECINFO></MFINFO>
</SECLIST></SECLISTMSGSRSV1>
</OFX>
";

/// A CSV export without ids (every row's id is derived), with two identical rows on one day
/// and a closing balance column.
const WALLET_CSV: &str = "Date,Description,Amount,Balance
2024-04-01,Coffee,-3.50,96.50
2024-04-01,Coffee,-3.50,93.00
2024-04-02,Refund,10.00,103.00
2024-04-03,Rent,-900.00,-797.00
";

/// A CAMT.053 statement: the parser's own fixture (references as ids, an opening and a
/// closing balance).
const CAMT_053: &str =
    include_str!("../../aggregation-core/src/import/camt/fixtures/v02_statement.xml");

/// The text parts of an upload, as `upload_with` takes them.
type Parts = &'static [(&'static str, &'static str)];

/// The files of the fixture: (file name, content, parts), imported in this order.
const FILES: [(&str, &str, Parts); 4] = [
    ("bank.qfx", BANK_QFX, &[]),
    ("brokerage.ofx", BROKERAGE_OFX, &[]),
    ("wallet.csv", WALLET_CSV, &[("account_name", "Wallet")]),
    ("statement.xml", CAMT_053, &[]),
];

/// Imports every file of [`FILES`]; their answers.
async fn import_files(app: &TestApp, token: &str) -> Vec<Value> {
    let mut answers = Vec::new();
    for (name, content, parts) in FILES {
        let body = upload_with(app, Some(name), content.as_bytes(), parts, token)
            .await
            .expect(201);
        answers.push(body);
    }
    answers
}

/// The accounts as (id, name, balance), sorted.
async fn account_keys(app: &TestApp, token: &str) -> Vec<(String, String, String)> {
    let list = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    let mut keys: Vec<(String, String, String)> = list["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .map(|account| {
            (
                account["id"].to_string(),
                account["name"].to_string(),
                account["balance_amount"].to_string(),
            )
        })
        .collect();
    keys.sort();
    keys
}

/// Every file again: nothing created, nothing changed.
async fn reimporting_creates_nothing(app: TestApp) {
    let tokens = app.login(EMAIL, PASSWORD).await;
    let token = tokens["access_token"].as_str().expect("access").to_owned();
    let before = account_keys(&app, &token).await;
    assert_eq!(before.len(), 4, "the fixture's accounts: {before:?}");
    for (answer, (name, _, _)) in import_files(&app, &token).await.iter().zip(FILES) {
        for key in [
            "accounts_created",
            "accounts_updated",
            "transactions_created",
            "transactions_updated",
            "holdings_created",
            "holdings_updated",
        ] {
            assert_eq!(count(answer, key), 0, "{name}: {key} in {answer}");
        }
        assert!(
            count(answer, "transactions_skipped") > 0,
            "{name}: the file's rows are the stored ones: {answer}"
        );
    }
    assert_eq!(account_keys(&app, &token).await, before);
}

/// Runs the case on a fresh database of `backend` holding the fixture's rows.
async fn with_fixture(target: Target, backend: Backend) {
    match backend {
        Backend::Sqlite => {
            let folder = std::env::temp_dir().join(format!(
                "aggregation-identities-{}",
                uuid::Uuid::new_v4().simple()
            ));
            std::fs::create_dir_all(&folder).expect("temporary folder");
            let url = format!("sqlite://{}?mode=rwc", folder.join("before.db").display());
            let store = SqliteStore::connect(&url).await.expect("open SQLite file");
            store.migrate().await.expect("migrate");
            let pool = sqlx::SqlitePool::connect(&url).await.expect("open again");
            sqlx::raw_sql(SQLITE_ROWS)
                .execute(&pool)
                .await
                .expect("load the fixture");
            pool.close().await;
            let store: Arc<dyn Store> = Arc::new(store);
            let setup = Setup {
                store: Some(store),
                ..Setup::default()
            };
            let outcome = AssertUnwindSafe(run_setup(
                target,
                backend,
                setup,
                reimporting_creates_nothing,
            ))
            .catch_unwind()
            .await;
            let _ = std::fs::remove_dir_all(folder);
            if let Err(panic) = outcome {
                std::panic::resume_unwind(panic);
            }
        }
        Backend::Postgres => {
            let Some(admin_url) = postgres_url() else {
                eprintln!("skipping PostgreSQL case: AGG_TEST_DATABASE_URL is not set");
                return;
            };
            let database = ThrowawayDatabase::create(&admin_url, "agg_identities")
                .await
                .expect("a database of the case's own");
            let store = PostgresStore::connect(database.url())
                .await
                .expect("connect");
            store.migrate().await.expect("migrate");
            let pool = sqlx::PgPool::connect(database.url())
                .await
                .expect("connect again");
            sqlx::raw_sql(POSTGRES_ROWS)
                .execute(&pool)
                .await
                .expect("load the fixture");
            pool.close().await;
            let setup = Setup {
                store: Some(Arc::new(store)),
                ..Setup::default()
            };
            // The database is dropped whatever the case's outcome.
            let outcome = AssertUnwindSafe(run_setup(
                target,
                backend,
                setup,
                reimporting_creates_nothing,
            ))
            .catch_unwind()
            .await;
            database.drop_database().await;
            if let Err(panic) = outcome {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

macro_rules! cases {
    ($($name:ident: $target:ident, $backend:ident;)+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                with_fixture(Target::$target, Backend::$backend).await;
            }
        )+
    };
}

cases! {
    bare_sqlite_rows_written_before_are_matched: Bare, Sqlite;
    axum_sqlite_rows_written_before_are_matched: Axum, Sqlite;
    actix_sqlite_rows_written_before_are_matched: Actix, Sqlite;
    bare_postgres_rows_written_before_are_matched: Bare, Postgres;
    axum_postgres_rows_written_before_are_matched: Axum, Postgres;
    actix_postgres_rows_written_before_are_matched: Actix, Postgres;
}
