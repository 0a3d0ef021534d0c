//! What the statement-import cases read back after an upload: the caller's accounts, an
//! account's rows, and the counters and amounts of the answers; and a CSV import of plain rows
//! into a new account.

use serde_json::Value;

use crate::{TestApp, upload_with};

/// The access token of a new user with this email.
pub async fn access(app: &TestApp, email: &str) -> String {
    app.user(email).await.1
}

/// The caller's accounts (`GET /api/v1/accounts`).
pub async fn accounts(app: &TestApp, token: &str) -> Vec<Value> {
    let list = app.get("/api/v1/accounts", Some(token)).await.expect(200);
    list["accounts"].as_array().cloned().unwrap_or_default()
}

/// An account's transactions, up to 100, as the list gives them (newest first).
pub async fn rows(app: &TestApp, token: &str, account_id: &str) -> Vec<Value> {
    let page = app
        .get(
            &format!("/api/v1/accounts/{account_id}/transactions?limit=100"),
            Some(token),
        )
        .await
        .expect(200);
    page["transactions"].as_array().cloned().unwrap_or_default()
}

/// A counter of an import answer (`transactions_created`, …); panics naming the answer when
/// it has none.
pub fn count(body: &Value, key: &str) -> u64 {
    body[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {body}"))
}

/// The text field `key` of every row, sorted (so a case does not depend on the list's order);
/// a row without it gives an empty string.
pub fn sorted_field(rows: &[Value], key: &str) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .map(|row| row[key].as_str().unwrap_or_default().to_owned())
        .collect();
    out.sort();
    out
}

/// The amounts of `rows`, as text, sorted.
pub fn sorted_amounts(rows: &[Value]) -> Vec<String> {
    sorted_field(rows, "amount")
}

/// Imports `(date, description, amount)` rows as a CSV statement into a new account `name`
/// in `currency`; the account's id.
pub async fn import_rows(
    app: &TestApp,
    token: &str,
    name: &str,
    currency: &str,
    rows: &[(&str, &str, &str)],
) -> String {
    let mut file = String::from("Date,Description,Amount\n");
    for (date, description, amount) in rows {
        file.push_str(&format!("{date},{description},{amount}\n"));
    }
    upload_with(
        app,
        Some("statement.csv"),
        file.as_bytes(),
        &[("account_name", name), ("currency", currency)],
        token,
    )
    .await
    .expect(201);
    accounts(app, token)
        .await
        .into_iter()
        .find(|account| account["name"] == name)
        .and_then(|account| account["id"].as_str().map(str::to_owned))
        .expect("the imported account")
}
