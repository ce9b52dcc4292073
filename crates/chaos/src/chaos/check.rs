//! The history checker, Jepsen style: compares what the ledger says with
//! what the engine (simulator) really received and sent, after everything
//! settled.
//!
//! Pure: it receives the ledger's view (`crate::chaos::ledger_view`), the
//! simulator's own records (its ground-truth log of messages that went out,
//! and from its state journal the moment it first received each key), the
//! commit time of every booking change, and the harness's model of the
//! events it imported; it returns a [`Verdict`]. Definitions:
//!
//! - **duplicated**: every message beyond the first for one key (the key
//!   names one intention, so this is also "two messages for one intention"),
//!   plus every message whose correlation id already went out under
//!   another key.
//! - **lost**: an intention that should have been sent and is neither sent
//!   nor explained: the ledger says accepted (or later) but the engine never
//!   sent it; or it is still `planned`/`dispatching` although due; or a
//!   booking event the harness imported is missing from the ledger, or a
//!   commitment's final version/status differs from the harness's model.
//!   `cancelled`, `failed` and `review` explain a message that was not sent.
//! - **wrongly sent**: the engine sent a message for a key the ledger does
//!   not know, for an intention that was never claimed, or for an intention
//!   whose commitment had already moved on: the engine *first received* its
//!   key more than [`IN_FLIGHT_GRACE_MS`] after the commit of the booking
//!   change (reschedule or cancellation) that made it stale. Only the
//!   engine's record counts here, never the ledger's own account: a
//!   request that left after the change was committed is a send that a
//!   validity check should have stopped, whichever path sent it (claim,
//!   retry, reconciler repeat).
//! - **in flight across a change** (informational): sent, and first
//!   received by the engine before that commit or at most
//!   [`IN_FLIGHT_GRACE_MS`] after it — the request left before the change
//!   was visible (the grace covers the time between the last pre-send
//!   check and the engine's stamp on one host). The design accepts this
//!   race: it is recorded in history and an update notice follows.
//! - **uncertain left unresolved**: intentions still `uncertain`.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::chaos::ledger_view::{CheckedCommitment, CheckedIntention};

/// How long after a change's commit a first receipt still counts as in
/// flight across it rather than wrongly sent.
pub const IN_FLIGHT_GRACE_MS: i64 = 500;

/// One message the engine really handed to WhatsApp (from its log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    pub key: String,
    /// The engine's own id for the message (distinct per real send).
    pub message_id: String,
    pub correlation_id: Option<String>,
    /// When it went out (ms since the epoch), per the log.
    pub time_ms: Option<i64>,
}

/// A booking change that raised a commitment to `version`, committed at
/// `committed_ms` (ms since the epoch, the host clock the simulator uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeCommit {
    pub commitment_id: i64,
    pub version: i64,
    pub committed_ms: i64,
}

/// What the harness expects a commitment to look like in the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub reference: String,
    pub version: i64,
    pub status: String,
}

/// Everything the checker needs.
pub struct Inputs<'a> {
    pub intentions: &'a [CheckedIntention],
    /// When each commitment's version was raised, by commit time.
    pub changes: &'a [ChangeCommit],
    /// Key → when the engine first received it (ms), from its own journal.
    pub receipts: &'a HashMap<String, i64>,
    pub commitments: &'a [CheckedCommitment],
    pub sent: &'a [SentMessage],
    pub expected: &'a [Expected],
    /// Imported booking event ids missing from the ledger's event log.
    pub missing_events: &'a [String],
    /// The checker's "now" (ms): planned intentions due later are not late.
    pub now_ms: i64,
}

