//! The OpenAPI 3.1 document of the API, generated from the route rows: each row's handler
//! arguments (extractors) give its security, parameters, request body and the problems they
//! answer; the row's response list gives its answers per status; the rate limit gives 429 and
//! the `X-RateLimit-*` headers. Nothing here names an endpoint.

use std::collections::BTreeMap;

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::{RequestBody, RequestBodyBuilder};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, InfoBuilder, KnownFormat, OpenApi, OpenApiBuilder, Paths, Ref, RefOr,
    Required, ServerBuilder,
};
use utoipa::{IntoParams, PartialSchema as _, ToSchema};

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, StatusCode, header};
use sha2::{Digest as _, Sha256};

use super::admin::Admin;
use super::extract::{Caller, Json, JsonOrEmpty, PathId, PathUserId, Query, User};
use super::handler::{FromParts, Handler};
use super::imports::Upload;
use super::providers::CallbackCaller;
use super::routes;
use super::routes::{Route, limited, route};
use super::validate::Validate;
use super::{ApiResult, ResponseBody};
use crate::app::App;
use crate::auth::ClientInfo;
use crate::problem::{ApiError, ErrorCode, PROBLEM_CONTENT_TYPE, ProblemBody};
use crate::rate_limit::policy::PUBLIC_READ;

/// Where the document is served; the one endpoint that never reads the store.
pub(crate) const DOCUMENT_PATH: &str = "/api/v1/openapi.json";

/// The name of the bearer security scheme.
const BEARER: &str = "bearer";

pub(crate) const ROUTES: &[Route] = &[route!(GET "/api/v1/openapi.json" => serve,
    limited(PUBLIC_READ), "This API's OpenAPI 3.1 document", [200: OpenApiDocument, 304])];

/// The document as served: built once per service, with its strong validator.
pub(crate) struct Published {
    json: Bytes,
    etag: HeaderValue,
}

impl Published {
    fn new(base_url: &str) -> Result<Self, ApiError> {
        let json = serde_json::to_vec(&document(base_url)).map_err(|error| {
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
async fn serve(state: &App, IfNoneMatch(if_none_match): IfNoneMatch) -> ApiResult {
    let published = match state.openapi.get() {
        Some(published) => published,
        None => {
            let built = Published::new(state.config.base_url())?;
            state.openapi.get_or_init(|| built)
        }
    };
    let not_modified = if_none_match.is_some_and(|value| published.matches(&value));
    let response = http::Response::builder()
        .header(header::ETAG, published.etag.clone())
        .header(header::CACHE_CONTROL, CACHE_CONTROL);
    let response = if not_modified {
        response
            .status(StatusCode::NOT_MODIFIED)
            .body(ResponseBody::new(Bytes::new()))
    } else {
        response
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(ResponseBody::new(published.json.clone()))
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

/// What one route row documents of its operation, filled by its extractors and its responses.
#[derive(Default)]
pub(crate) struct OperationDoc {
    parameters: Vec<Parameter>,
    request_body: Option<RequestBody>,
    responses: BTreeMap<u16, Response>,
    errors: Vec<ErrorCode>,
    secured: bool,
    schemas: Vec<(String, RefOr<Schema>)>,
}

impl OperationDoc {
    /// A reference to `T`'s schema, registering it (and the schemas it names) as components.
    fn schema_ref<T: ToSchema>(&mut self) -> RefOr<Schema> {
        let name = T::name().into_owned();
        self.schemas.push((name.clone(), T::schema()));
        T::schemas(&mut self.schemas);
        RefOr::Ref(Ref::from_schema_name(name))
    }

    /// The problem with this code is a possible answer.
    pub(crate) fn error(&mut self, code: ErrorCode) {
        if !self.errors.contains(&code) {
            self.errors.push(code);
        }
    }

    /// A JSON answer with `T`'s shape.
    pub(crate) fn json_response<T: ToSchema>(&mut self, status: u16) {
        let schema = self.schema_ref::<T>();
        let response = ResponseBuilder::new()
            .description(status_description(status))
            .content(
                "application/json",
                ContentBuilder::new().schema(Some(schema)).build(),
            )
            .build();
        self.responses.insert(status, response);
    }

    /// An answer without a body.
    pub(crate) fn empty_response(&mut self, status: u16) {
        self.responses
            .insert(status, Response::new(status_description(status)));
    }

    /// A required path parameter holding a UUID (422 otherwise, 404 when unknown or foreign).
    fn path_uuid(&mut self, name: &str) {
        self.parameters.push(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid))),
                ))
                .build(),
        );
        self.error(ErrorCode::ValidationFailed);
        self.error(ErrorCode::NotFound);
    }

    /// A JSON object body with `T`'s shape.
    fn json_body<T: ToSchema>(&mut self, required: bool) {
        let schema = self.schema_ref::<T>();
        // `#[serde(default)]` bodies hold absent fields as `Field::Absent`, which the schema
        // derive would publish as a `null` default: absent means absent, not null.
        let name = T::name();
        for (_, body) in self
            .schemas
            .iter_mut()
            .filter(|(schema, _)| *schema == name)
        {
            let RefOr::T(Schema::Object(body)) = body else {
                continue;
            };
            for property in body.properties.values_mut() {
                if let RefOr::T(Schema::Object(property)) = property
                    && property.default == Some(serde_json::Value::Null)
                {
                    property.default = None;
                }
            }
        }
        self.request_body = Some(
            RequestBodyBuilder::new()
                .required(Some(if required {
                    Required::True
                } else {
                    Required::False
                }))
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(schema)).build(),
                )
                .build(),
        );
        self.error(ErrorCode::PayloadTooLarge);
        self.error(ErrorCode::ValidationFailed);
    }

    fn bearer(&mut self) {
        self.secured = true;
        self.error(ErrorCode::Unauthorized);
    }
}

