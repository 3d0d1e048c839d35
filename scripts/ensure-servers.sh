#!/usr/bin/env bash
# ensure-servers.sh: make sure the test databases answer before `make test`.
#
#   PostgreSQL  127.0.0.1:5432  user postgres, no password (trust), database test
#   MariaDB     127.0.0.1:3306  user root, empty password,          database test
#
# For each server, in this order:
#   1. if it already answers (right user, database test): nothing to do;
#   2. else, if a Docker engine answers and docker-compose.yml exists:
#      `docker compose up -d --wait <service>`;
#   3. else the machine's own server: install it from Debian's packages when
#      absent (root only), start it, wait (bounded) until it answers, then
#      create database test and open loopback TCP logins when a fresh
#      install doesn't allow them.
# It prints what it did. It never fails the build and never waits without a
# bound: a server it cannot bring up is reported, and the tests then fail or
# skip per DBQ_REQUIRE.
#
# Knobs (environment):
#   DBQ_SKIP_SERVERS=1       do nothing at all
#   DBQ_NO_INSTALL=1         never run apt-get
#   DBQ_NO_DOCKER=1          never use docker compose
#   DBQ_SERVER_WAIT=60       seconds to wait for a started server to answer
#   DBQ_POSTGRES_DSN / DBQ_MYSQL_DSN set: the tests use that server instead,
#                            so this script leaves that dialect alone.

set -u
export LC_ALL=C
export DEBIAN_FRONTEND=noninteractive

PG_HOST=127.0.0.1 PG_PORT=5432 PG_USER=postgres PG_DB=test
MY_HOST=127.0.0.1 MY_PORT=3306 MY_USER=root MY_DB=test
WAIT=${DBQ_SERVER_WAIT:-60}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IS_ROOT=0; [ "$(id -u)" = 0 ] && IS_ROOT=1

