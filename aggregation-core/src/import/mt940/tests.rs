//! One test per quirk of the module documentation, on fixtures written for these tests.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::*;
use crate::import::model::{EntryKind, ParsedBalance};

pub(super) const DE_SAVINGS_BANK: &[u8] = include_bytes!("fixtures/de_savings_bank.sta");
pub(super) const NL_BANK_SWIFT: &[u8] = include_bytes!("fixtures/nl_bank_swift.sta");
pub(super) const PL_BANK_942: &[u8] = include_bytes!("fixtures/pl_bank_942.sta");
/// The same Polish statement in Windows-1250 and in DOS code page 852.
pub(super) const PL_BANK_CP1250: &[u8] = include_bytes!("fixtures/pl_bank_cp1250.sta");
pub(super) const PL_BANK_CP852: &[u8] = include_bytes!("fixtures/pl_bank_cp852.sta");

fn d(y: i32, m: u32, day: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, day).expect("date")
}

fn dec(s: &str) -> Decimal {
    s.parse().expect("decimal")
}

fn ok(text: &str) -> ParsedFile {
    match parse(text.as_bytes()) {
        Ok(file) => file,
        Err(e) => panic!("parse failed: {e}"),
    }
}

fn sum(st: &ParsedStatement) -> Decimal {
    st.entries.iter().map(|e| e.amount).sum()
}

/// Every statement with both balances adds up.
fn assert_balanced(file: &ParsedFile) {
    for st in &file.statements {
        if let (Some(o), Some(c)) = (&st.opening, &st.closing) {
            assert_eq!(o.amount + sum(st), c.amount, "statement {:?}", st.account);
        }
    }
}

const SIMPLE: &str = ":20:REF1\n:25:DE89370400440532013000\n:28C:1/1\n:60F:C250101EUR100,00\n\
:61:2501020102D10,00NTRFNONREF\n:86:Miete\n:62F:C250102EUR90,00\n";

#[test]
fn fixture_german_savings_bank() {
    let file = parse(DE_SAVINGS_BANK).expect("parses");
    assert_eq!(file.statements.len(), 2);
    assert_balanced(&file);
    let st = &file.statements[0];
    assert_eq!(
        st.account.identifier.as_deref(),
        Some("10020030/0123456789")
    );
    assert_eq!(st.account.currency.as_deref(), Some("EUR"));
    assert_eq!(
        st.opening,
        Some(ParsedBalance {
            amount: dec("1500.00"),
            date: d(2025, 12, 29),
            currency: Some("EUR".into())
        })
    );
    let e = &st.entries[0];
    assert_eq!(e.amount, dec("-42.50"));
    assert_eq!(e.reference, None);
    assert_eq!(e.text.as_deref(), Some("Strom Dezember Abschlag Kd 77812"));
    assert_eq!(
        e.counterparty.as_deref(),
        Some("Stadtwerke Beispielstadt GmbH")
    );
    assert_eq!(e.code.as_deref(), Some("N005"));
    assert_eq!(e.currency.as_deref(), Some("EUR"));
    assert_eq!(e.line, 5);
    let salary = &st.entries[1];
    assert_eq!(salary.text.as_deref(), Some("Gehalt Dezember 2025"));
    assert_eq!(
        salary.counterparty.as_deref(),
        Some("Beispiel Arbeitgeber AG")
    );
    // Windows-1252 file: the umlauts come out right.
    let fee = &st.entries[2];
    assert_eq!(fee.text.as_deref(), Some("Kontoführung 12/2025"));
    assert_eq!(fee.counterparty.as_deref(), Some("Kreissparkasse München"));
    assert_eq!(fee.date, d(2026, 1, 2));
    assert_eq!(fee.value_date, Some(d(2025, 12, 31)));
    let storno = &file.statements[1].entries[0];
    assert_eq!(storno.amount, dec("42.50"));
    assert_eq!(
        file.statements[1].entries[1].text.as_deref(),
        Some("ENTGELT RÜCKLASTSCHRIFT")
    );
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
}

#[test]
fn fixture_dutch_bank_swift() {
    let file = parse(NL_BANK_SWIFT).expect("parses");
    assert_eq!(file.institution.as_deref(), Some("EXMPNL2A"));
    assert_eq!(file.statements.len(), 1);
    assert_balanced(&file);
    let st = &file.statements[0];
    assert_eq!(st.account.identifier.as_deref(), Some("NL91ABNA0417164300"));
    assert_eq!(
        st.available.as_ref().map(|b| b.amount),
        Some(dec("1093.05"))
    );
    let e = &st.entries[0];
    assert_eq!(e.reference.as_deref(), Some("B5L01XYZ99Q1"));
    assert_eq!(e.counterparty.as_deref(), Some("Bakkerij De Korenschoof"));
    assert_eq!(
        e.text.as_deref(),
        Some("Factuur 2025-887 broodbezorging november")
    );
    assert_eq!(e.kind, EntryKind::Transfer);
    assert_eq!(e.status, EntryStatus::Booked);
    assert_eq!(st.entries[2].kind, EntryKind::Fee);
    assert_eq!(
        st.entries[2].text.as_deref(),
        Some("Kosten betaalpakket december")
    );
    assert_eq!(sniff(NL_BANK_SWIFT), Some(MtMessage::Mt940));
}

