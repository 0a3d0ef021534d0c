//! From a parsed OFX document to the records an import writes ([`ImportBatch`]).
//!
//! # Mapping
//!
//! - **Institution**: the sign-on's `FI/ORG`, else `FID <fid>`, else `Unknown institution`; it
//!   names the user's `file_import` connection. A file has one sign-on, so one institution.
//! - **Account**: keyed by `ACCTID` (a statement without one is keyed `unknown:<kind>:<CUR>`).
//!   The number is `ACCTID` (the store keeps `****` and the last four). Type: `CHECKING` →
//!   checking, `SAVINGS` → savings, `MONEYMRKT` → money_market, `CD` → cd, `CREDITLINE` →
//!   line_of_credit, other bank types → other; credit-card statements → credit_card;
//!   investment statements → brokerage. Name: `<institution> <Type> ****1234`.
//!   Bank and credit card: balance `LEDGERBAL`, available `AVAILBAL`. Investment: balance
//!   `AVAILCASH` plus the market value of the positions, available `AVAILCASH`. A statement
//!   with no balance at all leaves an existing account's balance as stored.
//!   Several statements for one account are merged: transactions are united by FITID (the
//!   later statement wins), positions of the later statement replace earlier ones, and the
//!   balance of the last statement that has one is kept.
//! - **Transaction**: FITID is the key; status settled; date = the posted date as the file
//!   wrote it (in its own offset), settlement
//!   date = `DTSETTLE`/`DTAVAIL`; description = `NAME`, plus ` - MEMO` when both differ, else
//!   `MEMO`, else the security name. Bank `TRNTYPE`: `INT`, `DIV` → income; `FEE`, `SRVCHG`
//!   → fee; `XFER`, `DEP`, `DIRECTDEP`, `ATM`, `CASH` → transfer; the rest (`DEBIT`, `CREDIT`,
//!   `POS`, `CHECK`, `PAYMENT`, …) → other; subtype = `TRNTYPE`. Investment: buys, sells,
//!   reinvestments and `CLOSUREOPT` → trade (subtype `BUYTYPE`/`SELLTYPE` or the tag); `INCOME`
//!   and `RETOFCAP` → income (subtype `INCOMETYPE`); `TRANSFER`, `JRNLFUND`, `JRNLSEC` →
//!   transfer; `INVEXPENSE`, `MARGININTEREST` → fee; others → other; symbol, security name,
//!   `UNITS`, `UNITPRICE` and `COMMISSION` are kept.
//! - **Holding**: key = the security's `UNIQUEID`; symbol = ticker, else the unique id (CUSIP);
//!   asset type `POSSTOCK` → equity, `POSMF` → mutual_fund, `POSDEBT` → fixed_income, `POSOPT`
//!   → option, `POSOTHER` → other; quantity `UNITS`, current price `UNITPRICE`, market value
//!   `MKTVAL` (else units × price, else 0). A `POSTYPE` `SHORT` position is owed: its units and
//!   market value are stored negative whatever sign the file wrote them with. Positions of one
//!   security in several sub-accounts (`HELDINACCT`) are added up into one holding.
//! - **Snapshot**: one per account that reports a balance, captured at `LEDGERBAL/DTASOF`
//!   (investment: the statement's `DTASOF`), else the end of the transaction list, else now.
//!   Investment snapshots carry the holdings value and the cash.
//! - NUL characters are removed from text (PostgreSQL refuses them).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use super::ofx::{
    OfxDocument, Position, PositionKind, Statement, StatementKind, StatementTransaction,
    TransactionKind,
};
use crate::store::{
    AccountRecord, AccountType, AssetType, ImportAccount, ImportBatch, ImportInstitution,
    ImportSnapshot, NewAccount, NewHolding, NewTransaction, TransactionStatus, TransactionType,
};

/// Why a parsed file cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The sign-on reports an error.
    #[error("the institution refused the sign-on (code {code}): {message}")]
    Signon { code: u32, message: String },
    /// The file has no statement.
    #[error("the file holds no statement")]
    NoStatement,
    /// `account_id` names one account, and the file holds statements of several.
    #[error(
        "the file holds statements of {count} accounts; account_id can name only one (import without it)"
    )]
    SeveralAccounts {
        /// How many accounts the file names.
        count: usize,
    },
    /// Amounts of the file add up past the largest amount there is
    /// (`79228162514264337593543950335`).
    #[error("the {what} add up past the largest amount that can be held")]
    Overflow {
        /// Which amounts, and where (`market values of security 123456789`).
        what: String,
    },
}

