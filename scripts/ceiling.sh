#!/usr/bin/env bash
# The raw-SQL ceilings of the PostgreSQL claim designs (bench/ceiling):
# pgbench -M prepared runs each script, one batch of 100 jobs per
# transaction, at 1, 2 and 4 clients over a fresh table of N jobs, and
# prints jobs/s. No library, no Go client, no handler: what the SQL of a
# design costs the server, the most a queue built on it can drain here.
# Usage: scripts/ceiling.sh DSN [N] [CLIENTS]
set -euo pipefail
dsn=${1:?usage: scripts/ceiling.sh DSN [N] [CLIENTS]}
n=${2:-100000}
clients=${3:-1 2 4}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/bench/ceiling
# The tables are dbq's own schema (ceiling_jobs and the rest), printed by
# `dbq migrate sql`: $DBQ when set, else go run in this repository.
read -r -a dbq <<<"${DBQ:-go -C $root run ./cmd/dbq}"
schema() { "${dbq[@]}" migrate sql --dialect postgres --prefix ceiling_ "$@"; }
quiet=(env PGOPTIONS='-c client_min_messages=warning' psql "$dsn" -q)
drop() { schema --down | "${quiet[@]}" >/dev/null 2>&1 || true; }
pgbench=$(command -v pgbench || true)
if [[ -z $pgbench ]]; then
	for p in /usr/lib/postgresql/*/bin/pgbench; do
		[[ -x $p ]] && pgbench=$p
	done
fi
if [[ -z $pgbench ]]; then
	echo "ceiling: pgbench not found (Debian: postgresql-contrib or postgresql-15)" >&2
	exit 1
fi
# The tables go when the script ends, however it ends.
trap drop EXIT
up=$(schema)
printf '%-12s %8s %10s\n' design clients jobs/s
for design in floor advisory skiplocked; do
	for c in $clients; do
		drop
		"${quiet[@]}" -v ON_ERROR_STOP=1 <<<"$up" >/dev/null
		"${quiet[@]}" -v ON_ERROR_STOP=1 -v n="$n" -f "$dir/setup.sql" >/dev/null
		# Each transaction takes 100 jobs: leave the last batches to spare,
		# so that no client runs on an empty table.
		t=$(((n / 100) * 9 / 10 / c))
		if ! res=$("$pgbench" -n -M prepared -c "$c" -j "$c" -t "$t" -f "$dir/$design.sql" "$dsn" 2>&1) ||
			! tps=$(awk '/^tps/ {printf "%.0f", $3 * 100}' <<<"$res") || [[ -z $tps ]]; then
			echo "ceiling: pgbench failed for $design at $c clients:" >&2
			tail -n 5 <<<"$res" >&2
			exit 1
		fi
		printf '%-12s %8d %10s\n' "$design" "$c" "$tps"
	done
done
