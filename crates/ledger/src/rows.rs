//! Row mapping shared by both backends: the columns of an intention or a
//! contact come back in the same order and the same units (milliseconds,
//! 0/1 flags) from SQLite and PostgreSQL, so one function turns them into
//! the typed rows the application reads.

use chrono::{DateTime, Utc};

use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::store::{ContactRow, IntentionRow, from_ms};

/// Reading column `i` of a result row, whatever the backend. Errors are
/// the text of what was wrong; each backend wraps it in its own error.
pub trait Cols {
    fn int(&self, i: usize) -> Result<i64, String>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>, String>;
    fn text(&self, i: usize) -> Result<String, String>;
    fn opt_text(&self, i: usize) -> Result<Option<String>, String>;

    fn flag(&self, i: usize) -> Result<bool, String> {
        Ok(self.int(i)? != 0)
    }
    fn time(&self, i: usize) -> Result<DateTime<Utc>, String> {
        Ok(from_ms(self.int(i)?))
    }
    fn opt_time(&self, i: usize) -> Result<Option<DateTime<Utc>>, String> {
        Ok(self.opt_int(i)?.map(from_ms))
    }
    fn state(&self, i: usize) -> Result<IntentionState, String> {
        self.text(i)?
            .parse()
            .map_err(|e: crate::domain::state::UnknownState| e.to_string())
    }
}

impl Cols for postgres::Row {
    /// Any integer width, or a boolean (`EXISTS`, comparisons) as 0/1.
    fn int(&self, i: usize) -> Result<i64, String> {
        self.opt_int(i)?
            .ok_or_else(|| format!("column {i}: NULL where a value was expected"))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, String> {
        let err = |e: postgres::Error| format!("column {i}: {e}");
        let ty = self
            .columns()
            .get(i)
            .map(|c| c.type_().clone())
            .ok_or(format!("no column {i}"))?;
        use postgres::types::Type;
        Ok(match ty {
            Type::INT8 => self.try_get::<_, Option<i64>>(i).map_err(err)?,
            Type::INT4 => self.try_get::<_, Option<i32>>(i).map_err(err)?.map(i64::from),
            Type::INT2 => self.try_get::<_, Option<i16>>(i).map_err(err)?.map(i64::from),
            Type::BOOL => self.try_get::<_, Option<bool>>(i).map_err(err)?.map(i64::from),
            other => return Err(format!("column {i}: {other} where an integer was expected")),
        })
    }
    fn text(&self, i: usize) -> Result<String, String> {
        self.try_get(i).map_err(|e| format!("column {i}: {e}"))
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, String> {
        self.try_get(i).map_err(|e| format!("column {i}: {e}"))
    }
}

impl Cols for rusqlite::Row<'_> {
    fn int(&self, i: usize) -> Result<i64, String> {
        self.get(i).map_err(|e| format!("column {i}: {e}"))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>, String> {
        self.get(i).map_err(|e| format!("column {i}: {e}"))
    }
    fn text(&self, i: usize) -> Result<String, String> {
        self.get(i).map_err(|e| format!("column {i}: {e}"))
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>, String> {
        self.get(i).map_err(|e| format!("column {i}: {e}"))
    }
}

/// The columns [`intention_row`] reads, `i` the intention and `c` its
/// commitment.
pub const INTENTION_COLS: &str = "i.id, i.key, i.commitment_id, c.ref, i.commitment_version, i.purpose,
    i.recipient, i.category, i.channel, i.template, i.language, i.parameters, i.body, i.fingerprint,
    i.correlation_id, i.asks_confirmation, i.due_at, i.expires_at, i.day, i.state, i.state_reason,
    i.state_changed_at, i.related_id, i.created_by, i.authorized_by, i.reason, i.lease_owner, i.lease_until,
    i.attempt_count, i.next_attempt_at, i.provider_command_id, i.provider_message_id, i.created_at";

/// How many columns [`INTENTION_COLS`] has.
pub const INTENTION_WIDTH: usize = 33;

pub fn intention_row<R: Cols + ?Sized>(r: &R) -> Result<IntentionRow, String> {
    Ok(IntentionRow {
        id: r.int(0)?,
        key: r.text(1)?,
        commitment_id: r.int(2)?,
        commitment_ref: r.text(3)?,
        commitment_version: r.int(4)?,
        purpose: r.text(5)?,
        recipient: r.text(6)?,
        category: r.text(7)?,
        channel: r.text(8)?,
        template: r.text(9)?,
        language: r.text(10)?,
        parameters: serde_json::from_str(&r.text(11)?).map_err(|e| format!("column 11: {e}"))?,
        body: r.text(12)?,
        fingerprint: r.text(13)?,
        correlation_id: r.text(14)?,
        asks_confirmation: r.flag(15)?,
        due_at: r.time(16)?,
        expires_at: r.opt_time(17)?,
        day: OperatingDay::parse(&r.text(18)?).map_err(|e| format!("column 18: {e}"))?,
        state: r.state(19)?,
        state_reason: r.opt_text(20)?,
        state_changed_at: r.time(21)?,
        related_id: r.opt_int(22)?,
        created_by: r.text(23)?,
        authorized_by: r.opt_text(24)?,
        reason: r.opt_text(25)?,
        lease_owner: r.opt_text(26)?,
        lease_until: r.opt_time(27)?,
        attempt_count: r.int(28)?,
        next_attempt_at: r.opt_time(29)?,
        provider_command_id: r.opt_text(30)?,
        provider_message_id: r.opt_text(31)?,
        created_at: r.time(32)?,
    })
}

/// A contact from `id, phone, name, language, consent_marketing,
/// opt_out_marketing_at, opt_out_transactional_at, last_inbound_at` at
/// column `at`.
pub fn contact_row<R: Cols + ?Sized>(r: &R, at: usize) -> Result<ContactRow, String> {
    Ok(ContactRow {
        id: r.int(at)?,
        phone: r.text(at + 1)?,
        name: r.opt_text(at + 2)?,
        language: r.opt_text(at + 3)?,
        consent_marketing: r.flag(at + 4)?,
        opt_out_marketing_at: r.opt_time(at + 5)?,
        opt_out_transactional_at: r.opt_time(at + 6)?,
        last_inbound_at: r.opt_time(at + 7)?,
    })
}
