package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
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
		{"complete_advisory", d.stmts.completeAdvisory, ids + ", 'mark'"},
		{"postcheck", d.stmts.postcheck, ids + ", 'mark'"},
		{"retry_advisory", d.stmts.retryAdvisory, ids + ", '{0,0,0}', '{a,b,c}', '{f,f,f}', '{f,f,f}', 'mark'"},
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

// TestClaimSkipsFutureJobsAhead: a claim (either strategy) does not read
// the scheduled jobs that sort ahead of the due ones (a lower priority
// number, run_at in the future): with 100,000 of them ahead it reads a few
// buffers of the claim index, not the hundreds of pages they fill.
func TestClaimSkipsFutureJobsAhead(t *testing.T) {
	q := newQueue(t, Config{Strategy: SkipLocked}, true)
	d := driverOf(t, q)
	ctx := testCtx(t)
	if _, err := d.pool.Exec(ctx, `INSERT INTO `+d.stmts.table+` (queue, payload, priority, run_at, created_at)
		SELECT 'f', '', -1, now() + interval '1 day', now() FROM generate_series(1, 100000)`); err != nil {
		t.Fatal(err)
	}
	jobs := make([]queue.NewJob, 1000)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "f"}
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	if _, err := d.pool.Exec(ctx, "ANALYZE "+d.stmts.table); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql string
		args      []any
		max       int // the walk's 100 index descents cost about 4 buffers each
	}{
		{"skiplocked", d.stmts.claimSkipLocked, []any{"f", int32(100), int64(1), int64(1_000_000), headPriority, headRunAt, int64(0)}, 50},
		{"advisory", d.stmts.claimAdvisory, []any{"f", []int64{}, int32(100), headPriority, headRunAt, int64(0)}, 550},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := d.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			defer conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			args := c.args
			if c.name == "advisory" { // the session guard
				if _, err := tx.Exec(ctx, "SELECT set_config('dbq.claimer', 'plan', true)"); err != nil {
					t.Fatal(err)
				}
				args = append(args, "plan")
			}
			blocks, plan := claimIndexBlocks(t, tx, c.sql, args...)
			if blocks > c.max {
				t.Fatalf("the claim read %d buffers of the claim index past 100,000 future jobs\n%s", blocks, plan)
			}
			t.Logf("%d buffers of the claim index", blocks)
		})
	}
}

// claimIndexBlocks runs a claim of 100 jobs under EXPLAIN ANALYZE in tx,
// fails unless it took 100, and returns the buffers of the claim index it
// read and the plan.
func claimIndexBlocks(t *testing.T, tx pgx.Tx, sql string, args ...any) (int, string) {
	t.Helper()
	var plan string
	if err := tx.QueryRow(testCtx(t), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var doc []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
		t.Fatalf("plan %q: %v", plan, err)
	}
	if rows := doc[0].Plan.Rows; rows != 100 {
		t.Fatalf("the claim took %g jobs, want 100", rows)
	}
	return doc[0].Plan.claimIndexBlocks(), plan
}

// planNode is a node of EXPLAIN (FORMAT JSON). Actual Rows is an average
// per loop: an integer up to PostgreSQL 17, a number with two decimals
// ("100.00") from 18 on.
type planNode struct {
	Rows       float64    `json:"Actual Rows"`
	Index      string     `json:"Index Name"`
	SharedHit  int        `json:"Shared Hit Blocks"`
	SharedRead int        `json:"Shared Read Blocks"`
	Plans      []planNode `json:"Plans"`
}

// claimIndexBlocks sums the buffers the plan's scans of the claim index
// read.
func (n planNode) claimIndexBlocks() int {
	total := 0
	if strings.HasSuffix(n.Index, "jobs_claim") {
		total += n.SharedHit + n.SharedRead
	}
	for _, c := range n.Plans {
		total += c.claimIndexBlocks()
	}
	return total
}
