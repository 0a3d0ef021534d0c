//! Reading the OFX body: OFX 1.x SGML and OFX 2.x XML into one stream of events.
//!
//! Markup is tokenized by [`quick_xml`]'s reader over the decoded text, configured for SGML:
//! end names are not checked and unmatched ends are allowed (OFX 1.x leaves are usually not
//! closed: `<TRNAMT>-12.50` is followed by the next tag, and some files close some leaves and
//! not others), and a dangling `&` is text. quick-xml's own unescaping is not used: text is
//! taken from the input by byte span (the spans of `Text` and `GeneralRef` events are
//! contiguous) and decoded here, so a bare `&` needs no escaping beforehand and `AT&T` stays
//! as written. A few SGML forms quick-xml would read as broken markup are settled before it
//! sees them, by looking at the byte after a `<`: a `<` that starts no markup (`a < b`) is
//! text, and a markup declaration other than a comment or CDATA section is skipped; in both
//! cases reading carries on with a fresh quick-xml reader after it. Tags, end tags included,
//! end at the first `>` outside quoted text, as quick-xml reads them. Reading fails only on
//! markup that does not end (an unterminated tag, comment, CDATA section or processing
//! instruction) and on document type or entity declarations, which are refused and never
//! expanded; errors carry the byte offset of the `<`, so they can name the line.
//!
//! The normaliser turns tags into three events for a [`Sink`]: an aggregate opens, an
//! aggregate closes, a leaf has a value. An element is a leaf when it is a known leaf name
//! ([`Tag::is_leaf`]), when text comes before its first child, or when it is a proprietary
//! (`NAME.NAME`, such as `INTU.BID`) element with nothing in it; a known aggregate name is never
//! a leaf. A start tag closes an open leaf; an end tag closes every element opened after the one
//! it names (end tags that match nothing open are ignored). Values are decoded exactly once
//! (`&amp;lt;` reads as `&lt;`): the five XML entities and numeric character references are
//! decoded, any other `&` stays as it is. CDATA is taken literally, comments and processing
//! instructions are skipped, and values are trimmed of surrounding whitespace. Nesting is
//! capped at [`MAX_DEPTH`] elements.

use quick_xml::events::Event;

use super::tags::Tag;

/// The deepest nesting of elements accepted (real files nest about ten deep).
pub(crate) const MAX_DEPTH: usize = 128;

/// An error found while reading, at a byte offset into the decoded text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawError {
    /// Byte offset into the decoded text.
    pub(crate) pos: usize,
    /// What went wrong.
    pub(crate) kind: RawErrorKind,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawErrorKind {
    /// A `<!DOCTYPE …>`.
    Doctype,
    /// An `<!ENTITY …>`.
    Entity,
    /// Anything else.
    Malformed(String),
}

impl RawError {
    pub(crate) fn malformed(pos: usize, message: impl Into<String>) -> RawError {
        RawError {
            pos,
            kind: RawErrorKind::Malformed(message.into()),
        }
    }
}

/// Receives the normalised events.
pub(crate) trait Sink {
    /// An aggregate element opens (`name` as written).
    fn open(&mut self, tag: Tag, name: &str, pos: usize) -> Result<(), RawError>;
    /// The innermost open aggregate closes.
    fn close(&mut self, tag: Tag, pos: usize) -> Result<(), RawError>;
    /// A leaf element with its decoded, trimmed value.
    fn leaf(&mut self, tag: Tag, value: &str, pos: usize) -> Result<(), RawError>;
}

struct Entry<'a> {
    name: &'a str,
    tag: Tag,
    pos: usize,
    /// Whether `open` was sent (the element has children, or is a known aggregate).
    opened: bool,
}

/// The text gathered for the innermost element while it may still be a leaf.
enum Text {
    None,
    /// One piece of the input; `raw` for CDATA (no entity decoding).
    Slice {
        start: usize,
        end: usize,
        raw: bool,
    },
    /// Several pieces, already decoded.
    Owned(String),
}

/// Reads the whole body and sends its events to `sink`.
pub(crate) fn read<S: Sink>(input: &str, sink: &mut S) -> Result<(), RawError> {
    let mut reader = Reader {
        input,
        stack: Vec::with_capacity(16),
        text: Text::None,
        has_content: false,
        scratch: String::new(),
    };
    reader.run(sink)
}

struct Reader<'a> {
    input: &'a str,
    stack: Vec<Entry<'a>>,
    text: Text,
    has_content: bool,
    scratch: String,
}

