//! The statement formats an import reads, and how an upload's format is found: one table
//! ([`FORMATS`]), one row per format (code, name, extensions, needs, sniff, parse), which the
//! formats listing, the upload's validation, content detection and parsing all read.
//!
//! The `format` part names it when given. Otherwise the content decides, in this order: an
//! OFX header or `<OFX>` element (`qfx` when the file name ends in `.qfx` or the sign-on carries
//! Intuit's `INTU.BID`, else `ofx`), then CAMT (an ISO 20022 `camt.05x` namespace), MT940/MT942
//! (SWIFT tags), QIF (`!Type:` headers) and CSV last, since almost any text splits into
//! columns. Only when the content says nothing does the file name's extension decide, and only
//! an extension that names one format (`.txt` and `.xml` name several, so they decide nothing).

use super::camt::{self, CamtMessage};
use super::csv::{self, CsvError, CsvMapping};
use super::model::{ParseError, ParsedFile};
use super::mt940::{self, MtMessage};
use super::ofx::parse_ofx;
use super::qif;
use super::statement::{ImportError, Parsed};
use crate::enums::string_enum;

/// How many bytes of a file content detection looks at for the OFX markers.
const OFX_SNIFF_BYTES: usize = 4096;

string_enum! {
    /// A statement file format (the rows of [`FORMATS`], in their order).
    pub(crate) enum Format {
        /// Quicken Financial Exchange (OFX with Intuit's additions).
        Qfx => "qfx",
        /// Open Financial Exchange 1.x (SGML) and 2.x (XML).
        Ofx => "ofx",
        /// Quicken Interchange Format.
        Qif => "qif",
        /// Comma- (or otherwise) separated values in a bank's own layout.
        Csv => "csv",
        /// ISO 20022 account report (intraday).
        Camt052 => "camt.052",
        /// ISO 20022 account statement.
        Camt053 => "camt.053",
        /// ISO 20022 debit/credit notification.
        Camt054 => "camt.054",
        /// SWIFT MT940 customer statement.
        Mt940 => "mt940",
        /// SWIFT MT942 interim transaction report.
        Mt942 => "mt942",
    }
}

/// What an import of a format needs besides the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// The file names its accounts.
    Nothing,
    /// The file names no account: `account_id` or `account_name` is required.
    Account,
}

/// When content detection asks a row: passes run in this order, the most telling markers
/// first, and the rows of one pass in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SniffPass {
    /// An OFX header or `<OFX>` element.
    OfxMarkers,
    /// An ISO 20022 `camt.05x` namespace.
    Namespace,
    /// SWIFT block or field tags.
    SwiftTags,
    /// QIF `!Type:` headers.
    QifHeaders,
    /// Columns: last, since almost any text splits into columns.
    Columns,
}

/// What content detection looks at.
pub(crate) struct Content<'a> {
    /// The whole file.
    bytes: &'a [u8],
    /// Its first [`OFX_SNIFF_BYTES`].
    head: &'a [u8],
    /// The format the file name's extension names alone, if any.
    by_extension: Option<Format>,
}

/// How a row reads a file: `bytes` with the CSV `mapping`, if one was given.
pub(crate) type ParseFn = fn(&[u8], Option<&CsvMapping>) -> Result<Parsed, ImportError>;

/// One row of the format table.
pub(crate) struct FormatRow {
    /// The format; its code is [`Format::as_str`].
    pub(crate) format: Format,
    /// The format's full name.
    pub(crate) name: &'static str,
    /// The file name extensions the format is usually delivered with, the first being its own.
    pub(crate) extensions: &'static [&'static str],
    /// What an import of the format needs besides the file.
    pub(crate) needs: Needs,
    /// When content detection asks the row.
    pub(crate) pass: SniffPass,
    /// Whether the content is in this format (asked in [`SniffPass`] order).
    pub(crate) sniff: fn(&Content<'_>) -> bool,
    /// Reads a file of the format.
    pub(crate) parse: ParseFn,
}

impl std::fmt::Debug for FormatRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FormatRow")
            .field("format", &self.format)
            .field("name", &self.name)
            .field("extensions", &self.extensions)
            .field("needs", &self.needs)
            .field("pass", &self.pass)
            .finish_non_exhaustive()
    }
}

/// A row: `format_row!(Variant, "name", [".ext", ...], needs, pass, sniff, parse)`.
macro_rules! format_row {
    ($format:ident, $name:literal, [$($extension:literal),+], $needs:ident, $pass:ident,
        $sniff:expr, $parse:expr) => {
        FormatRow {
            format: Format::$format,
            name: $name,
            extensions: &[$($extension),+],
            needs: Needs::$needs,
            pass: SniffPass::$pass,
            sniff: $sniff,
            parse: $parse,
        }
    };
}

