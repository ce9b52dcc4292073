//! Atención, the front desk's work queue: the open cases, the day's handled
//! ones, the marks "atendido" and the patient search.
//!
//! Which intentions are cases is the domain's rule
//! ([`AttentionRule`]); every SQL predicate here is *built from* its
//! clauses by [`rule_sql`], once, and used by the page, the walk and the
//! totals alike. Whether a mark still covers its case is
//! [`crate::domain::attention::handled_covers`], written once as
//! [`covered_sql`]. The page is computed from candidates, never from the
//! whole attention set (migration 0002's `intentions_attention`), and a
//! search goes through the trigram index `commitment_search` (0006).

use chrono::{DateTime, Utc};
use rusqlite::{Row, ToSql, params, params_from_iter};
use serde::Serialize;

use super::{Page, Result, Tx, from_ms, ms};
use crate::domain::attention::{AttentionRule, Clause};

/// What an attention row is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// An intention that needs a person (uncertain, review, failed, stuck).
    Intention,
    /// The customer asked to reschedule the commitment.
    RescheduleRequest,
    /// A booking event refused as a conflict (same version, other content),
    /// not yet settled by a newer version: a technician must look.
    RefusedEvent,
}

impl RowKind {
    /// The `attention_handled.kind` of a case of this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            RowKind::Intention => "intention",
            RowKind::RescheduleRequest => "reschedule",
            RowKind::RefusedEvent => "refused",
        }
    }
}

/// Who marked a case handled, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandledMark {
    pub at: DateTime<Utc>,
    pub operator: String,
    pub action_id: i64,
}

/// One row of the Atención list or of a Tablero drill-down.
#[derive(Debug, Clone, Serialize)]
pub struct AttentionRow {
    pub kind: RowKind,
    pub intention_id: Option<i64>,
    pub key: Option<String>,
    /// What the row is about, whatever its kind: the intention, the
    /// commitment (reschedule request) or the refused event.
    pub subject_id: i64,
    pub commitment_id: i64,
    pub commitment_ref: String,
    /// The patient's (customer's) name, when the booking system gave one.
    pub name: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    /// Raw E.164; the console masks it before showing it.
    pub phone: Option<String>,
    /// The intention's purpose, or the refused event's type; empty for a
    /// reschedule request.
    pub purpose: String,
    /// The intention state, or `stuck` for a dispatch whose lease expired,
    /// `reschedule` for a reschedule request, `refused_event` for a refused
    /// booking event (then `purpose` is the event's type, `state_reason`
    /// the refusal and `last_event` its event id and the refusal).
    pub state: String,
    pub state_reason: Option<String>,
    /// Since when the row is in this situation.
    pub since: DateTime<Utc>,
    /// History rows that carry evidence (channel, webhook, reconciler or
    /// operator facts).
    pub evidence_count: i64,
    /// The latest history row, as `signal (cause): note`.
    pub last_event: Option<String>,
    /// The latest mark "atendido": covering the case in the handled view,
    /// outgrown by news (the case reopened) in the open view.
    pub handled: Option<HandledMark>,
}

/// A mark "atendido" to record.
#[derive(Debug, Clone, Copy)]
pub struct NewMark<'a> {
    pub kind: RowKind,
    pub subject_id: i64,
    /// The case's situation right after the action.
    pub situation: Option<DateTime<Utc>>,
    pub operator: &'a str,
    pub action_id: i64,
}

/// A case's commitment and since when it is in its situation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseInfo {
    pub commitment_id: i64,
    pub commitment_ref: String,
    pub since: Option<DateTime<Utc>>,
}

/// Open cases, or the ones handled since a moment (the day's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionView {
    Open,
    HandledSince(DateTime<Utc>),
}

/// The Atención query's parameters.
#[derive(Debug, Clone)]
pub struct AttentionQuery {
    pub now: DateTime<Utc>,
    pub rule: AttentionRule,
    /// A patient search: name, reference, key or the phone's last digits.
    /// Three characters or more go through the trigram index; shorter ones
    /// are matched without it.
    pub filter: Option<String>,
    pub view: AttentionView,
    pub limit: u32,
    pub offset: u32,
}

impl AttentionQuery {
    pub fn new(now: DateTime<Utc>) -> Self {
        AttentionQuery {
            now,
            rule: AttentionRule::default(),
            filter: None,
            view: AttentionView::Open,
            limit: 50,
            offset: 0,
        }
    }
}

