//! Unit tests of `identity.rs`: resolving the operator.

use super::*;
use crate::config::Role;

fn op(name: &str, role: Role, os_user: Option<&str>) -> Operator {
    Operator {
        name: name.into(),
        role,
        os_user: os_user.map(str::to_string),
    }
}

#[test]
fn single_user_takes_the_flag_as_given() {
    let cfg = Config::default();
    let id = resolve(&cfg, Some("supervisora"), "anyone").unwrap();
    assert_eq!(id.operator.name, "supervisora");
    assert!(!id.verified);
    assert!(matches!(
        resolve(&cfg, None, "anyone"),
        Err(IdentityError::FlagRequired { .. })
    ));
    assert!(matches!(
        resolve(&cfg, Some("nadie"), "anyone"),
        Err(IdentityError::UnknownOperator { .. })
    ));
}

#[test]
fn mapped_accounts_decide_and_the_flag_cannot_impersonate() {
    let mut cfg = Config {
        operators: vec![
            op("maria", Role::FrontDesk, Some("maria")),
            op("supervisora", Role::Supervisor, Some("ana")),
        ],
        ..Config::default()
    };
    let id = resolve(&cfg, None, "maria").unwrap();
    assert_eq!((id.operator.name.as_str(), id.verified), ("maria", true));
    assert!(resolve(&cfg, Some("maria"), "maria").unwrap().verified);
    assert!(matches!(
        resolve(&cfg, Some("supervisora"), "maria"),
        Err(IdentityError::NotYou { .. })
    ));
    assert!(matches!(
        resolve(&cfg, None, "intruso"),
        Err(IdentityError::UnmappedAccount { .. })
    ));
    assert!(matches!(
        resolve(&cfg, Some("supervisora"), "intruso"),
        Err(IdentityError::UnmappedWithFlag { .. })
    ));
    cfg.allow_operator_flag = true;
    let id = resolve(&cfg, Some("supervisora"), "maria").unwrap();
    assert_eq!((id.operator.name.as_str(), id.verified), ("supervisora", false));
}

#[test]
fn the_running_account_has_a_name() {
    assert!(!current_account().unwrap().is_empty());
}
