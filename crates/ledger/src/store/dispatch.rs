//! The dispatcher's rows: due intentions with the facts validity reads (one
//! query for a whole batch), attempts written before the channel is
//! contacted (with the claim's lease), when an intention is due again, and
//! the facts the pre-send check compares. What to do with them is decided
//! in `unavez-app` (`dispatch::claim`, `dispatch::presend`).

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::ops::Range;

use super::{Result, StoreError, Tx, ms};
use crate::api::{ChannelRefs, ClaimFacts, ClaimScope, NewAttempt, NewClaim};
use crate::domain::commitment::CommitmentKind;
use crate::domain::history::Record;
use crate::domain::state::IntentionState;
use crate::domain::validity::CommitmentFacts;
use crate::rows::{Cols, INTENTION_COLS, INTENTION_WIDTH, contact_row, intention_row};
use crate::rules_sql::{self, Sql};
use crate::sql::{Db, Value};
use crate::vals;

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

/// Ids as one JSON array, for [`in_ids`]: the statement's text stays the
/// same whatever the batch size, so it is prepared once and stays in the
/// statement cache (a list of `?` marks would be a new statement, parsed
/// again, for every size).
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

/// The `IN` operand for an [`id_list`] bound at `?n`: each engine's own
/// JSON table function.
pub(super) fn in_ids(db: &Db<'_>, n: usize) -> String {
    if db.is_pg() {
        format!("SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(CAST(?{n} AS TEXT) AS json))")
    } else {
        format!("SELECT value FROM json_each(?{n})")
    }
}

/// Splits `n` rows into runs of 128, 64, 32, … 1 rows, so that a
/// multi-row statement has at most eight texts per kind, each prepared
/// once and kept in the statement cache.
pub(super) fn runs(n: usize) -> impl Iterator<Item = Range<usize>> {
    runs_of(n, 128)
}

/// [`runs`] of at most `max` rows (a power of two).
pub(super) fn runs_of(n: usize, max: usize) -> impl Iterator<Item = Range<usize>> {
    let mut start = 0;
    std::iter::from_fn(move || {
        let left = n - start;
        if left == 0 {
            return None;
        }
        let size = if left >= max { max } else { 1 << left.ilog2() };
        start += size;
        Some(start - size..start)
    })
}

/// The runs a set-based write of `n` rows takes: [`runs`] on SQLite; on
/// PostgreSQL one run of all of them, whose rows travel as one JSON
/// parameter ([`row_source`]), so a batch of any size is one statement
/// and one round trip per kind of row, with one prepared text.
pub(super) fn set_runs(pg: bool, n: usize) -> Box<dyn Iterator<Item = Range<usize>>> {
    if pg {
        Box::new((n > 0).then_some(0..n).into_iter())
    } else {
        Box::new(runs(n))
    }
}

/// The rows of a set-based statement, where `VALUES …` would stand: on
/// SQLite `rows` groups of `?` marks ([`values_rows`]); on PostgreSQL a
/// `SELECT` of the columns (cast to `types`) from the JSON array of
/// arrays bound at `?1` (see [`bind_rows`]), whatever the count. Read as
/// `jsonb`, parsed once: each `->>` of a `json` value parses its row's
/// text again, once per column (64 history rows of ten columns: 0.11-0.23
/// ms as `json`, 0.03-0.06 ms as `jsonb`).
pub(super) fn row_source(pg: bool, types: &[&str], rows: usize) -> String {
    if pg {
        let cols: Vec<String> = types
            .iter()
            .enumerate()
            .map(|(i, t)| format!("CAST(e->>{i} AS {t})"))
            .collect();
        format!(
            "SELECT {} FROM jsonb_array_elements(CAST(CAST(?1 AS TEXT) AS jsonb)) AS e",
            cols.join(",")
        )
    } else {
        format!("VALUES {}", values_rows(types, rows))
    }
}

