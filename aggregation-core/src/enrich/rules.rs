//! Transaction rules: conditions over a row's fields and actions that set its category,
//! merchant name or notes.
//!
//! A rule is stored and sent as JSON: `conditions` `[{field, op, value}]` (every one must
//! hold) and `actions` `[{set_category | set_merchant_name | set_notes: value}]`. Fields and
//! the operators each takes:
//!
//! | field | ops | value |
//! | --- | --- | --- |
//! | `description`, `merchant_name`, `currency`, `category`, `merchant_code` | `contains`, `equals`, `starts_with`, `regex` | text |
//! | `amount` (signed: negative is money out) | `equals`, `gt`, `lt`, `between` | a decimal (number or text); `between` takes `[low, high]`, inclusive |
//! | `account_id` | `equals` | an account id |
//!
//! Text comparisons ignore case (Unicode simple case folding), `regex` included (`(?-i)` in a
//! pattern turns that off). A field the row lacks (no merchant name, say) holds no text
//! condition. Every text test runs on the `regex` crate's engine, which takes time linear in
//! the text whatever the pattern (no backtracking); a pattern is at most
//! [`MAX_PATTERN_CHARS`] characters and its compiled form at most [`REGEX_SIZE_LIMIT`] bytes.
//!
//! Rules run in priority order (lowest first, then id). Each rule whose conditions hold sets
//! what its actions name, except the fields the user set themselves; later rules see what
//! earlier ones set (and may set a field again), and a rule with `stop_processing` that
//! matched ends the run for that row.

use std::str::FromStr as _;

use regex::{Regex, RegexBuilder};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// The longest `regex` pattern, and the longest text value of any condition, in characters.
pub const MAX_PATTERN_CHARS: usize = 500;
/// The most bytes a condition's compiled pattern may take (the `regex` crate's size limit);
/// a bigger one is refused.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;
/// The most bytes of lazy-DFA cache a condition's pattern may use while it runs.
const REGEX_DFA_LIMIT: usize = 1024 * 1024;
/// The most conditions of one rule.
pub const MAX_CONDITIONS: usize = 20;
/// The most actions of one rule (one of each kind).
pub const MAX_ACTIONS: usize = 3;
/// The longest merchant name an action sets, in characters.
pub const MAX_MERCHANT_NAME_CHARS: usize = 200;
/// The longest notes an action sets, in characters.
pub const MAX_NOTES_CHARS: usize = 2_000;
/// The longest category id an action names, in characters.
pub const MAX_CATEGORY_CHARS: usize = 64;

/// A condition as sent and stored: `{field, op, value}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionSpec {
    /// The row's field.
    pub field: String,
    /// The comparison.
    pub op: String,
    /// What the field is compared with.
    pub value: Value,
}

/// An action as sent and stored: `{"set_category": "FOOD_AND_DRINK_COFFEE"}` and the like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionSpec {
    /// Sets the category (a taxonomy detailed id or `custom:<uuid>`), source `rule`.
    SetCategory(String),
    /// Sets the merchant name.
    SetMerchantName(String),
    /// Sets the notes.
    SetNotes(String),
}

impl ActionSpec {
    /// The action's key (`set_category`, ...).
    pub fn key(&self) -> &'static str {
        match self {
            Self::SetCategory(_) => "set_category",
            Self::SetMerchantName(_) => "set_merchant_name",
            Self::SetNotes(_) => "set_notes",
        }
    }
}

/// Why a condition or action was refused: the place (`conditions[0].value`), a short code and
/// a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    /// Where: `conditions`, `conditions[2].op`, `actions[0].set_category`, ...
    pub field: String,
    /// A short machine-readable reason (`unknown_field`, `invalid_op`, `invalid_regex`, ...).
    pub code: &'static str,
    /// A sentence for people.
    pub message: String,
}

impl RuleError {
    fn new(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            code,
            message: message.into(),
        }
    }
}

/// A row field a condition reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleField {
    Description,
    MerchantName,
    Amount,
    AccountId,
    Currency,
    Category,
    MerchantCode,
}

