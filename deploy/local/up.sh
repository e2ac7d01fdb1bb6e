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

# EVENTFORGE_STANDBY=1 (make STANDBY=1) adds a streaming standby of that
# cluster in $pg.standby, with slot synchronisation from PostgreSQL 17.
# Without it a standby left by an earlier make up STANDBY=1 is removed: the
# primary would otherwise keep WAL for it and, from 17, hold the relay's
# changes back until the stopped standby had them.
standby="$pg.standby"
case "${EVENTFORGE_STANDBY:-}" in
1 | yes | true) "$here/pg.sh" standby "$standby" "$pg" ;;
"" | 0 | no | false) [ -d "$standby" ] && "$here/pg.sh" unstandby "$standby" ;;
*) die "EVENTFORGE_STANDBY (make STANDBY) is 1 or empty, not $EVENTFORGE_STANDBY" ;;
esac

# EVENTFORGE_KAFKA_NODES=3 (make KAFKA_NODES=3) runs a cluster of that many
# nodes in $state/kafka-N instead of the single broker.
nodes=${EVENTFORGE_KAFKA_NODES:-1}
case "$nodes" in
1) kafka=("$here/kafka.sh") kdir="$state/kafka" ;;
[2-9]) kafka=("$here/kafka-cluster.sh") kdir="$state/kafka-$nodes" ;;
*) die "EVENTFORGE_KAFKA_NODES (make KAFKA_NODES) is 1 to 9, not $nodes" ;;
esac
"${kafka[@]}" start "$kdir" ${nodes#1}

tmp=$(mktemp "$state/local.env.XXXXXX")
{
	echo "EVENTFORGE_PG_URL=$("$here/pg.sh" url "$pg")"
	echo "EVENTFORGE_KAFKA_BROKERS=$("${kafka[@]}" brokers "$kdir")"
	if [ -f "$standby/primary" ]; then echo "EVENTFORGE_STANDBY_URL=$("$here/pg.sh" url "$standby")"; fi
} >"$tmp"
mv "$tmp" "$state/local.env"
log "ready: $(tr '\n' ' ' <"$state/local.env")"
