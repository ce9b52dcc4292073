//! Inbound customer messages as facts about contacts and commitments: the
//! 24-hour service window, opt-outs, reschedule requests and conversation
//! signals. The confirmation path goes through `ingest` (a booking event),
//! not through here, so the planner closes confirm reminders as usual.

use chrono::{DateTime, Utc};

use super::{Result, Tx, ms};
use crate::vals;

/// A commitment signal: `(kind, text, source_event)`.
pub type SignalRow = (String, Option<String>, Option<String>);

impl Tx<'_> {
    /// The contact for an inbound phone, created if unknown (an opt-out
    /// from a number we have not messaged yet must still hold later).
    pub fn inbound_contact(&self, phone: &str, at: DateTime<Utc>) -> Result<i64> {
        self.upsert_contact(phone, None, None, at)
    }

    /// Opens the 24-hour service window; an older message never moves the
    /// last inbound time backwards.
    pub fn touch_inbound(&self, contact_id: i64, message_at: DateTime<Utc>, at: DateTime<Utc>) -> Result<()> {
        // Scalar max() is SQLite's only (GREATEST PostgreSQL's): a CASE both read.
        self.db().exec(
            "UPDATE contacts SET last_inbound_at = CASE WHEN coalesce(last_inbound_at, 0) > CAST(?2 AS BIGINT)
                 THEN coalesce(last_inbound_at, 0) ELSE CAST(?2 AS BIGINT) END, updated_at = ?3
             WHERE id = ?1",
            &vals![contact_id, ms(message_at), ms(at)],
        )?;
        Ok(())
    }

    /// Records an opt-out. Marketing always; transactional too when
    /// `transactional`. The first opt-out time is kept, and nothing in the
    /// booking path ever clears these columns.
    pub fn opt_out(
        &self,
        contact_id: i64,
        transactional: bool,
        message_at: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.db().exec(
            "UPDATE contacts SET opt_out_marketing_at = coalesce(opt_out_marketing_at, CAST(?2 AS BIGINT)),
                 opt_out_transactional_at = CASE WHEN CAST(?3 AS BIGINT) <> 0
                                                 THEN coalesce(opt_out_transactional_at, CAST(?2 AS BIGINT))
                                                 ELSE opt_out_transactional_at END,
                 updated_at = ?4
             WHERE id = ?1",
            &vals![contact_id, ms(message_at), transactional, ms(at)],
        )?;
        Ok(())
    }

    /// The commitment a reply is about: the one whose message it quotes
    /// (`context.id` = a wamid we sent), else the contact's nearest upcoming
    /// scheduled appointment, else its latest commitment. Returns
    /// `(commitment id, ref, is an upcoming appointment)`.
    pub fn reply_commitment(
        &self,
        contact_id: i64,
        quoted_message_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<(i64, String, bool)>> {
        if let Some(mid) = quoted_message_id {
            // The comparison is a BOOL on PostgreSQL, 0/1 on SQLite; `flag`
            // reads both.
            let quoted = self.db().row(
                "SELECT c.id, c.ref, (c.kind = 'appointment' AND c.status = 'scheduled' AND c.starts_at >= ?2)
                 FROM intentions i JOIN commitments c ON c.id = i.commitment_id
                 WHERE i.provider_message_id = ?1
                    OR i.id = (SELECT intention_id FROM attempts WHERE message_id = ?1 LIMIT 1)
                 ORDER BY i.id LIMIT 1",
                &vals![mid, ms(now)],
                |r| Ok((r.int(0)?, r.text(1)?, r.flag(2)?)),
            )?;
            if quoted.is_some() {
                return Ok(quoted);
            }
        }
        let upcoming = self.db().row(
            "SELECT id, ref FROM commitments WHERE contact_id = ?1 AND kind = 'appointment'
               AND status = 'scheduled' AND starts_at >= ?2 ORDER BY starts_at, id LIMIT 1",
            &vals![contact_id, ms(now)],
            |r| Ok((r.int(0)?, r.text(1)?)),
        )?;
        if let Some((id, r)) = upcoming {
            return Ok(Some((id, r, true)));
        }
        Ok(self.db().row(
            "SELECT id, ref FROM commitments WHERE contact_id = ?1 ORDER BY updated_at DESC, id DESC LIMIT 1",
            &vals![contact_id],
            |r| Ok((r.int(0)?, r.text(1)?, false)),
        )?)
    }

    /// A customer asked to move the appointment: it lands in the
    /// console's attention list (`reschedule_requested_at`).
    pub fn request_reschedule(
        &self,
        commitment_id: i64,
        text: &str,
        source_event: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.db().exec(
            "UPDATE commitments SET reschedule_requested_at = ?2, updated_at = ?2 WHERE id = ?1",
            &vals![commitment_id, ms(at)],
        )?;
        self.add_commitment_signal(commitment_id, "reschedule_requested", Some(text), source_event, at)
    }

    /// Appends a fact about a commitment (`conversation`, `confirmed_by_reply`,
    /// `opt_out`, `reschedule_requested`).
    pub fn add_commitment_signal(
        &self,
        commitment_id: i64,
        kind: &str,
        text: Option<&str>,
        source_event: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.db().exec(
            "INSERT INTO commitment_signals(commitment_id, kind, text, source_event, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            &vals![commitment_id, kind, text, source_event, ms(at)],
        )?;
        Ok(())
    }

    /// A commitment's signals, oldest first.
    pub fn commitment_signals(&self, commitment_id: i64) -> Result<Vec<SignalRow>> {
        Ok(self.db().rows(
            "SELECT kind, text, source_event FROM commitment_signals WHERE commitment_id = ?1 ORDER BY id",
            &vals![commitment_id],
            |r| Ok((r.text(0)?, r.opt_text(1)?, r.opt_text(2)?)),
        )?)
    }
}
