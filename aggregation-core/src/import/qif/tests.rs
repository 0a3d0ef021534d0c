//! One test per quirk of `QUIRKS.md`, each on a fixture of `fixtures/`, and the property tests.

use chrono::NaiveDate;
use proptest::collection::vec;
use proptest::prelude::*;
use rust_decimal::Decimal;

use super::*;
use crate::import::model::EntryStatus;

/// Every fixture, by name.
const FIXTURES: [&str; 33] = [
    "accounts_switch.qif",
    "amex_blank_lines.qif",
    "autoswitch.qif",
    "autoswitch_uncleared.qif",
    "blank_split.qif",
    "bom_crlf.qif",
    "cleared.qif",
    "cp1250.qif",
    "cp1252.qif",
    "day_first.qif",
    "day_first_other_account.qif",
    "decimal_comma.qif",
    "dotted_dates.qif",
    "double_minus.qif",
    "header_case_spaces.qif",
    "invest.qif",
    "invest_shares.qif",
    "iso_dates.qif",
    "lists.qif",
    "lone_cr.qif",
    "missing_caret_between.qif",
    "no_final_caret.qif",
    "no_header.qif",
    "opening_balance_named.qif",
    "opening_balance_no_name.qif",
    "oth_s_and_unknown.qif",
    "quicken_apostrophe.qif",
    "space_grouping.qif",
    "split_equals.qif",
    "splits.qif",
    "thousands.qif",
    "two_digit_apostrophe.qif",
    "two_digit_years.qif",
];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/src/import/qif/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn read(name: &str) -> ParsedFile {
    match parse(&fixture(name)) {
        Ok(file) => file,
        Err(e) => panic!("{name}: {e}"),
    }
}

fn only(name: &str) -> ParsedStatement {
    let mut file = read(name);
    assert_eq!(file.statements.len(), 1, "{name}: {file:#?}");
    file.statements.remove(0)
}

fn dec(s: &str) -> Decimal {
    s.parse().expect("a decimal")
}

fn day(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).expect("a date")
}

fn dates(statement: &ParsedStatement) -> Vec<NaiveDate> {
    statement.entries.iter().map(|e| e.date).collect()
}

fn amounts(statement: &ParsedStatement) -> Vec<Decimal> {
    statement.entries.iter().map(|e| e.amount).collect()
}

fn payees(statement: &ParsedStatement) -> Vec<&str> {
    statement
        .entries
        .iter()
        .map(|e| e.counterparty.as_deref().unwrap_or(""))
        .collect()
}

fn error(text: &str) -> ParseError {
    match parse(text.as_bytes()) {
        Ok(file) => panic!("parsed: {file:#?}"),
        Err(e) => e,
    }
}

#[test]
fn every_fixture_is_sniffed_and_parsed() {
    for name in FIXTURES {
        let bytes = fixture(name);
        assert!(sniff(&bytes), "{name} not sniffed");
        assert!(parse(&bytes).is_ok(), "{name}: {:?}", parse(&bytes));
    }
}

#[test]
fn sniff_refuses_other_formats() {
    assert!(!sniff(b"OFXHEADER:100\nDATA:OFXSGML\n<OFX>"));
    assert!(!sniff(b"<?xml version=\"1.0\"?><Document/>"));
    assert!(!sniff(b":20:STARTUMS\n:25:12345678/0001\n"));
    assert!(!sniff(b"Date,Amount,Description\n2024-01-01,1.00,x\n"));
    assert!(!sniff(b""));
    assert!(sniff(b"\xEF\xBB\xBF\r\n  !Type:Bank\r\n"));
    assert!(sniff(b"!Option:AutoSwitch\n"));
}

/// Quirk 1: headers in any case, with trailing spaces.
#[test]
fn header_in_any_case_with_trailing_spaces() {
    let s = only("header_case_spaces.qif");
    assert_eq!(s.account.kind, Some(AccountKind::Checking));
    assert_eq!(amounts(&s), vec![dec("-12.50"), dec("800.00")]);
    assert_eq!(s.entries[0].line, 2);
    assert_eq!(s.entries[0].status, EntryStatus::Booked);
    assert_eq!(s.opening, None);
    assert_eq!(s.closing, None);
}