/// The refusal an overflow in `what` is.
fn overflow(what: impl Into<String>) -> Refusal {
    Refusal::Overflow { what: what.into() }
}

/// Something an import read but doubts: reported in the answer's `warnings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImportWarning {
    /// What it is about (`line 12`, `statement 2 (DE89…)`).
    pub(crate) item: String,
    /// What is wrong, in one sentence.
    pub(crate) message: String,
}

/// The warnings of an OFX document.
pub(crate) fn ofx_warnings(doc: &OfxDocument) -> Vec<ImportWarning> {
    doc.warnings
        .iter()
        .map(|warning| ImportWarning {
            item: format!("line {}", warning.line),
            message: warning.message.clone(),
        })
        .collect()
}

/// The account an import was told to write into (`account_id`), as the record to upsert: its
/// own key and fields, with the file's balance when the file reports one.
pub(crate) fn existing_account(
    record: &AccountRecord,
    balance: Option<(Decimal, Option<Decimal>)>,
) -> NewAccount {
    let (balance_amount, available_balance_amount) =
        balance.unwrap_or((record.balance_amount, record.available_balance_amount));
    NewAccount {
        provider_account_id: record.provider_account_id.clone(),
        account_number: record.account_number_masked.clone(),
        name: record.name.clone(),
        account_type: record.account_type,
        currency: record.currency.clone(),
        balance_amount,
        available_balance_amount,
        is_active: record.is_active,
    }
}

/// Points a batch of one account at the account the caller chose (`account_id`): its
/// connection, its key and fields; the file's transactions, holdings and balances.
pub(crate) fn into_existing(
    mut batch: ImportBatch,
    record: &AccountRecord,
) -> Result<ImportBatch, Refusal> {
    let mut accounts: Vec<ImportAccount> = batch
        .institutions
        .drain(..)
        .flat_map(|institution| institution.accounts)
        .collect();
    if accounts.len() > 1 {
        return Err(Refusal::SeveralAccounts {
            count: accounts.len(),
        });
    }
    let Some(mut only) = accounts.pop() else {
        return Err(Refusal::NoStatement);
    };
    let balance = only.balance_reported.then_some((
        only.account.balance_amount,
        only.account.available_balance_amount,
    ));
    only.account = existing_account(record, balance);
    Ok(ImportBatch {
        institutions: vec![ImportInstitution {
            alias: record.name.clone(),
            connection_id: Some(record.connection_id),
            accounts: vec![only],
        }],
        account_limit: batch.account_limit,
        origin: None,
    })
}

/// Removes NUL characters and surrounding whitespace; `None` when nothing is left.
pub(crate) fn clean(text: &str) -> Option<String> {
    let text = text.trim();
    let cleaned = if text.contains('\0') {
        text.replace('\0', "")
    } else {
        text.to_owned()
    };
    (!cleaned.is_empty()).then_some(cleaned)
}

pub(crate) fn clean_opt(text: Option<&str>) -> Option<String> {
    text.and_then(clean)
}

/// The institution's name: `ORG`, else `FID <fid>`, else `Unknown institution`.
pub(crate) fn institution_name(doc: &OfxDocument) -> String {
    let signon = doc.signon.as_ref();
    clean_opt(signon.and_then(|s| s.org.as_deref()))
        .or_else(|| {
            clean_opt(signon.and_then(|s| s.fid.as_deref())).map(|fid| format!("FID {fid}"))
        })
        .unwrap_or_else(|| "Unknown institution".to_owned())
}

fn account_type(statement: &Statement) -> AccountType {
    match statement.kind {
        StatementKind::CreditCard => AccountType::CreditCard,
        StatementKind::Investment => AccountType::Brokerage,
        StatementKind::Bank => match statement
            .account
            .account_type
            .as_deref()
            .map(|kind| kind.trim().to_ascii_uppercase())
            .as_deref()
        {
            Some("CHECKING") => AccountType::Checking,
            Some("SAVINGS") => AccountType::Savings,
            Some("MONEYMRKT") => AccountType::MoneyMarket,
            Some("CD") => AccountType::Cd,
            Some("CREDITLINE") => AccountType::LineOfCredit,
            _ => AccountType::Other,
        },
    }
}

