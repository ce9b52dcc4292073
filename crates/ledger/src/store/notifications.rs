//! WhatsApp notifications other than message statuses (migration 0005):
//! template status and quality, marketing preferences, changed numbers,
//! Meta's user ids, and parked or refused channel events. Rows only: what
//! they mean is decided by the server (`unavez-server`'s cloud handler).

use chrono::{DateTime, Utc};

use super::{Result, Tx, ms};
use crate::domain::channel_event::EventStatus;
use crate::domain::commitment::CommitmentKind;
use crate::domain::state::IntentionState;
use crate::rules_sql::{BLOCKING_TEMPLATE_STATUSES, Sql, TECHNICIAN_EVENTS};
use crate::vals;

/// Templates Meta blocks, with how many intentions of each wait in review.
static BLOCKED_TEMPLATES: Sql = Sql::new(|| {
    format!(
        "SELECT t.name, t.language, t.status,
                    (SELECT count(*) FROM intentions i WHERE i.template = t.name AND i.state = 'review')
             FROM template_status t WHERE t.status IN {BLOCKING_TEMPLATE_STATUSES} ORDER BY t.name, t.language"
    )
});

/// The technicians' channel events, newest first; its status term is the
/// predicate of the partial index `channel_events_parked`.
static PARKED_EVENTS: Sql = Sql::new(|| {
    format!(
        "SELECT source, event_id, kind, status, coalesce(reason, ''), copies FROM channel_events
             WHERE status IN {TECHNICIAN_EVENTS} ORDER BY id DESC LIMIT ?1"
    )
});

/// A template's status as Meta reported it; `None` fields keep what was known.
#[derive(Debug, Clone, Default)]
pub struct TemplateStatus<'a> {
    pub name: &'a str,
    pub language: &'a str,
    pub status: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub category: Option<&'a str>,
    pub quality: Option<&'a str>,
}

/// A parked or refused channel event: `(source, event_id, kind, status,
/// reason code, copies)`.
pub type ParkedEventRow = (String, String, String, String, String, i64);

/// A commitment of a contact whose number changed that still has
/// something ahead for that number: a scheduled appointment still to
/// come, or an order with a notice still planned.
#[derive(Debug, Clone, PartialEq)]
pub struct MovingCommitment {
    pub id: i64,
    pub reference: String,
    pub kind: CommitmentKind,
    /// The appointment's time (orders have none).
    pub starts_at: Option<DateTime<Utc>>,
    pub service: Option<String>,
    pub location: Option<String>,
}

/// What a "user changed number" message found.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangedNumber {
    pub old_contact: i64,
    pub new_contact: i64,
    pub name: Option<String>,
    /// The old contact's upcoming scheduled appointments: their planned
    /// messages must move to the new number.
    pub upcoming: Vec<MovingCommitment>,
}