/// Quirk 2: a header with a leading space, and an opening balance naming no account: the
/// opening balance record is the first entry, after a zero opening the day before.
#[test]
fn leading_space_and_opening_balance_without_account_name() {
    let s = only("opening_balance_no_name.qif");
    assert_eq!(s.account.name, None);
    let opening = s.opening.clone().expect("opening");
    assert_eq!(opening.amount, Decimal::ZERO);
    assert_eq!(opening.date, day(1995, 12, 2));
    assert_eq!(amounts(&s), vec![dec("4706.57"), dec("-6.57")]);
    let closing = s.closing.expect("closing");
    assert_eq!(closing.amount, dec("4700.00"));
    assert_eq!(closing.date, day(1995, 12, 4));
}

/// Quirk 3 and 4: Quicken's apostrophe years are 20xx, with space-padded day, month and year.
#[test]
fn quicken_apostrophe_and_space_padded_dates() {
    let s = only("quicken_apostrophe.qif");
    assert_eq!(
        dates(&s),
        vec![
            day(2024, 1, 1),
            day(2023, 11, 6),
            day(2005, 12, 31),
            day(2008, 4, 1)
        ]
    );
    assert_eq!(s.entries[1].amount, dec("0.08"));
    assert_eq!(s.entries[1].kind, EntryKind::Other);
}

/// Quirk 5: the day/month order is decided over the whole file, by its last date here.
#[test]
fn day_first_decided_by_a_late_date() {
    let s = only("day_first.qif");
    assert_eq!(
        dates(&s),
        vec![day(2021, 2, 1), day(2021, 3, 5), day(2021, 3, 25)]
    );
}

/// Quirk 6: dotted European dates, with an apostrophe before a four-digit year.
#[test]
fn dotted_dates_are_day_first() {
    let s = only("dotted_dates.qif");
    assert_eq!(
        dates(&s),
        vec![day(2009, 2, 28), day(2018, 3, 1), day(2018, 1, 3)]
    );
}

/// Quirk 7: ISO dates.
#[test]
fn iso_dates() {
    let s = only("iso_dates.qif");
    assert_eq!(dates(&s), vec![day(2014, 12, 31), day(2015, 1, 2)]);
    assert_eq!(s.entries[0].text.as_deref(), Some("CHEQUE No 4702696"));
    assert_eq!(s.entries[0].counterparty, None);
}

/// Quirk 8: two-digit years below 50 are 20xx, the others 19xx; dashes as separators.
#[test]
fn two_digit_years() {
    let s = only("two_digit_years.qif");
    assert_eq!(
        dates(&s),
        vec![
            day(2010, 3, 3),
            day(1999, 12, 31),
            day(2049, 1, 2),
            day(1950, 12, 31)
        ]
    );
}

/// Quirk 9: month names, blank lines between records, empty memos, two identical rows.
#[test]
fn month_names_blank_lines_and_empty_memos() {
    let s = only("amex_blank_lines.qif");
    assert_eq!(s.account.kind, Some(AccountKind::CreditCard));
    assert_eq!(
        dates(&s),
        vec![day(2025, 5, 12), day(2025, 5, 12), day(2025, 5, 11)]
    );
    assert_eq!(
        s.entries[0],
        ParsedEntry {
            line: 2,
            ..s.entries[1].clone()
        }
    );
    assert_eq!(s.entries[0].text, None);
    assert_eq!(s.entries[0].code.as_deref(), Some("20250512"));
    assert_eq!(s.entries[0].reference, None);
}

/// Quirk 10: thousands separators, and `U` beside `T`.
#[test]
fn thousands_separators() {
    let s = only("thousands.qif");
    assert_eq!(
        amounts(&s),
        vec![dec("-112414.59"), dec("1000000.00"), dec("999.5")]
    );
}

