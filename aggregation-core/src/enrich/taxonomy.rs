//! The two-level category taxonomy: Plaid's personal finance categories (version 1), a primary
//! such as `FOOD_AND_DRINK` and below it detailed categories such as `FOOD_AND_DRINK_COFFEE`.
//!
//! The identifiers are those of Plaid's public taxonomy (the CSV at
//! `plaid.com/documents/pfc-taxonomy-all.csv`); the display names and descriptions here are our
//! own wording. Every detailed identifier starts with its primary's identifier and `_`.
//!
//! ```
//! use aggregation_core::enrich::taxonomy;
//!
//! let coffee = taxonomy::category("FOOD_AND_DRINK_COFFEE").expect("in the taxonomy");
//! assert_eq!(coffee.primary, "FOOD_AND_DRINK");
//! assert_eq!(taxonomy::primary_of("INCOME_WAGES"), Some("INCOME"));
//! assert_eq!(taxonomy::primary("TRAVEL").map(|p| p.name), Some("Travel"));
//! assert!(taxonomy::detailed_of("BANK_FEES").all(|c| c.primary == "BANK_FEES"));
//! ```

/// A primary category: the upper level of the taxonomy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Primary {
    /// Identifier, e.g. `FOOD_AND_DRINK`.
    pub id: &'static str,
    /// Display name in English, e.g. `Food and drink`.
    pub name: &'static str,
}

/// A detailed category: the lower level, what a transaction is assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Category {
    /// Identifier, e.g. `FOOD_AND_DRINK_COFFEE`.
    pub id: &'static str,
    /// The identifier of its primary, e.g. `FOOD_AND_DRINK`.
    pub primary: &'static str,
    /// Display name in English, e.g. `Coffee`.
    pub name: &'static str,
    /// One line on what belongs here.
    pub description: &'static str,
}

const fn p(id: &'static str, name: &'static str) -> Primary {
    Primary { id, name }
}

const fn c(
    primary: &'static str,
    id: &'static str,
    name: &'static str,
    description: &'static str,
) -> Category {
    Category {
        id,
        primary,
        name,
        description,
    }
}

/// The primaries, sorted by identifier (lookups binary-search it).
static PRIMARIES: &[Primary] = &[
    p("BANK_FEES", "Bank fees"),
    p("ENTERTAINMENT", "Entertainment"),
    p("FOOD_AND_DRINK", "Food and drink"),
    p("GENERAL_MERCHANDISE", "General merchandise"),
    p("GENERAL_SERVICES", "General services"),
    p("GOVERNMENT_AND_NON_PROFIT", "Government and non-profit"),
    p("HOME_IMPROVEMENT", "Home improvement"),
    p("INCOME", "Income"),
    p("LOAN_PAYMENTS", "Loan payments"),
    p("MEDICAL", "Medical"),
    p("PERSONAL_CARE", "Personal care"),
    p("RENT_AND_UTILITIES", "Rent and utilities"),
    p("TRANSFER_IN", "Transfer in"),
    p("TRANSFER_OUT", "Transfer out"),
    p("TRANSPORTATION", "Transportation"),
    p("TRAVEL", "Travel"),
];

const BF: &str = "BANK_FEES";
const EN: &str = "ENTERTAINMENT";
const FD: &str = "FOOD_AND_DRINK";
const GM: &str = "GENERAL_MERCHANDISE";
const GS: &str = "GENERAL_SERVICES";
const GN: &str = "GOVERNMENT_AND_NON_PROFIT";
const HI: &str = "HOME_IMPROVEMENT";
const IN: &str = "INCOME";
const LP: &str = "LOAN_PAYMENTS";
const MD: &str = "MEDICAL";
const PC: &str = "PERSONAL_CARE";
const RU: &str = "RENT_AND_UTILITIES";
const TI: &str = "TRANSFER_IN";
const TO: &str = "TRANSFER_OUT";
const TR: &str = "TRANSPORTATION";
const TV: &str = "TRAVEL";

