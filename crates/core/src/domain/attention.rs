//! Which cases need a person at the front desk, when a case counts as
//! handled, and what to do next with it: the attention rule's one home.
//!
//! The ledger's Atención query is *built from* [`AttentionRule::clauses`]
//! (`crates/ledger/src/store/attention.rs`), never written by hand, so the
//! console, the counts and this module's tests can not disagree about
//! which intentions are open cases (docs/design.md, "The front desk's work
//! queue").

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::channel_event::EventStatus;
use super::operator::OpKind;
use super::state::IntentionState;

/// One way an intention becomes a case for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "clause", rename_all = "snake_case")]
pub enum Clause {
    /// Every intention in this state, however old (nobody else will settle
    /// it: uncertain outcomes and reviews).
    Always(IntentionState),
    /// In this state and due within the rule's `failed_window` before now:
    /// older failures have left the desk.
    DueWithinWindow(IntentionState),
    /// In this state with its lease expired: a dispatch that never came
    /// back (shown as "stuck").
    LeaseExpired(IntentionState),
    /// Acknowledged by a channel that cannot be asked (the Cloud API), no
    /// news for the rule's `unconfirmed_window`, and due within its
    /// `failed_window`: "sin confirmación de entrega" (shown as
    /// `unconfirmed`). A channel that can be asked is polled instead
    /// (`recovery::StatusPoll`).
    Unconfirmed(IntentionState),
}

impl Clause {
    pub fn state(self) -> IntentionState {
        match self {
            Clause::Always(s) | Clause::DueWithinWindow(s) | Clause::LeaseExpired(s) | Clause::Unconfirmed(s) => s,
        }
    }
}

/// The attention rule and its windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionRule {
    /// Failed intentions due longer ago than this have left the desk.
    pub failed_window: Duration,
    /// Reschedule requests are cases for commitments starting within this
    /// much of now (either way).
    pub reschedule_window: Duration,
    /// Parked or refused channel events are technicians' cases for this
    /// long after they arrived: an event of another installation from last
    /// month tells nobody anything new.
    pub channel_event_window: Duration,
    /// Acknowledged messages with no news for this long are cases
    /// ([`Clause::Unconfirmed`]); `None` when the channel can be asked
    /// about them (the engine), which is the default.
    pub unconfirmed_window: Option<Duration>,
}

impl Default for AttentionRule {
    fn default() -> Self {
        AttentionRule {
            failed_window: Duration::days(3),
            reschedule_window: Duration::days(7),
            channel_event_window: Duration::days(7),
            unconfirmed_window: None,
        }
    }
}

/// What the rule needs to know about one intention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseFacts {
    pub state: IntentionState,
    pub due_at: DateTime<Utc>,
    pub lease_until: Option<DateTime<Utc>>,
    /// When the intention's state last changed (its last news).
    pub state_changed_at: DateTime<Utc>,
}

impl AttentionRule {
    /// The clauses, in the order the console ranks them.
    pub const CLAUSES: [Clause; 4] = [
        Clause::Always(IntentionState::Uncertain),
        Clause::Always(IntentionState::Review),
        Clause::DueWithinWindow(IntentionState::Failed),
        Clause::LeaseExpired(IntentionState::Dispatching),
    ];

    /// The clauses with, after them, the unconfirmed messages of a
    /// channel that cannot be asked.
    pub const CLAUSES_UNCONFIRMED: [Clause; 6] = [
        Clause::Always(IntentionState::Uncertain),
        Clause::Always(IntentionState::Review),
        Clause::DueWithinWindow(IntentionState::Failed),
        Clause::LeaseExpired(IntentionState::Dispatching),
        Clause::Unconfirmed(IntentionState::Accepted),
        Clause::Unconfirmed(IntentionState::Sent),
    ];

    pub fn clauses(&self) -> &'static [Clause] {
        match self.unconfirmed_window {
            None => &Self::CLAUSES,
            Some(_) => &Self::CLAUSES_UNCONFIRMED,
        }
    }

    /// The clause that makes `facts` a case now, if any.
    pub fn matches(&self, facts: &CaseFacts, now: DateTime<Utc>) -> Option<Clause> {
        self.clauses().iter().copied().find(|c| {
            c.state() == facts.state
                && match c {
                    Clause::Always(_) => true,
                    Clause::DueWithinWindow(_) => facts.due_at >= now - self.failed_window,
                    Clause::LeaseExpired(_) => facts.lease_until.is_some_and(|l| l < now),
                    Clause::Unconfirmed(_) => {
                        facts.due_at >= now - self.failed_window
                            && facts.state_changed_at <= self.unconfirmed_since(now)
                    }
                }
        })
    }

    /// The latest state change an [`Clause::Unconfirmed`] case can have
    /// (the far past when the rule has no such clause).
    pub fn unconfirmed_since(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self.unconfirmed_window {
            Some(w) => now - w,
            None => DateTime::<Utc>::MIN_UTC,
        }
    }

    /// The earliest due time a `DueWithinWindow` clause still accepts.
    pub fn failed_since(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - self.failed_window
    }
}

