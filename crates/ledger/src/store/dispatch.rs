//! The dispatcher's rows: due intentions with the facts validity reads (one
//! query for a whole batch), attempts written before the channel is
//! contacted (with the claim's lease), when an intention is due again, and
//! the facts the pre-send check compares. What to do with them is decided
//! in `unavez-app` (`dispatch::claim`, `dispatch::presend`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params, params_from_iter};

use super::intents::{INTENTION_COLS, intention_row};
use super::ledger::contact_row_from;
use super::{Result, Tx, from_ms, ms};
use crate::api::{ClaimFacts, ClaimScope, NewAttempt};
use crate::domain::commitment::CommitmentKind;
use crate::domain::state::IntentionState;
use crate::domain::validity::CommitmentFacts;

/// What the pre-send check reads for one attempt, in one query for every
/// attempt about to leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresendFacts {
    pub attempt_id: i64,
    pub n: i64,
    pub attempt_open: bool,
    /// The commitment version the attempt's validity check read.
    pub version_checked: i64,
    pub state: IntentionState,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub purpose: String,
    pub commitment_version: i64,
    pub commitment_cancelled: bool,
}

/// `?` marks for an `IN (…)` list of `n` values.
pub(super) fn marks(n: usize) -> String {
    vec!["?"; n].join(",")
}

const DUE: &str = "i.state = 'planned' AND i.due_at <= ?1 AND (i.next_attempt_at IS NULL OR i.next_attempt_at <= ?1)";

/// Attempts that may have reached the channel (every outcome but `retry`
/// and `not_sent`) started since `?1`.
const COUNTED: &str = "a.started_at >= ?1 AND a.outcome NOT IN ('retry', 'not_sent')";