log()  { printf 'ensure-servers: %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }
# Run a command with a time limit and print its output indented.
run() { # run SECONDS cmd...
	local t=$1; shift
	log "  \$ $*"
	timeout --kill-after=10 "$t" "$@" 2>&1 | sed 's/^/      /'
	return "${PIPESTATUS[0]}"
}
# Is a TCP port open? (fallback when no client is installed)
port_open() { timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

if [ "${DBQ_SKIP_SERVERS:-}" = 1 ]; then
	log "DBQ_SKIP_SERVERS=1: not checking the database servers"
	exit 0
fi

# ---------------------------------------------------------------- checks

# The tests' login: over TCP, no password, whatever the caller's PG* settings.
unset PGPASSWORD PGSERVICE PGSERVICEFILE PGOPTIONS PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE
pg_tcp() { # pg_tcp DBNAME psql-args...
	local db=$1; shift
	PGCONNECT_TIMEOUT=3 timeout 10 psql -X -w -q -tA \
		"host=$PG_HOST port=$PG_PORT user=$PG_USER dbname=$db sslmode=disable connect_timeout=3" "$@"
}

PG_ERR=''
pg_ok() { # does PostgreSQL answer with user postgres on database test?
	if have psql; then
		PG_ERR=$(pg_tcp "$PG_DB" -c 'select 1' 2>&1) && [ "$PG_ERR" = 1 ] && return 0
		PG_ERR=$(printf %s "$PG_ERR" | tr -s "\n\t " "   ") # one line
		return 1
	else
		PG_ERR="psql not installed; only checked that the port is open"
		port_open "$PG_HOST" "$PG_PORT"
	fi
}
pg_up() { # does anything answer on 5432 (whatever the login)?
	if have pg_isready; then
		# 0 accepting, 1 rejecting (starting up), 2 no response, 3 bad parameters.
		# Only 0 counts: a server still starting up is waited for.
		timeout 5 pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 3
	else
		port_open "$PG_HOST" "$PG_PORT"
	fi
}

MY_CLIENT=
for c in mariadb mysql; do have $c && { MY_CLIENT=$c; break; }; done
MY_ADMIN=
for c in mariadb-admin mysqladmin; do have $c && { MY_ADMIN=$c; break; }; done
my_client_refresh() {
	for c in mariadb mysql; do have $c && { MY_CLIENT=$c; break; }; done
	for c in mariadb-admin mysqladmin; do have $c && { MY_ADMIN=$c; break; }; done
}

MY_ERR=
my_tcp() { # my_tcp [client args...]: root over TCP, empty password, no option files
	timeout 10 "$MY_CLIENT" --no-defaults --protocol=TCP -h "$MY_HOST" -P "$MY_PORT" \
		-u "$MY_USER" --password= --connect-timeout=3 "$@"
}
my_ok() { # does MariaDB answer with root/empty password on database test?
	if [ -n "$MY_CLIENT" ]; then
		MY_ERR=$(my_tcp -D "$MY_DB" -N -B -e 'select 1' 2>&1) && [ "$MY_ERR" = 1 ]
	else
		MY_ERR="no mariadb client installed; only checked that the port is open"
		port_open "$MY_HOST" "$MY_PORT"
	fi
}
my_up() { # does a server answer on 3306 at all (access denied counts)?
	if [ -n "$MY_ADMIN" ]; then
		# ping exits 0 when the server runs, even if access is denied
		timeout 8 "$MY_ADMIN" --no-defaults --protocol=TCP -h "$MY_HOST" -P "$MY_PORT" \
			-u "$MY_USER" --password= --connect-timeout=3 ping >/dev/null 2>&1
	else
		port_open "$MY_HOST" "$MY_PORT"
	fi
}

# wait_for NAME CHECK: poll CHECK once a second for up to $WAIT seconds.
wait_for() {
	local name=$1 check=$2 i
	for ((i = 0; i < WAIT; i++)); do
		$check && { [ $i -gt 0 ] && log "$name answered after ${i}s"; return 0; }
		sleep 1
	done
	log "$name did not answer within ${WAIT}s"
	return 1
}

# ---------------------------------------------------------------- first look

START=$SECONDS
NEED_PG=0 NEED_MY=0
PG_RESULT='' MY_RESULT=''

if [ -n "${DBQ_POSTGRES_DSN:-}" ]; then
	PG_RESULT="not managed: the tests use DBQ_POSTGRES_DSN"
elif pg_ok; then
	PG_RESULT="already answering"
else
	NEED_PG=1
fi
if [ -n "${DBQ_MYSQL_DSN:-}" ]; then
	MY_RESULT="not managed: the tests use DBQ_MYSQL_DSN"
elif my_ok; then
	MY_RESULT="already answering"
else
	NEED_MY=1
fi

summary() {
	log "PostgreSQL $PG_HOST:$PG_PORT (user $PG_USER, db $PG_DB): $PG_RESULT"
	log "MariaDB    $MY_HOST:$MY_PORT (user $MY_USER, db $MY_DB): $MY_RESULT"
	log "done in $((SECONDS - START))s"
}

if [ $NEED_PG = 0 ] && [ $NEED_MY = 0 ]; then
	summary
	exit 0
fi
[ $NEED_PG = 1 ] && log "PostgreSQL does not answer as needed: ${PG_ERR:-no answer}"
[ $NEED_MY = 1 ] && log "MariaDB does not answer as needed: ${MY_ERR:-no answer}"

# ---------------------------------------------------------------- docker

# Only for servers that are not up at all: one that runs but lacks the
# database or the login is the machine's own, and is fixed below.
if [ "${DBQ_NO_DOCKER:-}" != 1 ] && [ -f "$REPO/docker-compose.yml" ] && have docker &&
	timeout 15 docker info >/dev/null 2>&1 && timeout 15 docker compose version >/dev/null 2>&1; then
	services=()
	[ $NEED_PG = 1 ] && ! pg_up && services+=(postgres)
	[ $NEED_MY = 1 ] && ! my_up && services+=(mysql)
	if [ ${#services[@]} -gt 0 ]; then
		log "a Docker engine answers: starting ${services[*]} with docker compose"
		(cd "$REPO" && run 600 docker compose up -d --wait "${services[@]}") ||
			log "docker compose up failed; falling back to the machine's own servers"
		if [ $NEED_PG = 1 ] && pg_ok; then NEED_PG=0; PG_RESULT="started with docker compose"; fi
		if [ $NEED_MY = 1 ] && my_ok; then NEED_MY=0; MY_RESULT="started with docker compose"; fi
	fi
else
	log "no Docker engine (or no docker-compose.yml): using the machine's own servers"
fi

# ---------------------------------------------------------------- install

pg_installed() { have pg_ctlcluster && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }
my_installed() { [ -x /usr/sbin/mariadbd ] || [ -x /usr/sbin/mysqld ]; }

pkgs=()
[ $NEED_PG = 1 ] && ! pg_installed && ! pg_up && pkgs+=(postgresql)
[ $NEED_MY = 1 ] && ! my_installed && ! my_up && pkgs+=(mariadb-server)
[ $NEED_MY = 1 ] && [ -z "$MY_CLIENT" ] && my_installed && pkgs+=(mariadb-client)
[ $NEED_PG = 1 ] && ! have psql && pg_installed && pkgs+=(postgresql-client)
if [ ${#pkgs[@]} -gt 0 ]; then
	if [ $IS_ROOT != 1 ]; then
		log "not installed: ${pkgs[*]}; not root, so not installing (as root: apt-get install -y ${pkgs[*]})"
	elif [ "${DBQ_NO_INSTALL:-}" = 1 ]; then
		log "not installed: ${pkgs[*]}; DBQ_NO_INSTALL=1, so not installing"
	elif ! have apt-get; then
		log "not installed: ${pkgs[*]}; no apt-get on this machine"
	else
		log "installing ${pkgs[*]} from Debian's packages"
		run 600 apt-get update -q || log "apt-get update failed; trying the install anyway"
		# policy-rc.d may stop the packages from starting their services; we start them below.
		run 1200 apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
			-o DPkg::Lock::Timeout=120 "${pkgs[@]}" || log "apt-get install ${pkgs[*]} failed"
		hash -r
		my_client_refresh
	fi
fi

# ---------------------------------------------------------------- PostgreSQL

pg_su() { # run as the postgres OS user (peer auth over the socket)
	(
		cd / || exit 1
		if have runuser; then timeout 30 runuser -u postgres -- "$@"; else timeout 30 su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
	)
}

pg_cluster() { # prints "VERSION NAME LOGFILE" of the cluster on port 5432 (else the newest)
	have pg_lsclusters || return 1
	local line
	line=$(pg_lsclusters -h 2>/dev/null | awk -v p="$PG_PORT" '$3 == p {print $1, $2, $7; exit}')
	[ -n "$line" ] || line=$(pg_lsclusters -h 2>/dev/null | sort -V | awk '$2 == "main" {l = $1 " " $2 " " $7} END {if (l) print l}')
	[ -n "$line" ] && echo "$line"
}

pg_start() {
	if ! pg_installed; then
		log "PostgreSQL is not installed and could not be installed"
		return 1
	fi
	if [ $IS_ROOT != 1 ]; then
		log "PostgreSQL is not running; not root, so not starting it (as root: pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start)"
		return 1
	fi
	local c ver name logf
	c=$(pg_cluster)
	if [ -z "$c" ]; then
		ver=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n1)
		log "no PostgreSQL cluster: creating $ver/main"
		run 120 pg_createcluster --port "$PG_PORT" "$ver" main || { log "pg_createcluster failed"; return 1; }
		c=$(pg_cluster)
		[ -n "$c" ] || return 1
	fi
	read -r ver name logf <<<"$c"
	[ -d /run/postgresql ] || install -d -o postgres -g postgres -m 2775 /run/postgresql
	log "starting PostgreSQL cluster $ver/$name"
	if ! run 120 pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start; then
		# "already running" also lands here; the wait below tells.
		log "pg_ctlcluster start failed; last lines of $logf:"
		tail -n 15 "$logf" 2>/dev/null | sed 's/^/      /'
	fi
	wait_for PostgreSQL pg_up
}

pg_configure() { # server answers, but not as we need: create db test, trust loopback TCP
	local hba
	if ! pg_tcp postgres -c 'select 1' >/dev/null 2>&1; then
		if [ $IS_ROOT != 1 ]; then
			log "cannot allow passwordless TCP logins for $PG_USER in pg_hba.conf: not root"
			return 1
		fi
		hba=$(pg_su psql -X -w -q -tA -p "$PG_PORT" -d postgres -c 'show hba_file' 2>/dev/null)
		if [ -z "$hba" ] || [ ! -f "$hba" ]; then
			local c v n; c=$(pg_cluster); read -r v n _ <<<"$c"; hba=/etc/postgresql/$v/$n/pg_hba.conf
		fi
		if [ ! -f "$hba" ]; then
			log "cannot find pg_hba.conf to allow TCP logins from 127.0.0.1"
			return 1
		fi
		if grep -q 'dbq ensure-servers' "$hba"; then
			log "$hba already has the dbq trust lines; reloading"
		else
			log "allowing passwordless (trust) TCP logins from 127.0.0.1 and ::1 in $hba"
			local tmp; tmp=$(mktemp)
			{
				echo "# added by dbq scripts/ensure-servers.sh (dbq ensure-servers): loopback TCP without password, for the tests"
				echo "host    all             all             127.0.0.1/32            trust"
				echo "host    all             all             ::1/128                 trust"
				cat "$hba"
			} >"$tmp" && cat "$tmp" >"$hba"
			rm -f "$tmp"
		fi
		pg_su psql -X -w -q -p "$PG_PORT" -d postgres -c 'select pg_reload_conf()' >/dev/null 2>&1 ||
			{ local c v n; c=$(pg_cluster) && read -r v n _ <<<"$c" && run 30 pg_ctlcluster --skip-systemctl-redirect "$v" "$n" reload; }
		sleep 1
	fi
	local exists
	exists=$(pg_tcp postgres -c "select 1 from pg_database where datname = '$PG_DB'" 2>/dev/null)
	if [ "$exists" != 1 ]; then
		log "creating database $PG_DB"
		pg_tcp postgres -c "create database $PG_DB" || pg_su psql -X -w -q -p "$PG_PORT" -d postgres -c "create database $PG_DB"
	fi
}

if [ $NEED_PG = 1 ]; then
	did=
	if ! pg_up; then
		pg_start && did="started the local cluster"
	fi
	if pg_up && ! pg_ok; then
		pg_configure
		did="${did:+$did, }configured (database $PG_DB / loopback trust)"
	fi
	if pg_ok; then
		PG_RESULT="answering (${did:-it came up by itself})"
	else
		PG_RESULT="NOT ANSWERING: ${PG_ERR:-no answer} — tests needing PostgreSQL will fail or skip per DBQ_REQUIRE"
	fi
fi

# ---------------------------------------------------------------- MariaDB

my_opt() { # my_opt NAME DEFAULT: the server's option from the option files
	local v=
	have my_print_defaults && v=$(my_print_defaults --mysqld client-server 2>/dev/null | sed -n "s/^--$1=//p" | tail -n1)
	echo "${v:-$2}"
}

my_start() {
	local bin=/usr/sbin/mariadbd
	[ -x $bin ] || bin=/usr/sbin/mysqld
	if [ ! -x $bin ]; then
		log "MariaDB is not installed and could not be installed"
		return 1
	fi
	if [ $IS_ROOT != 1 ]; then
		log "MariaDB is not running; not root, so not starting it (as root: start-stop-daemon --start --oknodo --background --exec $bin)"
		return 1
	fi
	local datadir sock errlog out=/var/log/mysql/dbq-start.log
	datadir=$(my_opt datadir /var/lib/mysql)
	sock=$(my_opt socket /run/mysqld/mysqld.sock)
	errlog=$(my_opt 'log[-_]error' "")
	local d
	for d in "$(dirname "$sock")" /var/log/mysql; do
		[ -d "$d" ] || install -d -o mysql -g mysql -m 755 "$d"
	done
	if [ ! -d "$datadir/mysql" ]; then
		log "MariaDB data directory $datadir is not initialised: running mariadb-install-db"
		install -d -o mysql -g mysql -m 755 "$datadir"
		local idb=mariadb-install-db; have $idb || idb=mysql_install_db
		TMPDIR='' run 300 $idb --user=mysql --datadir="$datadir" --skip-test-db --auth-root-authentication-method=socket ||
			{ log "$idb failed"; return 1; }
	fi
	log "starting MariaDB ($bin, data $datadir, socket $sock)"
	run 30 start-stop-daemon --start --oknodo --background --output "$out" --exec "$bin" -- --user=mysql ||
		log "start-stop-daemon failed"
	if ! wait_for MariaDB my_up; then
		log "last lines of ${errlog:-$out}:"
		tail -n 15 "${errlog:-$out}" 2>/dev/null | sed 's/^/      /'
		return 1
	fi
}

my_configure() { # server answers, but not as we need: create db test, passwordless root over TCP
	local sock; sock=$(my_opt socket /run/mysqld/mysqld.sock)
	local sql="CREATE DATABASE IF NOT EXISTS \`$MY_DB\`;"
	if my_tcp -e 'select 1' >/dev/null 2>&1; then
		log "creating database $MY_DB"
		my_tcp -e "$sql" 2>&1 | sed 's/^/      /'
		return
	fi
	if [ $IS_ROOT != 1 ]; then
		log "cannot fix MariaDB logins: root over TCP is refused and we are not root"
		return 1
	fi
	# As OS root over the socket (unix_socket auth on a fresh Debian install).
	# root@127.0.0.1 serves skip-name-resolve servers; root@localhost serves
	# servers that resolve 127.0.0.1 to localhost (unix_socket kept for it).
	sql+="
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('');
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
FLUSH PRIVILEGES;"
	log "making root@127.0.0.1 (and root@localhost) passwordless over TCP and creating database $MY_DB, via $sock"
	timeout 20 "$MY_CLIENT" --no-defaults -u root --socket="$sock" --connect-timeout=3 -e "$sql" 2>&1 | sed 's/^/      /'
}

if [ $NEED_MY = 1 ]; then
	did=
	if ! my_up; then
		my_start && did="started the local server"
	fi
	if my_up && ! my_ok && [ -n "$MY_CLIENT" ]; then
		my_configure
		did="${did:+$did, }configured (database $MY_DB / root login)"
	fi
	if my_ok; then
		MY_RESULT="answering (${did:-it came up by itself})"
	else
		MY_RESULT="NOT ANSWERING: ${MY_ERR:-no answer} — tests needing MariaDB will fail or skip per DBQ_REQUIRE"
	fi
fi

summary
exit 0
