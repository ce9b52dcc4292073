-- Finding a patient who calls (issue 25); see SQLite migration 0012,
-- whose logical schema this matches. The rules are unavez-core's `search`
-- module; these indexes only answer look-ups.

-- Every suffix of 4 to 15 digits of each contact's phone.
CREATE TABLE contact_phone_suffixes (
    suffix     TEXT NOT NULL,
    contact_id BIGINT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    PRIMARY KEY (suffix, contact_id)
);

CREATE FUNCTION contact_phone_suffixes_of(phone TEXT) RETURNS SETOF TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT right(d, n) FROM (SELECT regexp_replace(coalesce(phone, ''), '[^0-9]', '', 'g') AS d) AS v,
        generate_series(4, least(length(d), 15)) AS n
$$;

INSERT INTO contact_phone_suffixes(suffix, contact_id)
    SELECT DISTINCT s, k.id FROM contacts k, contact_phone_suffixes_of(k.phone) AS s;

CREATE FUNCTION contact_phone_suffixes_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM contact_phone_suffixes WHERE contact_id = OLD.id;
    END IF;
    INSERT INTO contact_phone_suffixes(suffix, contact_id)
        SELECT DISTINCT s, NEW.id FROM contact_phone_suffixes_of(NEW.phone) AS s
        ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER contact_phone_suffixes_insert AFTER INSERT ON contacts
    FOR EACH ROW EXECUTE FUNCTION contact_phone_suffixes_keep();
CREATE TRIGGER contact_phone_suffixes_update AFTER UPDATE OF phone ON contacts
    FOR EACH ROW WHEN (NEW.phone IS DISTINCT FROM OLD.phone)
    EXECUTE FUNCTION contact_phone_suffixes_keep();

-- The words of each commitment's patient name (the commitment's own, else
-- the contact's), folded as `unavez_fold` does (lower case, accents
-- dropped) and split on what is not a letter or a digit, as core's
-- `search::name_tokens` does; SQLite holds them in an FTS5 table.
-- Backend-specific, so the schema comparison leaves it out.
CREATE TABLE commitment_search_names (
    word          TEXT NOT NULL,
    commitment_id BIGINT NOT NULL REFERENCES commitments(id) ON DELETE CASCADE,
    PRIMARY KEY (word, commitment_id)
);
CREATE INDEX commitment_search_names_commitment ON commitment_search_names(commitment_id);

CREATE FUNCTION commitment_search_words_of(name TEXT) RETURNS SETOF TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT DISTINCT w FROM regexp_split_to_table(unavez_fold(coalesce(name, '')), '[^[:alnum:]]+') AS w
    WHERE w <> ''
$$;

INSERT INTO commitment_search_names(word, commitment_id)
    SELECT w, c.id FROM commitments c LEFT JOIN contacts k ON k.id = c.contact_id,
        commitment_search_words_of(coalesce(c.contact_name, k.name)) AS w;

CREATE FUNCTION commitment_search_names_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM commitment_search_names WHERE commitment_id = OLD.id;
    END IF;
    INSERT INTO commitment_search_names(word, commitment_id)
        SELECT w, NEW.id FROM commitment_search_words_of(coalesce(NEW.contact_name,
            (SELECT k.name FROM contacts k WHERE k.id = NEW.contact_id))) AS w;
    RETURN NULL;
END $$;
CREATE TRIGGER commitment_search_names_insert AFTER INSERT ON commitments
    FOR EACH ROW EXECUTE FUNCTION commitment_search_names_keep();
CREATE TRIGGER commitment_search_names_update AFTER UPDATE OF contact_id, contact_name ON commitments
    FOR EACH ROW WHEN (NEW.contact_id IS DISTINCT FROM OLD.contact_id
        OR NEW.contact_name IS DISTINCT FROM OLD.contact_name)
    EXECUTE FUNCTION commitment_search_names_keep();

CREATE FUNCTION commitment_search_names_contact() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM commitment_search_names WHERE commitment_id IN
        (SELECT id FROM commitments WHERE contact_id = NEW.id);
    INSERT INTO commitment_search_names(word, commitment_id)
        SELECT w, c.id FROM commitments c, commitment_search_words_of(coalesce(c.contact_name, NEW.name)) AS w
        WHERE c.contact_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER commitment_search_names_contact AFTER UPDATE OF name ON contacts
    FOR EACH ROW WHEN (NEW.name IS DISTINCT FROM OLD.name)
    EXECUTE FUNCTION commitment_search_names_contact();

-- The names' vocabulary with its deletions (SymSpell), as on SQLite (its
-- migration 0012): (word, word) for every word, (del, word) for each
-- string one deletion from a word of four letters or more. Written here by
-- a trigger on the name words; it only grows.
CREATE TABLE name_word_deletes (
    del  TEXT NOT NULL,
    word TEXT NOT NULL,
    PRIMARY KEY (del, word)
);

CREATE FUNCTION name_word_deletes_of(w TEXT) RETURNS SETOF TEXT
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT w
    UNION SELECT left(w, i - 1) || substr(w, i + 1) FROM generate_series(1, length(w)) AS i
        WHERE length(w) >= 4
$$;

INSERT INTO name_word_deletes(del, word)
    SELECT d, w FROM (SELECT DISTINCT word AS w FROM commitment_search_names) AS words,
        name_word_deletes_of(w) AS d;

CREATE FUNCTION name_word_deletes_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM name_word_deletes WHERE del = NEW.word AND word = NEW.word) THEN
        INSERT INTO name_word_deletes(del, word)
            SELECT d, NEW.word FROM name_word_deletes_of(NEW.word) AS d
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER name_word_deletes_keep AFTER INSERT ON commitment_search_names
    FOR EACH ROW EXECUTE FUNCTION name_word_deletes_keep();
