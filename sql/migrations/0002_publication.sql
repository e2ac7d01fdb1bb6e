-- INSERTs only (docs/design.md#insert-only-publication): deleting published outbox rows never needs a
-- replica identity and never emits events.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'eventforge_outbox') THEN
        CREATE PUBLICATION eventforge_outbox FOR TABLE outbox WITH (publish = 'insert');
    END IF;
END
$$;