pub(crate) fn type_label(kind: AccountType) -> &'static str {
    match kind {
        AccountType::Checking => "Checking",
        AccountType::Savings => "Savings",
        AccountType::MoneyMarket => "Money Market",
        AccountType::Cd => "CD",
        AccountType::LineOfCredit => "Line of Credit",
        AccountType::CreditCard => "Credit Card",
        AccountType::Brokerage => "Brokerage",
        _ => "Account",
    }
}

fn kind_key(kind: StatementKind) -> &'static str {
    match kind {
        StatementKind::Bank => "bank",
        StatementKind::CreditCard => "credit_card",
        StatementKind::Investment => "investment",
    }
}

fn bank_type(trn_type: &str) -> TransactionType {
    match trn_type.trim().to_ascii_uppercase().as_str() {
        "INT" | "DIV" => TransactionType::Income,
        "FEE" | "SRVCHG" => TransactionType::Fee,
        "XFER" | "DEP" | "DIRECTDEP" | "ATM" | "CASH" => TransactionType::Transfer,
        _ => TransactionType::Other,
    }
}

/// The transaction type and subtype of a line.
fn classify(line: &StatementTransaction) -> (TransactionType, Option<String>) {
    let detail = clean_opt(line.trn_type.as_deref());
    match &line.kind {
        TransactionKind::Bank(trn_type) => (bank_type(trn_type), clean(trn_type)),
        TransactionKind::Buy => (
            TransactionType::Trade,
            detail.or_else(|| Some("BUY".to_owned())),
        ),
        TransactionKind::Sell => (
            TransactionType::Trade,
            detail.or_else(|| Some("SELL".to_owned())),
        ),
        TransactionKind::Reinvest => (TransactionType::Trade, Some("REINVEST".to_owned())),
        TransactionKind::Income => (
            TransactionType::Income,
            clean_opt(line.income_type.as_deref()).or_else(|| Some("INCOME".to_owned())),
        ),
        TransactionKind::Transfer => (
            TransactionType::Transfer,
            detail.or_else(|| Some("TRANSFER".to_owned())),
        ),
        TransactionKind::Other(tag) => {
            let kind = match tag.trim().to_ascii_uppercase().as_str() {
                "CLOSUREOPT" => TransactionType::Trade,
                "RETOFCAP" => TransactionType::Income,
                "JRNLFUND" | "JRNLSEC" => TransactionType::Transfer,
                "INVEXPENSE" | "MARGININTEREST" => TransactionType::Fee,
                _ => TransactionType::Other,
            };
            (kind, clean(tag))
        }
    }
}

fn description(line: &StatementTransaction) -> Option<String> {
    let name = clean_opt(line.name.as_deref());
    let memo = clean_opt(line.memo.as_deref());
    match (name, memo) {
        (Some(name), Some(memo)) if memo != name => Some(format!("{name} - {memo}")),
        (Some(name), _) => Some(name),
        (None, Some(memo)) => Some(memo),
        (None, None) => clean_opt(line.security_name.as_deref()),
    }
}

fn transaction(line: &StatementTransaction, currency: &str) -> Option<NewTransaction> {
    let (transaction_type, subtype) = classify(line);
    Some(NewTransaction {
        provider_transaction_id: clean(&line.fit_id)?,
        transaction_type,
        subtype,
        status: TransactionStatus::Settled,
        amount: line.amount,
        currency: clean_opt(line.currency.as_deref()).unwrap_or_else(|| currency.to_owned()),
        description: description(line),
        symbol: clean_opt(line.symbol.as_deref()),
        security_name: clean_opt(line.security_name.as_deref()),
        quantity: line.units,
        unit_price: line.unit_price,
        commission: line.commission,
        transaction_date: line.posted.date_naive(),
        settlement_date: line.settled.map(|settled| settled.date_naive()),
        pending_transaction_id: None,
    })
}

fn asset_type(kind: PositionKind) -> AssetType {
    match kind {
        PositionKind::Stock => AssetType::Equity,
        PositionKind::MutualFund => AssetType::MutualFund,
        PositionKind::Debt => AssetType::FixedIncome,
        PositionKind::Option => AssetType::Option,
        PositionKind::Other => AssetType::Other,
    }
}

