-- Per-day counts folded once per transaction (issue 29).
--
-- Migration 0002 kept them with deferred row triggers: a claim or a result
-- batch of 64 intentions fired 64 plpgsql calls at commit, each rewriting
-- the same one or two count rows twice (a decrement and an increment), so
-- 128 new versions of one hot row, written while the commit's other work
-- waits and, with several dispatchers, while their commits queue on that
-- row's lock.
--
-- Now each statement on `intentions` adds up what it changed, per (day,
-- state), from its transition tables (one plpgsql call per statement, not
-- per row) into `intention_count_deltas`, and a deferred trigger on those
-- delta rows folds the transaction's deltas into `intention_counts` once,
-- at commit, in (day, state) order. What 0002 gained is kept: the count
-- rows are still taken only at commit, after every key and intention row
-- the transaction needs, so no transaction waits for a key while holding
-- a count row; and two transactions now take count rows in one order.
--
-- The delta rows live only inside their transaction (the fold deletes
-- them before the commit), so the table is UNLOGGED: after a crash it is
-- empty, which is exactly what every committed transaction left. It is
-- machinery of this backend (SQLite's single writer keeps its row
-- triggers), left out of the schema comparison.
CREATE UNLOGGED TABLE intention_count_deltas (
    xid   BIGINT NOT NULL DEFAULT txid_current(),
    day   TEXT NOT NULL,
    state TEXT NOT NULL,
    n     BIGINT NOT NULL
);
CREATE INDEX intention_count_deltas_xid ON intention_count_deltas(xid);

DROP TRIGGER intention_counts_insert ON intentions;
DROP TRIGGER intention_counts_update ON intentions;
DROP TRIGGER intention_counts_delete ON intentions;
DROP FUNCTION intention_counts_keep();

-- A statement's net change per (day, state). An UPDATE's transition tables
-- hold every row it touched, most of them with the same day and state
-- before and after (a lease, a reference): those cancel out and add no
-- delta row. PostgreSQL allows no column list on a trigger with
-- transition tables, hence the UPDATE trigger fires for every UPDATE.
CREATE FUNCTION intention_counts_insert_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO intention_count_deltas(day, state, n)
        SELECT day, state, count(*) FROM new_rows GROUP BY day, state;
    RETURN NULL;
END $$;
CREATE FUNCTION intention_counts_update_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO intention_count_deltas(day, state, n)
        SELECT day, state, sum(d) FROM (
            SELECT day, state, 1 AS d FROM new_rows
            UNION ALL SELECT day, state, -1 FROM old_rows) AS changed
        GROUP BY day, state HAVING sum(d) <> 0;
    RETURN NULL;
END $$;
CREATE FUNCTION intention_counts_delete_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO intention_count_deltas(day, state, n)
        SELECT day, state, -count(*) FROM old_rows GROUP BY day, state;
    RETURN NULL;
END $$;
-- `intention_counts_insert` keeps its name: `ledger copy` switches it off
-- by name while it counts the copied rows once.
CREATE TRIGGER intention_counts_insert AFTER INSERT ON intentions
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intention_counts_insert_delta();
CREATE TRIGGER intention_counts_update AFTER UPDATE ON intentions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intention_counts_update_delta();
CREATE TRIGGER intention_counts_delete AFTER DELETE ON intentions
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION intention_counts_delete_delta();

-- At commit: the first delta row's trigger folds all of this transaction's
-- deltas (the later ones find none left and write nothing). Rows that would
-- go below zero cannot: a count is only decremented for a row it counted.
CREATE FUNCTION intention_counts_fold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH mine AS (
        DELETE FROM intention_count_deltas WHERE xid = txid_current() RETURNING day, state, n
    )
    INSERT INTO intention_counts(day, state, n)
        SELECT day, state, sum(n) FROM mine GROUP BY day, state HAVING sum(n) <> 0 ORDER BY day, state
        ON CONFLICT (day, state) DO UPDATE SET n = intention_counts.n + EXCLUDED.n;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER intention_counts_fold AFTER INSERT ON intention_count_deltas
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION intention_counts_fold();
