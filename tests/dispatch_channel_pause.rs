//! Issue 24, section 2: a rejected credential must not burn the day's
//! messages. A real `unavez serve` process starts with a key the engine
//! simulator does not accept: nothing goes out (the simulator's log is the
//! judge), every message stays planned, and the dispatcher says it paused
//! its channel (its heartbeat row, typed; `/metrics`). Once the engine
//! takes the key (rotated at the engine, as a provider would), the paused
//! dispatcher's probe notices and every message goes out exactly once, none
//! before. The same for the Cloud API's 401 / Graph 190, and for an engine
//! instance with no phone linked (resumed by linking it, no restart); the
//! engine client tells each fault (TLS included) and its probe sends
//! nothing. A one-shot `dispatch` stops and exits 1. And a message that
//! unavez marked `failed` on a 401 before it told the two apart goes back
//! to planned through one technician's reprocess, while a failed message
//! that may have reached the channel never does.

mod dispatch_support;

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;
use dispatch_support::*;
use unavez::domain::attempt::AttemptOutcome;
use unavez::domain::fault::ChannelFault;
use unavez::domain::heartbeat::Heartbeat;
use unavez::domain::state::IntentionState;
use unavez::sim::cloud_fake::{CloudFake, CloudFakeOptions};
use unavez_testkit::{Backend, on_both};

/// The key `dispatch_support` gives every `unavez` process.
const OUR_KEY: &str = "clave-de-prueba";

/// A config whose dispatcher probes a paused channel every 300 ms and
/// beats every 500 ms, its HTTP server on `port`.
fn env_probing(backend: Backend, cfg: Cfg, port: u16) -> Env {
    let cfg = Cfg {
        server_listen: format!("127.0.0.1:{port}"),
        ..cfg
    };
    let env = Env::with(backend, &cfg);
    let text = std::fs::read_to_string(&env.config).unwrap().replace(
        "[dispatcher]\n",
        "[dispatcher]\nchannel_probe_ms = 300\nheartbeat_ms = 500\n",
    );
    std::fs::write(&env.config, text).unwrap();
    env
}

fn beats(env: &Env) -> Vec<Heartbeat> {
    env.store()
        .read(|tx| tx.heartbeats(Utc::now() - chrono::Duration::hours(1)))
        .unwrap()
}

