//! Rebuilds the crate when a migration changes: `sqlx::migrate!` embeds the migration files at
//! compile time, and a procedural macro cannot ask Cargo to watch them.

fn main() {
    println!("cargo::rerun-if-changed=migrations");
}
