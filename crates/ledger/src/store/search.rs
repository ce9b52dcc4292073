//! The patient search's look-ups: which commitments a typed search finds,
//! and how closely. What the text means (phone suffixes, folded name words,
//! the typo rule, exact before fuzzy) is `unavez_core::search`'s; this
//! module asks the indexes:
//!
//! - the trigram index `commitment_search` (SQLite 0006, PostgreSQL 0001)
//!   for a reference, a key's reference, part of a name or the phone's last
//!   four digits, as before;
//! - `contact_phone_suffixes` (SQLite 0012, PostgreSQL 0007) for a phone in
//!   any form or a run of its trailing digits;
//! - the name words (`commitment_search_names`: FTS5 on SQLite; on
//!   PostgreSQL each name's word set under a GIN index,
//!   `commitment_search_word_sets`) for every typed word exactly, then for
//!   the words one typo from it, found SymSpell-style: the vocabulary's
//!   words are filed under themselves and their deletions
//!   (`name_word_deletes`), a typed word looks up itself and its own
//!   deletions, and core's `Closeness::of` checks the distance of what
//!   comes back.
//!
//! Each look-up is a few index probes; the matches go to the list's own
//! statement as a JSON array of commitment ids ([`json_ids_sql`]).

use std::collections::BTreeMap;

use unavez_core::search::{Closeness, MIN_TYPO_LEN, PatientQuery, deletes, name_tokens};

use super::attention::Search;
use super::{Result, Tx};
use crate::sql::Db;
use crate::vals;

/// The SQLite migration that created `name_word_deletes`, whose words are
/// filed from the existing names right after it runs.
pub(super) const TYPO_INDEX_SINCE: u32 = 12;

/// The most words of a name search that are looked up (a name has rarely
/// more; the rest of a long text narrows nothing a person types).
const MAX_WORDS: usize = 6;

/// The commitments a search found: exact matches (trigrams, a phone, every
/// word as typed) and those found only by forgiving a typo.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Matches {
    pub exact: Vec<i64>,
    pub fuzzy: Vec<i64>,
}

impl Matches {
    /// Every match, as a JSON array (the list statement's `m`).
    pub fn all_json(&self) -> String {
        json(self.exact.iter().chain(&self.fuzzy))
    }

    /// The fuzzy matches, as a JSON array (ranked after the exact ones).
    pub fn fuzzy_json(&self) -> String {
        json(self.fuzzy.iter())
    }
}

fn json<'a>(ids: impl Iterator<Item = &'a i64>) -> String {
    let ids: Vec<String> = ids.map(i64::to_string).collect();
    format!("[{}]", ids.join(","))
}

/// `SELECT cid` from the JSON array of commitment ids in `param`.
pub(super) fn json_ids_sql(pg: bool, param: &str) -> String {
    if pg {
        format!(
            "SELECT CAST(value AS BIGINT) AS cid FROM json_array_elements_text(CAST(CAST({param} AS TEXT) AS json)) AS j"
        )
    } else {
        format!("SELECT value AS cid FROM json_each({param})")
    }
}

/// `FROM` the commitments whose ids are in the JSON array `param`, as
/// `m(cid)` and `c`, read from the matches (few) to their rows by primary
/// key whatever else the statement filters on. SQLite keeps the written
/// order of a `CROSS JOIN`. PostgreSQL's generic plan (the console's, see
/// `PgUrl::generic_plans`) cannot see how many ids the array holds nor
/// how wide a time range is: it takes the array for 100 rows and a range
/// of `starts_at` for 0.5 % of the table, and walks the whole range
/// (every commitment, for Próximas citas' 90 days) to hash-join a handful
/// of matches. A `LATERAL` subquery with `OFFSET 0` cannot be flattened,
/// so each match is one probe of `commitments_pkey` there too.
pub(super) fn matched_commitments_sql(pg: bool, param: &str) -> String {
    if pg {
        format!(
            "({}) m CROSS JOIN LATERAL (SELECT * FROM commitments WHERE id = m.cid OFFSET 0) c",
            json_ids_sql(pg, param)
        )
    } else {
        format!(
            "({}) m CROSS JOIN commitments c ON c.id = m.cid",
            json_ids_sql(pg, param)
        )
    }
}

/// `SELECT {col}` from `table` for every string of the JSON array
/// `param` equal to `table.{key}` (PostgreSQL): one index probe per
/// string. Written as `key IN (SELECT json_array_elements_text(…))` the
/// planner takes the array for 100 strings, each as common as the
/// column's average value, and scans the whole table to hash-join them
/// (every name word of every commitment, for a two-word name); the
/// `LATERAL … OFFSET 0` subquery cannot be flattened into that join.
fn pg_probe_sql(col: &str, table: &str, key: &str, param: &str) -> String {
    format!(
        "SELECT t.{col} FROM json_array_elements_text(CAST(CAST({param} AS TEXT) AS json)) AS q(v)
         CROSS JOIN LATERAL (SELECT {col} FROM {table} WHERE {key} = q.v OFFSET 0) AS t"
    )
}

