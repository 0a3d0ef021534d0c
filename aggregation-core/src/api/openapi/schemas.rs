//! Field schemas shared by request types, so that every field of one kind says exactly what the
//! server enforces for it: use them with `#[schema(schema_with = ...)]` on body fields and
//! `#[param(schema_with = ...)]` on query parameters.
//!
//! Patterns are ECMA-262 regular expressions (JSON Schema 2020-12), written so that engines
//! without the `u` flag's extras read them the same way where possible; the password pattern
//! needs Unicode property escapes (`\p{Lu}`), as the rule it states is a Unicode one.
//!
//! What a schema cannot state, and where the server is therefore stricter or looser:
//! - a new password that is one of the 10,000 most common ones is 422 `too_common`; a client
//!   whose regex engine has another Unicode version may class a few code points otherwise
//!   (U+0295 is `Ll` in Unicode 16, `Lo` from 17 on);
//! - an RFC 3339 instant whose offset moves it across 1900-01-01 or 2200-12-31 in UTC
//!   (`1900-01-01T00:30:00+01:00`) matches the pattern and is 422 `out_of_range`;
//! - the server also reads UUIDs spelled without hyphens, in braces or as `urn:uuid:`, and an
//!   empty `Last-Event-ID` as none;
//! - a start after its end is 422 (an order between two fields), and a webhook target must
//!   resolve to public addresses (a DNS answer).

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type};

/// A calendar day from 1900-01-01 to 2200-12-31 ([`crate::dates`]), exactly: the months' lengths
/// and the leap days of that range (1900, 2100 and 2200 are not leap years) included.
pub(crate) const DATE_PATTERN: &str = concat!(
    "^(?:",
    "(?:19[0-9]{2}|2[01][0-9]{2}|2200)-",
    "(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)",
    "|(?:19(?:0[48]|[2468][048]|[13579][26])|20(?:[02468][048]|[13579][26])",
    "|21(?:0[48]|[2468][048]|[13579][26]))-02-29",
    ")$"
);

/// [`DATE_PATTERN`]'s day, optionally followed by an RFC 3339 time and offset: what the
/// query instants accept (a plain day stands for its first or last microsecond, UTC).
pub(crate) const INSTANT_PATTERN: &str = concat!(
    "^(?:",
    "(?:19[0-9]{2}|2[01][0-9]{2}|2200)-",
    "(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)",
    "|(?:19(?:0[48]|[2468][048]|[13579][26])|20(?:[02468][048]|[13579][26])",
    "|21(?:0[48]|[2468][048]|[13579][26]))-02-29",
    ")",
    "(?:[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?",
    "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))?$"
);

/// The password composition rule ([`crate::auth::password::check_password_rule`]) as a
/// pattern, made of the very classes the rule checks: an upper-case letter (`Lu`), a
/// lower-case letter (`Ll`), a digit (`N`), a character that is neither letter (`L`) nor
/// digit, 8 to 128 code points. A lookahead per demand; `[\s\S]` is any code point.
pub(crate) fn password_pattern() -> String {
    use crate::auth::password::{
        DIGIT_CLASS, LOWER_CASE_LETTER_CLASS, MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS,
        SPECIAL_CLASS, UPPER_CASE_LETTER_CLASS,
    };
    let demands: String = [
        UPPER_CASE_LETTER_CLASS,
        LOWER_CASE_LETTER_CLASS,
        DIGIT_CLASS,
        SPECIAL_CLASS,
    ]
    .iter()
    .map(|class| format!("(?=[\\s\\S]*{class})"))
    .collect();
    format!("^{demands}[\\s\\S]{{{MIN_PASSWORD_CHARS},{MAX_PASSWORD_CHARS}}}$")
}

/// What only a running service knows and its document states: the values some fields accept.
pub(crate) struct ServiceFacts<'a> {
    /// The slugs a connect accepts ([`ConnectableProviderSlug`]).
    pub(crate) connectable_providers: &'a [String],
    /// The redirect URIs a connect accepts ([`AllowedRedirectUri`]).
    pub(crate) redirect_uris: &'a [String],
}

