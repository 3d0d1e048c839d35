#!/usr/bin/env bash
# scripts/babelfish.sh: a throwaway Babelfish for PostgreSQL server (T-SQL
# over TDS on a modified PostgreSQL 16) on loopback ports, for running dbq's
# SQL Server dialect against a real T-SQL server where SQL Server itself
# cannot run. Babelfish is not SQL Server: its locking is PostgreSQL's, so a
# run on it proves statements, types, OUTPUT, the driver path, transactions,
# migrations and exactly-once under PostgreSQL's semantics, not SQL Server's
# lock behaviour (NOWAIT's error 1222, READPAST, lock escalation).
#
#   scripts/babelfish.sh up      check the install's sha256, unpack it once
#                                into the cache, install missing Debian
#                                libraries (as root), initdb a cluster of its
#                                own as the postgres user, create the
#                                Babelfish database and login, wait until TDS
#                                answers; print the DSN
#   scripts/babelfish.sh down    stop the server and remove its data
#   scripts/babelfish.sh status  say whether it runs, on which ports
#   scripts/babelfish.sh dsn     print the DSN (go-mssqldb's sqlserver:// form)
#   scripts/babelfish.sh check   exit 0 when up can run here, else print why
#                                not and exit 1
#   scripts/babelfish.sh build   build an install from the public sources
#                                (about 12 minutes on two cores) into
#                                BABELFISH_BUILD_DIR, packed as
#                                babelfish-4.4-pg16.tar.xz with its sha256
#
# The install is not shipped with dbq: DBQ_BABELFISH_TARBALL names a packed
# install (default: babelfish-4.4-pg16.tar.xz in DBQ_SHARED_BIN, else in
# shared/bin beside the checkout, when it is there) (babelfish/{bin,lib,share}, relocatable), made by `build` or
# shared by a colleague; its sha256 is read from DBQ_BABELFISH_SHA256, else
# from the file beside it ($DBQ_BABELFISH_TARBALL.sha256), and checked
# before anything is unpacked. The unpacked install is kept in the cache
# under that sha256 and reused.
#
# Environment (all optional but DBQ_BABELFISH_TARBALL):
#   DBQ_BABELFISH_TARBALL  the packed install (babelfish-4.4-pg16.tar.xz)
#   DBQ_BABELFISH_SHA256   its sha256 (default: from the .sha256 file beside it)
#   BABELFISH_CACHE        where installs are unpacked (default
#                          /var/cache/dbq/babelfish as root, else
#                          ${XDG_CACHE_HOME:-~/.cache}/dbq/babelfish)
#   BABELFISH_DIR          data folder, socket, logs (default ${TMPDIR:-/tmp}/dbq-babelfish)
#   BABELFISH_PG_PORT      the PostgreSQL port (default 5433)
#   BABELFISH_TDS_PORT     the TDS port (default 14330: not 1433, where the
#                          tests look for SQL Server by default)
#   BABELFISH_PASSWORD     the login's password (default Dbq-Passw0rd)
#   BABELFISH_WAIT         seconds to wait for the server (default 120)
#   BABELFISH_BUILD_DIR    where `build` works (default ${TMPDIR:-/tmp}/dbq-babelfish-build)
#   DBQ_NO_INSTALL=1       never apt-get install
set -euo pipefail

HOST=127.0.0.1
PG_PORT=${BABELFISH_PG_PORT:-5433}
TDS_PORT=${BABELFISH_TDS_PORT:-14330}
PASSWORD=${BABELFISH_PASSWORD:-Dbq-Passw0rd}
WAIT=${BABELFISH_WAIT:-120}
DIR=${BABELFISH_DIR:-${TMPDIR:-/tmp}/dbq-babelfish}
if [[ $(id -u) == 0 ]]; then
	CACHE=${BABELFISH_CACHE:-/var/cache/dbq/babelfish}
else
	CACHE=${BABELFISH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dbq/babelfish}
fi
# shellcheck source=scripts/shared-bin.sh
source "$(dirname "${BASH_SOURCE[0]}")/shared-bin.sh"
TARBALL=${DBQ_BABELFISH_TARBALL:-}
if [[ -z $TARBALL && -f $(shared_bin)/babelfish-4.4-pg16.tar.xz ]]; then
	TARBALL=$(shared_bin)/babelfish-4.4-pg16.tar.xz
