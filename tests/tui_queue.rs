//! The front desk's work queue (issue 10), through the console's update
//! function and the worker on a real ledger: handled cases leave Atención
//! and come back with news, the cursor follows its case, a form refuses a
//! case that changed while it was open, and a patient is found by name,
//! reference, key or the phone's last digits.

mod tui_support;

use unavez::config::Role;
use unavez::store::{AttentionQuery, AttentionView, RowKind};
use unavez::tui::app::{App, FlashKind};
use unavez::tui::keys::{Action, Mode};

use tui_support::{Fixture, clinic, now, render};

fn loaded(fx: &mut Fixture, role: Role, operator: &str) -> App {
    let mut app = fx.app(operator, role);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    app
}

fn keys_on_screen(app: &App) -> Vec<(RowKind, i64)> {
    app.attention.rows.iter().map(|r| (r.kind, r.subject_id)).collect()
}

fn open_cases(fx: &mut Fixture) -> Vec<(RowKind, i64)> {
    let mut q = AttentionQuery::new(now());
    q.limit = 500;
    fx.store
        .read(|tx| tx.attention(&q))
        .unwrap()
        .rows
        .iter()
        .map(|r| (r.kind, r.subject_id))
        .collect()
}

/// News from outside the console (another process's write): the
/// intention moves to `state`, `after_ms` after the fixed clock.
fn set_state(fx: &Fixture, id: i64, state: &str, after_ms: i64) {
    let at = unavez::store::ms(now()) + after_ms;
    unavez::store::open_connection(&fx.db)
        .unwrap()
        .execute_batch(&format!(
            "UPDATE intentions SET state = '{state}', state_changed_at = {at} WHERE id = {id}"
        ))
        .unwrap();
}

/// Form, reason, confirm: the console's two steps.
fn act_with_reason(fx: &mut Fixture, app: &mut App, a: Action, reason: &str) {
    fx.act(app, a);
    assert_eq!(app.mode, Mode::Form, "flash: {:?}", app.flash);
    fx.type_text(app, reason);
    fx.act(app, Action::Submit);
    assert_eq!(app.mode, Mode::Confirm, "flash: {:?}", app.flash);
    fx.act(app, Action::Confirm);
    // "Marcar atendido" waits out its grace period; sent now here
    // (tests/tui_calls.rs tests the grace).
    let reqs = app.commit_pending();
    fx.run(app, reqs);
}

#[test]
fn marking_a_case_handled_takes_it_off_the_queue_and_news_brings_it_back() {
    let mut fx = clinic(60);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    let before = app.attention.total;
    let first = app.attention.current().unwrap().clone();
    act_with_reason(
        &mut fx,
        &mut app,
        Action::Op(unavez::ops::OpKind::Resolve),
        "llamé, viene",
    );
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    assert_eq!(app.attention.total, before - 1);
    assert!(!keys_on_screen(&app).contains(&(first.kind, first.subject_id)));
    // Who and when are kept, and the day's handled view shows it.
    let mark = fx
        .store
        .read(|tx| tx.handled_mark(first.kind, first.subject_id))
        .unwrap()
        .unwrap();
    assert_eq!((mark.operator.as_str(), mark.at), ("recepcion", now()));
    fx.act(&mut app, Action::ToggleHandled);
    assert_eq!(keys_on_screen(&app), vec![(first.kind, first.subject_id)]);
    let screen = render(&app, 120, 40);
    assert!(screen.contains("Atendidos hoy"), "{screen}");
    assert!(screen.contains("✓ hoy 08:00 recepcion"), "{screen}");
    fx.act(&mut app, Action::ToggleHandled);
    // News: the situation changes after the mark (a later state change).
    if first.kind == RowKind::Intention {
        set_state(&fx, first.subject_id, "failed", 60_000);
        assert!(
            open_cases(&mut fx).contains(&(first.kind, first.subject_id)),
            "reopened"
        );
    }
}

#[test]
fn an_operator_action_marks_the_case_handled() {
    let mut fx = clinic(60);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    // The first case in review: cancelling its send is an action on it.
    let i = app
        .attention
        .rows
        .iter()
        .position(|r| r.state.as_str() == "review")
        .expect("a review case");
    app.attention.select(i);
    let row = app.attention.current().unwrap().clone();
    act_with_reason(
        &mut fx,
        &mut app,
        Action::Op(unavez::ops::OpKind::Cancel),
        "ya no viene",
    );
    let mark = fx
        .store
        .read(|tx| tx.handled_mark(RowKind::Intention, row.subject_id))
        .unwrap();
    assert_eq!(mark.map(|m| m.operator), Some("recepcion".to_string()));
    assert!(!open_cases(&mut fx).contains(&(row.kind, row.subject_id)));
    let mut q = AttentionQuery::new(now());
    q.view = AttentionView::HandledSince(now() - chrono::Duration::hours(1));
    let handled = fx.store.read(|tx| tx.attention(&q)).unwrap();
    assert_eq!(handled.rows.len(), 1);
    assert_eq!(handled.rows[0].state.as_str(), "cancelled");
}