impl ServiceFacts<'_> {
    /// The components standing for these facts, which replace their placeholders.
    pub(crate) fn components(&self) -> [(String, RefOr<Schema>); 2] {
        use utoipa::ToSchema as _;
        [
            (
                ConnectableProviderSlug::name().into_owned(),
                connectable_provider_slug(self.connectable_providers),
            ),
            (
                AllowedRedirectUri::name().into_owned(),
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(self.redirect_uris.iter().cloned()))
                    .description(Some(
                        "One of the redirect URIs this server is configured with.",
                    ))
                    .into(),
            ),
        ]
    }
}

/// A string of at most `max` characters, and at least `min` when `min` is above 0: the schema
/// of a body field whose rule (`body::string` and kin) takes the same constants.
pub(crate) fn text(min: usize, max: usize, nullable: bool) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(string_type(nullable))
        .min_length((min > 0).then_some(min))
        .max_length(Some(max))
}

/// An integer query parameter from `min` to `max` (none: no upper bound stated), or absent:
/// the schema of a parameter whose rule (`query::integer`) takes the same constants.
pub(crate) fn query_integer(min: i64, max: Option<i64>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(min))
        .maximum(max)
}

/// `schema` with the OpenAPI 3.0 `example`, as the derive writes a field's `example = ...`:
/// for fields whose schema is built here so that its bounds come from the rule's constants.
pub(crate) fn with_example(schema: ObjectBuilder, example: &str) -> ObjectBuilder {
    #[expect(
        deprecated,
        reason = "the published document carries these fields' `example` as the derive writes it"
    )]
    schema.example(Some(example.into()))
}

/// A redirect URI that a connect accepts: one the server is configured with
/// ([`ServiceFacts`] lists them in a service's document).
pub(crate) struct AllowedRedirectUri;

/// Without a service, any URI a connect reads.
impl utoipa::PartialSchema for AllowedRedirectUri {
    fn schema() -> RefOr<Schema> {
        text(1, crate::api::providers::MAX_REDIRECT_URI_CHARS, false)
            .description(Some(
                "One of the redirect URIs the server is configured with.",
            ))
            .into()
    }
}

impl utoipa::ToSchema for AllowedRedirectUri {}

/// A provider slug that a connect accepts. A component of its own whose values the document
/// takes from the running service ([`ServiceFacts`]): embedders add providers.
pub(crate) struct ConnectableProviderSlug;

/// Without a service, any slug a connect reads (the providers are unknown).
impl utoipa::PartialSchema for ConnectableProviderSlug {
    fn schema() -> RefOr<Schema> {
        text(1, crate::api::providers::MAX_PROVIDER_SLUG_CHARS, false)
            .description(Some(
                "The slug of a provider the server connects through OAuth.",
            ))
            .examples(["schwab"])
            .into()
    }
}

impl utoipa::ToSchema for ConnectableProviderSlug {}

/// [`ConnectableProviderSlug`]'s schema: one of `slugs` (the offered providers that connect
/// through OAuth; the file import provider and unknown slugs are refused).
pub(crate) fn connectable_provider_slug(slugs: &[String]) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(slugs.iter().cloned()))
        .description(Some(
            "The slug of a provider this server connects through OAuth.",
        ))
        .into()
}

/// `string` or, when `nullable`, `string | null`.
fn string_type(nullable: bool) -> SchemaType {
    if nullable {
        SchemaType::from_iter([Type::String, Type::Null])
    } else {
        SchemaType::Type(Type::String)
    }
}

fn date_schema(nullable: bool, example: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(string_type(nullable))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date)))
        .pattern(Some(DATE_PATTERN))
        .description(Some("A day (`YYYY-MM-DD`) from 1900-01-01 to 2200-12-31."))
        .examples([example])
}

/// A day (`YYYY-MM-DD`) within the accepted years.
pub(crate) fn date() -> ObjectBuilder {
    date_schema(false, "2026-01-01")
}

/// A day within the accepted years, or `null` (a body field that may be left out).
pub(crate) fn nullable_date() -> ObjectBuilder {
    date_schema(true, "2026-01-01")
}

/// An instant of a query: a day, or an RFC 3339 date-time, within the accepted years.
pub(crate) fn instant() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(INSTANT_PATTERN))
        .description(Some(
            "An RFC 3339 date-time (`2026-01-01T12:00:00Z`) or a day (`YYYY-MM-DD`), from \
             1900-01-01 to 2200-12-31 in UTC.",
        ))
        .examples(["2026-01-01"])
}

/// A UUID in its hyphenated form, any case (JSON Schema leaves `format` unchecked by default).
pub(crate) const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

