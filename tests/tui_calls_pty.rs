//! The call list end to end in a real pseudo-terminal against the built
//! binary (issue 25, section 4): `l` shows "Llamar", `t` the chooser, `1`
//! a countdown that `u` withdraws without a trace; an outcome left alone
//! is recorded once the grace is over.

mod tui_support;

use std::time::{Duration, Instant};

use tui_support::pty::{Console, TIMEOUT};
use unavez::store::Store;

#[test]
fn l_t_1_u_from_the_console() {
    let fx = tui_support::clinic_at(40, chrono::Utc::now());
    let db = fx.db.clone();
    let dir = fx.dir.path().to_path_buf();
    drop(fx.store);
    let mut store = Store::open(&db).unwrap();

    let mut console = Console::start(&db, &dir, "recepcion");
    console.wait_for("cita-10");
    console.keys("l");
    console.wait_for("Atención · Llamar");
    console.keys("t");
    console.wait_for("Resultado de la llamada");
    console.keys("1");
    console.wait_for("confirmó · deshacer (u)");
    console.keys("u");
    console.wait_for("Deshecho: confirmó");

    // Left alone, "no contesta" is recorded after its grace.
    console.keys("t");
    console.wait_for("Resultado de la llamada");
    console.keys("2");
    console.wait_for("no contesta · deshacer (u)");
    let start = Instant::now();
    let actions = loop {
        let a = store.read(|tx| tx.operator_actions(10)).unwrap();
        if !a.is_empty() || start.elapsed() > TIMEOUT {
            break a;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        start.elapsed() >= Duration::from_secs(5),
        "recorded before its grace: {:?}",
        start.elapsed()
    );
    console.quit();
    assert_eq!(actions.len(), 1, "the withdrawn outcome left no trace: {actions:?}");
    let a = &actions[0];
    assert_eq!(
        (
            a.operator.as_str(),
            a.action.as_str(),
            a.reason.as_str(),
            a.result.as_str()
        ),
        ("recepcion", "call_outcome", "no_answer", "done")
    );
}
