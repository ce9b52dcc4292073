//! Atención, the front desk's work queue: the open cases, the day's handled
//! ones, the marks "atendido" and the patient search.
//!
//! Which intentions are cases is the domain's rule
//! ([`AttentionRule`]); every SQL predicate here is *built from* its
//! clauses by [`rule_sql`] (the index walk's by [`walked_sql`], the same
//! clauses in the form the planners estimate well) and used by the page,
//! the walk and the totals alike. Whether a mark still covers its case is
//! [`crate::domain::attention::handled_covers`], written once as
//! [`covered_sql`]. The page is computed from candidates, never from the
//! whole attention set (migration 0002's `intentions_attention`), and a
//! search starts from the commitments the search indexes find
//! (`store/search.rs`).

use chrono::{DateTime, Utc};

use serde::Serialize;

use unavez_core::search::{Country, PatientQuery};

use super::search::{Matches, fuzzy_rank_sql};
use super::{Page, Result, Tx, ms};
use crate::domain::attention::{AttentionRule, Clause, Situation};
use crate::rows::Cols;
use crate::rules_sql::{EVIDENCE_SIGNALS, RESEND_ASK_ACTIONS, SHOWN_STATE, Sql, TECHNICIAN_EVENTS};
use crate::vals;

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
    /// A channel event parked (its key and message id name two
    /// intentions) or refused (another engine instance's): applied to
    /// nothing; technicians only.
    ChannelEvent,
}

impl RowKind {
    /// The `attention_handled.kind` of a case of this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            RowKind::Intention => "intention",
            RowKind::RescheduleRequest => "reschedule",
            RowKind::RefusedEvent => "refused",
            RowKind::ChannelEvent => "channel_event",
        }
    }

    fn parse(kind: &str) -> RowKind {
        match kind {
            "reschedule" => RowKind::RescheduleRequest,
            "refused" => RowKind::RefusedEvent,
            "channel_event" => RowKind::ChannelEvent,
            _ => RowKind::Intention,
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
    /// commitment (reschedule request), the refused event or the channel
    /// event.
    pub subject_id: i64,
    /// `None` (and an empty `commitment_ref`) for a channel event whose key
    /// names no intention of this ledger (another installation's).
    pub commitment_id: Option<i64>,
    pub commitment_ref: String,
    /// The patient's (customer's) name, when the booking system gave one.
    pub name: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    /// Raw E.164; the console masks it before showing it.
    pub phone: Option<String>,
    /// The intention's purpose, or the refused event's type; empty for a
    /// reschedule request.
    pub purpose: String,
    /// What the row shows, typed by core's [`Situation`]: the intention
    /// state, or `Stuck` for a dispatch whose lease expired, `Unconfirmed`
    /// for an acknowledged message without news (`Clause::Unconfirmed`),
    /// `Reschedule` for a reschedule request, `RefusedEvent` for a refused
    /// booking event (then `purpose` is the event's type, `state_reason`
    /// the refusal and `last_event` its event id and the refusal), a
    /// channel event's status for a channel event (then `purpose` is
    /// `source:kind`, `state_reason` its reason code and `last_event`
    /// `source:event_id`).
    pub state: Situation,
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
    // --- issue 25 §3: what the guards read for the row's hint ---
    /// The commitment's status (`cancelled`, ...), its confirmation and
    /// kind: the hint depends on them.
    pub commitment_status: Option<String>,
    pub confirmed: bool,
    pub appointment: bool,
    /// The latest answered-or-open resend request on the intention, as
    /// `action:operator:reason` (`request_resend`, `decline_resend` or
    /// `authorize_resend`).
    pub resend_ask: Option<String>,
    /// The intention's resend family, as the resend guard reads it (a
    /// pending resend, the day's count); `None` for other kinds of row.
    /// Filled for the whole page by [`Tx::fill_families`].
    pub family: Option<crate::domain::guard::Family>,
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
    /// `None` (and an empty ref) for a channel event of no commitment here.
    pub commitment_id: Option<i64>,
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
    /// Include parked and refused channel events (a technician's cases).
    pub channel_events: bool,
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
            channel_events: false,
            limit: 50,
            offset: 0,
        }
    }
}

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