/// `1` when the row's commitment `cid` is among the fuzzy matches in
/// `param`, else `0`: the first ordering term of a searched list.
pub(super) fn fuzzy_rank_sql(pg: bool, cid: &str, param: &str) -> String {
    format!("CASE WHEN {cid} IN ({}) THEN 1 ELSE 0 END", json_ids_sql(pg, param))
}

impl Tx<'_> {
    /// The commitments `s` finds, exact matches and fuzzy ones apart.
    pub(super) fn search_matches(&self, s: &Search) -> Result<Matches> {
        let db = self.db();
        let pg = db.is_pg();
        let mut best: BTreeMap<i64, Closeness> = BTreeMap::new();
        let mut found = |cid: i64, c: Closeness| {
            let e = best.entry(cid).or_insert(c);
            *e = (*e).min(c);
        };
        let mut whole_words = false;
        if let Some(q) = s.query() {
            for cid in phone_matches(&db, q)? {
                found(cid, Closeness::Exact);
            }
            for (cid, c) in name_matches(&db, q)? {
                whole_words |= c == Closeness::Exact;
                found(cid, c);
            }
        }
        // Parts of words (a name being typed, a reference, a key): the
        // trigram index, unless every typed word already matched a whole
        // word of a name, where a substring adds only look-alikes
        // (`maria` in `Mariana`) and a phrase over the commonest trigrams
        // costs the most.
        if !whole_words {
            let trigram = db.rows(&s.commitments_sql(pg, "?1", "?2"), &vals![s.arg(pg), s.like()], |r| {
                r.int(0)
            })?;
            for cid in trigram {
                found(cid, Closeness::Exact);
            }
        }
        let mut m = Matches::default();
        for (cid, c) in best {
            match c {
                Closeness::Exact => m.exact.push(cid),
                Closeness::OneTypo => m.fuzzy.push(cid),
            }
        }
        Ok(m)
    }
}

/// Commitments of the contacts whose phone ends with one of the query's
/// suffixes.
fn phone_matches(db: &Db<'_>, q: &PatientQuery) -> Result<Vec<i64>> {
    let Some(first) = q.phone.first() else {
        return Ok(Vec::new());
    };
    let second = q.phone.get(1).unwrap_or(first);
    Ok(db.rows(
        "SELECT c.id FROM contact_phone_suffixes p JOIN commitments c ON c.contact_id = p.contact_id
         WHERE p.suffix = ?1 OR p.suffix = ?2",
        &vals![first.as_str(), second.as_str()],
        |r| r.int(0),
    )?)
}

/// Commitments whose name holds every typed word, exactly or one typo
/// away (a word of four letters or more), with how closely.
fn name_matches(db: &Db<'_>, q: &PatientQuery) -> Result<Vec<(i64, Closeness)>> {
    let typed: Vec<&String> = q.names.iter().take(MAX_WORDS).collect();
    if typed.is_empty() {
        return Ok(Vec::new());
    }
    let exact_words: Vec<Vec<String>> = typed.iter().map(|w| vec![(*w).clone()]).collect();
    let exact = commitments_with(db, &exact_words)?;
    let mut out: Vec<(i64, Closeness)> = exact.iter().map(|c| (*c, Closeness::Exact)).collect();
    // The words of the vocabulary one typo from each typed one: under the
    // typed word or one of its deletions (SymSpell), the distance checked.
    let mut keys: Vec<String> = Vec::new();
    for w in typed.iter().filter(|w| w.chars().count() >= MIN_TYPO_LEN) {
        keys.push((*w).clone());
        keys.extend(deletes(w));
    }
    if keys.is_empty() {
        return Ok(out);
    }
    keys.sort();
    keys.dedup();
    let near: Vec<String> = db.rows(&near_words_sql(db.is_pg()), &vals![json_text(&keys)], |r| r.text(0))?;
    let any_words: Vec<Vec<String>> = typed
        .iter()
        .map(|w| {
            let mut words = vec![(*w).clone()];
            words.extend(
                near.iter()
                    .filter(|n| Closeness::of(w, n) == Some(Closeness::OneTypo))
                    .cloned(),
            );
            words
        })
        .collect();
    if any_words != exact_words {
        let exact: std::collections::HashSet<i64> = exact.into_iter().collect();
        out.extend(
            commitments_with(db, &any_words)?
                .into_iter()
                .filter(|c| !exact.contains(c))
                .map(|c| (c, Closeness::OneTypo)),
        );
    }
    Ok(out)
}

fn json_text(words: &[String]) -> String {
    serde_json::to_string(words).unwrap_or_else(|_| "[]".into())
}

/// The vocabulary's words filed under any string of `?1` (a JSON array).
fn near_words_sql(pg: bool) -> String {
    if pg {
        format!(
            "SELECT DISTINCT word FROM ({}) AS near",
            pg_probe_sql("word", "name_word_deletes", "del", "?1")
        )
    } else {
        "SELECT DISTINCT word FROM name_word_deletes WHERE del IN (SELECT value FROM json_each(?1))".into()
    }
}

