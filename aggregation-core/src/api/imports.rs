//! File imports: the supported formats, the streamed multipart upload, and the import itself.
//!
//! `POST /api/v1/imports` checks the token (401) before reading the body, then streams the
//! `file` part (415 for another extension, 413 over the limit, 400 when empty, 422 when the
//! body is not multipart or has no `file` part), parses it off the async threads, maps it (see
//! `import::records`) and applies it in one store transaction. Files that do not parse, whose
//! sign-on failed or that hold no statement are 400 (`command_validation_failed`) with the
//! reason and, for a parse error, the line. The response names one `connection_id`: a file
//! has one sign-on, hence one institution; should a batch ever hold several, the first
//! institution's connection is the one named.

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{HeaderMap, StatusCode, header};
use serde::Serialize;

use super::extract::{User, header_str};
use super::handler::{FromRequest, ViaBody};
use super::routes::{Route, limited, route};
use super::{ApiResult, RequestBody, json};
use crate::app::App;
use crate::enums::string_enum;
use crate::import::OfxError;
use crate::import::records::Refusal;
use crate::import::statement::ImportError;
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::{API_WRITE, PUBLIC_READ};
use crate::store::ImportCounts;

pub(crate) const ROUTES: &[Route] = &[
    route!(POST "/api/v1/imports" => import, limited(API_WRITE),
        "Import an OFX or QFX statement file", [201: ImportJson; CommandValidationFailed]),
    route!(GET "/api/v1/imports/formats" => formats, limited(PUBLIC_READ),
        "The supported import formats", [200: FormatList]),
];

/// Room allowed for multipart framing (boundaries, part headers) on top of the file limit.
const MULTIPART_OVERHEAD: usize = 64 * 1024;

string_enum! {
    /// A supported import format.
    pub(crate) enum ImportFormat {
        /// Quicken Financial Exchange (`.qfx`).
        Qfx => "qfx",
        /// Open Financial Exchange (`.ofx`).
        Ofx => "ofx",
    }
}

impl ImportFormat {
    /// The format of a file name, by the extension after its last dot, case-insensitively.
    pub(crate) fn from_file_name(name: &str) -> Option<Self> {
        let (_, extension) = name.rsplit_once('.')?;
        Self::parse(&extension.to_ascii_lowercase())
    }

    fn name(self) -> &'static str {
        match self {
            Self::Qfx => "Quicken Financial Exchange",
            Self::Ofx => "Open Financial Exchange",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Self::Qfx => ".qfx",
            Self::Ofx => ".ofx",
        }
    }
}

/// The provider slug of file imports.
pub(crate) const FILE_IMPORT_SLUG: &str = crate::store::FILE_IMPORT_PROVIDER;

#[derive(Serialize, utoipa::ToSchema)]
struct FormatJson {
    format: &'static str,
    name: &'static str,
    extensions: [&'static str; 1],
    provider_slugs: [&'static str; 1],
    max_size_bytes: usize,
}

#[derive(Serialize, utoipa::ToSchema)]
struct FormatList {
    formats: Vec<FormatJson>,
}

/// `GET /api/v1/imports/formats`
async fn formats(state: &App) -> ApiResult {
    json(
        StatusCode::OK,
        &FormatList {
            formats: ImportFormat::ALL
                .iter()
                .map(|format| FormatJson {
                    format: format.as_str(),
                    name: format.name(),
                    extensions: [format.extension()],
                    provider_slugs: [FILE_IMPORT_SLUG],
                    max_size_bytes: state.config.max_upload_bytes(),
                })
                .collect(),
        },
    )
}

/// An uploaded file, read whole (within the limit): the `file` part of a multipart body.
pub(crate) struct Upload {
    pub(crate) format: ImportFormat,
    pub(crate) bytes: Bytes,
}

impl FromRequest<ViaBody> for Upload {
    /// Streamed at the extractor's position, after the token check.
    type Read = RequestBody;

    async fn read(body: RequestBody, _: &Parts, _: &App) -> Result<RequestBody, ApiError> {
        Ok(body)
    }

    async fn from_read(body: RequestBody, parts: &Parts, app: &App) -> Result<Self, ApiError> {
        read_upload(&parts.headers, body, app.config.max_upload_bytes()).await
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        format!("The upload is larger than the limit of {limit} bytes."),
    )
}

fn unsupported_media_type() -> ApiError {
    ApiError::new(
        ErrorCode::UnsupportedMediaType,
        "Unsupported file type. Supported extensions: .qfx, .ofx.",
    )
}

fn multipart_error(error: &multer::Error, limit: usize) -> ApiError {
    match error {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            too_large(limit)
        }
        other => ApiError::field(
            "body",
            "malformed_multipart",
            format!("The multipart body could not be read: {other}"),
        ),
    }
}

/// Reads the `file` part of a multipart upload while streaming: the extension is checked as
/// soon as the part's headers arrive (415), and reading stops at `limit` bytes (413) without
/// taking in the rest.
pub(crate) async fn read_upload(
    headers: &HeaderMap,
    body: RequestBody,
    limit: usize,
) -> Result<Upload, ApiError> {
    let content_type = header_str(headers, &header::CONTENT_TYPE).unwrap_or_default();
    let boundary = multer::parse_boundary(content_type).map_err(|_| {
        ApiError::field(
            "header.content-type",
            "unsupported_content_type",
            "The upload must be multipart/form-data with a part named file.",
        )
    })?;
    let declared =
        header_str(headers, &header::CONTENT_LENGTH).and_then(|value| value.parse::<usize>().ok());
    let stream_limit = limit.saturating_add(MULTIPART_OVERHEAD);
    if declared.is_some_and(|length| length > stream_limit) {
        return Err(too_large(limit));
    }
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new().whole_stream(u64::try_from(stream_limit).unwrap_or(u64::MAX)),
    );
    let stream = http_body_util::BodyDataStream::new(body);
    let mut multipart = multer::Multipart::with_constraints(stream, boundary, constraints);
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|error| multipart_error(&error, limit))?
    {
        if field.name() != Some("file") {
            continue;
        }
        let format = field
            .file_name()
            .and_then(ImportFormat::from_file_name)
            .ok_or_else(unsupported_media_type)?;
        let mut bytes = BytesMut::new();
        while let Some(chunk) = field
            .chunk()
            .await
            .map_err(|error| multipart_error(&error, limit))?
        {
            if bytes.len() + chunk.len() > limit {
                return Err(too_large(limit));
            }
            bytes.extend_from_slice(&chunk);
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::new(
                ErrorCode::CommandValidationFailed,
                "The uploaded file is empty.",
            ));
        }
        return Ok(Upload {
            format,
            bytes: bytes.freeze(),
        });
    }
    Err(ApiError::field(
        "file",
        "required",
        "A multipart part named file is required.",
    ))
}

