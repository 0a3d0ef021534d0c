//! Bytes to records: the encoding of the file, and a streaming record reader over `csv-core`.
//!
//! Nothing here copies the file: a UTF-8 file is split where it lies, and a file in another
//! encoding is decoded to UTF-8 by `encoding_rs` a few kilobytes at a time. One record (its
//! fields) is held at a time.
//!
//! `csv-core` splits the fields and unquotes them. Around it, the reader keeps what statement
//! exports need and `csv-core` does not do: a blank line is a (blank) record rather than
//! nothing, so that `skip_rows` and the line numbers count every line; a lone CR ends a line
//! in the line numbers too; blanks before an opening quote (`a, "b, c"`) do not unquote the
//! field; a quote never closed is an error; and records and fields are capped.

use encoding_rs::{Decoder, Encoding as WhatwgEncoding};

use crate::import::codepage::{self, CodePage, HighChars};

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
    /// Windows-1250, ISO-8859-2, DOS 852, or another one of the WHATWG Encoding Standard.
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

/// Detects the encoding of `bytes`: a BOM first, then the NUL pattern of UTF-16 without BOM
/// (`chardetng` does not detect UTF-16), then UTF-8 when the whole file is valid UTF-8, else
/// the single-byte code page `codepage::guess` picks. Returns the encoding and the number of
/// BOM bytes to skip.
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

/// Decoded UTF-8 kept ahead of the reader: enough to see blanks before a quote, a CR's LF,
/// and a whole character.
const LOOKAHEAD: usize = 64;
/// The size of the buffer a file that is not UTF-8 is decoded into.
const DECODE_BUFFER: usize = 8 * 1024;

/// How a file that is not UTF-8 is decoded.
enum Transcoder {
    /// By `encoding_rs` (UTF-16 and the code pages of the WHATWG standard).
    Whatwg(Decoder),
    /// DOS 852, byte by byte.
    Table(Box<HighChars>),
}

impl std::fmt::Debug for Transcoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Whatwg(decoder) => write!(f, "Whatwg({})", decoder.encoding().name()),
            Self::Table(_) => f.write_str("Table"),
        }
    }
}

/// The file from a start offset on, as UTF-8 bytes: borrowed when the file is UTF-8, decoded
/// into a small buffer as it is read otherwise.
#[derive(Debug)]
struct Utf8Stream<'a> {
    /// The input not yet decoded (for UTF-8: not yet consumed).
    input: &'a [u8],
    /// `None` for UTF-8.
    transcoder: Option<Transcoder>,
    buffer: Vec<u8>,
    /// The decoded bytes not yet consumed are `buffer[start..end]`.
    start: usize,
    end: usize,
}

impl<'a> Utf8Stream<'a> {
    fn new(bytes: &'a [u8], start: usize, encoding: Encoding) -> Self {
        let input = bytes.get(start..).unwrap_or_default();
        let whatwg = |encoding: &'static WhatwgEncoding| {
            Some(Transcoder::Whatwg(
                encoding.new_decoder_without_bom_handling(),
            ))
        };
        let transcoder = match encoding {
            Encoding::Utf8 => None,
            Encoding::Utf16Le => whatwg(encoding_rs::UTF_16LE),
            Encoding::Utf16Be => whatwg(encoding_rs::UTF_16BE),
            Encoding::SingleByte(page) => match page.whatwg() {
                Some(encoding) => whatwg(encoding),
                None => Some(Transcoder::Table(Box::new(page.high_chars()))),
            },
        };
        let buffer = if transcoder.is_some() {
            vec![0; DECODE_BUFFER]
        } else {
            Vec::new()
        };
        Self {
            input,
            transcoder,
            buffer,
            start: 0,
            end: 0,
        }
    }

    /// The bytes ready to read: at least [`LOOKAHEAD`] of them unless the file ends sooner.
    fn data(&mut self) -> &[u8] {
        if self.transcoder.is_none() {
            return self.input;
        }
        if self.end - self.start < LOOKAHEAD && !self.input.is_empty() {
            self.refill();
        }
        &self.buffer[self.start..self.end]
    }

    /// Marks the first `count` bytes of [`Self::data`] read.
    fn consume(&mut self, count: usize) {
        if self.transcoder.is_none() {
            self.input = self.input.get(count..).unwrap_or_default();
        } else {
            self.start = (self.start + count).min(self.end);
        }
    }

    /// Moves what is left to the front of the buffer and decodes more input behind it.
    fn refill(&mut self) {
        self.buffer.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        let Some(transcoder) = self.transcoder.as_mut() else {
            return;
        };
        match transcoder {
            Transcoder::Whatwg(decoder) => {
                let (_, read, written, _) =
                    decoder.decode_to_utf8(self.input, &mut self.buffer[self.end..], true);
                self.input = self.input.get(read..).unwrap_or_default();
                self.end += written;
            }
            Transcoder::Table(high) => {
                let mut read = 0;
                for &byte in self.input {
                    if self.buffer.len() - self.end < 4 {
                        break;
                    }
                    let c = high.char_of(byte);
                    self.end += c.encode_utf8(&mut self.buffer[self.end..]).len();
                    read += 1;
                }
                self.input = self.input.get(read..).unwrap_or_default();
            }
        }
    }
}

