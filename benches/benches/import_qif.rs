//! QIF import: parsing a generated ~1 MiB bank file through the import framework's entry point
//! (`aggregation_core::import::fuzz::parse`), beside an OFX 1.x file of the same entries
//! (written by `aggregation_benches::bank_statement_ofx1`, as the CSV and MT940 benches do).
//!
//! `cargo bench -p aggregation-benches --bench import_qif`. Throughput is reported in bytes/s
//! (criterion's MB/s) and entries/s for both files. The `import_qif_size` group parses the QIF
//! file and one twice its size: the second should take about twice the time.

use std::time::Duration;

use aggregation_benches::{OfxBankLine, bank_statement_ofx1};
use aggregation_core::import::fuzz;
use chrono::{DateTime, TimeZone, Utc};
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

fn entries(target: usize) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut size = 0;
    let mut n = 0usize;
    while size < target {
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

/// When an entry was posted (the QIF file writes the same day as `M/DD'24`).
fn posted(entry: &Entry) -> DateTime<Utc> {
    let month = u32::try_from(entry.month).unwrap_or(1);
    let day = u32::try_from(entry.day).unwrap_or(1);
    Utc.with_ymd_and_hms(2024, month, day, 0, 0, 0)
        .single()
        .unwrap_or_default()
}

/// The OFX 1.x file of the same entries, through the benches' shared builder.
fn ofx(entries: &[Entry]) -> Vec<u8> {
    let lines = entries.iter().enumerate().map(|(i, entry)| OfxBankLine {
        fit_id: format!("F{i}"),
        posted: posted(entry),
        cents: entry.cents,
        name: entry.payee.clone(),
        memo: entry.memo.to_owned(),
    });
    let start = Utc
        .with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default();
    let end = Utc
        .with_ymd_and_hms(2024, 12, 31, 0, 0, 0)
        .single()
        .unwrap_or_default();
    bank_statement_ofx1(lines, start, end)
}

fn parse(c: &mut Criterion) {
    let entries = entries(TARGET_BYTES);
    let files = [("qif", qif(&entries).into_bytes()), ("ofx", ofx(&entries))];
    for (format, bytes) in &files {
        assert!(fuzz::parse(format, bytes), "{format} parses");
    }
    let mut group = c.benchmark_group("import_qif_1mib");
    group.sample_size(20);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for (format, bytes) in &files {
        group.throughput(Throughput::ElementsAndBytes {
            elements: entries.len() as u64,
            bytes: bytes.len() as u64,
        });
        group.bench_function(*format, |b| {
            b.iter(|| fuzz::parse(format, std::hint::black_box(bytes)));
        });
    }
    group.finish();
}

/// The cost of a file twice as large: the ratio of the two times should be about 2 (linear
/// parsing, decisions.md "One user's work never hurts another's").
fn twice_the_size(c: &mut Criterion) {
    let mut group = c.benchmark_group("import_qif_size");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (name, target) in [("1x", TARGET_BYTES), ("2x", 2 * TARGET_BYTES)] {
        let entries = entries(target);
        let bytes = qif(&entries).into_bytes();
        assert!(fuzz::parse("qif", &bytes), "the generated QIF file parses");
        group.throughput(Throughput::ElementsAndBytes {
            elements: entries.len() as u64,
            bytes: bytes.len() as u64,
        });
        group.bench_function(name, |b| {
            b.iter(|| fuzz::parse("qif", std::hint::black_box(&bytes)));
        });
    }
    group.finish();
}

criterion_group!(benches, parse, twice_the_size);
criterion_main!(benches);
