#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod enablebanking;
mod plaid;
mod schwab;
mod simplefin;

pub use enablebanking::{DataRequest, EnableBankingSandbox};
pub use plaid::PlaidSandbox;
pub use schwab::SchwabSandbox;
pub use simplefin::{
    CHECKING_ID, RECONCILIATION_CHECKING_ID, RECONCILIATION_SAVINGS_ID, SANDBOX_ERROR,
    SimplefinSandbox,
};
