//! Codes the bank already sends, mapped to the taxonomy's detailed categories: ISO 18245
//! merchant category codes (on card payments, e.g. Enable Banking's `merchant_category_code`)
//! and ISO 20022 bank transaction codes (CAMT's `BkTxCd`, domain/family/sub-family).
//!
//! ```
//! use aggregation_core::enrich::codes;
//!
//! assert_eq!(codes::merchant_code_category("5814"), Some("FOOD_AND_DRINK_FAST_FOOD"));
//! assert_eq!(codes::merchant_code_category("3012"), Some("TRAVEL_FLIGHTS"));
//! assert_eq!(codes::bank_code_category_text("PMNT/RCDT/SALA"), Some("INCOME_WAGES"));
//! assert_eq!(codes::bank_code_category("PMNT", "CCRD", "POSD"), None);
//! ```

/// One range of merchant category codes, both ends included.
struct CodeRange {
    first: u16,
    last: u16,
    category: &'static str,
}

const fn range(first: u16, last: u16, category: &'static str) -> CodeRange {
    CodeRange {
        first,
        last,
        category,
    }
}

const FD_RESTAURANT: &str = "FOOD_AND_DRINK_RESTAURANT";
const GM_OTHER: &str = "GENERAL_MERCHANDISE_OTHER_GENERAL_MERCHANDISE";
const GS_OTHER: &str = "GENERAL_SERVICES_OTHER_GENERAL_SERVICES";
const GS_AUTO: &str = "GENERAL_SERVICES_AUTOMOTIVE";
const HI_REPAIR: &str = "HOME_IMPROVEMENT_REPAIR_AND_MAINTENANCE";
const HI_HARDWARE: &str = "HOME_IMPROVEMENT_HARDWARE";
const HI_FURNITURE: &str = "HOME_IMPROVEMENT_FURNITURE";
const HI_OTHER: &str = "HOME_IMPROVEMENT_OTHER_HOME_IMPROVEMENT";
const EN_OTHER: &str = "ENTERTAINMENT_OTHER_ENTERTAINMENT";
const EN_EVENTS: &str = "ENTERTAINMENT_SPORTING_EVENTS_AMUSEMENT_PARKS_AND_MUSEUMS";
const EN_GAMBLING: &str = "ENTERTAINMENT_CASINOS_AND_GAMBLING";
const EN_MOVIES: &str = "ENTERTAINMENT_TV_AND_MOVIES";
const MD_OTHER: &str = "MEDICAL_OTHER_MEDICAL";
const ELECTRONICS: &str = "GENERAL_MERCHANDISE_ELECTRONICS";
const CLOTHING: &str = "GENERAL_MERCHANDISE_CLOTHING_AND_ACCESSORIES";
const GIFTS: &str = "GENERAL_MERCHANDISE_GIFTS_AND_NOVELTIES";
const OFFICE: &str = "GENERAL_MERCHANDISE_OFFICE_SUPPLIES";
const BOOKS: &str = "GENERAL_MERCHANDISE_BOOKSTORES_AND_NEWSSTANDS";
const SPORTING: &str = "GENERAL_MERCHANDISE_SPORTING_GOODS";
const GROCERIES: &str = "FOOD_AND_DRINK_GROCERIES";
const PHARMACY: &str = "MEDICAL_PHARMACIES_AND_SUPPLEMENTS";
const GOVERNMENT: &str = "GOVERNMENT_AND_NON_PROFIT_GOVERNMENT_DEPARTMENTS_AND_AGENCIES";
const DONATIONS: &str = "GOVERNMENT_AND_NON_PROFIT_DONATIONS";
const TRANSPORT_OTHER: &str = "TRANSPORTATION_OTHER_TRANSPORTATION";
const TRANSIT: &str = "TRANSPORTATION_PUBLIC_TRANSIT";
const FLIGHTS: &str = "TRAVEL_FLIGHTS";
const LODGING: &str = "TRAVEL_LODGING";
const RENTAL_CARS: &str = "TRAVEL_RENTAL_CARS";
const TRAVEL_OTHER: &str = "TRAVEL_OTHER_TRAVEL";
const HAIR_BEAUTY: &str = "PERSONAL_CARE_HAIR_AND_BEAUTY";
const LAUNDRY: &str = "PERSONAL_CARE_LAUNDRY_AND_DRY_CLEANING";
const PERSONAL_OTHER: &str = "PERSONAL_CARE_OTHER_PERSONAL_CARE";
const WITHDRAWAL: &str = "TRANSFER_OUT_WITHDRAWAL";
const TRANSFER_OUT_OTHER: &str = "TRANSFER_OUT_OTHER_TRANSFER_OUT";
const INSURANCE: &str = "GENERAL_SERVICES_INSURANCE";
const EDUCATION: &str = "GENERAL_SERVICES_EDUCATION";
const LEGAL: &str = "GENERAL_SERVICES_CONSULTING_AND_LEGAL";
const ACCOUNTING: &str = "GENERAL_SERVICES_ACCOUNTING_AND_FINANCIAL_PLANNING";
const POSTAGE: &str = "GENERAL_SERVICES_POSTAGE_AND_SHIPPING";
const UTILITIES_OTHER: &str = "RENT_AND_UTILITIES_OTHER_UTILITIES";
const INTERNET: &str = "RENT_AND_UTILITIES_INTERNET_AND_CABLE";

