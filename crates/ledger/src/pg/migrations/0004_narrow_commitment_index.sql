-- The same index as SQLite's migration 0009: by commitment only. Every
-- reader goes by commitment first and finds a handful of rows; the state
-- in the entry only made every state change rewrite it.
DROP INDEX intentions_commitment;
CREATE INDEX intentions_commitment ON intentions(commitment_id);
