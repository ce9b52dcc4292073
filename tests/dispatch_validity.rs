//! Issue 3, test 5: cancellation before send, and a reschedule while the
//! message is in flight.

mod dispatch_support;

use std::time::Duration;

use chrono::Utc;
use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};

/// Cancelled before any dispatcher ran: the booking notice never goes out,
/// only the cancellation notice does.
fn cancellation_before_send_sends_no_message(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 5);
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()));
    env.import("agenda.jsonl", &[scheduled("cita-50", 50), scheduled("cita-51", 51)]);
    env.import("cancel.jsonl", &[cancelled("cita-50")]);
    env.ok(&["dispatch", "--until-idle"]);

    let rows = env.by_key();
    let booking = &rows["cita-50:aviso-reserva:v1"];
    assert_eq!(booking.state, IntentionState::Cancelled);
    assert_eq!(booking.state_reason.as_deref(), Some("commitment_cancelled"));
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 2));
    std::thread::sleep(Duration::from_millis(200));
    let sent = sent_counts(log.path());
    assert!(!sent.contains_key("cita-50:aviso-reserva:v1"), "{sent:?}");
    assert_eq!(sent.get("cita-50:aviso-cancelacion:v2"), Some(&1), "{sent:?}");
    assert_eq!(sent.get("cita-51:aviso-reserva:v1"), Some(&1), "{sent:?}");
    assert_eq!(sent.len(), 2, "{sent:?}");
    rt.block_on(sim.shutdown());
}

/// The appointment is rescheduled while its booking notice is in flight:
/// history records the version checked and the new one, says the old
/// message is not confirmation of the new time, and the update notice of
/// the new version is planned (and then sent).
fn reschedule_while_in_flight_records_the_sequence_and_plans_an_update_notice(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // The first send takes 8 s inside the engine: long enough to reschedule.
    let sim = start_sim(&rt, log.path(), "latency_ms=8000", 7);
    let mut cfg = Cfg::motor(&sim.base_url()).with_motor_timeout(20_000);
    cfg.lease_seconds = 60;
    let env = Env::with(backend, &cfg);
    let starts = Utc::now() + chrono::Duration::days(3);
    env.import("agenda.jsonl", &[scheduled_at("cita-60", 60, starts, 1)]);

    let mut d = env.spawn(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(20), || {
        env.by_key()["cita-60:aviso-reserva:v1"].state == IntentionState::Dispatching
    }));
    env.import(
        "resched.jsonl",
        &[rescheduled("cita-60", starts + chrono::Duration::days(1), 2)],
    );
    assert_eq!(
        env.by_key()["cita-60:aviso-reserva:v1"].state,
        IntentionState::Dispatching,
        "the reschedule must land while the first notice is in flight"
    );
    // Later sends (the update notice) go through quickly.
    sim.set_faults(unavez::sim::FaultSpec::default());
    let out = d.0.take().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let rows = env.by_key();
    let old = &rows["cita-60:aviso-reserva:v1"];
    assert!(old.state.has_channel_evidence(), "{}", old.state);
    let h = env.history(old.id);
    let seq = h
        .iter()
        .find(|r| r.signal == "version_changed_in_flight")
        .unwrap_or_else(|| panic!("no sequence recorded: {h:#?}"));
    let note = seq.note.as_deref().unwrap();
    assert!(note.contains("checked v1, now v2"), "{note}");
    assert!(note.contains("not confirmation of v2"), "{note}");
    assert!(note.contains("cita-60:aviso-cambio:v2"), "{note}");
    assert_eq!(seq.commitment_version, Some(2));
    let claim = h.iter().find(|r| r.signal == "claim").unwrap();
    assert_eq!(claim.commitment_version, Some(1), "the claim evaluated v1");

    // The update notice is planned for v2 and goes out on the next run.
    let update = &rows["cita-60:aviso-cambio:v2"];
    assert_eq!(update.commitment_version, 2);
    env.ok(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(20), || {
        sent_counts(log.path()).contains_key("cita-60:aviso-cambio:v2")
    }));
    assert_no_duplicates(log.path());
    rt.block_on(sim.shutdown());
}

on_both!(
    cancellation_before_send_sends_no_message,
    reschedule_while_in_flight_records_the_sequence_and_plans_an_update_notice,
);
