//! The `:` commands as one typed vocabulary: the parser, Tab completion,
//! the unknown-command flash and the `?` help's command line all read
//! this table, so the help can never list a command the parser refuses or
//! leave out one it accepts (the help once missed `:calendario`).
//!
//! Which commands a role sees is the app's decision (`App::commands`);
//! the words each language shows are the i18n tables' (`Strings::colon`).

/// One `:` command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColonCommand {
    Patient,
    Detail,
    Attention,
    Upcoming,
    Board,
    Reprocess,
    Dispatchers,
    Doctor,
    Error,
    Feeds,
    Help,
    Quit,
}

/// What a command takes after its word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColonArg {
    None,
    /// Free text (a name, a phone's digits, a reference).
    Text,
    /// An intention's id or key.
    Id,
}

impl ColonCommand {
    /// In the order the help lists them: finding the caller first.
    pub const ALL: [ColonCommand; 12] = [
        ColonCommand::Patient,
        ColonCommand::Detail,
        ColonCommand::Attention,
        ColonCommand::Upcoming,
        ColonCommand::Board,
        ColonCommand::Reprocess,
        ColonCommand::Dispatchers,
        ColonCommand::Feeds,
        ColonCommand::Doctor,
        ColonCommand::Error,
        ColonCommand::Help,
        ColonCommand::Quit,
    ];

    /// Every word the parser accepts for it, in either language: an
    /// operator who learned the Spanish word keeps it under `lang = "en"`.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            ColonCommand::Patient => &["paciente", "patient"],
            ColonCommand::Detail => &["detalle", "detail", "d"],
            ColonCommand::Attention => &["atencion", "atención", "attention"],
            ColonCommand::Upcoming => &["citas", "proximas", "próximas", "upcoming"],
            ColonCommand::Board => &["tablero", "board"],
            ColonCommand::Reprocess => &["reproceso", "reprocess"],
            ColonCommand::Dispatchers => &["despachadores", "dispatchers"],
            ColonCommand::Doctor => &["doctor"],
            ColonCommand::Error => &["error"],
            ColonCommand::Feeds => &["calendario", "calendarios", "feeds", "feed"],
            ColonCommand::Help => &["ayuda", "help", "?"],
            ColonCommand::Quit => &["salir", "quit", "q"],
        }
    }

    /// What follows the word.
    pub fn arg(self) -> ColonArg {
        match self {
            ColonCommand::Patient => ColonArg::Text,
            ColonCommand::Detail => ColonArg::Id,
            _ => ColonArg::None,
        }
    }

    /// The command a typed word names (case-insensitive), if any.
    pub fn parse(word: &str) -> Option<ColonCommand> {
        let word = word.to_lowercase();
        Self::ALL.into_iter().find(|c| c.aliases().contains(&word.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Language;
    use crate::i18n::strings;

    #[test]
    fn every_word_a_language_shows_parses_back_to_its_command() {
        for lang in [Language::Es, Language::En] {
            let t = strings(lang);
            for c in ColonCommand::ALL {
                assert_eq!(ColonCommand::parse(t.colon_word(c)), Some(c), "{lang:?} {c:?}");
            }
        }
    }

    #[test]
    fn no_word_names_two_commands() {
        let mut seen = std::collections::HashSet::new();
        for c in ColonCommand::ALL {
            for w in c.aliases() {
                assert!(seen.insert(*w), "{w} names two commands");
            }
        }
    }

    #[test]
    fn parsing_ignores_case_and_refuses_unknown_words() {
        assert_eq!(ColonCommand::parse("CALENDARIO"), Some(ColonCommand::Feeds));
        assert_eq!(ColonCommand::parse("Atención"), Some(ColonCommand::Attention));
        assert_eq!(ColonCommand::parse("calendar"), None);
    }
}
