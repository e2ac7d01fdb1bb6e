#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for local runs and tests: logical WAL,
# loopback only, trust authentication, a free port chosen on first start.
#
#   pg.sh start DIR      create (initdb) if needed, start if stopped, wait until it answers
#   pg.sh stop DIR       fast shutdown (no-op when stopped)
#   pg.sh kill DIR       immediate shutdown (as after a crash: recovery on next start)
#   pg.sh restart DIR [fast|immediate]
#   pg.sh url DIR [DB]   the connection URL (database eventforge by default)
#   pg.sh status DIR     exit 0 when running
#   pg.sh standby DIR PRIMARY_DIR
#                        create (first time) a streaming standby of the cluster in
#                        PRIMARY_DIR and start it: physical slot DIR's name on the
#                        primary, and from PostgreSQL 17 slot synchronisation
#                        (sync_replication_slots on the standby,
#                        synchronized_standby_slots on the primary)
#   pg.sh promote DIR    promote a standby and wait until it accepts writes
#   pg.sh unstandby DIR  stop the standby in DIR and remove it, its physical slot
#                        and its name in synchronized_standby_slots from its primary
#
# The server is the machine's newest (PostgreSQL 15 here) unless
# EVENTFORGE_PG_VERSION names another major version (16, 17, 18): its
# binaries come from Maven Central (pg-binaries.sh). A cluster remembers the
# binaries it was created with (DIR/pgbin).
#
# initdb refuses to run as root, so as root the cluster belongs to the
# `postgres` OS user (override with EVENTFORGE_PG_OS_USER).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

SYSBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
# psql and pg_isready: the machine's (the Maven bundles have no client tools).
CLIENTBIN=${EVENTFORGE_PG_CLIENTBIN:-$SYSBIN}
OS_USER=${EVENTFORGE_PG_OS_USER:-postgres}

# server_bin prints the server binaries for a new cluster.
server_bin() {
	if [ -n "${EVENTFORGE_PGBIN:-}" ]; then echo "$EVENTFORGE_PGBIN"; return; fi
	local v=${EVENTFORGE_PG_VERSION:-}
	if [ -z "$v" ] || [ -x "/usr/lib/postgresql/$v/bin/initdb" ]; then
		echo "${v:+/usr/lib/postgresql/$v/bin}${v:-$SYSBIN}"
		return
	fi
	"$here/pg-binaries.sh" "$v"
}

as_owner() {
	if [ "$(id -u)" = 0 ]; then (cd / && runuser -u "$OS_USER" -- "$@"); else "$@"; fi
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: pg.sh start|stop|kill|restart|url|status DIR"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

if [ -f "$dir/pgbin" ]; then PGBIN=$(cat "$dir/pgbin"); else PGBIN=$(server_bin); fi
[ -x "$PGBIN/initdb" ] || die "no PostgreSQL server binaries (looked in ${PGBIN:-/usr/lib/postgresql/*/bin}); install postgresql-15"
[ -x "$CLIENTBIN/psql" ] || CLIENTBIN=$PGBIN

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
	log "initdb $data ($("$PGBIN/postgres" --version))"
	echo "$PGBIN" >"$dir/pgbin"
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
	wait_for 60 "$CLIENTBIN/pg_isready" -q -h 127.0.0.1 -p "$p" || die "PostgreSQL on port $p does not answer"
	[ -f "$dir/primary" ] && return 0 # a standby: read-only, the database comes from the primary
	if ! psql_at "$p" postgres -c "SELECT 1 FROM pg_database WHERE datname = 'eventforge'" | grep -q 1; then
		psql_at "$p" postgres -c "CREATE DATABASE eventforge" >/dev/null
	fi
}

# psql_at PORT DB ARGS...: psql as the superuser, unaligned, quiet.
psql_at() {
	local p=$1 db=$2; shift 2
	"$CLIENTBIN/psql" -XAtq -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$p" -U postgres -d "$db" "$@"
}

server_version() { psql_at "$1" postgres -c "SHOW server_version_num"; }

# standby makes DIR a streaming standby of the running cluster in $1: a
# low-level base backup (pg_backup_start, a copy of the data directory,
# pg_backup_stop's label), the machine's pg_basebackup being too old for a
# newer server.
standby() {
	local pdir; pdir=$(cd "$1" && pwd)
	local pport; pport=$(cat "$pdir/port")
	local name; name=$(basename "$dir" | tr -c 'a-z0-9_\n' '_')
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		PGBIN=$(cat "$pdir/pgbin"); echo "$PGBIN" >"$dir/pgbin"
		echo "$pdir" >"$dir/primary"
		base_backup "$pdir" "$pport" "$name"
		configure_standby "$pport" "$name"
	fi
	start
	wait_for 60 standby_streams "$pport" "$name" || die "the standby $name does not stream from the primary"
}

