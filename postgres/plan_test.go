package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// TestIDListPlansUsePrimaryKey: every statement that takes a list of job
// ids finds them through the primary key, even on a table the planner has
// no statistics for yet (a new table: autovacuum analyzes it a minute
// later at best). Their generic plans must not read the partial claim or
// lease index, which would cost a scan of every ready or held job.
func TestIDListPlansUsePrimaryKey(t *testing.T) {
	q := newQueue(t, Config{}, true)
	d := driverOf(t, q)
	ctx := testCtx(t)
	jobs := make([]queue.NewJob, 20_000)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "p"}
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	ids := "'{1,2,3}'"
	for _, c := range []struct {
		name, sql, args string
	}{
		{"complete_advisory", d.stmts.completeAdvisory, ids},
		{"postcheck", d.stmts.postcheck, ids},
		{"retry_advisory", d.stmts.retryAdvisory, ids + ", '{0,0,0}', '{a,b,c}', '{f,f,f}', '{f,f,f}'"},
		{"cancel", d.stmts.cancel, ids},
		{"retry_dead_ids", d.stmts.retryDeadIDs, "'p', " + ids},
		{"complete_skiplocked", d.stmts.completeSkipLocked, ids + ", '{1,1,1}'"},
		{"retry_skiplocked", d.stmts.retrySkipLocked, ids + ", '{1,1,1}', '{0,0,0}', '{a,b,c}', '{f,f,f}', '{f,f,f}'"},
		{"release", d.stmts.release, ids + ", '{1,1,1}'"},
		{"extend", d.stmts.extend, ids + ", '{1,1,1}', 1000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "plan_" + c.name
			if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE %s AS %s", name, c.sql)); err != nil {
				t.Fatalf("prepare: %v", err)
			}
			defer conn.Exec(ctx, "DEALLOCATE "+name)
			tx, err := conn.Begin(ctx) // EXPLAIN ANALYZE is not run: nothing changes
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			rows, err := tx.Query(ctx, fmt.Sprintf("EXPLAIN EXECUTE %s(%s)", name, c.args))
			if err != nil {
				t.Fatalf("explain: %v", err)
			}
			var plan strings.Builder
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(line + "\n")
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			p := plan.String()
			if strings.Contains(p, "jobs_claim") || strings.Contains(p, "jobs_lease") || !strings.Contains(p, "jobs_pkey") {
				t.Fatalf("the generic plan does not find the ids by primary key:\n%s", p)
			}
		})
	}
}
