//! Message templates (`assets/templates.toml`), shaped like WhatsApp
//! templates: a name, a category, a language and a body with numbered
//! parameters. Rendering is pure; the rendered text is stored with the
//! intention so the evidence of what the customer read never depends on a
//! template file that may change later.

use std::collections::HashMap;

use chrono::{DateTime, Datelike, Timelike, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

/// WhatsApp's limit for a message body, in characters. A rendered text
/// over it would be refused by the channel after the customer's slot was
/// spent, so the planner holds it for a person instead (see
/// [`crate::planner::Plan::held`]).
pub const MAX_BODY_CHARS: usize = 4096;

/// The embedded default templates.
pub const DEFAULT_TEMPLATES: &str = include_str!("../../../assets/templates.toml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Transactional,
    Marketing,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Transactional => "transactional",
            Category::Marketing => "marketing",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "transactional" => Some(Self::Transactional),
            "marketing" => Some(Self::Marketing),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub name: String,
    /// The key slug the template serves; empty (or left out) in a skeleton
    /// `unavez templates pull` wrote, until a person assigns one: such a
    /// template is checked against Meta but never planned.
    #[serde(default)]
    pub purpose: String,
    pub category: Category,
    pub language: String,
    pub body: String,
}

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{path}:{line}: {message}")]
    Parse { path: String, line: usize, message: String },
    #[error("{path}: template {name:?}: {message}")]
    Invalid {
        path: String,
        name: String,
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    template: Vec<Template>,
}

#[derive(Debug, Clone)]
pub struct Templates {
    by_purpose: HashMap<String, Template>,
    /// Every template, in file order (also those without a purpose).
    all: Vec<Template>,
}

impl Templates {
    pub fn embedded() -> Templates {
        // The embedded file is covered by a unit test; failing here is a
        // build defect, not bad input.
        Self::parse(DEFAULT_TEMPLATES, "assets/templates.toml").expect("embedded templates are valid")
    }

    pub fn parse(text: &str, path: &str) -> Result<Templates, TemplateError> {
        let file: File = toml::from_str(text).map_err(|e| TemplateError::Parse {
            path: path.to_string(),
            line: e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
                .unwrap_or(0),
            message: e.message().to_string(),
        })?;
        let mut by_purpose = HashMap::new();
        let mut all = Vec::with_capacity(file.template.len());
        for t in file.template {
            if t.body.trim().is_empty() {
                return Err(TemplateError::Invalid {
                    path: path.into(),
                    name: t.name,
                    message: "empty body".into(),
                });
            }
            if all
                .iter()
                .any(|o: &Template| o.name == t.name && o.language == t.language)
            {
                return Err(TemplateError::Invalid {
                    path: path.into(),
                    name: t.name,
                    message: format!("given twice for language {:?}", t.language),
                });
            }
            all.push(t.clone());
            if t.purpose.trim().is_empty() {
                continue;
            }
            // The planner fills `{{1}}…` in order; a named placeholder
            // would reach the patient as written, and the Cloud API would
            // refuse the send without `parameter_name`s.
            if crate::template_check::Params::of(&t.body).is_named() {
                return Err(TemplateError::Invalid {
                    path: path.into(),
                    name: t.name,
                    message: "named parameters ({{nombre}}) cannot be sent yet: unavez fills {{1}}, {{2}}… in order; \
                              leave purpose empty or use a positional version of the template"
                        .into(),
                });
            }
            if by_purpose.contains_key(&t.purpose) {
                return Err(TemplateError::Invalid {
                    path: path.into(),
                    name: t.name,
                    message: format!("second template for purpose {:?}", t.purpose),
                });
            }
            by_purpose.insert(t.purpose.clone(), t);
        }
        Ok(Templates { by_purpose, all })
    }

    /// Every template of the file, in its order.
    pub fn all(&self) -> &[Template] {
        &self.all
    }

    pub fn for_purpose(&self, purpose: &str) -> Option<&Template> {
        self.by_purpose.get(purpose)
    }

    /// Whether a template of this WhatsApp name is one of ours.
    pub fn names(&self, name: &str) -> bool {
        self.all.iter().any(|t| t.name == name)
    }
}

impl Template {
    /// Replaces `{{n}}` with the n-th parameter (1-based). A missing
    /// parameter renders empty rather than leaking the placeholder.
    pub fn render(&self, params: &[String]) -> String {
        let mut out = String::with_capacity(self.body.len() + 64);
        let mut rest = self.body.as_str();
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after
                .find("}}")
                .and_then(|end| after[..end].trim().parse::<usize>().ok().map(|n| (n, end)))
            {
                Some((n, end)) => {
                    if let Some(p) = n.checked_sub(1).and_then(|i| params.get(i)) {
                        out.push_str(p);
                    }
                    rest = &after[end + 2..];
                }
                None => {
                    out.push_str("{{");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

const DAYS_ES: [&str; 7] = ["lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"];
const MONTHS_ES: [&str; 12] = [
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
];

/// `martes 1 de diciembre` in the operating time zone.
pub fn date_es(t: DateTime<Utc>, tz: Tz) -> String {
    let l = t.with_timezone(&tz);
    format!(
        "{} {} de {}",
        DAYS_ES[l.weekday().num_days_from_monday() as usize],
        l.day(),
        MONTHS_ES[l.month0() as usize]
    )
}

/// [`date_es`] as a message due at `due` says it: with the year
/// (`martes 5 de enero de 2027`) when it is not the year of `due`, the
/// moment the customer reads it. Both are fixed when the message is
/// reserved, so its text never depends on when it is planned again.
pub fn date_es_seen_at(t: DateTime<Utc>, due: DateTime<Utc>, tz: Tz) -> String {
    let day = date_es(t, tz);
    let year = t.with_timezone(&tz).year();
    match year == due.with_timezone(&tz).year() {
        true => day,
        false => format!("{day} de {year}"),
    }
}

/// `09:30` in the operating time zone.
pub fn time_hhmm(t: DateTime<Utc>, tz: Tz) -> String {
    let l = t.with_timezone(&tz);
    format!("{:02}:{:02}", l.hour(), l.minute())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn embedded_templates_cover_every_purpose() {
        let t = Templates::embedded();
        for p in crate::template_check::PURPOSES {
            assert!(t.for_purpose(p).is_some(), "{p}");
        }
    }

    #[test]
    fn render_replaces_numbered_parameters() {
        let t = Template {
            name: "x".into(),
            purpose: "x".into(),
            category: Category::Transactional,
            language: "es_PE".into(),
            body: "Hola {{1}}, {{2}} {{ 1 }} {{9}} {{x}}".into(),
        };
        assert_eq!(t.render(&["Ana".into(), "cita".into()]), "Hola Ana, cita Ana  {{x}}");
    }

    #[test]
    fn dates_read_in_spanish_in_lima() {
        let t = Utc.with_ymd_and_hms(2026, 12, 1, 14, 30, 0).unwrap();
        assert_eq!(date_es(t, chrono_tz::America::Lima), "martes 1 de diciembre");
        assert_eq!(time_hhmm(t, chrono_tz::America::Lima), "09:30");
    }

    #[test]
    fn a_date_in_another_year_than_the_message_says_its_year() {
        let lima = chrono_tz::America::Lima;
        let t = Utc.with_ymd_and_hms(2027, 1, 5, 14, 30, 0).unwrap();
        let dec = Utc.with_ymd_and_hms(2026, 12, 1, 14, 0, 0).unwrap();
        assert_eq!(date_es_seen_at(t, dec, lima), "martes 5 de enero de 2027");
        assert_eq!(
            date_es_seen_at(t, t - chrono::Duration::days(2), lima),
            "martes 5 de enero"
        );
        // The year is the local one: 2027-01-01 03:00 UTC is still 2026 in Lima.
        let eve = Utc.with_ymd_and_hms(2027, 1, 1, 3, 0, 0).unwrap();
        assert_eq!(date_es_seen_at(eve, dec, lima), "jueves 31 de diciembre");
        let far = Utc.with_ymd_and_hms(9999, 12, 31, 14, 0, 0).unwrap();
        assert_eq!(date_es_seen_at(far, dec, lima), "viernes 31 de diciembre de 9999");
    }

    #[test]
    fn a_named_parameter_template_may_be_checked_but_not_planned() {
        let named =
            "[[template]]\nname = \"n\"\ncategory = \"transactional\"\nlanguage = \"es\"\nbody = \"Hola {{nombre}}\"\n";
        assert_eq!(Templates::parse(named, "t.toml").unwrap().all().len(), 1);
        let planned = named.replace("name = \"n\"", "name = \"n\"\npurpose = \"recordatorio\"");
        let e = Templates::parse(&planned, "t.toml").unwrap_err().to_string();
        assert!(e.contains("named parameters") && e.contains("\"n\""), "{e}");
    }

    #[test]
    fn bad_template_files_name_the_line() {
        let e = Templates::parse("[[template]]\nname = 1\n", "t.toml").unwrap_err();
        assert!(e.to_string().starts_with("t.toml:2:"), "{e}");
    }
}
