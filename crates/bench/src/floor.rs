//! The same-schema floor of reserve + plan (issue 29): every row reserve +
//! plan wrote, in every table it wrote (commitments, events, intentions,
//! history, contacts…), written again into a fresh ledger of the same
//! schema (its indexes and triggers, so the counts and the search tables
//! are kept by the same triggers) with multi-row `INSERT` on SQLite and
//! `COPY` on PostgreSQL, in as many transactions as the real run committed
//! and with the rows each of them committed. No planner, no ingest logic:
//! the time reserve + plan takes beyond it is the cost of our logic, not of
//! the schema.
//!
//! How the rows are cut into the same transactions: after each of the real
//! run's commits the highest `id` of every table is recorded
//! ([`Bounds::record`], outside the real run's timing); transaction `k` of
//! the floor writes the rows between bound `k - 1` and bound `k`. Tables
//! without an `id` column (none that reserve + plan writes today) go whole
//! into the last transaction.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use rusqlite::types::Value;

/// Tables the floor does not write: kept by triggers on the tables it does
/// write (counts, search and its word deletions, phone suffixes, and
/// SQLite's FTS shadow tables), or the schema's version.
const DERIVED: [&str; 5] = [
    "intention_counts",
    "commitment_search",
    "contact_phone_suffixes",
    "name_word_deletes",
    "unavez_schema",
];

/// The order that satisfies the foreign keys; other tables follow by name.
const FIRST: [&str; 6] = [
    "contacts",
    "commitments",
    "commitment_events",
    "commitment_signals",
    "intentions",
    "intention_history",
];

fn written_by_code(table: &str) -> bool {
    !table.starts_with("sqlite_") && !DERIVED.iter().any(|d| table.starts_with(d))
}

fn in_fk_order(mut tables: Vec<(String, bool)>) -> Vec<(String, bool)> {
    tables.sort_by_key(|(t, _)| (FIRST.iter().position(|f| f == t).unwrap_or(FIRST.len()), t.clone()));
    tables
}

/// Either engine's connection, for reading the schema and the rows.
pub enum Conn {
    Sqlite(rusqlite::Connection),
    Pg(postgres::Client),
}

impl Conn {
    pub fn open(location: &Path) -> anyhow::Result<Conn> {
        let s = location.to_string_lossy();
        Ok(if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Conn::Pg(postgres::Client::connect(&s, postgres::NoTls).with_context(|| format!("connecting to {s}"))?)
        } else {
            Conn::Sqlite(unavez::store::open_connection(location)?)
        })
    }

    /// Tables written by code, in foreign-key order, each with whether it
    /// has an integer `id` column (a text id, as the dispatchers' heartbeat
    /// rows have, has no order to bound the rows by).
    fn tables(&mut self) -> anyhow::Result<Vec<(String, bool)>> {
        let names: Vec<(String, bool)> = match self {
            Conn::Sqlite(c) => {
                let mut st = c.prepare(
                    "SELECT name, EXISTS (SELECT 1 FROM pragma_table_info(m.name) WHERE name = 'id' AND upper(type) LIKE '%INT%')
                       FROM sqlite_master m WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'",
                )?;
                st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?
            }
            Conn::Pg(c) => c
                .query(
                    "SELECT t.table_name::text, EXISTS (SELECT 1 FROM information_schema.columns k
                        WHERE k.table_schema = t.table_schema AND k.table_name = t.table_name AND k.column_name = 'id'
                          AND k.data_type IN ('smallint', 'integer', 'bigint'))
                       FROM information_schema.tables t
                      WHERE t.table_schema = current_schema() AND t.table_type = 'BASE TABLE'",
                    &[],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect(),
        };
        Ok(in_fk_order(
            names.into_iter().filter(|(t, _)| written_by_code(t)).collect(),
        ))
    }

    fn max_id(&mut self, table: &str) -> anyhow::Result<i64> {
        let sql = format!("SELECT COALESCE(MAX(id), 0) FROM {table}");
        Ok(match self {
            Conn::Sqlite(c) => c.query_row(&sql, [], |r| r.get(0))?,
            Conn::Pg(c) => c.query_one(&sql, &[])?.get(0),
        })
    }

    fn count(&mut self, table: &str) -> anyhow::Result<i64> {
        let sql = format!("SELECT count(*) FROM {table}");
        Ok(match self {
            Conn::Sqlite(c) => c.query_row(&sql, [], |r| r.get(0))?,
            Conn::Pg(c) => c.query_one(&sql, &[])?.get(0),
        })
    }
}

/// The highest id of every table after each commit of the real run.
pub struct Bounds {
    conn: Conn,
    tables: Vec<(String, bool)>,
    after: Vec<Vec<i64>>,
}

impl Bounds {
    /// Before the real run: the ledger exists (migrated) and is empty.
    pub fn start(location: &Path) -> anyhow::Result<Bounds> {
        let mut conn = Conn::open(location)?;
        let tables = conn.tables()?;
        let mut b = Bounds {
            conn,
            tables,
            after: Vec::new(),
        };
        b.record()?;
        Ok(b)
    }

    /// After one commit of the real run.
    pub fn record(&mut self) -> anyhow::Result<()> {
        let mut row = Vec::new();
        for (t, has_id) in &self.tables {
            row.push(if *has_id { self.conn.max_id(t)? } else { 0 });
        }
        self.after.push(row);
        Ok(())
    }
}

/// The floor's measurement.
pub struct Floor {
    pub rows: u64,
    pub transactions: usize,
    pub seconds: f64,
    /// Rows per table, for the note.
    pub tables: BTreeMap<String, u64>,
}

