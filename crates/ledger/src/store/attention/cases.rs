//! The SQL of Atención's three views (open cases, open cases of a searched
//! patient, the day's handled cases), each built from the attention rule's
//! clauses and the shared pieces of [`super`]. Parameters as numbered in
//! [`super::Tx::attention`]: `?1` now, `?2` the earliest due time a failure
//! stays, `?3`..`?4` the reschedule window, `?5` the search, `?6`/`?7`
//! limit and offset, `?8` a typed key, `?9` handled since, `?10` the plain
//! pattern, `?11` channel events since (`NULL`: not asked for), `?12` the
//! latest news an unconfirmed message can have had, `?13` the fuzzy matches.
//! A search's matches (`?5`, a JSON array of commitment ids) are found
//! beforehand (`store/search.rs`).

use super::super::search::json_ids_sql;
use super::{
    AttentionRule, Clause, EVENTS_FROM, REFUSED_FROM, RESCHED, RowKind, Search, clause_sql, covered_sql, covers_sql,
    evidence_sql, fixed_join, rule_sql, walked, walked_sql,
};

/// Open cases without a search: rows that need a person are walked through
/// `intentions_attention` (a partial index by the commitment's start time),
/// upcoming ones ascending from `now`, past ones descending, and each walk
/// stops at the (offset + limit)-th row, keeping every row tied with it: a
/// row on the page has fewer than offset + limit rows strictly before it,
/// so it is a candidate of its own walk. Rows without a start time (all
/// tied) are only needed when the two walks together hold fewer rows than
/// that. Stuck dispatches, reschedule requests, refused booking events and
/// channel events are few and always candidates. Only then is evidence
/// counted, for the candidates alone. Returns the keys and the total's SQL.
pub(super) fn open_sql(rule: &AttentionRule, pg: bool) -> (String, String) {
    let open_i = format!("NOT {}", covered_sql(RowKind::Intention, "i.id", "i.state_changed_at"));
    let walk = format!("{} AND {open_i}", walked_sql(rule));
    let stuck = format!("{} AND {open_i}", rule_sql(rule, |c| !walked(c)));
    let (resched, refused, events) = open_others();
    // `INDEXED BY` is SQLite's; PostgreSQL picks the partial index from the
    // same literal `state IN (…)` term by itself.
    let indexed = if pg { "" } else { "INDEXED BY intentions_attention" };
    let keys = format!(
        "WITH att AS NOT MATERIALIZED (
             SELECT i.id AS iid, i.commitment_id AS cid, i.starts_at AS s
             FROM intentions i {indexed} WHERE {walk}),
         up AS MATERIALIZED (SELECT * FROM att WHERE s >= ?1 AND s <= coalesce(
             (SELECT s FROM att WHERE s >= ?1 ORDER BY s LIMIT 1 OFFSET {reach} - 1), 9223372036854775807)),
         past AS MATERIALIZED (SELECT * FROM att WHERE s < ?1 AND s >= coalesce(
             (SELECT s FROM att WHERE s < ?1 ORDER BY s DESC LIMIT 1 OFFSET {reach} - 1),
             -9223372036854775807 - 1)),
         cand AS (
             SELECT iid, cid, s FROM up
             UNION ALL SELECT iid, cid, s FROM past
             UNION ALL SELECT iid, cid, s FROM att
                 WHERE s IS NULL AND (SELECT count(*) FROM up) + (SELECT count(*) FROM past) < {reach}
             UNION ALL SELECT i.id, i.commitment_id, i.starts_at FROM intentions i WHERE {stuck})
         SELECT 'intention' AS kind, iid, iid AS sid, cid, s AS starts, {ev} AS ev FROM cand
         UNION ALL SELECT 'reschedule', NULL, c.id, c.id, c.starts_at, 0 FROM commitments c WHERE {resched}
         UNION ALL SELECT 'refused', r.id, r.id, c.id, c.starts_at, 0 {REFUSED_FROM} AND {refused}
         UNION ALL SELECT 'channel_event', e.id, e.id, c.id, c.starts_at, 0 {EVENTS_FROM} AND {events}",
        ev = evidence_sql("cand.iid"),
        reach = REACH,
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
              + (SELECT count(*) {REFUSED_FROM} AND {refused})
              + (SELECT count(*) {EVENTS_FROM} AND {events})",
        clauses = clause_counts.join(" + "),
        covers = covers_sql("i.state_changed_at"),
        all = rule_sql(rule, |_| true),
    );
    (keys, total)
}

/// Offset + limit (typed for PostgreSQL, which cannot infer `?6 + ?7`).
const REACH: &str = "(CAST(?6 AS BIGINT) + CAST(?7 AS BIGINT))";

/// How many intentions one clause names, from what serves it.
fn clause_count_sql(c: Clause) -> String {
    match c {
        Clause::Always(s) => {
            format!("(SELECT CAST(coalesce(sum(n), 0) AS BIGINT) FROM intention_counts WHERE state = '{s}')")
        }
        Clause::DueWithinWindow(_) | Clause::LeaseExpired(_) | Clause::Unconfirmed(_) => {
            format!("(SELECT count(*) FROM intentions i WHERE {})", clause_sql(c))
        }
    }
}