impl RuleField {
    const ALL: &'static [(&'static str, Self)] = &[
        ("description", Self::Description),
        ("merchant_name", Self::MerchantName),
        ("amount", Self::Amount),
        ("account_id", Self::AccountId),
        ("currency", Self::Currency),
        ("category", Self::Category),
        ("merchant_code", Self::MerchantCode),
    ];

    fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, field)| *field)
    }
}

/// What a condition tests, compiled.
#[derive(Debug, Clone)]
enum Test {
    /// A text field against a (case-insensitive) pattern.
    Text(Regex),
    /// The amount against bounds, inclusive: `equals` is `[v, v]`; `gt`/`lt` are strict.
    Amount(AmountTest),
    /// The account.
    Account(Uuid),
}

#[derive(Debug, Clone, Copy)]
enum AmountTest {
    Equals(Decimal),
    Greater(Decimal),
    Less(Decimal),
    Between(Decimal, Decimal),
}

impl AmountTest {
    fn holds(self, amount: Decimal) -> bool {
        match self {
            Self::Equals(value) => amount == value,
            Self::Greater(value) => amount > value,
            Self::Less(value) => amount < value,
            Self::Between(low, high) => low <= amount && amount <= high,
        }
    }
}

/// One compiled condition.
#[derive(Debug, Clone)]
struct Condition {
    field: RuleField,
    test: Test,
    /// The value of an `equals` on text, as sent.
    equals: Option<String>,
}

/// A row as the conditions read it: what its source reported.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// Its account.
    pub account_id: Uuid,
    /// Signed amount (negative is money out).
    pub amount: Decimal,
    /// ISO 4217 code.
    pub currency: &'a str,
    /// Description or payee.
    pub description: Option<&'a str>,
    /// ISO 18245 merchant category code.
    pub merchant_code: Option<&'a str>,
}

/// The three fields rules set, as a row holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RuleFields {
    /// Category id.
    pub category: Option<String>,
    /// Merchant name.
    pub merchant_name: Option<String>,
    /// Notes.
    pub notes: Option<String>,
}

/// Which of [`RuleFields`] the user set (rules leave those alone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserSet {
    /// `category_by_user`.
    pub category: bool,
    /// `merchant_name_by_user`.
    pub merchant_name: bool,
    /// `notes_by_user`.
    pub notes: bool,
}

/// Which fields a run of rules set (each then to the value in the [`RuleFields`] it changed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// The category (source `rule`).
    pub category: bool,
    /// The merchant name.
    pub merchant_name: bool,
    /// The notes.
    pub notes: bool,
}

impl Applied {
    /// Whether any field was set.
    pub fn any(self) -> bool {
        self.category || self.merchant_name || self.notes
    }
}

/// A compiled rule, ready to run on rows.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The stored rule's id (nil for a rule being previewed).
    pub id: Uuid,
    conditions: Vec<Condition>,
    actions: Vec<ActionSpec>,
    /// Whether a match ends the run for the row.
    pub stop_processing: bool,
}

/// One row a preview would change: its id and the fields before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleChange {
    /// The transaction.
    pub id: Uuid,
    /// Its fields now.
    pub before: RuleFields,
    /// Its fields once the rule ran.
    pub after: RuleFields,
}

/// What running one rule over a user's transactions would change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulePreview {
    /// How many rows would change.
    pub count: u64,
    /// The first of them (by account, date and id), at most the sample asked for.
    pub changes: Vec<RuleChange>,
}

fn text_value(place: &str, value: &Value) -> Result<String, RuleError> {
    match value {
        Value::String(text) if text.is_empty() => {
            Err(RuleError::new(place, "too_short", "Must not be empty."))
        }
        Value::String(text) if text.chars().count() > MAX_PATTERN_CHARS => Err(RuleError::new(
            place,
            "too_long",
            format!("Must be at most {MAX_PATTERN_CHARS} characters long."),
        )),
        Value::String(text) => Ok(text.clone()),
        _ => Err(RuleError::new(place, "invalid_type", "Must be a string.")),
    }
}