/// Decodes characters from bytes one at a time, without copying the input.
#[derive(Debug)]
pub(super) struct Chars<'a> {
    stream: Utf8Stream<'a>,
}

impl<'a> Chars<'a> {
    /// Characters of `bytes` from `start` on, in `encoding`.
    pub(super) fn new(bytes: &'a [u8], start: usize, encoding: Encoding) -> Self {
        Self {
            stream: Utf8Stream::new(bytes, start, encoding),
        }
    }
}

impl Iterator for Chars<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        let data = self.stream.data();
        let head = data.get(..data.len().min(4)).unwrap_or_default();
        let chunk = head.utf8_chunks().next()?;
        let (c, width) = match chunk.valid().chars().next() {
            Some(c) => (c, c.len_utf8()),
            None => (char::REPLACEMENT_CHARACTER, chunk.invalid().len().max(1)),
        };
        self.stream.consume(width);
        Some(c)
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

/// Characters of a field kept while sniffing: enough for any header name or cell.
pub(super) const SNIFF_FIELD_CHARS: usize = 1_024;
/// Characters of a record kept while sniffing: a 10 MiB line must not be held whole.
pub(super) const SNIFF_RECORD_CHARS: usize = 64 * 1_024;

/// Where the reader is in a field that opened with a quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    /// The field did not open with a quote, or its quote is closed.
    None,
    /// Inside the quotes.
    Open,
    /// A quote inside the quotes was read: it closes them unless another quote follows.
    Closing,
}

impl Quote {
    fn after(self, bytes: &[u8]) -> Self {
        let mut state = self;
        for &byte in bytes {
            state = match (state, byte == b'"') {
                (Self::None, _) => return Self::None,
                (Self::Open, true) => Self::Closing,
                (Self::Open, false) => Self::Open,
                (Self::Closing, true) => Self::Open,
                (Self::Closing, false) => Self::None,
            };
        }
        state
    }
}

/// Counts line ends: LF, CR, and CRLF as one.
#[derive(Debug, Clone, Copy)]
struct LineCounter {
    line: usize,
    after_cr: bool,
}

impl LineCounter {
    fn add(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            match byte {
                b'\n' => {
                    if !self.after_cr {
                        self.line += 1;
                    }
                    self.after_cr = false;
                }
                b'\r' => {
                    self.line += 1;
                    self.after_cr = true;
                }
                _ => self.after_cr = false,
            }
        }
    }
}

/// Reads records one at a time: RFC 4180 quoting (doubled quotes, delimiters and line breaks
/// inside quotes), CR, LF or CRLF line ends. Lenient where exports are sloppy: a quote inside
/// an unquoted field is kept as text, and text after a closing quote is appended.
#[derive(Debug)]
pub(super) struct Records<'a> {
    stream: Utf8Stream<'a>,
    reader: csv_core::Reader,
    lines: LineCounter,
    done: bool,
    /// The first line is Excel's `sep=` line: read past it before the first record.
    skip_first_line: bool,
    /// Bytes `csv-core` writes a field into, a piece at a time.
    output: Vec<u8>,
    /// Characters kept per field and per record (the rest is read past), when sniffing.
    caps: Option<(usize, usize)>,
}

/// The piece of a field `csv-core` writes at a time.
const OUTPUT_PIECE: usize = 4 * 1024;

impl<'a> Records<'a> {
    /// Records of `bytes` from `start` on, in `encoding`, split on `delimiter` (an ASCII
    /// character); the first one is on line 1.
    pub(super) fn new(bytes: &'a [u8], start: usize, encoding: Encoding, delimiter: u8) -> Self {
        let reader = csv_core::ReaderBuilder::new()
            .delimiter(delimiter)
            .quote(b'"')
            .double_quote(true)
            .build();
        Self {
            stream: Utf8Stream::new(bytes, start, encoding),
            reader,
            lines: LineCounter {
                line: 1,
                after_cr: false,
            },
            done: false,
            skip_first_line: false,
            output: vec![0; OUTPUT_PIECE],
            caps: None,
        }
    }

