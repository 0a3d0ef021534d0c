//! Turning the file's bytes into text.
//!
//! `CHARSET:1252` is the usual header and it is usually wrong one way or the other (the body is
//! UTF-8, or real CP1252/Latin-1), so the header's charset is ignored. The bytes are read as
//! UTF-8 where they are valid UTF-8, and every byte that is not part of a valid UTF-8 sequence
//! is read as Windows-1252 (a superset of the printable Latin-1 range). A pure UTF-8 file and a
//! pure CP1252 file both come out clean, and so does a UTF-8 file with a stray CP1252 byte.
//! A byte-order mark selects UTF-8 or UTF-16; UTF-16 without a mark is recognised by its zero
//! bytes. Decoding never fails.

use std::borrow::Cow;

use crate::import::codepage::{self, CodePage};

/// Decodes the whole file: see the module documentation.
pub(crate) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return decode_8bit(rest);
    }
    match bytes {
        [0xFF, 0xFE, rest @ ..] => return Cow::Owned(codepage::utf16(rest, u16::from_le_bytes)),
        [0xFE, 0xFF, rest @ ..] => return Cow::Owned(codepage::utf16(rest, u16::from_be_bytes)),
        [a, 0, b, 0, ..] if *a != 0 && *b != 0 => {
            return Cow::Owned(codepage::utf16(bytes, u16::from_le_bytes));
        }
        [0, a, 0, b, ..] if *a != 0 && *b != 0 => {
            return Cow::Owned(codepage::utf16(bytes, u16::from_be_bytes));
        }
        _ => {}
    }
    decode_8bit(bytes)
}

fn decode_8bit(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(codepage::utf8_or(bytes, CodePage::Windows1252))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_is_borrowed() {
        assert!(matches!(decode("Café".as_bytes()), Cow::Borrowed("Café")));
    }

    #[test]
    fn cp1252_bytes_fall_back() {
        assert_eq!(decode(b"Caf\xE9 \x80 \x93x\x94 \x81"), "Café € “x” \u{81}");
    }

    #[test]
    fn mixed_utf8_and_cp1252() {
        assert_eq!(decode(b"\xC3\xA9t\xE9"), "été");
    }

    #[test]
    fn boms_and_utf16() {
        assert_eq!(decode(b"\xEF\xBB\xBFabc"), "abc");
        assert_eq!(decode(b"\xFF\xFEa\0b\0"), "ab");
        assert_eq!(decode(b"\xFE\xFF\0a\0b"), "ab");
        assert_eq!(decode(b"<\0O\0"), "<O");
        assert_eq!(decode(b"\xFF\xFEa"), "");
    }
}
