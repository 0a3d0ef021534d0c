//! Enable Banking answers read into records: institutions, accounts, balances and
//! transactions. Pure functions, so every rule is unit-tested without a server.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::providers::clients::non_blank;
use crate::providers::{Institution, SyncItemError, iso_currency};
use crate::store::{
    AccountType, NewAccount, NewTransaction, TransactionStatus, TransactionType,
    mask_account_number,
};

/// Seconds in a day, to turn a consent validity into days.
const DAY_SECONDS: u64 = 24 * 3600;

/// `GET /aspsps`.
#[derive(Debug, Deserialize)]
pub(super) struct AspspList {
    #[serde(default)]
    pub(super) aspsps: Vec<Aspsp>,
}

/// One ASPSP (bank) of `GET /aspsps`.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Aspsp {
    pub(super) name: String,
    pub(super) country: String,
    #[serde(default)]
    pub(super) logo: Option<String>,
    /// The longest consent the bank grants, in seconds.
    #[serde(default)]
    pub(super) maximum_consent_validity: Option<u64>,
    #[serde(default)]
    pub(super) psu_types: Vec<String>,
}

impl Aspsp {
    /// Whether a person (rather than only a business) can connect it.
    pub(super) fn serves_persons(&self) -> bool {
        self.psu_types.is_empty() || self.psu_types.iter().any(|kind| kind == "personal")
    }

    /// The institution the service lists.
    pub(super) fn institution(&self) -> Institution {
        Institution {
            id: institution_id(&self.country, &self.name),
            name: self.name.clone(),
            country: self.country.to_ascii_uppercase(),
            logo_url: self.logo.clone().filter(|logo| !logo.trim().is_empty()),
            max_consent_days: self
                .maximum_consent_validity
                .map(|seconds| u32::try_from(seconds / DAY_SECONDS).unwrap_or(u32::MAX)),
        }
    }
}

/// An ASPSP as `POST /auth` names it and the stored session remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct AspspRef {
    pub(super) name: String,
    pub(super) country: String,
}

/// The institution id of an ASPSP: its country and name (`FI:Nordea`), which is all
/// `POST /auth` needs to name it again.
pub(super) fn institution_id(country: &str, name: &str) -> String {
    format!("{}:{name}", country.to_ascii_uppercase())
}

/// The ASPSP an institution id names, if it is one.
pub(super) fn parse_institution_id(id: &str) -> Option<AspspRef> {
    let (country, name) = id.split_once(':')?;
    let valid = country.len() == 2
        && country.bytes().all(|b| b.is_ascii_alphabetic())
        && !name.trim().is_empty();
    valid.then(|| AspspRef {
        name: name.to_owned(),
        country: country.to_ascii_uppercase(),
    })
}

/// `POST /auth`'s answer.
#[derive(Debug, Deserialize)]
pub(super) struct AuthStarted {
    pub(super) url: String,
}

/// `POST /sessions`'s answer.
#[derive(Debug, Deserialize)]
pub(super) struct SessionCreated {
    pub(super) session_id: String,
    #[serde(default)]
    pub(super) accounts: Vec<serde_json::Value>,
    #[serde(default)]
    pub(super) aspsp: Option<AspspRef>,
    #[serde(default)]
    pub(super) access: Option<Access>,
}

/// The consent a session holds.
#[derive(Debug, Deserialize)]
pub(super) struct Access {
    #[serde(default)]
    pub(super) valid_until: Option<DateTime<Utc>>,
}

/// An account of a session.
#[derive(Debug, Deserialize)]
struct AccountResource {
    uid: String,
    #[serde(default)]
    identification_hash: Option<String>,
    #[serde(default)]
    account_id: Option<AccountIdentification>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    details: Option<String>,
    #[serde(default)]
    product: Option<String>,
    #[serde(default)]
    cash_account_type: Option<String>,
    #[serde(default)]
    currency: Option<String>,
}

#[derive(Debug, Deserialize)]
struct AccountIdentification {
    #[serde(default)]
    iban: Option<String>,
    #[serde(default)]
    other: Option<OtherIdentification>,
}

#[derive(Debug, Deserialize)]
struct OtherIdentification {
    #[serde(default)]
    identification: Option<String>,
}

/// The encrypted secret of a connection: the session and what its accounts are, so that a
/// sync needs no request to learn them again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct SessionSecret {
    pub(super) session_id: String,
    pub(super) aspsp: Option<AspspRef>,
    pub(super) accounts: Vec<SessionAccount>,
}