#[test]
fn fixture_polish_bank_942() {
    let file = parse(PL_BANK_942).expect("parses");
    assert_eq!(sniff(PL_BANK_942), Some(MtMessage::Mt942));
    let st = &file.statements[0];
    assert_eq!(
        st.account.identifier.as_deref(),
        Some("PL61109010140000071219812874")
    );
    assert_eq!(st.account.currency.as_deref(), Some("PLN"));
    assert_eq!(st.entries.len(), 2);
    assert!(st.entries.iter().all(|e| e.status == EntryStatus::Pending));
    let e = &st.entries[0];
    assert_eq!(e.amount, dec("49.20"));
    assert_eq!(e.reference.as_deref(), Some("00010900004000007384901"));
    assert_eq!(e.text.as_deref(), Some("Zwrot za bilety kino"));
    assert_eq!(e.counterparty.as_deref(), Some("JAN KOWALSKI UL. LIPOWA 1"));
    assert_eq!(e.currency.as_deref(), Some("PLN"));
    assert_eq!(st.entries[1].text.as_deref(), Some("Zakupy spożywcze"));
    assert_eq!(st.entries[1].code.as_deref(), Some("S034"));
}

// 1
#[test]
fn swift_blocks_on_one_line_and_on_several() {
    let one = "{1:F01EXMPINBBAXXX0000000000}{2:I940EXMPINBBXXXXN}{3:{108:ABC}}{4:\n\
:20:A\n:25:12345\n:60F:C250101INR0,00\n:61:250102C5,00NMSC1\n:62F:C250102INR5,00\n-}{5:{CHK:1}}\n\
{1:F01EXMPINBBAXXX0000000000}{2:I940EXMPINBBXXXXN}{4::20:B\n:25:12345\n\
:60F:C250102INR5,00\n:61:250103D1,00NMSC2\n:62F:C250103INR4,00\n-}";
    let file = ok(one);
    assert_eq!(file.institution.as_deref(), Some("EXMPINBB"));
    assert_eq!(file.statements.len(), 2);
    assert_eq!(
        file.statements[1].entries[0].reference.as_deref(),
        Some("2")
    );
    let several = "{1:F01EXMPNL2ABXXX0000000000}\n{2:O9401200251201EXMPNL2AXXXX}\n{4:\n\
:20:A\n:25:NL91ABNA0417164300\n:60F:C250101EUR0,00\n:61:250102C5,00NMSCX\n:62F:C250102EUR5,00\n-}\n";
    let file = ok(several);
    assert_eq!(file.statements.len(), 1);
    assert_eq!(file.institution.as_deref(), Some("EXMPNL2A"));
    assert_eq!(sniff(several.as_bytes()), Some(MtMessage::Mt940));
}

// 2
#[test]
fn plain_file_with_header_lines() {
    let text = "EXMPNL2A\n940\nEXMPNL2A\n:20:EXAMPLE BANK\n:25:123456789\n:28:1/1\n\
:60F:C250101EUR10,00\n:61:2501020102C1,00N654NONREF\n:86:rent\n:62F:C250102EUR11,00\n-\n";
    let file = ok(text);
    assert_eq!(file.institution.as_deref(), Some("EXMPNL2A"));
    assert_eq!(file.statements[0].entries[0].amount, dec("1.00"));
    let multicash =
        "940 02\n:20:X\n:25:123\n:60F:C250101EUR0,\n:61:250101C1,NMSCX\n:62F:C250101EUR1,\n";
    assert_eq!(ok(multicash).statements.len(), 1);
}

// 3
#[test]
fn statements_without_20() {
    let text = ":25:NL91ABNA0417164300\n:28:1/1\n:60F:C250101EUR0,00\n\
:61:2501020102C1,00N654NONREF\n:62F:C250102EUR1,00\n:25:NL91ABNA0417164300\n:28:2/1\n\
:60F:C250102EUR1,00\n:61:2501030103C2,00N654NONREF\n:62F:C250103EUR3,00\n";
    let file = ok(text);
    assert_eq!(file.statements.len(), 2);
    assert_balanced(&file);
}

// 4
#[test]
fn no_separator_and_no_final_dash() {
    let text = ":20:A\n:25:111/222\n:60F:C250101EUR0,00\n:61:250102C1,00NTRFNONREF\n\
:62F:C250102EUR1,00\n:20:B\n:25:111/222\n:60F:C250102EUR1,00\n:61:250103C1,00NTRFNONREF\n\
:62F:C250103EUR2,00";
    let file = ok(text);
    assert_eq!(file.statements.len(), 2);
    assert_balanced(&file);
}

