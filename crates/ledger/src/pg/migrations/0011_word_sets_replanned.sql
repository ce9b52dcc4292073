-- 0010's word-set trigger, planned afresh on every firing and reading each
-- changed commitment's words by its own index probe. 0010's statements take
-- no parameters, so PL/pgSQL prepared them once per session and kept that
-- plan for good: a session that first fired it on an empty ledger (a
-- `ledger copy`, a `serve` started on a new clinic) kept a sequential scan
-- of `commitment_search_names` for every later commitment, and a large
-- import in one transaction became quadratic (a million-intention copy did
-- not finish in half an hour; 2,000 commitments took 0.6 s on an empty
-- table, 2.1 s six thousand commitments later). `EXECUTE` plans each
-- statement with the table's size at that moment; the per-commitment
-- `LATERAL` lets that plan be an index probe as soon as the table has a few
-- pages, where `IN (…)` kept hashing the whole table until it held
-- thousands of names. The transition table `changed` is visible to
-- `EXECUTE` as to static statements. An inserted name word never empties a
-- set, so only a statement that deleted words looks for empty ones.
CREATE OR REPLACE FUNCTION commitment_search_word_sets_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        EXECUTE 'DELETE FROM commitment_search_word_sets s
            WHERE s.commitment_id IN (SELECT commitment_id FROM changed)
              AND NOT EXISTS (SELECT 1 FROM commitment_search_names n WHERE n.commitment_id = s.commitment_id)';
    END IF;
    EXECUTE 'INSERT INTO commitment_search_word_sets(commitment_id, words)
        SELECT c.id, w.words FROM (SELECT DISTINCT commitment_id AS id FROM changed) AS c,
            LATERAL (SELECT array_agg(n.word ORDER BY n.word) AS words FROM commitment_search_names n
                     WHERE n.commitment_id = c.id) AS w
        WHERE w.words IS NOT NULL
        ON CONFLICT (commitment_id) DO UPDATE SET words = excluded.words
            WHERE commitment_search_word_sets.words IS DISTINCT FROM excluded.words';
    RETURN NULL;
END $$;

-- The same trap with parameters: PL/pgSQL switches a statement to a
-- generic plan after five executions and keeps it, and a generic plan made
-- while the name words were few hashed the whole table for every renamed
-- contact (one sequential scan of `commitment_search_names` per contact
-- whose name an import changed, seen at 100,000 booking events). Here each
-- statement is planned with its values when it runs, one commitment at a
-- time, so the only plan worth having is an index probe.
CREATE OR REPLACE FUNCTION commitment_search_names_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        EXECUTE 'DELETE FROM commitment_search_names WHERE commitment_id = $1' USING OLD.id;
    END IF;
    INSERT INTO commitment_search_names(word, commitment_id)
        SELECT w, NEW.id FROM commitment_search_words_of(coalesce(NEW.contact_name,
            (SELECT k.name FROM contacts k WHERE k.id = NEW.contact_id))) AS w;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION commitment_search_names_contact() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    c RECORD;
BEGIN
    FOR c IN EXECUTE 'SELECT id, contact_name FROM commitments WHERE contact_id = $1' USING NEW.id LOOP
        EXECUTE 'DELETE FROM commitment_search_names WHERE commitment_id = $1' USING c.id;
        EXECUTE 'INSERT INTO commitment_search_names(word, commitment_id)
                     SELECT w, $1 FROM commitment_search_words_of(coalesce($2, $3)) AS w'
            USING c.id, c.contact_name, NEW.name;
    END LOOP;
    RETURN NULL;
END $$;
