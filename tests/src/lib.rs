//! The conformance harness: one set of cases, run against the bare `tower::Service`, the axum
//! adapter and the actix adapter (over real sockets), on SQLite and, when
//! `AGG_TEST_DATABASE_URL` is set, on PostgreSQL (a fresh schema per test in that database,
//! dropped after).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use aggregation_core::events::MemoryEventSink;
use aggregation_core::mail::{Email, MemoryMailer};
use aggregation_core::providers::SchwabProvider;
use aggregation_core::rate_limit::{PolicyTable, RateLimitStore};
use aggregation_core::store::{SqliteStore, Store};
use aggregation_core::testing::ThrowawaySchema;
use aggregation_core::{AggregationService, AggregationServiceBuilder, Config, PeerAddr};
use aggregation_sandbox::SchwabSandbox;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use serde_json::Value;
use tower::ServiceExt as _;

pub mod imports;
pub mod proxy;
pub mod receiver;
mod servers;
pub mod simplefin;
mod statements;

pub use statements::{
    BANK_QFX, BOUNDARY, hold_upload, multipart, post_imports, upload, upload_with,
};

/// How the service is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `tower::ServiceExt::oneshot` on the bare service.
    Bare,
    /// The axum adapter over a loopback socket.
    Axum,
    /// The actix adapter over a loopback socket.
    Actix,
}

/// Which store backs the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// In-memory SQLite.
    Sqlite,
    /// A fresh PostgreSQL database from `AGG_TEST_DATABASE_URL`.
    Postgres,
}

/// A response as the client saw it.
#[derive(Debug)]
pub struct TestResponse {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body bytes.
    pub body: Bytes,
}

impl TestResponse {
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A header as a string.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// Asserts the status and, for failures, the problem shape; returns the JSON body.
    #[track_caller]
    pub fn expect(&self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            String::from_utf8_lossy(&self.body)
        );
        let body = self.json();
        if status >= 400 {
            assert_eq!(
                self.header("content-type"),
                Some("application/problem+json")
            );
            assert_eq!(body["status"], status);
            assert!(
                body["type"]
                    .as_str()
                    .is_some_and(|t| t.contains("/errors/"))
            );
            assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()));
            assert!(body["detail"].as_str().is_some_and(|t| !t.is_empty()));
            assert!(
                body["instance"]
                    .as_str()
                    .is_some_and(|t| t.starts_with('/'))
            );
            assert!(body["trace_id"].as_str().is_some_and(|t| t.len() == 32));
        }
        body
    }

    /// Asserts a problem with this status and code; returns the body.
    #[track_caller]
    pub fn expect_problem(&self, status: u16, code: &str) -> Value {
        let body = self.expect(status);
        let kind = body["type"].as_str().unwrap_or_default();
        assert!(
            kind.ends_with(&format!("/errors/{code}")),
            "expected code {code}, got {kind}"
        );
        body
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a stream read may wait for its next block before the case fails: far longer than
/// any event or heartbeat of a case takes, so only a stuck (or buffered) stream reaches it.
const STREAM_READ_LIMIT: Duration = Duration::from_secs(20);

/// One block of a server-sent-events stream.
#[derive(Debug, Clone, PartialEq)]
pub enum SseBlock {
    /// A comment line (`: heartbeat`), without its colon.
    Comment(String),
    /// An event frame.
    Event(SseEvent),
}

/// An event frame of a server-sent-events stream.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    /// `id:`.
    pub id: String,
    /// `event:`.
    pub event: String,
    /// `data:` as JSON.
    pub data: Value,
}

/// A response whose body is read as it arrives, block by block.
pub struct TestStream {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    body: http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>,
    buffer: String,
}

impl TestStream {
    /// A header as a string.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The whole (finite) body, as a [`TestResponse`]: for answers that are not streams.
    pub async fn into_response(self) -> TestResponse {
        let body = tokio::time::timeout(STREAM_READ_LIMIT, self.body.collect())
            .await
            .expect("the body ends")
            .expect("body")
            .to_bytes();
        TestResponse {
            status: self.status,
            headers: self.headers,
            body,
        }
    }