/// What a `<` starts, decided from the bytes after it before quick-xml reads it.
#[derive(Clone, Copy)]
enum Markup {
    /// `<!--`
    Comment,
    /// `<![CDATA[`
    CData,
    /// `<?`
    Instruction,
    /// `</`
    EndTag,
    /// `<` and a name
    StartTag,
    /// `<!DOCTYPE`
    Doctype,
    /// `<!ENTITY`
    Entity,
    /// Any other `<!…>` (SGML marked sections and the like): skipped to its `>`.
    Declaration,
    /// A `<` that starts no markup (SGML files have them in memos): text.
    Text,
}

impl Markup {
    fn at(b: &[u8], pos: usize) -> Markup {
        match b.get(pos + 1).copied() {
            Some(b'!') if b.get(pos + 2..pos + 4) == Some(b"--") => Markup::Comment,
            Some(b'!') if b.get(pos + 2..pos + 9) == Some(b"[CDATA[") => Markup::CData,
            Some(b'!') if starts_with_ci(b, pos + 2, b"DOCTYPE") => Markup::Doctype,
            Some(b'!') if starts_with_ci(b, pos + 2, b"ENTITY") => Markup::Entity,
            Some(b'!') => Markup::Declaration,
            Some(b'?') => Markup::Instruction,
            Some(b'/') => Markup::EndTag,
            Some(c) if is_name_start(c) => Markup::StartTag,
            _ => Markup::Text,
        }
    }

    /// What the markup is called in an error.
    fn what(self) -> &'static str {
        match self {
            Markup::Comment => "comment",
            Markup::CData => "CDATA section",
            Markup::Instruction => "processing instruction",
            Markup::EndTag => "end tag",
            Markup::Declaration | Markup::Doctype | Markup::Entity => "markup declaration",
            Markup::StartTag | Markup::Text => "tag",
        }
    }
}

/// A quick-xml reader for `input`, set up for SGML as described in the module documentation.
fn xml_reader(input: &str) -> quick_xml::Reader<&[u8]> {
    let mut reader = quick_xml::Reader::from_str(input);
    let config = reader.config_mut();
    config.check_end_names = false;
    config.allow_unmatched_ends = true;
    config.allow_dangling_amp = true;
    config.trim_text(false);
    reader
}

/// Where `xml`, reading the input from `base` on, is in the input.
fn offset(base: usize, xml: &quick_xml::Reader<&[u8]>) -> usize {
    base.saturating_add(usize::try_from(xml.buffer_position()).unwrap_or(usize::MAX))
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':')
}

fn find_byte(hay: &[u8], from: usize, needle: u8) -> Option<usize> {
    hay.get(from..)?
        .iter()
        .position(|&b| b == needle)
        .map(|i| i + from)
}

fn starts_with_ci(hay: &[u8], from: usize, needle: &[u8]) -> bool {
    hay.get(from..from + needle.len())
        .is_some_and(|w| w.eq_ignore_ascii_case(needle))
}

impl<'a> Reader<'a> {
    fn run<S: Sink>(&mut self, sink: &mut S) -> Result<(), RawError> {
        let input = self.input;
        let b = input.as_bytes();
        // quick-xml reports positions relative to the slice it was given; `base` is where that
        // slice starts in `input`.
        let mut base = self.resume_at(0);
        let mut xml = xml_reader(input.get(base..).unwrap_or(""));
        loop {
            let pos = offset(base, &xml);
            let markup = if b.get(pos) == Some(&b'<') {
                Some(Markup::at(b, pos))
            } else {
                None
            };
            let resume = match markup {
                Some(Markup::Doctype) => {
                    return Err(RawError {
                        pos,
                        kind: RawErrorKind::Doctype,
                    });
                }
                Some(Markup::Entity) => {
                    return Err(RawError {
                        pos,
                        kind: RawErrorKind::Entity,
                    });
                }
                Some(Markup::Declaration) => {
                    let end = find_byte(b, pos + 2, b'>').ok_or_else(|| {
                        RawError::malformed(pos, "markup declaration is never closed")
                    })?;
                    Some(end + 1)
                }
                Some(Markup::Text) => {
                    self.add_text(pos, pos + 1, false);
                    Some(pos + 1)
                }
                _ => None,
            };
            if let Some(at) = resume {
                base = self.resume_at(at);
                xml = xml_reader(input.get(base..).unwrap_or(""));
                continue;
            }
            let event = xml.read_event().map_err(|error| {
                let what = markup.map_or("markup", Markup::what);
                let message = match error {
                    quick_xml::Error::Syntax(_) => format!("{what} is never closed"),
                    other => format!("{what} cannot be read: {other}"),
                };
                RawError::malformed(pos, message)
            })?;
            let end = offset(base, &xml);
            match event {
                Event::Text(_) | Event::GeneralRef(_) => self.add_text(pos, end, false),
                Event::CData(_) => self.add_text(pos + 9, end.saturating_sub(3), true),
                Event::Start(_) | Event::Empty(_) => {
                    let name_end = (pos + 1..end)
                        .find(|&j| b.get(j).is_none_or(|&c| !is_name_char(c)))
                        .unwrap_or(end);
                    let name = input.get(pos + 1..name_end).unwrap_or("");
                    let empty = matches!(event, Event::Empty(_));
                    self.start_tag(name, pos, empty, sink)?;
                }
                Event::End(_) => {
                    let name = input
                        .get(pos + 2..end.saturating_sub(1))
                        .unwrap_or("")
                        .trim();
                    self.end_tag(name, pos, sink)?;
                }
                Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
                Event::Eof => break,
            }
        }
        self.finish(sink)
    }

