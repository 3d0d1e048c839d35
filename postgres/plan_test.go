package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
		{"unlock_completed", d.stmts.unlockCompleted, "'{1,1,1}', " + ids + ", 'mark'"},
		{"postcheck", d.stmts.postcheck, ids + ", 'mark'"},
		{"postcheck_walked", d.stmts.postcheck, "NULL, 'mark'"},
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
			defer func() { _, _ = conn.Exec(ctx, "DEALLOCATE "+name) }()
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
	// The advisory walk's generic plan, made on this table the planner has
	// no statistics for, hashes the held ids too.
	wantHeldHashed(t, d, "p")
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
			defer func() { _, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock_all()") }()
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

// TestAdvisoryWalkKeepsToClaimIndex: the advisory walk reads the claim
// index in order and stops at its LIMIT even on a table whose statistics
// make a sequential scan and a sort of the whole backlog look cheaper — a
// backlog spread over a bloated table, as a long transaction holding the
// MVCC horizon leaves it. Planned with PostgreSQL's defaults the walk would
// read and sort every ready job on every claim; plan.sql, run before
// it in the same transaction, keeps it on the index.
func TestAdvisoryWalkKeepsToClaimIndex(t *testing.T) {
	q := newQueue(t, Config{}, true)
	d := driverOf(t, q)
	ctx := testCtx(t)
	table := d.stmts.table
	// 300,000 rows whose claim order (run_at) has nothing to do with where
	// they lie in the heap; nine in ten deleted and vacuumed away, so that
	// 30,000 ready jobs are spread over the pages of 300,000.
	// pg_stat_force_next_flush makes the server count the setup's scans
	// before it answers, so that they are not counted as the claimer's.
	setup, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`INSERT INTO ` + table + ` (queue, payload, run_at, created_at)
		 SELECT 'w', '', now() - interval '1 hour' + i * interval '10 ms', now()
		 FROM generate_series(1, 300000) i ORDER BY random()`,
		`DELETE FROM ` + table + ` WHERE id % 10 <> 0`,
		`VACUUM ANALYZE ` + table,
		`SELECT pg_stat_force_next_flush()`,
	} {
		if _, err := setup.Exec(ctx, s); err != nil {
			setup.Release()
			t.Fatal(err)
		}
	}
	setup.Release()
	args := []any{"w", []int64{}, int32(100), headPriority, headRunAt, int64(0), "plan"}
	explain := func(settings bool) []string {
		var doc []struct {
			Plan explainNode `json:"Plan"`
		}
		plan := explainWalk(t, d, settings, "FORMAT JSON", args)
		if err := json.Unmarshal([]byte(plan), &doc); err != nil || len(doc) != 1 {
			t.Fatalf("plan %q: %v", plan, err)
		}
		return doc[0].Plan.jobsScans(nil)
	}
	if scans := explain(false); !slices.Contains(scans, "Seq Scan") {
		t.Fatalf("planned with the defaults, the walk already keeps to the index (%v): this table does not show the plan the test guards against, so it proves nothing", scans)
	}
	if scans := explain(true); slices.Contains(scans, "Seq Scan") || slices.Contains(scans, "Sort") {
		t.Fatalf("with plan.sql the walk still scans the table or sorts: %v", scans)
	}
	wantHeldHashed(t, d, "w")

	// The claimer's own walks: the table's scan counters, flushed by the
	// claimer's session before it answers pg_stat_force_next_flush, must
	// show index scans and no sequential scan.

	c := advisoryClaimer(t, q)
	counts := func() (seq, idx int64) {
		if _, err := c.conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		if err := d.pool.QueryRow(ctx, `SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0)
			FROM pg_stat_user_tables WHERE relid = $1::regclass`, table).Scan(&seq, &idx); err != nil {
			t.Fatal(err)
		}
		return seq, idx
	}
	seq0, idx0 := counts()
	for range 8 {
		jobs, err := c.Claim(ctx, "w", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 100 {
			t.Fatalf("claimed %d jobs, want 100", len(jobs))
		}
	}
	seq, idx := counts()
	if seq != seq0 || idx == idx0 {
		t.Fatalf("the claimer's 8 claims scanned the jobs table %d times and its indexes %d times; want no table scan", seq-seq0, idx-idx0)
	}
	t.Logf("%d index scans, no sequential scan", idx-idx0)
}

// wantHeldHashed fails t unless the advisory walk of queueName, planned
// with plan.sql, looks the jobs its session holds up in a hash built once
// per walk in each of its three scans, rather than comparing every row it
// reads with every held id.
func wantHeldHashed(t *testing.T, d *Driver, queueName string) {
	t.Helper()
	held := make([]int64, 1000)
	for i := range held {
		held[i] = int64(i)*10 + 10
	}
	args := []any{queueName, held, int32(100), headPriority, headRunAt, int64(0), "plan"}
	text := explainWalk(t, d, true, "FORMAT TEXT", args)
	if strings.Count(text, "hashed SubPlan") < 3 || strings.Contains(text, "ALL (") {
		t.Fatalf("the walk does not look its held ids up in a hash in each of its three scans:\n%s", text)
	}
}

// explainWalk returns the advisory walk's plan (EXPLAIN (format) without
// ANALYZE: no lock is taken) for args, in a transaction of its own that it
// rolls back, after plan.sql when settings is true.
func explainWalk(t *testing.T, d *Driver, settings bool, format string, args []any) string {
	t.Helper()
	ctx := testCtx(t)
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT set_config('dbq.claimer', 'plan', true)"); err != nil {
		t.Fatal(err)
	}
	if settings {
		if _, err := tx.Exec(ctx, d.stmts.plan); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN ("+format+") "+d.stmts.claimAdvisory, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// explainNode is a node of EXPLAIN (FORMAT JSON) without ANALYZE.
type explainNode struct {
	Type     string        `json:"Node Type"`
	Relation string        `json:"Relation Name"`
	Plans    []explainNode `json:"Plans"`
}

// jobsScans lists the plan's sorts and its scans of the jobs table.
func (n explainNode) jobsScans(out []string) []string {
	if n.Type == "Sort" || strings.HasSuffix(n.Relation, "jobs") {
		out = append(out, n.Type)
	}
	for _, c := range n.Plans {
		out = c.jobsScans(out)
	}
	return out
}

// TestPlansOutliveTableGrowth: the plans a connection caches while the jobs
// table is new and small stay on the indexes once it has grown, with no
// analyze in between. pgx prepares each statement once per connection and
// PostgreSQL keeps a generic plan after five runs; made for a table of a
// few rows, the post-check's and the completion's would scan the table and
// hash the ids, on every run, until an autoanalyze made PostgreSQL plan
// again. With plan.sql before them (enable_seqscan off) they look the ids
// up by primary key.
func TestPlansOutliveTableGrowth(t *testing.T) {
	for _, strategy := range []Strategy{Advisory, SkipLocked} {
		t.Run(fmt.Sprint(strategy), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			cfg, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 3
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				dbtest.Unreachable(t, dialect.Postgres, err)
			}
			defer pool.Close()
			pcfg := Config{Strategy: strategy}
			pcfg.Schema = newSchema(t, testPool(t)) // dropped through the shared pool, after this one closes
			if err := Migrate(ctx, pool, pcfg); err != nil {
				t.Fatal(err)
			}
			q, err := New(pool, pcfg)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			d := driverOf(t, q)
			c := newClaimer(t, q)
			round := func(n int) {
				t.Helper()
				jobs, err := c.Claim(ctx, "g", n)
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) != n {
					t.Fatalf("claimed %d jobs, want %d", len(jobs), n)
				}
				if err := c.Complete(ctx, queue.Leases(jobs)); err != nil {
					t.Fatal(err)
				}
			}
			// Ten claims and completions on a table of a few rows: every
			// statement has its generic plan cached by then.
			enqueueN(t, q, "g", 20)
			for range 10 {
				round(2)
			}
			// The table grows to 100,000 jobs; nothing analyzes it.
			if _, err := pool.Exec(ctx, `INSERT INTO `+d.stmts.table+` (queue, payload, run_at, created_at)
				SELECT 'g', '', now() - interval '1 hour', now() FROM generate_series(1, 100000)`); err != nil {
				t.Fatal(err)
			}
			// Every connection that ran dbq's statements reports its
			// counts before it answers pg_stat_force_next_flush.
			counts := func() (seq, idx int64) {
				t.Helper()
				if ac, ok := c.(*AdvisoryClaimer); ok {
					if _, err := ac.conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
						t.Fatal(err)
					}
				}
				for _, conn := range pool.AcquireAllIdle(ctx) {
					_, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
					conn.Release()
					if err != nil {
						t.Fatal(err)
					}
				}
				if err := pool.QueryRow(ctx, `SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0)
					FROM pg_stat_user_tables WHERE relid = $1::regclass`, d.stmts.table).Scan(&seq, &idx); err != nil {
					t.Fatal(err)
				}
				return seq, idx
			}
			seq0, idx0 := counts()
			for range 5 {
				round(50)
			}
			if seq, idx := counts(); seq != seq0 || idx == idx0 {
				t.Fatalf("5 claims and completions of 50 jobs scanned the grown table %d times (and its indexes %d times); want no table scan", seq-seq0, idx-idx0)
			}
		})
	}
}
