//! Issue 27 §2 in the console: `:calendario` (`:feeds`) lists the
//! disappearances calendar feeds lost at once, held for a person, and a
//! technician or supervisor confirms (cancels them) or discards (releases
//! them) with the usual reason and confirmation, through the update
//! function and the worker on a real SQLite ledger; both are audited.

mod tui_support;

use chrono::Duration;
use unavez::config::Role;
use unavez::domain::alert::AlertKind;
use unavez::domain::feed::Seen;
use unavez::domain::lifecycle::CommitmentStatus;
use unavez::ops::OpKind;
use unavez::tui::app::{App, FlashKind};
use unavez::tui::keys::{Action, Mode};

use tui_support::{Fixture, clinic, now, render};

/// Holds `refs` on feed `feed` as the poller does after a mass
/// disappearance: the feed's status row, then its held rows.
fn hold(fx: &mut Fixture, feed: &str, refs: &[&str]) {
    let at = now() - Duration::minutes(5);
    fx.store
        .write(|tx| {
            tx.feed_lease(
                feed,
                &format!("https://cal.test/{feed}.ics"),
                "poller",
                at + Duration::minutes(1),
                at,
            )?;
            let mut rows = Vec::new();
            for r in refs {
                let c = tx.commitment(r)?.expect("a demo appointment");
                rows.push(Seen {
                    reference: r.to_string(),
                    uid: format!("{r}@cal.test"),
                    starts_at: c.commitment.starts_at.expect("an appointment has a time"),
                });
            }
            tx.feed_hold(feed, &rows, at)?;
            tx.feed_release_lease(feed, "poller")
        })
        .unwrap();
}

fn status_of(fx: &mut Fixture, reference: &str) -> CommitmentStatus {
    fx.store
        .read(|tx| tx.commitment(reference))
        .unwrap()
        .unwrap()
        .commitment
        .status
}

fn held_on(fx: &mut Fixture, feed: &str) -> usize {
    fx.store.read(|tx| tx.feed_held(feed)).unwrap().len()
}

/// From the overlay, with the cursor on the feed: the form, a reason, and
/// the confirmation step.
fn review(fx: &mut Fixture, app: &mut App, op: OpKind, reason: &str) -> String {
    assert_eq!(app.mode, Mode::Feeds);
    fx.act(app, Action::Op(op));
    assert_eq!(app.mode, Mode::Form, "flash: {:?}", app.flash);
    fx.type_text(app, reason);
    fx.act(app, Action::Submit);
    assert_eq!(app.mode, Mode::Confirm, "flash: {:?}", app.flash);
    let scope = app.confirm.as_ref().unwrap().scope.clone();
    fx.act(app, Action::Confirm);
    scope
}

fn fixture() -> Fixture {
    let mut fx = clinic(6);
    hold(&mut fx, "agenda", &["cita-1001", "cita-1002"]);
    hold(&mut fx, "sede-norte", &["cita-1003"]);
    fx
}

