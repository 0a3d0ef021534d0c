//! ISO 20022 cash-management statements: CAMT.052 (Bank to Customer Account Report), CAMT.053
//! (Bank to Customer Statement) and CAMT.054 (Bank to Customer Debit/Credit Notification), every
//! version `camt.05x.001.NN` (001.01 through 001.13 and any later `NN`), in the ISO
//! (`urn:iso:std:iso:20022:tech:xsd:`) or SWIFT (`urn:swift:xsd:`) namespace form.
//!
//! [`sniff`] recognises a file by its namespace within its first 8 KiB; [`parse`] reads it into
//! a [`ParsedFile`].
//!
//! # How it reads
//!
//! One pass of `quick-xml`'s event reader over the text, with a stack of the open elements'
//! local names (namespace prefixes are ignored) and no tree of the document: each `Stmt`,
//! `Rpt` or `Ntfctn` is built while it is read, and each `Ntry` becomes rows when its end tag
//! is read. Memory beyond the input and the result is one entry and its transaction details.
//! XML is read strictly (end tags must match, a bare `&` is an error); document type
//! declarations are refused and never expanded; the five XML entities and numeric character
//! references are the only references decoded, any other `&name;` is an error. Nesting deeper
//! than [`MAX_DEPTH`] elements is an error. Every error names the line it is on.
//!
//! # What is read
//!
//! - **Statement**: each `Stmt` (053), `Rpt` (052) and `Ntfctn` (054) is one
//!   [`ParsedStatement`]. Account: `Acct/Id/IBAN`, else `Acct/Id/Othr/Id`; `Acct/Ccy` (else the
//!   currency of its first balance or entry); `Acct/Nm`; `Acct/Tp/Cd` (`SVGS` savings, `CARD`
//!   credit card, anything else a current account). The file's institution is the first
//!   statement's servicer: `Acct/Svcr/FinInstnId/Nm`, else its `BICFI`/`BIC`.
//! - **Balances** by `Bal/Tp/CdOrPrtry/Cd` (else `Prtry`), signed by `CdtDbtInd` (`DBIT`
//!   negative), dated by `Dt/Dt` or the date of `Dt/DtTm`:
//!   - opening: `OPBD` (opening booked), else `PRCD` (previously closed booked). A balance's
//!     date in the model is the end of the day it held at. `PRCD` is the previous statement's
//!     closing balance and its date is already that day, so it is kept. `OPBD` dated `D` is the
//!     balance at the start of `D`, which is the end of `D - 1`: **an `OPBD` is dated one day
//!     before the date the file gives**, so that either code gives the same opening for the same
//!     statement.
//!   - closing: `CLBD`, else `ITBD` (interim booked, the "closing" of an intraday 052 report).
//!   - available: `CLAV`, else `ITAV`.
//!   - other codes (`OPAV`, `FWAV`, `PRCD` after an `OPBD`, `INFO`, `XPCD`, …) are ignored. A
//!     balance whose amount or date cannot be read is left out with a warning.
//! - **Entries** (`Ntry`): `Amt` and its `Ccy` (else the account's currency), signed by
//!   `CdtDbtInd`; `Sts` as text (up to 001.07) or `Sts/Cd` (001.08 on; also `Sts/Prtry`):
//!   `BOOK` booked, `PDNG`, `INFO` and `FUTR` pending, anything else booked with a warning;
//!   date: `BookgDt`, else `ValDt`, else (pending 052 entries without either) the statement's
//!   `FrToDt/ToDtTm` or `CreDtTm` with a warning; `ValDt` is the value date when it differs.
//!   Reference: `AcctSvcrRef`, else the single transaction detail's `Refs/AcctSvcrRef`, else its
//!   `Refs/TxId`. Counterparty: for money in, the debtor (`RltdPties/Dbtr/Nm`, or
//!   `RltdPties/Dbtr/Pty/Nm` from 001.08 on); for money out, the creditor; never the other side
//!   (it is the account owner). Text: every `RmtInf/Ustrd` joined with a space (else the
//!   structured creditor reference `RmtInf/Strd/CdtrRefInf/Ref`), then `AddtlTxInf` and
//!   `AddtlNtryInf` after ` / ` when they add something. Code: `BkTxCd/Domn/Cd`, `Fmly/Cd`
//!   and `Fmly/SubFmlyCd` joined with `/` (`PMNT/RCDT/ESCT`), else `BkTxCd/Prtry/Cd`; a
//!   transaction detail's own code wins over the entry's. Kind: charges and fees (`CHRG`,
//!   `FEES`, `COMM`, `COMT` sub-families or family) are fees, interest (`INTR`) is income, any
//!   other `PMNT` code a transfer.
//! - **Batch entries**: an entry with two or more `NtryDtls/TxDtls` becomes one row per detail
//!   when every detail has an amount (`TxDtls/Amt` from 001.03 on, else
//!   `AmtDtls/TxAmt/Amt`) in the entry's currency and the details' signed amounts (their own
//!   `CdtDbtInd`, else the entry's) add up to the entry's amount. Each row takes the detail's
//!   reference (`Refs/AcctSvcrRef`, else `Refs/TxId`, else the entry's `AcctSvcrRef` with
//!   `/1`, `/2`, … appended), parties, text and code, and the entry's dates and status.
//!   Otherwise (charges deducted, amounts missing, another currency) the entry stays one row
//!   with its own amount and a warning.
//!
//! # Choices
//!
//! - **Reversals** (`RvslInd` true): ISO 20022 says `CdtDbtInd` already gives the direction of
//!   the reversal itself (a reversed debit is reported as a credit), so the sign comes from
//!   `CdtDbtInd` alone. Some banks report a reversal with the original's indicator instead.
//!   When a statement's opening plus booked entries misses its closing balance, and flipping
//!   the sign of its reversal entries makes it match exactly, those signs are flipped and a
//!   warning says so; otherwise nothing is changed (the importer's balance check then warns).
//! - **Duplicate references**: a reference must identify one entry. A reference that appears on
//!   more than one row of the same statement (some banks repeat a batch's reference on every
//!   row, or write `NOTPROVIDED`) is dropped from all those rows, with one warning, so they are
//!   identified by their content and ordinal instead; the placeholders `NOTPROVIDED`, `NONREF`
//!   and `NONE` are never references. The same reference in two statements of a file is kept:
//!   that is the same booking reported twice, which the importer's dedupe collapses.
//! - **Amounts** may have leading zeros (`000000000000149.87`), a leading `+`, and `,` as the
//!   decimal separator; a leading `-` flips the sign given by `CdtDbtInd`. Anything else (a
//!   thousands separator, letters) is an error in an entry and a warning in a balance.
//! - **Dates**: `YYYY-MM-DD` or `YYYYMMDD`, with or without a zone (`Z`, `+01:00`); a
//!   date-time's date is the date as written in the bank's own time (any number of fraction
//!   digits), never converted to UTC.
//! - **Text**: UTF-8 (a byte-order mark is dropped); UTF-16 with a byte-order mark; a file
//!   that declares `windows-1250`, `ISO-8859-2` or `cp852` is read in it, one that declares
//!   another ISO-8859-x or Windows-125x as Windows-1252; the bytes of an undeclared file that
//!   are not valid UTF-8 in the code page they read best in (see `import::codepage`). Values are trimmed and runs of whitespace (line breaks inside `Ustrd`)
//!   become one space.
//! - **001.01**: the message element carries the version (`BkToCstmrAcctRptV01`,
//!   `BkToCstmrStmtV01`, `BkToCstmrDbtCdtNtfctnV01`), an account without IBAN is
//!   `Id/PrtryAcct/Id`, `Id/BBAN` or `Id/UPIC`, and a balance's type may be `Tp/Cd`.
//! - **Sums are checked**: a batch's details, and a statement's opening balance plus its
//!   entries, that add up past the largest decimal are an error naming the line where the sum
//!   overflows. Joining a batch's texts and dropping repeated references use sets (one pass).
//! - The document element must be `Document` (or the message element itself); its namespace
//!   must be a `camt.052`, `camt.053` or `camt.054` one, or absent. Unknown elements (`Chrgs`,
//!   `Intrst`, `SplmtryData`, proprietary extensions) are skipped. A file without any statement
//!   is read as having none, with a warning.
//!
//! Quirks learned from public material, each with a fixture and a test, are listed in
//! `import/camt/QUIRKS.md`.

