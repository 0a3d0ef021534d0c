//! Merchant names derived from bank descriptions, for rows whose source names no merchant.
//!
//! Deterministic and local: the same description always gives the same name, from plain
//! left-to-right scans (no regular expressions, no outside service). What it removes, in order:
//! the bank's channel words (`POS PURCHASE`, `KARTENZAHLUNG`, `PAIEMENT CB`...), leading dates
//! and card numbers, payment processors' prefixes (`SQ *`, `TST*`, `PAYPAL *`, `SP `...);
//! then everything from the first store number, reference, date, amount, phone number,
//! legal form or SEPA field tag on; or, when nothing like that ends the name, a trailing US
//! state, Canadian province or country code with the city before it. What is left is written
//! in readable case (`BLUE BOTTLE COFFEE` → `Blue Bottle Coffee`; text already in mixed case is
//! kept as written; short consonant-only acronyms such as `CVS` stay capitals). A few chains
//! whose descriptors never spell their name (`AMZN MKTP US`, `WM SUPERCENTER`) or whose name no
//! case rule can write (`McDonald's`, `eBay`) have a fixed name.
//!
//! ```
//! use aggregation_core::enrich::merchant::merchant_name;
//!
//! let name = merchant_name("SQ *BLUE BOTTLE COFFEE 1234 OAKLAND CA");
//! assert_eq!(name.as_deref(), Some("Blue Bottle Coffee"));
//! assert_eq!(merchant_name("AMZN Mktp US*2K4LM9PQ1").as_deref(), Some("Amazon"));
//! assert_eq!(merchant_name("KARTENZAHLUNG 12.03. 10:14 dm-drogerie markt").as_deref(),
//!            Some("dm-drogerie markt"));
//! assert_eq!(merchant_name("  1234 5678 "), None);
//! ```

/// Channel words banks put before the merchant, longest first where one extends another.
/// Compared case-insensitively and only as whole words.
const CHANNEL_PHRASES: &[&str] = &[
    "RECURRING PAYMENT AUTHORIZED ON",
    "PURCHASE AUTHORIZED ON",
    "PURCHASE INTL AUTHORIZED ON",
    "DEBIT CARD PURCHASE",
    "POS PURCHASE",
    "POS DEBIT",
    "POS WITHDRAWAL",
    "DEBIT PURCHASE",
    "CARD PURCHASE",
    "VISA DDA PUR",
    "VISA PURCHASE",
    "DBT CRD",
    "CHECKCARD",
    "CHECK CARD",
    "ACH DEBIT",
    "ACH CREDIT",
    "ACH PMT",
    "ACH",
    "ORIG CO NAME:",
    "ONLINE PAYMENT TO",
    "BILL PAYMENT TO",
    "PURCHASE",
    "POS",
    "APLPAY",
    "APPLE PAY",
    "GOOGLE PAY",
    "SEPA-LASTSCHRIFT",
    "SEPA LASTSCHRIFT",
    "SEPA-UEBERWEISUNG",
    "SEPA-ÜBERWEISUNG",
    "SEPA ÜBERWEISUNG",
    "SEPA-GUTSCHRIFT",
    "SEPA GUTSCHRIFT",
    "SEPA DIRECT DEBIT",
    "SEPA CREDIT TRANSFER",
    "LASTSCHRIFT",
    "KARTENZAHLUNG",
    "KARTENZAHLUNG/-ABRECHNUNG",
    "GIROCARD",
    "DEBITK.",
    "ÜBERWEISUNG",
    "UEBERWEISUNG",
    "GUTSCHRIFT",
    "FOLGELASTSCHRIFT",
    "ERSTLASTSCHRIFT",
    "PAIEMENT PAR CARTE",
    "PAIEMENT CB",
    "CARTE",
    "CB",
    "PRLV SEPA",
    "PRELEVEMENT",
    "VIR SEPA RECU",
    "VIR SEPA",
    "VIR INST",
    "BETAALAUTOMAAT",
    "BEA, BETAALPAS",
    "BEA",
    "GEA",
    "PAGO CON TARJETA",
    "COMPRA TARJ.",
    "COMPRA TARJETA",
    "COMPRA",
    "PAGAMENTO POS",
    "PAGAMENTO",
    "CARD PAYMENT TO",
    "CARD PAYMENT",
    "CONTACTLESS PAYMENT",
    "DIRECT DEBIT PAYMENT TO",
    "DIRECT DEBIT",
    "FASTER PAYMENT TO",
];

