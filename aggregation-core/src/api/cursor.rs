//! The opaque `next_cursor` of the listings paged by the id of a page's last row (holdings,
//! balance history): base64url (no padding) of a byte naming the listing and the row's id, so
//! a cursor of one listing is refused by another and the layout can change without clients
//! noticing. Every such cursor is 23 characters of `[A-Za-z0-9_-]` (the pattern the listings'
//! OpenAPI parameters give).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{Datelike as _, NaiveDate};
use uuid::Uuid;

use super::validate::query;
use crate::problem::FieldError;
use crate::store::TransactionPosition;

/// The listing a cursor belongs to (its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// `GET /holdings` and `GET /accounts/{id}/holdings`.
    Holdings,
    /// `GET /accounts/{id}/balance-history`.
    BalanceHistory,
}

impl Listing {
    fn tag(self) -> u8 {
        match self {
            Self::Holdings => b'H',
            Self::BalanceHistory => b'S',
        }
    }
}

/// The tag byte, then the id's 16 bytes.
const CURSOR_BYTES: usize = 1 + 16;

/// The cursor naming the row with this id in this listing.
pub(crate) fn encode(listing: Listing, id: Uuid) -> String {
    let mut token = [0u8; CURSOR_BYTES];
    token[0] = listing.tag();
    token[1..].copy_from_slice(id.as_bytes());
    URL_SAFE_NO_PAD.encode(token)
}

/// The id a cursor of this listing names; `None` for anything [`encode`] did not make for it.
fn decode(listing: Listing, cursor: &str) -> Option<Uuid> {
    let token = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let token: [u8; CURSOR_BYTES] = token.try_into().ok()?;
    if token[0] != listing.tag() {
        return None;
    }
    Uuid::from_slice(&token[1..]).ok()
}

/// The `cursor` query parameter: absent or empty (the first page), or the id of the row a page starts
/// after. Anything else is 422 `query.cursor`.
pub(crate) fn parameter(listing: Listing, raw: Option<String>) -> Result<Option<Uuid>, FieldError> {
    // Empty is the first page, as the schema's pattern says; anything else must be a cursor
    // exactly as issued (no trimming).
    let Some(raw) = raw.filter(|raw| !raw.is_empty()) else {
        return Ok(None);
    };
    decode(listing, &raw).map(Some).ok_or_else(invalid_cursor)
}

/// The page's rows (the store returned up to `limit + 1`), whether more follow, and the cursor
/// of the next page.
pub(crate) fn split_page<T>(
    listing: Listing,
    mut rows: Vec<T>,
    limit: u32,
    id: impl Fn(&T) -> Uuid,
) -> (Vec<T>, Option<String>) {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if rows.len() <= limit {
        return (rows, None);
    }
    rows.truncate(limit);
    let next = rows.last().map(|row| encode(listing, id(row)));
    (rows, next)
}

/// The listings of transactions paged by a row's position (date, then id): their cursors
/// carry the position, so they are longer (28 characters) than the id cursors above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PositionListing {
    /// `GET /accounts/{id}/transactions` over a date range, oldest first (the first
    /// version of these cursors: its tag is 1).
    AccountRange,
    /// `GET /accounts/{id}/transactions`, newest first.
    AccountRecent,
    /// `GET /transactions` (the search across accounts), newest first.
    Search,
}

impl PositionListing {
    fn tag(self) -> u8 {
        match self {
            Self::AccountRange => 1,
            Self::AccountRecent => b'R',
            Self::Search => b'Q',
        }
    }
}

/// The tag byte, days since 0001-01-01 (big-endian `i32`), the id's 16 bytes.
const POSITION_BYTES: usize = 1 + 4 + 16;

/// The cursor naming this position in this listing.
pub(crate) fn encode_position(listing: PositionListing, position: TransactionPosition) -> String {
    let mut token = [0u8; POSITION_BYTES];
    token[0] = listing.tag();
    token[1..5].copy_from_slice(&position.transaction_date.num_days_from_ce().to_be_bytes());
    token[5..].copy_from_slice(position.id.as_bytes());
    URL_SAFE_NO_PAD.encode(token)
}

/// The position a cursor of this listing names; `None` for anything [`encode_position`] did
/// not make for it.
pub(crate) fn decode_position(
    listing: PositionListing,
    cursor: &str,
) -> Option<TransactionPosition> {
    let token = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let token: [u8; POSITION_BYTES] = token.try_into().ok()?;
    if token[0] != listing.tag() {
        return None;
    }
    let days = i32::from_be_bytes(token[1..5].try_into().ok()?);
    let transaction_date = NaiveDate::from_num_days_from_ce_opt(days)?;
    let id = Uuid::from_slice(&token[5..]).ok()?;
    Some(TransactionPosition {
        transaction_date,
        id,
    })
}