impl Floor {
    pub fn summary(&self) -> String {
        self.tables
            .iter()
            .map(|(t, n)| format!("{t} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Writes the rows the real run left in `bounds`' ledger into `dst` (a
/// fresh, migrated ledger of the same engine), cut as its commits were.
pub fn run(bounds: Bounds, dst: &Path) -> anyhow::Result<Floor> {
    let Bounds {
        conn: mut src,
        tables: all,
        after,
    } = bounds;
    let mut counts = BTreeMap::new();
    // The tables with rows, each with its column in `after`.
    let mut tables = Vec::new();
    let mut idx = Vec::new();
    for (i, (t, has_id)) in all.iter().enumerate() {
        let n = src.count(t)?;
        if n > 0 {
            counts.insert(t.clone(), n as u64);
            tables.push((t.clone(), *has_id));
            idx.push(i);
        }
    }
    let commits = after.len().saturating_sub(1).max(1);
    // The slice of each table each transaction writes: ids in (lo, hi];
    // tables without ids go whole into the last one.
    let slice = |k: usize, j: usize| -> Option<(i64, i64)> {
        let (_, has_id) = &tables[j];
        if !has_id {
            return (k + 1 == commits).then_some((i64::MIN, i64::MAX));
        }
        let lo = after.get(k).map_or(0, |r| r[idx[j]]);
        let hi = after.get(k + 1).map_or(i64::MAX, |r| r[idx[j]]);
        (hi > lo).then_some((lo, hi))
    };
    let range = |j: usize, (lo, hi): (i64, i64)| {
        let t = &tables[j].0;
        if tables[j].1 {
            format!("SELECT * FROM {t} WHERE id > {lo} AND id <= {hi} ORDER BY id")
        } else {
            format!("SELECT * FROM {t}")
        }
    };
    let rows: u64 = counts.values().sum();
    let seconds = match (&mut src, &mut Conn::open(dst)?) {
        (Conn::Sqlite(s), Conn::Sqlite(d)) => sqlite(s, d, &tables, commits, &slice, &range)?,
        (Conn::Pg(s), Conn::Pg(d)) => pg(s, d, &tables, commits, &slice, &range)?,
        _ => anyhow::bail!("the floor writes into a ledger of the same engine"),
    };
    Ok(Floor {
        rows,
        transactions: commits,
        seconds,
        tables: counts,
    })
}

type Slice<'a> = dyn Fn(usize, usize) -> Option<(i64, i64)> + 'a;
type Range<'a> = dyn Fn(usize, (i64, i64)) -> String + 'a;

/// Rows per multi-row INSERT: within SQLite's 32,766 variables.
const SQLITE_ROWS_PER_INSERT: usize = 500;

fn sqlite(
    src: &rusqlite::Connection,
    dst: &mut rusqlite::Connection,
    tables: &[(String, bool)],
    commits: usize,
    slice: &Slice<'_>,
    range: &Range<'_>,
) -> anyhow::Result<f64> {
    // Read every transaction's rows first: only the writes are timed.
    let mut plan: Vec<Vec<(usize, usize, Vec<Value>)>> = Vec::new();
    for k in 0..commits {
        let mut tx = Vec::new();
        for j in 0..tables.len() {
            let Some(s) = slice(k, j) else { continue };
            let mut st = src.prepare(&range(j, s))?;
            let cols = st.column_count();
            let mut values = Vec::new();
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                for c in 0..cols {
                    values.push(r.get::<_, Value>(c)?);
                }
            }
            if !values.is_empty() {
                tx.push((j, cols, values));
            }
        }
        plan.push(tx);
    }
    let t = Instant::now();
    for tx_rows in &plan {
        let tx = dst.transaction()?;
        for (j, cols, values) in tx_rows {
            let per = (32_000 / cols).min(SQLITE_ROWS_PER_INSERT);
            for chunk in values.chunks(per * cols) {
                let n = chunk.len() / cols;
                let one = format!("({})", vec!["?"; *cols].join(","));
                let sql = format!("INSERT INTO {} VALUES {}", tables[*j].0, vec![one; n].join(","));
                tx.prepare_cached(&sql)?
                    .execute(rusqlite::params_from_iter(chunk.iter()))?;
            }
        }
        tx.commit()?;
    }
    Ok(t.elapsed().as_secs_f64())
}

fn pg(
    src: &mut postgres::Client,
    dst: &mut postgres::Client,
    tables: &[(String, bool)],
    commits: usize,
    slice: &Slice<'_>,
    range: &Range<'_>,
) -> anyhow::Result<f64> {
    use std::io::{Read as _, Write as _};
    let mut plan: Vec<Vec<(usize, Vec<u8>)>> = Vec::new();
    for k in 0..commits {
        let mut tx = Vec::new();
        for j in 0..tables.len() {
            let Some(s) = slice(k, j) else { continue };
            let mut text = Vec::new();
            src.copy_out(&format!("COPY ({}) TO STDOUT", range(j, s)))?
                .read_to_end(&mut text)?;
            if !text.is_empty() {
                tx.push((j, text));
            }
        }
        plan.push(tx);
    }
    let t = Instant::now();
    for tx_rows in &plan {
        let mut tx = dst.transaction()?;
        for (j, text) in tx_rows {
            let mut w = tx.copy_in(&format!("COPY {} FROM STDIN", tables[*j].0))?;
            w.write_all(text)?;
            w.finish()?;
        }
        tx.commit()?;
    }
    Ok(t.elapsed().as_secs_f64())
}