#[test]
fn the_cursor_follows_its_case_when_rows_above_it_leave() {
    let mut fx = clinic(60);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    app.attention.select(3);
    let followed = app.attention.current().unwrap().subject_id;
    // Another desk handles the two rows above it.
    for r in app.attention.rows[..2].iter().cloned() {
        fx.store
            .write(|tx| {
                let id = tx.record_operator_action(
                    &unavez::store::OperatorAction {
                        operator: "otra",
                        role: "front_desk",
                        action: "resolve",
                        intention_id: r.intention_id,
                        commitment_id: r.commitment_id,
                        scope: None,
                        reason: "atendido en otra consola",
                        result: "done",
                        detail: None,
                    },
                    now(),
                )?;
                let situation = tx.case_info(r.kind, r.subject_id)?.and_then(|i| i.since);
                let mark = unavez::store::NewMark {
                    kind: r.kind,
                    subject_id: r.subject_id,
                    situation,
                    operator: "otra",
                    action_id: id,
                };
                tx.mark_handled(&mark, now())
            })
            .unwrap();
    }
    fx.act(&mut app, Action::Refresh);
    assert_eq!(app.attention.current().unwrap().subject_id, followed);
    assert_eq!(app.attention.selected, 1);
}

#[test]
fn a_form_refuses_a_case_that_changed_while_it_was_open() {
    let mut fx = clinic(60);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    let i = app
        .attention
        .rows
        .iter()
        .position(|r| r.state.as_str() == "review")
        .unwrap();
    app.attention.select(i);
    let id = app.attention.current().unwrap().subject_id;
    fx.act(&mut app, Action::Op(unavez::ops::OpKind::Cancel));
    fx.type_text(&mut app, "no viene");
    fx.act(&mut app, Action::Submit);
    // Meanwhile the channel reports: the case is not what the form saw.
    set_state(&fx, id, "failed", 1_000);
    fx.act(&mut app, Action::Confirm);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Refused);
    assert_eq!(flash.text, "cambió mientras escribía: revise y confirme de nuevo");
    let row = fx.store.read(|tx| tx.intention(id)).unwrap();
    assert_eq!(row.state.as_str(), "failed", "nothing was applied");
    assert!(fx.store.read(|tx| tx.operator_actions(10)).unwrap().is_empty());
}

#[test]
fn a_patient_is_found_as_you_type_by_name_reference_key_or_phone() {
    let mut fx = clinic(60);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    let target = app.attention.rows[2].clone();
    let name = target.name.clone().expect("the demo clinic names its patients");
    let phone = target.phone.clone().unwrap();
    let tail = &phone[phone.len() - 4..];
    let key = target.key.clone().unwrap();
    for query in [name.as_str(), target.commitment_ref.as_str(), key.as_str(), tail] {
        fx.act(&mut app, Action::OpenFilter);
        for _ in 0..app.input.chars().count() {
            fx.act(&mut app, Action::Backspace);
        }
        fx.type_text(&mut app, query);
        // Applied while typing, before enter.
        assert_eq!(app.mode, Mode::Filter);
        assert!(
            keys_on_screen(&app).contains(&(target.kind, target.subject_id)),
            "{query}: {:?}",
            keys_on_screen(&app)
        );
        fx.act(&mut app, Action::Submit);
    }
    fx.act(&mut app, Action::OpenFilter);
    fx.type_text(&mut app, "zzqx");
    assert!(app.attention.rows.is_empty());
    let screen = render(&app, 80, 24);
    assert!(screen.contains("0 resultados — esc para limpiar"), "{screen}");
    fx.act(&mut app, Action::Abort);
    assert!(app.filter.is_empty());
    assert!(!app.attention.rows.is_empty());
}

#[test]
fn below_80x24_the_console_says_the_terminal_is_too_small() {
    let mut fx = clinic(20);
    let app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    let screen = render(&app, 79, 24);
    assert!(screen.starts_with("terminal demasiado pequeña"), "{screen}");
    let screen = render(&app, 80, 23);
    assert!(screen.contains("80×23 < 80×24"), "{screen}");
}

#[test]
fn command_completion_lists_choices_and_refuses_by_role() {
    let mut fx = clinic(20);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "ta");
    fx.act(&mut app, Action::NextField);
    assert_eq!(app.input, "tablero ");
    fx.act(&mut app, Action::Abort);
    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "reproceso");
    fx.act(&mut app, Action::Submit);
    let flash = app.flash.clone().unwrap();
    assert_eq!(flash.kind, FlashKind::Refused);
    assert!(flash.text.contains("recepción"), "{}", flash.text);
    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "volar");
    fx.act(&mut app, Action::Submit);
    let text = app.flash.clone().unwrap().text;
    assert!(
        text.contains("Disponibles: paciente, detalle, atencion, citas, tablero, despachadores, doctor"),
        "{text}"
    );
    assert!(!text.contains("reproceso"), "{text}");
}