    /// The next block, as soon as it has arrived whole; `None` when the stream ended. Fails
    /// the case when nothing arrives for 20 s.
    pub async fn next_block(&mut self) -> Option<SseBlock> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                return Some(parse_block(block.trim_end_matches('\n')));
            }
            let frame = tokio::time::timeout(STREAM_READ_LIMIT, self.body.frame())
                .await
                .expect("the stream sends its next block in time")?;
            let frame = frame.expect("stream body");
            if let Ok(data) = frame.into_data() {
                self.buffer
                    .push_str(std::str::from_utf8(&data).expect("UTF-8 stream"));
            }
        }
    }

    /// The next event frame, skipping comments; panics when the stream ends first.
    pub async fn next_event(&mut self) -> SseEvent {
        loop {
            match self.next_block().await {
                Some(SseBlock::Event(event)) => return event,
                Some(SseBlock::Comment(_)) => {}
                None => panic!("the stream ended before an event"),
            }
        }
    }
}

fn parse_block(block: &str) -> SseBlock {
    let mut event = SseEvent {
        id: String::new(),
        event: String::new(),
        data: Value::Null,
    };
    let mut comment = None;
    for line in block.split('\n') {
        if let Some(text) = line.strip_prefix(':') {
            comment = Some(text.trim().to_owned());
        } else if let Some(id) = line.strip_prefix("id: ") {
            id.clone_into(&mut event.id);
        } else if let Some(kind) = line.strip_prefix("event: ") {
            kind.clone_into(&mut event.event);
        } else if let Some(data) = line.strip_prefix("data: ") {
            event.data = serde_json::from_str(data).expect("data is JSON");
        } else {
            panic!("unexpected line in the event stream: {line:?}");
        }
    }
    match comment {
        Some(text) if event.id.is_empty() => SseBlock::Comment(text),
        _ => SseBlock::Event(event),
    }
}

/// Where requests go.
/// A request in flight whose body is not complete, from [`TestApp::hold_request`]; dropping it
/// ends the request.
#[derive(Debug)]
pub enum HeldRequest {
    /// The bare target: the rest of the body would come through the sender; the task awaits
    /// the answer.
    Bare(
        tokio::sync::mpsc::Sender<Bytes>,
        tokio::task::JoinHandle<()>,
    ),
    /// An HTTP front: the open socket.
    Socket(tokio::net::TcpStream),
}

impl HeldRequest {
    /// Whether the server has answered (or closed) the request already: it was refused
    /// before it began reading the body.
    pub fn answered(&self) -> bool {
        match self {
            Self::Bare(_, answer) => answer.is_finished(),
            Self::Socket(socket) => {
                let mut byte = [0u8; 1];
                !matches!(socket.try_read(&mut byte), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock)
            }
        }
    }
}

impl Drop for HeldRequest {
    fn drop(&mut self) {
        if let Self::Bare(_, answer) = self {
            answer.abort();
        }
    }
}

enum Client {
    Bare(AggregationService),
    Http {
        base: String,
        client: Box<
            hyper_util::client::legacy::Client<
                hyper_util::client::legacy::connect::HttpConnector,
                Full<Bytes>,
            >,
        >,
    },
}

/// A running service under test.
pub struct TestApp {
    /// The target.
    pub target: Target,
    /// The backend.
    pub backend: Backend,
    /// Emails the service sent.
    pub mailer: MemoryMailer,
    /// The store, for seeding records.
    pub store: Arc<dyn Store>,
    /// Domain events the service emitted.
    pub events: MemoryEventSink,
    /// The service under test (for its jobs runner and host-side operations).
    pub service: AggregationService,
    /// The provider sandbox of the case, with its base URL, when the setup asked for one.
    pub sandbox: Option<(SchwabSandbox, String)>,
    /// What the setup made for the case ([`Setup::context`]): a fake API it serves, say.
    pub context: Option<Arc<dyn std::any::Any + Send + Sync>>,
    client: Client,
    _server: servers::ServerGuard,
    _sandbox_server: servers::ServerGuard,
}

/// Default test password that passes the rule.
pub const PASSWORD: &str = "Corr3ct-Horse!";

/// Test JWT secret.
pub const JWT_SECRET: &[u8] = b"conformance-suite-secret-0123456789abcdef";

/// The base URL the service under test is configured with.
pub const BASE_URL: &str = "http://aggregation.test";

/// The default test configuration.
pub fn test_config() -> Config {
    #[expect(clippy::unwrap_used, reason = "static test configuration")]
    Config::new(BASE_URL, JWT_SECRET.to_vec()).unwrap()
}

/// A PostgreSQL schema named for one test (created by the first migration) and dropped after
/// it: a schema rather than a database, since `DROP DATABASE` waits for a checkpoint.
fn throwaway_schema(url: &str) -> ThrowawaySchema {
    ThrowawaySchema::new(url, "agg_test").expect("a valid schema name")
}

