//! Turning the file's bytes into text, and tidying values.
//!
//! ISO 20022 messages are UTF-8, and most files are. A UTF-8 byte-order mark is dropped; a
//! UTF-16 byte-order mark selects UTF-16. A file whose XML declaration names a single-byte
//! encoding is read in it: Central European `Windows-1250`, `ISO-8859-2` (`latin2`) and `cp852`
//! as such, Western ones (`ISO-8859-1`, `ISO-8859-15`, `Windows-1252`, `latin1`, …) and any
//! other `ISO-8859-*`/`Windows-125*` as Windows-1252 (a superset of Latin-1's printable range).
//! In a file that declares none and is not valid UTF-8, the bytes that are not UTF-8 are read in
//! the code page they read best in (see `import::codepage`). Decoding never fails.

use std::borrow::Cow;

use crate::import::codepage::{self, CodePage};

/// Decodes the file: see the module documentation.
pub(super) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    match bytes {
        [0xFF, 0xFE, rest @ ..] => return Cow::Owned(codepage::utf16(rest, u16::from_le_bytes)),
        [0xFE, 0xFF, rest @ ..] => return Cow::Owned(codepage::utf16(rest, u16::from_be_bytes)),
        _ => {}
    }
    match declared_code_page(bytes) {
        Some(page) => Cow::Owned(page.decode(bytes)),
        None => codepage::decode_mixed(bytes),
    }
}

/// The single-byte code page the XML declaration at the start names, if any.
fn declared_code_page(bytes: &[u8]) -> Option<CodePage> {
    let decl = bytes.strip_prefix(b"<?xml")?;
    let end = decl
        .iter()
        .position(|&b| b == b'>')
        .unwrap_or(decl.len())
        .min(200);
    let decl = String::from_utf8_lossy(decl.get(..end).unwrap_or(decl)).to_ascii_lowercase();
    let at = decl.find("encoding")?;
    let value = decl[at + "encoding".len()..]
        .trim_start_matches(|c: char| c == '=' || c.is_whitespace())
        .trim_start_matches(['"', '\'']);
    let label = value
        .split(|c: char| c == '"' || c == '\'' || c == '?' || c.is_whitespace())
        .next()
        .unwrap_or_default();
    CodePage::from_label(label).or_else(|| {
        ["iso-8859", "iso8859", "latin", "windows-125", "cp125", "l1"]
            .iter()
            .any(|name| label.starts_with(name))
            .then_some(CodePage::Windows1252)
    })
}

/// `value` trimmed, with every run of whitespace made one space.
pub(super) fn tidy(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for word in value.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Counts lines up to byte offsets, reading the text once when offsets only grow.
pub(super) struct Lines<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Lines {
            text: text.as_bytes(),
            pos: 0,
            line: 1,
        }
    }

    /// The 1-based line of byte offset `pos` (a line ends at `\n`).
    pub(super) fn at(&mut self, pos: usize) -> usize {
        let pos = pos.min(self.text.len());
        if pos < self.pos {
            self.pos = 0;
            self.line = 1;
        }
        let newlines = self
            .text
            .get(self.pos..pos)
            .map_or(0, |s| s.iter().filter(|&&b| b == b'\n').count());
        self.line += newlines;
        self.pos = pos;
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_borrowed_and_bom_dropped() {
        assert!(matches!(decode("Café".as_bytes()), Cow::Borrowed("Café")));
        assert_eq!(decode(b"\xEF\xBB\xBF<a/>"), "<a/>");
    }

    #[test]
    fn declared_latin1_is_read_as_cp1252() {
        let file = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><Nm>M\xFCller \x80</Nm>";
        assert_eq!(
            decode(file),
            "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><Nm>Müller €</Nm>"
        );
    }

    #[test]
    fn declared_central_european_code_pages_are_read_as_declared() {
        let file = b"<?xml version=\"1.0\" encoding=\"windows-1250\"?><a>\xA3\xF3d\x9F</a>";
        assert_eq!(
            decode(file),
            "<?xml version=\"1.0\" encoding=\"windows-1250\"?><a>Łódź</a>"
        );
        let file = b"<?xml version='1.0' encoding='ISO-8859-2'?><a>\xA3\xF3d\xBC</a>";
        assert!(decode(file).ends_with("<a>Łódź</a>"));
        // An undeclared Windows-1250 file is recognised from its bytes.
        assert_eq!(decode(b"<a>Sp\xF3\xB3ka</a>"), "<a>Spółka</a>");
    }

    #[test]
    fn invalid_utf8_falls_back_per_byte() {
        assert_eq!(decode(b"\xC3\xA9t\xE9"), "été");
    }

    #[test]
    fn utf16_with_bom() {
        assert_eq!(decode(b"\xFF\xFE<\0a\0"), "<a");
        assert_eq!(decode(b"\xFE\xFF\0<\0a"), "<a");
    }

    #[test]
    fn tidy_collapses_whitespace() {
        assert_eq!(tidy("  a \n\t b  "), "a b");
        assert_eq!(tidy(" \n "), "");
    }

    #[test]
    fn lines_count_forward_and_back() {
        let mut lines = Lines::new("a\nb\nc");
        assert_eq!(lines.at(0), 1);
        assert_eq!(lines.at(2), 2);
        assert_eq!(lines.at(5), 3);
        assert_eq!(lines.at(1), 1);
        assert_eq!(lines.at(99), 3);
    }
}
