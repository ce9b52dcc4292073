//! Attempts: written as started before the channel is contacted, then
//! closed with what the channel answered (or as `not_sent` when the
//! pre-send check stopped them). How a result finishes an attempt is
//! decided in `unavez-core` (`domain::finish`); this file reads the facts
//! that decision needs and writes the rows it decided.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params, params_from_iter};

use super::dispatch::marks;
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

    pub fn finish_facts(&self, attempt_ids: &[i64]) -> Result<Vec<FinishFacts>> {
        if attempt_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn()?.prepare_cached(&format!(
            "SELECT a.id, a.intention_id, a.n, a.commitment_version_checked, a.ended_at IS NOT NULL, i.state,
                    i.attempt_count, i.commitment_version, c.version
             FROM attempts a JOIN intentions i ON i.id = a.intention_id JOIN commitments c ON c.id = i.commitment_id
             WHERE a.id IN ({})",
            marks(attempt_ids.len())
        ))?;
        let mut by_id: HashMap<i64, FinishFacts> = stmt
            .query_map(params_from_iter(attempt_ids), |r| {
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

    pub fn write_attempts(&self, rows: &[AttemptWrite]) -> Result<()> {
        for w in rows {
            match w {
                AttemptWrite::End {
                    attempt_id,
                    outcome,
                    http_status,
                    command_id,
                    message_id,
                    error_code,
                    error_detail,
                    at,
                } => {
                    self.conn()?.execute(
                        "UPDATE attempts SET ended_at = ?2, outcome = ?3, http_status = ?4, command_id = ?5,
                             message_id = ?6, error_code = ?7, error_detail = ?8 WHERE id = ?1",
                        params![
                            attempt_id,
                            ms(*at),
                            outcome.as_str(),
                            http_status,
                            command_id,
                            message_id,
                            error_code,
                            error_detail
                        ],
                    )?;
                }
                AttemptWrite::LateAnswer {
                    attempt_id,
                    http_status,
                    command_id,
                    message_id,
                    note,
                } => {
                    self.conn()?.execute(
                        "UPDATE attempts SET command_id = coalesce(command_id, ?2),
                             message_id = coalesce(message_id, ?3), http_status = coalesce(http_status, ?4),
                             error_detail = coalesce(error_detail || '; ', '') || ?5 WHERE id = ?1",
                        params![attempt_id, command_id, message_id, http_status, note],
                    )?;
                }
            }
        }
        Ok(())
    }

    pub fn set_channel_refs(&self, rows: &[(i64, Option<String>, Option<String>)]) -> Result<()> {
        for (id, command_id, message_id) in rows {
            self.conn()?.execute(
                "UPDATE intentions SET provider_command_id = coalesce(?2, provider_command_id),
                     provider_message_id = coalesce(?3, provider_message_id) WHERE id = ?1",
                params![id, command_id, message_id],
            )?;
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