    /// Where a fresh quick-xml reader starting at `at` begins. quick-xml drops a byte-order
    /// mark at the start of its input without counting it in its positions, so any found
    /// there are taken as text here instead.
    fn resume_at(&mut self, mut at: usize) -> usize {
        const BOM: &str = "\u{FEFF}";
        while self
            .input
            .get(at..)
            .is_some_and(|rest| rest.starts_with(BOM))
        {
            self.add_text(at, at + BOM.len(), false);
            at += BOM.len();
        }
        at
    }

    fn add_text(&mut self, start: usize, end: usize, raw: bool) {
        let Some(top) = self.stack.last() else {
            return;
        };
        if top.opened || start >= end {
            return;
        }
        let piece = self.input.get(start..end).unwrap_or("");
        if raw || !piece.trim().is_empty() {
            self.has_content = true;
        }
        self.text = match std::mem::replace(&mut self.text, Text::None) {
            Text::None => Text::Slice { start, end, raw },
            Text::Slice {
                start: s,
                end: e,
                raw: r,
            } if e == start && r == raw => Text::Slice {
                start: s,
                end,
                raw: r,
            },
            Text::Slice {
                start: s,
                end: e,
                raw: r,
            } => {
                let mut owned = String::new();
                append_piece(&mut owned, self.input.get(s..e).unwrap_or(""), r);
                append_piece(&mut owned, piece, raw);
                Text::Owned(owned)
            }
            Text::Owned(mut owned) => {
                append_piece(&mut owned, piece, raw);
                Text::Owned(owned)
            }
        };
    }

    /// Before a child element: the innermost element either is a leaf (then it closes) or
    /// becomes an aggregate (then it opens).
    fn before_child<S: Sink>(&mut self, sink: &mut S) -> Result<(), RawError> {
        let Some(top) = self.stack.last_mut() else {
            return Ok(());
        };
        if top.opened {
            return Ok(());
        }
        let proprietary_empty = top.tag == Tag::Other && top.name.contains('.');
        if top.tag.is_leaf() || self.has_content || proprietary_empty {
            self.close_top(sink)
        } else {
            top.opened = true;
            self.text = Text::None;
            self.has_content = false;
            sink.open(top.tag, top.name, top.pos)
        }
    }

    fn start_tag<S: Sink>(
        &mut self,
        name: &'a str,
        pos: usize,
        empty: bool,
        sink: &mut S,
    ) -> Result<(), RawError> {
        self.before_child(sink)?;
        let tag = Tag::from_name(name.as_bytes());
        if empty {
            return if tag.is_aggregate() {
                sink.open(tag, name, pos)?;
                sink.close(tag, pos)
            } else {
                sink.leaf(tag, "", pos)
            };
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(RawError::malformed(
                pos,
                format!("elements are nested more than {MAX_DEPTH} deep"),
            ));
        }
        let opened = tag.is_aggregate();
        self.stack.push(Entry {
            name,
            tag,
            pos,
            opened,
        });
        self.text = Text::None;
        self.has_content = false;
        if opened {
            sink.open(tag, name, pos)?;
        }
        Ok(())
    }

    fn end_tag<S: Sink>(&mut self, name: &str, pos: usize, sink: &mut S) -> Result<(), RawError> {
        let target = if name.is_empty() {
            // SGML `</>` closes the innermost element.
            self.stack.len().checked_sub(1)
        } else {
            self.stack
                .iter()
                .rposition(|e| e.name.eq_ignore_ascii_case(name))
        };
        let Some(target) = target else {
            return Ok(());
        };
        while self.stack.len() > target {
            self.close_top_at(sink, pos)?;
        }
        Ok(())
    }

