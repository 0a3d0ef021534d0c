//! Extractors that hold one of the caller's per-user slots ([`crate::user_slots`]) for as
//! long as the handler runs: [`ImportSlot`] (imports) and [`HeavyRead`] (net worth, the
//! portfolio, the export). One more than the limit is 429 `rate_limit_exceeded` with `Retry-After: 1`:
//! the slots are short-lived, so a retry a second later usually finds one free.
//!
//! Placed after [`User`] among a handler's arguments, the check runs after the token's (401
//! first) and, for an import, before its body is streamed in, so a held slot also bounds how
//! many uploads of one user are being read at once.

use http::request::Parts;

use super::extract::User;
use super::handler::FromParts;
use super::openapi::{DescribeArg, OperationDoc};
use crate::app::App;
use crate::problem::{ApiError, ErrorCode};
use crate::user_slots::{SlotRefused, UserSlot, UserSlots};

/// `Retry-After` of a refusal: the operations that hold the slots end within seconds.
const RETRY_AFTER_SECS: u64 = 1;

/// A slot of `slots` for the request's user, or the refusal naming `what`.
async fn acquire(
    parts: &Parts,
    app: &App,
    slots: &UserSlots,
    what: &str,
) -> Result<UserSlot, ApiError> {
    let User(claims) = User::from_parts(parts, app).await?;
    slots
        .try_acquire(claims.sub)
        .map_err(|refused| match refused {
            SlotRefused::UserBusy { running } => ApiError::rate_limited_because(
                RETRY_AFTER_SECS,
                format!(
                    "{running} of your {what} are running already, the most at once; retry when \
                 one has finished."
                ),
            ),
            SlotRefused::InstanceBusy => ApiError::busy(RETRY_AFTER_SECS),
        })
}

/// One of the caller's import slots, held until the import is answered.
pub(crate) struct ImportSlot(#[expect(dead_code, reason = "held until dropped")] UserSlot);

impl FromParts for ImportSlot {
    async fn from_parts(parts: &Parts, app: &App) -> Result<Self, ApiError> {
        acquire(parts, app, &app.running_imports, "imports")
            .await
            .map(Self)
    }
}

/// One of the caller's heavy-read slots, held until the read is answered (or, for a
/// streamed answer, until [`HeavyRead::into_slot`]'s owner drops it).
pub(crate) struct HeavyRead(UserSlot);

impl HeavyRead {
    /// The slot, for a stream to hold until it ends.
    pub(crate) fn into_slot(self) -> UserSlot {
        self.0
    }
}

impl FromParts for HeavyRead {
    async fn from_parts(parts: &Parts, app: &App) -> Result<Self, ApiError> {
        acquire(
            parts,
            app,
            &app.heavy_reads,
            "heavy reads (net worth, portfolio, export, search, spending, rule previews)",
        )
        .await
        .map(Self)
    }
}

impl DescribeArg for ImportSlot {
    fn describe(doc: &mut OperationDoc) {
        doc.error(ErrorCode::RateLimitExceeded);
    }
}

impl DescribeArg for HeavyRead {
    fn describe(doc: &mut OperationDoc) {
        doc.error(ErrorCode::RateLimitExceeded);
    }
}
