//! Issue 9, section 1: a reconciler repeat is a send, so it passes the
//! validity check first; and "right before each send" is literal. Real
//! `unavez serve` / `unavez dispatch` processes against the engine
//! simulator over loopback HTTP, with the simulator's log (what really went
//! out) and its memory (what it ever received) as ground truth.

mod dispatch_support;

use std::time::{Duration, Instant};

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez::sim::FaultSpec;
use unavez::store::IntentionRow;
use unavez_testkit::{Backend, on_both};

const BOOKING: &str = "aviso-reserva:v1";
const CANCELLATION: &str = "aviso-cancelacion:v2";

fn row(env: &Env, key: &str) -> IntentionRow {
    env.by_key().remove(key).unwrap_or_else(|| panic!("no intention {key}"))
}

fn state(env: &Env, key: &str) -> IntentionState {
    row(env, key).state
}

/// The reproduction: the booking notice is claimed and its request
/// is reset (the engine never gets it); the booking system cancels the
/// appointment; the cancellation notice goes out; faults are cleared and the
/// reconciler runs. The booking notice must never reach the engine: the
/// repeat is refused by validity and a person is asked to confirm.
fn a_reset_booking_notice_is_not_sent_by_the_reconciler_once_the_appointment_is_cancelled(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "reset=1", 91);
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()));
    let booking = format!("cita-r1:{BOOKING}");
    let cancellation = format!("cita-r1:{CANCELLATION}");
    env.import("agenda.jsonl", &[scheduled("cita-r1", 1)]);

    let mut serve = env.spawn(&["serve", "--no-server"]);
    // 1. Claimed, its request reset; the reconciler's repeats are reset too
    //    (while still valid, a repeat is allowed: it may be the first
    //    delivery).
    assert!(
        wait_until(Duration::from_secs(30), || {
            let r = row(&env, &booking);
            r.state == IntentionState::Uncertain && r.attempt_count >= 2
        }),
        "the booking notice never became uncertain with a repeat: {:?}",
        env.state_counts()
    );
    // 2. The booking system cancels the appointment.
    env.import("cancel.jsonl", &[cancelled("cita-r1")]);
    // 3. Faults cleared; the reconciler runs, the cancellation notice goes out.
    sim.set_faults(FaultSpec::none());
    assert!(
        wait_until(Duration::from_secs(40), || {
            state(&env, &booking) == IntentionState::Review
                && state(&env, &cancellation).has_channel_evidence()
                && sent_keys(log.path()).contains(&cancellation)
        }),
        "not settled: booking {:?}, cancellation {:?}",
        state(&env, &booking),
        state(&env, &cancellation)
    );
    std::thread::sleep(Duration::from_millis(1500));
    serve.terminate();

    // Ground truth: the engine never received the booking notice at all.
    let sent = sent_counts(log.path());
    assert!(!sent.contains_key(&booking), "the booking notice went out: {sent:?}");
    assert!(
        sim.command_by_key(INSTANCE, &booking).is_none(),
        "the engine received the booking notice"
    );
    assert_eq!(sent.get(&cancellation), Some(&1), "{sent:?}");
    assert_no_duplicates(log.path());

    let r = row(&env, &booking);
    assert_eq!(r.state, IntentionState::Review);
    assert_eq!(r.state_reason.as_deref(), Some("changed_while_uncertain"));
    assert_eq!(
        unavez::i18n::ES.reason("changed_while_uncertain"),
        "la cita cambió mientras no sabíamos si el mensaje salió: confirmar con el paciente"
    );
    let h = env.history(r.id);
    let review = h
        .iter()
        .find(|x| x.to_state == "review" && x.applied)
        .unwrap_or_else(|| panic!("no review in {h:#?}"));
    assert_eq!(review.cause, "reconciler");
    assert_eq!(review.evidence.as_deref(), Some("validity_before_repeat"));
    assert_eq!(review.commitment_version, Some(2), "validity read the cancelled v2");
    assert!(review.note.as_deref().unwrap().contains("cancelled"), "{review:?}");
    assert!(
        !h.iter().any(|x| x.signal == "version_changed_in_flight"),
        "nothing was in flight across the change: {h:#?}"
    );
    // Every attempt was validated against v1, before the cancellation.
    let attempts = env.store().read(|tx| tx.attempts(r.id)).unwrap();
    assert!(attempts.len() >= 2, "{attempts:#?}");
    for a in &attempts {
        assert_eq!(a.commitment_version_checked, 1, "{a:?}");
        assert_eq!(a.outcome.as_str(), "uncertain", "{a:?}");
    }
    rt.block_on(sim.shutdown());
}

