//! Validation of request bodies and query strings: serde-derived request types whose fields
//! are checked one rule at a time, every field error collected into one 422 problem.
//!
//! A request type derives `Deserialize` with lenient fields ([`Field`] for JSON bodies,
//! `Option<String>` for queries, so that deserializing never stops at the first bad field)
//! and implements [`Validate`]: each field goes through a rule (`Result<T, FieldError>`), and
//! [`AllValid::all_valid`] turns the tuple of results into either every value or one
//! `validation_failed` problem listing every error in field order.
//!
//! ```text
//! impl Validate for LoginBody {
//!     type Valid = (String, String);
//!     fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
//!         (body::email("email", self.email), body::string("password", self.password, 1, 1024))
//!             .all_valid()
//!     }
//! }
//! ```

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use utoipa::openapi::schema::ObjectBuilder;

use crate::config::Config;
use crate::dates;
use crate::problem::{ApiError, FieldError};

/// A query parameter's name and the schema the document gives it ([`Validate::PARAMETER_SCHEMAS`]).
pub(crate) type ParameterSchema = (&'static str, fn() -> ObjectBuilder);

/// A request type checked field by field after deserializing.
pub(crate) trait Validate: DeserializeOwned {
    /// The checked values.
    type Valid: Send;

    /// Every checked value, or 422 with every field error in field order.
    fn validate(self, config: &Config) -> Result<Self::Valid, ApiError>;

    /// The query parameters that must be present, for the OpenAPI document: a parameter
    /// whose schema is a shared one (`#[param(schema_with = ...)]`) loses its `required`.
    const REQUIRED_PARAMETERS: &'static [&'static str] = &[];

    /// Query parameter schemas built from the constants their rules check against, in place of
    /// the derived ones (whose bounds can only be literals); the derived description and
    /// `required` stay.
    const PARAMETER_SCHEMAS: &'static [ParameterSchema] = &[];
}

/// A tuple of field results: every value, or one 422 with every error in tuple order.
pub(crate) trait AllValid {
    /// The values when every field passed.
    type Values;

    /// Every value, or 422 listing every error.
    fn all_valid(self) -> Result<Self::Values, ApiError>;
}

macro_rules! all_valid {
    ($($value:ident $result:ident),+) => {
        impl<$($value),+> AllValid for ($(Result<$value, FieldError>,)+) {
            type Values = ($($value,)+);

            fn all_valid(self) -> Result<Self::Values, ApiError> {
                let ($($result,)+) = self;
                match ($($result,)+) {
                    ($(Ok($result),)+) => Ok(($($result,)+)),
                    ($($result,)+) => {
                        let errors = [$($result.err()),+].into_iter().flatten().collect();
                        Err(ApiError::validation(errors))
                    }
                }
            }
        }
    };
}

/// One field: its value, or 422 with its error.
impl<A> AllValid for Result<A, FieldError> {
    type Values = A;

    fn all_valid(self) -> Result<A, ApiError> {
        self.map_err(|error| ApiError::validation(vec![error]))
    }
}

all_valid!(A a, B b);
all_valid!(A a, B b, C c);
all_valid!(A a, B b, C c, D d);
all_valid!(A a, B b, C c, D d, E e);
all_valid!(A a, B b, C c, D d, E e, F f);
all_valid!(A a, B b, C c, D d, E e, F f, G g);

/// One field of a JSON object body, as sent: absent, `null`, or any other JSON value. It
/// deserializes from anything, so a body type made of them never fails to deserialize; the
/// rules of [`body`] judge the value.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Field {
    /// The key is not in the object.
    #[default]
    Absent,
    /// The key is `null`.
    Null,
    /// Any other value.
    Value(Value),
}

/// Any JSON value: the body rules, not the shape, judge a field (422 names the field).
impl utoipa::PartialSchema for Field {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::AnyValue)
            .into()
    }
}

impl utoipa::ToSchema for Field {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("AnyValue")
    }
}