fn market_value(position: &Position) -> Result<Decimal, Refusal> {
    let value = match (position.market_value, position.unit_price) {
        (Some(value), _) => value,
        (None, Some(price)) => price.checked_mul(position.units).ok_or_else(|| {
            overflow(format!(
                "units and unit price of security {}",
                position.security_id.unique_id
            ))
        })?,
        (None, None) => Decimal::ZERO,
    };
    Ok(owner_signed(position, value))
}

/// Whether the position is a short one (`POSTYPE` `SHORT`): owed by the account's owner.
fn is_short(position: &Position) -> bool {
    position
        .long_short
        .as_deref()
        .is_some_and(|kind| kind.trim().eq_ignore_ascii_case("SHORT"))
}

/// An amount of a position from the owner's view: negative when the position is short,
/// whichever sign the file used (brokers write short units either way).
fn owner_signed(position: &Position, amount: Decimal) -> Decimal {
    if is_short(position) && amount.is_sign_positive() && !amount.is_zero() {
        -amount
    } else {
        amount
    }
}

/// The holdings of one statement, one per security (sub-account positions added up, checked).
fn holdings(statement: &Statement) -> Result<Vec<NewHolding>, Refusal> {
    let mut merged: Vec<NewHolding> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for position in &statement.positions {
        let Some(key) = clean(&position.security_id.unique_id) else {
            continue;
        };
        let value = market_value(position)?;
        if let Some(&at) = index.get(&key) {
            if let Some(holding) = merged.get_mut(at) {
                holding.quantity = holding
                    .quantity
                    .checked_add(owner_signed(position, position.units))
                    .ok_or_else(|| overflow(format!("units of security {key}")))?;
                holding.market_value = holding
                    .market_value
                    .checked_add(value)
                    .ok_or_else(|| overflow(format!("market values of security {key}")))?;
            }
            continue;
        }
        index.insert(key.clone(), merged.len());
        merged.push(NewHolding {
            symbol: clean(&position.symbol).unwrap_or_else(|| key.clone()),
            provider_holding_id: key,
            security_name: clean_opt(position.security_name.as_deref()),
            asset_type: asset_type(position.asset_kind),
            quantity: owner_signed(position, position.units),
            cost_basis: None,
            market_value: value,
            currency: statement.currency.clone(),
            average_price: None,
            current_price: position.unit_price,
            unrealized_gain_loss: None,
        });
    }
    Ok(merged)
}

/// The balances a statement reports: (balance, available, holdings value, cash, as of).
struct Balances {
    balance: Decimal,
    available: Option<Decimal>,
    holdings_value: Option<Decimal>,
    cash: Option<Decimal>,
    as_of: Option<DateTime<Utc>>,
}

fn balances(statement: &Statement, holdings: &[NewHolding]) -> Result<Option<Balances>, Refusal> {
    match statement.kind {
        StatementKind::Bank | StatementKind::CreditCard => {
            let Some(ledger) = statement.ledger_balance.as_ref() else {
                return Ok(None);
            };
            Ok(Some(Balances {
                balance: ledger.amount,
                available: statement.available_balance.as_ref().map(|b| b.amount),
                holdings_value: None,
                cash: None,
                as_of: ledger.as_of.or(statement.end),
            }))
        }
        StatementKind::Investment => {
            let cash = statement
                .investment_balance
                .as_ref()
                .and_then(|b| b.available_cash);
            if cash.is_none() && holdings.is_empty() {
                return Ok(None);
            }
            let holdings_value = holdings
                .iter()
                .try_fold(Decimal::ZERO, |sum, h| sum.checked_add(h.market_value))
                .ok_or_else(|| overflow("market values of the statement's holdings"))?;
            let balance = holdings_value
                .checked_add(cash.unwrap_or_default())
                .ok_or_else(|| overflow("holdings' value and the cash balance"))?;
            Ok(Some(Balances {
                balance,
                available: cash,
                holdings_value: (!holdings.is_empty()).then_some(holdings_value),
                cash,
                as_of: statement.as_of.or(statement.end),
            }))
        }
    }
}

