//! Issue 3, test 4: a dispatcher process SIGKILLed at random moments 20
//! times during 2,000 intentions, restarted each time.

mod dispatch_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use dispatch_support::*;
use unavez::domain::state::IntentionState;
use unavez_testkit::{Backend, on_both};

/// A tiny deterministic generator: the kill moments are random but
/// reproducible.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        lo + (self.0 >> 33) % (hi - lo + 1)
    }
}

fn a_dispatcher_killed_20_times_loses_nothing_and_sends_nothing_twice(backend: Backend) {
    let started = Instant::now();
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "latency_ms=5..40,timeout_after=0.05,hold_ms=1000", 4);
    let mut cfg = Cfg::motor(&sim.base_url());
    cfg.lease_seconds = 2;
    cfg.batch_size = 16;
    cfg.concurrency = 8;
    let env = Env::with(backend, &cfg);
    let total = 2000;
    let events: Vec<String> = (0..total).map(|n| scheduled(&format!("cita-k{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    // 150 appointments are cancelled while the dispatcher crashes around.
    let cancels: Vec<String> = (total - 150..total).map(|n| cancelled(&format!("cita-k{n}"))).collect();
    let cancel_file = env.write_events("cancelaciones.jsonl", &cancels);

    let mut rng = Lcg(0x5eed);
    for round in 0..20 {
        let mut p = env.spawn(&["serve"]);
        std::thread::sleep(Duration::from_millis(rng.next(150, 700)));
        p.kill();
        if round == 5 {
            env.ok(&["import", cancel_file.to_str().unwrap()]);
        }
    }
    let killed_at = env.state_counts();
    // The last restart runs to completion.
    let mut p = env.spawn(&["serve"]);
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled after the crashes: {:?}",
        env.state_counts()
    );
    p.terminate();

    assert!(wait_until(Duration::from_secs(10), || {
        let sent = sent_counts(log.path());
        env.intentions()
            .iter()
            .filter(|i| i.state.has_channel_evidence())
            .all(|i| sent.contains_key(&i.key))
    }));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    let sent = sent_counts(log.path());
    let rows = env.intentions();
    let mut lease_recoveries = 0;
    let mut cancelled_booking = 0;
    let keys: HashSet<&str> = rows.iter().map(|i| i.key.as_str()).collect();
    for i in &rows {
        let h = env.history(i.id);
        match i.state {
            s if s.has_channel_evidence() => {
                assert_eq!(
                    sent.get(&i.key),
                    Some(&1),
                    "{} is {s} but went out {:?} times",
                    i.key,
                    sent.get(&i.key)
                );
            }
            IntentionState::Cancelled => {
                // No cancellation lost: a cancelled intention never went out.
                assert!(!sent.contains_key(&i.key), "{} cancelled but sent", i.key);
                assert!(i.state_reason.is_some(), "{} cancelled without a reason", i.key);
                cancelled_booking += 1;
            }
            other => panic!("{} ended {other} ({:?}): {h:?}", i.key, i.state_reason),
        }
        if h.iter().any(|r| r.signal == "lease_expired" && r.applied) {
            lease_recoveries += 1;
            // Resolved from evidence, by the reconciler, never re-planned.
            assert!(
                !h.iter()
                    .any(|r| r.signal == "release" && r.from_state.as_deref() == Some("uncertain"))
            );
        }
    }
    // Every cancelled appointment: its booking notice was either stopped
    // (cancelled) or had already gone out, and its cancellation notice
    // exists.
    for n in total - 150..total {
        let r = format!("cita-k{n}");
        assert!(keys.contains(format!("{r}:aviso-cancelacion:v2").as_str()), "{r}");
    }
    assert!(
        sent.keys().all(|k| keys.contains(k.as_str())),
        "a message went out for an unknown key"
    );
    assert!(
        lease_recoveries > 0,
        "no kill landed mid-attempt (states when killing stopped: {killed_at:?})"
    );
    eprintln!(
        "crash test: {} intentions, {} lease recoveries, {} cancelled, {:?} elapsed",
        rows.len(),
        lease_recoveries,
        cancelled_booking,
        started.elapsed()
    );
    rt.block_on(sim.shutdown());
}

on_both!(a_dispatcher_killed_20_times_loses_nothing_and_sends_nothing_twice,);