/// The 422 of a cursor that is not one this listing issued.
pub(crate) fn invalid_cursor() -> FieldError {
    query::error(
        "cursor",
        "invalid_cursor",
        "Must be the next_cursor of a previous page, unchanged.",
    )
}

/// The `cursor` query parameter of a position listing: absent or empty (the first page), or
/// a cursor this listing issued; anything else, another listing's cursor included, is 422
/// `query.cursor`.
pub(crate) fn position_parameter(
    listing: PositionListing,
    raw: Option<String>,
) -> Result<Option<TransactionPosition>, FieldError> {
    let Some(raw) = raw.filter(|raw| !raw.is_empty()) else {
        return Ok(None);
    };
    decode_position(listing, &raw)
        .map(Some)
        .ok_or_else(invalid_cursor)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever a client sends as a cursor is a position of its own listing or a 422,
        /// never a panic; and every issued cursor reads back as its id.
        #[test]
        fn any_cursor_is_a_position_or_422(
            raw in "[A-Za-z0-9_=+/ -]{0,40}|\\PC{0,30}",
            bytes in proptest::collection::vec(any::<u8>(), 16),
        ) {
            for listing in [Listing::Holdings, Listing::BalanceHistory] {
                if let Ok(Some(id)) = parameter(listing, Some(raw.clone())) {
                    prop_assert_eq!(encode(listing, id), raw.clone());
                }
                let id = Uuid::from_slice(&bytes).unwrap_or_default();
                prop_assert_eq!(
                    parameter(listing, Some(encode(listing, id))).ok(),
                    Some(Some(id))
                );
            }
        }
    }

    #[test]
    fn a_cursor_names_its_row_in_its_own_listing_only() {
        let id = Uuid::now_v7();
        let cursor = encode(Listing::Holdings, id);
        assert_eq!(cursor.len(), 23);
        assert_eq!(
            parameter(Listing::Holdings, Some(cursor.clone())).ok(),
            Some(Some(id))
        );
        assert!(parameter(Listing::BalanceHistory, Some(cursor)).is_err());
        for garbage in [
            "x",
            "SAGS86QREX2OnwARIjNEVW",
            "SAGS86QREX2OnwARIjNEVWY=",
            "é",
        ] {
            assert!(parameter(Listing::Holdings, Some(garbage.to_owned())).is_err());
        }
        assert_eq!(parameter(Listing::Holdings, None).ok(), Some(None));
        // Empty is the first page; blanks are not a cursor as issued.
        assert_eq!(
            parameter(Listing::Holdings, Some(String::new())).ok(),
            Some(None)
        );
        assert!(parameter(Listing::Holdings, Some(" ".to_owned())).is_err());
    }

    #[test]
    fn position_cursors_round_trip_in_their_own_listing_only() {
        let position = TransactionPosition {
            transaction_date: NaiveDate::from_ymd_opt(2024, 2, 29).expect("date"),
            id: Uuid::now_v7(),
        };
        let listings = [
            PositionListing::AccountRange,
            PositionListing::AccountRecent,
            PositionListing::Search,
        ];
        for listing in listings {
            let cursor = encode_position(listing, position);
            assert_eq!(cursor.len(), 28);
            assert_eq!(
                position_parameter(listing, Some(cursor.clone())).ok(),
                Some(Some(position))
            );
            for other in listings.into_iter().filter(|other| *other != listing) {
                assert!(position_parameter(other, Some(cursor.clone())).is_err());
            }
            assert!(position_parameter(listing, Some(format!("{cursor}A"))).is_err());
            assert!(position_parameter(listing, Some(cursor[..27].to_owned())).is_err());
        }
        assert_eq!(
            position_parameter(PositionListing::Search, Some(String::new())).ok(),
            Some(None)
        );
        assert!(position_parameter(PositionListing::Search, Some("\"*NEAR".to_owned())).is_err());
    }

    #[test]
    fn a_page_past_its_limit_is_cut_and_names_its_last_row() {
        let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
        let (rows, next) = split_page(Listing::Holdings, ids.clone(), 2, |id| *id);
        assert_eq!(rows, ids[..2]);
        assert_eq!(next, Some(encode(Listing::Holdings, ids[1])));
        let (rows, next) = split_page(Listing::Holdings, ids.clone(), 3, |id| *id);
        assert_eq!((rows, next), (ids, None));
    }
}