/// `(del, word)` rows of [`name_word_deletes`] for `word`: itself, and its
/// deletions when it is long enough for a typo.
fn deletes_rows(word: &str) -> Vec<(String, String)> {
    let mut rows = vec![(word.to_string(), word.to_string())];
    if word.chars().count() >= MIN_TYPO_LEN {
        rows.extend(deletes(word).into_iter().map(|d| (d, word.to_string())));
    }
    rows
}

/// Files `words` (folded) in `name_word_deletes`, skipping the ones it
/// already holds; how many were new.
fn file_words(db: &Db<'_>, words: &[String]) -> Result<usize> {
    if words.is_empty() {
        return Ok(0);
    }
    let new: Vec<String> = db.rows(
        "SELECT value FROM json_each(?1) WHERE NOT EXISTS
             (SELECT 1 FROM name_word_deletes d WHERE d.del = value AND d.word = value)",
        &vals![json_text(words)],
        |r| r.text(0),
    )?;
    let rows: Vec<(String, String)> = new.iter().flat_map(|w| deletes_rows(w)).collect();
    for chunk in rows.chunks(500) {
        let json = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".into());
        db.exec(
            "INSERT INTO name_word_deletes(del, word)
             SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1) WHERE true
             ON CONFLICT DO NOTHING",
            &vals![json],
        )?;
    }
    Ok(new.len())
}

/// Files the words of every name in the name index that
/// `name_word_deletes` lacks (SQLite: after migration 0012, and after rows
/// written without the ledger, as the bench's generator does).
pub(super) fn file_vocabulary(db: &Db<'_>) -> Result<usize> {
    let words: Vec<String> = db.rows("SELECT term FROM commitment_search_words", &[], |r| r.text(0))?;
    let mut filed = 0;
    for chunk in words.chunks(5_000) {
        filed += file_words(db, chunk)?;
    }
    Ok(filed)
}

impl Tx<'_> {
    /// Files the words of names being saved in the vocabulary's deletes
    /// (SQLite; PostgreSQL's trigger on the name words does it there).
    pub(super) fn remember_name_words<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let db = self.db();
        if db.is_pg() {
            return Ok(());
        }
        let mut words: Vec<String> = names.into_iter().flat_map(name_tokens).collect();
        words.sort();
        words.dedup();
        file_words(&db, &words)?;
        Ok(())
    }

    /// Files every name word the typo index lacks: for a ledger whose
    /// contacts and commitments were written by plain SQL rather than by
    /// the ledger (a generated one). How many words were new; PostgreSQL
    /// files them by trigger, so none there.
    pub fn file_name_words(&self) -> Result<usize> {
        let db = self.db();
        if db.is_pg() {
            return Ok(0);
        }
        file_vocabulary(&db)
    }
}

/// Commitments whose name holds, for each group, one of its words.
fn commitments_with(db: &Db<'_>, groups: &[Vec<String>]) -> Result<Vec<i64>> {
    if db.is_pg() {
        // One GIN scan of the name's word sets (PostgreSQL migration
        // 0010): each group is one `&&` term, and the index intersects
        // the terms' posting lists itself, so only the commitments holding
        // a word of every group come back (intersecting whole lists of
        // `commitment_search_names` read ~15,000 rows for two common words
        // at a million intentions to keep ~150).
        let terms: Vec<String> = (1..=groups.len())
            .map(|k| format!("words && ARRAY(SELECT json_array_elements_text(CAST(CAST(?{k} AS TEXT) AS json)))"))
            .collect();
        let args: Vec<crate::sql::Value<'_>> = groups
            .iter()
            .map(|g| serde_json::to_string(g).unwrap_or_default().into())
            .collect();
        Ok(db.rows(
            &format!(
                "SELECT commitment_id FROM commitment_search_word_sets WHERE {}",
                terms.join(" AND ")
            ),
            &args,
            |r| r.int(0),
        )?)
    } else {
        // An FTS5 query: `("maria" OR "mario") AND ("flores")`. Words are
        // letters and digits only (see `name_tokens`), safe inside quotes.
        let query: Vec<String> = groups
            .iter()
            .map(|g| {
                let words: Vec<String> = g.iter().map(|w| format!("\"{w}\"")).collect();
                format!("({})", words.join(" OR "))
            })
            .collect();
        Ok(db.rows(
            "SELECT rowid FROM commitment_search_names WHERE commitment_search_names MATCH ?1",
            &vals![query.join(" AND ")],
            |r| r.int(0),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_are_json_arrays_exact_first() {
        let m = Matches {
            exact: vec![3, 1],
            fuzzy: vec![7],
        };
        assert_eq!(m.all_json(), "[3,1,7]");
        assert_eq!(m.fuzzy_json(), "[7]");
        assert_eq!(Matches::default().all_json(), "[]");
    }
}
