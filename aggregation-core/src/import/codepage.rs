//! The single-byte code pages statement files come in when they are not UTF-8, and how one is
//! chosen for a file that names none.
//!
//! Banks write their exports in the Windows "ANSI" code page of their country: Windows-1252
//! in Western Europe and the Americas, Windows-1250 in Poland, Czechia, Slovakia and Hungary;
//! ISO-8859-2 and the DOS code page 852 still come out of older Central European banking
//! software (Polish MT940 and Elixir exports among them). Nothing in an MT940 or QIF file says
//! which, so [`guess`] decides from the bytes above ASCII: each candidate reads them as
//! characters, and the one that reads most like the letters of the languages these banks
//! write (Polish `ą ł ż`, Czech `ě ř ů`, German `ä ß`, French `é è`…) rather than symbols,
//! box drawing or control characters wins. German umlauts and French accents sit at the same
//! bytes in Windows-1252 and Windows-1250; a tie goes to Windows-1252, so Western files read
//! as they did before.

use std::borrow::Cow;
use std::ops::Range;

/// A single-byte code page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CodePage {
    /// Windows-1252 (a superset of ISO-8859-1's printable range).
    Windows1252,
    /// Windows-1250 (Central European).
    Windows1250,
    /// ISO-8859-2 (Latin-2).
    Iso8859_2,
    /// Code page 852 (DOS Latin-2).
    Cp852,
}

impl CodePage {
    /// Every code page, in the order a tie in [`guess`] is broken.
    const ALL: [Self; 4] = [
        Self::Windows1252,
        Self::Windows1250,
        Self::Iso8859_2,
        Self::Cp852,
    ];

    /// The code page a charset label names (`windows-1250`, `cp852`, `latin2`, `ISO-8859-1`…),
    /// if it is one of these. Latin-1 and Latin-9 are read as Windows-1252, whose printable
    /// range holds theirs.
    pub(crate) fn from_label(label: &str) -> Option<Self> {
        let label = label.trim().to_ascii_lowercase().replace('_', "-");
        match label.as_str() {
            "windows-1252" | "cp1252" | "cp-1252" | "win1252" | "x-cp1252" | "iso-8859-1"
            | "iso8859-1" | "latin1" | "latin-1" | "l1" | "ansi" | "iso-8859-15" | "iso8859-15"
            | "latin9" | "latin-9" | "us-ascii" | "ascii" => Some(Self::Windows1252),
            "windows-1250" | "cp1250" | "cp-1250" | "win1250" | "x-cp1250" => {
                Some(Self::Windows1250)
            }
            "iso-8859-2" | "iso8859-2" | "latin2" | "latin-2" | "l2" => Some(Self::Iso8859_2),
            "cp852" | "ibm852" | "cp-852" | "852" | "dos-852" | "pc852" => Some(Self::Cp852),
            _ => None,
        }
    }

    /// The character `byte` stands for in this code page. Bytes a code page leaves unassigned
    /// map to the control character of the same value, as the WHATWG encoding standard does.
    pub(crate) fn char_of(self, byte: u8) -> char {
        let Some(high) = byte.checked_sub(0x80) else {
            return char::from(byte);
        };
        let high = usize::from(high);
        match self {
            Self::Windows1252 => WINDOWS_1252_C1
                .get(high)
                .copied()
                .unwrap_or(char::from(byte)),
            Self::Windows1250 => WINDOWS_1250[high],
            Self::Iso8859_2 => match high {
                0x00..=0x1F => char::from(byte),
                0x20..=0x3F => ISO_8859_2_A0[high - 0x20],
                _ => WINDOWS_1250[high],
            },
            Self::Cp852 => CP852[high],
        }
    }

    /// Every byte of `bytes` in this code page.
    pub(crate) fn decode(self, bytes: &[u8]) -> String {
        bytes.iter().map(|&b| self.char_of(b)).collect()
    }
}

/// How many times each byte above ASCII occurs, inside a word (next to a letter or another
/// byte above ASCII) and alone (between spaces, digits or punctuation).
#[derive(Debug, Clone)]
struct HighBytes {
    in_word: [u64; 128],
    alone: [u64; 128],
}

impl Default for HighBytes {
    fn default() -> Self {
        Self {
            in_word: [0; 128],
            alone: [0; 128],
        }
    }
}