/// One account of a session: its `uid` in this session and its stable key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct SessionAccount {
    /// The account's id in this session (a new one in every session).
    pub(super) uid: String,
    /// The stable id the records use (`provider_account_id`).
    pub(super) key: String,
    pub(super) name: String,
    /// The masked IBAN (or other number).
    pub(super) account_number: Option<String>,
    pub(super) cash_account_type: Option<String>,
    pub(super) currency: Option<String>,
}

/// The accounts of `POST /sessions`: the usable ones and the ones that are not.
pub(super) fn session_accounts(
    accounts: Vec<serde_json::Value>,
) -> (Vec<SessionAccount>, Vec<SyncItemError>) {
    let mut usable = Vec::new();
    let mut errors = Vec::new();
    for value in accounts {
        let item = value
            .get("uid")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("(no uid)")
            .to_owned();
        match serde_json::from_value::<AccountResource>(value) {
            Ok(account) => usable.push(session_account(account)),
            Err(error) => errors.push(SyncItemError {
                item,
                message: format!("unreadable account: {error}"),
            }),
        }
    }
    (usable, errors)
}

fn session_account(account: AccountResource) -> SessionAccount {
    let iban = account
        .account_id
        .as_ref()
        .and_then(|id| non_blank(id.iban.clone()))
        .map(|iban| iban.replace(' ', "").to_ascii_uppercase());
    let other = account
        .account_id
        .as_ref()
        .and_then(|id| id.other.as_ref())
        .and_then(|other| non_blank(other.identification.clone()));
    let key = stable_key(
        non_blank(account.identification_hash).as_deref(),
        iban.as_deref(),
        other.as_deref(),
        &account.uid,
    );
    let account_number = iban
        .as_deref()
        .or(other.as_deref())
        .map(mask_account_number);
    // `name` is the account holder's name, so the account's own description comes first.
    let name = non_blank(account.details)
        .or_else(|| non_blank(account.product.clone()))
        .or_else(|| non_blank(account.name))
        .or_else(|| {
            account_number
                .as_ref()
                .map(|number| format!("Account {number}"))
        })
        .unwrap_or_else(|| "Account".to_owned());
    SessionAccount {
        uid: account.uid,
        key,
        name,
        account_number,
        cash_account_type: non_blank(account.cash_account_type),
        currency: non_blank(account.currency).map(|code| code.to_ascii_uppercase()),
    }
}

/// An account's id across sessions: Enable Banking's `identification_hash`, else a digest of
/// the IBAN (or other account number), so the number itself is not stored in plain text; the
/// session's `uid` only when the bank gives neither (such an account is new after every
/// reauthorization).
fn stable_key(hash: Option<&str>, iban: Option<&str>, other: Option<&str>, uid: &str) -> String {
    if let Some(hash) = hash {
        return hash.to_owned();
    }
    let digest = |kind: &str, number: &str| {
        let sum = Sha256::digest(number.as_bytes());
        format!("{kind}-{}", hex::encode(&sum[..16]))
    };
    match (iban, other) {
        (Some(iban), _) => digest("iban", iban),
        (None, Some(other)) => digest("account", other),
        (None, None) => format!("uid-{uid}"),
    }
}

/// Our account type of an ISO 20022 cash account type; `other` for the rest.
pub(super) fn account_type_of(cash_account_type: Option<&str>) -> AccountType {
    match cash_account_type.map(str::to_ascii_uppercase).as_deref() {
        Some("CACC" | "CASH" | "TRAN" | "SLRY" | "NREX") => AccountType::Checking,
        Some("SVGS" | "LLSV" | "ONDP") => AccountType::Savings,
        Some("CARD") => AccountType::CreditCard,
        Some("LOAN") => AccountType::Loan,
        Some("MOMA") => AccountType::MoneyMarket,
        Some("ODFT" | "MGLD") => AccountType::LineOfCredit,
        _ => AccountType::Other,
    }
}

/// `GET /accounts/{uid}/balances`.
#[derive(Debug, Deserialize)]
pub(super) struct BalanceList {
    #[serde(default)]
    pub(super) balances: Vec<Balance>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Balance {
    balance_amount: Amount,
    #[serde(default)]
    balance_type: Option<String>,
}

/// An amount with its currency; the amount is a string in the API, a number tolerated.
#[derive(Debug, Deserialize)]
struct Amount {
    currency: String,
    amount: serde_json::Value,
}

impl Amount {
    fn value(&self) -> Result<Decimal, String> {
        let text = match &self.amount {
            serde_json::Value::String(text) => text.trim().to_owned(),
            serde_json::Value::Number(number) => number.to_string(),
            other => return Err(format!("amount {other} is not a number")),
        };
        text.parse::<Decimal>()
            .map_err(|_| format!("amount {text:?} is not a decimal number"))
    }