/// Words between the channel and the merchant (`CARD PURCHASE AT ...`, `LASTSCHRIFT VON ...`).
const LEADING_FILLERS: &[&str] = &[
    "AT", "TO", "VON", "AN", "BEI", "CHEZ", "EN", "PAS", "CARD", "KARTE", "NR", "NR.", "-", "AM",
    "PM",
];

/// Payment processors and platforms whose prefix stands before the real merchant.
const PROCESSORS: &[&str] = &[
    "SQ",
    "SQU",
    "TST",
    "PAYPAL",
    "PP",
    "SP",
    "IC",
    "BT",
    "FS",
    "EB",
    "WPY",
    "CLV",
    "PY",
    "DNH",
    "GOOGLE",
    "PADDLE.NET",
    "2CO",
    "ZTL",
    "PAYPAL EUROPE",
    "PAYPAL (EUROPE)",
    "KLARNA",
    "STRIPE",
    "SUMUP",
    "ZETTLE",
    "ZETTLE_",
    "IZ",
    "IZETTLE",
    "LS",
    "DD",
    "WL",
];

/// Chains whose name comes from a fixed table: the descriptor's first words (compared
/// case-insensitively, `*` and `.COM` ignored) and the name.
const KNOWN_NAMES: &[(&[&str], &str)] = &[
    (&["AMZN"], "Amazon"),
    (&["AMAZON", "PRIME"], "Amazon Prime"),
    (&["PRIME", "VIDEO"], "Prime Video"),
    (&["AMAZON", "MKTPL"], "Amazon"),
    (&["AMAZON", "MARKETPLACE"], "Amazon"),
    (&["AMAZON", "RETA"], "Amazon"),
    (&["AMAZON"], "Amazon"),
    (&["UBER", "EATS"], "Uber Eats"),
    (&["UBEREATS"], "Uber Eats"),
    (&["UBER"], "Uber"),
    (&["LYFT"], "Lyft"),
    (&["DOORDASH"], "DoorDash"),
    (&["GRUBHUB"], "Grubhub"),
    (&["YOUTUBE", "TV"], "YouTube TV"),
    (&["YOUTUBE"], "YouTube"),
    (&["YOUTUBEPREMIUM"], "YouTube Premium"),
    (&["APPLE", "BILL"], "Apple"),
    (&["APPLE"], "Apple"),
    (&["ITUNES"], "Apple"),
    (&["MCDONALD'S"], "McDonald's"),
    (&["MCDONALDS"], "McDonald's"),
    (&["MC", "DONALDS"], "McDonald's"),
    (&["WAL-MART"], "Walmart"),
    (&["WALMART"], "Walmart"),
    (&["WM", "SUPERCENTER"], "Walmart"),
    (&["7-ELEVEN"], "7-Eleven"),
    (&["7", "ELEVEN"], "7-Eleven"),
    (&["EBAY"], "eBay"),
    (&["PAYPAL"], "PayPal"),
    (&["IKEA"], "IKEA"),
    (&["REWE"], "REWE"),
    (&["ALDI"], "ALDI"),
    (&["LIDL"], "Lidl"),
    (&["DM-DROGERIE"], "dm-drogerie markt"),
    (&["DM", "DROGERIE"], "dm-drogerie markt"),
    (&["DM", "FIL."], "dm-drogerie markt"),
    (&["WHOLEFDS"], "Whole Foods Market"),
    (&["WHOLE", "FOODS"], "Whole Foods Market"),
    (&["TRADER", "JOE"], "Trader Joe's"),
    (&["TRADER", "JOES"], "Trader Joe's"),
    (&["TRADER", "JOE'S"], "Trader Joe's"),
    (&["CHICK-FIL-A"], "Chick-fil-A"),
    (&["DUNKIN"], "Dunkin'"),
    (&["STARBUCKS"], "Starbucks"),
    (&["NETFLIX"], "Netflix"),
    (&["SPOTIFY"], "Spotify"),
    (&["AIRBNB"], "Airbnb"),
    (&["BOOKING"], "Booking.com"),
    (&["LINKEDIN"], "LinkedIn"),
    (&["GITHUB"], "GitHub"),
    (&["OPENAI"], "OpenAI"),
    (&["HBO", "MAX"], "HBO Max"),
    (&["DISNEY", "PLUS"], "Disney+"),
    (&["DISNEYPLUS"], "Disney+"),
    (&["COSTCO"], "Costco"),
    (&["SAINSBURYS"], "Sainsbury's"),
    (&["SAINSBURY'S"], "Sainsbury's"),
    (&["ALBERT", "HEIJN"], "Albert Heijn"),
    (&["AH", "TO", "GO"], "AH to go"),
    (&["TESCO"], "Tesco"),
    (&["CARREFOUR", "MARKET"], "Carrefour Market"),
    (&["CARREFOUR"], "Carrefour"),
    (&["H&M"], "H&M"),
    (&["KFC"], "KFC"),
    (&["BP"], "BP"),
    (&["ESSO"], "Esso"),
    (&["SHELL"], "Shell"),
];

