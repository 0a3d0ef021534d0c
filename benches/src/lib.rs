//! Shared helpers for the benchmarks: a service over in-memory SQLite (or any store) and
//! request builders.

use aggregation_core::mail::MemoryMailer;
use aggregation_core::rate_limit::PolicyTable;
use aggregation_core::store::{PostgresStore, SqliteStore, Store};
use aggregation_core::testing::ThrowawayDatabase;
use aggregation_core::{AggregationService, Config};
use bytes::Bytes;
use http::{Method, Request, Response, header};
use http_body_util::{BodyExt as _, Full};
use tower::ServiceExt as _;

/// Password of every benchmark user.
pub const PASSWORD: &str = "Bench-Passw0rd!";

/// The benchmark configuration.
pub fn config() -> Config {
    Config::new(
        "http://bench.local",
        b"benchmark-secret-0123456789abcdefghijkl".to_vec(),
    )
    .expect("valid config")
}

/// A service over in-memory SQLite with rate limiting off (benchmarks repeat requests).
pub async fn service() -> (AggregationService, MemoryMailer) {
    service_on(SqliteStore::in_memory().await.expect("sqlite"), config())
}

/// A service over `store` (migrated already) with this configuration and rate limiting off.
pub fn service_on(store: impl Store, config: Config) -> (AggregationService, MemoryMailer) {
    let mailer = MemoryMailer::new();
    let service = AggregationService::builder(config)
        .store(store)
        .mailer(mailer.clone())
        .rate_limit_policies(PolicyTable::disabled())
        .build()
        .expect("service");
    (service, mailer)
}

/// A service over a store shared with the bench (to seed and read it directly), with this
/// configuration and rate limiting off.
pub fn service_sharing(
    store: std::sync::Arc<dyn Store>,
    config: Config,
) -> (AggregationService, MemoryMailer) {
    let mailer = MemoryMailer::new();
    let service = AggregationService::builder(config)
        .shared_store(store)
        .mailer(mailer.clone())
        .rate_limit_policies(PolicyTable::disabled())
        .build()
        .expect("service");
    (service, mailer)
}

/// Registers, verifies and logs in a user; the access token.
pub async fn access_token(
    service: &AggregationService,
    mailer: &MemoryMailer,
    email: &str,
) -> String {
    verified_user(service, mailer, email).await;
    let (status, body) = call(
        service,
        json_request(
            Method::POST,
            "/api/v1/sessions",
            &serde_json::json!({"email": email, "password": PASSWORD}),
        ),
    )
    .await;
    assert_eq!(status, 201, "login");
    body["access_token"]
        .as_str()
        .expect("access token")
        .to_owned()
}

/// A JSON request.
pub fn json_request(method: Method, path: &str, body: &serde_json::Value) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request")
}

/// Sends a request to the bare service; the status and JSON body.
pub async fn call(
    service: &AggregationService,
    request: Request<Full<Bytes>>,
) -> (u16, serde_json::Value) {
    let response: Response<_> = service.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    (status, serde_json::from_slice(&body).unwrap_or_default())
}

/// Registers and verifies a user; returns nothing, the user can log in afterwards.
pub async fn verified_user(service: &AggregationService, mailer: &MemoryMailer, email: &str) {
    let (status, _) = call(
        service,
        json_request(
            Method::POST,
            "/api/v1/users",
            &serde_json::json!({"email": email, "password": PASSWORD}),
        ),
    )
    .await;
    assert_eq!(status, 201, "registration");
    let emails = mailer
        .wait_for(email, 1, std::time::Duration::from_secs(5))
        .await;
    let token = emails
        .first()
        .and_then(|email| {
            email
                .text
                .split(|c: char| !c.is_ascii_hexdigit())
                .find(|word| word.len() == 64)
                .map(str::to_owned)
        })
        .expect("verification token");
    let (status, _) = call(
        service,
        json_request(
            Method::POST,
            "/api/v1/email-verifications",
            &serde_json::json!({"token": token}),
        ),
    )
    .await;
    assert_eq!(status, 201, "verification");
}