fn metrics(rt: &tokio::runtime::Runtime, port: u16) -> String {
    rt.block_on(async {
        reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
}

/// Every attempt so far, by outcome.
fn outcomes(env: &Env) -> HashMap<AttemptOutcome, usize> {
    let mut m = HashMap::new();
    for i in env.intentions() {
        for a in env.store().read(|tx| tx.attempts(i.id)).unwrap() {
            *m.entry(a.outcome).or_insert(0) += 1;
        }
    }
    m
}

/// While the channel refuses us: nothing out, all planned, the channel
/// paused in the heartbeat row and on `/metrics`, and the refused attempts
/// closed `not_sent` with the fault's code. Returns how many attempts the
/// refusal cost.
fn assert_paused_and_nothing_lost(
    env: &Env,
    rt: &tokio::runtime::Runtime,
    port: u16,
    sent: &dyn Fn() -> usize,
) -> usize {
    let paused = |b: &Heartbeat| {
        b.channel
            .as_ref()
            .is_some_and(|c| c.fault == ChannelFault::CredentialRejected)
    };
    assert!(
        wait_until(Duration::from_secs(30), || beats(env).iter().any(paused)),
        "no heartbeat row says the channel is paused: {:?}",
        beats(env)
    );
    // Several probes later, still nothing went out and nothing moved on.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(sent(), 0, "a message went out with a rejected key");
    let states = env.state_counts();
    assert_eq!(states.keys().collect::<Vec<_>>(), ["planned"], "{states:?}");
    let row = beats(env).into_iter().find(paused).unwrap();
    let err = row.last_error.clone().unwrap_or_default();
    assert!(err.contains("restart"), "the paused channel says what to do: {err}");
    let m = metrics(rt, port);
    for want in [
        "unavez_alert{kind=\"channel_paused\"} 1",
        "unavez_channel_paused{code=\"credential_rejected\"} 1",
    ] {
        assert!(m.lines().any(|l| l == want), "{want} in:\n{m}");
    }
    let by = outcomes(env);
    let unsent = by.get(&AttemptOutcome::NotSent).copied().unwrap_or(0);
    assert_eq!(by.len(), 1, "only not_sent attempts while refused: {by:?}");
    // Claims stop at the first refusal: at most what was in flight then.
    assert!((1..=16).contains(&unsent), "{unsent} attempts burnt");
    for i in env.intentions() {
        for a in env.store().read(|tx| tx.attempts(i.id)).unwrap() {
            assert_eq!(a.error_code.as_deref(), Some("credential_rejected"), "{a:?}");
        }
    }
    unsent
}

fn a_rejected_engine_key_pauses_the_channel_and_the_rotation_sends_everything_once(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // The engine knows another key than the one unavez was started with.
    let sim = rt
        .block_on(unavez::sim::spawn(unavez::sim::SimOptions {
            log: Some(log.path().to_path_buf()),
            api_key: Some("clave-rotada".into()),
            ..Default::default()
        }))
        .unwrap();
    let port = free_port();
    let env = env_probing(backend, Cfg::motor(&sim.base_url()), port);
    let events: Vec<String> = (0..40).map(|n| scheduled(&format!("cita-k{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let mut serve = env.spawn(&["serve"]);

    let burnt = assert_paused_and_nothing_lost(&env, &rt, port, &|| sent_keys(log.path()).len());
    let row = beats(&env).into_iter().find(|b| b.channel.is_some()).unwrap();
    assert_eq!(
        row.channel.unwrap().secret_env.as_deref(),
        Some(MOTOR_KEY_ENV),
        "the row names the variable the key came from"
    );
    assert!(row.last_error.unwrap_or_default().contains(MOTOR_KEY_ENV));

    // The engine's operator rotates: from now on our key is the good one.
    let rotated_at = Utc::now();
    sim.set_api_key(Some(OUR_KEY));
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "not settled after the rotation: {:?}",
        env.state_counts()
    );
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 40));
    std::thread::sleep(Duration::from_millis(300));
    let sent = sent_counts(log.path());
    let keys: Vec<String> = env.intentions().into_iter().map(|i| i.key).collect();
    assert_eq!(keys.len(), 40);
    for k in &keys {
        assert_eq!(sent.get(k), Some(&1), "{k} went out {:?} times", sent.get(k));
    }
    for line in sim.sent() {
        let t = chrono::DateTime::parse_from_rfc3339(&line.time).unwrap();
        assert!(t >= rotated_at, "{} went out before the rotation", line.key);
    }
    for i in env.intentions() {
        assert!(i.state.has_channel_evidence(), "{} is {}", i.key, i.state);
    }
    // The refused attempts stay on record as not sent, and the pause is over.
    assert_eq!(outcomes(&env).get(&AttemptOutcome::NotSent), Some(&burnt));
    assert!(wait_until(Duration::from_secs(10), || beats(&env)
        .iter()
        .all(|b| b.channel.is_none())));
    let m = metrics(&rt, port);
    assert!(m.lines().any(|l| l == "unavez_alert{kind=\"channel_paused\"} 0"), "{m}");
    serve.terminate();
    rt.block_on(sim.shutdown());
}

fn a_rejected_cloud_token_pauses_the_channel_and_a_new_token_sends_everything_once(backend: Backend) {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    // Meta answers 401 / Graph 190 to the token unavez holds.
    let fake = rt
        .block_on(CloudFake::spawn(CloudFakeOptions {
            log: Some(log.path().to_path_buf()),
            token: Some("token-caducado-reemplazado".into()),
            ..Default::default()
        }))
        .unwrap();
    let port = free_port();
    let env = env_probing(backend, Cfg::cloud(&fake.base_url()), port);
    let events: Vec<String> = (0..12).map(|n| scheduled(&format!("cita-c{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let mut serve = env.spawn(&["serve"]);

    assert_paused_and_nothing_lost(&env, &rt, port, &|| fake.sent().len());
    let row = beats(&env).into_iter().find(|b| b.channel.is_some()).unwrap();
    assert_eq!(row.channel.unwrap().secret_env.as_deref(), Some(CLOUD_TOKEN_ENV));

    fake.set_token(Some("token-de-prueba"));
    assert!(
        wait_until(Duration::from_secs(60), || env
            .intentions()
            .iter()
            .all(|i| i.state.has_channel_evidence())),
        "not sent after the new token: {:?}",
        env.state_counts()
    );
    serve.terminate();
    let sent = sent_counts(log.path());
    for i in env.intentions() {
        assert_eq!(sent.get(&i.key), Some(&1), "{}", i.key);
    }
    rt.block_on(fake.shutdown());
}

on_both!(
    a_rejected_engine_key_pauses_the_channel_and_the_rotation_sends_everything_once,
    a_rejected_cloud_token_pauses_the_channel_and_a_new_token_sends_everything_once,
);

#[test]
fn a_one_shot_dispatch_stops_at_a_refused_key_and_leaves_everything_planned() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = rt
        .block_on(unavez::sim::spawn(unavez::sim::SimOptions {
            log: Some(log.path().to_path_buf()),
            api_key: Some("clave-rotada".into()),
            ..Default::default()
        }))
        .unwrap();
    let env = Env::new(&Cfg::motor(&sim.base_url()));
    let events: Vec<String> = (0..20).map(|n| scheduled(&format!("cita-u{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let out = env.run(&["dispatch", "--until-idle"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "cron must see it");
    assert!(stderr.contains(MOTOR_KEY_ENV) && stderr.contains("restart"), "{stderr}");
    assert!(sent_keys(log.path()).is_empty());
    assert!(env.intentions().iter().all(|i| i.state == IntentionState::Planned));
    // Runs that find the key still refused cost one attempt each, never
    // the message.
    env.run(&["dispatch", "--until-idle"]);
    assert!(env.intentions().iter().all(|i| i.state == IntentionState::Planned));
    sim.set_api_key(Some(OUR_KEY));
    env.ok(&["dispatch", "--until-idle"]);
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 20));
    std::thread::sleep(Duration::from_millis(200));
    assert_no_duplicates(log.path());
    assert!(env.intentions().iter().all(|i| i.state.has_channel_evidence()));
    rt.block_on(sim.shutdown());
}

/// What unavez wrote before it told a channel's refusal from a message's
/// failure: claimed, one attempt, closed with what the channel said.
fn legacy_failure(env: &Env, key: &str, result: &unavez::domain::attempt::AttemptResult<'_>) {
    use unavez::dispatch::claim::{ClaimDecision, Claimant, claim_batch};
    use unavez::domain::history::Cause;
    use unavez::store::ClaimScope;
    let settings = unavez::dispatch::Settings::from_config(&unavez::config::Config::load(&env.config).unwrap());
    let i = env.by_key()[key].clone();
    env.store()
        .write(|tx| {
            let who = Claimant {
                owner: "old-dispatcher",
                channel: "motor",
                lease: chrono::Duration::seconds(30),
                rules: &settings.rules,
            };
            let now = Utc::now();
            let claimed = claim_batch(tx, &ClaimScope::Ids(vec![i.id]), who, 1, now)?;
            let Some(ClaimDecision::Claimed(c)) = claimed.into_iter().next() else {
                panic!("{key} was not claimed")
            };
            unavez::dispatch::finish::finish_attempt(
                tx,
                c.attempt_id,
                result,
                Cause::Dispatcher,
                &settings.retry,
                now,
            )?;
            Ok::<_, unavez::store::StoreError>(())
        })
        .unwrap();
    assert_eq!(env.by_key()[key].state, IntentionState::Failed, "{key}");
}

fn a_message_failed_on_a_401_goes_back_through_one_technician_reprocess_and_one_that_may_have_gone_out_never_does(
    backend: Backend,
) {
    use unavez::domain::attempt::AttemptResult;
    use unavez::domain::state::Signal;
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 24);
    let env = Env::with(backend, &Cfg::motor(&sim.base_url()).with_lease(30));
    let events: Vec<String> = (0..4).map(|n| scheduled(&format!("cita-f{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let key = |n: usize| format!("cita-f{n}:aviso-reserva:v1");
    // Two burnt by a rejected key, the way unavez used to record it.
    let refused = AttemptResult::Failed {
        code: "no_autorizado",
        detail: "HTTP 401 Unauthorized: no_autorizado: api key desconocida",
        http_status: Some(401),
    };
    legacy_failure(&env, &key(0), &refused);
    legacy_failure(&env, &key(1), &refused);
    // One the channel took and then failed, one it refused as a message.
    legacy_failure(
        &env,
        &key(2),
        &AttemptResult::Acknowledged {
            evidence: Some(Signal::Failed),
            command_id: Some("cmd_0000000000000001"),
            message_id: None,
            http_status: Some(202),
            detail: Some("comando_vencido"),
        },
    );
    legacy_failure(
        &env,
        &key(3),
        &AttemptResult::Failed {
            code: "destino_invalido",
            detail: "HTTP 422: destino_invalido",
            http_status: Some(422),
        },
    );
    let day = env.by_key()[&key(0)].day.to_string();
    let args = |dry: bool| {
        let mut a = vec![
            "reprocess",
            "--day",
            &day,
            "--state",
            "failed",
            "--operator",
            "tecnico",
            "--reason",
            "la clave del motor se rotó ayer",
            "--json",
        ];
        if dry {
            a.push("--dry-run");
        }
        a.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let run = |dry: bool| {
        let a = args(dry);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        serde_json::from_str::<serde_json::Value>(&env.ok(&a)).unwrap()
    };
    let action = |plan: &serde_json::Value, k: &str| {
        plan["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["key"] == k)
            .map(|i| i["action"].as_str().unwrap().to_string())
            .unwrap()
    };
    let plan = run(true);
    assert_eq!(action(&plan, &key(0)), "replan");
    assert_eq!(action(&plan, &key(1)), "replan");
    assert_eq!(action(&plan, &key(2)), "stay_for_person");
    assert_eq!(action(&plan, &key(3)), "stay_for_person");
    assert!(
        env.intentions().iter().all(|i| i.state == IntentionState::Failed),
        "the dry run wrote"
    );
    assert!(sent_keys(log.path()).is_empty());

    let done = run(false);
    assert_eq!(done["dispatch"]["store_errors"], 0, "{done}");
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 2));
    std::thread::sleep(Duration::from_millis(300));
    let sent = sent_counts(log.path());
    assert_eq!(sent.len(), 2, "{sent:?}");
    for n in [0, 1] {
        let i = env.by_key()[&key(n)].clone();
        assert_eq!(sent.get(&key(n)), Some(&1), "{}", key(n));
        assert!(i.state.has_channel_evidence(), "{} is {}", i.key, i.state);
        let h = env.history(i.id);
        let back = h
            .iter()
            .find(|r| r.signal == "replan")
            .expect("the exception is in history");
        assert_eq!(
            (back.from_state.as_deref(), back.to_state.as_str(), back.cause.as_str()),
            (Some("failed"), "planned", "operator")
        );
        assert!(
            back.note
                .as_deref()
                .unwrap_or("")
                .contains("la clave del motor se rotó ayer"),
            "{back:?}"
        );
    }
    for n in [2, 3] {
        assert_eq!(env.by_key()[&key(n)].state, IntentionState::Failed, "{}", key(n));
    }
    assert!(done["operator_action_id"].is_i64(), "{done}");
    // Nothing left to take back: the two now have evidence.
    let again = run(true);
    assert!(
        again["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["action"] != "replan"),
        "{again}"
    );
    rt.block_on(sim.shutdown());
}

on_both!(
    a_message_failed_on_a_401_goes_back_through_one_technician_reprocess_and_one_that_may_have_gone_out_never_does,
);

/// The engine contract's channel faults, as the simulator answers them over
/// real HTTP and the engine client classifies them: an unknown instance, an
/// unlinked one (a key already taken still comes back with its command), a
/// rejected key, a TLS handshake that fails; and the probe, which sends
/// nothing, reads each the same way.
#[test]
fn the_engine_client_tells_each_channel_fault_and_the_probe_sends_nothing() {
    use unavez::channel::config::MotorConfig;
    use unavez::channel::motor::MotorChannel;
    use unavez::channel::{Channel, ProbeOutcome, SendOutcome, SendRequest};
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = rt
        .block_on(unavez::sim::spawn(unavez::sim::SimOptions {
            log: Some(log.path().to_path_buf()),
            api_key: Some(OUR_KEY.into()),
            instances: Some(vec![INSTANCE.into()]),
            ..Default::default()
        }))
        .unwrap();
    let channel = |base: &str, instance: &str, key: &str| -> Box<dyn Channel> {
        let cfg = MotorConfig {
            base_url: base.into(),
            instance_id: instance.into(),
            ..MotorConfig::default()
        };
        Box::new(MotorChannel::with_api_key(&cfg, key).unwrap())
    };
    let req = |key: &str| SendRequest {
        key: key.into(),
        recipient: phone(1),
        body: "Hola".into(),
        template: String::new(),
        language: "es".into(),
        parameters: vec![],
        expires_at: None,
        correlation_id: format!("uv-{key}"),
        in_service_window: false,
    };
    let fault = |o: SendOutcome| match o {
        SendOutcome::ChannelDown { fault, .. } => fault,
        other => panic!("{other:?}"),
    };
    let probe_fault = |o: ProbeOutcome| match o {
        ProbeOutcome::Down { fault, .. } => fault,
        other => panic!("{other:?}"),
    };
    let base = sim.base_url();
    let good = channel(&base, INSTANCE, OUR_KEY);
    rt.block_on(async {
        assert_eq!(good.probe().await, ProbeOutcome::Ok);
        let first = good.send(&req("k-1")).await;
        assert!(matches!(first, SendOutcome::Accepted { .. }), "{first:?}");

        let other = channel(&base, "otra-instancia", OUR_KEY);
        assert_eq!(fault(other.send(&req("k-2")).await), ChannelFault::InstanceUnknown);
        assert_eq!(probe_fault(other.probe().await), ChannelFault::InstanceUnknown);

        sim.set_connected(INSTANCE, false);
        assert_eq!(fault(good.send(&req("k-3")).await), ChannelFault::InstanceDisconnected);
        assert_eq!(probe_fault(good.probe().await), ChannelFault::InstanceDisconnected);
        // The key is resolved first: a repeat of an accepted one is its command.
        assert!(matches!(good.send(&req("k-1")).await, SendOutcome::Accepted { .. }));
        sim.set_connected(INSTANCE, true);
        assert_eq!(good.probe().await, ProbeOutcome::Ok);

        let wrong = channel(&base, INSTANCE, "clave-vieja");
        assert_eq!(fault(wrong.send(&req("k-4")).await), ChannelFault::CredentialRejected);
        assert_eq!(probe_fault(wrong.probe().await), ChannelFault::CredentialRejected);
        sim.set_api_key(Some("clave-vieja"));
        assert_eq!(wrong.probe().await, ProbeOutcome::Ok);

        // An https URL to a server that does not speak TLS: the handshake
        // fails before anything is sent.
        let tls = channel(&base.replace("http://", "https://"), INSTANCE, "clave-vieja");
        assert_eq!(fault(tls.send(&req("k-5")).await), ChannelFault::Tls);
        assert_eq!(probe_fault(tls.probe().await), ChannelFault::Tls);
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        sent_keys(log.path()),
        ["k-1"],
        "only the one accepted send went out, once"
    );
    rt.block_on(sim.shutdown());
}

/// An engine instance with no phone linked pauses the channel the same
/// way; linking it again is picked up by the probe, with no restart.
#[test]
fn an_unlinked_instance_pauses_the_channel_until_it_is_linked_again() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = rt
        .block_on(unavez::sim::spawn(unavez::sim::SimOptions {
            log: Some(log.path().to_path_buf()),
            instances: Some(vec![INSTANCE.into()]),
            ..Default::default()
        }))
        .unwrap();
    sim.set_connected(INSTANCE, false);
    let port = free_port();
    let env = env_probing(Backend::Sqlite, Cfg::motor(&sim.base_url()), port);
    let events: Vec<String> = (0..10).map(|n| scheduled(&format!("cita-d{n}"), n)).collect();
    env.import("agenda.jsonl", &events);
    let mut serve = env.spawn(&["serve", "--no-server"]);
    let unlinked = |b: &Heartbeat| {
        b.channel
            .as_ref()
            .is_some_and(|c| c.fault == ChannelFault::InstanceDisconnected)
    };
    assert!(wait_until(Duration::from_secs(30), || beats(&env).iter().any(unlinked)));
    std::thread::sleep(Duration::from_millis(1000));
    assert!(sent_keys(log.path()).is_empty());
    assert!(env.intentions().iter().all(|i| i.state == IntentionState::Planned));
    sim.set_connected(INSTANCE, true);
    assert!(
        wait_until(Duration::from_secs(60), || env.settled()),
        "{:?}",
        env.state_counts()
    );
    serve.terminate();
    assert!(wait_until(Duration::from_secs(10), || sent_keys(log.path()).len() >= 10));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    assert!(env.intentions().iter().all(|i| i.state.has_channel_evidence()));
    rt.block_on(sim.shutdown());
}