/// The format table: one row per format, in [`Format::ALL`] order (checked when compiled).
pub(crate) const FORMATS: &[FormatRow] = &[
    format_row!(
        Qfx,
        "Quicken Financial Exchange",
        [".qfx"],
        Nothing,
        OfxMarkers,
        |content| looks_like_ofx(content.head)
            && (content.by_extension == Some(Format::Qfx) || has_intuit_bid(content.bytes)),
        read_ofx
    ),
    // Asked after `qfx`: an OFX file that is not a QFX one.
    format_row!(
        Ofx,
        "Open Financial Exchange",
        [".ofx"],
        Nothing,
        OfxMarkers,
        |content| looks_like_ofx(content.head),
        read_ofx
    ),
    format_row!(
        Qif,
        "Quicken Interchange Format",
        [".qif"],
        Account,
        QifHeaders,
        |content| qif::sniff(content.bytes),
        |bytes, _| read(Format::Qif, qif::parse(bytes))
    ),
    format_row!(
        Csv,
        "Comma-Separated Values",
        [".csv", ".tsv", ".txt"],
        Account,
        Columns,
        |content| csv::sniff(content.bytes),
        read_csv
    ),
    format_row!(
        Camt052,
        "ISO 20022 Bank to Customer Account Report (camt.052)",
        [".xml", ".052"],
        Nothing,
        Namespace,
        |content| camt::sniff(content.bytes) == Some(CamtMessage::Report),
        |bytes, _| read(Format::Camt052, camt::parse(bytes))
    ),
    format_row!(
        Camt053,
        "ISO 20022 Bank to Customer Statement (camt.053)",
        [".xml", ".053"],
        Nothing,
        Namespace,
        |content| camt::sniff(content.bytes) == Some(CamtMessage::Statement),
        |bytes, _| read(Format::Camt053, camt::parse(bytes))
    ),
    format_row!(
        Camt054,
        "ISO 20022 Bank to Customer Debit/Credit Notification (camt.054)",
        [".xml", ".054"],
        Nothing,
        Namespace,
        |content| camt::sniff(content.bytes) == Some(CamtMessage::Notification),
        |bytes, _| read(Format::Camt054, camt::parse(bytes))
    ),
    format_row!(
        Mt940,
        "SWIFT MT940 Customer Statement",
        [".sta", ".mt940", ".940", ".txt"],
        Nothing,
        SwiftTags,
        |content| mt940::sniff(content.bytes) == Some(MtMessage::Mt940),
        |bytes, _| read(Format::Mt940, mt940::parse(bytes))
    ),
    format_row!(
        Mt942,
        "SWIFT MT942 Interim Transaction Report",
        [".mt942", ".942", ".txt"],
        Nothing,
        SwiftTags,
        |content| mt940::sniff(content.bytes) == Some(MtMessage::Mt942),
        |bytes, _| read(Format::Mt942, mt940::parse(bytes))
    ),
];

// Row `i` is the format `Format::ALL[i]`, so a format finds its row by its position.
const _: () = {
    assert!(FORMATS.len() == Format::ALL.len());
    let mut at = 0;
    while at < FORMATS.len() {
        assert!(FORMATS[at].format as usize == at);
        at += 1;
    }
};

/// Reads an OFX or QFX file.
fn read_ofx(bytes: &[u8], _: Option<&CsvMapping>) -> Result<Parsed, ImportError> {
    match parse_ofx(bytes) {
        Ok(document) => Ok(Box::new(document)),
        Err(error) => Err(ImportError::Unreadable(error)),
    }
}

/// Reads a CSV file with its mapping, telling a file it cannot read from a mapping that does
/// not fit.
fn read_csv(bytes: &[u8], mapping: Option<&CsvMapping>) -> Result<Parsed, ImportError> {
    match csv::parse(bytes, mapping) {
        Ok(file) => Ok(Box::new(file)),
        Err(CsvError::Unreadable(error)) => Err(ImportError::Parse {
            format: Format::Csv,
            error,
        }),
        Err(CsvError::Mapping { column, reason }) => Err(ImportError::Mapping { column, reason }),
        Err(CsvError::MappingField { field, reason }) => {
            Err(ImportError::MappingField { field, reason })
        }
    }
}

/// A file of the statement model read as `format`.
fn read(format: Format, result: Result<ParsedFile, ParseError>) -> Result<Parsed, ImportError> {
    match result {
        Ok(file) => Ok(Box::new(file)),
        Err(error) => Err(ImportError::Parse { format, error }),
    }
}