/// Merchant category code ranges, sorted and disjoint: the blocks of ISO 18245 (as the card
/// networks publish them: Visa's Merchant Data Standards Manual, Mastercard's Quick Reference
/// Booklet) where one category fits the whole block. [`MERCHANT_CODES`] refines them.
static MERCHANT_CODE_RANGES: &[CodeRange] = &[
    range(1500, 1799, HI_REPAIR),   // contractors
    range(3000, 3350, FLIGHTS),     // airlines by name
    range(3351, 3500, RENTAL_CARS), // car rental agencies by name
    range(3501, 3999, LODGING),     // hotels and resorts by name
    range(4000, 4799, TRANSPORT_OTHER),
    range(4800, 4999, UTILITIES_OTHER),
    range(5000, 5199, GM_OTHER), // wholesale distributors
    range(5200, 5299, HI_HARDWARE),
    range(5300, 5399, GM_OTHER),
    range(5400, 5499, GROCERIES),
    range(5500, 5599, TRANSPORT_OTHER), // vehicle dealers and supplies
    range(5600, 5699, CLOTHING),
    range(5700, 5799, HI_FURNITURE),
    range(5800, 5899, FD_RESTAURANT),
    range(5900, 5999, GM_OTHER),
    range(6000, 6999, TRANSFER_OUT_OTHER), // financial institutions
    range(7000, 7099, LODGING),
    range(7200, 7299, PERSONAL_OTHER),
    range(7300, 7399, GS_OTHER), // business services
    range(7500, 7549, GS_AUTO),
    range(7600, 7699, HI_REPAIR),
    range(7800, 7999, EN_OTHER), // amusement and recreation
    range(8000, 8099, MD_OTHER),
    range(8100, 8999, GS_OTHER), // professional services and membership organisations
    range(9000, 9499, GOVERNMENT),
];