/// A mark "atendido" covers a case until something new happens to it: the
/// mark names the situation it was made on (when the intention's state last
/// changed, when the reschedule was requested, when the refused event was
/// last seen, when the channel event was received), and the case reopens as soon as its situation is another
/// one. Repeated or lower-ranked signals change no state and are not news.
/// Comparing situations, not the mark's clock with the situation's, keeps
/// a mark right when another process's clock runs ahead.
pub fn handled_covers(marked_situation: DateTime<Utc>, situation_since: DateTime<Utc>) -> bool {
    marked_situation == situation_since
}

/// What an Atención row is about, as far as the next step goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseKind {
    /// An intention in one of the rule's states (stuck: `Dispatching`).
    Intention(IntentionState),
    /// The customer asked to reschedule.
    RescheduleRequest,
    /// A booking event refused as a conflict.
    RefusedEvent,
    /// A channel event parked or refused (technicians only): applied to
    /// nothing until a person looks.
    ChannelEvent,
}

/// What an Atención row shows as its situation: an intention's state, or
/// one of the pseudo-states the list names its other cases by. The ledger
/// builds the shown word's SQL from [`Situation::of_intention`]
/// (`unavez_ledger::rules_sql`); the console colours and names each one
/// by an exhaustive match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Situation {
    State(IntentionState),
    /// A dispatch that never came back (its lease expired).
    Stuck,
    /// Acknowledged by the channel, no news since ([`Clause::Unconfirmed`]).
    Unconfirmed,
    /// The customer asked to reschedule.
    Reschedule,
    /// A booking event refused as a conflict.
    RefusedEvent,
    /// A channel event kept for a technician, by its status.
    ChannelEvent(EventStatus),
}

impl Situation {
    /// How an intention on the list shows: a dispatching one is there only
    /// because its lease expired ([`Clause::LeaseExpired`]), an accepted or
    /// sent one only because the channel never confirmed it
    /// ([`Clause::Unconfirmed`]).
    pub fn of_intention(state: IntentionState) -> Situation {
        match state {
            IntentionState::Dispatching => Situation::Stuck,
            IntentionState::Accepted | IntentionState::Sent => Situation::Unconfirmed,
            s => Situation::State(s),
        }
    }

    /// The word the ledger's row carries.
    pub fn as_str(self) -> &'static str {
        match self {
            Situation::State(s) => s.as_str(),
            Situation::Stuck => "stuck",
            Situation::Unconfirmed => "unconfirmed",
            Situation::Reschedule => "reschedule",
            Situation::RefusedEvent => "refused_event",
            Situation::ChannelEvent(e) => e.as_str(),
        }
    }

    /// Reads the word back; a channel event's status is read for
    /// `channel_event` rows only (its words overlap no state's, but
    /// `refused` is also a row kind).
    pub fn parse(word: &str, channel_event: bool) -> Option<Situation> {
        if channel_event {
            return EventStatus::parse(word).map(Situation::ChannelEvent);
        }
        Some(match word {
            "stuck" => Situation::Stuck,
            "unconfirmed" => Situation::Unconfirmed,
            "reschedule" => Situation::Reschedule,
            "refused_event" => Situation::RefusedEvent,
            other => Situation::State(other.parse().ok()?),
        })
    }

    /// The intention state behind the situation, for the guards: a stuck
    /// row is dispatching, an unconfirmed one accepted (the channel took
    /// it); `None` for cases that are no intention.
    pub fn intention_state(self) -> Option<IntentionState> {
        match self {
            Situation::State(s) => Some(s),
            Situation::Stuck => Some(IntentionState::Dispatching),
            Situation::Unconfirmed => Some(IntentionState::Accepted),
            Situation::Reschedule | Situation::RefusedEvent | Situation::ChannelEvent(_) => None,
        }
    }
}