/// The Redis URL of the suite (`AGG_TEST_REDIS_URL`), if configured; says that the case is
/// skipped when not.
pub fn redis_url() -> Option<String> {
    let url = std::env::var("AGG_TEST_REDIS_URL")
        .ok()
        .filter(|url| !url.trim().is_empty());
    if url.is_none() {
        eprintln!("skipping Redis case: AGG_TEST_REDIS_URL is not set");
    }
    url
}

/// Deletes the Redis keys starting with `prefix` (what a case's buckets left behind); does
/// nothing when Redis cannot be reached.
pub async fn delete_redis_keys(url: &str, prefix: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    if let Ok(mut connection) = client.get_multiplexed_async_connection().await {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut connection)
            .await
            .unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<(), _> = redis::cmd("DEL")
                .arg(keys)
                .query_async(&mut connection)
                .await;
        }
    }
}

/// The PostgreSQL URL of the suite, if configured.
pub fn postgres_url() -> Option<String> {
    std::env::var("AGG_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// What a case needs beyond the defaults.
pub struct Setup {
    /// The service configuration.
    pub config: Config,
    /// Rate-limit policies; the default cases run with limiting off because they repeat
    /// requests on purpose.
    pub policies: PolicyTable,
    /// Where buckets live; `None` for the in-process default.
    pub rate_limit_store: Option<Arc<dyn RateLimitStore>>,
    /// A Schwab-compatible sandbox to serve on a loopback socket and offer as the
    /// `schwab-sandbox` provider.
    pub sandbox: Option<SchwabSandbox>,
    /// The store to serve from instead of a fresh one of the case's backend (already
    /// migrated; the case owns its database).
    pub store: Option<Arc<dyn Store>>,
    /// Wraps the case's store (fresh or given) before the service gets it, and
    /// [`TestApp::store`] is the wrapper (a store some of whose calls are slow, say).
    pub wrap_store: Option<StoreWrapper>,
    /// Adds to the service builder (more providers, for example).
    pub builder_hook: Option<fn(AggregationServiceBuilder) -> AggregationServiceBuilder>,
    /// Adds to the service builder with what the setup made (a provider configured for a
    /// fake API the setup started, for example); runs after `builder_hook`.
    pub builder_with: Option<BuilderStep>,
    /// Handed to the case as [`TestApp::context`] (the fake API the setup started, which
    /// stops when dropped).
    pub context: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// What [`Setup::wrap_store`] does to the case's store.
pub type StoreWrapper = fn(Arc<dyn Store>) -> Arc<dyn Store>;

/// A step of [`Setup::builder_with`].
pub type BuilderStep =
    Box<dyn FnOnce(AggregationServiceBuilder) -> AggregationServiceBuilder + Send>;

impl Default for Setup {
    fn default() -> Self {
        Self {
            config: test_config(),
            policies: PolicyTable::disabled(),
            rate_limit_store: None,
            sandbox: None,
            store: None,
            wrap_store: None,
            builder_hook: None,
            builder_with: None,
            context: None,
        }
    }
}

/// Two stores over separate connection pools to one database, as two service instances
/// sharing it would have: a fresh PostgreSQL schema when `AGG_TEST_DATABASE_URL` is set, else
/// a SQLite file in a fresh temporary folder. Call [`SharedDatabase::cleanup`] when done.
pub struct SharedDatabase {
    /// The first instance's store.
    pub first: Arc<dyn Store>,
    /// The second instance's store.
    pub second: Arc<dyn Store>,
    /// Which backend.
    pub backend: Backend,
    schema: Option<ThrowawaySchema>,
    folder: Option<std::path::PathBuf>,
}

impl SharedDatabase {
    /// Opens (and migrates) the shared database.
    pub async fn open() -> Self {
        if let Some(admin_url) = postgres_url() {
            let schema = throwaway_schema(&admin_url);
            let first = schema.builder().connect().await.expect("connect");
            first.migrate().await.expect("migrate");
            let second = schema.builder().connect().await.expect("connect");
            second.migrate().await.expect("migrate again");
            return Self {
                first: Arc::new(first),
                second: Arc::new(second),
                backend: Backend::Postgres,
                schema: Some(schema),
                folder: None,
            };
        }
        let folder = std::env::temp_dir().join(format!(
            "aggregation-test-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&folder).expect("temporary folder");
        let url = format!("sqlite://{}?mode=rwc", folder.join("shared.db").display());
        let first = SqliteStore::connect(&url).await.expect("open SQLite file");
        first.migrate().await.expect("migrate");
        let second = SqliteStore::connect(&url).await.expect("open SQLite file");
        second.migrate().await.expect("migrate again");
        Self {
            first: Arc::new(first),
            second: Arc::new(second),
            backend: Backend::Sqlite,
            schema: None,
            folder: Some(folder),
        }
    }

    /// A service over one of the stores.
    pub fn service(store: &Arc<dyn Store>, config: Config) -> AggregationService {
        AggregationService::builder(config)
            .shared_store(store.clone())
            .mailer(MemoryMailer::new())
            .build()
            .expect("service builds")
    }

    /// Drops the PostgreSQL schema or removes the temporary folder.
    pub async fn cleanup(self) {
        drop(self.first);
        drop(self.second);
        if let Some(schema) = self.schema {
            schema.drop_schema().await;
        }
        if let Some(folder) = self.folder {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

/// Runs one case against one target and backend with the default configuration.
pub async fn run<F, Fut>(target: Target, backend: Backend, case: F)
where
    F: FnOnce(TestApp) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_setup(target, backend, Setup::default(), case).await;
}

/// Runs one case with a custom configuration.
pub async fn run_with<C, F, Fut>(target: Target, backend: Backend, config: C, case: F)
where
    C: FnOnce() -> Config,
    F: FnOnce(TestApp) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let setup = Setup {
        config: config(),
        ..Setup::default()
    };
    run_setup(target, backend, setup, case).await;
}

/// The backing store of a case, and the schema to drop after it.
async fn make_store(backend: Backend) -> Option<(Arc<dyn Store>, Option<ThrowawaySchema>)> {
    match backend {
        Backend::Sqlite => Some((
            Arc::new(SqliteStore::in_memory().await.expect("in-memory SQLite")),
            None,
        )),
        Backend::Postgres => {
            let Some(admin_url) = postgres_url() else {
                eprintln!("skipping PostgreSQL case: AGG_TEST_DATABASE_URL is not set");
                return None;
            };
            let schema = throwaway_schema(&admin_url);
            let store = schema
                .builder()
                .connect()
                .await
                .expect("connect test database");
            store.migrate().await.expect("migrate test database");
            Some((Arc::new(store), Some(schema)))
        }
    }
}

/// Runs one case with a full [`Setup`]. Skips (saying so) a PostgreSQL case when
/// `AGG_TEST_DATABASE_URL` is unset.
pub async fn run_setup<F, Fut>(target: Target, backend: Backend, setup: Setup, case: F)
where
    F: FnOnce(TestApp) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (store, schema) = match setup.store {
        Some(store) => (store, None),
        None => {
            let Some(made) = make_store(backend).await else {
                return;
            };
            made
        }
    };
    let store = match setup.wrap_store {
        Some(wrap) => wrap(store),
        None => store,
    };
    let mailer = MemoryMailer::new();
    let events = MemoryEventSink::new();
    let mut builder = AggregationService::builder(setup.config)
        .shared_store(store.clone())
        .mailer(mailer.clone())
        .events(events.clone())
        .rate_limit_policies(setup.policies);
    if let Some(limits) = setup.rate_limit_store {
        builder = builder.rate_limit_store(limits);
    }
    if let Some(hook) = setup.builder_hook {
        builder = hook(builder);
    }
    if let Some(step) = setup.builder_with {
        builder = step(builder);
    }
    let (sandbox, sandbox_server) = match setup.sandbox {
        Some(sandbox) => {
            let (base, guard) = servers::start_sandbox(sandbox.clone()).await;
            builder = builder.provider(
                SchwabProvider::new(sandbox.config(base.clone())).expect("sandbox provider"),
            );
            (Some((sandbox, base)), guard)
        }
        None => (None, servers::ServerGuard::None),
    };
    let service = builder.build().expect("service builds");
    let handle = service.clone();
    let (client, server) = match target {
        Target::Bare => (Client::Bare(service), servers::ServerGuard::None),
        Target::Axum => {
            let (base, guard) = servers::start_axum(service).await;
            (http_client(base), guard)
        }
        Target::Actix => {
            let (base, guard) = servers::start_actix(service);
            (http_client(base), guard)
        }
    };
    let app = TestApp {
        target,
        backend,
        mailer,
        store,
        events,
        service: handle,
        sandbox,
        context: setup.context,
        client,
        _server: server,
        _sandbox_server: sandbox_server,
    };
    let outcome = tokio::spawn(case(app)).await;
    if let Some(schema) = schema {
        schema.drop_schema().await;
    }
    if let Err(error) = outcome {
        if error.is_panic() {
            std::panic::resume_unwind(error.into_panic());
        }
        panic!("case did not finish: {error}");
    }
}

fn http_client(base: String) -> Client {
    Client::Http {
        base,
        client: Box::new(
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http(),
        ),
    }
}

impl TestApp {
    /// The case's [`context`](Self::context) as a `T`; panics when the setup made none or
    /// another type.
    pub fn context<T: std::any::Any>(&self) -> &T {
        self.context
            .as_deref()
            .and_then(|context| context.downcast_ref::<T>())
            .expect("the setup made a context of this type")
    }

    /// The address of the server under test (`http://127.0.0.1:PORT`); `None` for the bare
    /// target, which has no socket. For cases that need to hold one connection themselves.
    pub fn base_url(&self) -> Option<&str> {
        match &self.client {
            Client::Bare(_) => None,
            Client::Http { base, .. } => Some(base),
        }
    }

    /// Sends a request built by the case.
    pub async fn send(&self, request: Request<Full<Bytes>>) -> TestResponse {
        self.send_streaming(request).await.into_response().await
    }

    /// Sends a request built by the case; its answer's body is read as it arrives.
    pub async fn send_streaming(&self, request: Request<Full<Bytes>>) -> TestStream {
        let (parts, body) = match &self.client {
            Client::Bare(service) => {
                let mut request = request;
                // What an adapter would add: the bare target sees a loopback client too.
                if request.extensions().get::<PeerAddr>().is_none() {
                    request
                        .extensions_mut()
                        .insert(PeerAddr(SocketAddr::from(([127, 0, 0, 1], 40_000))));
                }
                let response = service
                    .clone()
                    .oneshot(request)
                    .await
                    .expect("infallible service");
                let (parts, body) = response.into_parts();
                (parts, body.map_err(|never| match never {}).boxed_unsync())
            }
            Client::Http { base, client } => {
                let (mut parts, body) = request.into_parts();
                let path = parts
                    .uri
                    .path_and_query()
                    .map_or("/", |path| path.as_str())
                    .to_owned();
                parts.uri = format!("{base}{path}").parse().expect("valid uri");
                let response = client
                    .request(Request::from_parts(parts, body))
                    .await
                    .expect("request reaches the server");
                let (parts, body) = response.into_parts();
                let body = body
                    .map_err(|error| -> BoxError { Box::new(error) })
                    .boxed_unsync();
                (parts, body)
            }
        };
        TestStream {
            status: parts.status,
            headers: parts.headers,
            body,
            buffer: String::new(),
        }
    }

    /// Sends a request whose body stops after `first` (of the `Content-Length` the request
    /// declares) and stays open until the returned guard is dropped: the server is left
    /// reading it. For cases that need a request in flight (a held slot); dropping the guard
    /// ends the request (the socket closes, or the bare target's body ends short).
    pub async fn hold_request(&self, request: Request<()>, first: Bytes) -> HeldRequest {
        match &self.client {
            Client::Bare(service) => {
                let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(1);
                sender.send(first).await.expect("the body is read");
                let frames = futures_util::stream::unfold(receiver, |mut receiver| async move {
                    let chunk = receiver.recv().await?;
                    Some((
                        Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(chunk)),
                        receiver,
                    ))
                });
                let (mut parts, ()) = request.into_parts();
                parts
                    .extensions
                    .insert(PeerAddr(SocketAddr::from(([127, 0, 0, 1], 40_000))));
                let request = Request::from_parts(parts, http_body_util::StreamBody::new(frames));
                let service = service.clone();
                let answer = tokio::spawn(async move {
                    let _ = service.oneshot(request).await;
                });
                HeldRequest::Bare(sender, answer)
            }
            Client::Http { base, .. } => {
                use tokio::io::AsyncWriteExt as _;
                let address = base.trim_start_matches("http://");
                let mut socket = tokio::net::TcpStream::connect(address)
                    .await
                    .expect("the server listens");
                let path = request
                    .uri()
                    .path_and_query()
                    .map_or("/", |path| path.as_str());
                let mut head = format!(
                    "{} {path} HTTP/1.1\r\nhost: {address}\r\n",
                    request.method()
                );
                for (name, value) in request.headers() {
                    head.push_str(&format!(
                        "{name}: {}\r\n",
                        value.to_str().expect("ASCII header")
                    ));
                }
                head.push_str("\r\n");
                socket.write_all(head.as_bytes()).await.expect("head sent");
                socket.write_all(&first).await.expect("first bytes sent");
                socket.flush().await.expect("flushed");
                HeldRequest::Socket(socket)
            }
        }
    }

    /// Sends a request with an optional JSON body and bearer token.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        bearer: Option<&str>,
    ) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(path).header(
            header::USER_AGENT,
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        );
        if let Some(token) = bearer {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match body {
            Some(value) => {
                builder = builder.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(value).expect("json"))
            }
            None => Bytes::new(),
        };
        self.send(builder.body(Full::new(body)).expect("request"))
            .await
    }

    /// Opens a response whose body is read as it arrives (the event stream): `GET path` with
    /// an optional bearer token and extra headers.
    pub async fn open_stream(
        &self,
        path: &str,
        bearer: Option<&str>,
        headers: &[(&str, &str)],
    ) -> TestStream {
        let mut builder = Request::builder().method(Method::GET).uri(path);
        if let Some(token) = bearer {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        self.send_streaming(builder.body(Full::new(Bytes::new())).expect("request"))
            .await
    }

    /// `POST` a JSON body.
    pub async fn post(&self, path: &str, body: &Value, bearer: Option<&str>) -> TestResponse {
        self.call(Method::POST, path, Some(body), bearer).await
    }

    /// `GET`.
    pub async fn get(&self, path: &str, bearer: Option<&str>) -> TestResponse {
        self.call(Method::GET, path, None, bearer).await
    }

    /// `DELETE` with an optional JSON body.
    pub async fn delete(
        &self,
        path: &str,
        body: Option<&Value>,
        bearer: Option<&str>,
    ) -> TestResponse {
        self.call(Method::DELETE, path, body, bearer).await
    }

    /// Waits for the `count`-th email to `to` and returns it.
    pub async fn email(&self, to: &str, count: usize) -> Email {
        let emails = self
            .mailer
            .wait_for(to, count, Duration::from_secs(10))
            .await;
        emails
            .get(count - 1)
            .cloned()
            .unwrap_or_else(|| panic!("expected {count} emails to {to}, got {}", emails.len()))
    }

    /// Waits for the `count`-th email to `to` and returns the 64-hex token in it.
    pub async fn email_token(&self, to: &str, count: usize) -> String {
        let email = self.email(to, count).await;
        extract_hex_token(&email.text).expect("email carries a 64-hex token")
    }

    /// Registers a user; returns the user id.
    pub async fn register(&self, email: &str) -> String {
        let body = self
            .post(
                "/api/v1/users",
                &serde_json::json!({"email": email, "password": PASSWORD}),
                None,
            )
            .await
            .expect(201);
        body["id"].as_str().expect("id").to_owned()
    }

    /// Registers and verifies a user; returns the user id.
    pub async fn register_verified(&self, email: &str) -> String {
        let id = self.register(email).await;
        let token = self.email_token(email, 1).await;
        self.post(
            "/api/v1/email-verifications",
            &serde_json::json!({"token": token}),
            None,
        )
        .await
        .expect(201);
        id
    }

    /// Logs in; returns the session tokens body.
    pub async fn login(&self, email: &str, password: &str) -> Value {
        self.post(
            "/api/v1/sessions",
            &serde_json::json!({"email": email, "password": password}),
            None,
        )
        .await
        .expect(201)
    }

    /// Registers, verifies and logs in a user; returns (user id, access token, refresh token).
    pub async fn user(&self, email: &str) -> (String, String, String) {
        let id = self.register_verified(email).await;
        let tokens = self.login(email, PASSWORD).await;
        (
            id,
            tokens["access_token"].as_str().expect("access").to_owned(),
            tokens["refresh_token"]
                .as_str()
                .expect("refresh")
                .to_owned(),
        )
    }
}

/// The first run of 64 hex characters in a text.
pub fn extract_hex_token(text: &str) -> Option<String> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .find(|word| word.len() == 64)
        .map(str::to_owned)
}

/// A setup with the provider sandbox, allowed redirect URIs and an encryption key.
pub fn sandbox_setup() -> Setup {
    #[expect(clippy::unwrap_used, reason = "static test keys")]
    let keyring =
        aggregation_core::crypto::Keyring::new(vec![("test".into(), vec![7; 32])]).unwrap();
    Setup {
        config: test_config()
            .with_keyring(keyring)
            .with_oauth_redirect_uris(vec![
                REDIRECT_URI.to_owned(),
                "https://app.example.com/other".to_owned(),
            ]),
        sandbox: Some(SchwabSandbox::new()),
        ..Setup::default()
    }
}

/// A provider sandbox served on a loopback socket, stopped when dropped.
pub struct ServedSandbox {
    /// Its base URL.
    pub base: String,
    _server: servers::ServerGuard,
}

/// Serves `sandbox` on a loopback socket (for cases that build their own services, such as
/// two instances over one database).
pub async fn serve_sandbox(sandbox: SchwabSandbox) -> ServedSandbox {
    let (base, server) = servers::start_sandbox(sandbox).await;
    ServedSandbox {
        base,
        _server: server,
    }
}

/// The default redirect URI of [`sandbox_setup`].
pub const REDIRECT_URI: &str = "https://app.example.com/connected";

/// Follows an authorization address the way a browser would, without following the
/// provider's redirect: the `code` and `state` of the redirect's query.
pub async fn authorize(authorization_url: &str) -> (String, String) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let uri: http::Uri = authorization_url.parse().expect("authorization URL");
    let response = client.get(uri).await.expect("authorize request");
    assert_eq!(response.status(), StatusCode::FOUND, "authorize redirects");
    let location = response
        .headers()
        .get(header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .expect("Location")
        .to_owned();
    assert!(
        location.starts_with(REDIRECT_URI),
        "redirects to {location}"
    );
    let query = location
        .split_once('?')
        .map(|(_, query)| query)
        .unwrap_or_default();
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_owned())
            .unwrap_or_else(|| panic!("{name} in {location}"))
    };
    (param("code"), param("state"))
}

