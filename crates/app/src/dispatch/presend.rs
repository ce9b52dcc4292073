//! The pre-send check: the last look at the ledger immediately before a
//! request leaves for the channel. Validity was checked when the attempt
//! was recorded, but a claimed message can wait seconds for the runtime, a
//! slow store or a free connection; meanwhile the appointment may move or
//! the lease may pass to someone else. Right before the request, this
//! re-reads the commitment version, its cancellation and the sender's own
//! hold on the intention (see [`moved`]).
//!
//! It reads on its own connection, so it never queues behind the writer's
//! fsyncs on the dispatcher's [`Db`], and one query covers every attempt
//! that asks while the previous query runs (the few messages leaving
//! together).

use std::sync::{Arc, OnceLock};
use unavez_ledger::location::Location;

use chrono::Utc;
use tokio::sync::{mpsc, oneshot};

use super::Db;
use crate::domain::key::Purpose;
use crate::domain::presend;
use crate::store::{PresendFacts, Store};

/// Most attempts one query covers: as many as a large dispatcher has in
/// flight, since the query's text no longer depends on the count (each
/// attempt still gets a read made after it asked).
const BATCH: usize = 512;

pub use crate::domain::presend::Holder;

/// Why the request must not leave, or `None` when nothing moved since its
/// validity check: the ledger's row read by core's rule
/// ([`crate::domain::presend::moved`]). Pure.
pub fn moved(f: &PresendFacts, holder: &Holder, now: chrono::DateTime<Utc>) -> Option<String> {
    let facts = presend::PresendFacts {
        n: f.n,
        attempt_open: f.attempt_open,
        version_checked: f.version_checked,
        state: f.state,
        lease_owner: f.lease_owner.clone(),
        lease_until: f.lease_until,
        purpose: Purpose::from_slug(&f.purpose),
        commitment_version: f.commitment_version,
        commitment_cancelled: f.commitment_cancelled,
    };
    presend::moved(&facts, holder, now)
}

/// The answer for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clearance {
    /// Nothing moved: send now.
    Go,
    /// Do not send; why.
    Stop(String),
}

type Ask = (i64, Holder, oneshot::Sender<Clearance>);

/// A handle to the pre-send check of one ledger. Cheap to clone; the
/// checking task and its read connection start on first use (inside the
/// runtime) and end when the last handle is dropped.
#[derive(Clone)]
pub struct PreSend {
    location: Location,
    tx: Arc<OnceLock<mpsc::UnboundedSender<Ask>>>,
}

impl PreSend {
    pub fn new(location: Location) -> PreSend {
        PreSend {
            location,
            tx: Arc::new(OnceLock::new()),
        }
    }

    /// Whether attempt `attempt_id`, held by `holder`, may leave now. Any
    /// doubt (the ledger cannot be read) is a stop: a send can always be
    /// tried again, a message cannot be taken back.
    pub async fn check(&self, attempt_id: i64, holder: Holder) -> Clearance {
        let tx = self.tx.get_or_init(|| spawn(self.location.clone()));
        let (reply, answer) = oneshot::channel();
        if tx.send((attempt_id, holder, reply)).is_err() {
            return Clearance::Stop("the pre-send check is not running".into());
        }
        answer
            .await
            .unwrap_or_else(|_| Clearance::Stop("the pre-send check ended without an answer".into()))
    }
}

fn spawn(location: Location) -> mpsc::UnboundedSender<Ask> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Ask>();
    tokio::spawn(async move {
        let mut reader: Option<Db> = None;
        while let Some(first) = rx.recv().await {
            let mut asks = vec![first];
            while asks.len() < BATCH {
                match rx.try_recv() {
                    Ok(a) => asks.push(a),
                    Err(_) => break,
                }
            }
            let read = read(&mut reader, &location, asks.iter().map(|a| a.0).collect()).await;
            // Leases compare on the ledger's clock (the database's on a
            // shared ledger), read with the facts.
            let (facts, now) = match read {
                Ok((facts, now)) => (Ok(facts), now),
                Err(e) => (Err(e), Utc::now()),
            };
            for (attempt_id, holder, reply) in asks {
                let _ = reply.send(clearance(&facts, attempt_id, &holder, now));
            }
        }
    });
    tx
}

