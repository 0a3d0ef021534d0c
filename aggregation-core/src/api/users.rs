//! The caller's own account and data: `GET /api/v1/users/me`, the export
//! (`GET /api/v1/users/me/export`) and the erasure (`DELETE /api/v1/users/me`, and
//! `DELETE /api/v1/admin/users/{user_id}` for administrators).
//!
//! # Export
//!
//! One JSON document, `Content-Disposition: attachment`, streamed page by page as it is read
//! (keyset pages of [`EXPORT_PAGE_ROWS`] rows, written into a channel of two chunks), so its
//! memory stays bounded whatever the user holds: `{exported_at, user, sessions, connections,
//! accounts, transactions, holdings, balance_snapshots, imports, webhooks, categories, rules,
//! transaction_matches, events}`, every record in the shape the API's reads give it, nothing
//! secret (no token, hash, webhook secret, provider credential or key material). `imports`
//! are the user's `import.completed` events (statement files leave no other record);
//! `categories` are the user's own (the taxonomy's are everyone's); `rules` in the order they
//! run.
//! Its own rate limit (2 an hour) and one of the caller's heavy-read slots, held until the
//! last byte is written. The status is sent before the data: a store failure midway ends
//! the document early, unterminated, so a client never takes a partial export for a whole
//! one.

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{HeaderValue, StatusCode, header};
use serde::{Deserialize, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use uuid::Uuid;

use super::accounts::account_json;
use super::admin::Admin;
use super::categories::category_json;
use super::extract::{Json, PathUserId, User};
use super::holdings::holding_json;
use super::matches::match_json;
use super::providers::connection_json;
use super::routes::{Route, limited, route};
use super::rules::rule_json;
use super::running::HeavyRead;
use super::sessions::session_json;
use super::snapshots::snapshot_json;
use super::transactions::transaction_json;
use super::validate::{AllValid as _, Field, Validate, body};
use super::webhooks::webhook_json;
use super::{ApiResult, ResponseBody, json};
use crate::app::App;
use crate::auth::password::MAX_PASSWORD_CHARS;
use crate::config::Config;
use crate::events::EventType;
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::{API_READ, API_WRITE, USER_EXPORT};
use crate::records::categories::CategoryEntry;
use crate::records::rules::RuleEntry;
use crate::store::{MatchFilter, Role, Store, StoreError, TransactionPosition, UserRecord, now};
use crate::user_data::UserDataError;
use crate::user_slots::UserSlot;

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/users/me" => me, limited(API_READ), "The caller's account",
        [200: MeJson]),
    route!(GET "/api/v1/users/me/export" => export, limited(USER_EXPORT),
        "Export everything the caller's account holds, as one streamed JSON document",
        [200: ExportDocument]),
    route!(DELETE "/api/v1/users/me" => erase_me, limited(API_WRITE),
        "Delete the caller's account and everything it holds (the password confirms it)",
        [202: ErasureJson; Unauthorized]),
    route!(DELETE "/api/v1/admin/users/{user_id}" => erase_user, limited(API_WRITE),
        "Delete a user's account and everything it holds", [202: ErasureJson; NotFound]),
];

/// The sections of the export document after `exported_at`, in order, with what each holds
/// (the OpenAPI document's descriptions).
pub(crate) const EXPORT_SECTIONS: &[(&str, &str)] = &[
    ("user", "As `GET /api/v1/users/me`."),
    (
        "sessions",
        "As `GET /api/v1/sessions`, revoked and expired ones too (no tokens).",
    ),
    (
        "connections",
        "As `GET /api/v1/providers` (no credentials).",
    ),
    ("accounts", "As `GET /api/v1/accounts`."),
    (
        "transactions",
        "As `GET /api/v1/transactions/{id}`, oldest first per account.",
    ),
    ("holdings", "As `GET /api/v1/holdings`, inactive ones too."),
    (
        "balance_snapshots",
        "As `GET /api/v1/accounts/{id}/balance-snapshots`.",
    ),
    (
        "imports",
        "The `import.completed` events, as the audit list.",
    ),
    ("webhooks", "As `GET /api/v1/webhooks` (no secrets)."),
    (
        "categories",
        "The caller's own categories (`custom:<uuid>`), as `GET /api/v1/categories` shows them \
         (the taxonomy's are the same for everyone and left out).",
    ),
    (
        "rules",
        "The caller's rules, as `GET /api/v1/rules` shows them, in the order they run.",
    ),
    (
        "transaction_matches",
        "As `GET /api/v1/transaction-matches`, every status, newest first.",
    ),
    ("events", "The user's own audit events, as the audit list."),
];

/// Rows of one keyset page of the export.
pub(crate) const EXPORT_PAGE_ROWS: u32 = 1_000;

