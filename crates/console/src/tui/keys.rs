//! Keys → typed actions, through one registry.
//!
//! [`REGISTRY`] lists every command once (key, action, label, roles,
//! screens); the footer hints, the `?` help and [`action_for`] all read it,
//! so what is shown and what is accepted can never drift apart. A key the
//! role may not use is hidden from hints and help *and* answered with
//! [`Action::Refused`], so the operator learns why nothing happened.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::config::Role;
use crate::i18n::Strings;
use crate::ops::{OpKind, allowed};

/// The console's screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Screen {
    Attention,
    Upcoming,
    Board,
    /// The intentions behind a Tablero counter.
    Counter,
    Detail,
    Reprocess,
    /// One patient's card (a contact: one phone), from a filtered row or
    /// `:paciente`.
    Patient,
}

impl Screen {
    pub fn title(self, t: &Strings) -> &'static str {
        match self {
            Screen::Attention => t.screen_attention,
            Screen::Upcoming => t.screen_upcoming,
            Screen::Board | Screen::Counter => t.screen_board,
            Screen::Detail => t.screen_detail,
            Screen::Reprocess => t.screen_reprocess,
            Screen::Patient => t.screen_patient,
        }
    }

    /// The top-level screens a role can switch between, in tab order.
    pub fn tabs(role: Role) -> &'static [Screen] {
        if role == Role::Technician {
            &[Screen::Attention, Screen::Upcoming, Screen::Board, Screen::Reprocess]
        } else {
            &[Screen::Attention, Screen::Upcoming, Screen::Board]
        }
    }
}

/// What keys mean right now: normal navigation, or typing into a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Typing a `/` filter.
    Filter,
    /// Typing a `:` command.
    Command,
    /// An action's form (reason, outcome).
    Form,
    /// The two-step confirmation of an action.
    Confirm,
    /// A confirmation that must be typed: a resend of a message the
    /// customer already has needs the confirmation word, not one key.
    ConfirmWord,
    /// The `?` overlay.
    Help,
    /// The session's action log (`L`).
    Log,
    /// The last errors in full (`enter` on an error's flash, or `:error`).
    Error,
    /// Every live dispatcher, this console's and other processes'
    /// (`:despachadores`).
    Dispatchers,
    /// `unavez doctor`'s report (`:doctor`).
    Doctor,
    /// Several patients match `:paciente`: pick one.
    Chooser,
    /// The call-outcome chooser (`t`): one digit records the outcome.
    CallChooser,
    /// The calendar feeds' held disappearances (`:calendario`): confirm
    /// or discard them (issue 27 §2).
    Feeds,
}

/// The signed-in operator's powers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub role: Role,
    pub read_only: bool,
}

/// Everything a key can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    /// This session's actions.
    ShowLog,
    Back,
    Refresh,
    OpenFilter,
    OpenCommand,
    NextScreen,
    PrevScreen,
    Goto(Screen),
    Up,
    Down,
    PageUp,
    PageDown,
    Open,
    DayPrev,
    DayNext,
    /// Reproceso: toggle the state under the cursor.
    ToggleState,
    /// Atención: the day's handled cases instead of the open ones.
    ToggleHandled,
    /// First / last row of the page.
    Top,
    Bottom,
    /// Opens the form of an operator action.
    Op(OpKind),
    /// The role may not do this (the key is hidden for it).
    Refused(OpKind),
    /// Read-only console: every operator action is hidden and refused.
    ReadOnly,
    // --- text fields and dialogs ---
    Input(char),
    Backspace,
    NextField,
    Submit,
    Confirm,
    Abort,
    // --- issue 25 §2 (words) ---
    /// Detalle: the channel's own words (evidence ids, HTTP lines, raw
    /// notes) instead of the plain history, and back.
    ToggleTechnical,
    /// Atención: the call list instead of every case (`l`).
    CallList,
    /// Withdraws the action waiting out its grace period (`u`).
    Undo,
}

/// A key as the registry names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySpec {
    Char(char),
    Ctrl(char),
    Esc,
    Enter,
    Tab,
    BackTab,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
    F(u8),
}