// 5
#[test]
fn entry_date_rolls_over_new_year() {
    let text = ":20:A\n:25:1/2\n:60F:C251230EUR0,00\n:61:2601011230C27,98NMSCNONREF\n\
:61:2512310105D1,00NMSCNONREF\n:61:2506290701D1,00NMSCNONREF\n:62F:C260105EUR25,98\n";
    let file = ok(text);
    let e = &file.statements[0].entries;
    assert_eq!(e[0].date, d(2025, 12, 30));
    assert_eq!(e[0].value_date, Some(d(2026, 1, 1)));
    assert_eq!(e[1].date, d(2026, 1, 5));
    assert_eq!(e[2].date, d(2025, 7, 1));
    let no_entry_date = ok(":20:A\n:25:1\n:61:250629D1,00NMSCX\n");
    assert_eq!(no_entry_date.statements[0].entries[0].date, d(2025, 6, 29));
    assert_eq!(no_entry_date.statements[0].entries[0].value_date, None);
}

// 6
#[test]
fn reversals_rd_in_rc_out() {
    let text = ":20:A\n:25:1/2\n:60F:C250101EUR100,00\n:61:2501020102RD5,00NMSCNONREF\n\
:61:2501020102RC204,88NMSCNONREF\n:62F:C250102EUR-99,88\n";
    let file = ok(text);
    let e = &file.statements[0].entries;
    assert_eq!(e[0].amount, dec("5.00"));
    assert_eq!(e[1].amount, dec("-204.88"));
    // The unreadable closing balance (`-99,88`) is a warning, not a rejection.
    assert!(file.statements[0].closing.is_none());
    assert_eq!(file.warnings.len(), 1);
    assert_eq!(file.warnings[0].item, "line 6");
}

// 7
#[test]
fn funds_code_letter() {
    let text = ":20:A\n:25:1/2\n:61:1812171217DR800,00N003NONREF\n:61:1812171217RDR800,00N068NONREF\n\
:61:1401060106CR1,00N062NONREF\n";
    let e = &ok(text).statements[0].entries;
    assert_eq!(e[0].amount, dec("-800.00"));
    assert_eq!(e[1].amount, dec("800.00"));
    assert_eq!(e[2].amount, dec("1.00"));
    assert_eq!(e[1].code.as_deref(), Some("N068"));
}

// 8
#[test]
fn amount_forms() {
    let text = ":20:A\n:25:1\n:60F:C250101EUR1000,\n:61:250102C,50NMSCNONREF\n\
:61:250102D1000,NMSCNONREF\n:62F:C250102EUR0,5\n";
    let file = ok(text);
    assert_balanced(&file);
    assert_eq!(file.statements[0].entries[0].amount, dec("0.50"));
}

// 9
#[test]
fn transaction_types_and_references() {
    let text = ":20:A\n:25:1\n\
:61:1901140114CN49,20NTRFNONREF//00010900004000007384901\nPRZEL.NATYCH.PRZYCH.\n\
:61:1901140114D5,00S020CUST-7\n\
:61:1901140114D5,00FCHKNONREF//NONREF\n\
:61:1901140114D5,00NINTABC//BANK 1\n/OCMT/EUR5,00/\n";
    let e = &ok(text).statements[0].entries;
    assert_eq!(e[0].reference.as_deref(), Some("00010900004000007384901"));
    assert_eq!(e[0].text.as_deref(), Some("PRZEL.NATYCH.PRZYCH."));
    assert_eq!(e[0].kind, EntryKind::Transfer);
    assert_eq!(e[1].reference.as_deref(), Some("CUST-7"));
    assert_eq!(e[1].code.as_deref(), Some("S020"));
    assert_eq!(e[2].reference, None);
    assert_eq!(e[3].reference.as_deref(), Some("BANK 1"));
    assert_eq!(e[3].kind, EntryKind::Income);
    assert_eq!(e[3].text.as_deref(), Some("/OCMT/EUR5,00/"));
}

// 10
#[test]
fn german_structured_86() {
    let text = ":20:A\n:25:1\n:61:250102D1,00N005NONREF\n\
:86:105?00FOLGELASTSCHRIFT?100599?20EREF+INV-1 MREF+M-2 CRED+DE98ZZZ09?21999999999\
9 SVWZ+Beitrag Jan?22uar 2025 ABWA+Verein?30GENODEF1XXX?31DE02120300000000202051?32Turnve\
rein 1900 e.?33V.?60 Zusatz\n\
:61:250102D1,00N005NONREF\n:86:106?00KARTENZAHLUNG?20Tankstelle Nord?21 Ort\n\
:61:250102D1,00N005NONREF\n:86:806?00ABSCHLUSS\n";
    let e = &ok(text).statements[0].entries;
    assert_eq!(e[0].text.as_deref(), Some("Beitrag Januar 2025"));
    assert_eq!(e[0].counterparty.as_deref(), Some("Turnverein 1900 e.V."));
    assert_eq!(e[1].text.as_deref(), Some("Tankstelle Nord Ort"));
    assert_eq!(e[1].counterparty, None);
    assert_eq!(e[2].text.as_deref(), Some("ABSCHLUSS"));
}

