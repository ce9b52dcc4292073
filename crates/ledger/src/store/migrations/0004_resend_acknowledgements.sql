-- Issue 9: an authorized resend cannot silently duplicate a delivered
-- message. When an earlier message of the same intention (the original or
-- an earlier resend) was already delivered or read, the supervisor must
-- acknowledge it to authorize a new one; this is that acknowledgement, tied
-- to the operator action that authorized the resend and to the new
-- intention it created. Append-only, like the action it belongs to.
-- `IF NOT EXISTS`: a ledger rewound to an older user_version (as the
-- console's migration test does) replays this without harm.
CREATE TABLE IF NOT EXISTS resend_acknowledgements (
    id                INTEGER PRIMARY KEY,
    action_id         INTEGER NOT NULL UNIQUE REFERENCES operator_actions(id),
    intention_id      INTEGER NOT NULL UNIQUE REFERENCES intentions(id),  -- the new resend
    original_id       INTEGER NOT NULL REFERENCES intentions(id),
    operator          TEXT NOT NULL,
    evidence          TEXT NOT NULL,                 -- JSON: the delivered/read messages acknowledged
    at                INTEGER NOT NULL
);

CREATE TRIGGER IF NOT EXISTS resend_acknowledgements_no_update BEFORE UPDATE ON resend_acknowledgements
BEGIN SELECT RAISE(ABORT, 'resend_acknowledgements is append-only'); END;
CREATE TRIGGER IF NOT EXISTS resend_acknowledgements_no_delete BEFORE DELETE ON resend_acknowledgements
BEGIN SELECT RAISE(ABORT, 'resend_acknowledgements is append-only'); END;
