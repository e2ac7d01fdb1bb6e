#!/usr/bin/env bash
# make demo: the whole pipeline on the local services. Orders are created
# through the HTTP API and with plain SQL; the relay carries their outbox
# events to Kafka; a worker applies them (status 'created' -> 'processed').
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
state=${EVENTFORGE_STATE_DIR:-$root/.eventforge}
bin=${EVENTFORGE_BIN:-$root/bin/eventforge}
[ -x "$bin" ] || die "build first: make build"
set -a; . "$state/local.env"; set +a
export EVENTFORGE_LOG_FORMAT=text EVENTFORGE_LOG_LEVEL=warn
logs=$state/demo; mkdir -p "$logs"

pids=()
# Tracing: TRACING=1 starts a Jaeger on loopback for the demo (built once by
# deploy/local/jaeger.sh); an OTEL_EXPORTER_OTLP_ENDPOINT of your own wins.
if [ "${TRACING:-0}" = 1 ] && [ -z "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ]; then
	"$here/jaeger.sh" start "$state/jaeger"
	set -a; eval "$("$here/jaeger.sh" env "$state/jaeger" | grep -v GRPC)"; set +a
fi
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$EVENTFORGE_PG_URL" "$@"; }

step() { printf '\n== %s\n' "$*"; }

step "migrate"
"$bin" migrate --demo

api_port=$(free_port); cdc_port=$(free_port); worker_port=$(free_port)
step "start api (:$api_port), relay (metrics :$cdc_port) and worker (metrics :$worker_port); logs in $logs"
"$bin" api run --http-addr "127.0.0.1:$api_port" >"$logs/api.log" 2>&1 & pids+=($!)
"$bin" cdc run --slot eventforge_demo --metrics-addr "127.0.0.1:$cdc_port" >"$logs/cdc.log" 2>&1 & pids+=($!)
"$bin" worker run --group eventforge-demo --consumer demo --topics orders \
	--handlers "$root/deploy/handlers/orders.yaml" --metrics-addr "127.0.0.1:$worker_port" >"$logs/worker.log" 2>&1 & pids+=($!)
wait_for 30 curl -fs -o /dev/null "http://127.0.0.1:$api_port/readyz" || die "api not ready: $(tail -n 5 "$logs/api.log")"
wait_for 60 curl -fs -o /dev/null "http://127.0.0.1:$cdc_port/readyz" || die "relay not ready: $(tail -n 5 "$logs/cdc.log")"

run=$(date +%s)
ids=()
trace_ids=()
step "create 5 orders through the API"
for i in 1 2 3 4 5; do
	id="demo-$run-api-$i"
	trace_ids+=("$(python3 -c 'import secrets; print(secrets.token_hex(16))')")
	curl -fsS -X POST "http://127.0.0.1:$api_port/orders" -H 'Content-Type: application/json' \
		-H "traceparent: 00-${trace_ids[-1]}-$(python3 -c 'import secrets; print(secrets.token_hex(8))')-01" \
		-d "{\"id\":\"$id\",\"customer\":\"customer-$i\",\"amount\":$((i * 1000)),\"currency\":\"EUR\"}"
	echo
	ids+=("$id")
done

step "create 3 orders with plain SQL (order row + outbox row in one transaction, joining a trace of its own)"
for i in 1 2 3; do
	id="demo-$run-sql-$i"
	trace_ids+=("$(python3 -c 'import secrets; print(secrets.token_hex(16))')")
	traceparent="00-${trace_ids[-1]}-$(python3 -c 'import secrets; print(secrets.token_hex(8))')-01"
	psql_ <<SQL
BEGIN;
INSERT INTO orders (id, status, customer, amount, currency) VALUES ('$id', 'created', 'sql-client', 4200, 'EUR');
INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload, headers)
VALUES (gen_random_uuid(), 'orders', '$id', 'order.created', jsonb_build_object('id', '$id', 'amount', 4200, 'currency', 'EUR'),
	jsonb_build_object('traceparent', '$traceparent'));
