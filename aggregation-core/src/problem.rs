//! RFC 9457 problem details: the one error shape every failure of the API takes.

use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

/// Media type of every problem body.
pub(crate) const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// The application error codes of `decisions.md`, each with its status and title.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum ErrorCode {
    /// 422: anything wrong that the request alone shows.
    ValidationFailed,
    /// 400: a well-formed request that the current state rejects.
    CommandValidationFailed,
    /// 401: missing or invalid credentials.
    Unauthorized,
    /// 403: authenticated but not allowed.
    Forbidden,
    /// 404: unknown route or unknown (or foreign) resource.
    NotFound,
    /// 405: known path, wrong method.
    MethodNotAllowed,
    /// 409: the resource already exists.
    Conflict,
    /// 413: body over the configured limit.
    PayloadTooLarge,
    /// 415: unsupported upload format.
    UnsupportedMediaType,
    /// 429: rate limited.
    RateLimitExceeded,
    /// 500: unexpected failure.
    CommandExecutionFailed,
    /// 502: an upstream provider failed.
    ProviderError,
    /// 503: the store cannot be reached.
    ServiceUnavailable,
}

impl ErrorCode {
    /// The snake_case code that ends the problem `type`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ValidationFailed => "validation_failed",
            Self::CommandValidationFailed => "command_validation_failed",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::RateLimitExceeded => "rate_limit_exceeded",
            Self::CommandExecutionFailed => "command_execution_failed",
            Self::ProviderError => "provider_error",
            Self::ServiceUnavailable => "service_unavailable",
        }
    }

    /// The HTTP status of the code.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Self::ValidationFailed => StatusCode::UNPROCESSABLE_ENTITY,
            Self::CommandValidationFailed => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict => StatusCode::CONFLICT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::RateLimitExceeded => StatusCode::TOO_MANY_REQUESTS,
            Self::CommandExecutionFailed => StatusCode::INTERNAL_SERVER_ERROR,
            Self::ProviderError => StatusCode::BAD_GATEWAY,
            Self::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The problem `title`.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Self::ValidationFailed => "Validation Failed",
            Self::CommandValidationFailed => "Command Validation Failed",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "Not Found",
            Self::MethodNotAllowed => "Method Not Allowed",
            Self::Conflict => "Conflict",
            Self::PayloadTooLarge => "Payload Too Large",
            Self::UnsupportedMediaType => "Unsupported Media Type",
            Self::RateLimitExceeded => "Rate Limit Exceeded",
            Self::CommandExecutionFailed => "Command Execution Failed",
            Self::ProviderError => "Provider Error",
            Self::ServiceUnavailable => "Service Unavailable",
        }
    }
}

/// One entry of a problem's `errors` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub(crate) struct FieldError {
    /// The body field name (`password`), or `query.limit`, `path.id`, `header.content-type`.
    pub field: String,
    /// A short machine-readable reason (`required`, `too_short`, `invalid_format`, ...).
    pub code: &'static str,
    /// A sentence for people.
    pub message: String,
}

impl FieldError {
    /// Builds a field error.
    pub(crate) fn new(
        field: impl Into<String>,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            code,
            message: message.into(),
        }
    }
}

/// A failure on its way to becoming a problem-details response.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    code: ErrorCode,
    detail: String,
    errors: Vec<FieldError>,
    headers: Vec<(header::HeaderName, HeaderValue)>,
    retry_after: Option<u64>,
}

