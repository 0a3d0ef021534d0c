//! What a route row documents of its operation: its handler's arguments (extractors) give the
//! security, parameters, request body and the problems they answer; the row adds its answers.

use std::collections::BTreeMap;

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::encoding::EncodingBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::{RequestBody, RequestBodyBuilder};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr, Required};
use utoipa::{IntoParams, ToSchema};

use super::status_description;
use crate::api::admin::Admin;
use crate::api::extract::{
    Caller, Json, JsonOrEmpty, PathCategoryId, PathId, PathSlug, PathUserId, Query, User,
};
use crate::api::handler::Handler;
use crate::api::imports::{MAX_ACCOUNT_NAME_CHARS, Upload};
use crate::api::providers::CallbackCaller;
use crate::api::validate::Validate;
use crate::auth::ClientInfo;
use crate::import::format::Format;
use crate::problem::ErrorCode;

/// What one route row documents of its operation, filled by its extractors and its responses.
#[derive(Default)]
pub(crate) struct OperationDoc {
    pub(super) parameters: Vec<Parameter>,
    pub(super) request_body: Option<RequestBody>,
    pub(super) responses: BTreeMap<u16, Response>,
    pub(super) errors: Vec<ErrorCode>,
    pub(super) secured: bool,
    pub(super) schemas: Vec<(String, RefOr<Schema>)>,
    /// The Rust type behind each component name this operation names itself.
    pub(super) schema_types: Vec<(String, &'static str)>,
}

impl OperationDoc {
    /// A reference to `T`'s schema, registering it (and the schemas it names) as components.
    fn schema_ref<T: ToSchema>(&mut self) -> RefOr<Schema> {
        let name = T::name().into_owned();
        self.schema_types
            .push((name.clone(), std::any::type_name::<T>()));
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
        self.content_response::<T>(status, "application/json");
    }

    /// An answer of another media type (`text/event-stream`), its body described by `T`.
    pub(crate) fn content_response<T: ToSchema>(&mut self, status: u16, media_type: &str) {
        let schema = self.schema_ref::<T>();
        let response = ResponseBuilder::new()
            .description(status_description(status))
            .content(
                media_type,
                ContentBuilder::new().schema(Some(schema)).build(),
            )
            .build();
        self.responses.insert(status, response);
    }

    /// An optional request header whose value has `schema` (one of [`super::schemas`]).
    pub(crate) fn optional_header(&mut self, name: &str, description: &str, schema: ObjectBuilder) {
        self.parameters.push(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(description))
                .schema(Some(schema))
                .build(),
        );
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
                .schema(Some(super::schemas::uuid()))
                .build(),
        );
        self.error(ErrorCode::ValidationFailed);
        self.error(ErrorCode::NotFound);
    }

    /// A JSON object body with `T`'s shape.
    pub(crate) fn json_body<T: ToSchema>(&mut self, required: bool) {
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

impl DescribeArg for PathSlug {
    fn describe(doc: &mut OperationDoc) {
        doc.parameters.push(
            ParameterBuilder::new()
                .name("slug")
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build(),
        );
        doc.error(ErrorCode::NotFound);
    }
}

impl DescribeArg for PathCategoryId {
    fn describe(doc: &mut OperationDoc) {
        doc.parameters.push(
            ParameterBuilder::new()
                .name("id")
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(Some("A category of the caller's own: `custom:<uuid>`."))
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build(),
        );
        doc.error(ErrorCode::NotFound);
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
            .extend(T::into_params(|| Some(ParameterIn::Query)).into_iter().map(
                |mut parameter| {
                    if T::REQUIRED_PARAMETERS.contains(&parameter.name.as_str()) {
                        parameter.required = Required::True;
                    }
                    if let Some((_, schema)) = T::PARAMETER_SCHEMAS
                        .iter()
                        .find(|(name, _)| *name == parameter.name)
                    {
                        parameter.schema = Some(schema().into());
                    }
                    parameter
                },
            ));
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
        let text = |description: &str| {
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some(description.to_owned()))
        };
        let codes: Vec<&str> = Format::ALL.iter().map(|format| format.as_str()).collect();
        let parts = ObjectBuilder::new()
            .property(
                "file",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .content_media_type("application/octet-stream")
                    .description(Some(
                        "The statement file: OFX, QFX, QIF, CSV, CAMT.052/053/054 or \
                         MT940/942. Its format is the `format` part's, else found from the \
                         content, else from the file name's extension (415 when none tells).",
                    )),
            )
            .required("file")
            .property(
                "format",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(codes))
                    .description(Some(
                        "The file's format, when detection should not decide (any case).",
                    )),
            )
            .property(
                "account_id",
                text(
                    "An existing account of the caller to import into (404 when it is \
                     unknown or another user's). With it, the file must hold one account.",
                )
                .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                    utoipa::openapi::KnownFormat::Uuid,
                ))),
            )
            .property(
                "account_name",
                text(
                    "The name of the account to create when the file names none (QIF, CSV). \
                     QIF and CSV need account_id or account_name (422).",
                )
                .min_length(Some(1))
                .max_length(Some(MAX_ACCOUNT_NAME_CHARS)),
            )
            .property(
                "currency",
                text("The currency of a new account when the file states none (default USD).")
                    .pattern(Some("^[A-Z]{3}$")),
            )
            .property(
                "mapping",
                text(
                    "CSV only (422 otherwise): a JSON object `{delimiter?, decimal?, \
                     thousands?, date_format?, encoding?, skip_rows?, columns: {date, amount \
                     | (debit, credit), description?, payee?, memo?, id?, balance?, \
                     currency?}, invert_sign?}`; columns by header name or 0-based index.",
                )
                .content_media_type("application/json"),
            )
            .property(
                "dry_run",
                ObjectBuilder::new()
                    .schema_type(Type::Boolean)
                    .description(Some(
                        "`true`: answer 200 with what would be created, updated and skipped; \
                         nothing is written and no event is raised.",
                    )),
            );
        let disposition = super::schemas::upload_disposition().build();
        let example = disposition.examples.first().cloned();
        let encoding = EncodingBuilder::new().header(
            "Content-Disposition",
            HeaderBuilder::new()
                .schema(Some(disposition))
                .example(example)
                .description(Some(
                    "The file name's extension decides the format only when neither the \
                     format part nor the content does (see GET /api/v1/imports/formats).",
                ))
                .build(),
        );
        let mapping_encoding = EncodingBuilder::new()
            .content_type(Some("application/json".to_owned()))
            .build();
        doc.request_body = Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content(
                    "multipart/form-data",
                    ContentBuilder::new()
                        .schema(Some(parts))
                        .encoding("file", encoding)
                        .encoding("mapping", mapping_encoding)
                        .build(),
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
