//! Fuzz target: any bytes read as `mt940` give a statement or a parse error, never a panic.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = aggregation_core::import::fuzz::parse("mt940", data);
});
