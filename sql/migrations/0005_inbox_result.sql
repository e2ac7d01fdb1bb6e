-- What the worker did with each event of its inbox: 'applied' (the handler
-- ran, or skipped it) or 'dlq' (dead-lettered). A 'dlq' row makes a copy
-- of a dead-lettered event delivered later a duplicate instead of a second
-- dead letter; a record republished by `eventforge dlq replay` turns it into
-- 'applied' in the transaction that applies the event. Additive and
-- idempotent: existing rows are applied events.
ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS result text NOT NULL DEFAULT 'applied';
