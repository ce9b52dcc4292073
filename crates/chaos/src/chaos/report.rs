//! The run's report: what happened (faults injected, whether each one did
//! what it must), the checker's verdict, and where the evidence is. The
//! JSON form keeps four keys: `stats`, `verdict`, `integrity`, `dir`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::check::{self, Verdict};

/// What happened during the run, beside the checker's verdict.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunStats {
    pub plan_fingerprint: String,
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// The ledger: the file, or the PostgreSQL URL with the run's schema
    /// (no password), to inspect it.
    pub ledger: String,
    /// A PostgreSQL run's schema was kept (asked for, or the run failed).
    pub schema_kept: Option<bool>,
    /// Dispatcher processes on the one ledger.
    pub dispatchers: usize,
    pub waves: usize,
    pub events_imported: usize,
    /// Dispatcher processes SIGKILLed at random moments.
    pub random_kills: u32,
    /// Failpoint waves whose dispatcher aborted at the armed step.
    pub failpoints_fired: BTreeMap<String, bool>,
    /// Store-fault waves whose dispatchers were all still running at the end.
    pub store_faults_survived: BTreeMap<String, bool>,
    /// `pg_terminate_backend` of a dispatcher's connections (PostgreSQL).
    pub terminations: Vec<Termination>,
    /// The one dispatcher frozen past its lease.
    pub freeze: Option<Freeze>,
    pub sim_restarts: u32,
    pub lock_holds: u32,
    /// Imports run again because PostgreSQL refused their transaction
    /// (deadlock, serialization failure) and stored nothing.
    pub import_retries: u32,
    /// Engine verdicts "never sent" the simulator forgot to deliver (killed,
    /// or out of tries), posted from its journal while settling.
    pub webhooks_redelivered: usize,
    pub settle_seconds: f64,
    pub settled: bool,
    pub seconds: f64,
}

/// One termination of every connection of one dispatcher.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Termination {
    pub wave: usize,
    pub dispatcher: usize,
    /// Backends terminated.
    pub connections: i64,
    /// Still running when the wave ended it.
    pub survived: bool,
    /// Opened connections again after the termination.
    pub reconnected: bool,
}

impl Termination {
    pub fn ok(&self) -> bool {
        self.connections > 0 && self.survived && self.reconnected
    }
}

/// The freeze: SIGSTOP past the lease, some held appointments rescheduled,
/// SIGCONT.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Freeze {
    pub wave: usize,
    pub dispatcher: usize,
    /// Caught holding claims outside any transaction (else not frozen).
    pub caught: bool,
    /// Intentions it held (`dispatching` under its lease) when frozen.
    pub held: usize,
    /// Appointments of those rescheduled while it was frozen.
    pub rescheduled: usize,
    /// How long it stayed frozen, and its lease.
    pub frozen_ms: u64,
    pub lease_ms: u64,
    /// Messages the engine sent while it was frozen (the other dispatchers
    /// at work).
    pub sent_while_frozen: usize,
    /// Held intentions of a rescheduled appointment that the engine first
    /// received after the change was committed (plus the checker's grace):
    /// sent by someone who no longer owned them. Must be 0; the checker
    /// counts them as wrongly sent too.
    pub held_sent_after_change: usize,
}

/// The full result: statistics, verdict and the integrity check.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub stats: RunStats,
    pub verdict: Verdict,
    /// `PRAGMA integrity_check` on SQLite; on PostgreSQL, which checks its
    /// own pages, `n/a (PostgreSQL)`.
    pub integrity: String,
    pub dir: PathBuf,
}

/// The integrity line of a PostgreSQL run.
pub const PG_INTEGRITY: &str = "n/a (PostgreSQL)";

impl Report {
    /// Non-zero exit: duplicated, lost or wrongly sent above zero, or a
    /// damaged database.
    pub fn failed(&self) -> bool {
        self.verdict.failed() || (self.integrity != "ok" && self.integrity != PG_INTEGRITY)
    }

