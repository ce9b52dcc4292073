//! Read paths for the CLI and the console: listings by state and day, and
//! one intention in full. Every listing is paginated and served by an index.

use chrono::{DateTime, Utc};
use rusqlite::{Row, params_from_iter, types::Value};
use serde::Serialize;

use super::intents::{HistoryRow, INTENTION_COLS, IntentionRow, intention_row};
use super::operator::AcknowledgementRow;
use super::{Result, StoreError, Tx, from_ms};
use crate::domain::attempt::AttemptOutcome;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;

#[derive(Debug, Clone, Default)]
pub struct IntentFilter {
    pub states: Vec<IntentionState>,
    pub day: Option<OperatingDay>,
    pub commitment_ref: Option<String>,
    pub limit: u32,
    pub offset: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    pub id: i64,
    pub n: i64,
    pub worker: String,
    pub channel: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: AttemptOutcome,
    pub http_status: Option<i64>,
    pub command_id: Option<String>,
    pub message_id: Option<String>,
    pub error_code: Option<String>,
    pub error_detail: Option<String>,
    pub commitment_version_checked: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IntentionDetail {
    pub intention: IntentionRow,
    pub history: Vec<HistoryRow>,
    pub attempts: Vec<AttemptRow>,
    /// Intentions related to this one (resends of it, or the one it resends).
    pub related: Vec<RelatedRow>,
    /// A resend authorized although an earlier message of the same
    /// intention was already delivered or read, with the supervisor's
    /// explicit acknowledgement (`acknowledgement` says who, when and what).
    pub acknowledged_delivery: bool,
    pub acknowledgement: Option<AcknowledgementRow>,
}

/// One message of a resend family (the original or one of its resends)
/// with the evidence it has: what a supervisor must see before authorizing
/// another one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FamilyMember {
    pub id: i64,
    pub key: String,
    pub state: IntentionState,
    pub created_by: String,
    pub authorized_by: Option<String>,
    pub created_at: DateTime<Utc>,
    /// First time the channel took it (accepted or sent).
    pub accepted_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub read_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RelatedRow {
    pub id: i64,
    pub key: String,
    pub state: String,
    pub relation: String,
}

pub(super) fn attempt_row(r: &Row<'_>) -> rusqlite::Result<AttemptRow> {
    Ok(AttemptRow {
        id: r.get(0)?,
        n: r.get(1)?,
        worker: r.get(2)?,
        channel: r.get(3)?,
        started_at: from_ms(r.get(4)?),
        ended_at: r.get::<_, Option<i64>>(5)?.map(from_ms),
        outcome: {
            let o: String = r.get(6)?;
            o.parse().map_err(|e: crate::domain::attempt::UnknownOutcome| {
                rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, e.to_string().into())
            })?
        },
        http_status: r.get(7)?,
        command_id: r.get(8)?,
        message_id: r.get(9)?,
        error_code: r.get(10)?,
        error_detail: r.get(11)?,
        commitment_version_checked: r.get(12)?,
    })
}

pub(super) const ATTEMPT_COLS: &str = "id, n, worker, channel, started_at, ended_at, outcome, http_status, command_id,
    message_id, error_code, error_detail, commitment_version_checked";

