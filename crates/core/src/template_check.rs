//! Our templates file against Meta's (issue 26 §2): which of the
//! configured templates Meta does not have in their language, has not
//! approved, or has with other body parameters or another text; and the
//! skeleton of a templates file written from Meta's approved ones.
//!
//! Pure: the Graph client (`unavez-channels`) reads Meta's templates into
//! [`MetaTemplate`], the binary reads and writes files.

use std::fmt;

use crate::templates::Template;

/// A template's status at Meta (`status` in Graph's answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaStatus {
    Approved,
    Pending,
    Rejected,
    Paused,
    Disabled,
    InAppeal,
    /// Any other word Meta uses (`PENDING_DELETION`, `LIMIT_EXCEEDED`, …).
    Other(String),
}

impl MetaStatus {
    /// Every status with a word of its own.
    pub const KNOWN: [MetaStatus; 6] = [
        MetaStatus::Approved,
        MetaStatus::Pending,
        MetaStatus::Rejected,
        MetaStatus::Paused,
        MetaStatus::Disabled,
        MetaStatus::InAppeal,
    ];

    /// Meta will not send this template: its planned messages are held in
    /// review (one alert, not one failure per message).
    pub fn blocks_sending(&self) -> bool {
        matches!(self, MetaStatus::Rejected | MetaStatus::Paused | MetaStatus::Disabled)
    }

    pub fn parse(s: &str) -> MetaStatus {
        match s.trim().to_ascii_uppercase().as_str() {
            "APPROVED" => MetaStatus::Approved,
            "PENDING" => MetaStatus::Pending,
            "REJECTED" => MetaStatus::Rejected,
            "PAUSED" => MetaStatus::Paused,
            "DISABLED" => MetaStatus::Disabled,
            "IN_APPEAL" => MetaStatus::InAppeal,
            other => MetaStatus::Other(other.to_string()),
        }
    }

    /// Meta's word.
    pub fn as_str(&self) -> &str {
        match self {
            MetaStatus::Approved => "APPROVED",
            MetaStatus::Pending => "PENDING",
            MetaStatus::Rejected => "REJECTED",
            MetaStatus::Paused => "PAUSED",
            MetaStatus::Disabled => "DISABLED",
            MetaStatus::InAppeal => "IN_APPEAL",
            MetaStatus::Other(s) => s,
        }
    }
}

impl fmt::Display for MetaStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A template's body parameters: `{{1}}…` (the numbers used, ascending)
/// or `{{name}}…` (in order of first appearance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Params {
    Positional(Vec<u32>),
    Named(Vec<String>),
}

impl Params {
    /// The parameters of a body text. A body mixing numbers and names
    /// (which Meta refuses) reads as named, numbers included, so it never
    /// matches a purely positional one.
    pub fn of(body: &str) -> Params {
        let found: Vec<&str> = body
            .split("{{")
            .skip(1)
            .filter_map(|s| s.split_once("}}").map(|(p, _)| p.trim()))
            .filter(|p| !p.is_empty())
            .collect();
        if found.iter().all(|p| p.parse::<u32>().is_ok()) {
            let mut n: Vec<u32> = found.iter().filter_map(|p| p.parse().ok()).collect();
            n.sort_unstable();
            n.dedup();
            return Params::Positional(n);
        }
        let mut names: Vec<String> = Vec::new();
        for p in found {
            if !names.iter().any(|n| n == p) {
                names.push(p.to_string());
            }
        }
        Params::Named(names)
    }

    /// `{{1}} {{2}}` or `{{nombre}} {{fecha}}`, for messages; `—` for none.
    pub fn shown(&self) -> String {
        let parts: Vec<String> = match self {
            Params::Positional(n) => n.iter().map(|i| format!("{{{{{i}}}}}")).collect(),
            Params::Named(n) => n.iter().map(|s| format!("{{{{{s}}}}}")).collect(),
        };
        if parts.is_empty() {
            "—".into()
        } else {
            parts.join(" ")
        }
    }

    pub fn is_named(&self) -> bool {
        matches!(self, Params::Named(_))
    }
}

/// One template as Meta has it (one language of one name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaTemplate {
    pub id: String,
    pub name: String,
    pub language: String,
    pub status: MetaStatus,
    /// `UTILITY`, `MARKETING` or `AUTHENTICATION`: Meta's, not ours.
    pub category: String,
    /// The BODY component's text (`None`: a template without one).
    pub body: Option<String>,
    /// From the body text; `parameter_format` says which kind Meta expects.
    pub params: Params,
}

