//! The console's alerts and the technician's channel events (issues 10 and
//! 14), through the update function and the worker on a real ledger:
//! - a crossed `[alerts]` threshold is a red, inverse banner line under the
//!   title on every screen, readable without colour, cut to 80 columns, in
//!   Spanish and English; the write lock turns a spinner there;
//! - the header shows another process's live dispatcher and keeps the clock;
//! - parked and refused channel events are listed in a technician's
//!   Atención with their reason, and worked off it like any case.

mod tui_support;

use chrono::Duration;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};
use unavez::config::{Language, Role};
use unavez::domain::heartbeat::{DispatcherState, Heartbeat};
use unavez::ops::OpKind;
use unavez::store::{
    NewChannelEvent, NewRefusal, PARKED_KEY_MESSAGE_MISMATCH, REFUSED_FOREIGN_INSTANCE, Recorded, RowKind, StoreError,
    TemplateStatus,
};
use unavez::tui::app::App;
use unavez::tui::keys::{Action, Mode, Screen};

use tui_support::{Fixture, clinic, now, render};

fn loaded(fx: &mut Fixture, role: Role, operator: &str) -> App {
    let mut app = fx.app(operator, role);
    let reqs = app.load();
    fx.run(&mut app, reqs);
    app
}

/// One value of a raw query on the fixture's ledger.
fn query(fx: &Fixture, sql: &str) -> String {
    unavez::store::open_connection(&fx.db)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// A template WhatsApp paused and a booking event refused as a conflict.
fn pile_up(fx: &mut Fixture) {
    let reference = query(fx, "SELECT ref FROM commitments WHERE version = 1 ORDER BY id LIMIT 1");
    fx.store
        .write(|tx| {
            let Recorded::New(row) = tx.record_channel_event(
                &NewChannelEvent {
                    source: "cloud",
                    event_id: "tpl-1",
                    kind: "message_template_status_update",
                    message_id: None,
                    intention_key: None,
                    payload: "{}",
                },
                now(),
            )?
            else {
                panic!("new")
            };
            tx.set_template_status(
                &TemplateStatus {
                    name: "cita_recordatorio",
                    language: "es_PE",
                    status: Some("PAUSED"),
                    ..TemplateStatus::default()
                },
                row,
                now(),
            )?;
            let fields = vec!["location".to_string()];
            tx.record_refusal(
                &NewRefusal {
                    event_id: "evt-9",
                    commitment_ref: &reference,
                    event_type: "appointment.scheduled",
                    version: 1,
                    conflict: unavez::domain::event::ConflictKind::SameVersion,
                    fields: &fields,
                    reason: "conflict",
                    source: "http",
                    payload: "{}",
                    fingerprint: "sha256:x",
                },
                now(),
            )?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

#[test]
fn a_crossed_threshold_is_a_banner_on_every_screen_readable_without_colour() {
    let mut fx = clinic(40);
    fx.ctx.config.alerts.due_unsent = 5;
    pile_up(&mut fx);
    let mut app = loaded(&mut fx, Role::Technician, "tecnico");
    let kinds: Vec<&str> = app.alerts.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["template_blocked", "due_unsent", "refused_events"]);
    let due = app.alerts[1].value;
    assert!(due >= 5, "{:?}", app.alerts);
    for screen in [Screen::Attention, Screen::Upcoming, Screen::Board, Screen::Reprocess] {
        fx.act(&mut app, Action::Goto(screen));
        let text = render(&app, 80, 24);
        let banner = text.lines().nth(1).unwrap();
        assert!(
            banner.starts_with(&format!(
                " ⚠ plantilla bloqueada: cita_recordatorio (PAUSED) · {due} con atraso > 10 min"
            )),
            "{screen:?}: {banner}"
        );
        // Cut to the width, with a mark that there is more.
        assert!(banner.chars().count() <= 80 && banner.ends_with('…'), "{banner}");
        // The tabs moved down one line, the footer stayed on the last.
        assert!(text.lines().nth(2).unwrap().contains("1 Atención"), "{text}");
    }
    fx.act(&mut app, Action::Goto(Screen::Attention));
    insta::assert_snapshot!("banner_technician_80x24", render(&app, 80, 24));
    insta::assert_snapshot!("banner_technician_120x40", render(&app, 120, 40));
    // A click on the tabs' line still lands on a tab.
    let reqs = app.on_click(20, 2, 80, 24);
    fx.run(&mut app, reqs);
    assert_eq!(app.screen, Screen::Upcoming);

    // NO_COLOR: no colour is left, the banner is still an inverse bar.
    app.no_color = true;
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    term.draw(|f| unavez::tui::view::draw(f, &app)).unwrap();
    let buf = term.backend().buffer();
    for x in 0..80 {
        let cell = &buf[(x, 1)];
        assert!(cell.modifier.contains(Modifier::REVERSED), "column {x}");
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "column {x}");
    }

    // In English, and gone once nothing is crossed.
    fx.ctx.config.language = Language::En;
    let en = loaded(&mut fx, Role::Technician, "tecnico");
    let text = render(&en, 120, 30);
    let banner = text.lines().nth(1).unwrap();
    assert!(
        banner.contains(&format!(
            "⚠ template blocked: cita_recordatorio (PAUSED) · {due} late > 10 min · 1 refused events"
        )),
        "{banner}"
    );
    fx.ctx.config.alerts.due_unsent = 0;
    fx.ctx.config.alerts.refused_events = 0;
    fx.ctx.config.alerts.review = 0;
    fx.ctx.config.alerts.oldest_uncertain_minutes = 0;
    fx.store
        .write(|tx| {
            tx.set_template_status(
                &TemplateStatus {
                    name: "cita_recordatorio",
                    language: "es_PE",
                    status: Some("APPROVED"),
                    ..TemplateStatus::default()
                },
                1,
                now(),
            )
        })
        .unwrap();
    let calm = loaded(&mut fx, Role::Technician, "tecnico");
    assert!(calm.alerts.is_empty(), "{:?}", calm.alerts);
    assert!(render(&calm, 80, 24).lines().nth(1).unwrap().contains("1 Attention"));
}

#[test]
fn the_write_lock_turns_a_spinner_in_the_banner_and_the_header_keeps_the_clock() {
    let mut fx = clinic(20);
    let mut app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    app.dispatcher.locked = true;
    let first = render(&app, 80, 24).lines().nth(1).unwrap().to_string();
    assert!(
        first.starts_with(" ⠋ registro bloqueado por otro proceso: las acciones esperan"),
        "{first}"
    );
    app.frame += 2;
    let next = render(&app, 80, 24).lines().nth(1).unwrap().to_string();
    assert!(next.starts_with(" ⠙ registro bloqueado"), "the spinner turns: {next}");

    // Another process's dispatcher, by host and pid where there is room;
    // the clock always.
    app.dispatcher.locked = false;
    app.identity_unverified = true;
    app.dispatcher.others = Some(vec![Heartbeat {
        id: "dispatcher-4242-1".into(),
        host: "caja-2".into(),
        pid: 4242,
        owner: Some("tecnico".into()),
        state: DispatcherState::Paused,
        last_error: None,
        last_error_at: None,
        started_at: now() - Duration::hours(1),
        beat_at: now(),
        interval: Duration::seconds(5),
        channel: None,
        channel_instance: None,
    }]);
    let wide = render(&app, 120, 30);
    let header = wide.lines().next().unwrap();
    assert!(header.contains("⏸ despachador: en pausa · caja-2 4242"), "{header}");
    // An unverified identity is said once, in `?` help, never in the
    // header (issue 25 §5).
    assert!(
        !header.contains("identidad no verificada") && header.contains("01/12 08:00"),
        "{header}"
    );
    let narrow = render(&app, 80, 24);
    let header = narrow.lines().next().unwrap();
    assert!(
        header.contains("⏸ despachador: en pausa") && header.ends_with("01/12 08:00"),
        "{header}"
    );
    assert!(header.chars().count() <= 80, "{header}");
}

/// A parked engine event (its key and message id name two intentions) and
/// one of another engine instance.
fn channel_events(fx: &mut Fixture) -> (i64, i64) {
    let key = query(
        fx,
        "SELECT i.key FROM intentions i JOIN commitments c ON c.id = i.commitment_id
         WHERE c.ref = 'cita-1003' ORDER BY i.id LIMIT 1",
    );
    fx.store
        .write(|tx| {
            let mut rows = Vec::new();
            for (event_id, key, status, reason) in [
                ("evt_parked", key.as_str(), "parked", PARKED_KEY_MESSAGE_MISMATCH),
                (
                    "evt_foreign",
                    "otra-clinica:aviso:v1",
                    "refused",
                    REFUSED_FOREIGN_INSTANCE,
                ),
            ] {
                let Recorded::New(row) = tx.record_channel_event(
                    &NewChannelEvent {
                        source: "motor",
                        event_id,
                        kind: "motor_event",
                        message_id: None,
                        intention_key: Some(key),
                        payload: "{}",
                    },
                    now() - Duration::minutes(5),
                )?
                else {
                    panic!("new")
                };
                let status = unavez::domain::channel_event::EventStatus::parse(status).expect("a status");
                tx.set_channel_event_reason(row, status, reason)?;
                rows.push(row);
            }
            Ok::<_, StoreError>((rows[0], rows[1]))
        })
        .unwrap()
}

#[test]
fn a_technician_sees_parked_and_refused_channel_events_with_their_reason_and_works_them_off() {
    let mut fx = clinic(40);
    let (parked, foreign) = channel_events(&mut fx);

    // The front desk's queue has no channel events.
    let desk = loaded(&mut fx, Role::FrontDesk, "recepcion");
    assert!(desk.attention.rows.iter().all(|r| r.kind != RowKind::ChannelEvent));
    assert!(!render(&desk, 120, 40).contains("evento del canal"));

    let mut app = loaded(&mut fx, Role::Technician, "tecnico");
    let mut first: Vec<(RowKind, i64)> = app
        .attention
        .rows
        .iter()
        .take(2)
        .map(|r| (r.kind, r.subject_id))
        .collect();
    first.sort_by_key(|f| f.1);
    assert_eq!(
        first,
        [(RowKind::ChannelEvent, parked), (RowKind::ChannelEvent, foreign)]
    );
    let foreign_at = app.attention.rows.iter().position(|r| r.subject_id == foreign).unwrap();
    // The reason in a few words is what to do, at every width; the
    // widest shows the event's id as its evidence.
    for (width, p_want, f_want) in [
        (80, "apartado    clave ≠ mensaje", "rechazado   otra instancia"),
        (
            120,
            "evento canal   apartado    5 min  clave ≠ mensaje",
            "evento canal   rechazado   5 min  otra instancia",
        ),
        (
            140,
            "clave ≠ mensaje  motor:evt_parked",
            "otra instancia   motor:evt_foreign",
        ),
    ] {
        let text = render(&app, width, 40);
        let line = |needle: &str| {
            text.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_default()
                .to_string()
        };
        let p = line("apartado ");
        assert!(p.contains("cita-1003") && p.contains(p_want), "{width}: {p}");
        let f = line("rechazado ");
        assert!(f.starts_with("│—") && f.contains(f_want), "{width}: {f}");
    }
    insta::assert_snapshot!("channel_events_technician_80x24", render(&app, 80, 24));

    // Worked off like any case: marked handled with a reason, it leaves
    // Atención and is among the day's handled ones.
    app.attention.select(foreign_at);
    fx.act(&mut app, Action::Op(OpKind::Resolve));
    assert_eq!(app.mode, Mode::Form, "flash: {:?}", app.flash);
    fx.type_text(&mut app, "es de la otra sede, ya avisada");
    fx.act(&mut app, Action::Submit);
    fx.act(&mut app, Action::Confirm);
    // Sent now, without waiting out the grace (tests/tui_calls.rs).
    let reqs = app.commit_pending();
    fx.run(&mut app, reqs);
    assert!(
        app.attention
            .rows
            .iter()
            .all(|r| r.subject_id != foreign || r.kind != RowKind::ChannelEvent)
    );
    let mark = fx
        .store
        .read(|tx| tx.handled_mark(RowKind::ChannelEvent, foreign))
        .unwrap()
        .expect("marked");
    assert_eq!(mark.operator, "tecnico");
    let action = fx.store.read(|tx| tx.operator_actions(1)).unwrap().remove(0);
    assert_eq!(
        (action.action.as_str(), action.reason.as_str(), action.commitment_id),
        ("resolve", "es de la otra sede, ya avisada", None)
    );
    fx.act(&mut app, Action::ToggleHandled);
    assert_eq!(
        app.attention
            .rows
            .iter()
            .map(|r| (r.kind, r.subject_id))
            .collect::<Vec<_>>(),
        [(RowKind::ChannelEvent, foreign)]
    );
}

/// Issue 24: a dispatcher (this console's or another process's) whose
/// channel rejected its key is the banner's first alert, naming the
/// variable to check and that unavez must be restarted, in Spanish by
/// default and in English by configuration; gone once it resumes.
#[test]
fn a_paused_channel_is_the_first_banner_alert_and_names_the_variable() {
    use unavez::domain::fault::{ChannelFault, ChannelPause};
    let mut fx = clinic(3);
    let beat = |channel: Option<ChannelPause>| Heartbeat {
        id: "dispatcher-77-1".into(),
        host: "caja-1".into(),
        pid: 77,
        owner: None,
        state: DispatcherState::Running,
        last_error: Some("channel paused".into()),
        last_error_at: Some(now()),
        started_at: now() - Duration::minutes(5),
        beat_at: now(),
        interval: Duration::seconds(5),
        channel,
        channel_instance: None,
    };
    let pause = ChannelPause {
        fault: ChannelFault::CredentialRejected,
        secret_env: Some("UNAVEZ_MOTOR_API_KEY".into()),
    };
    fx.store.write(|tx| tx.beat(&beat(Some(pause.clone())))).unwrap();
    let app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    assert_eq!(app.alerts[0].kind.as_str(), "channel_paused", "{:?}", app.alerts);
    let text = render(&app, 120, 30);
    let banner = text.lines().nth(1).unwrap();
    assert!(
        banner.starts_with(" ⚠ credencial del canal rechazada: revise UNAVEZ_MOTOR_API_KEY y reinicie unavez"),
        "{banner}"
    );
    fx.ctx.config.language = Language::En;
    let en = loaded(&mut fx, Role::FrontDesk, "recepcion");
    let banner = render(&en, 120, 30).lines().nth(1).unwrap().to_string();
    assert!(
        banner.contains("channel credential rejected: check UNAVEZ_MOTOR_API_KEY and restart unavez"),
        "{banner}"
    );
    // The probe passed: the row says so and the alert is gone.
    fx.store.write(|tx| tx.beat(&beat(None))).unwrap();
    let app = loaded(&mut fx, Role::FrontDesk, "recepcion");
    assert!(
        app.alerts.iter().all(|r| r.kind.as_str() != "channel_paused"),
        "{:?}",
        app.alerts
    );
}
