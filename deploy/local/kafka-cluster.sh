#!/usr/bin/env bash
# A Kafka 4.x cluster of N nodes (default 3) on loopback, each a combined
# broker and controller of one static quorum, run by kafka.sh in DIR/node1 …
# DIR/nodeN. Topics get N replicas and min.insync.replicas N-1 by default,
# the internal topics too: the settings that keep an acknowledged record
# when one broker is lost.
#
#   kafka-cluster.sh start DIR [N]   format (first time), start the nodes that are stopped, wait until all answer
#   kafka-cluster.sh stop DIR        orderly shutdown of every node
#   kafka-cluster.sh kill DIR        SIGKILL every node
#   kafka-cluster.sh brokers DIR     host:port of every broker, comma-separated
#
# One node is stopped, frozen or killed with kafka.sh (or a signal to the
# pid in DIR/nodeI/kafka.pid).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

cmd=${1:-}; dir=${2:-}; n=${3:-3}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: kafka-cluster.sh start|stop|kill|brokers DIR [N]"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# layout picks the ports and the cluster id once; a restart reuses them.
layout() {
	[ -f "$dir/cluster.env" ] && return 0
	local i voters="" id
	id=$(python3 -c 'import base64,uuid; print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))')
	{
		echo "KAFKA_CLUSTER_ID=$id"
		echo "KAFKA_NODES=$n"
		for i in $(seq 1 "$n"); do
			echo "PORT_$i=$(free_port)"
			echo "CPORT_$i=$(free_port)"
		done
	} >"$dir/cluster.env.tmp"
	# shellcheck disable=SC1091
	. "$dir/cluster.env.tmp"
	for i in $(seq 1 "$n"); do
		local cp="CPORT_$i"
		voters="${voters:+$voters,}$i@127.0.0.1:${!cp}"
	done
	echo "KAFKA_VOTERS=$voters" >>"$dir/cluster.env.tmp"
	mv "$dir/cluster.env.tmp" "$dir/cluster.env"
}

nodes() {
	# shellcheck disable=SC1091
	. "$dir/cluster.env"
	seq 1 "$KAFKA_NODES"
}

start() {
	layout
	# shellcheck disable=SC1091
	. "$dir/cluster.env"
	local i pids=() p="" cp="" failed=0
	"$here/kafka.sh" libs "$dir/node1" # once, before the nodes start together
	for i in $(nodes); do
		p="PORT_$i"; cp="CPORT_$i"
		# The nodes start together: none answers before a quorum of
		# controllers has elected a leader.
		KAFKA_NODE_ID=$i KAFKA_PORT=${!p} KAFKA_CONTROLLER_PORT=${!cp} KAFKA_VOTERS=$KAFKA_VOTERS \
			KAFKA_CLUSTER_ID=$KAFKA_CLUSTER_ID KAFKA_REPLICAS=$KAFKA_NODES KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms384m -Xmx384m} \
			"$here/kafka.sh" start "$dir/node$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=1; done
	[ "$failed" = 0 ] || die "a node of the Kafka cluster in $dir did not start"
}

each() {
	local i
	for i in $(nodes); do "$here/kafka.sh" "$1" "$dir/node$i"; done
}

brokers() {
	local i out=""
	for i in $(nodes); do out="${out:+$out,}$("$here/kafka.sh" brokers "$dir/node$i")"; done
	echo "$out"
}

case "$cmd" in
start) start ;;
stop) each stop ;;
kill) each kill ;;
brokers) brokers ;;
*) die "unknown command $cmd" ;;
esac