impl Tx<'_> {
    pub fn due_ids(&self, scope: &ClaimScope, limit: u32, now: DateTime<Utc>) -> Result<Vec<i64>> {
        Ok(match scope {
            ClaimScope::Due => self
                .conn()?
                .prepare_cached(&format!(
                    "SELECT i.id FROM intentions i WHERE {DUE} ORDER BY i.due_at, i.id LIMIT ?2"
                ))?
                .query_map(params![ms(now), limit], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?,
            ClaimScope::Ids(wanted) => {
                let mut stmt = self
                    .conn()?
                    .prepare_cached(&format!("SELECT i.id FROM intentions i WHERE i.id = ?2 AND {DUE}"))?;
                let mut out = Vec::new();
                for id in wanted {
                    if out.len() >= limit as usize {
                        break;
                    }
                    if let Some(id) = stmt.query_row(params![ms(now), id], |r| r.get(0)).optional()? {
                        out.push(id);
                    }
                }
                out
            }
        })
    }

    pub fn claim_facts(&self, ids: &[i64], day_start: Option<DateTime<Utc>>) -> Result<Vec<ClaimFacts>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // The contact is the commitment's, else the one with the recipient's
        // phone (a resend to a number the commitment does not name).
        let sql = format!(
            "SELECT {INTENTION_COLS}, c.kind, c.status = 'cancelled', c.version, c.starts_at, c.confirmed_at,
                    c.manual_contact_at, k.id, k.phone, k.name, k.language, k.consent_marketing,
                    k.opt_out_marketing_at, k.opt_out_transactional_at, k.last_inbound_at,
                    EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = i.id AND a.outcome IN ('accepted', 'ambiguous')),
                    CASE WHEN ?1 IS NULL THEN 0 ELSE (SELECT count(*) FROM intentions o
                        WHERE o.recipient = i.recipient AND o.id != i.id
                          AND EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = o.id AND {COUNTED})) END,
                    CASE WHEN ?1 IS NULL THEN 0 ELSE
                        EXISTS (SELECT 1 FROM attempts a WHERE a.intention_id = i.id AND {COUNTED}) END
             FROM intentions i JOIN commitments c ON c.id = i.commitment_id
             LEFT JOIN contacts k ON k.id = coalesce(c.contact_id, (SELECT id FROM contacts WHERE phone = i.recipient))
             WHERE i.id IN ({})",
            marks(ids.len())
        );
        let start = day_start.map(ms);
        let params = std::iter::once(rusqlite::types::Value::from(start))
            .chain(ids.iter().map(|id| rusqlite::types::Value::Integer(*id)));
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let mut by_id: HashMap<i64, ClaimFacts> = stmt
            .query_map(params_from_iter(params), |r| {
                let intention = intention_row(r)?;
                let base = 33;
                let kind: String = r.get(base)?;
                let contact = match r.get::<_, Option<i64>>(base + 6)? {
                    Some(_) => Some(contact_row_from(r, base + 6)?),
                    None => None,
                };
                Ok(ClaimFacts {
                    commitment: CommitmentFacts {
                        kind: CommitmentKind::parse(&kind).unwrap_or(CommitmentKind::Appointment),
                        cancelled: r.get(base + 1)?,
                        version: r.get(base + 2)?,
                        starts_at: r.get::<_, Option<i64>>(base + 3)?.map(from_ms),
                        confirmed_at: r.get::<_, Option<i64>>(base + 4)?.map(from_ms),
                        manual_contact_at: r.get::<_, Option<i64>>(base + 5)?.map(from_ms),
                    },
                    contact,
                    acknowledged: r.get(base + 14)?,
                    sent_today: r.get(base + 15)?,
                    counted_today: r.get(base + 16)?,
                    intention,
                })
            })?
            .map(|f| f.map(|f| (f.intention.id, f)))
            .collect::<rusqlite::Result<_>>()?;
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    pub fn start_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>> {
        let mut lease = self.conn()?.prepare_cached(
            "UPDATE intentions SET attempt_count = ?2, updated_at = ?3,
                 lease_owner = coalesce(?4, lease_owner), lease_until = coalesce(?5, lease_until),
                 next_attempt_at = CASE WHEN ?4 IS NULL THEN next_attempt_at ELSE NULL END
             WHERE id = ?1",
        )?;
        let mut insert = self.conn()?.prepare_cached(
            "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        )?;
        let mut ids = Vec::with_capacity(rows.len());
        for a in rows {
            let (owner, until) = match &a.lease {
                Some((o, u)) => (Some(o.as_str()), Some(ms(*u))),
                None => (None, None),
            };
            lease.execute(params![a.intention_id, a.n, ms(a.at), owner, until])?;
            ids.push(insert.query_row(
                params![a.intention_id, a.n, a.worker, a.channel, ms(a.at), a.version_checked],
                |r| r.get(0),
            )?);
        }
        Ok(ids)
    }

    pub fn set_next_attempt(&self, rows: &[(i64, Option<DateTime<Utc>>)], at: DateTime<Utc>) -> Result<()> {
        let mut stmt = self
            .conn()?
            .prepare_cached("UPDATE intentions SET next_attempt_at = ?2, updated_at = ?3 WHERE id = ?1")?;
        for (id, next) in rows {
            stmt.execute(params![id, next.map(ms), ms(at)])?;
        }
        Ok(())
    }

    /// The facts the pre-send check compares, for every attempt in
    /// `attempt_ids` (missing ids are simply absent). Read-only: run it on
    /// a reader connection, so it never queues behind the writer.
    pub fn presend_facts(&self, attempt_ids: &[i64]) -> Result<Vec<PresendFacts>> {
        if attempt_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn()?.prepare(&format!(
            "SELECT a.id, a.n, a.ended_at IS NULL, a.commitment_version_checked, i.state, i.lease_owner,
                    i.lease_until, i.purpose, c.version, c.status = 'cancelled'
             FROM attempts a JOIN intentions i ON i.id = a.intention_id JOIN commitments c ON c.id = i.commitment_id
             WHERE a.id IN ({})",
            marks(attempt_ids.len())
        ))?;
        let rows = stmt
            .query_map(params_from_iter(attempt_ids), |r| {
                let state: String = r.get(4)?;
                Ok(PresendFacts {
                    attempt_id: r.get(0)?,
                    n: r.get(1)?,
                    attempt_open: r.get(2)?,
                    version_checked: r.get(3)?,
                    state: state.parse().map_err(|e: crate::domain::state::UnknownState| {
                        rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.to_string().into())
                    })?,
                    lease_owner: r.get(5)?,
                    lease_until: r.get::<_, Option<i64>>(6)?.map(from_ms),
                    purpose: r.get(7)?,
                    commitment_version: r.get(8)?,
                    commitment_cancelled: r.get(9)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}