/// What a handler argument documents of its operation.
pub(crate) trait DescribeArg {
    /// Adds the argument's parameters, body, security and problems.
    fn describe(doc: &mut OperationDoc);
}

impl DescribeArg for User {
    fn describe(doc: &mut OperationDoc) {
        doc.bearer();
    }
}

impl DescribeArg for Admin {
    fn describe(doc: &mut OperationDoc) {
        doc.bearer();
        doc.error(ErrorCode::Forbidden);
    }
}

/// Anonymous callers are welcome; a token, when sent, must be valid.
impl DescribeArg for Caller {
    fn describe(doc: &mut OperationDoc) {
        doc.error(ErrorCode::Unauthorized);
    }
}

/// The token is required only when the server says so; documented as optional.
impl DescribeArg for CallbackCaller {
    fn describe(doc: &mut OperationDoc) {
        doc.error(ErrorCode::Unauthorized);
    }
}

impl DescribeArg for ClientInfo {
    fn describe(_: &mut OperationDoc) {}
}

impl DescribeArg for PathId {
    fn describe(doc: &mut OperationDoc) {
        doc.path_uuid("id");
    }
}

impl DescribeArg for PathUserId {
    fn describe(doc: &mut OperationDoc) {
        doc.path_uuid("user_id");
    }
}

impl<T: Validate + IntoParams> DescribeArg for Query<T> {
    fn describe(doc: &mut OperationDoc) {
        doc.parameters
            .extend(T::into_params(|| Some(ParameterIn::Query)));
        doc.error(ErrorCode::ValidationFailed);
    }
}

impl<T: Validate + ToSchema> DescribeArg for Json<T> {
    fn describe(doc: &mut OperationDoc) {
        doc.json_body::<T>(true);
    }
}

impl<T: Validate + ToSchema> DescribeArg for JsonOrEmpty<T> {
    fn describe(doc: &mut OperationDoc) {
        doc.json_body::<T>(false);
    }
}

impl DescribeArg for Upload {
    fn describe(doc: &mut OperationDoc) {
        let file = ObjectBuilder::new()
            .property(
                "file",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .content_media_type("application/octet-stream")
                    .description(Some("The OFX or QFX statement file (`.ofx`, `.qfx`).")),
            )
            .required("file");
        doc.request_body = Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content(
                    "multipart/form-data",
                    ContentBuilder::new().schema(Some(file)).build(),
                )
                .build(),
        );
        doc.error(ErrorCode::PayloadTooLarge);
        doc.error(ErrorCode::UnsupportedMediaType);
        doc.error(ErrorCode::ValidationFailed);
    }
}

/// A check whose failure the handler reports in its own time documents the same problems.
impl<T: DescribeArg> DescribeArg for Result<T, crate::problem::ApiError> {
    fn describe(doc: &mut OperationDoc) {
        T::describe(doc);
    }
}