    /// The human summary `unavez-chaos` prints.
    pub fn render(&self) -> String {
        let s = &self.stats;
        let v = &self.verdict;
        let mut out = String::new();
        let fired: Vec<String> = s
            .failpoints_fired
            .iter()
            .map(|(k, ok)| format!("{k}={}", yes(*ok)))
            .collect();
        let survived: Vec<String> = s
            .store_faults_survived
            .iter()
            .map(|(k, ok)| format!("{k}={}", yes(*ok)))
            .collect();
        out.push_str(&format!(
            "chaos: plan {} · {} · {} dispatcher(s) · {} waves · {} events imported · {} random SIGKILLs · {} simulator restarts · {} write-lock holds\n",
            s.plan_fingerprint,
            s.backend,
            s.dispatchers,
            s.waves,
            s.events_imported,
            s.random_kills,
            s.sim_restarts,
            s.lock_holds
        ));
        out.push_str(&format!(
            "failpoints (dispatcher aborted at the step): {}\n",
            fired.join(" ")
        ));
        out.push_str(&format!(
            "store faults (dispatchers survived): {}\n",
            survived.join(" ")
        ));
        if !s.terminations.is_empty() {
            let t: Vec<String> = s
                .terminations
                .iter()
                .map(|t| format!("w{}/d{}:{}={}", t.wave, t.dispatcher, t.connections, yes(t.ok())))
                .collect();
            out.push_str(&format!(
                "pg_terminate_backend (wave/dispatcher:connections, survived and reconnected): {}\n",
                t.join(" ")
            ));
        }
        if s.import_retries > 0 {
            out.push_str(&format!(
                "imports refused by a deadlock or serialization failure (nothing stored) and run again: {}\n",
                s.import_retries
            ));
        }
        if s.webhooks_redelivered > 0 {
            out.push_str(&format!(
                "engine verdicts \"never sent\" the simulator had not delivered, posted from its journal while settling: {}\n",
                s.webhooks_redelivered
            ));
        }
        if let Some(f) = &s.freeze {
            out.push_str(&format!(
                "freeze (SIGSTOP past the lease): wave {} dispatcher {} caught={} · held {} · {} rescheduled while frozen {:.1} s (lease {:.1} s) · {} sent meanwhile · held and retired, sent after the change: {}\n",
                f.wave,
                f.dispatcher,
                yes(f.caught),
                f.held,
                f.rescheduled,
                f.frozen_ms as f64 / 1000.0,
                f.lease_ms as f64 / 1000.0,
                f.sent_while_frozen,
                f.held_sent_after_change
            ));
        }
        out.push_str(&format!(
            "settled: {} in {:.1} s · total {:.1} s · files in {}\n",
            yes(s.settled),
            s.settle_seconds,
            s.seconds,
            self.dir.display()
        ));
        let kept = match s.schema_kept {
            Some(true) => " (schema kept)",
            Some(false) => " (schema dropped)",
            None => "",
        };
        out.push_str(&format!("ledger: {}{kept}\n", s.ledger));
        let states: Vec<String> = v.states.iter().map(|(k, n)| format!("{k}={n}")).collect();
        out.push_str(&format!("final states: {}\n\n", states.join(" ")));
        out.push_str(&format!("intentions                 {}\n", v.intentions));
        out.push_str(&format!("messages sent              {}\n", v.messages_sent));
        out.push_str(&format!("duplicated                 {}\n", v.duplicated));
        out.push_str(&format!("lost                       {}\n", v.lost));
        out.push_str(&format!("wrongly sent               {}\n", v.wrongly_sent));
        out.push_str(&format!("uncertain left unresolved  {}\n", v.uncertain_unresolved));
        out.push_str(&format!(
            "in flight across a change  {} (first received by the engine before the change committed, or ≤ {} ms after)\n",
            v.in_flight_across_change,
            check::IN_FLIGHT_GRACE_MS
        ));
        out.push_str(&format!("ledger contradicts engine  {}\n", v.contradicted));
        out.push_str(&format!("PRAGMA integrity_check     {}\n", self.integrity));
        if !v.examples.is_empty() {
            out.push_str("\nfindings:\n");
            for e in &v.examples {
                out.push_str(&format!("  {e}\n"));
            }
        }
        out.push_str(if self.failed() {
            "\nRESULT: FAIL\n"
        } else {
            "\nRESULT: PASS\n"
        });
        out
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}
