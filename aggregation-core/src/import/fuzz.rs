//! The parsers as fuzz targets and benchmarks see them (feature `testing`; not part of the
//! supported API).

use super::format::Format;

/// Parses `bytes` as the format with this code (`ofx`, `qfx`, `qif`, `csv`, `camt.052`,
/// `camt.053`, `camt.054`, `mt940`, `mt942`; CSV without a mapping). `true` when the file was
/// read; `false` when it was refused, or the code names no format. Never panics on any input.
pub fn parse(format_code: &str, bytes: &[u8]) -> bool {
    Format::parse(format_code).is_some_and(|format| format.parse_file(bytes, None).is_ok())
}

/// The format content detection finds for `bytes` with an optional file name (its code).
pub fn detect(bytes: &[u8], file_name: Option<&str>) -> Option<&'static str> {
    super::format::detect(bytes, file_name).map(Format::as_str)
}
