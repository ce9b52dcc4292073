//! The shared PostgreSQL ledger's change notices as a refresh signal.
//!
//! On SQLite (one host) the console learns of changes from the embedded
//! services' activity counter, and of everything else at its tick. On
//! PostgreSQL, dispatchers, webhook servers, imports and other consoles
//! write from other processes and hosts; the ledger's statement triggers
//! announce each committed change on `unavez_<schema>`, and a
//! [`PgListener`] hears them. This module runs that listener on a thread
//! of its own and turns every batch of notices into a bump of a counter
//! the console's [`super::refresh::Refresh`] reads, exactly like the
//! services' activity: "something changed, re-read".
//!
//! Why a thread of its own: the listener is the synchronous client, which
//! blocks on a runtime of its own and must never be connected, used or
//! dropped on a thread that drives async tasks (see `pg::PgClient`); here
//! it is created, waited on and dropped on this thread only.

use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::watch;
use unavez_ledger::location::Location;

use unavez_ledger::pg::{PgListener, PgUrl};

/// How long one wait for notices lasts: also how soon the thread notices
/// that the console has gone.
const WAIT: Duration = Duration::from_millis(500);

/// The longest pause between reconnection attempts when the server cannot
/// be reached.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A running listener: its counter, bumped after each batch of notices
/// (and after a reconnection, since notices may have been missed while it
/// was away). The thread stops by itself once every receiver is dropped.
pub struct Notices {
    pub changes: watch::Receiver<u64>,
    pub thread: JoinHandle<()>,
}

/// Starts listening on `location`'s channel when it is a PostgreSQL ledger
/// (`None` for a SQLite file, whose console keeps its own signals). The
/// first connection is made on the new thread; if it fails, the thread
/// keeps trying, and the console refreshes on its tick meanwhile.
pub fn start(location: &Location) -> std::io::Result<Option<Notices>> {
    let Location::Postgres(url) = location else {
        return Ok(None);
    };
    let url = (**url).clone();
    let (tx, changes) = watch::channel(0u64);
    let thread = std::thread::Builder::new()
        .name("unavez-console-listen".into())
        .spawn(move || listen(&url, &tx))?;
    Ok(Some(Notices { changes, thread }))
}

fn bump(tx: &watch::Sender<u64>) {
    tx.send_modify(|n| *n = n.wrapping_add(1));
}

/// Listens until the console drops its receiver: reconnects after a lost
/// connection (with a growing pause while the server is unreachable) and
/// signals a refresh once reconnected.
fn listen(url: &PgUrl, tx: &watch::Sender<u64>) {
    let mut listener: Option<PgListener> = None;
    let mut backoff = Duration::from_millis(250);
    let mut lost = false;
    while !tx.is_closed() {
        let l = match listener.as_mut() {
            Some(l) => l,
            None => match PgListener::connect(url) {
                Ok(l) => {
                    backoff = Duration::from_millis(250);
                    if lost {
                        bump(tx);
                    }
                    listener.insert(l)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "console: cannot listen for ledger changes; retrying");
                    lost = true;
                    pause(tx, backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            },
        };
        match l.wait(WAIT) {
            Ok(tables) if tables.is_empty() => {}
            Ok(tables) => {
                tracing::debug!(?tables, "console: the ledger changed");
                bump(tx);
            }
            Err(e) => {
                tracing::warn!(error = %e, "console: lost the ledger's change notices; reconnecting");
                listener = None;
                lost = true;
            }
        }
    }
}

/// Sleeps `d`, in short steps so a console that quits is not kept waiting.
fn pause(tx: &watch::Sender<u64>, d: Duration) {
    let step = Duration::from_millis(100);
    let mut left = d;
    while !left.is_zero() && !tx.is_closed() {
        std::thread::sleep(step.min(left));
        left = left.saturating_sub(step);
    }
}
