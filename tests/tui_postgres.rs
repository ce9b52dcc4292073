//! The console on a PostgreSQL ledger:
//! - end to end in a real terminal, a `--read-only` console beside two
//!   `serve` processes on the same ledger shows both dispatchers (the
//!   header names one and counts the other, `:despachadores` lists each
//!   with host, pid and state), and refreshes from the ledger's change
//!   notices: with an hour-long tick, an import by another process appears
//!   without a key press (also after the server dropped the listener's
//!   connection), and a killed dispatcher leaves the header;
//! - a read-only console's connection is read-only at the server: reads
//!   answer, and an action that got past the keys is refused by
//!   PostgreSQL, in the console's words, with nothing written.

mod dispatch_support;
mod tui_support;

use std::time::Duration;

use chrono::Utc;
use dispatch_support::*;
use tui_support::pty::Console;
use unavez::config::{Config, Role};
use unavez::domain::state::IntentionState;
use unavez::templates::Templates;
use unavez::tui::failure::FailureKind;
use unavez::tui::worker::{OpError, PendingOp, Request, Response, WorkerCtx, handle};
use unavez_ledger::location::Location;
use unavez_ledger::pg::PgUrl;
use unavez_testkit::PgSchema;

/// Booked for tomorrow: inside Próximas citas' window, its booking notice
/// due now.
fn tomorrow(reference: &str, n: usize) -> String {
    scheduled_at(reference, n, Utc::now() + chrono::Duration::days(1), 1)
}

fn live_rows(env: &Env) -> usize {
    env.store()
        .read(|tx| tx.heartbeats(Utc::now() - chrono::Duration::hours(1)))
        .unwrap()
        .len()
}

/// Ends every backend listening on `schema`'s channel; returns how many.
fn terminate_listeners(schema: &PgSchema) -> usize {
    let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| unavez_testkit::DEFAULT_PG.to_string());
    let mut c = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    let rows = c
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1",
            &[&format!("LISTEN \"unavez_{}\"", schema.name)],
        )
        .unwrap();
    rows.len()
}

#[test]
fn a_read_only_console_on_postgresql_shows_every_dispatcher_and_refreshes_on_the_ledgers_notices() {
    let rt = runtime();
    let log = tempfile::NamedTempFile::new().unwrap();
    let sim = start_sim(&rt, log.path(), "", 31);
    let schema = PgSchema::new();
    let env = Env::postgres(&Cfg::motor(&sim.base_url()).with_lease(30), &schema.url);
    let text = std::fs::read_to_string(&env.config)
        .unwrap()
        .replace("[dispatcher]\n", "[dispatcher]\nheartbeat_ms = 500\n");
    std::fs::write(&env.config, text).unwrap();
    let events: Vec<String> = (0..4).map(|n| tomorrow(&format!("cita-pgt{n}"), n)).collect();
    env.import("agenda.jsonl", &events);

    // Two dispatchers on the one ledger, as two hosts would run them.
    let mut first = env.spawn(&["serve", "--no-server"]);
    let second = env.spawn(&["serve", "--no-server"]);
    assert!(wait_until(Duration::from_secs(20), || sent_keys(log.path()).len() >= 4));
    let host = unavez::dispatch::heartbeat::host_name();

    // An hour between ticks: whatever the screen shows after its first
    // read came from the ledger's notices.
    let config = env.config.to_str().unwrap().to_string();
    let args = [
        "--config",
        &config,
        "tui",
        "--read-only",
        "--operator",
        "tecnico",
        "--refresh",
        "3600",
    ];
    let mut console = Console::spawn_with(&args, env.dir.path(), &[(MOTOR_KEY_ENV, "clave-de-prueba")]);
    console.wait_for("solo lectura");
    console.wait_for(&format!("● despachador: en marcha · {host} "));
    console.wait_for(" (+1)");
    console.keys(":despachadores\r");
    console.wait_for("Despachadores en marcha");
    for p in [&first, &second] {
        console.wait_for(&format!("en marcha · {host} {} · desde", p.pid()));
    }
    console.keys(" ");
    console.wait_gone("Despachadores en marcha");

    // Another process imports: the new appointment appears, no key pressed.
    console.keys("2");
    console.wait_for("cita-pgt3");
    env.import("nueva.jsonl", &[tomorrow("cita-pgt9", 9)]);
    console.wait_for("cita-pgt9");

    // The server drops the listener's connection (a restart, a failover):
    // the console listens again and keeps up.
    let dropped = terminate_listeners(&schema);
    assert!(dropped >= 1, "no listener on the ledger's channel");
    env.import("otra.jsonl", &[tomorrow("cita-pgt8", 8)]);
    console.wait_for("cita-pgt8");

    // A dispatcher killed without a goodbye leaves the header once its
    // beats are missed (the survivor's beats keep the console reading).
    first.kill();
    console.wait_gone(" (+1)");
    console.wait_for(&format!("● despachador: en marcha · {host} {}", second.pid()));
    console.quit();

    assert!(wait_until(Duration::from_secs(20), || sent_keys(log.path()).len() >= 6));
    std::thread::sleep(Duration::from_millis(300));
    assert_no_duplicates(log.path());
    assert_eq!(sent_keys(log.path()).len(), 6);
    assert_eq!(live_rows(&env), 2, "the read-only console ran a dispatcher of its own");
}

