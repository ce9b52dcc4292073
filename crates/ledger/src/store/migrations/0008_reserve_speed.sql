-- Reserving intentions faster (issue 12).
--
-- The start time copied onto each intention (0002) was checked after every
-- insert with a lookup of its commitment, although the one writer of
-- planned work (`reserve_many`) sets it from that same row in the insert
-- itself. The trigger now only fills it for a writer that leaves it empty
-- (tests, generators, a future backend's import), which is what it was
-- for; rescheduling still rewrites it through `commitments_starts_at_copy`.
DROP TRIGGER intentions_starts_at_insert;

CREATE TRIGGER intentions_starts_at_insert AFTER INSERT ON intentions
WHEN NEW.starts_at IS NULL
BEGIN
    UPDATE intentions SET starts_at = (SELECT c.starts_at FROM commitments c WHERE c.id = NEW.commitment_id)
        WHERE id = NEW.id;
END;