impl KeySpec {
    pub fn matches(self, k: &KeyEvent) -> bool {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        match (self, k.code) {
            (KeySpec::Char(c), KeyCode::Char(x)) => !ctrl && c == x,
            (KeySpec::Ctrl(c), KeyCode::Char(x)) => ctrl && c == x.to_ascii_lowercase(),
            (KeySpec::Esc, KeyCode::Esc) => true,
            (KeySpec::Enter, KeyCode::Enter) => true,
            (KeySpec::Tab, KeyCode::Tab) => !k.modifiers.contains(KeyModifiers::SHIFT),
            (KeySpec::BackTab, KeyCode::BackTab) => true,
            (KeySpec::Up, KeyCode::Up) => true,
            (KeySpec::Down, KeyCode::Down) => true,
            (KeySpec::Left, KeyCode::Left) => true,
            (KeySpec::Right, KeyCode::Right) => true,
            (KeySpec::PageUp, KeyCode::PageUp) => true,
            (KeySpec::PageDown, KeyCode::PageDown) => true,
            (KeySpec::Home, KeyCode::Home) => true,
            (KeySpec::End, KeyCode::End) => true,
            (KeySpec::F(n), KeyCode::F(x)) => n == x,
            _ => false,
        }
    }

    pub fn label(self) -> String {
        match self {
            KeySpec::Char(' ') => "space".into(),
            KeySpec::Char(c) => c.to_string(),
            KeySpec::Ctrl(c) => format!("ctrl-{c}"),
            KeySpec::Esc => "esc".into(),
            KeySpec::Enter => "enter".into(),
            KeySpec::Tab => "tab".into(),
            KeySpec::BackTab => "shift-tab".into(),
            KeySpec::Up => "↑".into(),
            KeySpec::Down => "↓".into(),
            KeySpec::Left => "←".into(),
            KeySpec::Right => "→".into(),
            KeySpec::PageUp => "pgup".into(),
            KeySpec::PageDown => "pgdn".into(),
            KeySpec::Home => "home".into(),
            KeySpec::End => "end".into(),
            KeySpec::F(n) => format!("F{n}"),
        }
    }
}

/// One command of the registry.
#[derive(Debug, Clone, Copy)]
pub struct Command {
    pub keys: &'static [KeySpec],
    pub action: Action,
    pub label: fn(&Strings) -> &'static str,
    /// Shown in the footer (the rest only in `?` help).
    pub hint: bool,
    /// Empty: every screen.
    pub screens: &'static [Screen],
}

impl Command {
    /// The operator action behind the command, if it is one.
    pub fn op(&self) -> Option<OpKind> {
        match self.action {
            Action::Op(op) => Some(op),
            _ => None,
        }
    }

    pub fn on(&self, screen: Screen) -> bool {
        self.screens.is_empty() || self.screens.contains(&screen)
    }

    /// Whether this operator may use (and see) the command.
    /// The operator action whose right the command needs: its own, or,
    /// for the call list, recording what came of a call.
    pub fn gate(&self) -> Option<OpKind> {
        match self.action {
            Action::CallList => Some(OpKind::CallOutcome),
            _ => self.op(),
        }
    }

    pub fn permitted(&self, access: Access) -> bool {
        match self.gate() {
            Some(op) => !access.read_only && allowed(access.role, op),
            None => true,
        }
    }

    pub fn key_label(&self) -> String {
        self.keys.iter().map(|k| k.label()).collect::<Vec<_>>().join("/")
    }

    /// A command the footer shows (when the screen has room) and `?` help
    /// lists: one line of the registry each.
    const fn shown(
        keys: &'static [KeySpec],
        action: Action,
        label: fn(&Strings) -> &'static str,
        screens: &'static [Screen],
    ) -> Command {
        Command {
            keys,
            action,
            label,
            hint: true,
            screens,
        }
    }

    /// A command only `?` help lists.
    const fn help_only(
        keys: &'static [KeySpec],
        action: Action,
        label: fn(&Strings) -> &'static str,
        screens: &'static [Screen],
    ) -> Command {
        Command {
            hint: false,
            ..Command::shown(keys, action, label, screens)
        }
    }
}