/// A decimal as a JSON number or text (`-12.50`).
fn decimal_value(place: &str, value: &Value) -> Result<Decimal, RuleError> {
    let parsed = match value {
        Value::Number(number) => Decimal::from_str(&number.to_string())
            .or_else(|_| Decimal::from_scientific(&number.to_string())),
        Value::String(text) => Decimal::from_str(text.trim()),
        _ => {
            return Err(RuleError::new(
                place,
                "invalid_decimal",
                "Must be a decimal number such as -12.50 (a number or text).",
            ));
        }
    };
    parsed.map_err(|_| {
        RuleError::new(
            place,
            "invalid_decimal",
            "Must be a decimal number such as -12.50 (a number or text).",
        )
    })
}

/// Compiles a pattern with the rules' bounds: case-insensitive, size-limited.
fn compile(place: &str, pattern: &str) -> Result<Regex, RuleError> {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_LIMIT)
        .build()
        .map_err(|error| match error {
            regex::Error::CompiledTooBig(_) => RuleError::new(
                place,
                "regex_too_big",
                format!(
                    "The pattern compiles to more than {REGEX_SIZE_LIMIT} bytes; make it simpler \
                     (fewer repetitions or character classes)."
                ),
            ),
            other => RuleError::new(
                place,
                "invalid_regex",
                format!("Not a valid regular expression: {other}"),
            ),
        })
}

impl Condition {
    fn parse(index: usize, spec: &ConditionSpec) -> Result<Self, RuleError> {
        let at = |part: &str| format!("conditions[{index}].{part}");
        let field = RuleField::parse(&spec.field).ok_or_else(|| {
            RuleError::new(
                at("field"),
                "unknown_field",
                "Must be one of description, merchant_name, amount, account_id, currency, \
                 category, merchant_code.",
            )
        })?;
        let op = spec.op.as_str();
        let invalid_op = |allowed: &str| {
            RuleError::new(
                at("op"),
                "invalid_op",
                format!("The field `{}` takes the ops {allowed}.", spec.field),
            )
        };
        let mut equals = None;
        let test = match field {
            RuleField::Amount => {
                let place = at("value");
                let bound = |value: &Value| decimal_value(&place, value);
                Test::Amount(match op {
                    "equals" => AmountTest::Equals(bound(&spec.value)?),
                    "gt" => AmountTest::Greater(bound(&spec.value)?),
                    "lt" => AmountTest::Less(bound(&spec.value)?),
                    "between" => match &spec.value {
                        Value::Array(pair) if pair.len() == 2 => {
                            let (low, high) = (bound(&pair[0])?, bound(&pair[1])?);
                            if low > high {
                                return Err(RuleError::new(
                                    place.as_str(),
                                    "invalid_range",
                                    "The low bound must not be above the high one.",
                                ));
                            }
                            AmountTest::Between(low, high)
                        }
                        _ => {
                            return Err(RuleError::new(
                                place.as_str(),
                                "invalid_range",
                                "Must be [low, high]: two decimal numbers.",
                            ));
                        }
                    },
                    _ => return Err(invalid_op("equals, gt, lt, between")),
                })
            }
            RuleField::AccountId => {
                if op != "equals" {
                    return Err(invalid_op("equals"));
                }
                let id = match &spec.value {
                    Value::String(text) => Uuid::parse_str(text).ok(),
                    _ => None,
                };
                Test::Account(id.ok_or_else(|| {
                    RuleError::new(at("value"), "invalid_uuid", "Must be an account id.")
                })?)
            }
            _ => {
                let place = at("value");
                let text = text_value(&place, &spec.value)?;
                let pattern = match op {
                    "contains" => regex::escape(&text),
                    "equals" => {
                        equals = Some(text.clone());
                        format!("^(?:{})$", regex::escape(&text))
                    }
                    "starts_with" => format!("^(?:{})", regex::escape(&text)),
                    "regex" => text,
                    _ => return Err(invalid_op("contains, equals, starts_with, regex")),
                };
                Test::Text(compile(&place, &pattern)?)
            }
        };
        Ok(Self {
            field,
            test,
            equals,
        })
    }

