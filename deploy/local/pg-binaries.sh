#!/usr/bin/env bash
# Prints the bin directory of PostgreSQL server binaries of a major version,
# resolved once from Maven Central (deploy/local/pg-pom.xml) into
# $EVENTFORGE_PG_BINARIES (default pg-binaries in $EVENTFORGE_STATE_DIR,
# by default .eventforge at the repository root).
#
#   pg-binaries.sh MAJOR     16, 17 or 18 (a full bundle version such as 17.5.0 also works)
#
# The bundles hold initdb, pg_ctl and postgres with their libraries and
# extensions (pgoutput included), not the client tools: pg.sh keeps using
# the machine's psql and pg_isready, which speak to newer servers.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
CACHE=${EVENTFORGE_PG_BINARIES:-${EVENTFORGE_STATE_DIR:-$root/.eventforge}/pg-binaries}

major=${1:-}
[ -n "$major" ] || die "usage: pg-binaries.sh MAJOR"
# The bundle of each major version that the tests ran with.
case "$major" in
16) version=16.9.0 ;;
17) version=17.5.0 ;;
18) version=18.0.0 ;;
*.*.*) version=$major ;;
*) die "no PostgreSQL $major bundle known: use 16, 17, 18 or a bundle version such as 17.5.0" ;;
esac

dest="$CACHE/$version"
if [ ! -f "$dest/.complete" ]; then
	command -v mvn >/dev/null || die "mvn not found: install maven (apt-get install maven)"
	mkdir -p "$CACHE"
	(
		flock 9
		[ -f "$dest/.complete" ] && exit 0
		log "resolving PostgreSQL $version server binaries from Maven Central into $dest"
		rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
		mvn -q -B -f "$here/pg-pom.xml" dependency:copy-dependencies -Dpg.version="$version" \
			-DoutputDirectory="$dest.tmp/jar" >"$CACHE/mvn-$version.log" 2>&1 \
			|| { tail -n 30 "$CACHE/mvn-$version.log" >&2; die "mvn could not resolve PostgreSQL $version"; }
		(cd "$dest.tmp" && unzip -q jar/*.jar '*.txz' && tar -xJf ./*.txz && rm -rf jar ./*.txz META-INF)
		[ -x "$dest.tmp/bin/postgres" ] || die "the PostgreSQL $version bundle has no bin/postgres"
		chmod -R a+rX "$dest.tmp"
		rm -rf "$dest" && mv "$dest.tmp" "$dest" && touch "$dest/.complete"
	) 9>"$CACHE/$version.lock"
fi
echo "$dest/bin"
