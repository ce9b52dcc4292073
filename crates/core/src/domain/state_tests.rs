//! Unit tests of the intention state machine.

use super::*;
use IntentionState as S;
use RecordOnly as R;
use Transition::{Move, Record, Refuse};

/// Every (state, signal) pair, written out by hand so that a change to
/// the machine has to change this table too.
fn expected(from: S, sig: Signal) -> Transition {
    match (from, sig) {
        (S::Planned, Signal::Claim) => Move(S::Dispatching),
        (S::Planned, Signal::Release) => Refuse,
        (S::Planned, Signal::Unknown) => Refuse,
        (S::Planned, Signal::NeedsReview) => Move(S::Review),
        (S::Planned, Signal::Cancel(_)) => Move(S::Cancelled),
        (S::Planned, Signal::Accepted) => Move(S::Accepted),
        (S::Planned, Signal::Sent) => Move(S::Sent),
        (S::Planned, Signal::Delivered) => Move(S::Delivered),
        (S::Planned, Signal::Read) => Move(S::Read),
        (S::Planned, Signal::Failed) => Move(S::Failed),

        (S::Dispatching, Signal::Claim) => Refuse,
        (S::Dispatching, Signal::Release) => Move(S::Planned),
        (S::Dispatching, Signal::Unknown) => Move(S::Uncertain),
        (S::Dispatching, Signal::NeedsReview) => Move(S::Review),
        (S::Dispatching, Signal::Cancel(r)) => {
            if r == CancelReason::Withdrawn {
                Move(S::Cancelled)
            } else {
                Refuse
            }
        }
        (S::Dispatching, Signal::Accepted) => Move(S::Accepted),
        (S::Dispatching, Signal::Sent) => Move(S::Sent),
        (S::Dispatching, Signal::Delivered) => Move(S::Delivered),
        (S::Dispatching, Signal::Read) => Move(S::Read),
        (S::Dispatching, Signal::Failed) => Move(S::Failed),

        (S::Uncertain, Signal::Claim) => Refuse,
        (S::Uncertain, Signal::Release) => Refuse,
        (S::Uncertain, Signal::Unknown) => Record(R::Repeated),
        (S::Uncertain, Signal::NeedsReview) => Move(S::Review),
        (S::Uncertain, Signal::Cancel(r)) => {
            if r == CancelReason::Withdrawn {
                Move(S::Cancelled)
            } else {
                Refuse
            }
        }
        (S::Uncertain, Signal::Accepted) => Move(S::Accepted),
        (S::Uncertain, Signal::Sent) => Move(S::Sent),
        (S::Uncertain, Signal::Delivered) => Move(S::Delivered),
        (S::Uncertain, Signal::Read) => Move(S::Read),
        (S::Uncertain, Signal::Failed) => Move(S::Failed),

        (S::Accepted, Signal::Claim) => Refuse,
        (S::Accepted, Signal::Release) => Refuse,
        (S::Accepted, Signal::Unknown) => Refuse,
        (S::Accepted, Signal::NeedsReview) => Move(S::Review),
        (S::Accepted, Signal::Cancel(r)) => {
            if r == CancelReason::Withdrawn {
                Move(S::Cancelled)
            } else {
                Refuse
            }
        }
        (S::Accepted, Signal::Accepted) => Record(R::Repeated),
        (S::Accepted, Signal::Sent) => Move(S::Sent),
        (S::Accepted, Signal::Delivered) => Move(S::Delivered),
        (S::Accepted, Signal::Read) => Move(S::Read),
        (S::Accepted, Signal::Failed) => Move(S::Failed),

        (S::Sent, Signal::Accepted) => Record(R::Lower),
        (S::Sent, Signal::Sent) => Record(R::Repeated),
        (S::Sent, Signal::Delivered) => Move(S::Delivered),
        (S::Sent, Signal::Read) => Move(S::Read),
        (S::Sent, Signal::Failed) => Move(S::Failed),
        (S::Sent, _) => Refuse,

        (S::Delivered, Signal::Accepted | Signal::Sent) => Record(R::Lower),
        (S::Delivered, Signal::Delivered) => Record(R::Repeated),
        (S::Delivered, Signal::Read) => Move(S::Read),
        (S::Delivered, Signal::Failed) => Record(R::FailedAfterDelivery),
        (S::Delivered, _) => Refuse,

        (S::Read, Signal::Accepted | Signal::Sent | Signal::Delivered) => Record(R::Lower),
        (S::Read, Signal::Read) => Record(R::Repeated),
        (S::Read, Signal::Failed) => Record(R::FailedAfterDelivery),
        (S::Read, _) => Refuse,

        (S::Failed, Signal::Failed) => Record(R::Repeated),
        (S::Failed, s) if s.is_evidence() => Record(R::AfterTerminal),
        (S::Failed, _) => Refuse,

        (S::Review, Signal::NeedsReview) => Record(R::Repeated),
        (S::Review, Signal::Cancel(_)) => Move(S::Cancelled),
        (S::Review, Signal::Accepted) => Move(S::Accepted),
        (S::Review, Signal::Sent) => Move(S::Sent),
        (S::Review, Signal::Delivered) => Move(S::Delivered),
        (S::Review, Signal::Read) => Move(S::Read),
        (S::Review, Signal::Failed) => Move(S::Failed),
        (S::Review, _) => Refuse,

        (S::Cancelled, Signal::Cancel(_)) => Record(R::Repeated),
        (S::Cancelled, s) if s.is_evidence() => Record(R::AfterTerminal),
        (S::Cancelled, _) => Refuse,
    }
}

