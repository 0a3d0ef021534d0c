//! One test per quirk of `QUIRKS.md`, each on its own fixture, plus the mapping rules and a
//! property test.

use super::*;
use rust_decimal::Decimal;
use std::str::FromStr;

fn dec(text: &str) -> Decimal {
    Decimal::from_str(text).expect("test decimal")
}

fn date(text: &str) -> NaiveDate {
    NaiveDate::from_str(text).expect("test date")
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/src/import/csv/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn read(name: &str) -> ParsedStatement {
    let bytes = fixture(name);
    assert!(sniff(&bytes), "{name} is sniffed as CSV");
    let file = parse(&bytes, None).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(file.statements.len(), 1);
    file.statements.into_iter().next().expect("one statement")
}

fn amounts(statement: &ParsedStatement) -> Vec<Decimal> {
    statement.entries.iter().map(|e| e.amount).collect()
}

fn texts(statement: &ParsedStatement) -> Vec<Option<&str>> {
    statement
        .entries
        .iter()
        .map(|e| e.text.as_deref())
        .collect()
}

fn mapping(json: &str) -> CsvMapping {
    serde_json::from_str(json).expect("test mapping")
}

#[test]
fn utf8_bom_does_not_hide_the_first_header() {
    let s = read("bom_utf8.csv");
    assert_eq!(amounts(&s), [dec("-3.50"), dec("2500.00")]);
    assert_eq!(s.entries[0].date, date("2024-03-01"));
    assert_eq!(texts(&s), [Some("Corner coffee"), Some("Salary March")]);
    assert_eq!(s.entries[1].line, 3);
}

#[test]
fn utf16_le_with_bom_and_tabs() {
    let s = read("utf16le_bom_tab.csv");
    assert_eq!(amounts(&s), [dec("-4.20"), dec("-950.00"), dec("12.00")]);
    assert_eq!(s.entries[0].date, date("2024-04-05"));
    assert_eq!(s.entries[0].text.as_deref(), Some("Bakkerij Zonneveld"));
}

#[test]
fn utf16_be_without_bom_by_its_nul_pattern() {
    let s = read("utf16be_nobom.csv");
    assert_eq!(amounts(&s), [dec("-2.80"), dec("150.00")]);
    assert_eq!(s.entries[0].text.as_deref(), Some("Boulangerie Étoile"));
    assert_eq!(s.entries[0].date, date("2024-05-02"));
}

#[test]
fn windows_1252_fallback_keeps_umlauts_and_euro() {
    let s = read("windows1252.csv");
    assert_eq!(
        s.entries[0].counterparty.as_deref(),
        Some("Bäckerei Müller")
    );
    assert_eq!(s.entries[0].text.as_deref(), Some("Brötchen für 4 €"));
    assert_eq!(
        s.entries[1].counterparty.as_deref(),
        Some("Straßenbahn GmbH")
    );
    assert_eq!(amounts(&s), [dec("-4.00"), dec("-58.00")]);
}

#[test]
fn central_european_code_pages_are_detected_or_named() {
    let polish = fixture("pl_cp1250.csv");
    let polish_columns = r#""columns": {"date": "Data operacji", "amount": "Kwota",
        "description": "Opis operacji", "payee": "Kontrahent"}"#;
    let czech = fixture("cz_cp852.csv");
    let czech_columns = r#""columns": {"date": "Datum", "amount": "Částka",
        "description": "Popis", "payee": "Protistrana"}"#;
    for encoding in ["", r#""encoding": "windows-1250", "#] {
        let m = mapping(&format!("{{{encoding}{polish_columns}}}"));
        let file = parse(&polish, Some(&m)).unwrap_or_else(|e| panic!("{encoding}: {e}"));
        let s = &file.statements[0];
        assert_eq!(
            texts(s),
            [Some("Zażółć gęślą jaźń"), Some("Zwrot za bilety")]
        );
        assert_eq!(s.entries[0].counterparty.as_deref(), Some("Spółka Łódź"));
        assert_eq!(s.entries[1].counterparty.as_deref(), Some("Józef Śląski"));
        assert_eq!(amounts(s), [dec("-250.00"), dec("120.50")]);
    }
    // DOS 852: the header `Částka` is only found when the file is read in its code page.
    for encoding in ["", r#""encoding": "cp852", "#] {
        let m = mapping(&format!("{{{encoding}{czech_columns}}}"));
        let file = parse(&czech, Some(&m)).unwrap_or_else(|e| panic!("{encoding}: {e}"));
        let s = &file.statements[0];
        assert_eq!(
            texts(s),
            [Some("Příchozí platba"), Some("Poplatek za vedení účtu")]
        );
        assert_eq!(
            s.entries[1].counterparty.as_deref(),
            Some("Česká spořitelna")
        );
        assert_eq!(amounts(s), [dec("1250.00"), dec("-45.00")]);
    }
    // A named encoding wins over detection: the same bytes read as Windows-1250 lose the
    // `Částka` column.
    let m = mapping(&format!(
        r#"{{"encoding": "windows-1250", {czech_columns}}}"#
    ));
    match parse(&czech, Some(&m)) {
        Err(CsvError::Mapping { column, .. }) => assert_eq!(column, "Částka"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn other_code_pages_are_found_by_chardetng_or_named() {
    // Windows-1251: the Cyrillic header names only match when the file is read in it.
    let russian = fixture("ru_cp1251.csv");
    let columns = r#""columns": {"date": "Дата", "amount": "Сумма", "description": "Описание",
        "currency": "Валюта"}"#;
    for encoding in [
        "",
        r#""encoding": "windows-1251", "#,
        r#""encoding": "CP1251", "#,
    ] {
        let m = mapping(&format!("{{{encoding}{columns}}}"));
        let file = parse(&russian, Some(&m)).unwrap_or_else(|e| panic!("{encoding}: {e}"));
        let s = &file.statements[0];
        assert_eq!(
            texts(s),
            [
                Some("Оплата в магазине «Пятёрочка», Москва"),
                Some("Зарплата за декабрь, ООО «Ромашка»"),
                Some("Перевод Ивану Петровичу Сидорову")
            ]
        );
        assert_eq!(
            amounts(s),
            [dec("-560.00"), dec("85000.00"), dec("-1250.50")]
        );
        assert_eq!(s.account.currency.as_deref(), Some("RUB"));
    }
    // Czech without `š ž ť` once read as Windows-1252 (`Øepy`, `Pøíchozí`).
    let s = read("cz_cp1250.csv");
    assert_eq!(
        texts(&s),
        [
            Some("Platba kartou Potraviny Řepy, Praha"),
            Some("Příchozí úhrada nájem Jiří Dvořák"),
            Some("Poplatek za vedení účtu")
        ]
    );
    assert_eq!(
        amounts(&s),
        [dec("-245.00"), dec("12000.00"), dec("-49.00")]
    );
    // A delimiter records cannot be split on.
    let m = mapping(r#"{"delimiter": "§", "columns": {"date": 0, "amount": 1}}"#);
    match parse(b"2025-01-02\xC2\xA712.00\n", Some(&m)) {
        Err(CsvError::Mapping { column, .. }) => assert_eq!(column, "delimiter"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn german_export_with_preamble_two_digit_years_pending_and_two_party_columns() {
    let s = read("de_preamble.csv");
    assert_eq!(amounts(&s), [dec("-2.5"), dec("3100.00"), dec("-85")]);
    let first = &s.entries[0];
    assert_eq!(first.date, date("2024-06-27"));
    assert_eq!(first.status, EntryStatus::Pending);
    assert_eq!(first.value_date, None);
    assert_eq!(first.counterparty.as_deref(), Some("Kiosk am Markt"));
    assert_eq!(first.code.as_deref(), Some("Ausgang"));
    let second = &s.entries[1];
    assert_eq!(second.status, EntryStatus::Booked);
    assert_eq!(second.counterparty.as_deref(), Some("Firma Muster AG"));
    assert_eq!(s.account.currency.as_deref(), Some("EUR"));
    assert_eq!(first.line, 6);
}

#[test]
fn pipe_delimiter_and_closing_balance() {
    let s = read("pipe.csv");
    assert_eq!(amounts(&s), [dec("-45.10"), dec("5.00")]);
    assert_eq!(s.entries[0].counterparty.as_deref(), Some("Grocer"));
    let closing = s.closing.expect("closing balance");
    assert_eq!(closing.amount, dec("959.90"));
    assert_eq!(closing.date, date("2024-07-03"));
}

#[test]
fn excel_sep_line_names_the_delimiter() {
    let s = read("sep_line.csv");
    assert_eq!(amounts(&s), [dec("-2.40"), dec("-7.99")]);
    assert_eq!(s.entries[1].text.as_deref(), Some("Book, used"));
    assert_eq!(s.entries[0].line, 3);
}

#[test]
fn footer_lines_are_skipped_with_a_warning() {
    let bytes = fixture("footer.csv");
    let file = parse(&bytes, None).expect("parses");
    let s = &file.statements[0];
    assert_eq!(amounts(s), [dec("-19.99"), dec("25.00")]);
    assert_eq!(s.entries[0].code.as_deref(), Some("Lastschrift"));
    assert_eq!(s.entries[0].counterparty.as_deref(), Some("Telefon AG"));
    assert_eq!(s.entries[0].currency.as_deref(), Some("EUR"));
    assert_eq!(s.account.currency.as_deref(), Some("EUR"));
    assert_eq!(file.warnings.len(), 1);
    assert_eq!(file.warnings[0].item, "line 4");
    assert!(file.warnings[0].message.contains("2 line(s)"));
}

#[test]
fn a_bad_row_between_good_rows_is_unreadable_with_its_line() {
    let text = "Date,Description,Amount\n2024-01-01,A,-1.00\nTotal,B,-2.00\n2024-01-03,C,-3.00\n";
    let error = parse(text.as_bytes(), None).expect_err("refused");
    assert_eq!(
        error,
        CsvError::Unreadable(ParseError::new(3, "\"Total\" in column Date is not a date"))
    );
    // An impossible date right below the header is not a preamble line.
    let text = "Date,Description,Amount\n2024-13-45,A,-1.00\n2024-01-03,C,-3.00\n";
    match parse(text.as_bytes(), None) {
        Err(CsvError::Unreadable(e)) => assert_eq!(e.line, 2),
        other => panic!("{other:?}"),
    }
    // A line without date or amount between rows is skipped with a warning.
    let text = "Date,Description,Amount\n2024-01-01,A,-1.00\n,carried over,\n2024-01-03,C,-3.00\n";
    let file = parse(text.as_bytes(), None).expect("parses");
    assert_eq!(file.statements[0].entries.len(), 2);
    assert_eq!(file.warnings[0].item, "line 3");
    let text = "Date,Description,Amount\n2024-01-01,A,12 apples\n";
    match parse(text.as_bytes(), None) {
        Err(CsvError::Unreadable(e)) => assert_eq!(e.line, 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn thousands_separators_comma_space_and_apostrophe() {
    let s = read("thousands.csv");
    assert_eq!(
        amounts(&s),
        [
            dec("-12345.67"),
            dec("1234.50"),
            dec("1000.25"),
            dec("0.99")
        ]
    );
}

#[test]
fn french_spaces_and_no_break_spaces_group_thousands() {
    let s = read("thousands_fr.csv");
    assert_eq!(amounts(&s), [dec("-1250.00"), dec("2000.50"), dec("-1.20")]);
    assert_eq!(s.entries[0].date, date("2024-10-01"));
}

#[test]
fn parentheses_trailing_minus_and_cr_dr_are_signs() {
    let s = read("signs.csv");
    assert_eq!(
        amounts(&s),
        [
            dec("-12.34"),
            dec("400.00"),
            dec("-50.00"),
            dec("120.00"),
            dec("-89.10"),
            dec("-1.00")
        ]
    );
    // 11/13 decides: month first for the whole file.
    assert_eq!(s.entries[0].date, date("2024-11-01"));
    assert_eq!(s.entries[5].date, date("2024-11-13"));
}

#[test]
fn currency_symbols_and_codes_around_amounts() {
    let s = read("currency_symbols.csv");
    assert_eq!(amounts(&s), [dec("-12.50"), dec("3.00"), dec("-7.25")]);
    assert_eq!(s.entries[1].date, date("2024-11-02"));
}

#[test]
fn paid_out_and_paid_in_columns() {
    let s = read("debit_credit.csv");
    assert_eq!(amounts(&s), [dec("-750.00"), dec("20.00"), dec("100.00")]);
    assert_eq!(s.closing.expect("closing").amount, dec("1370.00"));
    assert_eq!(s.entries[0].date, date("2024-12-15"));
}

#[test]
fn debit_is_money_out_whatever_its_sign() {
    let s = read("debit_credit_fr.csv");
    assert_eq!(amounts(&s), [dec("-12.40"), dec("30.00"), dec("-8.90")]);
    assert_eq!(s.entries[0].text.as_deref(), Some("Pharmacie"));
}

#[test]
fn af_bij_direction_compact_dates_and_currency_from_the_header() {
    let s = read("af_bij.csv");
    assert_eq!(amounts(&s), [dec("15.00"), dec("-23.45")]);
    assert_eq!(s.entries[0].date, date("2025-02-03"));
    assert_eq!(s.entries[0].counterparty.as_deref(), Some("Jan de Boer"));
    assert_eq!(s.entries[0].text.as_deref(), Some("Terug voor de pizza"));
    assert_eq!(s.entries[1].code.as_deref(), Some("BA"));
    assert_eq!(s.account.currency.as_deref(), Some("EUR"));
}

#[test]
fn unknown_direction_is_unreadable() {
    let text = "Datum,Af Bij,Bedrag\n20250203,Misschien,\"1,00\"\n";
    match parse(text.as_bytes(), None) {
        Err(CsvError::Unreadable(e)) => assert_eq!(e.line, 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn quoted_newlines_delimiters_doubled_quotes_and_excel_cells() {
    let s = read("quoting.csv");
    assert_eq!(s.entries.len(), 2);
    assert_eq!(
        s.entries[0].text.as_deref(),
        Some("Dinner, \"The Anchor\" line one\nline two")
    );
    assert_eq!(s.entries[0].reference.as_deref(), Some("000123"));
    assert_eq!(s.entries[1].reference.as_deref(), Some("000124"));
    // The second row starts after the two-line field.
    assert_eq!(s.entries[1].line, 4);
}

#[test]
fn unclosed_quote_is_unreadable_at_its_line() {
    let text = "Date,Description,Amount\n2024-01-01,\"never closed,-1.00\n2024-01-02,x,1\n";
    assert_eq!(
        parse(text.as_bytes(), None),
        Err(CsvError::Unreadable(ParseError::new(
            2,
            "a quoted field is never closed"
        )))
    );
}

#[test]
fn a_line_of_delimiters_is_refused_not_split_into_millions_of_fields() {
    let mut text = String::from("Date,Amount\n2024-01-01,1.00\n");
    text.push_str(&",".repeat(200_000));
    match parse(text.as_bytes(), None) {
        Err(CsvError::Unreadable(e)) => {
            assert_eq!(e.line, 3);
            assert!(e.reason.contains("fields"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn spanish_headers_and_balance() {
    let s = read("es.csv");
    assert_eq!(amounts(&s), [dec("-1.80"), dec("1500.00")]);
    assert_eq!(s.entries[0].date, date("2025-02-03"));
    assert_eq!(s.closing.expect("closing").amount, dec("1598.20"));
}

#[test]
fn italian_headers_and_currency_column() {
    let s = read("it.csv");
    assert_eq!(amounts(&s), [dec("-1.50"), dec("1800.00")]);
    assert_eq!(s.entries[0].currency.as_deref(), Some("EUR"));
    assert_eq!(s.account.currency.as_deref(), Some("EUR"));
    assert_eq!(s.entries[1].date, date("2025-02-20"));
}

#[test]
fn descending_file_closing_balance_from_the_latest_row_and_times_ignored() {
    let s = read("descending.csv");
    assert_eq!(s.entries[0].date, date("2025-03-05"));
    let closing = s.closing.expect("closing");
    assert_eq!(closing.amount, dec("99.00"));
    assert_eq!(closing.date, date("2025-03-05"));
}

#[test]
fn english_month_names() {
    let s = read("month_names.csv");
    let dates: Vec<NaiveDate> = s.entries.iter().map(|e| e.date).collect();
    assert_eq!(
        dates,
        [date("2025-01-02"), date("2025-01-03"), date("2025-01-04")]
    );
}

#[test]
fn ambiguous_dates_are_read_month_first_with_a_warning() {
    let bytes = fixture("ambiguous.csv");
    let file = parse(&bytes, None).expect("read in a chosen order");
    assert_eq!(file.statements[0].entries[0].date, date("2025-01-02"));
    assert_eq!(file.warnings.len(), 1, "{:?}", file.warnings);
    assert!(file.warnings[0].message.contains("month/day"));
    assert!(file.warnings[0].message.contains("Date"));
    // A `;` file of decimal commas is read day first.
    let text = "Datum;Text;Betrag\n01/02/2025;Eins;-1,00\n03/04/2025;Zwei;-2,00\n";
    let file = parse(text.as_bytes(), None).expect("read in a chosen order");
    assert_eq!(file.statements[0].entries[0].date, date("2025-02-01"));
    assert!(file.warnings[0].message.contains("day/month"));
    let m =
        mapping(r#"{"date_format": "%m/%d/%Y", "columns": {"date": "Date", "amount": "Amount"}}"#);
    let file = parse(&bytes, Some(&m)).expect("parses with a format");
    assert_eq!(file.statements[0].entries[0].date, date("2025-01-02"));
    let m = mapping(
        r#"{"date_format": "DD/MM/YYYY", "columns": {"date": "Date", "amount": "Amount"}}"#,
    );
    let file = parse(&bytes, Some(&m)).expect("parses with a format");
    assert_eq!(file.statements[0].entries[0].date, date("2025-02-01"));
}

#[test]
fn dotted_dates_are_day_first() {
    let s = read("dotted.csv");
    assert_eq!(s.entries[0].date, date("2025-02-01"));
    assert_eq!(s.entries[1].date, date("2025-04-03"));
}

#[test]
fn short_rows_duplicate_headers_blank_lines_and_whole_amounts() {
    let s = read("short_rows.csv");
    assert_eq!(amounts(&s), [dec("-12"), dec("-8.5"), dec("3.00")]);
    assert_eq!(s.entries[2].line, 6);
}

#[test]
fn headerless_file_by_index_mapping() {
    let bytes = fixture("headerless.csv");
    let m = mapping(
        r#"{"date_format": "DD/MM/YYYY", "columns": {"date": 0, "description": 1, "amount": 2, "balance": 3}}"#,
    );
    let file = parse(&bytes, Some(&m)).expect("parses");
    let s = &file.statements[0];
    assert_eq!(amounts(s), [dec("-12.80"), dec("-50.00")]);
    assert_eq!(s.entries[0].date, date("2024-08-06"));
    assert_eq!(s.closing.as_ref().expect("closing").amount, dec("-133.96"));
    // Without the mapping the shapes of the cells name the columns, with a warning.
    let file = parse(&bytes, None).expect("parses");
    assert_eq!(amounts(&file.statements[0]), [dec("-12.80"), dec("-50.00")]);
    assert!(
        file.warnings[0].message.contains("no header row"),
        "{:?}",
        file.warnings
    );
}

/// The whole file's warnings and its only statement.
fn read_with_warnings(name: &str) -> (ParsedStatement, Vec<String>) {
    let file = parse(&fixture(name), None).unwrap_or_else(|e| panic!("{name}: {e}"));
    let warnings = file.warnings.iter().map(|w| w.message.clone()).collect();
    let statement = file.statements.into_iter().next().expect("one statement");
    (statement, warnings)
}

#[test]
fn headerless_file_by_the_shapes_of_its_cells() {
    let (s, warnings) = read_with_warnings("headerless_shapes.csv");
    assert_eq!(
        amounts(&s),
        [dec("-1204.10"), dec("2500.00"), dec("-84.12")]
    );
    assert_eq!(s.entries[2].date, date("2021-03-15"));
    assert_eq!(texts(&s)[0], Some("Corner Grocery"));
    assert!(warnings[0].contains("no header row"), "{warnings:?}");
    assert!(
        warnings[0].contains("column 3 as debit/credit"),
        "{warnings:?}"
    );
}

#[test]
fn total_charged_is_money_out_and_pending_rows_are_skipped() {
    let (s, warnings) = read_with_warnings("total_charged.csv");
    assert_eq!(amounts(&s), [dec("-12.99"), dec("-8.45"), dec("-6.10")]);
    assert!(
        warnings.iter().any(|w| w.contains("pending")),
        "{warnings:?}"
    );
}

#[test]
fn net_amount_and_journal_date_headers() {
    // An accounting journal: each ledger account of `AccountName` is its own account.
    let file = parse(&fixture("net_amount.csv"), None).expect("parses");
    let [sales, receivables] = file.statements.as_slice() else {
        panic!("{:?}", file.statements);
    };
    assert_eq!(sales.account.name.as_deref(), Some("Sales"));
    assert_eq!(amounts(sales), [dec("-450.00")]);
    assert_eq!(amounts(receivables), [dec("450.00"), dec("-450.00")]);
    assert_eq!(sales.entries[0].date, date("2019-02-04"));
}

#[test]
fn credit_amount_and_debit_amount_columns() {
    let s = read("credit_debit_amount.csv");
    assert_eq!(amounts(&s), [dec("300.00"), dec("-4.50"), dec("-200")]);
    assert_eq!(s.entries[0].reference.as_deref(), Some("T-900"));
    assert_eq!(s.closing.as_ref().expect("closing").amount, dec("95.50"));
}

#[test]
fn swiss_french_and_german_headers() {
    let s = read("ch_fr.csv");
    assert_eq!(amounts(&s), [dec("-5.00"), dec("5000.00")]);
    assert_eq!(s.entries[0].date, date("2020-06-30"));
    assert_eq!(s.entries[0].reference.as_deref(), Some("TX20200630A"));
    assert_eq!(s.account.currency.as_deref(), Some("CHF"));
    assert_eq!(s.closing.as_ref().expect("closing").amount, dec("4995.00"));
    let s = read("ch_de_postfinance.csv");
    assert_eq!(amounts(&s), [dec("-45.20"), dec("2000.00")]);
    assert_eq!(s.account.currency.as_deref(), Some("CHF"));
}

#[test]
fn a_type_column_of_debit_and_credit_signs_the_amount() {
    let s = read("type_column.csv");
    assert_eq!(amounts(&s), [dec("-12.40"), dec("1500.00"), dec("-30.00")]);
}

#[test]
fn card_types_written_against_the_sign_invert_it_with_a_warning() {
    let (s, warnings) = read_with_warnings("card_types_inverted.csv");
    assert_eq!(
        amounts(&s),
        [dec("-25.00"), dec("200.00"), dec("-61.30"), dec("10.00")]
    );
    assert!(
        warnings.iter().any(|w| w.contains("negated")),
        "{warnings:?}"
    );
    // The mapping's `invert_sign: false` keeps them as written.
    let m = mapping(
        r#"{"invert_sign": false, "columns": {"date": "Transaction Date", "amount": "Amount"}}"#,
    );
    let file = parse(&fixture("card_types_inverted.csv"), Some(&m)).expect("parses");
    assert_eq!(file.statements[0].entries[0].amount, dec("25.00"));
}

#[test]
fn card_types_that_contradict_each_other_ask_for_invert_sign() {
    match parse(&fixture("card_types_conflict.csv"), None) {
        Err(CsvError::MappingField {
            field: column,
            reason,
        }) => {
            assert_eq!(column, "mapping.invert_sign");
            assert!(reason.contains("invert_sign"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_card_export_of_positive_charges_is_inverted_with_a_warning() {
    let (s, warnings) = read_with_warnings("card_header.csv");
    assert_eq!(amounts(&s), [dec("-18.20"), dec("-54.75"), dec("72.95")]);
    assert!(
        warnings.iter().any(|w| w.contains("card export")),
        "{warnings:?}"
    );
    // A card export whose amounts are mostly negative is read as written.
    let text = "Date,Card No.,Description,Amount\n2024-01-02,1234,Shop,-5.00\n2024-01-03,1234,Cafe,-3.00\n2024-01-09,1234,Payment,8.00\n";
    let file = parse(text.as_bytes(), None).expect("parses");
    assert_eq!(
        amounts(&file.statements[0]),
        [dec("-5.00"), dec("-3.00"), dec("8.00")]
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

#[test]
fn a_merchants_payments_export_naming_the_payers_card_keeps_its_signs() {
    // A payment processor's export of the charges a shop received: the card is the paying
    // customer's, and its positive amounts are money in.
    let text = "id,created,amount,fee,currency,card_id,customer_email\n\
                ch_a1,2024-03-04 10:15,40.00,1.46,eur,pm_x1,a@example.com\n\
                ch_a2,2024-03-05 11:20,12.50,0.66,eur,pm_x2,b@example.com\n";
    let file = parse(text.as_bytes(), None).expect("parses");
    assert_eq!(amounts(&file.statements[0]), [dec("40.00"), dec("12.50")]);
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

#[test]
fn an_account_column_of_several_accounts_gives_one_statement_each() {
    // A budgeting app's export of every account at once.
    let text = "Date,Description,Amount,Account Name,Balance\n\
                2024-05-01,Salary,2500.00,Everyday,2600.00\n\
                2024-05-02,Move to savings,-400.00,Everyday,2200.00\n\
                2024-05-02,Move from everyday,400.00,Rainy Day,1400.00\n\
                2024-05-03,Groceries,-62.40,Everyday,2137.60\n";
    let file = parse(text.as_bytes(), None).expect("parses");
    assert_eq!(file.statements.len(), 2);
    let names: Vec<_> = file
        .statements
        .iter()
        .map(|s| s.account.name.as_deref())
        .collect();
    assert_eq!(names, [Some("Everyday"), Some("Rainy Day")]);
    assert_eq!(
        amounts(&file.statements[0]),
        [dec("2500.00"), dec("-400.00"), dec("-62.40")]
    );
    assert_eq!(amounts(&file.statements[1]), [dec("400.00")]);
    let closing = |i: usize| file.statements[i].closing.as_ref().map(|b| b.amount);
    assert_eq!(closing(0), Some(dec("2137.60")));
    assert_eq!(closing(1), Some(dec("1400.00")));
    assert!(
        file.warnings
            .iter()
            .any(|w| w.message.contains("2 accounts")),
        "{:?}",
        file.warnings
    );
    // One account named on every row is read as before: one statement, no name from the file.
    let text =
        "Date,Account,Amount\n2024-05-01,12-34-56 7890,-5.00\n2024-05-02,12-34-56 7890,-7.00\n";
    let file = parse(text.as_bytes(), None).expect("parses");
    assert_eq!(file.statements.len(), 1);
    assert_eq!(file.statements[0].account.name, None);
}

#[test]
fn date_format_is_bounded_and_of_known_specifiers() {
    let bytes = fixture("ambiguous.csv");
    let refused = |format: &str| {
        let json = serde_json::json!({
            "date_format": format,
            "columns": {"date": "Date", "amount": "Amount"}
        });
        let m: CsvMapping = serde_json::from_value(json).expect("mapping");
        match parse(&bytes, Some(&m)) {
            Err(CsvError::MappingField {
                field: column,
                reason,
            }) => {
                assert_eq!(column, "mapping.date_format");
                reason
            }
            other => panic!("{format:?}: {other:?}"),
        }
    };
    let long = format!("%Y-%m-%d{}", "%t".repeat(8000));
    assert!(refused(&long).contains("64"));
    assert!(refused("%m/%d/%Y%Q").contains("specifier"));
    assert!(refused("%").contains("specifier"));
    // 64 characters of known specifiers are read.
    let padded = format!("%m/%d/%Y{}", " ".repeat(56));
    assert_eq!(padded.chars().count(), 64);
    let json = serde_json::json!({"date_format": "%m/%d/%Y", "columns": {"date": "Date", "amount": "Amount"}});
    let m: CsvMapping = serde_json::from_value(json).expect("mapping");
    assert!(parse(&bytes, Some(&m)).is_ok());
    assert!(values::DateFormat::new(&padded).is_ok());
}

#[test]
fn mapping_by_name_with_separators_invert_sign_and_id() {
    let text =
        "Info line\nWhen|What|Sum|Ref\n2024-05-01|Card|1.234,50|R1\n2024-05-02|Refund|-10,00|R2\n";
    let m = mapping(
        r#"{"delimiter": "|", "decimal": ",", "thousands": ".", "skip_rows": 1, "invert_sign": true,
            "columns": {"date": "when", "amount": "Sum", "description": "What", "id": "Ref"}}"#,
    );
    let file = parse(text.as_bytes(), Some(&m)).expect("parses");
    let s = &file.statements[0];
    assert_eq!(amounts(s), [dec("-1234.50"), dec("10.00")]);
    assert_eq!(s.entries[0].reference.as_deref(), Some("R1"));
}

#[test]
fn mapping_that_does_not_fit_names_the_column() {
    let text = "Date,Amount\n2024-05-01,1.00\n";
    let cases = [
        (
            r#"{"columns": {"date": "Datum", "amount": "Amount"}}"#,
            "Datum",
        ),
        (
            r#"{"columns": {"date": "Date", "amount": "Betrag"}}"#,
            "Betrag",
        ),
        (r#"{"columns": {"date": 0, "amount": 7}}"#, "7"),
        (r#"{"columns": {"date": "Date"}}"#, "amount"),
        (
            r#"{"encoding": "ebcdic", "columns": {"date": 0, "amount": 1}}"#,
            "encoding",
        ),
        (
            r#"{"delimiter": ";;", "columns": {"date": 0, "amount": 1}}"#,
            "delimiter",
        ),
        (
            r#"{"decimal": "x", "columns": {"date": 0, "amount": 1}}"#,
            "decimal",
        ),
        (
            r#"{"date_format": "%d.%m.%Y", "columns": {"date": "Date", "amount": "Amount"}}"#,
            "Date",
        ),
    ];
    for (json, expected) in cases {
        match parse(text.as_bytes(), Some(&mapping(json))) {
            Err(CsvError::Mapping { column, .. }) => assert_eq!(column, expected, "{json}"),
            other => panic!("{json}: {other:?}"),
        }
    }
}

#[test]
fn mapping_json_rules() {
    assert!(serde_json::from_str::<CsvMapping>(r#"{"columns": {"date": 0}, "extra": 1}"#).is_err());
    assert!(serde_json::from_str::<CsvMapping>(r#"{"delimiter": ";"}"#).is_err());
    let m = mapping(r#"{"columns": {"date": 0, "debit": "Out", "credit": "In"}}"#);
    assert_eq!(m.columns.date, ColumnRef::Index(0));
    assert_eq!(m.columns.debit, Some(ColumnRef::Name("Out".to_owned())));
}

#[test]
fn missing_amount_or_date_header_names_the_column() {
    let cases = [
        ("Date,Description\n2024-01-01,x\n", "amount"),
        ("When,Amount\n2024-01-01,1\n", "date"),
        ("a,b\n1,2\n", "date"),
    ];
    for (text, expected) in cases {
        match parse(text.as_bytes(), None) {
            Err(CsvError::Mapping { column, .. }) => assert_eq!(column, expected, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn empty_and_header_only_files() {
    assert_eq!(
        parse(b"", None),
        Err(CsvError::Unreadable(ParseError::new(
            0,
            "the file is empty"
        )))
    );
    assert!(matches!(
        parse(b"\xef\xbb\xbf \r\n", None),
        Err(CsvError::Unreadable(_))
    ));
    let file = parse(b"Date,Amount\n", None).expect("header only");
    assert!(file.statements[0].entries.is_empty());
}

#[test]
fn identical_rows_stay_two_entries() {
    let text = "Date,Description,Amount\n2024-02-02,Coffee,-3.00\n2024-02-02,Coffee,-3.00\n";
    let file = parse(text.as_bytes(), None).expect("parses");
    assert_eq!(file.statements[0].entries.len(), 2);
    assert_ne!(
        file.statements[0].entries[0].line,
        file.statements[0].entries[1].line
    );
}

#[test]
fn sniff_tells_csv_from_other_statements() {
    for other in [
        &b"OFXHEADER:100\nDATA:OFXSGML\n<OFX>"[..],
        b"<?xml version=\"1.0\"?><Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.02\">",
        b"!Type:Bank\nD01/02/2024\nT-1.00\n^\n",
        b":20:STARTUMS\n:25:12345678/0001\n:28C:1\n",
        b"",
        b"just some text\nwithout structure\n",
        b"{\"date\": 1}",
    ] {
        assert!(!sniff(other), "{:?}", String::from_utf8_lossy(other));
    }
    assert!(sniff(
        b"06/08/2024,\"CB BOULANGERIE\",-12.80\n07/08/2024,\"GAZ\",-50.00\n"
    ));
}

#[test]
fn values_read_every_sign_convention() {
    let cases = [
        ("-1.234,56", ',', Some("-1234.56")),
        ("1.234,56-", ',', Some("-1234.56")),
        ("(1,234.56)", '.', Some("-1234.56")),
        ("−5.00", '.', Some("-5.00")),
        ("+5.00", '.', Some("5.00")),
        ("- 12,00", ',', Some("-12.00")),
        ("12.00 DR", '.', Some("-12.00")),
        ("CHF 1'250.00", '.', Some("1250.00")),
        (".5", '.', Some("0.5")),
        ("1.2.3", '.', None),
        ("--1", '.', None),
        ("(1", '.', None),
        ("1 2 x", '.', None),
        ("abc", '.', None),
        ("1,23,456.00", '.', Some("123456.00")),
        ("1.2.3", ',', None),
        ("12 apples", '.', None),
        ("99999999999999999999999999999999999", '.', None),
    ];
    for (cell, decimal, expected) in cases {
        let got = read_amount(
            cell,
            NumberFormat {
                decimal,
                thousands: None,
            },
        );
        assert_eq!(got, expected.map(dec), "{cell}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn column() -> impl Strategy<Value = ColumnRef> {
        prop_oneof![
            (0usize..8).prop_map(ColumnRef::Index),
            "[A-Za-zä ]{0,8}".prop_map(ColumnRef::Name),
        ]
    }

    prop_compose! {
        fn any_mapping()(
            delimiter in proptest::option::of("[,;|\t\"x]{0,2}"),
            decimal in proptest::option::of("[.,x]{0,2}"),
            thousands in proptest::option::of("[., ']{0,1}"),
            date_format in proptest::option::of(prop_oneof![
                Just("%d.%m.%Y".to_owned()), Just("YYYY-MM-DD".to_owned()), "[%a-zA-Z./-]{0,6}",
            ]),
            encoding in proptest::option::of(prop_oneof![
                Just("utf-8".to_owned()), Just("utf-16le".to_owned()), Just("latin1".to_owned()),
                "[a-z0-9-]{0,6}",
            ]),
            skip_rows in proptest::option::of(0usize..5),
            date in column(),
            amount in proptest::option::of(column()),
            debit in proptest::option::of(column()),
            credit in proptest::option::of(column()),
            description in proptest::option::of(column()),
            balance in proptest::option::of(column()),
            id in proptest::option::of(column()),
            invert_sign in proptest::option::of(any::<bool>()),
        ) -> CsvMapping {
            CsvMapping {
                delimiter, decimal, thousands, date_format, encoding, skip_rows,
                columns: CsvColumns {
                    date, amount, debit, credit, description, balance, id,
                    ..CsvColumns::default()
                },
                invert_sign,
            }
        }
    }

    fn check(bytes: &[u8], mapping: Option<&CsvMapping>) {
        let _ = sniff(bytes);
        match parse(bytes, mapping) {
            Ok(file) => assert_eq!(file.statements.len(), 1),
            Err(CsvError::Unreadable(e)) => assert!(!e.reason.is_empty()),
            Err(CsvError::Mapping { column, reason }) => {
                assert!(!column.is_empty() || !reason.is_empty());
            }
            Err(CsvError::MappingField { field, reason }) => {
                assert!(field.starts_with("mapping.") && !reason.is_empty());
            }
        }
    }

    const NAMES: [&str; 10] = [
        "bom_utf8.csv",
        "de_preamble.csv",
        "footer.csv",
        "signs.csv",
        "af_bij.csv",
        "quoting.csv",
        "utf16le_bom_tab.csv",
        "windows1252.csv",
        "debit_credit.csv",
        "short_rows.csv",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_any_mapping_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            mapping in proptest::option::of(any_mapping()),
        ) {
            check(&bytes, mapping.as_ref());
        }

        #[test]
        fn csv_like_text_never_panics(
            text in "[0-9a-zA-Z.,;|\t\"()\\- €\r\n]{0,300}",
            mapping in proptest::option::of(any_mapping()),
        ) {
            let with_header = format!("Date;Description;Amount;Balance\n{text}");
            check(with_header.as_bytes(), mapping.as_ref());
            check(text.as_bytes(), mapping.as_ref());
        }

        #[test]
        fn headerless_and_card_rows_never_panic(
            rows in proptest::collection::vec(
                (
                    prop_oneof![Just("3/02/21"), Just("2021-03-02"), Just("13/01/2021"), Just("pending"), Just("")],
                    "[A-Za-z ]{0,6}",
                    prop_oneof![Just("-1.50"), Just("2,000.00"), Just("7"), Just("x"), Just("")],
                    prop_oneof![Just("debit"), Just("credit"), Just("Sale"), Just("Payment"), Just("?"), Just("")],
                ),
                0..12,
            ),
            header in proptest::option::of(prop_oneof![
                Just("Date,Card No.,Amount,Type"), Just("Date,Description,Amount,Transaction Type"),
                Just("Date de valeur,Libellé,Total Charged,Type"),
            ]),
        ) {
            let mut text = header.map(|h| format!("{h}\n")).unwrap_or_default();
            for (date, text_cell, amount, kind) in &rows {
                text.push_str(&format!("{date},{text_cell},\"{amount}\",{kind}\n"));
            }
            check(text.as_bytes(), None);
        }

        #[test]
        fn mutated_fixtures_never_panic(
            which in 0usize..NAMES.len(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
            mapping in proptest::option::of(any_mapping()),
        ) {
            let mut bytes = fixture(NAMES[which]);
            for (at, byte) in edits {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            check(&bytes, mapping.as_ref());
            let end = cut.index(bytes.len() + 1);
            check(&bytes[..end], None);
        }
    }
}