async fn read(
    reader: &mut Option<Db>,
    location: &Location,
    ids: Vec<i64>,
) -> Result<(Vec<PresendFacts>, chrono::DateTime<Utc>), String> {
    if reader.is_none() {
        let at = location.clone();
        // Its one statement reads attempts by id (see `Store::plan_by_keys`).
        let store = tokio::task::spawn_blocking(move || {
            let mut store = Store::attach_location(&at)?;
            store.plan_by_keys()?;
            Ok::<_, crate::store::StoreError>(store)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        *reader = Some(Db::from_store(store));
    }
    let Some(db) = reader.as_ref() else {
        return Err("no reader".into());
    };
    db.call(move |store| Ok(store.read(|tx| tx.presend_facts_now(&ids))?))
        .await
        .map_err(|e| e.to_string())
}

/// The verdict for one attempt from one batch's facts. Pure.
pub(crate) fn clearance(
    facts: &Result<Vec<PresendFacts>, String>,
    attempt_id: i64,
    holder: &Holder,
    now: chrono::DateTime<Utc>,
) -> Clearance {
    match facts {
        Err(e) => Clearance::Stop(format!("the pre-send check could not read the ledger: {e}")),
        Ok(rows) => match rows.iter().find(|f| f.attempt_id == attempt_id) {
            None => Clearance::Stop(format!("attempt #{attempt_id} is not in the ledger")),
            Some(f) => match moved(f, holder, now) {
                None => Clearance::Go,
                Some(why) => Clearance::Stop(why),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::state::IntentionState;
    use chrono::Duration;

    fn facts() -> PresendFacts {
        PresendFacts {
            attempt_id: 7,
            n: 1,
            attempt_open: true,
            version_checked: 2,
            state: IntentionState::Dispatching,
            lease_owner: Some("w1".into()),
            lease_until: Some(Utc::now() + Duration::seconds(30)),
            purpose: "aviso-reserva".into(),
            commitment_version: 2,
            commitment_cancelled: false,
        }
    }

    fn verdict(f: PresendFacts, holder: Holder) -> Clearance {
        clearance(&Ok(vec![f]), 7, &holder, Utc::now())
    }

    fn stops(c: Clearance, what: &str) {
        match c {
            Clearance::Stop(why) => assert!(why.contains(what), "{why:?} should mention {what:?}"),
            Clearance::Go => panic!("expected a stop mentioning {what:?}"),
        }
    }

    #[test]
    fn a_claim_whose_world_did_not_move_goes() {
        assert_eq!(verdict(facts(), Holder::Lease("w1".into())), Clearance::Go);
    }

    #[test]
    fn a_moved_commitment_or_a_lost_lease_stops_the_send() {
        let lease = || Holder::Lease("w1".into());
        stops(
            verdict(
                PresendFacts {
                    commitment_version: 3,
                    ..facts()
                },
                lease(),
            ),
            "moved from v2 to v3",
        );
        stops(
            verdict(
                PresendFacts {
                    commitment_cancelled: true,
                    ..facts()
                },
                lease(),
            ),
            "cancelled",
        );
        stops(
            verdict(
                PresendFacts {
                    lease_owner: Some("w2".into()),
                    ..facts()
                },
                lease(),
            ),
            "held by w2",
        );
        stops(
            verdict(
                PresendFacts {
                    lease_until: Some(Utc::now() - Duration::seconds(1)),
                    ..facts()
                },
                lease(),
            ),
            "lease ran out",
        );
        stops(
            verdict(
                PresendFacts {
                    state: IntentionState::Uncertain,
                    lease_owner: None,
                    ..facts()
                },
                lease(),
            ),
            "uncertain now",
        );
        stops(
            verdict(
                PresendFacts {
                    attempt_open: false,
                    ..facts()
                },
                lease(),
            ),
            "closed meanwhile",
        );
    }

    #[test]
    fn a_cancellation_notice_still_goes_once_the_commitment_is_cancelled() {
        let f = PresendFacts {
            commitment_cancelled: true,
            purpose: "aviso-cancelacion".into(),
            ..facts()
        };
        assert_eq!(verdict(f, Holder::Lease("w1".into())), Clearance::Go);
    }

    #[test]
    fn a_repeat_needs_the_intention_still_uncertain() {
        let f = PresendFacts {
            state: IntentionState::Uncertain,
            lease_owner: None,
            lease_until: None,
            ..facts()
        };
        assert_eq!(verdict(f.clone(), Holder::Reconciler), Clearance::Go);
        stops(
            verdict(
                PresendFacts {
                    state: IntentionState::Delivered,
                    ..f
                },
                Holder::Reconciler,
            ),
            "delivered now",
        );
    }

    #[test]
    fn doubt_is_a_stop() {
        stops(
            clearance(&Err("disk".into()), 7, &Holder::Reconciler, Utc::now()),
            "could not read",
        );
        stops(
            clearance(&Ok(vec![]), 7, &Holder::Reconciler, Utc::now()),
            "not in the ledger",
        );
    }
}
