//! From a parsed OFX document to the normalized batch every format maps to
//! ([`ParsedBatch`], assembled by `import::batch`).
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

use rust_decimal::Decimal;

use super::batch::{
    BalanceHistory, BatchBuilder, Defaults, ImportWarning, Normalize, Refusal, Releasing,
    ReportedBalance, account_name, clean, clean_opt, overflow,
};
use super::ofx::{
    OfxDocument, Position, PositionKind, Statement, StatementKind, StatementTransaction,
    TransactionKind,
};
use crate::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewTransaction, TransactionStatus,
    TransactionType,
};

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
        merchant_code: None,
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

/// The balance a statement reports, if any.
fn balances(
    statement: &Statement,
    holdings: &[NewHolding],
) -> Result<Option<ReportedBalance>, Refusal> {
    match statement.kind {
        StatementKind::Bank | StatementKind::CreditCard => {
            let Some(ledger) = statement.ledger_balance.as_ref() else {
                return Ok(None);
            };
            Ok(Some(ReportedBalance {
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
            Ok(Some(ReportedBalance {
                balance,
                available: cash,
                holdings_value: (!holdings.is_empty()).then_some(holdings_value),
                cash,
                as_of: statement.as_of.or(statement.end),
            }))
        }
    }
}

/// The batch of a parsed OFX document, unfinished, or why it cannot be imported. Balances
/// follow [`BalanceHistory::LastReported`]; one undated is captured when it is finished.
fn batch_builder(doc: OfxDocument) -> Result<BatchBuilder, Refusal> {
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
    let mut batch = BatchBuilder::new(institution_name(&doc), BalanceHistory::LastReported);
    for warning in ofx_warnings(&doc) {
        batch.warn(warning);
    }
    for mut statement in doc.statements {
        let currency = clean(&statement.currency)
            .unwrap_or_else(|| "USD".to_owned())
            .to_ascii_uppercase();
        let number = clean_opt(statement.account.account_id.as_deref());
        let kind = account_type(&statement);
        let key = number
            .clone()
            .unwrap_or_else(|| format!("unknown:{}:{currency}", kind_key(statement.kind)));
        let name = account_name(batch.institution(), kind, number.as_deref());
        let account = batch.account(key, |key| NewAccount {
            provider_account_id: key,
            account_number: number,
            name,
            account_type: kind,
            currency: currency.clone(),
            balance_amount: Decimal::ZERO,
            available_balance_amount: None,
            is_active: true,
        });
        let lines = std::mem::take(&mut statement.transactions);
        account.add_transactions(
            lines.len(),
            Releasing::new(lines).filter_map(|line| transaction(&line, &currency)),
        );
        let statement_holdings = holdings(&statement)?;
        if let Some(found) = balances(&statement, &statement_holdings)? {
            account.report_balance(found);
        }
        account.replace_holdings(statement_holdings);
    }
    Ok(batch)
}

impl Normalize for OfxDocument {
    /// The file names its accounts and currencies: the caller's defaults do not apply.
    fn normalize(self: Box<Self>, _: &Defaults<'_>) -> Result<BatchBuilder, Refusal> {
        batch_builder(*self)
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::import::batch::ParsedBatch;

    /// The finished batch of a document.
    fn import_batch(doc: &OfxDocument, now: DateTime<Utc>) -> Result<ParsedBatch, Refusal> {
        batch_builder(doc.clone()).map(|batch| batch.finish(now))
    }
    use crate::import::batch::keep_last_by_id;
    use crate::import::parse_ofx;
    use crate::store::BatchTarget;

    const BANK: &str = "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\n\n<OFX>
<SIGNONMSGSRSV1><SONRS><STATUS><CODE>0<SEVERITY>INFO</STATUS>
<DTSERVER>20240131<LANGUAGE>ENG<FI><ORG>First Bank<FID>1234</FI></SONRS></SIGNONMSGSRSV1>
<BANKMSGSRSV1><STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS>
<STMTRS><CURDEF>USD<BANKACCTFROM><BANKID>021000021<ACCTID>123456789<ACCTTYPE>CHECKING</BANKACCTFROM>
<BANKTRANLIST><DTSTART>20240101<DTEND>20240131
<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20240105<TRNAMT>-12.50<FITID>A1<NAME>Coffee<MEMO>Card 1234</STMTTRN>
<STMTTRN><TRNTYPE>INT<DTPOSTED>20240131<TRNAMT>0.42<FITID>A2<NAME>Interest</STMTTRN>
<STMTTRN><TRNTYPE>INT<DTPOSTED>20240131<TRNAMT>0.42<FITID>A2<NAME>Interest January</STMTTRN>
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
        let batch = import_batch(&doc, Utc::now()).expect("importable").batch;
        let row = batch.connections[0].accounts[0].rows()[0].clone();
        // A restatement has the same date and amount; its text or status may have changed.
        let version = |id: &str, cents: i64, text: &str| NewTransaction {
            provider_transaction_id: id.to_owned(),
            amount: Decimal::new(cents, 2),
            description: Some(text.to_owned()),
            ..row.clone()
        };
        let mut rows = vec![
            version("a", 1, "a first"),
            version("b", 2, "b first"),
            version("a", 1, "a second"),
            version("c", 4, "c"),
            version("a", 1, "a last"),
            version("b", 2, "b last"),
        ];
        keep_last_by_id(&mut rows);
        let kept: Vec<(&str, Option<&str>)> = rows
            .iter()
            .map(|row| {
                (
                    row.provider_transaction_id.as_str(),
                    row.description.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            kept,
            [
                ("a", Some("a last")),
                ("b", Some("b last")),
                ("c", Some("c"))
            ]
        );
    }

    #[test]
    fn a_reused_id_with_another_amount_or_date_is_another_transaction() {
        let doc = parse_ofx(BANK.as_bytes()).expect("parses");
        let batch = import_batch(&doc, Utc::now()).expect("importable").batch;
        let row = batch.connections[0].accounts[0].rows()[0].clone();
        let day = row.transaction_date;
        let next = day.succ_opt().expect("a next day");
        let version = |cents: i64, date: chrono::NaiveDate, text: &str| NewTransaction {
            provider_transaction_id: "0987654321".to_owned(),
            amount: Decimal::new(cents, 2),
            transaction_date: date,
            description: Some(text.to_owned()),
            ..row.clone()
        };
        let mut rows = vec![
            version(-2000, day, "first payment"),
            version(-500, next, "second payment"),
            version(-2000, day, "first payment, restated"),
            version(-2000, next, "third payment"),
        ];
        keep_last_by_id(&mut rows);
        let kept: Vec<(&str, Option<&str>)> = rows
            .iter()
            .map(|row| {
                (
                    row.provider_transaction_id.as_str(),
                    row.description.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            kept,
            [
                ("0987654321", Some("first payment, restated")),
                ("0987654321#2", Some("second payment")),
                ("0987654321#3", Some("third payment")),
            ]
        );
    }

    #[test]
    fn bank_statement_maps_to_one_account() {
        let doc = parse_ofx(BANK.as_bytes()).expect("parses");
        let batch = import_batch(&doc, Utc::now()).expect("importable").batch;
        let [institution] = batch.connections.as_slice() else {
            panic!("one institution");
        };
        assert_eq!(
            institution.target,
            BatchTarget::FileImport {
                alias: "First Bank".to_owned()
            }
        );
        let [account] = institution.accounts.as_slice() else {
            panic!("one account");
        };
        assert_eq!(account.fields().provider_account_id, "123456789");
        assert_eq!(account.fields().name, "First Bank Checking ****6789");
        assert_eq!(account.fields().account_type, AccountType::Checking);
        assert_eq!(account.fields().balance_amount, dec("1000.00"));
        assert_eq!(
            account.fields().available_balance_amount,
            Some(dec("900.00"))
        );
        assert_eq!(account.rows().len(), 2, "FITID A2 is merged");
        let coffee = &account.rows()[0];
        assert_eq!(coffee.transaction_type, TransactionType::Other);
        assert_eq!(coffee.subtype.as_deref(), Some("DEBIT"));
        assert_eq!(coffee.description.as_deref(), Some("Coffee - Card 1234"));
        // The restatement (same date and amount) wins, in the first one's place.
        assert_eq!(
            account.rows()[1].description.as_deref(),
            Some("Interest January")
        );
        assert_eq!(account.rows()[1].transaction_type, TransactionType::Income);
        let [snapshot] = account.snapshots.as_slice() else {
            panic!("one snapshot");
        };
        assert_eq!(snapshot.balances().balance, dec("1000.00"));
        assert_eq!(
            snapshot.balances().captured_at.to_rfc3339(),
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
