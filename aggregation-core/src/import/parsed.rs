//! From a [`ParsedFile`] (CSV, QIF, CAMT.052/053/054, MT940/942) to the normalized batch every
//! format maps to ([`ParsedBatch`], assembled by `import::batch`), with the warnings the
//! answer reports. One set of rules for every format of the statement model; the parsers only
//! read.
//!
//! # Mapping
//!
//! - **Institution**: the file's (CAMT `Svcr`, MT940 sender), else `Unknown institution`; it
//!   names the user's `file_import` connection, as for OFX.
//! - **Account**: keyed by the identifier the file states (IBAN or other id, whitespace
//!   removed); a statement without one is keyed by its name (`name:<name>`: the file's account
//!   name, else the `account_name` part), else `unknown:<currency>`. Statements with the same
//!   key are one account. Name: the file's, else `account_name`, else
//!   `<institution> <Type> ****1234`. Currency: the file's account, balance or entry currency,
//!   else the `currency` part, else `USD`. Type: QIF `Bank` → checking, `CCard` →
//!   credit_card, `Invst` → brokerage, `Oth L` → loan, `Cash` and `Oth A` → other; a file that
//!   does not say (CAMT, MT940, CSV) → checking.
//! - **Transaction identity**: the entry's own reference (CAMT `AcctSvcrRef`/`TxId`, MT940
//!   bank reference, CSV `id`) when it has one. Otherwise a digest: SHA-256 of the account
//!   identifier the file states (empty when it states none, so a file imported once by
//!   `account_name` and once by `account_id` gives the same ids), the date, the amount (by
//!   value: `12.5` = `12.50`), the counterparty and the text; the id is `h:` + 32 hex digits +
//!   `:` + the row's ordinal among identical rows of its statement. Two identical coffees on
//!   one day stay two; the same rows in an overlapping statement get the same ids. Entries
//!   with the same id, date and amount in one file are one transaction (the later one wins); a
//!   reference reused with another date or amount is another transaction, its id suffixed
//!   `#2`, `#3`, … (banks reuse references: counterparty numbers, `EREF`, constant FITIDs).
//! - **Transaction fields**: status `pending` for pending entries (CAMT `PDNG`, MT942), else
//!   `settled`; description `counterparty - text` (either alone when the other is missing or
//!   the same); subtype = the bank's code or QIF action; settlement date = the value date;
//!   symbol = the security, with quantity, price and commission.
//! - **Balance check**: a statement with an opening and a closing balance must satisfy
//!   opening + booked entries = closing; a mismatch is imported with a warning naming the
//!   statement and the difference.
//! - **Balances**: every closing balance becomes a `file_import` snapshot captured at 00:00
//!   UTC of its date (with the statement's available balance); the account's balance is the
//!   latest of them (by date; in file order on a tie). Two closings of one account on one date
//!   give one snapshot (the later).
//! - **Positions** become holdings keyed by the security (asset type `other`); market value =
//!   the stated one, else units × price, else 0. A later statement's positions replace an
//!   earlier one's.
//! - NUL characters are removed from text (PostgreSQL refuses them).

use std::collections::HashMap;

use chrono::NaiveTime;
use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};

use super::batch::{
    BalanceHistory, BatchBuilder, Defaults, ImportWarning, Normalize, Refusal, Releasing,
    ReportedBalance, account_name, clean, clean_opt,
};
use super::model::{
    AccountKind, EntryKind, EntryStatus, ParsedEntry, ParsedFile, ParsedPosition, ParsedStatement,
};
use crate::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewTransaction, TransactionStatus,
    TransactionType,
};

fn account_type(kind: Option<AccountKind>) -> AccountType {
    match kind {
        None | Some(AccountKind::Checking) => AccountType::Checking,
        Some(AccountKind::Savings) => AccountType::Savings,
        Some(AccountKind::CreditCard) => AccountType::CreditCard,
        Some(AccountKind::Investment) => AccountType::Brokerage,
        Some(AccountKind::OtherLiability) => AccountType::Loan,
        Some(AccountKind::Cash | AccountKind::OtherAsset) => AccountType::Other,
    }
}

fn transaction_type(kind: EntryKind) -> TransactionType {
    match kind {
        EntryKind::Trade => TransactionType::Trade,
        EntryKind::Transfer => TransactionType::Transfer,
        EntryKind::Income => TransactionType::Income,
        EntryKind::Fee => TransactionType::Fee,
        EntryKind::Other => TransactionType::Other,
    }
}

