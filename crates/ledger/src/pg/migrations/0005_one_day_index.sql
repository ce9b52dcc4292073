-- The same index as SQLite's migration 0010: day lists read the day through
-- `intentions_day_state` and sort it, so no reservation writes a
-- (day, due_at) entry any more.
DROP INDEX IF EXISTS intentions_day_due;