/// The open-case conditions of reschedule requests (on `c`), refused
/// booking events (on `r`) and channel events (on `e`).
fn open_others() -> (String, String, String) {
    let resched = format!(
        "{RESCHED} AND NOT {}",
        covered_sql(RowKind::RescheduleRequest, "c.id", "c.reschedule_requested_at")
    );
    let refused = format!("NOT {}", covered_sql(RowKind::RefusedEvent, "r.id", "r.last_seen_at"));
    let events = format!("NOT {}", covered_sql(RowKind::ChannelEvent, "e.id", "e.received_at"));
    (resched, refused, events)
}

/// Open cases of the searched patients: from the matching commitments
/// (few, found through the search indexes) to their intentions
/// (`intentions_commitment`), then the rule; no walk is needed. `CROSS
/// JOIN` fixes that order: left to itself SQLite walks every intention the
/// rule names (thousands at a million) and probes the matches.
pub(super) fn searched_open_sql(rule: &AttentionRule, pg: bool) -> (String, String) {
    let open_i = format!("NOT {}", covered_sql(RowKind::Intention, "i.id", "i.state_changed_at"));
    let (resched, refused, events) = open_others();
    let m = json_ids_sql(pg, "?5");
    let join = fixed_join(pg);
    let cases = format!(
        "WITH m AS MATERIALIZED ({m})
         SELECT 'intention' AS kind, i.id AS iid, i.id AS sid, c.id AS cid, c.starts_at AS starts,
             {ev} AS ev
         FROM m {join} commitments c ON c.id = m.cid {join} intentions i ON i.commitment_id = c.id
         WHERE {rule} AND {open_i} AND (CAST(?8 AS TEXT) IS NULL OR lower(i.key) LIKE lower(?8))
         UNION ALL SELECT 'reschedule', NULL, c.id, c.id, c.starts_at, 0
             FROM m JOIN commitments c ON c.id = m.cid WHERE {resched} AND CAST(?8 AS TEXT) IS NULL
         UNION ALL SELECT 'refused', r.id, r.id, c.id, c.starts_at, 0 {REFUSED_FROM} AND {refused}
             AND (c.id IN (SELECT cid FROM m) OR lower(r.event_id) LIKE lower(?10)
                  OR lower(r.event_id) LIKE lower(?8))
         UNION ALL SELECT 'channel_event', e.id, e.id, c.id, c.starts_at, 0 {EVENTS_FROM} AND {events}
             AND (c.id IN (SELECT cid FROM m) OR lower(e.event_id) LIKE lower(?10)
                  OR lower(e.intention_key) LIKE lower(?10) OR lower(e.intention_key) LIKE lower(?8))",
        ev = evidence_sql("i.id"),
        rule = rule_sql(rule, |_| true)
    );
    let total = format!("SELECT count(*) FROM ({cases}) AS cases");
    (cases, total)
}

/// Cases handled since `?9` whose mark still covers them (nothing new
/// since), newest mark first; optionally only a searched patient's.
pub(super) fn handled_sql(s: Option<&Search>, pg: bool) -> (String, String) {
    let matched = match s {
        Some(_) => format!("AND p.cid IN ({})", json_ids_sql(pg, "?5")),
        None => String::new(),
    };
    let keys = format!(
        "SELECT * FROM (
            SELECT 'intention' AS kind, i.id AS iid, i.id AS sid, i.commitment_id AS cid, i.starts_at AS starts,
                {ev} AS ev, h.handled_at AS hat
            FROM attention_handled h JOIN intentions i ON i.id = h.subject_id
            WHERE h.kind = 'intention' AND h.handled_at >= ?9 AND {cov_i}
                AND (CAST(?8 AS TEXT) IS NULL OR lower(i.key) LIKE lower(?8))
            UNION ALL SELECT 'reschedule', NULL, c.id, c.id, c.starts_at, 0, h.handled_at
            FROM attention_handled h JOIN commitments c ON c.id = h.subject_id
            WHERE h.kind = 'reschedule' AND h.handled_at >= ?9 AND {cov_c}
            UNION ALL SELECT 'refused', r.id, r.id, c.id, c.starts_at, 0, h.handled_at
            FROM attention_handled h JOIN refused_events r ON r.id = h.subject_id
                JOIN commitments c ON c.ref = r.commitment_ref
            WHERE h.kind = 'refused' AND h.handled_at >= ?9 AND {cov_r}
            UNION ALL SELECT 'channel_event', e.id, e.id, c.id, c.starts_at, 0, h.handled_at
            FROM attention_handled h JOIN channel_events e ON e.id = h.subject_id
                LEFT JOIN intentions ei ON ei.key = e.intention_key
                LEFT JOIN commitments c ON c.id = ei.commitment_id
            WHERE h.kind = 'channel_event' AND CAST(?11 AS BIGINT) IS NOT NULL AND h.handled_at >= ?9
                AND {cov_e}) p
         WHERE 1 = 1 {matched}",
        ev = evidence_sql("i.id"),
        cov_i = covers_sql("i.state_changed_at"),
        cov_c = covers_sql("c.reschedule_requested_at"),
        cov_r = covers_sql("r.last_seen_at"),
        cov_e = covers_sql("e.received_at"),
    );
    let total = format!("SELECT count(*) FROM ({keys}) AS handled");
    (keys, total)
}
