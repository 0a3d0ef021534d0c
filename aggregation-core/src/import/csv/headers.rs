//! Header names: what each column of a bank's CSV export means, in English, German, French,
//! Spanish, Italian and Dutch.

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Role {
    /// Booking date.
    Date,
    /// Value date.
    ValueDate,
    /// Signed amount (or unsigned, with a direction column).
    Amount,
    /// Money out.
    Debit,
    /// Money in.
    Credit,
    /// Whether the amount is in or out (`Af`/`Bij`, `D`/`C`, `S`/`H`).
    Direction,
    /// Description.
    Description,
    /// The other party (the payee of a payment; the only party column when there is one).
    Payee,
    /// The payer, when the file has a separate column for it.
    Payer,
    /// Extra text.
    Memo,
    /// The bank's own reference of the row.
    Id,
    /// The running balance after the row.
    Balance,
    /// Currency code.
    Currency,
    /// Transaction type / booking text.
    Code,
    /// Booked or pending.
    Status,
}

/// Names per role, normalized (lower case, no unit in parentheses, no trailing `:`).
const NAMES: &[(Role, &[&str])] = &[
    (
        Role::Date,
        &[
            "date",
            "transaction date",
            "trans date",
            "trans. date",
            "posting date",
            "posted date",
            "post date",
            "booking date",
            "booked date",
            "completed date",
            "datum",
            "buchungstag",
            "buchungsdatum",
            "buchung",
            "belegdatum",
            "date opération",
            "date operation",
            "date d'opération",
            "date de l'opération",
            "date de comptabilisation",
            "date comptable",
            "fecha",
            "fecha operación",
            "fecha operacion",
            "fecha de operación",
            "fecha contable",
            "data",
            "data operazione",
            "data contabile",
            "data registrazione",
            "transactiedatum",
            "boekdatum",
            "boekingsdatum",
            "journaldate",
            "journal date",
            "created",
            "created date",
            "date created",
            "order date",
            "date de transaction",
            "date de la transaction",
            "fecha de la transacción",
            "fecha transacción",
        ],
    ),
    (
        Role::ValueDate,
        &[
            "value date",
            "valuta",
            "valutadatum",
            "wertstellung",
            "wertstellungsdatum",
            "wert",
            "date de valeur",
            "date valeur",
            "fecha valor",
            "fecha de valor",
            "data valuta",
            "rentedatum",
        ],
    ),
    (
        Role::Amount,
        &[
            "amount",
            "transaction amount",
            "amt",
            "betrag",
            "umsatz",
            "montant",
            "montant de l'opération",
            "importe",
            "importo",
            "bedrag",
            "transactiebedrag",
            "netamount",
            "net amount",
            "net",
            "total amount",
            "montant net",
            "importe neto",
        ],
    ),
    (
        Role::Debit,
        &[
            "debit",
            "debits",
            "debit amount",
            "withdrawal",
            "withdrawals",
            "withdrawal amount",
            "paid out",
            "money out",
            "outflow",
            "soll",
            "débit",
            "cargo",
            "cargos",
            "debe",
            "addebiti",
            "addebito",
            "uscite",
            "debet",
            "total charged",
            "charged",
            "total",
            "order total",
            "lastschrift",
            "belastung",
            "ausgang",
            "débito",
            "retrait",
            "retraits",
        ],
    ),
    (
        Role::Credit,
        &[
            "credit",
            "credits",
            "credit amount",
            "deposit",
            "deposits",
            "paid in",
            "money in",
            "inflow",
            "haben",
            "crédit",
            "abono",
            "abonos",
            "haber",
            "accrediti",
            "accredito",
            "entrate",
            "gutschrift",
            "eingang",
            "crédito",
            "dépôt",
            "versement",
        ],
    ),
    (
        Role::Direction,
        &[
            "af bij",
            "af/bij",
            "debit/credit",
            "credit/debit",
            "dr/cr",
            "cr/dr",
            "soll/haben",
            "s/h",
            "debit credit indicator",
            "credit debit indicator",
            "debit or credit",
        ],
    ),
    (
        Role::Description,
        &[
            "description",
            "transaction description",
            "details",
            "transaction details",
            "narrative",
            "particulars",
            "text",
            "verwendungszweck",
            "beschreibung",
            "libellé",
            "libelle",
            "libellé de l'opération",
            "détail",
            "detail",
            "concepto",
            "descripción",
            "descripcion",
            "descrizione",
            "descrizione operazione",
            "causale",
            "omschrijving",
            "description 1",
            "original description",
            "avisierungstext",
            "texte de notification",
        ],
    ),
    (
        Role::Payee,
        &[
            "payee",
            "payee name",
            "name",
            "counterparty",
            "counter party",
            "merchant",
            "merchant name",
            "beneficiary",
            "recipient",
            "payer/payee",
            "empfänger",
            "auftraggeber/empfänger",
            "auftraggeber / empfänger",
            "begünstigter/auftraggeber",
            "begünstigter / auftraggeber",
            "zahlungsempfänger*in",
            "zahlungsempfänger",
            "name zahlungsbeteiligter",
            "bénéficiaire",
            "tiers",
            "beneficiario",
            "beneficiario/ordenante",
            "controparte",
            "naam",
            "naam / omschrijving",
            "naam tegenpartij",
            "tegenpartij",
        ],
    ),
    (
        Role::Payer,
        &[
            "payer",
            "zahlungspflichtige*r",
            "zahlungspflichtiger",
            "auftraggeber",
            "ordenante",
        ],
    ),
    (
        Role::Memo,
        &[
            "memo",
            "notes",
            "note",
            "mededelingen",
            "remarque",
            "observaciones",
            "note operazione",
        ],
    ),
    (
        Role::Id,
        &[
            "id",
            "transaction id",
            "transaction_id",
            "txn id",
            "fitid",
            "unique id",
            "transaktions-id",
            "transactie-id",
            "n° de transaction",
            "no de transaction",
        ],
    ),
    (
        Role::Balance,
        &[
            "balance",
            "running balance",
            "balance after transaction",
            "saldo",
            "kontostand",
            "saldo nach buchung",
            "solde",
            "saldo na mutatie",
            "saldo contable",
            "saldo contabile",
            "runningbalance",
        ],
    ),
    (
        Role::Currency,
        &[
            "currency",
            "ccy",
            "currency code",
            "währung",
            "waehrung",
            "devise",
            "monnaie",
            "moneda",
            "divisa",
            "munt",
            "muntsoort",
            "monn.",
            "monn",
        ],
    ),
    (
        Role::Code,
        &[
            "buchungstext",
            "umsatzart",
            "umsatztyp",
            "transaction type",
            "type",
            "mutatiesoort",
            "code",
            "type de l'opération",
            "tipo",
        ],
    ),
    (
        Role::Status,
        &[
            "status",
            "state",
            "buchungsstatus",
            "statut",
            "estado",
            "stato",
        ],
    ),
];

