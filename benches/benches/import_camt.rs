//! CAMT.053 parsing speed beside OFX's: the same entries (about 1 MiB of camt.053.001.08,
//! every tenth entry a batch of two transaction details) and an OFX 2.x statement of the same
//! transactions, each parsed through the hidden `aggregation_core::import::fuzz` entry point
//! that the import framework uses.
//!
//! `cargo bench -p aggregation-benches --bench import_camt`; throughput is reported in bytes/s
//! for each format.
//!
//! `import_camt_scaling` parses a statement and one of twice as many entries, one entry with
//! 10,000 transaction details and one with 20,000 (their texts joined into one row), and a
//! statement whose entries repeat references (dropped as duplicates) at both sizes: the time of
//! each pair should be about double (no step is quadratic).

use aggregation_core::import::fuzz;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Entries in the benchmark files: about 1 MiB of CAMT.
const ENTRIES: usize = 1_100;

/// The amount of entry `i`, in cents, and whether it is a credit.
fn entry(i: usize) -> (i64, bool) {
    (
        i64::try_from(i % 9_973).unwrap_or_default() + 1,
        i.is_multiple_of(3),
    )
}

fn money(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// A camt.053.001.08 statement with `count` entries.
fn camt(count: usize) -> String {
    camt_with_references(count, None)
}

/// A camt.053.001.08 statement with `count` entries, their references repeating every
/// `repeat` entries when given (else each its own).
fn camt_with_references(count: usize, repeat: Option<usize>) -> String {
    let mut entries = String::with_capacity(count * 1_000);
    for i in 0..count {
        let (cents, credit) = entry(i);
        let amount = money(cents);
        let cdi = if credit { "CRDT" } else { "DBIT" };
        let reference = match repeat {
            Some(every) => format!("R{}", i % every),
            None => format!("GEN{i}"),
        };
        let details = if i.is_multiple_of(10) {
            format!(
                "<NtryDtls><TxDtls><Refs><TxId>G{i}-1</TxId></Refs><Amt Ccy=\"EUR\">{amount}</Amt>\
                 <CdtDbtInd>{cdi}</CdtDbtInd><RltdPties><Dbtr><Pty><Nm>Payer {i}</Nm></Pty></Dbtr>\
                 <Cdtr><Pty><Nm>Payee {i}</Nm></Pty></Cdtr></RltdPties><RmtInf><Ustrd>Batch part \
                 one of entry {i}</Ustrd></RmtInf></TxDtls><TxDtls><Refs><TxId>G{i}-2</TxId>\
                 </Refs><Amt Ccy=\"EUR\">0.00</Amt><CdtDbtInd>{cdi}</CdtDbtInd></TxDtls></NtryDtls>"
            )
        } else {
            format!(
                "<NtryDtls><TxDtls><Refs><EndToEndId>E2E-{i}</EndToEndId><TxId>T{i}</TxId></Refs>\
                 <RltdPties><Dbtr><Pty><Nm>Payer number {i}</Nm></Pty></Dbtr><Cdtr><Pty><Nm>Payee \
                 number {i}</Nm></Pty></Cdtr></RltdPties><RmtInf><Ustrd>Invoice {i} of the \
                 generated statement</Ustrd><Ustrd>second line</Ustrd></RmtInf></TxDtls>\
                 </NtryDtls>"
            )
        };
        entries.push_str(&format!(
            "\n<Ntry><Amt Ccy=\"EUR\">{amount}</Amt><CdtDbtInd>{cdi}</CdtDbtInd><Sts><Cd>BOOK</Cd>\
             </Sts><BookgDt><Dt>2024-01-31</Dt></BookgDt><ValDt><Dt>2024-01-31</Dt></ValDt>\
             <AcctSvcrRef>{reference}</AcctSvcrRef><BkTxCd><Domn><Cd>PMNT</Cd><Fmly><Cd>RCDT</Cd>\
             <SubFmlyCd>ESCT</SubFmlyCd></Fmly></Domn></BkTxCd>{details}</Ntry>"
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Document xmlns=\"urn:iso:std:iso:20022:\
         tech:xsd:camt.053.001.08\"><BkToCstmrStmt><GrpHdr><MsgId>B</MsgId><CreDtTm>\
         2024-01-31T20:00:00</CreDtTm></GrpHdr><Stmt><Id>B-1</Id><Acct><Id><IBAN>\
         DE89370400440532013000</IBAN></Id><Ccy>EUR</Ccy></Acct>{entries}\n</Stmt>\
         </BkToCstmrStmt></Document>\n"
    )
}

/// An OFX 2.x bank statement of the same entries (one transaction per entry).
fn ofx(count: usize) -> String {
    let mut transactions = String::with_capacity(count * 300);
    for i in 0..count {
        let (cents, credit) = entry(i);
        let (kind, sign) = if credit {
            ("CREDIT", "")
        } else {
            ("DEBIT", "-")
        };
        transactions.push_str(&format!(
            "<STMTTRN><TRNTYPE>{kind}</TRNTYPE><DTPOSTED>20240131</DTPOSTED><TRNAMT>{sign}{}\
             </TRNAMT><FITID>GEN{i}</FITID><NAME>Payer number {i}</NAME><MEMO>Invoice {i} of the \
             generated statement second line</MEMO></STMTTRN>\n",
            money(cents)
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<?OFX OFXHEADER=\"200\" VERSION=\"220\" \
         SECURITY=\"NONE\" OLDFILEUID=\"NONE\" NEWFILEUID=\"NONE\"?>\n<OFX><SIGNONMSGSRSV1><SONRS>\
         <STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS><DTSERVER>20240131</DTSERVER>\
         <LANGUAGE>ENG</LANGUAGE></SONRS></SIGNONMSGSRSV1><BANKMSGSRSV1><STMTTRNRS><TRNUID>1\
         </TRNUID><STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS><STMTRS><CURDEF>EUR\
         </CURDEF><BANKACCTFROM><BANKID>37040044</BANKID><ACCTID>0532013000</ACCTID><ACCTTYPE>\
         CHECKING</ACCTTYPE></BANKACCTFROM><BANKTRANLIST><DTSTART>20240131</DTSTART><DTEND>\
         20240131</DTEND>\n{transactions}</BANKTRANLIST><LEDGERBAL><BALAMT>0</BALAMT><DTASOF>\
         20240131</DTASOF></LEDGERBAL></STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>\n"
    )
}

fn parse(c: &mut Criterion) {
    let camt = camt(ENTRIES);
    let ofx = ofx(ENTRIES);
    assert!(
        fuzz::parse("camt.053", camt.as_bytes()),
        "the CAMT file reads"
    );
    assert!(fuzz::parse("ofx", ofx.as_bytes()), "the OFX file reads");
    let mut group = c.benchmark_group("import_camt");
    for (name, code, file) in [("camt.053", "camt.053", &camt), ("ofx", "ofx", &ofx)] {
        group.throughput(Throughput::Bytes(file.len() as u64));
        group.bench_function(name, |b| b.iter(|| fuzz::parse(code, file.as_bytes())));
    }
    group.finish();
}

/// A statement of one entry with `count` transaction details whose amounts are not given
/// (so the entry stays one row and every detail's text is joined into it).
fn one_entry_with_details(count: usize) -> String {
    let mut details = String::with_capacity(count * 100);
    for i in 0..count {
        details.push_str(&format!(
            "<TxDtls><Refs><TxId>D{i}</TxId></Refs><RmtInf><Ustrd>Detail {i} of the batch\
             </Ustrd></RmtInf></TxDtls>\n"
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Document xmlns=\"urn:iso:std:iso:20022:\
         tech:xsd:camt.053.001.08\"><BkToCstmrStmt><GrpHdr><MsgId>B</MsgId><CreDtTm>\
         2024-01-31T20:00:00</CreDtTm></GrpHdr><Stmt><Id>B-1</Id><Acct><Id><IBAN>\
         DE89370400440532013000</IBAN></Id><Ccy>EUR</Ccy></Acct><Ntry><Amt Ccy=\"EUR\">1.00\
         </Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts><BookgDt><Dt>2024-01-31</Dt>\
         </BookgDt><NtryDtls>\n{details}</NtryDtls></Ntry></Stmt></BkToCstmrStmt></Document>\n"
    )
}

/// Sizes side by side: each file and one twice its size.
fn scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("import_camt_scaling");
    group.sample_size(10);
    let files = [
        ("statement_1100_entries", camt(ENTRIES)),
        ("statement_2200_entries", camt(2 * ENTRIES)),
        ("one_entry_10k_details", one_entry_with_details(10_000)),
        ("one_entry_20k_details", one_entry_with_details(20_000)),
        (
            "repeated_references_1100",
            camt_with_references(ENTRIES, Some(100)),
        ),
        (
            "repeated_references_2200",
            camt_with_references(2 * ENTRIES, Some(100)),
        ),
    ];
    for (name, file) in &files {
        assert!(fuzz::parse("camt.053", file.as_bytes()), "{name} reads");
        group.throughput(Throughput::Bytes(file.len() as u64));
        group.bench_function(*name, |b| {
            b.iter(|| fuzz::parse("camt.053", std::hint::black_box(file.as_bytes())));
        });
    }
    group.finish();
}

criterion_group!(benches, parse, scaling);
criterion_main!(benches);