/// Quirk 11: a decimal comma, decided over the file, with dots grouping thousands.
#[test]
fn decimal_comma() {
    let s = only("decimal_comma.qif");
    assert_eq!(
        amounts(&s),
        vec![dec("-1234.56"), dec("-12.5"), dec("2000")]
    );
    assert_eq!(dates(&s)[0], day(2022, 12, 30));
}

/// Quirk 12: the doubled minus of some exporters, and an explicit plus.
#[test]
fn doubled_minus() {
    let s = only("double_minus.qif");
    assert_eq!(s.account.kind, Some(AccountKind::Cash));
    assert_eq!(amounts(&s), vec![dec("-100.00"), dec("25.00")]);
}

/// Quirk 13: spaces and apostrophes grouping thousands.
#[test]
fn spaces_and_apostrophes_group_thousands() {
    let s = only("space_grouping.qif");
    assert_eq!(s.account.kind, Some(AccountKind::OtherAsset));
    assert_eq!(amounts(&s), vec![dec("1000000.00"), dec("-1250.75")]);
}

/// Quirk 14: a split record stays one entry with its total; parts kept in the text.
#[test]
fn splits_stay_one_entry() {
    let file = read("splits.qif");
    let s = &file.statements[0];
    assert_eq!(
        amounts(s),
        vec![dec("-119.48"), dec("-750.00"), dec("-10.00")]
    );
    assert_eq!(
        s.entries[0].text.as_deref(),
        Some(
            "grocery and cash (split: [Cash Account] -60.00 cash; \
             Food & Dining:Groceries -59.48 grocery)"
        )
    );
    assert_eq!(s.entries[0].kind, EntryKind::Transfer);
    assert_eq!(
        s.entries[1].text.as_deref(),
        Some("split: Home:Rent -700.00; Home:Utilities -50.00")
    );
    assert_eq!(file.warnings.len(), 1, "{:?}", file.warnings);
    assert_eq!(file.warnings[0].item, "line 23");
    assert!(file.warnings[0].message.contains("-9.00"));
}

/// Quirk 15: a blank split part (empty `S`, zero `$`) is dropped.
#[test]
fn blank_split_part_dropped() {
    let file = read("blank_split.qif");
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    let s = &file.statements[0];
    assert_eq!(amounts(s), vec![dec("-30.00")]);
    assert_eq!(
        s.entries[0].text.as_deref(),
        Some("split: Medical -20.00; Personal Care -10.00")
    );
}

/// Quirk 16: a missing final `^`.
#[test]
fn missing_final_caret() {
    let s = only("no_final_caret.qif");
    assert_eq!(payees(&s), vec!["First", "Last without caret"]);
}

/// Quirk 16 (continued): a `^` missing between two records; the second date starts a new one.
#[test]
fn missing_caret_between_records() {
    let file = read("missing_caret_between.qif");
    let s = &file.statements[0];
    assert_eq!(payees(s), vec!["Bus ticket", "Train ticket"]);
    assert_eq!(amounts(s), vec![dec("-7.00"), dec("-8.00")]);
    assert_eq!(s.entries[1].line, 5);
    assert_eq!(file.warnings.len(), 1);
    assert_eq!(file.warnings[0].item, "line 5");
}