/// An account identifier as a key: trimmed, inner whitespace removed (`DE89 3704 …`).
fn identifier_key(identifier: Option<&str>) -> Option<String> {
    let key: String = identifier?
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '\0')
        .collect();
    (!key.is_empty()).then_some(key)
}

fn currency_code(code: Option<&str>) -> Option<String> {
    clean_opt(code).map(|code| code.to_ascii_uppercase())
}

/// The currency of a statement's account as the file states it.
fn statement_currency(statement: &ParsedStatement) -> Option<String> {
    currency_code(statement.account.currency.as_deref())
        .or_else(|| {
            [&statement.closing, &statement.opening, &statement.available]
                .into_iter()
                .flatten()
                .find_map(|balance| currency_code(balance.currency.as_deref()))
        })
        .or_else(|| {
            statement
                .entries
                .iter()
                .find_map(|entry| currency_code(entry.currency.as_deref()))
        })
}

fn description(entry: &ParsedEntry) -> Option<String> {
    let counterparty = clean_opt(entry.counterparty.as_deref());
    let text = clean_opt(entry.text.as_deref());
    match (counterparty, text) {
        (Some(counterparty), Some(text)) if text != counterparty => {
            Some(format!("{counterparty} - {text}"))
        }
        (Some(counterparty), _) => Some(counterparty),
        (None, text) => text,
    }
}

/// The digest part of a derived transaction id: the first half of a SHA-256 (32 hex digits in
/// the id), kept as bytes while ids are counted so that counting allocates nothing per row.
fn digest(account: &str, entry: &ParsedEntry) -> [u8; 16] {
    let mut hasher = Sha256::new();
    for part in [
        account,
        &entry.date.to_string(),
        &entry.amount.normalize().to_string(),
        entry.counterparty.as_deref().map(str::trim).unwrap_or(""),
        entry.text.as_deref().map(str::trim).unwrap_or(""),
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0x1f]);
    }
    let mut half = [0; 16];
    half.copy_from_slice(&hasher.finalize()[..16]);
    half
}

/// The transactions of a statement's entries, each with its id (derived from `account`, the
/// identifier the statement states, when the entry has no reference); the entries' memory is
/// given back as they are mapped.
fn transactions<'a>(
    entries: Vec<ParsedEntry>,
    account: String,
    currency: &'a str,
    seen: &'a mut HashMap<[u8; 16], usize>,
) -> impl Iterator<Item = NewTransaction> + 'a {
    Releasing::new(entries).map(move |entry| {
        let entry = &entry;
        let id = match clean_opt(entry.reference.as_deref()) {
            Some(reference) => reference,
            None => {
                let digest = digest(&account, entry);
                let ordinal = seen.entry(digest).or_default();
                let id = format!("h:{}:{ordinal}", hex::encode(digest));
                *ordinal += 1;
                id
            }
        };
        NewTransaction {
            provider_transaction_id: id,
            transaction_type: transaction_type(entry.kind),
            subtype: clean_opt(entry.code.as_deref()),
            status: match entry.status {
                EntryStatus::Booked => TransactionStatus::Settled,
                EntryStatus::Pending => TransactionStatus::Pending,
            },
            amount: entry.amount,
            currency: currency_code(entry.currency.as_deref())
                .unwrap_or_else(|| currency.to_owned()),
            description: description(entry),
            symbol: clean_opt(entry.security.as_deref()),
            security_name: None,
            quantity: entry.quantity,
            unit_price: entry.unit_price,
            commission: entry.commission,
            transaction_date: entry.date,
            settlement_date: entry.value_date,
            pending_transaction_id: None,
            merchant_code: None,
        }
    })
}

fn holding(position: &ParsedPosition, currency: &str) -> Option<NewHolding> {
    let security = clean(&position.security)?;
    let market_value = position
        .market_value
        .or_else(|| {
            position
                .unit_price
                .and_then(|price| price.checked_mul(position.quantity))
        })
        .unwrap_or_default();
    Some(NewHolding {
        provider_holding_id: security.clone(),
        symbol: security,
        security_name: None,
        asset_type: AssetType::Other,
        quantity: position.quantity,
        cost_basis: position.cost_basis,
        market_value,
        currency: currency.to_owned(),
        average_price: None,
        current_price: position.unit_price,
        unrealized_gain_loss: position
            .cost_basis
            .and_then(|cost| market_value.checked_sub(cost)),
    })
}