impl HighBytes {
    /// Counts the bytes above ASCII in `bytes[span]`, their neighbours looked up in all of
    /// `bytes`.
    fn add(&mut self, bytes: &[u8], span: Range<usize>) {
        let wordy = |at: Option<usize>| {
            at.and_then(|at| bytes.get(at))
                .is_some_and(|&b| b.is_ascii_alphabetic() || b >= 0x80)
        };
        for at in span {
            let Some(high) = bytes.get(at).and_then(|b| b.checked_sub(0x80)) else {
                continue;
            };
            let counts = if wordy(at.checked_sub(1)) || wordy(at.checked_add(1)) {
                &mut self.in_word
            } else {
                &mut self.alone
            };
            counts[usize::from(high)] += 1;
        }
    }

    /// The code page these bytes read best in (see the module documentation).
    fn best(&self) -> CodePage {
        let mut best = (CodePage::Windows1252, i64::MIN);
        for page in CodePage::ALL {
            let score = (0x80..=0xFFu8)
                .zip(self.in_word.iter().zip(&self.alone))
                .map(|(byte, (&in_word, &alone))| {
                    let c = page.char_of(byte);
                    weighted(in_word, plausibility(c))
                        .saturating_add(weighted(alone, plausibility_alone(c)))
                })
                .fold(0i64, i64::saturating_add);
            if score > best.1 {
                best = (page, score);
            }
        }
        best.0
    }
}

fn weighted(count: u64, weight: i64) -> i64 {
    i64::try_from(count)
        .unwrap_or(i64::MAX)
        .saturating_mul(weight)
}

/// The code page `bytes` read best in (see the module documentation); Windows-1252 when no
/// byte is above ASCII.
pub(crate) fn guess(bytes: &[u8]) -> CodePage {
    let mut counts = HighBytes::default();
    counts.add(bytes, 0..bytes.len());
    counts.best()
}

/// The file as text when it is UTF-8 as a whole (a byte-order mark dropped), else every byte
/// in the code page [`guess`] picks for it. Never fails.
pub(crate) fn decode_whole(bytes: &[u8]) -> Cow<'_, str> {
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => Cow::Owned(guess(bytes).decode(bytes)),
    }
}

/// The file as text, UTF-8 where it is valid UTF-8 and every other byte in the code page
/// [`guess`] picks from those other bytes alone (so a UTF-8 file with a few stray bytes keeps
/// its UTF-8 text). A byte-order mark is dropped. Never fails.
pub(crate) fn decode_mixed(bytes: &[u8]) -> Cow<'_, str> {
    let bytes = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut counts = HighBytes::default();
    let mut at = 0;
    for chunk in bytes.utf8_chunks() {
        let start = at + chunk.valid().len();
        at = start + chunk.invalid().len();
        counts.add(bytes, start..at);
    }
    Cow::Owned(utf8_or(bytes, counts.best()))
}

