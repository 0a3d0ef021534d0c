//! The reference server (placeholder; written separately).

fn main() {}