use Command as C;
use Screen as S;
const ROWS: &[Screen] = &[S::Attention, S::Detail, S::Counter, S::Patient];
/// Screens with a case or an appointment to record a contact on.
const CONTACTS: &[Screen] = &[S::Attention, S::Upcoming, S::Detail, S::Counter, S::Patient];
/// Screens whose rows open something (a Detalle, a counter's list).
const OPENS: &[Screen] = &[S::Attention, S::Upcoming, S::Board, S::Counter, S::Patient];
const LISTS: &[Screen] = &[
    S::Attention,
    S::Upcoming,
    S::Counter,
    S::Board,
    S::Detail,
    S::Reprocess,
    S::Patient,
];

/// The one list of commands.
#[rustfmt::skip]
pub static REGISTRY: &[Command] = &[
    C::shown(&[KeySpec::Char('?'), KeySpec::F(1), KeySpec::Char('¿')], Action::Help, |t| t.act_help, &[]),
    C::shown(&[KeySpec::Char('c')], Action::Op(OpKind::Cancel), |t| t.act_cancel, ROWS),
    C::shown(&[KeySpec::Char('v')], Action::Op(OpKind::Verify), |t| t.act_verify, ROWS),
    C::shown(&[KeySpec::Char('a')], Action::Op(OpKind::AuthorizeResend), |t| t.act_resend, ROWS),
    C::shown(&[KeySpec::Char('m')], Action::Op(OpKind::ManualContact), |t| t.act_manual_contact, CONTACTS),
    C::shown(&[KeySpec::Char('x')], Action::Op(OpKind::Resolve), |t| t.act_resolve, ROWS),
    C::help_only(&[KeySpec::Char('h')], Action::ToggleHandled, |t| t.act_toggle_handled, &[S::Attention]),
    C::shown(&[KeySpec::Char('r')], Action::Op(OpKind::Reprocess), |t| t.act_reprocess, &[S::Reprocess]),
    // Pauses or resumes, whichever applies (see `App::open_form`). Help
    // only: the footer is kept for the row actions, and the header already
    // shows the dispatcher's state.
    C::help_only(&[KeySpec::Char('p')], Action::Op(OpKind::PauseDispatch), |t| t.act_pause_toggle, &[]),
    C::shown(&[KeySpec::Enter], Action::Open, |t| t.act_open, OPENS),
    // Every screen: off a list it searches Atención (the caller is on the
    // phone whatever screen is open).
    C::shown(&[KeySpec::Char('/')], Action::OpenFilter, |t| t.act_filter, &[]),
    C::help_only(&[KeySpec::Char('L')], Action::ShowLog, |t| t.act_log, &[]),
    C::help_only(&[KeySpec::Char(':')], Action::OpenCommand, |t| t.act_command, &[]),
    C::help_only(&[KeySpec::Esc], Action::Back, |t| t.act_back, &[]),
    C::help_only(&[KeySpec::Ctrl('r')], Action::Refresh, |t| t.act_refresh, &[]),
    C::help_only(&[KeySpec::Tab], Action::NextScreen, |t| t.act_next_screen, &[]),
    C::help_only(&[KeySpec::BackTab], Action::PrevScreen, |t| t.act_prev_screen, &[]),
    C::help_only(&[KeySpec::Up, KeySpec::Char('k')], Action::Up, |t| t.act_move, LISTS),
    C::help_only(&[KeySpec::Down, KeySpec::Char('j')], Action::Down, |t| t.act_move, LISTS),
    C::help_only(&[KeySpec::Char('g'), KeySpec::Home], Action::Top, |t| t.act_top, LISTS),
    C::help_only(&[KeySpec::Char('G'), KeySpec::End], Action::Bottom, |t| t.act_bottom, LISTS),
    C::help_only(&[KeySpec::PageUp, KeySpec::Ctrl('u')], Action::PageUp, |t| t.act_page, LISTS),
    C::help_only(&[KeySpec::PageDown, KeySpec::Ctrl('d')], Action::PageDown, |t| t.act_page, LISTS),
    C::help_only(&[KeySpec::Left], Action::DayPrev, |t| t.act_day, &[S::Board, S::Reprocess]),
    C::help_only(&[KeySpec::Right], Action::DayNext, |t| t.act_day, &[S::Board, S::Reprocess]),
    C::help_only(&[KeySpec::Char(' ')], Action::ToggleState, |t| t.reprocess_states, &[S::Reprocess]),
    C::help_only(&[KeySpec::Char('1')], Action::Goto(S::Attention), |t| t.screen_attention, &[]),
    C::help_only(&[KeySpec::Char('2')], Action::Goto(S::Upcoming), |t| t.screen_upcoming, &[]),
    C::help_only(&[KeySpec::Char('3')], Action::Goto(S::Board), |t| t.screen_board, &[]),
    C::help_only(&[KeySpec::Char('4')], Action::Goto(S::Reprocess), |t| t.screen_reprocess, &[]),
    // --- issue 25 §4: the call list, call outcomes, undo ---
    C::shown(&[KeySpec::Char('l')], Action::CallList, |t| t.act_call_list, &[S::Attention]),
    C::shown(&[KeySpec::Char('t')], Action::Op(OpKind::CallOutcome), |t| t.act_call, ROWS),
    // "Reabrir", in the day's handled cases (`h`).
    C::help_only(&[KeySpec::Char('r')], Action::Op(OpKind::Reopen), |t| t.act_reopen, &[S::Attention]),
    C::help_only(&[KeySpec::Char('u')], Action::Undo, |t| t.act_undo, &[]),
    C::shown(&[KeySpec::Char('q')], Action::Quit, |t| t.act_quit, &[]),
    // --- issue 25 §2 (words) ---
    C::shown(&[KeySpec::Char('e')], Action::ToggleTechnical, |t| t.words.act_technical, &[S::Detail]),
    // --- issue 25 §3 (guards): the front desk asks for a resend on the
    // supervisor's `a`; a supervisor declines with `d` ---
    C::shown(&[KeySpec::Char('a')], Action::Op(OpKind::RequestResend), |t| t.act_request_resend, ROWS),
    C::help_only(&[KeySpec::Char('d')], Action::Op(OpKind::DeclineResend), |t| t.act_decline_resend, ROWS),
];

