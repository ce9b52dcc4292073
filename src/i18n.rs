//! The console's string table: every word a person reads on screen lives
//! here, Spanish by default and English with `language = "en"`.
//!
//! One struct of `&'static str` per language (rather than lookups by string
//! key) so that a missing translation is a compile error, not a blank label.
//! Templates with placeholders use `{name}` and are filled with [`fill`].

use crate::config::{Language, Role};
use crate::ops::{OpKind, Refusal, VerifyOutcome};

/// Every label, hint and message of the console.
#[derive(Debug)]
pub struct Strings {
    pub app_title: &'static str,
    pub screen_attention: &'static str,
    pub screen_upcoming: &'static str,
    pub screen_board: &'static str,
    pub screen_detail: &'static str,
    pub screen_reprocess: &'static str,
    pub screen_help: &'static str,
    pub read_only: &'static str,
    pub dispatcher: &'static str,
    pub dispatcher_off: &'static str,
    pub dispatcher_running: &'static str,
    pub dispatcher_paused: &'static str,
    pub queue: &'static str,
    pub last_error: &'static str,
    pub loading: &'static str,
    pub empty_list: &'static str,
    pub filter: &'static str,
    pub page: &'static str,
    // Columns.
    pub col_commitment: &'static str,
    pub col_time: &'static str,
    pub col_customer: &'static str,
    pub col_purpose: &'static str,
    pub col_state: &'static str,
    pub col_age: &'static str,
    pub col_evidence: &'static str,
    pub col_status: &'static str,
    pub col_notifications: &'static str,
    pub col_counter: &'static str,
    pub col_value: &'static str,
    pub col_action: &'static str,
    pub col_count: &'static str,
    pub col_why: &'static str,
    pub reschedule_request: &'static str,
    pub needs_call: &'static str,
    pub confirmed: &'static str,
    pub manual_contact_done: &'static str,
    pub cancelled_appt: &'static str,
    pub scheduled: &'static str,
    pub no_evidence: &'static str,
    // Board.
    pub board_day: &'static str,
    pub board_planned: &'static str,
    pub board_uncertain: &'static str,
    pub board_review: &'static str,
    pub board_failed: &'static str,
    pub board_delivered: &'static str,
    pub board_read: &'static str,
    pub board_in_flight: &'static str,
    pub board_cancelled_by: &'static str,
    pub board_dup_keys: &'static str,
    pub board_dup_events: &'static str,
    pub board_opt_outs: &'static str,
    pub board_latency: &'static str,
    pub board_hint: &'static str,
    // Detail.
    pub detail_content: &'static str,
    pub detail_history: &'static str,
    pub detail_attempts: &'static str,
    pub detail_related: &'static str,
    pub detail_to: &'static str,
    pub detail_due: &'static str,
    pub detail_text: &'static str,
    pub detail_template: &'static str,
    pub detail_authorized: &'static str,
    pub detail_recorded_only: &'static str,
    pub detail_none: &'static str,
    // Reprocess.
    pub reprocess_day: &'static str,
    pub reprocess_states: &'static str,
    pub reprocess_hint: &'static str,
    pub reprocess_unavailable: &'static str,
    pub reprocess_preview: &'static str,
    // Actions (labels used by the registry, the footer and help).
    pub act_cancel: &'static str,
    pub act_verify: &'static str,
    pub act_resend: &'static str,
    pub act_manual_contact: &'static str,
    pub act_reprocess: &'static str,
    pub act_filter: &'static str,
    pub act_command: &'static str,
    pub act_help: &'static str,
    pub act_back: &'static str,
    pub act_refresh: &'static str,
    pub act_quit: &'static str,
    pub act_open: &'static str,
    pub act_next_screen: &'static str,
    pub act_prev_screen: &'static str,
    pub act_move: &'static str,
    pub act_page: &'static str,
    pub act_day: &'static str,
    // Forms and confirmation.
    pub form_reason: &'static str,
    pub form_responsible: &'static str,
    pub form_outcome: &'static str,
    pub form_submit_hint: &'static str,
    pub form_reason_required: &'static str,
    pub outcome_received: &'static str,
    pub outcome_not_received: &'static str,
    pub outcome_channel: &'static str,
    pub confirm_title: &'static str,
    pub confirm_hint: &'static str,
    pub scope_cancel: &'static str,
    pub scope_verify: &'static str,
    pub scope_resend: &'static str,
    pub scope_manual_contact: &'static str,
    pub scope_reprocess: &'static str,
    // Flash messages.
    pub flash_role_refused: &'static str,
    pub flash_read_only: &'static str,
    pub flash_no_selection: &'static str,
    pub flash_aborted: &'static str,
    pub flash_done: &'static str,
    pub flash_refused: &'static str,
    pub flash_error: &'static str,
    pub flash_unknown_command: &'static str,
    pub flash_refreshed: &'static str,
    pub help_title: &'static str,
    pub help_roles: &'static str,
    pub role_front_desk: &'static str,
    pub role_supervisor: &'static str,
    pub role_technician: &'static str,
    pub done_state: &'static str,
    pub done_new: &'static str,
    pub done_closed: &'static str,
    pub recorded_only: &'static str,
    pub ref_in_flight: &'static str,
    pub ref_uncertain: &'static str,
    pub ref_channel_has_it: &'static str,
    pub ref_delivered: &'static str,
    pub ref_closed: &'static str,
    pub ref_not_sent: &'static str,
    pub ref_resend_pending: &'static str,
    pub ref_stale: &'static str,
    pub ref_commitment_cancelled: &'static str,
    pub ref_expired: &'static str,
    pub ref_not_appointment: &'static str,
    pub ref_no_lookup: &'static str,
    pub ref_channel_unsure: &'static str,
    pub ref_channel_no_record: &'static str,
    pub ref_channel_unavailable: &'static str,
    /// `(code, label)` for intention states and row kinds.
    pub states: &'static [(&'static str, &'static str)],
    /// `(code, label)` for closure reasons.
    pub reasons: &'static [(&'static str, &'static str)],
}