pub(super) const EVIDENCE_SIGNALS: &str = "('accepted','sent','delivered','read','failed')";

/// The latest history row of intention `i`, as `signal (cause): note`.
pub(super) const LAST_EVENT: &str =
    "(SELECT h.signal || ' (' || h.cause || ')' || coalesce(': ' || coalesce(h.evidence, h.note), '')
        FROM intention_history h WHERE h.intention_id = i.id ORDER BY h.id DESC LIMIT 1)";

/// Evidence rows of intention `{i}`.
fn evidence_sql(i: &str) -> String {
    format!(
        "(SELECT count(*) FROM intention_history h WHERE h.intention_id = {i}
            AND (h.evidence IS NOT NULL OR h.signal IN {EVIDENCE_SIGNALS}))"
    )
}

/// One clause of the rule over intention `i`. Parameters: `?1` now (ms),
/// `?2` the earliest due time a failure stays on the desk.
fn clause_sql(c: Clause) -> String {
    match c {
        Clause::Always(s) => format!("i.state = '{s}'"),
        Clause::DueWithinWindow(s) => format!("(i.state = '{s}' AND i.due_at >= ?2)"),
        Clause::LeaseExpired(s) => format!("(i.state = '{s}' AND i.lease_until < ?1)"),
    }
}

/// The rule's clauses selected by `pick`, as one predicate over `i`.
fn rule_sql(rule: &AttentionRule, pick: impl Fn(&Clause) -> bool) -> String {
    let parts: Vec<String> = rule
        .clauses()
        .iter()
        .copied()
        .filter(|c| pick(c))
        .map(clause_sql)
        .collect();
    if parts.is_empty() {
        return "0".into();
    }
    format!("({})", parts.join(" OR "))
}

/// Clauses served by the partial index `intentions_attention` (every
/// clause but expired leases, which `intentions_lease` serves).
fn walked(c: &Clause) -> bool {
    !matches!(c, Clause::LeaseExpired(_))
}

/// `i.state IN (…)` for the walked clauses: the literal term the partial
/// index's `WHERE` needs to be usable (`INDEXED BY` makes a mismatch an
/// error, not a slow query).
fn walked_states(rule: &AttentionRule) -> String {
    let states: Vec<String> = rule
        .clauses()
        .iter()
        .filter(|c| walked(c))
        .map(|c| format!("'{}'", c.state()))
        .collect();
    format!("i.state IN ({})", states.join(", "))
}

/// A mark covers its case while the situation is the one it was made on
/// (`domain::attention::handled_covers`), for mark `h`.
fn covers_sql(since: &str) -> String {
    format!("h.situation_at = {since}")
}

/// A covering mark of `kind` on `subject` exists.
pub(super) fn covered_sql(kind: RowKind, subject: &str, since: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM attention_handled h WHERE h.kind = '{}' AND h.subject_id = {subject}
            AND {})",
        kind.as_str(),
        covers_sql(since)
    )
}

/// Reschedule requests of commitment `c` in the window (`?3`..`?4`).
const RESCHED: &str = "c.starts_at BETWEEN ?3 AND ?4 AND c.reschedule_requested_at IS NOT NULL
    AND c.status != 'cancelled'";

/// Refused events `r` not settled by a newer version of commitment `c`.
pub(super) const REFUSED_FROM: &str = "FROM refused_events r JOIN commitments c ON c.ref = r.commitment_ref
    WHERE c.version <= r.version";

/// Display columns for a page of keys `p(kind, iid, sid, cid, starts, ev)`.
pub(super) fn page_sql(keys: &str, order: &str) -> String {
    format!(
        "SELECT p.kind, i.id, i.key, p.sid, c.id, c.ref, coalesce(c.contact_name, k.name), c.starts_at,
            coalesce(i.recipient, k.phone), coalesce(i.purpose, r.type, ''),
            CASE WHEN p.kind = 'reschedule' THEN 'reschedule' WHEN p.kind = 'refused' THEN 'refused_event'
                 WHEN i.state = 'dispatching' THEN 'stuck' ELSE i.state END,
            coalesce(i.state_reason, r.reason),
            coalesce(i.state_changed_at, r.last_seen_at, c.reschedule_requested_at), p.ev,
            coalesce({LAST_EVENT}, r.event_id || ': ' || r.reason),
            m.handled_at, m.operator, m.action_id
         FROM ({keys}) p
         JOIN commitments c ON c.id = p.cid
         LEFT JOIN intentions i ON i.id = p.iid AND p.kind = 'intention'
         LEFT JOIN refused_events r ON r.id = p.iid AND p.kind = 'refused'
         LEFT JOIN contacts k ON k.id = c.contact_id
         LEFT JOIN attention_handled m ON m.kind = p.kind AND m.subject_id = p.sid
         {order}"
    )
}

