-- Conflicting booking events (issue 9): an event that states the stored
-- version with other content, or reuses an event id with other content, is
-- refused on its own and kept here, so that it is never lost silently. It
-- is not part of `commitment_events` (what the ledger accepted): posting
-- the same refused event again is refused again, not a duplicate.
CREATE TABLE refused_events (
    id                INTEGER PRIMARY KEY,
    event_id          TEXT NOT NULL,
    -- The commitment it is filed under: the event's own ref, or, when an
    -- event id was reused for a ref we do not know, the ref that id belongs to.
    commitment_ref    TEXT NOT NULL,
    type              TEXT NOT NULL,
    -- The stored version the event conflicted with. The refusal needs a
    -- person while the commitment is still at this version; a newer
    -- version from the booking system settles it.
    version           INTEGER NOT NULL,
    conflict          TEXT NOT NULL CHECK (conflict IN ('same_version', 'event_id_reused')),
    fields            TEXT NOT NULL,                 -- JSON array of JSON field names
    reason            TEXT NOT NULL,
    source            TEXT NOT NULL,                 -- file name, 'http'
    payload           TEXT NOT NULL,                 -- the refused event as received
    fingerprint       TEXT NOT NULL,                 -- of the canonical payload
    first_seen_at     INTEGER NOT NULL,
    last_seen_at      INTEGER NOT NULL,
    times             INTEGER NOT NULL DEFAULT 1,
    UNIQUE (event_id, fingerprint)
);
CREATE INDEX refused_events_ref ON refused_events(commitment_ref, id);

CREATE TRIGGER refused_events_no_delete BEFORE DELETE ON refused_events
BEGIN SELECT RAISE(ABORT, 'refused_events is append-only'); END;

-- The name of the person an appointment is for belongs to the commitment:
-- a family sharing one phone has one contact row, whose name is the latest
-- one seen, and reading the name from there made an unchanged event for a
-- sibling look like a change. Backfilled from the contact.
ALTER TABLE commitments ADD COLUMN contact_name TEXT;
UPDATE commitments SET contact_name = (SELECT k.name FROM contacts k WHERE k.id = commitments.contact_id);
