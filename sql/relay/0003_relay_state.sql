-- Records the relay refused to publish (for example larger than the broker
-- accepts): written durably before the relay confirms past them (docs/design.md#rejected-records).
CREATE TABLE IF NOT EXISTS outbox_rejected (
    event_id    uuid NOT NULL,
    lsn         pg_lsn NOT NULL,
    topic       text NOT NULL,
    reason      text NOT NULL,
    rejected_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, lsn)
);

-- One row per slot this database's relays have streamed from. A slot that is
-- missing although a row says it confirmed positions before must not be
-- recreated silently (docs/design.md#no-silent-slot-recreation).
CREATE TABLE IF NOT EXISTS relay_state (
    slot_name     text PRIMARY KEY,
    confirmed_lsn pg_lsn NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