    fn holds(&self, subject: &Subject<'_>, fields: &RuleFields) -> bool {
        match &self.test {
            Test::Amount(test) => test.holds(subject.amount),
            Test::Account(id) => subject.account_id == *id,
            Test::Text(pattern) => {
                let text = match self.field {
                    RuleField::Description => subject.description,
                    RuleField::MerchantName => fields.merchant_name.as_deref(),
                    RuleField::Currency => Some(subject.currency),
                    RuleField::Category => fields.category.as_deref(),
                    RuleField::MerchantCode => subject.merchant_code,
                    RuleField::Amount | RuleField::AccountId => None,
                };
                text.is_some_and(|text| pattern.is_match(text))
            }
        }
    }
}

/// Checks the shape of one action: its text within bounds. Whether a category exists is the
/// caller's to check (it needs the user's own categories).
fn check_action(index: usize, action: &ActionSpec) -> Result<(), RuleError> {
    let (text, min, max) = match action {
        ActionSpec::SetCategory(text) => (text, 1, MAX_CATEGORY_CHARS),
        ActionSpec::SetMerchantName(text) => (text, 1, MAX_MERCHANT_NAME_CHARS),
        ActionSpec::SetNotes(text) => (text, 0, MAX_NOTES_CHARS),
    };
    let place = format!("actions[{index}].{}", action.key());
    let length = text.chars().count();
    if length < min || (min > 0 && text.trim().is_empty()) {
        return Err(RuleError::new(place, "too_short", "Must not be empty."));
    }
    if length > max {
        return Err(RuleError::new(
            place,
            "too_long",
            format!("Must be at most {max} characters long."),
        ));
    }
    Ok(())
}

/// Reads `conditions` as sent: a list of 1 to [`MAX_CONDITIONS`] `{field, op, value}`.
pub fn condition_specs(value: &Value) -> Result<Vec<ConditionSpec>, RuleError> {
    let Value::Array(items) = value else {
        return Err(RuleError::new(
            "conditions",
            "invalid_type",
            "Must be a list of {field, op, value}.",
        ));
    };
    if items.is_empty() {
        return Err(RuleError::new(
            "conditions",
            "too_short",
            "A rule needs at least one condition.",
        ));
    }
    if items.len() > MAX_CONDITIONS {
        return Err(RuleError::new(
            "conditions",
            "too_many",
            format!("A rule has at most {MAX_CONDITIONS} conditions."),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let Value::Object(object) = item else {
                return Err(RuleError::new(
                    format!("conditions[{index}]"),
                    "invalid_type",
                    "Must be an object {field, op, value}.",
                ));
            };
            let text = |key: &str| match object.get(key) {
                Some(Value::String(text)) => Ok(text.clone()),
                Some(_) => Err(RuleError::new(
                    format!("conditions[{index}].{key}"),
                    "invalid_type",
                    "Must be a string.",
                )),
                None => Err(RuleError::new(
                    format!("conditions[{index}].{key}"),
                    "required",
                    "This field is required.",
                )),
            };
            let (field, op) = (text("field")?, text("op")?);
            let value = match object.get("value") {
                Some(value) if !value.is_null() => value.clone(),
                _ => {
                    return Err(RuleError::new(
                        format!("conditions[{index}].value"),
                        "required",
                        "This field is required.",
                    ));
                }
            };
            let spec = ConditionSpec { field, op, value };
            // Compiled here too, so a bad pattern is refused when the rule is written.
            Condition::parse(index, &spec)?;
            Ok(spec)
        })
        .collect()
}

/// Reads `actions` as sent: a list of 1 to [`MAX_ACTIONS`] objects of one key each
/// (`set_category`, `set_merchant_name`, `set_notes`), each kind at most once.
pub fn action_specs(value: &Value) -> Result<Vec<ActionSpec>, RuleError> {
    let Value::Array(items) = value else {
        return Err(RuleError::new(
            "actions",
            "invalid_type",
            "Must be a list of {set_category | set_merchant_name | set_notes: value}.",
        ));
    };
    if items.is_empty() {
        return Err(RuleError::new(
            "actions",
            "too_short",
            "A rule needs at least one action.",
        ));
    }
    if items.len() > MAX_ACTIONS {
        return Err(RuleError::new(
            "actions",
            "too_many",
            format!("A rule has at most {MAX_ACTIONS} actions, one of each kind."),
        ));
    }
    let mut actions: Vec<ActionSpec> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let place = format!("actions[{index}]");
        let action = match item {
            Value::Object(object) if object.len() == 1 => {
                let (key, value) = object.iter().next().ok_or_else(|| {
                    RuleError::new(&place, "invalid_action", "Must have one key.")
                })?;
                let text = match value {
                    Value::String(text) => text.clone(),
                    _ => {
                        return Err(RuleError::new(
                            format!("{place}.{key}"),
                            "invalid_type",
                            "Must be a string.",
                        ));
                    }
                };
                match key.as_str() {
                    "set_category" => ActionSpec::SetCategory(text),
                    "set_merchant_name" => ActionSpec::SetMerchantName(text),
                    "set_notes" => ActionSpec::SetNotes(text),
                    _ => {
                        return Err(RuleError::new(
                            format!("{place}.{key}"),
                            "invalid_action",
                            "Must be set_category, set_merchant_name or set_notes.",
                        ));
                    }
                }
            }
            _ => {
                return Err(RuleError::new(
                    place,
                    "invalid_action",
                    "Must be an object of one key: set_category, set_merchant_name or set_notes.",
                ));
            }
        };
        check_action(index, &action)?;
        if actions.iter().any(|known| known.key() == action.key()) {
            return Err(RuleError::new(
                format!("{place}.{}", action.key()),
                "duplicate_action",
                "Each kind of action at most once a rule.",
            ));
        }
        actions.push(action);
    }
    Ok(actions)
}

