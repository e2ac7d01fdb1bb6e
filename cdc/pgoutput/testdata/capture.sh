#!/usr/bin/env bash
# Regenerates the *.hex files here: real pgoutput messages from PostgreSQL 15,
# one per line as "<lsn> <xid> <hex>", read through the SQL interface
# (pg_logical_slot_get_binary_changes returns the same bytes the walsender
# sends as XLogData.WALData).
#
# Usage: PSQL="psql -h HOST -p PORT -U postgres" ./capture.sh
# against a throwaway cluster with wal_level=logical, a database "cap" holding
# sql/migrations 0001+0002, and nothing else in it.
set -euo pipefail
cd "$(dirname "$0")"
psql() { $PSQL -X -q -v ON_ERROR_STOP=1 -d cap "$@"; }

psql >/dev/null <<'SQL'
CREATE SCHEMA alt;
-- The outbox with another column order and extra columns.
CREATE TABLE alt.outbox (created_at timestamptz NOT NULL DEFAULT now(), extra int,
  payload jsonb NOT NULL, headers jsonb NOT NULL DEFAULT '{}', event_type text NOT NULL,
  aggregate_id text NOT NULL, aggregate_type text NOT NULL, event_id uuid PRIMARY KEY, more text);
-- Loose types, to get bad ids and NULLs through.
CREATE TABLE alt.weird (event_id text, aggregate_type text, aggregate_id text,
  event_type text, payload jsonb, headers jsonb);
CREATE TYPE alt.mood AS ENUM ('ok', 'sad');
CREATE TABLE alt.typed (id int, m alt.mood);
ALTER TABLE outbox REPLICA IDENTITY FULL;
CREATE PUBLICATION cap_all FOR ALL TABLES;
SELECT pg_create_logical_replication_slot('cap', 'pgoutput');
SQL

# capture NAME SQL [proto] [extra options]: runs SQL, then drains the slot.
capture() {
  local name=$1 sql=$2 proto=${3:-1} extra=${4:-}
  psql <<<"$sql" >/dev/null
  # The decoding session's own work_mem decides when a transaction streams.
  psql -At -F ' ' -c "SET logical_decoding_work_mem = '64kB'" -c "SELECT lsn, xid, encode(data, 'hex') FROM pg_logical_slot_get_binary_changes('cap', NULL, NULL,
     'proto_version', '$proto', 'publication_names', 'cap_all', 'messages', 'true' $extra)" > "$name.hex"
}

capture insert_one "INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
  VALUES ('6f1c2a4e-8d7b-4c3a-9e5f-0a1b2c3d4e5f', 'orders', 'o-1', 'order.created',
          '{\"id\": \"o-1\", \"amount\": 1250, \"tags\": [\"a\", \"b\"]}', '{\"trace\": \"t-1\", \"n\": 7}')"
capture insert_multi "BEGIN;
  INSERT INTO orders (id, status) VALUES ('o-2', 'created');
  INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES
    ('00000000-0000-4000-8000-000000000001', 'orders', 'o-2', 'order.created', '{\"id\": \"o-2\"}'),
    ('00000000-0000-4000-8000-000000000002', 'orders', 'o-2', 'order.paid', '{}'),
    ('00000000-0000-4000-8000-000000000003', 'customers', 'c-9', 'customer.seen', '[1, 2, 3]');
  COMMIT"
capture alt_outbox "INSERT INTO alt.outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers, extra, more)
  VALUES ('11111111-2222-4333-8444-555555555555', 'orders', 'o-3', 'order.created', '{\"x\": null}', '{\"k\": \"v\"}', 42, NULL)"
capture heartbeat "SELECT pg_logical_emit_message(true, 'eventforge.heartbeat', '2024-01-01T00:00:00Z');
  SELECT pg_logical_emit_message(true, 'other.prefix', 'x');
  SELECT pg_logical_emit_message(false, 'eventforge.heartbeat', 'nt')"