/// Bytes gathered before a chunk of the export is sent.
const EXPORT_CHUNK_BYTES: usize = 256 * 1024;

/// Chunks written ahead of the client: the bound of the export's memory with the page.
const EXPORT_CHUNKS_AHEAD: usize = 2;

impl From<UserDataError> for ApiError {
    fn from(error: UserDataError) -> Self {
        match error {
            UserDataError::UnknownUser => ApiError::new(ErrorCode::NotFound, "No such user."),
            UserDataError::Store(store) => store.into(),
        }
    }
}

/// The caller's account.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct MeJson {
    id: Uuid,
    email: String,
    email_verified: bool,
    created_at: DateTime<Utc>,
    /// `user`, and `admin` for administrators.
    roles: Vec<&'static str>,
}

fn me_json(user: &UserRecord, roles: &[Role]) -> MeJson {
    MeJson {
        id: user.id,
        email: user.email.clone(),
        email_verified: user.email_verified_at.is_some(),
        created_at: user.created_at,
        roles: roles.iter().map(|role| role.as_str()).collect(),
    }
}

/// The caller's profile, or 401 when the token's user is gone.
async fn profile(state: &App, user_id: Uuid) -> Result<MeJson, ApiError> {
    let (user, roles) = state
        .user_data
        .profile(user_id)
        .await?
        .ok_or_else(ApiError::unauthorized)?;
    Ok(me_json(&user, &roles))
}

/// `GET /api/v1/users/me`
async fn me(state: &App, User(claims): User) -> ApiResult {
    json(StatusCode::OK, &profile(state, claims.sub).await?)
}

/// `{password}` of an erasure: the caller's current password.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct ErasureBody {
    #[schema(required = true, value_type = String, format = Password,
        example = "correct horse battery staple")]
    password: Field,
}

impl Validate for ErasureBody {
    type Valid = String;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        body::string("password", self.password, 1, MAX_PASSWORD_CHARS).all_valid()
    }
}

/// An erasure under way.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ErasureJson {
    user_id: Uuid,
    /// `deleting`: access ended; the data goes in the background.
    status: &'static str,
    message: &'static str,
}

fn erasure_accepted(user_id: Uuid) -> ApiResult {
    json(
        StatusCode::ACCEPTED,
        &ErasureJson {
            user_id,
            status: "deleting",
            message: "The account is closed: every session and token has ended. Its data is \
                      being deleted and provider connections disconnected; an email confirms \
                      it.",
        },
    )
}

/// `DELETE /api/v1/users/me`
async fn erase_me(state: &App, User(claims): User, Json(password): Json<ErasureBody>) -> ApiResult {
    state.auth.confirm_password(claims.sub, &password).await?;
    state.user_data.erase(claims.sub, None).await?;
    erasure_accepted(claims.sub)
}

/// `DELETE /api/v1/admin/users/{user_id}`
async fn erase_user(
    state: &App,
    Admin(admin): Admin,
    PathUserId(user_id): PathUserId,
) -> ApiResult {
    state.user_data.erase(user_id, Some(admin.sub)).await?;
    erasure_accepted(user_id)
}

/// The export document (for the OpenAPI document: it is streamed, not built as one value).
pub(crate) struct ExportDocument;

impl utoipa::PartialSchema for ExportDocument {
    fn schema() -> RefOr<Schema> {
        let mut document = ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "Everything the account holds, each record in the shape of the API's reads, \
                 nothing secret.",
            ))
            .property(
                "exported_at",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
            );
        for (section, description) in EXPORT_SECTIONS {
            let kind = if *section == "user" {
                Type::Object
            } else {
                Type::Array
            };
            document = document.property(
                *section,
                ObjectBuilder::new()
                    .schema_type(kind)
                    .description(Some(*description)),
            );
        }
        document.into()
    }
}

impl utoipa::ToSchema for ExportDocument {}

/// `GET /api/v1/users/me/export`
async fn export(state: &App, User(claims): User, slot: HeavyRead) -> ApiResult {
    // Read before the status is sent: a store that fails here is still a 503.
    let profile = profile(state, claims.sub).await?;
    let mut head = Vec::with_capacity(512);
    let exported_at = now();
    write_json(&mut head, b"{\"exported_at\":", &exported_at);
    write_json(&mut head, b",\"user\":", &profile);
    let (chunks, receiver) = tokio::sync::mpsc::channel::<Bytes>(EXPORT_CHUNKS_AHEAD);
    let writer = ExportWriter {
        store: state.store.clone(),
        user_id: claims.sub,
        session_id: claims.session_id,
        buffer: head,
        chunks,
        _slot: slot.into_slot(),
    };
    tokio::spawn(async move {
        let user_id = writer.user_id;
        match writer.write().await {
            Ok(()) | Err(Stop::ClientLeft) => {}
            Err(Stop::Store(error)) => {
                tracing::error!(user_id = %user_id, error = %error, "export ended early: the store failed");
            }
        }
    });
    let body = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let chunk = receiver.recv().await?;
        Some((chunk, receiver))
    });
    http::Response::builder()
        .status(StatusCode::OK)
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )
        .header(
            header::CONTENT_DISPOSITION,
            HeaderValue::from_static("attachment; filename=\"export.json\""),
        )
        .header(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))
        .body(ResponseBody::stream(body))
        .map_err(|_| ApiError::internal())
}

