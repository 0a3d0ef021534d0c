//! SWIFT MT940 (customer statement) and MT942 (interim transaction report) files, as banks
//! hand them to their customers: one or several statements per file, with or without SWIFT
//! block framing, in each bank's dialect.
//!
//! # What is read
//!
//! - Framing: SWIFT messages `{1:…}{2:…}{3:…}{4:` … `-}` (`{5:…}` trailers ignored), the
//!   blocks on one line or on several, several messages per file; plain files without blocks,
//!   with or without header lines, statements separated by `-` lines (or not at all); CR, LF and
//!   CRLF line ends.
//! - `:20:` starts a statement (so does a second `:25:` in a statement that has no `:20:`);
//!   `:21:`, `:28:`/`:28C:`, `:13:`/`:13D:`, `:90D:`/`:90C:`, `:65:` and `:NS:` are read past.
//! - `:25:` is the account's identifier: an IBAN or `BLZ/Konto`, a currency suffix split off.
//! - `:60F:`/`:60M:` opening, `:62F:`/`:62M:` closing, `:64:` available balance.
//! - `:61:` entries with `:86:` details; MT942 entries (a message whose block 2 or header says
//!   942, or a statement with `:34F:`/`:13D:`/`:90D:`/`:90C:` and no balance) are
//!   [`EntryStatus::Pending`].
//!
//! # Choices
//!
//! - An entry's date is its booking (entry) date when the `:61:` line states one, else its
//!   value date; `value_date` is set when the two differ. A value date past its month's end
//!   (`160230`) is the month's last day, with a warning.
//! - Its reference is the bank reference after `//` when present and not `NONREF`, else the
//!   customer reference unless `NONREF`, else `None` (the importer then derives an identity).
//! - Its currency is the statement's: the opening balance's, else the closing balance's, else
//!   `:34F:`/`:90D:`/`:90C:`, else the `:25:` suffix.
//! - Its code is the SWIFT transaction type (`NTRF`, `N062`, `S020`); `TRF`, `STO`, `DDT`,
//!   `CHK`… are transfers, `INT`/`DIV` income, `CHG`/`COM`/`FEE` fees, `SEC` trades.
//! - Text: the `:86:` purpose (`?20`–`?29`, `?60`–`?63`; the `SVWZ+` part when the purpose uses
//!   the SEPA keywords; `/REMI/` of the Dutch form), else the posting text `?00`, else the
//!   whole free text, else the `:61:` supplementary details. Counterparty: `?32`+`?33`, Dutch
//!   `/NAME/` or `/CNTP/`. `?30`/`?31` (the other party's bank and account) are not kept: the
//!   model has no place for them.
//! - A `:61:` line that cannot be read is an error naming its line; a balance that cannot be
//!   read is a warning and no balance; an entry date that cannot be read is a warning and the
//!   value date is used.
//! - A file with no statement at all (no account, balance or entry) is an error.
//!
//! # Quirks handled
//!
//! Each is learned from public bank format documents and importers' issue trackers, and each
//! has a fixture of our own and a test in `mt940/tests.rs` (named after the quirk):
//!
//! 1. `swift_blocks_on_one_line_and_on_several`: `{1:}{2:}{4:` on one line (Indian and Polish
//!    banks) or one block per line (ING Netherlands); `-}` ends the message; `{5:}` trailers.
//! 2. `plain_file_with_header_lines`: ABN AMRO writes `ABNANL2A` / `940` / `ABNANL2A` before
//!    the fields, MultiCash exports `940 02`; the BIC becomes the institution.
//! 3. `statements_without_20`: ABN AMRO day statements have no `:20:`; a second `:25:` starts
//!    the next statement.
//! 4. `no_separator_and_no_final_dash`: statements follow each other with no `-` line (Deutsche
//!    Bank), and the last one has no closing `-` (Luxembourg banks).
//! 5. `entry_date_rolls_over_new_year`: the `MMDD` entry date takes the year that puts it
//!    nearest the value date, in both directions around New Year.
//! 6. `reversals_rd_in_rc_out`: `RD` (reversal of a debit, German "Storno") is money in, `RC`
//!    money out.
//! 7. `funds_code_letter`: German banks add the currency's third letter after the mark
//!    (`CR`, `DR`, `RDR`), which must not be read as part of the mark.
//! 8. `amount_forms`: `1000,` without decimals, `,50` without units.
//! 9. `transaction_types_and_references`: `NTRF`, `N062`, Polish `S020`, `NONREF`, a bank
//!    reference after `//` longer than 16 characters (Polish instant payments), supplementary
//!    details on the second line.
//! 10. `german_structured_86`: `?00` posting text, `?20`–`?29` and `?60`–`?63` purpose, `?32`
//!     and `?33` name, SEPA keywords `EREF+`/`SVWZ+` in the purpose.
//! 11. `subfield_split_by_line_break`: Sparkassen and Volksbanken break lines inside a subfield
//!     marker (`?3` / `1DE…`, `?` / `31…`).
//! 12. `polish_separators`: ING and other Polish banks use `~` or `<` instead of `?`, and send
//!     a bare `:86:020` before the structured `:86:`.
//! 13. `dutch_structured_86`: `/TRTP/…/NAME/…/REMI/…` (ABN AMRO, ING, Deutsche Bank NL) and
//!     Rabobank's `/CNTP/iban/bic/name/city/` and `/REMI/USTD//…/`, cut mid-word at line ends.
//! 14. `broken_lines_in_tags`: a Sparkasse line break inside `:61:` before the amount, and
//!     one inside the tag (`:` / `86:…`).
//! 15. `continuation_line_starting_with_colon`: a `:86:` continuation that starts with a colon
//!     (`:08 Karten…`, Deutsche Bank) is text, not a tag.
//! 16. `account_forms`: `BLZ/Konto`, IBAN with a currency suffix (`…EUR`, ING Netherlands),
//!     with a space before it, with spaces inside, with a leading `/` (ING Poland).
//! 17. `intermediate_balances_and_pages`: `:60M:`/`:62M:` page balances, each `:28C:` page its
//!     own statement; a `-` between `:60M:` and the first `:61:` (a Kreissparkasse) is ignored
//!     when nothing but the balance came before it.
//! 18. `mt942_pending`: `:34F:` without a D/C mark (mBank), `:13D:` and `:13:`, `:90D:`/`:90C:`
//!     sums, `EC`/`ED` expected entries.
//! 19. `character_sets`: UTF-8, else one single-byte code page for the whole file (decided
//!     per file; German and other Western files come out as Windows-1252, see quirk 23); a
//!     stray `?` standing for a character outside the SWIFT X set stays text.
//! 20. `trailing_padding_and_blank_lines`: lines padded with blanks to a fixed width, blank
//!     lines between statements, a byte-order mark.
//! 21. `two_86_lines_for_one_entry`: a second `:86:` for the same entry is appended.
//! 22. `multicash_ns_fields_and_padded_amounts`: MultiCash `:NS:` (non-SWIFT) fields are read
//!     past, and amounts zero-padded to the full 15 characters read as numbers.
//! 23. `polish_code_pages`: Polish banks write MT940 in Windows-1250, older software in DOS
//!     code page 852 (and some in ISO-8859-2); nothing in the file says which. A file that is
//!     not UTF-8 is read in the code page whose reading of its bytes above ASCII gives the
//!     letters of the language (`ą ł ż ó`) rather than symbols and box drawing; a tie (German
//!     umlauts read the same in Windows-1250 and Windows-1252) stays Windows-1252. See
//!     `import::codepage`.
//! 24. `statement_lines_of_other_banks`: transaction types of any letter and three letters,
//!     digits or blanks (`NOV `, `S   ` before the reference `X`, `N024`, `MCI0`), an entry
//!     date of four blanks, a funds-code letter after the mark (`DD212,39`), a blank before the
//!     amount, a value date past its month's end (`160230`: the month's last day, with a
//!     warning), balances zero-padded past 15 characters.
//! 25. `several_statements_and_accounts_in_one_file`: `:25:` before `:20:`, `:25P:` (the BIC
//!     on its second line), a page without `:25:` (the account of the statement before it,
//!     with a warning), a statement without balances (the currency of the same account's other
//!     statements), Dutch dotted account numbers with a currency suffix (`1234.56.789EUR`).
//!
//! Amounts are added with checked arithmetic (opening balance plus entries, in file order): a
//! sum past the largest decimal is an error naming the entry's line. An entry's `:86:` lines
//! are read once, when its last one is in, so many `:86:` fields cost linear time.

