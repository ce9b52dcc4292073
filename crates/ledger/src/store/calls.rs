//! The call list's facts (issue 25, section 4): the unanswered calls of a
//! case, the planned messages to one phone, and taking a "handled" mark
//! back. The rules are the domain's (`domain::call`); the rows are
//! operator actions, so the history stays append-only.

use chrono::{DateTime, Utc};

use super::{Result, Tx};
use crate::store::RowKind;
use crate::vals;

impl Tx<'_> {
    /// How many calls of intention `intention_id` went unanswered, and when
    /// the last one was recorded (`operator_actions` rows `call_outcome`,
    /// reason `no_answer`, done).
    pub fn call_tries(&self, intention_id: i64) -> Result<(u32, Option<DateTime<Utc>>)> {
        let row = self.db().row(
            "SELECT count(*), max(at) FROM operator_actions
             WHERE intention_id = ?1 AND action = 'call_outcome' AND reason = 'no_answer' AND result = 'done'",
            &vals![intention_id],
            |r| Ok((r.int(0)?, r.opt_time(1)?)),
        )?;
        let (count, last) = row.unwrap_or((0, None));
        Ok((u32::try_from(count).unwrap_or(u32::MAX), last))
    }

    /// The planned messages to `recipient`, oldest first.
    pub fn planned_to(&self, recipient: &str) -> Result<Vec<i64>> {
        Ok(self.db().rows(
            "SELECT id FROM intentions WHERE recipient = ?1 AND state = 'planned' ORDER BY id",
            &vals![recipient],
            |r| r.int(0),
        )?)
    }

    /// Removes a case's "handled" mark (a reopen); whether there was one.
    pub fn unmark_handled(&self, kind: RowKind, subject_id: i64) -> Result<bool> {
        let n = self.db().exec(
            "DELETE FROM attention_handled WHERE kind = ?1 AND subject_id = ?2",
            &vals![kind.as_str(), subject_id],
        )?;
        Ok(n > 0)
    }

    /// Whether any phone was ever reported wrong (a cheap guard before
    /// [`Tx::wrong_number`] is asked per message).
    pub fn any_wrong_number(&self) -> Result<bool> {
        let row = self.db().row(
            "SELECT 1 FROM operator_actions
             WHERE action = 'call_outcome' AND reason = 'wrong_number' AND result = 'done' LIMIT 1",
            &vals![],
            |r| r.int(0),
        )?;
        Ok(row.is_some())
    }

    /// Whether a call reported `recipient` as a wrong number: a done
    /// `call_outcome` of reason `wrong_number` on a message to it. A new
    /// phone for the patient is another recipient, so it is not covered.
    pub fn wrong_number(&self, recipient: &str) -> Result<bool> {
        let row = self.db().row(
            "SELECT 1 FROM operator_actions a JOIN intentions i ON i.id = a.intention_id
             WHERE a.action = 'call_outcome' AND a.reason = 'wrong_number' AND a.result = 'done'
               AND i.recipient = ?1 LIMIT 1",
            &vals![recipient],
            |r| r.int(0),
        )?;
        Ok(row.is_some())
    }

    /// The reasons of operator actions `ids` (the day's handled cases say
    /// why each was handled).
    pub fn action_reasons(&self, ids: &[i64]) -> Result<Vec<(i64, String)>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let reason = self
                .db()
                .row("SELECT reason FROM operator_actions WHERE id = ?1", &vals![*id], |r| {
                    r.text(0)
                })?;
            if let Some(reason) = reason {
                out.push((*id, reason));
            }
        }
        Ok(out)
    }
}