pub(super) fn attention_row(r: &Row<'_>) -> rusqlite::Result<AttentionRow> {
    let kind: String = r.get(0)?;
    let handled = match r.get::<_, Option<i64>>(15)? {
        Some(at) => Some(HandledMark {
            at: from_ms(at),
            operator: r.get(16)?,
            action_id: r.get(17)?,
        }),
        None => None,
    };
    Ok(AttentionRow {
        kind: match kind.as_str() {
            "reschedule" => RowKind::RescheduleRequest,
            "refused" => RowKind::RefusedEvent,
            _ => RowKind::Intention,
        },
        intention_id: r.get(1)?,
        key: r.get(2)?,
        subject_id: r.get(3)?,
        commitment_id: r.get(4)?,
        commitment_ref: r.get(5)?,
        name: r.get(6)?,
        starts_at: r.get::<_, Option<i64>>(7)?.map(from_ms),
        phone: r.get(8)?,
        purpose: r.get(9)?,
        state: r.get(10)?,
        state_reason: r.get(11)?,
        since: from_ms(r.get(12)?),
        evidence_count: r.get(13)?,
        last_event: r.get(14)?,
        handled,
    })
}

/// The page's keys `p(kind, iid, sid, cid, starts, ev)` for intentions
/// `i` (with commitment `c`) selected by `cond`, in the attention shape.
pub(super) fn intention_keys(from_where: &str) -> String {
    format!(
        "SELECT 'intention' AS kind, i.id AS iid, i.id AS sid, c.id AS cid, c.starts_at AS starts,
            {ev} AS ev {from_where}",
        ev = evidence_sql("i.id")
    )
}

/// Nearest upcoming commitment first, then the most recent past ones, then
/// the least evidence.
const ORDER: &str = "ORDER BY CASE WHEN p.starts IS NULL THEN 2 WHEN p.starts >= ?1 THEN 0 ELSE 1 END,
    CASE WHEN p.starts >= ?1 THEN p.starts ELSE -p.starts END, p.ev, p.iid";

/// A patient search, split for the index: the trigram phrase (the text
/// before a `:`, which is the reference part of a key), the key pattern
/// when a key was typed, and a plain pattern for short text and refused
/// events' ids.
pub(super) struct Search {
    /// `"…"`: an FTS5 phrase; `None` when the text is too short for
    /// trigrams (then `like` matches without the index).
    phrase: Option<String>,
    like: String,
    key_like: Option<String>,
}

impl Search {
    pub(super) fn parse(filter: Option<&str>) -> Option<Search> {
        let text = filter.map(str::trim).filter(|f| !f.is_empty())?;
        let head = text.split(':').next().unwrap_or("").trim();
        Some(Search {
            phrase: (head.chars().count() >= 3).then(|| format!("\"{}\"", head.replace('"', "\"\""))),
            like: format!("%{head}%"),
            key_like: text.contains(':').then(|| format!("%{text}%")),
        })
    }

    /// Commitments the search matches, as `SELECT cid`: `?5` the phrase
    /// or pattern.
    pub(super) fn commitments_sql(&self) -> &'static str {
        if self.phrase.is_some() {
            "SELECT rowid AS cid FROM commitment_search WHERE commitment_search MATCH ?5"
        } else {
            "SELECT c.id AS cid FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id
             WHERE c.ref LIKE ?5 OR coalesce(c.contact_name, k.name) LIKE ?5 OR substr(k.phone, -4) LIKE ?5"
        }
    }

    pub(super) fn arg(&self) -> &str {
        self.phrase.as_deref().unwrap_or(&self.like)
    }
}