/// The keys of the held-disappearances overlay (`:calendario`): its own
/// small registry, read by the overlay's hint line, `?` help and
/// [`action_for`] alike. Both need `feed_confirm`/`feed_discard`'s right,
/// so a role without it sees neither.
#[rustfmt::skip]
pub static FEED_KEYS: &[Command] = &[
    C::shown(&[KeySpec::Char('c')], Action::Op(OpKind::FeedConfirm), |t| t.act_feed_confirm, &[]),
    C::shown(&[KeySpec::Char('d')], Action::Op(OpKind::FeedDiscard), |t| t.act_feed_discard, &[]),
    C::help_only(&[KeySpec::Up, KeySpec::Char('k')], Action::Up, |t| t.act_move, &[]),
    C::help_only(&[KeySpec::Down, KeySpec::Char('j')], Action::Down, |t| t.act_move, &[]),
    C::shown(&[KeySpec::Esc, KeySpec::Char('q')], Action::Back, |t| t.act_back, &[]),
];

/// The held-disappearances overlay's commands this operator may use.
pub fn feed_keys_visible(access: Access) -> impl Iterator<Item = &'static Command> {
    FEED_KEYS.iter().filter(move |c| c.permitted(access))
}

/// What `key` means in the held-disappearances overlay: a feed action the
/// operator may not take is refused (and was never shown).
fn feeds_action(key: &KeyEvent, access: Access) -> Option<Action> {
    let cmd = FEED_KEYS.iter().find(|c| c.keys.iter().any(|s| s.matches(key)))?;
    match cmd.gate() {
        Some(_) if access.read_only => Some(Action::ReadOnly),
        Some(op) if !allowed(access.role, op) => Some(Action::Refused(op)),
        _ => Some(cmd.action),
    }
}

/// The commands shown for a screen and operator (footer hints and help).
pub fn visible(screen: Screen, access: Access) -> impl Iterator<Item = &'static Command> {
    REGISTRY
        .iter()
        .filter(move |c| c.on(screen) && c.permitted(access) && goto_permitted(c.action, access.role))
}

fn goto_permitted(a: Action, role: Role) -> bool {
    match a {
        Action::Goto(s) => Screen::tabs(role).contains(&s),
        _ => true,
    }
}