/// The checker's findings.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Verdict {
    pub intentions: usize,
    pub messages_sent: usize,
    pub duplicated: usize,
    pub lost: usize,
    pub wrongly_sent: usize,
    pub uncertain_unresolved: usize,
    /// Informational: first received by the engine before (or within the
    /// grace after) the reschedule/cancellation that made it stale; recorded
    /// in history, an update notice follows.
    pub in_flight_across_change: usize,
    /// Informational: the engine sent it but the ledger says failed or
    /// cancelled — the ledger's evidence is wrong, a person could resend.
    pub contradicted: usize,
    /// States at the end, for the report.
    pub states: BTreeMap<String, usize>,
    /// Up to 30 concrete findings, to start debugging from.
    pub examples: Vec<String>,
}

impl Verdict {
    /// Whether the run violated the promise (exit non-zero).
    pub fn failed(&self) -> bool {
        self.duplicated > 0 || self.lost > 0 || self.wrongly_sent > 0
    }

    fn example(&mut self, s: String) {
        if self.examples.len() < 30 {
            self.examples.push(s);
        }
    }
}

/// Runs the checker.
pub fn check(input: &Inputs<'_>) -> Verdict {
    let mut v = Verdict {
        intentions: input.intentions.len(),
        messages_sent: input.sent.len(),
        ..Default::default()
    };

    // Messages per key, in log order, distinct by engine message id.
    let mut by_key: HashMap<&str, Vec<&SentMessage>> = HashMap::new();
    for m in input.sent {
        let e = by_key.entry(m.key.as_str()).or_default();
        if !e.iter().any(|x| x.message_id == m.message_id) {
            e.push(m);
        }
    }
    for (key, msgs) in &by_key {
        if msgs.len() > 1 {
            v.duplicated += msgs.len() - 1;
            let ids: Vec<&str> = msgs.iter().map(|m| m.message_id.as_str()).collect();
            v.example(format!(
                "duplicated: {key} sent {} times ({})",
                msgs.len(),
                ids.join(", ")
            ));
        }
    }
    let mut corr: HashMap<&str, &str> = HashMap::new();
    for m in input.sent {
        if let Some(c) = &m.correlation_id {
            match corr.get(c.as_str()) {
                Some(k) if *k != m.key => {
                    v.duplicated += 1;
                    v.example(format!("duplicated: correlation {c} sent under {k} and {}", m.key));
                }
                Some(_) => {}
                None => {
                    corr.insert(c, &m.key);
                }
            }
        }
    }

    // When each commitment first moved past each version.
    let mut changes: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
    for c in input.changes {
        changes
            .entry(c.commitment_id)
            .or_default()
            .push((c.version, c.committed_ms));
    }
    let stale_since = |i: &CheckedIntention| -> Option<i64> {
        changes
            .get(&i.commitment_id)?
            .iter()
            .filter(|(ver, _)| *ver > i.version)
            .map(|(_, t)| *t)
            .min()
    };
    // The engine's first receipt of a key; without a journal record, the
    // first time the log shows it going out (later, so only stricter).
    let first_receipt = |key: &str| -> Option<i64> {
        input
            .receipts
            .get(key)
            .copied()
            .or_else(|| by_key.get(key).and_then(|m| m.iter().filter_map(|x| x.time_ms).min()))
    };

    let mut known: HashMap<&str, ()> = HashMap::new();
    for i in input.intentions {
        known.insert(i.key.as_str(), ());
        *v.states.entry(i.state.clone()).or_default() += 1;
        let sent = by_key.get(i.key.as_str()).is_some_and(|m| !m.is_empty());
        let evidence = matches!(i.state.as_str(), "accepted" | "sent" | "delivered" | "read");
        if sent {
            match judge_sent(i, stale_since(i), first_receipt(&i.key)) {
                Sent::Fine => {}
                Sent::InFlight => v.in_flight_across_change += 1,
                Sent::Wrong(why) => {
                    v.wrongly_sent += 1;
                    v.example(format!("wrongly sent: {} (#{}) {why}", i.key, i.id));
                }
            }
            if matches!(i.state.as_str(), "failed" | "cancelled") {
                v.contradicted += 1;
                v.example(format!(
                    "contradicted: {} (#{}) is {} but the engine sent it",
                    i.key, i.id, i.state
                ));
            }
        }
        match i.state.as_str() {
            "uncertain" => v.uncertain_unresolved += 1,
            _ if evidence && !sent => {
                v.lost += 1;
                v.example(format!(
                    "lost: {} (#{}) is {} but the engine never sent it",
                    i.key, i.id, i.state
                ));
            }
            "planned" | "dispatching" if !sent => {
                let due = i.next_attempt_at_ms.unwrap_or(i.due_at_ms).max(i.due_at_ms);
                if due <= input.now_ms {
                    v.lost += 1;
                    v.example(format!("lost: {} (#{}) still {} after settling", i.key, i.id, i.state));
                }
            }
            _ => {}
        }
    }
    for m in input.sent {
        if !known.contains_key(m.key.as_str()) {
            v.wrongly_sent += 1;
            v.example(format!(
                "wrongly sent: {} ({}) is not an intention in the ledger",
                m.key, m.message_id
            ));
        }
    }

    // The harness's model of what it imported.
    for e in input.missing_events {
        v.lost += 1;
        v.example(format!("lost: booking event {e} is not in the ledger"));
    }
    let stored: HashMap<&str, &CheckedCommitment> =
        input.commitments.iter().map(|c| (c.reference.as_str(), c)).collect();
    for e in input.expected {
        match stored.get(e.reference.as_str()) {
            None => {
                v.lost += 1;
                v.example(format!("lost: commitment {} is not in the ledger", e.reference));
            }
            Some(c) if c.version != e.version || c.status != e.status => {
                v.lost += 1;
                v.example(format!(
                    "lost: commitment {} is v{} {} in the ledger, expected v{} {}",
                    e.reference, c.version, c.status, e.version, e.status
                ));
            }
            Some(_) => {}
        }
    }
    v
}