/// The arguments of a handler, as [`Handler`] sees them.
pub(crate) trait DescribeArgs {
    /// Each argument in turn.
    fn describe(doc: &mut OperationDoc);
}

impl DescribeArgs for () {
    fn describe(_: &mut OperationDoc) {}
}

macro_rules! describe_args {
    ($($arg:ident),+) => {
        impl<Via, $($arg: DescribeArg),+> DescribeArgs for (Via, $($arg,)+) {
            fn describe(doc: &mut OperationDoc) {
                $($arg::describe(doc);)+
            }
        }
    };
}

describe_args!(T1);
describe_args!(T1, T2);
describe_args!(T1, T2, T3);
describe_args!(T1, T2, T3, T4);

/// Documents a handler from the types of its arguments (called by [`route!`](super::routes)).
pub(crate) fn describe_handler<'a, F, Args>(_: F, doc: &mut OperationDoc)
where
    F: Handler<'a, Args>,
    Args: DescribeArgs,
{
    Args::describe(doc);
}

fn status_description(status: u16) -> &'static str {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|status| status.canonical_reason())
        .unwrap_or("Response")
}

/// An integer response header.
fn integer_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        ))
        .description(Some(description))
        .build()
}

/// The `X-RateLimit-*` headers a limited endpoint answers with, whatever the status.
fn rate_limit_headers() -> [(&'static str, utoipa::openapi::header::Header); 3] {
    [
        (
            "X-RateLimit-Limit",
            integer_header("Requests the caller's bucket holds."),
        ),
        (
            "X-RateLimit-Remaining",
            integer_header("Requests left in the caller's bucket."),
        ),
        (
            "X-RateLimit-Reset",
            integer_header("Seconds until the bucket is full again."),
        ),
    ]
}

fn header_ref(name: &str) -> Ref {
    Ref::new(format!("#/components/headers/{name}"))
}

/// Every problem an operation may answer, once each under `#/components/responses`.
const DOCUMENTED_ERRORS: [ErrorCode; 12] = [
    ErrorCode::CommandValidationFailed,
    ErrorCode::Unauthorized,
    ErrorCode::Forbidden,
    ErrorCode::NotFound,
    ErrorCode::Conflict,
    ErrorCode::PayloadTooLarge,
    ErrorCode::UnsupportedMediaType,
    ErrorCode::ValidationFailed,
    ErrorCode::RateLimitExceeded,
    ErrorCode::CommandExecutionFailed,
    ErrorCode::ProviderError,
    ErrorCode::ServiceUnavailable,
];

/// The name of `code`'s answer under `#/components/responses`.
fn problem_ref(code: ErrorCode) -> Ref {
    Ref::new(format!("#/components/responses/{}", code.as_str()))
}

/// The problem answer of `code`: the `Problem` shape with this `type` and `status`.
fn problem_response(base_url: &str, code: ErrorCode) -> Response {
    let kind = format!(
        "{}/errors/{}",
        base_url.trim_end_matches('/'),
        code.as_str()
    );
    let mut specific = ObjectBuilder::new()
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some([kind.clone()])),
        )
        .property(
            "status",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .enum_values(Some([code.status().as_u16()])),
        )
        .property(
            "title",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some([code.title()])),
        );
    match code {
        ErrorCode::ValidationFailed => specific = specific.required("errors"),
        ErrorCode::RateLimitExceeded => specific = specific.required("retry_after"),
        _ => {}
    }
    let schema = AllOfBuilder::new()
        .item(Ref::from_schema_name(ProblemBody::name()))
        .item(specific);
    let example = serde_json::json!({
        "type": kind,
        "title": code.title(),
        "status": code.status().as_u16(),
        "detail": example_detail(code),
        "instance": "/api/v1/accounts",
        "trace_id": "0b7c5d1e9a3f4c2b8e6d1f0a9c8b7e6d",
    });
    let mut example = example;
    if code == ErrorCode::ValidationFailed {
        example["errors"] = serde_json::json!([
            {"field": "query.limit", "code": "out_of_range", "message": "Must be between 1 and 500."}
        ]);
    }
    if code == ErrorCode::RateLimitExceeded {
        example["retry_after"] = 12.into();
    }
    let mut response = ResponseBuilder::new().description(code.title()).content(
        PROBLEM_CONTENT_TYPE,
        ContentBuilder::new()
            .schema(Some(schema))
            .example(Some(example))
            .build(),
    );
    match code {
        ErrorCode::Unauthorized => {
            response = response.header(
                "WWW-Authenticate",
                HeaderBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                    .description(Some("`Bearer`"))
                    .build(),
            );
        }
        ErrorCode::RateLimitExceeded => {
            response = response.header(
                "Retry-After",
                integer_header("Seconds to wait before retrying."),
            );
        }
        _ => {}
    }
    for (name, _) in rate_limit_headers() {
        response = response.header_ref(name, header_ref(name));
    }
    response.build()
}

