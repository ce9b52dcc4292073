-- Finding a patient who calls (issue 25): by the whole phone or any
-- trailing run of four or more of its digits, and by the words of the name
-- in any order, accents and case ignored, with one typo forgiven. The
-- rules (what a typed search means, the typo distance, the ranking) are
-- unavez-core's `search` module; these indexes only answer look-ups.

-- Every suffix of 4 to 15 digits of each contact's phone (its digits:
-- `+` and separators left out), so `908439509`, `+51908439509` and
-- `439509` are each one index look-up (`suffix = ?`); a contact is one
-- phone, its commitments are reached through `commitments_contact`.
-- Kept equal to `contacts.phone` by the triggers below.
CREATE TABLE contact_phone_suffixes (
    suffix     TEXT NOT NULL,
    contact_id INTEGER NOT NULL,
    PRIMARY KEY (suffix, contact_id)
) WITHOUT ROWID;

INSERT OR IGNORE INTO contact_phone_suffixes(suffix, contact_id)
    SELECT substr(d.v, -n.n), d.id
    FROM (SELECT id, replace(replace(replace(replace(replace(replace(phone, '+', ''), ' ', ''), '-', ''), '.', ''), '(', ''), ')', '') AS v FROM contacts) d, (SELECT 4 AS n UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) n
    WHERE n.n <= length(d.v);

CREATE TRIGGER contact_phone_suffixes_insert AFTER INSERT ON contacts
BEGIN
    INSERT OR IGNORE INTO contact_phone_suffixes(suffix, contact_id)
        SELECT substr(d.v, -n.n), NEW.id
        FROM (SELECT replace(replace(replace(replace(replace(replace(NEW.phone, '+', ''), ' ', ''), '-', ''), '.', ''), '(', ''), ')', '') AS v) d, (SELECT 4 AS n UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) n
        WHERE n.n <= length(d.v);
END;

CREATE TRIGGER contact_phone_suffixes_update AFTER UPDATE OF phone ON contacts
WHEN NEW.phone IS NOT OLD.phone
BEGIN
    DELETE FROM contact_phone_suffixes WHERE contact_id = OLD.id;
    INSERT OR IGNORE INTO contact_phone_suffixes(suffix, contact_id)
        SELECT substr(d.v, -n.n), NEW.id
        FROM (SELECT replace(replace(replace(replace(replace(replace(NEW.phone, '+', ''), ' ', ''), '-', ''), '.', ''), '(', ''), ')', '') AS v) d, (SELECT 4 AS n UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13 UNION ALL SELECT 14 UNION ALL SELECT 15) n
        WHERE n.n <= length(d.v);
END;

CREATE TRIGGER contact_phone_suffixes_delete AFTER DELETE ON contacts
BEGIN
    DELETE FROM contact_phone_suffixes WHERE contact_id = OLD.id;
END;

-- The words of each commitment's patient name (the commitment's own, else
-- the contact's; rowid = commitments.id), folded (lower case, accents
-- dropped: `remove_diacritics 2`) and split into words by FTS5's
-- unicode61 tokenizer, as core's `search::name_tokens` does. A word is
-- found by an exact token query; the words one typo from a typed word are
-- found by looking up core's `one_typo_variants` in the vocabulary below.
-- Contentless: the names live in the tables. PostgreSQL holds the same
-- words in a plain table (its migration 0007); backend-specific, so the
-- schema comparison leaves both out.
CREATE VIRTUAL TABLE commitment_search_names USING fts5(
    name, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);

-- The distinct words of the names (`term`): what `name_word_deletes` is
-- rebuilt from (see below).
CREATE VIRTUAL TABLE commitment_search_words USING fts5vocab(commitment_search_names, 'row');

-- The names' vocabulary with its deletions (SymSpell): a row (word, word)
-- for every word of a name and, for a word of four letters or more, one
-- row (del, word) per string one deletion away. The words within one typo
-- of a typed word are under the typed word itself and its own deletions:
-- a handful of index probes however large the vocabulary, then the
-- distance is checked in Rust (core's `search::Closeness`). Written by the
-- ledger when it saves a name (SQLite has no accent folding in SQL; on
-- PostgreSQL a trigger writes it); the words of names already stored are
-- added right after this migration. It only grows: a word no name holds
-- any more finds nothing in the name index.
CREATE TABLE name_word_deletes (
    del  TEXT NOT NULL,
    word TEXT NOT NULL,
    PRIMARY KEY (del, word)
) WITHOUT ROWID;

INSERT INTO commitment_search_names(rowid, name)
    SELECT c.id, coalesce(c.contact_name, k.name, '')
    FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id;

CREATE TRIGGER commitment_search_names_insert AFTER INSERT ON commitments
BEGIN
    INSERT INTO commitment_search_names(rowid, name)
        SELECT NEW.id, coalesce(NEW.contact_name, k.name, '')
        FROM (SELECT 1) LEFT JOIN contacts k ON k.id = NEW.contact_id;
END;

CREATE TRIGGER commitment_search_names_update AFTER UPDATE OF contact_id, contact_name ON commitments
WHEN NEW.contact_id IS NOT OLD.contact_id OR NEW.contact_name IS NOT OLD.contact_name
BEGIN
    DELETE FROM commitment_search_names WHERE rowid = OLD.id;
    INSERT INTO commitment_search_names(rowid, name)
        SELECT NEW.id, coalesce(NEW.contact_name, k.name, '')
        FROM (SELECT 1) LEFT JOIN contacts k ON k.id = NEW.contact_id;
END;

CREATE TRIGGER commitment_search_names_delete AFTER DELETE ON commitments
BEGIN
    DELETE FROM commitment_search_names WHERE rowid = OLD.id;
END;

CREATE TRIGGER commitment_search_names_contact AFTER UPDATE OF name ON contacts
WHEN NEW.name IS NOT OLD.name
BEGIN
    DELETE FROM commitment_search_names WHERE rowid IN (SELECT id FROM commitments WHERE contact_id = NEW.id);
    INSERT INTO commitment_search_names(rowid, name)
        SELECT c.id, coalesce(c.contact_name, NEW.name, '')
        FROM commitments c WHERE c.contact_id = NEW.id;
END;