/// Keeps one transaction per provider id: the last one read, in the place of the first (a later
/// statement of an account restates an earlier one). One pass over the account's rows with a
/// map that borrows their ids, rather than a map of copied ids kept while the file is read.
pub(crate) fn keep_last_by_id(transactions: &mut Vec<NewTransaction>) {
    let mut restated: Vec<(usize, usize)> = Vec::new();
    let mut first: HashMap<&str, usize> = HashMap::with_capacity(transactions.len());
    for (at, item) in transactions.iter().enumerate() {
        match first.entry(item.provider_transaction_id.as_str()) {
            Entry::Occupied(earlier) => restated.push((*earlier.get(), at)),
            Entry::Vacant(slot) => {
                slot.insert(at);
            }
        }
    }
    drop(first);
    if restated.is_empty() {
        return;
    }
    let mut dropped = vec![false; transactions.len()];
    // In reading order, so the first place ends up with the last version.
    for (earlier, later) in restated {
        transactions.swap(earlier, later);
        if let Some(flag) = dropped.get_mut(later) {
            *flag = true;
        }
    }
    let mut at = 0;
    transactions.retain(|_| {
        let keep = !dropped.get(at).copied().unwrap_or_default();
        at += 1;
        keep
    });
}

/// One account being assembled from the file's statements.
struct Pending {
    account: NewAccount,
    /// In reading order, restated ids included (see [`keep_last_by_id`]).
    transactions: Vec<NewTransaction>,
    holdings: Vec<NewHolding>,
    balances: Option<Balances>,
}

