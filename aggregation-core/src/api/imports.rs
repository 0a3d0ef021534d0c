//! File imports: the supported formats, the streamed multipart upload, and the import itself.
//!
//! `POST /api/v1/imports` checks the token (401) before reading the body, then streams the
//! parts (413 over the limit, 400 when the file is empty, 422 when the body is not multipart or
//! has no `file` part). The parts besides `file` (`format`, `account_id`, `account_name`,
//! `currency`, `mapping`, `dry_run`) are checked next (422 naming each bad one), then the
//! format is found (the `format` part, else the content, else the extension; 415 listing the
//! formats when none tells), then what the format needs (422: a `mapping` for a file that is
//! not CSV, a QIF or CSV file with neither `account_id` nor `account_name`), then the account
//! (404 for an `account_id` the caller does not own). The file is parsed off the async
//! threads, mapped (see `import::batch`) and applied in one store
//! transaction: 201. With `dry_run=true` the same transaction is rolled back and the answer
//! is 200 with what would be written, per account, and no event is raised.
//!
//! Files that do not parse (400 naming the line and the reason), whose sign-on failed or that
//! hold no statement are 400 (`command_validation_failed`); a CSV `mapping` that does not fit
//! the file is 422 naming the column. The response names one `connection_id`: the first
//! institution's connection.

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{HeaderMap, StatusCode, header};
use rust_decimal::Decimal;
use serde::Serialize;

use super::extract::{User, header_str};
use super::handler::{FromRequest, ViaBody};
use super::routes::{Route, limited, route};
use super::running::ImportSlot;
use super::{ApiResult, RequestBody, account_limit_detail, json};
use crate::app::App;
use crate::import::CsvMapping;
use crate::import::OfxError;
use crate::import::batch::Refusal;
use crate::import::format::{FORMATS, Format, Needs, detect};
use crate::import::statement::{ImportError, ImportRequest, Imported, MAX_ACCOUNTS_PER_IMPORT};
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::rate_limit::policy::{API_WRITE, PUBLIC_READ};
use crate::store::{
    AccountType, BatchAccount, BatchCounts, ImportOutcome, NewTransaction, StoreError,
    TransactionStatus, TransactionType,
};

pub(crate) const ROUTES: &[Route] = &[
    route!(POST "/api/v1/imports" => import, limited(API_WRITE),
        "Import a statement file (OFX, QFX, QIF, CSV, CAMT.052/053/054, MT940/942)",
        [200: DryRunJson, 201: ImportJson; CommandValidationFailed, NotFound]),
    route!(GET "/api/v1/imports/formats" => formats, limited(PUBLIC_READ),
        "The supported import formats", [200: FormatList]),
];

/// Room allowed for multipart framing (boundaries, part headers) on top of the file limit.
const MULTIPART_OVERHEAD: usize = 64 * 1024;

/// The largest part other than `file` (a CSV mapping is the largest of them).
const MAX_PART_BYTES: usize = 16 * 1024;

/// The longest `account_name`, in characters.
pub(crate) const MAX_ACCOUNT_NAME_CHARS: usize = 200;

/// How many rows of each account a dry run shows.
const PREVIEW_ROWS: usize = 10;

/// The provider slug of file imports.
pub(crate) const FILE_IMPORT_SLUG: &str = crate::store::FILE_IMPORT_PROVIDER;

#[derive(Serialize, utoipa::ToSchema)]
struct FormatJson {
    /// The format's code (the `format` part takes it).
    format: &'static str,
    name: &'static str,
    /// The file name extensions it usually comes with.
    extensions: Vec<&'static str>,
    provider_slugs: [&'static str; 1],
    max_size_bytes: usize,
    /// The parts an import of the format needs besides `file`; alternatives joined by `|`.
    requires: Vec<&'static str>,
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
            formats: FORMATS
                .iter()
                .map(|row| FormatJson {
                    format: row.format.as_str(),
                    name: row.name,
                    extensions: row.extensions.to_vec(),
                    provider_slugs: [FILE_IMPORT_SLUG],
                    max_size_bytes: state.config.max_upload_bytes(),
                    requires: match row.needs {
                        Needs::Nothing => Vec::new(),
                        Needs::Account => vec!["account_id|account_name"],
                    },
                })
                .collect(),
        },
    )
}