impl Format {
    /// The format's row of [`FORMATS`].
    pub(crate) fn row(self) -> &'static FormatRow {
        // In bounds and the right row: checked when compiled, above.
        &FORMATS[self as usize]
    }

    /// What an import of the format needs besides the file.
    pub(crate) fn needs(self) -> Needs {
        self.row().needs
    }

    /// Reads a file of the format (a CSV file with its `mapping`).
    pub(crate) fn parse_file(
        self,
        bytes: &[u8],
        mapping: Option<&CsvMapping>,
    ) -> Result<Parsed, ImportError> {
        (self.row().parse)(bytes, mapping)
    }

    /// The format a file name's extension names (after the last dot, case-insensitively), when
    /// exactly one format uses it.
    pub(crate) fn from_extension(file_name: &str) -> Option<Self> {
        let (_, extension) = file_name.rsplit_once('.')?;
        let extension = format!(".{}", extension.to_ascii_lowercase());
        let mut found = FORMATS
            .iter()
            .filter(|row| row.extensions.contains(&extension.as_str()));
        let first = found.next()?;
        found.next().is_none().then_some(first.format)
    }

    /// Every format's code, comma-separated (for messages).
    pub(crate) fn codes() -> String {
        FORMATS
            .iter()
            .map(|row| row.format.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether the text starts like an OFX file: an OFX colon header, an `<?OFX` processing
/// instruction, or an `<OFX>` element near the start.
fn looks_like_ofx(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}');
    trimmed.starts_with("OFXHEADER")
        || text.contains("<?OFX")
        || text.to_ascii_uppercase().contains("<OFX>")
}

/// Whether an OFX file carries Intuit's `INTU.BID` (a QFX file).
fn has_intuit_bid(bytes: &[u8]) -> bool {
    bytes
        .windows(b"INTU.BID".len())
        .any(|window| window.eq_ignore_ascii_case(b"INTU.BID"))
}

/// The format of an upload: by its content (the rows' sniffs, pass by pass), else by the
/// extension of `file_name`. `None` when neither tells.
pub(crate) fn detect(bytes: &[u8], file_name: Option<&str>) -> Option<Format> {
    let content = Content {
        bytes,
        head: bytes.get(..OFX_SNIFF_BYTES).unwrap_or(bytes),
        by_extension: file_name.and_then(Format::from_extension),
    };
    let mut rows: Vec<&FormatRow> = FORMATS.iter().collect();
    // Stable: within a pass, table order.
    rows.sort_by_key(|row| row.pass);
    rows.into_iter()
        .find(|row| (row.sniff)(&content))
        .map(|row| row.format)
        .or(content.by_extension)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nine_formats_with_their_codes() {
        assert_eq!(
            Format::codes(),
            "qfx, ofx, qif, csv, camt.052, camt.053, camt.054, mt940, mt942"
        );
        for format in Format::ALL {
            assert_eq!(Format::parse(format.as_str()), Some(*format));
            assert_eq!(format.row().format, *format);
            assert!(!format.row().extensions.is_empty());
        }
    }

    #[test]
    fn extensions_decide_only_when_they_name_one_format() {
        assert_eq!(Format::from_extension("a.QFX"), Some(Format::Qfx));
        assert_eq!(Format::from_extension("a.csv.ofx"), Some(Format::Ofx));
        assert_eq!(Format::from_extension("a.qif"), Some(Format::Qif));
        assert_eq!(Format::from_extension("a.CSV"), Some(Format::Csv));
        assert_eq!(Format::from_extension("a.sta"), Some(Format::Mt940));
        assert_eq!(Format::from_extension("a.053"), Some(Format::Camt053));
        assert_eq!(Format::from_extension("a.txt"), None, "csv or mt940");
        assert_eq!(Format::from_extension("a.xml"), None, "any camt");
        assert_eq!(Format::from_extension("ofx"), None);
        assert_eq!(Format::from_extension("a.pdf"), None);
    }

    #[test]
    fn ofx_content_wins_over_the_extension() {
        let sgml = b"OFXHEADER:100\nDATA:OFXSGML\n\n<OFX><SIGNONMSGSRSV1></SIGNONMSGSRSV1></OFX>";
        assert_eq!(detect(sgml, Some("export.csv")), Some(Format::Ofx));
        assert_eq!(detect(sgml, Some("export.qfx")), Some(Format::Qfx));
        assert_eq!(detect(sgml, None), Some(Format::Ofx));
        let xml = b"<?xml version=\"1.0\"?>\n<?OFX OFXHEADER=\"200\"?>\n<OFX></OFX>";
        assert_eq!(detect(xml, Some("x")), Some(Format::Ofx));
        let bare = b"\xEF\xBB\xBF  <ofx><SONRS><INTU.BID>3000</SONRS></ofx>";
        assert_eq!(detect(bare, Some("statement.ofx")), Some(Format::Qfx));
    }

    #[test]
    fn more_telling_markers_are_asked_first() {
        let camt = b"<?xml version=\"1.0\"?>\n<Document \
            xmlns=\"urn:iso:std:iso:20022:tech:xsd:camt.053.001.02\"><BkToCstmrStmt/></Document>";
        assert_eq!(detect(camt, Some("a.csv")), Some(Format::Camt053));
        assert_eq!(detect(camt, None), Some(Format::Camt053));
        let passes: Vec<SniffPass> = FORMATS.iter().map(|row| row.pass).collect();
        assert_eq!(passes.iter().min(), Some(&SniffPass::OfxMarkers));
        assert_eq!(
            FORMATS
                .iter()
                .filter(|row| row.pass == SniffPass::Columns)
                .map(|row| row.format)
                .collect::<Vec<_>>(),
            [Format::Csv],
            "columns are asked last, and only for CSV"
        );
    }

    #[test]
    fn unknown_content_falls_back_to_the_extension() {
        assert_eq!(detect(b"\x00\x01binary", Some("a.qif")), Some(Format::Qif));
        assert_eq!(detect(b"\x00\x01binary", Some("a.txt")), None);
        assert_eq!(detect(b"\x00\x01binary", None), None);
    }
}
