//! Property tests: whatever the bytes, the parser answers `Ok` or an error with a reason,
//! never a panic; and mutated valid files behave the same.

use proptest::prelude::*;

use super::tests::{DE_SAVINGS_BANK, MULTI_ACCOUNT, NL_BANK_SWIFT, OTHER_BANKS_61, PL_BANK_942};
use super::*;

/// Checks one answer: an error has a reason and a line within the file.
fn check(bytes: &[u8]) {
    let _ = sniff(bytes);
    match parse(bytes) {
        Ok(file) => {
            assert!(!file.statements.is_empty());
            for st in &file.statements {
                for e in &st.entries {
                    assert!(e.line >= 1);
                }
            }
        }
        Err(e) => {
            assert!(!e.reason.is_empty());
            let lines = bytes.iter().filter(|&&b| b == b'\n' || b == b'\r').count() + 1;
            assert!(e.line <= lines, "line {} of {lines}", e.line);
        }
    }
}

/// Pieces that make up MT940 files, to build plausible garbage from.
const PIECES: &[&str] = &[
    ":20:",
    ":25:",
    ":28C:",
    ":60F:",
    ":60M:",
    ":61:",
    ":86:",
    ":62F:",
    ":62M:",
    ":64:",
    ":65:",
    ":34F:",
    ":13D:",
    ":90D:",
    "-",
    "-}",
    "{1:F01",
    "{2:I940",
    "{4:",
    "}",
    "?20",
    "?3",
    "~32",
    "/NAME/",
    "/REMI/",
    "C",
    "D",
    "RC",
    "RD",
    "EC",
    "250101",
    "0101",
    "1231",
    "EUR",
    "1,00",
    ",",
    "NTRF",
    "NONREF",
    "//",
    "\n",
    "\r\n",
    "\r",
    ":",
    "\u{e9}",
    "\u{80}",
    "    ",
    "S   ",
    "NOV ",
    "MCI0",
    "160230",
    "991231",
    ":25P:",
    "DD",
    "999999999999999,99",
    "000000000000000000001,",
];

fn plausible() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            proptest::sample::select(PIECES).prop_map(|s| s.as_bytes().to_vec()),
            proptest::collection::vec(any::<u8>(), 0..4),
        ],
        0..80,
    )
    .prop_map(|parts| parts.concat())
}

/// A valid fixture with some bytes replaced, inserted or removed.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let base = proptest::sample::select(vec![
        DE_SAVINGS_BANK,
        NL_BANK_SWIFT,
        PL_BANK_942,
        OTHER_BANKS_61,
        MULTI_ACCOUNT,
    ]);
    (
        base,
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..12),
    )
        .prop_map(|(base, edits)| {
            let mut bytes = base.to_vec();
            for (at, byte, op) in edits {
                if bytes.is_empty() {
                    bytes.push(byte);
                    continue;
                }
                let i = at.index(bytes.len());
                match op {
                    0 => bytes[i] = byte,
                    1 => bytes.insert(i, byte),
                    _ => {
                        bytes.remove(i);
                    }
                }
            }
            bytes
        })
}

/// A valid fixture cut at any point.
fn truncated() -> impl Strategy<Value = Vec<u8>> {
    let base = proptest::sample::select(vec![
        DE_SAVINGS_BANK,
        NL_BANK_SWIFT,
        PL_BANK_942,
        OTHER_BANKS_61,
        MULTI_ACCOUNT,
    ]);
    (base, any::<prop::sample::Index>()).prop_map(|(b, at)| b[..at.index(b.len() + 1)].to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes);
    }

    #[test]
    fn plausible_garbage(bytes in plausible()) {
        check(&bytes);
    }

    #[test]
    fn mutated_fixtures(bytes in mutated()) {
        check(&bytes);
    }

    #[test]
    fn truncated_fixtures(bytes in truncated()) {
        check(&bytes);
    }
}