/// Spanish (default).
pub static ES: Strings = Strings {
    app_title: "unavez",
    screen_attention: "Atención",
    screen_upcoming: "Próximas citas",
    screen_board: "Tablero",
    screen_detail: "Detalle",
    screen_reprocess: "Reproceso",
    screen_help: "Ayuda",
    read_only: "solo lectura",
    dispatcher: "despachador",
    dispatcher_off: "apagado",
    dispatcher_running: "en marcha",
    dispatcher_paused: "detenido",
    queue: "cola",
    last_error: "último error",
    loading: "cargando…",
    empty_list: "Nada pendiente aquí.",
    filter: "filtro",
    page: "pág.",
    col_commitment: "Compromiso",
    col_time: "Hora",
    col_customer: "Cliente",
    col_purpose: "Mensaje",
    col_state: "Estado",
    col_age: "Hace",
    col_evidence: "Última evidencia",
    col_status: "Cita",
    col_notifications: "Notificaciones",
    col_counter: "Contador",
    col_value: "Valor",
    col_action: "Acción",
    col_count: "Cantidad",
    col_why: "Por qué",
    reschedule_request: "pide cambio",
    needs_call: "LLAMAR",
    confirmed: "confirmada",
    manual_contact_done: "contactada",
    cancelled_appt: "cancelada",
    scheduled: "agendada",
    no_evidence: "sin evidencia",
    board_day: "Día",
    board_planned: "Planificadas",
    board_uncertain: "Inciertas",
    board_review: "En revisión",
    board_failed: "Fallidas",
    board_delivered: "Entregadas",
    board_read: "Leídas",
    board_in_flight: "En curso (aceptadas/enviadas)",
    board_cancelled_by: "Cerradas por",
    board_dup_keys: "Duplicados bloqueados (claves)",
    board_dup_events: "Duplicados bloqueados (eventos)",
    board_opt_outs: "Bajas",
    board_latency: "Latencia a aceptación (mediana)",
    board_hint: "enter abre los compromisos detrás del contador",
    detail_content: "Contenido enviado",
    detail_history: "Historia",
    detail_attempts: "Intentos",
    detail_related: "Relacionadas",
    detail_to: "Para",
    detail_due: "Programada",
    detail_text: "Texto",
    detail_template: "Plantilla",
    detail_authorized: "autorizado por",
    detail_recorded_only: "(solo registro)",
    detail_none: "—",
    reprocess_day: "Día",
    reprocess_states: "Estados",
    reprocess_hint: "←/→ día · ↑↓ y espacio eligen estados · r reprocesa (motivo y confirmación)",
    reprocess_unavailable: "El reproceso no está disponible en esta consola.",
    reprocess_preview: "Simulación (nada se ha aplicado)",
    act_cancel: "cancelar",
    act_verify: "verificar",
    act_resend: "autorizar reenvío",
    act_manual_contact: "contacto manual",
    act_reprocess: "reprocesar",
    act_filter: "filtrar",
    act_command: "comando",
    act_help: "ayuda",
    act_back: "volver",
    act_refresh: "refrescar",
    act_quit: "salir",
    act_open: "detalle",
    act_next_screen: "siguiente pantalla",
    act_prev_screen: "pantalla anterior",
    act_move: "mover",
    act_page: "página",
    act_day: "cambiar día",
    form_reason: "Motivo",
    form_responsible: "Responsable",
    form_outcome: "Resultado",
    form_submit_hint: "enter continuar · tab cambia resultado · esc anular",
    form_reason_required: "El motivo es obligatorio.",
    outcome_received: "recibido (llamada)",
    outcome_not_received: "no recibido",
    outcome_channel: "conciliar con el canal",
    confirm_title: "Confirmar",
    confirm_hint: "s confirmar · n/esc anular",
    scope_cancel: "Cancelar la intención #{id} {key} (estado {state}). Motivo: {reason}",
    scope_verify: "Registrar verificación «{outcome}» en #{id} {key} (estado {state}). Motivo: {reason}",
    scope_resend: "Crear un NUEVO envío relacionado con #{id} {key}, mismo contenido, autorizado por {operator}. Motivo: {reason}",
    scope_manual_contact: "Marcar {commitment} como contactado por {operator}; se cierran sus recordatorios pendientes. Motivo: {reason}",
    scope_reprocess: "Reprocesar el día {day}, estados {states}: {count} intenciones. Motivo: {reason}",
    flash_role_refused: "Su rol ({role}) no puede {action}.",
    flash_read_only: "Consola en solo lectura: no se permiten acciones.",
    flash_no_selection: "Seleccione una fila primero.",
    flash_aborted: "Acción anulada; nada cambió.",
    flash_done: "Hecho: {what}",
    flash_refused: "Rechazado: {why}",
    flash_error: "Error: {why}",
    flash_unknown_command: "Comando desconocido: {cmd}",
    flash_refreshed: "Actualizado.",
    help_title: "Teclas (según su rol)",
    help_roles: "Roles: recepción · supervisión · técnico",
    role_front_desk: "recepción",
    role_supervisor: "supervisión",
    role_technician: "técnico",
    done_state: "{action} {target} → {state}",
    done_new: "{action} {target} → nueva intención #{id} {key}",
    done_closed: "{action} {target}: {n} recordatorios pendientes cerrados",
    recorded_only: "{action} {target}: registrado en la historia; el estado sigue {state} (evidencia más fuerte)",
    ref_in_flight: "hay un intento en curso; espere su resultado",
    ref_uncertain: "el resultado es incierto y el cliente podría tenerlo; verifique primero (v)",
    ref_channel_has_it: "el canal ya tomó el mensaje ({state})",
    ref_delivered: "ya fue entregado al cliente ({state}); no hay nada que cancelar",
    ref_closed: "ya está cerrada ({state}{reason})",
    ref_not_sent: "aún no se envió nada ({state})",
    ref_resend_pending: "ya hay un reenvío pendiente: {key}",
    ref_stale: "el compromiso cambió (mensaje de v{planned}, ahora v{current}); su contenido está desactualizado",
    ref_commitment_cancelled: "el compromiso fue cancelado",
    ref_expired: "la vigencia del mensaje terminó",
    ref_not_appointment: "el contacto manual aplica solo a citas",
    ref_no_lookup: "este canal no permite consultar el mensaje; su webhook de estado lo resolverá",
    ref_channel_unsure: "el canal tampoco lo sabe aún (ambiguo); lo informará",
    ref_channel_no_record: "el canal no tiene registro del mensaje: nunca llegó",
    ref_channel_unavailable: "no se pudo consultar al canal: {detail}",
    states: &[
        ("planned", "planificada"),
        ("dispatching", "despachando"),
        ("uncertain", "incierta"),
        ("accepted", "aceptada"),
        ("sent", "enviada"),
        ("delivered", "entregada"),
        ("read", "leída"),
        ("failed", "fallida"),
        ("review", "en revisión"),
        ("cancelled", "cancelada"),
        ("stuck", "atascada"),
        ("reschedule", "reprogramar"),
    ],
    reasons: &[
        ("commitment_cancelled", "cita cancelada"),
        ("superseded", "reprogramación"),
        ("already_confirmed", "ya confirmada"),
        ("manual_contact", "contacto manual"),
        ("opted_out", "baja"),
        ("expired", "vencida"),
        ("operator", "operador"),
        ("withdrawn", "retirada del canal"),
        ("in_past", "en el pasado"),
    ],
};

