#!/usr/bin/env bash
# A single-node Apache Kafka 4.x broker (KRaft, combined broker+controller) on
# loopback, assembled from Maven Central by deploy/local/pom.xml and run with
# the machine's Java 17.
#
#   kafka.sh start DIR     format (first time), start if stopped, wait until it answers
#   kafka.sh stop DIR      orderly shutdown (no-op when stopped)
#   kafka.sh kill DIR      SIGKILL
#   kafka.sh restart DIR
#   kafka.sh brokers DIR   host:port of the broker
#   kafka.sh status DIR    exit 0 when running
#   kafka.sh libs DIR      resolve the jars only
#
# The jars are resolved once into $EVENTFORGE_KAFKA_LIBS (default
# kafka-libs in $EVENTFORGE_STATE_DIR, by default .eventforge at the repository
# root) and shared by every broker.
#
# A node of a multi-node cluster (kafka-cluster.sh) is started with
# KAFKA_NODE_ID, KAFKA_PORT, KAFKA_CONTROLLER_PORT, KAFKA_VOTERS (the static
# controller quorum, id@host:port,...), KAFKA_CLUSTER_ID and KAFKA_REPLICAS
# (the default replication factor of every topic, internal ones included;
# min.insync.replicas is one less) in the environment.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
LIBS=${EVENTFORGE_KAFKA_LIBS:-${EVENTFORGE_STATE_DIR:-$root/.eventforge}/kafka-libs}
JAVA=${JAVA:-java}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: kafka.sh start|stop|kill|restart|brokers|status DIR"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

resolve_libs() {
	[ -f "$LIBS/.complete" ] && return 0
	command -v mvn >/dev/null || die "mvn not found: install maven (apt-get install maven)"
	mkdir -p "$(dirname "$LIBS")"
	(
		flock 9
		[ -f "$LIBS/.complete" ] && exit 0
		log "resolving Kafka jars from Maven Central into $LIBS"
		rm -rf "$LIBS.tmp"
		mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
			-DincludeScope=runtime -DoutputDirectory="$LIBS.tmp" >"$(dirname "$LIBS")/mvn.log" 2>&1 \
			|| { tail -n 30 "$(dirname "$LIBS")/mvn.log" >&2; die "mvn could not resolve the Kafka jars"; }
		rm -rf "$LIBS" && mv "$LIBS.tmp" "$LIBS" && touch "$LIBS/.complete"
	) 9>"$LIBS.lock"
}

pid() { cat "$dir/kafka.pid" 2>/dev/null || true; }

running() {
	local p; p=$(pid)
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && grep -q kafka.Kafka "/proc/$p/cmdline" 2>/dev/null
}

# java_opts sets the JVM options of the broker: its heap (KAFKA_HEAP_OPTS, 1 GiB
# by default, as Kafka's own start script and docker-compose.yml use) and
# Kafka's own G1 settings. With 512 MiB the broker paused for GC every
# 1.5 s under the bench's load, and each pause of 7-28 ms stalled every
# request it had in hand (docs/bench.md#broker-gc).
# KAFKA_JVM_EXTRA_OPTS adds options after these: the tests' throwaway brokers
# run with -XX:TieredStopAtLevel=1 (the quick JIT only), which starts a
# broker on about 40% less CPU.
java_opts() {
	local heap extra; read -ra heap <<<"${KAFKA_HEAP_OPTS:--Xms1g -Xmx1g}"
	read -ra extra <<<"${KAFKA_JVM_EXTRA_OPTS:-}"
	JAVA_OPTS=("${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
		-Dlog4j2.configurationFile="$dir/log4j2.properties" "${extra[@]}" -cp "$LIBS/*")
}

# java_run runs one of Kafka's tools, which needs no broker-sized heap and,
# running for a second, no optimising JIT.
java_run() { KAFKA_HEAP_OPTS="-Xmx256m -XX:TieredStopAtLevel=1" java_opts; "$JAVA" "${JAVA_OPTS[@]}" "$@"; }

# random_cluster_id is a new cluster id as kafka-storage random-uuid prints
# it (16 random bytes in URL-safe base64 without padding, never starting
# with "-"), without starting a JVM for it.
random_cluster_id() {
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
		[ "${id#-}" = "$id" ] && echo "$id" && return
	done
}