standby_streams() {
	[ "$(psql_at "$1" postgres -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$2' AND active")" = 1 ]
}

base_backup() {
	local pdir=$1 pport=$2 name=$3 data
	psql_at "$pport" postgres -c "SELECT pg_create_physical_replication_slot('$name', true) WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$name')" >/dev/null
	data=$(data_dir)
	local fifo="$dir/backup.fifo" label="$dir/backup_label"
	rm -f "$fifo" "$label" && mkfifo "$fifo"
	# One session holds the backup open while the files are copied.
	"$CLIENTBIN/psql" -XAtq -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pport" -U postgres -d postgres <"$fifo" >"$dir/backup.log" 2>&1 &
	local psql_pid=$!
	exec 8>"$fifo"
	echo "SELECT pg_backup_start('eventforge-standby', true);" >&8
	echo "\\echo started" >&8
	wait_for 30 grep -q started "$dir/backup.log" || die "pg_backup_start failed: $(cat "$dir/backup.log")"
	as_owner sh -c "cd '$(readlink -f "$pdir/data")' && tar -cf - --exclude=./postmaster.pid --exclude=./postmaster.opts \
		--exclude='./pg_wal/*' --exclude='./pg_replslot/*' --exclude=./server.log --exclude=./standby.signal . | (cd '$data' && tar -xf -)"
	echo "SELECT labelfile FROM pg_backup_stop(true) \\g $label" >&8
	exec 8>&-
	wait "$psql_pid" || die "pg_backup_stop failed: $(cat "$dir/backup.log")"
	as_owner cp "$label" "$data/backup_label"
	rm -f "$fifo" "$label"
}

configure_standby() {
	local pport=$1 name=$2 data; data=$(data_dir)
	local sync=""
	if [ "$(server_version "$pport")" -ge 170000 ]; then
		sync="sync_replication_slots = on"
		psql_at "$pport" postgres -c "ALTER SYSTEM SET synchronized_standby_slots = '$name'" -c "SELECT pg_reload_conf()" >/dev/null
	fi
	as_owner sh -c "cat >>'$data/postgresql.conf'" <<CONF
# EventForge standby of 127.0.0.1:$pport
primary_conninfo = 'host=127.0.0.1 port=$pport user=postgres dbname=eventforge application_name=$name'
primary_slot_name = '$name'
hot_standby = on
hot_standby_feedback = on
$sync
CONF
	as_owner touch "$data/standby.signal"
}

# unstandby removes the standby in DIR: stopped, its physical slot and its
# entry in the primary's synchronized_standby_slots gone (else the primary
# keeps WAL for it and holds failover slots' changes back), its data deleted.
unstandby() {
	[ -f "$dir/primary" ] || die "$dir is not a standby"
	local pdir; pdir=$(cat "$dir/primary")
	local name; name=$(basename "$dir" | tr -c 'a-z0-9_\n' '_')
	stop immediate
	if [ -f "$pdir/port" ] && "$CLIENTBIN/pg_isready" -q -h 127.0.0.1 -p "$(cat "$pdir/port")"; then
		local pport; pport=$(cat "$pdir/port")
		if [ "$(server_version "$pport")" -ge 170000 ]; then
			psql_at "$pport" postgres -c "ALTER SYSTEM RESET synchronized_standby_slots" -c "SELECT pg_reload_conf()" >/dev/null
		fi
		psql_at "$pport" postgres -c "SELECT pg_drop_replication_slot('$name') FROM pg_replication_slots WHERE slot_name = '$name'" >/dev/null
	fi
	local data; data=$(readlink -f "$dir/data")
	rm -rf "$data" "$dir"
	log "removed the standby $name"
}

promote() {
	as_owner "$PGBIN/pg_ctl" -D "$(data_dir)" -w -t 60 promote >/dev/null
	rm -f "$dir/primary"
	wait_for 60 sh -c "[ \"\$('$CLIENTBIN/psql' -XAtq -h 127.0.0.1 -p $(port) -U postgres -d postgres -c 'SELECT pg_is_in_recovery()')\" = f ]" \
		|| die "the promoted server still is in recovery"
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
standby) [ -n "${3:-}" ] || die "usage: pg.sh standby DIR PRIMARY_DIR"; standby "$3" ;;
promote) promote ;;
unstandby) unstandby ;;
*) die "unknown command $cmd" ;;
esac