impl Tx<'_> {
    /// Intentions by state and/or operating day, ordered by due time.
    pub fn list_intentions(&self, f: &IntentFilter) -> Result<Vec<IntentionRow>> {
        let mut sql =
            format!("SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE 1=1");
        let mut args: Vec<Value> = Vec::new();
        if !f.states.is_empty() {
            sql.push_str(&format!(" AND i.state IN ({})", vec!["?"; f.states.len()].join(",")));
            args.extend(f.states.iter().map(|s| Value::Text(s.as_str().into())));
        }
        if let Some(day) = &f.day {
            sql.push_str(" AND i.day = ?");
            args.push(Value::Text(day.to_string()));
        }
        if let Some(r) = &f.commitment_ref {
            sql.push_str(" AND c.ref = ?");
            args.push(Value::Text(r.clone()));
        }
        sql.push_str(" ORDER BY i.due_at, i.id LIMIT ? OFFSET ?");
        args.push(Value::Integer(if f.limit == 0 { 1000 } else { f.limit.into() }));
        args.push(Value::Integer(f.offset.into()));
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let rows = stmt
            .query_map(params_from_iter(args), intention_row)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// Looks an intention up by numeric id or by key.
    pub fn find_intention(&self, id_or_key: &str) -> Result<IntentionRow> {
        let id = match id_or_key.trim_start_matches('#').parse::<i64>() {
            Ok(id) => Some(id),
            Err(_) => self.intention_id(id_or_key)?,
        };
        match id {
            Some(id) => self.intention(id),
            None => Err(StoreError::NoIntention(id_or_key.to_string())),
        }
    }

    pub fn history(&self, id: i64) -> Result<Vec<HistoryRow>> {
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT id, at, from_state, to_state, applied, signal, cause, evidence, note, commitment_version
             FROM intention_history WHERE intention_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([id], |r| {
                Ok(HistoryRow {
                    id: r.get(0)?,
                    at: from_ms(r.get(1)?),
                    from_state: r.get(2)?,
                    to_state: r.get(3)?,
                    applied: r.get(4)?,
                    signal: r.get(5)?,
                    cause: r.get(6)?,
                    evidence: r.get(7)?,
                    note: r.get(8)?,
                    commitment_version: r.get(9)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    pub fn attempts(&self, id: i64) -> Result<Vec<AttemptRow>> {
        let mut stmt = self.conn()?.prepare_cached(&format!(
            "SELECT {ATTEMPT_COLS} FROM attempts WHERE intention_id = ?1 ORDER BY n"
        ))?;
        let rows = stmt.query_map([id], attempt_row)?.collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    pub fn related(&self, row: &IntentionRow) -> Result<Vec<RelatedRow>> {
        let mut out = Vec::new();
        if let Some(parent) = row.related_id {
            let p = self.intention(parent)?;
            out.push(RelatedRow {
                id: p.id,
                key: p.key,
                state: p.state.to_string(),
                relation: "resend_of".into(),
            });
        }
        let mut stmt = self
            .conn()?
            .prepare_cached("SELECT id, key, state FROM intentions WHERE related_id = ?1 ORDER BY id")?;
        let children: Vec<RelatedRow> = stmt
            .query_map([row.id], |r| {
                Ok(RelatedRow {
                    id: r.get(0)?,
                    key: r.get(1)?,
                    state: r.get(2)?,
                    relation: "resent_as".into(),
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        out.extend(children);
        // Other versions' notices of the same commitment explain updates.
        let mut stmt = self.conn()?.prepare_cached(
            "SELECT id, key, state FROM intentions WHERE commitment_id = ?1 AND id != ?2
               AND commitment_version != ?3 AND related_id IS NULL ORDER BY id LIMIT 20",
        )?;
        let versions: Vec<RelatedRow> = stmt
            .query_map(
                rusqlite::params![row.commitment_id, row.id, row.commitment_version],
                |r| {
                    Ok(RelatedRow {
                        id: r.get(0)?,
                        key: r.get(1)?,
                        state: r.get(2)?,
                        relation: "other_version".into(),
                    })
                },
            )?
            .collect::<rusqlite::Result<_>>()?;
        out.extend(versions);
        Ok(out)
    }

    pub fn intention_detail(&self, id_or_key: &str) -> Result<IntentionDetail> {
        let intention = self.find_intention(id_or_key)?;
        let acknowledgement = self.resend_acknowledgement(intention.id)?;
        Ok(IntentionDetail {
            history: self.history(intention.id)?,
            attempts: self.attempts(intention.id)?,
            related: self.related(&intention)?,
            acknowledged_delivery: acknowledgement.is_some(),
            acknowledgement,
            intention,
        })
    }

    /// `root_id` and every resend descending from it, in creation order,
    /// each with the first time it was accepted, delivered and read. A
    /// signal recorded without moving the state (a late "delivered" on a
    /// message already read, or on one cancelled meanwhile) is evidence too:
    /// the customer has the message either way.
    pub fn resend_family(&self, root_id: i64) -> Result<Vec<FamilyMember>> {
        let mut stmt = self.conn()?.prepare_cached(
            "WITH RECURSIVE fam(id) AS (
                 SELECT ?1
                 UNION SELECT i.id FROM intentions i JOIN fam ON i.related_id = fam.id
             )
             SELECT i.id, i.key, i.state, i.created_by, i.authorized_by, i.created_at,
                 (SELECT min(h.at) FROM intention_history h WHERE h.intention_id = i.id
                     AND (h.to_state IN ('accepted', 'sent') OR h.signal IN ('accepted', 'sent'))),
                 (SELECT min(h.at) FROM intention_history h WHERE h.intention_id = i.id
                     AND (h.to_state = 'delivered' OR h.signal = 'delivered')),
                 (SELECT min(h.at) FROM intention_history h WHERE h.intention_id = i.id
                     AND (h.to_state = 'read' OR h.signal = 'read'))
             FROM fam JOIN intentions i ON i.id = fam.id ORDER BY i.id",
        )?;
        let rows = stmt
            .query_map([root_id], |r| {
                let state: String = r.get(2)?;
                Ok(FamilyMember {
                    id: r.get(0)?,
                    key: r.get(1)?,
                    state: state.parse().map_err(|e: crate::domain::state::UnknownState| {
                        rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, e.to_string().into())
                    })?,
                    created_by: r.get(3)?,
                    authorized_by: r.get(4)?,
                    created_at: from_ms(r.get(5)?),
                    accepted_at: r.get::<_, Option<i64>>(6)?.map(from_ms),
                    delivered_at: r.get::<_, Option<i64>>(7)?.map(from_ms),
                    read_at: r.get::<_, Option<i64>>(8)?.map(from_ms),
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    /// Intention counts by state (whole ledger).
    pub fn count_by_state(&self) -> Result<Vec<(IntentionState, i64)>> {
        let mut out = Vec::new();
        // `intention_counts` (migration 0002) is kept exact by triggers: a
        // few hundred rows instead of counting a million.
        let mut stmt = self
            .conn()?
            .prepare_cached("SELECT coalesce(sum(n), 0) FROM intention_counts WHERE state = ?1")?;
        for s in IntentionState::ALL {
            let n: i64 = stmt.query_row([s.as_str()], |r| r.get(0))?;
            out.push((s, n));
        }
        Ok(out)
    }
}