/// The balance check of a statement: `None` when it holds (or cannot be made).
fn balance_check(index: usize, key: &str, statement: &ParsedStatement) -> Option<ImportWarning> {
    let (opening, closing) = (statement.opening.as_ref()?, statement.closing.as_ref()?);
    let booked = statement
        .entries
        .iter()
        .filter(|entry| entry.status == EntryStatus::Booked)
        .try_fold(Decimal::ZERO, |sum, entry| sum.checked_add(entry.amount))?;
    let expected = opening.amount.checked_add(booked)?;
    if expected == closing.amount {
        return None;
    }
    let difference = closing.amount.checked_sub(expected)?;
    Some(ImportWarning {
        item: format!("statement {} ({key})", index + 1),
        message: format!(
            "the opening balance {} of {} plus the booked entries ({}) gives {}, but the \
             closing balance of {} is {} (a difference of {}); imported as stated",
            opening.amount,
            opening.date,
            booked,
            expected,
            closing.date,
            closing.amount,
            difference
        ),
    })
}

/// The batch of a parsed file, unfinished, or why it cannot be imported. Closing balances
/// follow [`BalanceHistory::PerCapture`], each captured at 00:00 UTC of its date.
fn batch_builder(file: ParsedFile, defaults: &Defaults<'_>) -> Result<BatchBuilder, Refusal> {
    if file.statements.is_empty() {
        return Err(Refusal::NoStatement);
    }
    let institution =
        clean_opt(file.institution.as_deref()).unwrap_or_else(|| "Unknown institution".to_owned());
    let mut batch = BatchBuilder::new(institution, BalanceHistory::PerCapture);
    for warning in &file.warnings {
        batch.warn(ImportWarning {
            item: warning.item.clone(),
            message: warning.message.clone(),
        });
    }
    // Ordinals among identical rows count per statement, and on across the pages of one
    // (a statement that continues the one before it, of the same account).
    let mut seen: HashMap<[u8; 16], usize> = HashMap::new();
    let mut previous_key: Option<String> = None;
    for (index, mut statement) in file.statements.into_iter().enumerate() {
        let currency = statement_currency(&statement)
            .or_else(|| currency_code(defaults.currency))
            .unwrap_or_else(|| "USD".to_owned());
        let identifier = identifier_key(statement.account.identifier.as_deref());
        let name = clean_opt(statement.account.name.as_deref())
            .or_else(|| clean_opt(defaults.account_name));
        let key = match (&identifier, &name) {
            (Some(identifier), _) => identifier.clone(),
            (None, Some(name)) => format!("name:{name}"),
            (None, None) => format!("unknown:{currency}"),
        };
        let warning = balance_check(index, &key, &statement);
        // Derived ids digest the identifier as stated (empty when none).
        let digest_account = identifier.clone().unwrap_or_default();
        let institution = batch.institution().to_owned();
        if !(statement.continues && previous_key.as_deref() == Some(key.as_str())) {
            seen.clear();
        }
        previous_key = Some(key.clone());
        let account = batch.account(key, |key| {
            let kind = account_type(statement.account.kind);
            NewAccount {
                provider_account_id: key,
                name: name
                    .unwrap_or_else(|| account_name(&institution, kind, identifier.as_deref())),
                account_number: identifier,
                account_type: kind,
                currency,
                balance_amount: Decimal::ZERO,
                available_balance_amount: None,
                is_active: true,
            }
        });
        // The account's currency, as its first statement stated it.
        let currency = account.currency().to_owned();
        let entries = std::mem::take(&mut statement.entries);
        account.add_transactions(
            entries.len(),
            transactions(entries, digest_account, &currency, &mut seen),
        );
        account.replace_holdings(
            statement
                .positions
                .iter()
                .filter_map(|position| holding(position, &currency))
                .collect(),
        );
        if let Some(closing) = &statement.closing {
            account.report_balance(ReportedBalance {
                balance: closing.amount,
                available: statement
                    .available
                    .as_ref()
                    .map(|available| available.amount),
                holdings_value: None,
                cash: None,
                as_of: Some(closing.date.and_time(NaiveTime::MIN).and_utc()),
            });
        }
        if let Some(warning) = warning {
            batch.warn(warning);
        }
    }
    Ok(batch)
}

