//! Issue 25 §1 end to end, in a real pseudo-terminal against the built
//! binary, on a SQLite ledger and on the same clinic copied into
//! PostgreSQL: the desk types the caller's number (its last digits, what
//! the search takes today), the search stays when switching to Próximas
//! citas and back, and `enter` on the filtered row opens the patient card,
//! whose `enter` opens the message's Detalle.

mod tui_support;

use tui_support::pty::Console;
use unavez::store::{AttentionQuery, Store};
use unavez_ledger::copy::copy_sqlite_to_pg;
use unavez_ledger::pg::PgUrl;
use unavez_testkit::{Backend, PgSchema, on_both};

fn the_desk_finds_the_caller_keeps_the_search_across_screens_and_opens_the_card(backend: Backend) {
    let now = chrono::Utc::now();
    let fx = tui_support::clinic_at(40, now);
    let db = fx.db.clone();
    let dir = fx.dir.path().to_path_buf();
    drop(fx.store);
    let mut store = Store::open(&db).unwrap();
    let first = store.read(|tx| tx.attention(&AttentionQuery::new(now))).unwrap().rows[0].clone();
    let phone = first.phone.clone().expect("the demo clinic has phones");
    let tail = phone[phone.len() - 4..].to_string();
    let patients = store.read(|tx| tx.patients(&tail, 10)).unwrap();
    let name = patients
        .iter()
        .find(|p| p.phone == phone)
        .and_then(|p| p.name.clone())
        .expect("the caller has a name");

    let schema = (backend == Backend::Postgres).then(PgSchema::new);
    let ledger = match &schema {
        Some(schema) => {
            let url = PgUrl::parse(&schema.url).unwrap_or_else(|e| panic!("{e}"));
            copy_sqlite_to_pg(&db, &url, &mut |_, _, _| {}).unwrap_or_else(|e| panic!("{e}"));
            std::path::PathBuf::from(&schema.url)
        }
        None => db.clone(),
    };
    let mut console = Console::start(&ledger, &dir, "recepcion");
    console.wait_for("cita-10");
    console.keys(&format!("/{tail}\r"));
    let tag = format!("[filtro: {tail}]");
    console.wait_for(&tag);
    // Screen 2 keeps the search: its title and the tag both show.
    console.keys("2");
    console.wait_for(&format!("│ Próximas citas  {tag}"));
    console.keys("1");
    console.wait_for(&format!("│ Atención  {tag}"));
    // Enter on the filtered row: the caller's card, not a message's.
    console.keys("\r");
    console.wait_for(&format!("Atención › Paciente {name}"));
    console.wait_for("Puede:");
    console.wait_for("enter: detalle del aviso");
    let shown = console.text();
    assert!(!shown.contains(&phone), "the phone is masked:\n{shown}");
    assert!(
        shown.contains(&phone[phone.len() - 3..]),
        "its last digits show:\n{shown}"
    );
    // Enter on the card opens the selected message's Detalle.
    console.keys("\r");
    console.wait_for(&format!("Paciente {name} › Detalle"));
    // Esc back to the card, esc back to the list, esc clears the search.
    console.keys("\x1b");
    console.wait_for("Puede:");
    console.keys("\x1b");
    console.wait_for(&format!("│ Atención  {tag}"));
    console.keys("\x1b");
    console.wait_gone(&tag);
    console.quit();
}

on_both!(the_desk_finds_the_caller_keeps_the_search_across_screens_and_opens_the_card);
