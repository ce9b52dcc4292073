//! Próximas citas (2): the appointments ahead with each message's state,
//! and who still needs a call. Below 100 columns its columns are sized so
//! no word is cut (issue 25 §7).

use super::*;

/// Whether the desk should call: soon, nothing delivered or read for the
/// current version, not confirmed, not contacted.
pub(super) fn needs_call(app: &App, u: &UpcomingRow) -> bool {
    let soon = u.starts_at.is_some_and(|s| s - app.now < Duration::hours(24));
    let reached = u
        .notifications
        .iter()
        .any(|n| n.version == u.version && matches!(n.state.as_str(), "delivered" | "read"));
    u.kind == CommitmentKind::Appointment
        && u.status != CommitmentStatus::Cancelled
        && soon
        && !reached
        && u.confirmed_at.is_none()
        && u.manual_contact_at.is_none()
}

pub(super) fn draw_upcoming(f: &mut Frame<'_>, app: &App, area: Rect) {
    let t = app.t;
    let r = &app.upcoming;
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", t.screen_upcoming))
        .title_bottom(page_info(app, r.offset, r.rows.len(), r.total));
    if r.rows.is_empty() {
        let msg = match (r.loaded, app.filter.is_empty()) {
            (false, _) => t.loading,
            (true, false) => t.no_results,
            (true, true) => t.empty_list,
        };
        f.render_widget(Paragraph::new(msg).style(app.palette.dim()).block(block), area);
        return;
    }
    let wide = area.width >= 110;
    let cols = UpcomingColumns::for_rows(app, &r.rows, area.width, wide);
    let mut head = vec![t.col_time];
    if cols.reference {
        head.push(t.col_commitment);
    }
    head.extend([t.col_name, t.col_phone, t.col_status, t.col_notifications]);
    let header = Row::new(head).style(HEAD);
    let rows = r.rows.iter().map(|u| upcoming_row(app, u, &cols));
    let table = Table::new(rows, cols.widths())
        .header(header)
        .block(block)
        .row_highlight_style(SELECTED);
    let mut state = TableState::default().with_selected(Some(r.selected));
    f.render_stateful_widget(table, area, &mut state);
}

/// Próximas citas' column widths (issue 25 §7): below 100 columns the
/// reference goes (it is in Detalle and the patient card) and the status
/// column is as wide as its longest text, so no word is cut; the messages
/// take the rest and show whole items only.
struct UpcomingColumns {
    /// The commitment's reference has a column (100 columns or more).
    reference: bool,
    time: u16,
    name: u16,
    status: u16,
    notifications: u16,
}

impl UpcomingColumns {
    const REF: u16 = 10;
    const PHONE: u16 = 15;

    fn for_rows(app: &App, rows: &[UpcomingRow], width: u16, wide: bool) -> UpcomingColumns {
        let name = if wide { 16 } else { 10 };
        let time = rows
            .iter()
            .filter_map(|u| u.starts_at.map(|s| human_time(app, s).chars().count()))
            .chain([app.t.col_time.chars().count(), app.t.detail_none.chars().count()])
            .max()
            .unwrap_or(0) as u16;
        let status_max = if wide { 30 } else { 24 };
        let status = rows
            .iter()
            .map(|u| upcoming_status(app, u, needs_call(app, u)).chars().count())
            .chain([app.t.col_status.chars().count()])
            .max()
            .unwrap_or(0)
            .min(status_max) as u16;
        let reference = width >= 100;
        let fixed = time + name + Self::PHONE + status + if reference { Self::REF } else { 0 };
        let gaps = if reference { 5 } else { 4 };
        let notifications = width.saturating_sub(2 + fixed + gaps);
        UpcomingColumns {
            reference,
            time,
            name,
            status,
            notifications,
        }
    }

    fn widths(&self) -> Vec<Constraint> {
        let mut w = vec![Constraint::Length(self.time)];
        if self.reference {
            w.push(Constraint::Length(Self::REF));
        }
        w.extend([
            Constraint::Length(self.name),
            Constraint::Length(Self::PHONE),
            Constraint::Length(self.status),
            Constraint::Fill(1),
        ]);
        w
    }
}

