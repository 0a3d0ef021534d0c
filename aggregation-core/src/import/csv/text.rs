//! Bytes to records: the encoding of the file and a streaming, quote-aware record reader.
//!
//! Nothing here copies the file: characters are decoded on the fly from the input bytes, and
//! one record (its fields) is held at a time.

use crate::import::codepage::{self, CodePage};

/// The text encodings a CSV file can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    /// UTF-8 (a BOM, if any, is skipped).
    Utf8,
    /// UTF-16, little endian.
    Utf16Le,
    /// UTF-16, big endian.
    Utf16Be,
    /// A single-byte code page: Windows-1252 (a superset of ISO-8859-1's printable range),
    /// Windows-1250, ISO-8859-2 or DOS 852.
    SingleByte(CodePage),
}

impl Encoding {
    /// The encoding a mapping's `encoding` value names, if it is one we read.
    pub(super) fn from_label(label: &str) -> Option<Self> {
        let label = label.trim().to_ascii_lowercase().replace('_', "-");
        match label.as_str() {
            "utf-8" | "utf8" | "utf-8-sig" => Some(Self::Utf8),
            "utf-16le" | "utf-16-le" | "utf16le" | "utf-16" | "ucs-2" | "unicode" => {
                Some(Self::Utf16Le)
            }
            "utf-16be" | "utf-16-be" | "utf16be" => Some(Self::Utf16Be),
            _ => CodePage::from_label(&label).map(Self::SingleByte),
        }
    }
}

/// Detects the encoding of `bytes`: a BOM first, then the NUL pattern of UTF-16 without BOM,
/// then UTF-8 when the whole file is valid UTF-8, else the single-byte code page the file's
/// bytes above ASCII read best in (see `import::codepage`). Returns the encoding and the
/// number of BOM bytes to skip.
pub(super) fn detect_encoding(bytes: &[u8]) -> (Encoding, usize) {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return (Encoding::Utf8, 3);
    }
    if bytes.starts_with(&[0xFF, 0xFE]) {
        return (Encoding::Utf16Le, 2);
    }
    if bytes.starts_with(&[0xFE, 0xFF]) {
        return (Encoding::Utf16Be, 2);
    }
    let head = &bytes[..bytes.len().min(1024)];
    if head.len() >= 4 {
        let pairs = head.len() / 2;
        let (mut even_nul, mut odd_nul) = (0usize, 0usize);
        for pair in head.chunks_exact(2) {
            if pair[0] == 0 {
                even_nul += 1;
            }
            if pair[1] == 0 {
                odd_nul += 1;
            }
        }
        // ASCII text in UTF-16 has a NUL in (nearly) every pair, always on the same side.
        if odd_nul * 10 >= pairs * 7 && even_nul * 10 < pairs {
            return (Encoding::Utf16Le, 0);
        }
        if even_nul * 10 >= pairs * 7 && odd_nul * 10 < pairs {
            return (Encoding::Utf16Be, 0);
        }
    }
    if std::str::from_utf8(bytes).is_ok() {
        (Encoding::Utf8, 0)
    } else {
        (Encoding::SingleByte(codepage::guess(bytes)), 0)
    }
}

/// The skip for a BOM of `encoding` at the start of `bytes` (for an encoding named by a
/// mapping).
pub(super) fn bom_len(bytes: &[u8], encoding: Encoding) -> usize {
    match encoding {
        Encoding::Utf8 if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) => 3,
        Encoding::Utf16Le if bytes.starts_with(&[0xFF, 0xFE]) => 2,
        Encoding::Utf16Be if bytes.starts_with(&[0xFE, 0xFF]) => 2,
        _ => 0,
    }
}

/// Decodes characters from bytes one at a time, without copying the input.
#[derive(Debug, Clone)]
pub(super) struct Chars<'a> {
    bytes: &'a [u8],
    pos: usize,
    encoding: Encoding,
    /// The rest of the input from `start` on, when it is valid UTF-8 (the fast path).
    text: Option<&'a str>,
}

