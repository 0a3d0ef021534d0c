//! The concrete provider clients, each a [`Provider`](super::Provider) and nothing more:
//! Charles Schwab (feature `schwab`), SimpleFIN (feature `simplefin`), Enable Banking
//! (feature `enablebanking`) and Plaid (feature `plaid`). Their public types are re-exported from [`super`], where
//! embedders name them (`providers::SchwabProvider`, `providers::simplefin::…`).

#[cfg(feature = "schwab")]
pub(super) mod schwab;

#[cfg(feature = "simplefin")]
pub mod simplefin;

#[cfg(feature = "enablebanking")]
pub mod enablebanking;

#[cfg(feature = "plaid")]
pub mod plaid;
