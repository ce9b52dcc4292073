//! Issue 25 §2: what happened, for the patient, in plain words. The
//! verdict line (`domain::verdict`), Detalle's header, the translated
//! history (signals, reasons, channel answers, attempts) and human local
//! dates. Kept apart from the big table so that its completeness tests
//! can list every typed vocabulary it covers.

use chrono::{DateTime, Datelike, Utc};
use chrono_tz::Tz;

use crate::domain::attempt::AttemptOutcome;
use crate::domain::state::{CancelReason, RecordOnly};
use crate::domain::verdict::{About, Notice, Outcome, ReviewWhy, Verdict};

use super::fill;

/// The words of one language.
#[derive(Debug)]
pub struct Words {
    pub act_technical: &'static str,
    pub technical_title: &'static str,
    pub today: &'static str,
    pub tomorrow: &'static str,
    pub yesterday: &'static str,
    /// `(notice, its name, "of it")`: "el aviso de reserva", "de la reserva".
    pub notices: [(Notice, &'static str, &'static str); 5],
    pub scheduled: &'static str,
    /// A planned message whose due time has passed.
    pub overdue: &'static str,
    pub sending: &'static str,
    pub unknown: &'static str,
    pub with_channel: &'static str,
    pub delivered: &'static str,
    pub read: &'static str,
    pub never_left: &'static str,
    pub undelivered: &'static str,
    pub review: &'static str,
    pub review_why: [(ReviewWhy, &'static str); 4],
    pub not_sent: &'static str,
    pub not_sent_why: [(CancelReason, &'static str); 9],
    pub not_sent_no_reason: &'static str,
    /// `Cita {when}, {what}.` and its parts.
    pub appointment: &'static str,
    pub appointment_cancelled: &'static str,
    pub appointment_confirmed: &'static str,
    pub order: &'static str,
    pub patient: &'static str,
    pub customer: &'static str,
    pub to: &'static str,
    pub due: &'static str,
    /// Record-only reasons of a history row.
    pub record_only: [(RecordOnly, &'static str); 4],
    pub recorded: &'static str,
    /// `(channel word, meaning)`: Cloud API and engine status words.
    pub channel_words: &'static [(&'static str, &'static str)],
    pub channel_unknown: &'static str,
    pub channel_said: &'static str,
    pub attempt: &'static str,
    pub attempts: [(AttemptOutcome, &'static str); 8],
    /// `(relation, words)` of a related message.
    pub relations: &'static [(&'static str, &'static str)],
}

impl Words {
    /// A local, human time: `hoy 14:30`, `mañana 09:00`, `ayer 18:10`,
    /// `03/12 09:40`, with the year only when it is not this one. Every
    /// date a front-desk screen shows goes through here (or [`Words::day`]).
    pub fn when(&self, at: DateTime<Utc>, now: DateTime<Utc>, tz: Tz) -> String {
        self.when_local(at.with_timezone(&tz).naive_local(), now.with_timezone(&tz).date_naive())
    }

    /// [`Words::when`] for a time already in the clinic's offset (a
    /// refusal's `authorized_at`): "today" is read in that offset.
    pub fn when_at(&self, at: DateTime<chrono::FixedOffset>, now: DateTime<Utc>) -> String {
        self.when_local(at.naive_local(), now.with_timezone(at.offset()).date_naive())
    }

    fn when_local(&self, local: chrono::NaiveDateTime, today: chrono::NaiveDate) -> String {
        let hm = local.format("%H:%M");
        match (local.date() - today).num_days() {
            0 => format!("{} {hm}", self.today),
            1 => format!("{} {hm}", self.tomorrow),
            -1 => format!("{} {hm}", self.yesterday),
            _ if local.year() == today.year() => local.format("%d/%m %H:%M").to_string(),
            _ => local.format("%d/%m/%Y %H:%M").to_string(),
        }
    }

    /// A local day in words: `hoy`, `mañana`, `ayer`, `03/12`, with the
    /// year only when it is not this one.
    pub fn day(&self, day: chrono::NaiveDate, now: DateTime<Utc>, tz: Tz) -> String {
        let today = now.with_timezone(&tz).date_naive();
        match (day - today).num_days() {
            0 => self.today.to_string(),
            1 => self.tomorrow.to_string(),
            -1 => self.yesterday.to_string(),
            _ if day.year() == today.year() => day.format("%d/%m").to_string(),
            _ => day.format("%d/%m/%Y").to_string(),
        }
    }

    fn notice(&self, n: Notice) -> (&'static str, &'static str) {
        let (_, name, of) = self
            .notices
            .iter()
            .find(|(k, ..)| *k == n)
            .copied()
            .unwrap_or(self.notices[0]);
        (name, of)
    }

    /// The verdict in one or two sentences: what happened, then the
    /// commitment it was about.
    pub fn verdict(&self, v: &Verdict, now: DateTime<Utc>, tz: Tz) -> String {
        let (name, of) = self.notice(v.notice);
        let at = v.at.map(|t| self.when(t, now, tz)).unwrap_or_default();
        let template = match v.outcome {
            Outcome::Scheduled if v.at.is_some_and(|t| t < now) => self.overdue,
            Outcome::Scheduled => self.scheduled,
            Outcome::Sending => self.sending,
            Outcome::Unknown => self.unknown,
            Outcome::WithChannel => self.with_channel,
            Outcome::Delivered => self.delivered,
            Outcome::Read => self.read,
            Outcome::NeverLeft => self.never_left,
            Outcome::Undelivered => self.undelivered,
            Outcome::Review(_) => self.review,
            Outcome::NotSent(Some(_)) => self.not_sent,
            Outcome::NotSent(None) => self.not_sent_no_reason,
        };
        let why = match v.outcome {
            Outcome::Review(w) => lookup(&self.review_why, w),
            Outcome::NotSent(Some(r)) => lookup(&self.not_sent_why, r),
            _ => "",
        };
        let head = capitalize(&fill(
            template,
            &[("notice", name), ("of", of), ("at", &at), ("why", why)],
        ));
        match self.about(v, now, tz) {
            Some(tail) => format!("{head} {tail}"),
            None => head,
        }
    }

    /// `Cita hoy 17:20, Medicina general, Sede Miraflores.` or
    /// `Pedido PED-9: enviado.`
    pub fn about(&self, v: &Verdict, now: DateTime<Utc>, tz: Tz) -> Option<String> {
        match v.about.as_ref()? {
            About::Appointment {
                starts_at,
                service,
                location,
                cancelled,
                confirmed,
            } => {
                let mut parts: Vec<String> = Vec::new();
                if let Some(t) = starts_at {
                    parts.push(self.when(*t, now, tz));
                }
                parts.extend(
                    service
                        .iter()
                        .chain(location.iter())
                        .map(|s| crate::domain::text::inert(s).into_owned()),
                );
                let mut out = fill(self.appointment, &[("what", &parts.join(", "))]);
                if *cancelled {
                    out = fill(self.appointment_cancelled, &[("what", &parts.join(", "))]);
                } else if *confirmed {
                    out.push_str(&format!(" {}", self.appointment_confirmed));
                }
                Some(format!("{}.", out.trim_end()))
            }
            About::Order { reference, state } => Some(fill(
                self.order,
                &[
                    ("ref", &crate::domain::text::inert(reference)),
                    ("state", &crate::domain::text::inert(state)),
                ],
            )),
        }
    }

    /// What a channel's status word means; an unknown one is said as such,
    /// never shown raw.
    pub fn channel_word(&self, word: &str) -> &'static str {
        self.channel_words
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, l)| *l)
            .unwrap_or(self.channel_unknown)
    }

    /// Why a history row changed nothing, when its note starts with a
    /// record-only reason (`repeated`, `after_terminal: …`).
    pub fn record_only(&self, note: Option<&str>) -> Option<&'static str> {
        let note = note?;
        self.record_only
            .iter()
            .find(|(r, _)| note == r.as_str() || note.starts_with(&format!("{}:", r.as_str())))
            .map(|(_, l)| *l)
    }

    pub fn attempt_outcome(&self, o: AttemptOutcome) -> &'static str {
        lookup(&self.attempts, o)
    }

    pub fn relation(&self, r: &str) -> &'static str {
        self.relations
            .iter()
            .find(|(c, _)| *c == r)
            .map(|(_, l)| *l)
            .unwrap_or("")
    }
}

fn lookup<K: PartialEq + Copy, const N: usize>(table: &[(K, &'static str); N], k: K) -> &'static str {
    table.iter().find(|(c, _)| *c == k).map(|(_, l)| *l).unwrap_or("")
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

pub static ES: Words = Words {
    act_technical: "ver evidencia técnica",
    technical_title: "Evidencia técnica (e vuelve)",
    today: "hoy",
    tomorrow: "mañana",
    yesterday: "ayer",
    notices: [
        (Notice::Booking, "el aviso de reserva", "de la reserva"),
        (Notice::Reminder, "el recordatorio", "de la cita"),
        (Notice::Update, "el aviso de reprogramación", "de la reprogramación"),
        (Notice::Cancellation, "el aviso de cancelación", "de la cancelación"),
        (Notice::Order, "el aviso del pedido", "del pedido"),
    ],
    scheduled: "{notice} sale {at}.",
    overdue: "{notice} debía salir {at} y aún espera.",
    sending: "{notice} se está enviando ahora.",
    unknown: "No sabemos si le llegó {notice}: el canal no respondió con claridad.",
    with_channel: "{notice} salió {at}; el canal aún no confirma que le llegó.",
    delivered: "Se le avisó {of}; le llegó {at} (aún no lo lee).",
    read: "Se le avisó {of}; lo leyó {at}.",
    never_left: "No le llegó {notice}: el canal confirmó que no salió.",
    undelivered: "No le llegó {notice}: el canal no pudo entregarlo.",
    review: "{notice} no salió: espera revisión{why}.",
    review_why: [
        (ReviewWhy::TemplateBlocked, " (WhatsApp bloqueó la plantilla)"),
        (ReviewWhy::ChangedWhileUncertain, " (la cita cambió sin saber si salió)"),
        (
            ReviewWhy::InvalidWhileUncertain,
            " (dejó de corresponder sin saber si salió)",
        ),
        (ReviewWhy::Other, ""),
    ],
    not_sent: "{notice} no se envió: {why}.",
    not_sent_why: [
        (CancelReason::CommitmentCancelled, "se canceló"),
        (CancelReason::Superseded, "hubo un cambio y se avisa con otro mensaje"),
        (CancelReason::AlreadyConfirmed, "ya había confirmado"),
        (CancelReason::ManualContact, "ya se le contactó"),
        (CancelReason::OptedOut, "pidió no recibir mensajes"),
        (CancelReason::Expired, "venció antes de poder salir"),
        (CancelReason::Operator, "lo canceló un operador"),
        (CancelReason::Withdrawn, "se retiró del canal antes de salir"),
        (CancelReason::InPast, "la cita ya había pasado"),
    ],
    not_sent_no_reason: "{notice} no se envió.",
    appointment: "Cita {what}",
    appointment_cancelled: "Cita cancelada ({what})",
    appointment_confirmed: "(confirmada)",
    order: "Pedido {ref}: {state}.",
    patient: "Paciente",
    customer: "Cliente",
    to: "Para",
    due: "Programada",
    record_only: [
        (RecordOnly::Repeated, "aviso repetido"),
        (RecordOnly::Lower, "llegó después de una evidencia más fuerte"),
        (RecordOnly::AfterTerminal, "llegó con el aviso ya cerrado"),
        (RecordOnly::FailedAfterDelivery, "falla informada después de entregado"),
    ],
    recorded: "solo registro",
    channel_words: &[
        ("sent", "salió"),
        ("delivered", "le llegó"),
        ("read", "lo leyó"),
        ("failed", "no se pudo entregar"),
        ("en_cola", "en cola del canal"),
        ("enviado", "salió"),
        ("entregado", "le llegó"),
        ("leido", "lo leyó"),
        ("fallido", "no salió"),
        ("cancelado", "retirado antes de salir"),
        ("ambiguo", "el canal no sabe si salió"),
    ],
    channel_unknown: "el canal respondió algo que no reconocemos",
    channel_said: "el canal dice: {what}",
    attempt: "Intento {n} {at}: {what}",
    attempts: [
        (AttemptOutcome::Started, "en curso"),
        (AttemptOutcome::Accepted, "el canal lo tomó"),
        (AttemptOutcome::Ambiguous, "el canal no sabe si salió"),
        (AttemptOutcome::Failed, "el canal lo rechazó"),
        (AttemptOutcome::Retry, "no llegó al canal; se reintenta"),
        (AttemptOutcome::Uncertain, "sin respuesta clara del canal"),
        (AttemptOutcome::Conflict, "el canal ya tenía ese aviso"),
        (AttemptOutcome::NotSent, "se detuvo antes de salir"),
    ],
    relations: &[
        ("resend_of", "reenvío de este aviso"),
        ("resent_as", "reenviado como"),
        ("other_version", "aviso de otra versión de la cita"),
    ],
};

pub static EN: Words = Words {
    act_technical: "show technical evidence",
    technical_title: "Technical evidence (e goes back)",
    today: "today",
    tomorrow: "tomorrow",
    yesterday: "yesterday",
    notices: [
        (Notice::Booking, "the booking notice", "of the booking"),
        (Notice::Reminder, "the reminder", "of the appointment"),
        (Notice::Update, "the reschedule notice", "of the reschedule"),
        (Notice::Cancellation, "the cancellation notice", "of the cancellation"),
        (Notice::Order, "the order notice", "of the order"),
    ],
    scheduled: "{notice} goes out {at}.",
    overdue: "{notice} was due {at} and still waits.",
    sending: "{notice} is being sent now.",
    unknown: "We do not know whether {notice} reached them: the channel gave no clear answer.",
    with_channel: "{notice} went out {at}; the channel has not confirmed delivery yet.",
    delivered: "They were told {of}; it arrived {at} (not read yet).",
    read: "They were told {of}; they read it {at}.",
    never_left: "{notice} did not reach them: the channel confirmed it never went out.",
    undelivered: "{notice} did not reach them: the channel could not deliver it.",
    review: "{notice} did not go out: it waits for review{why}.",
    review_why: [
        (ReviewWhy::TemplateBlocked, " (WhatsApp blocked the template)"),
        (
            ReviewWhy::ChangedWhileUncertain,
            " (the appointment changed while unsure it went out)",
        ),
        (
            ReviewWhy::InvalidWhileUncertain,
            " (it stopped applying while unsure it went out)",
        ),
        (ReviewWhy::Other, ""),
    ],
    not_sent: "{notice} was not sent: {why}.",
    not_sent_why: [
        (CancelReason::CommitmentCancelled, "it was cancelled"),
        (
            CancelReason::Superseded,
            "something changed and another message tells them",
        ),
        (CancelReason::AlreadyConfirmed, "they had already confirmed"),
        (CancelReason::ManualContact, "staff already reached them"),
        (CancelReason::OptedOut, "they asked for no messages"),
        (CancelReason::Expired, "it expired before it could go out"),
        (CancelReason::Operator, "an operator cancelled it"),
        (
            CancelReason::Withdrawn,
            "it was withdrawn from the channel before going out",
        ),
        (CancelReason::InPast, "the appointment had already passed"),
    ],
    not_sent_no_reason: "{notice} was not sent.",
    appointment: "Appointment {what}",
    appointment_cancelled: "Appointment cancelled ({what})",
    appointment_confirmed: "(confirmed)",
    order: "Order {ref}: {state}.",
    patient: "Patient",
    customer: "Customer",
    to: "To",
    due: "Due",
    record_only: [
        (RecordOnly::Repeated, "repeated notice"),
        (RecordOnly::Lower, "arrived after stronger evidence"),
        (RecordOnly::AfterTerminal, "arrived after the message was closed"),
        (RecordOnly::FailedAfterDelivery, "failure reported after delivery"),
    ],
    recorded: "recorded only",
    channel_words: &[
        ("sent", "went out"),
        ("delivered", "arrived"),
        ("read", "read"),
        ("failed", "could not be delivered"),
        ("en_cola", "queued at the channel"),
        ("enviado", "went out"),
        ("entregado", "arrived"),
        ("leido", "read"),
        ("fallido", "did not go out"),
        ("cancelado", "withdrawn before going out"),
        ("ambiguo", "the channel does not know whether it went out"),
    ],
    channel_unknown: "the channel answered something we do not recognize",
    channel_said: "the channel says: {what}",
    attempt: "Attempt {n} {at}: {what}",
    attempts: [
        (AttemptOutcome::Started, "under way"),
        (AttemptOutcome::Accepted, "the channel took it"),
        (
            AttemptOutcome::Ambiguous,
            "the channel does not know whether it went out",
        ),
        (AttemptOutcome::Failed, "the channel refused it"),
        (AttemptOutcome::Retry, "did not reach the channel; retried"),
        (AttemptOutcome::Uncertain, "no clear answer from the channel"),
        (AttemptOutcome::Conflict, "the channel already had this notice"),
        (AttemptOutcome::NotSent, "stopped before going out"),
    ],
    relations: &[
        ("resend_of", "resend of this notice"),
        ("resent_as", "resent as"),
        ("other_version", "notice of another version of the appointment"),
    ],
};

#[cfg(test)]
#[path = "words_tests.rs"]
mod tests;
