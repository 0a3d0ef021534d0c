//! Reading JSON bodies and query strings into validated values, collecting every field error
//! into one 422 problem.

use bytes::Bytes;
use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use http::header;
use serde_json::{Map, Value};

use super::RequestContext;
use crate::dates;
use crate::problem::{ApiError, FieldError};

/// Whether a Content-Type names JSON (`application/json`, `application/*+json`, with params).
fn is_json_content_type(value: &str) -> bool {
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The fields of a JSON object body, taken one by one with their rules.
pub(crate) struct JsonFields {
    map: Map<String, Value>,
    errors: Vec<FieldError>,
}

impl JsonFields {
    /// Parses a body that must be a JSON object sent as JSON.
    pub(crate) fn parse(ctx: &RequestContext, body: &Bytes) -> Result<Self, ApiError> {
        Self::parse_inner(ctx, body, false)
    }

    /// Parses a body that may be absent (empty, with or without a JSON Content-Type).
    pub(crate) fn parse_optional(ctx: &RequestContext, body: &Bytes) -> Result<Self, ApiError> {
        Self::parse_inner(ctx, body, true)
    }

    fn parse_inner(ctx: &RequestContext, body: &Bytes, optional: bool) -> Result<Self, ApiError> {
        let empty = body.iter().all(u8::is_ascii_whitespace);
        if optional && empty {
            return Ok(Self {
                map: Map::new(),
                errors: Vec::new(),
            });
        }
        match ctx.header_str(&header::CONTENT_TYPE) {
            Some(value) if is_json_content_type(value) => {}
            _ => {
                return Err(ApiError::field(
                    "header.content-type",
                    "unsupported_content_type",
                    "The request body must be JSON, sent with Content-Type: application/json.",
                ));
            }
        }
        if empty {
            return Err(ApiError::field(
                "body",
                "required",
                "A JSON object body is required.",
            ));
        }
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => Ok(Self {
                map,
                errors: Vec::new(),
            }),
            Ok(_) => Err(ApiError::field(
                "body",
                "invalid_type",
                "The request body must be a JSON object.",
            )),
            Err(error) => Err(ApiError::field(
                "body",
                "malformed_json",
                format!(
                    "The request body is not valid JSON (line {}, column {}).",
                    error.line(),
                    error.column()
                ),
            )),
        }
    }

    fn push(&mut self, field: &str, code: &'static str, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, code, message));
    }

    /// A required string of `min..=max` Unicode characters. Returns it as sent.
    pub(crate) fn string(&mut self, field: &str, min: usize, max: usize) -> Option<String> {
        match self.map.get(field) {
            None | Some(Value::Null) => {
                self.push(field, "required", "This field is required.");
                None
            }
            Some(_) => self.optional_string(field, min, max),
        }
    }

    /// An optional string of `min..=max` Unicode characters; `None` when absent or null.
    pub(crate) fn optional_string(
        &mut self,
        field: &str,
        min: usize,
        max: usize,
    ) -> Option<String> {
        match self.map.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(value)) => {
                let length = value.chars().count();
                if length < min {
                    let message = if min == 1 {
                        "Must not be empty.".to_owned()
                    } else {
                        format!("Must be at least {min} characters long.")
                    };
                    self.push(field, "too_short", message);
                    None
                } else if length > max {
                    self.push(
                        field,
                        "too_long",
                        format!("Must be at most {max} characters long."),
                    );
                    None
                } else {
                    Some(value.clone())
                }
            }
            Some(_) => {
                self.push(field, "invalid_type", "Must be a string.");
                None
            }
        }
    }

    /// A required email address.
    pub(crate) fn email(&mut self, field: &str) -> Option<String> {
        let value = self.string(field, 1, 320)?;
        if is_plausible_email(value.trim()) {
            Some(value.trim().to_owned())
        } else {
            self.push(field, "invalid_email", "Must be a valid email address.");
            None
        }
    }

    /// A required token of exactly 64 hex characters.
    pub(crate) fn hex_token(&mut self, field: &str) -> Option<String> {
        let value = self.string(field, 0, usize::MAX)?;
        if value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
            Some(value.to_ascii_lowercase())
        } else {
            self.push(
                field,
                "invalid_token",
                "Must be exactly 64 hexadecimal characters.",
            );
            None
        }
    }

    /// An optional boolean; `default` when absent or null.
    pub(crate) fn bool(&mut self, field: &str, default: bool) -> bool {
        match self.map.get(field) {
            None | Some(Value::Null) => default,
            Some(Value::Bool(value)) => *value,
            Some(_) => {
                self.push(field, "invalid_type", "Must be true or false.");
                default
            }
        }
    }

    /// An optional UUID; `None` when absent or null.
    pub(crate) fn optional_uuid(&mut self, field: &str) -> Option<uuid::Uuid> {
        match self.map.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(value)) => {
                let parsed = uuid::Uuid::parse_str(value).ok();
                if parsed.is_none() {
                    self.push(field, "invalid_uuid", "Must be a UUID.");
                }
                parsed
            }
            Some(_) => {
                self.push(field, "invalid_uuid", "Must be a UUID.");
                None
            }
        }
    }

    /// A required UUID.
    pub(crate) fn uuid(&mut self, field: &str) -> Option<uuid::Uuid> {
        if matches!(self.map.get(field), None | Some(Value::Null)) {
            self.push(field, "required", "This field is required.");
            return None;
        }
        self.optional_uuid(field)
    }

    /// An optional `YYYY-MM-DD` date within the accepted years ([`crate::dates`]); `None` when
    /// absent or null.
    pub(crate) fn optional_date(&mut self, field: &str) -> Option<NaiveDate> {
        match self.map.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(value)) => match parse_date(value) {
                Ok(day) => Some(day),
                Err((code, message)) => {
                    self.push(field, code, message);
                    None
                }
            },
            Some(_) => {
                self.push(field, "invalid_date", DATE_MESSAGE);
                None
            }
        }
    }

    /// A string field that may be absent (outer `None`), null (`Some(None)`) or a string of
    /// `min..=max` characters.
    pub(crate) fn nullable_string(
        &mut self,
        field: &str,
        min: usize,
        max: usize,
    ) -> Option<Option<String>> {
        match self.map.get(field) {
            None => None,
            Some(Value::Null) => Some(None),
            Some(_) => self.optional_string(field, min, max).map(Some),
        }
    }

    /// Adds an error found by a rule outside this helper.
    pub(crate) fn add_error(&mut self, error: FieldError) {
        self.errors.push(error);
    }

    /// 422 with every collected error, if any.
    pub(crate) fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::validation(self.errors))
        }
    }
}