#[test]
fn every_state_signal_pair_matches_the_table() {
    let mut signals: Vec<Signal> = Signal::KINDS.to_vec();
    signals.extend(CancelReason::ALL.map(Signal::Cancel));
    for from in S::ALL {
        for sig in &signals {
            assert_eq!(transition(from, *sig), expected(from, *sig), "{from} + {}", sig.name());
        }
    }
}

#[test]
fn evidence_never_lowers_rank() {
    for from in S::ALL {
        for sig in Signal::KINDS.into_iter().filter(|s| s.is_evidence()) {
            if let Move(to) = transition(from, sig)
                && let (Some(a), Some(b)) = (from.rank(), to.rank())
            {
                assert!(b > a, "{from} -> {to} lowers rank");
            }
        }
    }
}

#[test]
fn terminal_states_never_move() {
    let mut signals: Vec<Signal> = Signal::KINDS.to_vec();
    signals.extend(CancelReason::ALL.map(Signal::Cancel));
    for from in [S::Failed, S::Cancelled] {
        for sig in &signals {
            assert!(!matches!(transition(from, *sig), Move(_)), "{from} moved");
        }
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::select;

    fn any_state() -> impl Strategy<Value = S> {
        select(S::ALL.to_vec())
    }

    /// Every signal, each cancel reason included.
    fn any_signal() -> impl Strategy<Value = Signal> {
        let mut all: Vec<Signal> = Signal::KINDS.to_vec();
        all.extend(CancelReason::ALL.map(Signal::Cancel));
        select(all)
    }

    /// Evidence that a message went out, in any amount and order.
    fn positive_evidence() -> impl Strategy<Value = Vec<Signal>> {
        prop::collection::vec(
            select(vec![Signal::Accepted, Signal::Sent, Signal::Delivered, Signal::Read]),
            1..12,
        )
    }

    fn run(from: S, signals: &[Signal]) -> Vec<(S, Signal, S)> {
        let mut state = from;
        let mut steps = Vec::new();
        for &sig in signals {
            let next = match transition(state, sig) {
                Move(to) => to,
                Record(_) | Refuse => state,
            };
            steps.push((state, sig, next));
            state = next;
        }
        steps
    }

    proptest! {
        /// Whatever arrives, in whatever order: evidence never lowers
        /// the rank, a delivered message never looks undelivered again,
        /// and a closed intention stays closed.
        #[test]
        fn state_changes_are_monotonic_by_evidence_rank(
            from in any_state(),
            signals in prop::collection::vec(any_signal(), 0..40),
        ) {
            for (before, sig, after) in run(from, &signals) {
                if sig.is_evidence() && before != after
                    && let (Some(a), Some(b)) = (before.rank(), after.rank())
                {
                    prop_assert!(b > a, "{before} + {} -> {after} lowers the rank", sig.name());
                }
                if matches!(before, S::Delivered | S::Read) {
                    prop_assert!(
                        after == before || after == S::Read,
                        "{before} + {} -> {after}: a delivered message went back", sig.name()
                    );
                }
                if before.is_terminal() {
                    prop_assert_eq!(after, before, "{} moved a closed intention", sig.name());
                }
            }
        }

        /// Webhooks out of order: any order of the same evidence ends in
        /// the highest-ranked state reported.
        #[test]
        fn the_order_of_evidence_does_not_matter(
            from in select(vec![S::Planned, S::Dispatching, S::Uncertain, S::Accepted, S::Review]),
            (signals, shuffled) in positive_evidence()
                .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
        ) {
            let end = |sigs: &[Signal]| run(from, sigs).last().map(|s| s.2).unwrap_or(from);
            let highest = signals
                .iter()
                .filter_map(|s| s.evidence_state())
                .chain(from.rank().filter(|r| *r >= 2).map(|_| from))
                .max_by_key(|s| s.rank())
                .unwrap();
            prop_assert_eq!(end(&signals), highest);
            prop_assert_eq!(end(&shuffled), highest);
        }
    }
}

#[test]
fn state_names_round_trip() {
    for s in S::ALL {
        assert_eq!(s.as_str().parse::<S>(), Ok(s));
    }
    assert!("sending".parse::<S>().is_err());
    for r in CancelReason::ALL {
        assert_eq!(CancelReason::parse(r.as_str()), Some(r));
    }
}

mod replan {
    use super::*;
    use crate::domain::attempt::AttemptOutcome as O;

    fn t(outcome: O, http: Option<u16>, code: Option<&str>) -> AttemptTrace {
        AttemptTrace {
            outcome,
            http_status: http,
            error_code: code.map(str::to_string),
        }
    }

    #[test]
    fn a_failure_of_the_channel_alone_may_go_back_to_planned() {
        // What unavez recorded before it told the channel's refusal apart.
        let old_401 = t(O::Failed, Some(401), Some("no_autorizado"));
        let graph_190 = t(O::Failed, Some(401), Some("190"));
        let unsent = t(O::NotSent, None, Some("credential_rejected"));
        let retried = t(O::Retry, Some(503), None);
        for attempts in [
            vec![old_401.clone()],
            vec![graph_190],
            vec![retried.clone(), unsent, old_401],
            vec![retried, t(O::Failed, Some(404), Some("instancia_desconocida"))],
        ] {
            assert_eq!(
                replan_failed(S::Failed, &attempts, false),
                Ok(S::Planned),
                "{attempts:?}"
            );
        }
    }

    #[test]
    fn a_failed_message_that_may_have_reached_the_channel_never_goes_back() {
        let old_401 = t(O::Failed, Some(401), Some("no_autorizado"));
        for reached in [
            t(O::Accepted, Some(202), None),
            t(O::Ambiguous, Some(202), Some("ambiguo")),
            t(O::Uncertain, None, None),
            t(O::Conflict, Some(409), Some("conflict")),
            t(O::Started, None, None),
            // A refusal of the message itself (bad number, template).
            t(O::Failed, Some(422), Some("destino_invalido")),
            t(O::Failed, Some(400), Some("131026")),
            t(O::Failed, Some(202), Some("comando_vencido")),
        ] {
            let attempts = vec![old_401.clone(), reached.clone()];
            assert_eq!(
                replan_failed(S::Failed, &attempts, false),
                Err(ReplanRefused::MayHaveReached(2)),
                "{reached:?}"
            );
        }
        assert_eq!(
            replan_failed(S::Failed, std::slice::from_ref(&old_401), true),
            Err(ReplanRefused::HasChannelRefs)
        );
        assert_eq!(replan_failed(S::Failed, &[], false), Err(ReplanRefused::NoAttempt));
    }

    #[test]
    fn only_failed_intentions_are_the_exception() {
        let unsent = [t(O::NotSent, None, None)];
        for from in S::ALL.into_iter().filter(|s| *s != S::Failed) {
            assert_eq!(replan_failed(from, &unsent, false), Err(ReplanRefused::NotFailed(from)));
        }
        // The state machine itself still never moves a failed intention.
        let mut signals: Vec<Signal> = Signal::KINDS.to_vec();
        signals.extend(CancelReason::ALL.map(Signal::Cancel));
        assert!(signals.iter().all(|s| !matches!(transition(S::Failed, *s), Move(_))));
    }
}
