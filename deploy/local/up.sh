#!/usr/bin/env bash
# make up: start (or reuse) the local PostgreSQL cluster and Kafka broker under
# .eventforge/, wait until both answer, and write .eventforge/local.env.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
state=${EVENTFORGE_STATE_DIR:-$root/.eventforge}
mkdir -p "$state"

# Concurrent callers (parallel test packages) wait for one another. The
# servers are started with fd 9 closed so they do not hold the lock.
exec 9>"$state/up.lock"
flock 9

# EVENTFORGE_PG_VERSION (make PG_VERSION=17) picks another PostgreSQL major
# version, from Maven Central, in a cluster of its own.
pg="$state/pg${EVENTFORGE_PG_VERSION:+-$EVENTFORGE_PG_VERSION}"
"$here/pg.sh" start "$pg"
"$here/kafka.sh" start "$state/kafka"

tmp=$(mktemp "$state/local.env.XXXXXX")
{
	echo "EVENTFORGE_PG_URL=$("$here/pg.sh" url "$pg")"
	echo "EVENTFORGE_KAFKA_BROKERS=$("$here/kafka.sh" brokers "$state/kafka")"
} >"$tmp"
mv "$tmp" "$state/local.env"
log "ready: $(tr '\n' ' ' <"$state/local.env")"