/// The detailed categories, sorted by identifier (lookups binary-search it; a test keeps it so).
static CATEGORIES: &[Category] = &[
    c(
        BF,
        "BANK_FEES_ATM_FEES",
        "ATM fees",
        "Fees for using an ATM outside the bank's network",
    ),
    c(
        BF,
        "BANK_FEES_FOREIGN_TRANSACTION_FEES",
        "Foreign transaction fees",
        "Fees on payments in another currency or country",
    ),
    c(
        BF,
        "BANK_FEES_INSUFFICIENT_FUNDS",
        "Insufficient funds",
        "Fees for a payment the balance could not cover",
    ),
    c(
        BF,
        "BANK_FEES_INTEREST_CHARGE",
        "Interest charges",
        "Interest charged on a balance, a purchase or a cash advance",
    ),
    c(
        BF,
        "BANK_FEES_OTHER_BANK_FEES",
        "Other bank fees",
        "Account, card and other bank charges",
    ),
    c(
        BF,
        "BANK_FEES_OVERDRAFT_FEES",
        "Overdraft fees",
        "Fees for going below zero",
    ),
    c(
        EN,
        "ENTERTAINMENT_CASINOS_AND_GAMBLING",
        "Casinos and gambling",
        "Casinos, lotteries and betting",
    ),
    c(
        EN,
        "ENTERTAINMENT_MUSIC_AND_AUDIO",
        "Music and audio",
        "Music purchases, concerts' merchandise and audio streaming",
    ),
    c(
        EN,
        "ENTERTAINMENT_OTHER_ENTERTAINMENT",
        "Other entertainment",
        "Night life, hobbies and other leisure",
    ),
    c(
        EN,
        "ENTERTAINMENT_SPORTING_EVENTS_AMUSEMENT_PARKS_AND_MUSEUMS",
        "Events, parks and museums",
        "Tickets to games, shows, theme parks and museums",
    ),
    c(
        EN,
        "ENTERTAINMENT_TV_AND_MOVIES",
        "TV and movies",
        "Cinemas and video streaming",
    ),
    c(
        EN,
        "ENTERTAINMENT_VIDEO_GAMES",
        "Video games",
        "Games, in stores and online",
    ),
    c(
        FD,
        "FOOD_AND_DRINK_BEER_WINE_AND_LIQUOR",
        "Beer, wine and liquor",
        "Liquor stores and wine shops",
    ),
    c(
        FD,
        "FOOD_AND_DRINK_COFFEE",
        "Coffee",
        "Coffee shops and cafes",
    ),
    c(
        FD,
        "FOOD_AND_DRINK_FAST_FOOD",
        "Fast food",
        "Fast food chains and takeaways",
    ),
    c(
        FD,
        "FOOD_AND_DRINK_GROCERIES",
        "Groceries",
        "Supermarkets, grocers and farmers' markets",
    ),
    c(
        FD,
        "FOOD_AND_DRINK_OTHER_FOOD_AND_DRINK",
        "Other food and drink",
        "Bakeries, delis, desserts and juice bars",
    ),
    c(
        FD,
        "FOOD_AND_DRINK_RESTAURANT",
        "Restaurants",
        "Restaurants, bars and diners",
    ),
    c(
        FD,
        "FOOD_AND_DRINK_VENDING_MACHINES",
        "Vending machines",
        "Vending machine operators",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_BOOKSTORES_AND_NEWSSTANDS",
        "Books and news",
        "Book shops, magazines and newspapers",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_CLOTHING_AND_ACCESSORIES",
        "Clothing and accessories",
        "Clothes, shoes and jewellery",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_CONVENIENCE_STORES",
        "Convenience stores",
        "Corner shops and convenience stores",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_DEPARTMENT_STORES",
        "Department stores",
        "Department stores",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_DISCOUNT_STORES",
        "Discount stores",
        "Discount and variety stores",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_ELECTRONICS",
        "Electronics",
        "Electronics shops, computers and appliances",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_GIFTS_AND_NOVELTIES",
        "Gifts and novelties",
        "Gifts, cards, photos and flowers",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_OFFICE_SUPPLIES",
        "Office supplies",
        "Stationery and office goods",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_ONLINE_MARKETPLACES",
        "Online marketplaces",
        "General online marketplaces",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_OTHER_GENERAL_MERCHANDISE",
        "Other shopping",
        "Toys, hobbies, crafts and other goods",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_PET_SUPPLIES",
        "Pet supplies",
        "Pet food and supplies",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_SPORTING_GOODS",
        "Sporting goods",
        "Sports and outdoor equipment",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_SUPERSTORES",
        "Superstores",
        "Stores selling both groceries and general goods",
    ),
    c(
        GM,
        "GENERAL_MERCHANDISE_TOBACCO_AND_VAPE",
        "Tobacco and vape",
        "Tobacco and vaping products",
    ),
    c(
        GS,
        "GENERAL_SERVICES_ACCOUNTING_AND_FINANCIAL_PLANNING",
        "Accounting and financial planning",
        "Tax preparation, accountants and advisers",
    ),
    c(
        GS,
        "GENERAL_SERVICES_AUTOMOTIVE",
        "Automotive",
        "Car repairs, servicing, washes and towing",
    ),
    c(
        GS,
        "GENERAL_SERVICES_CHILDCARE",
        "Childcare",
        "Daycare and babysitting",
    ),
    c(
        GS,
        "GENERAL_SERVICES_CONSULTING_AND_LEGAL",
        "Consulting and legal",
        "Lawyers and consultants",
    ),
    c(
        GS,
        "GENERAL_SERVICES_EDUCATION",
        "Education",
        "Schools, universities and courses",
    ),
    c(
        GS,
        "GENERAL_SERVICES_INSURANCE",
        "Insurance",
        "Car, home, health and life insurance",
    ),
    c(
        GS,
        "GENERAL_SERVICES_OTHER_GENERAL_SERVICES",
        "Other services",
        "Advertising, online services and other services",
    ),
    c(
        GS,
        "GENERAL_SERVICES_POSTAGE_AND_SHIPPING",
        "Postage and shipping",
        "Post, parcels and couriers",
    ),
    c(GS, "GENERAL_SERVICES_STORAGE", "Storage", "Self storage"),
    c(
        GN,
        "GOVERNMENT_AND_NON_PROFIT_DONATIONS",
        "Donations",
        "Charitable, religious and political giving",
    ),
    c(
        GN,
        "GOVERNMENT_AND_NON_PROFIT_GOVERNMENT_DEPARTMENTS_AND_AGENCIES",
        "Government services",
        "Fees to public offices, courts and agencies",
    ),
    c(
        GN,
        "GOVERNMENT_AND_NON_PROFIT_OTHER_GOVERNMENT_AND_NON_PROFIT",
        "Other government and non-profit",
        "Associations and other public bodies",
    ),
    c(
        GN,
        "GOVERNMENT_AND_NON_PROFIT_TAX_PAYMENT",
        "Tax payments",
        "Income, property and other taxes",
    ),
    c(
        HI,
        "HOME_IMPROVEMENT_FURNITURE",
        "Furniture",
        "Furniture, bedding and home furnishings",
    ),
    c(
        HI,
        "HOME_IMPROVEMENT_HARDWARE",
        "Hardware",
        "DIY stores, building materials and paint",
    ),
    c(
        HI,
        "HOME_IMPROVEMENT_OTHER_HOME_IMPROVEMENT",
        "Other home improvement",
        "Pest control, cleaning, pools and the like",
    ),
    c(
        HI,
        "HOME_IMPROVEMENT_REPAIR_AND_MAINTENANCE",
        "Repair and maintenance",
        "Trades, repairs and gardening",
    ),
    c(HI, "HOME_IMPROVEMENT_SECURITY", "Security", "Home security"),
    c(
        IN,
        "INCOME_DIVIDENDS",
        "Dividends",
        "Dividends from investments",
    ),
    c(
        IN,
        "INCOME_INTEREST_EARNED",
        "Interest earned",
        "Interest paid on deposits and savings",
    ),
    c(
        IN,
        "INCOME_OTHER_INCOME",
        "Other income",
        "Benefits, rent received, support and other income",
    ),
    c(
        IN,
        "INCOME_RETIREMENT_PENSION",
        "Pension",
        "Pension payments",
    ),
    c(IN, "INCOME_TAX_REFUND", "Tax refund", "Refunds of tax"),
    c(
        IN,
        "INCOME_UNEMPLOYMENT",
        "Unemployment",
        "Unemployment benefits",
    ),
    c(IN, "INCOME_WAGES", "Wages", "Salary, wages and tips"),
    c(
        LP,
        "LOAN_PAYMENTS_CAR_PAYMENT",
        "Car payment",
        "Car loans and leases",
    ),
    c(
        LP,
        "LOAN_PAYMENTS_CREDIT_CARD_PAYMENT",
        "Credit card payment",
        "Paying off a credit card",
    ),
    c(
        LP,
        "LOAN_PAYMENTS_MORTGAGE_PAYMENT",
        "Mortgage payment",
        "Mortgage instalments",
    ),
    c(
        LP,
        "LOAN_PAYMENTS_OTHER_PAYMENT",
        "Other loan payment",
        "Other loan and buy-now-pay-later instalments",
    ),
    c(
        LP,
        "LOAN_PAYMENTS_PERSONAL_LOAN_PAYMENT",
        "Personal loan payment",
        "Personal loan instalments",
    ),
    c(
        LP,
        "LOAN_PAYMENTS_STUDENT_LOAN_PAYMENT",
        "Student loan payment",
        "Student loan instalments",
    ),
    c(MD, "MEDICAL_DENTAL_CARE", "Dental care", "Dentists"),
    c(
        MD,
        "MEDICAL_EYE_CARE",
        "Eye care",
        "Opticians and optometrists",
    ),
    c(
        MD,
        "MEDICAL_NURSING_CARE",
        "Nursing care",
        "Nursing care and homes",
    ),
    c(
        MD,
        "MEDICAL_OTHER_MEDICAL",
        "Other medical",
        "Hospitals, laboratories and other care",
    ),
    c(
        MD,
        "MEDICAL_PHARMACIES_AND_SUPPLEMENTS",
        "Pharmacies and supplements",
        "Pharmacies and nutrition shops",
    ),
    c(MD, "MEDICAL_PRIMARY_CARE", "Primary care", "Doctors"),
    c(
        MD,
        "MEDICAL_VETERINARY_SERVICES",
        "Veterinary services",
        "Vets and animal care",
    ),
    c(
        PC,
        "PERSONAL_CARE_GYMS_AND_FITNESS_CENTERS",
        "Gyms and fitness",
        "Gyms, fitness studios and classes",
    ),
    c(
        PC,
        "PERSONAL_CARE_HAIR_AND_BEAUTY",
        "Hair and beauty",
        "Hairdressers, beauty salons, spas and cosmetics",
    ),
    c(
        PC,
        "PERSONAL_CARE_LAUNDRY_AND_DRY_CLEANING",
        "Laundry and dry cleaning",
        "Laundries and dry cleaners",
    ),
    c(
        PC,
        "PERSONAL_CARE_OTHER_PERSONAL_CARE",
        "Other personal care",
        "Counselling and other personal services",
    ),
    c(
        RU,
        "RENT_AND_UTILITIES_GAS_AND_ELECTRICITY",
        "Gas and electricity",
        "Energy bills",
    ),
    c(
        RU,
        "RENT_AND_UTILITIES_INTERNET_AND_CABLE",
        "Internet and cable",
        "Broadband and cable TV",
    ),
    c(
        RU,
        "RENT_AND_UTILITIES_OTHER_UTILITIES",
        "Other utilities",
        "Other utility bills",
    ),
    c(RU, "RENT_AND_UTILITIES_RENT", "Rent", "Rent"),
    c(
        RU,
        "RENT_AND_UTILITIES_SEWAGE_AND_WASTE_MANAGEMENT",
        "Sewage and waste",
        "Sewage and refuse collection",
    ),
    c(
        RU,
        "RENT_AND_UTILITIES_TELEPHONE",
        "Telephone",
        "Mobile and landline bills",
    ),
    c(RU, "RENT_AND_UTILITIES_WATER", "Water", "Water bills"),
    c(
        TI,
        "TRANSFER_IN_ACCOUNT_TRANSFER",
        "Account transfer in",
        "Money from another account of the same person",
    ),
    c(
        TI,
        "TRANSFER_IN_CASH_ADVANCES_AND_LOANS",
        "Cash advances and loans",
        "Loans and cash advances received",
    ),
    c(
        TI,
        "TRANSFER_IN_DEPOSIT",
        "Deposit",
        "Cash and cheque deposits",
    ),
    c(
        TI,
        "TRANSFER_IN_INVESTMENT_AND_RETIREMENT_FUNDS",
        "From investments",
        "Money in from investment or retirement accounts",
    ),
    c(
        TI,
        "TRANSFER_IN_OTHER_TRANSFER_IN",
        "Other transfer in",
        "Other money received",
    ),
    c(
        TI,
        "TRANSFER_IN_SAVINGS",
        "From savings",
        "Money in from a savings account",
    ),
    c(
        TO,
        "TRANSFER_OUT_ACCOUNT_TRANSFER",
        "Account transfer out",
        "Money to another account of the same person",
    ),
    c(
        TO,
        "TRANSFER_OUT_INVESTMENT_AND_RETIREMENT_FUNDS",
        "To investments",
        "Money out to investment or retirement accounts",
    ),
    c(
        TO,
        "TRANSFER_OUT_OTHER_TRANSFER_OUT",
        "Other transfer out",
        "Other money sent",
    ),
    c(
        TO,
        "TRANSFER_OUT_SAVINGS",
        "To savings",
        "Money out to a savings account",
    ),
    c(
        TO,
        "TRANSFER_OUT_WITHDRAWAL",
        "Withdrawal",
        "Cash withdrawals",
    ),
    c(
        TR,
        "TRANSPORTATION_BIKES_AND_SCOOTERS",
        "Bikes and scooters",
        "Bike and scooter hire",
    ),
    c(
        TR,
        "TRANSPORTATION_GAS",
        "Fuel",
        "Petrol stations and charging",
    ),
    c(
        TR,
        "TRANSPORTATION_OTHER_TRANSPORTATION",
        "Other transportation",
        "Other transport costs",
    ),
    c(TR, "TRANSPORTATION_PARKING", "Parking", "Parking"),
    c(
        TR,
        "TRANSPORTATION_PUBLIC_TRANSIT",
        "Public transit",
        "Trains, buses and metro",
    ),
    c(
        TR,
        "TRANSPORTATION_TAXIS_AND_RIDE_SHARES",
        "Taxis and ride shares",
        "Taxis and ride hailing",
    ),
    c(TR, "TRANSPORTATION_TOLLS", "Tolls", "Road and bridge tolls"),
    c(TV, "TRAVEL_FLIGHTS", "Flights", "Airlines and airports"),
    c(
        TV,
        "TRAVEL_LODGING",
        "Lodging",
        "Hotels and holiday rentals",
    ),
    c(
        TV,
        "TRAVEL_OTHER_TRAVEL",
        "Other travel",
        "Travel agents, cruises and other travel",
    ),
    c(
        TV,
        "TRAVEL_RENTAL_CARS",
        "Rental cars",
        "Car, van and truck hire",
    ),
];

