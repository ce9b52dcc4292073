//! Who is acting: the one place the console and every command-line action
//! resolve the operator (docs/design.md, "Operator identity").
//!
//! - **Single-user installation** (no `[[operator]]` has an `os_user`):
//!   `--operator NAME` is taken as given, as before; the console says
//!   "identity not verified".
//! - **Operators mapped to OS accounts** (any `os_user` set): the operator
//!   is the one mapped to the account running unavez (the real uid, looked
//!   up in the system's user database, never `$USER`). `--operator` is
//!   accepted only when it names that same operator, or when the config
//!   sets `allow_operator_flag = true` (a shared account), and then the
//!   identity is marked as not verified.
//!
//! A refusal is recorded in `operator_actions` like any refused action.

use chrono::{DateTime, Utc};

use crate::config::{Config, Operator};
use crate::store::{OperatorAction, Tx};

/// The resolved operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub operator: Operator,
    /// The OS account vouches for it.
    pub verified: bool,
    /// The OS account that ran the command.
    pub account: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("--operator: unknown operator {name:?}; add it as [[operator]] in the config (known: {known})")]
    UnknownOperator { name: String, known: String },
    #[error("--operator is required: say who is acting (known: {known})")]
    FlagRequired { known: String },
    #[error("the OS account {account:?} is not any operator's os_user in the config; ask the administrator to add it")]
    UnmappedAccount { account: String },
    #[error(
        "--operator {requested:?} is not you: the OS account {account:?} is operator {actual:?} \
         (the config must set allow_operator_flag = true to act for someone else)"
    )]
    NotYou {
        requested: String,
        account: String,
        actual: String,
    },
    #[error("--operator {requested:?} refused: the OS account {account:?} is not any operator's os_user")]
    UnmappedWithFlag { requested: String, account: String },
    #[error("cannot tell which OS account runs unavez: {0}")]
    NoAccount(String),
}

/// The name of the account running this process (real uid).
pub fn current_account() -> Result<String, IdentityError> {
    let uid = nix::unistd::Uid::current();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => Ok(u.name),
        Ok(None) => Err(IdentityError::NoAccount(format!(
            "uid {uid} has no entry in the user database"
        ))),
        Err(e) => Err(IdentityError::NoAccount(e.to_string())),
    }
}

/// Resolves who acts, from the config, the `--operator` flag and the OS
/// account running the command.
pub fn resolve(config: &Config, flag: Option<&str>, account: &str) -> Result<Identity, IdentityError> {
    let known = || {
        config
            .operators
            .iter()
            .map(|o| o.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let by_name = |name: &str| {
        config
            .operator(name)
            .cloned()
            .ok_or_else(|| IdentityError::UnknownOperator {
                name: name.to_string(),
                known: known(),
            })
    };
    let identity = |operator: Operator, verified: bool| Identity {
        operator,
        verified,
        account: account.to_string(),
    };
    if !config.identity_verified() {
        let name = flag.ok_or_else(|| IdentityError::FlagRequired { known: known() })?;
        return Ok(identity(by_name(name)?, false));
    }
    let mapped = config.operators.iter().find(|o| o.os_user.as_deref() == Some(account));
    match (flag, mapped) {
        (None, Some(op)) => Ok(identity(op.clone(), true)),
        (None, None) => Err(IdentityError::UnmappedAccount {
            account: account.to_string(),
        }),
        (Some(name), Some(op)) if config.operator(name).is_some_and(|o| o.name == op.name) => {
            Ok(identity(op.clone(), true))
        }
        (Some(name), _) if config.allow_operator_flag => Ok(identity(by_name(name)?, false)),
        (Some(name), Some(op)) => Err(IdentityError::NotYou {
            requested: name.to_string(),
            account: account.to_string(),
            actual: op.name.clone(),
        }),
        (Some(name), None) => Err(IdentityError::UnmappedWithFlag {
            requested: name.to_string(),
            account: account.to_string(),
        }),
    }
}

/// Records a refused identity in `operator_actions`: who tried (the
/// requested operator, else the OS account), what (`action`), and why.
pub fn record_refusal(
    tx: &Tx<'_>,
    account: &str,
    requested: Option<&str>,
    action: &str,
    error: &IdentityError,
    now: DateTime<Utc>,
) -> Result<i64, crate::store::StoreError> {
    let detail = format!("OS account {account}: {error}");
    tx.record_operator_action(
        &OperatorAction {
            operator: requested.unwrap_or(account),
            role: "unverified",
            action,
            intention_id: None,
            commitment_id: None,
            scope: Some("identity"),
            reason: "identity check",
            result: "refused",
            detail: Some(&detail),
        },
        now,
    )
}

#[cfg(test)]
#[path = "identity_tests.rs"]
mod tests;