/// English (`language = "en"`).
pub static EN: Strings = Strings {
    app_title: "unavez",
    screen_attention: "Attention",
    screen_upcoming: "Upcoming",
    screen_board: "Board",
    screen_detail: "Detail",
    screen_reprocess: "Reprocess",
    screen_help: "Help",
    read_only: "read only",
    dispatcher: "dispatcher",
    dispatcher_off: "off",
    dispatcher_running: "running",
    dispatcher_paused: "stopped",
    queue: "queue",
    last_error: "last error",
    loading: "loading…",
    empty_list: "Nothing pending here.",
    filter: "filter",
    page: "page",
    col_commitment: "Commitment",
    col_time: "Time",
    col_customer: "Customer",
    col_purpose: "Message",
    col_state: "State",
    col_age: "Age",
    col_evidence: "Last evidence",
    col_status: "Appointment",
    col_notifications: "Notifications",
    col_counter: "Counter",
    col_value: "Value",
    col_action: "Action",
    col_count: "Count",
    col_why: "Why",
    reschedule_request: "wants change",
    needs_call: "CALL",
    confirmed: "confirmed",
    manual_contact_done: "contacted",
    cancelled_appt: "cancelled",
    scheduled: "scheduled",
    no_evidence: "no evidence",
    board_day: "Day",
    board_planned: "Planned",
    board_uncertain: "Uncertain",
    board_review: "In review",
    board_failed: "Failed",
    board_delivered: "Delivered",
    board_read: "Read",
    board_in_flight: "In flight (accepted/sent)",
    board_cancelled_by: "Closed by",
    board_dup_keys: "Duplicates blocked (keys)",
    board_dup_events: "Duplicates blocked (events)",
    board_opt_outs: "Opt-outs",
    board_latency: "Latency to acceptance (median)",
    board_hint: "enter opens the commitments behind a counter",
    detail_content: "Content as sent",
    detail_history: "History",
    detail_attempts: "Attempts",
    detail_related: "Related",
    detail_to: "To",
    detail_due: "Due",
    detail_text: "Text",
    detail_template: "Template",
    detail_authorized: "authorized by",
    detail_recorded_only: "(recorded only)",
    detail_none: "—",
    reprocess_day: "Day",
    reprocess_states: "States",
    reprocess_hint: "←/→ day · ↑↓ and space pick states · r reprocesses (reason and confirmation)",
    reprocess_unavailable: "Reprocessing is not available in this console.",
    reprocess_preview: "Dry run (nothing applied)",
    act_cancel: "cancel",
    act_verify: "verify",
    act_resend: "authorize resend",
    act_manual_contact: "manual contact",
    act_reprocess: "reprocess",
    act_filter: "filter",
    act_command: "command",
    act_help: "help",
    act_back: "back",
    act_refresh: "refresh",
    act_quit: "quit",
    act_open: "detail",
    act_next_screen: "next screen",
    act_prev_screen: "previous screen",
    act_move: "move",
    act_page: "page",
    act_day: "change day",
    form_reason: "Reason",
    form_responsible: "Responsible",
    form_outcome: "Outcome",
    form_submit_hint: "enter continue · tab changes outcome · esc abort",
    form_reason_required: "A reason is required.",
    outcome_received: "received (phone call)",
    outcome_not_received: "not received",
    outcome_channel: "reconcile with the channel",
    confirm_title: "Confirm",
    confirm_hint: "y confirm · n/esc abort",
    scope_cancel: "Cancel intention #{id} {key} (state {state}). Reason: {reason}",
    scope_verify: "Record verification “{outcome}” on #{id} {key} (state {state}). Reason: {reason}",
    scope_resend: "Create a NEW send related to #{id} {key}, same content, authorized by {operator}. Reason: {reason}",
    scope_manual_contact: "Mark {commitment} as contacted by {operator}; its pending reminders close. Reason: {reason}",
    scope_reprocess: "Reprocess day {day}, states {states}: {count} intentions. Reason: {reason}",
    flash_role_refused: "Your role ({role}) may not {action}.",
    flash_read_only: "Read-only console: actions are disabled.",
    flash_no_selection: "Select a row first.",
    flash_aborted: "Action aborted; nothing changed.",
    flash_done: "Done: {what}",
    flash_refused: "Refused: {why}",
    flash_error: "Error: {why}",
    flash_unknown_command: "Unknown command: {cmd}",
    flash_refreshed: "Refreshed.",
    help_title: "Keys (for your role)",
    help_roles: "Roles: front desk · supervisor · technician",
    role_front_desk: "front desk",
    role_supervisor: "supervisor",
    role_technician: "technician",
    done_state: "{action} {target} → {state}",
    done_new: "{action} {target} → new intention #{id} {key}",
    done_closed: "{action} {target}: {n} pending reminders closed",
    recorded_only: "{action} {target}: recorded in history; the state stays {state} (stronger evidence)",
    ref_in_flight: "an attempt is in flight; wait for its outcome",
    ref_uncertain: "the outcome is unknown and the customer may have it; verify first (v)",
    ref_channel_has_it: "the channel already took the message ({state})",
    ref_delivered: "already delivered to the customer ({state}); nothing to cancel",
    ref_closed: "already closed ({state}{reason})",
    ref_not_sent: "nothing was sent yet ({state})",
    ref_resend_pending: "a resend is already pending: {key}",
    ref_stale: "the commitment changed (message for v{planned}, now v{current}); its content is outdated",
    ref_commitment_cancelled: "the commitment was cancelled",
    ref_expired: "the message's validity has ended",
    ref_not_appointment: "manual contact applies to appointments only",
    ref_no_lookup: "this channel cannot be asked about a message; its status webhook will settle it",
    ref_channel_unsure: "the channel does not know yet either (ambiguous); it will report",
    ref_channel_no_record: "the channel has no record of the message: it never arrived",
    ref_channel_unavailable: "the channel could not be asked: {detail}",
    states: &[
        ("planned", "planned"),
        ("dispatching", "dispatching"),
        ("uncertain", "uncertain"),
        ("accepted", "accepted"),
        ("sent", "sent"),
        ("delivered", "delivered"),
        ("read", "read"),
        ("failed", "failed"),
        ("review", "review"),
        ("cancelled", "cancelled"),
        ("stuck", "stuck"),
        ("reschedule", "reschedule"),
    ],
    reasons: &[
        ("commitment_cancelled", "appointment cancelled"),
        ("superseded", "rescheduled"),
        ("already_confirmed", "already confirmed"),
        ("manual_contact", "manual contact"),
        ("opted_out", "opt-out"),
        ("expired", "expired"),
        ("operator", "operator"),
        ("withdrawn", "withdrawn"),
        ("in_past", "in the past"),
    ],
};

