//! Login (argon2id verify + session insert) and refresh (atomic rotation) through the bare
//! service. `cargo bench -p aggregation-benches --bench auth`; criterion reports the median.

use std::sync::Mutex;

use aggregation_benches::{PASSWORD, call, json_request, service, verified_user};
use criterion::{Criterion, criterion_group, criterion_main};
use http::Method;
use serde_json::json;

fn auth(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (service, mailer) = runtime.block_on(service());
    runtime.block_on(verified_user(&service, &mailer, "bench@example.com"));
    let login_body = json!({"email": "bench@example.com", "password": PASSWORD});

    let mut group = c.benchmark_group("auth");
    group.sample_size(100);
    group.bench_function("login", |b| {
        b.to_async(&runtime).iter(|| async {
            let (status, _) = call(
                &service,
                json_request(Method::POST, "/api/v1/sessions", &login_body),
            )
            .await;
            assert_eq!(status, 201);
        });
    });

    let (_, tokens) = runtime.block_on(call(
        &service,
        json_request(Method::POST, "/api/v1/sessions", &login_body),
    ));
    let current = Mutex::new(
        tokens["refresh_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    );
    group.bench_function("refresh", |b| {
        b.to_async(&runtime).iter(|| async {
            let token = current.lock().map(|t| t.clone()).unwrap_or_default();
            let (status, body) = call(
                &service,
                json_request(
                    Method::POST,
                    "/api/v1/tokens",
                    &json!({"refresh_token": token}),
                ),
            )
            .await;
            assert_eq!(status, 201);
            if let (Ok(mut slot), Some(next)) = (current.lock(), body["refresh_token"].as_str()) {
                *slot = next.to_owned();
            }
        });
    });
    group.finish();
}

criterion_group!(benches, auth);
criterion_main!(benches);