impl Tx<'_> {
    /// Records the last status, category or quality of a template.
    pub fn set_template_status(&self, t: &TemplateStatus<'_>, event_row: i64, at: DateTime<Utc>) -> Result<()> {
        // The stored row's columns are qualified: PostgreSQL calls a bare
        // name in `DO UPDATE` ambiguous with `excluded`'s.
        self.db().exec(
            "INSERT INTO template_status(name, language, status, reason, category, quality, channel_event_id, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT(name, language) DO UPDATE SET status = coalesce(excluded.status, template_status.status),
                 reason = CASE WHEN excluded.status IS NOT NULL THEN excluded.reason ELSE template_status.reason END,
                 category = coalesce(excluded.category, template_status.category),
                 quality = coalesce(excluded.quality, template_status.quality),
                 channel_event_id = excluded.channel_event_id, updated_at = excluded.updated_at",
            &vals![t.name, t.language, t.status, t.reason, t.category, t.quality, event_row, ms(at)],
        )?;
        Ok(())
    }

    /// `(name, language, status)` of templates Meta has rejected, paused or
    /// disabled, with how many intentions of that name wait in `review`.
    pub fn blocked_templates(&self) -> Result<Vec<(String, String, String, i64)>> {
        Ok(self.db().rows(&BLOCKED_TEMPLATES, &[], |r| {
            Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.int(3)?))
        })?)
    }

    /// The planned intentions of a template (all languages), by id: what a
    /// blocked template holds (`unavez_core::domain::webhook::hold_template`).
    pub fn planned_of_template(&self, name: &str) -> Result<Vec<i64>> {
        Ok(self.db().rows(
            "SELECT id FROM intentions WHERE template = ?1 AND state = ?2 ORDER BY id",
            &vals![name, IntentionState::Planned.to_string()],
            |r| r.int(0),
        )?)
    }

    /// A marketing stop or resume the user asked WhatsApp for. Marketing
    /// only: transactional consent is never touched. `false` when the
    /// phone is not a contact yet (a stop still creates it, so it holds).
    pub fn set_marketing_preference(
        &self,
        phone: &str,
        stop: bool,
        message_at: DateTime<Utc>,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let id = if stop {
            Some(self.upsert_contact(phone, None, None, at)?)
        } else {
            self.contact_by_phone(phone)?.map(|c| c.id)
        };
        let Some(id) = id else {
            return Ok(false);
        };
        self.db().exec(
            "UPDATE contacts SET opt_out_marketing_at = CASE WHEN CAST(?2 AS BIGINT) <> 0
                     THEN coalesce(opt_out_marketing_at, CAST(?3 AS BIGINT)) ELSE NULL END,
                 updated_at = ?4 WHERE id = ?1",
            &vals![id, stop, ms(message_at), ms(at)],
        )?;
        Ok(true)
    }

    /// Remembers Meta's user id of a phone (from `contacts[]`).
    pub fn remember_user_id(&self, phone: &str, user_id: &str, at: DateTime<Utc>) -> Result<()> {
        self.db().exec(
            "UPDATE contacts SET wa_user_id = ?2, updated_at = ?3 WHERE phone = ?1 AND wa_user_id IS DISTINCT FROM ?2",
            &vals![phone, user_id, ms(at)],
        )?;
        Ok(())
    }

    /// The phone of the contact Meta knows by `user_id`.
    pub fn phone_by_user_id(&self, user_id: &str) -> Result<Option<String>> {
        Ok(self.db().row(
            "SELECT phone FROM contacts WHERE wa_user_id = ?1 ORDER BY updated_at DESC LIMIT 1",
            &vals![user_id],
            |r| r.text(0),
        )?)
    }

    /// The user moved from `old` to `new`: the new number becomes a contact
    /// carrying the old one's opt-outs, user id, name and language (but not
    /// its last inbound time: a number change is not the user writing).
    /// `None` when the old number is unknown.
    pub fn change_number(&self, old: &str, new: &str, at: DateTime<Utc>) -> Result<Option<ChangedNumber>> {
        let Some(old_c) = self.contact_by_phone(old)? else {
            return Ok(None);
        };
        let new_id = self.upsert_contact(new, old_c.name.as_deref(), old_c.language.as_deref(), at)?;
        self.db().exec(
            "UPDATE contacts SET
                 opt_out_marketing_at = coalesce(opt_out_marketing_at, (SELECT opt_out_marketing_at FROM contacts WHERE id = ?2)),
                 opt_out_transactional_at = coalesce(opt_out_transactional_at, (SELECT opt_out_transactional_at FROM contacts WHERE id = ?2)),
                 wa_user_id = coalesce(wa_user_id, (SELECT wa_user_id FROM contacts WHERE id = ?2)),
                 updated_at = ?3
             WHERE id = ?1",
            &vals![new_id, old_c.id, ms(at)],
        )?;
        // `starts_at IS NULL` sorts false before true on PostgreSQL as 0
        // before 1 on SQLite: orders without a time come last on both.
        let upcoming = self.db().rows(
            "SELECT c.id, c.ref, c.kind, c.starts_at, c.service, c.location FROM commitments c
             WHERE c.contact_id = ?1
               AND ((c.kind = 'appointment' AND c.status = 'scheduled' AND c.starts_at >= ?2)
                 OR (c.kind = 'order' AND EXISTS (SELECT 1 FROM intentions i
                                                  WHERE i.commitment_id = c.id AND i.state = 'planned')))
             ORDER BY c.starts_at IS NULL, c.starts_at, c.id",
            &vals![old_c.id, ms(at)],
            |r| {
                Ok(MovingCommitment {
                    id: r.int(0)?,
                    reference: r.text(1)?,
                    kind: CommitmentKind::parse(&r.text(2)?).unwrap_or(CommitmentKind::Appointment),
                    starts_at: r.opt_time(3)?,
                    service: r.opt_text(4)?,
                    location: r.opt_text(5)?,
                })
            },
        )?;
        Ok(Some(ChangedNumber {
            old_contact: old_c.id,
            new_contact: new_id,
            name: old_c.name,
            upcoming,
        }))
    }

    /// Parks (`parked`) or refuses (`refused`) a stored channel event with
    /// a reason code; it is applied to nothing.
    pub fn set_channel_event_reason(&self, row: i64, status: EventStatus, reason: &str) -> Result<()> {
        self.db().exec(
            "UPDATE channel_events SET status = ?2, reason = ?3 WHERE id = ?1",
            &vals![row, status.as_str(), reason],
        )?;
        Ok(())
    }

    /// Channel events parked or refused, newest first, for the console's
    /// attention list.
    pub fn parked_channel_events(&self, limit: u32) -> Result<Vec<ParkedEventRow>> {
        Ok(self.db().rows(&PARKED_EVENTS, &vals![limit], |r| {
            Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.text(3)?, r.text(4)?, r.int(5)?))
        })?)
    }
}
