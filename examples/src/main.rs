//! The reference server (a later release fills it in).

fn main() {}