/// Only the schema derive serializes a field (for the `default` of `#[serde(default)]`
/// bodies): absent is `null`.
impl serde::Serialize for Field {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Absent | Self::Null => serializer.serialize_unit(),
            Self::Value(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::Null => Self::Null,
            value => Self::Value(value),
        })
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

/// A day written `YYYY-MM-DD`: `None` when chrono cannot read it; `Err` for a day out of the
/// accepted years (however its year is written: `-262143-01-01` too); a day in range must be
/// shaped `YYYY-MM-DD` exactly (chrono alone also takes `2024-1-05` or `+2024-01-05`).
fn parse_day(raw: &str) -> Option<Result<NaiveDate, Refusal>> {
    let day = NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok()?;
    if !dates::is_accepted_date(day) {
        return Some(Err(out_of_range()));
    }
    let shaped = raw.len() == 10
        && raw.bytes().enumerate().all(|(index, byte)| match index {
            4 | 7 => byte == b'-',
            _ => byte.is_ascii_digit(),
        });
    shaped.then_some(Ok(day))
}

/// The one parser of request dates: `YYYY-MM-DD` within [`dates::EARLIEST_DATE`] and
/// [`dates::LATEST_DATE`].
fn parse_date(raw: &str) -> Result<NaiveDate, Refusal> {
    parse_day(raw).unwrap_or_else(|| Err(("invalid_date", DATE_MESSAGE.to_owned())))
}