impl<'a> Chars<'a> {
    /// Characters of `bytes` from `start` on, in `encoding`.
    pub(super) fn new(bytes: &'a [u8], start: usize, encoding: Encoding) -> Self {
        let pos = start.min(bytes.len());
        let text = match encoding {
            Encoding::Utf8 => bytes.get(pos..).and_then(|b| std::str::from_utf8(b).ok()),
            _ => None,
        };
        Self {
            bytes,
            pos,
            encoding,
            text,
        }
    }

    /// The byte offset of the next character.
    pub(super) fn position(&self) -> usize {
        match self.text {
            Some(rest) => self.bytes.len() - rest.len(),
            None => self.pos,
        }
    }

    fn next_utf16(&mut self, big_endian: bool) -> Option<char> {
        let unit = |b: &[u8]| -> u16 {
            if big_endian {
                u16::from_be_bytes([b[0], b[1]])
            } else {
                u16::from_le_bytes([b[0], b[1]])
            }
        };
        let rest = self.bytes.get(self.pos..)?;
        if rest.is_empty() {
            return None;
        }
        if rest.len() < 2 {
            self.pos = self.bytes.len();
            return Some(char::REPLACEMENT_CHARACTER);
        }
        let first = unit(rest);
        self.pos += 2;
        if (0xD800..0xDC00).contains(&first) {
            if let Some(next) = rest.get(2..4) {
                let second = unit(next);
                if (0xDC00..0xE000).contains(&second) {
                    self.pos += 2;
                    let code = 0x10000
                        + ((u32::from(first) - 0xD800) << 10)
                        + (u32::from(second) - 0xDC00);
                    return Some(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                }
            }
            return Some(char::REPLACEMENT_CHARACTER);
        }
        Some(char::from_u32(u32::from(first)).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    fn next_utf8(&mut self) -> Option<char> {
        let rest = self.bytes.get(self.pos..)?;
        let first = *rest.first()?;
        let width = match first {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        let end = width.min(rest.len());
        match std::str::from_utf8(&rest[..end])
            .ok()
            .and_then(|s| s.chars().next())
        {
            Some(c) => {
                self.pos += end;
                Some(c)
            }
            None => {
                self.pos += 1;
                Some(char::REPLACEMENT_CHARACTER)
            }
        }
    }
}

impl Iterator for Chars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        if let Some(rest) = self.text {
            let mut chars = rest.chars();
            let c = chars.next()?;
            self.text = Some(chars.as_str());
            return Some(c);
        }
        match self.encoding {
            Encoding::Utf8 => self.next_utf8(),
            Encoding::Utf16Le => self.next_utf16(false),
            Encoding::Utf16Be => self.next_utf16(true),
            Encoding::SingleByte(page) => {
                let byte = *self.bytes.get(self.pos)?;
                self.pos += 1;
                Some(page.char_of(byte))
            }
        }
    }
}

/// One record of the file: its fields and the 1-based line it starts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Record {
    /// The line the record starts on.
    pub(super) line: usize,
    /// The fields, unquoted.
    pub(super) fields: Vec<String>,
}

impl Record {
    /// True when every field is empty or blank (a blank line, `;;;`, `""`).
    pub(super) fn is_blank(&self) -> bool {
        self.fields.iter().all(|f| f.trim().is_empty())
    }

    /// The field at `index`, or `""` when the record is shorter.
    pub(super) fn get(&self, index: usize) -> &str {
        self.fields.get(index).map_or("", String::as_str)
    }
}

/// Most fields a record may have: a line of 10 MiB of delimiters must not become millions of
/// strings.
pub(super) const MAX_FIELDS: usize = 1_000;

/// Why a record cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecordError {
    /// A quote opened on this line was never closed.
    UnclosedQuote(usize),
    /// The record starting on this line has more than [`MAX_FIELDS`] fields.
    TooManyFields(usize),
}

