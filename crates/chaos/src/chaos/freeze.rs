//! The freeze: one dispatcher stopped with SIGSTOP while it holds claims;
//! some of the appointments it holds are rescheduled at once, it stays
//! frozen past its lease, then it is thawed with SIGCONT. It must send nothing it no
//! longer owns, nor anything for the version the change retired; the
//! others keep working meanwhile. The checker judges that from the
//! engine's records (the change's commit time against the engine's first
//! receipt of each key); [`Frozen::held_sent_after_change`] says it for
//! the held intentions alone.
//!
//! It is frozen only outside every transaction ([`Backend::outside_transactions`]):
//! frozen inside one, it would hold row locks (PostgreSQL) or the write lock
//! (SQLite) that the rescheduling import would wait for until the thaw —
//! a different fault, whose only lesson is that locks wait.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::backend::Backend;
use super::evidence::{self, ImportWindow, read_sent};
use super::procs::{self, Env};
use super::report::Freeze;
use super::{ChaosError, check};
use crate::domain::commitment::CommitmentStatus;
use crate::domain::state::IntentionState;
use crate::store::{IntentFilter, Store, StoreError};

/// The failpoints of the dispatcher to be frozen: every claimed message
/// waits a second between its claim and its pre-send check (as behind a
/// busy runtime or a slow store), so it holds claims long enough to be
/// caught, and is frozen in the very window the pre-send check guards.
pub const HOLD_CLAIMS: &str = "before_send:1:sleep=1000:1000000";

/// How long the harness tries to catch the dispatcher holding claims
/// outside a transaction.
const CATCH_FOR: Duration = Duration::from_secs(20);

/// What the freeze did, and what the model must learn from it.
pub struct Frozen {
    pub stats: Freeze,
    /// Appointments rescheduled while frozen (one version more each).
    pub rescheduled: Vec<String>,
    /// The booking events imported for them.
    pub event_ids: Vec<String>,
    /// Keys it held of the rescheduled appointments, and when the change
    /// was committed.
    held_retired: Vec<String>,
    change_committed_ms: i64,
}

impl Frozen {
    /// Counts the held, retired keys the engine first received after the
    /// change (past the checker's grace), from its journal in `dir`.
    pub fn held_sent_after_change(&self, dir: &Path) -> Result<usize, ChaosError> {
        let receipts = evidence::read_receipts(&dir.join("engine-state.jsonl"))?;
        Ok(self
            .held_retired
            .iter()
            .filter(|k| {
                receipts
                    .get(k.as_str())
                    .is_some_and(|t| *t > self.change_committed_ms + check::IN_FLIGHT_GRACE_MS)
            })
            .count())
    }
}

/// Everything the freeze works with.
pub struct Ctx<'a> {
    pub env: &'a Env,
    pub backend: &'a Backend,
    pub store: &'a mut Store,
    pub wave: usize,
    pub dispatcher: usize,
    pub lease: Duration,
}

/// Runs the freeze on `child` (dispatcher `cx.dispatcher`); `caught` is
/// false (and nothing rescheduled) when it was never caught holding a claim
/// outside a transaction.
pub fn freeze(mut cx: Ctx<'_>, child: &mut Child) -> Result<Frozen, ChaosError> {
    let mut stats = Freeze {
        wave: cx.wave,
        dispatcher: cx.dispatcher,
        lease_ms: cx.lease.as_millis() as u64,
        ..Default::default()
    };
    let role = format!("dispatcher-{}", cx.dispatcher);
    let owner = format!("dispatcher-{}-", child.id());
    let sent = |env: &Env| read_sent(&env.dir.join("sent.jsonl")).map(|s| s.len());
    let deadline = Instant::now() + CATCH_FOR;
    let held = loop {
        if Instant::now() > deadline || !procs::alive(child) {
            return Ok(Frozen {
                stats,
                rescheduled: Vec::new(),
                event_ids: Vec::new(),
                held_retired: Vec::new(),
                change_committed_ms: 0,
            });
        }
        if held_by(cx.store, &owner)?.is_empty() {
            std::thread::sleep(Duration::from_millis(23));
            continue;
        }
        procs::signal(child, "STOP");
        // What it sent before the signal has reached the server by now.
        std::thread::sleep(Duration::from_millis(50));
        let held = held_by(cx.store, &owner)?;
        if !held.is_empty() && cx.backend.outside_transactions(cx.store, &role)? {
            break held;
        }
        procs::signal(child, "CONT");
        std::thread::sleep(Duration::from_millis(37));
    };
    let frozen_at = Instant::now();
    stats.caught = true;
    stats.held = held.len();
    let sent_before = sent(cx.env)?;
    // At once, while its lease still runs: some of what it holds is for a
    // version that no longer exists (the version fences those); then past
    // the lease, so the rest is no longer its own (the lease fences those,
    // and the other dispatchers' reconcilers take them over).
    let (rescheduled, event_ids, window) = reschedule_some(&mut cx, &held)?;
    stats.rescheduled = rescheduled.len();
    std::thread::sleep(cx.lease + Duration::from_secs(1));
    stats.sent_while_frozen = sent(cx.env)? - sent_before;
    procs::signal(child, "CONT");
    stats.frozen_ms = frozen_at.elapsed().as_millis() as u64;
    let retired: BTreeSet<&String> = rescheduled.iter().collect();
    let held_retired = held
        .into_iter()
        .filter(|(_, r)| retired.contains(r))
        .map(|(k, _)| k)
        .collect();
    Ok(Frozen {
        stats,
        rescheduled,
        event_ids,
        held_retired,
        change_committed_ms: window.finished_ms,
    })
}

