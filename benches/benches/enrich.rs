//! What enrichment costs one imported row, to set beside an import's cost per row
//! (`benches/load/import-throughput.sh`): the writer's derivation for a new row (the merchant
//! name from its description, the category of its bank transaction code, of its merchant
//! category code) over the descriptions the throughput script's files carry, and the merchant
//! name alone over descriptors of other styles.
//!
//! `cargo bench --workspace --profile measure --bench enrich`.

use aggregation_core::enrich::codes::{bank_code_category_text, merchant_code_category};
use aggregation_core::enrich::merchant::merchant_name;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// The descriptions of `benches/load/import-throughput.sh`'s files (one of each merchant).
const IMPORTED: [&str; 10] = [
    "SQ *BLUE BOTTLE COFFEE 417 OAKLAND CA 1417",
    "AMZN Mktp US*2K4418 Seattle WA 1418",
    "SHELL OIL 5744419 BERKELEY CA 1419",
    "PAYPAL *SPOTIFY 40293420 1420",
    "TST* THE BURGER JOINT 421 1421",
    "UBER *TRIP HELP.UBER.COM 422 1422",
    "CITY OF OAKLAND PARKING 423 1423",
    "KARTENZAHLUNG REWE MARKT 424 BERLIN 1424",
    "SEPA-Lastschrift Stadtwerke Muenchen 425 1425",
    "WHOLEFDS MKT #10426 SAN FRANCISCO CA 1426",
];

/// Descriptors of other styles: long SEPA texts, dates and card numbers before the name.
const OTHERS: [&str; 6] = [
    "PURCHASE AUTHORIZED ON 03/14 TRADER JOE S #552 SAN JOSE CA S386073581573812 CARD 1234",
    "KARTENZAHLUNG 12.03. 10:14 dm-drogerie markt",
    "SEPA-UEBERWEISUNG EREF+MB000000004711 SVWZ+Rechnung 2026-0311 Hausverwaltung Schmidt GmbH",
    "PAIEMENT CB 1203 PARIS MONOPRIX 4519 CARTE 4974XXXXXXXX1234",
    "Card purchase 123456",
    "TOAST *JOE'S PIZZA NEW YORK NY 10012",
];

fn enrich(c: &mut Criterion) {
    let mut group = c.benchmark_group("enrich_per_row");
    group.throughput(Throughput::Elements(IMPORTED.len() as u64));
    // What the writer derives for each new row of an OFX or CSV import (no codes there: the
    // subtype is the OFX TRNTYPE or none, and no merchant category code).
    group.bench_function("derive_imported_rows", |b| {
        b.iter(|| {
            for description in IMPORTED {
                let name = merchant_name(std::hint::black_box(description));
                let bank = bank_code_category_text(std::hint::black_box("DEBIT"));
                std::hint::black_box((name, bank));
            }
        });
    });
    group.bench_function("merchant_name_imported_rows", |b| {
        b.iter(|| {
            for description in IMPORTED {
                std::hint::black_box(merchant_name(std::hint::black_box(description)));
            }
        });
    });
    group.throughput(Throughput::Elements(OTHERS.len() as u64));
    group.bench_function("merchant_name_other_styles", |b| {
        b.iter(|| {
            for description in OTHERS {
                std::hint::black_box(merchant_name(std::hint::black_box(description)));
            }
        });
    });
    group.throughput(Throughput::Elements(2));
    group.bench_function("codes", |b| {
        b.iter(|| {
            std::hint::black_box(bank_code_category_text(std::hint::black_box(
                "PMNT/RCDT/SALA",
            )));
            std::hint::black_box(merchant_code_category(std::hint::black_box("5814")));
        });
    });
    group.finish();
}

criterion_group!(benches, enrich);
criterion_main!(benches);
