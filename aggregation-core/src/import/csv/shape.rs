//! Files without a header row: which column holds what, told by the shapes of the cells.
//!
//! A file whose first record is already a transaction (`6/12/15,Coffee,-3.50,debit`) names no
//! column. Its columns are told by what every row holds in them: the first column of dates is
//! the booking date, the column of amounts the amount (one with decimals or signs when there
//! are several), a column of `debit`/`credit` words the direction, and the first column of
//! text the description. When the shapes do not say which column is the amount, nothing is
//! guessed.

use super::text::Record;
use super::{Columns, headers, values};

/// The fewest rows whose shapes are trusted.
const MIN_ROWS: usize = 2;

/// What every row holds in one column.
#[derive(Debug, Clone, Copy, Default)]
struct ColumnShape {
    filled: usize,
    dates: usize,
    amounts: usize,
    /// Amounts written with a decimal separator or a sign (`-3.50`, `1,000.00`).
    fractional: usize,
    directions: usize,
    texts: usize,
}

impl ColumnShape {
    fn add(&mut self, cell: &str) {
        let cell = values::clean(cell);
        if cell.is_empty() {
            return;
        }
        self.filled += 1;
        if values::date_parts(cell).is_some() {
            self.dates += 1;
        } else if let Some(raw) = values::raw_amount(cell) {
            self.amounts += 1;
            if raw.negative || raw.body.contains(['.', ',']) || cell.starts_with('+') {
                self.fractional += 1;
            }
        } else if headers::direction_is_out(cell).is_some() {
            self.directions += 1;
        } else if cell.chars().any(char::is_alphabetic) {
            self.texts += 1;
        }
    }
}

/// The columns of a headerless file, from the records at `skip` on, and a note saying what was
/// taken for what; `None` when the first record is not a transaction or the shapes leave a
/// doubt.
pub(super) fn headerless_columns(records: &[Record], skip: usize) -> Option<(Columns, String)> {
    let rows: Vec<&Record> = records
        .iter()
        .skip(skip)
        .filter(|r| !r.is_blank())
        .collect();
    if rows.len() < MIN_ROWS {
        return None;
    }
    let width = rows.iter().map(|r| r.fields.len()).max()?;
    if width < 2 || rows.iter().any(|r| r.fields.len() < 2) {
        return None;
    }
    let mut shapes = vec![ColumnShape::default(); width];
    for row in &rows {
        for (shape, cell) in shapes.iter_mut().zip(&row.fields) {
            shape.add(cell);
        }
    }
    let count = rows.len();
    let date = shapes.iter().position(|s| s.dates == count)?;
    let amounts: Vec<usize> = (0..width)
        .filter(|&i| i != date && shapes[i].amounts == count)
        .collect();
    let amount = match amounts.as_slice() {
        [] => return None,
        [only] => *only,
        several => {
            let fractional: Vec<usize> = several
                .iter()
                .copied()
                .filter(|&i| shapes[i].fractional > 0)
                .collect();
            // Amount then running balance is the common layout: the first with decimals.
            *fractional.first()?
        }
    };
    let direction = (0..width).find(|&i| {
        i != date
            && i != amount
            && shapes[i].directions > 0
            && shapes[i].directions == shapes[i].filled
    });
    let description = (0..width).find(|&i| {
        i != date
            && i != amount
            && Some(i) != direction
            && shapes[i].texts > 0
            && shapes[i].texts == shapes[i].filled
    });
    let mut note = format!(
        "the file has no header row: column {date} is read as the date and column {amount} as \
         the amount"
    );
    if let Some(direction) = direction {
        note.push_str(&format!(", column {direction} as debit/credit"));
    }
    if let Some(description) = description {
        note.push_str(&format!(", column {description} as the description"));
    }
    note.push_str("; give a mapping to read it otherwise");
    let columns = Columns {
        date,
        date_name: format!("column {date}"),
        amount: Some(amount),
        amount_name: format!("column {amount}"),
        direction,
        description,
        ..Columns::default()
    };
    Some((columns, note))
}
