#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod schwab;
mod simplefin;

pub use schwab::SchwabSandbox;
pub use simplefin::{CHECKING_ID, SANDBOX_ERROR, SimplefinSandbox};
