//! Read-only views of the ledger for the chaos harness's history checker
//! (`crate::chaos::check`): every intention with its first claim, the
//! booking changes that raised each commitment's version (with the time the
//! import that applied them stamped on them), and the final commitments.
//! Free functions over a connection (`store::open_connection`): the ledger
//! itself ships no test tools, and this SQL only reads.

use rusqlite::{Connection, Result, params};

/// One intention as the checker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedIntention {
    pub id: i64,
    pub key: String,
    pub commitment_id: i64,
    pub commitment_ref: String,
    pub version: i64,
    pub purpose: String,
    pub state: String,
    pub state_reason: Option<String>,
    /// History id of the first successful claim (validity passed), if any.
    pub first_claim: Option<i64>,
    /// Attempts recorded for it.
    pub attempts: i64,
    /// When it falls due (ms since the epoch), and when a deferral or
    /// backoff lets it be claimed again.
    pub due_at_ms: i64,
    pub next_attempt_at_ms: Option<i64>,
}

/// A booking change that raised a commitment to `version`, as the ledger's
/// event log recorded it. `received_at_ms` is the importing process's clock
/// when it began (before its transaction could start); the harness turns it
/// into a commit time with its own record of when that import finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionChange {
    pub commitment_id: i64,
    pub version: i64,
    pub event_id: String,
    pub received_at_ms: i64,
}

/// A commitment's final state, for the model check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCommitment {
    pub reference: String,
    pub version: i64,
    pub status: String,
}

/// Every intention with its first claim and attempt count.
pub fn intentions(c: &Connection) -> Result<Vec<CheckedIntention>> {
    let mut stmt = c.prepare(
        "SELECT i.id, i.key, i.commitment_id, c.ref, i.commitment_version, i.purpose, i.state, i.state_reason,
                (SELECT min(h.id) FROM intention_history h
                  WHERE h.intention_id = i.id AND h.signal = 'claim' AND h.applied = 1),
                (SELECT count(*) FROM attempts a WHERE a.intention_id = i.id),
                i.due_at, i.next_attempt_at
         FROM intentions i JOIN commitments c ON c.id = i.commitment_id
         ORDER BY i.id",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(CheckedIntention {
                id: r.get(0)?,
                key: r.get(1)?,
                commitment_id: r.get(2)?,
                commitment_ref: r.get(3)?,
                version: r.get(4)?,
                purpose: r.get(5)?,
                state: r.get(6)?,
                state_reason: r.get(7)?,
                first_claim: r.get(8)?,
                attempts: r.get(9)?,
                due_at_ms: r.get(10)?,
                next_attempt_at_ms: r.get(11)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Every applied booking event that set a commitment's version, the
/// first one per commitment and version.
pub fn version_changes(c: &Connection) -> Result<Vec<VersionChange>> {
    let mut stmt = c.prepare(
        "SELECT c.id, e.version_after, e.event_id, e.received_at
         FROM commitment_events e JOIN commitments c ON c.ref = e.commitment_ref
         WHERE e.effect = 'applied' AND e.version_after IS NOT NULL
         ORDER BY e.id",
    )?;
    let rows: Vec<VersionChange> = stmt
        .query_map([], |r| {
            Ok(VersionChange {
                commitment_id: r.get(0)?,
                version: r.get(1)?,
                event_id: r.get(2)?,
                received_at_ms: r.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut seen = std::collections::HashSet::new();
    Ok(rows
        .into_iter()
        .filter(|c| seen.insert((c.commitment_id, c.version)))
        .collect())
}

/// Every commitment's final version and status.
pub fn commitments(c: &Connection) -> Result<Vec<CheckedCommitment>> {
    let mut stmt = c.prepare("SELECT ref, version, status FROM commitments ORDER BY id")?;
    let rows = stmt
        .query_map([], |r| {
            Ok(CheckedCommitment {
                reference: r.get(0)?,
                version: r.get(1)?,
                status: r.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Whether a booking event id is in the log.
pub fn has_event(c: &Connection, event_id: &str) -> Result<bool> {
    let n: i64 = c
        .prepare_cached("SELECT count(*) FROM commitment_events WHERE event_id = ?1")?
        .query_row(params![event_id], |r| r.get(0))?;
    Ok(n > 0)
}
