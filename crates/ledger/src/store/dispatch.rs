//! The dispatcher's rows: due intentions with the facts validity reads (one
//! query for a whole batch), attempts written before the channel is
//! contacted (with the claim's lease), when an intention is due again, and
//! the facts the pre-send check compares. What to do with them is decided
//! in `unavez-app` (`dispatch::claim`, `dispatch::presend`).

use std::collections::HashMap;
use std::ops::Range;

use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params, params_from_iter};

use super::intents::{INTENTION_COLS, intention_row};
use super::ledger::contact_row_from;
use super::{Result, StoreError, Tx, from_ms, ms};
use crate::api::{ClaimFacts, ClaimScope, NewAttempt, NewClaim};
use crate::domain::commitment::CommitmentKind;
use crate::domain::history::Record;
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

/// Ids as one JSON array, for `IN (SELECT value FROM json_each(?))`: the
/// statement's text stays the same whatever the batch size, so it is
/// prepared once and stays in the statement cache (a list of `?` marks
/// would be a new statement, parsed again, for every size).
pub(super) fn id_list(ids: &[i64]) -> String {
    let mut s = String::with_capacity(ids.len() * 8 + 2);
    s.push('[');
    for (n, id) in ids.iter().enumerate() {
        if n > 0 {
            s.push(',');
        }
        s.push_str(&id.to_string());
    }
    s.push(']');
    s
}

/// Splits `n` rows into runs of 128, 64, 32, … 1 rows, so that a
/// multi-row statement has at most eight texts per kind, each prepared
/// once and kept in the statement cache.
pub(super) fn runs(n: usize) -> impl Iterator<Item = Range<usize>> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let left = n - start;
        if left == 0 {
            return None;
        }
        let size = if left >= 128 { 128 } else { 1 << left.ilog2() };
        start += size;
        Some(start - size..start)
    })
}

/// `rows` groups of `cols` `?` marks: the `VALUES` of a multi-row statement.
pub(super) fn values_rows(cols: usize, rows: usize) -> String {
    let row = format!("({})", vec!["?"; cols].join(","));
    vec![row.as_str(); rows].join(",")
}

/// A state move's `(id, from_state, to_state, reason, at)`.
fn move_values(r: &Record) -> [Value; 5] {
    [
        r.intention_id.into(),
        Value::from(r.from.map(|s| s.as_str().to_string())),
        Value::Text(r.to.as_str().to_string()),
        Value::from(r.reason.clone()),
        ms(r.at).into(),
    ]
}

fn lease_of(a: &NewAttempt) -> (Value, Value) {
    match &a.lease {
        Some((o, u)) => (Value::Text(o.clone()), ms(*u).into()),
        None => (Value::Null, Value::Null),
    }
}

