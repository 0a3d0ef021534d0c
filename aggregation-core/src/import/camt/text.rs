//! Turning the file's bytes into text, and tidying values.
//!
//! ISO 20022 messages are UTF-8, and most files are. A UTF-8 byte-order mark is dropped; a
//! UTF-16 byte-order mark selects UTF-16. A file whose XML declaration names a single-byte
//! Western encoding (`ISO-8859-1`, `ISO-8859-15`, `Windows-1252`, `latin1`, …) is read as
//! Windows-1252 (a superset of Latin-1's printable range), and so is every byte of a file that
//! is not valid UTF-8. Decoding never fails.

use std::borrow::Cow;

/// Windows-1252 for 0x80..=0x9F; the five unassigned bytes map to the C1 controls of the same
/// value, as the WHATWG encoding standard does.
const CP1252_HIGH: [char; 32] = [
    '\u{20AC}', '\u{0081}', '\u{201A}', '\u{0192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{02C6}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{0152}', '\u{008D}', '\u{017D}', '\u{008F}',
    '\u{0090}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{02DC}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{0153}', '\u{009D}', '\u{017E}', '\u{0178}',
];

fn cp1252_char(byte: u8) -> char {
    match byte {
        0x80..=0x9F => CP1252_HIGH[usize::from(byte - 0x80)],
        _ => char::from(byte),
    }
}

/// Decodes the file: see the module documentation.
pub(super) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return decode_8bit(rest, false);
    }
    match bytes {
        [0xFF, 0xFE, rest @ ..] => return Cow::Owned(decode_utf16(rest, u16::from_le_bytes)),
        [0xFE, 0xFF, rest @ ..] => return Cow::Owned(decode_utf16(rest, u16::from_be_bytes)),
        _ => {}
    }
    decode_8bit(bytes, declares_single_byte(bytes))
}

/// Whether the XML declaration at the start names a single-byte Western encoding.
fn declares_single_byte(bytes: &[u8]) -> bool {
    let Some(decl) = bytes.strip_prefix(b"<?xml") else {
        return false;
    };
    let end = decl
        .iter()
        .position(|&b| b == b'>')
        .unwrap_or(decl.len())
        .min(200);
    let decl = String::from_utf8_lossy(decl.get(..end).unwrap_or(decl)).to_ascii_lowercase();
    let Some(at) = decl.find("encoding") else {
        return false;
    };
    let value = decl[at + "encoding".len()..]
        .trim_start_matches(|c: char| c == '=' || c.is_whitespace())
        .trim_start_matches(['"', '\'']);
    ["iso-8859", "iso8859", "latin", "windows-125", "cp125", "l1"]
        .iter()
        .any(|name| value.starts_with(name))
}

fn decode_8bit(bytes: &[u8], single_byte: bool) -> Cow<'_, str> {
    if single_byte {
        return Cow::Owned(bytes.iter().map(|&b| cp1252_char(b)).collect());
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + bytes.len() / 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        out.extend(chunk.invalid().iter().map(|&b| cp1252_char(b)));
    }
    Cow::Owned(out)
}

fn decode_utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> String {
    let units = bytes.chunks_exact(2).map(|pair| unit([pair[0], pair[1]]));
    char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
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