#[test]
fn a_flash_fades_and_the_session_log_lists_what_this_operator_did() {
    let mut fx = clinic(60);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    act_with_reason(
        &mut fx,
        &mut app,
        Action::Op(unavez::ops::OpKind::Resolve),
        "sin novedad",
    );
    assert!(app.flash.is_some());
    let _ = app.tick(now() + chrono::Duration::seconds(2));
    assert!(app.flash.is_some(), "still shown");
    let _ = app.tick(now() + chrono::Duration::seconds(7));
    assert!(app.flash.is_none(), "faded");
    fx.act(&mut app, Action::ShowLog);
    assert_eq!(app.mode, Mode::Log);
    let screen = render(&app, 120, 40);
    assert!(screen.contains("Lo que hizo en esta sesión"), "{screen}");
    assert!(screen.contains("marcado como atendido"), "{screen}");
    fx.act(&mut app, Action::Back);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn the_header_shows_the_dispatcher_at_a_glance_and_keeps_the_clock() {
    let mut fx = clinic(20);
    let mut app = loaded(&mut fx, Role::Supervisor, "supervisora");
    let long = format!("engine unreachable: {}", "connection refused ".repeat(10));
    app.dispatcher = unavez::tui::app::DispatcherView {
        running: Some(true),
        paused: true,
        last_error: Some(long.clone()),
        queue: Some(12),
        ..Default::default()
    };
    let screen = render(&app, 80, 24);
    let header = screen.lines().next().unwrap();
    assert!(header.contains("⏸ despachador: en pausa"), "{header}");
    assert!(header.ends_with("01/12 08:00"), "the clock stays: {header}");
    assert!(header.contains(" · ⚠"), "no room for the error's words: {header}");
    let header = render(&app, 120, 40).lines().next().unwrap().to_string();
    assert!(header.contains("último error: engine unrea"), "{header}");
    assert!(
        header.contains('…') && header.ends_with("01/12 08:00"),
        "shortened: {header}"
    );
    app.dispatcher.paused = false;
    app.dispatcher.running = Some(false);
    let header = render(&app, 120, 40).lines().next().unwrap().to_string();
    assert!(header.contains("■ despachador: detenido"), "{header}");
    app.dispatcher.running = Some(true);
    let header = render(&app, 120, 40).lines().next().unwrap().to_string();
    assert!(header.contains("● despachador: en marcha"), "{header}");
    // `:error` shows it whole.
    fx.act(&mut app, Action::OpenCommand);
    fx.type_text(&mut app, "error");
    fx.act(&mut app, Action::Submit);
    assert_eq!(app.mode, Mode::Error);
    // Inside the overlay (90 columns, centred), every word in order.
    let inside: Vec<String> = render(&app, 120, 40)
        .lines()
        .map(|l| l.chars().skip(16).take(88).collect())
        .collect();
    let text = inside.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains(long.trim()), "{text}");
}

#[test]
fn a_click_selects_a_row_or_a_tab() {
    let mut fx = clinic(60);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    // Row 4 is the first list row (header, tabs, border, column header).
    let reqs = app.on_click(10, 6, 100, 30);
    fx.run(&mut app, reqs);
    assert_eq!(app.attention.selected, 2);
    let clicked = app.attention.current().unwrap().subject_id;
    let screen = render(&app, 100, 30);
    let line = screen.lines().nth(6).unwrap();
    assert!(line.contains(&app.attention.rows[2].commitment_ref), "{line}");
    assert_eq!(app.attention.anchor.map(|a| a.1), Some(clicked));
    // The second tab, " 2 Próximas citas ", starts after " 1 Atención ".
    let reqs = app.on_click(14, 1, 100, 30);
    fx.run(&mut app, reqs);
    assert_eq!(app.screen, unavez::tui::keys::Screen::Upcoming);
}

#[test]
fn no_color_keeps_the_selected_row_whole() {
    use ratatui::{Terminal, backend::TestBackend, style::Color, style::Modifier};
    let mut fx = clinic(20);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    app.no_color = true;
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    term.draw(|f| unavez::tui::view::draw(f, &app)).unwrap();
    let buf = term.backend().buffer();
    let mut reversed = 0;
    for y in 0..30 {
        for x in 0..100 {
            let c = &buf[(x, y)];
            assert_eq!((c.fg, c.bg), (Color::Reset, Color::Reset), "colour at {x},{y}");
            if y == 4 && c.modifier.contains(Modifier::REVERSED) {
                reversed += 1;
            }
        }
    }
    // The whole selected row (inside the borders) is still highlighted.
    assert_eq!(reversed, 98);
}
