//! Issue 25 §1/§7 keys, as pure key → action tests: the help's scrolling
//! and closing keys, the chooser's, and the patient card's.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::*;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

fn access(role: Role) -> Access {
    Access { role, read_only: false }
}

const DESK: Access = Access {
    role: Role::FrontDesk,
    read_only: false,
};

#[test]
fn help_scrolls_and_closes_with_esc_q_or_question_mark() {
    let on = |k: KeyEvent| action_for(&k, Screen::Attention, DESK, Mode::Help);
    for (k, want) in [
        (ch('j'), Action::Down),
        (key(KeyCode::Down), Action::Down),
        (ch('k'), Action::Up),
        (key(KeyCode::Up), Action::Up),
        (key(KeyCode::PageDown), Action::PageDown),
        (key(KeyCode::PageUp), Action::PageUp),
        (key(KeyCode::Home), Action::Top),
        (key(KeyCode::End), Action::Bottom),
        (ch('G'), Action::Bottom),
        (key(KeyCode::Esc), Action::Back),
        (ch('q'), Action::Back),
        (ch('?'), Action::Back),
    ] {
        assert_eq!(on(k), Some(want), "{k:?}");
    }
    // A stray key does not close what is being read; ctrl-c still quits.
    assert_eq!(on(ch('x')), None);
    assert_eq!(on(key(KeyCode::Enter)), None);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(on(ctrl_c), Some(Action::Quit));
}

#[test]
fn the_chooser_moves_picks_by_enter_or_digit_and_closes_with_esc() {
    let on = |k: KeyEvent| action_for(&k, Screen::Board, DESK, Mode::Chooser);
    assert_eq!(on(ch('j')), Some(Action::Down));
    assert_eq!(on(key(KeyCode::Down)), Some(Action::Down));
    assert_eq!(on(ch('k')), Some(Action::Up));
    assert_eq!(on(key(KeyCode::Enter)), Some(Action::Submit));
    assert_eq!(on(key(KeyCode::Esc)), Some(Action::Abort));
    assert_eq!(on(ch('q')), Some(Action::Abort));
    for d in '1'..='9' {
        assert_eq!(on(ch(d)), Some(Action::Input(d)));
    }
    assert_eq!(on(ch('0')), None);
    assert_eq!(on(ch('c')), None, "no action from inside the chooser");
}

#[test]
fn the_patient_card_opens_detalle_with_enter_and_offers_the_role_actions() {
    for role in [Role::FrontDesk, Role::Supervisor, Role::Technician] {
        let on = |k: KeyEvent| action_for(&k, Screen::Patient, access(role), Mode::Normal);
        assert_eq!(on(key(KeyCode::Enter)), Some(Action::Open));
        assert_eq!(on(ch('j')), Some(Action::Down));
        assert_eq!(on(key(KeyCode::End)), Some(Action::Bottom));
        assert_eq!(on(key(KeyCode::Esc)), Some(Action::Back));
        for (c, op) in [
            ('c', OpKind::Cancel),
            ('v', OpKind::Verify),
            ('a', OpKind::AuthorizeResend),
            ('m', OpKind::ManualContact),
            ('x', OpKind::Resolve),
        ] {
            // The front desk's `a` asks a supervisor for the resend it may
            // not authorize (issue 25 §3).
            let want = if allowed(role, op) {
                Action::Op(op)
            } else if c == 'a' && allowed(role, OpKind::RequestResend) {
                Action::Op(OpKind::RequestResend)
            } else {
                Action::Refused(op)
            };
            assert_eq!(on(ch(c)), Some(want), "{role:?} {c}");
        }
        // What the card shows is what the keys accept.
        let shown: Vec<OpKind> = visible(Screen::Patient, access(role)).filter_map(Command::op).collect();
        for op in shown {
            assert!(allowed(role, op), "{role:?} is shown {op:?}");
        }
    }
    let read_only = Access {
        role: Role::Supervisor,
        read_only: true,
    };
    assert_eq!(
        action_for(&ch('x'), Screen::Patient, read_only, Mode::Normal),
        Some(Action::ReadOnly)
    );
}

#[test]
fn g_and_end_mean_the_last_row_on_every_list() {
    for screen in [Screen::Attention, Screen::Upcoming, Screen::Counter, Screen::Patient] {
        for k in [ch('G'), key(KeyCode::End)] {
            assert_eq!(
                action_for(&k, screen, DESK, Mode::Normal),
                Some(Action::Bottom),
                "{screen:?}"
            );
        }
        assert_eq!(action_for(&ch('g'), screen, DESK, Mode::Normal), Some(Action::Top));
    }
}

// --- issue 27 §2: the held-disappearances overlay (`:calendario`) ---

#[test]
fn feed_review_keys_follow_the_role_rule() {
    let on = |k: KeyEvent, a: Access| action_for(&k, Screen::Attention, a, Mode::Feeds);
    for role in [Role::Technician, Role::Supervisor] {
        let a = access(role);
        assert_eq!(on(ch('c'), a), Some(Action::Op(OpKind::FeedConfirm)), "{role:?}");
        assert_eq!(on(ch('d'), a), Some(Action::Op(OpKind::FeedDiscard)), "{role:?}");
        let shown: Vec<Action> = feed_keys_visible(a).map(|c| c.action).collect();
        assert!(shown.contains(&Action::Op(OpKind::FeedConfirm)), "{role:?}");
        assert!(shown.contains(&Action::Op(OpKind::FeedDiscard)), "{role:?}");
    }
    // The front desk may not act: the keys are hidden and refused.
    assert_eq!(on(ch('c'), DESK), Some(Action::Refused(OpKind::FeedConfirm)));
    assert_eq!(on(ch('d'), DESK), Some(Action::Refused(OpKind::FeedDiscard)));
    assert!(feed_keys_visible(DESK).all(|c| c.op().is_none()));
    // A read-only console refuses every action, whatever the role.
    let ro = Access {
        role: Role::Technician,
        read_only: true,
    };
    assert_eq!(on(ch('c'), ro), Some(Action::ReadOnly));
    assert!(feed_keys_visible(ro).all(|c| c.op().is_none()));
    // Moving and closing work for everyone; a stray key does nothing.
    assert_eq!(on(ch('j'), DESK), Some(Action::Down));
    assert_eq!(on(key(KeyCode::Up), DESK), Some(Action::Up));
    assert_eq!(on(key(KeyCode::Esc), DESK), Some(Action::Back));
    assert_eq!(on(ch('x'), DESK), None);
}
