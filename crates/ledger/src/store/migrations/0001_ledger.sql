-- The intention ledger. Times are INTEGER milliseconds since the Unix epoch
-- (UTC) so that range queries are index-friendly; days are TEXT YYYY-MM-DD
-- in the configured operating time zone.

CREATE TABLE contacts (
    id                INTEGER PRIMARY KEY,
    phone             TEXT NOT NULL UNIQUE,          -- E.164
    name              TEXT,
    language          TEXT,
    consent_marketing INTEGER NOT NULL DEFAULT 0,
    opt_out_marketing_at      INTEGER,               -- never cleared by a later order
    opt_out_transactional_at  INTEGER,
    last_inbound_at   INTEGER,                       -- opens the 24-hour service window
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

CREATE TABLE commitments (
    id                INTEGER PRIMARY KEY,
    ref               TEXT NOT NULL UNIQUE,
    kind              TEXT NOT NULL CHECK (kind IN ('appointment', 'order')),
    status            TEXT NOT NULL,
    version           INTEGER NOT NULL CHECK (version >= 1),
    starts_at         INTEGER,
    service           TEXT,
    location          TEXT,
    contact_id        INTEGER REFERENCES contacts(id),
    confirmed_at      INTEGER,
    manual_contact_at INTEGER,
    reschedule_requested_at INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX commitments_starts_at ON commitments(starts_at);

-- Append-only log of booking events as received; one row per source event id.
CREATE TABLE commitment_events (
    id                INTEGER PRIMARY KEY,
    event_id          TEXT NOT NULL UNIQUE,
    commitment_ref    TEXT NOT NULL,
    type              TEXT NOT NULL,
    version_before    INTEGER,
    version_after     INTEGER,
    effect            TEXT NOT NULL,                 -- applied | stale | no_change
    source            TEXT NOT NULL,                 -- file name, 'http', 'demo'
    payload           TEXT NOT NULL,
    received_at       INTEGER NOT NULL
);
CREATE INDEX commitment_events_ref ON commitment_events(commitment_ref, id);

-- Facts about a commitment that are not events of the booking system:
-- customer replies, reschedule requests, conversation signals.
CREATE TABLE commitment_signals (
    id                INTEGER PRIMARY KEY,
    commitment_id     INTEGER NOT NULL REFERENCES commitments(id),
    kind              TEXT NOT NULL,
    text              TEXT,
    source_event      TEXT,
    at                INTEGER NOT NULL
);
CREATE INDEX commitment_signals_commitment ON commitment_signals(commitment_id, id);

CREATE TABLE intentions (
    id                INTEGER PRIMARY KEY,
    key               TEXT NOT NULL UNIQUE,
    commitment_id     INTEGER NOT NULL REFERENCES commitments(id),
    commitment_version INTEGER NOT NULL,
    purpose           TEXT NOT NULL,
    contact_id        INTEGER REFERENCES contacts(id),
    recipient         TEXT NOT NULL,
    category          TEXT NOT NULL CHECK (category IN ('transactional', 'marketing')),
    channel           TEXT NOT NULL,
    template          TEXT NOT NULL,
    language          TEXT NOT NULL,
    parameters        TEXT NOT NULL,                 -- JSON array of strings
    body              TEXT NOT NULL,
    fingerprint       TEXT NOT NULL,
    correlation_id    TEXT NOT NULL,
    asks_confirmation INTEGER NOT NULL DEFAULT 0,
    due_at            INTEGER NOT NULL,
    expires_at        INTEGER,
    day               TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('planned','dispatching','uncertain','accepted','sent','delivered','read','failed','review','cancelled')),
    state_reason      TEXT,
    state_changed_at  INTEGER NOT NULL,
    related_id        INTEGER REFERENCES intentions(id),
    created_by        TEXT NOT NULL,
    authorized_by     TEXT,
    reason            TEXT,
    lease_owner       TEXT,
    lease_until       INTEGER,
    attempt_count     INTEGER NOT NULL DEFAULT 0,
    next_attempt_at   INTEGER,
    provider_command_id TEXT,
    provider_message_id TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX intentions_state_due ON intentions(state, due_at);
CREATE INDEX intentions_day_state ON intentions(day, state);
CREATE INDEX intentions_commitment ON intentions(commitment_id, state);
CREATE INDEX intentions_lease ON intentions(lease_until) WHERE state = 'dispatching';
CREATE INDEX intentions_message_id ON intentions(provider_message_id) WHERE provider_message_id IS NOT NULL;
CREATE INDEX intentions_related ON intentions(related_id) WHERE related_id IS NOT NULL;
CREATE INDEX intentions_recipient_day ON intentions(recipient, day);

CREATE TABLE attempts (
    id                INTEGER PRIMARY KEY,
    intention_id      INTEGER NOT NULL REFERENCES intentions(id),
    n                 INTEGER NOT NULL,
    worker            TEXT NOT NULL,
    channel           TEXT NOT NULL,
    started_at        INTEGER NOT NULL,
    ended_at          INTEGER,
    outcome           TEXT NOT NULL DEFAULT 'started', -- started | accepted | failed | retry | uncertain | conflict
    http_status       INTEGER,
    command_id        TEXT,
    message_id        TEXT,
    error_code        TEXT,
    error_detail      TEXT,
    commitment_version_checked INTEGER NOT NULL,
    UNIQUE (intention_id, n)
);
CREATE INDEX attempts_message_id ON attempts(message_id) WHERE message_id IS NOT NULL;
CREATE INDEX attempts_open ON attempts(intention_id) WHERE ended_at IS NULL;

CREATE TABLE intention_history (
    id                INTEGER PRIMARY KEY,
    intention_id      INTEGER NOT NULL REFERENCES intentions(id),
    at                INTEGER NOT NULL,
    from_state        TEXT,
    to_state          TEXT NOT NULL,
    applied           INTEGER NOT NULL,              -- 1 moved the state, 0 recorded only
    signal            TEXT NOT NULL,
    cause             TEXT NOT NULL CHECK (cause IN ('planner','dispatcher','webhook','reconciler','operator','import')),
    evidence          TEXT,
    note              TEXT,
    commitment_version INTEGER
);
CREATE INDEX intention_history_intention ON intention_history(intention_id, id);

-- Webhook and status events exactly as received, in received order.
CREATE TABLE channel_events (
    id                INTEGER PRIMARY KEY,
    source            TEXT NOT NULL,                 -- cloud | motor
    event_id          TEXT NOT NULL,
    kind              TEXT NOT NULL,
    message_id        TEXT,
    intention_key     TEXT,
    intention_id      INTEGER REFERENCES intentions(id),
    status            TEXT NOT NULL,                 -- applied | pending | ignored
    payload           TEXT NOT NULL,
    received_at       INTEGER NOT NULL,
    applied_at        INTEGER,
    UNIQUE (source, event_id)
);
CREATE INDEX channel_events_pending ON channel_events(status) WHERE status = 'pending';

CREATE TABLE operator_actions (
    id                INTEGER PRIMARY KEY,
    at                INTEGER NOT NULL,
    operator          TEXT NOT NULL,
    role              TEXT NOT NULL,
    action            TEXT NOT NULL,
    intention_id      INTEGER REFERENCES intentions(id),
    commitment_id     INTEGER REFERENCES commitments(id),
    scope             TEXT,
    reason            TEXT NOT NULL CHECK (length(trim(reason)) > 0),
    result            TEXT NOT NULL,
    detail            TEXT
);
CREATE INDEX operator_actions_intention ON operator_actions(intention_id);

-- Monotonic counters (duplicates blocked, rejections) for metrics.
CREATE TABLE counters (
    name              TEXT PRIMARY KEY,
    value             INTEGER NOT NULL
);

-- What was sent cannot be edited: once an attempt exists, the content that
-- the customer may have received is evidence.
CREATE TRIGGER intentions_content_frozen
BEFORE UPDATE OF recipient, template, language, parameters, body, fingerprint, expires_at, correlation_id, key
ON intentions
WHEN EXISTS (SELECT 1 FROM attempts WHERE intention_id = OLD.id)
 AND (NEW.recipient IS NOT OLD.recipient OR NEW.template IS NOT OLD.template
      OR NEW.language IS NOT OLD.language OR NEW.parameters IS NOT OLD.parameters
      OR NEW.body IS NOT OLD.body OR NEW.fingerprint IS NOT OLD.fingerprint
      OR NEW.expires_at IS NOT OLD.expires_at OR NEW.correlation_id IS NOT OLD.correlation_id
      OR NEW.key IS NOT OLD.key)
BEGIN
    SELECT RAISE(ABORT, 'intention content is immutable once an attempt exists');
END;

-- History and the event logs are append-only.
CREATE TRIGGER intention_history_append_only BEFORE UPDATE ON intention_history
BEGIN SELECT RAISE(ABORT, 'intention_history is append-only'); END;
CREATE TRIGGER intention_history_no_delete BEFORE DELETE ON intention_history
BEGIN SELECT RAISE(ABORT, 'intention_history is append-only'); END;
CREATE TRIGGER commitment_events_no_delete BEFORE DELETE ON commitment_events
BEGIN SELECT RAISE(ABORT, 'commitment_events is append-only'); END;
CREATE TRIGGER operator_actions_no_update BEFORE UPDATE ON operator_actions
BEGIN SELECT RAISE(ABORT, 'operator_actions is append-only'); END;
