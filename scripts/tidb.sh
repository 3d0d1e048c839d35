#!/usr/bin/env bash
# scripts/tidb: start/stop a throwaway single-process TiDB server (unistore
# storage engine) for testing dbq's MySQL dialect.
#
#   scripts/tidb up      start tidb-server in the background, wait until it
#                        answers, make sure database `test` exists
#   scripts/tidb down    stop it and remove its data directory
#   scripts/tidb status  say whether it is running
#   scripts/tidb server  print the tidb-server binary `up` would run
#                        (unpacking the shared one into the cache if need be)
#
# TiDB is not shipped with dbq. `up` runs, in this order: TIDB_SERVER; else
# the packed binary DBQ_TIDB_XZ (default: tidb-server-v8.5.3.xz in
# DBQ_SHARED_BIN), unpacked once into
# ${XDG_CACHE_HOME:-~/.cache}/dbq/tidb/<sha256 of the binary>/tidb-server
# after checking the packed file's sha256 (DBQ_TIDB_XZ.sha256 beside it) and
# the unpacked one's (tidb-server-v8.5.3.sha256-unpacked beside it), both
# checked again on every use; else `tidb-server` from PATH. When none is
# there, `up` and `server` say why and exit 3 (callers treat 3 as "skip");
# a checksum that does not match is an error (exit 1).
#
# Environment (all optional):
#   TIDB_SERVER       tidb-server binary
#   DBQ_SHARED_BIN    folder of shared test binaries (default: ../shared/bin
#                     beside this checkout, or beside the main checkout when
#                     this is a git worktree)
#   DBQ_TIDB_XZ       packed binary (default $DBQ_SHARED_BIN/tidb-server-v8.5.3.xz)
#   TIDB_CACHE        where it is unpacked (default ${XDG_CACHE_HOME:-~/.cache}/dbq/tidb)
#   TIDB_HOST         listen address        (default 127.0.0.1)
#   TIDB_PORT         MySQL protocol port   (default 4000)
#   TIDB_STATUS_PORT  HTTP status port      (default 10080)
#   TIDB_WAIT         seconds to wait for the server to answer (default 120)
#   TMPDIR            where the temporary data directory is made (default /tmp)
#
# Once up:  mysql -h 127.0.0.1 -P 4000 -u root test
#   DSN:    root@tcp(127.0.0.1:4000)/test
set -euo pipefail

TIDB_HOST=${TIDB_HOST:-127.0.0.1}
TIDB_PORT=${TIDB_PORT:-4000}
TIDB_STATUS_PORT=${TIDB_STATUS_PORT:-10080}
TIDB_WAIT=${TIDB_WAIT:-120}
TMPROOT=${TMPDIR:-/tmp}
# Records the working directory of the server started by `up` for this port.
STATE="$TMPROOT/dbq-tidb-$TIDB_PORT.state"

die() { echo "scripts/tidb: $*" >&2; exit 1; }
say() { echo "scripts/tidb: $*"; }

# SKIP: the exit status of `up` and `server` when there is no binary to run.
SKIP=3

# shared_bin: the folder of shared test binaries.
# shellcheck source=scripts/shared-bin.sh
source "$(dirname "${BASH_SOURCE[0]}")/shared-bin.sh"

# sha_of FILE: print FILE's sha256.
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# want_sha FILE: print the sha256 that FILE names first (a sha256sum line or
# the bare sum), or fail.
want_sha() {
	local sum
	[[ -r $1 ]] || return 1
	read -r sum _ <"$1" || true
	[[ $sum =~ ^[0-9a-f]{64}$ ]] || return 1
	printf '%s\n' "$sum"
}

# unpacked: print the cached, checked tidb-server unpacked from DBQ_TIDB_XZ,
# unpacking it first if need be. Exits SKIP when the packed file is absent.
unpacked() {
	local xz=${DBQ_TIDB_XZ:-$(shared_bin)/tidb-server-v8.5.3.xz}
	if [[ ! -f $xz ]]; then
		echo "scripts/tidb: no tidb-server: TIDB_SERVER is not set and there is no $xz (set DBQ_SHARED_BIN or DBQ_TIDB_XZ) nor tidb-server on PATH" >&2
		exit $SKIP
	fi
	local packed binsum
	packed=$(want_sha "$xz.sha256") || die "$xz.sha256 is missing or holds no sha256"
	binsum=$(want_sha "${xz%.xz}.sha256-unpacked") || die "${xz%.xz}.sha256-unpacked is missing or holds no sha256"
	local dir=${TIDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dbq/tidb}/$binsum
	local bin=$dir/tidb-server
	if [[ -x $bin ]]; then
		[[ $(sha_of "$bin") == "$binsum" ]] ||
			die "$bin does not have the sha256 $binsum; remove $dir and run again"
		printf '%s\n' "$bin"
		return
	fi
	[[ $(sha_of "$xz") == "$packed" ]] || die "$xz does not have the sha256 in $xz.sha256 ($packed)"
	mkdir -p "$dir"
	local tmp
	tmp=$(mktemp "$dir/tidb-server.XXXXXX")
	if ! xz -dc "$xz" >"$tmp"; then
		rm -f "$tmp"
		die "cannot unpack $xz"
	fi
	if [[ $(sha_of "$tmp") != "$binsum" ]]; then
		rm -f "$tmp"
		die "$xz unpacks to a file whose sha256 is not $binsum"
	fi
	chmod 0755 "$tmp"
	mv -f "$tmp" "$bin" # atomic: a concurrent unpack finds a whole file or none
	echo "scripts/tidb: unpacked $xz into $bin" >&2
	printf '%s\n' "$bin"
}

