#!/usr/bin/env bash
# pgbouncer.sh up|down|status: a PgBouncer of the tests' own, in transaction
# mode, in front of the local PostgreSQL.
#
#   up      install Debian's pgbouncer when absent (root only), write a config
#           into a folder of its own and start it on 127.0.0.1:$DBQ_PGBOUNCER_PORT
#           (default 6433), pooling database test of 127.0.0.1:5432 as user
#           postgres; wait (bounded) until it answers. Prints the DSN to use.
#   down    stop it and remove its folder.
#   status  exit 0 when it answers.
#
# Knobs: DBQ_PGBOUNCER_PORT (6433), DBQ_PGBOUNCER_DIR (a folder under
# ${TMPDIR:-/tmp}), DBQ_PGBOUNCER_MODE (transaction), DBQ_NO_INSTALL=1.
# When run as root, PgBouncer runs as the postgres user (it refuses root).

set -eu
PORT=${DBQ_PGBOUNCER_PORT:-6433}
DIR=${DBQ_PGBOUNCER_DIR:-${TMPDIR:-/tmp}/dbq-pgbouncer-$PORT}
MODE=${DBQ_PGBOUNCER_MODE:-transaction}
DSN="postgres://postgres@127.0.0.1:$PORT/test?sslmode=disable"

log() { printf 'pgbouncer: %s\n' "$*" >&2; }
answers() { timeout 5 psql "$DSN" -XAtqc 'SELECT 1' >/dev/null 2>&1; }
as_owner() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

find_bin() {
	for b in pgbouncer /usr/sbin/pgbouncer; do
		command -v "$b" 2>/dev/null && return 0
	done
	return 1
}

up() {
	if answers; then
		log "already answers on 127.0.0.1:$PORT"
		echo "$DSN"
		return 0
	fi
	bin=$(find_bin || true)
	if [ -z "$bin" ]; then
		if [ "$(id -u)" = 0 ] && [ "${DBQ_NO_INSTALL:-}" != 1 ]; then
			log "installing Debian's pgbouncer"
			DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q pgbouncer >/dev/null
			# Debian's package starts a service of its own; ours runs beside it.
			bin=$(find_bin)
		else
			log "no pgbouncer binary, and cannot install it (not root, or DBQ_NO_INSTALL=1)"
			return 1
		fi
	fi
	mkdir -p "$DIR"
	cat >"$DIR/pgbouncer.ini" <<EOF
[databases]
test = host=127.0.0.1 port=5432 dbname=test
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = trust
auth_file = $DIR/users.txt
pool_mode = $MODE
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
EOF
	echo '"postgres" ""' >"$DIR/users.txt"
	[ "$(id -u)" = 0 ] && chown -R postgres "$DIR"
	as_owner "$bin" -d "$DIR/pgbouncer.ini"
	for _ in $(seq 1 50); do
		if answers; then
			log "up on 127.0.0.1:$PORT, pool_mode = $MODE"
			echo "$DSN"
			return 0
		fi
		sleep 0.2
	done
	log "started but does not answer on 127.0.0.1:$PORT; its log:"
	tail -20 "$DIR/pgbouncer.log" >&2 || true
	return 1
}

down() {
	if [ -f "$DIR/pgbouncer.pid" ]; then
		pid=$(cat "$DIR/pgbouncer.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 25); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
	fi
	rm -rf "$DIR"
	log "down"
}

case "${1:-}" in
up) up ;;
down) down ;;
status) answers ;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
