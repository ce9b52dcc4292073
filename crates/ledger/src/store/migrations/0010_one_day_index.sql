-- Reserving with one index entry fewer per intention (issue 12).
--
-- `intentions_day_due (day, due_at)` served one reader: the `ledger list
-- --day` page (and the reprocess list of a day), which now reads the day
-- through `intentions_day_state (day, state, state_reason, due_at)` and
-- sorts it by due time. Every reservation wrote an entry into it (about a
-- twentieth of an import's CPU), every screen of the console reads other
-- indexes, and a day's sort is milliseconds for a command run by hand.
DROP INDEX IF EXISTS intentions_day_due;
