-- Reserving and dispatching with fewer index bytes (issue 12).
--
-- `intentions_commitment` held (commitment_id, state). Every reader goes
-- by commitment first and finds a handful of rows there (a commitment has
-- a booking notice, two reminders and their replacements), so the state
-- in the entry saved nothing: `planned_of_commitment` filters a few rows,
-- the console's "intentions of these commitments" wants (commitment_id,
-- id) order, which the rowid after commitment_id gives for free. The
-- state made each entry longer on every reservation and, worse, made
-- every state change (claim, result, webhook) delete and re-insert the
-- entry; without it a state change leaves this index alone.
DROP INDEX intentions_commitment;
CREATE INDEX intentions_commitment ON intentions(commitment_id);