/// Quirk 17: `!Account` blocks, with the AutoSwitch account list.
#[test]
fn accounts_and_autoswitch_list() {
    let file = read("autoswitch.qif");
    let names: Vec<_> = file
        .statements
        .iter()
        .map(|s| (s.account.name.as_deref(), s.account.kind))
        .collect();
    assert_eq!(
        names,
        vec![
            (Some("Checking"), Some(AccountKind::Checking)),
            (Some("Visa"), Some(AccountKind::CreditCard))
        ]
    );
    assert_eq!(amounts(&file.statements[1]), vec![dec("-15.00")]);
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

/// Quirk 17 (continued): an AutoSwitch list never cleared; the block before the section names
/// it.
#[test]
fn autoswitch_list_never_cleared() {
    let s = only("autoswitch_uncleared.qif");
    assert_eq!(s.account.name.as_deref(), Some("Card"));
    assert_eq!(amounts(&s), vec![dec("-9.99")]);
}

/// Quirk 18: lists are skipped; the security list names symbols.
#[test]
fn lists_skipped_and_security_symbols() {
    let file = read("lists.qif");
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    assert_eq!(file.statements.len(), 2);
    let invest = &file.statements[0];
    assert_eq!(invest.account.kind, Some(AccountKind::Investment));
    assert_eq!(invest.entries[0].security.as_deref(), Some("EXIDX"));
    assert_eq!(invest.positions[0].security, "EXIDX");
    assert_eq!(invest.positions[0].quantity, dec("10"));
    assert_eq!(amounts(&file.statements[1]), vec![dec("-1.00")]);
}

/// Quirk 19: investment actions, signs, quantities and positions.
#[test]
fn investment_actions() {
    let file = read("invest.qif");
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    let s = &file.statements[0];
    assert_eq!(
        amounts(s),
        vec![
            dec("-1004.95"),
            dec("25.00"),
            dec("-25.00"),
            dec("745.05"),
            dec("-200.00"),
            dec("3.10"),
            dec("-12.00"),
            dec("-100.00"),
            dec("0"),
            dec("220.00"),
        ]
    );
    let kinds: Vec<_> = s.entries.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EntryKind::Trade,
            EntryKind::Income,
            EntryKind::Trade,
            EntryKind::Trade,
            EntryKind::Trade,
            EntryKind::Income,
            EntryKind::Fee,
            EntryKind::Transfer,
            EntryKind::Other,
            EntryKind::Trade,
        ]
    );
    let buy = &s.entries[0];
    assert_eq!(buy.code.as_deref(), Some("BUY"));
    assert_eq!(buy.security.as_deref(), Some("ACME"));
    assert_eq!(buy.quantity, Some(dec("100")));
    assert_eq!(buy.unit_price, Some(dec("10.00")));
    assert_eq!(buy.commission, Some(dec("4.95")));
    assert_eq!(buy.text.as_deref(), Some("First lot"));
    assert_eq!(s.entries[3].quantity, Some(dec("-50")));
    assert_eq!(s.entries[4].code.as_deref(), Some("BUYX"));
    assert_eq!(s.entries[9].quantity, Some(dec("-20")));
    assert_eq!(
        s.positions,
        vec![ParsedPosition {
            security: "ACME".into(),
            quantity: dec("52"),
            unit_price: Some(dec("15.00")),
            market_value: Some(dec("780.00")),
            cost_basis: None,
        }]
    );
    assert_eq!(s.opening, None);
}

/// Quirk 20: shares moved in and out carry no cash; day-first apostrophe dates.
#[test]
fn shares_in_and_out() {
    let s = only("invest_shares.qif");
    assert_eq!(dates(&s), vec![day(2006, 11, 6), day(2006, 11, 22)]);
    assert_eq!(amounts(&s), vec![Decimal::ZERO, Decimal::ZERO]);
    assert_eq!(s.entries[0].quantity, Some(dec("1000")));
    assert_eq!(s.entries[1].quantity, Some(dec("-500")));
    assert_eq!(s.positions.len(), 1);
    assert_eq!(s.positions[0].quantity, dec("500"));
    assert_eq!(s.positions[0].market_value, Some(dec("13000")));
}

/// Quirk 21: cleared statuses are read; an unknown one is a warning.
#[test]
fn cleared_statuses() {
    let file = read("cleared.qif");
    assert_eq!(file.statements[0].entries.len(), 5);
    assert_eq!(file.warnings.len(), 1);
    assert_eq!(file.warnings[0].item, "line 24");
}

/// Quirk 22: Windows-1252 bytes, and a decimal comma in a one-record file.
#[test]
fn windows_1252() {
    let s = only("cp1252.qif");
    assert_eq!(payees(&s), vec!["Femme de ménage"]);
    assert_eq!(s.entries[0].text.as_deref(), Some("Café – 5 €"));
    assert_eq!(amounts(&s), vec![dec("-2.00")]);
    assert_eq!(dates(&s), vec![day(2018, 1, 9)]);
}

