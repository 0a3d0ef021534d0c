//! The XML event loop: quick-xml's events, a stack of open elements' local names, and the
//! values of leaf elements handed to the [`Builder`].

use quick_xml::events::{BytesStart, Event};

use super::build::Builder;
use super::text::Lines;
use super::{MAX_DEPTH, namespace_message};
use crate::import::model::{ParseError, ParsedFile};

/// The element names the builder looks at; every other name is [`Tag::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
    Document,
    /// `BkToCstmrAcctRpt`, `BkToCstmrStmt` or `BkToCstmrDbtCdtNtfctn`, also with the version
    /// suffix of the 001.01 messages (`BkToCstmrStmtV01`).
    Message,
    /// `Rpt`, `Stmt` or `Ntfctn`.
    Statement,
    Acct,
    AcctSvcrRef,
    AddtlNtryInf,
    AddtlTxInf,
    Amt,
    AmtDtls,
    Bal,
    /// `BBAN` (001.01 account identification).
    Bban,
    Bic,
    BkTxCd,
    BookgDt,
    Ccy,
    Cd,
    CdOrPrtry,
    CdtDbtInd,
    Cdtr,
    CdtrRefInf,
    CreDtTm,
    Dbtr,
    Domn,
    Dt,
    DtTm,
    FinInstnId,
    Fmly,
    FrToDt,
    Iban,
    Id,
    Nm,
    Ntry,
    NtryDtls,
    Othr,
    Prtry,
    /// `PrtryAcct` (001.01: a proprietary account identification).
    PrtryAcct,
    Pty,
    Ref,
    Refs,
    RltdPties,
    RmtInf,
    RvslInd,
    Strd,
    Sts,
    SubFmlyCd,
    Svcr,
    ToDtTm,
    Tp,
    TxAmt,
    TxDtls,
    TxId,
    /// `UPIC` (001.01 account identification).
    Upic,
    Ustrd,
    ValDt,
    Other,
}

impl Tag {
    fn from_local(name: &str) -> Tag {
        match name {
            "Document" => Tag::Document,
            _ if is_message_name(name) => Tag::Message,
            "Rpt" | "Stmt" | "Ntfctn" => Tag::Statement,
            "Acct" => Tag::Acct,
            "AcctSvcrRef" => Tag::AcctSvcrRef,
            "AddtlNtryInf" => Tag::AddtlNtryInf,
            "AddtlTxInf" => Tag::AddtlTxInf,
            "Amt" => Tag::Amt,
            "AmtDtls" => Tag::AmtDtls,
            "Bal" => Tag::Bal,
            "BBAN" => Tag::Bban,
            "BIC" | "BICFI" => Tag::Bic,
            "BkTxCd" => Tag::BkTxCd,
            "BookgDt" => Tag::BookgDt,
            "Ccy" => Tag::Ccy,
            "Cd" => Tag::Cd,
            "CdOrPrtry" => Tag::CdOrPrtry,
            "CdtDbtInd" => Tag::CdtDbtInd,
            "Cdtr" => Tag::Cdtr,
            "CdtrRefInf" => Tag::CdtrRefInf,
            "CreDtTm" => Tag::CreDtTm,
            "Dbtr" => Tag::Dbtr,
            "Domn" => Tag::Domn,
            "Dt" => Tag::Dt,
            "DtTm" => Tag::DtTm,
            "FinInstnId" => Tag::FinInstnId,
            "Fmly" => Tag::Fmly,
            "FrToDt" => Tag::FrToDt,
            "IBAN" => Tag::Iban,
            "Id" => Tag::Id,
            "Nm" => Tag::Nm,
            "Ntry" => Tag::Ntry,
            "NtryDtls" => Tag::NtryDtls,
            "Othr" => Tag::Othr,
            "Prtry" => Tag::Prtry,
            "PrtryAcct" => Tag::PrtryAcct,
            "Pty" => Tag::Pty,
            "Ref" => Tag::Ref,
            "Refs" => Tag::Refs,
            "RltdPties" => Tag::RltdPties,
            "RmtInf" => Tag::RmtInf,
            "RvslInd" => Tag::RvslInd,
            "Strd" => Tag::Strd,
            "Sts" => Tag::Sts,
            "SubFmlyCd" => Tag::SubFmlyCd,
            "Svcr" => Tag::Svcr,
            "ToDtTm" => Tag::ToDtTm,
            "Tp" => Tag::Tp,
            "TxAmt" => Tag::TxAmt,
            "TxDtls" => Tag::TxDtls,
            "TxId" => Tag::TxId,
            "UPIC" => Tag::Upic,
            "Ustrd" => Tag::Ustrd,
            "ValDt" => Tag::ValDt,
            _ => Tag::Other,
        }
    }
}

/// The message element: `BkToCstmrAcctRpt`, `BkToCstmrStmt` or `BkToCstmrDbtCdtNtfctn`, bare
/// (001.02 on) or with the version suffix the 001.01 schemas give it (`BkToCstmrAcctRptV01`,
/// `BkToCstmrStmtV01`, `BkToCstmrDbtCdtNtfctnV01`; any `V` and digits).
fn is_message_name(name: &str) -> bool {
    ["BkToCstmrAcctRpt", "BkToCstmrStmt", "BkToCstmrDbtCdtNtfctn"]
        .iter()
        .any(|message| {
            name.strip_prefix(message).is_some_and(|suffix| {
                suffix.is_empty()
                    || suffix.strip_prefix('V').is_some_and(|digits| {
                        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
                    })
            })
        })
}