fn unreadable(error: &OfxError) -> ApiError {
    let detail = match error {
        OfxError::Empty => "The uploaded file is empty.".to_owned(),
        OfxError::NotOfx => "The file is not an OFX or QFX statement file.".to_owned(),
        OfxError::SignonFailed { .. } | OfxError::RequestFailed { .. } => {
            format!("The file cannot be imported: {error}.")
        }
        _ => format!("The file could not be read: {error}."),
    };
    ApiError::new(ErrorCode::CommandValidationFailed, detail)
}

fn refused(refusal: &Refusal) -> ApiError {
    ApiError::new(
        ErrorCode::CommandValidationFailed,
        format!("The file cannot be imported: {refusal}."),
    )
}

impl From<ImportError> for ApiError {
    fn from(error: ImportError) -> Self {
        match error {
            ImportError::Unreadable(error) => unreadable(&error),
            ImportError::Refused(refusal) => refused(&refusal),
            ImportError::Work(error) => error.into(),
            ImportError::Store(error) => error.into(),
        }
    }
}

fn summary(institution: &str, counts: &ImportCounts) -> String {
    format!(
        "Imported from {institution}: accounts {} created, {} updated; transactions {} \
         created, {} updated, {} skipped; holdings {} created, {} updated.",
        counts.accounts_created,
        counts.accounts_updated,
        counts.transactions_created,
        counts.transactions_updated,
        counts.transactions_skipped,
        counts.holdings_created,
        counts.holdings_updated,
    )
}

#[derive(Serialize, utoipa::ToSchema)]
struct ImportJson {
    connection_id: Option<uuid::Uuid>,
    accounts_created: u64,
    accounts_updated: u64,
    transactions_created: u64,
    transactions_updated: u64,
    transactions_skipped: u64,
    holdings_created: u64,
    holdings_updated: u64,
    message: String,
}

/// `POST /api/v1/imports`
async fn import(state: &App, User(claims): User, upload: Upload) -> ApiResult {
    tracing::debug!(
        format = upload.format.as_str(),
        bytes = upload.bytes.len(),
        "import upload read"
    );
    let imported = state
        .imports
        .import(claims.sub, upload.format.as_str(), upload.bytes)
        .await?;
    let (counts, institutions) = (imported.counts, imported.institutions.join(", "));
    json(
        StatusCode::CREATED,
        &ImportJson {
            connection_id: counts.connection_ids.first().copied(),
            accounts_created: counts.accounts_created,
            accounts_updated: counts.accounts_updated,
            transactions_created: counts.transactions_created,
            transactions_updated: counts.transactions_updated,
            transactions_skipped: counts.transactions_skipped,
            holdings_created: counts.holdings_created,
            holdings_updated: counts.holdings_updated,
            message: summary(&institutions, &counts),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::ImportFormat;

    #[test]
    fn formats_come_from_the_last_extension() {
        assert_eq!(
            ImportFormat::from_file_name("statement.QFX"),
            Some(ImportFormat::Qfx)
        );
        assert_eq!(
            ImportFormat::from_file_name("a.csv.ofx"),
            Some(ImportFormat::Ofx)
        );
        assert_eq!(ImportFormat::from_file_name("a.ofx.csv"), None);
        assert_eq!(ImportFormat::from_file_name("ofx"), None);
    }
}