mod fields;
mod lex;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use self::fields::Details;
use self::lex::{Field, Item};
use super::model::{
    AccountKind, EntryStatus, ParseError, ParseWarning, ParsedEntry, ParsedFile, ParsedStatement,
    check_statement_sums,
};

/// The two SWIFT statement messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MtMessage {
    /// MT940 customer statement.
    Mt940,
    /// MT942 interim transaction report (entries pending).
    Mt942,
}

/// How much of the file [`sniff`] looks at.
const SNIFF_BYTES: usize = 8 * 1024;

/// Content detection: a SWIFT block 2 naming 940 or 942, or, in a plain file, a line starting
/// with `:20:` or `:25:` and one with `:60F:`, `:60M:`, `:61:`, `:28C:`, `:34F:` or `:13D:`, in
/// the first few KiB. MT942 when block 2 says so, or when `:34F:` or `:13D:` appears and no
/// opening balance does.
pub(crate) fn sniff(bytes: &[u8]) -> Option<MtMessage> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    let text = String::from_utf8_lossy(head);
    for marker in ["{2:I", "{2:O"] {
        if let Some(at) = text.find(marker) {
            match text.get(at + 4..at + 7) {
                Some("940") => return Some(MtMessage::Mt940),
                Some("942") => return Some(MtMessage::Mt942),
                _ => {}
            }
        }
    }
    let mut start = false;
    let mut body = false;
    let mut opening = false;
    let mut interim = false;
    for line in text.lines() {
        let line = line.trim_start_matches('\u{feff}');
        if line.starts_with(":20:") || line.starts_with(":25:") {
            start = true;
        }
        if line.starts_with(":60F:") || line.starts_with(":60M:") {
            opening = true;
            body = true;
        }
        if line.starts_with(":61:") || line.starts_with(":28C:") || line.starts_with(":62F:") {
            body = true;
        }
        if line.starts_with(":34F:") || line.starts_with(":13D:") {
            interim = true;
            body = true;
        }
    }
    match (start && body, interim && !opening) {
        (false, _) => None,
        (true, true) => Some(MtMessage::Mt942),
        (true, false) => Some(MtMessage::Mt940),
    }
}

