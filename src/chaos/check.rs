//! The history checker, Jepsen style: compares what the ledger says with
//! what the engine (simulator) really sent, after everything settled.
//!
//! Pure: it receives the ledger's view (`crate::store::chaos`), the
//! simulator's ground-truth log and the harness's own model of the events it
//! imported, and returns a [`Verdict`]. Definitions:
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
//!   whose first claim (the validity check) came after its commitment had
//!   moved to a newer version (rescheduled or cancelled). Ledger order is
//!   the `intention_history` id, which follows commit order. A send claimed
//!   *before* the change and delivered after it is the in-flight race the
//!   design accepts (it is recorded and an update notice follows); it is
//!   counted apart as `in flight across a change`.
//! - **uncertain left unresolved**: intentions still `uncertain`.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::store::chaos::{CheckedCommitment, CheckedIntention, VersionMark};

/// One message the engine really handed to WhatsApp (from its log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    pub key: String,
    /// The engine's own id for the message (distinct per real send).
    pub message_id: String,
    pub correlation_id: Option<String>,
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
    pub marks: &'a [VersionMark],
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
    /// Informational: claimed before a reschedule/cancellation, delivered
    /// after it (recorded in history; an update notice follows).
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

    // The first history id at which each commitment reached each version.
    let mut marks: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
    for m in input.marks {
        marks
            .entry(m.commitment_id)
            .or_default()
            .push((m.version, m.first_history_id));
    }
    let superseded_at = |i: &CheckedIntention| -> Option<i64> {
        marks
            .get(&i.commitment_id)?
            .iter()
            .filter(|(ver, _)| *ver > i.version)
            .map(|(_, h)| *h)
            .min()
    };

    let mut known: HashMap<&str, ()> = HashMap::new();
    for i in input.intentions {
        known.insert(i.key.as_str(), ());
        *v.states.entry(i.state.clone()).or_default() += 1;
        let sent = by_key.get(i.key.as_str()).is_some_and(|m| !m.is_empty());
        let evidence = matches!(i.state.as_str(), "accepted" | "sent" | "delivered" | "read");
        if sent {
            match (i.first_claim, superseded_at(i)) {
                (None, _) => {
                    v.wrongly_sent += 1;
                    v.example(format!(
                        "wrongly sent: {} (#{}) went out but was never claimed",
                        i.key, i.id
                    ));
                }
                (Some(c), Some(s)) if c > s => {
                    v.wrongly_sent += 1;
                    v.example(format!(
                        "wrongly sent: {} (#{}) first claimed at history #{c}, after its commitment moved past v{} at #{s}",
                        i.key, i.id, i.version
                    ));
                }
                (Some(_), Some(_)) => v.in_flight_across_change += 1,
                (Some(_), None) => {}
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
        }
    }

    fn run(intentions: &[CheckedIntention], marks: &[VersionMark], sent: &[SentMessage]) -> Verdict {
        check(&Inputs {
            intentions,
            marks,
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

    #[test]
    fn claimed_after_the_commitment_moved_on_is_wrongly_sent() {
        let marks = [
            VersionMark {
                commitment_id: 1,
                version: 1,
                first_history_id: 1,
            },
            VersionMark {
                commitment_id: 1,
                version: 2,
                first_history_id: 20,
            },
        ];
        let late = [intent(1, "a:v1", 1, 1, "accepted", Some(25))];
        let v = run(&late, &marks, &[msg("a:v1", "m1")]);
        assert_eq!(v.wrongly_sent, 1);
        let in_flight = [intent(1, "a:v1", 1, 1, "accepted", Some(15))];
        let v = run(&in_flight, &marks, &[msg("a:v1", "m1")]);
        assert_eq!((v.wrongly_sent, v.in_flight_across_change), (0, 1));
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
            marks: &[],
            commitments: &commitments,
            sent: &[],
            expected: &expected,
            missing_events: &["evt-9".to_string()],
            now_ms: 0,
        });
        assert_eq!(v.lost, 3);
    }
}