/// Individual merchant category codes of ISO 18245 whose category differs from their block's
/// (or that lie outside every block), sorted by code.
static MERCHANT_CODES: &[(u16, &str)] = &[
    (742, "MEDICAL_VETERINARY_SERVICES"),
    (763, GM_OTHER),  // agricultural co-operatives
    (780, HI_REPAIR), // landscaping and horticulture
    (2741, GS_OTHER), // publishing and printing
    (2791, GS_OTHER),
    (2842, HI_OTHER), // cleaning and sanitation preparations
    (4111, TRANSIT),
    (4112, TRANSIT),
    (4119, MD_OTHER), // ambulances
    (4121, "TRANSPORTATION_TAXIS_AND_RIDE_SHARES"),
    (4131, TRANSIT),
    (4214, POSTAGE),
    (4215, POSTAGE),
    (4225, "GENERAL_SERVICES_STORAGE"),
    (4411, TRAVEL_OTHER), // cruise lines
    (4457, TRAVEL_OTHER),
    (4511, FLIGHTS),
    (4582, FLIGHTS),
    (4722, TRAVEL_OTHER), // travel agencies and tour operators
    (4784, "TRANSPORTATION_TOLLS"),
    (4812, ELECTRONICS),
    (4814, "RENT_AND_UTILITIES_TELEPHONE"),
    (4816, INTERNET),
    (4829, TRANSFER_OUT_OTHER), // money transfer
    (4899, INTERNET),
    (4900, "RENT_AND_UTILITIES_GAS_AND_ELECTRICITY"),
    (5021, HI_FURNITURE),
    (5044, OFFICE),
    (5045, ELECTRONICS),
    (5111, OFFICE),
    (5122, PHARMACY),
    (5137, CLOTHING),
    (5139, CLOTHING),
    (5192, BOOKS),
    (5193, GIFTS),
    (5198, HI_HARDWARE),
    (5261, HI_REPAIR), // nurseries and garden supply
    (5271, HI_OTHER),
    (5300, "GENERAL_MERCHANDISE_SUPERSTORES"), // wholesale clubs
    (5309, "GENERAL_MERCHANDISE_DEPARTMENT_STORES"), // duty free
    (5310, "GENERAL_MERCHANDISE_DISCOUNT_STORES"),
    (5311, "GENERAL_MERCHANDISE_DEPARTMENT_STORES"),
    (5331, "GENERAL_MERCHANDISE_DISCOUNT_STORES"),
    (5441, "FOOD_AND_DRINK_OTHER_FOOD_AND_DRINK"), // candy and confectionery
    (5462, "FOOD_AND_DRINK_OTHER_FOOD_AND_DRINK"), // bakeries
    (5531, GS_AUTO),
    (5532, GS_AUTO),
    (5533, GS_AUTO),
    (5541, "TRANSPORTATION_GAS"),
    (5542, "TRANSPORTATION_GAS"),
    (5551, SPORTING),             // boat dealers
    (5552, "TRANSPORTATION_GAS"), // electric vehicle charging
    (5598, SPORTING),             // snowmobile dealers
    (5718, HI_OTHER),
    (5722, ELECTRONICS),
    (5732, ELECTRONICS),
    (5733, GM_OTHER), // music instruments
    (5734, ELECTRONICS),
    (5735, "ENTERTAINMENT_MUSIC_AND_AUDIO"),
    (5814, "FOOD_AND_DRINK_FAST_FOOD"),
    (5815, BOOKS),                                     // digital books, music and films
    (5816, "ENTERTAINMENT_VIDEO_GAMES"),               // digital games
    (5817, GS_OTHER),                                  // digital applications
    (5818, "GENERAL_MERCHANDISE_ONLINE_MARKETPLACES"), // large digital goods merchants
    (5912, PHARMACY),
    (5921, "FOOD_AND_DRINK_BEER_WINE_AND_LIQUOR"),
    (5940, SPORTING),
    (5941, SPORTING),
    (5942, BOOKS),
    (5943, OFFICE),
    (5944, CLOTHING), // jewellery and watches
    (5946, ELECTRONICS),
    (5947, GIFTS),
    (5948, CLOTHING), // luggage and leather goods
    (5950, HI_FURNITURE),
    (5960, INSURANCE),
    (5975, MD_OTHER),
    (5976, MD_OTHER),
    (5977, HAIR_BEAUTY), // cosmetics
    (5978, OFFICE),
    (5983, UTILITIES_OTHER), // heating oil and fuel dealers
    (5992, GIFTS),           // florists
    (5993, "GENERAL_MERCHANDISE_TOBACCO_AND_VAPE"),
    (5994, BOOKS),
    (5995, "GENERAL_MERCHANDISE_PET_SUPPLIES"),
    (5996, HI_OTHER),
    (5997, ELECTRONICS),
    (5998, HI_OTHER),
    (6010, WITHDRAWAL),
    (6011, WITHDRAWAL),
    (6211, "TRANSFER_OUT_INVESTMENT_AND_RETIREMENT_FUNDS"),
    (6300, INSURANCE),
    (6381, INSURANCE),
    (6399, INSURANCE),
    (6513, "RENT_AND_UTILITIES_RENT"),
    (7210, LAUNDRY),
    (7211, LAUNDRY),
    (7216, LAUNDRY),
    (7217, HI_OTHER),
    (7230, HAIR_BEAUTY),
    (7276, ACCOUNTING),
    (7296, CLOTHING),
    (7297, HAIR_BEAUTY),
    (7298, HAIR_BEAUTY),
    (7321, ACCOUNTING),
    (7342, HI_OTHER), // pest control
    (7349, HI_OTHER),
    (7392, LEGAL),
    (7393, "HOME_IMPROVEMENT_SECURITY"),
    (7512, RENTAL_CARS),
    (7513, RENTAL_CARS),
    (7519, RENTAL_CARS),
    (7523, "TRANSPORTATION_PARKING"),
    (7800, EN_GAMBLING),
    (7801, EN_GAMBLING),
    (7802, EN_GAMBLING),
    (7829, EN_MOVIES),
    (7832, EN_MOVIES),
    (7841, EN_MOVIES),
    (7922, EN_EVENTS),
    (7929, "ENTERTAINMENT_MUSIC_AND_AUDIO"),
    (7941, EN_EVENTS),
    (7991, EN_EVENTS),
    (7993, "ENTERTAINMENT_VIDEO_GAMES"),
    (7994, "ENTERTAINMENT_VIDEO_GAMES"),
    (7995, EN_GAMBLING),
    (7996, EN_EVENTS),
    (7997, "PERSONAL_CARE_GYMS_AND_FITNESS_CENTERS"),
    (7998, EN_EVENTS),
    (8011, "MEDICAL_PRIMARY_CARE"),
    (8021, "MEDICAL_DENTAL_CARE"),
    (8031, "MEDICAL_PRIMARY_CARE"),
    (8042, "MEDICAL_EYE_CARE"),
    (8043, "MEDICAL_EYE_CARE"),
    (8050, "MEDICAL_NURSING_CARE"),
    (8111, LEGAL),
    (8211, EDUCATION),
    (8220, EDUCATION),
    (8241, EDUCATION),
    (8244, EDUCATION),
    (8249, EDUCATION),
    (8299, EDUCATION),
    (8351, "GENERAL_SERVICES_CHILDCARE"),
    (8398, DONATIONS),
    (
        8641,
        "GOVERNMENT_AND_NON_PROFIT_OTHER_GOVERNMENT_AND_NON_PROFIT",
    ),
    (8651, DONATIONS),
    (8661, DONATIONS),
    (8675, GS_AUTO), // automobile associations
    (
        8699,
        "GOVERNMENT_AND_NON_PROFIT_OTHER_GOVERNMENT_AND_NON_PROFIT",
    ),
    (8911, LEGAL),
    (8931, ACCOUNTING),
    (9311, "GOVERNMENT_AND_NON_PROFIT_TAX_PAYMENT"),
    (9402, POSTAGE),
    (9950, "TRANSFER_OUT_ACCOUNT_TRANSFER"), // intra-company purchases
];