impl RecordError {
    /// The line and the reason, for a 400.
    pub(super) fn describe(self) -> (usize, String) {
        match self {
            Self::UnclosedQuote(line) => (line, "a quoted field is never closed".to_owned()),
            Self::TooManyFields(line) => (line, format!("more than {MAX_FIELDS} fields")),
        }
    }
}

/// Reads records one at a time: RFC 4180 quoting (doubled quotes, delimiters and line breaks
/// inside quotes), CR, LF or CRLF line ends. Lenient where exports are sloppy: a quote inside
/// an unquoted field is kept as text, and text after a closing quote is appended.
#[derive(Debug, Clone)]
pub(super) struct Records<'a> {
    chars: std::iter::Peekable<Chars<'a>>,
    delimiter: char,
    line: usize,
    done: bool,
    /// Characters kept per field and per record (the rest is read past), when sniffing.
    caps: Option<(usize, usize)>,
}

/// Characters of a field kept while sniffing: enough for any header name or cell.
pub(super) const SNIFF_FIELD_CHARS: usize = 1_024;
/// Characters of a record kept while sniffing: a 10 MiB line must not be held whole.
pub(super) const SNIFF_RECORD_CHARS: usize = 64 * 1_024;

impl<'a> Records<'a> {
    /// Records of `chars` split on `delimiter`; the first one is on line `line`.
    pub(super) fn new(chars: Chars<'a>, delimiter: char, line: usize) -> Self {
        Self {
            chars: chars.peekable(),
            delimiter,
            line,
            done: false,
            caps: None,
        }
    }

    /// The same records with each field cut at [`SNIFF_FIELD_CHARS`] and each record at
    /// [`SNIFF_RECORD_CHARS`]: for the look at the head of the file, never for the entries.
    pub(super) fn sniffing(mut self) -> Self {
        self.caps = Some((SNIFF_FIELD_CHARS, SNIFF_RECORD_CHARS));
        self
    }

    /// Consumes a line end whose first character `c` was read.
    fn end_line(&mut self, c: char) {
        if c == '\r' && self.chars.peek() == Some(&'\n') {
            self.chars.next();
        }
        self.line += 1;
    }
}

impl Iterator for Records<'_> {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        self.chars.peek()?;
        let start = self.line;
        let mut fields = Vec::new();
        let mut field = String::new();
        // Whether the current field started with a quote and is still inside it.
        let mut in_quotes = false;
        let mut at_field_start = true;
        // Characters kept in this record so far (only counted when sniffing).
        let mut kept = 0usize;
        let caps = self.caps;
        let mut push = |field: &mut String, c: char| match caps {
            None => field.push(c),
            Some((field_cap, record_cap)) => {
                if kept < record_cap && field.len() < field_cap {
                    kept += 1;
                    field.push(c);
                }
            }
        };
        loop {
            let Some(c) = self.chars.next() else {
                if in_quotes {
                    self.done = true;
                    return Some(Err(RecordError::UnclosedQuote(start)));
                }
                fields.push(field);
                return Some(Ok(Record {
                    line: start,
                    fields,
                }));
            };
            if in_quotes {
                if c == '"' {
                    if self.chars.peek() == Some(&'"') {
                        self.chars.next();
                        push(&mut field, '"');
                    } else {
                        in_quotes = false;
                    }
                } else {
                    if c == '\n' || (c == '\r' && self.chars.peek() != Some(&'\n')) {
                        self.line += 1;
                    }
                    push(&mut field, c);
                }
                continue;
            }
            if c == self.delimiter {
                if fields.len() >= MAX_FIELDS {
                    self.done = true;
                    return Some(Err(RecordError::TooManyFields(start)));
                }
                fields.push(std::mem::take(&mut field));
                at_field_start = true;
                continue;
            }
            if c == '\n' || c == '\r' {
                self.end_line(c);
                fields.push(field);
                return Some(Ok(Record {
                    line: start,
                    fields,
                }));
            }
            if c == '"' && at_field_start {
                in_quotes = true;
                at_field_start = false;
                continue;
            }
            if at_field_start && c != ' ' {
                at_field_start = false;
            }
            push(&mut field, c);
        }
    }
}