impl Normalize for ParsedFile {
    fn normalize(self: Box<Self>, defaults: &Defaults<'_>) -> Result<BatchBuilder, Refusal> {
        batch_builder(*self, defaults)
    }
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, Utc};

    use super::*;
    use crate::import::batch::ParsedBatch;
    use crate::import::model::{ParseWarning, ParsedAccount, ParsedBalance};
    use crate::store::{BatchAccount, BatchTarget};

    /// The batch of a file at a fixed time.
    fn import_batch(file: &ParsedFile, defaults: &Defaults<'_>) -> Result<Mapped, Refusal> {
        super::batch_builder(file.clone(), defaults).map(|batch| batch.finish(Utc::now()))
    }

    type Mapped = ParsedBatch;

    fn dec(text: &str) -> Decimal {
        text.parse().expect("decimal")
    }

    fn day(text: &str) -> NaiveDate {
        text.parse().expect("date")
    }

    fn entry(date: &str, amount: &str, text: &str) -> ParsedEntry {
        ParsedEntry {
            date: day(date),
            amount: dec(amount),
            text: Some(text.to_owned()),
            line: 1,
            ..ParsedEntry::default()
        }
    }

    fn balance(date: &str, amount: &str) -> ParsedBalance {
        ParsedBalance {
            amount: dec(amount),
            date: day(date),
            currency: Some("EUR".to_owned()),
        }
    }

    fn statement(iban: Option<&str>, entries: Vec<ParsedEntry>) -> ParsedStatement {
        ParsedStatement {
            account: ParsedAccount {
                identifier: iban.map(str::to_owned),
                ..ParsedAccount::default()
            },
            entries,
            ..ParsedStatement::default()
        }
    }

    fn only(mapped: &Mapped) -> &BatchAccount {
        let [institution] = mapped.batch.connections.as_slice() else {
            panic!("one institution: {mapped:?}");
        };
        let [account] = institution.accounts.as_slice() else {
            panic!("one account: {mapped:?}");
        };
        account
    }

    #[test]
    fn identical_rows_stay_two_and_ids_are_stable() {
        let coffee = entry("2024-03-01", "-3.50", "Coffee");
        let file = ParsedFile {
            statements: vec![statement(
                None,
                vec![
                    coffee.clone(),
                    coffee.clone(),
                    entry("2024-03-01", "-3.5", "Tea"),
                ],
            )],
            ..ParsedFile::default()
        };
        let defaults = Defaults {
            account_name: Some("Wallet"),
            currency: Some("eur"),
        };
        let mapped = import_batch(&file, &defaults).expect("maps");
        let account = only(&mapped);
        assert_eq!(account.fields().provider_account_id, "name:Wallet");
        assert_eq!(account.fields().name, "Wallet");
        assert_eq!(account.fields().currency, "EUR");
        assert_eq!(account.fields().account_type, AccountType::Checking);
        assert!(!account.balance_reported);
        let ids: Vec<&str> = account
            .rows()
            .iter()
            .map(|t| t.provider_transaction_id.as_str())
            .collect();
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert!(
            ids[0].starts_with("h:") && ids[0].ends_with(":0"),
            "{ids:?}"
        );
        assert_eq!(ids[0].len(), "h:".len() + 32 + ":0".len());
        assert_eq!(ids[1], format!("{}1", &ids[0][..ids[0].len() - 1]));
        assert_ne!(
            ids[2][..34],
            ids[0][..34],
            "the text is part of the identity"
        );
        // The same rows again (another file, an overlapping statement) give the same ids; the
        // amount counts by value.
        let again = ParsedFile {
            statements: vec![statement(
                None,
                vec![entry("2024-03-01", "-3.500", "Coffee")],
            )],
            ..ParsedFile::default()
        };
        let mapped_again = import_batch(&again, &defaults).expect("maps");
        assert_eq!(
            only(&mapped_again).rows()[0].provider_transaction_id,
            ids[0]
        );
    }

    #[test]
    fn references_are_ids_and_merge_across_statements() {
        let mut first = entry("2024-03-01", "-10", "Rent");
        first.reference = Some(" REF1 ".to_owned());
        let mut booked = first.clone();
        booked.text = Some("Rent March".to_owned());
        // The same reference on another day is another transaction.
        let mut reused = entry("2024-03-05", "-11", "Rent garage");
        reused.reference = Some("REF1".to_owned());
        let mut pending = entry("2024-03-02", "-1", "Card");
        pending.status = EntryStatus::Pending;
        let file = ParsedFile {
            institution: Some("Example Bank".to_owned()),
            statements: vec![
                statement(Some("DE89 3704 0044 0532 0130 00"), vec![first, pending]),
                statement(Some("DE89370400440532013000"), vec![booked, reused]),
            ],
            ..ParsedFile::default()
        };
        let mapped = import_batch(&file, &Defaults::default()).expect("maps");
        let account = only(&mapped);
        assert_eq!(
            mapped.batch.connections[0].target,
            BatchTarget::FileImport {
                alias: "Example Bank".to_owned()
            }
        );
        assert_eq!(
            account.fields().provider_account_id,
            "DE89370400440532013000"
        );
        assert_eq!(account.fields().name, "Example Bank Checking ****3000");
        assert_eq!(account.fields().currency, "USD", "nothing says otherwise");
        assert_eq!(account.rows().len(), 3);
        assert_eq!(account.rows()[0].provider_transaction_id, "REF1");
        assert_eq!(
            account.rows()[0].description.as_deref(),
            Some("Rent March"),
            "the later wins"
        );
        assert_eq!(account.rows()[1].status, TransactionStatus::Pending);
        assert_eq!(account.rows()[2].provider_transaction_id, "REF1#2");
        assert_eq!(account.rows()[2].amount, dec("-11"));
    }

    #[test]
    fn balances_are_checked_and_become_snapshots() {
        let mut january = statement(
            Some("NL91ABNA0417164300"),
            vec![
                entry("2024-01-10", "-20.00", "Shop"),
                entry("2024-01-20", "100", "Pay"),
            ],
        );
        january.opening = Some(balance("2023-12-31", "50.00"));
        january.closing = Some(balance("2024-01-31", "130.00"));
        january.available = Some(balance("2024-01-31", "120.00"));
        let mut february = statement(
            Some("NL91ABNA0417164300"),
            vec![entry("2024-02-10", "-30.00", "Shop")],
        );
        february.opening = Some(balance("2024-01-31", "130.00"));
        february.closing = Some(balance("2024-02-29", "99.00"));
        let file = ParsedFile {
            statements: vec![february, january],
            warnings: vec![ParseWarning {
                item: "line 3".to_owned(),
                message: "a line was skipped".to_owned(),
            }],
            ..ParsedFile::default()
        };
        let mapped = import_batch(&file, &Defaults::default()).expect("maps");
        assert_eq!(mapped.warnings.len(), 2, "{:?}", mapped.warnings);
        assert_eq!(mapped.warnings[0].item, "line 3");
        assert_eq!(mapped.warnings[1].item, "statement 1 (NL91ABNA0417164300)");
        assert!(
            mapped.warnings[1].message.contains("a difference of -1.00"),
            "{:?}",
            mapped.warnings[1]
        );
        let account = only(&mapped);
        assert_eq!(account.fields().currency, "EUR", "from the balances");
        assert!(account.balance_reported);
        assert_eq!(
            account.fields().balance_amount,
            dec("99.00"),
            "the latest date"
        );
        assert_eq!(account.fields().available_balance_amount, None);
        let captured: Vec<String> = account
            .snapshots
            .iter()
            .map(|s| s.balances().captured_at.to_rfc3339())
            .collect();
        assert_eq!(
            captured,
            ["2024-01-31T00:00:00+00:00", "2024-02-29T00:00:00+00:00"]
        );
        assert_eq!(
            account.snapshots[0].balances().available_balance,
            Some(dec("120.00"))
        );
    }

    #[test]
    fn positions_become_holdings_and_kinds_map() {
        let mut invest = statement(None, Vec::new());
        invest.account.name = Some("Brokerage".to_owned());
        invest.account.kind = Some(AccountKind::Investment);
        invest.positions = vec![ParsedPosition {
            security: "ACME".to_owned(),
            quantity: dec("10"),
            unit_price: Some(dec("2.50")),
            market_value: None,
            cost_basis: Some(dec("20")),
        }];
        let file = ParsedFile {
            statements: vec![invest],
            ..ParsedFile::default()
        };
        let mapped = import_batch(&file, &Defaults::default()).expect("maps");
        let account = only(&mapped);
        assert_eq!(account.fields().account_type, AccountType::Brokerage);
        assert_eq!(account.fields().provider_account_id, "name:Brokerage");
        assert_eq!(account.positions()[0].market_value, dec("25.00"));
        assert_eq!(
            account.positions()[0].unrealized_gain_loss,
            Some(dec("5.00"))
        );
        assert_eq!(
            import_batch(&ParsedFile::default(), &Defaults::default()),
            Err(Refusal::NoStatement)
        );
    }
}
