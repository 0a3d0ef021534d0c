//! CSV parsing throughput beside OFX of the same entries: a generated CSV file of about 1 MiB
//! (a German bank's layout: preamble lines, `;` delimiter, quoted cells, decimal comma,
//! thousands dot, day-first dates, a balance column) and an OFX 1.x file of the same entries,
//! both through the hidden `aggregation_core::import::fuzz::parse` entry point the fuzz targets
//! use (CSV without a mapping: everything detected).
//!
//! `cargo bench -p aggregation-benches --bench import_csv`. Reported in bytes/s and
//! entries/s. The `import_csv_size` group parses the CSV file and one twice its size: the
//! second should take about twice the time. `import_csv_duplicates` does the same with files
//! whose rows each come four times (identical rows: the reused-id step numbers them).

use std::time::Duration;

use aggregation_benches::{OfxBankLine, bank_statement_ofx1};
use aggregation_core::import::fuzz;
use chrono::{DateTime, TimeDelta, Utc};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

/// Target size of the CSV file.
const TARGET_BYTES: usize = 1024 * 1024;

/// One entry: amount in cents (signed), purpose, counterparty, day offset.
struct Entry {
    cents: i64,
    purpose: String,
    name: String,
    day: i64,
}

fn entry(i: usize) -> Entry {
    let credit = i.is_multiple_of(7);
    let cents = i64::try_from(i % 250_000).unwrap_or_default() + 1;
    Entry {
        cents: if credit { cents } else { -cents },
        purpose: format!("Rechnung {i} vom 02.01.2025; Kundennummer {}", i % 997),
        name: format!("Händler {}", i % 997),
        day: i64::try_from(i / 40).unwrap_or_default(),
    }
}

/// `1.234,56` with a leading `-` for money out.
fn amount(cents: i64) -> String {
    let c = cents.unsigned_abs();
    let units = (c / 100).to_string();
    let mut grouped = String::new();
    for (k, digit) in units.chars().enumerate() {
        if k > 0 && (units.len() - k).is_multiple_of(3) {
            grouped.push('.');
        }
        grouped.push(digit);
    }
    let sign = if cents < 0 { "-" } else { "" };
    format!("{sign}{grouped},{:02}", c % 100)
}

fn start() -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_735_776_000, 0).expect("2025-01-02")
}

/// The CSV file of about `target` bytes and how many entries it holds.
fn csv_file(target: usize) -> (Vec<u8>, usize) {
    let mut out = String::with_capacity(target + 4096);
    out.push_str("\"Girokonto\";\"DE00 1234 5678 9012 3456 78\"\n\"\"\n");
    out.push_str("\"Buchungstag\";\"Wertstellung\";\"Auftraggeber/Empfänger\";\"Verwendungszweck\";\"Betrag (EUR)\";\"Saldo (EUR)\"\n");
    let mut balance: i64 = 0;
    let mut i = 0;
    while out.len() < target {
        let e = entry(i);
        i += 1;
        balance += e.cents;
        let date = (start() + TimeDelta::days(e.day)).format("%d.%m.%Y");
        out.push_str(&format!(
            "\"{date}\";\"{date}\";\"{}\";\"{}\";\"{}\";\"{}\"\n",
            e.name,
            e.purpose,
            amount(e.cents),
            amount(balance)
        ));
    }
    (out.into_bytes(), i)
}

/// An OFX 1.x bank statement of the same entries.
fn ofx_file(count: usize) -> Vec<u8> {
    let lines = (0..count).map(|i| {
        let e = entry(i);
        OfxBankLine {
            fit_id: format!("F{i:010}"),
            posted: start() + TimeDelta::days(e.day),
            cents: e.cents,
            name: e.name,
            memo: e.purpose,
        }
    });
    bank_statement_ofx1(lines, start(), start() + TimeDelta::days(365))
}

fn parse(c: &mut Criterion) {
    let (csv, entries) = csv_file(TARGET_BYTES);
    let ofx = ofx_file(entries);
    assert!(fuzz::parse("csv", &csv), "the generated CSV file parses");
    assert!(fuzz::parse("ofx", &ofx), "the generated OFX file parses");
    let mut group = c.benchmark_group("import_csv_parse_1mib");
    group.sample_size(20);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for (name, code, bytes) in [("csv", "csv", &csv), ("ofx_same_entries", "ofx", &ofx)] {
        group.throughput(Throughput::ElementsAndBytes {
            elements: entries as u64,
            bytes: bytes.len() as u64,
        });
        group.bench_function(name, |b| {
            b.iter(|| fuzz::parse(code, std::hint::black_box(bytes)));
        });
    }
    group.finish();
}

/// The cost of a file twice as large: the ratio of the two times should be about 2 (linear
/// parsing, decisions.md "One user's work never hurts another's").
fn twice_the_size(c: &mut Criterion) {
    let mut group = c.benchmark_group("import_csv_size");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (name, target) in [("1x", TARGET_BYTES), ("2x", 2 * TARGET_BYTES)] {
        let (csv, entries) = csv_file(target);
        assert!(fuzz::parse("csv", &csv), "the generated CSV file parses");
        group.throughput(Throughput::ElementsAndBytes {
            elements: entries as u64,
            bytes: csv.len() as u64,
        });
        group.bench_function(name, |b| {
            b.iter(|| fuzz::parse("csv", std::hint::black_box(&csv)));
        });
    }
    group.finish();
}

/// A CSV file of about `target` bytes whose rows each come `copies` times in a row, and how
/// many rows it holds.
fn csv_with_duplicates(target: usize, copies: usize) -> (Vec<u8>, usize) {
    let (file, _) = csv_file(target / copies);
    let text = String::from_utf8(file).expect("utf-8");
    let mut lines = text.lines();
    let mut out = String::with_capacity(target + 4096);
    for header in lines.by_ref().take(3) {
        out.push_str(header);
        out.push('\n');
    }
    let mut rows = 0;
    for line in lines {
        for _ in 0..copies {
            out.push_str(line);
            out.push('\n');
            rows += 1;
        }
    }
    (out.into_bytes(), rows)
}

/// Many identical rows: twice the file, about twice the time (the duplicate numbering is a
/// hash set, never a scan per row).
fn many_duplicates(c: &mut Criterion) {
    let mut group = c.benchmark_group("import_csv_duplicates");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (name, target) in [("1x", TARGET_BYTES), ("2x", 2 * TARGET_BYTES)] {
        let (csv, rows) = csv_with_duplicates(target, 4);
        assert!(fuzz::parse("csv", &csv), "the generated CSV file parses");
        group.throughput(Throughput::ElementsAndBytes {
            elements: rows as u64,
            bytes: csv.len() as u64,
        });
        group.bench_function(name, |b| {
            b.iter(|| fuzz::parse("csv", std::hint::black_box(&csv)));
        });
    }
    group.finish();
}

criterion_group!(benches, parse, twice_the_size, many_duplicates);
criterion_main!(benches);