impl Rule {
    /// Compiles checked conditions and actions.
    pub fn compile(
        id: Uuid,
        conditions: &[ConditionSpec],
        actions: &[ActionSpec],
        stop_processing: bool,
    ) -> Result<Self, RuleError> {
        let conditions = conditions
            .iter()
            .enumerate()
            .map(|(index, spec)| Condition::parse(index, spec))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            id,
            conditions,
            actions: actions.to_vec(),
            stop_processing,
        })
    }

    /// Compiles a stored rule (its conditions and actions as JSON text).
    pub fn from_stored(
        id: Uuid,
        conditions: &str,
        actions: &str,
        stop_processing: bool,
    ) -> Result<Self, RuleError> {
        fn stored(what: &'static str) -> impl Fn(serde_json::Error) -> RuleError {
            move |error| RuleError::new(what, "invalid_stored_rule", error.to_string())
        }
        let conditions: Vec<ConditionSpec> =
            serde_json::from_str(conditions).map_err(stored("conditions"))?;
        let actions: Vec<ActionSpec> = serde_json::from_str(actions).map_err(stored("actions"))?;
        Self::compile(id, &conditions, &actions, stop_processing)
    }

    /// The account every row it matches must be in, when a condition names one.
    pub fn account(&self) -> Option<Uuid> {
        self.conditions
            .iter()
            .find_map(|condition| match condition.test {
                Test::Account(id) => Some(id),
                _ => None,
            })
    }

    /// The currency every row it matches must be in (upper case), when a condition says
    /// `currency equals` a plain ASCII code: rows store their currency upper case, so a store
    /// may select on it.
    pub fn currency(&self) -> Option<String> {
        self.conditions.iter().find_map(|condition| {
            (condition.field == RuleField::Currency)
                .then_some(condition.equals.as_deref())
                .flatten()
                .filter(|code| code.is_ascii())
                .map(str::to_ascii_uppercase)
        })
    }

    /// Whether every condition holds for the row as it is.
    pub fn matches(&self, subject: &Subject<'_>, fields: &RuleFields) -> bool {
        self.conditions
            .iter()
            .all(|condition| condition.holds(subject, fields))
    }

    /// Sets what the actions name on `fields`, except what the user set; what was set.
    fn act(&self, fields: &mut RuleFields, user: UserSet, applied: &mut Applied) {
        for action in &self.actions {
            match action {
                ActionSpec::SetCategory(id) if !user.category => {
                    fields.category = Some(id.clone());
                    applied.category = true;
                }
                ActionSpec::SetMerchantName(name) if !user.merchant_name => {
                    fields.merchant_name = Some(name.clone());
                    applied.merchant_name = true;
                }
                ActionSpec::SetNotes(notes) if !user.notes => {
                    fields.notes = Some(notes.clone());
                    applied.notes = true;
                }
                _ => {}
            }
        }
    }
}

