//! Fuzz target: any bytes read as `csv` give a statement or a parse error, never a panic.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = aggregation_core::import::fuzz::parse("csv", data);
});
