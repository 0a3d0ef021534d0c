//! Categories: `GET /api/v1/categories` lists the taxonomy's detailed categories (Plaid's
//! personal-finance-category names) and the caller's own; `POST` creates one of the caller's
//! own under a primary category (id `custom:<uuid>`; at most 500 a user); `DELETE
//! /api/v1/categories/{id}` deletes one, its transactions back to uncategorised. Taxonomy
//! categories cannot be deleted (404).

use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::ObjectBuilder;

use super::extract::{Json, PathCategoryId, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, Field, Validate, body};
use super::{ApiResult, json, no_content};
use crate::app::App;
use crate::config::Config;
use crate::enrich::taxonomy;
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::rate_limit::policy::{API_READ, API_WRITE};
use crate::records::categories::{CategoryEntry, CategoryError};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/categories" => list, limited(API_READ),
        "List the categories: the taxonomy's detailed categories, then the caller's own",
        [200: CategoryList]),
    route!(POST "/api/v1/categories" => create, limited(API_WRITE),
        "Create a category of the caller's own under a primary category of the taxonomy",
        [201: CategoryJson; CommandValidationFailed]),
    route!(DELETE "/api/v1/categories/{id}" => delete, limited(API_WRITE),
        "Delete one of the caller's own categories; its transactions become uncategorised",
        [204]),
];

/// The longest name of a category of the user's own, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 100;

impl From<CategoryError> for ApiError {
    fn from(error: CategoryError) -> Self {
        let detail = error.to_string();
        match error {
            CategoryError::NotFound | CategoryError::TransactionNotFound => {
                ApiError::new(ErrorCode::NotFound, detail)
            }
            CategoryError::UnknownCategory => ApiError::validation(vec![FieldError::new(
                "category",
                "unknown_category",
                detail,
            )]),
            CategoryError::TooMany => ApiError::new(ErrorCode::CommandValidationFailed, detail),
            CategoryError::Store(store) => store.into(),
        }
    }
}

/// A category as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "FOOD_AND_DRINK_COFFEE", "primary": "FOOD_AND_DRINK", "name": "Coffee", "is_custom": false}))]
pub(crate) struct CategoryJson {
    /// A taxonomy detailed id (`FOOD_AND_DRINK_COFFEE`) or `custom:<uuid>`.
    id: String,
    /// Its primary category (`FOOD_AND_DRINK`).
    primary: String,
    /// Its name.
    name: String,
    /// Whether it is one of the caller's own.
    is_custom: bool,
}

pub(crate) fn category_json(entry: CategoryEntry) -> CategoryJson {
    CategoryJson {
        id: entry.id,
        primary: entry.primary,
        name: entry.name,
        is_custom: entry.is_custom,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct CategoryList {
    categories: Vec<CategoryJson>,
}

/// `{name, primary}` of a new category.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct CategoryBody {
    /// Its name: 1 to 100 characters, not only spaces.
    #[schema(required = true, schema_with = name_schema)]
    name: Field,
    /// The taxonomy's primary category it sits under (`FOOD_AND_DRINK`).
    #[schema(required = true, schema_with = primary_schema)]
    primary: Field,
}

fn name_schema() -> ObjectBuilder {
    schemas::with_example(
        schemas::text(1, MAX_NAME_CHARS, false).pattern(Some(r"\S")),
        "Team lunches",
    )
}

fn primary_schema() -> ObjectBuilder {
    let ids: Vec<&str> = taxonomy::primaries().map(|primary| primary.id).collect();
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(ids))
}

/// What a creation asks for.
pub(crate) struct NewCategory {
    name: String,
    primary: String,
}

fn name(field: Field) -> Result<String, FieldError> {
    let name = body::string("name", field, 1, MAX_NAME_CHARS)?;
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new("name", "blank", "Must not be only spaces."));
    }
    Ok(trimmed.to_owned())
}

fn primary(field: Field) -> Result<String, FieldError> {
    let primary = body::string("primary", field, 1, 64)?;
    match taxonomy::primary(&primary) {
        Some(known) => Ok(known.id.to_owned()),
        None => Err(FieldError::new(
            "primary",
            "unknown_category",
            "Must be a primary category of the taxonomy (the `primary` of GET /api/v1/categories).",
        )),
    }
}

impl Validate for CategoryBody {
    type Valid = NewCategory;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (name, primary) = (name(self.name), primary(self.primary)).all_valid()?;
        Ok(NewCategory { name, primary })
    }
}

/// `GET /api/v1/categories`
async fn list(state: &App, User(claims): User) -> ApiResult {
    let categories = state.records.categories(claims.sub).await?;
    json(
        StatusCode::OK,
        &CategoryList {
            categories: categories.into_iter().map(category_json).collect(),
        },
    )
}

/// `POST /api/v1/categories`
async fn create(
    state: &App,
    User(claims): User,
    Json(NewCategory { name, primary }): Json<CategoryBody>,
) -> ApiResult {
    let created = state
        .records
        .create_category(claims.sub, name, primary)
        .await?;
    json(StatusCode::CREATED, &category_json(created))
}

/// `DELETE /api/v1/categories/{id}`
async fn delete(state: &App, User(claims): User, PathCategoryId(id): PathCategoryId) -> ApiResult {
    state.records.delete_category(claims.sub, &id).await?;
    no_content()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_trimmed_and_blank_ones_refused() {
        let value = |text: &str| Field::Value(serde_json::Value::String(text.to_owned()));
        assert_eq!(name(value("  Lunch ")).ok().as_deref(), Some("Lunch"));
        assert_eq!(
            name(value("   ")).err().map(|error| error.code),
            Some("blank")
        );
        let long = "x".repeat(MAX_NAME_CHARS + 1);
        assert_eq!(
            name(value(&long)).err().map(|error| error.code),
            Some("too_long")
        );
        assert_eq!(
            primary(value("FOOD_AND_DRINK")).ok().as_deref(),
            Some("FOOD_AND_DRINK")
        );
        assert_eq!(
            primary(value("FOOD")).err().map(|error| error.code),
            Some("unknown_category")
        );
    }
}