/// The detailed category of an ISO 18245 merchant category code given as a number, `None` for
/// a code no entry covers.
pub fn merchant_code_category_number(code: u16) -> Option<&'static str> {
    if let Ok(index) = MERCHANT_CODES.binary_search_by_key(&code, |&(entry, _)| entry) {
        return MERCHANT_CODES.get(index).map(|&(_, category)| category);
    }
    // The last range starting at or before the code, if it reaches the code.
    let after = MERCHANT_CODE_RANGES.partition_point(|entry| entry.first <= code);
    let candidate = MERCHANT_CODE_RANGES.get(after.checked_sub(1)?)?;
    (code <= candidate.last).then_some(candidate.category)
}

/// The detailed category of a merchant category code as providers send it: four ASCII digits
/// (leading zeros kept, surrounding spaces ignored, e.g. `"0742"` or `"5411"`). `None` for
/// anything else or a code no entry covers.
pub fn merchant_code_category(code: &str) -> Option<&'static str> {
    let code = code.trim();
    if code.len() != 4 || !code.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    merchant_code_category_number(code.parse().ok()?)
}

/// One row of the bank transaction code table; `ANY` in a part matches every code there.
struct BankCode {
    domain: &'static str,
    family: &'static str,
    sub_family: &'static str,
    category: &'static str,
}

const ANY: &str = "*";

const fn btc(
    domain: &'static str,
    family: &'static str,
    sub_family: &'static str,
    category: &'static str,
) -> BankCode {
    BankCode {
        domain,
        family,
        sub_family,
        category,
    }
}

const INTEREST_EARNED: &str = "INCOME_INTEREST_EARNED";
const INTEREST_CHARGE: &str = "BANK_FEES_INTEREST_CHARGE";
const BANK_FEES_OTHER: &str = "BANK_FEES_OTHER_BANK_FEES";
const TAX_PAYMENT: &str = "GOVERNMENT_AND_NON_PROFIT_TAX_PAYMENT";
const DEPOSIT: &str = "TRANSFER_IN_DEPOSIT";
const ACCOUNT_IN: &str = "TRANSFER_IN_ACCOUNT_TRANSFER";
const ACCOUNT_OUT: &str = "TRANSFER_OUT_ACCOUNT_TRANSFER";
const LOANS_IN: &str = "TRANSFER_IN_CASH_ADVANCES_AND_LOANS";