    fn currency(&self) -> Result<String, String> {
        iso_currency(&self.currency)
    }
}

/// The balance types that stand for the account's balance, best first: the booked balance at
/// the end of the last day (`CLBD`), the booked balance now (`ITBD`), the balance with
/// pending entries (`XPCD`), the opening and previous-closing booked balances (`OPBD`,
/// `PRCD`), and the available ones when the bank reports nothing else.
const BALANCE_PREFERENCE: &[&str] = &[
    "CLBD", "ITBD", "XPCD", "OPBD", "PRCD", "ITAV", "CLAV", "OPAV", "FWAV", "INFO", "OTHR",
];

/// The balance types that stand for the money available, best first: available now
/// (`ITAV`), at the end of the last day (`CLAV`), forward (`FWAV`), then the expected
/// balance (`XPCD`).
const AVAILABLE_PREFERENCE: &[&str] = &["ITAV", "CLAV", "FWAV", "XPCD"];

/// The account's balance and available balance from its balances: the best type of
/// [`BALANCE_PREFERENCE`] (and of [`AVAILABLE_PREFERENCE`]), among the balances in the
/// account's currency when it has one; any first balance when no type is known. The currency
/// is the chosen balance's.
pub(super) fn pick_balances(
    balances: &[Balance],
    account_currency: Option<&str>,
) -> Result<(Decimal, Option<Decimal>, String), String> {
    let in_currency: Vec<&Balance> = balances
        .iter()
        .filter(|balance| {
            account_currency.is_none_or(|currency| {
                balance
                    .balance_amount
                    .currency
                    .trim()
                    .eq_ignore_ascii_case(currency)
            })
        })
        .collect();
    let candidates: Vec<&Balance> = if in_currency.is_empty() {
        balances.iter().collect()
    } else {
        in_currency
    };
    let of_type = |kind: &str| {
        candidates.iter().copied().find(|balance| {
            balance
                .balance_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case(kind))
        })
    };
    let chosen = BALANCE_PREFERENCE
        .iter()
        .find_map(|kind| of_type(kind))
        .or_else(|| candidates.first().copied())
        .ok_or_else(|| "the bank reported no balance".to_owned())?;
    let balance = chosen.balance_amount.value()?;
    let currency = chosen.balance_amount.currency()?;
    let available = AVAILABLE_PREFERENCE
        .iter()
        .find_map(|kind| of_type(kind))
        .map(|balance| balance.balance_amount.value())
        .transpose()?;
    Ok((balance, available, currency))
}

/// The account record of a session account with its balances.
pub(super) fn account_record(
    account: &SessionAccount,
    balances: &[Balance],
) -> Result<NewAccount, SyncItemError> {
    let (balance, available, currency) = pick_balances(balances, account.currency.as_deref())
        .map_err(|message| SyncItemError {
            item: account.key.clone(),
            message,
        })?;
    Ok(NewAccount {
        provider_account_id: account.key.clone(),
        account_number: account.account_number.clone(),
        account_type: account_type_of(account.cash_account_type.as_deref()),
        name: account.name.clone(),
        currency,
        balance_amount: balance,
        available_balance_amount: available,
        is_active: true,
    })
}