/// Reads an MT940 or MT942 file. See the module documentation.
pub(crate) fn parse(bytes: &[u8]) -> Result<ParsedFile, ParseError> {
    let text = lex::decode(bytes);
    if text.trim().is_empty() {
        return Err(ParseError::new(0, "the file is empty"));
    }
    let lines = lex::lines(&text);
    let items = lex::items(&lines);
    let mut reader = Reader::default();
    let mut fields = 0usize;
    for item in items {
        match item {
            Item::MessageStart { sender, message } => {
                reader.finish()?;
                if reader.file.institution.is_none() {
                    reader.file.institution = sender;
                }
                if message.is_some() {
                    reader.message = message;
                }
            }
            Item::Header { sender, message } => {
                if reader.file.institution.is_none() {
                    reader.file.institution = sender;
                }
                if message.is_some() {
                    reader.message = message;
                }
            }
            Item::End => reader.end()?,
            Item::Field(field) => {
                fields += 1;
                reader.field(&field)?;
            }
        }
    }
    reader.finish()?;
    reader.fill_accounts();
    if reader.file.statements.is_empty() {
        let reason = if fields == 0 {
            "no MT940/MT942 field (`:20:`, `:25:`, `:61:`…) in the file"
        } else {
            "no statement with an account, a balance or an entry in the file"
        };
        return Err(ParseError::new(0, reason));
    }
    Ok(reader.file)
}

/// One statement being read.
#[derive(Debug, Default)]
struct Current {
    statement: ParsedStatement,
    /// The line the statement starts on.
    line: usize,
    has_account: bool,
    /// `:20:` seen.
    has_reference: bool,
    /// `:34F:`, `:13D:`, `:90D:`/`:90C:` seen.
    interim_tags: bool,
    /// The currency of `:34F:`/`:90x:`.
    interim_currency: Option<String>,
    /// The currency suffix of `:25:`.
    account_currency: Option<String>,
    /// Whether `:86:` lines now belong to the last entry.
    entry_open: bool,
    /// The last entry's raw `:86:` lines, read when the entry's details are complete.
    details: Vec<String>,
}

impl Current {
    /// Reads the last entry's `:86:` lines into its text and counterparty. Called once, when
    /// the entry's details are complete (the next other field, or the statement's end): a
    /// further `:86:` of the same entry is appended to the lines, so reading them at every
    /// `:86:` would cost the square of their number.
    fn close_details(&mut self) {
        if self.details.is_empty() {
            return;
        }
        let lines = std::mem::take(&mut self.details);
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let Details { text, counterparty } = match refs.split_first() {
            Some((first, more)) => fields::details(first, more),
            None => Details::default(),
        };
        if let Some(entry) = self.statement.entries.last_mut() {
            if text.is_some() {
                entry.text = text;
            }
            entry.counterparty = counterparty;
        }
    }

    fn is_empty(&self) -> bool {
        !self.has_account
            && self.statement.entries.is_empty()
            && self.statement.opening.is_none()
            && self.statement.closing.is_none()
            && self.statement.available.is_none()
    }
}