/// ISO 20022 bank transaction codes (the external code sets `ExternalBankTransactionDomain1Code`,
/// `...Family1Code` and `...SubFamily1Code` of the ISO 20022 Bank Transaction Code list, as
/// CAMT.052/053/054 carry them in `BkTxCd/Domn`) that name what a payment is for. The first row
/// matching a code wins, so exact rows come before the family-wide (`ANY`) ones. A code not here
/// says how money moved (a card payment, a SEPA transfer), not what for: no category.
static BANK_CODES: &[BankCode] = &[
    // Payments received (credit transfers, real-time ones, and direct debits collected back).
    btc("PMNT", "RCDT", "SALA", "INCOME_WAGES"),
    btc("PMNT", "RRCT", "SALA", "INCOME_WAGES"),
    btc("PMNT", "RCDT", "BOOK", ACCOUNT_IN),
    btc("PMNT", "RRCT", "BOOK", ACCOUNT_IN),
    btc("PMNT", "RCDT", "TAXE", "INCOME_TAX_REFUND"),
    btc("PMNT", "RCDT", "DVCA", "INCOME_DIVIDENDS"),
    btc("PMNT", "RCDT", "INTR", INTEREST_EARNED),
    // Payments issued.
    btc("PMNT", "ICDT", "BOOK", ACCOUNT_OUT),
    btc("PMNT", "IRCT", "BOOK", ACCOUNT_OUT),
    btc("PMNT", "ICDT", "TAXE", TAX_PAYMENT),
    btc("PMNT", "IDDT", "TAXE", TAX_PAYMENT),
    // Cash at cards and counters.
    btc("PMNT", "CCRD", "CWDL", WITHDRAWAL),
    btc("PMNT", "CCRD", "XBCW", WITHDRAWAL),
    btc("PMNT", "CCRD", "CDPT", DEPOSIT),
    btc("PMNT", "CNTR", "CWDL", WITHDRAWAL),
    btc("PMNT", "CNTR", "BCWD", WITHDRAWAL),
    btc("PMNT", "CNTR", "CDPT", DEPOSIT),
    btc("PMNT", "CNTR", "BCDP", DEPOSIT),
    btc("PMNT", "RCHQ", ANY, DEPOSIT),
    // Miscellaneous credit and debit operations, on payments and on the account itself.
    btc("PMNT", "MCOP", "INTR", INTEREST_EARNED),
    btc("PMNT", "MDOP", "INTR", INTEREST_CHARGE),
    btc("ACMT", "MCOP", "INTR", INTEREST_EARNED),
    btc("ACMT", "MDOP", "INTR", INTEREST_CHARGE),
    btc("ACMT", "MCOP", "TAXE", "INCOME_TAX_REFUND"),
    btc("ACMT", "MDOP", "TAXE", TAX_PAYMENT),
    btc("PMNT", "MDOP", "TAXE", TAX_PAYMENT),
    btc(ANY, ANY, "CHRG", BANK_FEES_OTHER),
    btc(ANY, ANY, "FEES", BANK_FEES_OTHER),
    btc(ANY, ANY, "COMM", BANK_FEES_OTHER),
    // Loans and deposits: drawdowns arrive, everything else on a loan is paying it.
    btc("LDAS", "MGLN", "DDWN", LOANS_IN),
    btc("LDAS", "CSLN", "DDWN", LOANS_IN),
    btc("LDAS", "FTLN", "DDWN", LOANS_IN),
    btc("LDAS", "NTLN", "DDWN", LOANS_IN),
    btc("LDAS", "MGLN", ANY, "LOAN_PAYMENTS_MORTGAGE_PAYMENT"),
    btc("LDAS", "CSLN", ANY, "LOAN_PAYMENTS_PERSONAL_LOAN_PAYMENT"),
    btc("LDAS", "FTLN", ANY, "LOAN_PAYMENTS_OTHER_PAYMENT"),
    btc("LDAS", "NTLN", ANY, "LOAN_PAYMENTS_OTHER_PAYMENT"),
    btc("LDAS", "FTDP", "INTR", INTEREST_EARNED),
    btc("LDAS", "NTDP", "INTR", INTEREST_EARNED),
    btc("LDAS", "FTDP", ANY, "TRANSFER_OUT_SAVINGS"),
    btc("LDAS", "NTDP", ANY, "TRANSFER_OUT_SAVINGS"),
    // Securities: income from holdings; trades move money to and from investments.
    btc("SECU", ANY, "DVCA", "INCOME_DIVIDENDS"),
    btc("SECU", ANY, "INTR", INTEREST_EARNED),
    btc(
        "SECU",
        "SETT",
        ANY,
        "TRANSFER_OUT_INVESTMENT_AND_RETIREMENT_FUNDS",
    ),
];