/// UTF-16 text (without its byte-order mark), its code units read by `unit` (little or big
/// endian); a lone surrogate becomes U+FFFD.
pub(crate) fn utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> String {
    let units = bytes.chunks_exact(2).map(|pair| unit([pair[0], pair[1]]));
    char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// Valid UTF-8 as UTF-8, every other byte as `page`.
pub(crate) fn utf8_or(bytes: &[u8], page: CodePage) -> String {
    let mut out = String::with_capacity(bytes.len() + bytes.len() / 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        out.extend(chunk.invalid().iter().map(|&b| page.char_of(b)));
    }
    out
}

/// Letters common in the languages of the banks that write single-byte files.
const COMMON_LETTERS: &str = concat!(
    "ąćęłńśźżĄĆĘŁŃŚŹŻ",                       // Polish
    "čďěňřšťůžýČĎĚŇŘŠŤŮŽÝ",                   // Czech and Slovak
    "őűŐŰ",                                   // Hungarian
    "äöüßÄÖÜ",                                // German
    "àâæçèéêëîñôûœãáíóúøÀÂÆÇÈÉÊËÎÑÔÛŒÃÁÍÓÚØ", // French, Spanish, Portuguese, Nordic
);

/// Letters that occur, but rarely, in statement text (and so weigh less when a byte reads
/// as one of them in one code page and as a common letter in another).
const RARE_LETTERS: &str = "ìòùïåõÿþðĺŕľăţşÌÒÙÏÅÕŸÞÐĹŔĽĂŢŞ";

/// Punctuation and signs that appear in statements in every code page that has them.
const COMMON_SIGNS: &str = "\u{a0}\u{ad}€‚„…‘’“”•–—™§©«®°±·»×÷µ";

/// How much a character read from a byte above ASCII speaks for the code page that gave it.
fn plausibility(c: char) -> i64 {
    if COMMON_LETTERS.contains(c) {
        2
    } else if RARE_LETTERS.contains(c) {
        1
    } else if COMMON_SIGNS.contains(c) || c.is_alphabetic() {
        0
    } else {
        // Control characters, box drawing, `¹ ³ ¿ £ ¥ ¤ ˘ ˛`…: not what a bank writes.
        -4
    }
}

/// How much a character read from a byte above ASCII that stands alone (between spaces,
/// digits or punctuation) speaks for the code page that gave it: a sign (`€ 5`, `§ 3`) is
/// what such a byte usually is, a letter by itself is not.
fn plausibility_alone(c: char) -> i64 {
    if COMMON_SIGNS.contains(c) {
        0
    } else if c.is_alphabetic() {
        -2
    } else {
        -4
    }
}

/// 0x80..=0x9F of Windows-1252 (0xA0..=0xFF are ISO-8859-1's).
const WINDOWS_1252_C1: [char; 32] = [
    '\u{20AC}', '\u{0081}', '\u{201A}', '\u{0192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{02C6}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{0152}', '\u{008D}', '\u{017D}', '\u{008F}',
    '\u{0090}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{02DC}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{0153}', '\u{009D}', '\u{017E}', '\u{0178}',
];

/// 0x80..=0xFF of Windows-1250 (Central European, the Windows "ANSI" code page of Poland, Czechia, Slovakia,
/// Hungary…); its five unassigned bytes map to the C1 controls of the same value.
const WINDOWS_1250: [char; 128] = [
    '\u{20AC}', '\u{0081}', '\u{201A}', '\u{0083}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{0088}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{015A}', '\u{0164}', '\u{017D}', '\u{0179}',
    '\u{0090}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{0098}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{015B}', '\u{0165}', '\u{017E}', '\u{017A}',
    '\u{00A0}', '\u{02C7}', '\u{02D8}', '\u{0141}', '\u{00A4}', '\u{0104}', '\u{00A6}', '\u{00A7}',
    '\u{00A8}', '\u{00A9}', '\u{015E}', '\u{00AB}', '\u{00AC}', '\u{00AD}', '\u{00AE}', '\u{017B}',
    '\u{00B0}', '\u{00B1}', '\u{02DB}', '\u{0142}', '\u{00B4}', '\u{00B5}', '\u{00B6}', '\u{00B7}',
    '\u{00B8}', '\u{0105}', '\u{015F}', '\u{00BB}', '\u{013D}', '\u{02DD}', '\u{013E}', '\u{017C}',
    '\u{0154}', '\u{00C1}', '\u{00C2}', '\u{0102}', '\u{00C4}', '\u{0139}', '\u{0106}', '\u{00C7}',
    '\u{010C}', '\u{00C9}', '\u{0118}', '\u{00CB}', '\u{011A}', '\u{00CD}', '\u{00CE}', '\u{010E}',
    '\u{0110}', '\u{0143}', '\u{0147}', '\u{00D3}', '\u{00D4}', '\u{0150}', '\u{00D6}', '\u{00D7}',
    '\u{0158}', '\u{016E}', '\u{00DA}', '\u{0170}', '\u{00DC}', '\u{00DD}', '\u{0162}', '\u{00DF}',
    '\u{0155}', '\u{00E1}', '\u{00E2}', '\u{0103}', '\u{00E4}', '\u{013A}', '\u{0107}', '\u{00E7}',
    '\u{010D}', '\u{00E9}', '\u{0119}', '\u{00EB}', '\u{011B}', '\u{00ED}', '\u{00EE}', '\u{010F}',
    '\u{0111}', '\u{0144}', '\u{0148}', '\u{00F3}', '\u{00F4}', '\u{0151}', '\u{00F6}', '\u{00F7}',
    '\u{0159}', '\u{016F}', '\u{00FA}', '\u{0171}', '\u{00FC}', '\u{00FD}', '\u{0163}', '\u{02D9}',
];

/// 0xA0..=0xBF of ISO-8859-2 (Latin-2). Below, 0x80..=0x9F are the C1 controls; above,
/// 0xC0..=0xFF are the same letters as Windows-1250's.
const ISO_8859_2_A0: [char; 32] = [
    '\u{00A0}', '\u{0104}', '\u{02D8}', '\u{0141}', '\u{00A4}', '\u{013D}', '\u{015A}', '\u{00A7}',
    '\u{00A8}', '\u{0160}', '\u{015E}', '\u{0164}', '\u{0179}', '\u{00AD}', '\u{017D}', '\u{017B}',
    '\u{00B0}', '\u{0105}', '\u{02DB}', '\u{0142}', '\u{00B4}', '\u{013E}', '\u{015B}', '\u{02C7}',
    '\u{00B8}', '\u{0161}', '\u{015F}', '\u{0165}', '\u{017A}', '\u{02DD}', '\u{017E}', '\u{017C}',
];

/// 0x80..=0xFF of Code page 852 (DOS Latin-2), still written by older Polish and Czech banking software.
const CP852: [char; 128] = [
    '\u{00C7}', '\u{00FC}', '\u{00E9}', '\u{00E2}', '\u{00E4}', '\u{016F}', '\u{0107}', '\u{00E7}',
    '\u{0142}', '\u{00EB}', '\u{0150}', '\u{0151}', '\u{00EE}', '\u{0179}', '\u{00C4}', '\u{0106}',
    '\u{00C9}', '\u{0139}', '\u{013A}', '\u{00F4}', '\u{00F6}', '\u{013D}', '\u{013E}', '\u{015A}',
    '\u{015B}', '\u{00D6}', '\u{00DC}', '\u{0164}', '\u{0165}', '\u{0141}', '\u{00D7}', '\u{010D}',
    '\u{00E1}', '\u{00ED}', '\u{00F3}', '\u{00FA}', '\u{0104}', '\u{0105}', '\u{017D}', '\u{017E}',
    '\u{0118}', '\u{0119}', '\u{00AC}', '\u{017A}', '\u{010C}', '\u{015F}', '\u{00AB}', '\u{00BB}',
    '\u{2591}', '\u{2592}', '\u{2593}', '\u{2502}', '\u{2524}', '\u{00C1}', '\u{00C2}', '\u{011A}',
    '\u{015E}', '\u{2563}', '\u{2551}', '\u{2557}', '\u{255D}', '\u{017B}', '\u{017C}', '\u{2510}',
    '\u{2514}', '\u{2534}', '\u{252C}', '\u{251C}', '\u{2500}', '\u{253C}', '\u{0102}', '\u{0103}',
    '\u{255A}', '\u{2554}', '\u{2569}', '\u{2566}', '\u{2560}', '\u{2550}', '\u{256C}', '\u{00A4}',
    '\u{0111}', '\u{0110}', '\u{010E}', '\u{00CB}', '\u{010F}', '\u{0147}', '\u{00CD}', '\u{00CE}',
    '\u{011B}', '\u{2518}', '\u{250C}', '\u{2588}', '\u{2584}', '\u{0162}', '\u{016E}', '\u{2580}',
    '\u{00D3}', '\u{00DF}', '\u{00D4}', '\u{0143}', '\u{0144}', '\u{0148}', '\u{0160}', '\u{0161}',
    '\u{0154}', '\u{00DA}', '\u{0155}', '\u{0170}', '\u{00FD}', '\u{00DD}', '\u{0163}', '\u{00B4}',
    '\u{00AD}', '\u{02DD}', '\u{02DB}', '\u{02C7}', '\u{02D8}', '\u{00A7}', '\u{00F7}', '\u{00B8}',
    '\u{00B0}', '\u{00A8}', '\u{02D9}', '\u{0171}', '\u{0158}', '\u{0159}', '\u{25A0}', '\u{00A0}',
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The pangram and two names in each code page, encoded by hand from the code charts.
    const PANGRAM_1250: &[u8] = b"Za\xBF\xF3\xB3\xE6 g\xEA\x9Cl\xB9 ja\x9F\xF1";
    const PANGRAM_8859_2: &[u8] = b"Za\xBF\xF3\xB3\xE6 g\xEA\xB6l\xB1 ja\xBC\xF1";
    const PANGRAM_852: &[u8] = b"Za\xBE\xA2\x88\x86 g\xA9\x98l\xA5 ja\xAB\xE4";
    const PANGRAM: &str = "Zażółć gęślą jaźń";

    #[test]
    fn polish_in_each_code_page_is_recognised_and_read() {
        for (bytes, page) in [
            (PANGRAM_1250, CodePage::Windows1250),
            (PANGRAM_8859_2, CodePage::Iso8859_2),
            (PANGRAM_852, CodePage::Cp852),
        ] {
            assert_eq!(guess(bytes), page, "{bytes:?}");
            assert_eq!(decode_whole(bytes), PANGRAM);
        }
        let names_1250 = b"\xA3\xF3d\x9F Sp\xF3\xB3ka";
        assert_eq!(decode_whole(names_1250), "Łódź Spółka");
        let names_852 = b"\x9D\xA2d\xAB Sp\xA2\x88ka";
        assert_eq!(decode_whole(names_852), "Łódź Spółka");
    }

    #[test]
    fn czech_in_windows_1250() {
        let text =
            b"P\xF8\xEDli\x9A \x9Elu\x9Dou\xE8k\xFD k\xF9\xF2 \xFAp\xECl \xEF\xE1belsk\xE9 \xF3dy";
        assert_eq!(guess(text), CodePage::Windows1250);
        assert_eq!(decode_whole(text), "Příliš žluťoučký kůň úpěl ďábelské ódy");
    }

    #[test]
    fn western_text_stays_windows_1252() {
        // German umlauts and French accents read the same in Windows-1250: a tie is 1252.
        for (bytes, text) in [
            (
                &b"\xDCberweisung Geb\xFChr Stra\xDFe M\xFCller"[..],
                "Überweisung Gebühr Straße Müller",
            ),
            (b"Pr\xE9l\xE8vement \x80 5", "Prélèvement € 5"),
            (b"S\xF8ren K\xF8bmand N\xF8rre", "Søren Købmand Nørre"),
            (b"Se\xF1or Nu\xF1ez, Citt\xE0", "Señor Nuñez, Città"),
        ] {
            assert_eq!(guess(bytes), CodePage::Windows1252, "{text}");
            assert_eq!(decode_whole(bytes), text);
        }
        assert_eq!(guess(b"plain ASCII"), CodePage::Windows1252);
    }

    #[test]
    fn utf8_wins_and_stray_bytes_are_read_in_their_own_code_page() {
        assert!(matches!(
            decode_whole("Łódź".as_bytes()),
            Cow::Borrowed("Łódź")
        ));
        assert_eq!(decode_whole(b"\xEF\xBB\xBFabc"), "abc");
        // Valid UTF-8 around bytes that are not: the UTF-8 stays, the rest is Windows-1250.
        let mixed = ["Łódź ".as_bytes(), &b"Sp\xF3\xB3ka"[..]].concat();
        assert_eq!(decode_mixed(&mixed), "Łódź Spółka");
        assert_eq!(decode_mixed(b"Caf\xE9 \x80"), "Café €");
    }

    #[test]
    fn labels_and_unassigned_bytes() {
        assert_eq!(
            CodePage::from_label(" CP1250 "),
            Some(CodePage::Windows1250)
        );
        assert_eq!(CodePage::from_label("IBM852"), Some(CodePage::Cp852));
        assert_eq!(
            CodePage::from_label("ISO_8859-2"),
            Some(CodePage::Iso8859_2)
        );
        assert_eq!(CodePage::from_label("latin1"), Some(CodePage::Windows1252));
        assert_eq!(CodePage::from_label("koi8-r"), None);
        assert_eq!(CodePage::Windows1252.char_of(0x81), '\u{81}');
        assert_eq!(CodePage::Windows1250.char_of(0x98), '\u{98}');
        assert_eq!(CodePage::Iso8859_2.char_of(0x9F), '\u{9F}');
        assert_eq!(CodePage::Cp852.char_of(b'A'), 'A');
        // Every byte of every code page is a character, and a different one per byte.
        for page in CodePage::ALL {
            let chars: std::collections::HashSet<char> =
                (0..=255u8).map(|b| page.char_of(b)).collect();
            assert_eq!(chars.len(), 256, "{page:?}");
        }
    }
}
