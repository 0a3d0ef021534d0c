//! The search across accounts (`GET /api/v1/transactions`) and the by-account listing's
//! keyset cursor, through the three fronts and both stores: every row once when paging by
//! cursor (equal dates included), newest first; words through the full-text index, with
//! input that is query syntax to FTS5 read as plain words; the filters; only the caller's
//! rows; and the 422s of bad cursors and parameters.

use std::collections::HashSet;

use aggregation_tests::imports::{access, import_rows};
use aggregation_tests::{TestApp, conformance};
use serde_json::Value;

conformance!(
    paging_by_cursor_gives_every_row_once_newest_first,
    words_match_description_words_across_accounts,
    query_syntax_is_read_as_plain_words,
    filters_narrow_the_search,
    the_search_sees_only_the_callers_rows,
    search_parameters_and_cursors_are_422,
    the_account_listing_pages_by_cursor,
);

/// The descriptions of a page's rows, in order.
fn descriptions(page: &Value) -> Vec<String> {
    page["transactions"]
        .as_array()
        .expect("transactions")
        .iter()
        .map(|row| row["description"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The rows of a search, sorted descriptions (the order is checked elsewhere).
async fn found(app: &TestApp, token: &str, query: &str) -> Vec<String> {
    let page = app
        .get(&format!("/api/v1/transactions?{query}"), Some(token))
        .await
        .expect(200);
    let mut found = descriptions(&page);
    found.sort();
    found
}

/// The path with `q` set to `text`, percent-encoded.
fn q(text: &str) -> String {
    let mut encoded = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("q={encoded}")
}

/// Every row through a listing paged by `next_cursor`, `limit` at a time.
async fn all_pages(app: &TestApp, token: &str, base: &str, limit: u32) -> Vec<Value> {
    let separator = if base.contains('?') { '&' } else { '?' };
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1_000 {
        let path = match &cursor {
            Some(cursor) => format!("{base}{separator}limit={limit}&cursor={cursor}"),
            None => format!("{base}{separator}limit={limit}"),
        };
        let page = app.get(&path, Some(token)).await.expect(200);
        let page_rows = page["transactions"].as_array().cloned().expect("rows");
        assert!(page_rows.len() <= limit as usize, "{page}");
        rows.extend(page_rows);
        if page["has_more"] == false {
            assert_eq!(page["next_cursor"], Value::Null, "{page}");
            return rows;
        }
        let next = page["next_cursor"]
            .as_str()
            .expect("a next cursor")
            .to_owned();
        assert_eq!(next.len(), 28);
        cursor = Some(next);
    }
    panic!("more than 1,000 pages");
}

/// Whether `rows` are newest first: by date, then by id, both descending.
fn newest_first(rows: &[Value]) -> bool {
    rows.windows(2).all(|pair| {
        let key = |row: &Value| {
            (
                row["transaction_date"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                uuid::Uuid::parse_str(row["id"].as_str().unwrap_or_default()).unwrap_or_default(),
            )
        };
        key(&pair[0]) > key(&pair[1])
    })
}

/// Borrowed `(date, description, amount)` rows.
fn as_refs(rows: &[(String, String, String)]) -> Vec<(&str, &str, &str)> {
    rows.iter()
        .map(|(date, text, amount)| (date.as_str(), text.as_str(), amount.as_str()))
        .collect()
}

/// Two accounts of 13 and 10 rows, most of them sharing a few dates.
async fn two_accounts(app: &TestApp, token: &str) -> (String, String) {
    let checking: Vec<(String, String, String)> = (0..13)
        .map(|n| {
            let day = 1 + n % 3;
            (
                format!("2026-03-0{day}"),
                format!("Card payment {n}"),
                format!("-{}.25", n + 1),
            )
        })
        .collect();
    let savings: Vec<(String, String, String)> = (0..10)
        .map(|n| {
            let day = 2 + n % 2;
            (
                format!("2026-03-0{day}"),
                format!("Interest {n}"),
                format!("{}.10", n + 1),
            )
        })
        .collect();
    let checking_id = import_rows(app, token, "Checking", "USD", &as_refs(&checking)).await;
    let savings_id = import_rows(app, token, "Savings", "USD", &as_refs(&savings)).await;
    (checking_id, savings_id)
}

async fn paging_by_cursor_gives_every_row_once_newest_first(app: TestApp) {
    let token = access(&app, "pages@example.com").await;
    two_accounts(&app, &token).await;
    for limit in [1, 4, 7, 23, 100] {
        let rows = all_pages(&app, &token, "/api/v1/transactions", limit).await;
        assert_eq!(rows.len(), 23, "limit {limit}");
        let ids: HashSet<&str> = rows.iter().filter_map(|row| row["id"].as_str()).collect();
        assert_eq!(ids.len(), 23, "no row twice at limit {limit}");
        assert!(newest_first(&rows), "limit {limit}");
    }
    // The first page says how it was cut.
    let first = app
        .get("/api/v1/transactions?limit=5", Some(&token))
        .await
        .expect(200);
    assert_eq!(first["limit"], 5);
    assert_eq!(first["has_more"], true);
    let whole = app
        .get("/api/v1/transactions", Some(&token))
        .await
        .expect(200);
    assert_eq!(whole["limit"], 50);
    assert_eq!(whole["has_more"], false);
    assert_eq!(whole["transactions"].as_array().map(Vec::len), Some(23));
}

async fn words_match_description_words_across_accounts(app: TestApp) {
    let token = access(&app, "words@example.com").await;
    import_rows(
        &app,
        &token,
        "Card",
        "USD",
        &[
            (
                "2026-02-01",
                "SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA",
                "-5.50",
            ),
            ("2026-02-02", "Starbucks Coffee #123", "-4.10"),
            ("2026-02-03", "Rent Maple Apts", "-1200.00"),
        ],
    )
    .await;
    import_rows(
        &app,
        &token,
        "Other card",
        "EUR",
        &[
            ("2026-02-04", "coffee-beans.com order", "-18.00"),
            ("2026-02-05", "Coffeehouse Berlin", "-3.20"),
        ],
    )
    .await;
    // Whole words, any case, across both accounts (not "Coffeehouse": another word).
    assert_eq!(
        found(&app, &token, "q=coffee").await,
        [
            "SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA",
            "Starbucks Coffee #123",
            "coffee-beans.com order",
        ]
    );
    // Every word must occur.
    assert_eq!(
        found(&app, &token, "q=COFFEE%20oakland").await,
        ["SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA"]
    );
    assert_eq!(
        found(&app, &token, &q("beans.com")).await,
        ["coffee-beans.com order"]
    );
    assert!(found(&app, &token, "q=coffee%20rent").await.is_empty());
    assert_eq!(found(&app, &token, "q=1234").await.len(), 1);
    // Newest first.
    let page = app
        .get("/api/v1/transactions?q=coffee", Some(&token))
        .await
        .expect(200);
    assert_eq!(
        descriptions(&page),
        [
            "coffee-beans.com order",
            "Starbucks Coffee #123",
            "SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA",
        ]
    );
    // A blank query is no word condition.
    assert_eq!(found(&app, &token, "q=").await.len(), 5);
    assert_eq!(found(&app, &token, "q=%20%20").await.len(), 5);
    // Paging a word search by cursor.
    let rows = all_pages(&app, &token, "/api/v1/transactions?q=coffee", 1).await;
    assert_eq!(rows.len(), 3);
}

async fn query_syntax_is_read_as_plain_words(app: TestApp) {
    let token = access(&app, "syntax@example.com").await;
    import_rows(
        &app,
        &token,
        "Card",
        "USD",
        &[
            ("2026-02-01", "Blue Bottle Coffee", "-5.50"),
            ("2026-02-02", "Near the station", "-2.00"),
            ("2026-02-03", "Café Olé", "-3.00"),
        ],
    )
    .await;
    // FTS5 syntax, SQL and tsquery operators: never an error, always plain words.
    for hostile in [
        "\"",
        "\"\"",
        "*",
        "coffee*",
        "-coffee",
        "NEAR(coffee blue)",
        "NEAR",
        "AND",
        "OR",
        "NOT",
        "coffee OR rent",
        "description:coffee",
        "^coffee",
        "((",
        ")",
        "'; DROP TABLE transactions; --",
        "\\",
        "%",
        "_",
        "!coffee & | <->",
        "{coffee}",
        "☕",
        // Letters the search keeps that FTS5's tokenizer splits (a lone vowel sign, a word
        // with them): an empty or two-token phrase, never an error.
        "\u{093E}",
        "हिंदी",
        "x\u{0301}y",
    ] {
        let page = app
            .get(
                &format!("/api/v1/transactions?{}", q(hostile)),
                Some(&token),
            )
            .await
            .expect(200);
        assert!(page["transactions"].is_array(), "{hostile}: {page}");
    }
    // Quotes, stars and minus signs are punctuation around the word.
    for quoted in ["\"coffee\"", "coffee*", "-coffee", "(coffee)", "coffee:"] {
        assert_eq!(
            found(&app, &token, &q(quoted)).await,
            ["Blue Bottle Coffee"],
            "{quoted}"
        );
    }
    // `OR` and `NEAR` are words like any other, which these rows do not all hold.
    assert!(found(&app, &token, &q("coffee OR rent")).await.is_empty());
    assert_eq!(found(&app, &token, &q("NEAR")).await, ["Near the station"]);
    assert_eq!(
        found(&app, &token, &q("NEAR(coffee blue)")).await,
        Vec::<String>::new()
    );
    assert_eq!(found(&app, &token, &q("café")).await, ["Café Olé"]);
    // Only punctuation: no word, so no word condition.
    assert_eq!(found(&app, &token, &q("\" * -")).await.len(), 3);
}

async fn filters_narrow_the_search(app: TestApp) {
    let token = access(&app, "filters@example.com").await;
    let card = import_rows(
        &app,
        &token,
        "Card",
        "USD",
        &[
            ("2026-01-10", "Coffee one", "-3.50"),
            ("2026-01-20", "Coffee two", "-12.00"),
            ("2026-02-10", "Groceries", "-61.20"),
            ("2026-02-15", "Refund", "20.00"),
        ],
    )
    .await;
    let other = import_rows(
        &app,
        &token,
        "Other",
        "USD",
        &[("2026-01-15", "Coffee three", "-7.25")],
    )
    .await;
    assert_eq!(
        found(&app, &token, &format!("account_id={card}&q=coffee")).await,
        ["Coffee one", "Coffee two"]
    );
    assert_eq!(
        found(&app, &token, &format!("account_id={other}")).await,
        ["Coffee three"]
    );
    // Signed amounts: money out is negative.
    assert_eq!(
        found(&app, &token, "min_amount=-12.00&max_amount=-5").await,
        ["Coffee three", "Coffee two"]
    );
    assert_eq!(found(&app, &token, "min_amount=0").await, ["Refund"]);
    assert_eq!(
        found(&app, &token, "max_amount=-61.20").await,
        ["Groceries"]
    );
    assert_eq!(
        found(&app, &token, "start_date=2026-01-15&end_date=2026-01-20").await,
        ["Coffee three", "Coffee two"]
    );
    assert_eq!(
        found(&app, &token, "start_date=2026-02-11").await,
        ["Refund"]
    );
    assert_eq!(
        found(&app, &token, "end_date=2026-01-10").await,
        ["Coffee one"]
    );
    assert_eq!(found(&app, &token, "status=settled").await.len(), 5);
    assert!(found(&app, &token, "status=pending").await.is_empty());
    assert!(
        found(&app, &token, "category=FOOD_AND_DRINK")
            .await
            .is_empty()
    );
    assert!(
        found(&app, &token, "merchant=Nobody%20Here")
            .await
            .is_empty()
    );
    // All at once.
    assert_eq!(
        found(
            &app,
            &token,
            &format!("q=coffee&account_id={card}&min_amount=-5&start_date=2026-01-01")
        )
        .await,
        ["Coffee one"]
    );
}

async fn the_search_sees_only_the_callers_rows(app: TestApp) {
    let owner = access(&app, "owner@example.com").await;
    let stranger = access(&app, "stranger@example.com").await;
    let account = import_rows(
        &app,
        &owner,
        "Card",
        "USD",
        &[
            ("2026-02-01", "Private coffee", "-5.50"),
            ("2026-02-02", "Private rent", "-900.00"),
        ],
    )
    .await;
    import_rows(
        &app,
        &stranger,
        "Card",
        "USD",
        &[("2026-02-01", "Own coffee", "-4.00")],
    )
    .await;
    assert_eq!(found(&app, &stranger, "q=coffee").await, ["Own coffee"]);
    assert_eq!(found(&app, &stranger, "").await, ["Own coffee"]);
    assert!(found(&app, &stranger, "q=private").await.is_empty());
    // Another user's account as a filter is no row, not an error and not a leak.
    assert!(
        found(&app, &stranger, &format!("account_id={account}"))
            .await
            .is_empty()
    );
    assert_eq!(found(&app, &owner, "q=coffee").await, ["Private coffee"]);
    // A cursor of the owner's pages nothing of the owner's for the stranger.
    let page = app
        .get("/api/v1/transactions?limit=1", Some(&owner))
        .await
        .expect(200);
    let cursor = page["next_cursor"].as_str().expect("cursor");
    let theirs = app
        .get(
            &format!("/api/v1/transactions?cursor={cursor}"),
            Some(&stranger),
        )
        .await
        .expect(200);
    assert!(
        descriptions(&theirs)
            .iter()
            .all(|description| !description.starts_with("Private"))
    );
    // Without a token: 401.
    app.get("/api/v1/transactions", None)
        .await
        .expect_problem(401, "unauthorized");
}

async fn search_parameters_and_cursors_are_422(app: TestApp) {
    let token = access(&app, "bounds@example.com").await;
    let (checking, _) = two_accounts(&app, &token).await;
    let listing = app
        .get(
            &format!("/api/v1/accounts/{checking}/transactions?limit=1"),
            Some(&token),
        )
        .await
        .expect(200);
    let account_cursor = listing["next_cursor"].as_str().expect("cursor").to_owned();
    let range = app
        .get(
            &format!(
                "/api/v1/accounts/{checking}/transactions?start_date=2026-01-01&end_date=2026-12-31&limit=1"
            ),
            Some(&token),
        )
        .await
        .expect(200);
    let range_cursor = range["next_cursor"].as_str().expect("cursor").to_owned();
    let long = "a".repeat(257);
    let many_words = (0..17)
        .map(|n| format!("w{n}"))
        .collect::<Vec<_>>()
        .join("%20");
    for (query, field) in [
        ("cursor=nope".to_owned(), "query.cursor"),
        (format!("cursor={account_cursor}"), "query.cursor"),
        (format!("cursor={range_cursor}"), "query.cursor"),
        (format!("cursor={}", &account_cursor[..27]), "query.cursor"),
        ("cursor=%20".to_owned(), "query.cursor"),
        ("limit=0".to_owned(), "query.limit"),
        ("limit=101".to_owned(), "query.limit"),
        ("limit=ten".to_owned(), "query.limit"),
        ("account_id=not-a-uuid".to_owned(), "query.account_id"),
        ("status=lost".to_owned(), "query.status"),
        ("min_amount=abc".to_owned(), "query.min_amount"),
        ("max_amount=1e5".to_owned(), "query.max_amount"),
        ("min_amount=10&max_amount=5".to_owned(), "query.min_amount"),
        ("start_date=2026-13-01".to_owned(), "query.start_date"),
        (
            "start_date=2026-03-02&end_date=2026-03-01".to_owned(),
            "query.start_date",
        ),
        (format!("q={long}"), "query.q"),
        (format!("q={many_words}"), "query.q"),
        (format!("category={}", "c".repeat(201)), "query.category"),
    ] {
        let problem = app
            .get(&format!("/api/v1/transactions?{query}"), Some(&token))
            .await
            .expect_problem(422, "validation_failed");
        let fields: Vec<&str> = problem["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .filter_map(|error| error["field"].as_str())
            .collect();
        assert_eq!(fields, [field], "{query}: {problem}");
    }
    // A search cursor reads back in the search only.
    let search = app
        .get("/api/v1/transactions?limit=1", Some(&token))
        .await
        .expect(200);
    let search_cursor = search["next_cursor"].as_str().expect("cursor");
    app.get(
        &format!("/api/v1/transactions?cursor={search_cursor}"),
        Some(&token),
    )
    .await
    .expect(200);
    let problem = app
        .get(
            &format!("/api/v1/accounts/{checking}/transactions?cursor={search_cursor}"),
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "query.cursor");
}

async fn the_account_listing_pages_by_cursor(app: TestApp) {
    let token = access(&app, "account-cursor@example.com").await;
    let (checking, _) = two_accounts(&app, &token).await;
    let base = format!("/api/v1/accounts/{checking}/transactions");
    let by_offset = app
        .get(&format!("{base}?limit=100"), Some(&token))
        .await
        .expect(200);
    let expected: Vec<Value> = by_offset["transactions"].as_array().cloned().expect("rows");
    assert_eq!(expected.len(), 13);
    assert!(newest_first(&expected));
    for limit in [1, 3, 5, 13] {
        let rows = all_pages(&app, &token, &base, limit).await;
        assert_eq!(rows, expected, "limit {limit}");
    }
    // A cursor page says its size and counts every row; its offset is 0.
    let first = app
        .get(&format!("{base}?limit=4"), Some(&token))
        .await
        .expect(200);
    let cursor = first["next_cursor"].as_str().expect("cursor");
    let second = app
        .get(&format!("{base}?limit=4&cursor={cursor}"), Some(&token))
        .await
        .expect(200);
    assert_eq!(second["total_count"], 13);
    assert_eq!(second["offset"], 0);
    assert_eq!(second["limit"], 4);
    assert_eq!(second["has_more"], true);
    assert_eq!(
        second["transactions"],
        Value::Array(expected[4..8].to_vec())
    );
    // An offset page names its next page by cursor too, the same as offset + limit.
    let by_offset_page = app
        .get(&format!("{base}?limit=4&offset=4"), Some(&token))
        .await
        .expect(200);
    assert_eq!(by_offset_page["transactions"], second["transactions"]);
    let after_offset = by_offset_page["next_cursor"].as_str().expect("cursor");
    let third = app
        .get(
            &format!("{base}?limit=4&cursor={after_offset}"),
            Some(&token),
        )
        .await
        .expect(200);
    let by_offset_third = app
        .get(&format!("{base}?limit=4&offset=8"), Some(&token))
        .await
        .expect(200);
    assert_eq!(third["transactions"], by_offset_third["transactions"]);
    // The type filter pages by cursor as well.
    let typed = all_pages(&app, &token, &format!("{base}?transaction_type=trade"), 2).await;
    assert!(typed.is_empty());
    // Offset and cursor at once: 422 naming the offset (offset=0 is no offset).
    let problem = app
        .get(&format!("{base}?offset=4&cursor={cursor}"), Some(&token))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "query.offset");
    assert_eq!(problem["errors"][0]["code"], "not_with_cursor");
    app.get(&format!("{base}?offset=0&cursor={cursor}"), Some(&token))
        .await
        .expect(200);
    // A newest-first cursor does not page the date range, nor another listing's cursor this.
    let problem = app
        .get(
            &format!("{base}?start_date=2026-01-01&end_date=2026-12-31&cursor={cursor}"),
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "query.cursor");
}