/// Words of `parts` joined by ` · ` while they fit `width` whole.
fn fit_parts(parts: &[&str], width: usize) -> String {
    let mut out = String::new();
    for p in parts {
        let next = if out.is_empty() {
            p.to_string()
        } else {
            format!("{out} · {p}")
        };
        if next.chars().count() <= width {
            out = next;
        }
    }
    out
}

/// Items (`purpose:state`) joined by spaces while they fit `width` whole,
/// then `+N` for the ones left out. When not even the first fits, its
/// state alone stands for it (`entregada +1`).
fn fit_items(items: &[(String, String)], width: usize) -> String {
    let whole = |(p, s): &(String, String)| format!("{p}:{s}");
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let left = items.len() - i - 1;
        let more = if left > 0 { format!(" +{left}") } else { String::new() };
        let next = if out.is_empty() {
            whole(item)
        } else {
            format!("{out} {}", whole(item))
        };
        if next.chars().count() + more.chars().count() <= width {
            out = next;
            continue;
        }
        let rest = items.len() - i;
        return if out.is_empty() {
            let more = if rest > 1 {
                format!(" +{}", rest - 1)
            } else {
                String::new()
            };
            format!("{}{more}", item.1)
        } else {
            format!("{out} +{rest}")
        };
    }
    out
}

/// One Próximas row; its status in the warning colour when the desk
/// should call.
fn upcoming_row(app: &App, u: &UpcomingRow, cols: &UpcomingColumns) -> Row<'static> {
    let t = app.t;
    let when = u
        .starts_at
        .map(|s| human_time(app, s))
        .unwrap_or_else(|| t.detail_none.into());
    let call = needs_call(app, u);
    let style = if call {
        Style::new().fg(app.palette.warn)
    } else {
        Style::new()
    };
    let mut cells = vec![Cell::from(when)];
    if cols.reference {
        cells.push(Cell::from(inert(&u.commitment_ref).into_owned()));
    }
    let status = upcoming_status(app, u, call);
    let status_parts: Vec<&str> = status.split(" · ").collect();
    cells.extend([
        Cell::from(
            u.name
                .as_deref()
                .map(|n| short_name(&inert(n), cols.name as usize))
                .unwrap_or_default(),
        ),
        Cell::from(inert(&u.phone.as_deref().map(mask_phone).unwrap_or_default()).into_owned()),
        Cell::from(fit_parts(&status_parts, cols.status as usize)).style(style),
        Cell::from(fit_items(&notification_items(app, u), cols.notifications as usize)),
    ]);
    Row::new(cells)
}

/// The commitment's status (an order's own word), then whether the desk
/// should call and whether a reschedule was asked for.
pub(super) fn upcoming_status(app: &App, u: &UpcomingRow, call: bool) -> String {
    let t = app.t;
    let status = if u.status == CommitmentStatus::Cancelled {
        t.cancelled_appt
    } else if u.manual_contact_at.is_some() {
        t.manual_contact_done
    } else if u.confirmed_at.is_some() {
        t.confirmed
    } else if u.kind == CommitmentKind::Appointment {
        t.scheduled
    } else {
        ""
    };
    let mut status = if u.kind == CommitmentKind::Order {
        u.status.as_str().to_string()
    } else {
        status.to_string()
    };
    if call {
        status = format!("{status} · {}", t.needs_call);
    }
    if u.reschedule_requested_at.is_some() {
        status = format!("{status} · {}", t.reschedule_request);
    }
    status
}

/// The notifications of the current version (all of an order's, and every
/// resend, marked `↻`): short purpose and state each.
fn notification_items(app: &App, u: &UpcomingRow) -> Vec<(String, String)> {
    u.notifications
        .iter()
        .filter(|n| n.version == u.version || n.is_resend || u.kind == CommitmentKind::Order)
        .map(|n| {
            let p = short_purpose(&n.purpose);
            let p = p.strip_prefix("record. ").unwrap_or(&p).to_string();
            (
                format!("{}{}", if n.is_resend { "↻" } else { "" }, inert(&p)),
                inert(app.t.state(&n.state)).into_owned(),
            )
        })
        .collect()
}
