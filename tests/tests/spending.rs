//! `GET /api/v1/spending` through the three fronts and both stores: money out per currency,
//! period and group (positive totals), income apart, transfers between the caller's own
//! accounts left out, exact decimal sums, only the caller's rows, and the 422s (at most 1,000
//! periods).

use aggregation_tests::imports::{access, import_rows};
use aggregation_tests::{TestApp, conformance};
use serde_json::{Value, json};

conformance!(
    spending_per_currency_period_and_group,
    weeks_and_days_cut_to_the_range,
    spending_sees_only_the_callers_rows,
    spending_bounds_are_422,
);

/// A checking and a savings account in USD with a transfer between them, and a EUR card.
async fn household(app: &TestApp, token: &str) -> (String, String, String) {
    let checking = import_rows(
        app,
        token,
        "Checking",
        "USD",
        &[
            ("2026-01-05", "Blue Bottle Coffee", "-4.50"),
            ("2026-01-20", "Groceries", "-61.20"),
            ("2026-01-31", "Salary", "3000.00"),
            ("2026-02-03", "Blue Bottle Coffee", "-5.25"),
            ("2026-02-10", "Transfer to savings", "-500.00"),
            ("2026-03-01", "Outside the range", "-99.00"),
        ],
    )
    .await;
    let savings = import_rows(
        app,
        token,
        "Savings",
        "USD",
        &[
            ("2026-02-11", "Transfer from checking", "500.00"),
            ("2026-02-28", "Interest", "0.10"),
        ],
    )
    .await;
    let card = import_rows(
        app,
        token,
        "Carte",
        "EUR",
        &[
            ("2026-01-02", "Remboursement", "10.00"),
            ("2026-02-14", "Boulangerie", "-3.10"),
            ("2026-02-15", "Boulangerie", "-0.05"),
        ],
    )
    .await;
    (checking, savings, card)
}

fn tally(total: &str, count: u64) -> Value {
    json!({"total": total, "count": count})
}

/// The currency entry of `code`.
fn currency<'a>(summary: &'a Value, code: &str) -> &'a Value {
    summary["currencies"]
        .as_array()
        .expect("currencies")
        .iter()
        .find(|entry| entry["currency"] == code)
        .unwrap_or_else(|| panic!("{code} in {summary}"))
}

