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
    let name = name
        .trim()
        .trim_end_matches(':')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    HeaderName { name, unit }
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