write_config() {
	local port=$1 cport=$2 quorum replicas=${KAFKA_REPLICAS:-1} isr=1
	quorum="controller.quorum.bootstrap.servers=127.0.0.1:$cport"
	[ -n "${KAFKA_VOTERS:-}" ] && quorum="controller.quorum.voters=$KAFKA_VOTERS"
	[ "$replicas" -gt 1 ] && isr=$((replicas - 1))
	cat >"$dir/server.properties" <<CONF
process.roles=broker,controller
node.id=${KAFKA_NODE_ID:-1}
$quorum
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
default.replication.factor=$replicas
min.insync.replicas=$isr
offsets.topic.replication.factor=$replicas
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$replicas
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=$replicas
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
CONF
	cat >"$dir/log4j2.properties" <<'CONF'
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = INFO
logger.kafka.name = kafka.Kafka$
logger.kafka.level = INFO
CONF
	echo "$port" >"$dir/port"
	echo "$cport" >"$dir/controller-port"
	# Opt-in (tests): EVENTFORGE_KAFKA_SASL_SSL_CONF names a properties file
	# (keystore, SASL mechanisms, JAAS of listener sasl_ssl) appended to the
	# configuration, with a SASL_SSL listener on a third port (DIR/sasl-ssl-port).
	if [ -n "${EVENTFORGE_KAFKA_SASL_SSL_CONF:-}" ]; then
		local sport; sport=$(free_port)
		sed -i -e "s|^listeners=.*|&,SASL_SSL://127.0.0.1:$sport|" \
			-e "s|^advertised.listeners=.*|&,SASL_SSL://127.0.0.1:$sport|" \
			-e "s|^listener.security.protocol.map=.*|&,SASL_SSL:SASL_SSL|" "$dir/server.properties"
		cat "$EVENTFORGE_KAFKA_SASL_SSL_CONF" >>"$dir/server.properties"
		echo "$sport" >"$dir/sasl-ssl-port"
	fi
}

# format gives the broker new ports and a freshly formatted log directory. The
# controller port is part of the formatted metadata, so a port taken by
# another program since means starting over (the broker is throwaway).
format() {
	rm -rf "$dir/data"
	write_config "${KAFKA_PORT:-$(free_port)}" "${KAFKA_CONTROLLER_PORT:-$(free_port)}"
	local id=${KAFKA_CLUSTER_ID:-} quorum=(--standalone)
	[ -n "$id" ] || id=$(random_cluster_id)
	[ -n "${KAFKA_VOTERS:-}" ] && quorum=() # a static quorum: the voters are in the configuration
	# Opt-in (tests): EVENTFORGE_KAFKA_ADD_SCRAM lists SCRAM credentials,
	# space-separated MECHANISM=[name=U,password=P], created at format time.
	local scram=() entries=() e
	read -r -a entries <<<"${EVENTFORGE_KAFKA_ADD_SCRAM:-}"
	for e in "${entries[@]}"; do scram+=(--add-scram "$e"); done
	java_run kafka.tools.StorageTool format "${quorum[@]}" -t "$id" -c "$dir/server.properties" "${scram[@]}" >"$dir/format.log" 2>&1 \
		|| { cat "$dir/format.log" >&2; die "formatting the Kafka log directory failed"; }
}

ready() {
	grep -q "Exiting Kafka due to fatal exception" "$dir/kafka.log" && return 2
	running || return 2
	grep -q "Kafka Server started" "$dir/kafka.log" && port_in_use "$(cat "$dir/port")"
}

start() {
	resolve_libs
	if running; then return 0; fi
	if [ ! -f "$dir/data/meta.properties" ] || port_in_use "$(cat "$dir/port")" || port_in_use "$(cat "$dir/controller-port")"; then
		format
	fi
	log "starting Kafka on 127.0.0.1:$(cat "$dir/port")"
	: >"$dir/kafka.log"
	# setsid: the broker outlives this script and ignores the terminal's signals.
	java_opts
	setsid "$JAVA" "${JAVA_OPTS[@]}" kafka.Kafka "$dir/server.properties" >>"$dir/kafka.log" 2>&1 </dev/null 9>&- &
	echo $! >"$dir/kafka.pid"
	local deadline=$((SECONDS + 120)) rc
	while :; do
		rc=0; ready || rc=$?
		[ "$rc" = 0 ] && return 0
		if [ "$rc" = 2 ] || [ "$SECONDS" -ge "$deadline" ]; then
			tail -n 30 "$dir/kafka.log" >&2
			die "Kafka did not start (log: $dir/kafka.log)"
		fi
		sleep 0.5
	done
}

stop() {
	local sig=${1:-TERM} p; p=$(pid)
	running || { rm -f "$dir/kafka.pid"; return 0; }
	kill "-$sig" "$p"
	local deadline=$((SECONDS + 60))
	while kill -0 "$p" 2>/dev/null; do
		if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL "$p"; fi
		sleep 0.2
	done
	rm -f "$dir/kafka.pid"
}

case "$cmd" in
start) start ;;
stop) stop TERM ;;
kill) stop KILL ;;
restart) stop TERM; start ;;
brokers) echo "127.0.0.1:$(cat "$dir/port")" ;;
status) running ;;
libs) resolve_libs ;;
*) die "unknown command $cmd" ;;
esac