/// The records to write for a parsed file, or why it cannot be imported.
pub(crate) fn import_batch(doc: &OfxDocument, now: DateTime<Utc>) -> Result<ImportBatch, Refusal> {
    if let Some(signon) = &doc.signon
        && (signon.status_code != 0 && signon.severity.trim().eq_ignore_ascii_case("ERROR"))
    {
        return Err(Refusal::Signon {
            code: signon.status_code,
            message: clean_opt(signon.message.as_deref())
                .unwrap_or_else(|| signon.severity.clone()),
        });
    }
    if doc.statements.is_empty() {
        return Err(Refusal::NoStatement);
    }
    let institution = institution_name(doc);
    let mut accounts: Vec<Pending> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for statement in &doc.statements {
        let currency = clean(&statement.currency)
            .unwrap_or_else(|| "USD".to_owned())
            .to_ascii_uppercase();
        let number = clean_opt(statement.account.account_id.as_deref());
        let kind = account_type(statement);
        let key = number
            .clone()
            .unwrap_or_else(|| format!("unknown:{}:{currency}", kind_key(statement.kind)));
        let at = match by_key.get(&key) {
            Some(&at) => at,
            None => {
                let name = match &number {
                    Some(number) => format!(
                        "{institution} {} {}",
                        type_label(kind),
                        crate::store::mask_account_number(number)
                    ),
                    None => format!("{institution} {}", type_label(kind)),
                };
                by_key.insert(key.clone(), accounts.len());
                accounts.push(Pending {
                    account: NewAccount {
                        provider_account_id: key,
                        account_number: number,
                        name,
                        account_type: kind,
                        currency: currency.clone(),
                        balance_amount: Decimal::ZERO,
                        available_balance_amount: None,
                        is_active: true,
                    },
                    transactions: Vec::new(),
                    holdings: Vec::new(),
                    balances: None,
                });
                accounts.len() - 1
            }
        };
        let Some(pending) = accounts.get_mut(at) else {
            continue;
        };
        // Reserved at once: a regrown vector briefly holds its old and its new copy.
        pending.transactions.reserve(statement.transactions.len());
        pending.transactions.extend(
            statement
                .transactions
                .iter()
                .filter_map(|line| transaction(line, &currency)),
        );
        let statement_holdings = holdings(statement)?;
        if let Some(found) = balances(statement, &statement_holdings)? {
            pending.balances = Some(found);
        }
        if !statement_holdings.is_empty() {
            pending.holdings = statement_holdings;
        }
    }
    let accounts = accounts
        .into_iter()
        .map(|mut pending| {
            keep_last_by_id(&mut pending.transactions);
            let mut account = pending.account;
            let snapshot = pending.balances.as_ref().map(|b| {
                account.balance_amount = b.balance;
                account.available_balance_amount = b.available;
                ImportSnapshot {
                    balance: b.balance,
                    available_balance: b.available,
                    holdings_value: b.holdings_value,
                    cash_value: b.cash,
                    captured_at: crate::dates::truncate_to_micros(b.as_of.unwrap_or(now)),
                }
            });
            ImportAccount {
                account,
                balance_reported: snapshot.is_some(),
                transactions: pending.transactions,
                holdings: pending.holdings,
                snapshots: snapshot.into_iter().collect(),
            }
        })
        .collect();
    Ok(ImportBatch {
        institutions: vec![ImportInstitution {
            alias: institution,
            connection_id: None,
            accounts,
        }],
        account_limit: None,
        origin: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::parse_ofx;

    const BANK: &str = "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\n\n<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS>
<DTSERVER>20240131<LANGUAGE>ENG<FI><ORG>First Bank<FID>1234</FI></SONRS></SIGNONMSGSRSV1>
<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<STMTRS><CURDEF>USD<BANKACCTFROM><BANKID>021000021<ACCTID>123456789<ACCTTYPE>CHECKING</BANKACCTFROM>
<BANKTRANLIST><DTSTART>20240101<DTEND>20240131
<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240105<TRNAMT>-12.50<FITID>A1<NAME>Coffee<MEMO>Card 1234</STMTTRN>
<STMTTRN><TRNTYPE>INT<DTPOSTED>20240131<TRNAMT>0.42<FITID>A2<NAME>Interest</STMTTRN>
<STMTTRN><TRNTYPE>INT<DTPOSTED>20240131<TRNAMT>0.43<FITID>A2<NAME>Interest</STMTTRN>
</BANKTRANLIST>
<LEDGERBAL><BALAMT>1000.00<DTASOF>20240131</LEDGERBAL>
<AVAILBAL><BALAMT>900.00<DTASOF>20240131</AVAILBAL>
</STMTRS></STMTTRNRS></BANKMSGSRSV1></OFX>";

    /// An investment statement with the given positions (`units`, `price`, `value` of one
    /// security each) and cash.
    fn investment(positions: &[(&str, &str, &str, &str)], cash: &str) -> String {
        let mut list = String::new();
        for (id, units, price, value) in positions {
            list.push_str(&format!(
                "<POSSTOCK><INVPOS><SECID><UNIQUEID>{id}<UNIQUEIDTYPE>CUSIP</SECID>\
                 <HELDINACCT>CASH<POSTYPE>LONG<UNITS>{units}<UNITPRICE>{price}{value}\
                 <DTPRICEASOF>20240131</INVPOS></POSSTOCK>\n"
            ));
        }
        format!(
            "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\n\n<OFX>\n<SIGNONMSGSRSV1><SONRS><STATUS>\
             <CODE>0<SEVERITY>INFO</STATUS><DTSERVER>20240131<LANGUAGE>ENG<FI><ORG>Broker</FI>\
             </SONRS></SIGNONMSGSRSV1>\n<INVSTMTMSGSRSV1><INVSTMTTRNRS><TRNUID>1<STATUS><CODE>0\
             <SEVERITY>INFO</STATUS><INVSTMTRS><DTASOF>20240131<CURDEF>USD<INVACCTFROM><BROKERID>\
             broker.example<ACCTID>INV-1</INVACCTFROM>\n<INVPOSLIST>\n{list}</INVPOSLIST>\n\
             <INVBAL><AVAILCASH>{cash}<MARGINBALANCE>0<SHORTBALANCE>0</INVBAL></INVSTMTRS>\
             </INVSTMTTRNRS></INVSTMTMSGSRSV1></OFX>\n"
        )
    }

    #[test]
    fn sums_past_the_largest_amount_are_refused() {
        let max = Decimal::MAX.to_string();
        let value = format!("<MKTVAL>{max}");
        let refusal = |text: String| {
            let doc = parse_ofx(text.as_bytes()).expect("parses");
            import_batch(&doc, Utc::now()).err()
        };
        // The same security in two sub-accounts: market values added up.
        let two = investment(&[("1", "1", "1", &value), ("1", "1", "1", &value)], "0");
        assert_eq!(refusal(two), Some(overflow("market values of security 1")));
        // Units times price without a market value.
        let product = investment(&[("2", &max, "2", "")], "0");
        assert_eq!(
            refusal(product),
            Some(overflow("units and unit price of security 2"))
        );
        // Holdings' value plus cash.
        let cash = investment(&[("3", "1", "1", &value)], "1");
        assert_eq!(
            refusal(cash),
            Some(overflow("holdings' value and the cash balance"))
        );
        // Two securities whose values add past it.
        let both = investment(&[("4", "1", "1", &value), ("5", "1", "1", &value)], "0");
        assert_eq!(
            refusal(both),
            Some(overflow("market values of the statement's holdings"))
        );
        // A value near the largest amount is still fine alone.
        let one = investment(&[("6", "1", "1", &value)], "0");
        assert_eq!(refusal(one), None);
    }

    fn dec(text: &str) -> Decimal {
        text.parse().expect("decimal")
    }

    #[test]
    fn a_restated_id_keeps_its_first_place_and_its_last_version() {
        let doc = parse_ofx(BANK.as_bytes()).expect("parses");
        let batch = import_batch(&doc, Utc::now()).expect("importable");
        let row = batch.institutions[0].accounts[0].transactions[0].clone();
        let version = |id: &str, cents: i64| NewTransaction {
            provider_transaction_id: id.to_owned(),
            amount: Decimal::new(cents, 2),
            ..row.clone()
        };
        let mut rows = vec![
            version("a", 1),
            version("b", 2),
            version("a", 3),
            version("c", 4),
            version("a", 5),
            version("b", 6),
        ];
        keep_last_by_id(&mut rows);
        let kept: Vec<(&str, Decimal)> = rows
            .iter()
            .map(|row| (row.provider_transaction_id.as_str(), row.amount))
            .collect();
        assert_eq!(
            kept,
            [
                ("a", Decimal::new(5, 2)),
                ("b", Decimal::new(6, 2)),
                ("c", Decimal::new(4, 2))
            ]
        );
    }

    #[test]
    fn bank_statement_maps_to_one_account() {
        let doc = parse_ofx(BANK.as_bytes()).expect("parses");
        let batch = import_batch(&doc, Utc::now()).expect("importable");
        let [institution] = batch.institutions.as_slice() else {
            panic!("one institution");
        };
        assert_eq!(institution.alias, "First Bank");
        let [account] = institution.accounts.as_slice() else {
            panic!("one account");
        };
        assert_eq!(account.account.provider_account_id, "123456789");
        assert_eq!(account.account.name, "First Bank Checking ****6789");
        assert_eq!(account.account.account_type, AccountType::Checking);
        assert_eq!(account.account.balance_amount, dec("1000.00"));
        assert_eq!(
            account.account.available_balance_amount,
            Some(dec("900.00"))
        );
        assert_eq!(account.transactions.len(), 2, "FITID A2 is merged");
        let coffee = &account.transactions[0];
        assert_eq!(coffee.transaction_type, TransactionType::Other);
        assert_eq!(coffee.subtype.as_deref(), Some("DEBIT"));
        assert_eq!(coffee.description.as_deref(), Some("Coffee - Card 1234"));
        assert_eq!(account.transactions[1].amount, dec("0.43"));
        assert_eq!(
            account.transactions[1].transaction_type,
            TransactionType::Income
        );
        let [snapshot] = account.snapshots.as_slice() else {
            panic!("one snapshot");
        };
        assert_eq!(snapshot.balance, dec("1000.00"));
        assert_eq!(
            snapshot.captured_at.to_rfc3339(),
            "2024-01-31T00:00:00+00:00"
        );
    }

    #[test]
    fn signon_errors_and_empty_files_are_refused() {
        let failed = BANK.replace(
            "<CODE>0<SEVERITY>INFO</STATUS>\n<DTSERVER>",
            "<CODE>15500<SEVERITY>ERROR<MESSAGE>Bad password</STATUS>\n<DTSERVER>",
        );
        let doc = parse_ofx(failed.as_bytes()).expect("parses");
        assert_eq!(
            import_batch(&doc, Utc::now()),
            Err(Refusal::Signon {
                code: 15500,
                message: "Bad password".to_owned()
            })
        );
        assert_eq!(
            import_batch(&OfxDocument::default(), Utc::now()),
            Err(Refusal::NoStatement)
        );
    }

    #[test]
    fn institution_falls_back_to_fid() {
        let doc = parse_ofx(BANK.replace("<ORG>First Bank", "").as_bytes()).expect("parses");
        assert_eq!(institution_name(&doc), "FID 1234");
        assert_eq!(
            institution_name(&OfxDocument::default()),
            "Unknown institution"
        );
    }
}
