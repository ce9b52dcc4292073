//! Detalle (issue 25 §2): who it is for and what happened, in plain
//! words. The title names the patient (or customer), the service and the
//! appointment's local time; the first line is the verdict; the history
//! is translated. The channel's own words (keys, evidence ids, HTTP
//! lines, raw notes) are one key away: `e` shows the technical view.

use super::*;

use crate::domain::key::Purpose;
use crate::domain::verdict::{Facts, verdict};
use crate::store::{CommitmentRow, IntentionDetail};

pub(super) fn draw_detail(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let Some(d) = &app.detail else {
        let block = Block::default()
            .borders(Borders::ALL)
            .title(format!(" {} ", t.screen_detail));
        f.render_widget(Paragraph::new(t.loading).style(app.palette.dim()).block(block), area);
        return;
    };
    let mut lines = Vec::new();
    let title = if app.detail_technical {
        super::panels::technical_lines(app, d, &mut lines);
        format!(" {} · {} ", t.screen_detail, t.words.technical_title)
    } else {
        plain_lines(app, d, &mut lines);
        title(app, d, area.width.saturating_sub(4).into())
    };
    let block = Block::default().borders(Borders::ALL).title(title);
    let p = Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .scroll((app.detail_scroll, 0));
    f.render_widget(p, area);
}

/// ` Detalle · María Flores · Medicina general · hoy 17:20 `: the person
/// and, for an appointment, the service and its local time. Parts that do
/// not fit `room` are left out whole (the service first), never cut.
fn title(app: &App, d: &IntentionDetail, room: usize) -> String {
    let mut parts = title_parts(app, d);
    let width = |p: &[String]| p.iter().map(|s| s.chars().count() + 3).sum::<usize>();
    while parts.len() > 1 && width(&parts) > room {
        // The service goes first, then the time, then the name.
        let at = if parts.len() == 4 { 2 } else { parts.len() - 1 };
        parts.remove(at);
    }
    format!(" {} ", parts.join(" · "))
}

fn title_parts(app: &App, d: &IntentionDetail) -> Vec<String> {
    let mut parts = vec![app.t.screen_detail.to_string()];
    if let Some(c) = &d.commitment {
        let c = &c.commitment;
        parts.extend(c.name.as_deref().map(|n| inert(n).into_owned()));
        match c.kind {
            CommitmentKind::Appointment => {
                parts.extend(c.service.as_deref().map(|s| inert(s).into_owned()));
                parts.extend(c.starts_at.map(|at| app.t.words.when(at, app.now, app.tz)));
            }
            CommitmentKind::Order => parts.push(inert(&c.reference).into_owned()),
        }
    }
    parts
}

/// Whether the channel ever took the message: a failure after that is a
/// failure to deliver, before it the channel confirmed nothing left.
fn channel_took_it(d: &IntentionDetail) -> bool {
    crate::domain::verdict::channel_took_it(d.history.iter().map(|h| (h.to_state.as_str(), h.signal.as_str())))
}

fn plain_lines(app: &App, d: &IntentionDetail, lines: &mut Vec<Line<'static>>) {
    let (t, w) = (app.t, app.t.words);
    let i = &d.intention;
    let commitment = d.commitment.as_ref().map(|c: &CommitmentRow| &c.commitment);
    let v = verdict(&Facts {
        state: i.state,
        state_reason: i.state_reason.as_deref(),
        purpose: Purpose::from_slug(&i.purpose),
        state_changed_at: i.state_changed_at,
        due_at: i.due_at,
        channel_took_it: channel_took_it(d),
        commitment,
    });
    lines.push(Line::styled(
        w.verdict(&v, app.now, app.tz),
        state_style(app, i.state.as_str()).add_modifier(Modifier::BOLD),
    ));
    let person = if v.is_order() { w.customer } else { w.patient };
    let name = commitment
        .and_then(|c| c.name.as_deref())
        .map(|n| inert(n).into_owned())
        .unwrap_or_else(|| t.detail_none.to_string());
    lines.push(Line::from(format!(
        "{person}: {name} · {} {} · {} {} · {}",
        w.to,
        inert(&mask_phone(&i.recipient)),
        w.due,
        w.when(i.due_at, app.now, app.tz),
        t.state(i.state.as_str()),
    )));
    if let Some(reason) = &i.reason {
        lines.push(Line::from(format!(
            "{}: {} · {} {} · {}",
            t.form_responsible,
            inert(&i.created_by),
            t.detail_authorized,
            inert(i.authorized_by.as_deref().unwrap_or(t.detail_none)),
            inert(reason)
        )));
    }
    lines.push(Line::styled(t.detail_content, HEAD));
    lines.push(Line::from(format!("  {}", inert(&i.body))));
    lines.push(Line::styled(t.detail_history, HEAD));
    for h in &d.history {
        let mut s = format!("  {} {}", w.when(h.at, app.now, app.tz), t.signal(&h.signal));
        if h.applied && h.from_state.as_deref() != Some(h.to_state.as_str()) {
            s.push_str(&format!(" → {}", t.state(&h.to_state)));
        }
        s.push_str(&format!(" ({})", t.cause(&h.cause)));
        if !h.applied {
            match w.record_only(h.note.as_deref()) {
                Some(why) => s.push_str(&format!(" · {}: {why}", w.recorded)),
                None => s.push_str(&format!(" · {}", w.recorded)),
            }
        }
        lines.push(Line::from(s).style(if h.applied { Style::new() } else { app.palette.dim() }));
    }
    lines.push(Line::styled(t.detail_attempts, HEAD));
    if d.attempts.is_empty() {
        lines.push(Line::from(format!("  {}", t.detail_none)));
    }
    for a in &d.attempts {
        lines.push(Line::from(format!(
            "  {}",
            fill(
                w.attempt,
                &[
                    ("n", &a.n.to_string()),
                    ("at", &w.when(a.started_at, app.now, app.tz)),
                    ("what", w.attempt_outcome(a.outcome)),
                ],
            )
        )));
    }
    if !d.related.is_empty() {
        lines.push(Line::styled(t.detail_related, HEAD));
    }
    for r in &d.related {
        lines.push(Line::from(format!(
            "  #{} {} · {}",
            r.id,
            w.relation(&r.relation),
            t.state(&r.state)
        )));
    }
}
