#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod schwab;

pub use schwab::SchwabSandbox;