/// The one parser of request instants: RFC 3339 (converted to UTC) or a plain date (its first
/// microsecond, or its last when `end_of_day`), within [`dates::EARLIEST_INSTANT`] and
/// [`dates::LATEST_INSTANT`].
fn parse_datetime(raw: &str, end_of_day: bool) -> Result<DateTime<Utc>, Refusal> {
    let at = if let Ok(at) = DateTime::parse_from_rfc3339(raw) {
        at.with_timezone(&Utc)
    } else {
        let day = parse_day(raw)
            .unwrap_or_else(|| Err(("invalid_datetime", DATETIME_MESSAGE.to_owned())))?;
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

/// Rules for the fields of a JSON object body; errors name the field as sent (`email`).
pub(crate) mod body {
    use super::{DATE_MESSAGE, Field, FieldError, NaiveDate, Value, is_plausible_email};

    fn required(name: &str) -> FieldError {
        FieldError::new(name, "required", "This field is required.")
    }

    /// A required string of `min..=max` Unicode characters, as sent.
    pub(crate) fn string(
        name: &str,
        field: Field,
        min: usize,
        max: usize,
    ) -> Result<String, FieldError> {
        optional_string(name, field, min, max)?.ok_or_else(|| required(name))
    }

    /// An optional string of `min..=max` Unicode characters; `None` when absent or null.
    pub(crate) fn optional_string(
        name: &str,
        field: Field,
        min: usize,
        max: usize,
    ) -> Result<Option<String>, FieldError> {
        match field {
            Field::Absent | Field::Null => Ok(None),
            Field::Value(Value::String(value)) => {
                let length = value.chars().count();
                if length < min {
                    let message = if min == 1 {
                        "Must not be empty.".to_owned()
                    } else {
                        format!("Must be at least {min} characters long.")
                    };
                    Err(FieldError::new(name, "too_short", message))
                } else if length > max {
                    Err(FieldError::new(
                        name,
                        "too_long",
                        format!("Must be at most {max} characters long."),
                    ))
                } else {
                    Ok(Some(value))
                }
            }
            Field::Value(_) => Err(FieldError::new(name, "invalid_type", "Must be a string.")),
        }
    }

    /// A string that may be absent (outer `None`), null (`Some(None)`) or a string of
    /// `min..=max` characters.
    pub(crate) fn nullable_string(
        name: &str,
        field: Field,
        min: usize,
        max: usize,
    ) -> Result<Option<Option<String>>, FieldError> {
        match field {
            Field::Absent => Ok(None),
            Field::Null => Ok(Some(None)),
            present => optional_string(name, present, min, max).map(Some),
        }
    }

    /// A required email address, trimmed.
    pub(crate) fn email(name: &str, field: Field) -> Result<String, FieldError> {
        let value = string(name, field, 1, 320)?;
        let trimmed = value.trim();
        if is_plausible_email(trimmed) {
            Ok(trimmed.to_owned())
        } else {
            Err(FieldError::new(
                name,
                "invalid_email",
                "Must be a valid email address.",
            ))
        }
    }

    /// A required token of exactly 64 hex characters, in lower case.
    pub(crate) fn hex_token(name: &str, field: Field) -> Result<String, FieldError> {
        let value = string(name, field, 0, usize::MAX)?;
        if value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(value.to_ascii_lowercase())
        } else {
            Err(FieldError::new(
                name,
                "invalid_token",
                "Must be exactly 64 hexadecimal characters.",
            ))
        }
    }

    /// An optional boolean; `default` when absent or null.
    pub(crate) fn flag(name: &str, field: Field, default: bool) -> Result<bool, FieldError> {
        match field {
            Field::Absent | Field::Null => Ok(default),
            Field::Value(Value::Bool(value)) => Ok(value),
            Field::Value(_) => Err(FieldError::new(
                name,
                "invalid_type",
                "Must be true or false.",
            )),
        }
    }

    /// An optional UUID; `None` when absent or null.
    pub(crate) fn optional_uuid(
        name: &str,
        field: Field,
    ) -> Result<Option<uuid::Uuid>, FieldError> {
        match field {
            Field::Absent | Field::Null => Ok(None),
            Field::Value(Value::String(value)) => uuid::Uuid::parse_str(&value)
                .map(Some)
                .map_err(|_| FieldError::new(name, "invalid_uuid", "Must be a UUID.")),
            Field::Value(_) => Err(FieldError::new(name, "invalid_uuid", "Must be a UUID.")),
        }
    }

    /// A required UUID.
    pub(crate) fn uuid(name: &str, field: Field) -> Result<uuid::Uuid, FieldError> {
        optional_uuid(name, field)?.ok_or_else(|| required(name))
    }

    /// An optional `YYYY-MM-DD` date within the accepted years ([`crate::dates`]); `None`
    /// when absent or null.
    pub(crate) fn optional_date(name: &str, field: Field) -> Result<Option<NaiveDate>, FieldError> {
        match field {
            Field::Absent | Field::Null => Ok(None),
            Field::Value(Value::String(value)) => super::parse_date(&value)
                .map(Some)
                .map_err(|(code, message)| FieldError::new(name, code, message)),
            Field::Value(_) => Err(FieldError::new(name, "invalid_date", DATE_MESSAGE)),
        }
    }
}

/// Rules for query parameters, each given the last value sent for its name; errors name the
/// parameter `query.{name}`.
/// `?active_only` of a list (sessions, connections), `DEFAULT` when absent.
#[derive(serde::Deserialize, utoipa::IntoParams)]
pub(crate) struct ActiveOnlyQuery<const DEFAULT: bool> {
    #[param(value_type = Option<bool>)]
    active_only: Option<String>,
}

impl<const DEFAULT: bool> Validate for ActiveOnlyQuery<DEFAULT> {
    type Valid = bool;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        query::flag("active_only", self.active_only, DEFAULT).all_valid()
    }
}

pub(crate) mod query {
    use super::{DateTime, FieldError, NaiveDate, Utc};

    /// An error about the query parameter `name`.
    pub(crate) fn error(name: &str, code: &'static str, message: impl Into<String>) -> FieldError {
        FieldError::new(format!("query.{name}"), code, message)
    }

    /// A boolean (`true`/`false`/`1`/`0`, any case), `default` when absent.
    pub(crate) fn flag(name: &str, raw: Option<String>, default: bool) -> Result<bool, FieldError> {
        match raw.map(|value| value.to_ascii_lowercase()).as_deref() {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(_) => Err(error(name, "invalid_boolean", "Must be true or false.")),
        }
    }