    /// The same records after the first line (Excel's `sep=` line), which is not one.
    pub(super) fn after_first_line(mut self) -> Self {
        self.skip_first_line = true;
        self
    }

    /// The same records with each field cut at [`SNIFF_FIELD_CHARS`] and each record at
    /// [`SNIFF_RECORD_CHARS`]: for the look at the head of the file, never for the entries.
    pub(super) fn sniffing(mut self) -> Self {
        self.caps = Some((SNIFF_FIELD_CHARS, SNIFF_RECORD_CHARS));
        self
    }

    /// Reads past the first line and its line end.
    fn skip_line(&mut self) {
        loop {
            let data = self.stream.data();
            if data.is_empty() {
                return;
            }
            match data.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(at) => {
                    let end = &data[..=at];
                    self.lines.add(end);
                    self.stream.consume(at + 1);
                    return;
                }
                None => {
                    let all = data.len();
                    self.stream.consume(all);
                }
            }
        }
    }

    /// Reads one field into `field`, starting at its first byte.
    fn read_field(
        &mut self,
        field: &mut Vec<u8>,
        start: usize,
        kept: &mut usize,
    ) -> Result<bool, RecordError> {
        // Blanks before an opening quote are text, and the quote still opens the field.
        let data = self.stream.data();
        let blanks = data.iter().take_while(|&&b| b == b' ').count();
        if blanks > 0 && data.get(blanks) == Some(&b'"') {
            field.extend(std::iter::repeat_n(b' ', blanks));
            self.stream.consume(blanks);
        }
        let mut quote = match self.stream.data().first() {
            Some(b'"') => Quote::Open,
            _ => Quote::None,
        };
        // The opening quote is not a closing one.
        let mut skip_opening = quote == Quote::Open;
        loop {
            let data = self.stream.data();
            let (result, read, written) = self.reader.read_field(data, &mut self.output);
            let consumed = &data[..read];
            self.lines.add(consumed);
            let inside = if skip_opening && read > 0 {
                skip_opening = false;
                &consumed[1..]
            } else {
                consumed
            };
            quote = quote.after(inside);
            self.stream.consume(read);
            let piece = &self.output[..written];
            match self.caps {
                None => field.extend_from_slice(piece),
                // Enough bytes to hold the characters the caps keep; cut to characters below.
                Some((field_cap, record_cap)) => {
                    let room = (field_cap + 4).saturating_sub(field.len());
                    if *kept < record_cap {
                        field.extend_from_slice(&piece[..piece.len().min(room)]);
                    }
                }
            }
            match result {
                csv_core::ReadFieldResult::InputEmpty | csv_core::ReadFieldResult::OutputFull => {}
                csv_core::ReadFieldResult::Field { record_end } => {
                    if quote == Quote::Open {
                        return Err(RecordError::UnclosedQuote(start));
                    }
                    return Ok(record_end);
                }
                csv_core::ReadFieldResult::End => return Ok(true),
            }
        }
    }

    /// `bytes` as a field (U+FFFD for what is not UTF-8), cut to the caps when sniffing.
    fn field_text(&self, bytes: Vec<u8>, kept: &mut usize) -> String {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        };
        match self.caps {
            None => text,
            Some((field_cap, record_cap)) => {
                let mut field = String::new();
                for c in text.chars() {
                    if *kept >= record_cap || field.len() >= field_cap {
                        break;
                    }
                    *kept += 1;
                    field.push(c);
                }
                field
            }
        }
    }
}

