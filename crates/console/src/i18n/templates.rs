//! Issue 26 §2: `unavez templates check` and `pull`, in the configured
//! language.

use crate::template_check::{Finding, Problem, SkeletonWords};

use super::fill;

#[derive(Debug)]
pub struct TemplateWords {
    pub summary: &'static str,
    pub all_match: &'static str,
    pub missing: &'static str,
    pub missing_elsewhere: &'static str,
    pub not_approved: &'static str,
    pub params_differ: &'static str,
    pub body_differs: &'static str,
    pub skeleton: SkeletonWords,
    pub written: &'static str,
    pub unchanged: &'static str,
    pub differs: &'static str,
    pub no_waba: &'static str,
    pub token_rejected: &'static str,
    pub unreachable: &'static str,
}

impl TemplateWords {
    /// One finding as a line: `name (language): what is wrong`.
    pub fn finding(&self, f: &Finding) -> String {
        let what = match &f.problem {
            Problem::Missing { languages } if languages.is_empty() => fill(self.missing, &[("language", &f.language)]),
            Problem::Missing { languages } => fill(
                self.missing_elsewhere,
                &[("language", &f.language), ("languages", &languages.join(", "))],
            ),
            Problem::NotApproved(s) => fill(self.not_approved, &[("status", s.as_str())]),
            Problem::ParamsDiffer { ours, theirs } => fill(
                self.params_differ,
                &[("ours", &ours.shown()), ("theirs", &theirs.shown())],
            ),
            Problem::BodyDiffers => self.body_differs.to_string(),
        };
        format!("{} ({}): {what}", f.name, f.language)
    }
}

pub static ES: TemplateWords = TemplateWords {
    summary: "{ours} plantilla(s) configurada(s); {theirs} en Meta",
    all_match: "todas coinciden con Meta",
    missing: "no existe en Meta en el idioma {language}",
    missing_elsewhere: "no existe en Meta en el idioma {language} (sí en: {languages})",
    not_approved: "Meta la tiene como {status}: los mensajes con ella serán rechazados",
    params_differ: "parámetros distintos: aquí {ours}, en Meta {theirs}; cada envío fallaría (error 132000)",
    body_differs: "el texto no es el aprobado en Meta: lo que se registra como enviado no sería lo que lee el paciente",
    skeleton: SkeletonWords {
        header: "Plantillas aprobadas en Meta, escritas por `unavez templates pull`.\n\
                 Para cada una: elija a qué aviso sirve (purpose) y quite el # de esa línea;\n\
                 una plantilla sin purpose se compara con Meta pero nunca se envía.\n\
                 Luego compruebe con `unavez templates check`.",
        purpose: "elija uno: {purposes}",
        category: "categoría en Meta: {meta}",
        param: "{param}: ¿qué dato va aquí? (nombre, servicio, fecha, hora, lugar, pedido…)",
        named: "parámetros con nombre: unavez aún no los envía; deje purpose vacío o pida a Meta una versión con {{1}}, {{2}}…",
    },
    written: "escrito {path}: {n} plantilla(s) aprobada(s)",
    unchanged: "{path} ya coincide con las plantillas aprobadas de Meta; no se cambió",
    differs: "{path} ya existe y difiere (arriba); no se cambió: repita con --write para reemplazarlo",
    no_waba: "falta [channel.cloud] waba_id en la configuración: el id de la cuenta de WhatsApp Business (WhatsApp Manager → configuración de la cuenta)",
    token_rejected: "token rechazado por Meta ({var}): {detail}; genere un token nuevo y expórtelo en {var}",
    unreachable: "no se pudo consultar a Meta: {detail}",
};

pub static EN: TemplateWords = TemplateWords {
    summary: "{ours} configured template(s); {theirs} at Meta",
    all_match: "all match Meta",
    missing: "Meta has no such template in language {language}",
    missing_elsewhere: "Meta has no such template in language {language} (it does in: {languages})",
    not_approved: "Meta has it as {status}: messages with it will be refused",
    params_differ: "different parameters: here {ours}, at Meta {theirs}; every send would fail (error 132000)",
    body_differs: "the text is not the one Meta approved: what is recorded as sent would not be what the patient reads",
    skeleton: SkeletonWords {
        header: "Templates approved at Meta, written by `unavez templates pull`.\n\
                 For each one: choose which notice it serves (purpose) and remove the # of that line;\n\
                 a template without a purpose is checked against Meta but never sent.\n\
                 Then check with `unavez templates check`.",
        purpose: "choose one: {purposes}",
        category: "Meta's category: {meta}",
        param: "{param}: which value goes here? (name, service, date, time, place, order…)",
        named: "named parameters: unavez cannot send them yet; leave purpose empty or ask Meta for a version with {{1}}, {{2}}…",
    },
    written: "wrote {path}: {n} approved template(s)",
    unchanged: "{path} already matches Meta's approved templates; not changed",
    differs: "{path} exists and differs (above); not changed: run again with --write to replace it",
    no_waba: "[channel.cloud] waba_id is missing from the configuration: the WhatsApp Business Account id (WhatsApp Manager → account settings)",
    token_rejected: "token rejected by Meta ({var}): {detail}; create a new token and export it in {var}",
    unreachable: "could not ask Meta: {detail}",
};
