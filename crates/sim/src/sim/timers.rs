//! The simulator's timers: one task and one heap for every command's next
//! step, instead of a task (and a timer-wheel entry and a shutdown
//! watcher) per step. A busy run moves tens of thousands of commands per
//! second along three steps each; this is what lets the simulator keep up
//! with the dispatcher it stands in front of, in the same process.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Weak;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::core::{Core, Step};

/// One scheduled step: when, in which order among equal deadlines, which
/// command, what.
type Due = (Instant, u64, String, Step);

/// The handle commands are scheduled through. The driver task starts with
/// the first step, inside the caller's runtime.
pub(super) struct Timers {
    tx: mpsc::UnboundedSender<Due>,
    rx: std::sync::Mutex<Option<mpsc::UnboundedReceiver<Due>>>,
    seq: std::sync::atomic::AtomicU64,
}

impl Timers {
    pub(super) fn new() -> Timers {
        let (tx, rx) = mpsc::unbounded_channel();
        Timers {
            tx,
            rx: std::sync::Mutex::new(Some(rx)),
            seq: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Runs `step` of `command_id` for `core` after `after_ms`.
    pub(super) fn schedule(
        &self,
        core: Weak<Core>,
        shutdown: &watch::Receiver<bool>,
        command_id: String,
        step: Step,
        after_ms: u64,
    ) {
        if let Some(rx) = super::core::lock(&self.rx).take() {
            tokio::spawn(drive(core, rx, shutdown.clone()));
        }
        let at = Instant::now() + std::time::Duration::from_millis(after_ms);
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The driver only ends at shutdown, when nothing more must happen.
        let _ = self.tx.send((at, seq, command_id, step));
    }
}

/// Fires every step when it is due, in deadline order (then scheduling
/// order), until shutdown or until the simulator is gone.
async fn drive(core: Weak<Core>, mut rx: mpsc::UnboundedReceiver<Due>, mut shutdown: watch::Receiver<bool>) {
    let mut heap: BinaryHeap<Reverse<Due>> = BinaryHeap::new();
    loop {
        let next = heap.peek().map(|Reverse(d)| d.0);
        tokio::select! {
            got = rx.recv() => match got {
                Some(d) => {
                    heap.push(Reverse(d));
                    while let Ok(d) = rx.try_recv() {
                        heap.push(Reverse(d));
                    }
                }
                None => break,
            },
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let Some(core) = core.upgrade() else { break };
                let now = Instant::now();
                while heap.peek().is_some_and(|Reverse(d)| d.0 <= now) {
                    if let Some(Reverse((_, _, id, step))) = heap.pop() {
                        core.step(&id, step);
                    }
                }
            }
            _ = shutdown.wait_for(|s| *s) => break,
        }
    }
}