/// The local part of a possibly prefixed name (`camt:Stmt` is `Stmt`).
fn local(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, local)| local)
}

fn offset(position: u64) -> usize {
    usize::try_from(position).unwrap_or(usize::MAX)
}

/// The value of the `Ccy` attribute of a start tag, if any.
fn currency_attribute(start: &BytesStart<'_>) -> Option<String> {
    start
        .attributes()
        .flatten()
        .find(|a| local(a.key.as_ref()) == "Ccy")
        .map(|a| a.value.trim().to_ascii_uppercase())
        .filter(|c| !c.is_empty())
}

/// Checks the document element: `Document` (or a message element) whose namespaces, if any
/// name a camt one, name camt.052/053/054.
fn check_root(start: &BytesStart<'_>, tag: Tag, line: usize) -> Result<(), ParseError> {
    let name = start.name();
    let name: &str = name.as_ref();
    if !matches!(tag, Tag::Document | Tag::Message) {
        return Err(ParseError::new(
            line,
            format!("the document element is <{name}>, not a CAMT <Document>"),
        ));
    }
    for attribute in start.attributes().flatten() {
        let key: &str = attribute.key.as_ref();
        if (key == "xmlns" || key.starts_with("xmlns:"))
            && attribute.value.contains(":xsd:")
            && namespace_message(&attribute.value).is_none()
        {
            return Err(ParseError::new(
                line,
                format!(
                    "the namespace {} is not a camt.052, camt.053 or camt.054 one",
                    attribute.value
                ),
            ));
        }
    }
    Ok(())
}

/// Reads the decoded document into a [`ParsedFile`].
pub(super) fn read(text: &str) -> Result<ParsedFile, ParseError> {
    let mut xml = quick_xml::Reader::from_str(text);
    let config = xml.config_mut();
    config.expand_empty_elements = true;
    config.check_end_names = true;
    config.trim_text(false);
    let mut lines = Lines::new(text);
    let mut builder = Builder::default();
    let mut stack: Vec<Tag> = Vec::with_capacity(32);
    let mut value = String::new();
    let mut root_done = false;
    loop {
        let start = offset(xml.buffer_position());
        let event = match xml.read_event() {
            Ok(event) => event,
            Err(error) => {
                let line = lines.at(offset(xml.error_position()));
                return Err(ParseError::new(
                    line,
                    format!("the XML cannot be read: {error}"),
                ));
            }
        };
        match event {
            Event::Start(element) => {
                let line = lines.at(start);
                if stack.len() >= MAX_DEPTH {
                    return Err(ParseError::new(
                        line,
                        format!("elements are nested more than {MAX_DEPTH} deep"),
                    ));
                }
                let name = element.name();
                let tag = Tag::from_local(local(name.as_ref()));
                if stack.is_empty() {
                    if root_done {
                        return Err(ParseError::new(
                            line,
                            "an element follows the end of the document element",
                        ));
                    }
                    check_root(&element, tag, line)?;
                }
                stack.push(tag);
                value.clear();
                let currency = if tag == Tag::Amt {
                    currency_attribute(&element)
                } else {
                    None
                };
                builder.start(&stack, line, currency)?;
            }
            Event::End(_) => {
                let line = lines.at(start);
                builder.end(&stack, value.trim(), line)?;
                stack.pop();
                value.clear();
                if stack.is_empty() {
                    root_done = true;
                }
            }
            Event::Text(content) => {
                if !stack.is_empty() {
                    value.push_str(&content.xml10_content());
                } else if !content.trim().is_empty() {
                    return Err(ParseError::new(
                        lines.at(start),
                        "text outside the document element",
                    ));
                }
            }
            Event::CData(content) => value.push_str(&content.xml10_content()),
            Event::GeneralRef(reference) => {
                let line = lines.at(start);
                let decoded = match reference.resolve_char_ref() {
                    Ok(Some(c)) => c,
                    Ok(None) => match &*reference {
                        "lt" => '<',
                        "gt" => '>',
                        "amp" => '&',
                        "apos" => '\'',
                        "quot" => '"',
                        other => {
                            return Err(ParseError::new(
                                line,
                                format!("the entity &{other}; is not defined"),
                            ));
                        }
                    },
                    Err(error) => {
                        return Err(ParseError::new(
                            line,
                            format!("a character reference cannot be read: {error}"),
                        ));
                    }
                };
                value.push(decoded);
            }
            Event::DocType(_) => {
                return Err(ParseError::new(
                    lines.at(start),
                    "document type declarations (<!DOCTYPE>) are refused",
                ));
            }
            Event::Empty(_) | Event::Comment(_) | Event::Decl(_) | Event::PI(_) => {}
            Event::Eof => break,
        }
    }
    if !stack.is_empty() {
        return Err(ParseError::new(
            lines.at(text.len()),
            "the file ends before the document is closed",
        ));
    }
    if !root_done {
        return Err(ParseError::new(0, "the file has no XML document element"));
    }
    builder.finish()
}