impl std::fmt::Display for Situation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Situation {
    /// As its word: the rows' JSON stays what it was when the state was
    /// a string.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What this person should do next with a case: each Atención row says
/// it in words. Chosen by `domain::guard::hint` from the actions whose
/// guards accept them for this role and case now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NextStep {
    /// Call the customer (manual contact): a person must decide (review),
    /// or the message did not arrive and no resend is possible.
    Call,
    /// The message did not arrive: a supervisor sends it again.
    Resend,
    /// The channel will still report: wait for its confirmation.
    WaitForChannel,
    /// A booking-system conflict: a technician checks it.
    CheckConflict,
    /// The customer wants another time: call to reschedule.
    Reschedule,
    /// A channel event was kept but applied to nothing: a technician reads
    /// why (its reason) and checks which message it was about.
    CheckEvent,
    /// The channel took the message and never said it arrived (and cannot
    /// be asked): call to check that it did.
    ConfirmDelivery,
    // --- issue 25 §3: hints from guards ---
    /// The front desk may not resend: it asks a supervisor to.
    RequestResend,
    /// The front desk asked; a supervisor answers.
    WaitForSupervisor,
    /// A supervisor answers the front desk's request: authorize or decline.
    AnswerRequest,
    /// A supervisor can only decline the request (a resend would be
    /// refused now).
    DeclineRequest,
    /// The appointment was cancelled: tell the patient by phone, then mark
    /// the case handled.
    CallAboutCancellation,
    /// The customer already confirmed: nothing to chase; mark it handled.
    AlreadyConfirmed,
    /// Verify what happened (a technician on a review).
    Verify,
    /// Nothing this person can do but mark it handled.
    MarkHandled,
}

