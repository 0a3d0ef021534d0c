//! From bytes to fields: the character set, line ends, SWIFT block framing, statement
//! separators, header lines and multi-line fields.

use std::borrow::Cow;

use super::MtMessage;
use crate::import::codepage;

/// Decodes the file as a whole: UTF-8 (a byte-order mark is dropped) when every byte of it is
/// valid UTF-8, else the single-byte code page its bytes read best in (Windows-1252,
/// Windows-1250, ISO-8859-2 or DOS 852; see `import::codepage`) for every byte. Never fails.
pub(super) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    codepage::decode_whole(bytes)
}

/// The lines of `text` with their 1-based numbers: CR, LF and CRLF all end a line; trailing
/// blanks (the padding some banks add to fixed-width lines) are dropped.
pub(super) fn lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut no = 0;
    let mut rest = text;
    while !rest.is_empty() {
        no += 1;
        let end = rest.find(['\r', '\n']).unwrap_or(rest.len());
        let line = &rest[..end];
        out.push((no, line.trim_end_matches([' ', '\t', '\0'])));
        let after = &rest[end..];
        rest = if let Some(r) = after.strip_prefix("\r\n") {
            r
        } else if let Some(r) = after.strip_prefix(['\r', '\n']) {
            r
        } else {
            after
        };
    }
    out
}

/// One field: `:TAG:` and its value, which may run over several lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Field<'a> {
    /// The tag without colons: `20`, `28C`, `61`, `NS`.
    pub(super) tag: &'a str,
    /// The 1-based line the tag is on.
    pub(super) line: usize,
    /// The rest of the tag's line.
    pub(super) first: &'a str,
    /// The lines that follow before the next tag, separator or block end.
    pub(super) more: Vec<&'a str>,
}

/// What the lexer reads, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item<'a> {
    /// A SWIFT message starts (`{1:…}{2:…}{4:`): its sender BIC and message type, if stated.
    MessageStart {
        /// The sender (block 1's logical terminal, as a BIC).
        sender: Option<String>,
        /// Block 2's message type.
        message: Option<MtMessage>,
    },
    /// A header line before the fields of a plain file: a BIC (`ABNANL2A`) or the message type
    /// (`940`, `942 02`).
    Header {
        /// The BIC, if the line is one.
        sender: Option<String>,
        /// The message type, if the line is one.
        message: Option<MtMessage>,
    },
    /// A field.
    Field(Field<'a>),
    /// A statement ends: a `-` line, or a block 4 end `-}`.
    End,
}

/// Reads the items of the file.
pub(super) fn items<'a>(lines: &[(usize, &'a str)]) -> Vec<Item<'a>> {
    let mut out = Vec::new();
    let mut field: Option<Field<'a>> = None;
    let mut i = 0;
    while i < lines.len() {
        let (no, line) = lines[i];
        i += 1;
        // A tag broken after its first colon (`:` then `86:…` on the next line).
        if line == ":"
            && let Some(&(_, next)) = lines.get(i)
            && let Some((tag, value)) = tag_of(next)
        {
            i += 1;
            flush(&mut out, &mut field);
            field = Some(Field {
                tag,
                line: no,
                first: value,
                more: Vec::new(),
            });
            continue;
        }
        if let Some(rest) = line.strip_prefix(':')
            && let Some((tag, value)) = tag_of(rest)
        {
            flush(&mut out, &mut field);
            field = Some(Field {
                tag,
                line: no,
                first: value,
                more: Vec::new(),
            });
            continue;
        }
        let trimmed = line.trim();
        if trimmed == "-" {
            flush(&mut out, &mut field);
            out.push(Item::End);
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("-}") {
            flush(&mut out, &mut field);
            out.push(Item::End);
            if rest.starts_with('{')
                && let Some(content) = blocks(rest, &mut out)
            {
                start_content(content, no, &mut out, &mut field);
            }
            continue;
        }
        if is_block_start(trimmed) {
            flush(&mut out, &mut field);
            if let Some(content) = blocks(trimmed, &mut out) {
                start_content(content, no, &mut out, &mut field);
            }
            continue;
        }
        match field.as_mut() {
            Some(f) => f.more.push(line),
            None => {
                if let Some(header) = header_of(trimmed) {
                    out.push(header);
                }
            }
        }
    }
    flush(&mut out, &mut field);
    out
}

/// The content after `{4:` on a block line: a field, or nothing.
fn start_content<'a>(
    content: &'a str,
    no: usize,
    out: &mut Vec<Item<'a>>,
    field: &mut Option<Field<'a>>,
) {
    if let Some((tag, value)) = content.strip_prefix(':').and_then(tag_of) {
        flush(out, field);
        *field = Some(Field {
            tag,
            line: no,
            first: value,
            more: Vec::new(),
        });
    }
}

fn flush<'a>(out: &mut Vec<Item<'a>>, field: &mut Option<Field<'a>>) {
    if let Some(f) = field.take() {
        out.push(Item::Field(f));
    }
}