/// The detailed category an ISO 20022 bank transaction code names, from its domain, family and
/// sub-family codes (case-sensitive, as the standard writes them: `PMNT`, `RCDT`, `SALA`).
/// `None` when the code says nothing about what the payment was for.
pub fn bank_code_category(domain: &str, family: &str, sub_family: &str) -> Option<&'static str> {
    let matches = |pattern: &str, code: &str| pattern == ANY || pattern == code;
    BANK_CODES
        .iter()
        .find(|entry| {
            matches(entry.domain, domain)
                && matches(entry.family, family)
                && matches(entry.sub_family, sub_family)
        })
        .map(|entry| entry.category)
}

/// [`bank_code_category`] of a code written `DOMAIN/FAMILY/SUBFAMILY` (e.g. `PMNT/RCDT/SALA`,
/// surrounding spaces ignored); `None` for text not of that shape.
pub fn bank_code_category_text(code: &str) -> Option<&'static str> {
    let mut parts = code.trim().split('/');
    let (domain, family, sub_family) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    bank_code_category(domain, family, sub_family)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enrich::taxonomy;

    #[test]
    fn every_mapped_category_is_in_the_taxonomy() {
        let all = MERCHANT_CODE_RANGES
            .iter()
            .map(|entry| entry.category)
            .chain(MERCHANT_CODES.iter().map(|&(_, category)| category))
            .chain(BANK_CODES.iter().map(|entry| entry.category));
        for category in all {
            assert!(taxonomy::category(category).is_some(), "{category}");
        }
    }

    #[test]
    fn merchant_code_tables_are_sorted_and_ranges_disjoint() {
        assert!(MERCHANT_CODES.windows(2).all(|pair| pair[0].0 < pair[1].0));
        assert!(
            MERCHANT_CODE_RANGES
                .iter()
                .all(|entry| entry.first <= entry.last)
        );
        assert!(
            MERCHANT_CODE_RANGES
                .windows(2)
                .all(|pair| pair[0].last < pair[1].first)
        );
    }

    #[test]
    fn each_range_answers_for_its_ends_and_a_code_inside() {
        for entry in MERCHANT_CODE_RANGES {
            for code in [entry.first, (entry.first + entry.last) / 2, entry.last] {
                let expected = MERCHANT_CODES
                    .iter()
                    .find(|&&(individual, _)| individual == code)
                    .map_or(entry.category, |&(_, category)| category);
                assert_eq!(
                    merchant_code_category_number(code),
                    Some(expected),
                    "{code}"
                );
            }
        }
    }

    #[test]
    fn merchant_codes_per_class() {
        let cases = [
            // Contractors, airlines, car rental and hotels by name.
            ("1711", "HOME_IMPROVEMENT_REPAIR_AND_MAINTENANCE"),
            ("3001", "TRAVEL_FLIGHTS"),
            ("3389", "TRAVEL_RENTAL_CARS"),
            ("3509", "TRAVEL_LODGING"),
            // Transport, utilities and telecoms.
            ("4111", "TRANSPORTATION_PUBLIC_TRANSIT"),
            ("4121", "TRANSPORTATION_TAXIS_AND_RIDE_SHARES"),
            ("4511", "TRAVEL_FLIGHTS"),
            ("4784", "TRANSPORTATION_TOLLS"),
            ("4789", "TRANSPORTATION_OTHER_TRANSPORTATION"),
            ("4814", "RENT_AND_UTILITIES_TELEPHONE"),
            ("4900", "RENT_AND_UTILITIES_GAS_AND_ELECTRICITY"),
            // Retail.
            ("5045", "GENERAL_MERCHANDISE_ELECTRONICS"),
            ("5251", "HOME_IMPROVEMENT_HARDWARE"),
            ("5300", "GENERAL_MERCHANDISE_SUPERSTORES"),
            ("5311", "GENERAL_MERCHANDISE_DEPARTMENT_STORES"),
            ("5411", "FOOD_AND_DRINK_GROCERIES"),
            ("5462", "FOOD_AND_DRINK_OTHER_FOOD_AND_DRINK"),
            ("5541", "TRANSPORTATION_GAS"),
            ("5511", "TRANSPORTATION_OTHER_TRANSPORTATION"),
            ("5651", "GENERAL_MERCHANDISE_CLOTHING_AND_ACCESSORIES"),
            ("5712", "HOME_IMPROVEMENT_FURNITURE"),
            ("5732", "GENERAL_MERCHANDISE_ELECTRONICS"),
            ("5812", "FOOD_AND_DRINK_RESTAURANT"),
            ("5813", "FOOD_AND_DRINK_RESTAURANT"),
            ("5814", "FOOD_AND_DRINK_FAST_FOOD"),
            ("5912", "MEDICAL_PHARMACIES_AND_SUPPLEMENTS"),
            ("5921", "FOOD_AND_DRINK_BEER_WINE_AND_LIQUOR"),
            ("5999", "GENERAL_MERCHANDISE_OTHER_GENERAL_MERCHANDISE"),
            // Finance, services, leisure, health, public bodies.
            ("6011", "TRANSFER_OUT_WITHDRAWAL"),
            ("6300", "GENERAL_SERVICES_INSURANCE"),
            ("6051", "TRANSFER_OUT_OTHER_TRANSFER_OUT"),
            ("7011", "TRAVEL_LODGING"),
            ("7230", "PERSONAL_CARE_HAIR_AND_BEAUTY"),
            ("7299", "PERSONAL_CARE_OTHER_PERSONAL_CARE"),
            ("7372", "GENERAL_SERVICES_OTHER_GENERAL_SERVICES"),
            ("7523", "TRANSPORTATION_PARKING"),
            ("7538", "GENERAL_SERVICES_AUTOMOTIVE"),
            ("7699", "HOME_IMPROVEMENT_REPAIR_AND_MAINTENANCE"),
            ("7832", "ENTERTAINMENT_TV_AND_MOVIES"),
            ("7995", "ENTERTAINMENT_CASINOS_AND_GAMBLING"),
            ("7997", "PERSONAL_CARE_GYMS_AND_FITNESS_CENTERS"),
            ("7999", "ENTERTAINMENT_OTHER_ENTERTAINMENT"),
            ("8021", "MEDICAL_DENTAL_CARE"),
            ("8062", "MEDICAL_OTHER_MEDICAL"),
            ("8220", "GENERAL_SERVICES_EDUCATION"),
            ("8398", "GOVERNMENT_AND_NON_PROFIT_DONATIONS"),
            ("8999", "GENERAL_SERVICES_OTHER_GENERAL_SERVICES"),
            ("9311", "GOVERNMENT_AND_NON_PROFIT_TAX_PAYMENT"),
            (
                "9399",
                "GOVERNMENT_AND_NON_PROFIT_GOVERNMENT_DEPARTMENTS_AND_AGENCIES",
            ),
            // Individual codes outside every block, with their leading zero.
            ("0742", "MEDICAL_VETERINARY_SERVICES"),
            (" 0780 ", "HOME_IMPROVEMENT_REPAIR_AND_MAINTENANCE"),
            ("2741", "GENERAL_SERVICES_OTHER_GENERAL_SERVICES"),
        ];
        for (code, expected) in cases {
            assert_eq!(merchant_code_category(code), Some(expected), "{code}");
        }
    }

    #[test]
    fn unknown_or_malformed_merchant_codes_have_no_category() {
        for code in [
            "",
            "742",
            "57422",
            "58a2",
            "-581",
            "+581",
            "0000",
            "9999",
            "7100",
            "２３４５",
        ] {
            assert_eq!(merchant_code_category(code), None, "{code:?}");
        }
        assert_eq!(merchant_code_category_number(u16::MAX), None);
        assert_eq!(merchant_code_category_number(0), None);
    }

    #[test]
    fn bank_codes_per_class() {
        let cases = [
            ("PMNT/RCDT/SALA", Some("INCOME_WAGES")),
            ("PMNT/RRCT/SALA", Some("INCOME_WAGES")),
            ("PMNT/RCDT/BOOK", Some("TRANSFER_IN_ACCOUNT_TRANSFER")),
            ("PMNT/RCDT/TAXE", Some("INCOME_TAX_REFUND")),
            ("PMNT/RCDT/DVCA", Some("INCOME_DIVIDENDS")),
            ("PMNT/RCDT/INTR", Some("INCOME_INTEREST_EARNED")),
            ("PMNT/ICDT/BOOK", Some("TRANSFER_OUT_ACCOUNT_TRANSFER")),
            ("PMNT/IRCT/BOOK", Some("TRANSFER_OUT_ACCOUNT_TRANSFER")),
            (
                "PMNT/ICDT/TAXE",
                Some("GOVERNMENT_AND_NON_PROFIT_TAX_PAYMENT"),
            ),
            (
                "PMNT/IDDT/TAXE",
                Some("GOVERNMENT_AND_NON_PROFIT_TAX_PAYMENT"),
            ),
            ("PMNT/CCRD/CWDL", Some("TRANSFER_OUT_WITHDRAWAL")),
            ("PMNT/CCRD/XBCW", Some("TRANSFER_OUT_WITHDRAWAL")),
            ("PMNT/CCRD/CDPT", Some("TRANSFER_IN_DEPOSIT")),
            ("PMNT/CNTR/BCWD", Some("TRANSFER_OUT_WITHDRAWAL")),
            ("PMNT/CNTR/BCDP", Some("TRANSFER_IN_DEPOSIT")),
            ("PMNT/RCHQ/CCHQ", Some("TRANSFER_IN_DEPOSIT")),
            ("PMNT/MCOP/INTR", Some("INCOME_INTEREST_EARNED")),
            ("PMNT/MDOP/INTR", Some("BANK_FEES_INTEREST_CHARGE")),
            ("ACMT/MCOP/INTR", Some("INCOME_INTEREST_EARNED")),
            ("ACMT/MDOP/INTR", Some("BANK_FEES_INTEREST_CHARGE")),
            ("ACMT/MCOP/TAXE", Some("INCOME_TAX_REFUND")),
            (
                "ACMT/MDOP/TAXE",
                Some("GOVERNMENT_AND_NON_PROFIT_TAX_PAYMENT"),
            ),
            ("ACMT/MDOP/CHRG", Some("BANK_FEES_OTHER_BANK_FEES")),
            ("PMNT/ICDT/FEES", Some("BANK_FEES_OTHER_BANK_FEES")),
            ("PMNT/CCRD/COMM", Some("BANK_FEES_OTHER_BANK_FEES")),
            (
                "LDAS/MGLN/DDWN",
                Some("TRANSFER_IN_CASH_ADVANCES_AND_LOANS"),
            ),
            (
                "LDAS/CSLN/DDWN",
                Some("TRANSFER_IN_CASH_ADVANCES_AND_LOANS"),
            ),
            (
                "LDAS/FTLN/DDWN",
                Some("TRANSFER_IN_CASH_ADVANCES_AND_LOANS"),
            ),
            (
                "LDAS/NTLN/DDWN",
                Some("TRANSFER_IN_CASH_ADVANCES_AND_LOANS"),
            ),
            ("LDAS/MGLN/PPAY", Some("LOAN_PAYMENTS_MORTGAGE_PAYMENT")),
            (
                "LDAS/CSLN/RPMT",
                Some("LOAN_PAYMENTS_PERSONAL_LOAN_PAYMENT"),
            ),
            ("LDAS/FTLN/PPAY", Some("LOAN_PAYMENTS_OTHER_PAYMENT")),
            ("LDAS/NTLN/PPAY", Some("LOAN_PAYMENTS_OTHER_PAYMENT")),
            ("LDAS/FTDP/INTR", Some("INCOME_INTEREST_EARNED")),
            ("LDAS/NTDP/INTR", Some("INCOME_INTEREST_EARNED")),
            ("LDAS/FTDP/DPST", Some("TRANSFER_OUT_SAVINGS")),
            ("LDAS/NTDP/DPST", Some("TRANSFER_OUT_SAVINGS")),
            ("SECU/CORP/DVCA", Some("INCOME_DIVIDENDS")),
            ("SECU/CUST/INTR", Some("INCOME_INTEREST_EARNED")),
            (
                "SECU/SETT/TRAD",
                Some("TRANSFER_OUT_INVESTMENT_AND_RETIREMENT_FUNDS"),
            ),
            // How money moved, not what for.
            ("PMNT/CCRD/POSD", None),
            ("PMNT/ICDT/ESCT", None),
            ("PMNT/RDDT/ESDD", None),
            ("PMNT/ICDT/SALA", None),
            ("XTND/NTAV/NTAV", None),
            // Not a code.
            ("pmnt/rcdt/sala", None),
            ("PMNT/RCDT", None),
            ("PMNT/RCDT/SALA/X", None),
            ("", None),
            ("///", None),
        ];
        for (code, expected) in cases {
            assert_eq!(bank_code_category_text(code), expected, "{code}");
        }
        assert_eq!(
            bank_code_category("PMNT", "RCDT", "SALA"),
            Some("INCOME_WAGES")
        );
    }
}