/// `(key, commitment ref)` of the intentions `owner` (a lease owner
/// prefix: one process) holds.
fn held_by(store: &mut Store, owner: &str) -> Result<Vec<(String, String)>, ChaosError> {
    let rows = store.read(|tx| {
        tx.list_intentions(&IntentFilter {
            states: vec![IntentionState::Dispatching],
            limit: u32::MAX,
            ..Default::default()
        })
    })?;
    Ok(rows
        .into_iter()
        .filter(|r| r.lease_owner.as_deref().is_some_and(|o| o.starts_with(owner)))
        .map(|r| (r.key, r.commitment_ref))
        .collect())
}

/// Reschedules every other appointment among those held (still scheduled,
/// so the change is a new version), 17 minutes later: no planned event
/// moves an appointment by less than 30, so a later one still changes it.
/// Imported by the `unavez import` child like every wave's events, its
/// window logged for the checker.
fn reschedule_some(
    cx: &mut Ctx<'_>,
    held: &[(String, String)],
) -> Result<(Vec<String>, Vec<String>, ImportWindow), ChaosError> {
    let refs: BTreeSet<&String> = held.iter().map(|(_, r)| r).collect();
    let rows = cx.store.read(|tx| {
        refs.iter()
            .map(|r| tx.commitment(r))
            .collect::<Result<Vec<_>, StoreError>>()
    })?;
    let starts: HashMap<String, chrono::DateTime<Utc>> = rows
        .into_iter()
        .flatten()
        .filter(|c| c.commitment.status == CommitmentStatus::Scheduled)
        .filter_map(|c| Some((c.commitment.reference, c.commitment.starts_at?)))
        .collect();
    let chosen: Vec<String> = refs
        .into_iter()
        .filter(|r| starts.contains_key(*r))
        .step_by(2)
        .cloned()
        .collect();
    let mut lines = Vec::new();
    let mut ids = Vec::new();
    for (n, r) in chosen.iter().enumerate() {
        let id = format!("chaos-freeze-{}-{n}", cx.wave);
        let at = starts[r] + chrono::Duration::minutes(17);
        lines.push(
            serde_json::json!({"event_id": id, "type": "appointment.rescheduled", "ref": r, "starts_at": at.to_rfc3339()})
                .to_string(),
        );
        ids.push(id);
    }
    let file = cx.env.dir.join(format!("freeze-wave-{:03}.jsonl", cx.wave));
    std::fs::write(&file, lines.join("\n") + "\n")
        .map_err(|e| ChaosError::Io(format!("writing {}: {e}", file.display())))?;
    let started_ms = Utc::now().timestamp_millis();
    if !chosen.is_empty() {
        cx.env.import(&file)?;
    }
    let window = ImportWindow {
        wave: cx.wave,
        started_ms,
        finished_ms: Utc::now().timestamp_millis(),
    };
    evidence::log_import(&cx.env.dir.join("imports.jsonl"), &window)?;
    Ok((chosen, ids, window))
}
