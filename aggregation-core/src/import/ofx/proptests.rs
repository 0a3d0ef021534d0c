//! Property tests: the parser never panics, and written files read back to what was written.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use rust_decimal::Decimal;

use super::*;

const CASES: u32 = 256;

/// A trimmed, non-empty value with the characters files have trouble with.
fn text() -> impl Strategy<Value = String> {
    "[ -~éüß€’]{1,24}".prop_filter_map("blank", |s| {
        let t = s.trim();
        (!t.is_empty()).then(|| t.to_owned())
    })
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    option::of(text())
}

fn word(words: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(words).prop_map(str::to_owned)
}

fn decimal() -> impl Strategy<Value = Decimal> {
    (any::<i64>(), 0u32..=6).prop_map(|(m, s)| Decimal::new(m / 1000, s))
}

fn date() -> impl Strategy<Value = DateTime<Utc>> {
    // 1970 to 2100, millisecond precision.
    (0i64..4_102_444_800_000).prop_map(|ms| DateTime::from_timestamp_millis(ms).unwrap())
}

#[derive(Debug, Clone)]
struct Security {
    id: SecurityId,
    ticker: Option<String>,
    name: Option<String>,
}

impl Security {
    fn symbol(&self) -> String {
        self.ticker
            .clone()
            .unwrap_or_else(|| self.id.unique_id.clone())
    }
}

fn securities() -> impl Strategy<Value = Vec<Security>> {
    vec(
        (
            "[A-Z0-9]{1,12}",
            word(&["CUSIP", "ISIN", "TICKER", ""]),
            option::of("[A-Z]{1,5}"),
            opt_text(),
        ),
        1..5,
    )
    .prop_map(|raw| {
        let mut unique = BTreeMap::new();
        for (uid, kind, ticker, name) in raw {
            let id = SecurityId {
                unique_id: uid,
                unique_id_type: kind,
            };
            unique
                .entry(id.clone())
                .or_insert(Security { id, ticker, name });
        }
        unique.into_values().collect()
    })
}

fn empty_txn(kind: TransactionKind, fit_id: String, posted: DateTime<Utc>) -> StatementTransaction {
    StatementTransaction {
        fit_id,
        kind,
        trn_type: None,
        posted: posted.fixed_offset(),
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
    }
}

const TRNTYPES: &[&str] = &[
    "CREDIT",
    "DEBIT",
    "INT",
    "DIV",
    "FEE",
    "SRVCHG",
    "DEP",
    "ATM",
    "POS",
    "XFER",
    "CHECK",
    "PAYMENT",
    "CASH",
    "DIRECTDEP",
    "DIRECTDEBIT",
    "REPEATPMT",
    "OTHER",
];

fn bank_txn() -> impl Strategy<Value = StatementTransaction> {
    (
        (
            text(),
            word(TRNTYPES),
            date(),
            option::of(date()),
            option::of(date()),
        ),
        (decimal(), opt_text(), opt_text(), option::of("[0-9]{1,6}")),
        option::of(word(&["EUR", "GBP", "JPY"])),
    )
        .prop_map(
            |((fit, trntype, posted, user, avail), (amount, name, memo, check), currency)| {
                StatementTransaction {
                    trn_type: Some(trntype.clone()),
                    user_date: user,
                    settled: avail.map(|date| date.fixed_offset()),
                    amount,
                    name,
                    memo,
                    check_number: check,
                    currency,
                    ..empty_txn(TransactionKind::Bank(trntype), fit, posted)
                }
            },
        )
}

fn investment_txn(pool: Vec<Security>) -> impl Strategy<Value = StatementTransaction> {
    let kind = prop_oneof![
        Just(TransactionKind::Buy),
        Just(TransactionKind::Sell),
        Just(TransactionKind::Income),
        Just(TransactionKind::Reinvest),
        Just(TransactionKind::Transfer),
        word(&[
            "INVEXPENSE",
            "MARGININTEREST",
            "RETOFCAP",
            "SPLIT",
            "JRNLFUND",
            "CLOSUREOPT"
        ])
        .prop_map(TransactionKind::Other),
    ];
    let n = pool.len();
    (
        (kind, text(), date(), option::of(date()), opt_text()),
        (
            decimal(),
            option::of(decimal()),
            option::of(decimal()),
            option::of(decimal()),
        ),
        (
            option::of(0..n),
            opt_text(),
            option::of(word(&["BUY", "SELL", "BUYTOCOVER", "IN", "OUT"])),
            option::of(word(&["CAD", "EUR"])),
        ),
    )
        .prop_map(
            move |(
                (kind, fit, posted, settled, memo),
                (amount, units, price, commission),
                (security, income_type, trn_type, currency),
            )| {
                let trn_type = match kind {
                    TransactionKind::Buy | TransactionKind::Sell | TransactionKind::Transfer => {
                        trn_type
                    }
                    _ => None,
                };
                let security = security.and_then(|i| pool.get(i));
                StatementTransaction {
                    trn_type,
                    settled: settled.map(|date| date.fixed_offset()),
                    amount,
                    memo,
                    symbol: security.map(Security::symbol),
                    security_name: security.and_then(|s| s.name.clone()),
                    security_id: security.map(|s| s.id.clone()),
                    units,
                    unit_price: price,
                    commission,
                    income_type,
                    currency,
                    ..empty_txn(kind, fit, posted)
                }
            },
        )
}