// 11
#[test]
fn subfield_split_by_line_break() {
    let text = ":20:A\n:25:1\n:61:250102C1,00N166NONREF\n\
:86:166?00GUTSCHRIFT?109251?20SVWZ+Rechnung 77?30DEUTDEDB276?3\n1DE11270000000000000000?32Testfirma GmbH\n\
:61:250102C1,00N166NONREF\n:86:116?00EINZELUEBERWEISUNG?20KREF+A1?21\nSVWZ+RE 2017 VOM 27.07.?222017?30GENOXXXX?\n31DE2500?32ABCDEF\n";
    let e = &ok(text).statements[0].entries;
    assert_eq!(e[0].text.as_deref(), Some("Rechnung 77"));
    assert_eq!(e[0].counterparty.as_deref(), Some("Testfirma GmbH"));
    assert_eq!(e[1].text.as_deref(), Some("RE 2017 VOM 27.07.2017"));
    assert_eq!(e[1].counterparty.as_deref(), Some("ABCDEF"));
}

// 12
#[test]
fn polish_separators() {
    let text = ":20:MT940\n:25:/PL61109010140000071219812874\n:28C:9\n:60F:C250930PLN100,00\n\
:61:2509020902D50,39S02097202028342\n:86:020\n:86:020~00IBCG~20Oplata~21 za prad~32ENERGIA SA\n\
:61:2509020902C1,00NTRFNONREF\n:86:073<00PRZELEW<20Zwrot<32ANNA NOWAK\n:62F:C250930PLN50,61\n";
    let file = ok(text);
    assert_balanced(&file);
    let e = &file.statements[0].entries;
    assert_eq!(e[0].text.as_deref(), Some("Oplata za prad"));
    assert_eq!(e[0].counterparty.as_deref(), Some("ENERGIA SA"));
    assert_eq!(e[1].text.as_deref(), Some("Zwrot"));
    assert_eq!(e[1].counterparty.as_deref(), Some("ANNA NOWAK"));
}

// 13
#[test]
fn dutch_structured_86() {
    let text = ":20:A\n:25:NL91ABNA0417164300\n\
:61:250102C10,00NTRFNONREF\n:86:/TRTP/SEPA OVERBOEKING/IBAN/NL20INGB0001234567/BIC/INGBNL2A/NAME/\n\
K. JANSEN/REMI/RES.NR 00042/EREF/NOTPROV\nIDED\n\
:61:250102D10,00NDDTNONREF\n:86:/TRTP/SEPA INCASSO/CSID/NL36ZZZ123456780000\n/NAME/Energie B.V./MARF/59990/REMI//INV/1511 1.1\n2.2016/IBAN/NL20INGB0001234567\n\
:61:250102C10,00NTRFNONREF\n:86:/EREF/X1//CNTP/NL20INGB0001234567/INGBNL2A/P. Bakker/Utrecht//REMI/USTD//Lunch\n vrijdag/\n";
    let e = &ok(text).statements[0].entries;
    assert_eq!(e[0].counterparty.as_deref(), Some("K. JANSEN"));
    assert_eq!(e[0].text.as_deref(), Some("RES.NR 00042"));
    assert_eq!(e[1].counterparty.as_deref(), Some("Energie B.V."));
    assert_eq!(e[1].text.as_deref(), Some("INV/1511 1.12.2016"));
    assert_eq!(e[1].kind, EntryKind::Transfer);
    assert_eq!(e[2].counterparty.as_deref(), Some("P. Bakker"));
    assert_eq!(e[2].text.as_deref(), Some("Lunch vrijdag"));
}

// 14
#[test]
fn broken_lines_in_tags() {
    let text = ":20:A\n:25:1\n:61:1811261126CR\n30,00N062NONREF\n:\n86:166?00GUTSCHR. UEBERWEISUNG?20SVWZ+Test\n";
    let e = &ok(text).statements[0].entries;
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].amount, dec("30.00"));
    assert_eq!(e[0].text.as_deref(), Some("Test"));
    assert_eq!(e[0].code.as_deref(), Some("N062"));
}

// 15
#[test]
fn continuation_line_starting_with_colon() {
    let text = ":20:A\n:25:1\n:61:190425D44,04NMSCNONREF\n:86:106?109075/658?20Kartenzahlung 24-04\n\
:08 Karten?21nr. 5355 Original?3212385 Shop\n:62F:C190425EUR0,00\n";
    let file = ok(text);
    let e = &file.statements[0].entries;
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].text.as_deref(),
        Some("Kartenzahlung 24-04:08 Kartennr. 5355 Original")
    );
    assert!(file.statements[0].closing.is_some());
}

