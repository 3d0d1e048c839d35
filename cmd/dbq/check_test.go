package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// TestCheck: dbq check passes, probe by probe, on each database after
// migrate up (which runs it too), leaving no job; it fails with exit 1 and
// says to migrate when the schema is behind.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			prefix := dbtest.UniqueName("chk") + "_"
			g := []string{"--dsn", db.dsn, "--prefix", prefix}
			// Not migrated: the version probe fails and says what to do.
			out, err := dbqCmd(ctx, "", append(g, "check")...)
			if db.d != "sqlite" && err != nil && !strings.Contains(out, "version") {
				dbtest.Unreachable(t, db.d, err)
			}
			if db.d == "sqlite" {
				if err == nil || !strings.Contains(err.Error(), "does not exist") {
					t.Fatalf("check of a missing SQLite file: %v\n%s", err, out)
				}
			} else if !errors.Is(err, errCheckFailed) || !strings.Contains(out, "schema at version 0") || !strings.Contains(out, "dbq migrate up") {
				t.Fatalf("check before migrating: %v\n%s", err, out)
			} else {
				// A check reads: it made no version table.
				sdb, _, err := dbq.OpenDB(ctx, db.dsn)
				if err != nil {
					t.Fatal(err)
				}
				_, err = sdb.ExecContext(ctx, "SELECT 1 FROM "+prefix+"schema_version")
				sdb.Close()
				if err == nil {
					t.Fatalf("check of an unmigrated database created %sschema_version", prefix)
				}
			}
			dropTables(t, db.dsn, prefix)
			up := mustRun(t, "", append(g, "migrate", "up")...)
			if !strings.Contains(up, "probes passed") {
				t.Fatalf("migrate up did not run the check:\n%s", up)
			}
			out = mustRun(t, "", append(g, "check")...)
			for _, probe := range []string{"version", "schema", "enqueue", "claim", "exclusive", "release", "complete"} {
				if !strings.Contains(out, probe+" ") {
					t.Errorf("check printed no %s probe:\n%s", probe, out)
				}
			}
			if strings.Contains(out, "FAILED") {
				t.Errorf("a probe failed:\n%s", out)
			}
			q := openQueue(t, db.dsn, prefix)
			st, err := q.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range st {
				if s.Ready+s.Held+s.Scheduled+s.Dead > 0 {
					t.Errorf("queue %s holds jobs after the check: %+v", s.Queue, s)
				}
			}
		})
	}
}

// TestCheckBehindPgBouncer: through PgBouncer in transaction mode, dbq
// check fails the default advisory claimer with the setup to use, and
// passes with that setup (--strategy skiplocked, exec mode).
func TestCheckBehindPgBouncer(t *testing.T) {
	t.Parallel()
	direct := dbtest.DSN("postgres")
	bouncer := os.Getenv("DBQ_PGBOUNCER_DSN")
	if bouncer == "" {
		bouncer = "postgres://postgres@127.0.0.1:6433/test?sslmode=disable"
	}
	bouncer += "&default_query_exec_mode=exec"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := dbtest.UniqueName("chkpgb") + "_"
	dropTables(t, direct, prefix)
	if _, err := dbqCmd(ctx, "", "--dsn", direct, "--prefix", prefix, "migrate", "up", "--no-check"); err != nil {
		dbtest.Unreachable(t, "postgres", err)
	}
	q, err := openQueueErr(ctx, bouncer, prefix)
	if err != nil {
		msg := "PgBouncer does not answer (scripts/pgbouncer.sh up): " + err.Error()
		if dbtest.Required("pgbouncer") {
			t.Fatal(msg)
		}
		t.Skip(msg + "; skipping (set DBQ_REQUIRE=pgbouncer to fail instead)")
	}
	q.Close()
	out, err := dbqCmd(ctx, "", "--dsn", bouncer, "--prefix", prefix, "check")
	if !errors.Is(err, errCheckFailed) || !strings.Contains(out, "FAILED") || !strings.Contains(out, "skiplocked") {
		t.Fatalf("check of the advisory claimer behind PgBouncer: %v\n%s", err, out)
	}
	out = mustRun(t, "", "--dsn", bouncer, "--prefix", prefix, "--strategy", "skiplocked", "check")
	if strings.Contains(out, "FAILED") {
		t.Fatalf("check with skiplocked behind PgBouncer:\n%s", out)
	}
}

func openQueueErr(ctx context.Context, dsn, prefix string) (*queue.Queue, error) {
	q, err := dbq.Open(ctx, dsn, dbq.Options{Config: queue.Config{Prefix: prefix}, Strategy: "skiplocked"})
	if err != nil {
		return nil, err
	}
	if _, err := q.Stats(ctx); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}
