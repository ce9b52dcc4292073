//! The Tablero's counters, in display order, from the day's board and
//! figures.

use super::*;

/// One Tablero counter and the rows behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardItem {
    pub label: String,
    pub value: String,
    pub query: Option<CounterQuery>,
}

impl App {
    /// The Tablero's counters in display order.
    pub fn board_items(&self) -> Vec<BoardItem> {
        let Some(b) = &self.board else { return Vec::new() };
        let t = self.t;
        let count = |states: &[&str]| -> i64 {
            b.by_state
                .iter()
                .filter(|(s, _)| states.contains(&s.as_str()))
                .map(|(_, n)| n)
                .sum()
        };
        let q = |states: &[&str], reason: Option<&str>| {
            Some(CounterQuery {
                day: b.day,
                states: states.iter().map(|s| s.to_string()).collect(),
                reason: reason.map(str::to_string),
            })
        };
        let mut items = Vec::new();
        for (label, states) in [
            (t.board_planned, &["planned"][..]),
            (t.board_uncertain, &["uncertain"][..]),
            (t.board_review, &["review"][..]),
            (t.board_failed, &["failed"][..]),
            (t.board_in_flight, &["dispatching", "accepted", "sent"][..]),
            // A funnel, not exclusive states: a message read was
            // delivered, so "Entregadas" counts it too (delivered ≥ read).
            (t.board_delivered, &["delivered", "read"][..]),
            (t.board_read, &["read"][..]),
        ] {
            items.push(BoardItem {
                label: label.to_string(),
                value: count(states).to_string(),
                query: q(states, None),
            });
        }
        for (reason, n) in &b.closures {
            items.push(BoardItem {
                label: format!("{} {}", t.board_cancelled_by, t.reason(reason)),
                value: n.to_string(),
                query: q(&["cancelled"], Some(reason)),
            });
        }
        items.push(BoardItem {
            label: t.board_dup_keys.into(),
            value: b.duplicate_keys.to_string(),
            query: None,
        });
        items.push(BoardItem {
            label: t.board_dup_events.into(),
            value: b.duplicate_events.to_string(),
            query: None,
        });
        items.push(BoardItem {
            label: t.board_opt_outs.into(),
            value: b.opt_outs.to_string(),
            query: None,
        });
        // The day's figures count every acceptance; the board's own is a
        // sample, shown only until they arrive.
        let (p50, p95) = match &self.board_day {
            Some(d) => (d.latency_p50_ms, d.latency_p95_ms),
            None => (b.latency_ms_median, b.latency_ms_p95),
        };
        let latency = match (p50, p95) {
            // The sample's size is on the latency chart.
            (Some(p50), Some(p95)) => format!("{} · p95 {}", duration_text(p50), duration_text(p95)),
            _ => t.detail_none.to_string(),
        };
        items.push(BoardItem {
            label: t.board_latency.into(),
            value: latency,
            query: None,
        });
        items
    }
}

/// A latency in the unit that reads best: `850 ms`, `4.2 s`, `3.5 min`,
/// `1.2 h`.
pub fn duration_text(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..120_000 => format!("{:.1} s", ms as f64 / 1_000.0),
        120_000..7_200_000 => format!("{:.1} min", ms as f64 / 60_000.0),
        _ => format!("{:.1} h", ms as f64 / 3_600_000.0),
    }
}
