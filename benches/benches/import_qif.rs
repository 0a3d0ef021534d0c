//! QIF import: parsing a generated ~1 MiB bank file through the import framework's entry point
//! (`aggregation_core::import::fuzz::parse`), beside an OFX 1.x file of the same entries.
//!
//! `cargo bench -p aggregation-benches --bench import_qif`. Throughput is reported in bytes/s
//! (criterion's MB/s) and entries/s for both files.

use std::time::Duration;

use aggregation_core::import::fuzz;
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

/// The size the QIF file grows to.
const TARGET_BYTES: usize = 1 << 20;

/// One entry of both files.
struct Entry {
    month: usize,
    day: usize,
    cents: i64,
    payee: String,
    memo: &'static str,
}

fn entries() -> Vec<Entry> {
    let mut out = Vec::new();
    let mut size = 0;
    let mut n = 0usize;
    while size < TARGET_BYTES {
        let entry = Entry {
            month: n / 28 % 12 + 1,
            day: n % 28 + 1,
            cents: if n.is_multiple_of(7) {
                i64::try_from(n % 100_000).unwrap_or_default() * 3 + 1
            } else {
                -(i64::try_from(n % 100_000).unwrap_or_default() + 1)
            },
            payee: format!("Merchant {}", n % 997),
            memo: "Card purchase",
        };
        size += qif_record(&entry).len();
        out.push(entry);
        n += 1;
    }
    out
}

fn amount(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}{}.{:02}", cents / 100, cents % 100)
}

fn qif_record(entry: &Entry) -> String {
    format!(
        "D{}/{:2}'24\nT{}\nC*\nP{}\nM{}\nLShopping\n^\n",
        entry.month,
        entry.day,
        amount(entry.cents),
        entry.payee,
        entry.memo
    )
}

fn qif(entries: &[Entry]) -> String {
    let mut text = String::from("!Type:Bank\n");
    for entry in entries {
        text.push_str(&qif_record(entry));
    }
    text
}

fn ofx(entries: &[Entry]) -> String {
    let mut text = String::from(
        "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\nENCODING:USASCII\n\
         CHARSET:1252\nCOMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n<OFX>\n\
         <SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS>\n\
         <DTSERVER>20241231<LANGUAGE>ENG<FI><ORG>Bench Bank<FID>1</FI></SONRS></SIGNONMSGSRSV1>\n\
         <BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>\n\
         <STMTRS><CURDEF>USD<BANKACCTFROM><BANKID>021000021<ACCTID>123456789\
         <ACCTTYPE>CHECKING</BANKACCTFROM>\n<BANKTRANLIST><DTSTART>20240101<DTEND>20241231\n",
    );
    for (i, entry) in entries.iter().enumerate() {
        text.push_str(&format!(
            "<STMTTRN>\n<TRNTYPE>{}\n<DTPOSTED>2024{:02}{:02}\n<TRNAMT>{}\n<FITID>F{i}\n\
             <NAME>{}\n<MEMO>{}\n</STMTTRN>\n",
            if entry.cents < 0 { "DEBIT" } else { "CREDIT" },
            entry.month,
            entry.day,
            amount(entry.cents),
            entry.payee,
            entry.memo
        ));
    }
    text.push_str(
        "</BANKTRANLIST><LEDGERBAL><BALAMT>100.00<DTASOF>20241231</LEDGERBAL>\n\
         </STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>\n",
    );
    text
}

fn parse(c: &mut Criterion) {
    let entries = entries();
    let files = [("qif", qif(&entries)), ("ofx", ofx(&entries))];
    for (format, text) in &files {
        assert!(fuzz::parse(format, text.as_bytes()), "{format} parses");
    }
    let mut group = c.benchmark_group("import_qif_1mib");
    group.sample_size(20);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for (format, text) in &files {
        group.throughput(Throughput::BytesDecimal(text.len() as u64));
        group.bench_function(*format, |b| {
            b.iter(|| fuzz::parse(format, std::hint::black_box(text.as_bytes())));
        });
    }
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
