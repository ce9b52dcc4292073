-- A channel that refuses us (issue 24: "a rejected credential must not burn
-- the day's messages"). A dispatcher whose channel rejects its credential,
-- has no such engine instance, finds it unlinked or cannot complete the TLS
-- handshake pauses sending on that channel and probes it; its heartbeat row
-- says so in typed words, not only in `last_error`'s English text:
-- `channel_state` is 'ok' or 'paused', `channel_error` the fault's code
-- (`domain::fault::ChannelFault`), and `channel_secret_env` the environment
-- variable the rejected secret came from (its name, never the secret), so a
-- console of another process can say what to check.
ALTER TABLE dispatchers ADD COLUMN channel_state TEXT NOT NULL DEFAULT 'ok'
    CHECK (channel_state IN ('ok', 'paused'));
ALTER TABLE dispatchers ADD COLUMN channel_error TEXT
    CHECK (channel_error IS NULL
        OR channel_error IN ('credential_rejected', 'instance_unknown', 'instance_disconnected', 'tls'));
ALTER TABLE dispatchers ADD COLUMN channel_secret_env TEXT;