// 16
#[test]
fn account_forms() {
    let id = |v: &str| fields::account(v);
    assert_eq!(
        id("37040044/0532013000"),
        (Some("37040044/0532013000".into()), None)
    );
    assert_eq!(
        id("37040044/0532013000EUR"),
        (Some("37040044/0532013000".into()), Some("EUR".into()))
    );
    assert_eq!(
        id("NL91ABNA0417164300EUR"),
        (Some("NL91ABNA0417164300".into()), Some("EUR".into()))
    );
    assert_eq!(
        id("DE89370400440532013000 EUR"),
        (Some("DE89370400440532013000".into()), Some("EUR".into()))
    );
    assert_eq!(
        id("DE89 3704 0044 0532 0130 00"),
        (Some("DE89370400440532013000".into()), None)
    );
    assert_eq!(
        id("/PL61109010140000071219812874"),
        (Some("PL61109010140000071219812874".into()), None)
    );
    assert_eq!(id("ACC-XYZ"), (Some("ACC-XYZ".into()), None));
    // The suffix currency is the statement's when nothing else names one.
    let file = ok(":20:A\n:25:37040044/0532013000EUR\n:61:250102C1,00NMSCX\n");
    assert_eq!(file.statements[0].account.currency.as_deref(), Some("EUR"));
    assert_eq!(
        file.statements[0].entries[0].currency.as_deref(),
        Some("EUR")
    );
}

// 17
#[test]
fn intermediate_balances_and_pages() {
    let text = ":20:STARTUMSE\n:25:44550045/0000177352\n:28C:00000/001\n:60F:C250101EUR0,00\n\
:61:250102C1,00NMSCNONREF\n:62M:C250102EUR1,00\n-\n:20:STARTUMSE\n:25:44550045/0000177352\n\
:28C:00000/002\n:60M:C250102EUR1,00\n-\n:61:2501020102CR1,00N062NONREF\n:62F:C250102EUR2,00\n-\n";
    let file = ok(text);
    assert_eq!(file.statements.len(), 2);
    assert_eq!(file.statements[1].entries.len(), 1);
    assert_balanced(&file);
}

// 18
#[test]
fn mt942_pending() {
    let text = ":20:942\n:25:PL61109010140000071219812874\n:28C:1\n:34F:PLND0,\n:34F:PLNC0,\n:13:2512031415\n\
:61:2512031203EC140,NTRF50215//990\n:61:2512031203ED500,00NTRF987654321//FX1\n\
:90D:1PLN500,00\n:90C:1PLN140,00\n";
    let file = ok(text);
    let e = &file.statements[0].entries;
    assert!(e.iter().all(|e| e.status == EntryStatus::Pending));
    assert_eq!(e[0].amount, dec("140"));
    assert_eq!(e[1].amount, dec("-500.00"));
    assert_eq!(e[1].currency.as_deref(), Some("PLN"));
    assert_eq!(sniff(text.as_bytes()), Some(MtMessage::Mt942));
    // A block 2 saying 942 makes every line pending, balances or not.
    let framed = "{1:F01EXMPPLPWAXXX0000000000}{2:O942EXMPPLPWXXXX}{4:\n:20:A\n:25:1\n\
:61:250102C1,00NTRFNONREF\n-}";
    let file = ok(framed);
    assert_eq!(file.statements[0].entries[0].status, EntryStatus::Pending);
    assert_eq!(sniff(framed.as_bytes()), Some(MtMessage::Mt942));
    // An MT940 with an EC line: that one line is pending.
    let ec = ok(":20:A\n:25:1\n:60F:C250101EUR0,\n:61:250102EC1,NTRFX\n:61:250102C1,NTRFY\n");
    assert_eq!(ec.statements[0].entries[0].status, EntryStatus::Pending);
    assert_eq!(ec.statements[0].entries[1].status, EntryStatus::Booked);
}

// 19
#[test]
fn character_sets() {
    let utf8 = ":20:A\n:25:1\n:61:250102C1,00NTRFX\n:86:166?20Café Müller?32Zoë\n";
    let e = &ok(utf8).statements[0].entries[0];
    assert_eq!(e.text.as_deref(), Some("Café Müller"));
    let cp1252 =
        b":20:A\n:25:1\n:61:250102C1,00NTRFX\n:86:166?20Caf\xe9 M\xfcller \x80 5?32Zo\xeb\n";
    let file = parse(cp1252).expect("parses");
    let e = &file.statements[0].entries[0];
    assert_eq!(e.text.as_deref(), Some("Café Müller € 5"));
    assert_eq!(e.counterparty.as_deref(), Some("Zoë"));
    // SWIFT X has no umlauts: a bank's `?` in their place stays text.
    let x = ok(":20:A\n:25:1\n:61:250102C1,00NTRFX\n:86:166?20M?nchen Hbf?32M?LLER\n");
    let e = &x.statements[0].entries[0];
    assert_eq!(e.text.as_deref(), Some("M?nchen Hbf"));
    assert_eq!(e.counterparty.as_deref(), Some("M?LLER"));
}