/// Quirk 26: Windows-1250 text (Polish exports), told from Windows-1252 by its letters.
#[test]
fn windows_1250() {
    let s = only("cp1250.qif");
    assert_eq!(payees(&s), vec!["Spółka Łódź", "Józef Śląski"]);
    assert_eq!(s.entries[0].text.as_deref(), Some("Zażółć gęślą jaźń"));
    assert_eq!(s.entries[1].text.as_deref(), Some("Zwrot – bilety"));
    assert_eq!(amounts(&s), vec![dec("-250.00"), dec("120.50")]);
}

/// Quirk 23: a UTF-8 byte-order mark and CRLF; a lone CR.
#[test]
fn bom_crlf_and_lone_cr() {
    let s = only("bom_crlf.qif");
    assert_eq!(payees(&s), vec!["Épargne", "Zürich"]);
    assert_eq!(s.entries[1].line, 6);
    let s = only("lone_cr.qif");
    assert_eq!(payees(&s), vec!["Old Mac"]);
}

/// Quirk 24: the opening balance names its account through `L[Name]`; closing computed.
#[test]
fn opening_balance_names_the_account() {
    let s = only("opening_balance_named.qif");
    assert_eq!(s.account.name.as_deref(), Some("Everyday Checking"));
    assert_eq!(
        s.opening,
        Some(ParsedBalance {
            amount: Decimal::ZERO,
            date: day(2023, 12, 31),
            currency: None
        })
    );
    assert_eq!(
        s.closing,
        Some(ParsedBalance {
            amount: dec("1350.25"),
            date: day(2024, 1, 9),
            currency: None
        })
    );
    assert_eq!(s.entries.len(), 3);
    assert_eq!(s.entries[0].amount, dec("1500.00"));
    assert_eq!(s.entries[1].code.as_deref(), Some("1001"));
}

/// Quirk 25: the German `Oth S`, `Oth L`, transfers, and an unknown section skipped with a
/// warning.
#[test]
fn other_sections_and_unknown_types() {
    let file = read("oth_s_and_unknown.qif");
    let kinds: Vec<_> = file.statements.iter().map(|s| s.account.kind).collect();
    assert_eq!(
        kinds,
        vec![
            Some(AccountKind::OtherAsset),
            Some(AccountKind::OtherLiability)
        ]
    );
    assert_eq!(file.statements[1].entries[0].kind, EntryKind::Transfer);
    assert_eq!(file.warnings.len(), 1);
    assert_eq!(file.warnings[0].item, "line 6");
}

/// Quirk 27: records before any `!Type:` header are a bank section, with a warning.
#[test]
fn records_before_any_header_are_a_bank_section() {
    let file = read("no_header.qif");
    assert_eq!(file.statements.len(), 1);
    let s = &file.statements[0];
    assert_eq!(s.account.kind, Some(AccountKind::Checking));
    assert_eq!(
        amounts(s),
        vec![dec("-23.50"), dec("1200.00"), dec("-9.99")]
    );
    assert_eq!(dates(s)[2], day(2021, 3, 16));
    assert_eq!(file.warnings.len(), 1, "{:?}", file.warnings);
    assert_eq!(file.warnings[0].item, "line 1");
}