/// Words that end the name: what follows is a reference, an amount, an address or a form.
const TAIL_WORDS: &[&str] = &[
    "EUR",
    "USD",
    "GBP",
    "CHF",
    "SEK",
    "DKK",
    "NOK",
    "PLN",
    "CZK",
    "KFN",
    "VJ",
    "REF",
    "REF:",
    "REF.",
    "REFERENZ",
    "REFERENZ:",
    "MANDAT",
    "MANDAT:",
    "MANDATSREF",
    "MANDATSREF:",
    "MANDATSREFERENZ",
    "MANDATSREFERENZ:",
    "GLÄUBIGER-ID",
    "GLÄUBIGER-ID:",
    "GLAEUBIGER-ID",
    "GLAEUBIGER-ID:",
    "END-TO-END-REF.:",
    "IBAN",
    "IBAN:",
    "BIC",
    "BIC:",
    "KUNDENNR",
    "KUNDENNR.",
    "RECHNUNG",
    "RECHNUNGSNR",
    "RG.",
    "RG",
    "RGNR",
    "INV",
    "INVOICE",
    "ORDER",
    "BESTELLUNG",
    "VERWENDUNGSZWECK",
    "SAGT",
    "FACTURE",
    "ECHEANCE",
    "RUM",
    "CARD",
    "KARTE",
    "TERMINAL",
    "TERM",
    "AUTH",
    "TRACE",
    "PPD",
    "CCD",
    "WEB",
    "TEL",
    "INDN",
    "ORIG",
    "ENTRY",
    "DESCR",
    "SEC:",
    "GMBH",
    "GMBH&CO",
    "INC",
    "INC.",
    "LLC",
    "LLC.",
    "LTD",
    "LTD.",
    "CORP",
    "CORP.",
    "PLC",
    "AG",
    "KG",
    "OHG",
    "E.K.",
    "E.V.",
    "SA",
    "S.A.",
    "SAS",
    "S.A.S.",
    "SARL",
    "BV",
    "B.V.",
    "NV",
    "N.V.",
    "S.L.",
    "SL",
    "SPA",
    "S.P.A.",
    "SRL",
    "S.R.L.",
    "AB",
    "A/S",
    "OY",
    "PTY",
    "CO.",
    "SE",
    "DATUM",
    "DATE",
    "UHR",
    "HELP.UBER.COM",
    "CONTACTLESS",
    "VISA",
    "MASTERCARD",
];