fn example_detail(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::ValidationFailed => "Must be between 1 and 500.",
        ErrorCode::Unauthorized => "A valid authorization token is required.",
        ErrorCode::RateLimitExceeded => "Too many requests. Try again in 12 seconds.",
        ErrorCode::ServiceUnavailable => {
            "The service is temporarily unavailable. Try again shortly."
        }
        _ => "What went wrong, for people.",
    }
}

fn http_method(method: &http::Method) -> Option<HttpMethod> {
    Some(match *method {
        http::Method::GET => HttpMethod::Get,
        http::Method::POST => HttpMethod::Post,
        http::Method::PUT => HttpMethod::Put,
        http::Method::PATCH => HttpMethod::Patch,
        http::Method::DELETE => HttpMethod::Delete,
        http::Method::HEAD => HttpMethod::Head,
        http::Method::OPTIONS => HttpMethod::Options,
        _ => return None,
    })
}

/// The operation id: the method and the template's segments (`get_api_v1_accounts_id`).
fn operation_id(method: &http::Method, template: &str) -> String {
    let mut id = method.as_str().to_ascii_lowercase();
    for segment in template.split('/').filter(|segment| !segment.is_empty()) {
        id.push('_');
        id.extend(
            segment
                .trim_matches(|c| c == '{' || c == '}')
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
        );
    }
    id
}

/// The document of every route row, its server at `base_url`.
pub(crate) fn document(base_url: &str) -> OpenApi {
    let mut paths = Paths::new();
    let mut schemas: Vec<(String, RefOr<Schema>)> = Vec::new();
    for route in routes() {
        let Some(method) = http_method(route.method()) else {
            continue;
        };
        let mut doc = OperationDoc::default();
        (route.describe())(&mut doc);
        let rate_limited = route.rate_limit().is_some();
        if rate_limited {
            doc.error(ErrorCode::RateLimitExceeded);
        }
        if route.template() != DOCUMENT_PATH {
            doc.error(ErrorCode::ServiceUnavailable);
        }
        let mut operation = OperationBuilder::new()
            .operation_id(Some(operation_id(route.method(), route.template())))
            .summary(Some(route.summary()))
            .tag(tag_of(route.template()))
            .parameters(Some(doc.parameters));
        if let Some(body) = doc.request_body {
            operation = operation.request_body(Some(body));
        }
        for (status, mut response) in doc.responses {
            if rate_limited {
                for (name, _) in rate_limit_headers() {
                    response
                        .headers
                        .insert(name.to_owned(), RefOr::Ref(header_ref(name)));
                }
            }
            operation = operation.response(status.to_string(), response);
        }
        let mut errors = doc.errors;
        errors.sort_by_key(|code| code.status().as_u16());
        for code in errors {
            operation = operation.response(code.status().as_u16().to_string(), problem_ref(code));
        }
        if doc.secured {
            operation = operation.security(SecurityRequirement::new(BEARER, Vec::<String>::new()));
        }
        let operation: Operation = operation.build();
        paths.add_path_operation(route.template(), vec![method], operation);
        schemas.extend(doc.schemas);
    }
    schemas.push((ProblemBody::name().into_owned(), ProblemBody::schema()));
    ProblemBody::schemas(&mut schemas);
    let mut components = ComponentsBuilder::new();
    for (name, header) in rate_limit_headers() {
        components = components.header(name, header);
    }
    for code in DOCUMENTED_ERRORS {
        components = components.response(code.as_str(), problem_response(base_url, code));
    }
    let components = components
        .schemas_from_iter(schemas)
        .security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "The access token of `POST /api/v1/sessions` or `POST /api/v1/tokens`.",
                    ))
                    .build(),
            ),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("aggregation")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "Financial account aggregation. Money and quantities are decimal strings, \
                     timestamps RFC 3339 in UTC with `Z`, dates `YYYY-MM-DD`; every failure is \
                     an RFC 9457 problem (`application/problem+json`).",
                ))
                .build(),
        )
        .servers(Some([ServerBuilder::new()
            .url(base_url.trim_end_matches('/'))
            .build()]))
        .paths(paths)
        .components(Some(components))
        .build()
}