fn uuid_schema(nullable: bool) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(string_type(nullable))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
        .pattern(Some(UUID_PATTERN))
}

/// A UUID.
pub(crate) fn uuid() -> ObjectBuilder {
    uuid_schema(false)
}

/// A UUID, or `null` (a body field that may be left out).
pub(crate) fn nullable_uuid() -> ObjectBuilder {
    uuid_schema(true)
}

/// A new password: [`password_pattern`], and not one of the most common passwords (which no
/// pattern states; 422 `too_common`).
pub(crate) fn new_password() -> ObjectBuilder {
    use crate::auth::password::{MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Password)))
        .min_length(Some(MIN_PASSWORD_CHARS))
        .max_length(Some(MAX_PASSWORD_CHARS))
        .pattern(Some(password_pattern()))
        .description(Some(format!(
            "{MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters with an upper-case letter, \
             a lower-case letter, a digit and a character that is neither letter nor digit \
             (Unicode general categories `Lu`, `Ll`, `N`, and neither `L` nor `N`); not one of \
             the 10,000 most common passwords."
        )))
        .examples(["correct Horse battery 9staple"])
}

/// `true` and nothing else: a switch the client may only turn on (the service turns it off).
pub(crate) fn only_true() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Boolean)
        .enum_values(Some([true]))
        .examples([true])
}

/// The `Content-Disposition` of an upload's `file` part: a form-data part named `file`, with
/// or without a file name.
pub(crate) fn upload_disposition() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(
            "^form-data; name=\"file\"(?:; filename=\"[^\"]*\")?$".to_owned(),
        ))
        .examples(["form-data; name=\"file\"; filename=\"statement.ofx\""])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `value` matches `pattern` (no lookaheads: the `regex` crate has none; the
    /// password pattern's classes are checked against the rule in `auth::password`).
    fn matches(pattern: &str, value: &str) -> bool {
        regex::Regex::new(pattern)
            .expect("pattern compiles")
            .is_match(value)
    }

    #[test]
    fn password_pattern_spells_the_rule() {
        assert_eq!(
            password_pattern(),
            r"^(?=[\s\S]*\p{Lu})(?=[\s\S]*\p{Ll})(?=[\s\S]*\p{N})(?=[\s\S]*[^\p{L}\p{N}])[\s\S]{8,128}$"
        );
    }

    #[test]
    fn date_pattern_is_the_accepted_calendar() {
        for day in [
            "1900-01-01",
            "2200-12-31",
            "2024-02-29",
            "2000-02-29",
            "1904-02-29",
            "2196-02-29",
            "2023-04-30",
            "2023-12-31",
        ] {
            assert!(matches(DATE_PATTERN, day), "{day}");
            assert!(matches(INSTANT_PATTERN, day), "{day}");
        }
        for day in [
            "",
            "0213-10-02",
            "1899-12-31",
            "2201-01-01",
            "1900-02-29",
            "2100-02-29",
            "2200-02-29",
            "2023-02-29",
            "2023-04-31",
            "2023-13-01",
            "2023-00-10",
            "2023-1-5",
            " 2023-01-05",
        ] {
            assert!(!matches(DATE_PATTERN, day), "{day}");
        }
        assert!(matches(INSTANT_PATTERN, "2026-01-01T12:30:00Z"));
        assert!(matches(INSTANT_PATTERN, "2026-01-01T12:30:00.123456+02:00"));
        assert!(matches(INSTANT_PATTERN, "2026-01-01t12:30:00z"));
        assert!(!matches(INSTANT_PATTERN, "2026-01-01T24:00:00Z"));
        assert!(!matches(INSTANT_PATTERN, "2026-01-01T12:30:00"));
    }

    #[test]
    fn upload_disposition_names_the_file_part() {
        let schema = serde_json::to_value(upload_disposition().build()).expect("serializes");
        let pattern = schema["pattern"].as_str().expect("pattern");
        for accepted in [
            "form-data; name=\"file\"; filename=\"statement.OFX\"",
            "form-data; name=\"file\"; filename=\"export\"",
            "form-data; name=\"file\"",
            schema["examples"][0].as_str().expect("example"),
        ] {
            assert!(matches(pattern, accepted), "{accepted}");
        }
        assert!(!matches(
            pattern,
            "form-data; name=\"mapping\"; filename=\"a.ofx\""
        ));
    }
}