/// A pragmatic address check: one `@`, a non-empty local part, a dotted domain, no spaces or
/// control characters. Deliverability is proven by the verification email, not here.
pub(crate) fn is_plausible_email(value: &str) -> bool {
    if value.len() > 254 || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let Some((local, domain)) = value.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && !local.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
        && domain
            .chars()
            .all(|c| c.is_alphanumeric() || c == '.' || c == '-')
}

/// The parameters of a query string, decoded, taken one by one with their rules.
pub(crate) struct QueryParams {
    pairs: Vec<(String, String)>,
    errors: Vec<FieldError>,
}

impl QueryParams {
    pub(crate) fn parse(query: Option<&str>) -> Self {
        let pairs = query
            .unwrap_or_default()
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(key), percent_decode(value))
            })
            .collect();
        Self {
            pairs,
            errors: Vec::new(),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn push(&mut self, name: &str, code: &'static str, message: impl Into<String>) {
        self.errors
            .push(FieldError::new(format!("query.{name}"), code, message));
    }

    /// A boolean (`true`/`false`/`1`/`0`), `default` when absent.
    pub(crate) fn bool(&mut self, name: &str, default: bool) -> bool {
        match self.get(name).map(str::to_ascii_lowercase).as_deref() {
            None => default,
            Some("true" | "1") => true,
            Some("false" | "0") => false,
            Some(_) => {
                self.push(name, "invalid_boolean", "Must be true or false.");
                default
            }
        }
    }

    /// An integer within `min..=max`, `default` when absent.
    pub(crate) fn integer(&mut self, name: &str, min: i64, max: i64, default: i64) -> i64 {
        let Some(raw) = self.get(name) else {
            return default;
        };
        match raw.trim().parse::<i64>() {
            Ok(value) if (min..=max).contains(&value) => value,
            Ok(_) => {
                let message = if max == i64::MAX {
                    format!("Must be at least {min}.")
                } else {
                    format!("Must be between {min} and {max}.")
                };
                self.push(name, "out_of_range", message);
                default
            }
            Err(_) => {
                self.push(name, "invalid_integer", "Must be an integer.");
                default
            }
        }
    }

    /// An optional string, `None` when absent or empty.
    pub(crate) fn string(&mut self, name: &str) -> Option<String> {
        self.get(name)
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    }

    /// One of a closed set of names (compared ASCII case-insensitively); `None` when absent or
    /// empty. An unknown name is an `invalid_choice` error listing the allowed ones.
    pub(crate) fn choice<T: Copy>(
        &mut self,
        name: &str,
        values: &[T],
        as_str: fn(T) -> &'static str,
    ) -> Option<T> {
        let raw = self.string(name)?;
        let found = values
            .iter()
            .copied()
            .find(|value| as_str(*value).eq_ignore_ascii_case(&raw));
        if found.is_none() {
            let allowed = values
                .iter()
                .map(|value| as_str(*value))
                .collect::<Vec<_>>()
                .join(", ");
            self.push(
                name,
                "invalid_choice",
                format!("Must be one of: {allowed}."),
            );
        }
        found
    }

    /// A calendar date (`YYYY-MM-DD`) within the accepted years ([`crate::dates`]); `None`
    /// when absent or empty.
    pub(crate) fn date(&mut self, name: &str) -> Option<NaiveDate> {
        let raw = self.string(name)?;
        match parse_date(&raw) {
            Ok(day) => Some(day),
            Err((code, message)) => {
                self.push(name, code, message);
                None
            }
        }
    }

    /// A required instant within the accepted years ([`crate::dates`]): RFC 3339
    /// (`2024-05-01T12:00:00Z`, any offset, converted to UTC), or a plain date standing for its
    /// first microsecond (UTC), or its last when `end_of_day`.
    pub(crate) fn required_datetime(
        &mut self,
        name: &str,
        end_of_day: bool,
    ) -> Option<DateTime<Utc>> {
        let Some(raw) = self.string(name) else {
            self.push(name, "required", "This parameter is required.");
            return None;
        };
        match parse_datetime(&raw, end_of_day) {
            Ok(at) => Some(at),
            Err((code, message)) => {
                self.push(name, code, message);
                None
            }
        }
    }

    /// Adds an error found by a rule across parameters (`query.{name}`).
    pub(crate) fn add_error(&mut self, name: &str, code: &'static str, message: impl Into<String>) {
        self.push(name, code, message);
    }

    /// 422 with every collected error, if any.
    pub(crate) fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::validation(self.errors))
        }
    }
}

