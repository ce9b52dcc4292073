-- Per-day counts are kept at commit, not row by row.
--
-- With several writers (dispatchers on several hosts, an import, the
-- webhooks), a row trigger locked a day's count row in the middle of a
-- transaction that then went on to insert intentions whose keys another
-- writer held: a transaction holding the count row waited for a key, the
-- key's holder waited for the count row, and PostgreSQL broke the deadlock
-- by failing one of them. Deferred to commit, a transaction takes count
-- rows only after every key and intention row it needs, so it never waits
-- for a key while holding a count. The function is unchanged.
DROP TRIGGER intention_counts_insert ON intentions;
DROP TRIGGER intention_counts_update ON intentions;
DROP TRIGGER intention_counts_delete ON intentions;
CREATE CONSTRAINT TRIGGER intention_counts_insert AFTER INSERT ON intentions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION intention_counts_keep();
CREATE CONSTRAINT TRIGGER intention_counts_update AFTER UPDATE OF state, day ON intentions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state OR NEW.day IS DISTINCT FROM OLD.day)
    EXECUTE FUNCTION intention_counts_keep();
CREATE CONSTRAINT TRIGGER intention_counts_delete AFTER DELETE ON intentions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION intention_counts_keep();