/// Prefixes of words that end the name (SEPA field tags, ACH fields).
const TAIL_PREFIXES: &[&str] = &[
    "EREF+", "MREF+", "CRED+", "SVWZ+", "ABWA+", "KREF+", "DES:", "ID:", "INDN:", "CO ID:",
    "CONF#", "WWW.", "HTTP",
];

/// US states and territories, Canadian provinces and the country codes card descriptors end
/// with (ISO 3166 alpha-2 and alpha-3 for the markets the importers serve).
const PLACE_CODES: &[&str] = &[
    "AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "DC", "FL", "GA", "HI", "ID", "IL", "IN", "IA",
    "KS", "KY", "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM",
    "NY", "NC", "ND", "OH", "OK", "OR", "PA", "PR", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA",
    "WA", "WV", "WI", "WY", "AB", "BC", "MB", "NB", "NL", "NS", "ON", "PE", "QC", "SK", "US",
    "USA", "GB", "GBR", "UK", "DEU", "FR", "FRA", "NLD", "BE", "BEL", "ES", "ESP", "IT", "ITA",
    "AT", "AUT", "CH", "CHE", "IE", "IRL", "PT", "PRT", "LU", "LUX", "DK", "DNK", "SE", "SWE",
    "NO", "NOR", "FI", "FIN", "PL", "POL", "CZ", "CZE", "CAN", "AU", "AUS",
];

/// First words of two-word city names (`SAN JOSE`, `NEW YORK`, `BAD HOMBURG`).
const CITY_FIRST_WORDS: &[&str] = &[
    "SAN", "SANTA", "NEW", "LOS", "LAS", "ST", "ST.", "SAINT", "FORT", "FT", "EL", "PALO", "SALT",
    "BAD", "LE", "LA", "DEN", "BATON", "BEVERLY", "NORTH", "SOUTH", "EAST", "WEST",
];

/// Capitalised names a case rule would spell as a word (`AMC`, not `Amc`).
const ACRONYMS: &[&str] = &[
    "AMC", "REI", "EDF", "ATT", "UPS", "USPS", "IBM", "HBO", "ESPN", "TFL", "UBS", "ING", "OBI",
    "HEB", "IHOP", "NAPA", "USAA", "AAA", "AARP", "RATP", "BBC", "AVIS", "ADAC", "OTTO", "BVG",
    "HVV", "MVG", "KVB", "SBB", "OBB", "NS", "AH", "EE", "O2", "SFR", "ENI", "IP", "AT&T",
];

/// Two-letter words that are words, not initials.
const TWO_LETTER_WORDS: &[&str] = &[
    "OF", "ON", "AT", "TO", "IN", "LA", "LE", "EL", "DE", "DU", "MY", "GO", "NO", "BY", "IS", "IT",
    "OX", "UP", "MR", "MS", "DR", "ST", "AU", "DA", "DI", "EN", "ET", "UN",
];

/// Words written in lower case inside a name.
const SMALL_WORDS: &[&str] = &[
    "AND", "OF", "THE", "DE", "DU", "DES", "UND", "VAN", "DER", "DEL", "DI", "ON", "FOR", "AT",
];

/// Words that announce a store number (`NO 1`, `STORE 12`).
const STORE_WORDS: &[&str] = &[
    "NO", "NO.", "STORE", "STR", "NR", "NR.", "FILIALE", "FIL.", "#",
];

/// Words a name never ends with (`STARBUCKS STORE 123` keeps `Starbucks`).
const TRAILING_FILLERS: &[&str] = &[
    "CO", "STORE", "STR", "NO", "NO.", "#", "-", "FIL.", "FILIALE", "&",
];

