#!/usr/bin/env bash
# A Jaeger all-in-one (v2) trace backend on loopback, for the tracing tests
# and the demo. The binary is built once from the separate tools module in
# deploy/local/jaeger (so the product's go.mod never takes Jaeger's
# dependency tree) into $EVENTFORGE_JAEGER_BIN (default
# $EVENTFORGE_STATE_DIR/bin/jaeger-<version>, the state folder being
# .eventforge at the repository root unless set).
#
#   jaeger.sh build        build the binary when missing; print its path
#   jaeger.sh start DIR    start if stopped (free ports), wait until it answers
#   jaeger.sh stop DIR     stop it by its PID (no-op when stopped)
#   jaeger.sh env DIR      print OTEL_EXPORTER_OTLP_ENDPOINT=… and JAEGER_QUERY_URL=…
#   jaeger.sh status DIR   exit 0 when running
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
version=$(awk '$1 == "github.com/jaegertracing/jaeger" {print $2}' "$here/jaeger/go.mod")
BIN=${EVENTFORGE_JAEGER_BIN:-${EVENTFORGE_STATE_DIR:-$root/.eventforge}/bin/jaeger-$version}

build() {
	[ -x "$BIN" ] && return 0
	mkdir -p "$(dirname "$BIN")"
	(
		flock 9
		[ -x "$BIN" ] && exit 0
		log "building Jaeger $version into $BIN (once; a few minutes)"
		cd "$here/jaeger"
		go build -o "$BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
		mv "$BIN.tmp" "$BIN"
	) 9>"$BIN.lock"
}

cmd=${1:-}; dir=${2:-}
if [ "$cmd" = build ]; then
	build
	echo "$BIN"
	exit 0
fi
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: jaeger.sh build | start|stop|env|status DIR"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

pid() { cat "$dir/jaeger.pid" 2>/dev/null || true; }

running() {
	local p; p=$(pid)
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && grep -q jaeger "/proc/$p/cmdline" 2>/dev/null
}

answers() {
	. "$dir/ports.env"
	(exec 3<>"/dev/tcp/127.0.0.1/$JAEGER_OTLP_HTTP_PORT") 2>/dev/null &&
		curl -fsS -o /dev/null "http://127.0.0.1:$JAEGER_QUERY_HTTP_PORT/api/services" 2>/dev/null
}

start() {
	build
	if running; then
		return 0
	fi
	{
		echo "JAEGER_OTLP_GRPC_PORT=$(free_port)"
		echo "JAEGER_OTLP_HTTP_PORT=$(free_port)"
		echo "JAEGER_QUERY_HTTP_PORT=$(free_port)"
		echo "JAEGER_QUERY_GRPC_PORT=$(free_port)"
	} >"$dir/ports.env"
	set -a; . "$dir/ports.env"; set +a
	"$BIN" --config "$here/jaeger/config.yaml" >"$dir/jaeger.log" 2>&1 &
	echo $! >"$dir/jaeger.pid"
	wait_for 60 answers || { tail -n 30 "$dir/jaeger.log" >&2; stop; die "Jaeger did not answer within 60 s"; }
	log "Jaeger up: OTLP http://127.0.0.1:$JAEGER_OTLP_HTTP_PORT, UI http://127.0.0.1:$JAEGER_QUERY_HTTP_PORT"
}

stop() {
	local p; p=$(pid)
	if running; then
		kill "$p"
		wait_for 10 bash -c "! kill -0 $p 2>/dev/null" || kill -9 "$p" 2>/dev/null || true
	fi
	rm -f "$dir/jaeger.pid"
}

case $cmd in
start) start ;;
stop) stop ;;
status) running ;;
env)
	running || die "Jaeger is not running in $dir"
	. "$dir/ports.env"
	echo "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$JAEGER_OTLP_HTTP_PORT"
	echo "OTEL_EXPORTER_OTLP_GRPC_ENDPOINT=http://127.0.0.1:$JAEGER_OTLP_GRPC_PORT"
	echo "JAEGER_QUERY_URL=http://127.0.0.1:$JAEGER_QUERY_HTTP_PORT"
	;;
*) die "unknown command $cmd" ;;
esac
