//! The `:` command line: which commands this operator may run, Tab
//! completion and running one. The words and their order come from
//! `tui::colon`, so the parser, Tab and the `?` help agree.

use super::*;
use crate::tui::colon::ColonCommand;

impl App {
    /// The `:` commands this operator can run, in help order:
    /// `:reproceso` for whoever sees its tab, `:calendario` for whoever may
    /// confirm or discard a feed's holds (issue 27 §2).
    pub fn colon_commands(&self) -> Vec<ColonCommand> {
        ColonCommand::ALL
            .into_iter()
            .filter(|c| match c {
                ColonCommand::Reprocess => Screen::tabs(self.role()).contains(&Screen::Reprocess),
                ColonCommand::Feeds => self.may_review_feeds(),
                _ => true,
            })
            .collect()
    }

    /// Their words in the console's language (Tab completes these).
    pub fn commands(&self) -> Vec<&'static str> {
        self.colon_commands()
            .into_iter()
            .map(|c| self.t.colon_word(c))
            .collect()
    }

    /// Tab in `:`: completes the word to the commands it starts (their
    /// common prefix), and lists them when several remain.
    pub(super) fn complete_command(&mut self) {
        let typed = self.input.trim_start().to_lowercase();
        if typed.contains(' ') {
            return;
        }
        let matches: Vec<&str> = self.commands().into_iter().filter(|c| c.starts_with(&typed)).collect();
        let Some(first) = matches.first() else { return };
        let common: String = first
            .chars()
            .enumerate()
            .take_while(|(i, ch)| matches.iter().all(|m| m.chars().nth(*i) == Some(*ch)))
            .map(|(_, ch)| ch)
            .collect();
        self.input = if matches.len() == 1 {
            format!("{common} ")
        } else {
            common
        };
        if matches.len() > 1 {
            self.flash(FlashKind::Info, matches.join(" · "));
        }
    }

    /// `:` commands: screen names (Spanish or English), `q`, and
    /// `detalle <id|key>` to jump to one intention.
    pub(super) fn run_command(&mut self, cmd: &str) -> Vec<Request> {
        let (word, arg) = cmd.split_once(' ').map(|(w, a)| (w, a.trim())).unwrap_or((cmd, ""));
        if word.is_empty() {
            return vec![];
        }
        let Some(command) = ColonCommand::parse(word) else {
            let known = self.commands().join(", ");
            self.flash(
                FlashKind::Refused,
                fill(self.t.flash_unknown_command, &[("cmd", cmd), ("commands", &known)]),
            );
            return vec![];
        };
        match command {
            ColonCommand::Quit => {
                self.quit = true;
                vec![]
            }
            ColonCommand::Attention => self.goto(Screen::Attention),
            ColonCommand::Upcoming => self.goto(Screen::Upcoming),
            ColonCommand::Board => self.goto(Screen::Board),
            ColonCommand::Reprocess => {
                if Screen::tabs(self.role()).contains(&Screen::Reprocess) {
                    self.goto(Screen::Reprocess)
                } else {
                    self.on_action(Action::Refused(OpKind::Reprocess))
                }
            }
            // Without an id, `:detalle` opens the row under the cursor,
            // as enter does.
            ColonCommand::Detail if arg.is_empty() => self.open(),
            ColonCommand::Detail => self.open_detail(arg.to_string()),
            // The header names one dispatcher and counts the rest; a
            // shared ledger may have one on every host: this lists them.
            ColonCommand::Dispatchers => {
                self.mode = Mode::Dispatchers;
                vec![Request::Status { now: self.now }]
            }
            // §1/§7 (issue 25)
            ColonCommand::Patient => self.find_patient(arg),
            ColonCommand::Help => self.on_action(Action::Help),
            ColonCommand::Feeds => self.open_feeds(),
            ColonCommand::Doctor => {
                self.doctor = None;
                self.mode = Mode::Doctor;
                vec![Request::Doctor]
            }
            // The header and the flash line shorten errors; this shows
            // the console's and the dispatcher's last ones whole.
            ColonCommand::Error => {
                if self.failure.is_some() || self.dispatcher.last_error.is_some() {
                    self.mode = Mode::Error;
                } else {
                    self.flash(FlashKind::Info, self.t.no_error.into());
                }
                vec![]
            }
        }
    }
}
