//! `GET /api/v1/openapi.json`: the document, built once per service, with a strong `ETag`.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, StatusCode, header};
use sha2::{Digest as _, Sha256};
use utoipa::ToSchema;
use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{RefOr, Required};

use super::describe::{DescribeArg, OperationDoc};
use super::document;
use super::schemas::ServiceFacts;
use crate::api::handler::FromParts;
use crate::api::router::ApiState;
use crate::api::routes::{Route, limited, route};
use crate::api::{ApiResult, ResponseBody};
use crate::app::App;
use crate::problem::ApiError;
use crate::rate_limit::policy::PUBLIC_READ;

pub(crate) const ROUTES: &[Route] = &[route!(GET "/api/v1/openapi.json" => serve,
    limited(PUBLIC_READ), "This API's OpenAPI 3.1 document", [200: OpenApiDocument, 304])];

/// The document as served: built once per service, with its strong validator.
pub(crate) struct Published {
    json: Bytes,
    etag: HeaderValue,
}

impl Published {
    fn new(base_url: &str, facts: &ServiceFacts<'_>) -> Result<Self, ApiError> {
        let json = serde_json::to_vec(&document(base_url, Some(facts))).map_err(|error| {
            tracing::error!(error = %error, "OpenAPI document serialization failed");
            ApiError::internal()
        })?;
        let digest = Sha256::digest(&json);
        let etag = HeaderValue::try_from(format!("\"{}\"", hex::encode(&digest[..16])))
            .map_err(|_| ApiError::internal())?;
        Ok(Self {
            json: Bytes::from(json),
            etag,
        })
    }

    /// Whether an `If-None-Match` value names this document (weak comparison, RFC 9110).
    fn matches(&self, if_none_match: &str) -> bool {
        let ours = self.etag.as_bytes();
        if_none_match
            .split(',')
            .map(str::trim)
            .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).as_bytes() == ours)
    }
}

/// Revalidate every time: a 304 is cheap, and a new release is never served stale.
const CACHE_CONTROL: &str = "public, no-cache";

/// The `If-None-Match` request header, when present.
pub(crate) struct IfNoneMatch(Option<String>);

impl FromParts for IfNoneMatch {
    async fn from_parts(parts: &Parts, _: &App) -> Result<Self, ApiError> {
        let values: Vec<&str> = parts
            .headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        Ok(Self((!values.is_empty()).then(|| values.join(","))))
    }
}

impl DescribeArg for IfNoneMatch {
    fn describe(doc: &mut OperationDoc) {
        doc.parameters.push(
            ParameterBuilder::new()
                .name("If-None-Match")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "An `ETag` of an earlier answer: 304 while it is current.",
                ))
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build(),
        );
    }
}

/// `GET /api/v1/openapi.json`
async fn serve(state: &App, api: ApiState, IfNoneMatch(if_none_match): IfNoneMatch) -> ApiResult {
    let published = match api.openapi().get() {
        Some(published) => published,
        None => {
            let facts = ServiceFacts {
                connectable_providers: &state.connections.oauth_slugs(),
                redirect_uris: state.config.oauth_redirect_uris(),
            };
            let built = Published::new(state.config.base_url(), &facts)?;
            api.openapi().get_or_init(|| built)
        }
    };
    let not_modified = if_none_match.is_some_and(|value| published.matches(&value));
    let response = http::Response::builder()
        .header(header::ETAG, published.etag.clone())
        .header(header::CACHE_CONTROL, CACHE_CONTROL);
    let response = if not_modified {
        response
            .status(StatusCode::NOT_MODIFIED)
            .body(ResponseBody::empty())
    } else {
        response
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(ResponseBody::full(published.json.clone()))
    };
    response.map_err(|_| ApiError::internal())
}

/// The schema of the document itself (an OpenAPI 3.1 object).
pub(crate) struct OpenApiDocument;

impl utoipa::PartialSchema for OpenApiDocument {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .property("openapi", ObjectBuilder::new().schema_type(Type::String))
            .required("openapi")
            .property("info", ObjectBuilder::new().schema_type(Type::Object))
            .required("info")
            .property("paths", ObjectBuilder::new().schema_type(Type::Object))
            .description(Some("An OpenAPI 3.1 document."))
            .into()
    }
}

impl ToSchema for OpenApiDocument {}
