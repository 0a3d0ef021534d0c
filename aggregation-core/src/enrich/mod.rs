//! Enrichment of transactions: the category taxonomy, merchant names derived from bank
//! descriptions, and the mappings from codes banks send (ISO 18245 merchant category codes,
//! ISO 20022 bank transaction codes) to categories. Pure functions over static tables: no
//! store, no I/O, deterministic.
//!
//! ```
//! use aggregation_core::enrich::{codes, merchant, taxonomy};
//!
//! let description = "SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA";
//! assert_eq!(merchant::merchant_name(description).as_deref(), Some("Blue Bottle Coffee"));
//! let category = codes::merchant_code_category("5814").and_then(taxonomy::category);
//! assert_eq!(category.map(|c| c.primary), Some("FOOD_AND_DRINK"));
//! ```

pub mod codes;
pub mod merchant;
pub mod taxonomy;