    /// An integer within `min..=max` that fits `T`, `default` when absent.
    pub(crate) fn integer<T: TryFrom<i64>>(
        name: &str,
        raw: Option<String>,
        min: i64,
        max: i64,
        default: T,
    ) -> Result<T, FieldError> {
        let Some(raw) = raw else {
            return Ok(default);
        };
        let out_of_range = || {
            let message = if max == i64::MAX {
                format!("Must be at least {min}.")
            } else {
                format!("Must be between {min} and {max}.")
            };
            error(name, "out_of_range", message)
        };
        match raw.trim().parse::<i64>() {
            Ok(value) if (min..=max).contains(&value) => {
                T::try_from(value).map_err(|_| out_of_range())
            }
            Ok(_) => Err(out_of_range()),
            Err(_) => Err(error(name, "invalid_integer", "Must be an integer.")),
        }
    }

    /// An optional string, trimmed; `None` when absent or empty.
    pub(crate) fn string(raw: Option<String>) -> Option<String> {
        raw.as_deref()
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
    }

    /// The value of a parameter that, when sent, must name something: trimmed, `None` only
    /// when absent. An empty value names nothing, so its parser refuses it (422), as the
    /// document's `enum`, `format` and `pattern` say.
    fn sent(raw: Option<String>) -> Option<String> {
        raw.map(|value| value.trim().to_owned())
    }

    /// One of a closed set of names (compared ASCII case-insensitively); `None` when absent.
    /// An unknown name, the empty one included, is an `invalid_choice` error listing the
    /// allowed ones.
    pub(crate) fn choice<T: Copy>(
        name: &str,
        raw: Option<String>,
        values: &[T],
        as_str: fn(T) -> &'static str,
    ) -> Result<Option<T>, FieldError> {
        let Some(raw) = sent(raw) else {
            return Ok(None);
        };
        let found = values
            .iter()
            .copied()
            .find(|value| as_str(*value).eq_ignore_ascii_case(&raw));
        match found {
            Some(value) => Ok(Some(value)),
            None => {
                let allowed = values
                    .iter()
                    .map(|value| as_str(*value))
                    .collect::<Vec<_>>()
                    .join(", ");
                Err(error(
                    name,
                    "invalid_choice",
                    format!("Must be one of: {allowed}."),
                ))
            }
        }
    }

    /// A calendar date (`YYYY-MM-DD`) within the accepted years ([`crate::dates`]); `None`
    /// when absent.
    pub(crate) fn date(name: &str, raw: Option<String>) -> Result<Option<NaiveDate>, FieldError> {
        let Some(raw) = sent(raw) else {
            return Ok(None);
        };
        super::parse_date(&raw)
            .map(Some)
            .map_err(|(code, message)| error(name, code, message))
    }

    /// An optional UUID; `None` when absent.
    pub(crate) fn uuid(name: &str, raw: Option<String>) -> Result<Option<uuid::Uuid>, FieldError> {
        let Some(raw) = sent(raw) else {
            return Ok(None);
        };
        uuid::Uuid::parse_str(&raw)
            .map(Some)
            .map_err(|_| error(name, "invalid_uuid", "Must be a UUID."))
    }

    /// An optional instant, read as [`required_datetime`] reads one; `None` when absent.
    pub(crate) fn datetime(
        name: &str,
        raw: Option<String>,
        end_of_day: bool,
    ) -> Result<Option<DateTime<Utc>>, FieldError> {
        let Some(raw) = sent(raw) else {
            return Ok(None);
        };
        super::parse_datetime(&raw, end_of_day)
            .map(Some)
            .map_err(|(code, message)| error(name, code, message))
    }

