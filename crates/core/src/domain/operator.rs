//! Operators, their roles and the actions they take: who may do what in
//! the console and the CLI (the app carries the actions out, `ops`).

use serde::{Deserialize, Serialize};

use super::history::HistorySignal;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    FrontDesk,
    Supervisor,
    Technician,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::FrontDesk => "front_desk",
            Role::Supervisor => "supervisor",
            Role::Technician => "technician",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Operator {
    pub name: String,
    pub role: Role,
    /// The OS account this operator signs in with. Once any operator has
    /// one, identity comes from the account running unavez, not from
    /// `--operator` (docs/design.md, "Operator identity").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_user: Option<String>,
}

/// The operator actions, as stored in `operator_actions.action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Cancel,
    Verify,
    AuthorizeResend,
    ManualContact,
    Reprocess,
    /// Stop new claims of the embedded dispatcher.
    PauseDispatch,
    ResumeDispatch,
    /// "Marcar atendido": the case needs nothing else.
    Resolve,
    /// The front desk asks a supervisor to authorize a resend.
    RequestResend,
    /// A supervisor answers such a request with no.
    DeclineResend,
    /// What came of a call to the patient (`domain::call`).
    CallOutcome,
    /// Reopens a case marked handled: the compensating action (the mark's
    /// action stays in the log).
    Reopen,
    /// Confirms a calendar feed's held disappearances: cancels them.
    FeedConfirm,
    /// Discards them: the appointments stay, the feed's body is the
    /// baseline.
    FeedDiscard,
}

impl OpKind {
    pub const ALL: [OpKind; 14] = [
        Self::Cancel,
        Self::Verify,
        Self::AuthorizeResend,
        Self::ManualContact,
        Self::Reprocess,
        Self::PauseDispatch,
        Self::ResumeDispatch,
        Self::Resolve,
        Self::RequestResend,
        Self::DeclineResend,
        Self::CallOutcome,
        Self::Reopen,
        Self::FeedConfirm,
        Self::FeedDiscard,
    ];

    /// The stored word, in `operator_actions` and in the intention's
    /// history ([`OpKind::history_signal`]).
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Cancel => "cancel",
            OpKind::Verify => "verify",
            OpKind::AuthorizeResend => "authorize_resend",
            OpKind::ManualContact => "manual_contact",
            OpKind::Reprocess => "reprocess",
            OpKind::PauseDispatch => "pause_dispatch",
            OpKind::ResumeDispatch => "resume_dispatch",
            OpKind::Resolve => "resolve",
            OpKind::RequestResend => "request_resend",
            OpKind::DeclineResend => "decline_resend",
            OpKind::CallOutcome => "call_outcome",
            OpKind::Reopen => "reopen",
            OpKind::FeedConfirm => "feed_confirm",
            OpKind::FeedDiscard => "feed_discard",
        }
    }

    /// The actions whose latest on an intention decides where the front
    /// desk's request for a resend stands (`guard::ResendAsk`): a
    /// request, its decline, or an authorization.
    pub fn settles_resend_ask(self) -> bool {
        matches!(
            self,
            OpKind::RequestResend | OpKind::DeclineResend | OpKind::AuthorizeResend
        )
    }

    /// The history row an action writes on its intention: the typed
    /// signal whose stored word is the action's own (a cancel writes the
    /// state machine's `cancel`).
    pub fn history_signal(self) -> HistorySignal {
        match self {
            OpKind::Cancel => HistorySignal::Cancel,
            op => HistorySignal::Action(op),
        }
    }
}

/// Which roles may do what. The console's key registry and the library
/// both ask this one function, so a hidden key is also a refused call.
pub fn allowed(role: Role, op: OpKind) -> bool {
    match op {
        OpKind::Cancel | OpKind::ManualContact | OpKind::CallOutcome => {
            matches!(role, Role::FrontDesk | Role::Supervisor)
        }
        // Anyone who works a case may say it needs nothing else.
        // and whoever may mark it handled may take the mark back.
        OpKind::Verify | OpKind::Resolve | OpKind::Reopen => true,
        OpKind::AuthorizeResend | OpKind::DeclineResend => role == Role::Supervisor,
        // Who may not resend asks the one who may.
        OpKind::RequestResend => role == Role::FrontDesk,
        OpKind::Reprocess => role == Role::Technician,
        // The desk works the lists; stopping the sends is a call for the
        // people who answer for the whole queue.
        OpKind::PauseDispatch | OpKind::ResumeDispatch => matches!(role, Role::Supervisor | Role::Technician),
        // Cancelling (or keeping) a batch of appointments a calendar lost
        // at once: the people who answer for the whole agenda.
        OpKind::FeedConfirm | OpKind::FeedDiscard => matches!(role, Role::Supervisor | Role::Technician),
    }
}

/// Whether `typed` names the operator `name` as a person types it:
/// capitals and accents do not matter (`--operator Recepción` is
/// `recepcion`). Callers prefer an exact match and refuse an ambiguous
/// one.
pub fn name_matches(typed: &str, name: &str) -> bool {
    let typed = typed.trim();
    !typed.is_empty() && super::inbound::normalize(typed) == super::inbound::normalize(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_names_match_as_typed() {
        assert!(name_matches("recepción", "recepcion"));
        assert!(name_matches("RECEPCIÓN", "recepcion"));
        assert!(name_matches(" Recepcion ", "recepción"));
        assert!(!name_matches("recepcio", "recepcion"));
        assert!(!name_matches("", "recepcion"));
        assert!(!name_matches("supervision", "recepcion"));
    }

    /// The words `operator_actions` has stored since the first version
    /// (a rename would change what stored rows mean), each read back as
    /// the action's typed history signal.
    #[test]
    fn every_action_keeps_its_stored_word_as_a_typed_signal() {
        let words = OpKind::ALL.map(OpKind::as_str);
        assert_eq!(
            words,
            [
                "cancel",
                "verify",
                "authorize_resend",
                "manual_contact",
                "reprocess",
                "pause_dispatch",
                "resume_dispatch",
                "resolve",
                "request_resend",
                "decline_resend",
                "call_outcome",
                "reopen",
                "feed_confirm",
                "feed_discard"
            ]
        );
        for op in OpKind::ALL {
            assert_eq!(HistorySignal::parse(op.as_str()), Some(op.history_signal()), "{op:?}");
        }
    }

    /// Every (role, action) pair, so a new action or role cannot slip in
    /// without a decision here.
    #[test]
    fn who_may_do_what() {
        use OpKind::*;
        use Role::*;
        let expect = |role: Role| -> Vec<OpKind> {
            match role {
                FrontDesk => vec![
                    Cancel,
                    Verify,
                    ManualContact,
                    Resolve,
                    RequestResend,
                    CallOutcome,
                    Reopen,
                ],
                Supervisor => vec![
                    Cancel,
                    Verify,
                    AuthorizeResend,
                    ManualContact,
                    PauseDispatch,
                    ResumeDispatch,
                    Resolve,
                    DeclineResend,
                    CallOutcome,
                    Reopen,
                    FeedConfirm,
                    FeedDiscard,
                ],
                Technician => vec![
                    Verify,
                    Reprocess,
                    PauseDispatch,
                    ResumeDispatch,
                    Resolve,
                    Reopen,
                    FeedConfirm,
                    FeedDiscard,
                ],
            }
        };
        for role in [FrontDesk, Supervisor, Technician] {
            let may: Vec<OpKind> = OpKind::ALL.into_iter().filter(|op| allowed(role, *op)).collect();
            assert_eq!(may, expect(role), "{role:?}");
        }
    }
}
