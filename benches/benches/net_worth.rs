//! `GET /api/v1/net-worth` and `GET /api/v1/portfolio` through the bare service, for a user
//! with 20 accounts holding 5 years of daily balance snapshots (36,520 rows) and 200
//! holdings: the daily history at its 1,000-point limit, a weekly one over 5 years, a monthly
//! one over a year, and the portfolio. SQLite (a file in a temporary folder) always;
//! PostgreSQL when `AGG_BENCH_DATABASE_URL` is set.
//! `cargo bench -p aggregation-benches --bench net_worth`.

use std::sync::Arc;

use aggregation_benches::{
    PASSWORD, call, config, json_request, on_each_backend, runtime, service_sharing, verified_user,
};
use aggregation_core::AggregationService;
use aggregation_core::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewSnapshot, SnapshotSource, Store, now,
};
use bytes::Bytes;
use chrono::{Days, NaiveDate, NaiveTime};
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Method, Request, header};
use http_body_util::Full;
use rust_decimal::Decimal;

const ACCOUNTS: usize = 20;
const DAYS: u64 = 5 * 365 + 1;
const HOLDINGS_PER_ACCOUNT: usize = 10;

struct Fixture {
    service: AggregationService,
    access_token: String,
}

fn first_day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2020, 1, 1).expect("date")
}

fn last_day() -> NaiveDate {
    first_day() + Days::new(DAYS - 1)
}

async fn seed(store: Arc<dyn Store>) -> Fixture {
    let (service, mailer) = service_sharing(store.clone(), config());
    verified_user(&service, &mailer, "worth@example.com").await;
    let (_, tokens) = call(
        &service,
        json_request(
            Method::POST,
            "/api/v1/sessions",
            &serde_json::json!({"email": "worth@example.com", "password": PASSWORD}),
        ),
    )
    .await;
    let access_token = tokens["access_token"].as_str().expect("token").to_owned();
    let user = store
        .user_by_email("worth@example.com")
        .await
        .expect("store")
        .expect("user");
    let connection = store
        .find_or_create_connection(user.id, "file_import", Some("Bench Bank"), now())
        .await
        .expect("connection");
    let kinds = [
        AccountType::Checking,
        AccountType::Savings,
        AccountType::Brokerage,
        AccountType::CreditCard,
    ];
    let accounts: Vec<NewAccount> = (0..ACCOUNTS)
        .map(|index| NewAccount {
            provider_account_id: format!("acct-{index:02}"),
            account_number: None,
            name: format!("Account {index}"),
            account_type: kinds[index % kinds.len()],
            currency: "USD".to_owned(),
            balance_amount: Decimal::new(100_000 + index as i64, 2),
            available_balance_amount: None,
            is_active: true,
        })
        .collect();
    let ids = store
        .upsert_accounts(connection.id, &accounts, now())
        .await
        .expect("accounts")
        .ids;
    for (index, account_id) in ids.iter().enumerate() {
        for day in 0..DAYS {
            let captured = (first_day() + Days::new(day))
                .and_time(NaiveTime::from_hms_opt(6, 0, 0).expect("time"))
                .and_utc();
            let sign = if index % kinds.len() == 3 { -1 } else { 1 };
            store
                .insert_snapshot(&NewSnapshot {
                    account_id: *account_id,
                    balance: Decimal::new(sign * (100_000 + day as i64 * 7), 2),
                    available_balance: None,
                    holdings_value: None,
                    cash_value: None,
                    currency: "USD".to_owned(),
                    source: SnapshotSource::ScheduledSync,
                    captured_at: captured,
                })
                .await
                .expect("snapshot");
        }
        let holdings: Vec<NewHolding> = (0..HOLDINGS_PER_ACCOUNT)
            .map(|n| NewHolding {
                provider_holding_id: format!("h-{n}"),
                symbol: format!("SYM{:02}", (index * HOLDINGS_PER_ACCOUNT + n) % 50),
                security_name: None,
                asset_type: AssetType::Equity,
                quantity: Decimal::new(10 + n as i64, 0),
                cost_basis: Some(Decimal::new(1_000 + n as i64, 0)),
                market_value: Decimal::new(1_200 + (index * n) as i64, 0),
                currency: "USD".to_owned(),
                average_price: None,
                current_price: None,
                unrealized_gain_loss: None,
            })
            .collect();
        store
            .upsert_holdings(*account_id, &holdings, now())
            .await
            .expect("holdings");
    }
    Fixture {
        service,
        access_token,
    }
}

async fn get(fixture: &Fixture, path: &str) {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(
            header::AUTHORIZATION,
            format!("Bearer {}", fixture.access_token),
        )
        .body(Full::new(Bytes::new()))
        .expect("request");
    let (status, _) = call(&fixture.service, request).await;
    assert_eq!(status, 200, "{path}");
}

fn bench_backend(
    c: &mut Criterion,
    name: &str,
    runtime: &tokio::runtime::Runtime,
    fixture: &Fixture,
) {
    let to = last_day();
    let daily = format!(
        "/api/v1/net-worth?from={}&to={to}&interval=day",
        to - Days::new(999)
    );
    let weekly = format!(
        "/api/v1/net-worth?from={}&to={to}&interval=week",
        first_day()
    );
    let monthly = format!(
        "/api/v1/net-worth?from={}&to={to}&interval=month",
        to - Days::new(365)
    );
    let mut group = c.benchmark_group(format!("net_worth_{name}"));
    group.sample_size(20);
    group.bench_function("daily_1000_points_20_accounts", |b| {
        b.to_async(runtime).iter(|| get(fixture, &daily));
    });
    group.bench_function("weekly_5_years_20_accounts", |b| {
        b.to_async(runtime).iter(|| get(fixture, &weekly));
    });
    group.bench_function("monthly_1_year_20_accounts", |b| {
        b.to_async(runtime).iter(|| get(fixture, &monthly));
    });
    group.bench_function("portfolio_200_holdings", |b| {
        b.to_async(runtime)
            .iter(|| get(fixture, "/api/v1/portfolio"));
    });
    group.finish();
}

fn net_worth(c: &mut Criterion) {
    let runtime = runtime();
    on_each_backend(&runtime, seed, |name, fixture| {
        bench_backend(c, name, &runtime, fixture);
    });
}

criterion_group!(benches, net_worth);
criterion_main!(benches);