/// The `IN` operand for [`id_list`] bound at `?N`.
pub(super) const IN_IDS: &str = "SELECT value FROM json_each";

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
             WHERE i.id IN ({IN_IDS}(?2))"
        );
        let start = day_start.map(ms);
        let mut stmt = self.conn()?.prepare_cached(&sql)?;
        let mut by_id: HashMap<i64, ClaimFacts> = stmt
            .query_map(params![start, id_list(ids)], |r| {
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

    /// Writes attempts (with the lease of a claim) in a few set-based
    /// statements; returns their ids in the order given.
    pub fn start_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>> {
        for run in runs(rows.len()) {
            let sql = format!(
                "WITH v(id, n, at, owner, until) AS (VALUES {})
                 UPDATE intentions SET attempt_count = v.n, updated_at = v.at,
                     lease_owner = coalesce(v.owner, lease_owner), lease_until = coalesce(v.until, lease_until),
                     next_attempt_at = CASE WHEN v.owner IS NULL THEN next_attempt_at ELSE NULL END
                 FROM v WHERE intentions.id = v.id",
                values_rows(5, run.len())
            );
            let mut values = Vec::with_capacity(run.len() * 5);
            for a in &rows[run] {
                let (owner, until) = lease_of(a);
                values.extend([a.intention_id.into(), a.n.into(), ms(a.at).into(), owner, until]);
            }
            self.conn()?.prepare_cached(&sql)?.execute(params_from_iter(values))?;
        }
        self.insert_attempts(rows)
    }

    /// Claims, set-based: one `UPDATE … FROM (VALUES …)` moves every
    /// intention as its record says (only from the record's `from` state,
    /// else [`StoreError::Moved`]) under its attempt's lease and number;
    /// then the history rows and the attempt rows. Returns the attempt ids
    /// in order.
    pub fn start_claims(&self, claims: &[NewClaim]) -> Result<Vec<i64>> {
        for run in runs(claims.len()) {
            let chunk = &claims[run];
            let sql = format!(
                "WITH v(id, from_state, to_state, reason, at, owner, until, n) AS (VALUES {})
                 UPDATE intentions SET state = v.to_state, state_reason = v.reason, state_changed_at = v.at,
                     updated_at = v.at, lease_owner = v.owner, lease_until = v.until, attempt_count = v.n,
                     next_attempt_at = NULL
                 FROM v WHERE intentions.id = v.id AND intentions.state = v.from_state",
                values_rows(8, chunk.len())
            );
            let mut values: Vec<Value> = Vec::with_capacity(chunk.len() * 8);
            for c in chunk {
                let (r, a) = (&c.record, &c.attempt);
                let (owner, until) = lease_of(a);
                values.extend(move_values(r));
                values.extend([owner, until, a.n.into()]);
            }
            let changed = self.conn()?.prepare_cached(&sql)?.execute(params_from_iter(values))?;
            if changed != chunk.len() {
                return Err(self.first_moved(chunk.iter().map(|c| &c.record)));
            }
        }
        let records: Vec<&Record> = claims.iter().map(|c| &c.record).collect();
        self.insert_history(&records)?;
        let attempts: Vec<NewAttempt> = claims.iter().map(|c| c.attempt.clone()).collect();
        self.insert_attempts(&attempts)
    }

    /// The error for a set-based move that changed fewer rows than asked
    /// (the transaction is rolled back): the first intention that is not
    /// in its record's target state, i.e. was no longer in `from`.
    fn first_moved<'r>(&self, records: impl Iterator<Item = &'r Record>) -> StoreError {
        for r in records {
            let Some(from) = r.from else { continue };
            let now = self.db().row(
                "SELECT state FROM intentions WHERE id = ?1",
                &crate::vals![r.intention_id],
                |row| row.text(0),
            );
            match now {
                Ok(Some(s)) if s == r.to.as_str() => {}
                Ok(_) => {
                    return StoreError::Moved {
                        id: r.intention_id,
                        expected: from,
                    };
                }
                Err(e) => return e.into(),
            }
        }
        StoreError::Corrupt {
            table: "intentions",
            detail: "a set-based state change changed fewer rows than asked".into(),
        }
    }

    /// Moves intentions as applied records say (only from their `from`
    /// state, else [`StoreError::Moved`]; leaving `dispatching` ends the
    /// lease) and appends every record's history row: the rows of
    /// `apply_records`, in one statement per run of rows.
    pub fn apply_records_set(&self, records: &[Record]) -> Result<()> {
        let moves: Vec<&Record> = records.iter().filter(|r| r.applied && r.from.is_some()).collect();
        let mut seen = std::collections::HashSet::with_capacity(moves.len());
        if !moves.iter().all(|r| seen.insert(r.intention_id)) {
            // One intention moved twice: each move must see the previous
            // one, so row by row.
            return self.apply_records(records);
        }
        for run in runs(moves.len()) {
            let chunk = &moves[run];
            let sql = format!(
                "WITH v(id, from_state, to_state, reason, at) AS (VALUES {})
                 UPDATE intentions SET state = v.to_state, state_reason = v.reason, state_changed_at = v.at,
                     updated_at = v.at,
                     lease_owner = CASE WHEN v.to_state = 'dispatching' THEN lease_owner ELSE NULL END,
                     lease_until = CASE WHEN v.to_state = 'dispatching' THEN lease_until ELSE NULL END
                 FROM v WHERE intentions.id = v.id AND intentions.state = v.from_state",
                values_rows(5, chunk.len())
            );
            let mut values: Vec<Value> = Vec::with_capacity(chunk.len() * 5);
            for r in chunk {
                values.extend(move_values(r));
            }
            let changed = self.conn()?.prepare_cached(&sql)?.execute(params_from_iter(values))?;
            if changed != chunk.len() {
                return Err(self.first_moved(chunk.iter().copied()));
            }
        }
        let all: Vec<&Record> = records.iter().collect();
        self.insert_history(&all)
    }

    /// Appends history rows, a multi-row `INSERT` per run.
    fn insert_history(&self, records: &[&Record]) -> Result<()> {
        for run in runs(records.len()) {
            let sql = format!(
                "INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause,
                     evidence, note, commitment_version) VALUES {}",
                values_rows(10, run.len())
            );
            let mut values: Vec<Value> = Vec::with_capacity(run.len() * 10);
            for r in &records[run] {
                values.extend([
                    r.intention_id.into(),
                    ms(r.at).into(),
                    Value::from(r.from.map(|s| s.as_str().to_string())),
                    Value::Text(r.to.as_str().to_string()),
                    i64::from(r.applied).into(),
                    Value::Text(r.said.signal.as_str().to_string()),
                    Value::Text(r.said.cause.as_str().to_string()),
                    Value::from(r.said.evidence.clone()),
                    Value::from(r.said.note.clone()),
                    Value::from(r.said.commitment_version),
                ]);
            }
            self.conn()?.prepare_cached(&sql)?.execute(params_from_iter(values))?;
        }
        Ok(())
    }

    /// Inserts attempt rows, a multi-row `INSERT … RETURNING` per run;
    /// the ids come back in the order given (matched on the unique
    /// `(intention_id, n)`, since `RETURNING` promises no order).
    fn insert_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>> {
        let mut ids: HashMap<(i64, i64), i64> = HashMap::with_capacity(rows.len());
        for run in runs(rows.len()) {
            let sql = format!(
                "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
                 VALUES {} RETURNING id, intention_id, n",
                values_rows(6, run.len())
            );
            let mut values: Vec<Value> = Vec::with_capacity(run.len() * 6);
            for a in &rows[run] {
                values.extend([
                    a.intention_id.into(),
                    a.n.into(),
                    Value::Text(a.worker.clone()),
                    Value::Text(a.channel.clone()),
                    ms(a.at).into(),
                    a.version_checked.into(),
                ]);
            }
            let mut stmt = self.conn()?.prepare_cached(&sql)?;
            let mut q = stmt.query(params_from_iter(values))?;
            while let Some(r) = q.next()? {
                ids.insert((r.get(1)?, r.get(2)?), r.get(0)?);
            }
        }
        rows.iter()
            .map(|a| {
                ids.get(&(a.intention_id, a.n))
                    .copied()
                    .ok_or_else(|| StoreError::Corrupt {
                        table: "attempts",
                        detail: format!("attempt {} of #{} was not written", a.n, a.intention_id),
                    })
            })
            .collect()
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
        let mut stmt = self.conn()?.prepare_cached(&format!(
            "SELECT a.id, a.n, a.ended_at IS NULL, a.commitment_version_checked, i.state, i.lease_owner,
                    i.lease_until, i.purpose, c.version, c.status = 'cancelled'
             FROM attempts a JOIN intentions i ON i.id = a.intention_id JOIN commitments c ON c.id = i.commitment_id
             WHERE a.id IN ({IN_IDS}(?1))"
        ))?;
        let rows = stmt
            .query_map([id_list(attempt_ids)], |r| {
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
