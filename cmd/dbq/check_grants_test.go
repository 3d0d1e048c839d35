package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
)

// TestCheckAdvisesGrants: run by accounts that lack a grant, dbq check
// fails the probe that needs it with the grant to give — the version probe
// included, which used to say "run dbq migrate up" — and goes on with the
// others; it removes its probe jobs whenever the account may, and names
// them when it may not (no DELETE).
func TestCheckAdvisesGrants(t *testing.T) {
	t.Parallel()
	all := "SELECT, INSERT, UPDATE, DELETE"
	for _, d := range []dialect.Name{dialect.Postgres, dialect.MySQL} {
		for _, c := range []struct {
			name    string
			grant   string // on every dbq table but the version table
			version bool   // also SELECT on the version table
			args    []string
			failed  []string // probes that fail, with grant advice
			left    bool     // probe jobs stay (and "cleanup" says so)
		}{
			{"noversion", all, false, nil, []string{"version"}, false},
			{"noupdate", "SELECT, INSERT, DELETE", true, []string{"--strategy", "skiplocked"}, []string{"claim"}, false},
			{"nodelete", "SELECT, INSERT, UPDATE", true, nil, []string{"complete", "cleanup"}, true},
		} {
			t.Run(string(d)+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				if d == dialect.MySQL {
					c.args = nil // one claimer, which needs UPDATE
					if c.name == "noversion" {
						// MySQL hides a table the account may not read: the
						// version probe cannot tell it from a missing one.
						c.failed = nil
					}
				}
				testCheckGrants(t, d, c.grant, c.version, c.args, c.failed, c.left)
			})
		}
	}
}

func testCheckGrants(t *testing.T, d dialect.Name, grant string, version bool, args, failed []string, left bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := dbtest.UniqueName("chkg") + "_"
	admin := dbtest.DSN(d)
	dropTables(t, admin, prefix)
	if _, err := dbqCmd(ctx, "", "--dsn", admin, "--prefix", prefix, "migrate", "up", "--no-check"); err != nil {
		dbtest.Unreachable(t, d, err)
	}
	n := dialect.Names{Prefix: prefix}
	var setup []string
	for _, table := range dbqTables(t, ctx, d, admin, prefix) {
		g := grant
		if table == n.Versions() {
			if !version {
				continue
			}
			g = "SELECT"
		}
		setup = append(setup, fmt.Sprintf("GRANT %s ON %s TO %%[1]s", g, dialect.Quote(d, table)))
	}
	dsn, _ := testRole(t, d, strings.TrimSuffix(prefix, "_"), setup...)
	out, err := dbqCmd(ctx, "", append([]string{"--dsn", dsn, "--prefix", prefix, "check"}, args...)...)
	if !errors.Is(err, errCheckFailed) {
		if failed != nil || !strings.Contains(out, "complete ") || strings.Contains(out, "FAILED") {
			t.Fatalf("check: %v\n%s", err, out)
		}
	}
	for _, p := range failed {
		row := regexp.MustCompile(`(?m)^` + p + `\s+FAILED.*\n\s+to fix: (.*)$`).FindStringSubmatch(out)
		if row == nil || !strings.Contains(row[1], "grant") || strings.Contains(row[1], "migrate up") {
			t.Errorf("probe %s: want FAILED with grant advice, not migrate up:\n%s", p, out)
		}
	}
	if failed == nil && !strings.Contains(out, "this account may not read it") {
		t.Errorf("the version probe does not say the account may not read the version table:\n%s", out)
	}
	if !strings.Contains(out, "enqueue ") {
		t.Errorf("the probes after a failed one did not run:\n%s", out)
	}
	q := openQueue(t, admin, prefix)
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var probeJobs int64
	for _, s := range st {
		if strings.HasPrefix(s.Queue, "dbq.check.") {
			probeJobs += s.Ready + s.Held + s.Scheduled + s.Dead
		}
	}
	if (probeJobs > 0) != left {
		t.Errorf("%d probe jobs left; want some: %v\n%s", probeJobs, left, out)
	}
	if left && !regexp.MustCompile(`cleanup\s+FAILED\s+2 probe jobs remain in queue dbq\.check\.`).MatchString(out) {
		t.Errorf("check left its probe jobs without saying which:\n%s", out)
	}
}

// dbqTables lists the tables of prefix in the DSN's own schema.
func dbqTables(t *testing.T, ctx context.Context, d dialect.Name, dsn, prefix string) []string {
	t.Helper()
	admin, _, err := dbq.OpenDB(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	q := "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
	if d == dialect.MySQL {
		q = "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()"
	}
	rows, err := admin.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	if err := rows.Err(); err != nil || len(out) < 3 {
		t.Fatalf("tables of %s: %v, %v", prefix, out, err)
	}
	return out
}
