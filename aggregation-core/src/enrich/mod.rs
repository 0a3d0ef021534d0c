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
pub mod rules;
pub mod taxonomy;

/// What the writer derives for a new row from what its source reported: the merchant name
/// (from the description) and, from a bank transaction code (`DOMAIN/FAMILY/SUBFAMILY`, as
/// CAMT's `BkTxCd` arrives in the row's `subtype`), the code and its category.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Derived {
    /// The merchant a description names.
    pub(crate) merchant_name: Option<String>,
    /// The bank transaction code, when the subtype is one.
    pub(crate) bank_code: Option<String>,
    /// The detailed category that code names.
    pub(crate) bank_code_category: Option<&'static str>,
}

/// [`Derived`] of a row with this description and subtype.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn derive(description: Option<&str>, subtype: Option<&str>) -> Derived {
    let bank_code_category = subtype.and_then(codes::bank_code_category_text);
    Derived {
        merchant_name: description.and_then(merchant::merchant_name),
        bank_code: bank_code_category
            .and(subtype)
            .map(|code| code.trim().to_owned()),
        bank_code_category,
    }
}

#[cfg(all(test, any(feature = "sqlite", feature = "postgres")))]
mod derive_tests {
    use super::*;

    #[test]
    fn a_bank_code_names_its_category_and_a_description_its_merchant() {
        let salary = derive(Some("ACME GMBH LOHN 03/2026"), Some("PMNT/RCDT/SALA"));
        assert_eq!(salary.bank_code.as_deref(), Some("PMNT/RCDT/SALA"));
        assert_eq!(
            salary.bank_code_category,
            codes::bank_code_category_text("PMNT/RCDT/SALA")
        );
        assert!(salary.bank_code_category.is_some());
        let card = derive(
            Some("SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA"),
            Some("DEBIT"),
        );
        assert_eq!(card.merchant_name.as_deref(), Some("Blue Bottle Coffee"));
        assert_eq!(card.bank_code, None);
        assert_eq!(card.bank_code_category, None);
        assert_eq!(derive(None, None), Derived::default());
    }
}