// 20
#[test]
fn trailing_padding_and_blank_lines() {
    let text = "\u{feff}:20:A     \r\n:25:1/2   \r\n\r\n:60F:C250101EUR0,00     \r\n\
:61:250102C1,00NTRFNONREF      \r\n:86:Padded text                   \r\n\r\n:62F:C250102EUR1,00\r\n-\r\n\r\n\r\n";
    let file = ok(text);
    assert_balanced(&file);
    assert_eq!(
        file.statements[0].account.identifier.as_deref(),
        Some("1/2")
    );
    assert_eq!(
        file.statements[0].entries[0].text.as_deref(),
        Some("Padded text")
    );
}

// 22
#[test]
fn multicash_ns_fields_and_padded_amounts() {
    let text = ":20:A\n:25:1/2\n:NS:22Max Mustermann\n:60F:C250101EUR000000000100,00\n\
:61:2501020102D000000000010,00NTRFNONREF\n:NS:01extra\n:62F:C250102EUR90,00\n";
    let file = ok(text);
    assert_balanced(&file);
    assert_eq!(file.statements[0].entries.len(), 1);
    assert_eq!(file.statements[0].entries[0].amount, dec("-10"));
}

// 21
#[test]
fn two_86_lines_for_one_entry() {
    let text = ":20:A\n:25:1\n:61:250102C1,00NTRFX\n:86:first part\n:86:second part\n";
    let e = &ok(text).statements[0].entries[0];
    assert_eq!(e.text.as_deref(), Some("first part second part"));
}

#[test]
fn free_text_joins_full_lines_without_space() {
    let full = "A".repeat(64) + "B";
    let text = format!(":20:A\n:25:1\n:61:250102C1,00NTRFX\n:86:{full}\nCD\nEF\n");
    let e = &ok(&text).statements[0].entries[0];
    assert_eq!(e.text.as_deref(), Some(format!("{full}CD EF").as_str()));
}

#[test]
fn errors_name_the_line() {
    assert_eq!(parse(b"").map_err(|e| e.line), Err(0));
    assert_eq!(parse(b"  \n\n").map_err(|e| e.line), Err(0));
    assert_eq!(parse(b"hello world\n").map_err(|e| e.line), Err(0));
    assert_eq!(parse(b":20:A\n:28C:1\n").map_err(|e| e.line), Err(0));
    let bad_date = ":20:A\n:25:1\n:61:251340C1,00NTRFX\n";
    let e = parse(bad_date.as_bytes()).expect_err("bad date");
    assert_eq!(e.line, 3);
    assert!(e.reason.contains("value date"), "{e}");
    let bad_mark = ":20:A\n:25:1\n:60F:C250101EUR0,\n:61:250102X1,00NTRFX\n";
    assert_eq!(parse(bad_mark.as_bytes()).map_err(|e| e.line), Err(4));
    let bad_amount = ":20:A\n:25:1\n:61:250102CNTRFX\n";
    assert_eq!(parse(bad_amount.as_bytes()).map_err(|e| e.line), Err(3));
    let bad_entry_date = ok(":20:A\n:25:1\n:61:2501021340C1,00NTRFX\n");
    assert_eq!(bad_entry_date.statements[0].entries[0].date, d(2025, 1, 2));
    assert_eq!(bad_entry_date.warnings[0].item, "line 3");
}

#[test]
fn sniff_detects_and_refuses() {
    assert_eq!(sniff(SIMPLE.as_bytes()), Some(MtMessage::Mt940));
    assert_eq!(sniff(DE_SAVINGS_BANK), Some(MtMessage::Mt940));
    assert_eq!(sniff(b"OFXHEADER:100\n<OFX>"), None);
    assert_eq!(sniff(b"Date;Amount;Text\n2025-01-01;1,00;x\n"), None);
    assert_eq!(sniff(b":20:only a reference\n"), None);
    assert_eq!(sniff(b""), None);
    let simple = ok(SIMPLE);
    assert_eq!(
        simple.statements[0].entries[0].text.as_deref(),
        Some("Miete")
    );
}

/// A generated file of at least `bytes` bytes: statements of 500 German entries each.
pub(super) fn generated(bytes: usize) -> Vec<u8> {
    let mut out = String::with_capacity(bytes + 4096);
    let mut n = 0u64;
    let mut balance: i64 = 0;
    while out.len() < bytes {
        n += 1;
        out.push_str(&format!(
            ":20:STARTUMSE\r\n:25:10020030/0123456789\r\n:28C:{n}/1\r\n:60F:C250101EUR{},{:02}\r\n",
            balance / 100,
            balance % 100
        ));
        for k in 0..500u64 {
            let cents = 100 + (k * 37 % 9000);
            balance += i64::try_from(cents).unwrap_or(0);
            out.push_str(&format!(
                ":61:2501020102CR{},{:02}N166NONREF//B{n}-{k}\r\n\
                 :86:166?00GUTSCHR. UEBERWEISUNG?109251?20EREF+E{n}-{k}?21SVWZ+Rechnung {k} vom 02\r\n\
                 .01.2025?30BANKDEFFXXX?31DE02120300000000202051?32Kunde Nummer {k}\r\n",
                cents / 100,
                cents % 100
            ));
        }
        out.push_str(&format!(
            ":62F:C250102EUR{},{:02}\r\n-\r\n",
            balance / 100,
            balance % 100
        ));
    }
    out.into_bytes()
}

