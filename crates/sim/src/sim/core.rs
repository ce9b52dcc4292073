//! The running simulator: engine memory behind a lock, the ground-truth
//! message log, the state journal, the timers that move commands along and
//! the queue of webhook events.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::engine::{Command, Engine};
use super::faults::{Dice, FaultSpec};
use super::timers::Timers;
use super::{PauseMode, SimError, SimStats, SimTiming};
use crate::channel::motor_event::{MotorEvent, estado};

/// One line of the `--log` file: a message that actually went out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentLine {
    pub key: String,
    pub instance_id: String,
    pub command_id: String,
    pub provider_message_id: String,
    pub recipient: String,
    pub text: String,
    /// RFC 3339, when it went out.
    pub time: String,
}

/// A journal record: the append-only memory behind `--state`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum JournalRecord {
    Command(Box<Command>),
    Generation { instance_id: String, generation: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Step {
    GoOut,
    Resolve,
    Deliver,
    Read,
}

/// Shared by the HTTP handlers, the timers and the webhook sender.
pub struct Core {
    pub dice: Dice,
    pub faults: RwLock<FaultSpec>,
    pub timing: SimTiming,
    /// The only accepted bearer key (`None`: any non-empty one). Rotated
    /// through `POST /sim/api-key`, as an engine operator would.
    pub api_key: RwLock<Option<String>>,
    /// The instances this engine has (`None`: any id is one).
    pub instances: Option<Vec<String>>,
    /// Instances with no phone linked right now.
    pub disconnected: Mutex<std::collections::BTreeSet<String>>,
    pub engine: Mutex<Engine>,
    pub stats: Mutex<SimStats>,
    pub mode: watch::Sender<PauseMode>,
    log: Mutex<Option<File>>,
    sent: Mutex<Vec<SentLine>>,
    journal: Mutex<Option<File>>,
    events: Option<mpsc::UnboundedSender<MotorEvent>>,
    shutdown: watch::Receiver<bool>,
    timers: Timers,
}

/// Locks a mutex even if a panicking thread poisoned it: the simulator's
/// data stays usable (every update is a whole-value replacement).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Core {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        seed: u64,
        faults: FaultSpec,
        timing: SimTiming,
        api_key: Option<String>,
        log_path: Option<&Path>,
        state_path: Option<&Path>,
        events: Option<mpsc::UnboundedSender<MotorEvent>>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Core, SimError> {
        let log = match log_path {
            Some(p) => Some(open_append(p).map_err(|source| SimError::Log {
                path: p.to_path_buf(),
                source,
            })?),
            None => None,
        };
        let mut engine = Engine::default();
        let journal = match state_path {
            Some(p) => {
                replay_journal(p, &mut engine)?;
                Some(open_append(p).map_err(|source| SimError::State {
                    path: p.to_path_buf(),
                    source,
                })?)
            }
            None => None,
        };
        let (mode, _) = watch::channel(PauseMode::Up);
        Ok(Core {
            dice: Dice { seed },
            faults: RwLock::new(faults),
            timing,
            api_key: RwLock::new(api_key),
            instances: None,
            disconnected: Mutex::new(Default::default()),
            engine: Mutex::new(engine),
            stats: Mutex::new(SimStats::default()),
            mode,
            log: Mutex::new(log),
            sent: Mutex::new(Vec::new()),
            journal: Mutex::new(journal),
            events,
            shutdown,
            timers: Timers::new(),
        })
    }

    pub fn faults(&self) -> FaultSpec {
        self.faults.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_faults(&self, f: FaultSpec) {
        *self.faults.write().unwrap_or_else(|p| p.into_inner()) = f;
    }

    /// The accepted bearer key now (`None`: any non-empty one).
    pub fn api_key(&self) -> Option<String> {
        self.api_key.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_api_key(&self, key: Option<String>) {
        *self.api_key.write().unwrap_or_else(|p| p.into_inner()) = key;
    }

    /// Whether the engine has this instance.
    pub fn knows_instance(&self, id: &str) -> bool {
        self.instances.as_ref().is_none_or(|ids| ids.iter().any(|i| i == id))
    }

    pub fn is_disconnected(&self, id: &str) -> bool {
        lock(&self.disconnected).contains(id)
    }

    pub fn sent(&self) -> Vec<SentLine> {
        lock(&self.sent).clone()
    }

    pub fn stats(&self) -> SimStats {
        let mut s = lock(&self.stats).clone();
        let engine = lock(&self.engine);
        s.commands = engine.commands.len() as u64;
        s.by_estado.clear();
        for c in engine.commands.values() {
            *s.by_estado.entry(c.estado.clone()).or_insert(0) += 1;
        }
        s.sent = lock(&self.sent).len() as u64;
        s
    }

    pub fn bump(&self, f: impl FnOnce(&mut SimStats)) {
        f(&mut lock(&self.stats));
    }

    /// A stable command id for a key scope: the same seed and key give the
    /// same id, which keeps runs comparable.
    pub fn command_id(&self, app: &str, instance: &str, key: &str) -> String {
        format!("cmd_{:016x}", self.dice.raw(&["command", app, instance, key]))
    }

    /// Records a changed command durably (journal) and announces it.
    pub fn changed(&self, cmd: &Command, resolves_ambiguous: bool) {
        self.journal(&JournalRecord::Command(Box::new(cmd.clone())));
        self.emit(cmd, resolves_ambiguous);
    }

    pub fn generation_changed(&self, instance_id: &str, generation: i64) {
        self.journal(&JournalRecord::Generation {
            instance_id: instance_id.into(),
            generation,
        });
    }

    fn journal(&self, rec: &JournalRecord) {
        let mut j = lock(&self.journal);
        if let Some(f) = j.as_mut()
            && let Ok(mut line) = serde_json::to_vec(rec)
        {
            line.push(b'\n');
            if let Err(e) = f.write_all(&line) {
                tracing::error!("sim state journal write failed: {e}");
            }
        }
    }

    fn emit(&self, cmd: &Command, resolves_ambiguous: bool) {
        let Some(tx) = &self.events else { return };
        let r = if resolves_ambiguous { "r" } else { "" };
        let ev = MotorEvent {
            event_id: format!(
                "evt_{:016x}",
                self.dice.raw(&["event", &cmd.command_id, &cmd.estado, r])
            ),
            kind: "comando.estado".into(),
            instance_id: cmd.instance_id.clone(),
            command_id: cmd.command_id.clone(),
            idempotency_key: cmd.idempotency_key.clone(),
            estado: cmd.estado.clone(),
            provider_message_id: cmd.provider_message_id.clone(),
            detail: cmd.detail.clone(),
            resolves_ambiguous,
            occurred_at: cmd.updated_at.to_rfc3339_opts(SecondsFormat::Millis, true),
        };
        let _ = tx.send(ev);
    }

    /// Appends one ground-truth line; the file is unbuffered, so each line
    /// reaches the kernel in one write and survives a crash of the process.
    fn log_sent(&self, cmd: &Command, now: DateTime<Utc>) {
        let line = SentLine {
            key: cmd.idempotency_key.clone(),
            instance_id: cmd.instance_id.clone(),
            command_id: cmd.command_id.clone(),
            provider_message_id: cmd.provider_message_id.clone().unwrap_or_default(),
            recipient: cmd.recipient.clone(),
            text: cmd.text.clone(),
            time: now.to_rfc3339_opts(SecondsFormat::Millis, true),
        };
        if let Some(f) = lock(&self.log).as_mut()
            && let Ok(mut bytes) = serde_json::to_vec(&line)
        {
            bytes.push(b'\n');
            if let Err(e) = f.write_all(&bytes).and_then(|_| f.flush()) {
                tracing::error!("sim message log write failed: {e}");
            }
        }
        lock(&self.sent).push(line);
    }

    /// Starts the timers of a command that is not finished (new, or
    /// replayed from the journal).
    pub fn resume_command(self: &Arc<Self>, cmd: &Command) {
        let step = match cmd.estado.as_str() {
            estado::EN_COLA => (Step::GoOut, self.timing.send_ms),
            estado::AMBIGUO => (Step::Resolve, self.timing.resolve_ms),
            estado::ENVIADO => (Step::Deliver, self.timing.deliver_ms),
            estado::ENTREGADO => (Step::Read, self.timing.read_ms),
            _ => return,
        };
        self.schedule(cmd.command_id.clone(), step.0, step.1);
    }

    fn schedule(self: &Arc<Self>, command_id: String, step: Step, after_ms: u64) {
        self.timers
            .schedule(Arc::downgrade(self), &self.shutdown, command_id, step, after_ms);
    }

    pub(super) fn step(self: &Arc<Self>, id: &str, step: Step) {
        let now = Utc::now();
        let mut engine = lock(&self.engine);
        match step {
            Step::GoOut => {
                let Some(cmd) = engine.commands.get(id).cloned() else {
                    return;
                };
                if cmd.estado != estado::EN_COLA {
                    return;
                }
                if cmd.expires_at.is_some_and(|t| t <= now) {
                    if let Some(c) = engine.transition(id, estado::EN_COLA, estado::FALLIDO, now, |c| {
                        c.detail = Some("comando_vencido".into())
                    }) {
                        self.changed(&c, false);
                    }
                    return;
                }
                let ambiguous = self.dice.chance(self.faults().ambiguous, &["ambiguous", id]);
                if ambiguous {
                    if let Some(c) = engine.transition(id, estado::EN_COLA, estado::AMBIGUO, now, |_| {}) {
                        self.bump(|s| s.faults.ambiguous += 1);
                        self.changed(&c, false);
                        self.schedule(id.to_string(), Step::Resolve, self.timing.resolve_ms);
                    }
                    return;
                }
                self.go_out(&mut engine, id, estado::EN_COLA, now);
            }
            Step::Resolve => {
                // Half of the ambiguous commands turned out to have gone out.
                let went_out = self.dice.chance(0.5, &["resolve", id]);
                if went_out {
                    self.go_out(&mut engine, id, estado::AMBIGUO, now);
                } else if let Some(c) = engine.transition(id, estado::AMBIGUO, estado::FALLIDO, now, |c| {
                    c.detail = Some("no_salio".into())
                }) {
                    self.changed(&c, true);
                }
            }
            Step::Deliver => {
                if let Some(c) = engine.transition(id, estado::ENVIADO, estado::ENTREGADO, now, |_| {}) {
                    self.changed(&c, false);
                    self.schedule(id.to_string(), Step::Read, self.timing.read_ms);
                }
            }
            Step::Read => {
                if let Some(c) = engine.transition(id, estado::ENTREGADO, estado::LEIDO, now, |_| {}) {
                    self.changed(&c, false);
                }
            }
        }
    }

    /// The message goes out (from queued, or an ambiguous command resolved
    /// as sent): it gets its wamid, and the delivery timer starts.
    fn go_out(self: &Arc<Self>, engine: &mut Engine, id: &str, from: &str, now: DateTime<Utc>) {
        let wamid = self.wamid(id);
        let Some(c) = engine.transition(id, from, estado::ENVIADO, now, |c| c.provider_message_id = Some(wamid)) else {
            return;
        };
        // Journal first, then the ground-truth line: a crash in between can
        // lose a line, never invent a second send.
        self.journal(&JournalRecord::Command(Box::new(c.clone())));
        self.log_sent(&c, now);
        self.emit(&c, from == estado::AMBIGUO);
        self.schedule(id.to_string(), Step::Deliver, self.timing.deliver_ms);
    }

    fn wamid(&self, id: &str) -> String {
        format!("wamid.SIM{:016X}", self.dice.raw(&["wamid", id]))
    }

    /// Every unfinished command restarts its timers (after a journal replay).
    pub fn resume_all(self: &Arc<Self>) {
        let pending: Vec<Command> = lock(&self.engine)
            .commands
            .values()
            .filter(|c| !c.is_final())
            .cloned()
            .collect();
        for c in pending {
            self.resume_command(&c);
        }
    }

    /// The JSON of `GET /sim/stats`.
    pub fn stats_json(&self) -> serde_json::Value {
        json!(self.stats())
    }
}

fn open_append(p: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(p)
}

/// Rebuilds the engine's memory from the journal. A torn last line (the
/// process died mid-write) is skipped; the rest is last-record-wins.
fn replay_journal(p: &Path, engine: &mut Engine) -> Result<(), SimError> {
    let f = match File::open(p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SimError::State {
                path: p.to_path_buf(),
                source,
            });
        }
    };
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|source| SimError::State {
            path: p.to_path_buf(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<JournalRecord>(&line) {
            Ok(JournalRecord::Command(c)) => engine.insert(*c),
            Ok(JournalRecord::Generation {
                instance_id,
                generation,
            }) => engine.set_generation(&instance_id, generation),
            Err(e) => tracing::warn!("{}:{}: skipping unreadable sim state line: {e}", p.display(), i + 1),
        }
    }
    Ok(())
}