/// A PostgreSQL database created for the run, dropped by [`BenchDatabase::drop_database`].
pub struct BenchDatabase(ThrowawayDatabase);

impl BenchDatabase {
    /// Creates and migrates a fresh database next to the one `admin_url` names.
    pub async fn create(admin_url: &str) -> (Self, PostgresStore) {
        let database = ThrowawayDatabase::create(admin_url, "agg_bench")
            .await
            .expect("AGG_BENCH_DATABASE_URL reachable, and a database created there");
        let store = PostgresStore::connect(database.url())
            .await
            .expect("connect bench database");
        store.migrate().await.expect("migrate bench database");
        (Self(database), store)
    }

    /// Drops the database (forcing out remaining connections).
    pub async fn drop_database(self) {
        self.0.drop_database().await;
    }
}

/// A two-worker runtime, as the benchmarks run on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Prepares a fixture with `prepare` over SQLite in a temporary file and hands it to `bench`
/// as `("sqlite", fixture)`; then the same over a database created on the PostgreSQL server
/// of `AGG_BENCH_DATABASE_URL` (`"postgres"`), when it is set. Both are removed afterwards.
/// `AGG_BENCH_BACKEND=postgres` (or `sqlite`) runs that backend alone: a fixture of a million
/// rows takes minutes to prepare on each.
pub fn on_each_backend<T, F, Fut>(
    runtime: &tokio::runtime::Runtime,
    prepare: F,
    mut bench: impl FnMut(&str, &T),
) where
    F: Fn(std::sync::Arc<dyn Store>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let only = std::env::var("AGG_BENCH_BACKEND").ok();
    let runs = |backend: &str| only.as_deref().is_none_or(|only| only == backend);
    if runs("sqlite") {
        on_sqlite(runtime, &prepare, &mut bench);
    }
    if !runs("postgres") {
        return;
    }
    let Some(admin_url) = std::env::var("AGG_BENCH_DATABASE_URL").ok() else {
        eprintln!("skipping PostgreSQL: AGG_BENCH_DATABASE_URL is not set");
        return;
    };
    let (database, postgres) = runtime.block_on(async {
        let (database, store) = BenchDatabase::create(&admin_url).await;
        (database, prepare(std::sync::Arc::new(store)).await)
    });
    bench("postgres", &postgres);
    drop(postgres);
    runtime.block_on(database.drop_database());
}