#[test]
fn generated_file_parses_and_balances() {
    let file = parse(&generated(256 * 1024)).expect("parses");
    assert!(file.statements.len() >= 2);
    assert_balanced(&file);
    assert!(file.warnings.is_empty());
}

/// Run alone under `/usr/bin/time -v` to read the peak RSS of a 10 MiB file (see the report).
#[test]
#[ignore = "memory measurement, run by hand"]
fn ten_mib_file() {
    let bytes = generated(10 * 1024 * 1024);
    let file = parse(&bytes).expect("parses");
    let entries: usize = file.statements.iter().map(|s| s.entries.len()).sum();
    assert!(entries > 50_000, "{entries}");
}

// 23
#[test]
fn polish_code_pages() {
    for fixture in [PL_BANK_CP1250, PL_BANK_CP852] {
        let file = parse(fixture).expect("parses");
        assert_balanced(&file);
        let st = &file.statements[0];
        assert_eq!(
            st.account.identifier.as_deref(),
            Some("PL27114020040000300201355387")
        );
        let e = &st.entries;
        assert_eq!(e.len(), 2);
        assert_eq!(
            e[0].text.as_deref(),
            Some("Zażółć gęślą jaźń faktura 7/2025")
        );
        assert_eq!(e[0].counterparty.as_deref(), Some("Spółka Łódź Sp. z o.o."));
        assert_eq!(e[1].text.as_deref(), Some("Zwrot za bilety"));
        assert_eq!(
            e[1].counterparty.as_deref(),
            Some("JÓZEF ŚLĄSKI ul. Żeromskiego 5")
        );
    }
    // ISO-8859-2, written inline: `ś`, `ą` and `ź` sit where Windows-1250 has none of them.
    let latin2 = b":20:A\n:25:1\n:61:250102C1,00NTRFX\n:86:020~20Zap\xB3ata za gaz~32\xA3\xF3d\xBC \xB6ci\xB1g\n";
    let e = &parse(latin2).expect("parses").statements[0].entries[0];
    assert_eq!(e.text.as_deref(), Some("Zapłata za gaz"));
    assert_eq!(e.counterparty.as_deref(), Some("Łódź ściąg"));
    // A German Windows-1252 file stays Windows-1252 (its umlauts read alike in 1250).
    let german =
        b":20:A\n:25:1\n:61:250102C1,00NTRFX\n:86:166?20Geb\xFChr \xDCberweisung?32Stra\xDFe\n";
    let e = &parse(german).expect("parses").statements[0].entries[0];
    assert_eq!(e.text.as_deref(), Some("Gebühr Überweisung"));
    assert_eq!(e.counterparty.as_deref(), Some("Straße"));
}

pub(super) const OTHER_BANKS_61: &[u8] = include_bytes!("fixtures/other_banks_61.sta");
pub(super) const MULTI_ACCOUNT: &[u8] = include_bytes!("fixtures/multi_account.sta");

// 24
#[test]
fn statement_lines_of_other_banks() {
    let file = parse(OTHER_BANKS_61).expect("parses");
    assert_balanced(&file);
    let st = &file.statements[0];
    // A balance zero-padded past 15 characters is still read.
    assert_eq!(st.opening.as_ref().map(|b| b.amount), Some(dec("1000.89")));
    let e = &st.entries;
    assert_eq!(e.len(), 5);
    // `DD212,39`: debit with the funds code `D`; `NOV ` is a type code with a blank; the
    // value date 160230 is read as the last day of February, with a warning.
    assert_eq!(e[0].amount, dec("-212.39"));
    assert_eq!(e[0].code.as_deref(), Some("NOV"));
    assert_eq!(e[0].date, d(2016, 3, 1));
    assert_eq!(e[0].value_date, Some(d(2016, 2, 29)));
    assert!(
        file.warnings
            .iter()
            .any(|w| w.item == "line 5" && w.message.contains("160230")),
        "{:?}",
        file.warnings
    );
    assert_eq!(
        e[0].counterparty.as_deref(),
        Some("Hausverwaltung Sonnenhof")
    );
    assert_eq!(e[0].text.as_deref(), Some("Nebenkosten Februar 2016"));
    // An entry date of four blanks, the type code `S   ` and the customer reference after it.
    assert_eq!(e[1].amount, dec("1500.00"));
    assert_eq!(e[1].date, d(2016, 2, 29));
    assert_eq!(e[1].code.as_deref(), Some("S"));
    assert_eq!(e[1].reference.as_deref(), Some("XSALARY-02"));
    assert_eq!(e[1].text.as_deref(), Some("Gehalt Februar"));
    assert_eq!(e[1].counterparty.as_deref(), Some("Beispiel Werke AG"));
    // Reversals: `RD` money in, `RC` money out; a type code of another shape (`MCI0`).
    assert_eq!(e[2].amount, dec("12.50"));
    assert_eq!(e[2].code.as_deref(), Some("N024"));
    assert_eq!(e[3].amount, dec("-3.00"));
    assert_eq!(e[3].code.as_deref(), Some("MCI0"));
    assert_eq!(e[3].reference.as_deref(), Some("B6022900002"));
    // A blank between the mark and the amount.
    assert_eq!(e[4].amount, dec("0.50"));
}

