//! The patient card (issue 25 §1): a patient is a contact, one phone. A
//! filtered row's `enter`, or `:paciente TEXT` from any screen, opens it;
//! when a search finds several patients a short chooser comes first. The
//! card reads the patient's commitments of the last
//! [`CARD_BEHIND_HOURS`] and the next [`CARD_AHEAD_DAYS`], each message
//! with its state in one sentence; actions apply to the selected message
//! and `enter` opens its Detalle.
//!
//! Also here, because they are the same navigation: the search kept
//! across screens and the cursor `esc` puts back, and the help's scroll.

use super::*;
use crate::store::{PatientCard, PatientMatch};

/// The card shows commitments that started this many hours ago…
pub const CARD_BEHIND_HOURS: i64 = 24;
/// …up to this many days ahead.
pub const CARD_AHEAD_DAYS: i64 = 7;
/// How many patients the chooser lists (a search naming more is too vague
/// to pick from: the flash says to type more).
const CHOOSER_LIMIT: u32 = 9;

/// The card on screen and the chooser's choices.
#[derive(Debug, Clone, Default)]
pub struct PatientView {
    /// The patient shown (raw E.164, never drawn unmasked).
    pub phone: Option<String>,
    pub card: Option<Box<PatientCard>>,
    pub loading: bool,
    /// Index into [`PatientView::messages`].
    pub selected: usize,
    /// `:paciente`'s matches while the chooser is open.
    pub choices: Vec<PatientMatch>,
    pub chosen: usize,
}

impl PatientView {
    /// The card's messages in display order: (commitment, notification)
    /// indexes into the card.
    pub fn messages(&self) -> Vec<(usize, usize)> {
        let Some(card) = &self.card else { return Vec::new() };
        card.commitments
            .iter()
            .enumerate()
            .flat_map(|(c, row)| (0..row.notifications.len()).map(move |n| (c, n)))
            .collect()
    }
}

/// A list's cursor: page offset, row, and the row it follows.
type Cursor = (u32, usize, Option<(u8, i64)>);

/// The lists' cursors before a search began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedCursor {
    pub attention: Cursor,
    pub upcoming: Cursor,
}

fn cursor_of<T>(r: &Rows<T>) -> Cursor {
    (r.offset, r.selected, r.anchor)
}

fn put_cursor<T>(r: &mut Rows<T>, (offset, selected, anchor): Cursor) {
    r.offset = offset;
    r.selected = selected;
    r.anchor = anchor;
}

impl App {
    /// A new search begins: remember where the lists' cursors are.
    pub(super) fn save_cursor(&mut self) {
        if self.filter.is_empty() || self.before_filter.is_none() {
            self.before_filter = Some(SavedCursor {
                attention: cursor_of(&self.attention),
                upcoming: cursor_of(&self.upcoming),
            });
        }
    }

    /// `esc` on a search: it goes, and the cursors go back where they were
    /// before it (whatever the search found, even nothing).
    pub(super) fn clear_filter(&mut self) -> Vec<Request> {
        self.filter.clear();
        self.input.clear();
        match self.before_filter.take() {
            Some(saved) => {
                put_cursor(&mut self.attention, saved.attention);
                put_cursor(&mut self.upcoming, saved.upcoming);
            }
            None => self.reset_offset(),
        }
        self.load_screen(self.screen)
    }

    /// Both lists back to their first row (a new search).
    pub(super) fn reset_lists(&mut self) {
        for rows in [&mut self.attention.offset, &mut self.upcoming.offset] {
            *rows = 0;
        }
        self.attention.top();
        self.upcoming.top();
    }

    /// Opens the card of the patient with this phone.
    pub(super) fn open_patient(&mut self, phone: String) -> Vec<Request> {
        if self.patient.phone.as_deref() != Some(phone.as_str()) {
            self.patient.card = None;
            self.patient.selected = 0;
        }
        self.patient.phone = Some(phone);
        if self.screen != Screen::Patient {
            self.back.push(self.screen);
            self.screen = Screen::Patient;
        }
        self.load_patient()
    }