    fn close_top<S: Sink>(&mut self, sink: &mut S) -> Result<(), RawError> {
        let pos = self.stack.last().map_or(0, |e| e.pos);
        self.close_top_at(sink, pos)
    }

    fn close_top_at<S: Sink>(&mut self, sink: &mut S, close_pos: usize) -> Result<(), RawError> {
        let Some(entry) = self.stack.pop() else {
            return Ok(());
        };
        if entry.opened {
            return sink.close(entry.tag, close_pos);
        }
        let text = std::mem::replace(&mut self.text, Text::None);
        self.has_content = false;
        let value: &str = match &text {
            Text::None => "",
            Text::Slice { start, end, raw } => {
                let piece = self.input.get(*start..*end).unwrap_or("");
                if *raw || !piece.contains('&') {
                    piece
                } else {
                    self.scratch.clear();
                    decode_entities(piece, &mut self.scratch);
                    &self.scratch
                }
            }
            Text::Owned(s) => s,
        };
        sink.leaf(entry.tag, value.trim(), entry.pos)
    }

    fn finish<S: Sink>(&mut self, sink: &mut S) -> Result<(), RawError> {
        while let Some(top) = self.stack.last() {
            let exempt = matches!(
                top.tag,
                Tag::Ofx
                    | Tag::SignonMsgs
                    | Tag::BankMsgs
                    | Tag::CcMsgs
                    | Tag::InvMsgs
                    | Tag::SecListMsgs
                    | Tag::Other
            );
            if top.opened && !exempt {
                return Err(RawError::malformed(
                    top.pos,
                    format!("<{}> is never closed: the file ends first", top.name),
                ));
            }
            let end = self.input.len();
            self.close_top_at(sink, end)?;
        }
        Ok(())
    }
}

fn append_piece(out: &mut String, piece: &str, raw: bool) {
    if raw {
        out.push_str(piece);
    } else {
        decode_entities(piece, out);
    }
}

