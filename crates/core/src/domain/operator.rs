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
}

impl OpKind {
    pub const ALL: [OpKind; 8] = [
        Self::Cancel,
        Self::Verify,
        Self::AuthorizeResend,
        Self::ManualContact,
        Self::Reprocess,
        Self::PauseDispatch,
        Self::ResumeDispatch,
        Self::Resolve,
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
        }
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
        OpKind::Cancel | OpKind::ManualContact => matches!(role, Role::FrontDesk | Role::Supervisor),
        // Anyone who works a case may say it needs nothing else.
        OpKind::Verify | OpKind::Resolve => true,
        OpKind::AuthorizeResend => role == Role::Supervisor,
        OpKind::Reprocess => role == Role::Technician,
        // The desk works the lists; stopping the sends is a call for the
        // people who answer for the whole queue.
        OpKind::PauseDispatch | OpKind::ResumeDispatch => matches!(role, Role::Supervisor | Role::Technician),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                "resolve"
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
                FrontDesk => vec![Cancel, Verify, ManualContact, Resolve],
                Supervisor => vec![
                    Cancel,
                    Verify,
                    AuthorizeResend,
                    ManualContact,
                    PauseDispatch,
                    ResumeDispatch,
                    Resolve,
                ],
                Technician => vec![Verify, Reprocess, PauseDispatch, ResumeDispatch, Resolve],
            }
        };
        for role in [FrontDesk, Supervisor, Technician] {
            let may: Vec<OpKind> = OpKind::ALL.into_iter().filter(|op| allowed(role, *op)).collect();
            assert_eq!(may, expect(role), "{role:?}");
        }
    }
}
