//! Fuzz target: any bytes read as `camt.052` give a statement or a parse error, never a panic.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = aggregation_core::import::fuzz::parse("camt.052", data);
});
