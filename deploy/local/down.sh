#!/usr/bin/env bash
# make down: stop the local services (and any private test instances left
# behind) so that nothing keeps running. Data stays for the next make up.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
state=${EVENTFORGE_STATE_DIR:-$root/.eventforge}
[ -d "$state" ] || exit 0
exec 9>"$state/up.lock"
flock 9
for d in "$state/kafka" "$state"/kafka-[2-9]/node* "$state"/private/kafka-* "$state"/private/kafka-*/node*; do
	[ -d "$d" ] && "$here/kafka.sh" stop "$d"
done
for d in "$state"/pg.standby "$state"/pg-1[0-9].standby "$state/pg" "$state"/pg-1[0-9] "$state"/private/pg-*; do
	[ -d "$d" ] && "$here/pg.sh" stop "$d"
done
[ -d "$state/jaeger" ] && "$here/jaeger.sh" stop "$state/jaeger"
rm -f "$state/local.env"
log "stopped"