    pub(super) fn load_patient(&mut self) -> Vec<Request> {
        let Some(phone) = self.patient.phone.clone() else {
            return vec![];
        };
        self.patient.loading = true;
        vec![Request::PatientCard {
            phone,
            from: self.now - Duration::hours(CARD_BEHIND_HOURS),
            to: self.now + Duration::days(CARD_AHEAD_DAYS),
        }]
    }

    /// `:paciente TEXT`: the patients the lists' search finds.
    pub(super) fn find_patient(&mut self, text: &str) -> Vec<Request> {
        if text.trim().is_empty() {
            self.flash(FlashKind::Info, self.t.patient_usage.into());
            return vec![];
        }
        vec![Request::Patients {
            text: text.trim().to_string(),
            limit: CHOOSER_LIMIT + 1,
        }]
    }

    /// The search's patients: none (said), one (its card), several (the
    /// chooser).
    pub(super) fn on_patients(&mut self, text: &str, found: Result<Vec<PatientMatch>, Failure>) -> Vec<Request> {
        let mut found = match found {
            Ok(f) => f,
            Err(e) => {
                self.fail(e);
                return vec![];
            }
        };
        match found.len() {
            0 => {
                self.flash(FlashKind::Info, fill(self.t.patient_none, &[("text", text)]));
                vec![]
            }
            1 => self.open_patient(found.remove(0).phone),
            n => {
                if n > CHOOSER_LIMIT as usize {
                    found.truncate(CHOOSER_LIMIT as usize);
                    self.flash(FlashKind::Info, self.t.patient_many.into());
                }
                self.patient.choices = found;
                self.patient.chosen = 0;
                self.mode = Mode::Chooser;
                vec![]
            }
        }
    }

    pub(super) fn on_patient_card(&mut self, phone: &str, card: Result<Option<Box<PatientCard>>, Failure>) {
        // A card asked for before another patient was opened.
        if self.patient.phone.as_deref() != Some(phone) {
            return;
        }
        self.patient.loading = false;
        match card {
            Ok(Some(card)) => {
                self.patient.card = Some(card);
                let n = self.patient.messages().len();
                self.patient.selected = self.patient.selected.min(n.saturating_sub(1));
            }
            Ok(None) => {
                self.patient.card = None;
                self.flash(FlashKind::Info, self.t.failure_not_found.into());
            }
            Err(e) => self.fail(e),
        }
    }

    /// The chooser: move, pick with `enter` or its digit, `esc` closes it.
    pub(super) fn on_chooser(&mut self, a: Action) -> Vec<Request> {
        let n = self.patient.choices.len();
        let pick = match a {
            Action::Up => {
                self.patient.chosen = self.patient.chosen.saturating_sub(1);
                None
            }
            Action::Down => {
                self.patient.chosen = (self.patient.chosen + 1).min(n.saturating_sub(1));
                None
            }
            Action::Submit => Some(self.patient.chosen),
            Action::Input(c) => c
                .to_digit(10)
                .and_then(|d| (d as usize).checked_sub(1))
                .filter(|i| *i < n),
            Action::Abort | Action::Back => {
                self.mode = Mode::Normal;
                self.patient.choices.clear();
                None
            }
            Action::Quit => {
                self.quit = true;
                None
            }
            _ => None,
        };
        match pick.and_then(|i| self.patient.choices.get(i).cloned()) {
            Some(p) => {
                self.mode = Mode::Normal;
                self.patient.choices.clear();
                self.open_patient(p.phone)
            }
            None => vec![],
        }
    }

    /// `Paciente María Flores` (or the masked phone when there is no name).
    pub fn patient_title(&self) -> String {
        let who = match &self.patient.card {
            Some(c) => c
                .name
                .clone()
                .unwrap_or_else(|| crate::domain::mask::mask_phone(&c.phone)),
            None => self
                .patient
                .phone
                .as_deref()
                .map(crate::domain::mask::mask_phone)
                .unwrap_or_default(),
        };
        format!("{} {}", self.t.screen_patient, crate::domain::text::inert(&who))
            .trim_end()
            .to_string()
    }

