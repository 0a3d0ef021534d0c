//! Recognising the file's header.
//!
//! Four forms occur: OFX 1.x colon headers (`OFXHEADER:100`, `DATA:OFXSGML`, …, in any order,
//! with blank lines before or between the fields, empty values, CRLF or LF, or all on one line),
//! OFX 2.x XML headers (`<?xml …?>` and `<?OFX OFXHEADER="200" VERSION="211" …?>`), a header
//! written as elements (`<START><OFXHEADER>100</OFXHEADER><VERSION>102</VERSION>…`), and no
//! header at all (the file starts with `<OFX>`).
//!
//! The header decides nothing about how the body is read: the body reader accepts SGML and XML
//! alike, ignores text and elements outside `<OFX>`, and ignores the declared charset (see
//! [`super::charset`]). The header is used to tell a damaged OFX file (an OFX header but no
//! `<OFX>` element: a [`Malformed`](super::OfxError::Malformed) error) from something that is
//! not OFX at all ([`NotOfx`](super::OfxError::NotOfx)).

/// How the file's header was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeaderForm {
    /// OFX 1.x `KEY:VALUE` lines.
    Colon,
    /// An OFX 2.x `<?OFX …?>` processing instruction (with or without `<?xml?>`).
    Xml,
    /// A bare `<?xml?>` declaration without `<?OFX?>`.
    XmlDeclOnly,
    /// Header fields written as elements (`<START><OFXHEADER>100</OFXHEADER>…`).
    Elements,
    /// No header: the file starts with its body.
    Absent,
}

/// What the header said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    /// How the header was written.
    pub(crate) form: HeaderForm,
    /// `VERSION` (102, 103, 211, …), when the header gives a readable one.
    pub(crate) version: Option<u32>,
}

impl Header {
    /// Whether the header itself says this is an OFX file.
    pub(crate) fn declares_ofx(&self) -> bool {
        matches!(
            self.form,
            HeaderForm::Colon | HeaderForm::Xml | HeaderForm::Elements
        )
    }
}

/// How far into the file the header is looked for.
const PROLOG_LIMIT: usize = 8192;

/// Reads the header at the start of `text`.
pub(crate) fn sniff(text: &str) -> Header {
    let t = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}');
    let prolog = prefix(t, PROLOG_LIMIT);
    if starts_with_ci(t, "OFXHEADER") {
        return Header {
            form: HeaderForm::Colon,
            version: colon_version(t),
        };
    }
    if let Some(pi) = find_ci(prolog, "<?OFX") {
        let pi_text = prolog.get(pi..).unwrap_or("");
        let end = pi_text.find("?>").unwrap_or(pi_text.len());
        return Header {
            form: HeaderForm::Xml,
            version: attribute_number(pi_text.get(..end).unwrap_or(""), "VERSION"),
        };
    }
    if starts_with_ci(t, "<?xml") {
        return Header {
            form: HeaderForm::XmlDeclOnly,
            version: None,
        };
    }
    if starts_with_ci(t, "<START") || starts_with_ci(t, "<OFXHEADER") {
        let version = find_ci(prolog, "<VERSION>")
            .and_then(|i| prolog.get(i + "<VERSION>".len()..))
            .and_then(leading_number);
        return Header {
            form: HeaderForm::Elements,
            version,
        };
    }
    Header {
        form: HeaderForm::Absent,
        version: None,
    }
}

/// The `VERSION` field of a colon header. Fields are `KEY:VALUE` tokens separated by any
/// whitespace (so one-line files work); the header ends at the first token that is not a field
/// or at the first `<`.
fn colon_version(t: &str) -> Option<u32> {
    let header = t.split('<').next().unwrap_or("");
    for token in header.split_whitespace() {
        let (key, value) = token.split_once(':')?;
        if key.eq_ignore_ascii_case("VERSION") {
            return leading_number(value);
        }
    }
    None
}

/// The number in `NAME="123"` (or `NAME='123'`) inside a processing instruction.
fn attribute_number(pi: &str, name: &str) -> Option<u32> {
    let mut rest = pi;
    while let Some(i) = find_ci(rest, name) {
        let after = rest.get(i + name.len()..)?;
        let preceded_ok = i == 0
            || rest
                .as_bytes()
                .get(i - 1)
                .is_some_and(|b| b.is_ascii_whitespace());
        let value = after.trim_start().strip_prefix('=').map(str::trim_start);
        if let (true, Some(value)) = (preceded_ok, value) {
            return leading_number(value.trim_start_matches(['"', '\'']));
        }
        rest = after;
    }
    None
}

fn leading_number(s: &str) -> Option<u32> {
    let s = s.trim_start();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.get(..end)?.parse().ok()
}

fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.as_bytes()
        .get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// Case-insensitive search for an ASCII needle.
pub(crate) fn find_ci(haystack: &str, needle: &str) -> Option<usize> {
    let n = needle.as_bytes();
    if n.is_empty() {
        return Some(0);
    }
    haystack
        .as_bytes()
        .windows(n.len())
        .position(|w| w.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_header_forms() {
        let h =
            sniff("\n\n  OFXHEADER:100\r\n\r\nDATA:OFXSGML\r\nVERSION:102\r\nOLDFILEUID:\r\n<OFX>");
        assert_eq!(h.form, HeaderForm::Colon);
        assert_eq!(h.version, Some(102));
        let one_line = sniff("OFXHEADER:100 DATA:OFXSGML VERSION:103 CHARSET:1252 <OFX></OFX>");
        assert_eq!(one_line.version, Some(103));
        let glued = sniff("OFXHEADER:100 VERSION:300<OFX>");
        assert_eq!(glued.version, Some(300));
    }

    #[test]
    fn xml_header_forms() {
        let h = sniff(
            "<?xml version=\"1.0\" encoding=\"utf-16\"?>\n<?OFX OFXHEADER=\"200\" VERSION=\"211\" SECURITY=\"NONE\"?><OFX>",
        );
        assert_eq!(
            h,
            Header {
                form: HeaderForm::Xml,
                version: Some(211)
            }
        );
        assert_eq!(
            sniff("<?xml version=\"1.0\"?><OFX>").form,
            HeaderForm::XmlDeclOnly
        );
        let e = sniff("<START><OFXHEADER>100</OFXHEADER><VERSION>102</VERSION></START><OFX>");
        assert_eq!(e.form, HeaderForm::Elements);
        assert_eq!(e.version, Some(102));
        assert_eq!(sniff("<OFX>").form, HeaderForm::Absent);
        assert!(!sniff("%PDF-1.4").declares_ofx());
    }
}