/// The parameters for [`row_source`]: `flat` (rows of `width` values,
/// one after the other) as they are on SQLite, or one JSON array of
/// arrays on PostgreSQL.
pub(super) fn bind_rows(pg: bool, width: usize, flat: Vec<Value<'_>>) -> Vec<Value<'_>> {
    if !pg {
        return flat;
    }
    let mut json = String::with_capacity(flat.len() * 12 + 2);
    json.push('[');
    for (i, v) in flat.iter().enumerate() {
        json.push_str(match (i % width, i) {
            (0, 0) => "[",
            (0, _) => "],[",
            _ => ",",
        });
        match v {
            Value::Null => json.push_str("null"),
            Value::Int(n) => json.push_str(&n.to_string()),
            Value::Real(r) => json.push_str(&serde_json::Value::from(*r).to_string()),
            Value::Text(t) => json.push_str(&serde_json::Value::from(t.as_ref()).to_string()),
        }
    }
    if !flat.is_empty() {
        json.push(']');
    }
    json.push(']');
    vec![Value::Text(json.into())]
}

/// `rows` groups of `?` marks, one per column, cast to the column's type:
/// the `VALUES` of a multi-row statement. PostgreSQL cannot tell the type
/// of a bare parameter in `VALUES`; the casts say it on both engines.
pub(super) fn values_rows(types: &[&str], rows: usize) -> String {
    let cols: Vec<String> = types.iter().map(|t| format!("CAST(? AS {t})")).collect();
    let row = format!("({})", cols.join(","));
    vec![row.as_str(); rows].join(",")
}

const I: &str = "BIGINT";
const T: &str = "TEXT";

fn move_values(r: &Record) -> [Value<'_>; 5] {
    vals![
        r.intention_id,
        r.from.map(|s| s.as_str()),
        r.to.as_str(),
        r.reason.as_ref(),
        ms(r.at)
    ]
}

fn lease_of(a: &NewAttempt) -> (Value<'_>, Value<'_>) {
    match &a.lease {
        Some((o, u)) => (Value::from(o), ms(*u).into()),
        None => (Value::Null, Value::Null),
    }
}

/// A commitment whose calendar event vanished in a mass disappearance is
/// held (`feed_held`, a person decides): its planned messages wait.
const DUE: &str = "i.state = 'planned' AND i.due_at <= ?1 AND (i.next_attempt_at IS NULL OR i.next_attempt_at <= ?1)
    AND NOT EXISTS (SELECT 1 FROM feed_held h WHERE h.commitment_id = i.commitment_id)";

/// Attempts that may have reached the channel (every outcome but those
/// that prove it never got there: `rules_sql::UNREACHED_OUTCOMES`)
/// started since `?1`.
static COUNTED: Sql = Sql::new(|| {
    format!(
        "a.started_at >= ?1 AND a.outcome NOT IN {}",
        rules_sql::UNREACHED_OUTCOMES
    )
});

fn claim_row(r: &dyn Cols) -> std::result::Result<ClaimFacts, String> {
    let base = INTENTION_WIDTH;
    Ok(ClaimFacts {
        intention: intention_row(r)?,
        commitment: CommitmentFacts {
            kind: CommitmentKind::parse(&r.text(base)?).unwrap_or(CommitmentKind::Appointment),
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
}

/// Whether intention `of` has an attempt matching `cond` (on `a`), as a
/// scalar probe with `LIMIT 1`, not an `EXISTS`: PostgreSQL may run an
/// `EXISTS` in the select list as a hashed subplan, which reads every
/// attempt of the ledger once per claim (and chose it in the dispatch
/// bench, on statistics taken before the attempts existed); a scalar
/// subquery is always probed per row, through the `(intention_id, n)` key,
/// so a claim costs the same whatever the ledger holds.
fn has_attempt(of: &str, cond: &str) -> String {
    format!("(SELECT 1 FROM attempts a WHERE a.intention_id = {of} AND {cond} LIMIT 1) IS NOT NULL")
}

impl Tx<'_> {
    /// Due intentions, oldest due first. On PostgreSQL the rows are locked
    /// for this transaction and rows another host is claiming are skipped
    /// (`FOR UPDATE SKIP LOCKED`); a row committed meanwhile as
    /// `dispatching` fails the `WHERE`, which PostgreSQL re-checks on the
    /// newest version before locking. SQLite's `BEGIN IMMEDIATE` already
    /// makes the claim the only writer.
    pub fn due_ids(&self, scope: &ClaimScope, limit: u32, now: DateTime<Utc>) -> Result<Vec<i64>> {
        let db = self.db();
        let lock = if db.is_pg() { " FOR UPDATE SKIP LOCKED" } else { "" };
        Ok(match scope {
            ClaimScope::Due => {
                if db.is_pg() {
                    // The scan must walk `intentions_due` in order and stop
                    // at the batch (migration 0013). On statistics that
                    // count few planned rows (most likely taken by
                    // autovacuum mid-dispatch), PostgreSQL preferred a
                    // bitmap scan of that index and a sort: it visits the
                    // heap page of every entry, those of rows claimed
                    // since the last vacuum included (a bitmap scan never
                    // marks an entry dead, an index scan does), so each
                    // claim cost as much as the backlog. For the rest of
                    // this transaction only.
                    db.exec("SET LOCAL enable_bitmapscan = off", &[])?;
                }
                db.rows(
                    &format!("SELECT i.id FROM intentions i WHERE {DUE} ORDER BY i.due_at, i.id LIMIT ?2{lock}"),
                    &vals![ms(now), limit],
                    |r| r.int(0),
                )?
            }
            ClaimScope::Ids(wanted) => {
                let sql = format!("SELECT i.id FROM intentions i WHERE i.id = ?2 AND {DUE}{lock}");
                let mut out = Vec::new();
                for id in wanted {
                    if out.len() >= limit as usize {
                        break;
                    }
                    if let Some(id) = db.row(&sql, &vals![ms(now), *id], |r| r.int(0))? {
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
        let db = self.db();
        // The contact is the commitment's, else the one with the recipient's
        // phone (a resend to a number the commitment does not name).
        let sql = format!(
            "SELECT {INTENTION_COLS}, c.kind, c.status = 'cancelled', c.version, c.starts_at, c.confirmed_at,
                    c.manual_contact_at, k.id, k.phone, k.name, k.language, k.consent_marketing,
                    k.opt_out_marketing_at, k.opt_out_transactional_at, k.last_inbound_at,
                    {acknowledged},
                    CASE WHEN CAST(?1 AS BIGINT) IS NULL THEN 0 ELSE (SELECT count(*) FROM intentions o
                        WHERE o.recipient = i.recipient AND o.id != i.id AND {other_counted}) END,
                    CASE WHEN CAST(?1 AS BIGINT) IS NULL THEN 0 ELSE CASE WHEN {counted} THEN 1 ELSE 0 END END
             FROM intentions i JOIN commitments c ON c.id = i.commitment_id
             LEFT JOIN contacts k ON k.id = coalesce(c.contact_id, (SELECT id FROM contacts WHERE phone = i.recipient))
             WHERE i.id IN ({})",
            in_ids(&db, 2),
            acknowledged = has_attempt("i.id", &format!("a.outcome IN {}", rules_sql::ACKNOWLEDGED_OUTCOMES)),
            other_counted = has_attempt("o.id", &COUNTED),
            counted = has_attempt("i.id", &COUNTED),
        );
        let mut by_id: HashMap<i64, ClaimFacts> = db
            .rows(&sql, &vals![day_start.map(ms), id_list(ids)], claim_row)?
            .into_iter()
            .map(|f| (f.intention.id, f))
            .collect();
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    /// Writes attempts (with the lease of a claim) in a few set-based
    /// statements; returns their ids in the order given.
    pub fn start_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>> {
        let pg = self.is_pg();
        for run in set_runs(pg, rows.len()) {
            let sql = format!(
                "WITH v(id, n, at, owner, until) AS ({})
                 UPDATE intentions SET attempt_count = v.n, updated_at = v.at,
                     lease_owner = coalesce(v.owner, lease_owner), lease_until = coalesce(v.until, lease_until),
                     next_attempt_at = CASE WHEN v.owner IS NULL THEN next_attempt_at ELSE NULL END
                 FROM v WHERE intentions.id = v.id",
                row_source(pg, &[I, I, I, T, I], run.len())
            );
            let mut values = Vec::with_capacity(run.len() * 5);
            for a in &rows[run] {
                let (owner, until) = lease_of(a);
                values.extend([a.intention_id.into(), a.n.into(), ms(a.at).into(), owner, until]);
            }
            self.db().exec(&sql, &bind_rows(pg, 5, values))?;
        }
        self.insert_attempts(rows)
    }

    /// Claims, set-based: one `UPDATE … FROM (VALUES …)` moves every
    /// intention as its record says (only from the record's `from` state,
    /// else [`StoreError::Moved`]) under its attempt's lease and number;
    /// then the history rows and the attempt rows. Returns the attempt ids
    /// in order.
    pub fn start_claims(&self, claims: &[NewClaim]) -> Result<Vec<i64>> {
        let pg = self.is_pg();
        for run in set_runs(pg, claims.len()) {
            let chunk = &claims[run];
            let sql = format!(
                "WITH v(id, from_state, to_state, reason, at, owner, until, n) AS ({})
                 UPDATE intentions SET state = v.to_state, state_reason = v.reason, state_changed_at = v.at,
                     updated_at = v.at, lease_owner = v.owner, lease_until = v.until, attempt_count = v.n,
                     next_attempt_at = NULL
                 FROM v WHERE intentions.id = v.id AND intentions.state = v.from_state",
                row_source(pg, &[I, T, T, T, I, T, I, I], chunk.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(chunk.len() * 8);
            for c in chunk {
                let (r, a) = (&c.record, &c.attempt);
                let (owner, until) = lease_of(a);
                values.extend(move_values(r));
                values.extend([owner, until, a.n.into()]);
            }
            let changed = self.db().exec(&sql, &bind_rows(pg, 8, values))?;
            if changed != chunk.len() {
                return Err(self.stale(self.first_moved(chunk.iter().map(|c| &c.record))));
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
    /// `apply_records`, in one statement per run of rows. With them
    /// [`Tx::set_channel_refs`]'s rows, the
    /// references of a moved intention written by its move: one new
    /// version of the row instead of two (on PostgreSQL each is a copy of
    /// the row and an entry in every index of `intentions`).
    pub fn apply_results_set(&self, records: &[Record], refs: &[ChannelRefs]) -> Result<()> {
        let moves: Vec<&Record> = records.iter().filter(|r| r.applied && r.from.is_some()).collect();
        let mut seen = std::collections::HashSet::with_capacity(moves.len());
        if !moves.iter().all(|r| seen.insert(r.intention_id)) {
            // One intention moved twice: each move must see the previous
            // one, so row by row.
            self.set_channel_refs(refs)?;
            return self.apply_records(records);
        }
        let mut refs_of: HashMap<i64, ChannelRefs> = super::attempts::merge_refs(refs)
            .into_iter()
            .map(|r| (r.0, r))
            .collect();
        let with: Vec<Option<ChannelRefs>> = moves.iter().map(|r| refs_of.remove(&r.intention_id)).collect();
        let alone: Vec<ChannelRefs> = refs.iter().filter_map(|r| refs_of.remove(&r.0)).collect();
        self.set_channel_refs(&alone)?;
        let pg = self.is_pg();
        for run in set_runs(pg, moves.len()) {
            let (chunk, chunk_refs) = (&moves[run.clone()], &with[run]);
            let sql = format!(
                "WITH v(id, from_state, to_state, reason, at, command_id, message_id) AS ({})
                 UPDATE intentions SET state = v.to_state, state_reason = v.reason, state_changed_at = v.at,
                     updated_at = v.at,
                     lease_owner = CASE WHEN v.to_state = 'dispatching' THEN lease_owner ELSE NULL END,
                     lease_until = CASE WHEN v.to_state = 'dispatching' THEN lease_until ELSE NULL END,
                     provider_command_id = coalesce(v.command_id, provider_command_id),
                     provider_message_id = coalesce(v.message_id, provider_message_id)
                 FROM v WHERE intentions.id = v.id AND intentions.state = v.from_state",
                row_source(pg, &[I, T, T, T, I, T, T], chunk.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(chunk.len() * 7);
            for (r, refs) in chunk.iter().zip(chunk_refs) {
                values.extend(move_values(r));
                let (c, m) = refs.as_ref().map_or((None, None), |r| (r.1.as_ref(), r.2.as_ref()));
                values.extend(vals![c, m]);
            }
            let changed = self.db().exec(&sql, &bind_rows(pg, 7, values))?;
            if changed != chunk.len() {
                return Err(self.stale(self.first_moved(chunk.iter().copied())));
            }
        }
        let all: Vec<&Record> = records.iter().collect();
        self.insert_history(&all)
    }

    /// Appends history rows, a multi-row `INSERT` per run.
    pub(super) fn insert_history(&self, records: &[&Record]) -> Result<()> {
        let pg = self.is_pg();
        for run in set_runs(pg, records.len()) {
            let sql = format!(
                "INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause,
                     evidence, note, commitment_version) {}",
                row_source(pg, &[I, I, T, T, I, T, T, T, T, I], run.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(run.len() * 10);
            for r in &records[run] {
                values.extend(vals![
                    r.intention_id,
                    ms(r.at),
                    r.from.map(|s| s.as_str()),
                    r.to.as_str(),
                    r.applied,
                    r.said.signal.as_str(),
                    r.said.cause.as_str(),
                    r.said.evidence.as_ref(),
                    r.said.note.as_ref(),
                    r.said.commitment_version,
                ]);
            }
            self.db().exec(&sql, &bind_rows(pg, 10, values))?;
        }
        Ok(())
    }

    /// Inserts attempt rows, a multi-row `INSERT … RETURNING` per run;
    /// the ids come back in the order given (matched on the unique
    /// `(intention_id, n)`, since `RETURNING` promises no order).
    fn insert_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>> {
        let mut ids: HashMap<(i64, i64), i64> = HashMap::with_capacity(rows.len());
        let pg = self.is_pg();
        for run in set_runs(pg, rows.len()) {
            let sql = format!(
                "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
                 {} RETURNING id, intention_id, n",
                row_source(pg, &[I, I, T, T, I, I], run.len())
            );
            let mut values: Vec<Value<'_>> = Vec::with_capacity(run.len() * 6);
            for a in &rows[run] {
                values.extend(vals![
                    a.intention_id,
                    a.n,
                    &a.worker,
                    &a.channel,
                    ms(a.at),
                    a.version_checked
                ]);
            }
            for (id, intention, n) in self.db().rows(&sql, &bind_rows(pg, 6, values), |r| {
                Ok((r.int(0)?, r.int(1)?, r.int(2)?))
            })? {
                ids.insert((intention, n), id);
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
        for (id, next) in rows {
            self.db().exec(
                "UPDATE intentions SET next_attempt_at = ?2, updated_at = ?3 WHERE id = ?1",
                &vals![*id, next.map(ms), ms(at)],
            )?;
        }
        Ok(())
    }

    /// `cols` of attempts joined to their intention `i` and commitment `c`,
    /// for the attempts in `attempt_ids` (one statement for any count).
    pub(super) fn attempt_rows<T>(
        &self,
        cols: &str,
        attempt_ids: &[i64],
        f: impl FnMut(&dyn Cols) -> std::result::Result<T, String>,
    ) -> Result<Vec<T>> {
        if attempt_ids.is_empty() {
            return Ok(Vec::new());
        }
        let db = self.db();
        let sql = format!(
            "SELECT {cols} FROM attempts a JOIN intentions i ON i.id = a.intention_id
             JOIN commitments c ON c.id = i.commitment_id WHERE a.id IN ({})",
            in_ids(&db, 1)
        );
        Ok(db.rows(&sql, &vals![id_list(attempt_ids)], f)?)
    }

    /// The facts the pre-send check compares, for every attempt in
    /// `attempt_ids` (missing ids are simply absent). Read-only: run it on
    /// a reader connection, so it never queues behind the writer.
    pub fn presend_facts(&self, attempt_ids: &[i64]) -> Result<Vec<PresendFacts>> {
        Ok(self
            .presend_rows(attempt_ids, false)?
            .into_iter()
            .map(|(f, _)| f)
            .collect())
    }

    /// [`Tx::presend_facts`] and the ledger's clock ([`Tx::clock`]) to
    /// compare the leases with: on PostgreSQL the server's clock comes
    /// back with the rows, one round trip instead of two (the pre-send
    /// check asks for every few messages that leave).
    pub fn presend_facts_now(&self, attempt_ids: &[i64]) -> Result<(Vec<PresendFacts>, DateTime<Utc>)> {
        if !self.is_pg() {
            return Ok((self.presend_facts(attempt_ids)?, self.clock(Utc::now())?));
        }
        let rows = self.presend_rows(attempt_ids, true)?;
        let now = match rows.first() {
            Some((_, Some(ms))) => super::from_ms(*ms),
            _ => self.clock(Utc::now())?,
        };
        Ok((rows.into_iter().map(|(f, _)| f).collect(), now))
    }

    /// The pre-send facts, with the server's clock in milliseconds on
    /// every row when `with_clock` (PostgreSQL's `unavez_now_ms()`).
    fn presend_rows(&self, attempt_ids: &[i64], with_clock: bool) -> Result<Vec<(PresendFacts, Option<i64>)>> {
        let extra = if with_clock { ", unavez_now_ms()" } else { "" };
        self.attempt_rows(
            &format!(
                "a.id, a.n, a.ended_at IS NULL, a.commitment_version_checked, i.state, i.lease_owner,
                 i.lease_until, i.purpose, c.version, c.status = 'cancelled'{extra}"
            ),
            attempt_ids,
            |r| {
                let at = if with_clock { Some(r.int(10)?) } else { None };
                Ok((
                    PresendFacts {
                        attempt_id: r.int(0)?,
                        n: r.int(1)?,
                        attempt_open: r.flag(2)?,
                        version_checked: r.int(3)?,
                        state: r.state(4)?,
                        lease_owner: r.opt_text(5)?,
                        lease_until: r.opt_time(6)?,
                        purpose: r.text(7)?,
                        commitment_version: r.int(8)?,
                        commitment_cancelled: r.flag(9)?,
                    },
                    at,
                ))
            },
        )
    }
}