fi
LOGIN=babelfish_user
DB=babelfish_db
# Debian's names of the libraries the install links against.
LIBS=(libicu72 libxml2 libxslt1.1 libossp-uuid16 libreadline8 libssl3 zlib1g liblzma5)

die() { echo "scripts/babelfish: $*" >&2; exit 1; }
say() { echo "scripts/babelfish: $*" >&2; }

dsn() { echo "sqlserver://$LOGIN:$PASSWORD@$HOST:$TDS_PORT?database=master"; }

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# PostgreSQL refuses to run as root: then run it as postgres.
as_pg() {
	if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# sha: the expected sha256 of the tarball, or nothing.
sha() {
	if [[ -n ${DBQ_BABELFISH_SHA256:-} ]]; then
		echo "$DBQ_BABELFISH_SHA256"
	elif [[ -r $TARBALL.sha256 ]]; then
		awk '{print $1; exit}' "$TARBALL.sha256"
	fi
}

# install_dir: where the install for this tarball is (or will be) unpacked.
install_dir() { echo "$CACHE/$(sha)/babelfish"; }

# The install found from the last up (status and down need no tarball).
recorded_install() { [[ -f $DIR/install ]] && cat "$DIR/install"; }

missing_libs() {
	local p need=()
	for p in "${LIBS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
	done
	echo "${need[*]}"
}

cant_install() {
	if [[ $(id -u) != 0 ]]; then
		echo "not root"
	elif [[ ${DBQ_NO_INSTALL:-} == 1 ]]; then
		echo "DBQ_NO_INSTALL=1"
	elif ! command -v apt-get >/dev/null; then
		echo "no apt-get"
	fi
}

# why_not: why up cannot run here, or nothing when it can.
why_not() {
	local need why
	if [[ -z $TARBALL ]]; then
		echo "DBQ_BABELFISH_TARBALL is not set and there is no $(shared_bin)/babelfish-4.4-pg16.tar.xz (a packed Babelfish install; scripts/babelfish.sh build makes one)"
	elif [[ ! -r $TARBALL ]]; then
		echo "DBQ_BABELFISH_TARBALL=$TARBALL is not a readable file"
	elif [[ -z $(sha) ]]; then
		echo "no sha256 for $TARBALL: set DBQ_BABELFISH_SHA256 or put it in $TARBALL.sha256"
	elif [[ $(id -u) == 0 ]] && ! id postgres >/dev/null 2>&1; then
		echo "running as root, the server runs as the postgres user, which does not exist here"
	elif command -v dpkg-query >/dev/null && need=$(missing_libs) && [[ -n $need ]] &&
		why=$(cant_install) && [[ -n $why ]]; then
		echo "missing Debian libraries $need ($why): apt-get install $need"
	elif ! running && port_open "$PG_PORT"; then
		echo "port $HOST:$PG_PORT is in use (set BABELFISH_PG_PORT)"
	elif ! running && port_open "$TDS_PORT"; then
		echo "port $HOST:$TDS_PORT is in use (set BABELFISH_TDS_PORT)"
	fi
}

install_libs() {
	local need
	command -v dpkg-query >/dev/null || return 0
	read -r -a need <<<"$(missing_libs)"
	((${#need[@]} == 0)) && return 0
	[[ -z $(cant_install) ]] || die "missing ${need[*]} ($(cant_install)): apt-get install ${need[*]}"
	say "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	timeout 600 apt-get install -y -q "${need[@]}" >/dev/null ||
		{ timeout 300 apt-get update -q >/dev/null && timeout 600 apt-get install -y -q "${need[@]}" >/dev/null; } ||
		die "apt-get install ${need[*]} failed"
}

# unpack: check the tarball's sha256 and unpack it into the cache once,
# readable by the postgres user.
unpack() {
	local want got dest tmp
	want=$(sha)
	dest=$(install_dir)
	[[ -x $dest/bin/postgres && -f $dest/../.complete ]] && return 0
	got=$(sha256sum "$TARBALL" | awk '{print $1}')
	[[ $got == "$want" ]] || die "sha256 of $TARBALL is $got, expected $want"
	mkdir -p "$CACHE"
	chmod 755 "$CACHE"
	tmp=$(mktemp -d "$CACHE/.unpack.XXXXXX")
	say "unpacking $TARBALL into $dest"
	tar -xJf "$TARBALL" -C "$tmp" || { rm -rf "$tmp"; die "unpacking $TARBALL failed"; }
	[[ -x $tmp/babelfish/bin/postgres ]] || { rm -rf "$tmp"; die "$TARBALL holds no babelfish/bin/postgres"; }
	chmod -R a+rX "$tmp"
	touch "$tmp/.complete"
	rm -rf "$CACHE/$want"
	mv "$tmp" "$CACHE/$want"
}

# bf PROGRAM ARGS: run one of the install's programs as the postgres user.
bf() {
	local inst=$1 prog=$2
	shift 2
	as_pg env LD_LIBRARY_PATH="$inst/lib" "$inst/bin/$prog" "$@"
}

psql_bf() { # psql_bf INSTALL DB SQL
	PGOPTIONS="-c client_min_messages=error" bf "$1" psql -X -q -v ON_ERROR_STOP=1 -h "$HOST" -p "$PG_PORT" -U postgres -d "$2" -c "$3" >/dev/null
}

running() {
	local inst
	inst=$(recorded_install) || return 1
	[[ -f $DIR/data/postmaster.pid ]] && bf "$inst" pg_ctl -D "$DIR/data" status >/dev/null 2>&1
}

# setup INSTALL: the Babelfish database and its login (research recipe, step 5).
setup() {
	local inst=$1
	psql_bf "$inst" postgres "CREATE USER $LOGIN WITH SUPERUSER CREATEDB CREATEROLE PASSWORD '$PASSWORD' INHERIT"
	psql_bf "$inst" postgres "CREATE DATABASE $DB OWNER $LOGIN"
	psql_bf "$inst" "$DB" 'CREATE EXTENSION IF NOT EXISTS "babelfishpg_tds" CASCADE'
	psql_bf "$inst" "$DB" "GRANT ALL ON SCHEMA sys TO $LOGIN"
	psql_bf "$inst" "$DB" "ALTER SYSTEM SET babelfishpg_tsql.database_name = '$DB'"
	psql_bf "$inst" "$DB" "ALTER SYSTEM SET babelfishpg_tsql.migration_mode = 'multi-db'"
	psql_bf "$inst" "$DB" "SELECT pg_reload_conf()"
	psql_bf "$inst" "$DB" "CALL sys.initialize_babelfish('$LOGIN')"
}

up() {
	local why inst i
	if running; then
		say "already running: PostgreSQL on $HOST:$PG_PORT, TDS on $HOST:$TDS_PORT, data in $DIR"
		dsn
		return 0
	fi
	why=$(why_not)
	[[ -z $why ]] || die "$why"
	install_libs
	unpack
	inst=$(install_dir)
	rm -rf "$DIR"
	mkdir -p "$DIR"
	echo "$inst" >"$DIR/install"
	[[ $(id -u) == 0 ]] && chown postgres "$DIR"
	bf "$inst" initdb -D "$DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
		>"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
	cat >>"$DIR/data/postgresql.conf" <<-EOF
		listen_addresses = '$HOST'
		port = $PG_PORT
		unix_socket_directories = '$DIR'
		allow_system_table_mods = on
		shared_preload_libraries = 'babelfishpg_tds'
		babelfishpg_tds.listen_addresses = '$HOST'
		babelfishpg_tds.port = $TDS_PORT
		max_connections = 200
		fsync = off
	EOF
	bf "$inst" pg_ctl -D "$DIR/data" -l "$DIR/server.log" -w -t "$WAIT" start >/dev/null ||
		{ tail -n 25 "$DIR/server.log" >&2; die "the server did not start"; }
	setup "$inst" || { tail -n 25 "$DIR/server.log" >&2; die "making the Babelfish database failed"; }
	for ((i = 0; i < WAIT; i++)); do
		port_open "$TDS_PORT" && break
		sleep 1
	done
	port_open "$TDS_PORT" || { tail -n 25 "$DIR/server.log" >&2; die "TDS did not answer on $HOST:$TDS_PORT within ${WAIT}s"; }
	say "Babelfish up: PostgreSQL on $HOST:$PG_PORT, TDS on $HOST:$TDS_PORT, data in $DIR"
	dsn
}

down() {
	local inst
	if [[ ! -d $DIR ]]; then
		say "not running (no $DIR)"
		return 0
	fi
	inst=$(recorded_install) || inst=
	if [[ -n $inst && -f $DIR/data/postmaster.pid && -x $inst/bin/pg_ctl ]]; then
		bf "$inst" pg_ctl -D "$DIR/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
			bf "$inst" pg_ctl -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$DIR"
	say "stopped; $DIR removed"
}

status() {
	if running; then
		echo "Babelfish running: PostgreSQL on $HOST:$PG_PORT, TDS on $HOST:$TDS_PORT, data in $DIR, install $(recorded_install)"
		echo "DSN: $(dsn)"
	else
		echo "Babelfish not running"
		return 1
	fi
}

check() {
	local why
	why=$(why_not)
	[[ -z $why ]] || { echo "$why"; return 1; }
}

# build: the recipe of Babelfish 4.4 on PostgreSQL 16 from the public sources.
build() {
	local w=${BABELFISH_BUILD_DIR:-${TMPDIR:-/tmp}/dbq-babelfish-build} bf_prefix ext pg antlr
	bf_prefix=$w/babelfish
	ext=$w/babelfish_extensions pg=$w/postgresql_modified_for_babelfish antlr=$w/antlr4
	[[ $(id -u) == 0 ]] || die "build installs Debian packages and the ANTLR runtime into /usr/local: run it as root"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q build-essential flex bison libxml2-dev libxslt1-dev libssl-dev libreadline-dev \
		zlib1g-dev uuid-dev libossp-uuid-dev libicu-dev pkg-config cmake default-jre-headless gettext git xz-utils
	mkdir -p "$w"
	[[ -d $pg ]] || git clone --depth 1 -b BABEL_4_X_DEV__PG_16_X \
		https://github.com/babelfish-for-postgresql/postgresql_modified_for_babelfish "$pg"
	[[ -d $ext ]] || git clone --depth 1 -b BABEL_4_X_DEV \
		https://github.com/babelfish-for-postgresql/babelfish_extensions "$ext"
	[[ -d $antlr ]] || git clone --depth 1 -b 4.9.3 https://github.com/antlr/antlr4 "$antlr"
	(cd "$pg" && ./configure --prefix="$bf_prefix" --with-libxml --with-libxslt --with-uuid=ossp --with-icu &&
		make -j2 && make install && cd contrib && make -j2 && make install)
	mkdir -p "$antlr/runtime/Cpp/build"
	(cd "$antlr/runtime/Cpp/build" &&
		cmake .. -DANTLR_JAR_LOCATION="$ext/contrib/babelfishpg_tsql/antlr/thirdparty/antlr/antlr-4.9.3-complete.jar" \
			-DCMAKE_INSTALL_PREFIX=/usr/local -DWITH_DEMO=False && make -j2 && make install)
	cp /usr/local/lib/libantlr4-runtime.so.4.9.3 "$bf_prefix/lib/"
	(cd "$ext/contrib/babelfishpg_tsql/antlr" && cmake -Wno-dev -DJava_JAVA_EXECUTABLE="$(command -v java)" . && make all)
	# Debian's GCC 12: procedures.c trips -Werror (maybe-uninitialized), and
	# two globals are defined twice without -fcommon.
	sed -i 's/-Werror//g; s/^PG_CFLAGS += /PG_CFLAGS += -fcommon /' "$ext/contrib/babelfishpg_tsql/Makefile"
	grep -q -- '-fcommon' "$ext/contrib/babelfishpg_tsql/Makefile" ||
		echo 'PG_CFLAGS += -fcommon' >>"$ext/contrib/babelfishpg_tsql/Makefile"
	local e
	for e in babelfishpg_common babelfishpg_money babelfishpg_tds babelfishpg_tsql; do
		(cd "$ext/contrib/$e" && PG_CONFIG=$bf_prefix/bin/pg_config PG_SRC=$pg cmake=$(command -v cmake) make -j2 &&
			PG_CONFIG=$bf_prefix/bin/pg_config PG_SRC=$pg cmake=$(command -v cmake) make install)
	done
	(cd "$w" && tar -cJf babelfish-4.4-pg16.tar.xz babelfish && sha256sum babelfish-4.4-pg16.tar.xz >babelfish-4.4-pg16.tar.xz.sha256)
	say "built $w/babelfish-4.4-pg16.tar.xz: DBQ_BABELFISH_TARBALL=$w/babelfish-4.4-pg16.tar.xz scripts/babelfish.sh up"
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
dsn) dsn ;;
check) check ;;
build) build ;;
*) die "usage: $0 up|down|status|dsn|check|build" ;;
esac