#[derive(Debug, Default)]
struct Reader {
    file: ParsedFile,
    /// The message type of the current SWIFT message or plain file header.
    message: Option<MtMessage>,
    current: Option<Current>,
    /// Each kept statement's index and first line, for [`Reader::fill_accounts`].
    statement_lines: Vec<(usize, usize)>,
}

impl Reader {
    fn current(&mut self, line: usize) -> &mut Current {
        self.current.get_or_insert_with(|| Current {
            line,
            ..Current::default()
        })
    }

    /// A `-` line: the statement ends, unless nothing but an opening balance came yet (some
    /// Sparkassen write a `-` between `:60M:` and the first `:61:`).
    fn end(&mut self) -> Result<(), ParseError> {
        if let Some(c) = &self.current {
            let only_opening = c.statement.entries.is_empty()
                && c.statement.closing.is_none()
                && c.statement.opening.is_some();
            if only_opening {
                return Ok(());
            }
        }
        self.finish()
    }

    fn warn(&mut self, line: usize, message: String) {
        self.file.warnings.push(ParseWarning {
            item: format!("line {line}"),
            message,
        });
    }

    fn field(&mut self, f: &Field<'_>) -> Result<(), ParseError> {
        let tag = f.tag;
        if tag != "86"
            && let Some(c) = self.current.as_mut()
        {
            c.entry_open = false;
            c.close_details();
        }
        match tag {
            "20" => {
                // A `:25:` written before the `:20:` belongs to the statement it starts.
                let account_only = self.current.as_ref().is_some_and(|c| {
                    !c.has_reference
                        && c.statement.entries.is_empty()
                        && c.statement.opening.is_none()
                        && c.statement.closing.is_none()
                });
                if !account_only {
                    self.finish()?;
                }
                self.current(f.line).has_reference = true;
            }
            "25" | "25P" => {
                if self.current.as_ref().is_some_and(|c| c.has_account) {
                    self.finish()?;
                }
                // `:25P:` puts the account's BIC on a second line.
                let value = if tag == "25P" {
                    f.first.to_owned()
                } else {
                    join(f)
                };
                let (id, currency) = fields::account(&value);
                let c = self.current(f.line);
                c.has_account = true;
                c.statement.account.identifier = id;
                c.account_currency = currency;
            }
            "60F" | "60M" | "60" | "62F" | "62M" | "62" | "64" => {
                match fields::balance(f.first) {
                    Ok(balance) => {
                        let c = self.current(f.line);
                        if tag == "60M" {
                            c.statement.continues = true;
                        }
                        let slot = match tag.as_bytes()[1] {
                            b'0' => &mut c.statement.opening,
                            b'2' => &mut c.statement.closing,
                            _ => &mut c.statement.available,
                        };
                        *slot = Some(balance);
                    }
                    Err(reason) => self.warn(f.line, format!("{reason}; the balance is ignored")),
                }
                // A statement number may follow a closing balance in the same statement; a
                // new `:20:` or `:25:` is what starts the next one.
            }
            "34F" | "90D" | "90C" => {
                let currency = fields::currency_in(f.first);
                let c = self.current(f.line);
                c.interim_tags = true;
                if c.interim_currency.is_none() {
                    c.interim_currency = currency;
                }
            }
            "13D" | "13" => self.current(f.line).interim_tags = true,
            "61" => self.entry(f)?,
            "86" => {
                let Some(c) = self.current.as_mut() else {
                    return Ok(());
                };
                if !c.entry_open {
                    // Information about the statement as a whole.
                    return Ok(());
                }
                let mut lines: Vec<String> = Vec::with_capacity(f.more.len() + 1);
                lines.push(f.first.to_owned());
                lines.extend(f.more.iter().map(|l| (*l).to_owned()));
                // A bare transaction code (`020`) before the structured `:86:` is replaced.
                let bare = c.details.len() == 1
                    && c.details[0].trim().len() == 3
                    && c.details[0].trim().bytes().all(|b| b.is_ascii_digit());
                if bare {
                    c.details.clear();
                }
                // Read once the entry's last `:86:` is in (`Current::close_details`).
                c.details.extend(lines);
            }
            _ => {}
        }
        Ok(())
    }

