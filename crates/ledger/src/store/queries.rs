//! Read paths for the CLI and the console: listings by state and day, and
//! one intention in full. Every listing is paginated and served by an index.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::intents::{HistoryRow, IntentionRow};
use super::operator::AcknowledgementRow;
use super::{Result, StoreError, Tx};
use crate::domain::attempt::AttemptOutcome;
use crate::domain::lifecycle::OperatingDay;
use crate::domain::state::IntentionState;
use crate::rows::{Cols, INTENTION_COLS, intention_row};
use crate::rules_sql::{self, Sql};
use crate::sql::Value;
use crate::vals;

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
    /// The commitment the message speaks of, as it stands now (with the
    /// contact's name): Detalle's header and verdict read it.
    pub commitment: Option<super::ledger::CommitmentRow>,
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

/// An attempt from [`ATTEMPT_COLS`].
pub(super) fn attempt_row(r: &dyn Cols) -> std::result::Result<AttemptRow, String> {
    Ok(AttemptRow {
        id: r.int(0)?,
        n: r.int(1)?,
        worker: r.text(2)?,
        channel: r.text(3)?,
        started_at: r.time(4)?,
        ended_at: r.opt_time(5)?,
        outcome: r
            .text(6)?
            .parse()
            .map_err(|e: crate::domain::attempt::UnknownOutcome| e.to_string())?,
        http_status: r.opt_int(7)?,
        command_id: r.opt_text(8)?,
        message_id: r.opt_text(9)?,
        error_code: r.opt_text(10)?,
        error_detail: r.opt_text(11)?,
        commitment_version_checked: r.int(12)?,
    })
}

pub(super) const ATTEMPT_COLS: &str = "id, n, worker, channel, started_at, ended_at, outcome, http_status, command_id,
    message_id, error_code, error_detail, commitment_version_checked";

/// A family's members with when the channel first took each, delivered
/// it and saw it read.
static RESEND_FAMILY: Sql = Sql::new(|| {
    format!(
        "WITH RECURSIVE fam(id) AS (
                 SELECT CAST(?1 AS BIGINT)
                 UNION SELECT i.id FROM intentions i JOIN fam ON i.related_id = fam.id
             )
             SELECT i.id, i.key, i.state, i.created_by, i.authorized_by, i.created_at,
                 (SELECT min(h.at) FROM intention_history h WHERE h.intention_id = i.id
                     AND (h.to_state IN {taken_states} OR h.signal IN {taken_signals})),
                 (SELECT min(h.at) FROM intention_history h WHERE h.intention_id = i.id
                     AND (h.to_state = 'delivered' OR h.signal = 'delivered')),
                 (SELECT min(h.at) FROM intention_history h WHERE h.intention_id = i.id
                     AND (h.to_state = 'read' OR h.signal = 'read'))
             FROM fam JOIN intentions i ON i.id = fam.id ORDER BY i.id",
        taken_states = rules_sql::TAKEN_STATES,
        taken_signals = rules_sql::TAKEN_SIGNALS,
    )
});