/// A header cell: its normalized name and the unit written in parentheses after it (`Betrag
/// (EUR)` is `betrag` with unit `EUR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HeaderName {
    /// Lower case, trimmed, without the unit, a trailing `:` or spaces twice.
    pub(super) name: String,
    /// What was in the trailing parentheses, if anything.
    pub(super) unit: Option<String>,
}

/// Normalizes a header cell.
pub(super) fn normalize(cell: &str) -> HeaderName {
    let cell = super::values::clean(cell);
    let mut name = cell.to_lowercase();
    let mut unit = None;
    if name.ends_with(')')
        && let Some(open) = name.rfind('(')
    {
        let inner = name[open + 1..name.len() - 1].trim().to_owned();
        if !inner.is_empty() && open > 0 {
            unit = Some(inner.to_uppercase());
            name.truncate(open);
        }
    }
    let mut name = name
        .trim()
        .trim_end_matches(':')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    // A unit written after the name: `Gutschrift in CHF`, `Crédit en CHF`, `Débit euros`,
    // `Montant en euros`.
    if unit.is_none()
        && let Some((head, tail)) = name.rsplit_once(' ')
    {
        let (head, currency) = match head.rsplit_once(' ') {
            Some((before, "in" | "en")) => (before, tail),
            _ => (head, tail),
        };
        let currency = match currency {
            "euros" | "euro" => Some("EUR".to_owned()),
            c if is_currency_code(c) => Some(c.to_uppercase()),
            _ => None,
        };
        if let Some(currency) = currency
            && !head.is_empty()
        {
            unit = Some(currency);
            name = head.to_owned();
        }
    }
    HeaderName { name, unit }
}

/// The currency codes a header names after its column's name (`Betrag EUR`, `Saldo in CHF`):
/// only common ones, so that a name's last word (`net`, `out`) is never taken for one.
fn is_currency_code(code: &str) -> bool {
    matches!(
        code,
        "eur"
            | "chf"
            | "usd"
            | "gbp"
            | "cad"
            | "aud"
            | "sek"
            | "nok"
            | "dkk"
            | "pln"
            | "czk"
            | "huf"
            | "jpy"
    )
}