#[test]
fn a_read_only_connection_on_postgresql_reads_and_the_server_refuses_its_writes() {
    let schema = PgSchema::new();
    let env = Env::postgres(&Cfg::motor("http://127.0.0.1:9"), &schema.url);
    env.import("agenda.jsonl", &[tomorrow("cita-ro0", 0)]);
    let key = "cita-ro0:aviso-reserva:v1";
    let id = env.store().read(|tx| tx.find_intention(key)).unwrap().id;

    let url = PgUrl::parse(&schema.url).unwrap().read_only();
    let mut store = unavez::store::Store::attach_location(&Location::Postgres(Box::new(url))).unwrap();
    let ctx = WorkerCtx {
        config: Config::default(),
        templates: Templates::embedded(),
        reprocess: None,
        control: None,
    };
    let now = Utc::now();
    match handle(&mut store, &ctx, Request::Status { now }) {
        Response::Status { queue, .. } => assert_eq!(queue, Some(1)),
        r => panic!("{r:?}"),
    }
    match handle(&mut store, &ctx, Request::Detail { id_or_key: key.into() }) {
        Response::Detail(Ok(d)) => assert_eq!(d.intention.id, id),
        r => panic!("{r:?}"),
    }

    // An action the keys would have refused, sent anyway: PostgreSQL says
    // no, and the console says it as a permission problem.
    let op = Request::Op {
        op: PendingOp::Cancel { intention_id: id },
        operator: "supervisora".into(),
        role: Role::Supervisor,
        reason: "probando".into(),
        seen: None,
        now,
    };
    match handle(&mut store, &ctx, op) {
        Response::Op(Err(OpError::Other(f))) => {
            assert_eq!(f.kind, FailureKind::ReadOnly, "{f:?}");
            assert!(f.detail.contains("read-only transaction"), "{}", f.detail);
        }
        r => panic!("a write went through a read-only connection: {r:?}"),
    }
    let e = store.write(|tx| tx.set_counter("probe", 1)).unwrap_err();
    assert!(e.to_string().contains("25006"), "{e}");

    let mut writer = env.store();
    assert_eq!(
        writer.read(|tx| tx.intention(id)).unwrap().state,
        IntentionState::Planned
    );
    assert!(writer.read(|tx| tx.operator_actions(10)).unwrap().is_empty());
}

#[test]
fn a_database_without_the_ledger_is_refused_by_the_console_and_left_as_it_was() {
    let schema = PgSchema::new();
    for extra in [&[][..], &["--read-only"][..]] {
        let out = std::process::Command::new(BIN)
            .args(["--db", &schema.url, "tui", "--operator", "recepcion"])
            .args(extra)
            .env_remove("UNAVEZ_DB")
            .env_remove("UNAVEZ_CONFIG")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no existe el registro postgres://") && err.contains("créelo con `unavez init`"),
            "{extra:?}: {err}"
        );
    }
    let base = std::env::var("UNAVEZ_TEST_PG").unwrap_or_else(|_| unavez_testkit::DEFAULT_PG.to_string());
    let mut c = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema.name],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "the console created tables");
}
