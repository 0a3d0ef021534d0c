//! What the outbound HTTP clients (provider APIs, webhook receivers) share: error text, and
//! the SSRF rule ([`ssrf`]) and connection guard (`guard`) of clients that reach addresses a
//! user named.

#[cfg(any(
    feature = "schwab",
    feature = "webhooks",
    feature = "simplefin",
    feature = "enablebanking",
    feature = "plaid"
))]
use std::error::Error as _;

#[cfg(any(feature = "webhooks", feature = "simplefin"))]
pub(crate) mod guard;
pub(crate) mod ssrf;

/// A reqwest error and its sources on one line, without the URL (which may carry a token in its
/// query): what provider errors show, and what webhook deliveries log at debug level.
#[cfg(any(
    feature = "schwab",
    feature = "webhooks",
    feature = "simplefin",
    feature = "enablebanking",
    feature = "plaid"
))]
pub(crate) fn describe_request_error(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connect() {
        "could not connect".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(any(
    feature = "schwab",
    feature = "simplefin",
    feature = "enablebanking",
    feature = "plaid"
))]
/// Reads a body, refusing one larger than `limit` bytes.
pub(crate) async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(format!("the answer is larger than {limit} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| describe_request_error(&error))?
    {
        if body.len() + chunk.len() > limit {
            return Err(format!("the answer is larger than {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
