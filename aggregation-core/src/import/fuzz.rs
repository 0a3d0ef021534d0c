//! The parsers as fuzz targets and benchmarks see them (feature `testing`; not part of the
//! supported API).

use super::format::Format;
use super::{camt, csv, mt940, ofx, qif};

/// Parses `bytes` as the format with this code (`ofx`, `qfx`, `qif`, `csv`, `camt.052`,
/// `camt.053`, `camt.054`, `mt940`, `mt942`; CSV without a mapping). `true` when the file was
/// read; `false` when it was refused, or the code names no format. Never panics on any input.
pub fn parse(format_code: &str, bytes: &[u8]) -> bool {
    match Format::parse(format_code) {
        Some(Format::Ofx | Format::Qfx) => ofx::parse_ofx(bytes).is_ok(),
        Some(Format::Qif) => qif::parse(bytes).is_ok(),
        Some(Format::Csv) => csv::parse(bytes, None).is_ok(),
        Some(Format::Camt052 | Format::Camt053 | Format::Camt054) => camt::parse(bytes).is_ok(),
        Some(Format::Mt940 | Format::Mt942) => mt940::parse(bytes).is_ok(),
        None => false,
    }
}

/// The format content detection finds for `bytes` with an optional file name (its code).
pub fn detect(bytes: &[u8], file_name: Option<&str>) -> Option<&'static str> {
    super::format::detect(bytes, file_name).map(Format::as_str)
}
