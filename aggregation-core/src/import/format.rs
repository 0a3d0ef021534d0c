//! The statement formats an import reads, and how an upload's format is found.
//!
//! The `format` part names it when given. Otherwise the content decides, in this order: an
//! OFX header or `<OFX>` element (`qfx` when the file name ends in `.qfx` or the sign-on carries
//! Intuit's `INTU.BID`, else `ofx`), then CAMT (an ISO 20022 `camt.05x` namespace), MT940/MT942
//! (SWIFT tags), QIF (`!Type:` headers) and CSV last, since almost any text splits into
//! columns. Only when the content says nothing does the file name's extension decide, and only
//! an extension that names one format (`.txt` and `.xml` name several, so they decide nothing).

use super::{camt, csv, mt940, qif};
use crate::enums::string_enum;

/// How many bytes of a file content detection looks at for the OFX markers.
const OFX_SNIFF_BYTES: usize = 4096;

string_enum! {
    /// A statement file format.
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

impl Format {
    /// The format's full name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Qfx => "Quicken Financial Exchange",
            Self::Ofx => "Open Financial Exchange",
            Self::Qif => "Quicken Interchange Format",
            Self::Csv => "Comma-Separated Values",
            Self::Camt052 => "ISO 20022 Bank to Customer Account Report (camt.052)",
            Self::Camt053 => "ISO 20022 Bank to Customer Statement (camt.053)",
            Self::Camt054 => "ISO 20022 Bank to Customer Debit/Credit Notification (camt.054)",
            Self::Mt940 => "SWIFT MT940 Customer Statement",
            Self::Mt942 => "SWIFT MT942 Interim Transaction Report",
        }
    }

    /// The file name extensions the format is usually delivered with, the first being its
    /// own.
    pub(crate) fn extensions(self) -> &'static [&'static str] {
        match self {
            Self::Qfx => &[".qfx"],
            Self::Ofx => &[".ofx"],
            Self::Qif => &[".qif"],
            Self::Csv => &[".csv", ".tsv", ".txt"],
            Self::Camt052 => &[".xml", ".052"],
            Self::Camt053 => &[".xml", ".053"],
            Self::Camt054 => &[".xml", ".054"],
            Self::Mt940 => &[".sta", ".mt940", ".940", ".txt"],
            Self::Mt942 => &[".mt942", ".942", ".txt"],
        }
    }

    /// What an import of the format needs besides the file.
    pub(crate) fn needs(self) -> Needs {
        match self {
            Self::Qif | Self::Csv => Needs::Account,
            _ => Needs::Nothing,
        }
    }

    /// The format a file name's extension names (after the last dot, case-insensitively), when
    /// exactly one format uses it.
    pub(crate) fn from_extension(file_name: &str) -> Option<Self> {
        let (_, extension) = file_name.rsplit_once('.')?;
        let extension = format!(".{}", extension.to_ascii_lowercase());
        let mut found = Self::ALL
            .iter()
            .copied()
            .filter(|format| format.extensions().contains(&extension.as_str()));
        let first = found.next()?;
        found.next().is_none().then_some(first)
    }

    /// Every format's code, comma-separated (for messages).
    pub(crate) fn codes() -> String {
        Self::ALL
            .iter()
            .map(|format| format.as_str())
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

/// The format of an upload: by its content, else by the extension of `file_name`. `None` when
/// neither tells.
pub(crate) fn detect(bytes: &[u8], file_name: Option<&str>) -> Option<Format> {
    let by_extension = file_name.and_then(Format::from_extension);
    let head = bytes.get(..OFX_SNIFF_BYTES).unwrap_or(bytes);
    if looks_like_ofx(head) {
        return Some(
            if by_extension == Some(Format::Qfx) || has_intuit_bid(bytes) {
                Format::Qfx
            } else {
                Format::Ofx
            },
        );
    }
    if let Some(message) = camt::sniff(bytes) {
        return Some(match message {
            camt::CamtMessage::Report => Format::Camt052,
            camt::CamtMessage::Statement => Format::Camt053,
            camt::CamtMessage::Notification => Format::Camt054,
        });
    }
    if let Some(message) = mt940::sniff(bytes) {
        return Some(match message {
            mt940::MtMessage::Mt940 => Format::Mt940,
            mt940::MtMessage::Mt942 => Format::Mt942,
        });
    }
    if qif::sniff(bytes) {
        return Some(Format::Qif);
    }
    if csv::sniff(bytes) {
        return Some(Format::Csv);
    }
    by_extension
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
            assert!(!format.extensions().is_empty());
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
    fn unknown_content_falls_back_to_the_extension() {
        assert_eq!(detect(b"\x00\x01binary", Some("a.qif")), Some(Format::Qif));
        assert_eq!(detect(b"\x00\x01binary", Some("a.txt")), None);
        assert_eq!(detect(b"\x00\x01binary", None), None);
    }
}