capture update_delete_truncate "UPDATE outbox SET event_type = 'order.renamed' WHERE aggregate_id = 'o-1';
  DELETE FROM outbox WHERE aggregate_id = 'c-9';
  TRUNCATE outbox, orders;
  UPDATE alt.outbox SET extra = 43"
capture weird "INSERT INTO alt.weird VALUES ('not-a-uuid', 'orders', 'o-4', 'order.created', '{}', '{}');
  INSERT INTO alt.weird VALUES ('22222222-2222-4222-8222-222222222222', 'orders', NULL, 'order.created', '{}', NULL);
  INSERT INTO alt.weird VALUES ('33333333-3333-4333-8333-333333333333', 'orders', 'o-5', 'order.created', '{}', '[\"not\", \"an object\"]')"
capture typed "INSERT INTO alt.typed VALUES (1, 'ok')"
capture origin "SELECT pg_replication_origin_create('cap_origin');
  SELECT pg_replication_origin_session_setup('cap_origin');
  BEGIN;
  SELECT pg_replication_origin_xact_setup('0/1', now());
  INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
    VALUES ('44444444-4444-4444-8444-444444444444', 'orders', 'o-6', 'order.created', '{}');
  COMMIT"
capture big "INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
  SELECT '55555555-5555-4555-8555-555555555555', 'orders', 'o-7', 'order.created',
         jsonb_build_object('blob', repeat('0123456789', 1000))"
# Proto 2 with streaming: a transaction larger than logical_decoding_work_mem.
capture streamed "INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
    SELECT gen_random_uuid(), 'orders', 'o-' || i, 'order.created', '{}' FROM generate_series(1, 2000) i" 2 ", 'streaming', 'on'"
# The same transaction twice: in text (peeked) and with binary = true.
psql >/dev/null <<'SQL'
CREATE TABLE alt.binout (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid uuid NOT NULL,
  type char(12) NOT NULL, payload bytea, extra_name name, stamp timestamptz DEFAULT now(), n int8 DEFAULT 7);
BEGIN;
INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
  VALUES ('6f1c2a4e-8d7b-4c3a-9e5f-0a1b2c3d4e5f', 'orders', 'o-1', 'order.created',
          '{"id": "o-1", "amount": 1250.50, "tags": ["a", "b"], "nested": {"z": null}}', '{"trace": "t-1", "n": 7, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}');
INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
  VALUES ('00000000-0000-4000-8000-000000000002', 'customers', 'c-ü', 'customer.seen', '[1, 2, "ü"]');
INSERT INTO alt.binout (id, aggregatetype, aggregateid, type, payload, extra_name)
  VALUES ('11111111-2222-4333-8444-555555555555', 'orders', 'abcdef01-2345-4678-89ab-cdef01234567', 'created', '\x00ff10'::bytea, 'nm');
INSERT INTO alt.binout (id, aggregatetype, aggregateid, type, payload, extra_name)
  VALUES ('11111111-2222-4333-8444-555555555556', 'orders', 'abcdef01-2345-4678-89ab-cdef01234567', 'paid', NULL, NULL);
COMMIT;
SQL
for fmt in text binary; do
  fn=peek extra=""
  [ "$fmt" = binary ] && fn=get extra=", 'binary', 'true'"
  psql -At -F ' ' -c "SELECT lsn, xid, encode(data, 'hex') FROM pg_logical_slot_${fn}_binary_changes('cap', NULL, NULL,
     'proto_version', '1', 'publication_names', 'cap_all', 'messages', 'true' $extra)" > "pair_$fmt.hex"
done
# Keep the stream's first messages and its end: Stream Start, Relation, one
# Insert, ..., Stream Stop, Stream Commit.
{ head -n 3 streamed.hex; tail -n 2 streamed.hex; } > streamed.tmp && mv streamed.tmp streamed.hex
