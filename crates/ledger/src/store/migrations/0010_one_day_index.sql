-- Reserving with one index entry fewer per intention (issue 12).
--
-- `intentions_day_due (day, due_at)` served one reader: the CLI's `intents
-- list --day` page (and the reprocess list of a day), which now reads the day
-- through `intentions_day_state (day, state, state_reason, due_at)` and
-- sorts it by due time. Every reservation wrote an entry into it (about a
-- twentieth of an import's CPU), every screen of the console reads other
-- indexes, and sorting a day costs a command run by hand tens of milliseconds
-- (the busiest day of a million-intention ledger: 0.05–0.07 s in all).
DROP INDEX IF EXISTS intentions_day_due;