/// The tag of an operation: its resource, the first segment after `/api/v1`.
fn tag_of(template: &str) -> String {
    template
        .trim_start_matches("/api/v1")
        .split('/')
        .find(|segment| !segment.is_empty())
        .unwrap_or("service")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn document_json() -> serde_json::Value {
        serde_json::to_value(document("https://api.example.com")).expect("document serializes")
    }

    /// Every route row is one documented operation, and every documented operation a row.
    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let document = document_json();
        let documented: BTreeSet<(String, String)> = document["paths"]
            .as_object()
            .expect("paths")
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .expect("path item")
                    .keys()
                    .filter(|key| {
                        ["get", "post", "put", "patch", "delete", "head", "options"]
                            .contains(&key.as_str())
                    })
                    .map(move |method| (method.to_uppercase(), path.clone()))
            })
            .collect();
        let routed: BTreeSet<(String, String)> = routes()
            .map(|route| (route.method().to_string(), route.template().to_owned()))
            .collect();
        assert_eq!(documented, routed);
        for (method, path) in &routed {
            let operation = &document["paths"][path][method.to_lowercase()];
            let responses = operation["responses"].as_object().expect("responses");
            assert!(
                responses.keys().any(|status| status.starts_with('2')),
                "{method} {path} documents no success answer"
            );
            for name in path
                .split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            {
                assert!(
                    operation["parameters"]
                        .as_array()
                        .expect("parameters")
                        .iter()
                        .any(|parameter| parameter["name"] == name && parameter["in"] == "path"),
                    "{method} {path} does not document its path parameter {name}"
                );
            }
        }
    }

    /// Every `$ref` names a component.
    #[test]
    fn every_reference_resolves() {
        let document = document_json();
        fn references(value: &serde_json::Value, found: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(map) => {
                    for (key, value) in map {
                        match (key.as_str(), value) {
                            ("$ref", serde_json::Value::String(target)) => {
                                found.push(target.clone());
                            }
                            _ => references(value, found),
                        }
                    }
                }
                serde_json::Value::Array(items) => {
                    items.iter().for_each(|item| references(item, found));
                }
                _ => {}
            }
        }
        let mut found = Vec::new();
        references(&document, &mut found);
        assert!(!found.is_empty());
        for target in found {
            let (kind, name) = target
                .strip_prefix("#/components/")
                .and_then(|rest| rest.split_once('/'))
                .unwrap_or_else(|| panic!("unexpected reference {target}"));
            assert!(
                document["components"][kind].get(name).is_some(),
                "{target} is not a component"
            );
        }
    }

    #[test]
    fn problems_carry_their_type_and_the_limited_ones_their_headers() {
        let document = document_json();
        assert_eq!(document["openapi"], "3.1.0");
        assert_eq!(document["servers"][0]["url"], "https://api.example.com");
        let login = &document["paths"]["/api/v1/sessions"]["post"]["responses"];
        assert_eq!(
            login["429"]["$ref"],
            "#/components/responses/rate_limit_exceeded"
        );
        let too_many = &document["components"]["responses"]["rate_limit_exceeded"];
        assert!(too_many["headers"].get("Retry-After").is_some());
        assert!(too_many["headers"].get("X-RateLimit-Limit").is_some());
        for code in DOCUMENTED_ERRORS {
            let problem = &document["components"]["responses"][code.as_str()];
            assert_eq!(
                problem["content"][PROBLEM_CONTENT_TYPE]["example"]["status"],
                code.status().as_u16()
            );
        }
        assert_eq!(
            too_many["content"][PROBLEM_CONTENT_TYPE]["schema"]["allOf"][1]["properties"]["type"]["enum"]
                [0],
            "https://api.example.com/errors/rate_limit_exceeded"
        );
        assert!(
            login["201"]["headers"]
                .get("X-RateLimit-Remaining")
                .is_some()
        );
        let accounts = &document["paths"]["/api/v1/accounts"]["get"];
        assert_eq!(accounts["security"][0][BEARER], serde_json::json!([]));
        assert!(accounts["responses"].get("401").is_some());
        assert!(
            document["paths"]["/health"]["get"]["responses"]
                .get("429")
                .is_none()
        );
    }
}