/// Runs `rules` (already in priority order) on one row: each that matches sets its fields on
/// `fields` (never one in `user`); a matching rule with `stop_processing` ends the run. Which
/// fields the rules set.
pub fn run(
    rules: &[Rule],
    subject: &Subject<'_>,
    fields: &mut RuleFields,
    user: UserSet,
) -> Applied {
    let mut applied = Applied::default();
    for rule in rules {
        if rule.matches(subject, fields) {
            rule.act(fields, user, &mut applied);
            if rule.stop_processing {
                break;
            }
        }
    }
    applied
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn rule(conditions: Value, actions: Value, stop: bool) -> Rule {
        let conditions = condition_specs(&conditions).expect("conditions");
        let actions = action_specs(&actions).expect("actions");
        Rule::compile(Uuid::nil(), &conditions, &actions, stop).expect("rule")
    }

    fn subject<'a>(description: &'a str, amount: &str) -> Subject<'a> {
        Subject {
            account_id: Uuid::nil(),
            amount: Decimal::from_str(amount).expect("amount"),
            currency: "USD",
            description: Some(description),
            merchant_code: None,
        }
    }

    #[test]
    fn text_ops_ignore_case_and_amounts_compare() {
        let coffee = rule(
            json!([
                {"field": "description", "op": "contains", "value": "blue bottle"},
                {"field": "amount", "op": "between", "value": ["-10", -1]},
                {"field": "currency", "op": "equals", "value": "usd"},
            ]),
            json!([{"set_category": "FOOD_AND_DRINK_COFFEE"}]),
            false,
        );
        let fields = RuleFields::default();
        assert!(coffee.matches(&subject("SQ *BLUE BOTTLE 1234", "-4.75"), &fields));
        assert!(!coffee.matches(&subject("SQ *BLUE BOTTLE 1234", "-40"), &fields));
        assert!(!coffee.matches(&subject("Corner grocery", "-4.75"), &fields));
        // Regex metacharacters of a `contains` value are literal.
        let literal = rule(
            json!([{"field": "description", "op": "starts_with", "value": "sq *"}]),
            json!([{"set_notes": "square"}]),
            false,
        );
        assert!(literal.matches(&subject("SQ *X", "1"), &fields));
        assert!(!literal.matches(&subject("SQQQ X", "1"), &fields));
        let exact = rule(
            json!([{"field": "description", "op": "equals", "value": "rent"}]),
            json!([{"set_notes": "rent"}]),
            false,
        );
        assert!(exact.matches(&subject("RENT", "1"), &fields));
        assert!(!exact.matches(&subject("RENT MARCH", "1"), &fields));
    }

    #[test]
    fn rules_run_in_order_leave_user_fields_and_stop() {
        let first = rule(
            json!([{"field": "description", "op": "contains", "value": "coffee"}]),
            json!([{"set_category": "FOOD_AND_DRINK_COFFEE"}, {"set_notes": "first"}]),
            false,
        );
        // Sees the category the first rule set.
        let second = rule(
            json!([{"field": "category", "op": "equals", "value": "food_and_drink_coffee"}]),
            json!([{"set_merchant_name": "Cafe"}]),
            true,
        );
        let third = rule(
            json!([{"field": "amount", "op": "lt", "value": 0}]),
            json!([{"set_notes": "never"}]),
            false,
        );
        let rules = [first, second, third];
        let mut fields = RuleFields::default();
        let applied = run(
            &rules,
            &subject("Coffee", "-3"),
            &mut fields,
            UserSet {
                notes: true,
                ..UserSet::default()
            },
        );
        assert_eq!(fields.category.as_deref(), Some("FOOD_AND_DRINK_COFFEE"));
        assert_eq!(fields.merchant_name.as_deref(), Some("Cafe"));
        assert_eq!(fields.notes, None);
        assert_eq!(
            applied,
            Applied {
                category: true,
                merchant_name: true,
                notes: false
            }
        );
    }

    #[test]
    fn nonsense_is_refused_naming_the_place() {
        let refused = |conditions: Value| {
            condition_specs(&conditions)
                .err()
                .map(|e| (e.field, e.code))
        };
        assert_eq!(
            refused(json!([{"field": "amount", "op": "contains", "value": "1"}])),
            Some(("conditions[0].op".to_owned(), "invalid_op"))
        );
        assert_eq!(
            refused(json!([{"field": "description", "op": "gt", "value": "1"}])),
            Some(("conditions[0].op".to_owned(), "invalid_op"))
        );
        assert_eq!(
            refused(json!([{"field": "payee", "op": "equals", "value": "1"}])),
            Some(("conditions[0].field".to_owned(), "unknown_field"))
        );
        assert_eq!(
            refused(json!([{"field": "amount", "op": "between", "value": [5, 1]}])),
            Some(("conditions[0].value".to_owned(), "invalid_range"))
        );
        assert_eq!(
            refused(json!([{"field": "description", "op": "regex", "value": "("}])),
            Some(("conditions[0].value".to_owned(), "invalid_regex"))
        );
        assert_eq!(
            refused(json!([{"field": "description", "op": "regex", "value": r"\w{200}"}])),
            Some(("conditions[0].value".to_owned(), "regex_too_big"))
        );
        assert_eq!(
            refused(json!([])),
            Some(("conditions".to_owned(), "too_short"))
        );
        // The longest literal still compiles within the size limit.
        let long = "é".repeat(MAX_PATTERN_CHARS);
        assert!(
            condition_specs(&json!([{"field": "description", "op": "contains", "value": long}]))
                .is_ok()
        );
        assert_eq!(
            action_specs(&json!([{"set_notes": "a"}, {"set_notes": "b"}]))
                .err()
                .map(|e| e.code),
            Some("duplicate_action")
        );
    }

    #[test]
    fn a_pathological_pattern_runs_in_linear_time() {
        let nested = rule(
            json!([{"field": "description", "op": "regex", "value": "(a+)+$"}]),
            json!([{"set_notes": "x"}]),
            false,
        );
        let text = format!("{}!", "a".repeat(100_000));
        assert!(!nested.matches(&subject(&text, "1"), &RuleFields::default()));
    }

    proptest! {
        #[test]
        fn evaluation_never_panics(
            description in ".{0,200}",
            needle in ".{1,20}",
            pattern in "[a-z().*+?|\\[\\]^$\\\\]{1,30}",
            op in prop::sample::select(vec!["contains", "equals", "starts_with", "regex"]),
        ) {
            let value = if op == "regex" { pattern } else { needle };
            let specs = condition_specs(&json!([{"field": "description", "op": op, "value": value}]));
            if let Ok(specs) = specs {
                let actions = action_specs(&json!([{"set_notes": "n"}])).expect("actions");
                let rule = Rule::compile(Uuid::nil(), &specs, &actions, false).expect("compiles");
                let mut fields = RuleFields::default();
                let applied = run(&[rule], &subject(&description, "0"), &mut fields, UserSet::default());
                prop_assert_eq!(applied.notes, fields.notes.is_some());
            }
        }
    }
}
