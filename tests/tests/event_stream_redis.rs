//! Two instances over one database and one Redis (`AGG_TEST_REDIS_URL`, a key prefix of the
//! test's own): an event raised through one instance reaches a stream open on the other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use aggregation_core::events::RedisEventRelay;
use aggregation_core::mail::MemoryMailer;
use aggregation_core::{AggregationService, PeerAddr, ResponseBody, SqliteStore, Store};
use aggregation_tests::{PASSWORD, SharedDatabase, extract_hex_token, redis_url, test_config};
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt as _, Full};
use serde_json::{Value, json};
use tower::ServiceExt as _;

fn request(
    method: Method,
    path: &str,
    body: Option<&Value>,
    bearer: Option<&str>,
) -> Request<Full<Bytes>> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = bearer {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let body = match body {
        Some(body) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Bytes::from(body.to_string())
        }
        None => Bytes::new(),
    };
    let mut request = builder.body(Full::new(body)).expect("request");
    request
        .extensions_mut()
        .insert(PeerAddr(SocketAddr::from(([127, 0, 0, 1], 40_000))));
    request
}

async fn call(
    service: &AggregationService,
    method: Method,
    path: &str,
    body: Option<&Value>,
    bearer: Option<&str>,
) -> (u16, Value) {
    let response = service
        .clone()
        .oneshot(request(method, path, body, bearer))
        .await
        .expect("infallible");
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// Reads the stream until its text holds `needle`, failing the case when nothing arrives for
/// 20 s (a stuck stream): the text read.
async fn read_until(body: &mut ResponseBody, needle: &str) -> String {
    let mut text = String::new();
    while !text.contains(needle) {
        let frame = tokio::time::timeout(Duration::from_secs(20), body.frame())
            .await
            .expect("the event arrives")
            .expect("the stream stays open")
            .expect("infallible");
        if let Ok(data) = frame.into_data() {
            text.push_str(std::str::from_utf8(&data).expect("UTF-8"));
        }
    }
    text
}

/// How many clients listen on the channel.
async fn subscribers(url: &str, channel: &str) -> i64 {
    let client = redis::Client::open(url).expect("Redis URL");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis reachable");
    let (_, count): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut connection)
        .await
        .expect("PUBSUB NUMSUB");
    count
}

async fn instance(
    store: &Arc<dyn Store>,
    mailer: &MemoryMailer,
    relay: RedisEventRelay,
) -> AggregationService {
    AggregationService::builder(test_config())
        .shared_store(store.clone())
        .mailer(mailer.clone())
        .event_relay(relay)
        .build()
        .expect("service")
}

/// Registers and verifies `email` on `service`.
async fn register(service: &AggregationService, mailer: &MemoryMailer, email: &str) {
    let credentials = json!({"email": email, "password": PASSWORD});
    let (status, _) = call(
        service,
        Method::POST,
        "/api/v1/users",
        Some(&credentials),
        None,
    )
    .await;
    assert_eq!(status, 201);
    let emails = mailer.wait_for(email, 1, Duration::from_secs(10)).await;
    let token = extract_hex_token(&emails[0].text).expect("verification token");
    let verify = json!({"token": token});
    let (status, _) = call(
        service,
        Method::POST,
        "/api/v1/email-verifications",
        Some(&verify),
        None,
    )
    .await;
    assert_eq!(status, 201);
}

/// Logs `email` in on `service`: the access and refresh tokens.
async fn log_in(service: &AggregationService, email: &str) -> (String, String) {
    let credentials = json!({"email": email, "password": PASSWORD});
    let (status, tokens) = call(
        service,
        Method::POST,
        "/api/v1/sessions",
        Some(&credentials),
        None,
    )
    .await;
    assert_eq!(status, 201);
    let token = |name: &str| tokens[name].as_str().expect("token").to_owned();
    (token("access_token"), token("refresh_token"))
}

/// Logs the session of these tokens out on `service` (raising `session.revoked`).
async fn log_out(service: &AggregationService, (access, refresh): &(String, String)) {
    let body = json!({"refresh_token": refresh});
    let path = "/api/v1/sessions/current";
    let (status, _) = call(service, Method::DELETE, path, Some(&body), Some(access)).await;
    assert_eq!(status, 204, "the logout does not wait for Redis");
}

/// Opens the event stream of `access` on `service`: its body.
async fn open_stream(service: &AggregationService, access: &str) -> ResponseBody {
    let response = service
        .clone()
        .oneshot(request(Method::GET, "/api/v1/events", None, Some(access)))
        .await
        .expect("infallible");
    assert_eq!(response.status().as_u16(), 200);
    response.into_body()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_raised_on_one_instance_reaches_a_stream_on_another() {
    let Some(url) = redis_url() else {
        return;
    };
    let prefix = format!("aggtest:{}:", uuid::Uuid::new_v4().simple());
    let relay = RedisEventRelay::from_url(&url, &prefix).expect("relay");
    let channel = relay.channel().to_owned();
    let database = SharedDatabase::open().await;
    let mailer = MemoryMailer::new();
    let first = instance(&database.first, &mailer, relay.clone()).await;
    let second = instance(&database.second, &mailer, relay).await;
    // Both instances listen before anything happens.
    let mut waited = 0;
    while subscribers(&url, &channel).await < 2 {
        waited += 1;
        assert!(waited < 200, "the instances never subscribed");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    register(&first, &mailer, "ada@example.com").await;
    let leaving = log_in(&first, "ada@example.com").await;
    let (watcher, _) = log_in(&second, "ada@example.com").await;
    // The stream is open on the second instance; a session is logged out through the first.
    let mut body = open_stream(&second, &watcher).await;
    log_out(&first, &leaving).await;
    let text = read_until(&mut body, "event: session.revoked").await;
    let data_line = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .expect("a data line");
    let event: Value = serde_json::from_str(data_line).expect("JSON");
    assert_eq!(event["type"], "session.revoked");
    assert_eq!(event["data"]["reason"], "logout");
    drop(body);
    drop((first, second));
    database.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_breaks_no_request_and_no_local_stream() {
    // Nothing listens on the discard port of loopback.
    let relay = RedisEventRelay::from_url("redis://127.0.0.1:9/", "aggtest:dead:").expect("relay");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().await.expect("store"));
    let mailer = MemoryMailer::new();
    let service = instance(&store, &mailer, relay).await;
    register(&service, &mailer, "ada@example.com").await;
    let (watcher, _) = log_in(&service, "ada@example.com").await;
    let mut body = open_stream(&service, &watcher).await;
    log_out(&service, &log_in(&service, "ada@example.com").await).await;
    read_until(&mut body, "event: session.revoked").await;
}
