//! The providers a user may connect, and the institutions of those that need one picked:
//! `GET /api/v1/supported-providers` and `GET /api/v1/supported-providers/{slug}/institutions`.
//!
//! A provider is listed with how it connects (`oauth`: `POST /providers` answers an
//! authorization address and the callback finishes; `setup_token`: one `POST /providers` with
//! the user's setup token finishes). Institutions are cached by the service for an hour per
//! provider and country.

use http::StatusCode;
use serde::{Deserialize, Serialize};

use super::extract::{PathSlug, Query, User};
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, ParameterSchema, Validate, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::ApiError;
use crate::providers::{ConnectMethod, Institution};
use crate::rate_limit::policy::API_READ;

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/supported-providers" => list, limited(API_READ),
        "List the providers this server connects, and how", [200: SupportedProviderList]),
    route!(GET "/api/v1/supported-providers/{slug}/institutions" => institutions, limited(API_READ),
        "List the institutions of a provider that needs one picked", [200: InstitutionList; ProviderError]),
];

/// Longest search text of an institutions list.
const MAX_SEARCH_CHARS: usize = 100;

/// One provider as listed.
#[derive(Serialize, utoipa::ToSchema)]
struct SupportedProviderJson {
    slug: String,
    name: String,
    connect: ConnectMethod,
    countries: Vec<String>,
    needs_institution: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
struct SupportedProviderList {
    providers: Vec<SupportedProviderJson>,
}

/// `GET /api/v1/supported-providers`
async fn list(state: &App, User(_): User) -> ApiResult {
    let providers = state
        .connections
        .supported()
        .into_iter()
        .map(|provider| SupportedProviderJson {
            slug: provider.slug,
            name: provider.name,
            connect: provider.connect,
            countries: provider.countries,
            needs_institution: provider.needs_institution,
        })
        .collect();
    json(StatusCode::OK, &SupportedProviderList { providers })
}

/// A country code as the institutions list takes it: two letters, any case.
const COUNTRY_PATTERN: &str = "^[A-Za-z]{2}$";

/// `?country=XX&q=text` of an institutions list.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct InstitutionsQuery {
    /// ISO 3166-1 alpha-2 country code (any case).
    #[param(value_type = String, required = true)]
    country: Option<String>,
    /// Only institutions whose name contains this text (any case).
    #[param(value_type = Option<String>)]
    q: Option<String>,
}

impl Validate for InstitutionsQuery {
    type Valid = (String, Option<String>);

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] = &[("country", || {
        super::openapi::schemas::text(2, 2, false).pattern(Some(COUNTRY_PATTERN))
    })];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let country = match query::string(self.country) {
            Some(code) if code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()) => {
                Ok(code.to_ascii_uppercase())
            }
            Some(_) => Err(query::error(
                "country",
                "invalid_country",
                "Must be a two-letter ISO 3166-1 country code.",
            )),
            None => Err(query::error(
                "country",
                "required",
                "This query parameter is required.",
            )),
        };
        let search = match query::string(self.q) {
            Some(text) if text.chars().count() > MAX_SEARCH_CHARS => Err(query::error(
                "q",
                "too_long",
                format!("Must be at most {MAX_SEARCH_CHARS} characters long."),
            )),
            other => Ok(other),
        };
        (country, search).all_valid()
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct InstitutionList {
    institutions: Vec<Institution>,
    total_count: usize,
}

/// `GET /api/v1/supported-providers/{slug}/institutions`
async fn institutions(
    state: &App,
    User(_): User,
    PathSlug(slug): PathSlug,
    Query((country, search)): Query<InstitutionsQuery>,
) -> ApiResult {
    let all = state.connections.institutions(&slug, &country).await?;
    let search = search.map(|text| text.to_lowercase());
    let institutions: Vec<Institution> = all
        .iter()
        .filter(|institution| {
            search
                .as_deref()
                .is_none_or(|text| institution.name.to_lowercase().contains(text))
        })
        .cloned()
        .collect();
    json(
        StatusCode::OK,
        &InstitutionList {
            total_count: institutions.len(),
            institutions,
        },
    )
}
