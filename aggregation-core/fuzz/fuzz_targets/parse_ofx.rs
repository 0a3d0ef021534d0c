//! Feeds arbitrary bytes to the OFX parser: it must return a document or an error, never panic,
//! overflow its stack or hang. When it parses, writing the document out and reading it back
//! must give the same document.
#![no_main]

use aggregation_core::import::{parse_ofx, write_ofx1, write_ofx2};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(document) = parse_ofx(data) {
        for written in [write_ofx1(&document), write_ofx2(&document)] {
            let again = parse_ofx(written.as_bytes()).expect("written documents parse");
            assert_eq!(again.statements, document.statements);
        }
    }
});
