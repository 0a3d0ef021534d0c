//! Rebuilds the crate when a migration changes: `sqlx::migrate!` embeds the migration files at
//! compile time, and a procedural macro cannot ask Cargo to watch them. Also sets `cfg(sql)`
//! when a SQL backend (`sqlite` or `postgres`) is on, so the record types derive sqlx's row
//! decoding only when sqlx is compiled.

fn main() {
    println!("cargo::rerun-if-changed=migrations");
    println!("cargo::rustc-check-cfg=cfg(sql)");
    let sql = ["CARGO_FEATURE_SQLITE", "CARGO_FEATURE_POSTGRES"]
        .iter()
        .any(|feature| std::env::var_os(feature).is_some());
    if sql {
        println!("cargo::rustc-cfg=sql");
    }
}
