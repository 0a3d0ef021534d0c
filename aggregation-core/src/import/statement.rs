//! Importing one uploaded statement file: parse it in its format (its row of the format
//! table, large files on the parsing [`WorkGate`]'s own threads), map it to the one
//! normalized batch every format maps to ([`super::batch`]), apply it in one store
//! transaction (or preview it in one that is rolled back), and report it as
//! [`DomainEvent::StatementImported`].

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::batch::{Defaults, ImportWarning, Normalize, ParsedBatch, Refusal, into_existing};
use super::csv::CsvMapping;
use super::format::Format;
use super::model::ParseError;
#[cfg(test)]
use super::model::ParsedFile;
use super::ofx::OfxError;
use crate::events::{
    DomainEvent, DurableEvent, Event, Events, ImportCompleted, ImportCompletedCounts, RowCounts,
};
use crate::store::{AccountRecord, BatchAccount, BatchCounts, BatchTarget, Store, StoreError, now};
use crate::work::{WorkError, WorkGate};

/// Files at least this large are parsed on the parsing gate's threads rather than inline.
const INLINE_PARSE_LIMIT: usize = 64 * 1024;

/// The most accounts one file may name. Real statements name a handful; a file naming
/// thousands is generated, and each account multiplies the cost of every later read (the net
/// worth history is accounts × points).
pub(crate) const MAX_ACCOUNTS_PER_IMPORT: usize = 1_000;

