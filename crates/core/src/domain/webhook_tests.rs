use super::*;

fn report(signal: Option<Signal>, status: &str, note: Option<&str>) -> Report {
    Report {
        signal,
        status: status.into(),
        evidence: "cloud:e1".into(),
        note: note.map(str::to_string),
        error_code: None,
    }
}

#[test]
fn a_mapped_status_goes_through_the_state_machine() {
    let r = report_row(
        IntentionState::Sent,
        3,
        &report(Some(Signal::Delivered), "delivered", None),
    );
    assert_eq!(
        r,
        ReportRow {
            signal: Some(Signal::Delivered),
            word: "webhook:delivered".into(),
            evidence: "cloud:e1".into(),
            note: None,
            commitment_version: Some(3),
        }
    );
    // Lower than what we hold: still fed to the machine, which records it.
    let r = report_row(
        IntentionState::Read,
        3,
        &report(Some(Signal::Delivered), "delivered", None),
    );
    assert_eq!(r.signal, Some(Signal::Delivered));
}

#[test]
fn evidence_that_resolves_uncertain_says_so() {
    let r = report_row(
        IntentionState::Uncertain,
        1,
        &report(Some(Signal::Sent), "sent", Some("engine detail")),
    );
    assert_eq!(
        r.note.as_deref(),
        Some("resolves uncertain with evidence cloud:e1; engine detail")
    );
    let r = report_row(IntentionState::Uncertain, 1, &report(Some(Signal::Read), "read", None));
    assert_eq!(r.note.as_deref(), Some("resolves uncertain with evidence cloud:e1"));
}

#[test]
fn unmapped_and_refused_statuses_are_recorded_only() {
    let r = report_row(IntentionState::Sent, 2, &report(None, "warning", None));
    assert_eq!(
        (r.signal, r.word.as_str(), r.note.as_deref(), r.commitment_version),
        (
            None,
            "webhook:warning",
            Some("status \"warning\" not mapped to a state: recorded only"),
            None
        )
    );
    // Evidence always lands (moved or recorded); an engine calling a sent
    // message ambiguous does not apply to it.
    let r = report_row(
        IntentionState::Sent,
        2,
        &report(Some(Signal::Unknown), "ambiguous", Some("x")),
    );
    assert_eq!(
        (r.signal, r.note.as_deref(), r.commitment_version),
        (
            None,
            Some("unknown_outcome does not apply to sent: recorded only; x"),
            Some(2)
        )
    );
}

#[test]
fn second_ids_and_parked_events_explain_themselves() {
    assert_eq!(
        second_message_id("m2", "m1"),
        (
            "message:m2".to_string(),
            "status for message m2, but this intention's message is m1: possible duplicate send".to_string()
        )
    );
    assert_eq!(
        parked_note("ev", 9, "k", "m"),
        "event ev names this intention and intention #9 (key k, message m): applied to neither"
    );
}

#[test]
fn a_blocked_template_sends_its_planned_intentions_to_review() {
    let at = Utc::now();
    let rs = hold_template(&[4, 5], "blocked", "cloud:t", at);
    assert_eq!(rs.len(), 2);
    for (r, id) in rs.iter().zip([4, 5]) {
        assert_eq!(
            (r.intention_id, r.from, r.to, r.applied),
            (id, Some(IntentionState::Planned), IntentionState::Review, true)
        );
        assert_eq!(
            (
                r.said.signal,
                r.said.cause,
                r.said.evidence.as_deref(),
                r.said.note.as_deref()
            ),
            (
                HistorySignal::TemplateBlocked,
                Cause::Webhook,
                Some("cloud:t"),
                Some("blocked")
            )
        );
        assert_eq!(r.reason.as_deref(), Some("blocked"));
    }
}
