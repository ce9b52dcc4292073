//! What the alerts measure (`domain::alert`), read in one snapshot: the
//! console's header, `/metrics` and the Prometheus rules judge the same
//! numbers. Every figure is served by an index or a derived table, so the
//! read stays cheap at a million intentions and can run on every refresh.

use chrono::{DateTime, Duration, Utc};

use super::attention::{REFUSED_FROM, RowKind, covered_sql};
use super::console::PLANNED_DUE;
use super::{Result, Tx, ms};
use crate::domain::alert::{BlockedTemplate, FeedHealth, Measures};

impl Tx<'_> {
    /// The alerts' measures at `now`. An intention counts as due but unsent
    /// once it has been claimable (due, and past any retry or deferral
    /// time) for longer than `due_grace`. Review intentions and refused
    /// events count while no mark "atendido" covers them (a person already
    /// looked); uncertain ones count whatever the marks say, because the
    /// reconciler, not the desk, settles them.
    pub fn alert_measures(&self, now: DateTime<Utc>, due_grace: Duration) -> Result<Measures> {
        let sql = format!(
            "SELECT
                 (SELECT min(state_changed_at) FROM intentions WHERE state = 'uncertain'),
                 CAST((SELECT coalesce(sum(n), 0) FROM intention_counts WHERE state = 'review') AS BIGINT)
                   - (SELECT count(*) FROM attention_handled h JOIN intentions i ON i.id = h.subject_id
                      WHERE h.kind = 'intention' AND i.state = 'review' AND h.situation_at = i.state_changed_at),
                 (SELECT count(*) FROM intentions WHERE {PLANNED_DUE}
                      AND (next_attempt_at IS NULL OR next_attempt_at <= ?1)),
                 (SELECT count(*) {REFUSED_FROM} AND NOT {covered})",
            covered = covered_sql(RowKind::RefusedEvent, "r.id", "r.last_seen_at"),
        );
        let claimable_since = ms(now - due_grace);
        let (oldest, review, due_unsent, refused_events) = self
            .db()
            .row(&sql, &crate::vals![claimable_since], |r| {
                Ok((r.opt_time(0)?, r.int(1)?, r.int(2)?, r.int(3)?))
            })?
            .unwrap_or_default();
        let blocked_templates = self
            .blocked_templates()?
            .into_iter()
            .map(|(name, language, status, held)| BlockedTemplate {
                name,
                language,
                status,
                held,
            })
            .collect();
        Ok(Measures {
            oldest_uncertain_since: oldest,
            review: review.max(0),
            due_unsent,
            refused_events,
            blocked_templates,
            // Read from the heartbeat rows by whoever reads them too.
            paused_channels: Vec::new(),
            // Known to whoever runs the backups (`serve`), not stored.
            backup: None,
            feeds: self
                .feeds()?
                .into_iter()
                .map(|f| FeedHealth {
                    name: f.name,
                    failing_since: f.failing_since,
                    held: f.held,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
#[path = "alerts_tests.rs"]
mod tests;