impl Strings {
    /// The label of an intention state (or `stuck` / `reschedule`).
    pub fn state<'a>(&self, code: &'a str) -> &'a str
    where
        'static: 'a,
    {
        self.states
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, l)| *l)
            .unwrap_or(code)
    }

    /// The label of a closure reason.
    pub fn reason<'a>(&self, code: &'a str) -> &'a str
    where
        'static: 'a,
    {
        self.reasons
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, l)| *l)
            .unwrap_or(code)
    }

    pub fn role(&self, role: Role) -> &'static str {
        match role {
            Role::FrontDesk => self.role_front_desk,
            Role::Supervisor => self.role_supervisor,
            Role::Technician => self.role_technician,
        }
    }

    pub fn op_label(&self, op: OpKind) -> &'static str {
        match op {
            OpKind::Cancel => self.act_cancel,
            OpKind::Verify => self.act_verify,
            OpKind::AuthorizeResend => self.act_resend,
            OpKind::ManualContact => self.act_manual_contact,
            OpKind::Reprocess => self.act_reprocess,
        }
    }

    pub fn outcome(&self, o: VerifyOutcome) -> &'static str {
        match o {
            VerifyOutcome::Received => self.outcome_received,
            VerifyOutcome::NotReceived => self.outcome_not_received,
        }
    }

    /// Explains a ledger refusal in this language.
    pub fn refusal(&self, r: &Refusal) -> String {
        match r {
            Refusal::InFlight => self.ref_in_flight.into(),
            Refusal::Uncertain => self.ref_uncertain.into(),
            Refusal::ChannelHasIt { state } => fill(self.ref_channel_has_it, &[("state", self.state(state.as_str()))]),
            Refusal::Delivered { state } => fill(self.ref_delivered, &[("state", self.state(state.as_str()))]),
            Refusal::Closed { state, reason } => {
                let reason = reason
                    .as_deref()
                    .map(|r| format!(": {}", self.reason(r)))
                    .unwrap_or_default();
                fill(
                    self.ref_closed,
                    &[("state", self.state(state.as_str())), ("reason", &reason)],
                )
            }
            Refusal::NotSentYet { state } => fill(self.ref_not_sent, &[("state", self.state(state.as_str()))]),
            Refusal::ResendPending { key } => fill(self.ref_resend_pending, &[("key", key)]),
            Refusal::StaleVersion { planned, current } => fill(
                self.ref_stale,
                &[("planned", &planned.to_string()), ("current", &current.to_string())],
            ),
            Refusal::CommitmentCancelled => self.ref_commitment_cancelled.into(),
            Refusal::Expired => self.ref_expired.into(),
            Refusal::NotAnAppointment => self.ref_not_appointment.into(),
            Refusal::NoLookup => self.ref_no_lookup.into(),
            Refusal::ChannelUnsure => self.ref_channel_unsure.into(),
            Refusal::ChannelNoRecord => self.ref_channel_no_record.into(),
            Refusal::ChannelUnavailable { detail } => fill(self.ref_channel_unavailable, &[("detail", detail)]),
        }
    }
}

/// The table for a configured language.
pub fn strings(lang: Language) -> &'static Strings {
    match lang {
        Language::Es => &ES,
        Language::En => &EN,
    }
}

/// Replaces each `{name}` in `template` with its value.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_replaces_every_placeholder() {
        assert_eq!(fill("a {x} b {y} {x}", &[("x", "1"), ("y", "2")]), "a 1 b 2 1");
    }

    #[test]
    fn spanish_is_the_default() {
        assert_eq!(strings(Language::default()).screen_attention, "Atención");
        assert_eq!(strings(Language::En).screen_attention, "Attention");
    }
}
