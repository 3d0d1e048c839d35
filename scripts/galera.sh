#!/usr/bin/env bash
# scripts/galera.sh: a throwaway 3-node MariaDB Galera cluster on loopback
# ports, from Debian's packages (mariadb-server, galera-4, rsync), for
# testing dbq's MySQL dialect on Galera.
#
#   scripts/galera.sh up      install what is missing (as root), start three
#                             mariadbd processes (node 1 bootstraps the
#                             cluster, 2 and 3 join it by rsync state
#                             transfer), wait until each reports
#                             wsrep_cluster_size=3 and Synced, make
#                             root@127.0.0.1 passwordless and database
#                             `test`; print the three DSNs
#   scripts/galera.sh down    stop the nodes and remove their data
#   scripts/galera.sh status  print each node's size and state
#   scripts/galera.sh dsns    print the DSNs, comma-separated
#   scripts/galera.sh check   exit 0 when up can run here (the packages are
#                             installed, or can be: root and no
#                             DBQ_NO_INSTALL; the ports are free), else
#                             print why not and exit 1
#   scripts/galera.sh kill N  SIGKILL node N's server (a crash: its data
#                             stays, its grastate says nothing of its
#                             position)
#   scripts/galera.sh start N start node N again on its data and wait until
#                             it has rejoined (by state transfer) and is
#                             Synced in a cluster of 3
#   scripts/galera.sh isolate N 1|0
#                             cut node N off from the others
#                             (gmcast.isolate=1) or let it back (0)
#
# The nodes are separate `mariadbd --no-defaults` processes with datadirs of
# their own: a server already running on the machine (3306) is not touched.
#
# Environment (all optional):
#   GALERA_DIR       where the datadirs, sockets and logs go
#                    (default ${TMPDIR:-/tmp}/dbq-galera)
#   GALERA_PORT      SQL port of node 1; nodes 2 and 3 use the next two
#                    (default 3311)
#   GALERA_GCOMM     group communication port of node 1 (default 4571)
#   GALERA_IST       incremental state transfer port of node 1 (default 4581)
#   GALERA_SST       rsync state transfer port of node 1 (default 4591)
#   GALERA_WAIT      seconds to wait for each step (default 120)
#   GALERA_PROVIDER  libgalera_smm.so (default /usr/lib/galera/libgalera_smm.so)
#   MARIADBD         the server binary (default: mariadbd, then /usr/sbin/mariadbd)
#   DBQ_NO_INSTALL=1 never apt-get install
set -euo pipefail

GALERA_DIR=${GALERA_DIR:-${TMPDIR:-/tmp}/dbq-galera}
GALERA_PORT=${GALERA_PORT:-3311}
GALERA_GCOMM=${GALERA_GCOMM:-4571}
GALERA_IST=${GALERA_IST:-4581}
GALERA_SST=${GALERA_SST:-4591}
GALERA_WAIT=${GALERA_WAIT:-120}
GALERA_PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
HOST=127.0.0.1
NODES=(1 2 3)

die() { echo "scripts/galera: $*" >&2; exit 1; }
say() { echo "scripts/galera: $*" >&2; }

port() { echo $((GALERA_PORT + $1 - 1)); }
ndir() { echo "$GALERA_DIR/node$1"; }
dsn() { echo "mysql://root@$HOST:$(port "$1")/test"; }

# missing: the packages up needs that are not installed, space-separated.
missing() {
	local need=()
	command -v mariadbd >/dev/null || [[ -x /usr/sbin/mariadbd ]] || need+=(mariadb-server mariadb-client)
	[[ -f $GALERA_PROVIDER ]] || need+=(galera-4)
	command -v rsync >/dev/null || need+=(rsync)
	echo "${need[*]}"
}

# cant_install: why the missing packages cannot be installed here, or
# nothing when they can.
cant_install() {
	if [[ $(id -u) != 0 ]]; then
		echo "not root"
	elif [[ ${DBQ_NO_INSTALL:-} == 1 ]]; then
		echo "DBQ_NO_INSTALL=1"
	elif ! command -v apt-get >/dev/null; then
		echo "no apt-get"
	fi
}

