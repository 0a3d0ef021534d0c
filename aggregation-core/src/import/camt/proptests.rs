//! Property tests: whatever the bytes, the parser answers `Ok` or an error naming a line and a
//! reason, and never panics.

use proptest::collection::vec;
use proptest::prelude::*;

use super::tests::{
    REVERSAL, V01_REPORT, V02_STATEMENT, V04_NOTIFICATION, V08_REPORT, V08_STATEMENT, V13_PREFIXED,
};
use super::*;

const FIXTURES: [&str; 7] = [
    V01_REPORT,
    V02_STATEMENT,
    V08_STATEMENT,
    V08_REPORT,
    V04_NOTIFICATION,
    V13_PREFIXED,
    REVERSAL,
];

/// One change to a file: replace, insert or delete bytes at a relative position.
#[derive(Debug, Clone)]
enum Mutation {
    Replace(Place, u8),
    Insert(Place, Vec<u8>),
    Delete(Place, usize),
    /// Duplicate a slice somewhere else (nests and repeats elements).
    Copy(Place, usize, Place),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let fragment = prop_oneof![
        vec(any::<u8>(), 1..8),
        proptest::sample::select(vec![
            b"<".to_vec(),
            b">".to_vec(),
            b"</Ntry>".to_vec(),
            b"<Ntry>".to_vec(),
            b"<TxDtls>".to_vec(),
            b"&".to_vec(),
            b"&#0;".to_vec(),
            b"&#x110000;".to_vec(),
            b"<!DOCTYPE x>".to_vec(),
            b"<![CDATA[".to_vec(),
            b"-".to_vec(),
            b"9999999999999999999999999999999".to_vec(),
            b"\xFF\xFE".to_vec(),
            b"DBIT".to_vec(),
            b"PDNG".to_vec(),
        ]),
    ];
    prop_oneof![
        (0..PLACES, any::<u8>()).prop_map(|(at, b)| Mutation::Replace(at, b)),
        (0..PLACES, fragment).prop_map(|(at, f)| Mutation::Insert(at, f)),
        (0..PLACES, 1usize..64).prop_map(|(at, n)| Mutation::Delete(at, n)),
        (0..PLACES, 1usize..400, 0..PLACES).prop_map(|(a, n, b)| Mutation::Copy(a, n, b)),
    ]
}

/// A relative position, in ten-thousandths of the file's length.
type Place = usize;
const PLACES: Place = 10_000;

fn at(len: usize, place: Place) -> usize {
    (len * place / PLACES).min(len)
}

fn apply(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len();
        match m {
            Mutation::Replace(p, b) => {
                if len > 0 {
                    let i = at(len, *p).min(len - 1);
                    bytes[i] = *b;
                }
            }
            Mutation::Insert(p, fragment) => {
                let i = at(len, *p);
                bytes.splice(i..i, fragment.iter().copied());
            }
            Mutation::Delete(p, n) => {
                let i = at(len, *p);
                let end = (i + n).min(len);
                bytes.drain(i..end);
            }
            Mutation::Copy(from, n, to) => {
                let i = at(len, *from);
                let end = (i + n).min(len);
                let piece: Vec<u8> = bytes[i..end].to_vec();
                let j = at(len, *to);
                bytes.splice(j..j, piece);
            }
        }
    }
    bytes
}

fn check(bytes: &[u8]) {
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    match parse(bytes) {
        Ok(file) => {
            for statement in &file.statements {
                for entry in &statement.entries {
                    assert!(entry.line >= 1);
                }
            }
        }
        Err(error) => {
            assert!(!error.reason.is_empty());
            // UTF-16 halves the count of newline bytes at most; the line never exceeds the
            // file's lines.
            assert!(error.line <= lines, "line {} of {lines}", error.line);
        }
    }
    let _ = sniff(bytes);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_never_panic(bytes in vec(any::<u8>(), 0..2048)) {
        check(&bytes);
    }

    #[test]
    fn any_text_after_a_camt_head_never_panics(tail in "[<>/&;#a-zA-Z0-9 \n\"=:.-]{0,600}") {
        let text = format!(
            "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.08\">\
             <BkToCstmrStmt><Stmt>{tail}"
        );
        check(text.as_bytes());
    }

    /// Amounts anywhere up to the largest decimal, in balances, entries and batch details:
    /// sums past it are an error naming a line, never a panic.
    #[test]
    fn amounts_near_the_largest_decimal_never_panic(
        opening in "[0-9]{1,29}",
        entries in vec(("[0-9]{1,29}", any::<bool>(), vec("[0-9]{1,29}", 0..4)), 1..6),
    ) {
        let mut body = format!(
            "<Bal><Tp><CdOrPrtry><Cd>OPBD</Cd></CdOrPrtry></Tp><Amt Ccy=\"EUR\">{opening}</Amt>\
             <CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>2024-01-31</Dt></Dt></Bal>\n\
             <Bal><Tp><CdOrPrtry><Cd>CLBD</Cd></CdOrPrtry></Tp><Amt Ccy=\"EUR\">{opening}</Amt>\
             <CdtDbtInd>CRDT</CdtDbtInd><Dt><Dt>2024-01-31</Dt></Dt></Bal>\n"
        );
        for (amount, credit, details) in &entries {
            let cdi = if *credit { "CRDT" } else { "DBIT" };
            let details: String = details
                .iter()
                .map(|d| format!("<TxDtls><Amt Ccy=\"EUR\">{d}</Amt></TxDtls>\n"))
                .collect();
            body.push_str(&format!(
                "<Ntry><Amt Ccy=\"EUR\">{amount}</Amt><CdtDbtInd>{cdi}</CdtDbtInd>\
                 <Sts>BOOK</Sts><BookgDt><Dt>2024-01-31</Dt></BookgDt><RvslInd>true</RvslInd>\
                 <NtryDtls>\n{details}</NtryDtls></Ntry>\n"
            ));
        }
        let text = format!(
            "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.08\">\
             <BkToCstmrStmt><GrpHdr><MsgId>M</MsgId></GrpHdr><Stmt><Acct><Id><IBAN>X</IBAN>\
             </Id></Acct>\n{body}</Stmt></BkToCstmrStmt></Document>"
        );
        check(text.as_bytes());
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in 0..FIXTURES.len(),
        mutations in vec(mutation(), 1..6),
    ) {
        let bytes = apply(FIXTURES[which].as_bytes().to_vec(), &mutations);
        check(&bytes);
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash(depth in 60usize..5000) {
        let text = format!(
            "<Document xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.02\">\
             <BkToCstmrStmt><Stmt>{}{}</Stmt></BkToCstmrStmt></Document>",
            "<Ntry>".repeat(depth),
            "</Ntry>".repeat(depth),
        );
        let result = parse(text.as_bytes());
        if depth + 3 > MAX_DEPTH {
            let error = result.expect_err("too deep");
            prop_assert!(error.reason.contains("nested"));
            prop_assert_eq!(error.line, 1);
        }
    }
}
