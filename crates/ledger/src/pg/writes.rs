//! The rows the dispatcher and the planner decided, written on PostgreSQL
//! with one statement per kind of row (arrays unnested server-side), with
//! the contract of the SQLite `LedgerTx` methods of the same names.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{PgError, PgTx, Result};
use crate::api::{Reservation, ReserveRow};
use crate::domain::counter::Counter;
use crate::domain::finish::AttemptWrite;
use crate::domain::history::Record;
use crate::domain::state::IntentionState;
use crate::store::ms;

impl PgTx<'_> {
    /// Inserts the reservations whose key is new (with their history row)
    /// and returns, for every one in order, the id and the stored
    /// fingerprint. A concurrent reservation of the same key on another
    /// host waits on the key's unique index and then finds the stored row.
    pub fn reserve_many(&self, rows: &[Reservation<'_>]) -> Result<Vec<ReserveRow>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let inserted = self.insert_intentions(rows)?;
        let keys: Vec<&str> = rows.iter().map(|r| r.intention.key.as_str()).collect();
        let stored: HashMap<String, (i64, String)> = self
            .tx
            .borrow_mut()
            .query(
                "SELECT key, id, fingerprint FROM intentions WHERE key = ANY($1)",
                &[&keys],
            )?
            .iter()
            .map(|r| (r.get(0), (r.get(1), r.get(2))))
            .collect();
        let mut fresh = inserted;
        let mut out = Vec::with_capacity(rows.len());
        let mut history = Vec::new();
        for r in rows {
            let key = r.intention.key.as_str();
            let (id, fingerprint) = stored.get(key).cloned().ok_or_else(|| PgError::Corrupt {
                table: "intentions",
                detail: format!("key {key} neither inserted nor stored"),
            })?;
            // A key given twice is inserted once: the second is "existing".
            let inserted = fresh.remove(key).is_some();
            if inserted {
                history.push(Record {
                    intention_id: id,
                    from: None,
                    to: IntentionState::Planned,
                    applied: true,
                    reason: None,
                    said: r.said.clone(),
                    at: r.at,
                });
            }
            out.push(ReserveRow {
                id,
                inserted,
                fingerprint,
            });
        }
        self.apply_records(&history)?;
        Ok(out)
    }

    /// One multi-row `INSERT … ON CONFLICT (key) DO NOTHING`; the ids of
    /// the rows it inserted, by key.
    fn insert_intentions(&self, rows: &[Reservation<'_>]) -> Result<HashMap<String, i64>> {
        let text = |f: &dyn Fn(&Reservation<'_>) -> String| rows.iter().map(f).collect::<Vec<String>>();
        let opt_text =
            |f: &dyn Fn(&Reservation<'_>) -> Option<String>| rows.iter().map(f).collect::<Vec<Option<String>>>();
        let int = |f: &dyn Fn(&Reservation<'_>) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
        let mut params = Vec::with_capacity(rows.len());
        for r in rows {
            params.push(
                serde_json::to_string(&r.intention.parameters).map_err(|e| PgError::Corrupt {
                    table: "intentions",
                    detail: e.to_string(),
                })?,
            );
        }
        let contact: Vec<Option<i64>> = rows.iter().map(|r| r.contact_id).collect();
        let expires: Vec<Option<i64>> = rows.iter().map(|r| r.intention.expires_at.map(ms)).collect();
        let out = self.tx.borrow_mut().query(
            "INSERT INTO intentions(key, commitment_id, commitment_version, purpose, contact_id, recipient,
                 category, channel, template, language, parameters, body, fingerprint, correlation_id,
                 asks_confirmation, due_at, expires_at, day, state, state_changed_at, related_id, created_by,
                 authorized_by, reason, created_at, updated_at)
             SELECT v.key, v.cid, v.cver, v.purpose, v.contact, v.recipient, v.category, v.channel, v.template,
                 v.language, v.params, v.body, v.fp, v.corr, v.asks, v.due, v.expires, v.day, 'planned', v.at,
                 (SELECT id FROM intentions WHERE key = v.related), v.by, v.auth, v.reason, v.at, v.at
             FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::int8[], $6::text[], $7::text[],
                 $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                 $15::int8[], $16::int8[], $17::int8[], $18::text[], $19::int8[], $20::text[], $21::text[],
                 $22::text[], $23::text[]) WITH ORDINALITY
                 AS v(key, cid, cver, purpose, contact, recipient, category, channel, template, language, params,
                      body, fp, corr, asks, due, expires, day, at, related, by, auth, reason, ord)
             ORDER BY v.ord
             ON CONFLICT (key) DO NOTHING RETURNING key, id",
            &[
                &text(&|r| r.intention.key.to_string()),
                &int(&|r| r.commitment_id),
                &int(&|r| r.intention.commitment_version),
                &text(&|r| r.intention.purpose.slug()),
                &contact,
                &text(&|r| r.intention.recipient.clone()),
                &text(&|r| r.intention.category.as_str().to_string()),
                &text(&|r| r.intention.channel.clone()),
                &text(&|r| r.intention.template.clone()),
                &text(&|r| r.intention.language.clone()),
                &params,
                &text(&|r| r.intention.body.clone()),
                &text(&|r| r.fingerprint.to_string()),
                &text(&|r| r.intention.correlation_id.clone()),
                &int(&|r| i64::from(r.intention.asks_confirmation)),
                &int(&|r| ms(r.intention.due_at)),
                &expires,
                &text(&|r| r.intention.day.to_string()),
                &int(&|r| ms(r.at)),
                &opt_text(&|r| r.intention.related_key.as_ref().map(|k| k.to_string())),
                &text(&|r| r.intention.created_by.clone()),
                &opt_text(&|r| r.intention.authorized_by.clone()),
                &opt_text(&|r| r.intention.reason.clone()),
            ],
        )?;
        Ok(out.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Closes attempts, or annotates ones already closed.
    pub fn write_attempts(&self, rows: &[AttemptWrite]) -> Result<()> {
        let mut tx = self.tx.borrow_mut();
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
                    tx.execute(
                        "UPDATE attempts SET ended_at = $2, outcome = $3, http_status = $4, command_id = $5,
                             message_id = $6, error_code = $7, error_detail = $8 WHERE id = $1",
                        &[
                            attempt_id,
                            &ms(*at),
                            &outcome.as_str(),
                            &http_status.map(i64::from),
                            command_id,
                            message_id,
                            error_code,
                            error_detail,
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
                    tx.execute(
                        "UPDATE attempts SET command_id = coalesce(command_id, $2),
                             message_id = coalesce(message_id, $3), http_status = coalesce(http_status, $4),
                             error_detail = coalesce(error_detail || '; ', '') || $5 WHERE id = $1",
                        &[attempt_id, command_id, message_id, &http_status.map(i64::from), note],
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Stores the channel's references on intentions (a newer value wins).
    pub fn set_channel_refs(&self, rows: &[(i64, Option<String>, Option<String>)]) -> Result<()> {
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let commands: Vec<Option<String>> = rows.iter().map(|r| r.1.clone()).collect();
        let messages: Vec<Option<String>> = rows.iter().map(|r| r.2.clone()).collect();
        self.tx.borrow_mut().execute(
            "UPDATE intentions i SET provider_command_id = coalesce(v.command, i.provider_command_id),
                 provider_message_id = coalesce(v.message, i.provider_message_id)
             FROM unnest($1::int8[], $2::text[], $3::text[]) AS v(id, command, message) WHERE i.id = v.id",
            &[&ids, &commands, &messages],
        )?;
        Ok(())
    }

    /// Sets (or clears) when intentions are due again.
    pub fn set_next_attempt(&self, rows: &[(i64, Option<DateTime<Utc>>)], at: DateTime<Utc>) -> Result<()> {
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let next: Vec<Option<i64>> = rows.iter().map(|r| r.1.map(ms)).collect();
        self.tx.borrow_mut().execute(
            "UPDATE intentions i SET next_attempt_at = v.next, updated_at = $3
             FROM unnest($1::int8[], $2::int8[]) AS v(id, next) WHERE i.id = v.id",
            &[&ids, &next, &ms(at)],
        )?;
        Ok(())
    }

    /// Adds `by` to a named counter.
    pub fn bump_counter(&self, counter: Counter, by: i64) -> Result<()> {
        self.tx.borrow_mut().execute(
            "INSERT INTO counters(name, value) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
            &[&counter.name(), &by],
        )?;
        Ok(())
    }
}
