//! End to end in a real pseudo-terminal against the built binary: a
//! supervisor cancels an intention and authorizes a resend, a front-desk
//! operator is refused the resend, and the ledger shows exactly that.

mod tui_support;

use std::path::Path;
use std::time::{Duration, Instant};

use tui_support::pty::{Console, TIMEOUT};
use unavez::domain::state::IntentionState;
use unavez::store::{IntentFilter, Store};

fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    while start.elapsed() < TIMEOUT {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

fn ids_in(db: &Path, state: IntentionState) -> Vec<(i64, String)> {
    let mut store = Store::open(db).unwrap();
    store
        .read(|tx| {
            tx.list_intentions(&IntentFilter {
                states: vec![state],
                limit: 10,
                ..Default::default()
            })
        })
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.key))
        .collect()
}

#[test]
fn cancel_and_resend_from_the_console_with_reason_and_responsible() {
    // Around the wall clock: the console process judges the resend on it,
    // and on the fixed fixture day no resend was authorized from the
    // evening of that day on.
    let fx = tui_support::clinic_at(40, chrono::Utc::now());
    let db = fx.db.clone();
    let dir = fx.dir.path().to_path_buf();
    drop(fx.store);
    let (review_id, review_key) = ids_in(&db, IntentionState::Review)[0].clone();
    let failed = ids_in(&db, IntentionState::Failed);
    let (failed_id, failed_key) = failed[0].clone();
    let (other_failed_id, other_failed_key) = failed[1].clone();

    // --- a supervisor cancels one intention and authorizes a resend ---
    let mut console = Console::start(&db, &dir, "supervisora");
    console.wait_for("cita-10");
    // Detalle speaks plainly; the key is in its technical view (`e`).
    console.keys(&format!(":detalle {review_id}\r"));
    console.keys("e");
    console.wait_for(&review_key);
    console.keys("e");
    console.wait_for("espera revisión");
    console.keys("c");
    console.wait_for("Motivo:");
    console.keys("paciente pidió anular el aviso\r");
    console.wait_for("s confirmar");
    console.keys("s");
    let mut store = Store::open(&db).unwrap();
    poll("the cancellation", || {
        (store.read(|tx| tx.intention(review_id)).unwrap().state == IntentionState::Cancelled).then_some(())
    });
    console.wait_for("Hecho");

    console.keys(&format!(":detalle {failed_id}\r"));
    console.keys("e");
    console.wait_for(&failed_key);
    console.keys("e");
    console.wait_for("No le llegó");
    console.keys("a");
    console.wait_for("Motivo:");
    console.keys("la paciente confirmó su número por teléfono\r");
    console.wait_for("s confirmar");
    console.keys("s");
    let resend_key = format!("{failed_key}:reenvio:1");
    let resend = poll("the resend", || store.read(|tx| tx.find_intention(&resend_key)).ok());
    assert_eq!(resend.related_id, Some(failed_id));
    assert_eq!(resend.authorized_by.as_deref(), Some("supervisora"));
    let output = console.quit();
    // The terminal was given back: the alternate screen was left.
    assert!(
        String::from_utf8_lossy(&output).contains("\x1b[?1049l"),
        "alternate screen not left"
    );

    let actions = store.read(|tx| tx.operator_actions(10)).unwrap();
    let cancel = actions.iter().find(|a| a.action == "cancel").expect("cancel recorded");
    assert_eq!(
        (
            cancel.operator.as_str(),
            cancel.role.as_str(),
            cancel.reason.as_str(),
            cancel.result.as_str()
        ),
        ("supervisora", "supervisor", "paciente pidió anular el aviso", "done")
    );
    assert_eq!(cancel.intention_id, Some(review_id));
    let auth = actions
        .iter()
        .find(|a| a.action == "authorize_resend")
        .expect("resend recorded");
    assert_eq!(
        (auth.operator.as_str(), auth.reason.as_str(), auth.result.as_str()),
        ("supervisora", "la paciente confirmó su número por teléfono", "done")
    );
    assert_eq!(auth.intention_id, Some(failed_id));

    // --- a front-desk operator may not resend: `a` asks a supervisor ---
    // (issue 25 §3: "pedir reenvío", reason required, nothing is sent)
    let mut console = Console::start(&db, &dir, "recepcion");
    console.wait_for("cita-10");
    console.keys(&format!(":detalle {other_failed_id}\r"));
    console.keys("e");
    console.wait_for(&other_failed_key);
    console.keys("e");
    console.wait_for("No le llegó");
    console.keys("a");
    console.wait_for("pedir reenvío");
    console.wait_for("Motivo:");
    console.keys("la paciente no recibió la reserva\r");
    console.wait_for("s confirmar");
    console.keys("s");
    poll("the request", || {
        let actions = store.read(|tx| tx.operator_actions(10)).unwrap();
        actions.iter().any(|a| a.action == "request_resend").then_some(())
    });
    console.quit();
    assert_eq!(store.read(|tx| tx.resend_count(other_failed_id)).unwrap(), 0);
    let actions = store.read(|tx| tx.operator_actions(10)).unwrap();
    assert_eq!(actions.len(), 3, "{actions:?}");
    let request = &actions[0];
    assert_eq!(
        (
            request.action.as_str(),
            request.operator.as_str(),
            request.role.as_str(),
            request.result.as_str()
        ),
        ("request_resend", "recepcion", "front_desk", "done")
    );
    assert_eq!(request.intention_id, Some(other_failed_id));
}

