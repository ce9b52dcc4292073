//! The header's banner: while something is wrong, a red, inverse line
//! under the title says it: the ledger's write lock (with a spinner: the
//! console is waiting, not frozen) and every crossed alert
//! (`domain::alert`), most urgent first, cut to the width.

use chrono::Duration;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::shorten;
use crate::domain::text::inert;
use crate::i18n::fill;
use crate::tui::app::{App, age};

/// A spinner's frames: it turns while the ledger is locked.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// The banner's words: the write lock (with a spinner), then each crossed
/// alert, most urgent first.
fn banner_text(app: &App) -> String {
    use crate::domain::alert::AlertKind;
    let t = app.t;
    let mut parts = Vec::new();
    if app.dispatcher.locked {
        let frame = SPINNER[(app.frame / 2 % SPINNER.len() as u64) as usize];
        parts.push(format!("{frame} {}", t.ledger_locked));
    }
    let n = |v: i64| v.to_string();
    let alerts: Vec<String> = app
        .alerts
        .iter()
        .map(|r| match r.kind {
            AlertKind::TemplateBlocked => {
                let names: Vec<String> = app
                    .blocked_templates
                    .iter()
                    .map(|b| format!("{} ({})", inert(&b.name), inert(&b.status)))
                    .collect();
                fill(t.alert_template_blocked, &[("names", &names.join(", "))])
            }
            AlertKind::DueUnsent => fill(
                t.alert_due_unsent_for,
                &[("n", &n(r.value)), ("grace", &app.due_grace_minutes.to_string())],
            ),
            AlertKind::OldestUncertain => fill(
                t.alert_oldest_uncertain,
                &[("age", &age(app.now, app.now - Duration::seconds(r.value)))],
            ),
            AlertKind::Review => fill(t.alert_review, &[("n", &n(r.value))]),
            AlertKind::RefusedEvents => fill(t.alert_refused_events, &[("n", &n(r.value))]),
            AlertKind::ChannelPaused => channel_paused(app),
            AlertKind::BackupFailing => t.alert_backup_failing.to_string(),
            AlertKind::BackupStale => fill(
                t.alert_backup_stale,
                &[("age", &age(app.now, app.now - Duration::seconds(r.value)))],
            ),
            AlertKind::FeedHeld => {
                let feeds = feed_names(app, |f| f.held > 0);
                match r.value {
                    1 => fill(t.alert_feed_held_one, &[("feeds", &feeds)]),
                    v => fill(t.alert_feed_held, &[("feeds", &feeds), ("n", &n(v))]),
                }
            }
            AlertKind::FeedStale => fill(
                t.alert_feed_stale,
                &[
                    ("feeds", &feed_names(app, |f| f.failing_since.is_some())),
                    ("minutes", &app.feed_stale_minutes.to_string()),
                ],
            ),
        })
        .collect();
    if !alerts.is_empty() {
        parts.push(format!("⚠ {}", alerts.join(" · ")));
    }
    parts.join(" · ")
}

/// The feeds an alert is about, by their configured names (inert: a name
/// comes from a config file, and reaches the terminal).
fn feed_names(app: &App, about: impl Fn(&crate::domain::alert::FeedHealth) -> bool) -> String {
    let names: Vec<String> = app
        .feed_health
        .iter()
        .filter(|f| about(f))
        .map(|f| inert(&f.name).into_owned())
        .collect();
    if names.is_empty() { "?".into() } else { names.join(", ") }
}

/// What the paused channels need, one clause per fault: the credential
/// names the variable it came from (never the secret).
fn channel_paused(app: &App) -> String {
    use crate::domain::fault::ChannelFault;
    let t = app.t;
    let parts: Vec<String> = app
        .paused_channels
        .iter()
        .map(|p| match p.fault {
            ChannelFault::CredentialRejected => {
                let env = p
                    .secret_env
                    .as_deref()
                    .map_or_else(|| "?".into(), |e| inert(e).into_owned());
                fill(t.alert_channel_credential, &[("env", &env)])
            }
            ChannelFault::InstanceUnknown => t.alert_channel_instance_unknown.to_string(),
            ChannelFault::InstanceDisconnected => t.alert_channel_instance_disconnected.to_string(),
            ChannelFault::Tls => t.alert_channel_tls.to_string(),
        })
        .collect();
    parts.join(" · ")
}

/// The banner under the title: red and inverse, so without colour
/// (`NO_COLOR`) it still reads as an inverse bar; cut to the width, never
/// wrapped.
pub(super) fn draw_banner(f: &mut Frame<'_>, app: &App, area: Rect) {
    let width = area.width as usize;
    let text = shorten(&format!(" {}", banner_text(app)), width);
    let pad = width.saturating_sub(text.chars().count());
    let style = Style::new()
        .fg(Color::Red)
        .add_modifier(Modifier::BOLD | Modifier::REVERSED);
    f.render_widget(Paragraph::new(Line::styled(text + &" ".repeat(pad), style)), area);
}