/// Decodes `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&#NN;` and `&#xHH;` once; any other
/// `&` (a bare one, or an unknown entity) is kept as written.
pub(crate) fn decode_entities(text: &str, out: &mut String) {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(rest.get(..amp).unwrap_or(""));
        let after = rest.get(amp + 1..).unwrap_or("");
        match decode_reference(after) {
            Some((c, len)) => {
                out.push(c);
                rest = after.get(len..).unwrap_or("");
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
}

/// The character of the reference at the start of `s` (just after the `&`) and the length of
/// the reference including its `;`.
fn decode_reference(s: &str) -> Option<(char, usize)> {
    let semi = s.as_bytes().iter().take(12).position(|&b| b == b';')?;
    let name = s.get(..semi)?;
    let c = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    u32::from_str_radix(hex, 16).ok()?
                }
                None if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) => {
                    num.parse().ok()?
                }
                _ => return None,
            };
            if code == 0 {
                return None;
            }
            char::from_u32(code)?
        }
    };
    Some((c, semi + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Log(Vec<String>);

    impl Sink for Log {
        fn open(&mut self, tag: Tag, name: &str, _pos: usize) -> Result<(), RawError> {
            let _ = tag;
            self.0.push(format!("+{name}"));
            Ok(())
        }
        fn close(&mut self, tag: Tag, _pos: usize) -> Result<(), RawError> {
            self.0.push(format!("-{tag:?}"));
            Ok(())
        }
        fn leaf(&mut self, tag: Tag, value: &str, _pos: usize) -> Result<(), RawError> {
            self.0.push(format!("{tag:?}={value}"));
            Ok(())
        }
    }

    fn events(input: &str) -> Vec<String> {
        let mut log = Log::default();
        read(input, &mut log).unwrap();
        log.0
    }

    #[test]
    fn unclosed_closed_and_mixed_leaves_read_alike() {
        let sgml = events("<STMTTRN>\n<TRNTYPE>DEBIT\n<FITID>1\n<MEMO>\n<NAME>x\n</STMTTRN>");
        let xml = events(
            "<STMTTRN><TRNTYPE>DEBIT</TRNTYPE><FITID>1</FITID><MEMO></MEMO><NAME>x</NAME></STMTTRN>",
        );
        let mixed = events("<STMTTRN><TRNTYPE>DEBIT</TRNTYPE><FITID>1<MEMO/><NAME>x</STMTTRN>");
        let expected = [
            "+STMTTRN",
            "TrnType=DEBIT",
            "FitId=1",
            "Memo=",
            "Name=x",
            "-StmtTrn",
        ];
        assert_eq!(sgml, expected);
        assert_eq!(xml, expected);
        assert_eq!(mixed, expected);
    }

    #[test]
    fn unknown_elements_by_content() {
        assert_eq!(
            events("<A><B>1<C><D>2</D></C><INTU.BID>\n<E>3</A>"),
            [
                "+A", "Other=1", "+C", "Other=2", "-Other", "Other=", "Other=3", "-Other"
            ]
        );
    }

    #[test]
    fn entities_decoded_once_and_bare_ampersands_kept() {
        assert_eq!(
            events("<NAME>A&amp;lt;B &amp; C&lt;&gt;&quot;&apos;&#65;&#x42;</NAME>"),
            ["Name=A&lt;B & C<>\"'AB"]
        );
        assert_eq!(
            events("<MEMO>AT&T \"x\" & Sons &nbsp; &#0; &#xZZ; &"),
            ["Memo=AT&T \"x\" & Sons &nbsp; &#0; &#xZZ; &"]
        );
    }

    #[test]
    fn cdata_comments_and_whitespace() {
        assert_eq!(
            events(
                "<NAME> <![CDATA[a &amp; <b>]]> </NAME><!-- <MEMO>x --><MEMO>\t y <!-- c -->z \n"
            ),
            ["Name=a &amp; <b>", "Memo=y z"]
        );
    }

    #[test]
    fn refusals_and_unterminated_markup() {
        let mut log = Log::default();
        let err = read("<OFX><!DOCTYPE x>", &mut log).unwrap_err();
        assert_eq!(err.kind, RawErrorKind::Doctype);
        assert_eq!(err.pos, 5);
        let err = read("<OFX><!ENTITY x 'y'>", &mut log).unwrap_err();
        assert_eq!(err.kind, RawErrorKind::Entity);
        for bad in [
            "<OFX><!-- x",
            "<OFX><![CDATA[",
            "<OFX",
            "<?xml",
            "</OFX",
            "<STMTRS>",
        ] {
            assert!(
                matches!(
                    read(bad, &mut log),
                    Err(RawError {
                        kind: RawErrorKind::Malformed(_),
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_less_than_that_starts_no_markup_is_text() {
        assert_eq!(
            events("<MEMO>a < b <1 <= c <\u{FEFF}\u{FEFF}d<NAME>y<MEMO>end <"),
            [
                "Memo=a < b <1 <= c <\u{FEFF}\u{FEFF}d",
                "Name=y",
                "Memo=end <"
            ]
        );
    }

    #[test]
    fn markup_declarations_are_skipped_and_end_tags_trimmed() {
        assert_eq!(
            events("<A><MEMO>x<!ELEMENT y - - (z)>y<![IGNORE[ n ]]>z</ MEMO ><NAME>w</A>"),
            ["+A", "Memo=xyz", "Name=w", "-Other"]
        );
    }

    #[test]
    fn errors_point_at_the_markup() {
        let mut log = Log::default();
        for (bad, pos, what) in [
            ("<OFX>\n<MEMO>x\n<!-- oops", 14, "comment"),
            ("<OFX><MEMO>x<![CDATA[y", 12, "CDATA section"),
            ("<OFX> <?OFX x", 6, "processing instruction"),
            ("<OFX><A></A", 8, "end tag"),
            ("<OFX><A><B attr='>", 8, "tag"),
            ("<OFX><!ELEMENT", 5, "markup declaration"),
        ] {
            let err = read(bad, &mut log).unwrap_err();
            assert_eq!(err.pos, pos, "{bad:?}");
            assert_eq!(
                err.kind,
                RawErrorKind::Malformed(format!("{what} is never closed")),
                "{bad:?}"
            );
        }
        let err = read("<OFX>\n  <!doctype ofx [<!ENTITY x 'y'>]>", &mut log).unwrap_err();
        assert_eq!((err.kind, err.pos), (RawErrorKind::Doctype, 8));
    }

    #[test]
    fn depth_is_capped() {
        let deep = "<A>".repeat(MAX_DEPTH + 1);
        let mut log = Log::default();
        assert!(read(&deep, &mut log).is_err());
        let ok = "<A>".repeat(MAX_DEPTH);
        assert!(read(&ok, &mut log).is_ok());
    }
}
