//! Importing one uploaded statement file: parse it (large files on the parsing
//! [`WorkGate`]'s own threads), map it to records ([`super::records`]), apply it in one store
//! transaction, and report it as [`DomainEvent::StatementImported`].

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::ofx::{OfxError, parse_ofx};
use super::records::{Refusal, import_batch};
use crate::events::{
    DomainEvent, DurableEvent, Event, Events, ImportCompleted, ImportCompletedCounts, RowCounts,
};
use crate::store::{ImportCounts, Store, StoreError, now};
use crate::work::{WorkError, WorkGate};

/// Files at least this large are parsed on the parsing gate's threads rather than inline.
const INLINE_PARSE_LIMIT: usize = 64 * 1024;

/// Why a file was not imported.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImportError {
    /// The file is not a readable OFX/QFX statement file.
    #[error(transparent)]
    Unreadable(OfxError),
    /// The file was read but cannot be imported (failed sign-on, no statement).
    #[error(transparent)]
    Refused(Refusal),
    /// The parsing gate is saturated, or parsing failed to run.
    #[error(transparent)]
    Work(#[from] WorkError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an import wrote.
pub(crate) struct Imported {
    /// The counts of the store transaction.
    pub(crate) counts: ImportCounts,
    /// The institutions of the file, in file order (their connections' aliases).
    pub(crate) institutions: Vec<String>,
}

/// The rule of an import's events: its `import.completed` event, with the counts.
pub(crate) fn import_events(
    user_id: Uuid,
    at: DateTime<Utc>,
) -> impl Fn(&ImportCounts) -> Vec<Event> + Send + Sync {
    move |counts| vec![import_completed(user_id, counts).event_at(at)]
}

/// The `import.completed` event of an import that wrote `counts`.
fn import_completed(user_id: Uuid, counts: &ImportCounts) -> ImportCompleted {
    ImportCompleted {
        user_id,
        connection_ids: counts.connection_ids.clone(),
        counts: ImportCompletedCounts {
            accounts: RowCounts {
                created: counts.accounts_created,
                updated: counts.accounts_updated,
                unchanged: counts.accounts_unchanged,
            },
            transactions: RowCounts {
                created: counts.transactions_created,
                updated: counts.transactions_updated,
                unchanged: counts.transactions_skipped,
            },
            holdings: RowCounts {
                created: counts.holdings_created,
                updated: counts.holdings_updated,
                unchanged: counts.holdings_unchanged,
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
}

impl Imports {
    pub(crate) fn new(store: Arc<dyn Store>, events: Events, parsing: WorkGate) -> Self {
        Self {
            store,
            events,
            parsing,
        }
    }

    /// Imports the file's statements for the user into their `file_import` connection(s).
    /// `format` is the file's format code (`qfx`, `ofx`), as the event reports it.
    pub(crate) async fn import(
        &self,
        user_id: uuid::Uuid,
        format: &'static str,
        bytes: Bytes,
    ) -> Result<Imported, ImportError> {
        let document = if bytes.len() < INLINE_PARSE_LIMIT {
            parse_ofx(&bytes)
        } else {
            self.parsing.run(move || parse_ofx(&bytes)).await?
        }
        .map_err(ImportError::Unreadable)?;
        let at = now();
        let batch = import_batch(&document, at).map_err(ImportError::Refused)?;
        let mut raised = Vec::new();
        let counts = self
            .store
            .apply_import(
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
            format,
            accounts_created: counts.accounts_created,
            transactions_created: counts.transactions_created,
            transactions_updated: counts.transactions_updated,
            transactions_skipped: counts.transactions_skipped,
        });
        Ok(Imported {
            counts,
            institutions: batch
                .institutions
                .into_iter()
                .map(|institution| institution.alias)
                .collect(),
        })
    }
}
