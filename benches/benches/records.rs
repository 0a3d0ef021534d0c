//! Reads through the axum adapter over loopback: one page of 50 transactions out of 100,000
//! rows of one account, and `GET /accounts` for a user with 50 accounts. SQLite (a file in a
//! temporary folder) always; PostgreSQL when `AGG_BENCH_DATABASE_URL` is set (a database is
//! created for the run and dropped after).

use std::net::SocketAddr;
use std::sync::Arc;

use aggregation_benches::{PASSWORD, call, json_request, on_each_backend, runtime, verified_user};
use aggregation_core::mail::MemoryMailer;
use aggregation_core::rate_limit::PolicyTable;
use aggregation_core::store::{
    AccountType, NewAccount, NewTransaction, Store, TransactionStatus, TransactionType, now,
};
use aggregation_core::{AggregationService, Config};
use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::{Method, Request, header};
use http_body_util::{BodyExt as _, Empty};
use rust_decimal::Decimal;

const TRANSACTIONS: usize = 100_000;
const ACCOUNTS: usize = 50;

struct Fixture {
    base: String,
    access_token: String,
    account_id: String,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Empty<Bytes>,
    >,
}

async fn seed(store: Arc<dyn Store>) -> Fixture {
    let mailer = MemoryMailer::new();
    let config = Config::new(
        "http://bench.local",
        b"benchmark-secret-0123456789abcdefghijkl".to_vec(),
    )
    .expect("config");
    let service = AggregationService::builder(config)
        .shared_store(store.clone())
        .mailer(mailer.clone())
        .rate_limit_policies(PolicyTable::disabled())
        .build()
        .expect("service");
    verified_user(&service, &mailer, "reader@example.com").await;
    let (_, tokens) = call(
        &service,
        json_request(
            Method::POST,
            "/api/v1/sessions",
            &serde_json::json!({"email": "reader@example.com", "password": PASSWORD}),
        ),
    )
    .await;
    let access_token = tokens["access_token"].as_str().expect("token").to_owned();
    let user = store
        .user_by_email("reader@example.com")
        .await
        .expect("store")
        .expect("user");
    let connection = store
        .find_or_create_connection(user.id, "file_import", Some("Bench Bank"), now())
        .await
        .expect("connection");
    let accounts: Vec<NewAccount> = (0..ACCOUNTS)
        .map(|index| NewAccount {
            provider_account_id: format!("acct-{index:04}"),
            account_number: Some(format!("0000{index:04}")),
            name: format!("Account {index}"),
            account_type: AccountType::Checking,
            currency: "USD".to_owned(),
            balance_amount: Decimal::new(100_000 + index as i64, 2),
            available_balance_amount: None,
            is_active: true,
        })
        .collect();
    let upserted = store
        .upsert_accounts(connection.id, &accounts, now())
        .await
        .expect("accounts");
    let account_id = upserted.ids[0];
    let start = chrono::NaiveDate::from_ymd_opt(2000, 1, 1).expect("date");
    for chunk in (0..TRANSACTIONS).collect::<Vec<_>>().chunks(5_000) {
        let batch: Vec<NewTransaction> = chunk
            .iter()
            .map(|&index| NewTransaction {
                provider_transaction_id: format!("fit-{index:07}"),
                transaction_type: TransactionType::Other,
                subtype: None,
                status: TransactionStatus::Settled,
                amount: Decimal::new(-(index as i64 % 10_000) - 1, 2),
                currency: "USD".to_owned(),
                description: Some(format!("Purchase {index}")),
                symbol: None,
                security_name: None,
                quantity: None,
                unit_price: None,
                commission: None,
                transaction_date: start + chrono::Days::new((index / 20) as u64),
                settlement_date: None,
                pending_transaction_id: None,
                merchant_code: None,
            })
            .collect();
        store
            .upsert_transactions(account_id, &batch, now())
            .await
            .expect("transactions");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let app = aggregation_axum::router(service).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Fixture {
        base: format!("http://{address}"),
        access_token,
        account_id: account_id.to_string(),
        client: hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http(),
    }
}

async fn get(fixture: &Fixture, path: &str) -> usize {
    let request = Request::builder()
        .method(Method::GET)
        .uri(format!("{}{path}", fixture.base))
        .header(
            header::AUTHORIZATION,
            format!("Bearer {}", fixture.access_token),
        )
        .body(Empty::new())
        .expect("request");
    let response = fixture.client.request(request).await.expect("response");
    assert_eq!(response.status().as_u16(), 200);
    response
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes().len())
        .unwrap_or_default()
}

fn bench_backend(
    c: &mut Criterion,
    name: &str,
    runtime: &tokio::runtime::Runtime,
    fixture: &Fixture,
) {
    let mut group = c.benchmark_group(format!("records_{name}"));
    group.throughput(Throughput::Elements(1));
    group.sample_size(50);
    let deep = format!(
        "/api/v1/accounts/{}/transactions?limit=50&offset=50000",
        fixture.account_id
    );
    let first = format!(
        "/api/v1/accounts/{}/transactions?limit=50",
        fixture.account_id
    );
    group.bench_function("transactions_first_page_of_100k", |b| {
        b.to_async(runtime).iter(|| get(fixture, &first));
    });
    group.bench_function("transactions_page_at_offset_50k", |b| {
        b.to_async(runtime).iter(|| get(fixture, &deep));
    });
    group.bench_function("accounts_list_of_50", |b| {
        b.to_async(runtime)
            .iter(|| get(fixture, "/api/v1/accounts"));
    });
    group.finish();
}

fn records(c: &mut Criterion) {
    let runtime = runtime();
    on_each_backend(&runtime, seed, |name, fixture| {
        bench_backend(c, name, &runtime, fixture);
    });
}

criterion_group!(benches, records);
criterion_main!(benches);
