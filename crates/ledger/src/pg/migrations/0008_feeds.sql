-- The same tables as SQLite's migration 0013. Calendar feeds polled by `unavez serve` (issue 27 §1–§2).
--
-- `feeds`: one status row per `[[import.feed]]`, by its name. `origin` is
-- the URL's scheme and host only: the URL is a secret (a token in its
-- path), so the ledger never holds it. `lease_owner`/`lease_until`: the
-- one `serve` polling the feed now; another takes it over when it lapses.
-- `etag`/`last_modified`: the last 200's validators, for a conditional
-- GET. `failing_since`: the first failure after the last success (the
-- stale-feed alert). `events_seen`/`events_applied`: the last imported
-- body's VEVENTs and the events it changed.
CREATE TABLE feeds (
    name            TEXT PRIMARY KEY,
    origin          TEXT NOT NULL,
    lease_owner     TEXT,
    lease_until     BIGINT,
    etag            TEXT,
    last_modified   TEXT,
    last_poll_at    BIGINT,
    last_success_at BIGINT,
    last_failure_at BIGINT,
    last_failure    TEXT,
    failing_since   BIGINT,
    events_seen     BIGINT NOT NULL DEFAULT 0,
    events_applied  BIGINT NOT NULL DEFAULT 0
);

-- The previous successful poll's upcoming events (inside the window), by
-- commitment ref, with the UID presence is decided by.
CREATE TABLE feed_seen (
    feed      TEXT NOT NULL REFERENCES feeds(name),
    ref       TEXT NOT NULL,
    uid       TEXT NOT NULL,
    starts_at BIGINT NOT NULL,
    PRIMARY KEY (feed, ref)
);

-- Disappearances held in review (a mass disappearance) until a person
-- confirms or discards them; while a row is here its commitment's planned
-- messages are not claimed.
CREATE TABLE feed_held (
    feed          TEXT NOT NULL REFERENCES feeds(name),
    ref           TEXT NOT NULL,
    uid           TEXT NOT NULL,
    starts_at     BIGINT NOT NULL,
    commitment_id BIGINT REFERENCES commitments(id),
    held_at       BIGINT NOT NULL,
    PRIMARY KEY (feed, ref)
);
CREATE INDEX feed_held_commitment ON feed_held(commitment_id);