/// What a malformed date is told.
const DATE_MESSAGE: &str = "Must be a date (YYYY-MM-DD).";

/// What a malformed date-time is told.
const DATETIME_MESSAGE: &str =
    "Must be an RFC 3339 date-time (2024-05-01T12:00:00Z) or a date (YYYY-MM-DD).";

/// The last microsecond of a day, where a plain `end_date` ends.
const LAST_MICROSECOND: NaiveTime = match NaiveTime::from_hms_micro_opt(23, 59, 59, 999_999) {
    Some(time) => time,
    None => NaiveTime::MIN,
};

/// Why a date or date-time was refused: the field error's code and message.
type Refusal = (&'static str, String);

/// The refusal of a well-formed date or date-time outside the accepted years.
fn out_of_range() -> Refusal {
    (
        "out_of_range",
        format!(
            "Must be between {} and {} (UTC).",
            dates::EARLIEST_DATE,
            dates::LATEST_DATE
        ),
    )
}

/// The one parser of request dates: `YYYY-MM-DD` within [`dates::EARLIEST_DATE`] and
/// [`dates::LATEST_DATE`].
fn parse_date(raw: &str) -> Result<NaiveDate, Refusal> {
    let day = NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .map_err(|_| ("invalid_date", DATE_MESSAGE.to_owned()))?;
    if dates::is_accepted_date(day) {
        Ok(day)
    } else {
        Err(out_of_range())
    }
}

/// The one parser of request instants: RFC 3339 (converted to UTC) or a plain date (its first
/// microsecond, or its last when `end_of_day`), within [`dates::EARLIEST_INSTANT`] and
/// [`dates::LATEST_INSTANT`].
fn parse_datetime(raw: &str, end_of_day: bool) -> Result<DateTime<Utc>, Refusal> {
    let at = if let Ok(at) = DateTime::parse_from_rfc3339(raw) {
        at.with_timezone(&Utc)
    } else {
        let day = NaiveDate::parse_from_str(raw, "%Y-%m-%d")
            .map_err(|_| ("invalid_datetime", DATETIME_MESSAGE.to_owned()))?;
        if !dates::is_accepted_date(day) {
            return Err(out_of_range());
        }
        let time = if end_of_day {
            LAST_MICROSECOND
        } else {
            NaiveTime::MIN
        };
        day.and_time(time).and_utc()
    };
    if dates::is_accepted_instant(at) {
        Ok(at)
    } else {
        Err(out_of_range())
    }
}

/// Decodes `%XX` escapes and `+` as space; invalid escapes are kept as written.
fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(index + 1..index + 3)
                    .and_then(|pair| std::str::from_utf8(pair).ok())
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok());
                if let Some(decoded) = hex {
                    out.push(decoded);
                    index += 2;
                } else {
                    out.push(b'%');
                }
            }
            other => out.push(other),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_and_queries() {
        assert!(is_plausible_email("ada@example.com"));
        assert!(is_plausible_email("a.b+c@sub.example.co.uk"));
        assert!(!is_plausible_email("ada@example"));
        assert!(!is_plausible_email("ada example@x.com"));
        assert!(!is_plausible_email("@x.com"));
        assert!(!is_plausible_email("ada@.com"));
        let mut query = QueryParams::parse(Some("limit=0&active_only=maybe&name=a%20b+c&x=%zz"));
        assert_eq!(query.string("name").as_deref(), Some("a b c"));
        assert_eq!(query.string("x").as_deref(), Some("%zz"));
        query.integer("limit", 1, 100, 50);
        query.bool("active_only", true);
        let error = query.finish().expect_err("two errors");
        let fields: Vec<_> = error.errors().iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["query.limit", "query.active_only"]);
    }

    #[test]
    fn dates_and_choices() {
        let mut query = QueryParams::parse(Some(
            "d=2024-02-29&bad=2023-02-29&from=2024-05-01T12:30:00%2B02:00&to=2024-05-02&kind=ETF",
        ));
        assert_eq!(query.date("d"), NaiveDate::from_ymd_opt(2024, 2, 29));
        assert_eq!(query.date("missing"), None);
        let from = query.required_datetime("from", false).expect("rfc 3339");
        assert_eq!(from.to_rfc3339(), "2024-05-01T10:30:00+00:00");
        let to = query.required_datetime("to", true).expect("plain date");
        assert_eq!(to.to_rfc3339(), "2024-05-02T23:59:59.999999+00:00");
        assert_eq!(
            query.choice("kind", &["equity", "etf"], |value| value),
            Some("etf")
        );
        query.date("bad");
        query.required_datetime("absent", false);
        query.choice("d", &["equity"], |value| value);
        let error = query.finish().expect_err("three errors");
        let codes: Vec<_> = error.errors().iter().map(|e| e.code).collect();
        assert_eq!(codes, ["invalid_date", "required", "invalid_choice"]);
    }

    #[test]
    fn dates_outside_the_accepted_years_name_the_field() {
        let mut query = QueryParams::parse(Some(
            "a=1899-12-31&b=2201-01-01&c=1900-01-01&d=2200-12-31&e=-262143-01-01\
             &f=1900-01-01T00:30:00%2B01:00&g=2200-12-31T23:59:59.999999999Z\
             &h=2201-01-01T00:00:00Z&i=1899-12-31&j=2200-12-31&k=%2B10000-01-01",
        ));
        assert_eq!(query.date("a"), None);
        assert_eq!(query.date("b"), None);
        assert_eq!(query.date("c"), Some(dates::EARLIEST_DATE));
        assert_eq!(query.date("d"), Some(dates::LATEST_DATE));
        assert_eq!(query.date("e"), None);
        assert_eq!(query.required_datetime("f", false), None);
        assert_eq!(
            query.required_datetime("g", true),
            Some(dates::LATEST_INSTANT)
        );
        assert_eq!(query.required_datetime("h", false), None);
        assert_eq!(query.required_datetime("i", false), None);
        let last = query.required_datetime("j", true).expect("last day");
        assert_eq!(last.to_rfc3339(), "2200-12-31T23:59:59.999999+00:00");
        assert_eq!(query.date("k"), None);
        let error = query.finish().expect_err("out of range");
        let fields: Vec<_> = error
            .errors()
            .iter()
            .map(|e| (e.field.as_str(), e.code))
            .collect();
        assert_eq!(
            fields,
            [
                ("query.a", "out_of_range"),
                ("query.b", "out_of_range"),
                ("query.e", "out_of_range"),
                ("query.f", "out_of_range"),
                ("query.h", "out_of_range"),
                ("query.i", "out_of_range"),
                ("query.k", "out_of_range"),
            ]
        );
    }

    fn json_request() -> RequestContext {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        RequestContext {
            method: http::Method::POST,
            path: "/api/v1/transactions/syncs".to_owned(),
            query: None,
            headers,
            client_ip: None,
            claims: None,
        }
    }

    #[test]
    fn body_dates_outside_the_accepted_years_name_the_field() {
        let ctx = json_request();
        let body = Bytes::from_static(
            br#"{"end_date": "-262143-01-01", "start_date": "1900-01-01", "other": "2201-01-01", "n": 5}"#,
        );
        let mut fields = JsonFields::parse(&ctx, &body).expect("object");
        assert_eq!(fields.optional_date("end_date"), None);
        assert_eq!(
            fields.optional_date("start_date"),
            Some(dates::EARLIEST_DATE)
        );
        assert_eq!(fields.optional_date("other"), None);
        assert_eq!(fields.optional_date("n"), None);
        let error = fields.finish().expect_err("422");
        assert_eq!(error.status(), http::StatusCode::UNPROCESSABLE_ENTITY);
        let fields: Vec<_> = error
            .errors()
            .iter()
            .map(|e| (e.field.as_str(), e.code))
            .collect();
        assert_eq!(
            fields,
            [
                ("end_date", "out_of_range"),
                ("other", "out_of_range"),
                ("n", "invalid_date")
            ]
        );
    }

    mod never_panic {
        use proptest::prelude::*;

        use super::*;

        /// Strings that look like dates, date-times or neither, and extreme years.
        fn date_like() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<String>(),
                "[-+]?[0-9]{1,7}-[0-9]{1,3}-[0-9]{1,3}",
                "[-+]?[0-9]{1,7}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,12})?(Z|[-+][0-9]{2}:[0-9]{2})",
                (any::<i32>(), 1u32..=12, 1u32..=31)
                    .prop_map(|(y, m, d)| format!("{y}-{m:02}-{d:02}")),
                "[0-9%+&=.:TZ-]{0,40}",
            ]
        }

        fn assert_client_error(result: Result<(), ApiError>) -> Result<(), TestCaseError> {
            if let Err(error) = result {
                prop_assert!(
                    error.status().is_client_error(),
                    "status {}",
                    error.status()
                );
            }
            Ok(())
        }

        fn check_dates(fields: &mut JsonFields) {
            for field in ["start_date", "end_date", "date"] {
                if let Some(day) = fields.optional_date(field) {
                    assert!(dates::is_accepted_date(day));
                }
            }
            fields.optional_uuid("connection_id");
            fields.bool("force", false);
            fields.optional_string("alias", 0, 10);
            fields.nullable_string("alias", 0, 10);
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn query_parsers(query in "[a-z_=&%0-9A-Fa-f+:.TZ-]{0,80}", value in date_like()) {
                for raw in [query.clone(), format!("start_date={value}&end_date={value}&{query}")] {
                    let mut params = QueryParams::parse(Some(&raw));
                    for name in ["start_date", "end_date", "date"] {
                        if let Some(day) = params.date(name) {
                            prop_assert!(dates::is_accepted_date(day));
                        }
                        for end_of_day in [false, true] {
                            if let Some(at) = params.required_datetime(name, end_of_day) {
                                prop_assert!(dates::is_accepted_instant(at));
                            }
                        }
                    }
                    params.integer("limit", 1, 100, 50);
                    params.integer("offset", 0, i64::MAX, 0);
                    params.bool("active_only", true);
                    params.choice("kind", &["a", "b"], |value| value);
                    assert_client_error(params.finish())?;
                }
            }

            #[test]
            fn body_parsers(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
                let ctx = json_request();
                let body = Bytes::from(bytes);
                for parsed in [JsonFields::parse(&ctx, &body), JsonFields::parse_optional(&ctx, &body)] {
                    match parsed {
                        Ok(mut fields) => {
                            check_dates(&mut fields);
                            assert_client_error(fields.finish())?;
                        }
                        Err(error) => prop_assert!(error.status().is_client_error()),
                    }
                }
            }

            #[test]
            fn body_dates(start in date_like(), end in date_like(), force in any::<bool>()) {
                let ctx = json_request();
                let body = serde_json::json!({
                    "connection_id": uuid::Uuid::nil(),
                    "start_date": start,
                    "end_date": end,
                    "force": force,
                });
                let body = Bytes::from(serde_json::to_vec(&body).map_err(|e| TestCaseError::fail(e.to_string()))?);
                let mut fields = JsonFields::parse(&ctx, &body).map_err(|e| TestCaseError::fail(e.detail().to_owned()))?;
                check_dates(&mut fields);
                assert_client_error(fields.finish())?;
            }
        }
    }

    #[test]
    fn json_content_types() {
        assert!(is_json_content_type("application/json"));
        assert!(is_json_content_type("Application/JSON; charset=utf-8"));
        assert!(is_json_content_type("application/merge-patch+json"));
        assert!(!is_json_content_type("text/plain"));
    }
}