/// [`on_each_backend`]'s SQLite half: a store in a temporary file, removed afterwards.
fn on_sqlite<T, F, Fut>(
    runtime: &tokio::runtime::Runtime,
    prepare: &F,
    bench: &mut impl FnMut(&str, &T),
) where
    F: Fn(std::sync::Arc<dyn Store>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let folder = std::env::temp_dir().join(format!(
        "aggregation-bench-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&folder).expect("folder");
    let url = format!("sqlite://{}?mode=rwc", folder.join("bench.db").display());
    let sqlite = runtime.block_on(async {
        let store = SqliteStore::connect(&url).await.expect("sqlite");
        store.migrate().await.expect("migrate");
        prepare(std::sync::Arc::new(store)).await
    });
    bench("sqlite", &sqlite);
    drop(sqlite);
    let _ = std::fs::remove_dir_all(&folder);
}

/// Creates `count` live sessions (with their refresh tokens) of `user_id` directly in `store`,
/// valid for a day; their ids.
pub async fn seed_sessions(
    store: &dyn Store,
    user_id: uuid::Uuid,
    count: usize,
) -> Vec<uuid::Uuid> {
    use aggregation_core::store::{NewRefreshToken, NewSession, now};

    let at = now();
    let expires_at = at + chrono::TimeDelta::days(1);
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let id = uuid::Uuid::now_v7();
        let session = NewSession {
            id,
            user_id,
            device_info: None,
            ip_address: None,
            user_agent: None,
            created_at: at,
            expires_at,
        };
        let token = NewRefreshToken {
            // Unique across runs on one database: the session ids are.
            digest: id.as_bytes().to_vec(),
            session_id: id,
            user_id,
            token_version: 0,
            issued_at: at,
            expires_at,
        };
        store
            .create_session(&session, &token)
            .await
            .expect("session");
        ids.push(id);
    }
    ids
}

/// When each revoked session's webhook delivery arrived, by session id.
pub type Arrivals =
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>>;

/// A webhook receiver on a loopback socket that answers every POST with 204 and notes when
/// the delivery of each session (`data.session_id`) first arrived; its URL.
pub async fn serve_arrivals_receiver(arrivals: Arrivals) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    let app = axum::Router::new().route(
        "/hooks",
        axum::routing::post(move |body: Bytes| {
            let arrived = std::time::Instant::now();
            let arrivals = arrivals.clone();
            async move {
                let session = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|event| event["data"]["session_id"].as_str().map(str::to_owned));
                if let Some(session) = session {
                    arrivals
                        .lock()
                        .expect("arrivals")
                        .entry(session)
                        .or_insert(arrived);
                }
                http::StatusCode::NO_CONTENT
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}/hooks")
}

/// One bank line of [`bank_statement_ofx1`].
pub struct OfxBankLine {
    /// The line's `FITID`.
    pub fit_id: String,
    /// When it was posted.
    pub posted: chrono::DateTime<chrono::Utc>,
    /// Signed amount in cents: negative is money out.
    pub cents: i64,
    /// The payee (`NAME`).
    pub name: String,
    /// The memo (`MEMO`).
    pub memo: String,
}

/// An OFX 1.x checking statement in EUR holding `lines` from `start` to `end`: the OFX file of
/// the same entries that the format benches parse beside their own.
pub fn bank_statement_ofx1(
    lines: impl IntoIterator<Item = OfxBankLine>,
    start: chrono::DateTime<chrono::Utc>,
    end: chrono::DateTime<chrono::Utc>,
) -> Vec<u8> {
    use aggregation_core::import::{
        OfxDocument, Signon, Statement, StatementAccount, StatementKind, StatementTransaction,
        TransactionKind, write_ofx1,
    };
    let transactions = lines
        .into_iter()
        .map(|line| {
            let trn_type = if line.cents < 0 { "DEBIT" } else { "CREDIT" };
            StatementTransaction {
                fit_id: line.fit_id,
                kind: TransactionKind::Bank(trn_type.to_owned()),
                trn_type: Some(trn_type.to_owned()),
                posted: line.posted.fixed_offset(),
                user_date: None,
                settled: None,
                amount: rust_decimal::Decimal::new(line.cents, 2),
                name: Some(line.name),
                memo: Some(line.memo),
                check_number: None,
                symbol: None,
                security_name: None,
                security_id: None,
                units: None,
                unit_price: None,
                commission: None,
                income_type: None,
                currency: None,
            }
        })
        .collect();
    let document = OfxDocument {
        signon: Some(Signon {
            status_code: 0,
            severity: "INFO".to_owned(),
            message: None,
            org: Some("Bench Bank".to_owned()),
            fid: Some("1234".to_owned()),
        }),
        statements: vec![Statement {
            kind: StatementKind::Bank,
            currency: "EUR".to_owned(),
            account: StatementAccount {
                account_id: Some("0123456789".to_owned()),
                bank_id: Some("10020030".to_owned()),
                branch_id: None,
                broker_id: None,
                account_type: Some("CHECKING".to_owned()),
            },
            transactions,
            positions: Vec::new(),
            ledger_balance: None,
            available_balance: None,
            investment_balance: None,
            start: Some(start),
            end: Some(end),
            as_of: None,
        }],
        warnings: Vec::new(),
    };
    write_ofx1(&document).into_bytes()
}