impl Tx<'_> {
    pub fn list_intentions(&self, f: &IntentFilter) -> Result<Vec<IntentionRow>> {
        let mut sql =
            format!("SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE 1=1");
        let mut args: Vec<Value> = Vec::new();
        if !f.states.is_empty() {
            sql.push_str(&format!(" AND i.state IN ({})", vec!["?"; f.states.len()].join(",")));
            args.extend(f.states.iter().map(|s| Value::from(s.as_str())));
        }
        if let Some(day) = &f.day {
            sql.push_str(" AND i.day = ?");
            args.push(day.to_string().into());
        }
        if let Some(r) = &f.commitment_ref {
            sql.push_str(" AND c.ref = ?");
            args.push(r.clone().into());
        }
        sql.push_str(" ORDER BY i.due_at, i.id LIMIT ? OFFSET ?");
        args.push(Value::Int(if f.limit == 0 { 1000 } else { f.limit.into() }));
        args.push(Value::Int(f.offset.into()));
        Ok(self.db().rows(&sql, &args, |r| intention_row(r))?)
    }

    /// An intention by `#id`, id or key. A key is read in one statement
    /// (not its id, then the row: on PostgreSQL each is a round trip).
    pub fn find_intention(&self, id_or_key: &str) -> Result<IntentionRow> {
        if let Ok(id) = id_or_key.trim_start_matches('#').parse::<i64>() {
            return self.intention(id);
        }
        self.db()
            .row(
                &format!(
                    "SELECT {INTENTION_COLS} FROM intentions i JOIN commitments c ON c.id = i.commitment_id
                     WHERE i.key = ?1"
                ),
                &vals![id_or_key],
                |r| intention_row(r),
            )?
            .ok_or_else(|| StoreError::NoIntention(id_or_key.to_string()))
    }

    pub fn history(&self, id: i64) -> Result<Vec<HistoryRow>> {
        Ok(self.db().rows(
            "SELECT id, at, from_state, to_state, applied, signal, cause, evidence, note, commitment_version
             FROM intention_history WHERE intention_id = ?1 ORDER BY id",
            &vals![id],
            |r| {
                Ok(HistoryRow {
                    id: r.int(0)?,
                    at: r.time(1)?,
                    from_state: r.opt_text(2)?,
                    to_state: r.text(3)?,
                    applied: r.flag(4)?,
                    signal: r.text(5)?,
                    cause: r.text(6)?,
                    evidence: r.opt_text(7)?,
                    note: r.opt_text(8)?,
                    commitment_version: r.opt_int(9)?,
                })
            },
        )?)
    }

    pub fn attempts(&self, id: i64) -> Result<Vec<AttemptRow>> {
        Ok(self.db().rows(
            &format!("SELECT {ATTEMPT_COLS} FROM attempts WHERE intention_id = ?1 ORDER BY n"),
            &vals![id],
            attempt_row,
        )?)
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
        let related = |relation: &'static str| {
            move |r: &dyn Cols| {
                Ok(RelatedRow {
                    id: r.int(0)?,
                    key: r.text(1)?,
                    state: r.text(2)?,
                    relation: relation.into(),
                })
            }
        };
        out.extend(self.db().rows(
            "SELECT id, key, state FROM intentions WHERE related_id = ?1 ORDER BY id",
            &vals![row.id],
            related("resent_as"),
        )?);
        // Other versions' notices of the same commitment explain updates.
        out.extend(self.db().rows(
            "SELECT id, key, state FROM intentions WHERE commitment_id = ?1 AND id != ?2
               AND commitment_version != ?3 AND related_id IS NULL ORDER BY id LIMIT 20",
            &vals![row.commitment_id, row.id, row.commitment_version],
            related("other_version"),
        )?);
        Ok(out)
    }

    pub fn intention_detail(&self, id_or_key: &str) -> Result<IntentionDetail> {
        let intention = self.find_intention(id_or_key)?;
        let acknowledgement = self.resend_acknowledgement(intention.id)?;
        let commitment = Some(self.commitment_by_id(intention.commitment_id)?);
        Ok(IntentionDetail {
            commitment,
            history: self.history(intention.id)?,
            attempts: self.attempts(intention.id)?,
            related: self.related(&intention)?,
            acknowledged_delivery: acknowledgement.is_some(),
            acknowledgement,
            intention,
        })
    }

    pub fn resend_family(&self, root_id: i64) -> Result<Vec<FamilyMember>> {
        Ok(self.db().rows(&RESEND_FAMILY, &vals![root_id], |r| {
            Ok(FamilyMember {
                id: r.int(0)?,
                key: r.text(1)?,
                state: r.state(2)?,
                created_by: r.text(3)?,
                authorized_by: r.opt_text(4)?,
                created_at: r.time(5)?,
                accepted_at: r.opt_time(6)?,
                delivered_at: r.opt_time(7)?,
                read_at: r.opt_time(8)?,
            })
        })?)
    }

    /// Intention counts by state (whole ledger).
    pub fn count_by_state(&self) -> Result<Vec<(IntentionState, i64)>> {
        // `intention_counts` (migration 0002) is kept exact by triggers: a
        // few hundred rows instead of counting a million.
        let by_state: std::collections::HashMap<String, i64> = self
            .db()
            .rows(
                "SELECT state, CAST(sum(n) AS BIGINT) FROM intention_counts GROUP BY state",
                &[],
                |r| Ok((r.text(0)?, r.int(1)?)),
            )?
            .into_iter()
            .collect();
        Ok(IntentionState::ALL
            .into_iter()
            .map(|s| (s, by_state.get(s.as_str()).copied().unwrap_or(0)))
            .collect())
    }
}
