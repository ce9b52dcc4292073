-- Name searches at a million intentions (issue 25): every word typed must
-- be in the patient's name. `commitment_search_names` (0007) answers that
-- one word at a time, and intersecting the words' posting lists read them
-- whole: a common first name and surname are ~7,000 and ~8,000
-- commitments each at a million intentions, hashed to keep ~150 (10-15 ms
-- a search). Here each commitment's name words are one array under a GIN
-- index, which intersects the words' posting lists inside the index and
-- returns only the commitments holding all of them (~1 ms). Kept from
-- `commitment_search_names` by statement triggers, so the three ways a
-- name changes (0007's triggers on commitments and contacts) keep it too.
-- Backend-specific like its source (SQLite's FTS5 does this itself), so
-- the schema comparison leaves it out (`commitment_search*`).
CREATE TABLE commitment_search_word_sets (
    commitment_id BIGINT PRIMARY KEY REFERENCES commitments(id) ON DELETE CASCADE,
    words         TEXT[] NOT NULL
);

INSERT INTO commitment_search_word_sets(commitment_id, words)
    SELECT commitment_id, array_agg(word ORDER BY word) FROM commitment_search_names GROUP BY commitment_id;

-- `fastupdate` off: a pending list would be read whole by every search
-- until a vacuum merges it, and a name is written far less often than it
-- is searched.
CREATE INDEX commitment_search_word_sets_words ON commitment_search_word_sets USING gin(words)
    WITH (fastupdate = off);

-- The word sets of the commitments whose name words a statement changed
-- (`changed`: its transition table), read again from the words.
CREATE FUNCTION commitment_search_word_sets_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM commitment_search_word_sets s
        WHERE s.commitment_id IN (SELECT commitment_id FROM changed)
          AND NOT EXISTS (SELECT 1 FROM commitment_search_names n WHERE n.commitment_id = s.commitment_id);
    INSERT INTO commitment_search_word_sets(commitment_id, words)
        SELECT n.commitment_id, array_agg(n.word ORDER BY n.word) FROM commitment_search_names n
        WHERE n.commitment_id IN (SELECT DISTINCT commitment_id FROM changed)
        GROUP BY n.commitment_id
        ON CONFLICT (commitment_id) DO UPDATE SET words = excluded.words
            WHERE commitment_search_word_sets.words IS DISTINCT FROM excluded.words;
    RETURN NULL;
END $$;
CREATE TRIGGER commitment_search_word_sets_insert AFTER INSERT ON commitment_search_names
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION commitment_search_word_sets_keep();
CREATE TRIGGER commitment_search_word_sets_delete AFTER DELETE ON commitment_search_names
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION commitment_search_word_sets_keep();

ANALYZE commitment_search_word_sets;