/// The pure key map: what `key` means on `screen`, for this operator, in
/// this mode. `None` means the key does nothing here.
pub fn action_for(key: &KeyEvent, screen: Screen, access: Access, mode: Mode) -> Option<Action> {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c')) {
        return Some(Action::Quit);
    }
    match mode {
        Mode::Filter | Mode::Command | Mode::Form | Mode::ConfirmWord => match key.code {
            KeyCode::Esc => Some(Action::Abort),
            KeyCode::Enter => Some(Action::Submit),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Tab | KeyCode::BackTab if matches!(mode, Mode::Form | Mode::Command) => Some(Action::NextField),
            KeyCode::Char(c) if !ctrl => Some(Action::Input(c)),
            _ => None,
        },
        Mode::Confirm => match key.code {
            KeyCode::Char('s' | 'S' | 'y' | 'Y') => Some(Action::Confirm),
            KeyCode::Char('n' | 'N') | KeyCode::Esc => Some(Action::Abort),
            _ => None,
        },
        Mode::Help => help_action(key),
        Mode::Feeds => feeds_action(key, access),
        Mode::Chooser => match key.code {
            KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
            KeyCode::Enter => Some(Action::Submit),
            KeyCode::Esc | KeyCode::Char('q') => Some(Action::Abort),
            KeyCode::Char(c @ '1'..='9') => Some(Action::Input(c)),
            _ => None,
        },
        Mode::CallChooser => match key.code {
            KeyCode::Char(c) if c.is_ascii_digit() => Some(Action::Input(c)),
            _ => Some(Action::Abort),
        },
        // The session's log scrolls (`L` shows every action of it).
        Mode::Log => match key.code {
            KeyCode::Char('q') => Some(Action::Quit),
            KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
            KeyCode::PageUp => Some(Action::PageUp),
            KeyCode::PageDown => Some(Action::PageDown),
            _ => Some(Action::Back),
        },
        Mode::Error | Mode::Dispatchers | Mode::Doctor => match key.code {
            KeyCode::Char('q') => Some(Action::Quit),
            _ => Some(Action::Back),
        },
        Mode::Normal => {
            // One key may name one action per role (`a`: a supervisor
            // resends, the front desk asks for it): the operator's own first.
            let find = |k: &KeyEvent| {
                let mut on = REGISTRY
                    .iter()
                    .filter(|c| c.on(screen) && c.keys.iter().any(|s| s.matches(k)));
                let all: Vec<&Command> = on.by_ref().collect();
                all.iter()
                    .find(|c| c.permitted(access))
                    .or_else(|| all.first())
                    .copied()
            };
            // Caps Lock: an uppercase letter with no binding of its own acts
            // as its lowercase (`Q` quits); pairs bound on purpose (`g`/`G`)
            // keep their meanings.
            let lower = match key.code {
                KeyCode::Char(c) if c.is_uppercase() => Some(KeyEvent::new(
                    KeyCode::Char(c.to_lowercase().next().unwrap_or(c)),
                    key.modifiers,
                )),
                _ => None,
            };
            let cmd = find(key).or_else(|| lower.as_ref().and_then(find))?;
            if !goto_permitted(cmd.action, access.role) {
                return None;
            }
            match cmd.gate() {
                Some(_) if access.read_only => Some(Action::ReadOnly),
                Some(op) if !allowed(access.role, op) => Some(Action::Refused(op)),
                _ => Some(cmd.action),
            }
        }
    }
}

// --- §1/§7 (issue 25): patient card, chooser, help scrolling ---

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;

/// `?` help scrolls (`j`/`k`, arrows, PgUp/PgDn, `g`/`G`); `esc`, `q` or
/// `?` close it, and other keys do nothing (a stray key no longer
/// closes what is being read).
fn help_action(key: &KeyEvent) -> Option<Action> {
    match key.code {
        KeyCode::Up | KeyCode::Char('k') => Some(Action::Up),
        KeyCode::Down | KeyCode::Char('j') => Some(Action::Down),
        KeyCode::PageUp => Some(Action::PageUp),
        KeyCode::PageDown | KeyCode::Char(' ') => Some(Action::PageDown),
        KeyCode::Home | KeyCode::Char('g') => Some(Action::Top),
        KeyCode::End | KeyCode::Char('G') => Some(Action::Bottom),
        KeyCode::Esc | KeyCode::Char('q' | 'Q' | '?') | KeyCode::F(1) => Some(Action::Back),
        _ => None,
    }
}
