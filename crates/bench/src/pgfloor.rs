//! The PostgreSQL dispatch floor (issue 29): the rows a dispatched
//! message writes, and nothing else, on the same ledger schema in the same
//! run as the dispatcher and River.
//!
//! Why it exists: River's job is two versions of one row; a unavez
//! message is the evidence the design asks for (an `intentions` version
//! for the claim and one for the result, each an entry in every index the
//! claim, the console and the search read; an attempt written before the
//! request and ended after it; a history row per move; the per-day counts
//! folded at commit). This floor writes exactly those rows in bare SQL —
//! one statement per phase, no reads of facts, no pre-send check, no HTTP,
//! no client logic — in transactions of the dispatcher's batch size, from
//! as many connections as the three-dispatcher row has sessions. What
//! River's figure leaves above it is the cost of the evidence on this
//! schema, which no dispatcher code can win back; what it leaves above the
//! dispatcher is the cost of our logic (see docs/bench-log.md).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use unavez::config::Config;
use unavez::store::KEYED_OFF;
use unavez_testkit::PgSchema;

use crate::dispatch;

/// Connections writing at once: the three-dispatcher row's writing
/// sessions.
pub const FLOOR_CONNECTIONS: usize = 3;

/// One claim: the batch's planned rows in the claim's order, locked with
/// `SKIP LOCKED`, moved to `dispatching` under this connection's lease,
/// with their history rows and their attempts (the rows the dispatcher's
/// claim commits before any request leaves).
const CLAIM: &str = "
WITH c AS (SELECT id, commitment_version FROM intentions WHERE state = 'planned' AND due_at <= $1
           ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED),
u AS (UPDATE intentions i SET state = 'dispatching', state_reason = NULL, state_changed_at = $1,
          updated_at = $1, lease_owner = $3, lease_until = $1 + 60000, attempt_count = i.attempt_count + 1,
          next_attempt_at = NULL
      FROM c WHERE i.id = c.id RETURNING i.id, i.attempt_count, c.commitment_version),
h AS (INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause, commitment_version)
      SELECT id, $1, 'planned', 'dispatching', 1, 'claimed', 'dispatcher', commitment_version FROM u)
INSERT INTO attempts(intention_id, n, worker, channel, started_at, commitment_version_checked)
SELECT id, attempt_count, $3, 'motor', $1, commitment_version FROM u";

/// One batch of results: this connection's attempts ended as accepted,
/// their intentions moved on with the channel's references, a history row
/// each (the rows the dispatcher's result batch commits).
const RESULT: &str = "
WITH d AS (SELECT id FROM intentions WHERE state = 'dispatching' AND lease_owner = $2),
a AS (UPDATE attempts t SET ended_at = $1, outcome = 'accepted', http_status = 200,
          command_id = 'cmd-' || t.id, message_id = 'wamid.' || t.id
      FROM d WHERE t.intention_id = d.id AND t.ended_at IS NULL
      RETURNING t.intention_id, t.command_id, t.message_id),
u AS (UPDATE intentions i SET state = 'accepted', state_reason = NULL, state_changed_at = $1, updated_at = $1,
          lease_owner = NULL, lease_until = NULL, provider_command_id = a.command_id,
          provider_message_id = a.message_id
      FROM a WHERE i.id = a.intention_id AND i.state = 'dispatching' RETURNING i.id, i.commitment_version)
INSERT INTO intention_history(intention_id, at, from_state, to_state, applied, signal, cause, evidence, commitment_version)
SELECT id, $1, 'dispatching', 'accepted', 1, 'accepted', 'dispatcher', 'http 200', commitment_version FROM u";

/// Messages per second of the floor on a fresh ledger of `n` due notices
/// (planned through the same import as the dispatcher's rows), `batch`
/// per claim, [`FLOOR_CONNECTIONS`] connections.
pub fn run(base: &str, tag: &str, n: u64, batch: u32, cfg: &Config) -> anyhow::Result<f64> {
    let schema = PgSchema::in_database(base);
    dispatch::prepare(&PathBuf::from(&schema.url), &format!("f{tag}"), n, cfg)?;
    let t = Instant::now();
    let moved = crate::pg::sum_of_workers(FLOOR_CONNECTIONS, |i| work(&schema.url, &format!("floor-{i}"), batch))?;
    let per_s = moved as f64 / t.elapsed().as_secs_f64();
    if moved != n {
        bail!("the dispatch floor moved {moved} of {n} intentions");
    }
    Ok(per_s)
}

/// Claims and finishes batches until a claim finds nothing; the rows the
/// results moved. As in the dispatcher, a batch's results ride in the
/// transaction of the next claim (one commit for both).
fn work(url: &str, owner: &str, batch: u32) -> anyhow::Result<u64> {
    let mut c = crate::pg::client(url)?;
    // The dispatcher's own session settings (`Store::plan_by_keys`): the
    // same plans for the same kind of statement.
    let keyed: String = KEYED_OFF.iter().map(|name| format!("SET {name} = off;")).collect();
    c.batch_execute(&keyed)?;
    let (claim, result) = (c.prepare(CLAIM)?, c.prepare(RESULT)?);
    let mut moved = 0u64;
    let mut pending = false;
    loop {
        let now = chrono::Utc::now().timestamp_millis();
        let mut tx = c.transaction()?;
        if pending {
            moved += tx.execute(&result, &[&now, &owner])?;
        }
        pending = tx.execute(&claim, &[&now, &i64::from(batch), &owner])? > 0;
        tx.commit()?;
        if !pending {
            return Ok(moved);
        }
    }
}
