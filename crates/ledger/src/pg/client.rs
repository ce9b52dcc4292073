//! The synchronous PostgreSQL client, safe to own from async code.
//!
//! Why: `postgres::Client` drives its connection with a runtime of its own
//! and blocks on it, so connecting or dropping it on a thread that is
//! running async tasks panics ("cannot start a runtime from within a
//! runtime"). The ledger's queries run on blocking threads
//! (`spawn_blocking`, the console's worker), but a handle may be created or
//! dropped anywhere (a dispatcher's session, a task ending). So connecting
//! happens on a short-lived thread of its own, and a dropped client is
//! closed on one, whatever thread lets go of it.

use std::ops::{Deref, DerefMut};

use postgres::NoTls;

use super::{PgError, PgUrl};

/// A connected client; closed on a thread of its own when dropped.
pub struct PgClient(Option<postgres::Client>);

impl PgClient {
    /// Connects (call it off async threads: `PgLedger::open` and
    /// `PgLedger::connect_checked` do).
    pub fn connect(url: &PgUrl) -> Result<PgClient, PgError> {
        let connect_error = |source| PgError::Connect {
            url: url.to_string(),
            source,
        };
        let mut client = url.config().connect(NoTls).map_err(connect_error)?;
        // A host frozen (or stuck) in the middle of a transaction would
        // hold its row locks, and every other host's claims behind them,
        // for as long as it stays frozen. The server ends such a session
        // instead; the frozen process finds its connection gone on thaw
        // and its work rolled back, which the lease and the pre-send
        // re-check already expect. No unavez transaction leaves the server
        // waiting on the client for anything near ten seconds.
        //
        // JIT off: every ledger statement is a short OLTP one, but the
        // generic plans the console prepares can estimate a cost above
        // the server's JIT threshold (a name search's word lists at a
        // million intentions), and compiling then took 7-19 ms on each
        // call of a query that runs in about 12 (docs/bench-log.md,
        // 2026-12-02 1M probe). Nothing here runs long enough to win it back.
        client
            .batch_execute("SET idle_in_transaction_session_timeout = '10s'; SET jit = off")
            .map_err(connect_error)?;
        Ok(PgClient(Some(client)))
    }

    /// Whether the server closed this connection (`pg_terminate_backend`,
    /// a restart, a network cut): the client then fails every call, so
    /// only a new connection helps. Known only after a call failed on it:
    /// an idle client does not watch its socket.
    pub fn is_lost(&self) -> bool {
        self.0.as_ref().is_none_or(postgres::Client::is_closed)
    }
}

impl Deref for PgClient {
    type Target = postgres::Client;
    fn deref(&self) -> &postgres::Client {
        self.0.as_ref().expect("a client is present until dropped")
    }
}

impl DerefMut for PgClient {
    fn deref_mut(&mut self) -> &mut postgres::Client {
        self.0.as_mut().expect("a client is present until dropped")
    }
}

impl Drop for PgClient {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            // Joining would block the dropping thread on the close; the
            // close has nothing to report.
            let _ = std::thread::Builder::new()
                .name("unavez-pg-close".into())
                .spawn(move || drop(client));
        }
    }
}
