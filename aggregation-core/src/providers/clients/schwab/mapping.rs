//! The Schwab Trader API's answers and how they become records.
//!
//! Bodies are read leniently: unknown fields are ignored and most fields are optional. A body
//! that is not the expected JSON shape at all (not an array, for example) fails the whole call
//! with [`ProviderError::InvalidResponse`]; one item that cannot be mapped lands in
//! [`Fetched::errors`] and the others are kept.
//!
//! Numbers arrive as JSON numbers. They are read as [`serde_json::Number`] and converted through
//! their text form (`123.45` stays `123.45`), never through `f64` arithmetic.

use std::collections::HashMap;
use std::str::FromStr as _;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Number, Value};

use crate::providers::{Fetched, ProviderError, SyncItemError};
use crate::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewTransaction, TransactionStatus,
    TransactionType, mask_account_number,
};

/// Schwab reports every amount in US dollars.
pub(crate) const CURRENCY: &str = "USD";

/// Decimal places kept for a price derived by division (market value / quantity).
const DERIVED_PRICE_DP: u32 = 6;

/// One entry of `GET /trader/v1/accounts/accountNumbers`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AccountNumberHash {
    pub(crate) account_number: String,
    pub(crate) hash_value: String,
}

/// One entry of `GET /trader/v1/accounts?fields=positions`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AccountEntry {
    securities_account: SecuritiesAccount,
    aggregated_balance: Option<AggregatedBalance>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SecuritiesAccount {
    #[serde(rename = "type")]
    kind: Option<String>,
    account_number: String,
    current_balances: Option<Balances>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Balances {
    liquidation_value: Option<Number>,
    cash_balance: Option<Number>,
    available_funds: Option<Number>,
    cash_available_for_trading: Option<Number>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AggregatedBalance {
    liquidation_value: Option<Number>,
    current_liquidation_value: Option<Number>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Position {
    long_quantity: Option<Number>,
    short_quantity: Option<Number>,
    average_price: Option<Number>,
    market_value: Option<Number>,
    long_open_profit_loss: Option<Number>,
    short_open_profit_loss: Option<Number>,
    instrument: Option<Instrument>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Instrument {
    asset_type: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    symbol: Option<String>,
    cusip: Option<String>,
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Transaction {
    time: Option<String>,
    description: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    status: Option<String>,
    trade_date: Option<String>,
    settlement_date: Option<String>,
    net_amount: Option<Number>,
    transfer_items: Option<Vec<TransferItem>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TransferItem {
    instrument: Option<Instrument>,
    amount: Option<Number>,
    cost: Option<Number>,
    price: Option<Number>,
    fee_type: Option<String>,
}

impl TransferItem {
    fn asset_type(&self) -> Option<&str> {
        self.instrument.as_ref()?.asset_type.as_deref()
    }

    /// A fee or commission line: it has a fee type and no security behind it.
    fn is_fee(&self) -> bool {
        self.fee_type.is_some() && self.asset_type().is_none_or(|kind| kind == "CURRENCY")
    }

    /// The line of the security traded or paid for.
    fn is_security(&self) -> bool {
        self.fee_type.is_none()
            && self
                .asset_type()
                .is_some_and(|kind| !kind.is_empty() && kind != "CURRENCY")
    }
}

/// Converts a JSON number to a decimal through its text form (`from_scientific` for an
/// exponent), normalized (`1800.0` becomes `1800`).
pub(crate) fn decimal_from_number(number: &Number) -> Result<Decimal, String> {
    let text = number.to_string();
    let parsed = if text.contains(['e', 'E']) {
        Decimal::from_scientific(&text.replace("e+", "e").replace("E+", "E"))
    } else {
        Decimal::from_str_exact(&text).or_else(|_| Decimal::from_str(&text))
    };
    parsed
        .map(|value| value.normalize())
        .map_err(|_| format!("{text} is not a usable decimal"))
}

fn optional(name: &str, value: Option<&Number>) -> Result<Option<Decimal>, String> {
    value
        .map(|number| decimal_from_number(number).map_err(|error| format!("{name}: {error}")))
        .transpose()
}

fn required(name: &str, value: Option<&Number>) -> Result<Decimal, String> {
    optional(name, value)?.ok_or_else(|| format!("{name} is missing"))
}

/// The calendar date of an ISO-8601 timestamp as written (`2024-03-05T14:30:00+0000` is
/// 2024-03-05), or of a bare date.
pub(crate) fn date_as_written(text: &str) -> Option<NaiveDate> {
    let text = text.trim();
    let date = text.get(..10)?;
    let rest = text.get(10..).unwrap_or_default();
    if !(rest.is_empty() || rest.starts_with(['T', 't', ' '])) {
        return None;
    }
    NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()
}

/// Parses a body as a JSON array of raw items.
fn array(body: &[u8], what: &str) -> Result<Vec<Value>, ProviderError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(_) => Err(ProviderError::InvalidResponse(format!(
            "the {what} answer is not a JSON array"
        ))),
        Err(error) => Err(ProviderError::InvalidResponse(format!(
            "the {what} answer is not JSON: {error}"
        ))),
    }
}

fn parse_item<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|error| error.to_string())
}

fn item_error(item: impl Into<String>, message: impl Into<String>) -> SyncItemError {
    SyncItemError {
        item: item.into(),
        message: message.into(),
    }
}

/// The `accountNumber → hashValue` table. Malformed entries are skipped: an account without a
/// hash is reported when the accounts are mapped.
pub(crate) fn parse_account_numbers(body: &[u8]) -> Result<HashMap<String, String>, ProviderError> {
    Ok(array(body, "account numbers")?
        .into_iter()
        .filter_map(|value| parse_item::<AccountNumberHash>(value).ok())
        .map(|entry| (entry.account_number, entry.hash_value))
        .collect())
}

/// The raw account entries of the accounts answer.
pub(crate) fn parse_accounts(body: &[u8]) -> Result<Vec<Value>, ProviderError> {
    array(body, "accounts")
}

/// The account number of a raw account entry, if it has one.
fn raw_account_number(entry: &Value) -> Option<&str> {
    entry
        .get("securitiesAccount")?
        .get("accountNumber")?
        .as_str()
}

/// How an item of an account is named in errors: its hash when known, else the masked number.
fn account_item(hashes: &HashMap<String, String>, entry: &Value, index: usize) -> String {
    match raw_account_number(entry) {
        Some(number) => hashes
            .get(number)
            .cloned()
            .unwrap_or_else(|| mask_account_number(number)),
        None => format!("account #{}", index + 1),
    }
}

fn account_type(kind: Option<&str>) -> (AccountType, &'static str) {
    let kind = kind.unwrap_or_default().to_ascii_uppercase();
    match kind.as_str() {
        "CASH" | "MARGIN" => (AccountType::Brokerage, "Brokerage"),
        "ROTH_IRA" | "ROTH" => (AccountType::RothIra, "Roth IRA"),
        "IRA" | "TRADITIONAL_IRA" | "ROLLOVER_IRA" | "SEP_IRA" | "SIMPLE_IRA" => {
            (AccountType::Ira, "IRA")
        }
        "401K" | "401_K" => (AccountType::Plan401k, "401(k)"),
        "HSA" => (AccountType::Hsa, "HSA"),
        _ => (AccountType::Other, "Account"),
    }
}

fn map_account(entry: AccountEntry, hash: &str) -> Result<NewAccount, String> {
    let account = entry.securities_account;
    let balances = account.current_balances;
    let aggregated = entry.aggregated_balance;
    let balance = match (
        balances.as_ref().and_then(|b| b.liquidation_value.as_ref()),
        aggregated
            .as_ref()
            .and_then(|b| b.liquidation_value.as_ref())
            .or_else(|| {
                aggregated
                    .as_ref()
                    .and_then(|b| b.current_liquidation_value.as_ref())
            }),
        balances.as_ref().and_then(|b| b.cash_balance.as_ref()),
    ) {
        (Some(value), _, _) => required("liquidationValue", Some(value))?,
        (None, Some(value), _) => required("aggregatedBalance.liquidationValue", Some(value))?,
        (None, None, Some(value)) => required("cashBalance", Some(value))?,
        (None, None, None) => return Err("the account reports no balance".to_owned()),
    };
    let available = match balances.as_ref() {
        Some(b) => match (&b.available_funds, &b.cash_available_for_trading) {
            (Some(value), _) => optional("availableFunds", Some(value))?,
            (None, Some(value)) => optional("cashAvailableForTrading", Some(value))?,
            (None, None) => None,
        },
        None => None,
    };
    let (account_type, label) = account_type(account.kind.as_deref());
    let number = account.account_number.trim().to_owned();
    Ok(NewAccount {
        provider_account_id: hash.to_owned(),
        name: format!("Schwab {label} {}", mask_account_number(&number)),
        account_number: (!number.is_empty()).then_some(number),
        account_type,
        currency: CURRENCY.to_owned(),
        balance_amount: balance,
        available_balance_amount: available,
        is_active: true,
    })
}

/// Maps the accounts answer, joined with the account-number table on `accountNumber`.
pub(crate) fn map_accounts(
    hashes: &HashMap<String, String>,
    entries: Vec<Value>,
) -> Fetched<NewAccount> {
    let mut fetched = Fetched::default();
    for (index, raw) in entries.into_iter().enumerate() {
        let item = account_item(hashes, &raw, index);
        let mapped = parse_item::<AccountEntry>(raw).and_then(|entry| {
            let hash = hashes
                .get(entry.securities_account.account_number.trim())
                .cloned()
                .ok_or("the account is missing from the account numbers answer")?;
            map_account(entry, &hash)
        });
        match mapped {
            Ok(account) => fetched.items.push(account),
            Err(message) => fetched.errors.push(item_error(item, message)),
        }
    }
    fetched
}

/// The raw positions of the account with this number, or `None` when the accounts answer does
/// not have it. An account without positions has an empty list.
pub(crate) fn positions_of(entries: Vec<Value>, account_number: &str) -> Option<Vec<Value>> {
    entries
        .into_iter()
        .find(|entry| raw_account_number(entry).map(str::trim) == Some(account_number.trim()))
        .map(|mut entry| {
            match entry
                .get_mut("securitiesAccount")
                .and_then(|account| account.get_mut("positions"))
                .map(Value::take)
            {
                Some(Value::Array(positions)) => positions,
                _ => Vec::new(),
            }
        })
}

fn asset_type(instrument: &Instrument) -> AssetType {
    let kind = instrument.kind.as_deref().unwrap_or_default();
    if kind.eq_ignore_ascii_case("MONEY_MARKET_FUND") {
        return AssetType::CashEquivalent;
    }
    match instrument
        .asset_type
        .as_deref()
        .unwrap_or_default()
        .to_ascii_uppercase()
        .as_str()
    {
        "EQUITY" if kind.eq_ignore_ascii_case("EXCHANGE_TRADED_FUND") => AssetType::Etf,
        "EQUITY" => AssetType::Equity,
        "ETF" | "COLLECTIVE_INVESTMENT" => AssetType::Etf,
        "OPTION" => AssetType::Option,
        "MUTUAL_FUND" => AssetType::MutualFund,
        "FIXED_INCOME" => AssetType::FixedIncome,
        "FUTURE" | "FUTURES" => AssetType::Futures,
        "CASH_EQUIVALENT" => AssetType::CashEquivalent,
        _ => AssetType::Other,
    }
}

fn non_empty(text: Option<&str>) -> Option<String> {
    text.map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
}

fn overflow(what: &str) -> String {
    format!("{what} is out of range")
}

fn map_position(position: Position) -> Result<NewHolding, String> {
    let instrument = position.instrument.unwrap_or_default();
    let symbol =
        non_empty(instrument.symbol.as_deref()).ok_or("the position has no instrument symbol")?;
    let id = non_empty(instrument.cusip.as_deref()).unwrap_or_else(|| symbol.clone());
    if position.long_quantity.is_none() && position.short_quantity.is_none() {
        return Err("the position has no quantity".to_owned());
    }
    let long = optional("longQuantity", position.long_quantity.as_ref())?.unwrap_or_default();
    let short = optional("shortQuantity", position.short_quantity.as_ref())?.unwrap_or_default();
    let quantity = long
        .checked_sub(short)
        .ok_or_else(|| overflow("the quantity"))?
        .normalize();
    // Owned positions count positive, owed (short) ones negative, whatever sign the answer
    // gives a short position's market value.
    let market_value = required("marketValue", position.market_value.as_ref())?;
    let market_value = if quantity.is_sign_negative() && !quantity.is_zero() {
        -market_value.abs()
    } else {
        market_value
    };
    let average_price = optional("averagePrice", position.average_price.as_ref())?;
    let cost_basis = average_price
        .map(|price| {
            price
                .checked_mul(quantity)
                .map(|cost| cost.normalize())
                .ok_or_else(|| overflow("the cost basis"))
        })
        .transpose()?;
    let current_price = if quantity.is_zero() {
        None
    } else {
        market_value
            .checked_div(quantity)
            .map(|price| price.round_dp(DERIVED_PRICE_DP).normalize())
    };
    let reported_gain = if quantity.is_sign_negative() {
        optional(
            "shortOpenProfitLoss",
            position.short_open_profit_loss.as_ref(),
        )?
    } else {
        optional(
            "longOpenProfitLoss",
            position.long_open_profit_loss.as_ref(),
        )?
    };
    let unrealized_gain_loss = match (reported_gain, cost_basis) {
        (Some(gain), _) => Some(gain),
        (None, Some(cost)) => Some(
            market_value
                .checked_sub(cost)
                .ok_or_else(|| overflow("the unrealized gain"))?
                .normalize(),
        ),
        (None, None) => None,
    };
    Ok(NewHolding {
        provider_holding_id: id,
        asset_type: asset_type(&instrument),
        security_name: non_empty(instrument.description.as_deref()),
        symbol,
        quantity,
        cost_basis,
        market_value,
        currency: CURRENCY.to_owned(),
        average_price,
        current_price,
        unrealized_gain_loss,
    })
}

/// How a position is named in errors: its CUSIP or symbol when readable.
fn position_item(raw: &Value, index: usize) -> String {
    let instrument = raw.get("instrument");
    ["cusip", "symbol"]
        .iter()
        .find_map(|field| {
            instrument
                .and_then(|instrument| instrument.get(*field))
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("position #{}", index + 1))
}

/// Maps an account's raw positions to holdings.
pub(crate) fn map_holdings(positions: Vec<Value>) -> Fetched<NewHolding> {
    let mut fetched = Fetched::default();
    for (index, raw) in positions.into_iter().enumerate() {
        let item = position_item(&raw, index);
        match parse_item::<Position>(raw).and_then(map_position) {
            Ok(holding) => fetched.items.push(holding),
            Err(message) => fetched.errors.push(item_error(item, message)),
        }
    }
    fetched
}

fn transaction_status(status: Option<&str>) -> TransactionStatus {
    match status.map(str::to_ascii_uppercase).as_deref() {
        None | Some("VALID") => TransactionStatus::Settled,
        Some("CANCELED" | "CANCELLED") => TransactionStatus::Cancelled,
        Some("INVALID") => TransactionStatus::Failed,
        // PENDING, UNKNOWN and anything new: not known to be settled.
        Some(_) => TransactionStatus::Pending,
    }
}

fn transaction_type(kind: &str, items: &[TransferItem]) -> TransactionType {
    match kind {
        "TRADE" => TransactionType::Trade,
        "DIVIDEND_OR_INTEREST" => TransactionType::Income,
        _ if !items.is_empty() && items.iter().all(TransferItem::is_fee) => TransactionType::Fee,
        "ACH_RECEIPT"
        | "ACH_DISBURSEMENT"
        | "CASH_RECEIPT"
        | "CASH_DISBURSEMENT"
        | "ELECTRONIC_FUND"
        | "WIRE_IN"
        | "WIRE_OUT"
        | "JOURNAL"
        | "RECEIVE_AND_DELIVER" => TransactionType::Transfer,
        _ => TransactionType::Other,
    }
}

/// The id of a raw transaction (`activityId`, a number or a string).
fn raw_activity_id(raw: &Value) -> Option<String> {
    match raw.get("activityId")? {
        Value::Number(number) => Some(number.to_string()),
        Value::String(text) if !text.trim().is_empty() => Some(text.trim().to_owned()),
        _ => None,
    }
}

fn map_transaction(id: String, transaction: Transaction) -> Result<NewTransaction, String> {
    let kind = transaction
        .kind
        .as_deref()
        .map(|kind| kind.trim().to_ascii_uppercase())
        .unwrap_or_default();
    let items = transaction.transfer_items.unwrap_or_default();
    let amount = required("netAmount", transaction.net_amount.as_ref())?;
    let date_text = transaction
        .trade_date
        .as_deref()
        .or(transaction.time.as_deref())
        .ok_or("the transaction has no tradeDate or time")?;
    let transaction_date =
        date_as_written(date_text).ok_or_else(|| format!("{date_text:?} is not a date"))?;
    let settlement_date = transaction
        .settlement_date
        .as_deref()
        .and_then(date_as_written);
    let security = items.iter().find(|item| item.is_security());
    let instrument = security.and_then(|item| item.instrument.as_ref());
    let moves_units = matches!(kind.as_str(), "TRADE" | "RECEIVE_AND_DELIVER");
    let quantity = match security {
        Some(item) if moves_units => optional("transferItems.amount", item.amount.as_ref())?,
        _ => None,
    };
    let unit_price = match security {
        Some(item) if moves_units => optional("transferItems.price", item.price.as_ref())?,
        _ => None,
    };
    let mut commission: Option<Decimal> = None;
    for item in items.iter().filter(|item| item.is_fee()) {
        let cost = optional("transferItems.cost", item.cost.as_ref())?.unwrap_or_default();
        let sum = commission
            .unwrap_or_default()
            .checked_add(cost.abs())
            .ok_or_else(|| overflow("the commission"))?;
        commission = Some(sum.normalize());
    }
    let subtype = match (kind.as_str(), quantity) {
        ("TRADE", Some(units)) if units.is_sign_positive() && !units.is_zero() => {
            Some("BUY".to_owned())
        }
        ("TRADE", Some(units)) if units.is_sign_negative() => Some("SELL".to_owned()),
        ("", _) => None,
        (kind, _) => Some(kind.to_owned()),
    };
    Ok(NewTransaction {
        provider_transaction_id: id,
        transaction_type: transaction_type(&kind, &items),
        subtype,
        status: transaction_status(transaction.status.as_deref()),
        amount,
        currency: CURRENCY.to_owned(),
        description: non_empty(transaction.description.as_deref()),
        symbol: instrument.and_then(|i| non_empty(i.symbol.as_deref())),
        security_name: instrument.and_then(|i| non_empty(i.description.as_deref())),
        quantity,
        unit_price,
        commission,
        transaction_date,
        settlement_date,
        pending_transaction_id: None,
        merchant_code: None,
    })
}

/// Maps the transactions answer.
pub(crate) fn map_transactions(body: &[u8]) -> Result<Fetched<NewTransaction>, ProviderError> {
    let mut fetched = Fetched::default();
    for (index, raw) in array(body, "transactions")?.into_iter().enumerate() {
        let Some(id) = raw_activity_id(&raw) else {
            fetched.errors.push(item_error(
                format!("transaction #{}", index + 1),
                "the transaction has no activityId",
            ));
            continue;
        };
        match parse_item::<Transaction>(raw).and_then(|raw| map_transaction(id.clone(), raw)) {
            Ok(transaction) => fetched.items.push(transaction),
            Err(message) => fetched.errors.push(item_error(id, message)),
        }
    }
    Ok(fetched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    fn number(text: &str) -> Number {
        serde_json::from_str(text).unwrap()
    }

    fn hashes() -> HashMap<String, String> {
        HashMap::from([
            ("11112222".to_owned(), "HASH-A".to_owned()),
            ("33334444".to_owned(), "HASH-B".to_owned()),
        ])
    }

    #[test]
    fn numbers_convert_through_their_text() {
        assert_eq!(
            decimal_from_number(&number("123.45")).unwrap(),
            dec("123.45")
        );
        assert_eq!(
            decimal_from_number(&number("123.45")).unwrap().to_string(),
            "123.45"
        );
        assert_eq!(
            decimal_from_number(&number("0.1")).unwrap().to_string(),
            "0.1"
        );
        assert_eq!(
            decimal_from_number(&number("1800.0")).unwrap().to_string(),
            "1800"
        );
        assert_eq!(decimal_from_number(&number("-42")).unwrap(), dec("-42"));
        assert_eq!(
            decimal_from_number(&number("18446744073709551615")).unwrap(),
            dec("18446744073709551615")
        );
        assert_eq!(
            decimal_from_number(&number("1.5e-7")).unwrap(),
            dec("0.00000015")
        );
        assert_eq!(decimal_from_number(&number("2E+3")).unwrap(), dec("2000"));
        assert_eq!(
            decimal_from_number(&number("1e21")).unwrap(),
            dec("1000000000000000000000")
        );
        assert!(decimal_from_number(&number("1e300")).is_err());
        assert!(decimal_from_number(&number("1e-40")).is_err());
    }

    #[test]
    fn dates_are_read_as_written() {
        let expected = NaiveDate::from_ymd_opt(2024, 3, 5);
        assert_eq!(date_as_written("2024-03-05T14:30:00+0000"), expected);
        assert_eq!(date_as_written("2024-03-05T23:30:00-0500"), expected);
        assert_eq!(date_as_written("2024-03-05T00:00:00.000Z"), expected);
        assert_eq!(date_as_written("2024-03-05"), expected);
        assert_eq!(date_as_written("2024-03-05junk"), None);
        assert_eq!(date_as_written("2024-13-05"), None);
        assert_eq!(date_as_written("é"), None);
        assert_eq!(date_as_written(""), None);
    }

    #[test]
    fn accounts_join_on_account_number() {
        let body = br#"[
            {"securitiesAccount": {"type": "MARGIN", "accountNumber": "11112222",
              "roundTrips": 0, "positions": [],
              "currentBalances": {"liquidationValue": 15234.56, "cashBalance": 1000.1,
                                  "availableFunds": 998.75, "buyingPower": 2000}},
             "aggregatedBalance": {"liquidationValue": 1}},
            {"securitiesAccount": {"type": "CASH", "accountNumber": "33334444",
              "currentBalances": {"cashBalance": 50, "cashAvailableForTrading": 40.5}}}
        ]"#;
        let fetched = map_accounts(&hashes(), parse_accounts(body).unwrap());
        assert!(fetched.errors.is_empty(), "{:?}", fetched.errors);
        let [margin, cash] = fetched.items.as_slice() else {
            panic!("two accounts expected: {:?}", fetched.items)
        };
        assert_eq!(margin.provider_account_id, "HASH-A");
        assert_eq!(margin.account_number.as_deref(), Some("11112222"));
        assert_eq!(margin.name, "Schwab Brokerage ****2222");
        assert_eq!(margin.account_type, AccountType::Brokerage);
        assert_eq!(margin.currency, "USD");
        assert_eq!(margin.balance_amount.to_string(), "15234.56");
        assert_eq!(margin.available_balance_amount, Some(dec("998.75")));
        assert!(margin.is_active);
        assert_eq!(cash.provider_account_id, "HASH-B");
        assert_eq!(cash.balance_amount, dec("50"));
        assert_eq!(cash.available_balance_amount, Some(dec("40.5")));
    }

    #[test]
    fn ira_types_and_unknown_types() {
        let body = br#"[
            {"securitiesAccount": {"type": "ROTH_IRA", "accountNumber": "11112222",
              "currentBalances": {"liquidationValue": 1}}},
            {"securitiesAccount": {"type": "IRA", "accountNumber": "33334444",
              "currentBalances": {"liquidationValue": 2}}}
        ]"#;
        let fetched = map_accounts(&hashes(), parse_accounts(body).unwrap());
        assert_eq!(fetched.items[0].account_type, AccountType::RothIra);
        assert_eq!(fetched.items[0].name, "Schwab Roth IRA ****2222");
        assert_eq!(fetched.items[1].account_type, AccountType::Ira);
        assert_eq!(account_type(Some("SOMETHING_NEW")).0, AccountType::Other);
        assert_eq!(account_type(None).0, AccountType::Other);
    }

    #[test]
    fn unmappable_accounts_land_in_errors() {
        let body = br#"[
            {"securitiesAccount": {"type": "MARGIN", "accountNumber": "99998888",
              "currentBalances": {"liquidationValue": 1}}},
            {"securitiesAccount": {"type": "CASH", "accountNumber": "11112222"}},
            {"securitiesAccount": {"type": "CASH", "accountNumber": "33334444",
              "currentBalances": {"liquidationValue": 1e300}}},
            {"securitiesAccount": {"type": "CASH"}},
            {"unexpected": true},
            {"securitiesAccount": {"type": "CASH", "accountNumber": "33334444",
              "currentBalances": null},
             "aggregatedBalance": {"currentLiquidationValue": 7.25}}
        ]"#;
        let fetched = map_accounts(&hashes(), parse_accounts(body).unwrap());
        assert_eq!(fetched.items.len(), 1);
        assert_eq!(fetched.items[0].balance_amount, dec("7.25"));
        assert_eq!(fetched.items[0].available_balance_amount, None);
        let items: Vec<&str> = fetched.errors.iter().map(|e| e.item.as_str()).collect();
        assert_eq!(
            items,
            ["****8888", "HASH-A", "HASH-B", "account #4", "account #5"]
        );
        assert!(fetched.errors[0].message.contains("account numbers"));
        assert!(fetched.errors[1].message.contains("no balance"));
        assert!(fetched.errors[2].message.contains("liquidationValue"));
    }

    #[test]
    fn bodies_of_the_wrong_shape_are_invalid_responses() {
        for body in [&b"{}"[..], b"not json", b"", b"{\"errors\": []}"] {
            assert!(matches!(
                parse_accounts(body),
                Err(ProviderError::InvalidResponse(_))
            ));
            assert!(matches!(
                map_transactions(body),
                Err(ProviderError::InvalidResponse(_))
            ));
            assert!(matches!(
                parse_account_numbers(body),
                Err(ProviderError::InvalidResponse(_))
            ));
        }
        let numbers = parse_account_numbers(
            br#"[{"accountNumber": "1", "hashValue": "H"}, {"accountNumber": 2}, 5]"#,
        )
        .unwrap();
        assert_eq!(numbers.len(), 1);
    }

    #[test]
    fn positions_map_to_holdings() {
        let body = br#"[
            {"securitiesAccount": {"accountNumber": "11112222", "positions": [
              {"shortQuantity": 0, "averagePrice": 150.25, "longQuantity": 50,
               "marketValue": 9500.0, "longOpenProfitLoss": 1987.5,
               "instrument": {"assetType": "EQUITY", "cusip": "037833100", "symbol": "AAPL",
                              "description": "APPLE INC", "netChange": 1.2}},
              {"longQuantity": 3, "averagePrice": 100, "marketValue": 350.01,
               "instrument": {"assetType": "COLLECTIVE_INVESTMENT", "symbol": "VTI",
                              "type": "EXCHANGE_TRADED_FUND"}},
              {"longQuantity": 0, "shortQuantity": 2, "averagePrice": 1.5e1,
               "marketValue": -40, "shortOpenProfitLoss": -10,
               "instrument": {"assetType": "OPTION", "symbol": "XYZ 240315C00015000"}},
              {"longQuantity": 1000.5, "marketValue": 1000.5,
               "instrument": {"assetType": "MUTUAL_FUND", "symbol": "SWVXX",
                              "type": "MONEY_MARKET_FUND"}},
              {"longQuantity": 0, "marketValue": 0,
               "instrument": {"assetType": "FUTURE", "symbol": "/ES"}}
            ]}}
        ]"#;
        let positions = positions_of(parse_accounts(body).unwrap(), "11112222").unwrap();
        let fetched = map_holdings(positions);
        assert!(fetched.errors.is_empty(), "{:?}", fetched.errors);
        let [aapl, vti, option, cash, future] = fetched.items.as_slice() else {
            panic!("five holdings expected: {:?}", fetched.items)
        };
        assert_eq!(aapl.provider_holding_id, "037833100");
        assert_eq!(aapl.symbol, "AAPL");
        assert_eq!(aapl.security_name.as_deref(), Some("APPLE INC"));
        assert_eq!(aapl.asset_type, AssetType::Equity);
        assert_eq!(aapl.quantity, dec("50"));
        assert_eq!(aapl.average_price.unwrap().to_string(), "150.25");
        assert_eq!(aapl.cost_basis.unwrap().to_string(), "7512.5");
        assert_eq!(aapl.market_value.to_string(), "9500");
        assert_eq!(aapl.current_price, Some(dec("190")));
        assert_eq!(aapl.unrealized_gain_loss, Some(dec("1987.5")));
        assert_eq!(aapl.currency, "USD");

        assert_eq!(vti.provider_holding_id, "VTI");
        assert_eq!(vti.asset_type, AssetType::Etf);
        assert_eq!(vti.security_name, None);
        assert_eq!(vti.cost_basis, Some(dec("300")));
        assert_eq!(vti.current_price, Some(dec("116.67")));
        assert_eq!(vti.unrealized_gain_loss.unwrap().to_string(), "50.01");

        assert_eq!(option.asset_type, AssetType::Option);
        assert_eq!(option.quantity, dec("-2"));
        assert_eq!(option.average_price, Some(dec("15")));
        assert_eq!(option.cost_basis, Some(dec("-30")));
        assert_eq!(option.current_price, Some(dec("20")));
        assert_eq!(option.unrealized_gain_loss, Some(dec("-10")));

        assert_eq!(cash.asset_type, AssetType::CashEquivalent);
        assert_eq!(cash.average_price, None);
        assert_eq!(cash.cost_basis, None);
        assert_eq!(cash.unrealized_gain_loss, None);
        assert_eq!(cash.current_price, Some(dec("1")));

        assert_eq!(future.asset_type, AssetType::Futures);
        assert_eq!(future.current_price, None);
    }

    #[test]
    fn unmappable_positions_land_in_errors() {
        let positions: Vec<Value> = serde_json::from_str(
            r#"[
              {"longQuantity": 1, "marketValue": 5, "instrument": {"assetType": "EQUITY"}},
              {"longQuantity": 1, "instrument": {"symbol": "NOVALUE", "cusip": "123"}},
              {"marketValue": 1, "instrument": {"symbol": "NOQTY"}},
              {"longQuantity": "x", "marketValue": 1, "instrument": {"symbol": "BADQTY"}},
              {"longQuantity": 1e-40, "marketValue": 1, "instrument": {"symbol": "TINY"}},
              "not an object",
              {"longQuantity": 2, "marketValue": 3, "instrument": {"symbol": "OK",
               "assetType": "SOMETHING"}}
            ]"#,
        )
        .unwrap();
        let fetched = map_holdings(positions);
        assert_eq!(fetched.items.len(), 1);
        assert_eq!(fetched.items[0].asset_type, AssetType::Other);
        assert_eq!(fetched.items[0].current_price, Some(dec("1.5")));
        let items: Vec<&str> = fetched.errors.iter().map(|e| e.item.as_str()).collect();
        assert_eq!(
            items,
            [
                "position #1",
                "123",
                "NOQTY",
                "BADQTY",
                "TINY",
                "position #6"
            ]
        );
        assert!(fetched.errors[1].message.contains("marketValue"));
    }

    #[test]
    fn positions_of_an_unknown_or_empty_account() {
        let entries =
            parse_accounts(br#"[{"securitiesAccount": {"accountNumber": "1"}}]"#).unwrap();
        assert_eq!(positions_of(entries.clone(), "2"), None);
        assert_eq!(positions_of(entries, "1"), Some(Vec::new()));
    }

    #[test]
    fn transactions_map_with_fees_and_securities() {
        let body = br#"[
          {"activityId": 95512265692, "time": "2025-04-23T19:59:12+0000",
           "accountNumber": "11112222", "type": "TRADE", "status": "VALID",
           "subAccount": "CASH", "tradeDate": "2025-04-23T19:59:12+0000",
           "settlementDate": "2025-04-25T04:00:00+0000", "positionId": 1, "orderId": 2,
           "netAmount": -1855.66, "activityType": "EXECUTION", "description": "BUY AAPL",
           "transferItems": [
             {"instrument": {"assetType": "CURRENCY", "symbol": "CURRENCY_USD"},
              "amount": 0, "cost": -0.65, "feeType": "COMMISSION"},
             {"instrument": {"assetType": "CURRENCY", "symbol": "CURRENCY_USD"},
              "amount": 0, "cost": -0.01, "feeType": "SEC_FEE"},
             {"instrument": {"assetType": "EQUITY", "symbol": "AAPL", "description": "APPLE INC",
                             "closingPrice": 169.76, "type": "COMMON_STOCK"},
              "amount": 10, "cost": -1855, "price": 185.5, "positionEffect": "OPENING"}
           ]},
          {"activityId": "77", "time": "2025-04-20T10:00:00+0000", "type": "TRADE",
           "netAmount": 1224.99,
           "transferItems": [
             {"instrument": {"assetType": "COLLECTIVE_INVESTMENT", "symbol": "VTI"},
              "amount": -5, "cost": 1225, "price": 245}]},
          {"activityId": 78, "time": "2025-04-10T10:00:00+0000", "type": "DIVIDEND_OR_INTEREST",
           "status": "VALID", "netAmount": 32.1, "description": "VTI DIVIDEND",
           "transferItems": [
             {"instrument": {"assetType": "COLLECTIVE_INVESTMENT", "symbol": "VTI"},
              "amount": 0, "cost": 0},
             {"instrument": {"assetType": "CURRENCY", "symbol": "CURRENCY_USD"},
              "amount": 32.1, "cost": 0}]},
          {"activityId": 79, "time": "2025-04-01T10:00:00+0000", "type": "ACH_RECEIPT",
           "status": "PENDING", "netAmount": 5000},
          {"activityId": 80, "tradeDate": "2025-04-02", "type": "JOURNAL",
           "status": "CANCELED", "netAmount": -25,
           "transferItems": [{"cost": -25, "feeType": "ADR_FEE"}]},
          {"activityId": 81, "time": "2025-04-03T00:00:00Z", "type": "MEMORANDUM",
           "status": "INVALID", "netAmount": 0, "transferItems": null},
          {"activityId": 82, "time": "2025-04-04T00:00:00Z", "netAmount": 1.5e-3}
        ]"#;
        let fetched = map_transactions(body).unwrap();
        assert!(fetched.errors.is_empty(), "{:?}", fetched.errors);
        let [buy, sell, dividend, ach, fee, memo, bare] = fetched.items.as_slice() else {
            panic!("seven transactions expected: {:?}", fetched.items)
        };
        assert_eq!(buy.provider_transaction_id, "95512265692");
        assert_eq!(buy.transaction_type, TransactionType::Trade);
        assert_eq!(buy.subtype.as_deref(), Some("BUY"));
        assert_eq!(buy.status, TransactionStatus::Settled);
        assert_eq!(buy.amount.to_string(), "-1855.66");
        assert_eq!(buy.currency, "USD");
        assert_eq!(buy.description.as_deref(), Some("BUY AAPL"));
        assert_eq!(buy.symbol.as_deref(), Some("AAPL"));
        assert_eq!(buy.security_name.as_deref(), Some("APPLE INC"));
        assert_eq!(buy.quantity, Some(dec("10")));
        assert_eq!(buy.unit_price.unwrap().to_string(), "185.5");
        assert_eq!(buy.commission.unwrap().to_string(), "0.66");
        assert_eq!(
            buy.transaction_date,
            NaiveDate::from_ymd_opt(2025, 4, 23).unwrap()
        );
        assert_eq!(buy.settlement_date, NaiveDate::from_ymd_opt(2025, 4, 25));

        assert_eq!(sell.provider_transaction_id, "77");
        assert_eq!(sell.subtype.as_deref(), Some("SELL"));
        assert_eq!(sell.quantity, Some(dec("-5")));
        assert_eq!(sell.commission, None);
        assert_eq!(sell.status, TransactionStatus::Settled);
        assert_eq!(
            sell.transaction_date,
            NaiveDate::from_ymd_opt(2025, 4, 20).unwrap()
        );

        assert_eq!(dividend.transaction_type, TransactionType::Income);
        assert_eq!(dividend.subtype.as_deref(), Some("DIVIDEND_OR_INTEREST"));
        assert_eq!(dividend.symbol.as_deref(), Some("VTI"));
        assert_eq!(dividend.quantity, None);
        assert_eq!(dividend.unit_price, None);
        assert_eq!(dividend.amount.to_string(), "32.1");

        assert_eq!(ach.transaction_type, TransactionType::Transfer);
        assert_eq!(ach.status, TransactionStatus::Pending);
        assert_eq!(ach.symbol, None);
        assert_eq!(ach.description, None);

        assert_eq!(fee.transaction_type, TransactionType::Fee);
        assert_eq!(fee.status, TransactionStatus::Cancelled);
        assert_eq!(fee.commission, Some(dec("25")));
        assert_eq!(
            fee.transaction_date,
            NaiveDate::from_ymd_opt(2025, 4, 2).unwrap()
        );

        assert_eq!(memo.transaction_type, TransactionType::Other);
        assert_eq!(memo.status, TransactionStatus::Failed);

        assert_eq!(bare.transaction_type, TransactionType::Other);
        assert_eq!(bare.subtype, None);
        assert_eq!(bare.amount.to_string(), "0.0015");
    }

    #[test]
    fn unmappable_transactions_land_in_errors() {
        let body = br#"[
          {"time": "2025-04-01T00:00:00Z", "type": "TRADE", "netAmount": 1},
          {"activityId": 1, "type": "TRADE", "netAmount": 1},
          {"activityId": 2, "time": "yesterday", "netAmount": 1},
          {"activityId": 3, "time": "2025-04-01T00:00:00Z"},
          {"activityId": 4, "time": "2025-04-01T00:00:00Z", "netAmount": "12"},
          {"activityId": 5, "time": "2025-04-01T00:00:00Z", "netAmount": 1e40},
          {"activityId": {"nested": 1}},
          {"activityId": 6, "time": "2025-04-01T00:00:00Z", "netAmount": 2,
           "transferItems": [{"feeType": "COMMISSION", "cost": 1e30},
                             {"feeType": "COMMISSION", "cost": 7.9e28}]},
          {"activityId": 7, "time": "2025-04-01T00:00:00Z", "netAmount": 2}
        ]"#;
        let fetched = map_transactions(body).unwrap();
        assert_eq!(fetched.items.len(), 1);
        assert_eq!(fetched.items[0].provider_transaction_id, "7");
        let items: Vec<&str> = fetched.errors.iter().map(|e| e.item.as_str()).collect();
        assert_eq!(
            items,
            [
                "transaction #1",
                "1",
                "2",
                "3",
                "4",
                "5",
                "transaction #7",
                "6"
            ]
        );
        assert!(fetched.errors[1].message.contains("tradeDate"));
        assert!(fetched.errors[3].message.contains("netAmount"));
    }
}
