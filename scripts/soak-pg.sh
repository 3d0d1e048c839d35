#!/usr/bin/env bash
# scripts/soak-pg.sh [soak flags]: the soak harness (bench/soak, #25) on a
# PostgreSQL 15 cluster of its own, with PostgreSQL's defaults (autovacuum
# on): initdb into a temporary folder, a server on 127.0.0.1:$SOAK_PORT,
# dbq (both claimers) then River (its own benchmark's configuration) through
# every scenario, one table and one plot per scenario at the end. The
# cluster is stopped and its folder removed however the script ends.
#
#   SOAK_SHORT=1   short mode (1-minute scenarios, a 30 s hold)
#   SOAK_PORT      port of the cluster (default 5445)
#   SOAK_OUT       folder for the JSON rows and plots (default .tmp/soak)
#   PGBIN          PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
# Other arguments go to both soak programs (e.g. --scenarios horizon --rate 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PORT=${SOAK_PORT:-5445}
OUT=${SOAK_OUT:-.tmp/soak}
GO=${GO:-go}
flags=("$@")
[ "${SOAK_SHORT:-}" = 1 ] && flags+=(--short)

# PostgreSQL refuses to run as root: then run it as postgres.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

mkdir -p "$OUT" bin
"$GO" build -o bin/dbqsoak ./bench/soak/dbqsoak
(cd bench/river && "$GO" build -o ../../bin/riverbench .)

if pg_isready -q -h 127.0.0.1 -p "$PORT" 2>/dev/null; then
	echo "soak-pg: something already answers on port $PORT; set SOAK_PORT" >&2
	exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/dbq-soak-pg.XXXXXX")
cleanup() {
	status=$?
	trap - EXIT INT TERM
	if [ -f "$dir/data/postmaster.pid" ]; then
		as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 ||
			as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	echo "soak-pg: cluster stopped, $dir removed" >&2
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] && chown postgres "$dir"

as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
	{ cat "$dir/initdb.log" >&2; exit 1; }
as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
	-o "-p $PORT -k $dir -c listen_addresses=127.0.0.1" start >/dev/null ||
	{ cat "$dir/server.log" >&2; exit 1; }
as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres soak
dsn="postgres://postgres@127.0.0.1:$PORT/soak?sslmode=disable"
echo "soak-pg: PostgreSQL $("$PGBIN/postgres" -V | awk '{print $3}') on port $PORT, data in $dir/data," \
	"autovacuum $(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -Atc 'SHOW autovacuum' soak)" >&2

# Both programs exit 130 when interrupted: then stop here, rows kept.
rm -f "$OUT/dbq.json" "$OUT/river.json" "$OUT"/soak-*.png
status=0
bin/dbqsoak --dsn "$dsn" --json "${flags[@]}" >"$OUT/dbq.json" || status=$?
[ $status -eq 130 ] && exit 130
bin/riverbench soak --dsn "$dsn" "${flags[@]}" >"$OUT/river.json" || status=$?
[ $status -eq 130 ] && exit 130
bin/dbqsoak --report "$OUT/dbq.json,$OUT/river.json" --plot "$OUT/soak" || status=$?
exit $status