/// The prefix of the id of a user's own category (`custom:<uuid>`), as transactions and the
/// API carry it.
pub(crate) const CUSTOM_PREFIX: &str = "custom:";

/// The uuid of a user's own category's id (`custom:<uuid>`); `None` for anything else.
pub(crate) fn custom_id(id: &str) -> Option<uuid::Uuid> {
    id.strip_prefix(CUSTOM_PREFIX)
        .and_then(|rest| uuid::Uuid::parse_str(rest).ok())
}

/// The detailed category with this identifier, `None` when the taxonomy has none (a primary's
/// identifier is not a detailed category: see [`primary`]).
pub fn category(id: &str) -> Option<&'static Category> {
    CATEGORIES
        .binary_search_by(|entry| entry.id.cmp(id))
        .ok()
        .and_then(|index| CATEGORIES.get(index))
}

/// The primary with this identifier, `None` when there is none.
pub fn primary(id: &str) -> Option<&'static Primary> {
    PRIMARIES
        .binary_search_by(|entry| entry.id.cmp(id))
        .ok()
        .and_then(|index| PRIMARIES.get(index))
}

/// The primary identifier of a detailed category, `None` when `detailed` is not one.
pub fn primary_of(detailed: &str) -> Option<&'static str> {
    category(detailed).map(|entry| entry.primary)
}

