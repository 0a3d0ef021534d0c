//! Hand-written files: one test per statement kind and per quirk group of
//! `shared/spec/ofx-quirks.md`.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use rust_decimal::Decimal;

use super::*;

fn dt(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn day(y: i32, mo: u32, d: u32) -> DateTime<Utc> {
    dt(y, mo, d, 0, 0, 0)
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn parse(text: &str) -> OfxDocument {
    match parse_ofx(text.as_bytes()) {
        Ok(doc) => doc,
        Err(e) => panic!("{e}\n---\n{text}"),
    }
}

/// 1-based line of the first occurrence of `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    let at = text.find(needle).expect("needle in text");
    text[..at].matches('\n').count() + 1
}

const SGML_HEADER: &str = "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\n\
ENCODING:USASCII\nCHARSET:1252\nCOMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n";

const XML_HEADER: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n\
<?OFX OFXHEADER=\"200\" VERSION=\"220\" SECURITY=\"NONE\" OLDFILEUID=\"NONE\" NEWFILEUID=\"NONE\"?>\n";

/// A bank statement body in OFX 1.x style (leaves unclosed).
const BANK_BODY: &str = "<OFX>
<SIGNONMSGSRSV1>
<SONRS>
<STATUS>
<CODE>0
<SEVERITY>INFO
</STATUS>
<DTSERVER>20240131120000[-5:EST]
<LANGUAGE>ENG
<FI>
<ORG>First Bank
<FID>1234
</FI>
<INTU.BID>1234
<INTU.USERID>user
</SONRS>
</SIGNONMSGSRSV1>
<BANKMSGSRSV1>
<STMTTRNRS>
<TRNUID>1
<STATUS>
<CODE>0
<SEVERITY>INFO
</STATUS>
<STMTRS>
<CURDEF>USD
<BANKACCTFROM>
<BANKID>121000248
<ACCTID>123456789
<ACCTTYPE>CHECKING
</BANKACCTFROM>
<BANKTRANLIST>
<DTSTART>20240101
<DTEND>20240131
<STMTTRN>
<TRNTYPE>DEBIT
<DTPOSTED>20240105120000[-5:EST]
<DTUSER>20240104
<TRNAMT>-42.50
<FITID>2024010501
<NAME>Coffee Shop
<MEMO>Card purchase
</STMTTRN>
<STMTTRN>
<TRNTYPE>CHECK
<DTPOSTED>20240110
<TRNAMT>-100.00
<FITID>2024011001
<CHECKNUM>1001
<PAYEE>
<NAME>Landlord LLC
<ADDR1>1 Main St
<CITY>Springfield
<STATE>IL
<POSTALCODE>62701
</PAYEE>
</STMTTRN>
<STMTTRN>
<TRNTYPE>CREDIT
<DTPOSTED>20240115
<DTAVAIL>20240116
<TRNAMT>1500.00
<FITID>2024011501
<NAME>Payroll
<CURRENCY>
<CURRATE>1.0
<CURSYM>EUR
</CURRENCY>
</STMTTRN>
</BANKTRANLIST>
<LEDGERBAL>
<BALAMT>1357.50
<DTASOF>20240131
</LEDGERBAL>
<AVAILBAL>
<BALAMT>1300.00
<DTASOF>20240131
</AVAILBAL>
<MKTGINFO>Visit us
</STMTRS>
</STMTTRNRS>
</BANKMSGSRSV1>
</OFX>
";

/// Closes every unclosed leaf (`<TAG>value` on its own line); `every` = 2 closes every other
/// one (mixed files).
fn close_leaves(sgml: &str, every: usize) -> String {
    let mut out = String::new();
    let mut n = 0;
    for line in sgml.lines() {
        out.push_str(line);
        if let Some(rest) = line.strip_prefix('<')
            && let Some((tag, value)) = rest.split_once('>')
            && !value.is_empty()
            && !tag.starts_with('/')
            && !value.contains('<')
        {
            n += 1;
            if n % every == 0 {
                out.push_str(&format!("</{tag}>"));
            }
        }
        out.push('\n');
    }
    out
}

fn expected_bank() -> OfxDocument {
    let base = StatementTransaction {
        fit_id: String::new(),
        kind: TransactionKind::Bank(String::new()),
        trn_type: None,
        posted: day(2000, 1, 1).fixed_offset(),
        user_date: None,
        settled: None,
        amount: Decimal::ZERO,
        name: None,
        memo: None,
        check_number: None,
        symbol: None,
        security_name: None,
        security_id: None,
        units: None,
        unit_price: None,
        commission: None,
        income_type: None,
        currency: None,
    };
    OfxDocument {
        signon: Some(Signon {
            status_code: 0,
            severity: "INFO".into(),
            message: None,
            org: Some("First Bank".into()),
            fid: Some("1234".into()),
        }),
        statements: vec![Statement {
            kind: StatementKind::Bank,
            currency: "USD".into(),
            account: StatementAccount {
                account_id: Some("123456789".into()),
                bank_id: Some("121000248".into()),
                branch_id: None,
                broker_id: None,
                account_type: Some("CHECKING".into()),
            },
            transactions: vec![
                StatementTransaction {
                    fit_id: "2024010501".into(),
                    kind: TransactionKind::Bank("DEBIT".into()),
                    trn_type: Some("DEBIT".into()),
                    posted: dt(2024, 1, 5, 17, 0, 0).fixed_offset(),
                    user_date: Some(day(2024, 1, 4)),
                    amount: dec("-42.50"),
                    name: Some("Coffee Shop".into()),
                    memo: Some("Card purchase".into()),
                    ..base.clone()
                },
                StatementTransaction {
                    fit_id: "2024011001".into(),
                    kind: TransactionKind::Bank("CHECK".into()),
                    trn_type: Some("CHECK".into()),
                    posted: day(2024, 1, 10).fixed_offset(),
                    amount: dec("-100"),
                    name: Some("Landlord LLC".into()),
                    check_number: Some("1001".into()),
                    ..base.clone()
                },
                StatementTransaction {
                    fit_id: "2024011501".into(),
                    kind: TransactionKind::Bank("CREDIT".into()),
                    trn_type: Some("CREDIT".into()),
                    posted: day(2024, 1, 15).fixed_offset(),
                    settled: Some(day(2024, 1, 16).fixed_offset()),
                    amount: dec("1500"),
                    name: Some("Payroll".into()),
                    currency: Some("EUR".into()),
                    ..base
                },
            ],
            positions: vec![],
            ledger_balance: Some(Balance {
                amount: dec("1357.50"),
                as_of: Some(day(2024, 1, 31)),
            }),
            available_balance: Some(Balance {
                amount: dec("1300"),
                as_of: Some(day(2024, 1, 31)),
            }),
            investment_balance: None,
            start: Some(day(2024, 1, 1)),
            end: Some(day(2024, 1, 31)),
            as_of: None,
        }],
        warnings: Vec::new(),
    }
}

/// A minimal bank file around some `STMTTRN`s (SGML).
fn bank_with(transactions: &str) -> String {
    format!(
        "{SGML_HEADER}<OFX>\n<BANKMSGSRSV1>\n<STMTTRNRS>\n<TRNUID>1\n<STATUS>\n<CODE>0\n\
         <SEVERITY>INFO\n</STATUS>\n<STMTRS>\n<CURDEF>USD\n<BANKACCTFROM>\n<BANKID>1\n\
         <ACCTID>2\n<ACCTTYPE>SAVINGS\n</BANKACCTFROM>\n<BANKTRANLIST>\n{transactions}\
         </BANKTRANLIST>\n</STMTRS>\n</STMTTRNRS>\n</BANKMSGSRSV1>\n</OFX>\n"
    )
}

fn one_txn(fields: &str) -> String {
    bank_with(&format!("<STMTTRN>\n{fields}\n</STMTTRN>\n"))
}

fn first_txn(text: &str) -> StatementTransaction {
    parse(text).statements[0].transactions[0].clone()
}

// ---------------------------------------------------------------- statement kinds

#[test]
fn bank_statement() {
    let doc = parse(&format!("{SGML_HEADER}{BANK_BODY}"));
    assert_eq!(doc, expected_bank());
}

#[test]
fn sgml_xml_and_mixed_files_read_alike() {
    let sgml = parse(&format!("{SGML_HEADER}{BANK_BODY}"));
    let xml = parse(&format!("{XML_HEADER}{}", close_leaves(BANK_BODY, 1)));
    let mixed = parse(&format!("{SGML_HEADER}{}", close_leaves(BANK_BODY, 2)));
    assert_eq!(sgml, expected_bank());
    assert_eq!(xml, sgml);
    assert_eq!(mixed, sgml);
}

#[test]
fn credit_card_statement() {
    let text = format!(
        "{SGML_HEADER}<OFX>
<CREDITCARDMSGSRSV1>
<CCSTMTTRNRS>
<TRNUID>1
<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<CCSTMTRS>
<CURDEF>CAD
<CCACCTFROM>
<ACCTID>4111111111111111
</CCACCTFROM>
<BANKTRANLIST>
<DTSTART>20240201
<DTEND>20240229
<STMTTRN>
<TRNTYPE>DEBIT
<DTPOSTED>20240203
<TRNAMT>-19.99
<FITID>CC1
<SIC>5812
<NAME>Restaurant
</STMTTRN>
<STMTTRN>
<TRNTYPE>PAYMENT
<DTPOSTED>20240220
<TRNAMT>500
<FITID>CC2
<NAME>Thank you
</STMTTRN>
</BANKTRANLIST>
<LEDGERBAL>
<BALAMT>-250.10
<DTASOF>20240229
</LEDGERBAL>
</CCSTMTRS>
</CCSTMTTRNRS>
</CREDITCARDMSGSRSV1>
</OFX>"
    );
    let doc = parse(&text);
    assert_eq!(doc.signon, None);
    let s = &doc.statements[0];
    assert_eq!(s.kind, StatementKind::CreditCard);
    assert_eq!(s.currency, "CAD");
    assert_eq!(s.account.account_id.as_deref(), Some("4111111111111111"));
    assert_eq!(s.account.account_type.as_deref(), Some("CREDITCARD"));
    assert_eq!(s.transactions.len(), 2);
    assert_eq!(s.transactions[0].amount, dec("-19.99"));
    assert_eq!(
        s.transactions[1].kind,
        TransactionKind::Bank("PAYMENT".into())
    );
    assert_eq!(s.ledger_balance.as_ref().unwrap().amount, dec("-250.10"));
    assert_eq!(s.available_balance, None);
    assert_eq!(
        (s.start, s.end),
        (Some(day(2024, 2, 1)), Some(day(2024, 2, 29)))
    );
}

const INVESTMENT_XML: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<?OFX OFXHEADER="200" VERSION="220" SECURITY="NONE" OLDFILEUID="NONE" NEWFILEUID="NONE"?>
<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>
<DTSERVER>20240131</DTSERVER><LANGUAGE>ENG</LANGUAGE>
<FI><ORG>Broker Inc</ORG><FID>7777</FID></FI></SONRS></SIGNONMSGSRSV1>
<INVSTMTMSGSRSV1>
<INVSTMTTRNRS>
<TRNUID>1</TRNUID>
<STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>
<INVSTMTRS>
<DTASOF>20240131160000.000[-5:EST]</DTASOF>
<CURDEF>USD</CURDEF>
<INVACCTFROM><BROKERID>broker.com</BROKERID><ACCTID>X-1</ACCTID></INVACCTFROM>
<INVTRANLIST>
<DTSTART>20240101</DTSTART><DTEND>20240131</DTEND>
<BUYSTOCK>
  <INVBUY>
    <INVTRAN><FITID>B1</FITID><DTTRADE>20240102</DTTRADE><DTSETTLE>20240104</DTSETTLE><MEMO>Buy ACME</MEMO></INVTRAN>
    <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
    <UNITS>10</UNITS><UNITPRICE>12.5</UNITPRICE><COMMISSION>4.95</COMMISSION><TOTAL>-129.95</TOTAL>
    <SUBACCTSEC>CASH</SUBACCTSEC><SUBACCTFUND>CASH</SUBACCTFUND>
  </INVBUY>
  <BUYTYPE>BUY</BUYTYPE>
</BUYSTOCK>
<BUYMF>
  <INVBUY>
    <INVTRAN><FITID>B2</FITID><DTTRADE>20240103</DTTRADE></INVTRAN>
    <SECID><UNIQUEID>000000002</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
    <UNITS>3.141</UNITS><UNITPRICE>31.83</UNITPRICE><TOTAL>-100.00</TOTAL>
    <CURRENCY><CURRATE>1.1</CURRATE><CURSYM>EUR</CURSYM></CURRENCY>
    <SUBACCTSEC>CASH</SUBACCTSEC><SUBACCTFUND>CASH</SUBACCTFUND>
  </INVBUY>
  <BUYTYPE>BUY</BUYTYPE>
</BUYMF>
<SELLSTOCK>
  <INVSELL>
    <INVTRAN><FITID>S1</FITID><DTTRADE>20240110</DTTRADE></INVTRAN>
    <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
    <UNITS>-5</UNITS><UNITPRICE>13</UNITPRICE><COMMISSION>4.95</COMMISSION><TOTAL>60.05</TOTAL>
    <SUBACCTSEC>CASH</SUBACCTSEC><SUBACCTFUND>CASH</SUBACCTFUND>
  </INVSELL>
  <SELLTYPE>SELL</SELLTYPE>
</SELLSTOCK>
<INCOME>
  <INVTRAN><FITID>I1</FITID><DTTRADE>20240115</DTTRADE></INVTRAN>
  <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <INCOMETYPE>DIV</INCOMETYPE><TOTAL>1.25</TOTAL>
  <SUBACCTSEC>CASH</SUBACCTSEC><SUBACCTFUND>CASH</SUBACCTFUND>
</INCOME>
<REINVEST>
  <INVTRAN><FITID>R1</FITID><DTTRADE>20240116</DTTRADE></INVTRAN>
  <SECID><UNIQUEID>000000002</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <INCOMETYPE>DIV</INCOMETYPE><TOTAL>-2.00</TOTAL><SUBACCTSEC>CASH</SUBACCTSEC>
  <UNITS>0.063</UNITS><UNITPRICE>31.75</UNITPRICE>
</REINVEST>
<TRANSFER>
  <INVTRAN><FITID>T1</FITID><DTTRADE>20240117</DTTRADE></INVTRAN>
  <SECID><UNIQUEID>999999999</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <SUBACCTSEC>CASH</SUBACCTSEC><UNITS>7</UNITS><TFERACTION>IN</TFERACTION><POSTYPE>LONG</POSTYPE>
  <INVACCTFROM><BROKERID>other.com</BROKERID><ACCTID>OTHER</ACCTID></INVACCTFROM>
</TRANSFER>
<INVBANKTRAN>
  <STMTTRN><TRNTYPE>CREDIT</TRNTYPE><DTPOSTED>20240120</DTPOSTED><TRNAMT>500.00</TRNAMT>
  <FITID>C1</FITID><NAME>Deposit</NAME></STMTTRN>
  <SUBACCTFUND>CASH</SUBACCTFUND>
</INVBANKTRAN>
<INVEXPENSE>
  <INVTRAN><FITID>E1</FITID><DTTRADE>20240121</DTTRADE></INVTRAN>
  <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <TOTAL>-10</TOTAL><SUBACCTSEC>CASH</SUBACCTSEC><SUBACCTFUND>CASH</SUBACCTFUND>
</INVEXPENSE>
</INVTRANLIST>
<INVPOSLIST>
<POSSTOCK><INVPOS>
  <SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>CASH</HELDINACCT><POSTYPE>LONG</POSTYPE><UNITS>5</UNITS><UNITPRICE>13.10</UNITPRICE>
  <MKTVAL>65.50</MKTVAL><DTPRICEASOF>20240131</DTPRICEASOF>
</INVPOS></POSSTOCK>
<POSMF><INVPOS>
  <SECID><UNIQUEID>000000002</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>CASH</HELDINACCT><POSTYPE>LONG</POSTYPE><UNITS>3.204</UNITS><UNITPRICE>31.90</UNITPRICE>
  <MKTVAL>102.21</MKTVAL><DTPRICEASOF>20240131</DTPRICEASOF>
</INVPOS><REINVDIV>Y</REINVDIV></POSMF>
<POSDEBT><INVPOS>
  <SECID><UNIQUEID>000000003</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>CASH</HELDINACCT><POSTYPE>LONG</POSTYPE><UNITS>1000</UNITS><UNITPRICE>99.5</UNITPRICE>
  <MKTVAL>995</MKTVAL><DTPRICEASOF>20240131</DTPRICEASOF>
</INVPOS></POSDEBT>
<POSOPT><INVPOS>
  <SECID><UNIQUEID>000000004</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>MARGIN</HELDINACCT><POSTYPE>SHORT</POSTYPE><UNITS>-1</UNITS><UNITPRICE>-2.5</UNITPRICE>
  <MKTVAL>250</MKTVAL><DTPRICEASOF>20240131</DTPRICEASOF>
</INVPOS></POSOPT>
<POSOTHER><INVPOS>
  <SECID><UNIQUEID>000000005</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
  <HELDINACCT>OTHER</HELDINACCT><POSTYPE>LONG</POSTYPE><UNITS>1</UNITS><UNITPRICE>1</UNITPRICE>
  <MKTVAL>1</MKTVAL><DTPRICEASOF></DTPRICEASOF>
</INVPOS></POSOTHER>
</INVPOSLIST>
<INVBAL><AVAILCASH>1000.00</AVAILCASH><MARGINBALANCE>0</MARGINBALANCE><SHORTBALANCE>0</SHORTBALANCE>
<BUYPOWER>2000</BUYPOWER>
<BALLIST><BAL><NAME>X</NAME><DESC>d</DESC><BALTYPE>DOLLAR</BALTYPE><VALUE>1</VALUE></BAL></BALLIST>
</INVBAL>
</INVSTMTRS>
</INVSTMTTRNRS>
</INVSTMTMSGSRSV1>
<SECLISTMSGSRSV1><SECLIST>
<STOCKINFO><SECINFO><SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>Acme Corp</SECNAME><TICKER>ACME</TICKER></SECINFO><YIELD>1</YIELD></STOCKINFO>
<MFINFO><SECINFO><SECID><UNIQUEID>000000002</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>Big Fund</SECNAME><TICKER>BIGFX</TICKER></SECINFO><MFTYPE>OPENEND</MFTYPE></MFINFO>
<DEBTINFO><SECINFO><SECID><UNIQUEID>000000003</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>Treasury 2030</SECNAME></SECINFO><PARVALUE>1000</PARVALUE><DEBTTYPE>COUPON</DEBTTYPE></DEBTINFO>
<OPTINFO><SECINFO><SECID><UNIQUEID>000000004</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>ACME Jan 20 Call</SECNAME><TICKER>ACME240119C20</TICKER></SECINFO><OPTTYPE>CALL</OPTTYPE>
<STRIKEPRICE>20</STRIKEPRICE><DTEXPIRE>20240119</DTEXPIRE><SHPERCTRCT>100</SHPERCTRCT>
<SECID><UNIQUEID>000000001</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID></OPTINFO>
<OTHERINFO><SECINFO><SECID><UNIQUEID>000000005</UNIQUEID><UNIQUEIDTYPE>CUSIP</UNIQUEIDTYPE></SECID>
<SECNAME>Other thing</SECNAME><TICKER>OTH</TICKER></SECINFO></OTHERINFO>
</SECLIST></SECLISTMSGSRSV1>
</OFX>
"#;

#[test]
fn investment_statement() {
    let doc = parse(INVESTMENT_XML);
    assert_eq!(
        doc.signon.as_ref().unwrap().org.as_deref(),
        Some("Broker Inc")
    );
    assert_eq!(doc.statements.len(), 1);
    let s = &doc.statements[0];
    assert_eq!(s.kind, StatementKind::Investment);
    assert_eq!(s.as_of, Some(dt(2024, 1, 31, 21, 0, 0)));
    assert_eq!(s.account.broker_id.as_deref(), Some("broker.com"));
    assert_eq!(s.account.account_id.as_deref(), Some("X-1"));
    assert_eq!(s.account.account_type.as_deref(), Some("INVESTMENT"));
    assert_eq!(
        (s.start, s.end),
        (Some(day(2024, 1, 1)), Some(day(2024, 1, 31)))
    );

    let t = &s.transactions;
    let fit_ids: Vec<_> = t.iter().map(|t| t.fit_id.as_str()).collect();
    assert_eq!(fit_ids, ["B1", "B2", "S1", "I1", "R1", "T1", "C1", "E1"]);

    assert_eq!(t[0].kind, TransactionKind::Buy);
    assert_eq!(t[0].trn_type.as_deref(), Some("BUY"));
    assert_eq!(t[0].posted, day(2024, 1, 2));
    assert_eq!(t[0].settled, Some(day(2024, 1, 4).fixed_offset()));
    assert_eq!(t[0].memo.as_deref(), Some("Buy ACME"));
    assert_eq!(t[0].symbol.as_deref(), Some("ACME"));
    assert_eq!(t[0].security_name.as_deref(), Some("Acme Corp"));
    assert_eq!(
        t[0].security_id,
        Some(SecurityId {
            unique_id: "000000001".into(),
            unique_id_type: "CUSIP".into()
        })
    );
    assert_eq!(
        (t[0].units, t[0].unit_price, t[0].commission, t[0].amount),
        (
            Some(dec("10")),
            Some(dec("12.5")),
            Some(dec("4.95")),
            dec("-129.95")
        )
    );

    assert_eq!(t[1].kind, TransactionKind::Buy);
    assert_eq!(t[1].symbol.as_deref(), Some("BIGFX"));
    assert_eq!(t[1].currency.as_deref(), Some("EUR"));

    assert_eq!(t[2].kind, TransactionKind::Sell);
    assert_eq!(t[2].trn_type.as_deref(), Some("SELL"));
    assert_eq!((t[2].units, t[2].amount), (Some(dec("-5")), dec("60.05")));

    assert_eq!(t[3].kind, TransactionKind::Income);
    assert_eq!(t[3].income_type.as_deref(), Some("DIV"));
    assert_eq!(t[3].amount, dec("1.25"));

    assert_eq!(t[4].kind, TransactionKind::Reinvest);
    assert_eq!(t[4].symbol.as_deref(), Some("BIGFX"));
    assert_eq!((t[4].units, t[4].amount), (Some(dec("0.063")), dec("-2")));

    assert_eq!(t[5].kind, TransactionKind::Transfer);
    assert_eq!(t[5].trn_type.as_deref(), Some("IN"));
    assert_eq!(t[5].amount, Decimal::ZERO);
    assert_eq!(
        t[5].symbol.as_deref(),
        Some("999999999"),
        "no SECLIST entry: the CUSIP"
    );
    assert_eq!(t[5].security_name, None);

    assert_eq!(t[6].kind, TransactionKind::Bank("CREDIT".into()));
    assert_eq!(t[6].name.as_deref(), Some("Deposit"));
    assert_eq!(t[6].amount, dec("500"));

    assert_eq!(t[7].kind, TransactionKind::Other("INVEXPENSE".into()));
    assert_eq!(t[7].amount, dec("-10"));

    let p = &s.positions;
    let kinds: Vec<_> = p.iter().map(|p| p.asset_kind).collect();
    assert_eq!(
        kinds,
        [
            PositionKind::Stock,
            PositionKind::MutualFund,
            PositionKind::Debt,
            PositionKind::Option,
            PositionKind::Other
        ]
    );
    let symbols: Vec<_> = p.iter().map(|p| p.symbol.as_str()).collect();
    assert_eq!(
        symbols,
        ["ACME", "BIGFX", "000000003", "ACME240119C20", "OTH"]
    );
    assert_eq!(p[2].security_name.as_deref(), Some("Treasury 2030"));
    assert_eq!(
        p[0],
        Position {
            symbol: "ACME".into(),
            security_name: Some("Acme Corp".into()),
            security_id: SecurityId {
                unique_id: "000000001".into(),
                unique_id_type: "CUSIP".into()
            },
            asset_kind: PositionKind::Stock,
            units: dec("5"),
            unit_price: Some(dec("13.10")),
            market_value: Some(dec("65.50")),
            price_as_of: Some(day(2024, 1, 31)),
            held_in: Some("CASH".into()),
            long_short: Some("LONG".into()),
        }
    );
    assert_eq!(p[3].unit_price, Some(dec("-2.5")), "negative UNITPRICE");
    assert_eq!(p[3].long_short.as_deref(), Some("SHORT"));
    assert_eq!(p[4].price_as_of, None, "empty DTPRICEASOF");

    assert_eq!(
        s.investment_balance,
        Some(InvestmentBalance {
            available_cash: Some(dec("1000")),
            margin_balance: Some(Decimal::ZERO),
            short_balance: Some(Decimal::ZERO),
            buying_power: Some(dec("2000")),
        })
    );
    assert_eq!(s.ledger_balance, None);
}

#[test]
fn investment_statement_as_sgml_reads_the_same() {
    // Open every leaf again: strip the closing tags of leaves.
    let mut sgml = String::new();
    let mut rest = INVESTMENT_XML;
    while let Some(i) = rest.find("</") {
        let end = rest[i..].find('>').unwrap() + i;
        let name = &rest[i + 2..end];
        let closes_leaf = rest[..i]
            .rfind('<')
            .is_some_and(|open| rest[open + 1..].starts_with(name) && !rest[..i].ends_with('>'));
        sgml.push_str(&rest[..i]);
        if !closes_leaf {
            sgml.push_str(&rest[i..=end]);
        }
        rest = &rest[end + 1..];
    }
    sgml.push_str(rest);
    assert!(sgml.contains("<UNITS>10<UNITPRICE>"), "{sgml}");
    let body = &sgml[sgml.find("<OFX>").unwrap()..];
    assert_eq!(
        parse(&format!("{SGML_HEADER}{body}")),
        parse(INVESTMENT_XML)
    );
}

// ---------------------------------------------------------------- header quirks

#[test]
fn header_variations_read_alike() {
    let expected = expected_bank();
    let crlf = |s: &str| s.replace('\n', "\r\n");
    let variants = [
        format!("{SGML_HEADER}{BANK_BODY}"),
        crlf(&format!("{SGML_HEADER}{BANK_BODY}")),
        format!("\n\n   \n  {SGML_HEADER}{BANK_BODY}"),
        format!("{}{BANK_BODY}", SGML_HEADER.trim_end()),
        "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\nENCODING:USASCII\n\
         CHARSET:1252\nCOMPRESSION:NONE\n\n"
            .to_owned()
            + BANK_BODY,
        "OFXHEADER:100\n\nDATA:OFXSGML\n\nVERSION:103\n\nSECURITY:NONE\n\nENCODING:USASCII\n\n\
         CHARSET:1252\n\nCOMPRESSION:NONE\n\nOLDFILEUID:\n\nNEWFILEUID:\n\n"
            .to_owned()
            + BANK_BODY,
        SGML_HEADER.replace("VERSION:102", "VERSION:100") + BANK_BODY,
        SGML_HEADER.replace("VERSION:102", "VERSION:300") + BANK_BODY,
        // A whole file without line breaks.
        format!("{SGML_HEADER}{BANK_BODY}").replace(['\n', '\r'], " "),
        format!("{SGML_HEADER}{BANK_BODY}").replace('\n', ""),
        format!("{XML_HEADER}{}", close_leaves(BANK_BODY, 1)),
        format!(
            "<?OFX OFXHEADER=\"200\" VERSION=\"211\"?>{}",
            close_leaves(BANK_BODY, 1)
        ),
        // No header at all.
        BANK_BODY.to_owned(),
        close_leaves(BANK_BODY, 1),
        // A header written as elements.
        format!(
            "<START><OFXHEADER>100</OFXHEADER><DATA>OFXSGML</DATA><VERSION>102</VERSION>\
             <SECURITY>NONE</SECURITY><ENCODING>USASCII</ENCODING><CHARSET>1252</CHARSET>\
             </START>\n{BANK_BODY}"
        ),
        format!("<START><OFXHEADER>100<DATA>OFXSGML<VERSION>102\n{BANK_BODY}"),
    ];
    for (i, text) in variants.iter().enumerate() {
        assert_eq!(parse(text), expected, "variant {i}:\n{text}");
    }
}

// ---------------------------------------------------------------- encodings

#[test]
fn encodings_utf8_or_cp1252_whatever_the_header_says() {
    let with = |header: &str, name: &[u8]| -> Vec<u8> {
        let mut file = header.as_bytes().to_vec();
        let body =
            one_txn("<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<TRNAMT>-1\n<FITID>1\n<NAME>NAME_HERE");
        let body = &body[body.find("<OFX>").unwrap()..];
        let (a, b) = body.split_once("NAME_HERE").unwrap();
        file.extend_from_slice(a.as_bytes());
        file.extend_from_slice(name);
        file.extend_from_slice(b.as_bytes());
        file
    };
    let name_of = |bytes: &[u8]| {
        parse_ofx(bytes).unwrap().statements[0].transactions[0]
            .name
            .clone()
            .unwrap()
    };
    // CHARSET:1252 with real CP1252 bytes (0xE9 é, 0x92 ’, 0x80 €).
    assert_eq!(
        name_of(&with(SGML_HEADER, b"Caf\xE9 Jo\x92s \x8010")),
        "Café Jo’s €10"
    );
    // CHARSET:1252 that is really UTF-8.
    assert_eq!(name_of(&with(SGML_HEADER, "Café €".as_bytes())), "Café €");
    // ENCODING:UTF-8 + CHARSET:NONE.
    let utf8 = SGML_HEADER
        .replace("USASCII", "UTF-8")
        .replace("CHARSET:1252", "CHARSET:NONE");
    assert_eq!(name_of(&with(&utf8, "Zürich ✓".as_bytes())), "Zürich ✓");
    // CHARSET:8859-1 with Latin-1 bytes.
    let latin1 = SGML_HEADER.replace("CHARSET:1252", "CHARSET:8859-1");
    assert_eq!(name_of(&with(&latin1, b"Se\xF1or \xC0")), "Señor À");
    // An XML declaration that says utf-16 over ASCII bytes.
    let utf16_decl =
        "<?xml version=\"1.0\" encoding=\"utf-16\"?>\n<?OFX OFXHEADER=\"200\" VERSION=\"211\"?>\n";
    assert_eq!(name_of(&with(utf16_decl, b"Plain")), "Plain");
    // A UTF-8 byte-order mark.
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend(with(SGML_HEADER, "Caf\u{e9}".as_bytes()));
    assert_eq!(name_of(&bom), "Café");
    // Real UTF-16 with a byte-order mark.
    let text = String::from_utf8(with(SGML_HEADER, "Ünï".as_bytes())).unwrap();
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(name_of(&utf16), "Ünï");
}

// ---------------------------------------------------------------- tag quirks

#[test]
fn tags_empty_elements_comments_cdata_proprietary_whitespace() {
    let text = format!(
        "{SGML_HEADER}<!-- exported by Bank -->
<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS>
<INTU.BID>3000<INTU.USERID>someone<INTU.XYZ>
<FI><ORG>  Bank \t<FID>\t1 </FI></SONRS></SIGNONMSGSRSV1>
<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<STMTRS><CURDEF>USD<BANKACCTFROM><BANKID>1<ACCTID>2<ACCTTYPE>CHECKING</BANKACCTFROM>
<BANKTRANLIST><DTSTART/><DTEND></DTEND>
<STMTTRN>
  <TRNTYPE>  DEBIT  </TRNTYPE>
  <DTPOSTED>\t20240101\t
  <TRNAMT> -1.00 
  <FITID> A1 </FITID>
  <NAME><![CDATA[Tom & Jerry <Ltd>]]></NAME>
  <MEMO><![CDATA[]]></MEMO>
  <!-- <MEMO>not this</MEMO> -->
  <INTU.FOO>bar
</STMTTRN>
<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240102<TRNAMT>-2<FITID>A2<NAME></NAME><MEMO>  <![CDATA[ cdata memo ]]>  </STMTTRN>
</BANKTRANLIST>
<LEDGERBAL><BALAMT/><DTASOF/></LEDGERBAL>
<AVAILBAL><BALAMT>5<DTASOF></DTASOF></AVAILBAL>
</STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>"
    );
    let doc = parse(&text);
    let signon = doc.signon.unwrap();
    assert_eq!(signon.org.as_deref(), Some("Bank"));
    assert_eq!(signon.fid.as_deref(), Some("1"));
    let s = &doc.statements[0];
    assert_eq!((s.start, s.end), (None, None));
    let t = &s.transactions;
    assert_eq!(t[0].trn_type.as_deref(), Some("DEBIT"));
    assert_eq!(t[0].posted, day(2024, 1, 1));
    assert_eq!(t[0].amount, dec("-1"));
    assert_eq!(t[0].fit_id, "A1");
    assert_eq!(t[0].name.as_deref(), Some("Tom & Jerry <Ltd>"));
    assert_eq!(t[0].memo, None);
    assert_eq!(t[1].name, None);
    assert_eq!(t[1].memo.as_deref(), Some("cdata memo"));
    assert_eq!(s.ledger_balance, None, "<BALAMT/> is no balance");
    assert_eq!(
        s.available_balance,
        Some(Balance {
            amount: dec("5"),
            as_of: None
        })
    );
}

#[test]
fn one_line_bodies() {
    let one_line: String = BANK_BODY.lines().collect();
    assert_eq!(parse(&format!("{SGML_HEADER}{one_line}")), expected_bank());
    let xml_one_line: String = close_leaves(BANK_BODY, 1).lines().collect();
    assert_eq!(parse(&xml_one_line), expected_bank());
}

// ---------------------------------------------------------------- entities

#[test]
fn entities_decoded_once_raw_ampersands_and_quotes() {
    let t = first_txn(&one_txn(
        "<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<TRNAMT>-1\n<FITID>1\n\
         <NAME>AT&amp;T &lt;wireless&gt;\n<MEMO>Ben & Jerry's \"best\" &amp;lt;3 &#233;",
    ));
    assert_eq!(t.name.as_deref(), Some("AT&T <wireless>"));
    assert_eq!(t.memo.as_deref(), Some("Ben & Jerry's \"best\" &lt;3 é"));
    let xml = first_txn(&close_leaves(
        &one_txn(
            "<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<TRNAMT>-1\n<FITID>1\n<NAME>A&amp;amp;B &quot;q&quot;",
        ),
        1,
    ));
    assert_eq!(xml.name.as_deref(), Some("A&amp;B \"q\""));
}

// ---------------------------------------------------------------- amounts

#[test]
fn amounts_in_files() {
    let amount = |raw: &str| {
        first_txn(&one_txn(&format!(
            "<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<TRNAMT>{raw}\n<FITID>1"
        )))
        .amount
    };
    assert_eq!(amount("+0000012.50"), dec("12.5"));
    assert_eq!(amount("-30.000"), dec("-30"));
    assert_eq!(amount("-3.77000"), dec("-3.77"));
    assert_eq!(amount("-3.77000").scale(), 5, "scale kept as written");
    assert_eq!(amount("12,34"), dec("12.34"));
    assert_eq!(amount(".5"), dec("0.5"));
    assert_eq!(amount("-.5"), dec("-0.5"));
}

#[test]
fn unreadable_amounts_are_rejected_with_their_line() {
    for raw in ["$120", "  .  ", "R$ 5.326,43", "1,234.56", "12abc"] {
        let text = one_txn(&format!(
            "<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<TRNAMT>{raw}\n<FITID>1"
        ));
        match parse_ofx(text.as_bytes()) {
            Err(OfxError::Malformed { line, message }) => {
                assert_eq!(line, line_of(&text, "<TRNAMT>"), "{raw}");
                assert!(message.contains("TRNAMT"), "{message}");
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }
    // A balance amount that cannot be read is not dropped silently either.
    let text = bank_with(
        "<STMTTRN>\n<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<TRNAMT>-1\n<FITID>1\n</STMTTRN>\n",
    )
    .replace(
        "</STMTRS>",
        "<LEDGERBAL>\n<BALAMT>$120\n<DTASOF>20240101\n</LEDGERBAL>\n</STMTRS>",
    );
    // Except a balance (decisions.md "More statement formats"): it becomes a warning naming
    // the line, the balance is left out, and the transactions are still read.
    let document = parse(&text);
    assert_eq!(document.warnings.len(), 1, "{document:?}");
    assert_eq!(document.warnings[0].line, line_of(&text, "<BALAMT>"));
    assert!(
        document.warnings[0].message.contains("BALAMT"),
        "{document:?}"
    );
    assert_eq!(document.statements[0].ledger_balance, None);
    assert!(!document.statements[0].transactions.is_empty());
}

// ---------------------------------------------------------------- dates

#[test]
fn every_date_form() {
    let posted = |raw: &str| {
        first_txn(&one_txn(&format!(
            "<TRNTYPE>DEBIT\n<DTPOSTED>{raw}\n<TRNAMT>-1\n<FITID>1"
        )))
        .posted
    };
    let ms = TimeDelta::milliseconds;
    assert_eq!(posted("20240115"), day(2024, 1, 15));
    assert_eq!(posted("20240115093000"), dt(2024, 1, 15, 9, 30, 0));
    assert_eq!(
        posted("20240115093000.123"),
        dt(2024, 1, 15, 9, 30, 0) + ms(123)
    );
    assert_eq!(posted("20240115093000[-5:EST]"), dt(2024, 1, 15, 14, 30, 0));
    assert_eq!(
        posted("20240115093000.000[-5:EST]"),
        dt(2024, 1, 15, 14, 30, 0)
    );
    assert_eq!(posted("20240115093000[0:GMT]"), dt(2024, 1, 15, 9, 30, 0));
    assert_eq!(
        posted("20240115093000[-03:EST]"),
        dt(2024, 1, 15, 12, 30, 0)
    );
    assert_eq!(posted("20240115093000[-3:BRT]"), dt(2024, 1, 15, 12, 30, 0));
    assert_eq!(posted("20240115093000[-:EST]"), dt(2024, 1, 15, 9, 30, 0));
    assert_eq!(posted("202401150930"), dt(2024, 1, 15, 9, 30, 0));
    assert_eq!(posted("2009021100000000[-5:EST]"), dt(2009, 2, 11, 5, 0, 0));
    assert_eq!(
        posted("20180804093914:014"),
        dt(2018, 8, 4, 9, 39, 14) + ms(14)
    );
    assert_eq!(
        posted("20151006160000.000[-5:EST]160000.000[-5:EST]"),
        dt(2015, 10, 6, 21, 0, 0)
    );
    assert_eq!(posted("15/01/2024"), day(2024, 1, 15));
    assert_eq!(posted("   20240115"), day(2024, 1, 15));

    // The calendar date is the one the file wrote, whatever it is in UTC.
    let evening = posted("20240105200000[-5:EST]");
    assert_eq!(evening, dt(2024, 1, 6, 1, 0, 0));
    assert_eq!(evening.date_naive().to_string(), "2024-01-05");
    let early = posted("20240105003000[+1:CET]");
    assert_eq!(early, dt(2024, 1, 4, 23, 30, 0));
    assert_eq!(early.date_naive().to_string(), "2024-01-05");
    let half_hour = posted("20240105233000[+5.30:IST]");
    assert_eq!(half_hour.date_naive().to_string(), "2024-01-05");

    // Optional dates: all zeros and empty are absent.
    let t = first_txn(&one_txn(
        "<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<DTUSER>00000000\n<DTAVAIL>\n<TRNAMT>-1\n<FITID>1",
    ));
    assert_eq!((t.user_date, t.settled), (None, None));
    let t = first_txn(&one_txn(
        "<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<DTUSER>00000000000000.000[-5:EST]\n<TRNAMT>-1\n<FITID>1",
    ));
    assert_eq!(t.user_date, None);

    // The required DTPOSTED: all zeros, empty or unreadable is an error on its line.
    for raw in ["00000000", "", "2024", "20241399", "junk"] {
        let text = one_txn(&format!(
            "<TRNTYPE>DEBIT\n<DTPOSTED>{raw}\n<TRNAMT>-1\n<FITID>1"
        ));
        match parse_ofx(text.as_bytes()) {
            Err(OfxError::Malformed { line, message }) => {
                assert_eq!(line, line_of(&text, "<DTPOSTED>"), "{raw:?}");
                assert!(message.contains("DTPOSTED"), "{message}");
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------- structure

#[test]
fn several_statements_in_one_or_several_wrappers() {
    let stmt = |acct: &str, fit: &str| {
        format!(
            "<STMTRS><CURDEF>USD<BANKACCTFROM><BANKID>1<ACCTID>{acct}<ACCTTYPE>CHECKING</BANKACCTFROM>\
             <BANKTRANLIST><STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240101<TRNAMT>-1<FITID>{fit}</STMTTRN>\
             </BANKTRANLIST></STMTRS>"
        )
    };
    let status = "<STATUS><CODE>0<SEVERITY>INFO</STATUS>";
    let one_wrapper = format!(
        "<OFX><BANKMSGSRSV1><STMTTRNRS><TRNUID>1{status}{}{}</STMTTRNRS></BANKMSGSRSV1></OFX>",
        stmt("A", "1"),
        stmt("B", "2")
    );
    let two_wrappers = format!(
        "<OFX><BANKMSGSRSV1><STMTTRNRS><TRNUID>1{status}{}</STMTTRNRS>\
         <STMTTRNRS><TRNUID>2{status}{}</STMTTRNRS></BANKMSGSRSV1></OFX>",
        stmt("A", "1"),
        stmt("B", "2")
    );
    let two_message_sets = format!(
        "<OFX><BANKMSGSRSV1><STMTTRNRS><TRNUID>1{status}{}</STMTTRNRS></BANKMSGSRSV1>\
         <BANKMSGSRSV1><STMTTRNRS><TRNUID>2{status}{}</STMTTRNRS></BANKMSGSRSV1></OFX>",
        stmt("A", "1"),
        stmt("B", "2")
    );
    for text in [one_wrapper, two_wrappers, two_message_sets] {
        let doc = parse(&text);
        let accounts: Vec<_> = doc
            .statements
            .iter()
            .map(|s| s.account.account_id.as_deref().unwrap())
            .collect();
        assert_eq!(accounts, ["A", "B"]);
        assert_eq!(doc.statements[1].transactions[0].fit_id, "2");
    }
}

#[test]
fn bank_and_credit_card_in_one_response() {
    let text = "<OFX>
<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<STMTRS><CURDEF>USD<BANKACCTFROM><BANKID>1<ACCTID>CHK<ACCTTYPE>CHECKING</BANKACCTFROM>
<BANKTRANLIST><STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240101<TRNAMT>-1<FITID>1</STMTTRN></BANKTRANLIST>
</STMTRS></STMTTRNRS></BANKMSGSRSV1>
<CREDITCARDMSGSRSV1><CCSTMTTRNRS><TRNUID>2<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<CCSTMTRS><CURDEF>USD<CCACCTFROM><ACCTID>CARD</CCACCTFROM>
<BANKTRANLIST><STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240102<TRNAMT>-2<FITID>2</STMTTRN></BANKTRANLIST>
</CCSTMTRS></CCSTMTTRNRS></CREDITCARDMSGSRSV1>
</OFX>";
    let doc = parse(text);
    let kinds: Vec<_> = doc.statements.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [StatementKind::Bank, StatementKind::CreditCard]);
    assert_eq!(
        doc.statements[1].account.account_id.as_deref(),
        Some("CARD")
    );
}

#[test]
fn statements_without_optional_parts() {
    let text = "<OFX><BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<STMTRS>
<BANKTRANLIST>
<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240101<TRNAMT>-1<FITID>1</STMTTRN>
</BANKTRANLIST>
</STMTRS>
<STMTRS><CURDEF>GBP</STMTRS>
</STMTTRNRS></BANKMSGSRSV1></OFX>";
    let doc = parse(text);
    let s = &doc.statements[0];
    assert_eq!(s.currency, "USD", "CURDEF defaults to USD");
    assert_eq!(s.account, StatementAccount::default());
    assert_eq!((s.start, s.end, &s.ledger_balance), (None, None, &None));
    assert_eq!(s.transactions.len(), 1);
    let empty = &doc.statements[1];
    assert_eq!(empty.currency, "GBP");
    assert!(empty.transactions.is_empty());
}

#[test]
fn signon_only_error_response() {
    let text = format!(
        "{SGML_HEADER}<OFX>
<SIGNONMSGSRSV1>
<SONRS>
<STATUS>
<CODE>15500
<SEVERITY>ERROR
<MESSAGE>Signon invalid
</STATUS>
<DTSERVER>20240101
<LANGUAGE>ENG
</SONRS>
</SIGNONMSGSRSV1>
</OFX>"
    );
    assert_eq!(
        parse_ofx(text.as_bytes()),
        Err(OfxError::SignonFailed {
            code: 15500,
            message: "Signon invalid".into()
        })
    );
}

#[test]
fn statement_request_error_without_statement() {
    let failed = "<STMTTRNRS><TRNUID>1<STATUS><CODE>2000<SEVERITY>ERROR\
                  <MESSAGE>General error</STATUS></STMTTRNRS>";
    let signon =
        "<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS></SONRS></SIGNONMSGSRSV1>";
    let only_error = format!("<OFX>{signon}<BANKMSGSRSV1>{failed}</BANKMSGSRSV1></OFX>");
    assert_eq!(
        parse_ofx(only_error.as_bytes()),
        Err(OfxError::RequestFailed {
            code: 2000,
            message: "General error".into()
        })
    );
    // With another statement the failed one is skipped.
    let good = bank_with("<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240101<TRNAMT>-1<FITID>1</STMTTRN>\n");
    let mixed = good.replace("<BANKMSGSRSV1>\n", &format!("<BANKMSGSRSV1>\n{failed}\n"));
    let doc = parse(&mixed);
    assert_eq!(doc.statements.len(), 1);
    // A failed sign-on next to statements is reported through `signon`.
    let with_bad_signon = good.replace(
        "<OFX>",
        "<OFX><SIGNONMSGSRSV1><SONRS><STATUS><CODE>15000<SEVERITY>WARN</STATUS></SONRS></SIGNONMSGSRSV1>",
    );
    let doc = parse(&with_bad_signon);
    assert_eq!(doc.signon.unwrap().status_code, 15000);
    assert_eq!(doc.statements.len(), 1);
    // No statement and no error: an empty document.
    let nothing = format!("<OFX>{signon}</OFX>");
    assert_eq!(parse(&nothing).statements, vec![]);
}

// ---------------------------------------------------------------- refusals and errors

#[test]
fn doctype_and_entity_declarations_are_refused() {
    let doctype = format!(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE OFX [<!ENTITY x \"boom\">]>\n{}",
        close_leaves(BANK_BODY, 1)
    );
    assert_eq!(
        parse_ofx(doctype.as_bytes()),
        Err(OfxError::DoctypeRefused { line: 2 })
    );
    let entity = format!("{SGML_HEADER}{BANK_BODY}")
        .replace("<BANKMSGSRSV1>", "<BANKMSGSRSV1>\n<!ENTITY lol \"lol\">");
    assert_eq!(
        parse_ofx(entity.as_bytes()),
        Err(OfxError::EntityDeclarationRefused {
            line: line_of(&entity, "<!ENTITY")
        })
    );
    let lower = "<ofx>\n<!doctype ofx>";
    assert_eq!(
        parse_ofx(lower.as_bytes()),
        Err(OfxError::DoctypeRefused { line: 2 })
    );
}

#[test]
fn malformed_files_name_the_line() {
    let full = format!("{SGML_HEADER}{BANK_BODY}");
    // A transaction without FITID: the line where it starts.
    let no_fitid = full.replace("<FITID>2024011001\n", "");
    let line = line_of(&no_fitid, "<TRNTYPE>CHECK") - 1;
    assert_eq!(
        parse_ofx(no_fitid.as_bytes()),
        Err(OfxError::Malformed {
            line,
            message: "<STMTTRN> has no FITID".into()
        })
    );
    // Truncated in the middle of a transaction.
    let cut = &full[..full.find("<NAME>Payroll").unwrap()];
    let err = parse_ofx(cut.as_bytes()).unwrap_err();
    assert!(
        matches!(&err, OfxError::Malformed { message, .. } if message.contains("never closed")),
        "{err}"
    );
    // Markup that never ends.
    let unterminated = full.replace("<MKTGINFO>Visit us", "<!-- oops");
    assert!(matches!(
        parse_ofx(unterminated.as_bytes()),
        Err(OfxError::Malformed { line, .. }) if line == line_of(&unterminated, "<!-- oops")
    ));
    // A bad status code.
    let bad_code = full.replacen("<CODE>0", "<CODE>zero", 1);
    assert!(matches!(
        parse_ofx(bad_code.as_bytes()),
        Err(OfxError::Malformed { line, .. }) if line == line_of(&bad_code, "<CODE>zero")
    ));
    // Very deep nesting is an error, not a stack overflow.
    let deep = format!("<OFX>{}", "<BANKMSGSRSV1>".repeat(100_000));
    assert!(matches!(
        parse_ofx(deep.as_bytes()),
        Err(OfxError::Malformed { line: 1, .. })
    ));
    // Errors display with the line.
    assert_eq!(
        OfxError::Malformed {
            line: 7,
            message: "x".into()
        }
        .to_string(),
        "line 7: x"
    );
}

#[test]
fn empty_and_non_ofx_files() {
    assert_eq!(parse_ofx(b""), Err(OfxError::Empty));
    assert_eq!(parse_ofx(b" \r\n\t "), Err(OfxError::Empty));
    assert_eq!(parse_ofx(b"\xEF\xBB\xBF\n"), Err(OfxError::Empty));
    assert_eq!(parse_ofx(b"%PDF-1.4 <<binary"), Err(OfxError::NotOfx));
    assert_eq!(
        parse_ofx(b"Date,Amount\n2024-01-01,5"),
        Err(OfxError::NotOfx)
    );
    assert_eq!(
        parse_ofx(b"<html><body>hi</body></html>"),
        Err(OfxError::NotOfx)
    );
    assert!(matches!(
        parse_ofx(SGML_HEADER.as_bytes()),
        Err(OfxError::Malformed { message, .. }) if message.contains("no <OFX>")
    ));
}

#[test]
fn written_files_read_back() {
    let doc = parse(INVESTMENT_XML);
    assert_eq!(parse(&write_ofx1(&doc)), doc);
    assert_eq!(parse(&write_ofx2(&doc)), doc);
    let bank = expected_bank();
    assert_eq!(parse(&write_ofx1(&bank)), bank);
    assert_eq!(parse(&write_ofx2(&bank)), bank);
    assert!(write_ofx1(&bank).starts_with("OFXHEADER:100"));
    assert!(write_ofx2(&bank).contains("<TRNAMT>-42.50</TRNAMT>"));
}

#[test]
fn payee_and_currency_written_as_leaves() {
    let t = first_txn(&one_txn(
        "<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<TRNAMT>-1\n<FITID>1\n<PAYEE>Corner Shop\n\
         <CURRENCY>EUR\n<MEMO>after",
    ));
    assert_eq!(t.name.as_deref(), Some("Corner Shop"));
    assert_eq!(t.currency.as_deref(), Some("EUR"));
    assert_eq!(t.memo.as_deref(), Some("after"));
}

#[test]
fn proprietary_aggregates_are_skipped() {
    let text = INVESTMENT_XML.replace(
        "<INVTRANLIST>",
        "<INVTRANLIST><INTU.XFER><INVTRAN><FITID>P1</FITID></INVTRAN><TRNAMT>junk</TRNAMT>\
         </INTU.XFER>",
    );
    assert_eq!(parse(&text), parse(INVESTMENT_XML));
    let sgml = bank_with(
        "<STMTTRN>\n<TRNTYPE>DEBIT\n<DTPOSTED>20240101\n<INTU.EXTRA>\n<TRNAMT>-1\n<FITID>1\n</STMTTRN>\n",
    );
    assert_eq!(
        first_txn(&sgml).amount,
        dec("-1"),
        "empty INTU.* leaf does not swallow siblings"
    );
}

#[test]
fn written_files_keep_each_transaction_date_in_its_own_offset() {
    let text = one_txn(
        "<TRNTYPE>DEBIT\n<DTPOSTED>20240105200000[-5:EST]\n<DTAVAIL>20240106003000[+1:CET]\n\
         <TRNAMT>-1\n<FITID>1",
    );
    let document = parse_ofx(text.as_bytes()).expect("parses");
    for written in [write_ofx1(&document), write_ofx2(&document)] {
        let again = parse_ofx(written.as_bytes()).expect("written file parses");
        let line = &again.statements[0].transactions[0];
        assert_eq!(line.posted.date_naive().to_string(), "2024-01-05");
        assert_eq!(
            line.settled
                .map(|date| date.date_naive().to_string())
                .as_deref(),
            Some("2024-01-06")
        );
        assert_eq!(again.statements, document.statements);
    }
}