/// `{` followed by a block number and `:`.
fn is_block_start(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() >= 3 && b[0] == b'{' && (b'1'..=b'5').contains(&b[1]) && b[2] == b':'
}

/// `TAG:value` (the leading colon already gone): two digits and an optional letter, or `NS`.
fn tag_of(rest: &str) -> Option<(&str, &str)> {
    // `28C:` puts the colon at index 3; nothing longer is a tag.
    let colon = rest.bytes().take(4).position(|b| b == b':')?;
    let tag = &rest[..colon];
    let b = tag.as_bytes();
    let ok = match b {
        [a, b] => (a.is_ascii_digit() && b.is_ascii_digit()) || tag == "NS",
        [a, b, c] => a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_uppercase(),
        _ => false,
    };
    ok.then(|| (tag, &rest[colon + 1..]))
}

/// Reads SWIFT blocks on one line (`{1:…}{2:…}{3:{108:…}}{4:`), pushes the message start, and
/// returns what follows `{4:` on the line (empty when the fields start on the next line).
/// `None` when the line has no block 4.
fn blocks<'a>(line: &'a str, out: &mut Vec<Item<'a>>) -> Option<&'a str> {
    let mut sender = None;
    let mut message = None;
    let mut rest = line;
    loop {
        rest = rest.trim_start();
        let Some(after) = rest.strip_prefix('{') else {
            break;
        };
        let Some(colon) = after.find(':') else {
            break;
        };
        let id = &after[..colon];
        let body_start = &after[colon + 1..];
        if id == "4" {
            out.push(Item::MessageStart { sender, message });
            return Some(body_start.trim());
        }
        // Find the matching `}` (blocks 3 and 5 nest).
        let mut depth = 1usize;
        let mut end = None;
        for (k, c) in body_start.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(k);
                        break;
                    }
                }
                _ => {}
            }
        }
        let body = &body_start[..end.unwrap_or(body_start.len())];
        match id {
            "1" => sender = sender_of_block1(body),
            "2" => message = message_of_block2(body),
            _ => {}
        }
        match end {
            Some(k) => rest = &body_start[k + 1..],
            None => break,
        }
    }
    if sender.is_some() || message.is_some() {
        out.push(Item::MessageStart { sender, message });
    }
    None
}

/// Block 1 `F01BANKDEFFAXXX0000000000`: the logical terminal is a BIC8, a terminal letter and a
/// branch; the BIC is the BIC8 plus the branch unless it is `XXX`.
fn sender_of_block1(body: &str) -> Option<String> {
    let lt = body.get(3..15)?;
    if !lt.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let (bic8, branch) = (&lt[..8], &lt[9..]);
    Some(if branch == "XXX" {
        bic8.to_owned()
    } else {
        format!("{bic8}{branch}")
    })
}

/// Block 2 `I940…` or `O940…`.
fn message_of_block2(body: &str) -> Option<MtMessage> {
    match body.get(1..4)? {
        "940" => Some(MtMessage::Mt940),
        "942" => Some(MtMessage::Mt942),
        _ => None,
    }
}

/// A header line of a plain file (ABN AMRO: `ABNANL2A`, `940`, `ABNANL2A`; MultiCash exports:
/// `940 02`).
fn header_of(line: &str) -> Option<Item<'static>> {
    let first = line.split_whitespace().next()?;
    let message = match first {
        "940" => Some(MtMessage::Mt940),
        "942" => Some(MtMessage::Mt942),
        _ => None,
    };
    if message.is_some() {
        return Some(Item::Header {
            sender: None,
            message,
        });
    }
    let is_bic = line.len() == first.len()
        && (first.len() == 8 || first.len() == 11)
        && first.bytes().take(6).all(|b| b.is_ascii_uppercase())
        && first
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    is_bic.then(|| Item::Header {
        sender: Some(first.to_owned()),
        message: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ends_of_every_kind() {
        let text = "a\r\nb\rc\nd  \r\n\r\ne";
        assert_eq!(
            lines(text),
            vec![(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, ""), (6, "e")]
        );
    }

    #[test]
    fn tags() {
        assert_eq!(tag_of("61:x"), Some(("61", "x")));
        assert_eq!(tag_of("28C:1/1"), Some(("28C", "1/1")));
        assert_eq!(tag_of("NS:22x"), Some(("NS", "22x")));
        assert_eq!(tag_of("08 Karten"), None);
        assert_eq!(tag_of("8:"), None);
        assert_eq!(tag_of("123:"), None);
    }

    #[test]
    fn decode_per_file() {
        assert_eq!(decode("Müller".as_bytes()), "Müller");
        // One invalid byte: the whole file is Windows-1252, so the UTF-8 pair is two chars.
        assert_eq!(decode(b"M\xFCller \x80"), "Müller €");
        assert_eq!(decode(b"\xEF\xBB\xBFabc"), "abc");
    }
}