/// The engine did receive the first request (its answer was lost), the
/// appointment is cancelled, and the reconciler refuses the repeat: review.
/// The engine's own status webhooks, arriving later, still settle it, with
/// the review and its reason kept in history.
fn a_refused_repeat_in_review_is_settled_by_the_engines_later_webhook(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let port = free_port();
    let hook = format!("http://127.0.0.1:{port}/webhooks/motor");
    // Every answer is lost after processing; webhooks arrive 12 s late.
    let sim = start_sim_with_webhook(
        &rt,
        log.path(),
        "timeout_after=1,hold_ms=1500,webhook_delay_ms=12000,webhook_reorder=true",
        92,
        &hook,
    );
    let mut cfg = Cfg::motor(&sim.base_url());
    cfg.server_listen = format!("127.0.0.1:{port}");
    let env = Env::with(backend, &cfg);
    let booking = format!("cita-w1:{BOOKING}");
    env.import("agenda.jsonl", &[scheduled("cita-w1", 2)]);

    let t0 = Instant::now();
    let mut serve = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(20), || state(&env, &booking)
            == IntentionState::Uncertain),
        "{:?}",
        env.state_counts()
    );
    // The engine has it (received before the change) and sent it.
    let received = sim.command_by_key(INSTANCE, &booking).expect("the engine received it");
    let before_change = chrono::Utc::now();
    assert!(received.created_at < before_change);
    env.import("cancel.jsonl", &[cancelled("cita-w1")]);
    assert!(
        wait_until(Duration::from_secs(20), || state(&env, &booking)
            == IntentionState::Review),
        "the refused repeat did not reach review: {:?}",
        state(&env, &booking)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(11),
        "too slow: review came {:?} after the send, so the engine's delayed webhooks may have raced it",
        t0.elapsed()
    );
    assert_eq!(
        row(&env, &booking).state_reason.as_deref(),
        Some("changed_while_uncertain")
    );
    // Answers flow again (the cancellation notice can settle); the booking
    // notice's delayed webhooks are still on their way.
    sim.set_faults(FaultSpec::none());
    assert!(
        wait_until(Duration::from_secs(40), || state(&env, &booking)
            == IntentionState::Read),
        "the engine's webhooks did not settle the review: {:?}",
        state(&env, &booking)
    );
    serve.terminate();

    let r = row(&env, &booking);
    assert_eq!(r.provider_command_id.as_deref(), Some(received.command_id.as_str()));
    assert!(r.provider_message_id.is_some());
    let h = env.history(r.id);
    let review_at = h
        .iter()
        .position(|x| x.to_state == "review" && x.applied)
        .unwrap_or_else(|| panic!("no review in {h:#?}"));
    assert_eq!(h[review_at].evidence.as_deref(), Some("validity_before_repeat"));
    let settled = h[review_at + 1..]
        .iter()
        .find(|x| x.applied)
        .unwrap_or_else(|| panic!("nothing after the review: {h:#?}"));
    assert_eq!(settled.from_state.as_deref(), Some("review"));
    assert_eq!(settled.cause, "webhook", "{settled:?}");
    // One message, from the request the engine got before the change.
    assert_eq!(sent_counts(log.path()).get(&booking), Some(&1));
    assert_no_duplicates(log.path());
    rt.block_on(sim.shutdown());
}

/// "Right before each send" is literal: a claimed message held between its
/// claim and its request (here by a failpoint, as a busy runtime or slow
/// store could) while the appointment is cancelled is abandoned by the
/// pre-send check; nothing reaches the engine, the attempt is closed as
/// `not_sent`, and validity closes the intention with the real reason.
fn a_claimed_message_held_before_sending_is_abandoned_when_its_appointment_is_cancelled(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 93);
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()).with_lease(60));
    let booking = format!("cita-h1:{BOOKING}");
    let cancellation = format!("cita-h1:{CANCELLATION}");
    env.import("agenda.jsonl", &[scheduled("cita-h1", 3)]);

    let child = env
        .command_armed("before_send:1:sleep=4000", &["dispatch", "--until-idle"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut d = Proc(Some(child));
    assert!(
        wait_until(Duration::from_secs(20), || state(&env, &booking)
            == IntentionState::Dispatching),
        "{:?}",
        env.state_counts()
    );
    env.import("cancel.jsonl", &[cancelled("cita-h1")]);
    assert_eq!(
        state(&env, &booking),
        IntentionState::Dispatching,
        "the cancellation must land while the claimed notice is held"
    );
    let out = d.0.take().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let r = row(&env, &booking);
    assert_eq!(r.state, IntentionState::Cancelled);
    assert_eq!(r.state_reason.as_deref(), Some("commitment_cancelled"));
    let attempts = env.store().read(|tx| tx.attempts(r.id)).unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:#?}");
    assert_eq!(attempts[0].outcome.as_str(), "not_sent");
    let detail = attempts[0].error_detail.as_deref().unwrap();
    assert!(detail.contains("moved from v1 to v2"), "{detail}");
    let h = env.history(r.id);
    let signals: Vec<&str> = h.iter().map(|x| x.signal.as_str()).collect();
    assert_eq!(signals, ["reserved", "claim", "not_sent", "cancel"], "{h:#?}");
    assert_eq!(h[3].evidence.as_deref(), Some("validity_before_send"));

    // Ground truth: the engine never saw the booking notice; the
    // cancellation notice went out once.
    assert!(sim.command_by_key(INSTANCE, &booking).is_none());
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path())
        .contains(&cancellation)));
    std::thread::sleep(Duration::from_millis(200));
    let sent = sent_counts(log.path());
    assert!(!sent.contains_key(&booking), "{sent:?}");
    assert_eq!(sent.get(&cancellation), Some(&1), "{sent:?}");
    rt.block_on(sim.shutdown());
}

on_both!(
    a_reset_booking_notice_is_not_sent_by_the_reconciler_once_the_appointment_is_cancelled,
    a_refused_repeat_in_review_is_settled_by_the_engines_later_webhook,
    a_claimed_message_held_before_sending_is_abandoned_when_its_appointment_is_cancelled,
);
