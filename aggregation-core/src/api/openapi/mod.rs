//! The OpenAPI 3.1 document of the API, generated from the route rows: each row's handler
//! arguments (extractors) give its security, parameters, request body and the problems they
//! answer; the row's response list gives its answers per status; the rate limit gives 429 and
//! the `X-RateLimit-*` headers. Apart from the document's own path, nothing here names an
//! endpoint.
//!
//! `describe.rs`: what handler arguments and route rows document; `serve.rs`: the endpoint
//! serving the document.

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr, ServerBuilder,
};
use utoipa::{PartialSchema as _, ToSchema};

use super::routes;
use super::routes::Route;
use crate::problem::{ErrorCode, PROBLEM_CONTENT_TYPE, ProblemBody};

mod describe;
mod links;
pub(crate) mod schemas;
mod serve;

pub(crate) use describe::{DescribeArg, OperationDoc, describe_handler};
pub(crate) use serve::{Published, ROUTES};

/// Where the document is served; the one endpoint that never reads the store.
pub(crate) const DOCUMENT_PATH: &str = "/api/v1/openapi.json";

/// The name of the bearer security scheme.
const BEARER: &str = "bearer";

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

/// The document of every route row, its server at `base_url`, with the `facts` of a service
/// when there is one (without, the fields they constrain are documented more loosely).
pub(crate) fn document(base_url: &str, facts: Option<&schemas::ServiceFacts<'_>>) -> OpenApi {
    let mut paths = Paths::new();
    let mut schemas: Vec<(String, RefOr<Schema>)> = Vec::new();
    let described: Vec<(&Route, OperationDoc)> = routes()
        .map(|route| {
            let mut doc = OperationDoc::default();
            (route.describe())(&mut doc);
            (route, doc)
        })
        .collect();
    let links = links::Links::new(&described);
    for (route, mut doc) in described {
        let Some(method) = http_method(route.method()) else {
            continue;
        };
        links.add_to(route, &mut doc);
        // As built: a policy that is off by default (the health checks') documents no 429.
        let rate_limited = route.rate_limit().is_some_and(|limit| limit.policy.enabled);
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
    // The placeholders of the derives give way to the service's own values.
    if let Some(facts) = facts {
        let components = facts.components();
        schemas.retain(|(name, _)| components.iter().all(|(fact, _)| fact != name));
        schemas.extend(components);
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
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn document_json() -> serde_json::Value {
        serde_json::to_value(document(
            "https://api.example.com",
            Some(&schemas::ServiceFacts {
                connectable_providers: &["schwab".to_owned()],
                redirect_uris: &["https://app.example.com/connected".to_owned()],
            }),
        ))
        .expect("document serializes")
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

    /// No two Rust types register the same component name, and every component name stands
    /// for one schema (a nested type registered under another's name would replace it).
    #[test]
    fn component_names_are_unique() {
        let mut types: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        let mut shapes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for route in routes() {
            let mut doc = OperationDoc::default();
            (route.describe())(&mut doc);
            for (name, rust_type) in doc.schema_types {
                types.entry(name).or_default().insert(rust_type);
            }
            for (name, schema) in doc.schemas {
                let shape = serde_json::to_string(&schema).expect("schema serializes");
                shapes.entry(name).or_default().insert(shape);
            }
        }
        assert!(types.len() > 10 && shapes.len() >= types.len());
        let collisions: Vec<String> = types
            .iter()
            .filter(|(_, rust_types)| rust_types.len() > 1)
            .map(|(name, rust_types)| format!("{name}: {rust_types:?}"))
            .chain(
                shapes
                    .iter()
                    .filter(|(_, shapes)| shapes.len() > 1)
                    .map(|(name, shapes)| format!("{name}: {} shapes", shapes.len())),
            )
            .collect();
        assert!(
            collisions.is_empty(),
            "component name collisions: {collisions:?}"
        );
    }

    /// Creations and listings link to the operations taking the ids they answer with.
    #[test]
    fn answers_link_to_the_operations_taking_their_ids() {
        let document = document_json();
        let links = |path: &str, method: &str, status: &str| -> BTreeMap<String, String> {
            document["paths"][path][method]["responses"][status]["links"]
                .as_object()
                .map(|links| {
                    links
                        .iter()
                        .map(|(name, link)| {
                            assert_eq!(link["operationId"], name.as_str());
                            let (_, expression) = link["parameters"]
                                .as_object()
                                .and_then(|parameters| parameters.iter().next())
                                .expect("a parameter");
                            (name.clone(), expression.as_str().unwrap_or("").to_owned())
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let created = links("/api/v1/webhooks", "post", "201");
        assert_eq!(created["get_api_v1_webhooks_id"], "$response.body#/id");
        assert_eq!(created["delete_api_v1_webhooks_id"], "$response.body#/id");
        let listed = links("/api/v1/accounts", "get", "200");
        for target in [
            "get_api_v1_accounts_id",
            "get_api_v1_accounts_id_transactions",
            "get_api_v1_accounts_id_holdings",
        ] {
            assert_eq!(listed[target], "$response.body#/accounts/0/id", "{target}");
        }
        assert!(!listed.contains_key("get_api_v1_transactions_id"));
        let transactions = links("/api/v1/accounts/{id}/transactions", "get", "200");
        assert_eq!(
            transactions["get_api_v1_transactions_id"],
            "$response.body#/transactions/0/id"
        );
        assert!(!transactions.contains_key("get_api_v1_accounts_id"));
        let sessions = links("/api/v1/sessions", "get", "200");
        assert_eq!(
            sessions["delete_api_v1_sessions_id"],
            "$response.body#/sessions/0/id"
        );
        let connections = links("/api/v1/providers", "get", "200");
        assert_eq!(
            connections["get_api_v1_providers_id"],
            "$response.body#/connections/0/id"
        );
        let connected = links("/api/v1/providers/callback", "post", "201");
        assert_eq!(
            connected["delete_api_v1_providers_id"],
            "$response.body#/id"
        );
        for (name, link) in document["paths"]
            .as_object()
            .expect("paths")
            .values()
            .flat_map(|item| item.as_object().expect("path item").values())
            .flat_map(|operation| operation["responses"].as_object().into_iter().flatten())
            .flat_map(|(_, response)| response["links"].as_object().into_iter().flatten())
        {
            assert!(
                document["paths"]
                    .as_object()
                    .expect("paths")
                    .values()
                    .flat_map(|item| item.as_object().expect("path item").values())
                    .any(|operation| operation["operationId"] == link["operationId"]),
                "link {name} names no operation"
            );
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
