//! iCalendar agendas. Being written: see the import helper.

use super::{Row, RowError, row_errors};
use crate::domain::event::FieldError;

pub fn parse(_text: &str, file: &str) -> (Vec<Row>, Vec<RowError>) {
    (
        vec![],
        row_errors(
            file,
            1,
            "",
            vec![FieldError {
                field: "file".into(),
                reason: "iCalendar import is not available yet".into(),
            }],
        ),
    )
}