fn is_word(word: &str, list: &[&str]) -> bool {
    list.iter().any(|entry| entry.eq_ignore_ascii_case(word))
}

/// `text` without `prefix` when it starts with it as whole words, case-insensitively.
fn strip_words<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    if !head.eq_ignore_ascii_case(prefix) {
        return None;
    }
    let rest = text.get(prefix.len()..)?;
    let boundary = prefix.ends_with([':', '*', '.'])
        || rest.is_empty()
        || rest.starts_with(|next: char| next.is_whitespace() || matches!(next, ':' | '*' | ','));
    boundary.then(|| rest.trim_start_matches(|next: char| next.is_whitespace() || next == ':'))
}

/// A word that carries no part of a name: dates, times, store and card numbers, references,
/// phone numbers, amounts.
fn is_noise(word: &str) -> bool {
    let word = word.trim_matches(|c: char| matches!(c, ',' | ';' | '(' | ')' | '[' | ']'));
    if word.is_empty() || word.starts_with('#') {
        return true;
    }
    let digits = word.bytes().filter(u8::is_ascii_digit).count();
    if digits >= 3 {
        return true;
    }
    if digits > 0 && word.contains([':', '/', '.', '+']) {
        return true;
    }
    // Card masks: `XXXX1234`, `X12`, `****`.
    let masked = word.trim_start_matches(['X', 'x', '*']);
    masked.len() < word.len()
        && (masked.is_empty() || masked.bytes().all(|byte| byte.is_ascii_digit()))
        && (digits > 0 || word.len() >= 3)
}

/// The part of a word before a `*` or `#` that follows letters (`BP#1234` → `BP`).
fn head_of(word: &str) -> &str {
    match word.find(['*', '#']) {
        Some(at) if at > 0 => word.get(..at).unwrap_or(word),
        _ => word,
    }
}

/// Drops channel words, fillers and noise from the front, until none is left there.
fn strip_leading(mut text: &str) -> &str {
    loop {
        text = text.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '-' | ',' | ':'));
        if let Some(rest) = CHANNEL_PHRASES
            .iter()
            .find_map(|phrase| strip_words(text, phrase))
        {
            text = rest;
            continue;
        }
        let first_len = text.find(char::is_whitespace).unwrap_or(text.len());
        let Some(first) = text.get(..first_len) else {
            return text;
        };
        let rest = text.get(first_len..).unwrap_or_default();
        if !first.is_empty()
            && !rest.trim_start().is_empty()
            && (is_noise(head_of(first)) || is_word(first, LEADING_FILLERS))
        {
            text = rest;
            continue;
        }
        return text;
    }
}

/// Drops processor prefixes: `SQ *NAME`, `TST* NAME`, `PAYPAL *NAME`, `SP NAME`, and a
/// processor's prefix before another (`SQU*SQ *NAME`).
fn strip_processors(mut text: &str) -> &str {
    for _ in 0..3 {
        let stripped = strip_processor(text);
        if stripped.len() == text.len() {
            break;
        }
        text = stripped;
    }
    text
}

fn strip_processor(text: &str) -> &str {
    if let Some(star) = text.find('*') {
        let prefix = text.get(..star).unwrap_or_default().trim();
        let rest = text.get(star + 1..).unwrap_or_default().trim_start();
        // `UPS*1Z999...`: when only a reference follows, the prefix is the merchant.
        let names_something = rest
            .split_whitespace()
            .next()
            .is_some_and(|word| !is_noise(head_of(word)));
        if names_something
            && (prefix.is_empty()
                || is_word(prefix, PROCESSORS)
                || (prefix.len() <= 3 && !prefix.contains(char::is_whitespace)))
        {
            return rest;
        }
    }
    for processor in ["SP", "SQ", "TST", "PP", "DD"] {
        if let Some(rest) = strip_words(text, processor)
            && !rest.trim().is_empty()
        {
            return rest;
        }
    }
    text
}

