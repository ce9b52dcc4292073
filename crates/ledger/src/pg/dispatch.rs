//! The claim's rows on PostgreSQL, with the same contract as the SQLite
//! `LedgerTx` methods of the same names: which planned intentions are due
//! (locked for this transaction, skipping those another host is claiming),
//! attempts with their lease, and history rows that move an intention only
//! from the state the caller read.

use chrono::{DateTime, Utc};

use super::{PgError, PgTx, Result};
use crate::api::{ClaimScope, NewAttempt};
use crate::domain::history::Record;
use crate::store::ms;

/// Due means planned, due and not waiting for a retry, by the database's
/// clock (`$1` is read from it by the caller: [`PgTx::now`]).
const DUE: &str = "state = 'planned' AND due_at <= $1 AND (next_attempt_at IS NULL OR next_attempt_at <= $1)";

impl PgTx<'_> {
    /// The database's clock as the ledger's time type. A claim reads `now`
    /// here, so leases and due times on a shared ledger follow one clock.
    pub fn now(&self) -> Result<DateTime<Utc>> {
        Ok(crate::store::from_ms(self.now_ms()?))
    }

    /// Ids of due intentions, oldest due first, at most `limit`, locked
    /// until this transaction ends. Rows another transaction has locked
    /// are skipped, not waited for; a row committed meanwhile as
    /// `dispatching` fails the `WHERE`, which PostgreSQL re-checks on the
    /// newest row version before locking it.
    pub fn due_ids(&self, scope: &ClaimScope, limit: u32, now: DateTime<Utc>) -> Result<Vec<i64>> {
        let limit = i64::from(limit);
        let rows = match scope {
            ClaimScope::Due => self.tx.borrow_mut().query(
                &format!("SELECT id FROM intentions WHERE {DUE} ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED"),
                &[&ms(now), &limit],
            )?,
            ClaimScope::Ids(ids) => self.tx.borrow_mut().query(
                &format!(
                    "SELECT id FROM intentions WHERE {DUE} AND id = ANY($3)
                     ORDER BY array_position($3, id) LIMIT $2 FOR UPDATE SKIP LOCKED"
                ),
                &[&ms(now), &limit, ids],
            )?,
        };
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Writes attempts (with a claim's lease) in one statement per kind of
    /// row; returns their ids in the order given.
    pub fn start_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = rows.iter().map(|a| a.intention_id).collect();
        let ns: Vec<i64> = rows.iter().map(|a| a.n).collect();
        let ats: Vec<i64> = rows.iter().map(|a| ms(a.at)).collect();
        let owners: Vec<Option<String>> = rows.iter().map(|a| a.lease.as_ref().map(|l| l.0.clone())).collect();
        let untils: Vec<Option<i64>> = rows.iter().map(|a| a.lease.as_ref().map(|l| ms(l.1))).collect();
        let workers: Vec<&str> = rows.iter().map(|a| a.worker.as_str()).collect();
        let channels: Vec<&str> = rows.iter().map(|a| a.channel.as_str()).collect();
        let versions: Vec<i64> = rows.iter().map(|a| a.version_checked).collect();
        let mut tx = self.tx.borrow_mut();
        tx.execute(
            "UPDATE intentions i SET attempt_count = v.n, updated_at = v.at,
                 lease_owner = coalesce(v.owner, i.lease_owner), lease_until = coalesce(v.until, i.lease_until),
                 next_attempt_at = CASE WHEN v.owner IS NULL THEN i.next_attempt_at ELSE NULL END
             FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::text[], $5::int8[]) AS v(id, n, at, owner, until)
             WHERE i.id = v.id",
            &[&ids, &ns, &ats, &owners, &untils],
        )?;
        let out = tx.query(
            "INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
             SELECT v.intention_id, v.n, v.worker, v.channel, v.started_at, v.version
             FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::int8[], $6::int8[])
                 AS v(intention_id, n, worker, channel, started_at, version)
             RETURNING id, intention_id, n",
            &[&ids, &ns, &workers, &channels, &ats, &versions],
        )?;
        // (intention, n) is unique: match the new ids to the rows given.
        let by_attempt: std::collections::HashMap<(i64, i64), i64> =
            out.iter().map(|r| ((r.get(1), r.get(2)), r.get(0))).collect();
        Ok(rows.iter().map(|a| by_attempt[&(a.intention_id, a.n)]).collect())
    }

    /// Appends history rows; an applied row with a `from` state moves its
    /// intention only if it is still in `from` (else [`PgError::Moved`]).
    pub fn apply_records(&self, records: &[Record]) -> Result<()> {
        let mut tx = self.tx.borrow_mut();
        for r in records.iter().filter(|r| r.applied) {
            let Some(from) = r.from else { continue };
            let changed = tx.execute(
                "UPDATE intentions SET state = $2, state_reason = $3, state_changed_at = $4, updated_at = $4,
                     lease_owner = CASE WHEN $2 = 'dispatching' THEN lease_owner ELSE NULL END,
                     lease_until = CASE WHEN $2 = 'dispatching' THEN lease_until ELSE NULL END
                 WHERE id = $1 AND state = $5",
                &[&r.intention_id, &r.to.as_str(), &r.reason, &ms(r.at), &from.as_str()],
            )?;
            if changed == 0 {
                return Err(PgError::Moved {
                    id: r.intention_id,
                    expected: from.as_str(),
                });
            }
        }
        if records.is_empty() {
            return Ok(());
        }
        let col = |f: &dyn Fn(&Record) -> Option<String>| records.iter().map(f).collect::<Vec<_>>();
        let ids: Vec<i64> = records.iter().map(|r| r.intention_id).collect();
        let ats: Vec<i64> = records.iter().map(|r| ms(r.at)).collect();
        let applied: Vec<i64> = records.iter().map(|r| i64::from(r.applied)).collect();
        let versions: Vec<Option<i64>> = records.iter().map(|r| r.said.commitment_version).collect();
        tx.execute(
            "INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause,
                 evidence, note, commitment_version)
             SELECT v.a, v.b, v.c, v.d, v.e, v.f, v.g, v.h, v.i, v.j
             FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::int8[], $6::text[],
                 $7::text[], $8::text[], $9::text[], $10::int8[]) WITH ORDINALITY AS v(a, b, c, d, e, f, g, h, i, j, ord)
             ORDER BY v.ord",
            &[
                &ids,
                &ats,
                &col(&|r| r.from.map(|s| s.as_str().to_string())),
                &col(&|r| Some(r.to.as_str().to_string())),
                &applied,
                &col(&|r| Some(r.said.signal.as_str().to_string())),
                &col(&|r| Some(r.said.cause.as_str().to_string())),
                &col(&|r| r.said.evidence.clone()),
                &col(&|r| r.said.note.clone()),
                &versions,
            ],
        )?;
        Ok(())
    }
}
