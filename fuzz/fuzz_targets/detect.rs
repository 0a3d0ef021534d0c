//! Fuzz target: format detection (every sniffer in its order) never panics, with or without a
//! file name.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = aggregation_core::import::fuzz::detect(data, None);
    let _ = aggregation_core::import::fuzz::detect(data, Some("statement.txt"));
});
