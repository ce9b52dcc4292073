//! Attempts: written as started before the channel is contacted, then
//! closed with what the channel answered (or as `not_sent` when the
//! pre-send check stopped them). How a result finishes an attempt is
//! decided in `unavez-core` (`domain::finish`); this file reads the facts
//! that decision needs and writes the rows it decided.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params, params_from_iter};

use super::dispatch::{IN_IDS, id_list, runs, values_rows};
use super::{Result, StoreError, Tx, ms};
use crate::domain::finish::{AttemptWrite, FinishFacts, SequenceFacts};
use crate::domain::state::{IntentionState, UnknownState};

fn state_at(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<IntentionState> {
    let s: String = r.get(i)?;
    s.parse().map_err(|e: UnknownState| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e.to_string().into())
    })
}

impl Tx<'_> {
    /// Records an attempt as started (before the channel is contacted).
    pub fn start_attempt(
        &self,
        intention_id: i64,
        n: i64,
        worker: &str,
        channel: &str,
        version_checked: i64,
        now: DateTime<Utc>,
    ) -> Result<i64> {
        Ok(self.conn()?.query_row(
            "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
            params![intention_id, n, worker, channel, ms(now), version_checked],
            |r| r.get(0),
        )?)
    }

    pub(super) fn has_acknowledged_attempt(&self, id: i64) -> Result<bool> {
        Ok(self
            .conn()?
            .query_row(
                "SELECT 1 FROM attempts WHERE intention_id = ?1 AND outcome IN ('accepted', 'ambiguous') LIMIT 1",
                [id],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Whether any status webhook waits for its intention (one probe of
    /// the pending index, no parameter): finishing a batch looks for each
    /// intention's pending statuses only when there are some.
    pub fn any_pending_status(&self) -> Result<bool> {
        Ok(self.conn()?.query_row(
            "SELECT EXISTS (SELECT 1 FROM channel_events WHERE status = 'pending')",
            [],
            |r| r.get(0),
        )?)
    }

    pub fn finish_facts(&self, attempt_ids: &[i64]) -> Result<Vec<FinishFacts>> {
        if attempt_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn()?.prepare_cached(&format!(
            "SELECT a.id, a.intention_id, a.n, a.commitment_version_checked, a.ended_at IS NOT NULL, i.state,
                    i.attempt_count, i.commitment_version, c.version
             FROM attempts a JOIN intentions i ON i.id = a.intention_id JOIN commitments c ON c.id = i.commitment_id
             WHERE a.id IN ({IN_IDS}(?1))"
        ))?;
        let mut by_id: HashMap<i64, FinishFacts> = stmt
            .query_map([id_list(attempt_ids)], |r| {
                Ok(FinishFacts {
                    attempt_id: r.get(0)?,
                    intention_id: r.get(1)?,
                    n: r.get(2)?,
                    version_checked: r.get(3)?,
                    attempt_ended: r.get(4)?,
                    state: state_at(r, 5)?,
                    attempt_count: r.get(6)?,
                    intention_version: r.get(7)?,
                    current_version: r.get(8)?,
                })
            })?
            .map(|f| f.map(|f| (f.attempt_id, f)))
            .collect::<rusqlite::Result<_>>()?;
        attempt_ids
            .iter()
            .map(|id| by_id.remove(id).ok_or_else(|| StoreError::NoAttempt(*id)))
            .collect()
    }

    /// Closes attempts (one `UPDATE … FROM (VALUES …)` per run of rows),
    /// or annotates ones already closed (rare: one by one).
    pub fn write_attempts(&self, rows: &[AttemptWrite]) -> Result<()> {
        let ends: Vec<&AttemptWrite> = rows.iter().filter(|w| matches!(w, AttemptWrite::End { .. })).collect();
        for run in runs(ends.len()) {
            let sql = format!(
                "WITH v(id, ended_at, outcome, http_status, command_id, message_id, error_code, error_detail)
                     AS (VALUES {})
                 UPDATE attempts SET ended_at = v.ended_at, outcome = v.outcome, http_status = v.http_status,
                     command_id = v.command_id, message_id = v.message_id, error_code = v.error_code,
                     error_detail = v.error_detail
                 FROM v WHERE attempts.id = v.id",
                values_rows(8, run.len())
            );
            let mut values: Vec<Value> = Vec::with_capacity(run.len() * 8);
            for w in &ends[run] {
                if let AttemptWrite::End {
                    attempt_id,
                    outcome,
                    http_status,
                    command_id,
                    message_id,
                    error_code,
                    error_detail,
                    at,
                } = w
                {
                    values.extend([
                        Value::Integer(*attempt_id),
                        Value::Integer(ms(*at)),
                        Value::Text(outcome.as_str().to_string()),
                        Value::from(http_status.map(i64::from)),
                        Value::from(command_id.clone()),
                        Value::from(message_id.clone()),
                        Value::from(error_code.clone()),
                        Value::from(error_detail.clone()),
                    ]);
                }
            }
            self.conn()?.prepare_cached(&sql)?.execute(params_from_iter(values))?;
        }
        for w in rows {
            if let AttemptWrite::LateAnswer {
                attempt_id,
                http_status,
                command_id,
                message_id,
                note,
            } = w
            {
                self.conn()?.execute(
                    "UPDATE attempts SET command_id = coalesce(command_id, ?2),
                         message_id = coalesce(message_id, ?3), http_status = coalesce(http_status, ?4),
                         error_detail = coalesce(error_detail || '; ', '') || ?5 WHERE id = ?1",
                    params![attempt_id, command_id, message_id, http_status, note],
                )?;
            }
        }
        Ok(())
    }

    /// Stores the channel's references (a given value replaces the stored
    /// one), one statement per run of rows.
    pub fn set_channel_refs(&self, rows: &[(i64, Option<String>, Option<String>)]) -> Result<()> {
        // One row per intention, a later value over an earlier one, as if
        // written one after the other.
        let mut merged: Vec<(i64, Option<String>, Option<String>)> = Vec::with_capacity(rows.len());
        let mut at: HashMap<i64, usize> = HashMap::with_capacity(rows.len());
        for (id, c, m) in rows {
            match at.get(id) {
                Some(&i) => {
                    let row = &mut merged[i];
                    row.1 = c.clone().or(row.1.take());
                    row.2 = m.clone().or(row.2.take());
                }
                None => {
                    at.insert(*id, merged.len());
                    merged.push((*id, c.clone(), m.clone()));
                }
            }
        }
        let rows = merged.as_slice();
        for run in runs(rows.len()) {
            let sql = format!(
                "WITH v(id, command_id, message_id) AS (VALUES {})
                 UPDATE intentions SET provider_command_id = coalesce(v.command_id, provider_command_id),
                     provider_message_id = coalesce(v.message_id, provider_message_id)
                 FROM v WHERE intentions.id = v.id",
                values_rows(3, run.len())
            );
            let mut values: Vec<Value> = Vec::with_capacity(run.len() * 3);
            for (id, command_id, message_id) in &rows[run] {
                values.extend([
                    Value::Integer(*id),
                    Value::from(command_id.clone()),
                    Value::from(message_id.clone()),
                ]);
            }
            self.conn()?.prepare_cached(&sql)?.execute(params_from_iter(values))?;
        }
        Ok(())
    }

    pub fn sequence_facts(&self, intention_id: i64, notice_purposes: &[&str]) -> Result<SequenceFacts> {
        let (key, state, intention_version, commitment_id, kind, current): (String, String, i64, i64, String, i64) =
            self.conn()?.query_row(
                "SELECT i.key, i.state, i.commitment_version, i.commitment_id, c.kind, c.version
                 FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE i.id = ?1",
                [intention_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )?;
        let producer = self
            .conn()?
            .query_row(
                "SELECT n, commitment_version_checked FROM attempts
                 WHERE intention_id = ?1 AND outcome NOT IN ('retry', 'not_sent') ORDER BY n LIMIT 1",
                [intention_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let notice = self
            .conn()?
            .prepare(&format!(
                "SELECT key, state FROM intentions WHERE commitment_id = ?1 AND commitment_version = ?2
                   AND purpose IN ({}) ORDER BY id LIMIT 1",
                (3..3 + notice_purposes.len())
                    .map(|i| format!("?{i}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ))?
            .query_row(
                params_from_iter(
                    [Value::Integer(commitment_id), Value::Integer(current)]
                        .into_iter()
                        .chain(notice_purposes.iter().map(|p| Value::Text(p.to_string()))),
                ),
                |r| Ok((r.get::<_, String>(0)?, state_at(r, 1)?)),
            )
            .optional()?;
        let corrupt = |e: UnknownState| StoreError::Corrupt {
            table: "intentions",
            detail: e.to_string(),
        };
        Ok(SequenceFacts {
            intention_id,
            key,
            state: state.parse().map_err(corrupt)?,
            intention_version,
            appointment: kind == "appointment",
            current_version: current,
            producer,
            notice,
        })
    }
}
