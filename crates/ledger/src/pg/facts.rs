//! What the dispatcher's decisions read, on PostgreSQL: the same facts as
//! the SQLite `LedgerTx` methods of the same names, one query per batch.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{PgError, PgTx, Result};
use crate::api::{ClaimFacts, PlannedRow};
use crate::domain::commitment::CommitmentKind;
use crate::domain::finish::{FinishFacts, SequenceFacts};
use crate::domain::validity::CommitmentFacts;
use crate::rows::{Cols, INTENTION_COLS, INTENTION_WIDTH, contact_row, intention_row};
use crate::store::{IntentionRow, ms};

/// Attempts that may have reached the channel, started since `$1`.
const COUNTED: &str = "a.started_at >= $1 AND a.outcome NOT IN ('retry', 'not_sent')";

fn corrupt(table: &'static str) -> impl Fn(String) -> PgError {
    move |detail| PgError::Corrupt { table, detail }
}

impl PgTx<'_> {
    /// One intention by id (an error when it does not exist).
    pub fn intention(&self, id: i64) -> Result<IntentionRow> {
        let row = self.tx.borrow_mut().query_opt(
            &format!(
                "SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE i.id = $1"
            ),
            &[&id],
        )?;
        let row = row.ok_or(PgError::NoIntention(id))?;
        intention_row(&row).map_err(corrupt("intentions"))
    }

    /// Everything validity reads about these intentions, in the order given.
    pub fn claim_facts(&self, ids: &[i64], day_start: Option<DateTime<Utc>>) -> Result<Vec<ClaimFacts>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {INTENTION_COLS}, c.kind, (c.status = 'cancelled')::int::int8, c.version, c.starts_at, c.confirmed_at,
                    c.manual_contact_at, k.id, k.phone, k.name, k.language, k.consent_marketing,
                    k.opt_out_marketing_at, k.opt_out_transactional_at, k.last_inbound_at,
                    (EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = i.id
                             AND a.outcome IN ('accepted', 'ambiguous')))::int::int8,
                    CASE WHEN $1::int8 IS NULL THEN 0 ELSE (SELECT count(*) FROM intentions o
                        WHERE o.recipient = i.recipient AND o.id <> i.id
                          AND EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = o.id AND {COUNTED})) END,
                    CASE WHEN $1::int8 IS NULL THEN 0 ELSE
                        (EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = i.id AND {COUNTED}))::int::int8 END
             FROM intentions i JOIN commitments c ON c.id = i.commitment_id
             LEFT JOIN contacts k ON k.id = coalesce(c.contact_id, (SELECT id FROM contacts WHERE phone = i.recipient))
             WHERE i.id = ANY($2)"
        );
        let start = day_start.map(ms);
        let rows = self.tx.borrow_mut().query(&sql, &[&start, &ids])?;
        let base = INTENTION_WIDTH;
        let mut by_id = HashMap::with_capacity(rows.len());
        for r in &rows {
            let fact = (|| -> std::result::Result<ClaimFacts, String> {
                let kind = r.text(base)?;
                Ok(ClaimFacts {
                    intention: intention_row(r)?,
                    commitment: CommitmentFacts {
                        kind: CommitmentKind::parse(&kind).unwrap_or(CommitmentKind::Appointment),
                        cancelled: r.flag(base + 1)?,
                        version: r.int(base + 2)?,
                        starts_at: r.opt_time(base + 3)?,
                        confirmed_at: r.opt_time(base + 4)?,
                        manual_contact_at: r.opt_time(base + 5)?,
                    },
                    contact: match r.opt_int(base + 6)? {
                        Some(_) => Some(contact_row(r, base + 6)?),
                        None => None,
                    },
                    acknowledged: r.flag(base + 14)?,
                    sent_today: u32::try_from(r.int(base + 15)?).unwrap_or(u32::MAX),
                    counted_today: r.flag(base + 16)?,
                })
            })()
            .map_err(corrupt("intentions"))?;
            by_id.insert(fact.intention.id, fact);
        }
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    /// What finishing these attempts needs, in the order given.
    pub fn finish_facts(&self, attempt_ids: &[i64]) -> Result<Vec<FinishFacts>> {
        if attempt_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.tx.borrow_mut().query(
            "SELECT a.id, a.intention_id, a.n, a.commitment_version_checked, (a.ended_at IS NOT NULL)::int::int8,
                    i.state, i.attempt_count, i.commitment_version, c.version
             FROM attempts a JOIN intentions i ON i.id = a.intention_id JOIN commitments c ON c.id = i.commitment_id
             WHERE a.id = ANY($1)",
            &[&attempt_ids],
        )?;
        let mut by_id = HashMap::with_capacity(rows.len());
        for r in &rows {
            let f = (|| -> std::result::Result<FinishFacts, String> {
                Ok(FinishFacts {
                    attempt_id: r.int(0)?,
                    intention_id: r.int(1)?,
                    n: r.int(2)?,
                    version_checked: r.int(3)?,
                    attempt_ended: r.flag(4)?,
                    state: r.state(5)?,
                    attempt_count: r.int(6)?,
                    intention_version: r.int(7)?,
                    current_version: r.int(8)?,
                })
            })()
            .map_err(corrupt("attempts"))?;
            by_id.insert(f.attempt_id, f);
        }
        attempt_ids
            .iter()
            .map(|id| by_id.remove(id).ok_or(PgError::NoAttempt(*id)))
            .collect()
    }

    /// What the version-sequence check reads for one intention.
    pub fn sequence_facts(&self, intention_id: i64, notice_purposes: &[&str]) -> Result<SequenceFacts> {
        let mut tx = self.tx.borrow_mut();
        let head = tx
            .query_opt(
                "SELECT i.key, i.state, i.commitment_version, i.commitment_id, c.kind, c.version,
                        (SELECT ARRAY[n, commitment_version_checked] FROM attempts
                         WHERE intention_id = i.id AND outcome NOT IN ('retry', 'not_sent') ORDER BY n LIMIT 1)
                 FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE i.id = $1",
                &[&intention_id],
            )?
            .ok_or(PgError::NoIntention(intention_id))?;
        let commitment_id: i64 = head.get(3);
        let current: i64 = head.get(5);
        let purposes: Vec<&str> = notice_purposes.to_vec();
        let notice = tx.query_opt(
            "SELECT key, state FROM intentions WHERE commitment_id = $1 AND commitment_version = $2
               AND purpose = ANY($3) ORDER BY id LIMIT 1",
            &[&commitment_id, &current, &purposes],
        )?;
        let producer: Option<Vec<i64>> = head.get(6);
        (|| -> std::result::Result<SequenceFacts, String> {
            Ok(SequenceFacts {
                intention_id,
                key: head.text(0)?,
                state: head.state(1)?,
                intention_version: head.int(2)?,
                appointment: head.text(4)? == "appointment",
                current_version: current,
                producer: producer.map(|p| (p[0], p[1])),
                notice: match &notice {
                    Some(n) => Some((n.text(0)?, n.state(1)?)),
                    None => None,
                },
            })
        })()
        .map_err(corrupt("intentions"))
    }

    /// The still-planned intentions of a commitment, by id.
    pub fn planned_of_commitment(&self, commitment_id: i64) -> Result<Vec<PlannedRow>> {
        let rows = self.tx.borrow_mut().query(
            "SELECT id, key, commitment_version, purpose, asks_confirmation FROM intentions
             WHERE commitment_id = $1 AND state = 'planned' ORDER BY id",
            &[&commitment_id],
        )?;
        rows.iter()
            .map(|r| {
                Ok(PlannedRow {
                    id: r.int(0)?,
                    key: r.text(1)?,
                    commitment_version: r.int(2)?,
                    purpose: r.text(3)?,
                    asks_confirmation: r.flag(4)?,
                })
            })
            .collect::<std::result::Result<_, String>>()
            .map_err(corrupt("intentions"))
    }
}