/// What is wrong with one configured template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Meta has no template of this name in this language; `languages`
    /// are the ones it has under the name (empty: the name is unknown).
    Missing { languages: Vec<String> },
    /// Meta has it, not approved: messages with it are refused.
    NotApproved(MetaStatus),
    /// Approved, with other body parameters: every send fails with Graph
    /// error 132000/132012.
    ParamsDiffer { ours: Params, theirs: Params },
    /// Same parameters, another text: what the ledger records as sent is
    /// not what the customer reads.
    BodyDiffers,
}

/// A configured template and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub name: String,
    pub language: String,
    pub problem: Problem,
}

/// Compares each configured template with Meta's of the same name and
/// language. Meta's templates we do not use are not findings.
pub fn compare(ours: &[Template], theirs: &[MetaTemplate]) -> Vec<Finding> {
    let mut out = Vec::new();
    for t in ours {
        let finding = |problem| Finding {
            name: t.name.clone(),
            language: t.language.clone(),
            problem,
        };
        let Some(m) = theirs.iter().find(|m| m.name == t.name && m.language == t.language) else {
            let mut languages: Vec<String> = theirs
                .iter()
                .filter(|m| m.name == t.name)
                .map(|m| m.language.clone())
                .collect();
            languages.sort();
            languages.dedup();
            out.push(finding(Problem::Missing { languages }));
            continue;
        };
        if m.status != MetaStatus::Approved {
            out.push(finding(Problem::NotApproved(m.status.clone())));
            continue;
        }
        let ours_params = Params::of(&t.body);
        if ours_params != m.params {
            out.push(finding(Problem::ParamsDiffer {
                ours: ours_params,
                theirs: m.params.clone(),
            }));
            continue;
        }
        if m.body.as_deref().map(normalize) != Some(normalize(&t.body)) {
            out.push(finding(Problem::BodyDiffers));
        }
    }
    out
}

/// Texts compared as a person reads them: runs of white space are one.
fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The comments of a skeleton, in the configured language.
#[derive(Debug, Clone, Copy)]
pub struct SkeletonWords {
    /// The file's first comment lines.
    pub header: &'static str,
    /// Beside the commented-out `purpose`: `{purposes}` is replaced.
    pub purpose: &'static str,
    /// Beside `category`: `{meta}` is Meta's category.
    pub category: &'static str,
    /// One line per parameter: `{param}` is the placeholder.
    pub param: &'static str,
    /// Under a named-parameter template.
    pub named: &'static str,
}

/// The purposes the planner looks templates up by (see
/// `assets/templates.toml`).
pub const PURPOSES: [&str; 12] = [
    "aviso-reserva",
    "recordatorio",
    "recordatorio-confirmar",
    "aviso-cambio",
    "aviso-cancelacion",
    "confirmado",
    "pagado",
    "preparado",
    "enviado",
    "incidencia",
    "entregado",
    "devuelto",
];

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A templates file with Meta's APPROVED templates, in Meta's order: name,
/// language, body and our category (MARKETING is marketing, anything else
/// transactional), Meta's category and the parameters as comments, and
/// `purpose` commented out, for a person to choose.
pub fn skeleton(theirs: &[MetaTemplate], words: &SkeletonWords) -> String {
    let mut out = String::new();
    for line in words.header.lines() {
        out.push_str(&format!("# {line}\n"));
    }
    for m in theirs.iter().filter(|m| m.status == MetaStatus::Approved) {
        let Some(body) = &m.body else { continue };
        let category = if m.category.eq_ignore_ascii_case("MARKETING") {
            "marketing"
        } else {
            "transactional"
        };
        out.push_str("\n[[template]]\n");
        out.push_str(&format!("name = {}\n", toml_str(&m.name)));
        out.push_str(&format!(
            "# purpose = \"\"  # {}\n",
            words.purpose.replace("{purposes}", &PURPOSES.join(", "))
        ));
        out.push_str(&format!(
            "category = \"{category}\"  # {}\n",
            words.category.replace("{meta}", &m.category)
        ));
        out.push_str(&format!("language = {}\n", toml_str(&m.language)));
        out.push_str(&format!("body = {}\n", toml_str(body)));
        let placeholders: Vec<String> = match &m.params {
            Params::Positional(n) => n.iter().map(|i| format!("{{{{{i}}}}}")).collect(),
            Params::Named(n) => n.iter().map(|s| format!("{{{{{s}}}}}")).collect(),
        };
        for p in placeholders {
            out.push_str(&format!("# {}\n", words.param.replace("{param}", &p)));
        }
        if m.params.is_named() {
            out.push_str(&format!("# {}\n", words.named));
        }
    }
    out
}

#[cfg(test)]
#[path = "template_check_tests.rs"]
mod tests;