#[test]
fn impossible_value_dates_are_the_months_last_day() {
    assert_eq!(
        fields::date6_lenient("160230"),
        Some((d(2016, 2, 29), true))
    );
    assert_eq!(
        fields::date6_lenient("150230"),
        Some((d(2015, 2, 28), true))
    );
    assert_eq!(
        fields::date6_lenient("250431"),
        Some((d(2025, 4, 30), true))
    );
    assert_eq!(
        fields::date6_lenient("251231"),
        Some((d(2025, 12, 31), false))
    );
    assert_eq!(fields::date6_lenient("251332"), None);
    assert_eq!(fields::date6_lenient("251300"), None);
    assert_eq!(fields::date6("160230"), None);
    // Balances keep the strict reading: a balance dated February 30th is a warning.
    let file = ok(":20:A\n:25:1\n:60F:C160230EUR1,00\n:61:160230C1,00NTRFX\n");
    assert!(file.statements[0].opening.is_none());
    assert_eq!(file.statements[0].entries[0].date, d(2016, 2, 29));
}

// 25
#[test]
fn several_statements_and_accounts_in_one_file() {
    let file = parse(MULTI_ACCOUNT).expect("parses");
    assert_eq!(file.statements.len(), 5);
    assert_balanced(&file);
    let accounts: Vec<(Option<&str>, Option<&str>)> = file
        .statements
        .iter()
        .map(|s| {
            (
                s.account.identifier.as_deref(),
                s.account.currency.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        accounts,
        vec![
            // `:25:` before `:20:` belongs to the statement.
            (Some("DE44500105175407324931"), Some("EUR")),
            // A page without `:25:` is the account of the page before it.
            (Some("DE44500105175407324931"), Some("EUR")),
            // A Dutch dotted account number with its currency suffix.
            (Some("1234.56.789"), Some("EUR")),
            // No balance: the currency of the same account's other statement.
            (Some("1234.56.789"), Some("EUR")),
            (Some("CH9300762011623852957"), Some("CHF")),
        ]
    );
    let st = &file.statements[1];
    assert_eq!(st.opening.as_ref().map(|b| b.amount), Some(dec("75.00")));
    assert_eq!(
        file.statements[3].entries[0].currency.as_deref(),
        Some("EUR")
    );
    assert_eq!(
        file.statements[2].opening.as_ref().map(|b| b.amount),
        Some(dec("-10.00"))
    );
    assert_eq!(
        file.statements[2].entries[0].counterparty.as_deref(),
        Some("J. de Vries")
    );
    assert!(
        file.warnings
            .iter()
            .any(|w| w.message.contains("page of the statement before it")),
        "{:?}",
        file.warnings
    );
}

#[test]
fn sums_past_the_largest_amount_are_an_error_naming_the_line() {
    // MT940 amounts have at most 15 digits, so only a file of absurd length could overflow;
    // the check is the same one CAMT uses, driven here through the shared helper.
    let mut statement = ok(SIMPLE).statements.remove(0);
    statement.opening = Some(ParsedBalance {
        amount: Decimal::MAX,
        date: d(2025, 1, 1),
        currency: None,
    });
    statement.entries[0].amount = Decimal::ONE;
    let error = crate::import::model::check_statement_sums(&statement).expect_err("overflow");
    assert_eq!(error.line, 5);
    assert!(error.reason.contains("largest amount"), "{error}");
}

#[test]
fn many_86_lines_for_one_entry_are_read_once() {
    // Rabobank writes one `:86:` per line of details; all of them are the entry's text.
    let mut text = String::from(":20:A\n:25:1\n:61:250102C1,00NTRFX\n");
    for n in 0..2000 {
        text.push_str(&format!(":86:part {n}\n"));
    }
    text.push_str(":61:250102C1,00NTRFY\n:86:other\n");
    let file = ok(&text);
    let e = &file.statements[0].entries;
    let first = e[0].text.clone().unwrap_or_default();
    assert!(first.starts_with("part 0 part 1 part 2"), "{first}");
    assert!(first.ends_with("part 1999"), "{first}");
    assert_eq!(e[1].text.as_deref(), Some("other"));
}