/// Appends `prefix` and `value` as JSON (serializing these plain records cannot fail).
fn write_json<T: Serialize>(buffer: &mut Vec<u8>, prefix: &[u8], value: &T) {
    buffer.extend_from_slice(prefix);
    if let Err(error) = serde_json::to_writer(&mut *buffer, value) {
        tracing::error!(error = %error, "export serialization failed");
        buffer.extend_from_slice(b"null");
    }
}

/// Why the export stopped writing.
enum Stop {
    ClientLeft,
    Store(StoreError),
}

impl From<StoreError> for Stop {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

/// Writes the export document into the channel, section by section, page by page.
struct ExportWriter {
    store: Arc<dyn Store>,
    user_id: Uuid,
    /// The session of the exporting token (its `is_current`).
    session_id: Uuid,
    buffer: Vec<u8>,
    chunks: tokio::sync::mpsc::Sender<Bytes>,
    /// The caller's heavy-read slot, held until the document is written.
    _slot: UserSlot,
}

/// A section of the export read account by account, and where in one account its next
/// keyset page starts (`None`: the first page). Transactions are keyed by their listing
/// position, holdings and snapshots by id.
#[derive(Clone, Copy)]
enum PerAccount {
    Transactions(Option<TransactionPosition>),
    Holdings(Option<Uuid>),
    Snapshots(Option<Uuid>),
}

impl PerAccount {
    fn name(self) -> &'static str {
        match self {
            Self::Transactions(_) => "transactions",
            Self::Holdings(_) => "holdings",
            Self::Snapshots(_) => "balance_snapshots",
        }
    }

    /// The section's first page in an account.
    fn first(self) -> Self {
        match self {
            Self::Transactions(_) => Self::Transactions(None),
            Self::Holdings(_) => Self::Holdings(None),
            Self::Snapshots(_) => Self::Snapshots(None),
        }
    }
}

/// Writes the items of one JSON array, comma-separated.
struct Items {
    first: bool,
}

impl Items {
    fn new() -> Self {
        Self { first: true }
    }

    fn push<T: Serialize>(&mut self, buffer: &mut Vec<u8>, item: &T) {
        let comma: &[u8] = if self.first { b"" } else { b"," };
        self.first = false;
        write_json(buffer, comma, item);
    }
}

impl ExportWriter {
    async fn open(&mut self, section: &str) -> Result<Items, Stop> {
        self.buffer.extend_from_slice(b",\"");
        self.buffer.extend_from_slice(section.as_bytes());
        self.buffer.extend_from_slice(b"\":[");
        self.flush_if_full().await?;
        Ok(Items::new())
    }

    async fn close(&mut self) -> Result<(), Stop> {
        self.buffer.push(b']');
        self.flush_if_full().await
    }

