//! MT940 parsing throughput beside OFX of the same entries: a generated MT940 file of about
//! 1 MiB (German savings-bank dialect: structured `:86:` with SEPA keywords, statements of 500
//! entries) and an OFX 1.x file of the same entries, both through the hidden
//! `aggregation_core::import::fuzz::parse` entry point the fuzz targets use.
//!
//! `cargo bench -p aggregation-benches --bench import_mt940`. Reported in bytes/s and
//! entries/s.
//!
//! `import_mt940_scaling` parses a file and one twice its size, and an entry with many `:86:`
//! lines and one with twice as many: the time of each pair should be about double (parsing is
//! linear in the file's size).

use std::time::Duration;

use aggregation_benches::{OfxBankLine, bank_statement_ofx1};
use aggregation_core::import::fuzz;
use chrono::{DateTime, TimeDelta, Utc};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

/// Entries per statement of the MT940 file.
const PER_STATEMENT: usize = 500;
/// Target size of the MT940 file.
const TARGET_BYTES: usize = 1024 * 1024;

/// One entry: amount in cents (signed), purpose, counterparty, reference.
struct Entry {
    cents: i64,
    purpose: String,
    name: String,
    reference: String,
}

fn entry(i: usize) -> Entry {
    let credit = i.is_multiple_of(7);
    let cents = i64::try_from(i % 90_000).unwrap_or_default() + 1;
    Entry {
        cents: if credit { cents } else { -cents },
        purpose: format!("Rechnung {i} vom 02.01.2025 Kundennummer {}", i % 997),
        name: format!("Haendler {}", i % 997),
        reference: format!("B{i:010}"),
    }
}

fn amount(cents: i64) -> String {
    let c = cents.unsigned_abs();
    format!("{},{:02}", c / 100, c % 100)
}

/// An MT940 file of about `target` bytes and how many entries it holds.
fn mt940_file(target: usize) -> (Vec<u8>, usize) {
    let mut out = String::with_capacity(target + 64 * 1024);
    let mut balance: i64 = 0;
    let mut i = 0;
    let mut page = 0;
    while out.len() < target {
        page += 1;
        let mark = |b: i64| if b < 0 { 'D' } else { 'C' };
        out.push_str(&format!(
            ":20:STARTUMSE\r\n:25:10020030/0123456789\r\n:28C:{page}/1\r\n:60F:{}250102EUR{}\r\n",
            mark(balance),
            amount(balance)
        ));
        for _ in 0..PER_STATEMENT {
            let e = entry(i);
            i += 1;
            balance += e.cents;
            let dc = if e.cents < 0 { "D" } else { "C" };
            let purpose = format!("EREF+{}SVWZ+{}", e.reference, e.purpose);
            // 27-character subfields ?20, ?21, … as German banks cut them.
            let chars: Vec<char> = purpose.chars().collect();
            let subfields: String = chars
                .chunks(27)
                .enumerate()
                .map(|(k, c)| format!("?{}{}", 20 + k, c.iter().collect::<String>()))
                .collect();
            let details = format!(
                "166?00SEPA-UEBERWEISUNG?109310{subfields}?30BANKDEFFXXX?31DE02120300000000202051?32{}",
                e.name
            );
            // `:86:` lines of at most 65 characters.
            let chars: Vec<char> = details.chars().collect();
            let lines: Vec<String> = chars.chunks(65).map(|c| c.iter().collect()).collect();
            out.push_str(&format!(
                ":61:2501020102{dc}R{}N166NONREF//{}\r\n:86:{}\r\n",
                amount(e.cents),
                e.reference,
                lines.join("\r\n")
            ));
        }
        out.push_str(&format!(
            ":62F:{}250102EUR{}\r\n-\r\n",
            mark(balance),
            amount(balance)
        ));
    }
    (out.into_bytes(), i)
}

/// An OFX 1.x bank statement of the same entries.
fn ofx_file(count: usize) -> Vec<u8> {
    let start = DateTime::<Utc>::from_timestamp(1_735_776_000, 0).expect("2025-01-02");
    let lines = (0..count).map(|i| {
        let e = entry(i);
        OfxBankLine {
            fit_id: e.reference,
            posted: start,
            cents: e.cents,
            name: e.name,
            memo: e.purpose,
        }
    });
    bank_statement_ofx1(lines, start, start + TimeDelta::days(1))
}

fn parse(c: &mut Criterion) {
    let (mt940, entries) = mt940_file(TARGET_BYTES);
    let ofx = ofx_file(entries);
    assert!(
        fuzz::parse("mt940", &mt940),
        "the generated MT940 file parses"
    );
    assert!(fuzz::parse("ofx", &ofx), "the generated OFX file parses");
    let mut group = c.benchmark_group("import_mt940_parse_1mib");
    group.sample_size(20);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for (name, bytes) in [("mt940", &mt940), ("ofx_same_entries", &ofx)] {
        group.throughput(Throughput::ElementsAndBytes {
            elements: entries as u64,
            bytes: bytes.len() as u64,
        });
        let code = if name == "mt940" { "mt940" } else { "ofx" };
        group.bench_function(name, |b| {
            b.iter(|| fuzz::parse(code, std::hint::black_box(bytes)));
        });
    }
    group.finish();
}

/// One entry whose details run over `lines` `:86:` lines (one per line, as Rabobank writes).
fn many_86_lines(lines: usize) -> Vec<u8> {
    let mut out = String::from(":20:A\r\n:25:NL91ABNA0417164300\r\n:60F:C250101EUR0,00\r\n");
    out.push_str(":61:250102C1,00NTRFNONREF\r\n");
    for n in 0..lines {
        out.push_str(&format!(":86:detail line {n} of the entry\r\n"));
    }
    out.push_str(":62F:C250102EUR1,00\r\n-\r\n");
    out.into_bytes()
}

/// Sizes side by side: a file and one twice its size.
fn scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("import_mt940_scaling");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    let files = [
        ("statements_512kib", mt940_file(TARGET_BYTES / 2).0),
        ("statements_1mib", mt940_file(TARGET_BYTES).0),
        ("one_entry_10k_86_lines", many_86_lines(10_000)),
        ("one_entry_20k_86_lines", many_86_lines(20_000)),
    ];
    for (name, bytes) in &files {
        assert!(fuzz::parse("mt940", bytes), "{name} parses");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(*name, |b| {
            b.iter(|| fuzz::parse("mt940", std::hint::black_box(bytes)));
        });
    }
    group.finish();
}

criterion_group!(benches, parse, scaling);
criterion_main!(benches);