/// What a message that went out says about its intention.
enum Sent {
    Fine,
    InFlight,
    Wrong(String),
}

/// The strict rule for one sent intention: never claimed, or first received
/// by the engine more than the grace after the change that made it stale
/// (`stale_since`, a commit time) was committed, is wrongly sent.
fn judge_sent(i: &CheckedIntention, stale_since: Option<i64>, first_receipt: Option<i64>) -> Sent {
    match (i.first_claim, stale_since, first_receipt) {
        (None, _, _) => Sent::Wrong("went out but was never claimed".into()),
        (Some(_), None, _) => Sent::Fine,
        (Some(_), Some(stale), Some(got)) if got > stale + IN_FLIGHT_GRACE_MS => Sent::Wrong(format!(
            "first received by the engine {} ms after its commitment moved past v{} was committed",
            got - stale,
            i.version
        )),
        (Some(_), Some(_), Some(_)) => Sent::InFlight,
        // Neither record says when the engine got it: nothing proves it
        // left before the change.
        (Some(_), Some(stale), None) => Sent::Wrong(format!(
            "went out with no receipt time, and its commitment moved past v{} at {stale}",
            i.version
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(id: i64, key: &str, commitment: i64, version: i64, state: &str, claim: Option<i64>) -> CheckedIntention {
        CheckedIntention {
            id,
            key: key.into(),
            commitment_id: commitment,
            commitment_ref: format!("cita-{commitment}"),
            version,
            purpose: "aviso-reserva".into(),
            state: state.into(),
            state_reason: None,
            first_claim: claim,
            attempts: claim.map(|_| 1).unwrap_or(0),
            due_at_ms: 0,
            next_attempt_at_ms: None,
        }
    }

    fn msg(key: &str, id: &str) -> SentMessage {
        SentMessage {
            key: key.into(),
            message_id: id.into(),
            correlation_id: None,
            time_ms: None,
        }
    }

    fn run(intentions: &[CheckedIntention], changes: &[ChangeCommit], sent: &[SentMessage]) -> Verdict {
        run_with(intentions, changes, sent, &HashMap::new())
    }

    fn run_with(
        intentions: &[CheckedIntention],
        changes: &[ChangeCommit],
        sent: &[SentMessage],
        receipts: &HashMap<String, i64>,
    ) -> Verdict {
        check(&Inputs {
            intentions,
            changes,
            receipts,
            commitments: &[],
            sent,
            expected: &[],
            missing_events: &[],
            now_ms: 1_000,
        })
    }

    #[test]
    fn a_clean_history_passes() {
        let v = run(
            &[intent(1, "a:v1", 1, 1, "accepted", Some(10))],
            &[],
            &[msg("a:v1", "m1")],
        );
        assert!(!v.failed(), "{v:?}");
        assert_eq!((v.intentions, v.messages_sent), (1, 1));
    }

    #[test]
    fn the_same_key_sent_twice_is_duplicated_but_a_repeated_log_line_is_not() {
        let i = [intent(1, "a:v1", 1, 1, "accepted", Some(10))];
        assert_eq!(run(&i, &[], &[msg("a:v1", "m1"), msg("a:v1", "m1")]).duplicated, 0);
        let v = run(&i, &[], &[msg("a:v1", "m1"), msg("a:v1", "m2")]);
        assert_eq!(v.duplicated, 1);
        assert!(v.failed());
    }

    #[test]
    fn one_correlation_under_two_keys_is_duplicated() {
        let i = [
            intent(1, "a", 1, 1, "accepted", Some(10)),
            intent(2, "b", 2, 1, "accepted", Some(11)),
        ];
        let mut a = msg("a", "m1");
        a.correlation_id = Some("c".into());
        let mut b = msg("b", "m2");
        b.correlation_id = Some("c".into());
        assert_eq!(run(&i, &[], &[a, b]).duplicated, 1);
    }

    #[test]
    fn accepted_without_a_message_and_stuck_planned_are_lost() {
        let v = run(&[intent(1, "a", 1, 1, "accepted", Some(10))], &[], &[]);
        assert_eq!(v.lost, 1);
        let v = run(&[intent(1, "a", 1, 1, "planned", None)], &[], &[]);
        assert_eq!(v.lost, 1);
        let mut later = intent(1, "a", 1, 1, "planned", None);
        later.due_at_ms = 5_000;
        assert_eq!(run(&[later], &[], &[]).lost, 0, "not due yet is not lost");
        for explained in ["cancelled", "failed", "review"] {
            assert_eq!(
                run(&[intent(1, "a", 1, 1, explained, None)], &[], &[]).lost,
                0,
                "{explained}"
            );
        }
    }

    #[test]
    fn uncertain_is_counted_apart() {
        let v = run(&[intent(1, "a", 1, 1, "uncertain", Some(10))], &[], &[]);
        assert_eq!((v.uncertain_unresolved, v.lost), (1, 0));
        assert!(!v.failed());
    }

    fn rescheduled_at(ms: i64) -> [ChangeCommit; 2] {
        [
            ChangeCommit {
                commitment_id: 1,
                version: 1,
                committed_ms: 0,
            },
            ChangeCommit {
                commitment_id: 1,
                version: 2,
                committed_ms: ms,
            },
        ]
    }

    fn receipt(key: &str, ms: i64) -> HashMap<String, i64> {
        HashMap::from([(key.to_string(), ms)])
    }

    #[test]
    fn first_received_more_than_the_grace_after_the_change_is_wrongly_sent() {
        let changes = rescheduled_at(10_000);
        // Claimed long before the change: the ledger's order does not
        // excuse it, only the engine's own receipt time counts.
        let i = [intent(1, "a:v1", 1, 1, "accepted", Some(5))];
        let sent = [msg("a:v1", "m1")];
        let v = run_with(&i, &changes, &sent, &receipt("a:v1", 10_000 + IN_FLIGHT_GRACE_MS + 1));
        assert_eq!((v.wrongly_sent, v.in_flight_across_change), (1, 0));
        assert!(v.failed());
        assert!(
            v.examples[0].contains("first received by the engine 501 ms after"),
            "{v:?}"
        );
        // 1.7 s after, as the seed 29 showed.
        let v = run_with(&i, &changes, &sent, &receipt("a:v1", 11_700));
        assert_eq!(v.wrongly_sent, 1);
    }

    #[test]
    fn received_before_or_within_the_grace_is_in_flight_across_the_change() {
        let changes = rescheduled_at(10_000);
        let i = [intent(1, "a:v1", 1, 1, "accepted", Some(5))];
        let sent = [msg("a:v1", "m1")];
        for got in [9_000, 10_000, 10_000 + IN_FLIGHT_GRACE_MS] {
            let v = run_with(&i, &changes, &sent, &receipt("a:v1", got));
            assert_eq!((v.wrongly_sent, v.in_flight_across_change), (0, 1), "{got}");
        }
        // Not stale at all (no later version): neither.
        let v = run_with(&i, &changes[..1], &sent, &receipt("a:v1", 50_000));
        assert_eq!((v.wrongly_sent, v.in_flight_across_change), (0, 0));
    }

    #[test]
    fn without_a_journal_record_the_log_time_decides_and_without_either_it_is_wrong() {
        let changes = rescheduled_at(10_000);
        let i = [intent(1, "a:v1", 1, 1, "sent", Some(5))];
        let mut m = msg("a:v1", "m1");
        m.time_ms = Some(10_100);
        assert_eq!(run(&i, &changes, std::slice::from_ref(&m)).in_flight_across_change, 1);
        m.time_ms = Some(12_000);
        assert_eq!(run(&i, &changes, std::slice::from_ref(&m)).wrongly_sent, 1);
        m.time_ms = None;
        assert_eq!(run(&i, &changes, &[m]).wrongly_sent, 1);
    }

    #[test]
    fn the_earliest_later_change_is_the_one_that_made_it_stale() {
        let mut changes = rescheduled_at(10_000).to_vec();
        changes.push(ChangeCommit {
            commitment_id: 1,
            version: 3,
            committed_ms: 20_000,
        });
        let i = [intent(1, "a:v1", 1, 1, "accepted", Some(5))];
        let v = run_with(&i, &changes, &[msg("a:v1", "m1")], &receipt("a:v1", 15_000));
        assert_eq!(v.wrongly_sent, 1, "stale since v2, not v3");
        // Another commitment's change does not matter.
        let other = [intent(1, "b:v1", 2, 1, "accepted", Some(5))];
        let v = run_with(&other, &changes, &[msg("b:v1", "m1")], &receipt("b:v1", 15_000));
        assert_eq!((v.wrongly_sent, v.in_flight_across_change), (0, 0));
    }

    #[test]
    fn never_claimed_or_unknown_keys_are_wrongly_sent() {
        let v = run(&[intent(1, "a", 1, 1, "cancelled", None)], &[], &[msg("a", "m1")]);
        assert_eq!((v.wrongly_sent, v.contradicted), (1, 1));
        let v = run(&[], &[], &[msg("ghost", "m1")]);
        assert_eq!(v.wrongly_sent, 1);
    }

    #[test]
    fn the_model_catches_lost_events_and_versions() {
        let commitments = [CheckedCommitment {
            reference: "cita-1".into(),
            version: 1,
            status: "scheduled".into(),
        }];
        let expected = [
            Expected {
                reference: "cita-1".into(),
                version: 2,
                status: "scheduled".into(),
            },
            Expected {
                reference: "cita-2".into(),
                version: 1,
                status: "scheduled".into(),
            },
        ];
        let v = check(&Inputs {
            intentions: &[],
            changes: &[],
            receipts: &HashMap::new(),
            commitments: &commitments,
            sent: &[],
            expected: &expected,
            missing_events: &["evt-9".to_string()],
            now_ms: 0,
        });
        assert_eq!(v.lost, 3);
    }
}