    async fn flush_if_full(&mut self) -> Result<(), Stop> {
        if self.buffer.len() >= EXPORT_CHUNK_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Stop> {
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(EXPORT_CHUNK_BYTES + EXPORT_CHUNK_BYTES / 4),
        ));
        self.chunks.send(chunk).await.map_err(|_| Stop::ClientLeft)
    }

    async fn write(mut self) -> Result<(), Stop> {
        let user_id = self.user_id;
        let store = self.store.clone();

        let mut items = self.open("sessions").await?;
        for session in store.sessions_for_user(user_id, false, now()).await? {
            items.push(&mut self.buffer, &session_json(&session, self.session_id));
        }
        self.close().await?;

        let mut items = self.open("connections").await?;
        for connection in store.connections_for_user(user_id, false).await? {
            items.push(&mut self.buffer, &connection_json(&connection));
        }
        self.close().await?;

        let accounts = self.accounts().await?;
        for section in [
            PerAccount::Transactions(None),
            PerAccount::Holdings(None),
            PerAccount::Snapshots(None),
        ] {
            self.per_account(section, &accounts).await?;
        }
        self.events("imports", Some(EventType::ImportCompleted))
            .await?;

        let mut items = self.open("webhooks").await?;
        for endpoint in store.webhook_endpoints(user_id).await? {
            items.push(&mut self.buffer, &webhook_json(&endpoint));
        }
        self.close().await?;

        let mut items = self.open("categories").await?;
        for category in store.custom_categories(user_id).await? {
            items.push(
                &mut self.buffer,
                &category_json(CategoryEntry::custom(&category)),
            );
        }
        self.close().await?;
        let mut items = self.open("rules").await?;
        for rule in store.rules(user_id).await? {
            if let Some(entry) = RuleEntry::of(&rule) {
                items.push(&mut self.buffer, &rule_json(&entry));
            }
        }
        self.close().await?;
        let mut items = self.open("transaction_matches").await?;
        let mut filter = MatchFilter {
            limit: EXPORT_PAGE_ROWS,
            ..MatchFilter::default()
        };
        loop {
            let page = store.transaction_matches(user_id, &filter).await?;
            for record in &page {
                items.push(&mut self.buffer, &match_json(record));
            }
            self.flush_if_full().await?;
            match page.last() {
                Some(last) if page.len() == EXPORT_PAGE_ROWS as usize => {
                    filter.before = Some(last.id);
                }
                _ => break,
            }
        }
        self.close().await?;
        self.events("events", None).await?;
        self.buffer.push(b'}');
        self.flush().await
    }

    /// Writes the `accounts` section and answers the accounts' ids, in the order written
    /// (a user's accounts are capped, so the list is bounded), for the sections read account
    /// by account.
    async fn accounts(&mut self) -> Result<Vec<Uuid>, Stop> {
        let mut items = self.open("accounts").await?;
        let mut ids = Vec::new();
        loop {
            let page = self
                .store
                .export_accounts(self.user_id, ids.last().copied(), EXPORT_PAGE_ROWS)
                .await?;
            for account in &page {
                items.push(&mut self.buffer, &account_json(account));
            }
            ids.extend(page.iter().map(|account| account.id));
            self.flush_if_full().await?;
            if page.len() < EXPORT_PAGE_ROWS as usize {
                break;
            }
        }
        self.close().await?;
        Ok(ids)
    }

    /// Writes one section read account by account, each in keyset pages.
    async fn per_account(&mut self, section: PerAccount, accounts: &[Uuid]) -> Result<(), Stop> {
        let mut items = self.open(section.name()).await?;
        for &account_id in accounts {
            let mut page = section.first();
            loop {
                let (rows, next) = self.account_page(page, account_id, &mut items).await?;
                self.flush_if_full().await?;
                match next {
                    Some(next) if rows == EXPORT_PAGE_ROWS as usize => page = next,
                    _ => break,
                }
            }
        }
        self.close().await
    }

    /// Writes the page `page` of `account_id`: how many rows it held and where the next page
    /// starts.
    async fn account_page(
        &mut self,
        page: PerAccount,
        account_id: Uuid,
        items: &mut Items,
    ) -> Result<(usize, Option<PerAccount>), Stop> {
        let (user_id, store) = (self.user_id, &self.store);
        let buffer = &mut self.buffer;
        let limit = EXPORT_PAGE_ROWS;
        Ok(match page {
            PerAccount::Transactions(after) => {
                let rows = store
                    .export_transactions(user_id, account_id, after, limit)
                    .await?;
                for transaction in &rows {
                    items.push(buffer, &transaction_json(transaction));
                }
                let next = rows
                    .last()
                    .map(|last| PerAccount::Transactions(Some(TransactionPosition::of(last))));
                (rows.len(), next)
            }
            PerAccount::Holdings(after) => {
                let rows = store
                    .export_holdings(user_id, account_id, after, limit)
                    .await?;
                for holding in &rows {
                    items.push(buffer, &holding_json(holding));
                }
                let next = rows.last().map(|last| PerAccount::Holdings(Some(last.id)));
                (rows.len(), next)
            }
            PerAccount::Snapshots(after) => {
                let rows = store
                    .export_snapshots(user_id, account_id, after, limit)
                    .await?;
                for snapshot in &rows {
                    items.push(buffer, &snapshot_json(snapshot));
                }
                let next = rows.last().map(|last| PerAccount::Snapshots(Some(last.id)));
                (rows.len(), next)
            }
        })
    }

    /// The user's events (only those of `only`'s type, when given), oldest first.
    async fn events(&mut self, section: &str, only: Option<EventType>) -> Result<(), Stop> {
        let mut items = self.open(section).await?;
        let mut after = None;
        loop {
            let page = self
                .store
                .user_events_after(self.user_id, after, EXPORT_PAGE_ROWS)
                .await?;
            for event in page
                .iter()
                .filter(|event| only.is_none_or(|only| event.event_type == only))
            {
                items.push(&mut self.buffer, &event.body());
            }
            self.flush_if_full().await?;
            match page.last() {
                Some(last) if page.len() == EXPORT_PAGE_ROWS as usize => after = Some(last.id),
                _ => break,
            }
        }
        self.close().await
    }
}