/// What a clause asks of intention `i` beyond its state (`None`: the state
/// alone). Parameters: `?1` now (ms), `?2` the earliest due time a failure
/// stays on the desk, `?12` the latest news an unconfirmed message can
/// have had.
fn clause_condition(c: Clause) -> Option<&'static str> {
    match c {
        Clause::Always(_) => None,
        Clause::DueWithinWindow(_) => Some("i.due_at >= ?2"),
        Clause::LeaseExpired(_) => Some("i.lease_until < ?1"),
        Clause::Unconfirmed(_) => Some("i.due_at >= ?2 AND i.state_changed_at <= ?12"),
    }
}

/// One clause of the rule over intention `i`.
fn clause_sql(c: Clause) -> String {
    match clause_condition(c) {
        None => format!("i.state = '{}'", c.state()),
        Some(cond) => format!("(i.state = '{}' AND {cond})", c.state()),
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
        return "1 = 0".into();
    }
    format!("({})", parts.join(" OR "))
}

/// Clauses served by the partial index `intentions_attention` (every
/// clause but expired leases, which `intentions_lease` serves, and
/// unconfirmed messages, few and found by `intentions_state_due`).
fn walked(c: &Clause) -> bool {
    matches!(c, Clause::Always(_) | Clause::DueWithinWindow(_))
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

/// The walked clauses as one predicate over `i`: [`walked_states`], then
/// `(i.state <> 's' OR condition)` for each walked clause that asks more
/// than its state. Each walked state has one clause (checked by the
/// tests), so this is `rule_sql(rule, walked)` written without a term that
/// repeats another: PostgreSQL takes `state IN (…)` and an OR over the
/// same states for independent filters, multiplies their selectivities,
/// expects a few dozen cases where there are thousands, and sorts the
/// whole attention set instead of walking the index for a page's worth.
fn walked_sql(rule: &AttentionRule) -> String {
    let mut sql = walked_states(rule);
    for c in rule.clauses().iter().copied().filter(walked) {
        if let Some(cond) = clause_condition(c) {
            sql.push_str(&format!(" AND (i.state <> '{}' OR {cond})", c.state()));
        }
    }
    sql
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

/// Channel events `e` that are technicians' cases: parked or refused, and
/// received since `?11` (`NULL`: channel events are not asked for). Its
/// status term is the predicate of the partial index
/// `channel_events_parked` (`rules_sql`'s tests).
pub(super) static EVENTS_FROM: Sql = Sql::new(|| {
    format!(
        "FROM channel_events e
    LEFT JOIN intentions ei ON ei.key = e.intention_key
    LEFT JOIN commitments c ON c.id = ei.commitment_id
    WHERE e.status IN {TECHNICIAN_EVENTS} AND CAST(?11 AS BIGINT) IS NOT NULL AND e.received_at >= ?11"
    )
});

/// The latest resend request, decline or authorization done on intention
/// `i`, as `action:operator:reason` (issue 25 §3; see `unavez_app::ops`'s
/// `request.rs`).
pub static RESEND_ASK: Sql = Sql::new(|| {
    format!(
        "(SELECT a.action || ':' || a.operator || ':' || a.reason FROM operator_actions a
        WHERE a.intention_id = i.id AND a.result = 'done'
          AND a.action IN {RESEND_ASK_ACTIONS}
        ORDER BY a.id DESC LIMIT 1)"
    )
});

/// Display columns for a page of keys `p(kind, iid, sid, cid, starts, ev)`.
pub(super) fn page_sql(keys: &str, order: &str) -> String {
    format!(
        "SELECT p.kind, i.id, i.key, p.sid, c.id, coalesce(c.ref, ''), coalesce(c.contact_name, k.name), c.starts_at,
            coalesce(i.recipient, k.phone), coalesce(i.purpose, r.type, e.source || ':' || e.kind, ''),
            CASE WHEN p.kind = 'reschedule' THEN 'reschedule' WHEN p.kind = 'refused' THEN 'refused_event'
                 WHEN p.kind = 'channel_event' THEN e.status
                 ELSE {SHOWN_STATE} END,
            coalesce(i.state_reason, r.reason, e.reason),
            CASE p.kind WHEN 'intention' THEN i.state_changed_at WHEN 'refused' THEN r.last_seen_at
                 WHEN 'reschedule' THEN c.reschedule_requested_at ELSE e.received_at END, p.ev,
            coalesce({LAST_EVENT}, r.event_id || ': ' || r.reason, e.source || ':' || e.event_id),
            m.handled_at, m.operator, m.action_id,
            c.status, c.confirmed_at, c.kind, {RESEND_ASK}
         FROM ({keys}) p
         LEFT JOIN commitments c ON c.id = p.cid
         LEFT JOIN intentions i ON i.id = p.iid AND p.kind = 'intention'
         LEFT JOIN refused_events r ON r.id = p.iid AND p.kind = 'refused'
         LEFT JOIN channel_events e ON e.id = p.iid AND p.kind = 'channel_event'
         LEFT JOIN contacts k ON k.id = c.contact_id
         LEFT JOIN attention_handled m ON m.kind = p.kind AND m.subject_id = p.sid
         {order}"
    )
}

pub(super) fn attention_row(r: &dyn Cols) -> std::result::Result<AttentionRow, String> {
    let handled = match r.opt_time(15)? {
        Some(at) => Some(HandledMark {
            at,
            operator: r.text(16)?,
            action_id: r.int(17)?,
        }),
        None => None,
    };
    let kind = RowKind::parse(&r.text(0)?);
    // The word is read back by core's Situation (a channel event's status
    // for a channel event row); an unknown word reads as review: a person
    // must look, and the page still opens.
    let state = Situation::parse(&r.text(10)?, kind == RowKind::ChannelEvent)
        .unwrap_or(Situation::State(crate::domain::state::IntentionState::Review));
    Ok(AttentionRow {
        kind,
        intention_id: r.opt_int(1)?,
        key: r.opt_text(2)?,
        subject_id: r.int(3)?,
        commitment_id: r.opt_int(4)?,
        commitment_ref: r.text(5)?,
        name: r.opt_text(6)?,
        starts_at: r.opt_time(7)?,
        phone: r.opt_text(8)?,
        purpose: r.text(9)?,
        state,
        state_reason: r.opt_text(11)?,
        since: r.time(12)?,
        evidence_count: r.int(13)?,
        last_event: r.opt_text(14)?,
        handled,
        commitment_status: r.opt_text(18)?,
        confirmed: r.opt_time(19)?.is_some(),
        appointment: r.opt_text(20)?.as_deref() == Some("appointment"),
        resend_ask: r.opt_text(21)?,
        family: None,
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

/// A join whose order is fixed: SQLite's `CROSS JOIN … ON` makes the
/// planner keep the written order; PostgreSQL has no `CROSS JOIN … ON`
/// and plans the join from its statistics.
pub(super) fn fixed_join(pg: bool) -> &'static str {
    if pg { "JOIN" } else { "CROSS JOIN" }
}

/// Channel events first (a technician's own cases, few), then the nearest
/// upcoming commitment, then the most recent past ones, then the least
/// evidence.
const ORDER: &str = "ORDER BY CASE WHEN p.kind = 'channel_event' THEN -1 WHEN p.starts IS NULL THEN 2
        WHEN p.starts >= ?1 THEN 0 ELSE 1 END,
    CASE WHEN p.starts >= ?1 THEN p.starts ELSE -p.starts END, p.ev, p.iid";

/// A patient search, split for the indexes: the trigram phrase (the text
/// before a `:`, which is the reference part of a key), the key pattern
/// when a key was typed, a plain pattern for short text and refused
/// events' ids, and the text read as a phone or name words (core's
/// `PatientQuery`, looked up by `store/search.rs`).
pub(super) struct Search {
    /// `"…"`: an FTS5 phrase; `None` when the text is too short for
    /// trigrams (then `like` matches without the index).
    phrase: Option<String>,
    like: String,
    key_like: Option<String>,
    /// The pattern PostgreSQL's trigram index is asked with: the most
    /// telling words of the text (see [`Search::index_like`]).
    index_like: String,
    /// The text read as a phone or name words (see `store/search.rs`).
    query: Option<PatientQuery>,
}

impl Search {
    /// Reads a typed search; phones without a country code are read as
    /// `country`'s.
    pub(super) fn parse(filter: Option<&str>, country: Country) -> Option<Search> {
        let text = filter.map(str::trim).filter(|f| !f.is_empty())?;
        let head = text.split(':').next().unwrap_or("").trim();
        Some(Search {
            phrase: (head.chars().count() >= 3).then(|| format!("\"{}\"", head.replace('"', "\"\""))),
            like: format!("%{head}%"),
            key_like: text.contains(':').then(|| format!("%{text}%")),
            index_like: Search::index_like(head),
            query: PatientQuery::parse(text, country),
        })
    }

    /// The text read as a phone or name words.
    pub(super) fn query(&self) -> Option<&PatientQuery> {
        self.query.as_ref()
    }

    /// The pattern PostgreSQL's trigram index is asked with for `head`:
    /// its words of three characters or more in order (`%w1%w2%`), only
    /// those with digits when there are some (a reference's number, a
    /// phone's digits); `%head%` when no word is that long. pg_trgm reads
    /// the posting list of every trigram of the pattern, and each
    /// candidate it returns costs an accent fold when the whole text is
    /// checked ([`Search::commitments_sql`]). Every commitment shares the
    /// trigrams of a reference's prefix (`cita-`): for `Paciente 57321`
    /// they are a third of a million entries each at a million
    /// intentions, 10 ms, against under 1 ms for `57321`. A name's words
    /// all together find the few documents holding each (a patient not
    /// in the ledger, a typo), where its longest word alone (`patricia`)
    /// brought back thousands to fold and reject; three groups of digits
    /// as dialled (`908 439 509`) the same. Words are runs of letters and
    /// digits, as pg_trgm splits them, so the pattern matches every
    /// document the whole text's does.
    fn index_like(head: &str) -> String {
        let words: Vec<&str> = head
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .collect();
        let digits: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| w.chars().any(|c| c.is_ascii_digit()))
            .collect();
        match (digits.is_empty(), words.is_empty()) {
            (false, _) => format!("%{}%", digits.join("%")),
            (true, false) => format!("%{}%", words.join("%")),
            (true, true) => format!("%{head}%"),
        }
    }

    /// Commitments the trigram index matches, as `SELECT cid`: `arg` the
    /// placeholder of the phrase or pattern ([`Search::arg`]), `recheck`
    /// the whole text's pattern (`like`). The index is each engine's own:
    /// FTS5 trigrams on SQLite, pg_trgm over `unavez_fold(doc)` on
    /// PostgreSQL, asked for its telling words and the whole text checked on what it
    /// finds (`OFFSET 0` keeps the check out of the index scan, where it
    /// would bring back every trigram of the text).
    pub(super) fn commitments_sql(&self, pg: bool, arg: &str, recheck: &str) -> String {
        match (self.phrase.is_some(), pg) {
            (true, false) => format!("SELECT rowid AS cid FROM commitment_search WHERE commitment_search MATCH {arg}"),
            (true, true) => format!(
                "SELECT s.commitment_id AS cid FROM (SELECT commitment_id, doc FROM commitment_search
                     WHERE unavez_fold(doc) LIKE unavez_fold({arg}) OFFSET 0) AS s
                 WHERE unavez_fold(s.doc) LIKE unavez_fold({recheck})"
            ),
            // SQLite's LIKE ignores ASCII case, PostgreSQL's does not: both
            // compare lower-cased text.
            (false, _) => format!(
                "SELECT c.id AS cid FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id
                 WHERE lower(c.ref) LIKE lower({arg}) OR lower(coalesce(c.contact_name, k.name)) LIKE lower({arg})
                    OR substr(k.phone, length(k.phone) - 3) LIKE {arg}"
            ),
        }
    }

    /// `?5`: the FTS5 phrase on SQLite; on PostgreSQL the index word's
    /// pattern, or the whole text's when it is too short for trigrams.
    pub(super) fn arg(&self, pg: bool) -> &str {
        match (&self.phrase, pg) {
            (Some(phrase), false) => phrase,
            (Some(_), true) => &self.index_like,
            (None, _) => &self.like,
        }
    }

    /// The whole text's pattern (the recheck's value).
    pub(super) fn like(&self) -> &str {
        &self.like
    }
}

impl Tx<'_> {
    /// The Atención list: the rule's open cases (uncertain, review,
    /// recently failed and stuck intentions, reschedule requests, unsettled
    /// refused booking events) that no mark covers, or the cases handled
    /// since a moment; optionally only a searched patient's.
    pub fn attention(&self, q: &AttentionQuery) -> Result<Page<AttentionRow>> {
        let db = self.db();
        let pg = db.is_pg();
        let search = Search::parse(q.filter.as_deref(), self.phone_country);
        let matches = match &search {
            Some(s) => Some(self.search_matches(s)?),
            None => None,
        };
        let (keys, total) = match (q.view, &search) {
            (AttentionView::HandledSince(_), s) => handled_sql(s.as_ref(), pg),
            (AttentionView::Open, Some(_)) => searched_open_sql(&q.rule, pg),
            (AttentionView::Open, None) => open_sql(&q.rule, pg),
        };
        let order = match q.view {
            AttentionView::Open => ORDER,
            AttentionView::HandledSince(_) => "ORDER BY p.hat DESC, p.sid DESC",
        };
        // A search ranks exact matches before those found by forgiving a
        // typo, each in the list's own order.
        let order = match &search {
            Some(_) => order.replacen(
                "ORDER BY ",
                &format!("ORDER BY {}, ", fuzzy_rank_sql(pg, "p.cid", "?13")),
                1,
            ),
            None => order.to_string(),
        };
        let page = page_sql(&format!("SELECT * FROM ({keys}) p {order} LIMIT ?6 OFFSET ?7"), &order);
        let since = match q.view {
            AttentionView::HandledSince(t) => Some(ms(t)),
            AttentionView::Open => None,
        };
        let window = q.rule.reschedule_window;
        let limit = if q.limit == 0 { 50 } else { q.limit };
        // Each statement numbers its parameters from this one list and uses
        // a prefix of it (the trailing values it does not number are left
        // out by `Db`).
        let values = vals![
            ms(q.now),
            ms(q.rule.failed_since(q.now)),
            ms(q.now - window),
            ms(q.now + window),
            matches.as_ref().map(Matches::all_json),
            limit,
            q.offset,
            search.as_ref().and_then(|s| s.key_like.clone()),
            since,
            search.as_ref().map(|s| s.like.clone()),
            q.channel_events.then(|| ms(q.now - q.rule.channel_event_window)),
            ms(q.rule.unconfirmed_since(q.now)),
            matches.as_ref().map(Matches::fuzzy_json),
        ];
        let mut rows = db.rows(&page, &values, attention_row)?;
        self.fill_families(&mut rows)?;
        let total = db.row(&total, &values, |r| r.int(0))?.unwrap_or(0);
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
        self.db().exec(
            "INSERT INTO attention_handled(kind, subject_id, handled_at, situation_at, operator, action_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(kind, subject_id) DO UPDATE SET handled_at = excluded.handled_at,
                 situation_at = excluded.situation_at, operator = excluded.operator,
                 action_id = excluded.action_id",
            &vals![
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
    /// event's last sighting, the channel event's arrival: a copy of it is
    /// a count, not news); `None` when there is no such case.
    pub fn case_info(&self, kind: RowKind, subject_id: i64) -> Result<Option<CaseInfo>> {
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
            RowKind::ChannelEvent => {
                "SELECT c.id, coalesce(c.ref, ''), e.received_at FROM channel_events e
                 LEFT JOIN intentions i ON i.key = e.intention_key LEFT JOIN commitments c ON c.id = i.commitment_id
                 WHERE e.id = ?1"
            }
        };
        Ok(self.db().row(sql, &vals![subject_id], |r| {
            Ok(CaseInfo {
                commitment_id: r.opt_int(0)?,
                commitment_ref: r.text(1)?,
                since: r.opt_time(2)?,
            })
        })?)
    }

    /// The mark on a case, if any (covering or outgrown).
    pub fn handled_mark(&self, kind: RowKind, subject_id: i64) -> Result<Option<HandledMark>> {
        Ok(self.db().row(
            "SELECT handled_at, operator, action_id FROM attention_handled WHERE kind = ?1 AND subject_id = ?2",
            &vals![kind.as_str(), subject_id],
            |r| {
                Ok(HandledMark {
                    at: r.time(0)?,
                    operator: r.text(1)?,
                    action_id: r.int(2)?,
                })
            },
        )?)
    }
}

mod cases;
mod families;

use cases::{handled_sql, open_sql, searched_open_sql};

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