#[test]
fn the_held_feeds_overlay_lists_each_feed_and_its_appointments() {
    let mut fx = fixture();
    let mut app = fx.loaded(Role::Technician, "tecnico");
    assert!(
        app.alerts.iter().any(|r| r.kind == AlertKind::FeedHeld),
        "{:?}",
        app.alerts
    );
    // `?` lists `:calendario` to whoever may use it.
    fx.act(&mut app, Action::Help);
    let help = render(&app, 100, 60);
    assert!(help.contains(":calendario"), "{help}");
    fx.act(&mut app, Action::Back);
    fx.command(&mut app, "calendario");
    assert_eq!(app.mode, Mode::Feeds);
    let holds = app.feeds.holds.clone().expect("the worker answered");
    let shape: Vec<(&str, usize)> = holds.iter().map(|h| (h.feed.as_str(), h.held.len())).collect();
    assert_eq!(shape, [("agenda", 2), ("sede-norte", 1)]);
    // Patients are masked before they reach the view.
    let screen = render(&app, 100, 30);
    assert!(
        screen.contains("cita-1001") && screen.contains("sede-norte"),
        "{screen}"
    );
    insta::assert_snapshot!("feeds_held_overlay", screen);
    fx.act(&mut app, Action::Back);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn discard_releases_and_confirm_cancels_and_both_are_audited() {
    let mut fx = fixture();
    let mut app = fx.loaded(Role::Technician, "tecnico");
    fx.command(&mut app, "calendario");

    let scope = review(&mut fx, &mut app, OpKind::FeedDiscard, "el calendario se recuperó");
    assert!(scope.contains("agenda"), "{scope}");
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    assert_eq!(held_on(&mut fx, "agenda"), 0);
    assert_eq!(status_of(&mut fx, "cita-1001"), CommitmentStatus::Scheduled);
    assert_eq!(status_of(&mut fx, "cita-1002"), CommitmentStatus::Scheduled);

    // The banner refreshed with the result: one appointment still held.
    let held: Vec<i64> = app
        .alerts
        .iter()
        .filter(|r| r.kind == AlertKind::FeedHeld)
        .map(|r| r.value)
        .collect();
    assert_eq!(held, [1], "{:?}", app.alerts);
    // It names the feed, in the singular.
    let banner = render(&app, 200, 30);
    assert!(
        banner.contains("calendario sede-norte: 1 cita desapareció de golpe"),
        "{banner}"
    );

    fx.command(&mut app, "feeds");
    let feeds: Vec<String> = app.feeds.holds.clone().unwrap().into_iter().map(|h| h.feed).collect();
    assert_eq!(feeds, ["sede-norte"]);
    let scope = review(&mut fx, &mut app, OpKind::FeedConfirm, "la sede cerró");
    assert!(
        scope.contains("sede-norte") && scope.contains("no se puede deshacer"),
        "{scope}"
    );
    assert_eq!(app.flash.as_ref().unwrap().kind, FlashKind::Success, "{:?}", app.flash);
    assert_eq!(held_on(&mut fx, "sede-norte"), 0);
    assert_eq!(status_of(&mut fx, "cita-1003"), CommitmentStatus::Cancelled);
    assert!(
        !app.alerts.iter().any(|r| r.kind == AlertKind::FeedHeld),
        "{:?}",
        app.alerts
    );

    let rows = fx.store.read(|tx| tx.operator_actions(100)).unwrap();
    let audited: Vec<(&str, &str, Option<&str>, &str)> = rows
        .iter()
        .map(|a| {
            (
                a.operator.as_str(),
                a.action.as_str(),
                a.scope.as_deref(),
                a.reason.as_str(),
            )
        })
        .collect();
    assert!(
        audited.contains(&(
            "tecnico",
            "feed_discard",
            Some("feed agenda"),
            "el calendario se recuperó"
        )),
        "{audited:?}"
    );
    assert!(
        audited.contains(&("tecnico", "feed_confirm", Some("feed sede-norte"), "la sede cerró")),
        "{audited:?}"
    );
}

#[test]
fn a_supervisor_may_review_and_the_front_desk_may_not() {
    let mut fx = fixture();
    let mut app = fx.loaded(Role::Supervisor, "supervisora");
    assert!(app.commands().contains(&"calendario"));
    fx.command(&mut app, "calendario");
    assert_eq!(app.mode, Mode::Feeds);

    let mut desk = fx.loaded(Role::FrontDesk, "recepcion");
    assert!(!desk.commands().contains(&"calendario"));
    assert!(!desk.t.colon_line(&desk.colon_commands()).contains(":calendario"));
    fx.command(&mut desk, "calendario");
    assert_eq!(desk.mode, Mode::Normal);
    assert_eq!(
        desk.flash.as_ref().unwrap().kind,
        FlashKind::Refused,
        "{:?}",
        desk.flash
    );
    assert_eq!(held_on(&mut fx, "agenda"), 2);
}