/// Every detailed category, sorted by identifier (and so grouped by primary).
pub fn categories() -> impl ExactSizeIterator<Item = &'static Category> {
    CATEGORIES.iter()
}

/// Every primary, sorted by identifier.
pub fn primaries() -> impl ExactSizeIterator<Item = &'static Primary> {
    PRIMARIES.iter()
}

/// The detailed categories under one primary, in identifier order; empty for an unknown one.
pub fn detailed_of(primary_id: &str) -> impl Iterator<Item = &'static Category> + '_ {
    CATEGORIES
        .iter()
        .filter(move |entry| entry.primary == primary_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_unique_and_detailed_ids_extend_their_primary() {
        assert!(PRIMARIES.windows(2).all(|pair| pair[0].id < pair[1].id));
        assert!(CATEGORIES.windows(2).all(|pair| pair[0].id < pair[1].id));
        for entry in CATEGORIES {
            assert!(primary(entry.primary).is_some(), "{}", entry.id);
            let rest = entry.id.strip_prefix(entry.primary);
            assert!(
                rest.is_some_and(|rest| rest.starts_with('_') && rest.len() > 1),
                "{}",
                entry.id
            );
            assert!(!entry.name.is_empty() && !entry.description.is_empty());
        }
    }

    #[test]
    fn every_primary_has_detailed_categories_and_an_other_bucket_where_plaid_has_one() {
        assert_eq!(primaries().len(), 16);
        assert_eq!(categories().len(), 104);
        for primary_entry in primaries() {
            assert!(
                detailed_of(primary_entry.id).count() >= 4,
                "{}",
                primary_entry.id
            );
        }
        assert!(category("INCOME_OTHER_INCOME").is_some());
        assert!(category("TRANSFER_OUT_OTHER_TRANSFER_OUT").is_some());
    }

    #[test]
    fn lookups_answer_known_ids_and_refuse_others() {
        assert_eq!(
            category("FOOD_AND_DRINK_COFFEE").map(|entry| entry.name),
            Some("Coffee")
        );
        assert_eq!(primary_of("TRAVEL_FLIGHTS"), Some("TRAVEL"));
        assert_eq!(primary_of("TRAVEL"), None);
        assert_eq!(category("food_and_drink_coffee"), None);
        assert_eq!(category(""), None);
        assert_eq!(
            primary("LOAN_PAYMENTS").map(|entry| entry.name),
            Some("Loan payments")
        );
        assert_eq!(primary("LOAN"), None);
        assert_eq!(detailed_of("NOPE").count(), 0);
    }
}