impl Tx<'_> {
    /// The Atención list: the rule's open cases (uncertain, review,
    /// recently failed and stuck intentions, reschedule requests, unsettled
    /// refused booking events) that no mark covers, or the cases handled
    /// since a moment; optionally only a searched patient's.
    pub fn attention(&self, q: &AttentionQuery) -> Result<Page<AttentionRow>> {
        let search = Search::parse(q.filter.as_deref());
        let (keys, total) = match (q.view, &search) {
            (AttentionView::HandledSince(_), s) => handled_sql(s.as_ref()),
            (AttentionView::Open, Some(s)) => searched_open_sql(&q.rule, s),
            (AttentionView::Open, None) => open_sql(&q.rule),
        };
        let order = match q.view {
            AttentionView::Open => ORDER,
            AttentionView::HandledSince(_) => "ORDER BY p.hat DESC, p.sid DESC",
        };
        let page = page_sql(&format!("SELECT * FROM ({keys}) p {order} LIMIT ?6 OFFSET ?7"), order);
        let since = match q.view {
            AttentionView::HandledSince(t) => Some(ms(t)),
            AttentionView::Open => None,
        };
        let now = ms(q.now);
        let failed_since = ms(q.rule.failed_since(q.now));
        let window = q.rule.reschedule_window;
        let (lo, hi) = (ms(q.now - window), ms(q.now + window));
        let arg = search.as_ref().map(|s| s.arg().to_string());
        let key_like = search.as_ref().and_then(|s| s.key_like.clone());
        let like = search.as_ref().map(|s| s.like.clone());
        let limit = if q.limit == 0 { 50 } else { q.limit };
        let values: [&dyn ToSql; 10] = [
            &now,
            &failed_since,
            &lo,
            &hi,
            &arg,
            &limit,
            &q.offset,
            &key_like,
            &since,
            &like,
        ];
        // Each statement numbers its parameters from the same list and uses
        // a prefix of it (SQLite counts up to the highest number used).
        let mut stmt = self.conn().prepare_cached(&page)?;
        let n = stmt.parameter_count();
        let rows = stmt
            .query_map(params_from_iter(&values[..n]), attention_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut stmt = self.conn().prepare_cached(&total)?;
        let n = stmt.parameter_count();
        let total: i64 = stmt.query_row(params_from_iter(&values[..n]), |r| r.get(0))?;
        Ok(Page {
            rows,
            total,
            offset: q.offset,
        })
    }

    /// Marks a case handled by an operator action (replacing an older
    /// mark), on the situation `situation` (see [`CaseInfo::since`]). The
    /// action itself is in `operator_actions`.
    pub fn mark_handled(&self, mark: &NewMark<'_>, at: DateTime<Utc>) -> Result<()> {
        self.conn().execute(
            "INSERT INTO attention_handled(kind, subject_id, handled_at, situation_at, operator, action_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(kind, subject_id) DO UPDATE SET handled_at = excluded.handled_at,
                 situation_at = excluded.situation_at, operator = excluded.operator,
                 action_id = excluded.action_id",
            params![
                mark.kind.as_str(),
                mark.subject_id,
                ms(at),
                mark.situation.map(ms),
                mark.operator,
                mark.action_id
            ],
        )?;
        Ok(())
    }

    /// A case's commitment and the moment its situation began (the
    /// intention's last state change, the reschedule request, the refused
    /// event's last sighting); `None` when there is no such case.
    pub fn case_info(&self, kind: RowKind, subject_id: i64) -> Result<Option<CaseInfo>> {
        use rusqlite::OptionalExtension;
        let sql = match kind {
            RowKind::Intention => {
                "SELECT c.id, c.ref, i.state_changed_at FROM intentions i JOIN commitments c ON c.id = i.commitment_id
                 WHERE i.id = ?1"
            }
            RowKind::RescheduleRequest => {
                "SELECT c.id, c.ref, c.reschedule_requested_at FROM commitments c WHERE c.id = ?1"
            }
            RowKind::RefusedEvent => {
                "SELECT c.id, c.ref, r.last_seen_at FROM refused_events r JOIN commitments c ON c.ref = r.commitment_ref
                 WHERE r.id = ?1"
            }
        };
        Ok(self
            .conn()
            .query_row(sql, [subject_id], |r| {
                Ok(CaseInfo {
                    commitment_id: r.get(0)?,
                    commitment_ref: r.get(1)?,
                    since: r.get::<_, Option<i64>>(2)?.map(from_ms),
                })
            })
            .optional()?)
    }

    /// The mark on a case, if any (covering or outgrown).
    pub fn handled_mark(&self, kind: RowKind, subject_id: i64) -> Result<Option<HandledMark>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn()
            .query_row(
                "SELECT handled_at, operator, action_id FROM attention_handled WHERE kind = ?1 AND subject_id = ?2",
                params![kind.as_str(), subject_id],
                |r| {
                    Ok(HandledMark {
                        at: from_ms(r.get(0)?),
                        operator: r.get(1)?,
                        action_id: r.get(2)?,
                    })
                },
            )
            .optional()?)
    }
}