#[test]
fn an_unknown_operator_is_refused_before_the_screen_changes() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_unavez"))
        .args([
            "--db",
            dir.path().join("x.db").to_str().unwrap(),
            "tui",
            "--operator",
            "nadie",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no existe el operador «nadie»"), "{err}");
}

#[test]
fn the_demo_opens_the_console_as_a_supervisor_with_the_dispatcher_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut console = Console::spawn(&["demo", "--appointments", "60"], dir.path());
    console.wait_for("supervisora (supervisión)");
    console.wait_for("despachador: en marcha");
    // Próximas citas always lists the booked appointments (Atención may be
    // empty at a given moment: the reconciler settles what it can).
    console.keys("2");
    console.wait_for("cita-10");
    console.keys("3");
    console.wait_for("Planificadas");
    // The supervisor pauses sending (reason, confirmation) and resumes it.
    console.keys("p");
    console.wait_for("pausar envíos");
    console.keys("el motor va lento\r");
    console.wait_for("Pausar los envíos");
    console.keys("s");
    console.wait_for("despachador: en pausa");
    console.keys("p");
    console.wait_for("reanudar envíos");
    console.keys("ya responde\r");
    console.wait_for("Reanudar los envíos");
    console.keys("s");
    console.wait_for("despachador: en marcha");
    let output = console.quit();
    let text = String::from_utf8_lossy(&output);
    assert!(text.contains("STATE"), "no summary after the console closed");
    // No false alarms (issue 25 §5): the demo is the only process, and a
    // single-user installation where identity does not matter.
    assert!(
        !text.contains("otro proceso"),
        "the demo's own lock read as another process"
    );
    assert!(
        !text.contains("identidad no verificada"),
        "identity flagged in a single-user demo"
    );
    let db = dir.path().join("unavez-demo.db");
    assert!(db.exists());
    let log = Store::open(&db).unwrap().read(|tx| tx.operator_actions(10)).unwrap();
    let got: Vec<(&str, &str, &str)> = log
        .iter()
        .map(|a| (a.action.as_str(), a.operator.as_str(), a.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("resume_dispatch", "supervisora", "ya responde"),
            ("pause_dispatch", "supervisora", "el motor va lento"),
        ]
    );
}

#[test]
fn the_headless_demo_prints_a_summary_by_state() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_unavez"))
        .args(["demo", "--headless", "--seconds", "3", "--appointments", "60"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("STATE") && stdout.contains("planned") && stdout.contains("uncertain"),
        "{stdout}"
    );
    let total: i64 = stdout
        .lines()
        .skip_while(|l| !l.starts_with("STATE"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<i64>().ok())
        .sum();
    assert!(total > 100, "{stdout}");
    // The dispatcher really ran against the in-process engine.
    let claimed: i64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("dispatcher: claimed "))
        .and_then(|l| l.split(',').next()?.trim().parse().ok())
        .unwrap_or(0);
    assert!(claimed > 0, "{stdout}");
}

/// The work queue in a real terminal: a front-desk operator finds a patient
/// by name as they type, marks the case handled with a reason, and finds it
/// again among the day's handled cases; the ledger keeps who and when.
#[test]
fn the_front_desk_finds_a_patient_and_works_the_case_off_the_queue() {
    use unavez::store::{AttentionQuery, RowKind};
    let fx = tui_support::clinic(40);
    let db = fx.db.clone();
    let dir = fx.dir.path().to_path_buf();
    drop(fx.store);
    let mut store = Store::open(&db).unwrap();
    let mut q = AttentionQuery::new(chrono::Utc::now());
    q.limit = 200;
    let rows = store.read(|tx| tx.attention(&q)).unwrap().rows;
    let row = rows
        .iter()
        .find(|r| r.kind == RowKind::Intention && r.name.as_deref().is_some_and(|n| n.len() <= 16))
        .expect("a named case")
        .clone();
    let name = row.name.clone().unwrap();

    let mut console = Console::start(&db, &dir, "recepcion");
    console.wait_for("cita-10");
    console.keys("/");
    console.keys(&name);
    console.wait_for(&format!("[filtro: {name}]"));
    console.wait_for(&row.commitment_ref);
    console.keys("\r");
    console.keys("x");
    console.wait_for("Motivo:");
    console.keys("la paciente ya confirmó por teléfono\r");
    console.wait_for("s confirmar");
    console.keys("s");
    let mark = poll("the handled mark", || {
        store.read(|tx| tx.handled_mark(row.kind, row.subject_id)).unwrap()
    });
    assert_eq!(mark.operator, "recepcion");
    console.wait_for("marcado como atendido");
    // Not among the open cases any more; among today's handled ones.
    console.wait_for("0 resultados — esc para limpiar");
    console.keys("h");
    console.wait_for("Atendidos hoy");
    console.wait_for("✓ hoy");
    let text = console.text();
    let line = text.lines().find(|l| l.contains("✓ hoy")).unwrap();
    assert!(
        line.contains(&row.commitment_ref) && line.contains("recepcion"),
        "{line}"
    );
    console.keys("\x1b");
    console.quit();
    let action = store.read(|tx| tx.operator_actions(1)).unwrap().remove(0);
    assert_eq!(
        (action.action.as_str(), action.reason.as_str()),
        ("resolve", "la paciente ya confirmó por teléfono")
    );
}
