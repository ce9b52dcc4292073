//! Keys → actions through the pure function, per role, without a terminal.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use unavez::config::Role;
use unavez::ops::{OpKind, allowed};
use unavez::tui::keys::{Access, Action, Mode, REGISTRY, Screen, action_for, visible};

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn access(role: Role) -> Access {
    Access { role, read_only: false }
}

const ROLES: [Role; 3] = [Role::FrontDesk, Role::Supervisor, Role::Technician];

#[test]
fn operator_action_keys_follow_the_role_policy() {
    for role in ROLES {
        for (c, op) in [
            ('c', OpKind::Cancel),
            ('v', OpKind::Verify),
            ('a', OpKind::AuthorizeResend),
            ('m', OpKind::ManualContact),
        ] {
            let got = action_for(&key(c), Screen::Attention, access(role), Mode::Normal);
            let want = if allowed(role, op) {
                Action::Op(op)
            } else if c == 'a' && role == Role::FrontDesk {
                // The front desk's `a` asks a supervisor (issue 25 §3).
                Action::Op(OpKind::RequestResend)
            } else {
                Action::Refused(op)
            };
            assert_eq!(got, Some(want), "{role:?} pressing {c}");
        }
    }
}

#[test]
fn only_supervisors_may_authorize_a_resend() {
    assert_eq!(
        action_for(&key('a'), Screen::Detail, access(Role::Supervisor), Mode::Normal),
        Some(Action::Op(OpKind::AuthorizeResend))
    );
    // The front desk's `a` asks a supervisor for it instead (issue 25 §3).
    assert_eq!(
        action_for(&key('a'), Screen::Detail, access(Role::FrontDesk), Mode::Normal),
        Some(Action::Op(OpKind::RequestResend))
    );
    assert_eq!(
        action_for(&key('d'), Screen::Detail, access(Role::Supervisor), Mode::Normal),
        Some(Action::Op(OpKind::DeclineResend))
    );
    assert_eq!(
        action_for(&key('d'), Screen::Detail, access(Role::FrontDesk), Mode::Normal),
        Some(Action::Refused(OpKind::DeclineResend))
    );
    assert_eq!(
        action_for(&key('a'), Screen::Detail, access(Role::Technician), Mode::Normal),
        Some(Action::Refused(OpKind::AuthorizeResend))
    );
}

#[test]
fn reprocess_is_for_technicians_on_their_screen() {
    assert_eq!(
        action_for(&key('r'), Screen::Reprocess, access(Role::Technician), Mode::Normal),
        Some(Action::Op(OpKind::Reprocess))
    );
    assert_eq!(
        action_for(&key('r'), Screen::Reprocess, access(Role::Supervisor), Mode::Normal),
        Some(Action::Refused(OpKind::Reprocess))
    );
    assert_eq!(
        action_for(&key('4'), Screen::Attention, access(Role::FrontDesk), Mode::Normal),
        None
    );
    assert_eq!(
        action_for(&key('4'), Screen::Attention, access(Role::Technician), Mode::Normal),
        Some(Action::Goto(Screen::Reprocess))
    );
}

#[test]
fn read_only_refuses_every_operator_action_and_hides_it() {
    let ro = Access {
        role: Role::Supervisor,
        read_only: true,
    };
    for c in ['c', 'v', 'a', 'm'] {
        assert_eq!(
            action_for(&key(c), Screen::Attention, ro, Mode::Normal),
            Some(Action::ReadOnly),
            "{c}"
        );
    }
    assert!(visible(Screen::Attention, ro).all(|c| c.op().is_none()));
    // Navigation still works.
    assert_eq!(
        action_for(&key('/'), Screen::Attention, ro, Mode::Normal),
        Some(Action::OpenFilter)
    );
}

#[test]
fn hidden_keys_are_exactly_the_refused_ones() {
    let screens = [
        Screen::Attention,
        Screen::Upcoming,
        Screen::Board,
        Screen::Counter,
        Screen::Detail,
        Screen::Reprocess,
    ];
    for role in ROLES {
        for screen in screens {
            for cmd in REGISTRY.iter().filter(|c| c.on(screen)) {
                let shown = visible(screen, access(role)).any(|v| std::ptr::eq(v, cmd));
                for k in cmd.keys {
                    let ev = match k {
                        unavez::tui::keys::KeySpec::Char(c) => key(*c),
                        _ => continue,
                    };
                    let got = action_for(&ev, screen, access(role), Mode::Normal);
                    // One key may name one action per role (`a`): hidden
                    // for this role, it runs the role's own command.
                    let own = visible(screen, access(role)).any(|v| Some(v.action) == got);
                    if !shown && own {
                        continue;
                    }
                    let refused = matches!(got, Some(Action::Refused(_)) | None);
                    assert_eq!(shown, !refused, "{role:?} {screen:?} {k:?}: shown={shown} got={got:?}");
                }
            }
        }
    }
}

#[test]
fn navigation_keys() {
    let a = access(Role::FrontDesk);
    assert_eq!(
        action_for(&key('?'), Screen::Attention, a, Mode::Normal),
        Some(Action::Help)
    );
    assert_eq!(
        action_for(&key(':'), Screen::Board, a, Mode::Normal),
        Some(Action::OpenCommand)
    );
    assert_eq!(
        action_for(&key('q'), Screen::Board, a, Mode::Normal),
        Some(Action::Quit)
    );
    assert_eq!(
        action_for(&key('j'), Screen::Attention, a, Mode::Normal),
        Some(Action::Down)
    );
    let esc = KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(action_for(&esc, Screen::Detail, a, Mode::Normal), Some(Action::Back));
    let ctrl_r = KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL);
    assert_eq!(
        action_for(&ctrl_r, Screen::Attention, a, Mode::Normal),
        Some(Action::Refresh)
    );
    let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        action_for(&enter, Screen::Attention, a, Mode::Normal),
        Some(Action::Open)
    );
}

