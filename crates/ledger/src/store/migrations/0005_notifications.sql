-- Every WhatsApp notification kept, whatever its field (issue 14), and the
-- engine-event checks of issue 11.

-- A duplicate copy of a webhook event counts here instead of adding a
-- history row per copy.
ALTER TABLE channel_events ADD COLUMN copies INTEGER NOT NULL DEFAULT 1;
-- Why an event was parked or refused (a code the console translates).
ALTER TABLE channel_events ADD COLUMN reason TEXT;
CREATE INDEX channel_events_parked ON channel_events(status) WHERE status IN ('parked', 'refused');

-- Meta's user id (`user_id` of `contacts[]`), to correlate a message that
-- comes without a phone.
ALTER TABLE contacts ADD COLUMN wa_user_id TEXT;
CREATE INDEX contacts_wa_user_id ON contacts(wa_user_id) WHERE wa_user_id IS NOT NULL;

-- The last status Meta reported for each message template.
CREATE TABLE template_status (
    name              TEXT NOT NULL,
    language          TEXT NOT NULL,
    status            TEXT,          -- APPROVED, REJECTED, PAUSED, DISABLED…
    reason            TEXT,
    category          TEXT,
    quality           TEXT,          -- GREEN, YELLOW, RED
    channel_event_id  INTEGER REFERENCES channel_events(id),
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (name, language)
);