impl Iterator for Records<'_> {
    type Item = Result<Record, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if std::mem::take(&mut self.skip_first_line) {
            self.skip_line();
        }
        // The LF of a CRLF that ended the last record.
        if self.lines.after_cr && self.stream.data().first() == Some(&b'\n') {
            self.lines.add(b"\n");
            self.stream.consume(1);
        }
        let first = *self.stream.data().first()?;
        let start = self.lines.line;
        if first == b'\n' || first == b'\r' {
            self.lines.add(&[first]);
            self.stream.consume(1);
            return Some(Ok(Record {
                line: start,
                fields: vec![String::new()],
            }));
        }
        // `csv-core` is at the start of a record here (or right after a CR, where it reads
        // past a LF, and none comes): it is never reset, which would make it strip a
        // byte-order mark in the middle of the file.
        let mut fields = Vec::new();
        let mut field = Vec::new();
        // Characters kept in this record so far (only counted when sniffing).
        let mut kept = 0usize;
        loop {
            match self.read_field(&mut field, start, &mut kept) {
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
                Ok(record_end) => {
                    if !record_end && fields.len() >= MAX_FIELDS {
                        self.done = true;
                        return Some(Err(RecordError::TooManyFields(start)));
                    }
                    let text = self.field_text(std::mem::take(&mut field), &mut kept);
                    fields.push(text);
                    if record_end {
                        return Some(Ok(Record {
                            line: start,
                            fields,
                        }));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The hand-written reader `csv-core` replaced, over decoded text: the oracle the new
    /// reader is checked against.
    fn reference(
        text: &str,
        delimiter: char,
        caps: Option<(usize, usize)>,
    ) -> Vec<Result<Record, RecordError>> {
        let mut chars = text.chars().peekable();
        let mut line = 1;
        let mut out = Vec::new();
        'records: while chars.peek().is_some() {
            let start = line;
            let mut fields = Vec::new();
            let mut field = String::new();
            let mut in_quotes = false;
            let mut at_field_start = true;
            let mut kept = 0usize;
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
                let Some(c) = chars.next() else {
                    if in_quotes {
                        out.push(Err(RecordError::UnclosedQuote(start)));
                        return out;
                    }
                    fields.push(field);
                    out.push(Ok(Record {
                        line: start,
                        fields,
                    }));
                    continue 'records;
                };
                if in_quotes {
                    if c == '"' {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                            push(&mut field, '"');
                        } else {
                            in_quotes = false;
                        }
                    } else {
                        if c == '\n' || (c == '\r' && chars.peek() != Some(&'\n')) {
                            line += 1;
                        }
                        push(&mut field, c);
                    }
                    continue;
                }
                if c == delimiter {
                    if fields.len() >= MAX_FIELDS {
                        out.push(Err(RecordError::TooManyFields(start)));
                        return out;
                    }
                    fields.push(std::mem::take(&mut field));
                    at_field_start = true;
                    continue;
                }
                if c == '\n' || c == '\r' {
                    if c == '\r' && chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    line += 1;
                    fields.push(field);
                    out.push(Ok(Record {
                        line: start,
                        fields,
                    }));
                    continue 'records;
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
        out
    }

    fn read(
        bytes: &[u8],
        encoding: Encoding,
        delimiter: u8,
        sniffing: bool,
    ) -> Vec<Result<Record, RecordError>> {
        let records = Records::new(bytes, 0, encoding, delimiter);
        if sniffing {
            records.sniffing().collect()
        } else {
            records.collect()
        }
    }

    fn utf16le(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    fn utf16be(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_be_bytes).collect()
    }

    /// `text` in DOS 852 (every character of the test alphabet has a byte there).
    fn cp852(text: &str) -> Vec<u8> {
        let high = CodePage::Cp852.high_chars();
        text.chars()
            .map(|c| match u8::try_from(c) {
                Ok(b) if b.is_ascii() => b,
                _ => (0x80..=0xFFu8)
                    .find(|&b| high.char_of(b) == c)
                    .unwrap_or(b'?'),
            })
            .collect()
    }

    /// The same text in every encoding the reader decodes differently.
    fn check(text: &str, delimiter: char, sniffing: bool) {
        let caps = sniffing.then_some((SNIFF_FIELD_CHARS, SNIFF_RECORD_CHARS));
        let expected = reference(text, delimiter, caps);
        let byte = u8::try_from(delimiter).unwrap_or(b',');
        for (bytes, encoding) in [
            (text.as_bytes().to_vec(), Encoding::Utf8),
            (utf16le(text), Encoding::Utf16Le),
            (utf16be(text), Encoding::Utf16Be),
            (cp852(text), Encoding::SingleByte(CodePage::Cp852)),
        ] {
            assert_eq!(
                read(&bytes, encoding, byte, sniffing),
                expected,
                "{encoding:?} {text:?}"
            );
        }
        let windows_1250 = encoding_rs::WINDOWS_1250.encode(text).0;
        assert_eq!(
            read(
                &windows_1250,
                Encoding::SingleByte(CodePage::Windows1250),
                byte,
                sniffing
            ),
            expected,
            "{text:?}"
        );
    }

    #[test]
    fn reads_as_the_hand_written_reader_did() {
        for text in [
            "",
            "a,b\n",
            "a,b",
            "a,b\r\nc,d\r\n",
            "a\rb\r\rc",
            "\n\n\r\n\"\"\n",
            "x, \"a,b\" ,c",
            "  \"q\"z,\"a\"\"b\",\"multi\nline\r\nfield\",end\n",
            "a\"b\",\"c",
            "\"never closed\n,a,b\n",
            "\"closed at the end\"",
            "\"ends in a quote\"\"\"",
            "ł,ó,\"ż\"\r",
            "a,\r\n,\n",
        ] {
            for delimiter in [',', ';'] {
                check(text, delimiter, false);
                check(text, delimiter, true);
            }
        }
    }

    #[test]
    fn long_fields_across_the_buffers_and_the_caps() {
        let long = "ł\"x\r\n, ".repeat(3_000);
        let quoted = format!(
            "a,\"{}\",b\r\n{}\n",
            long.replace('"', "\"\""),
            "ó".repeat(20_000)
        );
        check(&quoted, ',', false);
        check(&quoted, ',', true);
        let wide = format!("{}\n", ",".repeat(MAX_FIELDS + 5));
        check(&wide, ',', false);
        let at_cap = format!("{}\nnext", ",".repeat(MAX_FIELDS - 1));
        check(&at_cap, ',', false);
        let many_long = format!("{}\n", format!("{},", "é".repeat(2_000)).repeat(40));
        check(&many_long, ',', true);
    }

    #[test]
    fn the_sep_line_is_read_past() {
        let records: Vec<_> = Records::new(b"sep=;\r\na;b\n", 0, Encoding::Utf8, b';')
            .after_first_line()
            .collect();
        assert_eq!(
            records,
            vec![Ok(Record {
                line: 2,
                fields: vec!["a".to_owned(), "b".to_owned()]
            })]
        );
    }

    /// Throughput of the hand-written reader (over decoded text, its fast path) and of the
    /// `csv-core` one (over the bytes, and over the same file in Windows-1250 and UTF-16) on
    /// about 4 MiB of a German bank's quoted `;` rows. Run by hand, optimised:
    /// `cargo test --release -p aggregation-core --lib reader_throughput -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement; run by hand"]
    fn reader_throughput() {
        let mut text =
            String::from("\"Buchungstag\";\"Empfänger\";\"Verwendungszweck\";\"Betrag\"\n");
        let mut rows = 0usize;
        while text.len() < 4 << 20 {
            text.push_str(&format!(
                "\"02.01.2025\";\"Händler {}\";\"Rechnung {rows} vom 02.01.2025; Kunde {}\";\"-1.234,{:02}\"\r\n",
                rows % 997,
                rows % 31,
                rows % 100
            ));
            rows += 1;
        }
        let time = |label: &str, run: &dyn Fn() -> usize| {
            let started = std::time::Instant::now();
            let mut records = 0;
            for _ in 0..5 {
                records = run();
            }
            let seconds = started.elapsed().as_secs_f64() / 5.0;
            let mib = text.len() as f64 / f64::from(1u32 << 20);
            eprintln!("{label:32} {records} records, {:.1} MiB/s", mib / seconds);
            records
        };
        let old = time("hand-written (decoded text)", &|| {
            reference(&text, ';', None).len()
        });
        let utf8 = time("csv-core, UTF-8", &|| {
            read(text.as_bytes(), Encoding::Utf8, b';', false).len()
        });
        let bytes_1250 = encoding_rs::WINDOWS_1250.encode(&text).0.into_owned();
        let cp1250 = time("csv-core, Windows-1250", &|| {
            read(
                &bytes_1250,
                Encoding::SingleByte(CodePage::Windows1250),
                b';',
                false,
            )
            .len()
        });
        let bytes_16 = utf16le(&text);
        let utf16 = time("csv-core, UTF-16LE", &|| {
            read(&bytes_16, Encoding::Utf16Le, b';', false).len()
        });
        assert!(old == utf8 && utf8 == cp1250 && cp1250 == utf16 && utf8 == rows + 1);
    }

    proptest! {
        #[test]
        fn any_text_reads_as_the_hand_written_reader_did(
            text in "[ab ,;\"\r\nłó]{0,80}",
            semicolon in any::<bool>(),
            sniffing in any::<bool>(),
        ) {
            check(&text, if semicolon { ';' } else { ',' }, sniffing);
        }
    }
}