/// Open cases without a search: rows that need a person are walked through
/// `intentions_attention` (a partial index by the commitment's start time),
/// upcoming ones ascending from `now`, past ones descending, and each walk
/// stops at the (offset + limit)-th row, keeping every row tied with it: a
/// row on the page has fewer than offset + limit rows strictly before it,
/// so it is a candidate of its own walk. Rows without a start time (all
/// tied) are only needed when the two walks together hold fewer rows than
/// that. Stuck dispatches, reschedule requests and refused events are few
/// and always candidates. Only then is evidence counted, for the
/// candidates alone. Returns the keys and the total's SQL.
fn open_sql(rule: &AttentionRule) -> (String, String) {
    let open_i = format!("NOT {}", covered_sql(RowKind::Intention, "i.id", "i.state_changed_at"));
    let walk = format!("{} AND {} AND {open_i}", walked_states(rule), rule_sql(rule, walked));
    let stuck = format!("{} AND {open_i}", rule_sql(rule, |c| !walked(c)));
    let (resched, refused) = open_others();
    let keys = format!(
        "WITH att AS NOT MATERIALIZED (
             SELECT i.id AS iid, i.commitment_id AS cid, i.starts_at AS s
             FROM intentions i INDEXED BY intentions_attention WHERE {walk}),
         up AS MATERIALIZED (SELECT * FROM att WHERE s >= ?1 AND s <= coalesce(
             (SELECT s FROM att WHERE s >= ?1 ORDER BY s LIMIT 1 OFFSET ?6 + ?7 - 1), 9223372036854775807)),
         past AS MATERIALIZED (SELECT * FROM att WHERE s < ?1 AND s >= coalesce(
             (SELECT s FROM att WHERE s < ?1 ORDER BY s DESC LIMIT 1 OFFSET ?6 + ?7 - 1), -9223372036854775808)),
         cand AS (
             SELECT iid, cid, s FROM up
             UNION ALL SELECT iid, cid, s FROM past
             UNION ALL SELECT iid, cid, s FROM att
                 WHERE s IS NULL AND (SELECT count(*) FROM up) + (SELECT count(*) FROM past) < ?6 + ?7
             UNION ALL SELECT i.id, i.commitment_id, i.starts_at FROM intentions i WHERE {stuck})
         SELECT 'intention' AS kind, iid, iid AS sid, cid, s AS starts, {ev} AS ev FROM cand
         UNION ALL SELECT 'reschedule', NULL, c.id, c.id, c.starts_at, 0 FROM commitments c WHERE {resched}
         UNION ALL SELECT 'refused', r.id, r.id, c.id, c.starts_at, 0 {REFUSED_FROM} AND {refused}",
        ev = evidence_sql("cand.iid")
    );
    // The total never walks the attention set row by row: each clause is
    // counted from what serves it (`intention_counts` for whole states,
    // index ranges for the others), less the covering marks of cases the
    // rule names (marks are few: one per handled case).
    let clause_counts: Vec<String> = rule.clauses().iter().map(|c| clause_count_sql(*c)).collect();
    let total = format!(
        "SELECT {clauses}
              - (SELECT count(*) FROM attention_handled h JOIN intentions i ON i.id = h.subject_id
                 WHERE h.kind = 'intention' AND {covers} AND {all})
              + (SELECT count(*) FROM commitments c WHERE {resched})
              + (SELECT count(*) {REFUSED_FROM} AND {refused})",
        clauses = clause_counts.join(" + "),
        covers = covers_sql("i.state_changed_at"),
        all = rule_sql(rule, |_| true),
    );
    (keys, total)
}

