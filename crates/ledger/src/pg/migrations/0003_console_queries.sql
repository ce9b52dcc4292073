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

-- Since when the oldest uncertain intention waits (the alerts, read on
-- every refresh of every console): without it the read visits every
-- uncertain row through the heap (1,500 pages at a million intentions).
-- Only uncertain rows are in it.
CREATE INDEX intentions_uncertain_since ON intentions(state_changed_at) WHERE state = 'uncertain';

-- The counts of one state over every day (Atención's total, the alerts).
-- The primary key leads with the day; without this index the read walks
-- all of it, which a bulk load (`ledger copy` updates a count row once per
-- intention) can leave thousands of pages long. Not on `n`, so keeping the
-- counts stays a heap-only update.
CREATE INDEX intention_counts_state ON intention_counts(state, day);

-- The Tablero's latency sample (up to 500 of a day's accepted messages,
-- each with its attempt) and a counter's page of ids read every row twice
-- through the heap: 2,000 page reads, 6-13 ms on a loaded server. With the
-- id in the day's index and the accepted attempts' end in an index of
-- their own, both are index-only (1 ms). The day's index keeps its name
-- and columns; an accepted attempt costs one more index entry.
DROP INDEX intentions_day_state;
CREATE INDEX intentions_day_state ON intentions(day, state, state_reason, due_at) INCLUDE (id);
CREATE INDEX attempts_accepted ON attempts(intention_id) INCLUDE (ended_at)
    WHERE outcome = 'accepted' AND ended_at IS NOT NULL;