/// The role a normalized header name has, if any.
pub(super) fn role_of(name: &str) -> Option<Role> {
    NAMES
        .iter()
        .find(|(_, names)| names.contains(&name))
        .map(|(role, _)| *role)
}

/// The currency a header unit names: a three-letter code, or `€`/`£`.
pub(super) fn unit_currency(unit: &str) -> Option<String> {
    match unit {
        "€" => Some("EUR".to_owned()),
        "£" => Some("GBP".to_owned()),
        u if u.len() == 3 && u.chars().all(|c| c.is_ascii_alphabetic()) => Some(u.to_owned()),
        _ => None,
    }
}

/// Whether a direction cell says money out (`Some(true)`), money in (`Some(false)`), or
/// neither.
pub(super) fn direction_is_out(cell: &str) -> Option<bool> {
    match super::values::clean(cell).to_lowercase().as_str() {
        "af" | "d" | "dr" | "debit" | "debet" | "s" | "soll" | "-" | "débit" | "out" => Some(true),
        "bij" | "c" | "cr" | "credit" | "h" | "haben" | "+" | "crédit" | "in" => Some(false),
        _ => None,
    }
}

/// What a card export's transaction type says about the sign its amount should have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CardType {
    /// A purchase, fee or interest: money out of the card account.
    Charge,
    /// A payment, refund or return: money into the card account.
    Payment,
}

/// The [`CardType`] of a transaction type cell (`Sale`, `Payment`, `Return`, …), if it is one.
pub(super) fn card_type(cell: &str) -> Option<CardType> {
    match super::values::clean(cell).to_lowercase().as_str() {
        "sale" | "purchase" | "charge" | "fee" | "fees" | "interest" | "cash advance"
        | "purchases" | "achat" | "compra" | "einkauf" | "kauf" => Some(CardType::Charge),
        "payment" | "return" | "refund" | "payment/credit" | "payments" | "returns"
        | "paiement" | "remboursement" | "pago" | "devolución" | "zahlung" | "gutschrift" => {
            Some(CardType::Payment)
        }
        _ => None,
    }
}

/// Whether a header cell names a card (`Card No.`, `Card Member`, `Card Used For
/// Transaction`, `Kreditkarte`, `Carte`): the export is a card account's.
pub(super) fn names_a_card(cell: &str) -> bool {
    let name = normalize(cell).name;
    name.split(|c: char| !c.is_alphanumeric()).any(|word| {
        matches!(
            word,
            "card" | "cardmember" | "cardholder" | "carte" | "tarjeta"
        )
    }) || name.contains("kreditkarte")
        || name.contains("kartennummer")
}

/// Whether a header cell names the account of each row (`Account`, `Account Name`): an export
/// of several accounts in one file (Mint and other budgeting apps).
pub(super) fn names_an_account(cell: &str) -> bool {
    matches!(
        normalize(cell).name.as_str(),
        "account" | "account name" | "accountname" | "account_name"
    )
}

/// Whether a header cell belongs to a merchant's export of the payments it received (Stripe,
/// Square, PayPal: `fee`, `customer_email`, `amount_refunded`, `captured`). Such a file names
/// the paying customer's card (`card_id`), not a card account of the user's, and its positive
/// amounts are money in.
pub(super) fn names_merchant_side(cell: &str) -> bool {
    let name = normalize(cell).name;
    let words: Vec<&str> = name
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    matches!(
        words.as_slice(),
        ["fee"] | ["fees"] | ["captured"] | ["seller", "message"] | ["payout"] | ["payout", "id"]
    ) || (words.first() == Some(&"customer") && words.len() > 1)
        || words.windows(2).any(|w| w == ["amount", "refunded"])
}

/// Whether a date cell says the row has no date yet because it is not booked (`pending`).
pub(super) fn is_pending_date(cell: &str) -> bool {
    matches!(
        super::values::clean(cell).to_lowercase().as_str(),
        "pending" | "ausstehend" | "vorgemerkt" | "en attente" | "pendiente" | "in attesa"
    )
}

/// Whether a status cell says the row is not booked yet.
pub(super) fn status_is_pending(cell: &str) -> bool {
    matches!(
        super::values::clean(cell).to_lowercase().as_str(),
        "pending"
            | "vorgemerkt"
            | "vorgemerkter umsatz"
            | "en attente"
            | "in behandeling"
            | "pendiente"
            | "in sospeso"
            | "authorized"
            | "authorised"
    )
}
