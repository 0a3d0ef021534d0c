//! OpenAPI `links`: from the answers that carry a resource's id (a creation, a listing) to the
//! operations that take such an id in their path. Derived from the route rows and their answer
//! schemas, so that a new row is linked without being named here:
//!
//! - an operation `{collection}/{id}...` takes the ids of the resource `GET {collection}/{id}`
//!   answers with (`AccountJson` for `/api/v1/accounts/{id}`);
//! - an answer links to it when its body, or the first item of one of its arrays, is that
//!   resource or comes from `{collection}` itself (`POST /api/v1/webhooks`), and has the
//!   property named like the path parameter.

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::openapi::RefOr;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::response::Response;

use super::describe::OperationDoc;
use super::operation_id;
use crate::api::routes::Route;

/// Where component schemas are referenced from.
const SCHEMA_PREFIX: &str = "#/components/schemas/";

/// An operation that takes an id in its path.
struct Target {
    /// The path before the id segment (`/api/v1/accounts`).
    collection: String,
    /// The path parameter (`id`), also the answers' property carrying the id.
    parameter: String,
    /// The component `GET {collection}/{parameter}` answers with, when that operation exists.
    resource: Option<String>,
    operation_id: String,
}

/// The links of every operation, worked out once from all of them.
pub(super) struct Links {
    targets: Vec<Target>,
    /// Every component schema the operations register, as JSON.
    schemas: BTreeMap<String, Value>,
}

/// The component a JSON answer's body is.
fn json_body(response: &Response) -> Option<&str> {
    let RefOr::T(content) = response.content.get("application/json")? else {
        return None;
    };
    match content.schema.as_ref()? {
        RefOr::Ref(reference) => reference.ref_location.strip_prefix(SCHEMA_PREFIX),
        RefOr::T(_) => None,
    }
}

/// The path before the first parameter segment and that parameter's name.
fn split_template(template: &str) -> Option<(&str, &str)> {
    let start = template.find("/{")?;
    let rest = &template[start + 2..];
    let end = rest.find('}')?;
    Some((&template[..start], &rest[..end]))
}

impl Links {
    /// The targets and schemas of `described`, every operation with what it documents.
    pub(super) fn new(described: &[(&Route, OperationDoc)]) -> Self {
        let mut schemas = BTreeMap::new();
        for (_, doc) in described {
            for (name, schema) in &doc.schemas {
                if let Ok(schema) = serde_json::to_value(schema) {
                    schemas.entry(name.clone()).or_insert(schema);
                }
            }
        }
        let targets = described
            .iter()
            .filter_map(|(route, _)| {
                let (collection, parameter) = split_template(route.template())?;
                let item = format!("{collection}/{{{parameter}}}");
                let resource = described
                    .iter()
                    .find(|(other, _)| {
                        other.method() == http::Method::GET && other.template() == item
                    })
                    .and_then(|(_, doc)| doc.responses.get(&200))
                    .and_then(json_body)
                    .map(str::to_owned);
                Some(Target {
                    collection: collection.to_owned(),
                    parameter: parameter.to_owned(),
                    resource,
                    operation_id: operation_id(route.method(), route.template()),
                })
            })
            .collect();
        Self { targets, schemas }
    }

    /// Whether the component `name` has the property `property`.
    fn has_property(&self, name: &str, property: &str) -> bool {
        self.schemas
            .get(name)
            .and_then(|schema| schema["properties"].get(property))
            .is_some()
    }

    /// The `(array property, item component)` pairs of the component `name`.
    fn arrays_of(&self, name: &str) -> Vec<(String, String)> {
        let Some(Value::Object(properties)) = self.schemas.get(name).map(|s| &s["properties"])
        else {
            return Vec::new();
        };
        properties
            .iter()
            .filter_map(|(property, schema)| {
                let item = schema["items"]["$ref"]
                    .as_str()?
                    .strip_prefix(SCHEMA_PREFIX)?;
                Some((property.clone(), item.to_owned()))
            })
            .collect()
    }

    /// Where in a `body` answer of `template` the id of `target` is, if anywhere.
    fn id_in(&self, template: &str, body: &str, target: &Target) -> Option<String> {
        let of_collection = template == target.collection;
        let is_resource = |name: &str| target.resource.as_deref() == Some(name);
        if (of_collection || is_resource(body)) && self.has_property(body, &target.parameter) {
            return Some(format!("$response.body#/{}", target.parameter));
        }
        self.arrays_of(body)
            .into_iter()
            .find(|(_, item)| {
                (of_collection || is_resource(item)) && self.has_property(item, &target.parameter)
            })
            .map(|(array, _)| format!("$response.body#/{array}/0/{}", target.parameter))
    }

    /// Adds to the success answers of `route` the links to every operation taking an id they
    /// carry. An operation under a collection's item path does not link into that collection
    /// (its id is already in the path).
    pub(super) fn add_to(&self, route: &Route, doc: &mut OperationDoc) {
        let template = route.template();
        for (status, response) in &mut doc.responses {
            if !(200..300).contains(status) {
                continue;
            }
            let Some(body) = json_body(response).map(str::to_owned) else {
                continue;
            };
            for target in &self.targets {
                if template.starts_with(&format!("{}/{{", target.collection)) {
                    continue;
                }
                let Some(expression) = self.id_in(template, &body, target) else {
                    continue;
                };
                let link = LinkBuilder::new()
                    .operation_id(target.operation_id.clone())
                    .parameter(format!("path.{}", target.parameter), expression)
                    .build();
                response
                    .links
                    .insert(target.operation_id.clone(), RefOr::T(link));
            }
        }
    }
}