/// An uploaded file, read whole (within the limit), with the other parts as sent.
pub(crate) struct Upload {
    /// The `file` part's file name.
    pub(crate) file_name: Option<String>,
    /// The `file` part.
    pub(crate) bytes: Bytes,
    /// The other known parts, as (name, text), in the order sent.
    pub(crate) parts: Vec<(&'static str, String)>,
}

/// The parts an upload may carry besides `file`.
const PARTS: [&str; 6] = [
    "format",
    "account_id",
    "account_name",
    "currency",
    "mapping",
    "dry_run",
];

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
    let extensions: Vec<&str> = FORMATS
        .iter()
        .flat_map(|row| row.extensions.iter().copied())
        .fold(Vec::new(), |mut all, extension| {
            if !all.contains(&extension) {
                all.push(extension);
            }
            all
        });
    ApiError::new(
        ErrorCode::UnsupportedMediaType,
        format!(
            "Unsupported file type: the content matches no supported format and the file name              names none. Supported formats: {}; extensions: {}. Name the format in the format              part when the file is one of them.",
            Format::codes(),
            extensions.join(", ")
        ),
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

/// Reads a part into memory, at most `limit` bytes (`Err(None)` beyond it), into a buffer that
/// starts with room for `expected` bytes.
async fn read_part(
    field: &mut multer::Field<'_>,
    limit: usize,
    stream_limit: usize,
    expected: usize,
) -> Result<BytesMut, Option<ApiError>> {
    let mut bytes = BytesMut::with_capacity(expected.min(limit));
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|error| Some(multipart_error(&error, stream_limit)))?
    {
        if bytes.len() + chunk.len() > limit {
            return Err(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Reads the parts of a multipart upload while streaming: reading stops at `limit` bytes of
/// file (413) without taking in the rest; parts of other names are skipped.
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
    let mut file: Option<(Option<String>, Bytes)> = None;
    let mut parts = Vec::new();
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|error| multipart_error(&error, limit))?
    {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "file" && file.is_none() {
            let file_name = field.file_name().map(str::to_owned);
            // The body's declared length bounds the file's: reserved at once, the buffer is
            // never regrown (a regrowth holds the old and the new copy at the same time).
            let expected = declared.unwrap_or_default();
            let bytes = read_part(&mut field, limit, limit, expected)
                .await
                .map_err(|error| error.unwrap_or_else(|| too_large(limit)))?;
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Err(ApiError::new(
                    ErrorCode::CommandValidationFailed,
                    "The uploaded file is empty.",
                ));
            }
            file = Some((file_name, bytes.freeze()));
            continue;
        }
        let Some(known) = PARTS.iter().copied().find(|part| *part == name) else {
            continue;
        };
        let bytes = read_part(&mut field, MAX_PART_BYTES, limit, 0)
            .await
            .map_err(|error| {
                error.unwrap_or_else(|| {
                    ApiError::field(
                        known,
                        "too_long",
                        format!("The {known} part is longer than {MAX_PART_BYTES} bytes."),
                    )
                })
            })?;
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
            ApiError::field(
                known,
                "invalid_encoding",
                format!("The {known} part is not UTF-8."),
            )
        })?;
        parts.push((known, text));
    }
    match file {
        Some((file_name, bytes)) => Ok(Upload {
            file_name,
            bytes,
            parts,
        }),
        None => Err(ApiError::field(
            "file",
            "required",
            "A multipart part named file is required.",
        )),
    }
}

/// The checked parts besides `file`.
#[derive(Default)]
struct Options {
    format: Option<Format>,
    account_id: Option<uuid::Uuid>,
    account_name: Option<String>,
    currency: Option<String>,
    mapping: Option<CsvMapping>,
    dry_run: bool,
}

fn is_currency_code(text: &str) -> bool {
    text.len() == 3 && text.bytes().all(|b| b.is_ascii_uppercase())
}

