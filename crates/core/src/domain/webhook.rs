//! What channel events write in an intention's history, decided: the row
//! a status report writes (through the state machine, or recorded only,
//! and why), the note of a second message id for one key, the notes of an
//! event parked between two intentions, and the hold of a blocked
//! template. The ledger stores these rows as given; "a status never moves
//! backwards" is the state machine's rank ([`transition`]), never SQL.

use chrono::{DateTime, Utc};

use super::history::{self, Cause, HistorySignal, Record, Said};
use super::state::{IntentionState, Signal, Transition, transition};
use super::status::Report;

/// The history row of one status report on one intention. `signal`:
/// feed it through the state machine (which moves the intention or records
/// the report as lower, repeated…); `None`: record the row only, state
/// unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportRow {
    pub signal: Option<Signal>,
    /// The stored word: `webhook:<status>`.
    pub word: String,
    pub evidence: String,
    pub note: Option<String>,
    pub commitment_version: Option<i64>,
}

/// The stored history word of a status webhook.
pub fn webhook_word(status: &str) -> String {
    format!("{}:{status}", HistorySignal::Webhook.as_str())
}

/// Decides the row `report` writes on an intention in `state` whose
/// message speaks of `version`. Every report lands in history: a status we
/// do not map and one the machine refuses are still evidence that
/// something was reported. A report that takes an intention out of
/// `uncertain` says so.
pub fn report_row(state: IntentionState, version: i64, report: &Report) -> ReportRow {
    let word = webhook_word(&report.status);
    let Some(signal) = report.signal else {
        return ReportRow {
            signal: None,
            word,
            evidence: report.evidence.clone(),
            note: Some(format!(
                "status {:?} not mapped to a state: recorded only",
                report.status
            )),
            commitment_version: None,
        };
    };
    let mut note = report.note.clone();
    if state == IntentionState::Uncertain && signal.is_evidence() {
        let resolved = format!("resolves uncertain with evidence {}", report.evidence);
        note = Some(match note {
            Some(n) => format!("{resolved}; {n}"),
            None => resolved,
        });
    }
    if transition(state, signal) == Transition::Refuse {
        let n = format!("{} does not apply to {state}: recorded only", signal.name());
        note = Some(match note {
            Some(extra) => format!("{n}; {extra}"),
            None => n,
        });
        return ReportRow {
            signal: None,
            word,
            evidence: report.evidence.clone(),
            note,
            commitment_version: Some(version),
        };
    }
    ReportRow {
        signal: Some(signal),
        word,
        evidence: report.evidence.clone(),
        note,
        commitment_version: Some(version),
    }
}

/// A status for message `mid` correlated by key to an intention whose
/// message is `first`: a second message may have reached WhatsApp, which
/// a person must see. `(evidence, note)` of its `second_message_id` row.
pub fn second_message_id(mid: &str, first: &str) -> (String, String) {
    (
        format!("message:{mid}"),
        format!("status for message {mid}, but this intention's message is {first}: possible duplicate send"),
    )
}

/// The note an event parked between intention `this` and `other` leaves
/// on `this` (its `event_parked` row; evidence `source:event_id`).
pub fn parked_note(event_id: &str, other: i64, key: &str, mid: &str) -> String {
    format!(
        "event {event_id} names this intention and intention #{other} (key {key}, message {mid}): applied to neither"
    )
}

/// A template WhatsApp blocked: every planned intention of it goes to
/// `review` (a blocked template would fail each one alone), said by the
/// webhook with `note` and `evidence`.
pub fn hold_template(planned: &[i64], note: &str, evidence: &str, at: DateTime<Utc>) -> Vec<Record> {
    planned
        .iter()
        .filter_map(|&id| {
            let said = Said::new(HistorySignal::TemplateBlocked, Cause::Webhook)
                .evidence(evidence)
                .note(note);
            history::on_signal(id, IntentionState::Planned, Signal::NeedsReview, said, at).1
        })
        .collect()
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