async fn spending_per_currency_period_and_group(app: TestApp) {
    let token = access(&app, "spender@example.com").await;
    let (checking, _, card) = household(&app, &token).await;
    let summary = app
        .get(
            "/api/v1/spending?from=2026-01-01&to=2026-02-28&interval=month&group_by=account",
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(summary["from"], "2026-01-01");
    assert_eq!(summary["to"], "2026-02-28");
    assert_eq!(summary["interval"], "month");
    assert_eq!(summary["group_by"], "account");
    let codes: Vec<&str> = summary["currencies"]
        .as_array()
        .expect("currencies")
        .iter()
        .filter_map(|entry| entry["currency"].as_str())
        .collect();
    assert_eq!(codes, ["EUR", "USD"]);

    // USD: the transfer's legs are neither spending nor income; the savings interest is income.
    let usd = currency(&summary, "USD");
    assert_eq!(usd["spending"], tally("70.95", 3));
    assert_eq!(usd["income"], tally("3000.10", 2));
    let periods = usd["periods"].as_array().expect("periods");
    assert_eq!(periods.len(), 2);
    assert_eq!(periods[0]["start"], "2026-01-01");
    assert_eq!(periods[0]["end"], "2026-01-31");
    assert_eq!(periods[0]["spending"], tally("65.70", 2));
    assert_eq!(periods[0]["income"], tally("3000.00", 1));
    assert_eq!(
        periods[0]["groups"],
        json!([{"key": checking, "total": "65.70", "count": 2}])
    );
    assert_eq!(periods[1]["start"], "2026-02-01");
    assert_eq!(periods[1]["end"], "2026-02-28");
    assert_eq!(periods[1]["spending"], tally("5.25", 1));
    assert_eq!(periods[1]["income"], tally("0.10", 1));

    // EUR apart, summed exactly.
    let eur = currency(&summary, "EUR");
    assert_eq!(eur["spending"], tally("3.15", 2));
    assert_eq!(eur["income"], tally("10.00", 1));
    let eur_periods = eur["periods"].as_array().expect("periods");
    assert_eq!(eur_periods[0]["spending"], tally("0", 0));
    assert_eq!(eur_periods[0]["groups"], json!([]));
    assert_eq!(
        eur_periods[1]["groups"],
        json!([{"key": card, "total": "3.15", "count": 2}])
    );

    // By category and by merchant: the groups add up to the period's spending.
    for group_by in ["category", "merchant"] {
        let summary = app
            .get(
                &format!("/api/v1/spending?from=2026-01-01&to=2026-02-28&group_by={group_by}"),
                Some(&token),
            )
            .await
            .expect(200);
        assert_eq!(summary["group_by"], group_by);
        let usd = currency(&summary, "USD");
        let january = &usd["periods"][0];
        assert_eq!(january["spending"], tally("65.70", 2));
        let groups = january["groups"].as_array().expect("groups");
        let counted: u64 = groups
            .iter()
            .filter_map(|group| group["count"].as_u64())
            .sum();
        assert_eq!(counted, 2, "{group_by}: {january}");
        // Largest first.
        let totals: Vec<f64> = groups
            .iter()
            .filter_map(|group| group["total"].as_str()?.parse().ok())
            .collect();
        assert!(
            totals.windows(2).all(|pair| pair[0] >= pair[1]),
            "{groups:?}"
        );
    }
    // The default grouping is by category, the default interval the month.
    let defaults = app
        .get(
            "/api/v1/spending?from=2026-01-01&to=2026-02-28",
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(defaults["group_by"], "category");
    assert_eq!(defaults["interval"], "month");
    // Without any parameter: a year up to today.
    let today = chrono::Utc::now().date_naive();
    let year = app.get("/api/v1/spending", Some(&token)).await.expect(200);
    assert_eq!(year["to"], today.to_string());
}

async fn weeks_and_days_cut_to_the_range(app: TestApp) {
    let token = access(&app, "weeks@example.com").await;
    household(&app, &token).await;
    // 2026-01-01 is a Thursday: the first week is cut to Thursday to Sunday.
    let weeks = app
        .get(
            "/api/v1/spending?from=2026-01-01&to=2026-01-31&interval=week",
            Some(&token),
        )
        .await
        .expect(200);
    let usd = currency(&weeks, "USD");
    let periods = usd["periods"].as_array().expect("periods");
    let bounds: Vec<(String, String)> = periods
        .iter()
        .map(|period| {
            (
                period["start"].as_str().unwrap_or_default().to_owned(),
                period["end"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("2026-01-01", "2026-01-04"),
        ("2026-01-05", "2026-01-11"),
        ("2026-01-12", "2026-01-18"),
        ("2026-01-19", "2026-01-25"),
        ("2026-01-26", "2026-01-31"),
    ];
    assert_eq!(
        bounds,
        expected.map(|(start, end)| (start.to_owned(), end.to_owned()))
    );
    assert_eq!(periods[1]["spending"], tally("4.50", 1));
    assert_eq!(periods[3]["spending"], tally("61.20", 1));
    assert_eq!(periods[4]["income"], tally("3000.00", 1));
    assert_eq!(periods[0]["spending"], tally("0", 0));

    let days = app
        .get(
            "/api/v1/spending?from=2026-02-14&to=2026-02-16&interval=day",
            Some(&token),
        )
        .await
        .expect(200);
    let eur = currency(&days, "EUR");
    let periods = eur["periods"].as_array().expect("periods");
    assert_eq!(periods.len(), 3);
    assert_eq!(periods[0]["start"], "2026-02-14");
    assert_eq!(periods[0]["end"], "2026-02-14");
    assert_eq!(periods[0]["spending"], tally("3.10", 1));
    assert_eq!(periods[1]["spending"], tally("0.05", 1));
    assert_eq!(periods[2]["spending"], tally("0", 0));
    // No USD row in those days: no USD entry.
    assert_eq!(days["currencies"].as_array().map(Vec::len), Some(1));
}

async fn spending_sees_only_the_callers_rows(app: TestApp) {
    let owner = access(&app, "owner@example.com").await;
    let stranger = access(&app, "stranger@example.com").await;
    household(&app, &owner).await;
    let nothing = app
        .get(
            "/api/v1/spending?from=2026-01-01&to=2026-02-28",
            Some(&stranger),
        )
        .await
        .expect(200);
    assert_eq!(nothing["currencies"], json!([]));
    import_rows(
        &app,
        &stranger,
        "Wallet",
        "USD",
        &[("2026-01-09", "Lunch", "-12.00")],
    )
    .await;
    let theirs = app
        .get(
            "/api/v1/spending?from=2026-01-01&to=2026-02-28",
            Some(&stranger),
        )
        .await
        .expect(200);
    assert_eq!(currency(&theirs, "USD")["spending"], tally("12.00", 1));
    assert_eq!(theirs["currencies"].as_array().map(Vec::len), Some(1));
    app.get("/api/v1/spending", None)
        .await
        .expect_problem(401, "unauthorized");
}

async fn spending_bounds_are_422(app: TestApp) {
    let token = access(&app, "spending-bounds@example.com").await;
    for (query, field) in [
        ("from=2026-03-02&to=2026-03-01", "query.from"),
        ("from=2020-01-01&to=2026-01-01&interval=day", "query.from"),
        ("from=2026-13-01", "query.from"),
        ("to=yesterday", "query.to"),
        ("interval=year", "query.interval"),
        ("interval=", "query.interval"),
        ("group_by=payee", "query.group_by"),
    ] {
        let problem = app
            .get(&format!("/api/v1/spending?{query}"), Some(&token))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{query}: {problem}");
    }
    let problem = app
        .get(
            "/api/v1/spending?from=2024-01-01&to=2026-12-31&interval=day",
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["code"], "too_many_periods");
    // Exactly 1,000 days is allowed.
    let most = app
        .get(
            "/api/v1/spending?from=2024-01-01&to=2026-09-26&interval=day",
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(most["currencies"], json!([]));
}
