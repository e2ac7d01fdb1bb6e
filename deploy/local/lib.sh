# Shared helpers of the local-service scripts (sourced, not run).

log() { printf 'eventforge-local: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# free_port prints a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for SECONDS CMD...: run CMD every half second until it succeeds.
wait_for() {
	local deadline=$((SECONDS + $1)); shift
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.5
	done
}