    /// The selected message of the card, as an action's target.
    pub(super) fn patient_target(&self) -> Option<Target> {
        let card = self.patient.card.as_ref()?;
        let (c, n) = *self.patient.messages().get(self.patient.selected)?;
        let row = &card.commitments[c];
        let cell = &row.notifications[n];
        Some(Target {
            case: Some(Case::intention(cell.intention_id)),
            seen: Some(cell.state_changed_at),
            intention_id: Some(cell.intention_id),
            key: None,
            state: Situation::parse(&cell.state, false),
            commitment_id: row.commitment_id,
            commitment_ref: row.commitment_ref.clone(),
        })
    }

    /// The guards' facts of the card's selected message.
    pub(super) fn patient_facts(&self) -> Option<crate::domain::guard::Facts> {
        let card = self.patient.card.as_ref()?;
        let (c, n) = *self.patient.messages().get(self.patient.selected)?;
        let row = &card.commitments[c];
        Some(super::guard::card_facts(
            self.role(),
            row,
            &row.notifications[n],
            self.resend_ctx(),
        ))
    }

    pub(super) fn patient_move(&mut self, up: bool) {
        let n = self.patient.messages().len();
        let s = self.patient.selected;
        self.patient.selected = if up {
            s.saturating_sub(1)
        } else {
            (s + 1).min(n.saturating_sub(1))
        };
    }

    pub(super) fn patient_jump(&mut self, end: bool) {
        self.patient.selected = if end {
            self.patient.messages().len().saturating_sub(1)
        } else {
            0
        };
    }

    /// `enter` on the card: the selected message's Detalle.
    pub(super) fn open_patient_message(&mut self) -> Vec<Request> {
        match self.patient_target().and_then(|t| t.intention_id) {
            Some(id) => self.open_detail(id.to_string()),
            None => {
                self.flash(FlashKind::Info, self.t.flash_no_selection.into());
                vec![]
            }
        }
    }

    /// `enter` on a list row while a search is on: the row's patient.
    pub(super) fn open_row_patient(&mut self) -> Option<Vec<Request>> {
        if self.filter.is_empty() {
            return None;
        }
        let phone = match self.screen {
            Screen::Attention => self.attention.current().and_then(|r| r.phone.clone()),
            Screen::Upcoming => self.upcoming.current().and_then(|u| u.phone.clone()),
            _ => None,
        }?;
        Some(self.open_patient(phone))
    }

    /// The help overlay: scrolls, and closes on `esc`/`q`/`?`.
    pub(super) fn on_help(&mut self, a: Action) -> Vec<Request> {
        const PAGE: u16 = 10;
        let last = self.help_lines().saturating_sub(1);
        self.help_scroll = match a {
            Action::Up => self.help_scroll.saturating_sub(1),
            Action::Down => self.help_scroll + 1,
            Action::PageUp => self.help_scroll.saturating_sub(PAGE),
            Action::PageDown => self.help_scroll + PAGE,
            Action::Top => 0,
            Action::Bottom => last,
            Action::Quit => {
                self.quit = true;
                self.help_scroll
            }
            _ => {
                self.mode = Mode::Normal;
                0
            }
        }
        .min(last);
        vec![]
    }

    /// How many rows the help takes at its width (its commands, then the
    /// `:` commands and the note on roles, and the identity line where it
    /// matters): the scroll stops at the last. Long lines wrap; counted
    /// generously (word wrapping breaks early), since a row too many only
    /// scrolls a little past the end, while a row too few hides the last.
    pub fn help_lines(&self) -> u16 {
        // The popup is 60 wide (view::overlay::draw_help), 58 inside.
        const INNER: usize = 58;
        let rows = |n: usize| if n <= INNER { 1 } else { n.div_ceil(INNER - 12) };
        let t = self.t;
        // A key column of 12, the label and, when refused, a short reason.
        let keys: usize = super::super::keys::visible(self.screen, self.access)
            .map(|c| rows(12 + (c.label)(t).chars().count() + 24))
            .sum();
        let identity = if self.identity_unverified {
            rows(t.identity_unmapped.chars().count() + self.os_account.chars().count())
        } else {
            0
        };
        let text = keys
            + 1
            + rows(t.colon_line(&self.colon_commands()).chars().count())
            + rows(t.help_roles.chars().count())
            + identity;
        u16::try_from(text + 1).unwrap_or(u16::MAX)
    }
}