fn position(pool: Vec<Security>) -> impl Strategy<Value = Position> {
    let n = pool.len();
    (
        (
            0..n,
            decimal(),
            option::of(decimal()),
            option::of(decimal()),
        ),
        (
            option::of(date()),
            option::of(word(&["CASH", "MARGIN", "SHORT", "OTHER"])),
            option::of(word(&["LONG", "SHORT"])),
            proptest::sample::select(&[
                PositionKind::Stock,
                PositionKind::MutualFund,
                PositionKind::Debt,
                PositionKind::Option,
                PositionKind::Other,
            ]),
        ),
    )
        .prop_map(
            move |(
                (i, units, unit_price, market_value),
                (price_as_of, held_in, long_short, asset_kind),
            )| {
                let security = &pool[i];
                Position {
                    symbol: security.symbol(),
                    security_name: security.name.clone(),
                    security_id: security.id.clone(),
                    asset_kind,
                    units,
                    unit_price,
                    market_value,
                    price_as_of,
                    held_in,
                    long_short,
                }
            },
        )
}

fn balance() -> impl Strategy<Value = Option<Balance>> {
    option::of(
        (decimal(), option::of(date())).prop_map(|(amount, as_of)| Balance { amount, as_of }),
    )
}

fn base_statement(kind: StatementKind) -> impl Strategy<Value = Statement> {
    (
        word(&["USD", "EUR", "CAD"]),
        (
            opt_text(),
            opt_text(),
            opt_text(),
            option::of(word(&[
                "CHECKING",
                "SAVINGS",
                "MONEYMRKT",
                "CREDITLINE",
                "CD",
            ])),
        ),
        option::of(date()),
        option::of(date()),
    )
        .prop_map(
            move |(currency, (account_id, bank_id, branch_id, account_type), start, end)| {
                let account = match kind {
                    StatementKind::Bank => StatementAccount {
                        account_id,
                        bank_id,
                        branch_id,
                        broker_id: None,
                        account_type,
                    },
                    StatementKind::CreditCard => StatementAccount {
                        account_id,
                        account_type: Some("CREDITCARD".into()),
                        ..StatementAccount::default()
                    },
                    StatementKind::Investment => StatementAccount {
                        account_id,
                        broker_id: bank_id,
                        account_type: Some("INVESTMENT".into()),
                        ..StatementAccount::default()
                    },
                };
                Statement {
                    kind,
                    currency,
                    account,
                    transactions: Vec::new(),
                    positions: Vec::new(),
                    ledger_balance: None,
                    available_balance: None,
                    investment_balance: None,
                    start,
                    end,
                    as_of: None,
                }
            },
        )
}

fn bank_statement() -> impl Strategy<Value = Statement> {
    let kind = prop_oneof![Just(StatementKind::Bank), Just(StatementKind::CreditCard)];
    kind.prop_flat_map(|kind| {
        (
            base_statement(kind),
            vec(bank_txn(), 0..5),
            balance(),
            balance(),
        )
            .prop_map(|(mut s, transactions, ledger, available)| {
                s.transactions = transactions;
                s.ledger_balance = ledger;
                s.available_balance = available;
                s
            })
    })
}

fn investment_statement(pool: Vec<Security>) -> impl Strategy<Value = Statement> {
    let txn = prop_oneof![1 => bank_txn(), 4 => investment_txn(pool.clone())];
    (
        base_statement(StatementKind::Investment),
        vec(txn, 0..6),
        vec(position(pool), 0..4),
        option::of((
            option::of(decimal()),
            option::of(decimal()),
            option::of(decimal()),
            option::of(decimal()),
        )),
        option::of(date()),
    )
        .prop_map(|(mut s, transactions, positions, balance, as_of)| {
            s.transactions = transactions;
            s.positions = positions;
            s.investment_balance = balance.map(|(a, m, sh, b)| InvestmentBalance {
                available_cash: a,
                margin_balance: m,
                short_balance: sh,
                buying_power: b,
            });
            s.as_of = as_of;
            s
        })
}

