-- The console's reads on a large PostgreSQL ledger (a million intentions):
-- what PostgreSQL's planner needs that SQLite's does not. Indexes and
-- statistics only; the logical schema is unchanged.

-- Planned intentions that are due (the dispatcher's queue in the console's
-- header, the alerts' "due but unsent"). The planner takes `state =
-- 'planned'` and `due_at <= now` for independent, expects a fifth of the
-- table and scans all of it (0.3 s at a million rows), although planned
-- intentions are the ones due in the future. The statistics of this
-- expression say so, and the index serves it: the queries repeat the
-- expression (`store::console::PLANNED_DUE`). Only planned rows are in the
-- index, so a claim or a result adds nothing to it.
CREATE INDEX intentions_planned_due ON intentions ((CASE WHEN state = 'planned' THEN due_at END))
    WHERE state = 'planned';
CREATE STATISTICS intentions_planned_due_stats ON (CASE WHEN state = 'planned' THEN due_at END) FROM intentions;

-- The counts of one state over every day (Atención's total, the alerts).
-- The primary key leads with the day; without this index the read walks
-- all of it, which a bulk load (`ledger copy` updates a count row once per
-- intention) can leave thousands of pages long. Not on `n`, so keeping the
-- counts stays a heap-only update.
CREATE INDEX intention_counts_state ON intention_counts(state, day);
