-- Console speed at a million intentions (issue 5/6). Everything here is
-- derived data kept exact by triggers, backfilled for existing rows in this
-- same migration, so no screen has to count or sort the whole ledger.

-- Intentions per (operating day, state). The Tablero reads a day's few rows
-- instead of counting ~10k index entries; whole-ledger counts by state sum
-- a few hundred rows instead of a million. Rows may drop to n = 0; readers
-- skip them.
CREATE TABLE intention_counts (
    day   TEXT NOT NULL,
    state TEXT NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (day, state)
) WITHOUT ROWID;

INSERT INTO intention_counts(day, state, n)
    SELECT day, state, count(*) FROM intentions GROUP BY day, state;

CREATE TRIGGER intention_counts_insert AFTER INSERT ON intentions
BEGIN
    INSERT INTO intention_counts(day, state, n) VALUES (NEW.day, NEW.state, 1)
        ON CONFLICT(day, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER intention_counts_update AFTER UPDATE OF state, day ON intentions
WHEN NEW.state IS NOT OLD.state OR NEW.day IS NOT OLD.day
BEGIN
    UPDATE intention_counts SET n = n - 1 WHERE day = OLD.day AND state = OLD.state;
    INSERT INTO intention_counts(day, state, n) VALUES (NEW.day, NEW.state, 1)
        ON CONFLICT(day, state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER intention_counts_delete AFTER DELETE ON intentions
BEGIN
    UPDATE intention_counts SET n = n - 1 WHERE day = OLD.day AND state = OLD.state;
END;

-- The commitment's start time, copied onto each intention, so Atención can
-- walk the rows that need a person in commitment-time order through one
-- small partial index and stop at the page (instead of joining and sorting
-- the whole attention set). Kept equal to commitments.starts_at: set on
-- insert (by `reserve`, or by the trigger for any other writer) and
-- rewritten when a commitment is rescheduled.
ALTER TABLE intentions ADD COLUMN starts_at INTEGER;

UPDATE intentions SET starts_at = (SELECT c.starts_at FROM commitments c WHERE c.id = intentions.commitment_id);

CREATE TRIGGER intentions_starts_at_insert AFTER INSERT ON intentions
WHEN NEW.starts_at IS NOT (SELECT c.starts_at FROM commitments c WHERE c.id = NEW.commitment_id)
BEGIN
    UPDATE intentions SET starts_at = (SELECT c.starts_at FROM commitments c WHERE c.id = NEW.commitment_id)
        WHERE id = NEW.id;
END;

CREATE TRIGGER commitments_starts_at_copy AFTER UPDATE OF starts_at ON commitments
WHEN NEW.starts_at IS NOT OLD.starts_at
BEGIN
    UPDATE intentions SET starts_at = NEW.starts_at WHERE commitment_id = NEW.id;
END;

-- Uncertain, review and failed intentions by commitment time; covering for
-- the Atención filter on state and due time. `dispatching` is left out on
-- purpose (every send passes through it; stuck ones are few and found by
-- `intentions_lease`), so the dispatcher's claim path pays nothing here.
CREATE INDEX intentions_attention ON intentions(starts_at, state, due_at, commitment_id)
    WHERE state IN ('uncertain', 'review', 'failed');

-- Reschedule requests by commitment time (Atención), instead of reading
-- every commitment of a two-week window.
CREATE INDEX commitments_reschedule ON commitments(starts_at)
    WHERE reschedule_requested_at IS NOT NULL;

-- Contacts that opted out (Tablero), instead of reading every contact.
CREATE INDEX contacts_opt_out ON contacts(id)
    WHERE opt_out_marketing_at IS NOT NULL OR opt_out_transactional_at IS NOT NULL;

-- Day lists ordered by due time (`ledger list --day`): the page straight
-- from the index instead of sorting the whole day.
CREATE INDEX intentions_day_due ON intentions(day, due_at);

-- The Tablero's closures by reason and its latency sample read a day's rows
-- by state: with the reason and the due time in the index they never read
-- the table. Replaces 0001's (day, state), a prefix of this one.
DROP INDEX intentions_day_state;
CREATE INDEX intentions_day_state ON intentions(day, state, state_reason, due_at);
