#!/usr/bin/env bash
# scripts/citus.sh: Citus (distributed PostgreSQL) for testing dbq's
# PostgreSQL dialect on a coordinator and workers.
#
#   scripts/citus.sh build   build Citus CITUS_REF from the public sources
#                            against the local PostgreSQL 15 into the cache:
#                            a private copy of the PostgreSQL 15 install with
#                            the citus extension in it (the system's install
#                            is left as it is)
#   scripts/citus.sh check   exit 0 when a build is present, else say why
#                            and exit 3 (callers treat 3 as "skip")
#   scripts/citus.sh where   print the build's bin directory
#
# Citus main needs PostgreSQL 16 to 18; the 12.1 releases build against 15,
# whose server headers Debian packages as postgresql-server-dev-15 (`build`
# installs it, liblz4-dev, libzstd-dev and libkrb5-dev as root unless
# DBQ_NO_INSTALL=1).
#
# Environment (all optional):
#   CITUS_REF        tag or branch to build (default v12.1.12)
#   CITUS_GIT        repository to clone (default
#                    https://github.com/citusdata/citus.git; a local clone
#                    or mirror works too)
#   CITUS_CACHE      where builds are kept (default /var/cache/dbq/citus as
#                    root, else ${XDG_CACHE_HOME:-~/.cache}/dbq/citus)
#   CITUS_BUILD_DIR  where `build` works (default ${TMPDIR:-/tmp}/dbq-citus-build)
#   CITUS_JOBS       make -j (default: the number of CPUs)
#   DBQ_NO_INSTALL=1 never apt-get install
set -euo pipefail

PG_MAJOR=15
CITUS_REF=${CITUS_REF:-v12.1.12}
CITUS_GIT=${CITUS_GIT:-https://github.com/citusdata/citus.git}
# PostgreSQL refuses to run as root and its user must reach the build: as
# root the cache is under /var/cache (root's home is often closed to others).
if [[ $(id -u) == 0 ]]; then
	CACHE=${CITUS_CACHE:-/var/cache/dbq/citus}
else
	CACHE=${CITUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dbq/citus}
fi
WORK=${CITUS_BUILD_DIR:-${TMPDIR:-/tmp}/dbq-citus-build}
JOBS=${CITUS_JOBS:-$(nproc 2>/dev/null || echo 2)}
PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
# The build: $ROOT/usr/lib/postgresql/15/{bin,lib} and
# $ROOT/usr/share/postgresql/15, laid out as Debian lays out the system's,
# so that its programs find their share and lib folders relative to
# themselves.
ROOT=$CACHE/$CITUS_REF-pg$PG_MAJOR
SKIP=3

die() { echo "scripts/citus: $*" >&2; exit 1; }
say() { echo "scripts/citus: $*" >&2; }

bindir() { echo "$ROOT/usr/lib/postgresql/$PG_MAJOR/bin"; }

check() {
	if [[ ! -f $ROOT/BUILD-INFO ]]; then
		echo "scripts/citus: no Citus build in $ROOT (scripts/citus.sh build makes one)" >&2
		exit $SKIP
	fi
}

# deps: make sure the PostgreSQL 15 server headers (PGXS) and the
# compression headers are there, installing them as root if allowed.
deps() {
	local pkgs=()
	# postgresql-client-15 ships pgxs.mk; the server headers come with -dev.
	[[ -x $PG_CONFIG && -f $("$PG_CONFIG" --pgxs 2>/dev/null) &&
		-f $("$PG_CONFIG" --includedir-server 2>/dev/null)/postgres.h ]] || pkgs+=("postgresql-server-dev-$PG_MAJOR")
	[[ -f /usr/include/lz4.h ]] || pkgs+=(liblz4-dev)
	[[ -f /usr/include/zstd.h ]] || pkgs+=(libzstd-dev)
	# Debian's server headers include GSSAPI's (libpq-be.h).
	[[ -f /usr/include/gssapi/gssapi.h ]] || pkgs+=(libkrb5-dev)
	command -v git >/dev/null || pkgs+=(git)
	((${#pkgs[@]} == 0)) && return 0
	if [[ $(id -u) != 0 || ${DBQ_NO_INSTALL:-} == 1 ]]; then
		die "missing ${pkgs[*]}: install them (apt-get install ${pkgs[*]}) and run again"
	fi
	say "installing ${pkgs[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >/dev/null ||
		die "apt-get install ${pkgs[*]} failed"
}

# fetch_source: the sources of CITUS_REF in $WORK/src.
fetch_source() {
	rm -rf "$WORK/src"
	mkdir -p "$WORK"
	local depth=(--depth 1)
	[[ -d $CITUS_GIT ]] && depth=() # a local repository: no shallow clone needed
	git clone -q "${depth[@]}" --branch "$CITUS_REF" "$CITUS_GIT" "$WORK/src" 2>"$WORK/clone.log" ||
		die "cannot clone $CITUS_REF from $CITUS_GIT: $(tail -n 1 "$WORK/clone.log")"
}

# compile: configure, make and make install into $WORK/stage.
compile() {
	local src=$WORK/src log=$WORK/build.log
	say "building Citus $CITUS_REF ($(git -C "$src" rev-parse --short HEAD)) against PostgreSQL $("$PG_CONFIG" --version | cut -d' ' -f2), log in $log"
	# No libcurl: it only sends Citus's usage statistics. No LLVM bitcode
	# (with_llvm=no): JIT inlining of Citus is not needed for tests.
	(cd "$src" && ./configure PG_CONFIG="$PG_CONFIG" --without-libcurl) >"$log" 2>&1 ||
		die "configure failed: $(tail -n 3 "$log")"
	make -C "$src" -j"$JOBS" with_llvm=no >>"$log" 2>&1 || die "make failed: $(grep -m 3 -E 'error:|\*\*\*' "$log")"
	rm -rf "$WORK/stage"
	make -C "$src" install DESTDIR="$WORK/stage" with_llvm=no >>"$log" 2>&1 ||
		die "make install failed: $(tail -n 3 "$log")"
}

# assemble: a copy of the system's PostgreSQL 15 with the staged Citus
# files in it, moved into place as a whole.
assemble() {
	local tmp=$CACHE/.tmp-$$ lib=usr/lib/postgresql/$PG_MAJOR share=usr/share/postgresql/$PG_MAJOR
	rm -rf "$tmp"
	mkdir -p "$tmp/$lib" "$tmp/$share"
	cp -a "/$lib/." "$tmp/$lib/"
	cp -a "/$share/." "$tmp/$share/"
	cp -a "$WORK/stage/." "$tmp/"
	[[ -f $tmp/$share/extension/citus.control ]] || die "the staged build has no citus.control"
	{
		echo "citus $CITUS_REF $(git -C "$WORK/src" rev-parse HEAD)"
		echo "source $CITUS_GIT"
		"$PG_CONFIG" --version
	} >"$tmp/BUILD-INFO"
	rm -rf "$ROOT"
	mv "$tmp" "$ROOT"
}

build() {
	deps
	fetch_source
	compile
	assemble
	# The copy's server must find the extension relative to itself.
	local share
	share=$("$(bindir)/pg_config" --sharedir)
	[[ -f $share/extension/citus.control ]] ||
		die "the copy's pg_config names $share, which has no citus.control: the install is not relocatable"
	say "built: $(head -n 1 "$ROOT/BUILD-INFO") in $ROOT"
	rm -rf "$WORK"
}

case ${1:-} in
build) build ;;
check) check ;;
where)
	check
	bindir
	;;
*) die "usage: $0 build|check|where" ;;
esac