impl NextStep {
    pub const ALL: [NextStep; 15] = [
        NextStep::Call,
        NextStep::Resend,
        NextStep::WaitForChannel,
        NextStep::CheckConflict,
        NextStep::Reschedule,
        NextStep::CheckEvent,
        NextStep::ConfirmDelivery,
        NextStep::RequestResend,
        NextStep::WaitForSupervisor,
        NextStep::AnswerRequest,
        NextStep::DeclineRequest,
        NextStep::CallAboutCancellation,
        NextStep::AlreadyConfirmed,
        NextStep::Verify,
        NextStep::MarkHandled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NextStep::Call => "call",
            NextStep::Resend => "resend",
            NextStep::WaitForChannel => "wait_for_channel",
            NextStep::CheckConflict => "check_conflict",
            NextStep::Reschedule => "reschedule",
            NextStep::CheckEvent => "check_event",
            NextStep::ConfirmDelivery => "confirm_delivery",
            NextStep::RequestResend => "request_resend",
            NextStep::WaitForSupervisor => "wait_for_supervisor",
            NextStep::AnswerRequest => "answer_request",
            NextStep::DeclineRequest => "decline_request",
            NextStep::CallAboutCancellation => "call_about_cancellation",
            NextStep::AlreadyConfirmed => "already_confirmed",
            NextStep::Verify => "verify",
            NextStep::MarkHandled => "mark_handled",
        }
    }

    /// The operator actions the step names: each must be accepted by its
    /// guard whenever the hint says the step (`guard` tests).
    pub fn actions(self) -> &'static [OpKind] {
        match self {
            NextStep::Call | NextStep::Reschedule => &[OpKind::ManualContact],
            NextStep::Resend => &[OpKind::AuthorizeResend],
            NextStep::RequestResend => &[OpKind::RequestResend],
            NextStep::AnswerRequest => &[OpKind::AuthorizeResend, OpKind::DeclineResend],
            NextStep::DeclineRequest => &[OpKind::DeclineResend],
            NextStep::CallAboutCancellation | NextStep::AlreadyConfirmed | NextStep::MarkHandled => &[OpKind::Resolve],
            NextStep::Verify | NextStep::ConfirmDelivery => &[OpKind::Verify],
            NextStep::WaitForChannel | NextStep::WaitForSupervisor | NextStep::CheckConflict | NextStep::CheckEvent => {
                &[]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap()
    }

    fn facts(state: IntentionState, due_days_ago: i64, lease_min: Option<i64>) -> CaseFacts {
        CaseFacts {
            state,
            due_at: now() - Duration::days(due_days_ago),
            lease_until: lease_min.map(|m| now() + Duration::minutes(m)),
            state_changed_at: now() - Duration::days(due_days_ago),
        }
    }

    /// Every state, old and recent, leased and not: exactly the documented
    /// cases match.
    #[test]
    fn the_rule_matches_exactly_its_cases() {
        let rule = AttentionRule::default();
        for state in IntentionState::ALL {
            for (days, lease) in [(0, None), (2, None), (4, None), (0, Some(-1)), (0, Some(5))] {
                let got = rule.matches(&facts(state, days, lease), now());
                let want = match state {
                    IntentionState::Uncertain | IntentionState::Review => true,
                    IntentionState::Failed => days <= 3,
                    IntentionState::Dispatching => lease == Some(-1),
                    _ => false,
                };
                assert_eq!(got.is_some(), want, "{state} due {days} d ago, lease {lease:?}");
                if let Some(c) = got {
                    assert_eq!(c.state(), state);
                }
            }
        }
    }

    #[test]
    fn failed_window_edge_is_inclusive() {
        let rule = AttentionRule::default();
        let f = CaseFacts {
            state: IntentionState::Failed,
            due_at: rule.failed_since(now()),
            lease_until: None,
            state_changed_at: now(),
        };
        assert_eq!(
            rule.matches(&f, now()),
            Some(Clause::DueWithinWindow(IntentionState::Failed))
        );
    }

    /// With a channel that cannot be asked, acknowledged messages without
    /// news for the window become cases ("sin confirmación de entrega");
    /// with one that can (the default), they never do.
    #[test]
    fn unconfirmed_messages_are_cases_only_where_the_channel_cannot_be_asked() {
        let asked = AttentionRule::default();
        let cloud = AttentionRule {
            unconfirmed_window: Some(Duration::minutes(30)),
            ..AttentionRule::default()
        };
        assert_eq!(asked.clauses(), &AttentionRule::CLAUSES);
        assert_eq!(&cloud.clauses()[..4], &AttentionRule::CLAUSES);
        let quiet = |state, quiet_min: i64, due_days_ago: i64| CaseFacts {
            state,
            due_at: now() - Duration::days(due_days_ago),
            lease_until: None,
            state_changed_at: now() - Duration::minutes(quiet_min),
        };
        for state in IntentionState::ALL {
            let f = quiet(state, 31, 0);
            let want = matches!(state, IntentionState::Accepted | IntentionState::Sent);
            let got = cloud.matches(&f, now());
            if want {
                assert_eq!(got, Some(Clause::Unconfirmed(state)), "{state}");
                assert_eq!(asked.matches(&f, now()), None, "{state}");
            } else {
                assert_eq!(got, asked.matches(&f, now()), "{state}");
            }
        }
        let s = IntentionState::Accepted;
        // News within the window, or due before the desk's window: no case.
        assert_eq!(cloud.matches(&quiet(s, 29, 0), now()), None);
        assert!(cloud.matches(&quiet(s, 30, 0), now()).is_some());
        assert_eq!(cloud.matches(&quiet(s, 60 * 24 * 5, 4), now()), None);
        assert_eq!(cloud.unconfirmed_since(now()), now() - Duration::minutes(30));
    }

    #[test]
    fn a_mark_covers_until_the_situation_changes() {
        let t = now();
        assert!(handled_covers(t, t));
        assert!(!handled_covers(t, t - Duration::seconds(1)));
        assert!(!handled_covers(t, t + Duration::milliseconds(1)));
    }

    /// Each pseudo-state names exactly the clause that brings its state to
    /// the list, and every word reads back.
    #[test]
    fn a_situation_shows_the_clause_that_made_the_case() {
        let rule = AttentionRule {
            unconfirmed_window: Some(Duration::minutes(30)),
            ..AttentionRule::default()
        };
        for c in rule.clauses() {
            let shown = Situation::of_intention(c.state());
            match c {
                Clause::LeaseExpired(_) => assert_eq!(shown, Situation::Stuck),
                Clause::Unconfirmed(_) => assert_eq!(shown, Situation::Unconfirmed),
                _ => assert_eq!(shown, Situation::State(c.state())),
            }
            let behind = match c {
                Clause::Unconfirmed(_) => IntentionState::Accepted,
                _ => c.state(),
            };
            assert_eq!(shown.intention_state(), Some(behind));
        }
        for s in IntentionState::ALL {
            let shown = Situation::of_intention(s);
            assert_eq!(Situation::parse(shown.as_str(), false), Some(shown), "{s}");
        }
        for e in EventStatus::ALL {
            let shown = Situation::ChannelEvent(e);
            assert_eq!(Situation::parse(shown.as_str(), true), Some(shown));
        }
        for other in [Situation::Reschedule, Situation::RefusedEvent] {
            assert_eq!(Situation::parse(other.as_str(), false), Some(other));
            assert_eq!(other.intention_state(), None);
        }
    }
}
