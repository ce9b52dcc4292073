//! Issue 25 §8: the command line speaks like the console. Its errors and
//! summaries (`intents show`, `reprocess`) in the configured language.

use crate::ops::IdentityError;

use super::fill;

#[derive(Debug)]
pub struct CliWords {
    pub error: &'static str,
    pub no_intention: &'static str,
    pub no_commitment: &'static str,
    pub reason_required: &'static str,
    pub unknown_operator: &'static str,
    pub operator_required: &'static str,
    pub unmapped_account: &'static str,
    pub not_you: &'static str,
    pub unmapped_with_flag: &'static str,
    pub no_account: &'static str,
    // `intents show`
    pub show_state: &'static str,
    pub show_commitment: &'static str,
    pub show_to: &'static str,
    pub show_template: &'static str,
    pub show_text: &'static str,
    pub show_due: &'static str,
    pub show_expires: &'static str,
    pub show_fingerprint: &'static str,
    pub show_reason: &'static str,
    pub show_history: &'static str,
    pub show_attempts: &'static str,
    pub show_related: &'static str,
    pub show_recorded: &'static str,
    // `reprocess`
    pub reprocess_dry: &'static str,
    pub reprocess_done: &'static str,
    pub reprocess_states: &'static str,
    pub reprocess_now: &'static str,
    pub reprocess_summary: &'static str,
    pub reprocess_nothing: &'static str,
    pub reprocess_recorded: &'static str,
    pub reprocess_unchanged: &'static str,
}

impl CliWords {
    /// An identity refusal, and its stable code for `--json`.
    pub fn identity(&self, e: &IdentityError) -> (&'static str, String) {
        match e {
            IdentityError::UnknownOperator { name, known } => (
                "unknown_operator",
                fill(self.unknown_operator, &[("name", name), ("known", known)]),
            ),
            IdentityError::FlagRequired { known } => {
                ("operator_required", fill(self.operator_required, &[("known", known)]))
            }
            IdentityError::UnmappedAccount { account } => {
                ("unmapped_account", fill(self.unmapped_account, &[("account", account)]))
            }
            IdentityError::NotYou {
                requested,
                account,
                actual,
            } => (
                "not_you",
                fill(
                    self.not_you,
                    &[("requested", requested), ("account", account), ("actual", actual)],
                ),
            ),
            IdentityError::UnmappedWithFlag { requested, account } => (
                "unmapped_with_flag",
                fill(
                    self.unmapped_with_flag,
                    &[("requested", requested), ("account", account)],
                ),
            ),
            IdentityError::NoAccount(detail) => ("no_account", fill(self.no_account, &[("detail", detail)])),
        }
    }
}

pub static ES: CliWords = CliWords {
    error: "error",
    no_intention: "no existe un aviso con clave o id «{key}»",
    no_commitment: "no existe una cita ni un pedido con referencia «{reference}»",
    reason_required: "--reason: hace falta un motivo para {action}",
    unknown_operator: "--operator: no existe el operador «{name}»; agréguelo como [[operator]] en la configuración (hay: {known})",
    operator_required: "falta --operator: diga quién actúa (hay: {known})",
    unmapped_account: "la cuenta del sistema «{account}» no es el os_user de ningún operador de la configuración; pida al administrador que la agregue",
    not_you: "--operator «{requested}» no es usted: la cuenta del sistema «{account}» es el operador «{actual}» (para actuar por otra persona la configuración debe decir allow_operator_flag = true)",
    unmapped_with_flag: "--operator «{requested}» rechazado: la cuenta del sistema «{account}» no es el os_user de ningún operador",
    no_account: "no se puede saber qué cuenta del sistema ejecuta unavez: {detail}",
    show_state: "estado",
    show_commitment: "cita",
    show_to: "para",
    show_template: "plantilla",
    show_text: "texto",
    show_due: "sale",
    show_expires: "vence",
    show_fingerprint: "huella",
    show_reason: "motivo",
    show_history: "historia:",
    show_attempts: "intentos:",
    show_related: "relacionados:",
    show_recorded: "(solo registro)",
    reprocess_dry: "simulación del {day} ({n} aviso(s){states})",
    reprocess_done: "reprocesado el {day} ({n} aviso(s){states})",
    reprocess_states: ", estados {states}",
    reprocess_now: " → ahora {state}",
    reprocess_summary: "resumen: {what}",
    reprocess_nothing: "nada",
    reprocess_recorded: "registrado como acción de operador #{id} de {operator} ({role})",
    reprocess_unchanged: "no se cambió nada (simulación)",
};

pub static EN: CliWords = CliWords {
    error: "error",
    no_intention: "no message with key or id «{key}»",
    no_commitment: "no appointment or order with reference «{reference}»",
    reason_required: "--reason: a reason is required to {action}",
    unknown_operator: "--operator: unknown operator «{name}»; add it as [[operator]] in the config (known: {known})",
    operator_required: "--operator is required: say who is acting (known: {known})",
    unmapped_account: "the OS account «{account}» is not any operator's os_user in the config; ask the administrator to add it",
    not_you: "--operator «{requested}» is not you: the OS account «{account}» is operator «{actual}» (the config must set allow_operator_flag = true to act for someone else)",
    unmapped_with_flag: "--operator «{requested}» refused: the OS account «{account}» is not any operator's os_user",
    no_account: "cannot tell which OS account runs unavez: {detail}",
    show_state: "state",
    show_commitment: "commitment",
    show_to: "to",
    show_template: "template",
    show_text: "text",
    show_due: "due",
    show_expires: "expires",
    show_fingerprint: "fingerprint",
    show_reason: "reason",
    show_history: "history:",
    show_attempts: "attempts:",
    show_related: "related:",
    show_recorded: "(recorded only)",
    reprocess_dry: "dry run for {day} ({n} message(s){states})",
    reprocess_done: "reprocessed {day} ({n} message(s){states})",
    reprocess_states: ", states {states}",
    reprocess_now: " → now {state}",
    reprocess_summary: "summary: {what}",
    reprocess_nothing: "nothing",
    reprocess_recorded: "recorded as operator action #{id} by {operator} ({role})",
    reprocess_unchanged: "nothing was changed (dry run)",
};