    fn entry(&mut self, f: &Field<'_>) -> Result<(), ParseError> {
        let parsed = fields::statement_line(f.first, &f.more)
            .map_err(|reason| ParseError::new(f.line, reason))?;
        if let Some(written) = &parsed.moved_value_date {
            self.warn(
                f.line,
                format!(
                    "the value date `{written}` is not a date: read as {}, the last day of its \
                     month",
                    parsed.value_date
                ),
            );
        }
        if parsed.bad_entry_date {
            self.warn(
                f.line,
                "the entry date cannot be read; the value date is used".to_owned(),
            );
        }
        let date = parsed.entry_date.unwrap_or(parsed.value_date);
        let expected = matches!(
            parsed.mark,
            fields::Mark::ExpectedCredit | fields::Mark::ExpectedDebit
        );
        let entry = ParsedEntry {
            reference: parsed.reference(),
            date,
            value_date: (parsed.value_date != date).then_some(parsed.value_date),
            amount: parsed.mark.sign() * parsed.amount,
            status: if expected {
                EntryStatus::Pending
            } else {
                EntryStatus::Booked
            },
            text: parsed.details.clone(),
            code: parsed.code.clone(),
            kind: parsed.kind(),
            line: f.line,
            ..ParsedEntry::default()
        };
        let c = self.current(f.line);
        c.statement.entries.push(entry);
        c.entry_open = true;
        c.details.clear();
        Ok(())
    }

    /// Ends the current statement and keeps it when it says anything; its amounts must add up
    /// without overflow.
    fn finish(&mut self) -> Result<(), ParseError> {
        let Some(mut c) = self.current.take() else {
            return Ok(());
        };
        c.close_details();
        if c.is_empty() {
            return Ok(());
        }
        let Current {
            mut statement,
            interim_tags,
            interim_currency,
            account_currency,
            line,
            ..
        } = c;
        let has_balance = statement.opening.is_some() || statement.closing.is_some();
        let interim = match self.message {
            Some(MtMessage::Mt942) => true,
            Some(MtMessage::Mt940) => false,
            None => interim_tags && !has_balance,
        };
        let currency = statement
            .opening
            .as_ref()
            .and_then(|b| b.currency.clone())
            .or_else(|| statement.closing.as_ref().and_then(|b| b.currency.clone()))
            .or(interim_currency)
            .or(account_currency);
        statement.account.currency.clone_from(&currency);
        statement.account.kind = Some(AccountKind::Checking);
        for entry in &mut statement.entries {
            if entry.currency.is_none() {
                entry.currency.clone_from(&currency);
            }
            if interim {
                entry.status = EntryStatus::Pending;
            }
        }
        check_statement_sums(&statement)?;
        self.statement_lines
            .push((self.file.statements.len(), line));
        self.file.statements.push(statement);
        Ok(())
    }

    /// Gives every statement an account and a currency the file states: a statement without
    /// `:25:` is a further page of the statement before it (its account, with a warning), and
    /// one without any currency takes that of another statement of the same account, so no
    /// statement of a file that names its accounts is imported into an unnamed one.
    fn fill_accounts(&mut self) {
        let lines = std::mem::take(&mut self.statement_lines);
        let mut previous: Option<String> = None;
        for (index, line) in lines {
            let Some(statement) = self.file.statements.get_mut(index) else {
                continue;
            };
            let account = &mut statement.account;
            if account.identifier.is_none() {
                let message = match &previous {
                    Some(identifier) => {
                        account.identifier = Some(identifier.clone());
                        format!(
                            "the statement names no account (`:25:`): read as a page of the \
                             statement before it, account {identifier}"
                        )
                    }
                    None => "the statement names no account (`:25:`)".to_owned(),
                };
                self.file.warnings.push(ParseWarning {
                    item: format!("line {line}"),
                    message,
                });
            }
            if account.identifier.is_some() {
                previous.clone_from(&account.identifier);
            }
        }
        // A statement without a balance takes the currency of another statement of the same
        // account (the first one that states one).
        let mut currencies: HashMap<String, String> = HashMap::new();
        for statement in &self.file.statements {
            if let (Some(identifier), Some(currency)) =
                (&statement.account.identifier, &statement.account.currency)
            {
                currencies
                    .entry(identifier.clone())
                    .or_insert_with(|| currency.clone());
            }
        }
        for statement in &mut self.file.statements {
            if statement.account.currency.is_none()
                && let Some(currency) = statement
                    .account
                    .identifier
                    .as_ref()
                    .and_then(|identifier| currencies.get(identifier))
            {
                statement.account.currency = Some(currency.clone());
                for entry in &mut statement.entries {
                    if entry.currency.is_none() {
                        entry.currency = Some(currency.clone());
                    }
                }
            }
        }
    }
}

/// A field's lines joined with nothing between them (for short fields cut by width).
fn join(f: &Field<'_>) -> String {
    let mut s = f.first.to_owned();
    for l in &f.more {
        s.push_str(l);
    }
    s
}