/// One page of `GET /accounts/{uid}/transactions`.
#[derive(Debug, Deserialize)]
pub(super) struct TransactionPage {
    #[serde(default)]
    pub(super) transactions: Vec<serde_json::Value>,
    #[serde(default)]
    pub(super) continuation_key: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Transaction {
    #[serde(default)]
    entry_reference: Option<String>,
    transaction_amount: Amount,
    #[serde(default)]
    credit_debit_indicator: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    booking_date: Option<NaiveDate>,
    #[serde(default)]
    value_date: Option<NaiveDate>,
    #[serde(default)]
    transaction_date: Option<NaiveDate>,
    #[serde(default)]
    remittance_information: Option<Vec<String>>,
    #[serde(default)]
    creditor: Option<Party>,
    #[serde(default)]
    debtor: Option<Party>,
    #[serde(default)]
    reference_number: Option<String>,
    #[serde(default)]
    note: Option<String>,
    /// The card merchant's ISO 18245 code (four digits).
    #[serde(default)]
    merchant_category_code: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Party {
    #[serde(default)]
    name: Option<String>,
}

/// Reads one transaction: its record, or `None` for one that did not happen (cancelled,
/// rejected, only scheduled), which is not recorded. Amounts are positive with `credit_debit_indicator` (`DBIT`:
/// money out, negative). `BOOK` is settled; `PDNG` and `HOLD` are pending; `CNCL`, `RJCT`,
/// `SCHD` and `INFO` are skipped; without a status, a booking date means settled. The id is
/// `entry_reference`, else a digest of the transaction's fields numbered by occurrence
/// (`seen` counts the digests of one answer), so two equal rows stay two.
pub(super) fn map_transaction(
    value: serde_json::Value,
    account_currency: Option<&str>,
    seen: &mut HashMap<String, u32>,
) -> Result<Option<NewTransaction>, SyncItemError> {
    let item = value
        .get("entry_reference")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("(no entry_reference)")
        .to_owned();
    let fail = |message: String| SyncItemError {
        item: item.clone(),
        message,
    };
    let transaction: Transaction = serde_json::from_value(value)
        .map_err(|error| fail(format!("unreadable transaction: {error}")))?;
    let status = transaction
        .status
        .as_deref()
        .map(str::to_ascii_uppercase)
        .unwrap_or_else(|| {
            if transaction.booking_date.is_some() {
                "BOOK".to_owned()
            } else {
                "PDNG".to_owned()
            }
        });
    let pending = match status.as_str() {
        "BOOK" => false,
        "PDNG" | "HOLD" => true,
        "CNCL" | "RJCT" | "SCHD" | "INFO" => return Ok(None),
        _ => transaction.booking_date.is_none(),
    };
    let magnitude = transaction.transaction_amount.value().map_err(fail)?.abs();
    let amount = match transaction.credit_debit_indicator.as_deref() {
        Some(indicator) if indicator.eq_ignore_ascii_case("DBIT") => -magnitude,
        Some(indicator) if indicator.eq_ignore_ascii_case("CRDT") => magnitude,
        other => {
            return Err(fail(format!(
                "credit_debit_indicator {other:?} is neither CRDT nor DBIT"
            )));
        }
    };
    let currency = transaction
        .transaction_amount
        .currency()
        .or_else(|error| account_currency.map(iso_currency).unwrap_or(Err(error)))
        .map_err(fail)?;
    let date = if pending {
        transaction
            .transaction_date
            .or(transaction.value_date)
            .or(transaction.booking_date)
    } else {
        transaction
            .booking_date
            .or(transaction.value_date)
            .or(transaction.transaction_date)
    }
    .ok_or_else(|| fail("the transaction has no date".to_owned()))?;
    let counterparty = if amount.is_sign_negative() {
        transaction.creditor.as_ref()
    } else {
        transaction.debtor.as_ref()
    }
    .and_then(|party| non_blank(party.name.clone()));
    let remittance = transaction
        .remittance_information
        .as_deref()
        .map(|lines| {
            lines
                .iter()
                .map(|line| line.trim())
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|text| !text.is_empty());
    let description = match (counterparty.as_deref(), remittance.as_deref()) {
        (Some(name), Some(text)) if text.contains(name) => Some(text.to_owned()),
        (Some(name), Some(text)) => Some(format!("{name}: {text}")),
        (Some(name), None) => Some(name.to_owned()),
        (None, Some(text)) => Some(text.to_owned()),
        (None, None) => non_blank(transaction.note.clone()),
    };
    let id = match non_blank(transaction.entry_reference.clone()) {
        Some(reference) => reference,
        None => {
            let fields = [
                status.clone(),
                date.to_string(),
                transaction
                    .booking_date
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
                amount.normalize().to_string(),
                currency.clone(),
                counterparty.clone().unwrap_or_default(),
                remittance.clone().unwrap_or_default(),
                transaction.reference_number.clone().unwrap_or_default(),
            ];
            let digest = hex::encode(&Sha256::digest(fields.join("\u{1f}").as_bytes())[..16]);
            let occurrence = seen.entry(digest.clone()).or_insert(0);
            *occurrence += 1;
            format!("digest-{digest}-{occurrence}")
        }
    };
    Ok(Some(NewTransaction {
        provider_transaction_id: id,
        transaction_type: TransactionType::Other,
        subtype: None,
        status: if pending {
            TransactionStatus::Pending
        } else {
            TransactionStatus::Settled
        },
        amount,
        currency,
        description,
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: date,
        settlement_date: if pending {
            None
        } else {
            transaction.booking_date.or(transaction.value_date)
        },
        pending_transaction_id: None,
        merchant_code: non_blank(transaction.merchant_category_code),
    }))
}

/// An error answer of the API: `{code, message, error, detail}`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ErrorBody {
    #[serde(default)]
    pub(super) message: Option<String>,
    #[serde(default)]
    pub(super) error: Option<String>,
}

/// The error codes saying the session can no longer be used: the consent ended, the user
/// revoked it at the bank, or it was closed.
pub(super) fn ends_session(error: Option<&str>) -> bool {
    error.is_some_and(|code| {
        matches!(
            code.to_ascii_uppercase().as_str(),
            "EXPIRED_SESSION"
                | "REVOKED_SESSION"
                | "CLOSED_SESSION"
                | "SESSION_DOES_NOT_EXIST"
                | "INVALID_SESSION"
                | "EXPIRED_ACCESS"
                | "REVOKED_ACCESS"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn balances(value: serde_json::Value) -> Vec<Balance> {
        serde_json::from_value::<BalanceList>(value)
            .expect("balances")
            .balances
    }

    #[test]
    fn institutions_carry_an_id_that_names_the_bank_again() {
        let list: AspspList = serde_json::from_value(json!({"aspsps": [
            {"name": "Nordea", "country": "FI", "logo": "https://x/n.png",
             "maximum_consent_validity": 15_552_000, "psu_types": ["personal", "business"]},
            {"name": "Corp Bank", "country": "FI", "psu_types": ["business"]}
        ]}))
        .expect("aspsps");
        let nordea = list.aspsps[0].institution();
        assert_eq!(nordea.id, "FI:Nordea");
        assert_eq!(nordea.max_consent_days, Some(180));
        assert_eq!(nordea.logo_url.as_deref(), Some("https://x/n.png"));
        assert!(list.aspsps[0].serves_persons());
        assert!(!list.aspsps[1].serves_persons());
        assert_eq!(
            parse_institution_id("fi:Nordea: Personal"),
            Some(AspspRef {
                name: "Nordea: Personal".to_owned(),
                country: "FI".to_owned()
            })
        );
        for bad in ["Nordea", "FIN:Nordea", "F1:Nordea", "FI:", "FI: "] {
            assert_eq!(parse_institution_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn accounts_are_keyed_by_their_hash_else_a_digest_of_the_iban() {
        let (accounts, errors) = session_accounts(vec![
            json!({"uid": "u1", "identification_hash": "h1",
                   "account_id": {"iban": "FI21 1234 5600 0007 85"}, "name": "A. Holder",
                   "details": "Current", "cash_account_type": "CACC", "currency": "eur"}),
            json!({"uid": "u2", "account_id": {"iban": "fi2112345600000785"},
                   "product": "Card", "cash_account_type": "CARD"}),
            json!({"uid": "u3"}),
            json!({"no_uid": true}),
        ]);
        assert_eq!(errors.len(), 1);
        assert_eq!(accounts[0].key, "h1");
        assert_eq!(accounts[0].account_number.as_deref(), Some("****0785"));
        assert_eq!(accounts[0].currency.as_deref(), Some("EUR"));
        assert_eq!(accounts[0].name, "Current");
        assert!(accounts[1].key.starts_with("iban-"));
        assert!(!accounts[1].key.contains("0785"));
        assert_eq!(accounts[1].name, "Card");
        // The same IBAN in another session keys the same account.
        let (again, _) = session_accounts(vec![
            json!({"uid": "u9", "account_id": {"iban": "FI2112345600000785"}}),
        ]);
        assert_eq!(again[0].key, accounts[1].key);
        assert_eq!(accounts[2].key, "uid-u3");
        assert_eq!(accounts[2].name, "Account");
    }

    #[test]
    fn cash_account_types_map_to_account_types() {
        assert_eq!(account_type_of(Some("CACC")), AccountType::Checking);
        assert_eq!(account_type_of(Some("svgs")), AccountType::Savings);
        assert_eq!(account_type_of(Some("CARD")), AccountType::CreditCard);
        assert_eq!(account_type_of(Some("LOAN")), AccountType::Loan);
        assert_eq!(account_type_of(Some("MOMA")), AccountType::MoneyMarket);
        assert_eq!(account_type_of(Some("ODFT")), AccountType::LineOfCredit);
        assert_eq!(account_type_of(Some("TAXE")), AccountType::Other);
        assert_eq!(account_type_of(None), AccountType::Other);
    }

    #[test]
    fn the_best_balance_type_wins() {
        let list = balances(json!({"balances": [
            {"balance_amount": {"currency": "EUR", "amount": "90.00"}, "balance_type": "ITAV"},
            {"balance_amount": {"currency": "EUR", "amount": "100.00"}, "balance_type": "XPCD"},
            {"balance_amount": {"currency": "EUR", "amount": "120.50"}, "balance_type": "CLBD"},
            {"balance_amount": {"currency": "USD", "amount": "7"}, "balance_type": "CLBD"}
        ]}));
        let (balance, available, currency) = pick_balances(&list, Some("EUR")).expect("picked");
        assert_eq!(balance.to_string(), "120.50");
        assert_eq!(available.map(|a| a.to_string()).as_deref(), Some("90.00"));
        assert_eq!(currency, "EUR");
        let only_available = balances(json!({"balances": [
            {"balance_amount": {"currency": "SEK", "amount": -320.55}, "balance_type": "ITAV"}
        ]}));
        let (balance, available, currency) = pick_balances(&only_available, None).expect("picked");
        assert_eq!(balance.to_string(), "-320.55");
        assert_eq!(available, Some(balance));
        assert_eq!(currency, "SEK");
        assert!(pick_balances(&[], None).is_err());
    }

    #[test]
    fn transactions_are_signed_dated_and_described() {
        let mut seen = HashMap::new();
        let debit = json!({
            "entry_reference": "e1", "credit_debit_indicator": "DBIT", "status": "BOOK",
            "transaction_amount": {"currency": "EUR", "amount": "12.30"},
            "booking_date": "2026-03-02", "value_date": "2026-03-01",
            "creditor": {"name": "Cafe"}, "remittance_information": ["Card purchase", " 1234 "]
        });
        let row = map_transaction(debit, Some("EUR"), &mut seen)
            .expect("maps")
            .expect("a row");
        assert_eq!(row.amount.to_string(), "-12.30");
        assert_eq!(row.status, TransactionStatus::Settled);
        assert_eq!(row.transaction_date.to_string(), "2026-03-02");
        assert_eq!(row.description.as_deref(), Some("Cafe: Card purchase 1234"));
        assert_eq!(row.provider_transaction_id, "e1");
        let pending = json!({
            "credit_debit_indicator": "CRDT", "status": "PDNG",
            "transaction_amount": {"currency": "EUR", "amount": "50"},
            "transaction_date": "2026-03-03", "debtor": {"name": "Employer"}
        });
        let first = map_transaction(pending.clone(), None, &mut seen)
            .expect("maps")
            .expect("a row");
        let second = map_transaction(pending, None, &mut seen)
            .expect("maps")
            .expect("a row");
        assert_eq!(first.status, TransactionStatus::Pending);
        assert_eq!(first.amount.to_string(), "50");
        assert_eq!(first.description.as_deref(), Some("Employer"));
        assert_eq!(first.settlement_date, None);
        assert!(first.provider_transaction_id.starts_with("digest-"));
        assert_ne!(
            first.provider_transaction_id,
            second.provider_transaction_id
        );
        let cancelled = json!({"credit_debit_indicator": "DBIT", "status": "CNCL",
            "transaction_amount": {"currency": "EUR", "amount": "1"}, "booking_date": "2026-03-03"});
        assert!(matches!(
            map_transaction(cancelled, None, &mut seen),
            Ok(None)
        ));
        let unsigned = json!({"transaction_amount": {"currency": "EUR", "amount": "1"},
            "booking_date": "2026-03-03"});
        assert!(map_transaction(unsigned, None, &mut seen).is_err());
        let undated = json!({"credit_debit_indicator": "DBIT",
            "transaction_amount": {"currency": "EUR", "amount": "1"}});
        assert!(map_transaction(undated, None, &mut seen).is_err());
    }

    #[test]
    fn session_ending_errors_are_recognized() {
        assert!(ends_session(Some("EXPIRED_SESSION")));
        assert!(ends_session(Some("revoked_session")));
        assert!(!ends_session(Some("ASPSP_ERROR")));
        assert!(!ends_session(None));
    }
}