/// The name's words: `*`, `,`, `/` and `//` split them, and `.COM`-style endings go.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || c == '*')
        .filter(|word| !word.is_empty())
}

fn without_web_ending(word: &str) -> &str {
    for ending in [
        ".COM", ".NET", ".ORG", ".CO.UK", ".DE", ".FR", ".NL", ".IO", ".EU",
    ] {
        if let Some(cut) = word.len().checked_sub(ending.len())
            && cut > 0
            && word
                .get(cut..)
                .is_some_and(|tail| tail.eq_ignore_ascii_case(ending))
        {
            return word.get(..cut).unwrap_or(word);
        }
    }
    word
}

/// The most words a key of [`KNOWN_NAMES`] has.
const LONGEST_KEY: usize = {
    let mut longest = 0;
    let mut index = 0;
    while index < KNOWN_NAMES.len() {
        if KNOWN_NAMES[index].0.len() > longest {
            longest = KNOWN_NAMES[index].0.len();
        }
        index += 1;
    }
    longest
};

fn known_name(text: &str) -> Option<&'static str> {
    // The first words, split once for every entry (split per entry, they cost more than the
    // rest of the derivation).
    let mut found = [""; LONGEST_KEY];
    let mut count = 0;
    // `APPLE.COM/BILL`, `CVS/PHARMACY`: a slash between letters separates words.
    for word in words(text)
        .flat_map(|word| word.split('/').filter(|part| !part.is_empty()))
        .take(LONGEST_KEY)
    {
        found[count] = without_web_ending(word);
        count += 1;
    }
    let found = found.get(..count).unwrap_or_default();
    KNOWN_NAMES.iter().find_map(|&(keys, name)| {
        (keys.len() <= found.len()
            && keys
                .iter()
                .zip(found)
                .all(|(key, word)| word.eq_ignore_ascii_case(key)))
        .then_some(name)
    })
}

/// Splits the name part into words and stops at the first one that ends a name.
fn name_words(text: &str) -> Vec<&str> {
    let mut kept: Vec<&str> = Vec::with_capacity(8);
    for raw in text.split_whitespace() {
        if matches!(raw, "-" | "|" | "/" | "//") || (!kept.is_empty() && is_noise(raw)) {
            return kept;
        }
        let (word, cut_after) = match raw.find([',', '*', '|', '#']).or_else(|| raw.find("//")) {
            Some(at) => (raw.get(..at).unwrap_or_default(), true),
            None => (raw, false),
        };
        for part in word.split('/').filter(|part| !part.is_empty()) {
            let is_tail = is_word(part, TAIL_WORDS)
                || TAIL_PREFIXES.iter().any(|prefix| {
                    part.get(..prefix.len())
                        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
                })
                // A web address after the name: `HELP.UBER.COM`, `TFL.GOV.UK`.
                || (!kept.is_empty() && part.contains('.') && without_web_ending(part).len() < part.len())
                || (!kept.is_empty() && part.contains(".GOV"));
            if (is_tail && !kept.is_empty()) || is_noise(part) {
                return kept;
            }
            // `NO 1`, `STORE 12`: a store number too short to look like one by itself.
            if part.bytes().all(|byte| byte.is_ascii_digit())
                && kept.last().is_some_and(|last| is_word(last, STORE_WORDS))
            {
                kept.pop();
                return kept;
            }
            if !is_tail {
                kept.push(part);
            }
        }
        if cut_after {
            return kept;
        }
    }
    kept
}

fn is_place_code(word: &str) -> bool {
    word.len() <= 3
        && word.bytes().all(|byte| byte.is_ascii_uppercase())
        && is_word(word, PLACE_CODES)
}