/// How many intentions one clause names, from what serves it.
fn clause_count_sql(c: Clause) -> String {
    match c {
        Clause::Always(s) => format!("(SELECT coalesce(sum(n), 0) FROM intention_counts WHERE state = '{s}')"),
        Clause::DueWithinWindow(_) | Clause::LeaseExpired(_) => {
            format!("(SELECT count(*) FROM intentions i WHERE {})", clause_sql(c))
        }
    }
}

/// The open-case conditions of reschedule requests (on `c`) and refused
/// events (on `r`).
fn open_others() -> (String, String) {
    let resched = format!(
        "{RESCHED} AND NOT {}",
        covered_sql(RowKind::RescheduleRequest, "c.id", "c.reschedule_requested_at")
    );
    let refused = format!("NOT {}", covered_sql(RowKind::RefusedEvent, "r.id", "r.last_seen_at"));
    (resched, refused)
}

/// Open cases of the searched patients: from the matching commitments
/// (few, through the trigram index) to their intentions
/// (`intentions_commitment`), then the rule; no walk is needed. `CROSS
/// JOIN` fixes that order: left to itself SQLite walks every intention the
/// rule names (thousands at a million) and probes the matches.
fn searched_open_sql(rule: &AttentionRule, s: &Search) -> (String, String) {
    let open_i = format!("NOT {}", covered_sql(RowKind::Intention, "i.id", "i.state_changed_at"));
    let (resched, refused) = open_others();
    let m = s.commitments_sql();
    let cases = format!(
        "WITH m AS MATERIALIZED ({m})
         SELECT 'intention' AS kind, i.id AS iid, i.id AS sid, c.id AS cid, c.starts_at AS starts,
             {ev} AS ev
         FROM m CROSS JOIN commitments c ON c.id = m.cid CROSS JOIN intentions i ON i.commitment_id = c.id
         WHERE {rule} AND {open_i} AND (?8 IS NULL OR i.key LIKE ?8)
         UNION ALL SELECT 'reschedule', NULL, c.id, c.id, c.starts_at, 0
             FROM m JOIN commitments c ON c.id = m.cid WHERE {resched} AND ?8 IS NULL
         UNION ALL SELECT 'refused', r.id, r.id, c.id, c.starts_at, 0 {REFUSED_FROM} AND {refused}
             AND (c.id IN (SELECT cid FROM m) OR r.event_id LIKE ?10 OR r.event_id LIKE ?8)",
        ev = evidence_sql("i.id"),
        rule = rule_sql(rule, |_| true)
    );
    let total = format!("SELECT count(*) FROM ({cases})");
    (cases, total)
}

/// Cases handled since `?9` whose mark still covers them (nothing new
/// since), newest mark first; optionally only a searched patient's.
fn handled_sql(s: Option<&Search>) -> (String, String) {
    let matched = match s {
        Some(s) => format!("AND p.cid IN ({})", s.commitments_sql()),
        None => String::new(),
    };
    let keys = format!(
        "SELECT * FROM (
            SELECT 'intention' AS kind, i.id AS iid, i.id AS sid, i.commitment_id AS cid, i.starts_at AS starts,
                {ev} AS ev, h.handled_at AS hat
            FROM attention_handled h JOIN intentions i ON i.id = h.subject_id
            WHERE h.kind = 'intention' AND h.handled_at >= ?9 AND {cov_i} AND (?8 IS NULL OR i.key LIKE ?8)
            UNION ALL SELECT 'reschedule', NULL, c.id, c.id, c.starts_at, 0, h.handled_at
            FROM attention_handled h JOIN commitments c ON c.id = h.subject_id
            WHERE h.kind = 'reschedule' AND h.handled_at >= ?9 AND {cov_c}
            UNION ALL SELECT 'refused', r.id, r.id, c.id, c.starts_at, 0, h.handled_at
            FROM attention_handled h JOIN refused_events r ON r.id = h.subject_id
                JOIN commitments c ON c.ref = r.commitment_ref
            WHERE h.kind = 'refused' AND h.handled_at >= ?9 AND {cov_r}) p
         WHERE 1 {matched}",
        ev = evidence_sql("i.id"),
        cov_i = covers_sql("i.state_changed_at"),
        cov_c = covers_sql("c.reschedule_requested_at"),
        cov_r = covers_sql("r.last_seen_at"),
    );
    let total = format!("SELECT count(*) FROM ({keys})");
    (keys, total)
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
