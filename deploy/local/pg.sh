#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for local runs and tests: logical WAL,
# loopback only, trust authentication, a free port chosen on first start.
#
#   pg.sh start DIR      create (initdb) if needed, start if stopped, wait until it answers
#   pg.sh stop DIR       fast shutdown (no-op when stopped)
#   pg.sh kill DIR       immediate shutdown (as after a crash: recovery on next start)
#   pg.sh restart DIR [fast|immediate]
#   pg.sh url DIR [DB]   the connection URL (database eventforge by default)
#   pg.sh status DIR     exit 0 when running
#
# initdb refuses to run as root, so as root the cluster belongs to the
# `postgres` OS user (override with EVENTFORGE_PG_OS_USER).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

PGBIN=${EVENTFORGE_PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}
[ -x "$PGBIN/initdb" ] || die "no PostgreSQL server binaries (looked in ${PGBIN:-/usr/lib/postgresql/*/bin}); install postgresql-15"
OS_USER=${EVENTFORGE_PG_OS_USER:-postgres}

as_owner() {
	if [ "$(id -u)" = 0 ]; then (cd / && runuser -u "$OS_USER" -- "$@"); else "$@"; fi
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: pg.sh start|stop|kill|restart|url|status DIR"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# The data lives where the cluster's OS user can reach it: in DIR when every
# parent is traversable, else in a private folder under /var/tmp linked from
# DIR. Server commands get the resolved path, never the link.
data_dir() {
	if [ -L "$dir/data" ] || [ -d "$dir/data" ]; then readlink -f "$dir/data"; return; fi
	if [ "$(id -u)" != 0 ] || runuser -u "$OS_USER" -- test -x "$dir"; then
		mkdir -p "$dir/data"
	else
		local alt
		alt=$(mktemp -d /var/tmp/eventforge-pg.XXXXXX)
		chmod 755 "$alt"
		ln -s "$alt" "$dir/data"
	fi
	if [ "$(id -u)" = 0 ]; then chown -h "$OS_USER" "$dir/data" && chown "$OS_USER" "$(readlink -f "$dir/data")"; fi
	readlink -f "$dir/data"
}

port() { cat "$dir/port"; }

running() {
	[ -f "$dir/data/postmaster.pid" ] && as_owner "$PGBIN/pg_ctl" -D "$(data_dir)" status >/dev/null 2>&1
}

init_cluster() {
	local data; data=$(data_dir)
	[ -f "$data/PG_VERSION" ] && return 0
	log "initdb $data"
	as_owner "$PGBIN/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
		|| { cat "$dir/initdb.log" >&2; die "initdb failed"; }
	cat >>"$data/postgresql.conf" <<'CONF'
# EventForge local cluster
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
max_connections = 400
shared_buffers = 256MB
logging_collector = off
log_min_messages = warning
CONF
}

start() {
	init_cluster
	if running; then return 0; fi
	local p
	p=$(cat "$dir/port" 2>/dev/null || true)
	if [ -z "$p" ] || port_in_use "$p"; then p=$(free_port); echo "$p" >"$dir/port"; fi
	log "starting PostgreSQL on 127.0.0.1:$p"
	local data; data=$(data_dir)
	as_owner "$PGBIN/pg_ctl" -D "$data" -o "-p $p" -l "$data/server.log" -w -t 60 start >/dev/null 9>&- \
		|| { tail -n 20 "$dir/data/server.log" >&2 || true; die "PostgreSQL did not start"; }
	wait_for 60 "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$p" || die "PostgreSQL on port $p does not answer"
	if ! "$PGBIN/psql" -XAtq -h 127.0.0.1 -p "$p" -U postgres -d postgres \
		-c "SELECT 1 FROM pg_database WHERE datname = 'eventforge'" | grep -q 1; then
		"$PGBIN/psql" -Xq -h 127.0.0.1 -p "$p" -U postgres -d postgres -c "CREATE DATABASE eventforge" >/dev/null
	fi
}

stop() {
	local mode=${1:-fast}
	running || return 0
	as_owner "$PGBIN/pg_ctl" -D "$(data_dir)" -m "$mode" -w -t 60 stop >/dev/null
}

case "$cmd" in
start) start ;;
stop) stop fast ;;
kill) stop immediate ;;
restart) stop "${3:-fast}"; start ;;
url) echo "postgres://postgres@127.0.0.1:$(port)/${3:-eventforge}?sslmode=disable" ;;
status) running ;;
*) die "unknown command $cmd" ;;
esac
