package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
)

// TestStatsAndCheckReportHealth: on PostgreSQL, dbq stats prints the
// horizon and jobs table lines after its table, stats --health --json
// lists a held snapshot's session, and check runs the horizon and dead
// rows probes, the horizon probe failing past --horizon-warn; on SQLite, which reports no health, there is no line and no
// probe, and stats --health says it is unsupported. MySQL is left to the
// JSON shape test.
func TestStatsAndCheckReportHealth(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		if db.d == dialect.MySQL {
			continue
		}
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, _ := cliDB(t, db)
			pg := db.d == dialect.Postgres
			stats := mustRun(t, "", append(slices.Clone(g), "stats")...)
			if got := strings.Contains(stats, "horizon: ") && strings.Contains(stats, "jobs table: about "); got != pg {
				t.Errorf("stats prints the health lines: %v, want %v\n%s", got, pg, stats)
			}
			check := mustRun(t, "", append(slices.Clone(g), "check")...)
			for _, probe := range []string{"horizon ", "dead rows "} {
				if got := strings.Contains(check, "\n"+probe); got != pg {
					t.Errorf("check runs the %q probe: %v, want %v\n%s", probe, got, pg, check)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if !pg {
				if _, err := dbqCmd(ctx, "", append(slices.Clone(g), "stats", "--health")...); !errors.Is(err, queue.ErrUnsupported) {
					t.Errorf("stats --health on %s: %v, want ErrUnsupported", db.d, err)
				}
				return
			}
			conn, err := pgx.Connect(ctx, dbtest.DSN(dialect.Postgres))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var pid int
			if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			var h queue.Health
			out := mustRun(t, "", append(slices.Clone(g), "stats", "--health", "--json")...)
			if err := json.Unmarshal([]byte(out), &h); err != nil {
				t.Fatalf("stats --health --json: %v\n%s", err, out)
			}
			if !slices.ContainsFunc(h.Holders, func(x queue.HorizonHolder) bool { return x.PID == pid }) {
				t.Errorf("stats --health --json does not list the held snapshot of session %d:\n%s", pid, out)
			}
			out = mustRun(t, "", append(slices.Clone(g), "stats", "--health")...)
			if !strings.HasPrefix(out, "MVCC horizon: held longest by ") || strings.Contains(out, "QUEUE") {
				t.Errorf("stats --health:\n%s", out)
			}
			// Held past --horizon-warn, the probe fails and says what to do;
			// under a threshold above its age, it passes.
			time.Sleep(1100 * time.Millisecond)
			out, err = dbqCmd(ctx, "", append(slices.Clone(g), "check", "--horizon-warn", "1s")...)
			if !errors.Is(err, errCheckFailed) || !regexp.MustCompile(`\nhorizon +FAILED`).MatchString(out) || !strings.Contains(out, "idle_in_transaction_session_timeout") {
				t.Errorf("check --horizon-warn 1s with a snapshot held over 1s: %v\n%s", err, out)
			}
			if out := mustRun(t, "", append(slices.Clone(g), "check", "--horizon-warn", "1h")...); strings.Contains(out, "FAILED") {
				t.Errorf("check --horizon-warn 1h:\n%s", out)
			}
		})
	}
}
