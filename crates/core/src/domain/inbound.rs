//! Inbound replies as business facts: which configured keyword a customer's
//! message is, if any.
//!
//! Matching is on the *whole* message (trimmed, case- and accent-
//! insensitive, surrounding punctuation and inner runs of spaces ignored), never a
//! substring: "no confirmo" must not confirm an appointment, and "estoy de
//! baja médica" must not opt anybody out. Opt-out wins over everything
//! else because wrongly ignoring it is the costlier mistake.

use crate::policy::InboundConfig;

/// What an inbound message asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Confirms the customer's upcoming appointment.
    Confirm,
    /// Stops messages (marketing; transactional too if policy says so).
    OptOut,
    /// Asks to move the appointment: a person must call back.
    Reschedule,
    /// Anything else: kept as a conversation signal.
    Other,
}

impl Reply {
    pub fn as_str(self) -> &'static str {
        match self {
            Reply::Confirm => "confirm",
            Reply::OptOut => "opt_out",
            Reply::Reschedule => "reschedule",
            Reply::Other => "other",
        }
    }
}

/// Keyword lists, normalized once.
#[derive(Debug, Clone)]
pub struct Classifier {
    confirm: Vec<String>,
    opt_out: Vec<String>,
    reschedule: Vec<String>,
}

impl Classifier {
    pub fn new(cfg: &InboundConfig) -> Classifier {
        let norm = |xs: &[String]| xs.iter().map(|s| normalize(s)).filter(|s| !s.is_empty()).collect();
        Classifier {
            confirm: norm(&cfg.confirm),
            opt_out: norm(&cfg.opt_out),
            reschedule: norm(&cfg.reschedule),
        }
    }

    /// Classifies one message text (or a button's title / payload).
    pub fn classify(&self, text: &str) -> Reply {
        let t = normalize(text);
        if t.is_empty() {
            return Reply::Other;
        }
        if self.opt_out.contains(&t) {
            Reply::OptOut
        } else if self.reschedule.contains(&t) {
            Reply::Reschedule
        } else if self.confirm.contains(&t) {
            Reply::Confirm
        } else {
            Reply::Other
        }
    }
}

/// Upper case without accents, words separated by one space, surrounding
/// punctuation removed: `" ¡sí, confirmo! "` → `"SI, CONFIRMO"`.
pub fn normalize(text: &str) -> String {
    let upper: String = text.to_uppercase().chars().map(strip_accent).collect();
    let words: Vec<&str> = upper.split_whitespace().collect();
    let joined = words.join(" ");
    joined.trim_matches(|c: char| !c.is_alphanumeric()).to_string()
}

fn strip_accent(c: char) -> char {
    match c {
        'Á' | 'À' | 'Ä' | 'Â' | 'Ã' => 'A',
        'É' | 'È' | 'Ë' | 'Ê' => 'E',
        'Í' | 'Ì' | 'Ï' | 'Î' => 'I',
        'Ó' | 'Ò' | 'Ö' | 'Ô' | 'Õ' => 'O',
        'Ú' | 'Ù' | 'Ü' | 'Û' => 'U',
        'Ñ' => 'N',
        'Ç' => 'C',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c() -> Classifier {
        Classifier::new(&InboundConfig::default())
    }

    #[test]
    fn spanish_defaults() {
        let c = c();
        for t in [
            "1",
            "SI",
            "SÍ",
            "si",
            "Sí",
            "sí.",
            " CONFIRMO ",
            "confirmo!",
            "¡Confirmo!",
            "Confirmó",
        ] {
            assert_eq!(c.classify(t), Reply::Confirm, "{t:?}");
        }
        for t in ["BAJA", "baja", " Baja. ", "STOP", "stop"] {
            assert_eq!(c.classify(t), Reply::OptOut, "{t:?}");
        }
        for t in ["REPROGRAMAR", "reprogramar", "Reprogramar por favor."] {
            let want = if t.contains("favor") {
                Reply::Other
            } else {
                Reply::Reschedule
            };
            assert_eq!(c.classify(t), want, "{t:?}");
        }
    }

    #[test]
    fn whole_message_only() {
        let c = c();
        for t in ["no confirmo", "estoy de baja", "11", "sip", "", "   ", "!!!", "si no"] {
            assert_eq!(c.classify(t), Reply::Other, "{t:?}");
        }
    }

    #[test]
    fn configurable_and_opt_out_wins() {
        let cfg = InboundConfig {
            confirm: vec!["OK".into(), "Stop".into()],
            opt_out: vec!["stop".into(), "  ".into()],
            reschedule: vec!["Cambiar cita".into()],
            ..InboundConfig::default()
        };
        let c = Classifier::new(&cfg);
        assert_eq!(c.classify("ok"), Reply::Confirm);
        assert_eq!(c.classify("STOP"), Reply::OptOut);
        assert_eq!(c.classify("cambiar   CITA"), Reply::Reschedule);
        assert_eq!(c.classify("SI"), Reply::Other);
        // An empty keyword never matches an empty message.
        assert_eq!(c.classify(""), Reply::Other);
    }

    #[test]
    fn normalization() {
        assert_eq!(normalize("  sí, ¡confirmo! "), "SI, ¡CONFIRMO");
        assert_eq!(normalize("Ñandú"), "NANDU");
        assert_eq!(normalize("\tREPROGRAMAR\n"), "REPROGRAMAR");
    }
}