/// Quirk 28: split amounts written `$=746.36`.
#[test]
fn split_amounts_with_an_equals_sign() {
    let file = read("split_equals.qif");
    let s = &file.statements[0];
    assert_eq!(
        amounts(s),
        vec![dec("-1050.00"), dec("746.36"), dec("-20.00")]
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    let text = s.entries[0].text.as_deref().unwrap_or_default();
    assert!(text.contains("Housing:Rent -1000.00"), "{text}");
}

/// Quirk 29: `!Account` blocks switch between accounts, one account coming back later, and
/// records after a block with no `!Type:` header read in the block's type.
#[test]
fn account_blocks_switch_accounts() {
    let file = read("accounts_switch.qif");
    let names: Vec<_> = file
        .statements
        .iter()
        .map(|s| (s.account.name.as_deref(), s.account.kind, s.entries.len()))
        .collect();
    assert_eq!(
        names,
        vec![
            (Some("Everyday Checking"), Some(AccountKind::Checking), 2),
            (Some("Travel Card"), Some(AccountKind::CreditCard), 2),
            (Some("Holiday Savings"), Some(AccountKind::Checking), 1),
            (Some("Everyday Checking"), Some(AccountKind::Checking), 1),
        ]
    );
    assert_eq!(
        amounts(&file.statements[1]),
        vec![dec("-310.00"), dec("310.00")]
    );
    assert_eq!(file.warnings.len(), 1, "{:?}", file.warnings);
}

/// Quirk 30: two-digit years after an apostrophe or a slash (`8/25'93`, `8/26/93`, `1/ 4' 2`).
#[test]
fn two_digit_years_after_an_apostrophe() {
    let s = only("two_digit_apostrophe.qif");
    assert_eq!(
        dates(&s),
        vec![
            day(1993, 8, 25),
            day(1993, 8, 26),
            day(2002, 1, 4),
            day(1999, 12, 31)
        ]
    );
}

/// Quirk 31: the day/month order is decided by the whole file, across accounts.
#[test]
fn day_first_decided_in_another_account() {
    let file = read("day_first_other_account.qif");
    assert_eq!(
        dates(&file.statements[0]),
        vec![day(2023, 5, 4), day(2023, 7, 6)]
    );
    assert_eq!(dates(&file.statements[1]), vec![day(2023, 8, 28)]);
}

#[test]
fn errors_name_the_line_and_the_reason() {
    let e = error("");
    assert_eq!(e.line, 0);
    // A record before any header is read as a bank record: its date is what is wrong here.
    let e = error("DT1/1/2024\n");
    assert_eq!((e.line, e.reason.contains("date")), (1, true), "{e}");
    let e = error("!Type:Bank\nD1/1/2024\nT-1.00\n^\nD13/45/2024\nT1\n^\n");
    assert_eq!(e.line, 5, "{e}");
    let e = error("!Type:Bank\nDyesterday\nT1\n^\n");
    assert_eq!(e.line, 2, "{e}");
    assert!(e.reason.contains("yesterday"));
    let e = error("!Type:Bank\nD1/1/2024\nTabc\n^\n");
    assert_eq!(e.line, 3, "{e}");
    let e = error("!Type:Bank\nPNo date\nT1\n^\n");
    assert_eq!(e.line, 2, "{e}");
    assert!(e.reason.contains("date"));
    let e = error("!Type:Bank\nD1/1/2024\nPNo amount\n^\n");
    assert!(e.reason.contains("amount"), "{e}");
    let e = error("!Type:Invst\nD1/1/2024\nNStkSplit\nYX\nQ0:1\n^\n");
    assert_eq!(e.line, 5, "{e}");
    // Only a first record is an opening balance; without one nothing is added up.
    let max = "79228162514264337593543950335";
    let text = format!(
        "!Type:Bank\nD1/1/2024\nT{max}\n^\nD1/2/2024\nT{max}\n^\nD1/1/2024\nT1\nPOpening Balance\n^\n"
    );
    let file = parse(text.as_bytes()).expect("parsed");
    assert_eq!(file.statements[0].entries.len(), 3);
    assert_eq!(file.statements[0].closing, None);
}

#[test]
fn huge_amounts_are_an_error_not_a_panic() {
    let max = "79228162514264337593543950335";
    let text =
        format!("!Type:Bank\nD1/1/2024\nT{max}\nPOpening Balance\n^\nD1/2/2024\nT{max}\n^\n");
    let e = error(&text);
    assert_eq!(e.line, 6, "{e}");
}

#[test]
fn unknown_action_keeps_the_written_sign() {
    let file = parse(b"!Type:Invst\nD1/1/2024\nNFancy\nT-3\n^\n").expect("parsed");
    assert_eq!(file.statements[0].entries[0].amount, dec("-3"));
    assert_eq!(file.warnings.len(), 1);
}

/// Replaces, inserts or deletes bytes of a valid file.
fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(at, op, byte) in edits {
        if bytes.is_empty() {
            bytes.push(byte);
            continue;
        }
        let at = at % bytes.len();
        match op % 4 {
            0 => bytes[at] = byte,
            1 => bytes.insert(at, byte),
            2 => {
                bytes.remove(at);
            }
            _ => {
                // duplicate a run of the file, as a pasted line would
                let end = (at + usize::from(byte) % 40).min(bytes.len());
                let run = bytes[at..end].to_vec();
                bytes.splice(at..at, run);
            }
        }
    }
    bytes
}

fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    let lines = bytes.split(|&b| b == b'\n' || b == b'\r').count();
    let _ = sniff(bytes);
    if let Err(e) = parse(bytes) {
        prop_assert!(e.line <= lines, "line {} of {lines}", e.line);
        prop_assert!(!e.reason.is_empty());
    }
    Ok(())
}

/// `cents` written with thousands separators and two decimals, in the point or comma style.
fn written_amount(cents: i64, comma: bool) -> String {
    let (decimal, group) = if comma { (',', '.') } else { ('.', ',') };
    let units = (cents.unsigned_abs() / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in units.chars().enumerate() {
        if i > 0 && (units.len() - i).is_multiple_of(3) {
            grouped.push(group);
        }
        grouped.push(c);
    }
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{grouped}{decimal}{:02}", cents.unsigned_abs() % 100)
}

/// How a generated file writes its dates.
#[derive(Debug, Clone, Copy)]
enum Spelling {
    /// `m/d'yy` for 20xx, `m/d/yy` for 19xx.
    Quicken,
    /// `d.m.yyyy`.
    Dotted,
    /// `yyyy-mm-dd`.
    Iso,
    /// `dd/mm/yyyy`, with a day above 12 somewhere in the file.
    DayFirst,
}

fn written_date(date: NaiveDate, spelling: Spelling) -> String {
    use chrono::Datelike as _;
    let (y, m, d) = (date.year(), date.month(), date.day());
    match spelling {
        Spelling::Quicken if y >= 2000 => format!("{m}/{d:2}'{:02}", y - 2000),
        Spelling::Quicken => format!("{m}/{d}/{:02}", y - 1900),
        Spelling::Dotted => format!("{d}.{m}.{y}"),
        Spelling::Iso => format!("{y}-{m:02}-{d:02}"),
        Spelling::DayFirst => format!("{d:02}/{m:02}/{y}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every date and amount written in one of the file-wide conventions reads back exactly.
    #[test]
    fn dates_and_amounts_read_back(
        rows in vec((0i64..3_650_000, -99_999_999_999i64..99_999_999_999), 1..30),
        spelling in prop::sample::select(vec![
            Spelling::Quicken, Spelling::Dotted, Spelling::Iso, Spelling::DayFirst,
        ]),
        comma in any::<bool>(),
    ) {
        let base = day(1950, 1, 1);
        let mut expected: Vec<(NaiveDate, Decimal)> = rows
            .iter()
            .map(|&(days, cents)| {
                let date = base + chrono::TimeDelta::days(days % 36_500);
                (date, Decimal::new(cents, 2))
            })
            .collect();
        if matches!(spelling, Spelling::DayFirst) {
            // The day above 12 that decides the order.
            expected.push((day(2020, 1, 13), Decimal::new(-1, 2)));
        }
        let mut text = String::from("!Type:Bank\n");
        for (date, amount) in &expected {
            let cents = i64::try_from(amount.mantissa()).unwrap_or_default();
            text.push_str(&format!(
                "D{}\nT{}\nPRow\n^\n",
                written_date(*date, spelling),
                written_amount(cents, comma),
            ));
        }
        let file = parse(text.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let got: Vec<(NaiveDate, Decimal)> = file.statements[0]
            .entries
            .iter()
            .map(|e| (e.date, e.amount))
            .collect();
        // Every amount has two decimals, so the decimal separator is always decided.
        prop_assert_eq!(got, expected, "{}", text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..2048)) {
        check(&bytes)?;
    }

    #[test]
    fn never_panics_on_qif_like_lines(
        lines in vec(
            (
                prop::sample::select(vec![
                    "!Type:Bank", "!Type:Invst", "!Account", "!Option:AutoSwitch",
                    "!Clear:AutoSwitch", "!Type:Security", "^", "D", "T", "U", "$", "S", "E",
                    "N", "Y", "Q", "I", "O", "P", "L", "C", "M",
                ]),
                "[0-9/.,'\\- :A-Za-z\\[\\]]{0,14}",
            ),
            0..60,
        )
    ) {
        let text: String = lines.iter().map(|(code, value)| format!("{code}{value}\n")).collect();
        check(text.as_bytes())?;
    }

    #[test]
    fn never_panics_on_mutated_fixtures(
        index in 0..FIXTURES.len(),
        edits in vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..12),
    ) {
        let bytes = mutate(fixture(FIXTURES[index]), &edits);
        check(&bytes)?;
    }
}

/// A generated bank file of about `bytes` bytes: records of every common shape.
fn generated(bytes: usize) -> String {
    let mut text = String::from("!Type:Bank\nD1/ 1'24\nT1,000.00\nPOpening Balance\nL[Big]\n^\n");
    let mut n = 0usize;
    while text.len() < bytes {
        let day = n % 28 + 1;
        let month = n / 28 % 12 + 1;
        text.push_str(&format!(
            "D{month}/{day:2}'24\nU-{a}.{c:02}\nT-{a}.{c:02}\nC*\nN{n}\nPCoffee shop number {n}\n\
             MCard purchase\nLFood:Coffee\n^\n",
            a = n % 900 + 1,
            c = n % 100,
        ));
        n += 1;
    }
    text
}

#[test]
fn a_generated_megabyte_reads_back() {
    let text = generated(1 << 20);
    let file = parse(text.as_bytes()).expect("parsed");
    let statement = &file.statements[0];
    assert_eq!(statement.account.name.as_deref(), Some("Big"));
    let closing = statement.closing.as_ref().expect("closing");
    let sum = statement
        .entries
        .iter()
        .fold(Decimal::ZERO, |sum, e| sum + e.amount);
    // The opening balance record (1000.00) is the first entry.
    assert_eq!(statement.entries[0].amount, dec("1000.00"));
    assert_eq!(closing.amount, sum);
    assert!(statement.entries.len() > 10_000);
}

/// Peak memory, measured by hand: run this and `generate_ten_mib_only` under
/// `/usr/bin/time -v` and compare their maximum resident sizes.
#[test]
#[ignore = "a measurement, run by hand"]
fn parse_ten_mib() {
    let text = generated(10 << 20);
    let file = parse(text.as_bytes()).expect("parsed");
    assert!(file.statements[0].entries.len() > 100_000);
}

/// The baseline of [`parse_ten_mib`].
#[test]
#[ignore = "a measurement, run by hand"]
fn generate_ten_mib_only() {
    let text = generated(10 << 20);
    assert!(text.len() >= 10 << 20);
}

/// Quirk 32: comment lines starting with `#` (hand-written and script-written files), before the
/// first header and between records, are skipped; the file is still recognised as QIF.
#[test]
fn comment_lines_are_skipped() {
    let bytes = fixture("comment_lines.qif");
    assert!(sniff(&bytes));
    let file = read("comment_lines.qif");
    assert_eq!(file.statements.len(), 1);
    assert_eq!(
        amounts(&file.statements[0]),
        vec![dec("-64.10"), dec("-950.00")]
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

/// Quirk 33: a `D` line right after a split's `S` line is the split's own date, not the start of
/// a new record: the record keeps its date and total, and no warning is raised.
#[test]
fn a_date_inside_a_split_belongs_to_the_split() {
    let file = read("split_dates.qif");
    let s = &file.statements[0];
    assert_eq!(amounts(s), vec![dec("-80.00"), dec("1500.00")]);
    assert_eq!(dates(s)[0], day(2022, 3, 5));
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}
