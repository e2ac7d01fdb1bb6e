-- The earliest created_at that a transaction committed after confirmed_lsn
-- can carry: the start of the oldest transaction open in the database when
-- the relay sampled it, before confirmed_lsn was written to the WAL. A
-- recovery that republishes from it misses nothing and repeats seconds, not
-- an hour (docs/guarantees.md#a-lost-slot-costs-seconds-of-duplicates-not-an-hour). NULL when the
-- relay could not see every session's transaction start.
ALTER TABLE relay_state ADD COLUMN IF NOT EXISTS recover_since timestamptz;