find_server() {
	local bin=${TIDB_SERVER:-}
	if [[ -n $bin ]]; then
		[[ -x $bin && ! -d $bin ]] || die "TIDB_SERVER=$bin is not an executable file"
	elif [[ -f ${DBQ_TIDB_XZ:-$(shared_bin)/tidb-server-v8.5.3.xz} ]] || ! command -v tidb-server >/dev/null 2>&1; then
		bin=$(unpacked) || exit $?
	else
		bin=$(command -v tidb-server)
	fi
	printf '%s\n' "$bin"
}

# port_open HOST PORT: true when something accepts TCP connections there.
port_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# our_pid: print the pid of the running server that `up` started, if any.
our_pid() {
	[[ -f $STATE ]] || return 1
	local dir pid
	dir=$(<"$STATE")
	[[ -f $dir/tidb.pid ]] || return 1
	pid=$(<"$dir/tidb.pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# Guard against a recycled pid: it must still be the server using $dir.
	local args
	if [[ -r /proc/$pid/cmdline ]]; then
		args=$(tr '\0' ' ' <"/proc/$pid/cmdline")
	else
		args=$(ps -p "$pid" -o args= 2>/dev/null) || return 1
	fi
	[[ $args == *"$dir/init.sql"* ]] || return 1
	printf '%s\n' "$pid"
}

# sql STATEMENT: run a statement with a MySQL client if one is installed.
# Returns 2 when there is no client.
sql() {
	local client
	client=$(command -v mysql 2>/dev/null || command -v mariadb 2>/dev/null) || return 2
	"$client" --protocol=TCP -h "$TIDB_HOST" -P "$TIDB_PORT" -u root \
		--connect-timeout=2 -N -e "$1" >/dev/null 2>&1
}

up() {
	local bin dir pid i
	bin=$(find_server) || exit $?
	if pid=$(our_pid); then
		say "already running (pid $pid) on $TIDB_HOST:$TIDB_PORT, data in $(<"$STATE")"
		return 0
	fi
	rm -f "$STATE"
	port_open "$TIDB_HOST" "$TIDB_PORT" &&
		die "$TIDB_HOST:$TIDB_PORT is already in use by another process"
	port_open "$TIDB_HOST" "$TIDB_STATUS_PORT" &&
		die "status port $TIDB_HOST:$TIDB_STATUS_PORT is already in use (set TIDB_STATUS_PORT)"

	dir=$(mktemp -d "$TMPROOT/dbq-tidb.XXXXXX")
	mkdir -p "$dir/data" "$dir/tmp"
	# Executed once, at the end of the first bootstrap, before the SQL port opens.
	echo 'CREATE DATABASE IF NOT EXISTS test;' >"$dir/init.sql"

	# nohup: the server outlives this script and its terminal. It runs inside
	# $dir with TMPDIR=$dir/tmp so that every file it makes (slow log, OOM
	# records, spill files) lands in $dir and goes away with `down`.
	(cd "$dir" && TMPDIR="$dir/tmp" exec nohup "$bin" \
		-store unistore -path "$dir/data" \
		-host "$TIDB_HOST" -P "$TIDB_PORT" \
		-status-host "$TIDB_HOST" -status "$TIDB_STATUS_PORT" \
		-socket "$dir/tidb.sock" -temp-dir "$dir/tmp" \
		-initialize-sql-file "$dir/init.sql" \
		-log-file "$dir/tidb.log" -log-slow-query "$dir/tidb-slow.log" \
		</dev/null >"$dir/stdout.log" 2>&1) &
	pid=$!
	echo "$pid" >"$dir/tidb.pid"
	echo "$dir" >"$STATE"

	for ((i = 0; i < TIDB_WAIT; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "scripts/tidb: tidb-server exited during startup; last log lines:" >&2
			tail -n 20 "$dir/stdout.log" "$dir/tidb.log" >&2 2>/dev/null || true
			rm -rf "$dir" "$STATE"
			exit 1
		fi
		# TiDB opens its SQL port only after bootstrap (which made `test`).
		if port_open "$TIDB_HOST" "$TIDB_PORT"; then
			local rc=0
			sql 'CREATE DATABASE IF NOT EXISTS test' || rc=$?
			if ((rc == 0 || rc == 2)); then
				say "tidb-server up (pid $pid) on $TIDB_HOST:$TIDB_PORT, database test; data in $dir"
				return 0
			fi
		fi
		sleep 1
	done
	echo "scripts/tidb: tidb-server did not answer on $TIDB_HOST:$TIDB_PORT within ${TIDB_WAIT}s; stopping it" >&2
	tail -n 10 "$dir/tidb.log" >&2 2>/dev/null || true
	down >&2 || true
	exit 1
}

down() {
	local dir pid i
	if [[ ! -f $STATE ]]; then
		say "not running (no state file $STATE)"
		return 0
	fi
	dir=$(<"$STATE")
	if pid=$(our_pid); then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 30; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 1
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "tidb-server (pid $pid) ignored SIGTERM for 30s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 1
		fi
		say "stopped tidb-server (pid $pid)"
	else
		say "tidb-server was not running"
	fi
	# Only remove what `up` made.
	case $dir in
	"$TMPROOT"/dbq-tidb.*) rm -rf "$dir" ;;
	*) say "not removing unexpected directory $dir" ;;
	esac
	rm -f "$STATE"
}

status() {
	local pid
	if pid=$(our_pid); then
		say "running (pid $pid) on $TIDB_HOST:$TIDB_PORT, data in $(<"$STATE")"
	else
		say "not running"
		return 1
	fi
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
server) find_server ;;
*) die "usage: $0 up|down|status|server" ;;
esac
