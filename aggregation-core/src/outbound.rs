//! What the outbound HTTP clients (provider APIs, webhook receivers) share.

use std::error::Error as _;

/// A reqwest error and its sources on one line, without the URL (which may carry a token in its
/// query): what provider errors show, and what webhook deliveries log at debug level.
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