install_missing() {
	local need why
	read -r -a need <<<"$(missing)"
	((${#need[@]} == 0)) && return 0
	why=$(cant_install)
	[[ -z $why ]] ||
		die "missing ${need[*]} ($why): install them (apt-get install ${need[*]}) or run as root"
	say "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	timeout 600 apt-get install -y -q "${need[@]}" >/dev/null ||
		{ timeout 300 apt-get update -q >/dev/null && timeout 600 apt-get install -y -q "${need[@]}" >/dev/null; } ||
		die "apt-get install ${need[*]} failed"
}

server() {
	if [[ -n ${MARIADBD:-} ]]; then echo "$MARIADBD"; return; fi
	command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd
}

client() { command -v mariadb 2>/dev/null || command -v mysql 2>/dev/null || die "no mariadb client"; }

# q N SQL: run SQL on node N over its socket as root; prints tab-separated rows.
q() {
	"$(client)" --no-defaults --protocol=socket -S "$(ndir "$1")/mysqld.sock" -u root -N -B \
		--connect-timeout=2 -e "$2"
}

# pid N: the pid of node N's server when it is running (and is ours).
pid() {
	local f p
	f="$(ndir "$1")/server.pid" # written by start_node: mariadbd writes its own late
	[[ -f $f ]] || return 1
	p=$(<"$f")
	[[ $p =~ ^[0-9]+$ ]] && kill -0 "$p" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--datadir=$(ndir "$1")/data" || return 1
	echo "$p"
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# start_node N [bootstrap]: start node N's server in the background; with
# bootstrap, as the first node of a new cluster.
start_node() {
	local n=$1 d gcomm="" i
	d=$(ndir "$n")
	for i in "${NODES[@]}"; do gcomm+="${gcomm:+,}$HOST:$((GALERA_GCOMM + i - 1))"; done
	local extra=()
	[[ ${2:-} == bootstrap ]] && extra+=(--wsrep-new-cluster)
	# Joiners run the SST script, which wants the server's directory on PATH.
	PATH="$(dirname "$(server)"):$PATH" nohup "$(server)" --no-defaults \
		--user=mysql --datadir="$d/data" --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" \
		--log-error="$d/error.log" --bind-address=$HOST --port="$(port "$n")" \
		--tmpdir="$d/tmp" --skip-name-resolve \
		--innodb-buffer-pool-size=256M --innodb-log-file-size=64M \
		--innodb-autoinc-lock-mode=2 --binlog-format=ROW --default-storage-engine=InnoDB \
		--max-connections=300 \
		--wsrep-on=ON --wsrep-provider="$GALERA_PROVIDER" \
		--wsrep-cluster-name=dbq-galera --wsrep-cluster-address="gcomm://$gcomm" \
		--wsrep-node-name="node$n" --wsrep-node-address="$HOST:$((GALERA_GCOMM + n - 1))" \
		--wsrep-provider-options="gmcast.listen_addr=tcp://$HOST:$((GALERA_GCOMM + n - 1));ist.recv_addr=$HOST:$((GALERA_IST + n - 1));gcache.size=64M;pc.wait_prim_timeout=PT30S" \
		--wsrep-sst-method=rsync --wsrep-sst-receive-address="$HOST:$((GALERA_SST + n - 1))" \
		--wsrep-slave-threads=2 \
		"${extra[@]}" </dev/null >"$d/stdout.log" 2>&1 &
	echo $! >"$d/server.pid"
}

# wait_synced N: until node N answers and reports Synced in a cluster of want.
wait_synced() {
	local n=$1 want=$2 i out
	for ((i = 0; i < GALERA_WAIT * 4; i++)); do
		if out=$(q "$n" "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('wsrep_cluster_size','wsrep_local_state_comment') ORDER BY VARIABLE_NAME" 2>/dev/null); then
			[[ $(echo "$out" | tr '\n' ' ') == "$want Synced " ]] && return 0
		fi
		if ! pid "$n" >/dev/null && ((i > 8)); then
			say "node $n exited; last lines of $(ndir "$n")/error.log:"
			tail -n 25 "$(ndir "$n")/error.log" >&2 || true
			return 1
		fi
		sleep 0.25
	done
	say "node $n not Synced in a cluster of $want within ${GALERA_WAIT}s; last log lines:"
	tail -n 25 "$(ndir "$n")/error.log" >&2 || true
	return 1
}

up() {
	local n start=$SECONDS running=0
	for n in "${NODES[@]}"; do pid "$n" >/dev/null && running=$((running + 1)); done
	if ((running == ${#NODES[@]})); then
		say "already running"
		dsns_lines
		return 0
	fi
	((running == 0)) || die "some nodes are running, some not: run '$0 down' first"
	install_missing
	local busy
	busy=$(busy_port) || die "$busy"
	rm -rf "$GALERA_DIR"
	for n in "${NODES[@]}"; do
		install -d -o mysql -g mysql "$(ndir "$n")" "$(ndir "$n")/data" "$(ndir "$n")/tmp"
	done
	# Only node 1 gets a system database; the joiners receive its data.
	mariadb-install-db --no-defaults --user=mysql --datadir="$(ndir 1)/data" \
		--auth-root-authentication-method=normal --skip-test-db >"$(ndir 1)/install.log" 2>&1 ||
		{ tail -n 20 "$(ndir 1)/install.log" >&2; die "mariadb-install-db failed"; }

	start_node 1 bootstrap
	wait_synced 1 1 || { down >/dev/null 2>&1; die "node 1 did not bootstrap"; }
	# Before the joiners copy node 1's data: root from 127.0.0.1 over TCP
	# without a password (the server skips name resolution), database test.
	q 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
	     GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
	     CREATE DATABASE IF NOT EXISTS test;" ||
		{ down >/dev/null 2>&1; die "setting up root and test failed"; }
	# Joiners one at a time: a donor serves one rsync state transfer at once.
	start_node 2
	wait_synced 2 2 || { down >/dev/null 2>&1; die "node 2 did not join"; }
	start_node 3
	for n in "${NODES[@]}"; do
		wait_synced "$n" 3 || { down >/dev/null 2>&1; die "node $n not Synced in a cluster of 3"; }
	done
	say "3 nodes Synced in $((SECONDS - start))s; data in $GALERA_DIR"
	dsns_lines
}

down() {
	local n p i stopped=0
	for n in "${NODES[@]}"; do
		p=$(pid "$n") || continue
		kill -TERM "$p" 2>/dev/null || true
		stopped=$((stopped + 1))
	done
	for n in "${NODES[@]}"; do
		for ((i = 0; i < 120; i++)); do
			p=$(pid "$n") || break
			sleep 0.25
		done
		if p=$(pid "$n"); then
			say "node $n (pid $p) ignored SIGTERM for 30s; sending SIGKILL"
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	# Only what up made: the node directories under GALERA_DIR.
	if [[ -d $GALERA_DIR ]]; then
		for n in "${NODES[@]}"; do rm -rf "$(ndir "$n")"; done
		rmdir "$GALERA_DIR" 2>/dev/null || true
	fi
	say "down ($stopped node(s) stopped)"
}

status() {
	local n out rc=0
	for n in "${NODES[@]}"; do
		if p=$(pid "$n") && out=$(q "$n" "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('wsrep_cluster_size','wsrep_local_state_comment') ORDER BY VARIABLE_NAME" 2>/dev/null); then
			echo "node $n: pid $p, $(dsn "$n"), cluster size $(echo "$out" | sed -n 1p), $(echo "$out" | sed -n 2p)"
		else
			echo "node $n: not running"
			rc=1
		fi
	done
	return $rc
}

# busy_port: prints the first of the cluster's ports in use, and fails, or
# succeeds when all are free.
busy_port() {
	local n p
	for n in "${NODES[@]}"; do
		for p in "$(port "$n")" $((GALERA_GCOMM + n - 1)) $((GALERA_IST + n - 1)) $((GALERA_SST + n - 1)); do
			if port_open "$p"; then
				echo "port $HOST:$p is in use (set GALERA_PORT, GALERA_GCOMM, GALERA_IST, GALERA_SST)"
				return 1
			fi
		done
	done
}

check() {
	local need why busy
	need=$(missing)
	if [[ -n $need ]]; then
		why=$(cant_install)
		[[ -z $why ]] || { echo "missing $need and cannot install them ($why)"; return 1; }
	fi
	[[ -n $need ]] || command -v mariadb-install-db >/dev/null || { echo "no mariadb-install-db"; return 1; }
	id mysql >/dev/null 2>&1 || [[ -n $need ]] || { echo "no mysql user"; return 1; }
	for n in "${NODES[@]}"; do
		if pid "$n" >/dev/null; then echo "a cluster is already running in $GALERA_DIR"; return 1; fi
	done
	busy=$(busy_port) || { echo "$busy"; return 1; }
}

node_arg() {
	[[ ${1:-} =~ ^[123]$ ]] || die "want a node number, 1 to 3"
}

kill_node() {
	local p
	node_arg "$1"
	p=$(pid "$1") || die "node $1 is not running"
	kill -KILL "$p"
	while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
	say "node $1 (pid $p) killed"
}

# restart N: node N again, on its data, joining the running nodes.
restart() {
	local start=$SECONDS
	node_arg "$1"
	pid "$1" >/dev/null && die "node $1 is running"
	[[ -d $(ndir "$1")/data ]] || die "node $1 has no data dir: run '$0 up'"
	rm -f "$(ndir "$1")/mysqld.sock" "$(ndir "$1")/mysqld.pid"
	start_node "$1"
	wait_synced "$1" 3 || die "node $1 did not rejoin"
	say "node $1 rejoined and Synced in $((SECONDS - start))s"
}

isolate() {
	node_arg "$1"
	[[ ${2:-} =~ ^[01]$ ]] || die "isolate N 1|0"
	q "$1" "SET GLOBAL wsrep_provider_options='gmcast.isolate=$2'"
}

dsns_lines() { for n in "${NODES[@]}"; do dsn "$n"; done; }
dsns() { dsns_lines | paste -sd, -; }

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
dsns) dsns ;;
check) check ;;
kill) kill_node "${2:-}" ;;
start) restart "${2:-}" ;;
isolate) isolate "${2:-}" "${3:-}" ;;
*) die "usage: $0 up|down|status|dsns|check|kill N|start N|isolate N 1|0" ;;
esac