/// Polls `done` every 10 ms until it holds or 10 s have passed: for work the service does in
/// the background after it answers.
pub async fn eventually(mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl TestApp {
    /// Writes an active connection of the user straight into the store (no provider is
    /// asked): what tests that seed records need before their accounts.
    pub async fn active_connection(
        &self,
        user_id: uuid::Uuid,
        provider_slug: &str,
        alias: Option<&str>,
    ) -> aggregation_core::store::ConnectionRecord {
        self.store
            .create_connection(&aggregation_core::store::NewConnection {
                id: uuid::Uuid::now_v7(),
                user_id,
                provider_slug: provider_slug.to_owned(),
                alias: alias.map(str::to_owned),
                status: aggregation_core::store::ConnectionStatus::Active,
                encrypted_credentials: None,
                credentials_key_id: None,
                credentials_expires_at: None,
                created_at: aggregation_core::store::now(),
            })
            .await
            .expect("connection")
    }
}

impl TestApp {
    /// Starts connecting the sandbox provider for the user with this access token and
    /// authorizes at the sandbox: the callback's query (`?code=…&state=…`).
    pub async fn authorized_callback_query(&self, bearer: &str, alias: Option<&str>) -> String {
        let mut body = serde_json::json!({ "provider_slug": "schwab-sandbox" });
        if let Some(alias) = alias {
            body["alias"] = alias.into();
        }
        let started = self
            .post("/api/v1/providers", &body, Some(bearer))
            .await
            .expect(201);
        let url = started["authorization_url"]
            .as_str()
            .expect("authorization_url");
        let (code, state) = authorize(url).await;
        assert_eq!(state, started["state"].as_str().expect("state"));
        format!("?code={code}&state={state}")
    }

    /// Reads `connection` (as `POST /api/v1/providers/callback` answered it) back and checks
    /// that it is expired and needs a reauthorization.
    pub async fn expect_expired(&self, bearer: &str, connection: &Value) {
        let id = connection["id"].as_str().expect("id");
        let read = self
            .get(&format!("/api/v1/providers/{id}"), Some(bearer))
            .await
            .expect(200);
        assert_eq!(read["status"], "expired", "{read}");
        assert_eq!(read["needs_reauthentication"], true, "{read}");
    }

    /// The data of the `connection.expired` events of `connection`'s user, oldest first.
    pub async fn expiries(&self, connection: &Value) -> Vec<Value> {
        let user_id = connection["user_id"].as_str().expect("user_id");
        let user_id = uuid::Uuid::parse_str(user_id).expect("a uuid");
        self.store
            .user_events_after(user_id, None, 100)
            .await
            .expect("events")
            .into_iter()
            .filter(|event| event.event_type.as_str() == "connection.expired")
            .map(|event| event.data)
            .collect()
    }

    /// Connects the sandbox provider for the user with this access token: the connection.
    pub async fn connect_sandbox(&self, bearer: &str, alias: Option<&str>) -> Value {
        let query = self.authorized_callback_query(bearer, alias).await;
        self.call(
            Method::POST,
            &format!("/api/v1/providers/callback{query}"),
            None,
            None,
        )
        .await
        .expect(201)
    }

    /// Asks for a password reset of `email`, which has been sent `nth - 1` emails so far, and
    /// resets the password to `new_password` with the token of the `nth`: that token.
    pub async fn reset_password(&self, email: &str, nth: usize, new_password: &str) -> String {
        self.post(
            "/api/v1/password-reset-tokens",
            &serde_json::json!({ "email": email }),
            None,
        )
        .await
        .expect(201);
        let token = self.email_token(email, nth).await;
        self.post(
            "/api/v1/password-resets",
            &serde_json::json!({ "token": token, "new_password": new_password }),
            None,
        )
        .await
        .expect(201);
        token
    }

    /// The case's provider sandbox.
    pub fn sandbox(&self) -> &SchwabSandbox {
        &self.sandbox.as_ref().expect("a sandbox setup").0
    }
}

/// Generates one `#[tokio::test]` per case, target and backend:
/// `conformance!(case_a, case_b);` inside a test file whose cases are
/// `async fn case_a(app: TestApp)`. With `conformance!(config = make_config; case_a, ...)`
/// every case runs with the `Config` that `fn make_config() -> Config` returns.
#[macro_export]
macro_rules! conformance {
    ($($case:ident),+ $(,)?) => {
        $crate::conformance!(@target bare_sqlite, Bare, Sqlite, $($case),+);
        $crate::conformance!(@target axum_sqlite, Axum, Sqlite, $($case),+);
        $crate::conformance!(@target actix_sqlite, Actix, Sqlite, $($case),+);
        $crate::conformance!(@target bare_postgres, Bare, Postgres, $($case),+);
        $crate::conformance!(@target axum_postgres, Axum, Postgres, $($case),+);
        $crate::conformance!(@target actix_postgres, Actix, Postgres, $($case),+);
    };
    (setup = $setup:ident; $($case:ident),+ $(,)?) => {
        $crate::conformance!(@setup $setup; bare_sqlite, Bare, Sqlite, $($case),+);
        $crate::conformance!(@setup $setup; axum_sqlite, Axum, Sqlite, $($case),+);
        $crate::conformance!(@setup $setup; actix_sqlite, Actix, Sqlite, $($case),+);
        $crate::conformance!(@setup $setup; bare_postgres, Bare, Postgres, $($case),+);
        $crate::conformance!(@setup $setup; axum_postgres, Axum, Postgres, $($case),+);
        $crate::conformance!(@setup $setup; actix_postgres, Actix, Postgres, $($case),+);
    };
    (@setup $setup:ident; $module:ident, $target:ident, $backend:ident, $($case:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::run_setup(
                        $crate::Target::$target,
                        $crate::Backend::$backend,
                        super::$setup(),
                        super::$case,
                    )
                    .await;
                }
            )+
        }
    };
    (@target $module:ident, $target:ident, $backend:ident, $($case:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::run(
                        $crate::Target::$target,
                        $crate::Backend::$backend,
                        super::$case,
                    )
                    .await;
                }
            )+
        }
    };
    (config = $config:ident; $($case:ident),+ $(,)?) => {
        $crate::conformance!(@with bare_sqlite, Bare, Sqlite, $config, $($case),+);
        $crate::conformance!(@with axum_sqlite, Axum, Sqlite, $config, $($case),+);
        $crate::conformance!(@with actix_sqlite, Actix, Sqlite, $config, $($case),+);
        $crate::conformance!(@with bare_postgres, Bare, Postgres, $config, $($case),+);
        $crate::conformance!(@with axum_postgres, Axum, Postgres, $config, $($case),+);
        $crate::conformance!(@with actix_postgres, Actix, Postgres, $config, $($case),+);
    };
    (@with $module:ident, $target:ident, $backend:ident, $config:ident, $($case:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::run_with(
                        $crate::Target::$target,
                        $crate::Backend::$backend,
                        super::$config,
                        super::$case,
                    )
                    .await;
                }
            )+
        }
    };
}