fn document() -> impl Strategy<Value = OfxDocument> {
    securities().prop_flat_map(|pool| {
        let statement = prop_oneof![bank_statement(), investment_statement(pool)];
        (
            vec(statement, 0..4),
            option::of((
                proptest::sample::select(&[0u32, 2000, 15000, 15500]),
                word(&["INFO", "WARN", "ERROR"]),
                opt_text(),
                opt_text(),
                opt_text(),
            )),
        )
            .prop_map(|(statements, signon)| {
                let signon = signon.map(|(code, severity, message, org, fid)| Signon {
                    // A failed sign-on without statements is an error, not a document.
                    status_code: if statements.is_empty() { 0 } else { code },
                    severity,
                    message,
                    org,
                    fid,
                });
                OfxDocument {
                    signon,
                    statements,
                    warnings: Vec::new(),
                }
            })
    })
}

/// One edit of a file.
#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Insert(usize, u8),
    Replace(usize, u8),
    Truncate(usize),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![
        proptest::sample::select(b"<>/&;![]-\n ?\"'0.:ZE\xE9\x80\xFF\x00".to_vec()),
        any::<u8>(),
    ];
    let at = any::<prop::sample::Index>();
    prop_oneof![
        at.clone()
            .prop_map(|i| Mutation::Delete(i.index(usize::MAX))),
        (at.clone(), byte.clone()).prop_map(|(i, b)| Mutation::Insert(i.index(usize::MAX), b)),
        (at.clone(), byte).prop_map(|(i, b)| Mutation::Replace(i.index(usize::MAX), b)),
        at.clone()
            .prop_map(|i| Mutation::Truncate(i.index(usize::MAX))),
        (at.clone(), 1usize..200).prop_map(|(i, n)| Mutation::Duplicate(i.index(usize::MAX), n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len().max(1);
    match *mutation {
        Mutation::Delete(i) if !bytes.is_empty() => {
            bytes.remove(i % bytes.len());
        }
        Mutation::Insert(i, b) => bytes.insert(i % (bytes.len() + 1), b),
        Mutation::Replace(i, b) if !bytes.is_empty() => {
            let at = i % bytes.len();
            bytes[at] = b;
        }
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Duplicate(i, n) if !bytes.is_empty() => {
            let start = i % bytes.len();
            let end = (start + n).min(bytes.len());
            let copy = bytes[start..end].to_vec();
            bytes.splice(end..end, copy);
        }
        _ => {}
    }
}

/// Pieces of OFX, shuffled into token soup.
fn soup() -> impl Strategy<Value = String> {
    let piece = proptest::sample::select(vec![
        "<OFX>",
        "</OFX>",
        "<STMTTRN>",
        "</STMTTRN>",
        "<BANKTRANLIST>",
        "</BANKTRANLIST>",
        "<STMTRS>",
        "</STMTRS>",
        "<INVSTMTRS>",
        "<INVTRANLIST>",
        "<BUYSTOCK>",
        "<INVBUY>",
        "<INVTRAN>",
        "</INVTRAN>",
        "<SECID>",
        "</SECID>",
        "<UNIQUEID>",
        "<SECLIST>",
        "<STOCKINFO>",
        "<SECINFO>",
        "<POSSTOCK>",
        "<INVPOS>",
        "<INVPOSLIST>",
        "<TRNAMT>",
        "<DTPOSTED>",
        "<FITID>",
        "<NAME>",
        "<TOTAL>",
        "<UNITS>",
        "<STATUS>",
        "<CODE>",
        "<SONRS>",
        "<SIGNONMSGSRSV1>",
        "<BANKMSGSRSV1>",
        "<STMTTRNRS>",
        "</STMTTRNRS>",
        "<LEDGERBAL>",
        "<BALAMT>",
        "<INVBAL>",
        "<AVAILCASH>",
        "<INTU.BID>",
        "<X>",
        "</X>",
        "<![CDATA[",
        "]]>",
        "<!--",
        "-->",
        "<?xml",
        "?>",
        "&amp;",
        "&",
        "&#",
        ";",
        "/>",
        "</>",
        "20240101",
        "-1.5",
        "15500",
        "0",
        "x",
        " ",
        "\n",
        "[-5:EST]",
        "OFXHEADER:100\n",
    ]);
    vec(piece, 0..80).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..2048)) {
        let _ = parse_ofx(&bytes);
    }

    #[test]
    fn never_panics_on_token_soup(text in soup()) {
        let _ = parse_ofx(text.as_bytes());
    }

    #[test]
    fn never_panics_on_mutated_files(
        doc in document(),
        xml in any::<bool>(),
        mutations in vec(mutation(), 1..8),
    ) {
        let text = if xml { write_ofx2(&doc) } else { write_ofx1(&doc) };
        let mut bytes = text.into_bytes();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let _ = parse_ofx(&bytes);
    }

    #[test]
    fn ofx1_roundtrip(doc in document()) {
        let written = write_ofx1(&doc);
        prop_assert_eq!(parse_ofx(written.as_bytes()), Ok(doc), "{}", written);
    }

    #[test]
    fn ofx2_roundtrip(doc in document()) {
        let written = write_ofx2(&doc);
        prop_assert_eq!(parse_ofx(written.as_bytes()), Ok(doc), "{}", written);
    }
}