/// Readable case: `BLUE BOTTLE` → `Blue Bottle`; mixed case stays; `CVS`, `AT&T` stay capitals.
fn push_readable(out: &mut String, word: &str, first: bool, mixed_case: bool) {
    if mixed_case || word.chars().any(char::is_lowercase) || is_word(word, ACRONYMS) {
        out.push_str(word);
        return;
    }
    if !first && is_word(word, SMALL_WORDS) {
        out.push_str(&word.to_lowercase());
        return;
    }
    let letters = word.chars().filter(|c| c.is_alphabetic()).count();
    let acronym = (letters == 2 && !is_word(word, TWO_LETTER_WORDS))
        || (letters <= 4
            && letters > 0
            && !word
                .chars()
                .any(|c| matches!(c, 'A' | 'E' | 'I' | 'O' | 'U' | 'Y')))
        || (word.contains('&') && letters <= 4);
    if acronym {
        out.push_str(word);
        return;
    }
    let mut start_of_part = true;
    for c in word.chars() {
        if start_of_part {
            out.extend(c.to_uppercase());
        } else {
            out.extend(c.to_lowercase());
        }
        // A new part after a hyphen or dot; not after an apostrophe (`JOE'S` → `Joe's`).
        start_of_part =
            matches!(c, '-' | '.' | '/' | '(') || (start_of_part && !c.is_alphanumeric());
    }
}

/// The merchant a bank description names, in readable case, or `None` when it names none
/// that can be told (only numbers, dates and references; or empty).
///
/// Linear in the description's length (each step scans it at most once against fixed word
/// lists), and it allocates the returned name and one short list of words.
pub fn merchant_name(description: &str) -> Option<String> {
    let text = strip_leading(description.trim());
    let text = strip_leading(strip_processors(text));
    if let Some(name) = known_name(text) {
        return Some(name.to_owned());
    }
    // `NAME*REFERENCE`: what comes after the star is the order or reference.
    let text = match text.find('*') {
        Some(star) if star > 0 => text.get(..star).unwrap_or(text),
        _ => text.trim_start_matches('*'),
    };
    let mut kept = name_words(text);
    while kept.len() > 1
        && kept
            .last()
            .is_some_and(|last| last.bytes().all(|byte| byte.is_ascii_digit()))
    {
        kept.pop();
    }
    if kept.len() >= 2 && kept.last().is_some_and(|last| is_place_code(last)) {
        let code = kept.pop();
        // The city before the code, one or two words, when the name keeps a word; `USA`
        // alone often belongs to the name (`SPOTIFY USA`) and has no city before it.
        if kept.len() >= 2 && !matches!(code, Some("US" | "USA")) {
            kept.pop();
            if kept.len() >= 2
                && kept
                    .last()
                    .is_some_and(|word| is_word(word, CITY_FIRST_WORDS))
            {
                kept.pop();
            }
        }
    }
    while kept.len() > 1
        && kept
            .last()
            .is_some_and(|last| is_word(last, TRAILING_FILLERS))
    {
        kept.pop();
    }
    // A name written partly in lower case was written by someone: its capitals are meant.
    let mixed_case = kept.iter().any(|word| word.chars().any(char::is_lowercase));
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while let Some(&word) = kept.get(index) {
        let word = if index == 0 {
            without_web_ending(word)
        } else {
            word
        };
        // `TRADER JOE S`: the apostrophe the descriptor dropped.
        if word == "S" && index > 0 && !out.is_empty() {
            out.push_str("'s");
            index += 1;
            continue;
        }
        let word = word.trim_matches(|c: char| matches!(c, '.' | ',' | ';' | ':' | '-' | '_'));
        if word.is_empty() || word == "&" && index + 1 == kept.len() {
            index += 1;
            continue;
        }
        let first = out.is_empty();
        if !first {
            out.push(' ');
        }
        push_readable(&mut out, word, first, mixed_case);
        index += 1;
    }
    out.chars().any(char::is_alphabetic).then_some(out)
}

#[cfg(test)]
mod tests;
