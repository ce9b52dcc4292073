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

-- A contact's new name (every booking event carries the latest one) used to
-- re-index every commitment of that contact, although a commitment with a
-- name of its own (0003) reads that one first: its search text had not
-- changed, and each re-index left a deletion in the index that every later
-- merge had to check (the search index was a third of an import's time).
-- Only the commitments whose text does change are re-indexed now: those
-- without their own name, or all of them when the phone changes.
DROP TRIGGER commitment_search_contact;

CREATE TRIGGER commitment_search_contact AFTER UPDATE OF name, phone ON contacts
WHEN NEW.name IS NOT OLD.name OR NEW.phone IS NOT OLD.phone
BEGIN
    DELETE FROM commitment_search WHERE rowid IN (
        SELECT id FROM commitments
        WHERE contact_id = NEW.id AND (contact_name IS NULL OR NEW.phone IS NOT OLD.phone));
    INSERT INTO commitment_search(rowid, doc)
        SELECT c.id, c.ref || ' ' || coalesce(c.contact_name, NEW.name, '') || ' ' || coalesce(substr(NEW.phone, -4), '')
        FROM commitments c
        WHERE c.contact_id = NEW.id AND (c.contact_name IS NULL OR NEW.phone IS NOT OLD.phone);
END;