/// Why a file was not imported.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImportError {
    /// The file is not a readable OFX/QFX statement file.
    #[error(transparent)]
    Unreadable(OfxError),
    /// The file is not readable in its (non-OFX) format: the line and the reason.
    #[error("{format}: {error}")]
    Parse {
        /// The format it was read as.
        format: Format,
        /// Where and why reading stopped.
        error: ParseError,
    },
    /// The CSV `mapping` does not fit the file, or a column could not be found.
    #[error("column {column}: {reason}")]
    Mapping {
        /// The column.
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// A field of the CSV `mapping` is wrong for this file (`mapping.date_format`).
    #[error("{field}: {reason}")]
    MappingField {
        /// The mapping field, as the request names it.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The file was read but cannot be imported (failed sign-on, no statement, several
    /// accounts for one `account_id`).
    #[error(transparent)]
    Refused(Refusal),
    /// `account_id` names no account of the user.
    #[error("the account to import into does not exist")]
    AccountNotFound,
    /// The file names more than [`MAX_ACCOUNTS_PER_IMPORT`] accounts.
    #[error("the file names {count} accounts, more than {MAX_ACCOUNTS_PER_IMPORT}")]
    TooManyAccounts {
        /// How many the file names.
        count: usize,
    },
    /// The parsing gate is saturated, or parsing failed to run.
    #[error(transparent)]
    Work(#[from] WorkError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One import as the caller asked for it.
#[derive(Debug, Clone)]
pub(crate) struct ImportRequest {
    /// The file's format (given or detected).
    pub(crate) format: Format,
    /// The file.
    pub(crate) bytes: Bytes,
    /// An existing account of the user to import into.
    pub(crate) account_id: Option<Uuid>,
    /// The name of a new account when the file names none.
    pub(crate) account_name: Option<String>,
    /// The currency of a new account when the file states none (ISO 4217, upper case).
    pub(crate) currency: Option<String>,
    /// How to read a CSV file.
    pub(crate) mapping: Option<CsvMapping>,
    /// Only report what would be written.
    pub(crate) dry_run: bool,
}

/// What an import wrote (or, for a dry run, would write).
pub(crate) struct Imported {
    /// The format the file was read as.
    pub(crate) format: Format,
    /// The counts of the store transaction.
    pub(crate) counts: BatchCounts,
    /// The institutions of the file, in file order (their connections' aliases).
    pub(crate) institutions: Vec<String>,
    /// What was read but doubted.
    pub(crate) warnings: Vec<ImportWarning>,
    /// For a dry run: the accounts as they would be written, in batch order.
    pub(crate) preview: Option<Vec<BatchAccount>>,
}

/// A parsed file of any format, ready to be normalized.
pub(crate) type Parsed = Box<dyn Normalize>;

/// The records of a parsed file for the request, with the warnings to report. The parsed
/// file is consumed as its rows are mapped and gone before their ids are deduplicated: the
/// maps of that step never sit beside it.
fn batch_for(
    parsed: Parsed,
    request: &ImportRequest,
    existing: Option<&AccountRecord>,
    at: DateTime<Utc>,
) -> Result<ParsedBatch, Refusal> {
    let defaults = Defaults {
        account_name: request.account_name.as_deref(),
        currency: existing
            .map(|account| account.currency.as_str())
            .or(request.currency.as_deref()),
    };
    let builder = parsed.normalize(&defaults)?;
    let mut normalized = builder.finish(at);
    if let Some(record) = existing {
        normalized.batch = into_existing(normalized.batch, record)?;
    }
    Ok(normalized)
}

/// The rule of an import's events: its `import.completed` event, with the counts.
pub(crate) fn import_events(
    user_id: Uuid,
    at: DateTime<Utc>,
) -> impl Fn(&BatchCounts) -> Vec<Event> + Send + Sync {
    move |counts| {
        let mut events = vec![import_completed(user_id, counts).event_at(at)];
        events.extend(crate::records::matches::matches_events(&counts.matches, at));
        events
    }
}

/// The `import.completed` event of an import that wrote `counts`.
fn import_completed(user_id: Uuid, counts: &BatchCounts) -> ImportCompleted {
    ImportCompleted {
        user_id,
        connection_ids: counts.connection_ids.clone(),
        counts: ImportCompletedCounts {
            accounts: RowCounts {
                created: counts.accounts.created,
                updated: counts.accounts.updated,
                unchanged: counts.accounts.unchanged,
            },
            transactions: RowCounts {
                created: counts.transactions.created,
                updated: counts.transactions.updated,
                unchanged: counts.transactions.unchanged,
            },
            holdings: RowCounts {
                created: counts.holdings.created,
                updated: counts.holdings.updated,
                unchanged: counts.holdings.unchanged,
            },
            snapshots_created: counts.snapshots_created,
        },
    }
}

/// The statement-import use case.
#[derive(Clone)]
pub(crate) struct Imports {
    store: Arc<dyn Store>,
    events: Events,
    /// Bounds parsing of large uploads (its own worker threads).
    parsing: WorkGate,
    /// The most accounts a user may hold after an import.
    account_limit: Option<u64>,
}

impl Imports {
    pub(crate) fn new(store: Arc<dyn Store>, events: Events, parsing: WorkGate) -> Self {
        Self {
            store,
            events,
            parsing,
            account_limit: None,
        }
    }

    /// Refuses imports that would leave a user with more than `limit` accounts
    /// ([`Config::max_accounts_per_user`](crate::Config::max_accounts_per_user)); none by
    /// default.
    #[must_use]
    pub(crate) fn with_account_limit(mut self, limit: u64) -> Self {
        self.account_limit = Some(limit);
        self
    }

    /// Imports the file for the user: into their `file_import` connection(s), or into the
    /// account `account_id` names. A dry run reports the same counts and writes nothing.
    pub(crate) async fn import(
        &self,
        user_id: Uuid,
        mut request: ImportRequest,
    ) -> Result<Imported, ImportError> {
        let existing = match request.account_id {
            Some(account_id) => Some(
                self.store
                    .account_for_user(user_id, account_id)
                    .await?
                    .ok_or(ImportError::AccountNotFound)?,
            ),
            None => None,
        };
        let format = request.format;
        // The upload is the request's only reference to the file: taken out here, it is freed
        // as soon as it is parsed (the parsing thread drops it with its closure), so that the
        // mapping and the store write never hold the file beside its records.
        let bytes = std::mem::take(&mut request.bytes);
        let parsed = if bytes.len() < INLINE_PARSE_LIMIT {
            format.parse_file(&bytes, request.mapping.as_ref())?
        } else {
            let mapping = request.mapping.clone();
            self.parsing
                .run(move || format.parse_file(&bytes, mapping.as_ref()))
                .await??
        };
        self.write(user_id, &request, parsed, existing.as_ref())
            .await
    }

    /// Maps a parsed file and writes (or previews) it. The parsed file is dropped once mapped,
    /// before the store write: the write holds the records alone.
    async fn write(
        &self,
        user_id: Uuid,
        request: &ImportRequest,
        parsed: Parsed,
        existing: Option<&AccountRecord>,
    ) -> Result<Imported, ImportError> {
        let at = now();
        let ParsedBatch {
            mut batch,
            warnings,
        } = batch_for(parsed, request, existing, at).map_err(ImportError::Refused)?;
        batch.origin = Some(request.format.as_str().to_owned());
        let count = batch
            .connections
            .iter()
            .map(|part| part.accounts.len())
            .sum();
        if count > MAX_ACCOUNTS_PER_IMPORT {
            return Err(ImportError::TooManyAccounts { count });
        }
        batch.account_limit = self.account_limit;
        let institutions = batch
            .connections
            .iter()
            .map(|part| match &part.target {
                BatchTarget::FileImport { alias } => alias.clone(),
                // The account the caller chose: its name stands for the institution.
                BatchTarget::Connection(_) => existing
                    .map(|account| account.name.clone())
                    .unwrap_or_default(),
            })
            .collect();
        if request.dry_run {
            let counts = self.store.preview_batch(user_id, &batch, at).await?;
            return Ok(Imported {
                format: request.format,
                counts,
                institutions,
                warnings,
                preview: Some(
                    batch
                        .connections
                        .into_iter()
                        .flat_map(|part| part.accounts)
                        .collect(),
                ),
            });
        }
        let mut raised = Vec::new();
        let counts = self
            .store
            .apply_batch(
                user_id,
                &batch,
                at,
                &import_events(user_id, at),
                &mut raised,
            )
            .await?;
        self.events.committed(&raised);
        self.events.emit(&DomainEvent::StatementImported {
            user_id,
            connection_id: counts.connection_ids.first().copied(),
            format: request.format.as_str(),
            accounts_created: counts.accounts.created,
            transactions_created: counts.transactions.created,
            transactions_updated: counts.transactions.updated,
            transactions_skipped: counts.transactions.unchanged,
        });
        Ok(Imported {
            format: request.format,
            counts,
            institutions,
            warnings,
            preview: None,
        })
    }

    /// Imports an already parsed file (unit tests of the framework, before the parsers).
    #[cfg(test)]
    pub(crate) async fn import_parsed(
        &self,
        user_id: Uuid,
        request: ImportRequest,
        file: ParsedFile,
    ) -> Result<Imported, ImportError> {
        let existing = match request.account_id {
            Some(account_id) => Some(
                self.store
                    .account_for_user(user_id, account_id)
                    .await?
                    .ok_or(ImportError::AccountNotFound)?,
            ),
            None => None,
        };
        self.write(user_id, &request, Box::new(file), existing.as_ref())
            .await
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use rust_decimal::Decimal;

    use super::*;
    use crate::WorkLimits;
    use crate::events::{EventBus, MemoryEventSink};
    use crate::import::model::EntryStatus;
    use crate::import::model::{ParsedAccount, ParsedBalance, ParsedEntry, ParsedStatement};
    use crate::store::{AccountFilter, NewUser, SqliteStore, TransactionQuery, TransactionStatus};

    struct Fixture {
        imports: Imports,
        store: Arc<dyn Store>,
        sink: MemoryEventSink,
        user_id: Uuid,
    }

    async fn user(store: &Arc<dyn Store>) -> Uuid {
        let user_id = Uuid::now_v7();
        store
            .create_user(&NewUser {
                id: user_id,
                email: format!("{user_id}@example.com"),
                email_normalized: format!("{user_id}@example.com"),
                password_hash: "x".to_owned(),
                created_at: now(),
            })
            .await
            .expect("user");
        user_id
    }

    async fn fixture() -> Fixture {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().await.expect("store"));
        let sink = MemoryEventSink::new();
        let imports = Imports::new(
            store.clone(),
            Events::new(Arc::new(sink.clone()), EventBus::default()),
            WorkGate::new(
                "test parsing",
                WorkLimits {
                    concurrent: 1,
                    queued: 1,
                },
            ),
        );
        let user_id = user(&store).await;
        Fixture {
            imports,
            store,
            sink,
            user_id,
        }
    }

    fn dec(text: &str) -> Decimal {
        text.parse().expect("decimal")
    }

    fn entry(date: &str, amount: &str, text: &str) -> ParsedEntry {
        ParsedEntry {
            date: date.parse().expect("date"),
            amount: dec(amount),
            text: Some(text.to_owned()),
            line: 1,
            ..ParsedEntry::default()
        }
    }

    fn request(format: Format) -> ImportRequest {
        ImportRequest {
            format,
            bytes: Bytes::new(),
            account_id: None,
            account_name: Some("Wallet".to_owned()),
            currency: Some("EUR".to_owned()),
            mapping: None,
            dry_run: false,
        }
    }

    /// A QIF-like file: no account named, two identical coffees on one day, one pending row.
    fn coffees() -> ParsedFile {
        let mut pending = entry("2024-03-02", "-9.99", "Books");
        pending.status = EntryStatus::Pending;
        ParsedFile {
            statements: vec![ParsedStatement {
                entries: vec![
                    entry("2024-03-01", "-3.50", "Coffee"),
                    entry("2024-03-01", "-3.50", "Coffee"),
                    pending,
                ],
                ..ParsedStatement::default()
            }],
            ..ParsedFile::default()
        }
    }

    #[tokio::test]
    async fn a_dry_run_reports_what_an_import_then_writes() {
        let f = fixture().await;
        let mut dry = request(Format::Qif);
        dry.dry_run = true;
        let preview = f
            .imports
            .import_parsed(f.user_id, dry, coffees())
            .await
            .expect("previewed");
        assert_eq!(
            (
                preview.counts.accounts.created,
                preview.counts.transactions.created
            ),
            (1, 3)
        );
        let accounts = preview.preview.expect("a preview");
        assert_eq!(accounts[0].fields().name, "Wallet");
        assert_eq!(accounts[0].fields().currency, "EUR");
        assert_eq!(accounts[0].rows().len(), 3, "two coffees stay two");
        assert!(f.sink.events().is_empty(), "no event for a dry run");
        let listed = f
            .store
            .accounts_for_user(f.user_id, &AccountFilter::default())
            .await
            .expect("accounts");
        assert!(listed.is_empty(), "nothing written");

        let imported = f
            .imports
            .import_parsed(f.user_id, request(Format::Qif), coffees())
            .await
            .expect("imported");
        assert!(imported.preview.is_none());
        assert_eq!(imported.counts.accounts.created, 1);
        assert_eq!(imported.counts.transactions.created, 3);
        assert_eq!(
            imported.counts.per_account[0].account_id.get_version_num(),
            7
        );
        assert_eq!(f.sink.events().len(), 1);
        let account_id = imported.counts.per_account[0].account_id;
        let rows = f
            .store
            .transactions_for_account(
                f.user_id,
                account_id,
                &TransactionQuery::Recent {
                    transaction_type: None,
                    limit: 10,
                    offset: 0,
                },
            )
            .await
            .expect("rows");
        assert!(
            rows.items
                .iter()
                .any(|row| row.status == TransactionStatus::Pending),
            "pending entries are pending"
        );

        let again = f
            .imports
            .import_parsed(f.user_id, request(Format::Qif), coffees())
            .await
            .expect("imported again");
        assert_eq!(
            (
                again.counts.accounts.created,
                again.counts.transactions.created,
                again.counts.transactions.unchanged
            ),
            (0, 0, 3),
            "the same file again creates nothing"
        );
    }

    #[tokio::test]
    async fn account_id_imports_into_the_chosen_account_only() {
        let f = fixture().await;
        let first = f
            .imports
            .import_parsed(f.user_id, request(Format::Csv), coffees())
            .await
            .expect("imported");
        let account_id = first.counts.per_account[0].account_id;
        // The same rows by account_id are the same transactions (the file states no account).
        let mut into = request(Format::Csv);
        into.account_name = None;
        into.currency = None;
        into.account_id = Some(account_id);
        let mut more = coffees();
        more.statements[0]
            .entries
            .push(entry("2024-03-03", "-1.00", "Tea"));
        let again = f
            .imports
            .import_parsed(f.user_id, into.clone(), more)
            .await
            .expect("imported");
        assert_eq!(again.counts.connection_ids, first.counts.connection_ids);
        assert_eq!(again.counts.per_account[0].account_id, account_id);
        assert_eq!(
            (
                again.counts.accounts.created,
                again.counts.transactions.created,
                again.counts.transactions.unchanged
            ),
            (0, 1, 3)
        );

        // Two accounts in the file cannot go into one.
        let mut two = coffees();
        two.statements[0].account.identifier = Some("DE1".to_owned());
        two.statements.push(ParsedStatement {
            account: ParsedAccount {
                identifier: Some("DE2".to_owned()),
                ..ParsedAccount::default()
            },
            ..ParsedStatement::default()
        });
        assert!(matches!(
            f.imports.import_parsed(f.user_id, into.clone(), two).await,
            Err(ImportError::Refused(Refusal::SeveralAccounts { count: 2 }))
        ));

        // Another user's account, and an unknown one, are not found.
        let stranger = user(&f.store).await;
        assert!(matches!(
            f.imports
                .import_parsed(stranger, into.clone(), coffees())
                .await,
            Err(ImportError::AccountNotFound)
        ));
        into.account_id = Some(Uuid::now_v7());
        assert!(matches!(
            f.imports.import_parsed(f.user_id, into, coffees()).await,
            Err(ImportError::AccountNotFound)
        ));
    }

    #[tokio::test]
    async fn a_balance_mismatch_is_imported_with_a_warning() {
        let f = fixture().await;
        let balance = |date: &str, amount: &str| ParsedBalance {
            amount: dec(amount),
            date: date.parse().expect("date"),
            currency: Some("EUR".to_owned()),
        };
        let file = ParsedFile {
            institution: Some("Example Bank".to_owned()),
            statements: vec![ParsedStatement {
                account: ParsedAccount {
                    identifier: Some("DE89370400440532013000".to_owned()),
                    ..ParsedAccount::default()
                },
                opening: Some(balance("2024-02-29", "100.00")),
                closing: Some(balance("2024-03-31", "90.00")),
                entries: vec![entry("2024-03-05", "-5.00", "Fee")],
                ..ParsedStatement::default()
            }],
            ..ParsedFile::default()
        };
        let mut request = request(Format::Camt053);
        request.account_name = None;
        let imported = f
            .imports
            .import_parsed(f.user_id, request, file)
            .await
            .expect("imported");
        assert_eq!(imported.institutions, ["Example Bank"]);
        assert_eq!(imported.warnings.len(), 1, "{:?}", imported.warnings);
        assert!(imported.warnings[0].message.contains("-5.00"));
        assert_eq!(imported.counts.transactions.created, 1);
        assert_eq!(imported.counts.snapshots_created, 1);
        let account = f
            .store
            .account_for_user(f.user_id, imported.counts.per_account[0].account_id)
            .await
            .expect("read")
            .expect("account");
        assert_eq!(account.balance_amount, dec("90.00"));
        assert_eq!(account.currency, "EUR");
    }
}