mod build;
mod reader;
mod text;
mod values;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use super::model::{ParseError, ParsedFile};

/// The deepest nesting of elements accepted (real files nest about fifteen deep).
pub(crate) const MAX_DEPTH: usize = 64;

/// How many bytes [`sniff`] looks at.
const SNIFF_BYTES: usize = 8 * 1024;

/// The ISO 20022 cash-management message a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CamtMessage {
    /// `camt.052`: Bank to Customer Account Report (intraday or end-of-day).
    Report,
    /// `camt.053`: Bank to Customer Statement.
    Statement,
    /// `camt.054`: Bank to Customer Debit/Credit Notification.
    Notification,
}

/// The message named by a namespace that holds `camt.05x.001.NN` (`urn:iso:std:iso:20022:tech:
/// xsd:camt.053.001.08`, the early SWIFT form `urn:swift:xsd:camt.053.001.01`, any version
/// `NN`), found anywhere in `text`.
fn namespace_message(text: &str) -> Option<CamtMessage> {
    const PREFIX: &str = "camt.05";
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let tail = &rest[at + PREFIX.len()..];
        let bytes = tail.as_bytes();
        let message = match bytes.first() {
            Some(b'2') => Some(CamtMessage::Report),
            Some(b'3') => Some(CamtMessage::Statement),
            Some(b'4') => Some(CamtMessage::Notification),
            _ => None,
        };
        let in_namespace = rest[..at].ends_with(":xsd:") || rest[..at].ends_with(":xsd:$");
        if let Some(message) = message
            && in_namespace
            && tail.get(1..6) == Some(".001.")
            && bytes.get(6).is_some_and(u8::is_ascii_digit)
        {
            return Some(message);
        }
        rest = tail;
    }
    None
}

/// Whether `bytes` is a CAMT.052/053/054 document, and which: an XML document (after an optional
/// byte-order mark and whitespace, it starts with `<`) that names a `…:xsd:camt.05x.001.NN`
/// namespace in its first 8 KiB.
pub(crate) fn sniff(bytes: &[u8]) -> Option<CamtMessage> {
    let head = bytes.get(..SNIFF_BYTES).unwrap_or(bytes);
    let text = text::decode(head);
    let start = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}');
    if !start.starts_with('<') {
        return None;
    }
    namespace_message(&text)
}

/// Reads a CAMT.052, CAMT.053 or CAMT.054 file (see the module documentation).
///
/// # Errors
///
/// A [`ParseError`] naming the line and the reason when the file is not well-formed XML, has a
/// document type declaration or an undefined entity, nests too deep, is not a CAMT document, or
/// has an entry whose amount, sign or date cannot be read.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedFile, ParseError> {
    let text = text::decode(bytes);
    if text
        .trim_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}' || c == '\0')
        .is_empty()
    {
        return Err(ParseError::new(0, "the file is empty"));
    }
    reader::read(&text)
}