/// Checks the parts besides `file` (422 naming each bad one).
fn options(parts: Vec<(&'static str, String)>) -> Result<Options, ApiError> {
    let mut options = Options::default();
    let mut errors = Vec::new();
    for (name, text) in parts {
        let value = text.trim();
        match name {
            "format" => match Format::parse(&value.to_ascii_lowercase()) {
                Some(format) => options.format = Some(format),
                None => errors.push(FieldError::new(
                    "format",
                    "invalid_value",
                    format!("format must be one of: {}.", Format::codes()),
                )),
            },
            "account_id" => match uuid::Uuid::try_parse(value) {
                Ok(id) => options.account_id = Some(id),
                Err(_) => errors.push(FieldError::new(
                    "account_id",
                    "invalid_format",
                    "account_id must be a UUID.",
                )),
            },
            "account_name" => {
                let length = value.chars().count();
                if length == 0 || length > MAX_ACCOUNT_NAME_CHARS {
                    errors.push(FieldError::new(
                        "account_name",
                        if length == 0 { "required" } else { "too_long" },
                        format!("account_name must be 1 to {MAX_ACCOUNT_NAME_CHARS} characters."),
                    ));
                } else {
                    options.account_name = Some(value.to_owned());
                }
            }
            "currency" => {
                if is_currency_code(value) {
                    options.currency = Some(value.to_owned());
                } else {
                    errors.push(FieldError::new(
                        "currency",
                        "invalid_format",
                        "currency must be an ISO 4217 code of three upper-case letters (USD).",
                    ));
                }
            }
            "mapping" => match serde_json::from_str::<CsvMapping>(value) {
                Ok(mapping) => options.mapping = Some(mapping),
                Err(error) => errors.push(FieldError::new(
                    "mapping",
                    "invalid_mapping",
                    format!("mapping is not a valid CSV mapping: {error}."),
                )),
            },
            "dry_run" => match value.to_ascii_lowercase().as_str() {
                "true" | "1" => options.dry_run = true,
                "false" | "0" | "" => options.dry_run = false,
                _ => errors.push(FieldError::new(
                    "dry_run",
                    "invalid_value",
                    "dry_run must be true or false.",
                )),
            },
            _ => {}
        }
    }
    if options.account_id.is_some() && options.account_name.is_some() {
        errors.push(FieldError::new(
            "account_name",
            "conflict",
            "account_name names a new account; it cannot be given with account_id.",
        ));
    }
    if options.account_id.is_some() && options.currency.is_some() {
        errors.push(FieldError::new(
            "currency",
            "conflict",
            "currency is for a new account; the account account_id names keeps its own.",
        ));
    }
    if errors.is_empty() {
        Ok(options)
    } else {
        Err(ApiError::validation(errors))
    }
}

/// The import the upload asks for: parts checked, format found, what it needs present.
fn import_request(upload: Upload) -> Result<ImportRequest, ApiError> {
    let options = options(upload.parts)?;
    let format = match options.format {
        Some(format) => format,
        None => {
            detect(&upload.bytes, upload.file_name.as_deref()).ok_or_else(unsupported_media_type)?
        }
    };
    if options.mapping.is_some() && format != Format::Csv {
        return Err(ApiError::field(
            "mapping",
            "not_applicable",
            format!("mapping applies to CSV files only; this file is {format}."),
        ));
    }
    if format.needs() == Needs::Account
        && options.account_id.is_none()
        && options.account_name.is_none()
    {
        return Err(ApiError::field(
            "account_id",
            "required",
            format!(
                "A {format} file names no account: give account_id (an existing account) or                  account_name (a new one)."
            ),
        ));
    }
    Ok(ImportRequest {
        format,
        bytes: upload.bytes,
        account_id: options.account_id,
        account_name: options.account_name,
        currency: options.currency,
        mapping: options.mapping,
        dry_run: options.dry_run,
    })
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
    match refusal {
        Refusal::SeveralAccounts { .. } => ApiError::field(
            "account_id",
            "several_accounts",
            format!("The file cannot be imported into one account: {refusal}."),
        ),
        _ => ApiError::new(
            ErrorCode::CommandValidationFailed,
            format!("The file cannot be imported: {refusal}."),
        ),
    }
}

impl From<ImportError> for ApiError {
    fn from(error: ImportError) -> Self {
        match error {
            ImportError::Unreadable(error) => unreadable(&error),
            ImportError::Parse { format, error } => ApiError::new(
                ErrorCode::CommandValidationFailed,
                if error.line == 0 {
                    format!("The file could not be read as {format}: {}.", error.reason)
                } else {
                    format!("The file could not be read as {format}: {error}.")
                },
            ),
            ImportError::MappingField { field, reason } => {
                ApiError::field(field, "invalid", format!("{field}: {reason}."))
            }
            ImportError::Mapping { column, reason } => {
                ApiError::field("mapping", "column", format!("Column {column}: {reason}."))
            }
            ImportError::Refused(refusal) => refused(&refusal),
            ImportError::AccountNotFound => {
                ApiError::new(ErrorCode::NotFound, "Account not found.")
            }
            ImportError::TooManyAccounts { count } => ApiError::field(
                "file",
                "too_many_accounts",
                format!(
                    "The file names {count} accounts; an import may name at most \
                     {MAX_ACCOUNTS_PER_IMPORT}. Nothing was written."
                ),
            ),
            ImportError::Store(StoreError::AccountLimit { limit }) => {
                ApiError::field("file", "account_limit", account_limit_detail(limit))
            }
            ImportError::Work(error) => error.into(),
            ImportError::Store(error) => error.into(),
        }
    }
}

fn summary(institution: &str, counts: &BatchCounts, dry_run: bool) -> String {
    let lead = if dry_run {
        "Dry run, nothing written: would import"
    } else {
        "Imported"
    };
    format!(
        "{lead} from {institution}: accounts {} created, {} updated; transactions {} \
         created, {} updated, {} skipped; holdings {} created, {} updated.",
        counts.accounts.created,
        counts.accounts.updated,
        counts.transactions.created,
        counts.transactions.updated,
        counts.transactions.unchanged,
        counts.holdings.created,
        counts.holdings.updated,
    )
}

/// Something the import read but doubts.
#[derive(Serialize, utoipa::ToSchema)]
struct WarningJson {
    /// What it is about (`line 12`, `statement 2 (DE89…)`).
    item: String,
    /// What is wrong.
    message: String,
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
    /// Transactions recognised as rows another source (a provider sync, another file
    /// format) wrote already: not written again, recorded as `automatic` matches.
    matched: u64,
    /// Transfers paired between the caller's accounts.
    transfers: u64,
    message: String,
    /// The format the file was read as.
    #[schema(value_type = Format)]
    format: &'static str,
    /// What was read but doubted (an unreadable balance, a balance check that failed).
    warnings: Vec<WarningJson>,
}

/// A row as it would be written.
#[derive(Serialize, utoipa::ToSchema)]
struct PreviewRowJson {
    provider_transaction_id: String,
    transaction_date: chrono::NaiveDate,
    #[schema(value_type = String)]
    amount: Decimal,
    currency: String,
    description: Option<String>,
    #[schema(value_type = TransactionStatus)]
    status: &'static str,
    #[schema(value_type = TransactionType)]
    transaction_type: &'static str,
}

/// One account as it would be written.
#[derive(Serialize, utoipa::ToSchema)]
struct PreviewAccountJson {
    /// The existing account's id; null for an account that would be created.
    account_id: Option<uuid::Uuid>,
    provider_account_id: String,
    name: String,
    #[schema(value_type = AccountType)]
    account_type: &'static str,
    currency: String,
    /// The balance the file reports, if it reports one.
    #[schema(value_type = Option<String>)]
    balance_amount: Option<Decimal>,
    /// `created`, `updated` or `unchanged`.
    #[schema(value_type = ImportOutcome)]
    outcome: &'static str,
    transactions_created: u64,
    transactions_updated: u64,
    transactions_skipped: u64,
    holdings_created: u64,
    holdings_updated: u64,
    snapshots_created: u64,
    /// How many transactions the file holds for the account.
    transactions_in_file: usize,
    /// The first rows (at most 10), in file order.
    rows: Vec<PreviewRowJson>,
}

/// What an import would do (`dry_run=true`); nothing was written.
#[derive(Serialize, utoipa::ToSchema)]
struct DryRunJson {
    /// Always true.
    dry_run: bool,
    /// Always null: nothing was written.
    connection_id: Option<uuid::Uuid>,
    accounts_created: u64,
    accounts_updated: u64,
    transactions_created: u64,
    transactions_updated: u64,
    transactions_skipped: u64,
    holdings_created: u64,
    holdings_updated: u64,
    /// Transactions recognised as rows another source (a provider sync, another file
    /// format) wrote already: not written again, recorded as `automatic` matches.
    matched: u64,
    /// Transfers paired between the caller's accounts.
    transfers: u64,
    message: String,
    #[schema(value_type = Format)]
    format: &'static str,
    warnings: Vec<WarningJson>,
    accounts: Vec<PreviewAccountJson>,
}

fn preview_row(row: &NewTransaction) -> PreviewRowJson {
    PreviewRowJson {
        provider_transaction_id: row.provider_transaction_id.clone(),
        transaction_date: row.transaction_date,
        amount: row.amount,
        currency: row.currency.clone(),
        description: row.description.clone(),
        status: row.status.as_str(),
        transaction_type: row.transaction_type.as_str(),
    }
}

fn preview_accounts(imported: &Imported, accounts: &[BatchAccount]) -> Vec<PreviewAccountJson> {
    accounts
        .iter()
        .enumerate()
        .filter_map(|(index, item)| Some((index, item, item.account.as_ref()?)))
        .map(|(index, item, account)| {
            let done = imported.counts.per_account.get(index);
            let outcome = done
                .and_then(|done| done.outcome)
                .unwrap_or(ImportOutcome::Created);
            let rows = item.transactions.as_deref().unwrap_or_default();
            PreviewAccountJson {
                account_id: done
                    .filter(|_| outcome != ImportOutcome::Created)
                    .map(|done| done.account_id),
                provider_account_id: account.provider_account_id.clone(),
                name: account.name.clone(),
                account_type: account.account_type.as_str(),
                currency: account.currency.clone(),
                balance_amount: item.balance_reported.then_some(account.balance_amount),
                outcome: outcome.as_str(),
                transactions_created: done.map_or(0, |d| d.transactions_created),
                transactions_updated: done.map_or(0, |d| d.transactions_updated),
                transactions_skipped: done.map_or(0, |d| d.transactions_skipped),
                holdings_created: done.map_or(0, |d| d.holdings_created),
                holdings_updated: done.map_or(0, |d| d.holdings_updated),
                snapshots_created: done.map_or(0, |d| d.snapshots_created),
                transactions_in_file: rows.len(),
                rows: rows.iter().take(PREVIEW_ROWS).map(preview_row).collect(),
            }
        })
        .collect()
}

/// `POST /api/v1/imports`
async fn import(state: &App, User(claims): User, _slot: ImportSlot, upload: Upload) -> ApiResult {
    let request = import_request(upload)?;
    tracing::debug!(
        format = request.format.as_str(),
        bytes = request.bytes.len(),
        dry_run = request.dry_run,
        "import upload read"
    );
    let imported = state.imports.import(claims.sub, request).await?;
    let institutions = imported.institutions.join(", ");
    let counts = &imported.counts;
    let warnings: Vec<WarningJson> = imported
        .warnings
        .iter()
        .map(|warning| WarningJson {
            item: warning.item.clone(),
            message: warning.message.clone(),
        })
        .collect();
    if let Some(accounts) = &imported.preview {
        return json(
            StatusCode::OK,
            &DryRunJson {
                dry_run: true,
                connection_id: None,
                accounts_created: counts.accounts.created,
                accounts_updated: counts.accounts.updated,
                transactions_created: counts.transactions.created,
                transactions_updated: counts.transactions.updated,
                transactions_skipped: counts.transactions.unchanged,
                holdings_created: counts.holdings.created,
                holdings_updated: counts.holdings.updated,
                matched: counts.transactions_matched,
                transfers: counts.transfers,
                message: summary(&institutions, counts, true),
                format: imported.format.as_str(),
                warnings,
                accounts: preview_accounts(&imported, accounts),
            },
        );
    }
    json(
        StatusCode::CREATED,
        &ImportJson {
            connection_id: counts.connection_ids.first().copied(),
            accounts_created: counts.accounts.created,
            accounts_updated: counts.accounts.updated,
            transactions_created: counts.transactions.created,
            transactions_updated: counts.transactions.updated,
            transactions_skipped: counts.transactions.unchanged,
            holdings_created: counts.holdings.created,
            holdings_updated: counts.holdings.updated,
            matched: counts.transactions_matched,
            transfers: counts.transfers,
            message: summary(&institutions, counts, false),
            format: imported.format.as_str(),
            warnings,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(list: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        list.iter()
            .map(|(name, value)| (*name, (*value).to_owned()))
            .collect()
    }

    fn fields(error: &ApiError) -> Vec<&str> {
        error.errors().iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn parts_are_checked_together() {
        let error = options(parts(&[
            ("format", "pdf"),
            ("account_id", "42"),
            ("currency", "usd"),
            ("mapping", "{\"columns\": 3}"),
            ("dry_run", "maybe"),
        ]))
        .err()
        .expect("refused");
        assert_eq!(error.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            fields(&error),
            ["format", "account_id", "currency", "mapping", "dry_run"]
        );
        let long = "x".repeat(MAX_ACCOUNT_NAME_CHARS + 1);
        let error = options(parts(&[("account_name", &long)]))
            .err()
            .expect("refused");
        assert_eq!(fields(&error), ["account_name"]);
        let fine = options(parts(&[
            ("format", "CAMT.053"),
            ("account_name", &"é".repeat(MAX_ACCOUNT_NAME_CHARS)),
            ("currency", "EUR"),
            (
                "mapping",
                "{\"columns\": {\"date\": 0, \"amount\": \"Betrag\"}}",
            ),
            ("dry_run", "true"),
        ]))
        .expect("accepted");
        assert_eq!(fine.format, Some(Format::Camt053));
        assert!(fine.dry_run);
        assert!(fine.mapping.is_some());
    }
}