#[test]
fn typing_modes_turn_letters_into_text() {
    let a = access(Role::Supervisor);
    for mode in [Mode::Form, Mode::Filter, Mode::Command] {
        assert_eq!(
            action_for(&key('c'), Screen::Attention, a, mode),
            Some(Action::Input('c'))
        );
        assert_eq!(
            action_for(&key('q'), Screen::Attention, a, mode),
            Some(Action::Input('q'))
        );
        let enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(action_for(&enter, Screen::Attention, a, mode), Some(Action::Submit));
    }
    assert_eq!(
        action_for(&key('s'), Screen::Attention, a, Mode::Confirm),
        Some(Action::Confirm)
    );
    assert_eq!(
        action_for(&key('n'), Screen::Attention, a, Mode::Confirm),
        Some(Action::Abort)
    );
    assert_eq!(action_for(&key('c'), Screen::Attention, a, Mode::Confirm), None);
}

#[test]
fn pause_key_is_for_supervisors_and_technicians_on_every_screen() {
    let screens = [
        Screen::Attention,
        Screen::Upcoming,
        Screen::Board,
        Screen::Counter,
        Screen::Detail,
        Screen::Reprocess,
    ];
    for screen in screens {
        for role in ROLES {
            let got = action_for(&key('p'), screen, access(role), Mode::Normal);
            let want = match role {
                Role::FrontDesk => Action::Refused(OpKind::PauseDispatch),
                Role::Supervisor | Role::Technician => Action::Op(OpKind::PauseDispatch),
            };
            assert_eq!(got, Some(want), "{role:?} on {screen:?}");
            let in_help = visible(screen, access(role)).any(|c| c.op() == Some(OpKind::PauseDispatch));
            assert_eq!(in_help, role != Role::FrontDesk, "{role:?} on {screen:?}");
        }
        let ro = Access {
            role: Role::Supervisor,
            read_only: true,
        };
        assert_eq!(action_for(&key('p'), screen, ro, Mode::Normal), Some(Action::ReadOnly));
        assert!(!visible(screen, ro).any(|c| c.op() == Some(OpKind::PauseDispatch)));
    }
    // Typing a reason with a `p` in it is text, not the key.
    assert_eq!(
        action_for(&key('p'), Screen::Attention, access(Role::Supervisor), Mode::Form),
        Some(Action::Input('p'))
    );
    assert!(allowed(Role::Technician, OpKind::ResumeDispatch));
    assert!(!allowed(Role::FrontDesk, OpKind::ResumeDispatch));
}

fn normal(k: KeyEvent, screen: Screen) -> Option<Action> {
    action_for(&k, screen, access(Role::FrontDesk), Mode::Normal)
}

#[test]
fn caps_lock_letters_act_as_lowercase_but_bound_pairs_keep_their_meaning() {
    assert_eq!(normal(key('Q'), Screen::Attention), Some(Action::Quit));
    assert_eq!(normal(key('C'), Screen::Attention), Some(Action::Op(OpKind::Cancel)));
    assert_eq!(normal(key('X'), Screen::Attention), Some(Action::Op(OpKind::Resolve)));
    // `g`/`G` and `L` are bound on purpose.
    assert_eq!(normal(key('g'), Screen::Attention), Some(Action::Top));
    assert_eq!(normal(key('G'), Screen::Attention), Some(Action::Bottom));
    assert_eq!(normal(key('L'), Screen::Attention), Some(Action::ShowLog));
}

#[test]
fn help_movement_and_queue_keys() {
    for k in [KeyEvent::new(KeyCode::F(1), KeyModifiers::NONE), key('?'), key('¿')] {
        assert_eq!(normal(k, Screen::Upcoming), Some(Action::Help), "{k:?}");
    }
    let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
    assert_eq!(normal(ctrl('d'), Screen::Attention), Some(Action::PageDown));
    assert_eq!(normal(ctrl('u'), Screen::Attention), Some(Action::PageUp));
    let plain = |c| KeyEvent::new(c, KeyModifiers::NONE);
    assert_eq!(normal(plain(KeyCode::Home), Screen::Counter), Some(Action::Top));
    assert_eq!(normal(plain(KeyCode::End), Screen::Counter), Some(Action::Bottom));
    assert_eq!(normal(key('h'), Screen::Attention), Some(Action::ToggleHandled));
    assert_eq!(normal(key('h'), Screen::Upcoming), None);
    // Every role may mark a case handled; a read-only console may not.
    for role in ROLES {
        assert_eq!(
            action_for(&key('x'), Screen::Attention, access(role), Mode::Normal),
            Some(Action::Op(OpKind::Resolve))
        );
    }
    let ro = Access {
        role: Role::Supervisor,
        read_only: true,
    };
    assert_eq!(
        action_for(&key('x'), Screen::Attention, ro, Mode::Normal),
        Some(Action::ReadOnly)
    );
    // Tab completes a `:` command.
    assert_eq!(
        action_for(
            &plain(KeyCode::Tab),
            Screen::Attention,
            access(Role::FrontDesk),
            Mode::Command
        ),
        Some(Action::NextField)
    );
}
