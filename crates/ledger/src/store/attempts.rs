//! Attempts: written as started before the channel is contacted, then
//! closed with what the channel answered (or as `not_sent` when the
//! pre-send check stopped them). How a result finishes an attempt is
//! decided in `unavez-core` (`domain::finish`); this file reads the facts
//! that decision needs and writes the rows it decided.

use chrono::{DateTime, Utc};
use std::collections::HashMap;

use super::dispatch::{bind_rows, row_source, set_runs};
use super::{Result, StoreError, Tx, ms};
use crate::api::ChannelRefs;
use crate::domain::finish::{AttemptWrite, FinishFacts, SequenceFacts};
use crate::rules_sql::{self, Sql};
use crate::sql::Value;
use crate::vals;

/// An attempt of `?1` the channel acknowledged.
static HAS_ACKNOWLEDGED: Sql = Sql::new(|| {
    format!(
        "SELECT 1 FROM attempts WHERE intention_id = ?1 AND outcome IN {} LIMIT 1",
        rules_sql::ACKNOWLEDGED_OUTCOMES
    )
});

/// The first attempt of `?1` that may have reached the channel.
static PRODUCER: Sql = Sql::new(|| {
    format!(
        "SELECT n, commitment_version_checked FROM attempts
             WHERE intention_id = ?1 AND outcome NOT IN {} ORDER BY n LIMIT 1",
        rules_sql::UNREACHED_OUTCOMES
    )
});

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
        self.db()
            .row(
                "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                &vals![intention_id, n, worker, channel, ms(now), version_checked],
                |r| r.int(0),
            )?
            .ok_or(StoreError::NoIntention(format!("#{intention_id}")))
    }

    pub(super) fn has_acknowledged_attempt(&self, id: i64) -> Result<bool> {
        Ok(self.db().row(&HAS_ACKNOWLEDGED, &vals![id], |r| r.int(0))?.is_some())
    }

    /// Whether any status webhook waits for its intention (one probe of
    /// the pending index, no parameter): finishing a batch looks for each
    /// intention's pending statuses only when there are some.
    pub fn any_pending_status(&self) -> Result<bool> {
        Ok(self
            .db()
            .row(
                "SELECT 1 FROM channel_events WHERE status = 'pending' LIMIT 1",
                &[],
                |r| r.int(0),
            )?
            .is_some())
    }

    pub fn finish_facts(&self, attempt_ids: &[i64]) -> Result<Vec<FinishFacts>> {
        let mut by_id: HashMap<i64, FinishFacts> = self
            .attempt_rows(
                "a.id, a.intention_id, a.n, a.commitment_version_checked, a.ended_at IS NOT NULL,
                 i.state, i.attempt_count, i.commitment_version, c.version,
                 (SELECT count(*) FROM attempts u
                  WHERE u.intention_id = a.intention_id AND u.id <> a.id AND u.outcome = 'not_sent')",
                attempt_ids,
                |r| {
                    Ok(FinishFacts {
                        attempt_id: r.int(0)?,
                        intention_id: r.int(1)?,
                        n: r.int(2)?,
                        version_checked: r.int(3)?,
                        attempt_ended: r.flag(4)?,
                        state: r.state(5)?,
                        attempt_count: r.int(6)?,
                        unsent: r.int(9)?,
                        intention_version: r.int(7)?,
                        current_version: r.int(8)?,
                    })
                },
            )?
            .into_iter()
            .map(|f| (f.attempt_id, f))
            .collect();
        attempt_ids
            .iter()
            .map(|id| by_id.remove(id).ok_or(StoreError::NoAttempt(*id)))
            .collect()
    }

    /// Closes attempts (one `UPDATE … FROM (VALUES …)` per run of rows),
    /// or annotates ones already closed (rare: one by one).
    pub fn write_attempts(&self, rows: &[AttemptWrite]) -> Result<()> {
        let ends: Vec<&AttemptWrite> = rows.iter().filter(|w| matches!(w, AttemptWrite::End { .. })).collect();
        let pg = self.is_pg();
        for run in set_runs(pg, ends.len()) {
            let sql = format!(
                "WITH v(id, ended_at, outcome, http_status, command_id, message_id, error_code, error_detail)
                     AS ({})
                 UPDATE attempts SET ended_at = v.ended_at, outcome = v.outcome, http_status = v.http_status,
                     command_id = v.command_id, message_id = v.message_id, error_code = v.error_code,
                     error_detail = v.error_detail
                 FROM v WHERE attempts.id = v.id",
                row_source(
                    pg,
                    &["BIGINT", "BIGINT", "TEXT", "BIGINT", "TEXT", "TEXT", "TEXT", "TEXT"],
                    run.len()
                )
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(run.len() * 8);
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
                    values.extend(vals![
                        *attempt_id,
                        ms(*at),
                        outcome.as_str(),
                        http_status.map(i64::from),
                        command_id.as_ref(),
                        message_id.as_ref(),
                        error_code.as_ref(),
                        error_detail.as_ref(),
                    ]);
                }
            }
            self.db().exec(&sql, &bind_rows(pg, 8, values))?;
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
                self.db().exec(
                    "UPDATE attempts SET command_id = coalesce(command_id, ?2),
                         message_id = coalesce(message_id, ?3), http_status = coalesce(http_status, ?4),
                         error_detail = coalesce(error_detail || '; ', '') || ?5 WHERE id = ?1",
                    &vals![
                        *attempt_id,
                        command_id.as_ref(),
                        message_id.as_ref(),
                        http_status.map(i64::from),
                        note
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// Stores the channel's references (a given value replaces the stored
    /// one), one statement per run of rows.
    pub fn set_channel_refs(&self, rows: &[ChannelRefs]) -> Result<()> {
        let merged = merge_refs(rows);
        let rows = merged.as_slice();
        let pg = self.is_pg();
        for run in set_runs(pg, rows.len()) {
            let sql = format!(
                "WITH v(id, command_id, message_id) AS ({})
                 UPDATE intentions SET provider_command_id = coalesce(v.command_id, provider_command_id),
                     provider_message_id = coalesce(v.message_id, provider_message_id)
                 FROM v WHERE intentions.id = v.id",
                row_source(pg, &["BIGINT", "TEXT", "TEXT"], run.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(run.len() * 3);
            for (id, command_id, message_id) in &rows[run] {
                values.extend(vals![*id, command_id.as_ref(), message_id.as_ref()]);
            }
            self.db().exec(&sql, &bind_rows(pg, 3, values))?;
        }
        Ok(())
    }

    pub fn sequence_facts(&self, intention_id: i64, notice_purposes: &[&str]) -> Result<SequenceFacts> {
        let db = self.db();
        let (key, state, intention_version, commitment_id, kind, current) = db
            .row(
                "SELECT i.key, i.state, i.commitment_version, i.commitment_id, c.kind, c.version
                 FROM intentions i JOIN commitments c ON c.id = i.commitment_id WHERE i.id = ?1",
                &vals![intention_id],
                |r| Ok((r.text(0)?, r.state(1)?, r.int(2)?, r.int(3)?, r.text(4)?, r.int(5)?)),
            )?
            .ok_or_else(|| StoreError::NoIntention(format!("#{intention_id}")))?;
        let producer = db.row(&PRODUCER, &vals![intention_id], |r| Ok((r.int(0)?, r.int(1)?)))?;
        let marks = (3..3 + notice_purposes.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut args: Vec<Value<'_>> = vals![commitment_id, current].into();
        args.extend(notice_purposes.iter().map(|p| Value::from(*p)));
        let notice = db.row(
            &format!(
                "SELECT key, state FROM intentions WHERE commitment_id = ?1 AND commitment_version = ?2
                   AND purpose IN ({marks}) ORDER BY id LIMIT 1"
            ),
            &args,
            |r| Ok((r.text(0)?, r.state(1)?)),
        )?;
        Ok(SequenceFacts {
            intention_id,
            key,
            state,
            intention_version,
            appointment: kind == "appointment",
            current_version: current,
            producer,
            notice,
        })
    }
}

/// One row per intention, a later value over an earlier one, as if
/// written one after the other.
pub(super) fn merge_refs(rows: &[ChannelRefs]) -> Vec<ChannelRefs> {
    let mut merged: Vec<ChannelRefs> = Vec::with_capacity(rows.len());
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
    merged
}