COMMIT;
SQL
	ids+=("$id")
done
echo "inserted ${#ids[@]} orders"

step "a rolled-back order (must never reach Kafka)"
psql_ <<SQL
BEGIN;
INSERT INTO orders (id, status) VALUES ('demo-$run-rolled-back', 'created');
INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
VALUES (gen_random_uuid(), 'orders', 'demo-$run-rolled-back', 'order.created', '{}');
ROLLBACK;
SQL

step "wait until the worker processed all ${#ids[@]}"
list=$(printf "'%s'," "${ids[@]}"); list=${list%,}
processed() { psql_ -At -c "SELECT count(*) FROM orders WHERE id IN ($list) AND status = 'processed'"; }
wait_for 90 bash -c "[ \"\$(psql -XAt '$EVENTFORGE_PG_URL' -c \"SELECT count(*) FROM orders WHERE id IN ($list) AND status = 'processed'\")\" = ${#ids[@]} ]" \
	|| { echo "processed: $(processed)/${#ids[@]}"; tail -n 20 "$logs"/*.log; die "pipeline did not finish"; }

step "what reached Kafka for this run (topic orders: partition, offset, key, event_type header, value)"
kcat -b "$EVENTFORGE_KAFKA_BROKERS" -C -t orders -e -q -f '%p\t%o\t%k\t%h\t%s\n' 2>/dev/null | grep "demo-$run" \
	| awk -F'\t' '{split($4,h,","); et=""; for(i in h) if (h[i] ~ /^event_type=/) et=substr(h[i],12); printf "p%s o%s %s %s %s\n", $1, $2, $3, et, $5}'
rolled=$(kcat -b "$EVENTFORGE_KAFKA_BROKERS" -C -t orders -e -q -f '%k\n' 2>/dev/null | grep -c "demo-$run-rolled-back" || true)

step "orders of this run in PostgreSQL"
psql_ -c "SELECT id, status, amount, currency, updated_at - created_at AS took FROM orders WHERE id LIKE 'demo-$run-%' ORDER BY id"
psql_ -c "SELECT count(*) AS inbox_rows_for_this_run FROM processed_events p JOIN outbox o USING (event_id) WHERE o.aggregate_id LIKE 'demo-$run-%'"
echo "rolled-back events in Kafka: $rolled (must be 0)"

step "relay and worker metrics"
curl -fsS "http://127.0.0.1:$cdc_port/metrics" | grep -E '^eventforge_(cdc_events_published_total|cdc_confirmed_lsn)' || true
curl -fsS "http://127.0.0.1:$worker_port/metrics" | grep -E '^eventforge_worker_events_total' || true

if [ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-}" ]; then
	step "traces (api or SQL writer -> relay -> worker), sent to ${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-$OTEL_EXPORTER_OTLP_ENDPOINT}"
	for i in "${!trace_ids[@]}"; do
		if [ -n "${JAEGER_QUERY_URL:-}" ]; then
			echo "order ${ids[$i]}: $JAEGER_QUERY_URL/api/traces/${trace_ids[$i]}"
		else
			echo "order ${ids[$i]}: trace id ${trace_ids[$i]}"
		fi
	done
	echo "services: eventforge-api, eventforge-relay, eventforge-worker (docs/tracing.md)"
else
	step "traces: off (set OTEL_EXPORTER_OTLP_ENDPOINT, or run make demo TRACING=1 for a local Jaeger; docs/tracing.md)"
fi

step "the relay's slot, read live"
"$bin" slot status --slot eventforge_demo

# The demo's slot lives in the shared local cluster: left behind, an inactive
# slot would keep every later test's WAL. Stop the relay, then drop it.
cleanup; pids=()
"$bin" slot drop --slot eventforge_demo --yes >/dev/null
[ "$rolled" = 0 ] || die "a rolled-back event reached Kafka"
echo; echo "demo ok"
