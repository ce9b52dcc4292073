-- The front desk's work queue (issue 10): cases marked handled, and a
-- search index for finding a patient who calls.

-- One mark per case: who handled it, when, through which operator action,
-- and the situation it was made on (`situation_at`: the intention's
-- state_changed_at, the reschedule request's time, the refused event's
-- last sighting, read right after the action). `kind` says what
-- `subject_id` is: 'intention' (intentions.id), 'reschedule'
-- (commitments.id, a reschedule request) or 'refused' (refused_events.id).
-- A newer mark replaces the older one; the action log (`operator_actions`)
-- keeps every one. Whether a mark still covers its case (the situation is
-- still the one it was made on) is the domain's rule, applied by the query.
CREATE TABLE attention_handled (
    kind        TEXT NOT NULL CHECK (kind IN ('intention', 'reschedule', 'refused')),
    subject_id  INTEGER NOT NULL,
    handled_at  INTEGER NOT NULL,
    situation_at INTEGER,
    operator    TEXT NOT NULL,
    action_id   INTEGER NOT NULL REFERENCES operator_actions(id),
    PRIMARY KEY (kind, subject_id)
) WITHOUT ROWID;

-- The day's handled cases (the console's toggle), newest first.
CREATE INDEX attention_handled_at ON attention_handled(handled_at);

-- Patient search: one row per commitment (rowid = commitments.id) holding
-- its reference, the patient's name (the commitment's own, else the
-- contact's) and the phone's last four digits,
-- indexed by trigrams (any substring of three or more characters, accents
-- and case ignored). Contentless: the text lives in the tables; the
-- triggers below keep the index equal to them.
CREATE VIRTUAL TABLE commitment_search USING fts5(
    doc, content = '', contentless_delete = 1, tokenize = 'trigram remove_diacritics 1'
);

-- Contacts' commitments, for re-indexing when a contact's name or phone
-- changes.
CREATE INDEX commitments_contact ON commitments(contact_id) WHERE contact_id IS NOT NULL;

INSERT INTO commitment_search(rowid, doc)
    SELECT c.id, c.ref || ' ' || coalesce(c.contact_name, k.name, '') || ' ' || coalesce(substr(k.phone, -4), '')
    FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id;

CREATE TRIGGER commitment_search_insert AFTER INSERT ON commitments
BEGIN
    INSERT INTO commitment_search(rowid, doc)
        SELECT NEW.id, NEW.ref || ' ' || coalesce(NEW.contact_name, k.name, '') || ' ' || coalesce(substr(k.phone, -4), '')
        FROM (SELECT 1) LEFT JOIN contacts k ON k.id = NEW.contact_id;
END;

CREATE TRIGGER commitment_search_update AFTER UPDATE OF ref, contact_id, contact_name ON commitments
WHEN NEW.ref IS NOT OLD.ref OR NEW.contact_id IS NOT OLD.contact_id
    OR NEW.contact_name IS NOT OLD.contact_name
BEGIN
    DELETE FROM commitment_search WHERE rowid = OLD.id;
    INSERT INTO commitment_search(rowid, doc)
        SELECT NEW.id, NEW.ref || ' ' || coalesce(NEW.contact_name, k.name, '') || ' ' || coalesce(substr(k.phone, -4), '')
        FROM (SELECT 1) LEFT JOIN contacts k ON k.id = NEW.contact_id;
END;

CREATE TRIGGER commitment_search_delete AFTER DELETE ON commitments
BEGIN
    DELETE FROM commitment_search WHERE rowid = OLD.id;
END;

CREATE TRIGGER commitment_search_contact AFTER UPDATE OF name, phone ON contacts
WHEN NEW.name IS NOT OLD.name OR NEW.phone IS NOT OLD.phone
BEGIN
    DELETE FROM commitment_search WHERE rowid IN (SELECT id FROM commitments WHERE contact_id = NEW.id);
    INSERT INTO commitment_search(rowid, doc)
        SELECT c.id, c.ref || ' ' || coalesce(c.contact_name, NEW.name, '') || ' ' || coalesce(substr(NEW.phone, -4), '')
        FROM commitments c WHERE c.contact_id = NEW.id;
END;