impl ApiError {
    /// A problem with a code and a detail sentence.
    pub(crate) fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        let mut error = Self {
            code,
            detail: detail.into(),
            errors: Vec::new(),
            headers: Vec::new(),
            retry_after: None,
        };
        if code == ErrorCode::Unauthorized {
            error = error.with_header(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        error
    }

    /// 422 with a list of field errors.
    pub(crate) fn validation(errors: Vec<FieldError>) -> Self {
        let detail = match errors.as_slice() {
            [only] => only.message.clone(),
            _ => format!("The request has {} invalid fields.", errors.len()),
        };
        Self {
            errors,
            ..Self::new(ErrorCode::ValidationFailed, detail)
        }
    }

    /// 422 for a single field.
    pub(crate) fn field(
        field: impl Into<String>,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self::validation(vec![FieldError::new(field, code, message)])
    }

    /// 401 with the spec's detail.
    pub(crate) fn unauthorized() -> Self {
        Self::new(
            ErrorCode::Unauthorized,
            "A valid authorization token is required.",
        )
    }

    /// 500 that says nothing about its cause; the cause is logged by the caller.
    pub(crate) fn internal() -> Self {
        Self::new(
            ErrorCode::CommandExecutionFailed,
            "The request could not be completed.",
        )
    }

    /// 429 with `Retry-After` and the body's `retry_after`.
    pub(crate) fn rate_limited(retry_after_seconds: u64) -> Self {
        let seconds = retry_after_seconds.max(1);
        Self::rate_limited_because(
            seconds,
            format!("Too many requests. Try again in {seconds} seconds."),
        )
    }

    /// 429 with `Retry-After`, the body's `retry_after`, and a detail of its own.
    pub(crate) fn rate_limited_because(
        retry_after_seconds: u64,
        detail: impl Into<String>,
    ) -> Self {
        let seconds = retry_after_seconds.max(1);
        let mut error = Self::new(ErrorCode::RateLimitExceeded, detail)
            .with_header(header::RETRY_AFTER, HeaderValue::from(seconds));
        error.retry_after = Some(seconds);
        error
    }

    /// 503 with `Retry-After`: heavy work (hashing, parsing) is saturated; retrying shortly works.
    pub(crate) fn busy(retry_after_seconds: u64) -> Self {
        Self::new(
            ErrorCode::ServiceUnavailable,
            "The service is busy. Try again shortly.",
        )
        .with_header(
            header::RETRY_AFTER,
            HeaderValue::from(retry_after_seconds.max(1)),
        )
    }

    /// Adds a response header (`Allow`, `Retry-After`, ...).
    pub(crate) fn with_header(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The error code.
    #[cfg(test)]
    pub(crate) fn code(&self) -> ErrorCode {
        self.code
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The detail sentence.
    #[cfg(test)]
    pub(crate) fn detail(&self) -> &str {
        &self.detail
    }

    /// The field errors.
    #[cfg(test)]
    pub(crate) fn errors(&self) -> &[FieldError] {
        &self.errors
    }

    /// Extra headers that go with the response.
    pub(crate) fn headers(&self) -> &[(header::HeaderName, HeaderValue)] {
        &self.headers
    }

    /// Renders the problem body for a request path and trace id.
    pub(crate) fn to_body(
        &self,
        base_url: &str,
        instance: &str,
        trace_id: &str,
    ) -> ProblemBody<'_> {
        ProblemBody {
            kind: format!(
                "{}/errors/{}",
                base_url.trim_end_matches('/'),
                self.code.as_str()
            ),
            title: self.code.title(),
            status: self.code.status().as_u16(),
            detail: &self.detail,
            instance: instance.to_owned(),
            errors: (!self.errors.is_empty()).then_some(self.errors.as_slice()),
            trace_id: trace_id.to_owned(),
            retry_after: self.retry_after,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.detail)
    }
}

impl std::error::Error for ApiError {}

/// The serialized problem-details body (RFC 9457), `Problem` in the OpenAPI document.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Problem)]
pub(crate) struct ProblemBody<'a> {
    /// `{base_url}/errors/{code}`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The code's title.
    pub title: &'static str,
    /// The HTTP status.
    pub status: u16,
    /// What went wrong, for people.
    pub detail: &'a str,
    /// The request path.
    pub instance: String,
    /// Field errors, when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<&'a [FieldError]>,
    /// The request's trace id.
    pub trace_id: String,
    /// Seconds to wait, on 429 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_example_holds() {
        let error = ApiError::new(ErrorCode::NotFound, "Session not found.");
        assert_eq!(error.status().as_u16(), 404);
    }
}
