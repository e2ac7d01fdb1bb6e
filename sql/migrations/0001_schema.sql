-- The contract's tables: the outbox the relay reads through logical
-- replication, and the inbox the workers write. (The demo's orders table was
-- created here before `migrate --demo` existed: sql/demo/demo_0001_orders.sql
-- creates it now, a no-op on databases migrated before.)
CREATE TABLE IF NOT EXISTS outbox (
    event_id       uuid PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id   text NOT NULL,
    event_type     text NOT NULL,
    payload        jsonb NOT NULL,
    headers        jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Pruning and republishing select by age. An outbox table that existed
-- before EventForge (a Debezium-shaped one, read through the relay's
-- --outbox-preset or --outbox-column-* flags) may have no created_at: then
-- it gets no index, and stays as it is.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'outbox'::regclass AND attname = 'created_at' AND NOT attisdropped) THEN
        CREATE INDEX IF NOT EXISTS outbox_created_at_idx ON outbox (created_at);
    END IF;
END
$$;

CREATE TABLE IF NOT EXISTS processed_events (
    consumer     text NOT NULL,
    event_id     uuid NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
