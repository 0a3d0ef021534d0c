//! The concrete provider clients, each a [`Provider`](super::Provider) and nothing more:
//! Charles Schwab (feature `schwab`), SimpleFIN (feature `simplefin`), Enable Banking
//! (feature `enablebanking`) and Plaid (feature `plaid`). Their public types are re-exported from [`super`], where
//! embedders name them (`providers::SchwabProvider`, `providers::simplefin::…`).

#[cfg(feature = "schwab")]
pub(super) mod schwab;

#[cfg(feature = "simplefin")]
pub mod simplefin;

#[cfg(feature = "enablebanking")]
pub mod enablebanking;

#[cfg(feature = "plaid")]
pub mod plaid;

/// The HTTP client of a provider's API: redirects are not followed (one could carry the
/// credentials of a request elsewhere), with these connect and answer timeouts.
#[cfg(any(feature = "schwab", feature = "enablebanking", feature = "plaid"))]
fn api_client(
    connect_timeout: std::time::Duration,
    request_timeout: std::time::Duration,
) -> Result<reqwest::Client, super::ProviderError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect_timeout)
        .timeout(request_timeout)
        .build()
        .map_err(|error| {
            super::ProviderError::Configuration(crate::outbound::describe_request_error(&error))
        })
}

/// The base URL of `api`'s API as configured: `https` (or `http` too when `allow_http`), one
/// that relative paths can join, with a trailing `/` so they join under its path.
#[cfg(any(feature = "enablebanking", feature = "plaid"))]
fn api_base_url(raw: &str, api: &str, allow_http: bool) -> Result<url::Url, super::ProviderError> {
    use super::ProviderError;
    let mut base = url::Url::parse(raw.trim()).map_err(|_| {
        ProviderError::Configuration(format!("the {api} base URL {raw:?} is not a URL"))
    })?;
    let scheme_ok = base.scheme() == "https" || (allow_http && base.scheme() == "http");
    if !scheme_ok || base.cannot_be_a_base() {
        let schemes = if allow_http { "http(s)" } else { "https" };
        return Err(ProviderError::Configuration(format!(
            "the {api} base URL must be {schemes}"
        )));
    }
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    Ok(base)
}

/// A text a provider sent, trimmed; `None` for an empty one.
#[cfg(any(feature = "enablebanking", feature = "plaid"))]
fn non_blank(text: Option<String>) -> Option<String> {
    text.map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}
