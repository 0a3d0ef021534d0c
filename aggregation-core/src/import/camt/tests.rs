//! Unit tests: one per quirk in `QUIRKS.md`, on the fixtures beside this file or inline
//! documents written for the test.

use std::str::FromStr;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::*;
use crate::import::model::{
    AccountKind, EntryKind, EntryStatus, ParsedEntry, ParsedFile, ParsedStatement,
};

pub(super) const V02_STATEMENT: &str = include_str!("fixtures/v02_statement.xml");
pub(super) const V08_STATEMENT: &str = include_str!("fixtures/v08_statement.xml");
pub(super) const V08_REPORT: &str = include_str!("fixtures/v08_report.xml");
pub(super) const V04_NOTIFICATION: &str = include_str!("fixtures/v04_notification.xml");
pub(super) const V13_PREFIXED: &str = include_str!("fixtures/v13_prefixed.xml");
pub(super) const REVERSAL: &str = include_str!("fixtures/reversal.xml");
pub(super) const V01_REPORT: &str = include_str!("fixtures/v01_report.xml");

fn dec(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

fn day(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

fn ok(text: &str) -> ParsedFile {
    parse(text.as_bytes()).unwrap_or_else(|e| panic!("parses: {e}"))
}

fn only(file: &ParsedFile) -> &ParsedStatement {
    assert_eq!(file.statements.len(), 1, "{file:#?}");
    &file.statements[0]
}

fn err(text: &str) -> ParseError {
    parse(text.as_bytes()).expect_err("is refused")
}

/// A camt.053 document of `version` (`02` … `13`) around one statement body.
fn doc(version: &str, body: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.\
         {version}\">\n<BkToCstmrStmt>\n<GrpHdr><MsgId>X</MsgId><CreDtTm>2024-01-31T10:00:00</\
         CreDtTm></GrpHdr>\n<Stmt>\n<Id>S</Id>\n<Acct><Id><IBAN>DE89370400440532013000</IBAN></\
         Id><Ccy>EUR</Ccy></Acct>\n{body}\n</Stmt>\n</BkToCstmrStmt>\n</Document>\n"
    )
}

/// An entry with the given amount, indicator, reference and extra elements.
fn ntry(amount: &str, cdi: &str, reference: &str, extra: &str) -> String {
    format!(
        "<Ntry><Amt Ccy=\"EUR\">{amount}</Amt><CdtDbtInd>{cdi}</CdtDbtInd><Sts>BOOK</Sts>\
         <BookgDt><Dt>2024-01-31</Dt></BookgDt><AcctSvcrRef>{reference}</AcctSvcrRef>{extra}</Ntry>"
    )
}

fn bal(code: &str, amount: &str, cdi: &str, date: &str) -> String {
    format!(
        "<Bal><Tp><CdOrPrtry><Cd>{code}</Cd></CdOrPrtry></Tp><Amt Ccy=\"EUR\">{amount}</Amt>\
         <CdtDbtInd>{cdi}</CdtDbtInd><Dt><Dt>{date}</Dt></Dt></Bal>"
    )
}

fn amounts(statement: &ParsedStatement) -> Vec<Decimal> {
    statement.entries.iter().map(|e| e.amount).collect()
}

fn references(statement: &ParsedStatement) -> Vec<Option<&str>> {
    statement
        .entries
        .iter()
        .map(|e| e.reference.as_deref())
        .collect()
}

#[test]
fn v02_statement_reads_account_balances_and_entries() {
    let file = ok(V02_STATEMENT);
    assert_eq!(file.institution.as_deref(), Some("ABNANL2A"));
    let s = only(&file);
    assert_eq!(s.account.identifier.as_deref(), Some("NL91ABNA0417164300"));
    assert_eq!(s.account.currency.as_deref(), Some("EUR"));
    assert_eq!(s.account.kind, Some(AccountKind::Checking));
    // Quirk: PRCD is the opening, dated as written (the previous day's close).
    let opening = s.opening.as_ref().unwrap();
    assert_eq!(opening.amount, dec("149.87"));
    assert_eq!(opening.date, day(2024, 3, 1));
    assert_eq!(s.closing.as_ref().unwrap().amount, dec("53.87"));
    assert_eq!(s.available.as_ref().unwrap().date, day(2024, 3, 5));
    // Quirk: the batch of two details becomes two rows.
    assert_eq!(
        amounts(s),
        vec![
            dec("250.00"),
            dec("-42.50"),
            dec("-200.00"),
            dec("-100.00"),
            dec("-3.50")
        ]
    );
    let total: Decimal = amounts(s).iter().sum();
    assert_eq!(opening.amount + total, s.closing.as_ref().unwrap().amount);
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

#[test]
fn quirk_zero_padded_amounts() {
    let s = ok(V02_STATEMENT).statements.remove(0);
    assert_eq!(s.entries[0].amount, dec("250.00"));
    assert_eq!(s.entries[1].amount, dec("-42.50"));
}

#[test]
fn quirk_several_ustrd_lines_are_joined_with_a_space() {
    let s = ok(V02_STATEMENT).statements.remove(0);
    assert_eq!(
        s.entries[0].text.as_deref(),
        Some("Invoice 2024-17 thank you")
    );
}

#[test]
fn counterparty_is_the_other_side_of_the_sign() {
    let s = ok(V02_STATEMENT).statements.remove(0);
    // Money in: the debtor; money out: the creditor; never the owner.
    assert_eq!(
        s.entries[0].counterparty.as_deref(),
        Some("Erika Mustermann")
    );
    assert_eq!(
        s.entries[1].counterparty.as_deref(),
        Some("Stadtwerke Musterstadt")
    );
    // An entry without details has no counterparty; its text is AddtlNtryInf.
    assert_eq!(s.entries[4].counterparty, None);
    assert_eq!(s.entries[4].text.as_deref(), Some("Account fee March"));
}

#[test]
fn codes_dates_and_kinds() {
    let s = ok(V02_STATEMENT).statements.remove(0);
    let first = &s.entries[0];
    assert_eq!(first.code.as_deref(), Some("PMNT/RCDT/ESCT"));
    assert_eq!(first.kind, EntryKind::Transfer);
    assert_eq!(first.date, day(2024, 3, 4));
    assert_eq!(first.value_date, None, "same as the booking date");
    assert_eq!(first.status, EntryStatus::Booked);
    assert_eq!(first.reference.as_deref(), Some("REF-0001"));
    assert_eq!(first.currency.as_deref(), Some("EUR"));
    let second = &s.entries[1];
    assert_eq!(second.date, day(2024, 3, 5));
    assert_eq!(second.value_date, Some(day(2024, 3, 4)));
    assert_eq!(s.entries[4].code.as_deref(), Some("ACMT/MDOP/CHRG"));
    assert_eq!(s.entries[4].kind, EntryKind::Fee);
}

#[test]
fn quirk_batch_with_amounts_in_amtdtls_splits_with_detail_references() {
    let s = ok(V02_STATEMENT).statements.remove(0);
    let rows: Vec<&ParsedEntry> = s.entries[2..4].iter().collect();
    assert_eq!(rows[0].reference.as_deref(), Some("T-1"));
    assert_eq!(rows[1].reference.as_deref(), Some("T-2"));
    assert_eq!(rows[0].counterparty.as_deref(), Some("Landlord Ltd"));
    assert_eq!(rows[1].text.as_deref(), Some("Membership 2024"));
    assert_eq!(rows[1].code.as_deref(), Some("PMNT/ICDT/ESCT"));
    assert!(rows[1].line > rows[0].line);
}

#[test]
fn quirk_v08_status_code_pty_names_and_bicfi() {
    let file = ok(V08_STATEMENT);
    assert_eq!(file.institution.as_deref(), Some("Musterbank AG"));
    let s = only(&file);
    assert_eq!(s.account.name.as_deref(), Some("Girokonto"));
    assert_eq!(s.entries.len(), 3);
    assert_eq!(s.entries[0].status, EntryStatus::Booked);
    assert_eq!(s.entries[0].counterparty.as_deref(), Some("ACME GmbH"));
    assert_eq!(
        s.entries[1].counterparty.as_deref(),
        Some("Café & Bäckerei")
    );
    assert_eq!(s.entries[2].status, EntryStatus::Pending);
    // The domain code wins over the proprietary one; the proprietary one alone is the code.
    assert_eq!(s.entries[0].code.as_deref(), Some("PMNT/RCDT/SALA"));
    assert_eq!(s.entries[1].code.as_deref(), Some("NTRF+106+00931"));
    assert_eq!(s.entries[1].kind, EntryKind::Other);
}

#[test]
fn quirk_opbd_is_dated_the_day_before_and_debit_balances_are_negative() {
    let s = ok(V08_STATEMENT).statements.remove(0);
    let opening = s.opening.unwrap();
    assert_eq!(opening.amount, dec("-18.59"));
    assert_eq!(opening.date, day(2024, 5, 1));
    assert_eq!(opening.currency.as_deref(), Some("EUR"));
    let closing = s.closing.unwrap();
    let booked: Decimal = s
        .entries
        .iter()
        .filter(|e| e.status == EntryStatus::Booked)
        .map(|e| e.amount)
        .sum();
    assert_eq!(opening.amount + booked, closing.amount);
}

#[test]
fn quirk_booking_date_as_date_time_with_nanoseconds() {
    let s = ok(V08_STATEMENT).statements.remove(0);
    assert_eq!(s.entries[0].date, day(2024, 5, 2), "the date as written");
    assert_eq!(s.entries[0].value_date, Some(day(2024, 5, 3)));
    // A pending entry with only a value date is dated by it.
    assert_eq!(s.entries[2].date, day(2024, 5, 3));
}

#[test]
fn quirk_notprovided_reference_falls_back_to_txid() {
    let s = ok(V08_STATEMENT).statements.remove(0);
    assert_eq!(
        references(&s),
        vec![Some("2024050200001"), Some("TX-77"), Some("PEND-1")]
    );
    // Line breaks inside Ustrd are one space.
    assert_eq!(
        s.entries[1].text.as_deref(),
        Some("CARD 1234 BREAD AND COFFEE")
    );
}

#[test]
fn quirk_report_052_with_other_id_itbd_and_undated_pending_entries() {
    let file = ok(V08_REPORT);
    let s = only(&file);
    assert_eq!(s.account.identifier.as_deref(), Some("0012345678"));
    assert_eq!(s.account.currency.as_deref(), Some("CHF"));
    assert_eq!(s.opening.as_ref().unwrap().date, day(2024, 7, 9));
    let closing = s.closing.as_ref().unwrap();
    assert_eq!(closing.amount, dec("480.00"));
    assert_eq!(closing.date, day(2024, 7, 10));
    let statuses: Vec<EntryStatus> = s.entries.iter().map(|e| e.status).collect();
    assert_eq!(
        statuses,
        vec![
            EntryStatus::Booked,
            EntryStatus::Pending,
            EntryStatus::Pending
        ]
    );
    // The pending entry without dates takes the report's end date, with a warning.
    assert_eq!(s.entries[1].date, day(2024, 7, 10));
    assert_eq!(file.warnings.len(), 1, "{:?}", file.warnings);
    assert!(
        file.warnings[0]
            .message
            .contains("neither a booking nor a value date")
    );
    assert_eq!(file.warnings[0].item, format!("line {}", s.entries[1].line));
    assert_eq!(s.entries[2].date, day(2024, 7, 11));
}

#[test]
fn quirk_notification_batches_split_only_when_the_amounts_add_up() {
    let file = ok(V04_NOTIFICATION);
    let s = only(&file);
    assert!(s.opening.is_none() && s.closing.is_none());
    assert_eq!(
        amounts(s),
        vec![dec("100.00"), dec("200.00"), dec("300.00"), dec("-1526.00")]
    );
    assert_eq!(
        references(s),
        vec![
            Some("QR-1"),
            Some("QR-2"),
            Some("QR-3"),
            Some("OUT-BATCH-2")
        ]
    );
    // Structured creditor references are the text when there is no Ustrd.
    assert_eq!(
        s.entries[0].text.as_deref(),
        Some("210000000003139471430009017")
    );
    assert_eq!(s.entries[1].counterparty.as_deref(), Some("Beat Muster"));
    assert_eq!(s.entries[0].code.as_deref(), Some("PMNT/RCDT/VCOM"));
    // The charges batch stays one row, with both details' texts, and a warning.
    let kept = &s.entries[3];
    assert_eq!(kept.text.as_deref(), Some("Invoice A / Invoice B"));
    assert_eq!(kept.counterparty, None, "two different creditors");
    assert_eq!(file.warnings.len(), 1);
    assert!(file.warnings[0].message.contains("add up to -1500.00"));
    assert!(file.warnings[0].message.contains("kept as one row"));
}

#[test]
fn batch_details_without_amounts_stay_one_row_with_a_warning() {
    let detail = "<TxDtls><RmtInf><Ustrd>a</Ustrd></RmtInf></TxDtls>";
    let body = ntry(
        "10.00",
        "DBIT",
        "B",
        &format!("<NtryDtls>{detail}{detail}</NtryDtls>"),
    );
    let file = ok(&doc("02", &body));
    assert_eq!(amounts(only(&file)), vec![dec("-10.00")]);
    assert_eq!(only(&file).entries[0].text.as_deref(), Some("a"));
    assert!(
        file.warnings[0]
            .message
            .contains("do not all have an amount")
    );
}

#[test]
fn split_rows_without_own_references_number_the_entry_reference() {
    let detail =
        |a: &str| format!("<TxDtls><Amt Ccy=\"EUR\">{a}</Amt><CdtDbtInd>DBIT</CdtDbtInd></TxDtls>");
    let body = ntry(
        "3.00",
        "DBIT",
        "BATCH",
        &format!("<NtryDtls>{}{}</NtryDtls>", detail("1.00"), detail("2.00")),
    );
    let s = ok(&doc("05", &body)).statements.remove(0);
    assert_eq!(references(&s), vec![Some("BATCH/1"), Some("BATCH/2")]);
}

#[test]
fn quirk_namespace_prefixes_and_version_13() {
    let file = ok(V13_PREFIXED);
    let s = only(&file);
    assert_eq!(
        s.account.identifier.as_deref(),
        Some("FR7630006000011234567890189")
    );
    assert_eq!(s.entries.len(), 1);
    assert_eq!(
        s.entries[0].counterparty.as_deref(),
        Some("Librairie du Coin")
    );
    // CDATA is taken literally.
    assert_eq!(
        s.entries[0].text.as_deref(),
        Some("Livres <poche> & cartes")
    );
    assert_eq!(sniff(V13_PREFIXED.as_bytes()), Some(CamtMessage::Statement));
}

#[test]
fn quirk_bank_style_reversal_is_flipped_when_only_that_balances() {
    let file = ok(REVERSAL);
    let s = only(&file);
    assert_eq!(s.account.kind, Some(AccountKind::Savings));
    assert_eq!(amounts(s), vec![dec("-30.00"), dec("10.00")]);
    assert_eq!(file.warnings.len(), 1);
    assert!(file.warnings[0].message.contains("RvslInd"));
    assert_eq!(file.warnings[0].item, "statement 1");
}

#[test]
fn iso_style_reversal_keeps_its_indicator() {
    let body = format!(
        "{}{}{}{}",
        bal("OPBD", "100", "CRDT", "2024-01-31"),
        bal("CLBD", "80", "CRDT", "2024-01-31"),
        ntry("30", "DBIT", "A", ""),
        ntry("10", "CRDT", "B", "").replace("<Sts>", "<RvslInd>true</RvslInd><Sts>"),
    );
    let file = ok(&doc("02", &body));
    assert_eq!(amounts(only(&file)), vec![dec("-30"), dec("10")]);
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

#[test]
fn unbalanced_statement_without_reversals_is_left_to_the_importer() {
    let body = format!(
        "{}{}{}",
        bal("OPBD", "100", "CRDT", "2024-01-31"),
        bal("CLBD", "80", "CRDT", "2024-01-31"),
        ntry("30", "DBIT", "A", ""),
    );
    let file = ok(&doc("02", &body));
    assert_eq!(amounts(only(&file)), vec![dec("-30")]);
    assert!(file.warnings.is_empty());
}

#[test]
fn quirk_duplicate_references_in_one_statement_are_dropped() {
    let body = format!(
        "{}{}{}{}",
        ntry("1.00", "DBIT", "SAME", ""),
        ntry("2.00", "DBIT", "SAME", ""),
        ntry("3.00", "DBIT", "NONREF", ""),
        ntry("4.00", "DBIT", "UNIQUE", ""),
    );
    let file = ok(&doc("04", &body));
    let s = only(&file);
    assert_eq!(references(s), vec![None, None, None, Some("UNIQUE")]);
    assert_eq!(file.warnings.len(), 1, "{:?}", file.warnings);
    assert!(
        file.warnings[0]
            .message
            .contains("\"SAME\" is on 2 entries")
    );
}

#[test]
fn same_reference_in_two_statements_is_kept() {
    let statement = format!(
        "<Stmt><Id>S</Id><Acct><Id><IBAN>DE89370400440532013000</IBAN></Id></Acct>{}</Stmt>",
        ntry("1.00", "CRDT", "R1", "")
    );
    let text = doc("02", "").replace(
        "</Stmt>\n</BkToCstmrStmt>",
        &format!("</Stmt>{statement}{statement}</BkToCstmrStmt>"),
    );
    let file = ok(&text);
    assert_eq!(file.statements.len(), 3);
    assert_eq!(references(&file.statements[1]), vec![Some("R1")]);
    assert_eq!(references(&file.statements[2]), vec![Some("R1")]);
    // No Acct/Ccy: the currency comes from the entries.
    assert_eq!(file.statements[1].account.currency.as_deref(), Some("EUR"));
}

#[test]
fn quirk_status_variants() {
    let with_status = |status: &str| ntry("1", "CRDT", "R", "").replace("<Sts>BOOK</Sts>", status);
    let body = [
        with_status("<Sts>PDNG</Sts>"),
        with_status("<Sts><Cd>INFO</Cd></Sts>"),
        with_status("<Sts><Prtry>BOOK</Prtry></Sts>"),
        with_status("<Sts>book</Sts>"),
        with_status("<Sts>XXXX</Sts>"),
    ]
    .concat()
    .replace("<AcctSvcrRef>R</AcctSvcrRef>", "");
    let file = ok(&doc("09", &body));
    let statuses: Vec<EntryStatus> = only(&file).entries.iter().map(|e| e.status).collect();
    assert_eq!(
        statuses,
        vec![
            EntryStatus::Pending,
            EntryStatus::Pending,
            EntryStatus::Booked,
            EntryStatus::Booked,
            EntryStatus::Booked
        ]
    );
    assert_eq!(file.warnings.len(), 1);
    assert!(file.warnings[0].message.contains("\"XXXX\""));
}

#[test]
fn quirk_dates_with_zones_and_compact_dates() {
    let body = [
        ntry("1", "CRDT", "A", "").replace("2024-01-31", "2024-01-31+01:00"),
        ntry("1", "CRDT", "B", "").replace("2024-01-31", "20240130"),
        ntry("1", "CRDT", "C", "").replace(
            "<Dt>2024-01-31</Dt>",
            "<DtTm>2024-01-29T18:38:47.137Z</DtTm>",
        ),
    ]
    .concat();
    let s = ok(&doc("02", &body)).statements.remove(0);
    let dates: Vec<NaiveDate> = s.entries.iter().map(|e| e.date).collect();
    assert_eq!(
        dates,
        vec![day(2024, 1, 31), day(2024, 1, 30), day(2024, 1, 29)]
    );
}

#[test]
fn quirk_declared_latin1_file() {
    let mut bytes = doc(
        "02",
        &ntry(
            "1",
            "CRDT",
            "R",
            "<AddtlNtryInf>Gr\u{FC}\u{DF}e</AddtlNtryInf>",
        ),
    )
    .replace(
        "<?xml version=\"1.0\"?>",
        "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>",
    )
    .into_bytes();
    // Re-encode the two non-ASCII characters as Latin-1 bytes.
    let text = String::from_utf8(bytes.clone()).unwrap();
    bytes = text
        .chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap())
        .collect();
    let s = parse(&bytes).unwrap().statements.remove(0);
    assert_eq!(s.entries[0].text.as_deref(), Some("Grüße"));
    assert_eq!(sniff(&bytes), Some(CamtMessage::Statement));
}

#[test]
fn utf16_with_bom_is_read() {
    let text = doc("02", &ntry("1", "CRDT", "R", ""));
    let mut bytes = vec![0xFF, 0xFE];
    for unit in text.encode_utf16() {
        bytes.extend_from_slice(&unit.to_le_bytes());
    }
    assert_eq!(sniff(&bytes), Some(CamtMessage::Statement));
    assert_eq!(parse(&bytes).unwrap().statements[0].entries.len(), 1);
}

#[test]
fn quirk_entities_decoded_once_and_undefined_ones_refused() {
    let body = ntry(
        "1",
        "CRDT",
        "R",
        "<AddtlNtryInf>A&amp;B &#233;&#xE9; &amp;lt;</AddtlNtryInf>",
    );
    let s = ok(&doc("02", &body)).statements.remove(0);
    assert_eq!(s.entries[0].text.as_deref(), Some("A&B éé &lt;"));
    let bad = doc(
        "02",
        &ntry("1", "CRDT", "R", "<AddtlNtryInf>&nbsp;</AddtlNtryInf>"),
    );
    let error = err(&bad);
    assert!(error.reason.contains("&nbsp;"), "{error}");
    assert_eq!(error.line, 8);
    let bare = doc(
        "02",
        &ntry("1", "CRDT", "R", "<AddtlNtryInf>AT&T</AddtlNtryInf>"),
    );
    assert_eq!(err(&bare).line, 8);
}

#[test]
fn doctype_is_refused_never_expanded() {
    let text = doc("02", "").replace(
        "<?xml version=\"1.0\"?>\n",
        "<?xml version=\"1.0\"?>\n<!DOCTYPE Document [<!ENTITY x \"boom\">]>\n",
    );
    let error = err(&text);
    assert_eq!(error.line, 2);
    assert!(error.reason.contains("DOCTYPE"), "{error}");
}

#[test]
fn broken_xml_names_the_line() {
    // An unclosed element inside an entry (as in a published bank sample).
    let text = doc("02", &ntry("1", "CRDT", "R", "<AddtlNtryInf>x"));
    let error = err(&text);
    assert_eq!(error.line, 8, "{error}");
    let truncated = &V02_STATEMENT[..V02_STATEMENT.len() / 2];
    let error = err(truncated);
    assert!(error.line > 1, "{error}");
}

#[test]
fn unreadable_entry_values_are_errors_with_their_line() {
    let amount = doc("02", &format!("\n{}", ntry("1.000,00", "CRDT", "R", "")));
    let error = err(&amount);
    assert_eq!(error.line, 9);
    assert!(error.reason.contains("1.000,00"));
    let indicator = doc("02", &ntry("1", "C", "R", ""));
    assert!(err(&indicator).reason.contains("CRDT nor DBIT"));
    let date = doc(
        "02",
        &ntry("1", "CRDT", "R", "").replace("2024-01-31", "31.01.2024"),
    );
    assert!(err(&date).reason.contains("booking date"));
    let missing = doc("02", "<Ntry><CdtDbtInd>CRDT</CdtDbtInd></Ntry>");
    assert!(err(&missing).reason.contains("no amount"));
}

#[test]
fn unreadable_balances_are_warnings() {
    let body = format!(
        "{}{}{}",
        bal("OPBD", "1.234,00", "CRDT", "2024-01-31"),
        bal("CLBD", "5", "CRDT", "someday"),
        bal("CLAV", "5", "", "2024-01-31"),
    );
    let file = ok(&doc("02", &body));
    let s = only(&file);
    assert!(s.opening.is_none() && s.closing.is_none());
    assert_eq!(s.available.as_ref().unwrap().amount, dec("5"));
    assert_eq!(file.warnings.len(), 3, "{:?}", file.warnings);
}

#[test]
fn opbd_wins_over_prcd_and_clbd_over_itbd() {
    let body = format!(
        "{}{}{}{}",
        bal("PRCD", "7", "CRDT", "2024-01-30"),
        bal("OPBD", "8", "CRDT", "2024-01-31"),
        bal("CLBD", "9", "CRDT", "2024-01-31"),
        bal("ITBD", "1", "CRDT", "2024-01-31"),
    );
    let s = ok(&doc("02", &body)).statements.remove(0);
    assert_eq!(s.opening.unwrap().amount, dec("8"));
    assert_eq!(s.closing.unwrap().amount, dec("9"));
}

#[test]
fn not_camt_documents_are_refused() {
    let pain = "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\">\
                <CstmrCdtTrfInitn/></Document>";
    assert!(err(pain).reason.contains("pain.001"));
    assert!(err("<html><body/></html>").reason.contains("<html>"));
    assert_eq!(err("").line, 0);
    assert!(err("not xml at all").line <= 1);
    let other = "<Document><Something/></Document>";
    assert!(err(other).reason.contains("not a CAMT document"));
    let camt056 = "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.056.001.08\"/>";
    assert!(err(camt056).reason.contains("camt.056"));
}

#[test]
fn a_message_without_statements_is_empty_with_a_warning() {
    let text = "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.054.001.02\">\
                <BkToCstmrDbtCdtNtfctn><GrpHdr><MsgId>1</MsgId></GrpHdr>\
                </BkToCstmrDbtCdtNtfctn></Document>";
    let file = ok(text);
    assert!(file.statements.is_empty());
    assert_eq!(file.warnings.len(), 1);
}

#[test]
fn nesting_is_bounded() {
    let deep = format!(
        "{}{}",
        "<Other>".repeat(MAX_DEPTH + 5),
        "</Other>".repeat(MAX_DEPTH + 5)
    );
    let text = doc("02", &deep);
    let error = err(&text);
    assert!(error.reason.contains("nested"), "{error}");
}

#[test]
fn every_version_from_02_to_13_and_beyond_is_read_and_sniffed() {
    for version in [
        "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13", "14",
    ] {
        let text = doc(version, &ntry("1", "CRDT", "R", ""));
        assert_eq!(
            sniff(text.as_bytes()),
            Some(CamtMessage::Statement),
            "{version}"
        );
        assert_eq!(ok(&text).statements[0].entries.len(), 1, "{version}");
    }
}

#[test]
fn sniff_tells_the_three_messages_apart() {
    assert_eq!(sniff(V08_REPORT.as_bytes()), Some(CamtMessage::Report));
    assert_eq!(
        sniff(V02_STATEMENT.as_bytes()),
        Some(CamtMessage::Statement)
    );
    assert_eq!(
        sniff(V04_NOTIFICATION.as_bytes()),
        Some(CamtMessage::Notification)
    );
    let bom = [b"\xEF\xBB\xBF".as_slice(), V08_REPORT.as_bytes()].concat();
    assert_eq!(sniff(&bom), Some(CamtMessage::Report));
    assert_eq!(sniff(b""), None);
    assert_eq!(
        sniff(b"OFXHEADER:100 urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"),
        None
    );
    assert_eq!(
        sniff(b"<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\"/>"),
        None
    );
    assert_eq!(
        sniff(b"<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.056.001.08\"/>"),
        None
    );
    // Only the head is read.
    let late = format!(
        "<Document>{}<X xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.02\"/></Document>",
        " ".repeat(SNIFF_BYTES)
    );
    assert_eq!(sniff(late.as_bytes()), None);
}

#[test]
fn all_fixtures_parse_without_panicking_and_report_entry_lines() {
    for fixture in [
        V02_STATEMENT,
        V08_STATEMENT,
        V08_REPORT,
        V04_NOTIFICATION,
        V13_PREFIXED,
        REVERSAL,
    ] {
        let file = ok(fixture);
        for statement in &file.statements {
            for entry in &statement.entries {
                let line = fixture.lines().nth(entry.line - 1).unwrap();
                assert!(
                    line.contains("<Ntry>")
                        || line.contains("<camt:Ntry>")
                        || line.contains("<TxDtls>"),
                    "line {} is {line:?}",
                    entry.line
                );
            }
        }
    }
}

/// A camt.053.001.08 statement with `entries` entries of about 900 bytes each, every tenth a
/// batch of two details.
fn generated(entries: usize) -> String {
    let mut body = String::with_capacity(entries * 950);
    let mut total = Decimal::ZERO;
    for i in 0..entries {
        let cents = Decimal::new(i64::try_from(i % 9973).unwrap_or(0) + 1, 2);
        let (cdi, signed) = if i % 3 == 0 {
            ("CRDT", cents)
        } else {
            ("DBIT", -cents)
        };
        total += signed;
        let details = if i % 10 == 0 {
            format!(
                "<NtryDtls><TxDtls><Refs><TxId>G{i}-1</TxId></Refs><Amt Ccy=\"EUR\">{cents}</Amt>\
                 <CdtDbtInd>{cdi}</CdtDbtInd><RltdPties><Dbtr><Pty><Nm>Payer {i}</Nm></Pty></Dbtr>\
                 <Cdtr><Pty><Nm>Payee {i}</Nm></Pty></Cdtr></RltdPties><RmtInf><Ustrd>Batch part \
                 one of entry {i}</Ustrd></RmtInf></TxDtls><TxDtls><Refs><TxId>G{i}-2</TxId></Refs>\
                 <Amt Ccy=\"EUR\">0</Amt><CdtDbtInd>{cdi}</CdtDbtInd></TxDtls></NtryDtls>"
            )
        } else {
            format!(
                "<NtryDtls><TxDtls><Refs><EndToEndId>E2E-{i}</EndToEndId><TxId>T{i}</TxId></Refs>\
                 <RltdPties><Dbtr><Pty><Nm>Payer number {i}</Nm></Pty></Dbtr><Cdtr><Pty><Nm>Payee \
                 number {i}</Nm></Pty></Cdtr></RltdPties><RmtInf><Ustrd>Invoice {i} of the \
                 generated statement</Ustrd><Ustrd>second line</Ustrd></RmtInf></TxDtls></NtryDtls>"
            )
        };
        body.push_str(&format!(
            "\n<Ntry><Amt Ccy=\"EUR\">{cents}</Amt><CdtDbtInd>{cdi}</CdtDbtInd><Sts><Cd>BOOK</Cd>\
             </Sts><BookgDt><Dt>2024-01-31</Dt></BookgDt><ValDt><Dt>2024-01-31</Dt></ValDt>\
             <AcctSvcrRef>GEN{i}</AcctSvcrRef><BkTxCd><Domn><Cd>PMNT</Cd><Fmly><Cd>RCDT</Cd>\
             <SubFmlyCd>ESCT</SubFmlyCd></Fmly></Domn></BkTxCd>{details}</Ntry>"
        ));
    }
    let balances = format!(
        "{}{}",
        bal("OPBD", "1000.00", "CRDT", "2024-01-31"),
        bal(
            "CLBD",
            &(Decimal::new(100_000, 2) + total).abs().to_string(),
            if Decimal::new(100_000, 2) + total < Decimal::ZERO {
                "DBIT"
            } else {
                "CRDT"
            },
            "2024-01-31"
        ),
    );
    doc("08", &format!("{balances}{body}"))
}

/// The peak resident set size of this process so far, in KiB (Linux), if it can be read.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn generated_statement_balances() {
    let file = ok(&generated(200));
    let s = only(&file);
    assert_eq!(s.entries.len(), 220);
    let total: Decimal = amounts(s).iter().sum();
    assert_eq!(
        s.opening.as_ref().unwrap().amount + total,
        s.closing.as_ref().unwrap().amount
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

/// Measurement, not a check: `cargo test -p aggregation-core --lib --release
/// import::camt::tests::measure_10_mib -- --ignored --nocapture` prints the parse speed and
/// the peak RSS before and after parsing a 10 MiB statement.
#[test]
#[ignore = "a measurement; run by hand"]
fn measure_10_mib() {
    let text = generated(16_000);
    let before = peak_rss_kib();
    let started = std::time::Instant::now();
    let file = ok(&text);
    let elapsed = started.elapsed();
    let after = peak_rss_kib();
    let entries = file.statements[0].entries.len();
    #[expect(
        clippy::cast_precision_loss,
        reason = "a throughput figure for a human to read"
    )]
    let mb = text.len() as f64 / 1_000_000.0;
    eprintln!(
        "camt: {mb:.1} MB, {entries} rows in {elapsed:?} = {:.1} MB/s; peak RSS {before:?} KiB \
         before parsing, {after:?} KiB after",
        mb / elapsed.as_secs_f64()
    );
}

#[test]
fn quirk_version_01_message_names_accounts_and_balance_types() {
    assert_eq!(sniff(V01_REPORT.as_bytes()), Some(CamtMessage::Report));
    let file = ok(V01_REPORT);
    assert_eq!(file.institution.as_deref(), Some("EXMPDEFFXXX"));
    let s = only(&file);
    assert_eq!(s.account.identifier.as_deref(), Some("0012-8844-01"));
    assert_eq!(s.account.currency.as_deref(), Some("EUR"));
    // `Tp/Cd` without `CdOrPrtry`.
    assert_eq!(s.opening.as_ref().map(|b| b.amount), Some(dec("2500.00")));
    assert_eq!(s.closing.as_ref().map(|b| b.amount), Some(dec("2319.55")));
    assert_eq!(
        amounts(s),
        vec![dec("-120.45"), dec("-60.00"), dec("45.00")]
    );
    assert_eq!(
        references(s),
        vec![Some("2012110500017/1"), Some("2012110500017/2"), None]
    );
    assert_eq!(
        s.entries[0].counterparty.as_deref(),
        Some("Energieversorger Nord")
    );
    assert_eq!(s.entries[2].status, EntryStatus::Pending);
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

#[test]
fn version_01_roots_of_the_three_messages_and_the_swift_namespace() {
    for (namespace, root, statement, message) in [
        (
            "urn:iso:std:iso:20022:tech:xsd:camt.053.001.01",
            "BkToCstmrStmtV01",
            "Stmt",
            CamtMessage::Statement,
        ),
        (
            "urn:swift:xsd:camt.053.001.01",
            "BkToCstmrStmtV01",
            "Stmt",
            CamtMessage::Statement,
        ),
        (
            "urn:iso:std:iso:20022:tech:xsd:camt.054.001.01",
            "BkToCstmrDbtCdtNtfctnV01",
            "Ntfctn",
            CamtMessage::Notification,
        ),
        (
            "urn:iso:std:iso:20022:tech:xsd:camt.052.001.01",
            "BkToCstmrAcctRptV01",
            "Rpt",
            CamtMessage::Report,
        ),
    ] {
        let text = format!(
            "<?xml version=\"1.0\"?><Document xmlns=\"{namespace}\"><{root}><GrpHdr><MsgId>M</MsgId>\
             <CreDtTm>2010-01-01T00:00:00</CreDtTm></GrpHdr><{statement}><Acct><Id><BBAN>12345678\
             </BBAN></Id></Acct>{}</{statement}></{root}></Document>",
            ntry("5.00", "CRDT", "R1", "")
        );
        assert_eq!(sniff(text.as_bytes()), Some(message), "{root}");
        let file = ok(&text);
        let s = only(&file);
        assert_eq!(s.account.identifier.as_deref(), Some("12345678"), "{root}");
        assert_eq!(amounts(s), vec![dec("5.00")], "{root}");
    }
    // A versioned root with letters after the `V` is no message element.
    let text = "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.01\">\
                <BkToCstmrStmtVX/></Document>";
    assert!(parse(text.as_bytes()).is_err());
    // Another message's namespace stays refused.
    let text = "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:pain.001.001.03\"/>";
    assert!(parse(text.as_bytes()).is_err());
}

#[test]
fn details_adding_past_the_largest_amount_are_an_error_naming_the_line() {
    let max = Decimal::MAX.to_string();
    let detail = |n: usize| {
        format!("<TxDtls><Refs><TxId>T{n}</TxId></Refs><Amt Ccy=\"EUR\">{max}</Amt></TxDtls>\n")
    };
    let body = format!(
        "<Ntry><Amt Ccy=\"EUR\">{max}</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts>BOOK</Sts>\
         <BookgDt><Dt>2024-01-31</Dt></BookgDt><NtryDtls>\n{}{}</NtryDtls></Ntry>",
        detail(1),
        detail(2)
    );
    let error = err(&doc("08", &body));
    // The second detail is where the sum overflows.
    assert_eq!(error.line, 10, "{error}");
    assert!(error.reason.contains("largest amount"), "{error}");
}

#[test]
fn an_opening_balance_at_the_maximum_plus_one_entry_is_an_error_naming_the_line() {
    let max = Decimal::MAX.to_string();
    let body = format!(
        "{}\n{}\n{}",
        bal("OPBD", &max, "CRDT", "2024-01-31"),
        bal("CLBD", &max, "CRDT", "2024-01-31"),
        ntry("1.00", "CRDT", "R1", "")
    );
    let error = err(&doc("08", &body));
    // The body starts on line 8: the entry is on line 10.
    assert_eq!(error.line, 10, "{error}");
    assert!(error.reason.contains("largest amount"), "{error}");
    // Without balances, two entries of the maximum overflow as well.
    let body = format!(
        "{}\n{}",
        ntry(&max, "DBIT", "R1", ""),
        ntry(&max, "DBIT", "R2", "")
    );
    assert_eq!(err(&doc("08", &body)).line, 9);
}

#[test]
fn many_details_and_repeated_references_stay_one_pass() {
    // 3,000 details with 1,000 distinct texts: each text once, in file order.
    let details: String = (0..3000)
        .map(|n| {
            format!(
                "<TxDtls><RmtInf><Ustrd>text {}</Ustrd></RmtInf></TxDtls>",
                n % 1000
            )
        })
        .collect();
    let body = format!(
        "<Ntry><Amt Ccy=\"EUR\">1.00</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts>BOOK</Sts>\
         <BookgDt><Dt>2024-01-31</Dt></BookgDt><NtryDtls>{details}</NtryDtls></Ntry>"
    );
    let file = ok(&doc("08", &body));
    let text = only(&file).entries[0].text.clone().unwrap_or_default();
    assert_eq!(text.matches(" / ").count(), 999);
    assert!(text.starts_with("text 0 / text 1 / text 2"));
    // 2,000 entries sharing 500 references: every repeated one dropped, one warning each.
    let entries: String = (0..2000)
        .map(|n| ntry("1.00", "CRDT", &format!("R{}", n % 500), ""))
        .collect();
    let file = ok(&doc("08", &entries));
    assert!(only(&file).entries.iter().all(|e| e.reference.is_none()));
    assert_eq!(file.warnings.len(), 500);
}
