-- Dispatcher heartbeats and the technician's channel-event cases (issue 10,
-- issue 14).

-- One row per dispatcher run (`serve`, `dispatch`, a console's embedded
-- dispatcher, the demo): who runs it where, what it says it is doing, and
-- when it last said so. A second console on the same ledger reads these
-- rows to show the dispatcher that is really running; whether a row stands
-- for a live dispatcher is decided by `domain::heartbeat` (its beat is
-- younger than three of its own intervals), not here. `id` is unique per
-- process run and is also the lease owner of its claims. Rows of runs long
-- gone are pruned by the next dispatcher that starts.
CREATE TABLE dispatchers (
    id            TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    owner         TEXT,
    state         TEXT NOT NULL CHECK (state IN ('running', 'paused', 'stopped')),
    last_error    TEXT,
    last_error_at INTEGER,
    started_at    INTEGER NOT NULL,
    beat_at       INTEGER NOT NULL,
    interval_ms   INTEGER NOT NULL CHECK (interval_ms > 0)
) WITHOUT ROWID;

CREATE INDEX dispatchers_beat ON dispatchers(beat_at);

-- Channel events parked or refused (a key and a message id naming two
-- intentions, an event of another engine instance) are technicians' cases
-- in Atención, so a mark "atendido" may now name one: `subject_id` is
-- `channel_events.id` for kind 'channel_event'. SQLite cannot change a
-- CHECK in place, so the table is rebuilt with the same rows.
CREATE TABLE attention_handled_0007 (
    kind        TEXT NOT NULL CHECK (kind IN ('intention', 'reschedule', 'refused', 'channel_event')),
    subject_id  INTEGER NOT NULL,
    handled_at  INTEGER NOT NULL,
    situation_at INTEGER,
    operator    TEXT NOT NULL,
    action_id   INTEGER NOT NULL REFERENCES operator_actions(id),
    PRIMARY KEY (kind, subject_id)
) WITHOUT ROWID;

INSERT INTO attention_handled_0007(kind, subject_id, handled_at, situation_at, operator, action_id)
    SELECT kind, subject_id, handled_at, situation_at, operator, action_id FROM attention_handled;

DROP TABLE attention_handled;

ALTER TABLE attention_handled_0007 RENAME TO attention_handled;

CREATE INDEX attention_handled_at ON attention_handled(handled_at);