    /// A required instant within the accepted years ([`crate::dates`]): RFC 3339
    /// (`2024-05-01T12:00:00Z`, any offset, converted to UTC), or a plain date standing for
    /// its first microsecond (UTC), or its last when `end_of_day`.
    pub(crate) fn required_datetime(
        name: &str,
        raw: Option<String>,
        end_of_day: bool,
    ) -> Result<DateTime<Utc>, FieldError> {
        let Some(raw) = string(raw) else {
            return Err(error(name, "required", "This parameter is required."));
        };
        super::parse_datetime(&raw, end_of_day)
            .map_err(|(code, message)| error(name, code, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::extract::{parse_json_object, query_map};

    /// The last value of a query parameter, as a query type's field receives it.
    fn param(query: &serde_json::Map<String, Value>, name: &str) -> Option<String> {
        query.get(name).and_then(Value::as_str).map(str::to_owned)
    }

    /// Collects the errors of rule results, as [`AllValid`] does.
    fn errors(results: Vec<Option<FieldError>>) -> ApiError {
        ApiError::validation(results.into_iter().flatten().collect())
    }

    #[test]
    fn emails_and_queries() {
        assert!(is_plausible_email("ada@example.com"));
        assert!(is_plausible_email("a.b+c@sub.example.co.uk"));
        assert!(!is_plausible_email("ada@example"));
        assert!(!is_plausible_email("ada example@x.com"));
        assert!(!is_plausible_email("@x.com"));
        assert!(!is_plausible_email("ada@.com"));
        let q = query_map(Some("limit=0&active_only=maybe&name=a%20b+c&x=%zz"));
        assert_eq!(query::string(param(&q, "name")).as_deref(), Some("a b c"));
        assert_eq!(query::string(param(&q, "x")).as_deref(), Some("%zz"));
        let error = errors(vec![
            query::integer("limit", param(&q, "limit"), 1, 100, 50).err(),
            query::flag("active_only", param(&q, "active_only"), true).err(),
        ]);
        let fields: Vec<_> = error.errors().iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["query.limit", "query.active_only"]);
    }

    /// A date is `YYYY-MM-DD` exactly, and a parameter sent empty names nothing (422), as
    /// the document's patterns and enums say.
    #[test]
    fn dates_are_exactly_shaped_and_empty_values_name_nothing() {
        for malformed in ["2024-1-05", "+2024-01-05", "2024-01-5", "", " "] {
            assert!(
                query::date("d", Some(malformed.to_owned())).is_err(),
                "{malformed:?}"
            );
            let field = Field::Value(Value::String(malformed.to_owned()));
            assert!(body::optional_date("d", field).is_err(), "{malformed:?}");
        }
        assert!(query::date("d", Some(" 2024-01-05 ".to_owned())).is_ok());
        assert_eq!(query::date("d", None).ok().flatten(), None);
        assert!(query::uuid("u", Some(String::new())).is_err());
        assert!(query::datetime("t", Some(String::new()), false).is_err());
        let empty = query::choice(
            "c",
            Some(String::new()),
            crate::store::TransactionType::ALL,
            crate::store::TransactionType::as_str,
        );
        assert_eq!(empty.err().map(|error| error.code), Some("invalid_choice"));
    }

    #[test]
    fn dates_and_choices() {
        let q = query_map(Some(
            "d=2024-02-29&bad=2023-02-29&from=2024-05-01T12:30:00%2B02:00&to=2024-05-02&kind=ETF",
        ));
        assert_eq!(
            query::date("d", param(&q, "d")).ok().flatten(),
            NaiveDate::from_ymd_opt(2024, 2, 29)
        );
        assert_eq!(
            query::date("missing", param(&q, "missing")).ok().flatten(),
            None
        );
        let from = query::required_datetime("from", param(&q, "from"), false).expect("rfc 3339");
        assert_eq!(from.to_rfc3339(), "2024-05-01T10:30:00+00:00");
        let to = query::required_datetime("to", param(&q, "to"), true).expect("plain date");
        assert_eq!(to.to_rfc3339(), "2024-05-02T23:59:59.999999+00:00");
        assert_eq!(
            query::choice("kind", param(&q, "kind"), &["equity", "etf"], |value| value)
                .ok()
                .flatten(),
            Some("etf")
        );
        let error = errors(vec![
            query::date("bad", param(&q, "bad")).err(),
            query::required_datetime("absent", param(&q, "absent"), false).err(),
            query::choice("d", param(&q, "d"), &["equity"], |value| value).err(),
        ]);
        let codes: Vec<_> = error.errors().iter().map(|e| e.code).collect();
        assert_eq!(codes, ["invalid_date", "required", "invalid_choice"]);
    }

    #[test]
    fn dates_outside_the_accepted_years_name_the_field() {
        let q = query_map(Some(
            "a=1899-12-31&b=2201-01-01&c=1900-01-01&d=2200-12-31&e=-262143-01-01\
             &f=1900-01-01T00:30:00%2B01:00&g=2200-12-31T23:59:59.999999999Z\
             &h=2201-01-01T00:00:00Z&i=1899-12-31&j=2200-12-31&k=%2B10000-01-01",
        ));
        let date = |name: &str| query::date(name, param(&q, name));
        let datetime =
            |name: &str, end_of_day| query::required_datetime(name, param(&q, name), end_of_day);
        assert_eq!(date("a").ok().flatten(), None);
        assert_eq!(date("b").ok().flatten(), None);
        assert_eq!(date("c").ok().flatten(), Some(dates::EARLIEST_DATE));
        assert_eq!(date("d").ok().flatten(), Some(dates::LATEST_DATE));
        assert_eq!(date("e").ok().flatten(), None);
        assert_eq!(datetime("f", false).ok(), None);
        assert_eq!(datetime("g", true).ok(), Some(dates::LATEST_INSTANT));
        assert_eq!(datetime("h", false).ok(), None);
        assert_eq!(datetime("i", false).ok(), None);
        let last = datetime("j", true).expect("last day");
        assert_eq!(last.to_rfc3339(), "2200-12-31T23:59:59.999999+00:00");
        assert_eq!(date("k").ok().flatten(), None);
        let error = errors(vec![
            date("a").err(),
            date("b").err(),
            date("c").err(),
            date("d").err(),
            date("e").err(),
            datetime("f", false).err(),
            datetime("g", true).err(),
            datetime("h", false).err(),
            datetime("i", false).err(),
            datetime("j", true).err(),
            date("k").err(),
        ]);
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

    fn json_headers() -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        headers
    }

    /// The fields of a parsed body object.
    fn field(map: &serde_json::Map<String, Value>, name: &str) -> Field {
        match map.get(name) {
            None => Field::Absent,
            Some(Value::Null) => Field::Null,
            Some(value) => Field::Value(value.clone()),
        }
    }

    #[test]
    fn body_dates_outside_the_accepted_years_name_the_field() {
        let body = br#"{"end_date": "-262143-01-01", "start_date": "1900-01-01", "other": "2201-01-01", "n": 5}"#;
        let map = parse_json_object(&json_headers(), body, false).expect("object");
        let date = |name: &str| body::optional_date(name, field(&map, name));
        assert_eq!(date("end_date").ok().flatten(), None);
        assert_eq!(
            date("start_date").ok().flatten(),
            Some(dates::EARLIEST_DATE)
        );
        assert_eq!(date("other").ok().flatten(), None);
        assert_eq!(date("n").ok().flatten(), None);
        let error = (
            date("end_date"),
            date("start_date"),
            date("other"),
            date("n"),
        )
            .all_valid()
            .expect_err("422");
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

    #[test]
    fn all_valid_yields_every_value_or_every_error() {
        let ok: (Result<u8, FieldError>, Result<&str, FieldError>) = (Ok(1), Ok("a"));
        assert_eq!(ok.all_valid().expect("valid"), (1, "a"));
        let bad: (
            Result<u8, FieldError>,
            Result<u8, FieldError>,
            Result<u8, FieldError>,
        ) = (
            Err(FieldError::new("a", "required", "A.")),
            Ok(2),
            Err(FieldError::new("c", "too_long", "C.")),
        );
        let error = bad.all_valid().expect_err("422");
        let fields: Vec<_> = error.errors().iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["a", "c"]);
        assert_eq!(error.detail(), "The request has 2 invalid fields.");
    }

    #[test]
    fn fields_tell_absent_from_null() {
        #[derive(Deserialize)]
        struct Body {
            #[serde(default)]
            alias: Field,
        }
        let parse = |text: &str| serde_json::from_str::<Body>(text).expect("any JSON").alias;
        assert_eq!(parse("{}"), Field::Absent);
        assert_eq!(parse(r#"{"alias": null}"#), Field::Null);
        assert_eq!(
            body::nullable_string("alias", parse(r#"{"alias": null}"#), 0, 5),
            Ok(Some(None))
        );
        assert_eq!(body::nullable_string("alias", parse("{}"), 0, 5), Ok(None));
        assert_eq!(
            body::nullable_string("alias", parse(r#"{"alias": "x"}"#), 0, 5),
            Ok(Some(Some("x".to_owned())))
        );
        assert_eq!(
            body::string("alias", parse(r#"{"alias": 7}"#), 0, 5)
                .expect_err("not a string")
                .code,
            "invalid_type"
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

        fn assert_client_error<T>(result: Result<T, ApiError>) -> Result<(), TestCaseError> {
            if let Err(error) = result {
                prop_assert!(
                    error.status().is_client_error(),
                    "status {}",
                    error.status()
                );
            }
            Ok(())
        }

        fn check_dates(map: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
            let mut results = Vec::new();
            for name in ["start_date", "end_date", "date"] {
                match body::optional_date(name, field(map, name)) {
                    Ok(Some(day)) => assert!(dates::is_accepted_date(day)),
                    Ok(None) => {}
                    Err(error) => results.push(Some(error)),
                }
            }
            results.push(body::optional_uuid("connection_id", field(map, "connection_id")).err());
            results.push(body::flag("force", field(map, "force"), false).err());
            results.push(body::optional_string("alias", field(map, "alias"), 0, 10).err());
            results.push(body::nullable_string("alias", field(map, "alias"), 0, 10).err());
            let found: Vec<_> = results.into_iter().flatten().collect();
            if found.is_empty() {
                Ok(())
            } else {
                Err(ApiError::validation(found))
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn query_parsers(query in "[a-z_=&%0-9A-Fa-f+:.TZ-]{0,80}", value in date_like()) {
                for raw in [query.clone(), format!("start_date={value}&end_date={value}&{query}")] {
                    let params = query_map(Some(&raw));
                    let mut found = Vec::new();
                    for name in ["start_date", "end_date", "date"] {
                        match query::date(name, param(&params, name)) {
                            Ok(Some(day)) => prop_assert!(dates::is_accepted_date(day)),
                            Ok(None) => {}
                            Err(error) => found.push(error),
                        }
                        for end_of_day in [false, true] {
                            match query::required_datetime(name, param(&params, name), end_of_day) {
                                Ok(at) => prop_assert!(dates::is_accepted_instant(at)),
                                Err(error) => found.push(error),
                            }
                        }
                    }
                    found.extend(query::integer("limit", param(&params, "limit"), 1, 100, 50i64).err());
                    found.extend(query::integer("offset", param(&params, "offset"), 0, i64::MAX, 0u64).err());
                    found.extend(query::flag("active_only", param(&params, "active_only"), true).err());
                    found.extend(query::choice("kind", param(&params, "kind"), &["a", "b"], |value| value).err());
                    let result = if found.is_empty() { Ok(()) } else { Err(ApiError::validation(found)) };
                    assert_client_error(result)?;
                }
            }

            #[test]
            fn body_parsers(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
                let headers = json_headers();
                for optional in [false, true] {
                    match parse_json_object(&headers, &bytes, optional) {
                        Ok(map) => assert_client_error(check_dates(&map))?,
                        Err(error) => prop_assert!(error.status().is_client_error()),
                    }
                }
            }

            #[test]
            fn body_dates(start in date_like(), end in date_like(), force in any::<bool>()) {
                let body = serde_json::json!({
                    "connection_id": uuid::Uuid::nil(),
                    "start_date": start,
                    "end_date": end,
                    "force": force,
                });
                let body = serde_json::to_vec(&body).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let map = parse_json_object(&json_headers(), &body, false)
                    .map_err(|e| TestCaseError::fail(e.detail().to_owned()))?;
                assert_client_error(check_dates(&map))?;
            }
        }
    }
}
