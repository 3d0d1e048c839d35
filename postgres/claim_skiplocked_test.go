package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

func skipLockedClaimer(t testing.TB, q *queue.Queue) *SkipLockedClaimer {
	t.Helper()
	c, ok := newClaimer(t, q).(*SkipLockedClaimer)
	if !ok {
		t.Fatal("claimer is not a *SkipLockedClaimer")
	}
	return c
}

// TestSkipLockedDeadClaimerAfterLease: a claimer that stops without ending
// its claims gives its jobs back when the lease expires, not before; its
// late Complete is lost, and the new holder's works.
func TestSkipLockedDeadClaimerAfterLease(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	q := newQueue(t, Config{Config: queue.Config{Lease: lease}, Strategy: SkipLocked}, true)
	enqueueN(t, q, "lease", 5)
	victim := skipLockedClaimer(t, q)
	// Before the claim: the lease runs from the server's now() at the
	// claim, which can be earlier than any time taken after it returns.
	start := time.Now()
	held := claim(t, victim, "lease", 5)
	victim.abandon()
	for _, j := range held {
		if j.ClaimedUntil.IsZero() || j.State != queue.StateClaimed {
			t.Fatalf("job %d: claimed until %v, state %s", j.ID, j.ClaimedUntil, j.State)
		}
	}
	b := skipLockedClaimer(t, q)
	if got := claim(t, b, "lease", 5); len(got) != 0 {
		t.Fatalf("before the lease expired b claimed %v", ids(got))
	}
	var got []*queue.Job
	for len(got) < 5 && time.Since(start) < 10*time.Second {
		time.Sleep(100 * time.Millisecond)
		got = append(got, claim(t, b, "lease", 5)...)
	}
	waited := time.Since(start)
	if len(got) != 5 || waited < lease {
		t.Fatalf("got %d of 5 jobs back after %v (lease %v)", len(got), waited, lease)
	}
	t.Logf("jobs back %v after the claimer died (lease %v)", waited.Round(10*time.Millisecond), lease)
	ctx := testCtx(t)
	var lost *queue.LeaseLostError
	if err := victim.Complete(ctx, leases(held)); !errors.As(err, &lost) || len(lost.IDs) != 5 {
		t.Fatalf("dead claimer's Complete: %v, want 5 leases lost", err)
	}
	if err := b.Complete(ctx, leases(got)); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, q, ""); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}

// TestSkipLockedStaleToken: leases that are not current change nothing and
// are reported lost; the rest of the batch applies; Extend renews.
func TestSkipLockedStaleToken(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{Strategy: SkipLocked}, true)
	enqueueN(t, q, "stale", 3)
	c := skipLockedClaimer(t, q)
	jobs := claim(t, c, "stale", 3)
	ctx := testCtx(t)
	forged := queue.Lease{ID: jobs[0].ID, Token: jobs[0].Token + 1}
	var lost *queue.LeaseLostError
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: forged, Error: "x"}, {Lease: jobs[1].Lease(), Error: "boom", Delay: time.Hour}}); !errors.As(err, &lost) || !slices.Equal(lost.IDs, []int64{jobs[0].ID}) {
		t.Fatalf("Retry with one forged lease: %v", err)
	}
	if n := countRows(t, q, "state = 'ready' AND attempt = 1 AND last_error = 'boom' AND run_at > now()"); n != 1 {
		t.Fatalf("%d retried rows, want 1", n)
	}
	var before time.Time
	if err := testPool(t).QueryRow(ctx, "SELECT claimed_until FROM "+driverOf(t, q).Table()+" WHERE id = $1", jobs[2].ID).Scan(&before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := c.Extend(ctx, []queue.Lease{jobs[2].Lease(), forged}); !errors.As(err, &lost) || len(lost.IDs) != 1 {
		t.Fatalf("Extend with one forged lease: %v", err)
	}
	var after time.Time
	if err := testPool(t).QueryRow(ctx, "SELECT claimed_until FROM "+driverOf(t, q).Table()+" WHERE id = $1", jobs[2].ID).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !after.After(before) {
		t.Fatalf("Extend left claimed_until at %v (was %v)", after, before)
	}
	if err := c.Complete(ctx, []queue.Lease{jobs[0].Lease(), jobs[2].Lease()}); err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(ctx, []queue.Lease{jobs[0].Lease()}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("second Complete: %v", err)
	}
}

// TestSkipLockedRescue: Rescue returns expired leases to ready at once,
// counting the lost run as an attempt, and leaves live ones alone.
func TestSkipLockedRescue(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{Config: queue.Config{Lease: time.Hour}, Strategy: SkipLocked}, true)
	enqueueN(t, q, "rescue", 4)
	c := skipLockedClaimer(t, q)
	jobs := claim(t, c, "rescue", 4)
	ctx := testCtx(t)
	if _, err := testPool(t).Exec(ctx, "UPDATE "+driverOf(t, q).Table()+" SET claimed_until = now() - interval '1 second' WHERE id = ANY($1)", ids(jobs[:3])); err != nil {
		t.Fatal(err)
	}
	n, err := c.Rescue(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Rescue = %d, %v; want 3", n, err)
	}
	if n := countRows(t, q, "state = 'ready' AND claim_token IS NULL AND attempt = 1 AND last_error LIKE '%lease expired%'"); n != 3 {
		t.Fatalf("%d rescued rows ready, want 3", n)
	}
	if err := c.Complete(ctx, leases(jobs[:3])); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Complete of rescued jobs: %v", err)
	}
	if err := c.Complete(ctx, leases(jobs[3:])); err != nil {
		t.Fatal(err)
	}
}

// TestSkipLockedCloseReleases: Close gives back what the claimer holds.
func TestSkipLockedCloseReleases(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{Strategy: SkipLocked}, true)
	enqueueN(t, q, "close", 3)
	c := skipLockedClaimer(t, q)
	claim(t, c, "close", 3)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, q, "state = 'ready'"); n != 3 {
		t.Fatalf("%d ready after Close, want 3", n)
	}
	if _, err := c.Claim(testCtx(t), "close", 1); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Claim after Close: %v", err)
	}
}

// TestWithoutPreparedStatements: behind PgBouncer in transaction mode pgx
// must not rely on prepared statements (default_query_exec_mode=exec or
// simple_protocol); every statement of both strategies works that way too,
// and SkipLocked sends no plan.sql step there (a pipelined step would be
// prepared: a pooler would hand the prepared statement's next run to
// another server connection). The advisory claimer has a connection of
// its own and always sends it; so does SkipLocked in pgx's default mode,
// which shows the check can see the step.
func TestWithoutPreparedStatements(t *testing.T) {
	t.Parallel()
	testPool(t)
	modes := map[string]pgx.QueryExecMode{
		"exec":            pgx.QueryExecModeExec,
		"simple_protocol": pgx.QueryExecModeSimpleProtocol,
		"cache_statement": pgx.QueryExecModeCacheStatement,
	}
	for name, mode := range modes {
		for _, strategy := range []Strategy{SkipLocked, Advisory} {
			t.Run(name+"/"+strategy.String(), func(t *testing.T) {
				t.Parallel()
				cfg, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
				if err != nil {
					t.Fatal(err)
				}
				cfg.MaxConns = 4
				cfg.ConnConfig.DefaultQueryExecMode = mode
				tr := &sqlTracer{}
				cfg.ConnConfig.Tracer = tr
				defer func() {
					want := strategy == Advisory || mode == pgx.QueryExecModeCacheStatement
					if got := tr.sent(planStep); got != want {
						t.Errorf("plan.sql sent: %v, want %v", got, want)
					}
				}()
				ctx := testCtx(t)
				pool, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer pool.Close()
				qc := Config{Strategy: strategy}
				qc.Schema = newSchema(t, testPool(t))
				if err := Migrate(ctx, pool, qc); err != nil {
					t.Fatal(err)
				}
				q, err := New(pool, qc)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Close()
				_, err = q.Enqueue(ctx,
					queue.NewJob{Queue: "pgb", Payload: []byte{0, 0xff}, DedupeKey: "d"},
					queue.NewJob{Queue: "pgb", RunAt: time.Now().Add(-time.Minute)},
					queue.NewJob{Queue: "pgb", Delay: time.Millisecond},
					queue.NewJob{Queue: "pgb"})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
				c, err := q.NewClaimer(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close(ctx)
				jobs := claim(t, c, "pgb", 10)
				if len(jobs) != 4 {
					t.Fatalf("claimed %d of 4", len(jobs))
				}
				if err := c.Extend(ctx, leases(jobs)); err != nil {
					t.Fatal(err)
				}
				if err := c.Retry(ctx, []queue.RetryParams{{Lease: jobs[0].Lease(), Error: "e", Delay: time.Hour}}); err != nil {
					t.Fatal(err)
				}
				if err := c.Release(ctx, leases(jobs[1:2])); err != nil {
					t.Fatal(err)
				}
				if err := c.Complete(ctx, leases(jobs[2:])); err != nil {
					t.Fatal(err)
				}
				if _, err := driverOf(t, q).Rescue(ctx); err != nil {
					t.Fatal(err)
				}
				st, err := q.Stats(ctx)
				if err != nil || len(st) != 1 || st[0].Ready != 1 || st[0].Scheduled != 1 {
					t.Fatalf("stats %+v, %v", st, err)
				}
				_, err = q.Enqueue(ctx, queue.NewJob{Queue: "pgb", DedupeKey: "d"})
				if !errors.Is(err, queue.ErrDuplicate) {
					t.Fatalf("duplicate: %v", err)
				}
			})
		}
	}
}

// skipLockedBlocks runs claim_skiplocked.sql for 100 jobs of queue from a
// start (nil: the head) under EXPLAIN ANALYZE in a transaction it rolls
// back, and returns the buffers of the claim index it read.
func skipLockedBlocks(t *testing.T, d *Driver, queueName string, from *queue.Job) int {
	t.Helper()
	ctx := testCtx(t)
	priority, runAt, id := headPriority, headRunAt, int64(0)
	if from != nil {
		priority, runAt, id = from.Priority, pgtype.Timestamptz{Time: from.RunAt, Valid: true}, from.ID
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	blocks, _ := claimIndexBlocks(t, tx, d.stmts.claimSkipLocked,
		queueName, int32(100), int64(1), int64(1_000_000), priority, runAt, id)
	return blocks
}

// TestSkipLockedClaimStartsWhereLastBegan: with no vacuum, the claim index
// keeps the entries of jobs claimed since, and a claim from the head reads
// past them all; a claimer starts where its last full claim began and
// reads a few pages. Urgent jobs (a lower priority number) still come
// first, and a job given back behind the start comes back within
// resumeEvery claims.
func TestSkipLockedClaimStartsWhereLastBegan(t *testing.T) {
	q := newQueue(t, Config{Strategy: SkipLocked}, true)
	d := driverOf(t, q)
	ctx := testCtx(t)
	if _, err := d.pool.Exec(ctx, "ALTER TABLE "+d.stmts.table+" SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, q, "s", 20000)
	c := newClaimer(t, q).(*SkipLockedClaimer)
	for range 150 {
		jobs := claim(t, c, "s", 100)
		if err := c.Complete(ctx, queue.Leases(jobs)); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	from := c.starts["s"].from
	c.mu.Unlock()
	if from == nil {
		t.Fatal("no start after full claims")
	}
	head, started := skipLockedBlocks(t, d, "s", nil), skipLockedBlocks(t, d, "s", from)
	t.Logf("claim index buffers after 15,000 claimed: %d from the head, %d from the start", head, started)
	if started > 20 || started*4 > head {
		t.Fatalf("a claim from the start read %d buffers of the claim index, from the head %d", started, head)
	}

	urgent, err := q.Enqueue(ctx, queue.NewJob{Queue: "s", Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := claim(t, c, "s", 1); len(got) != 1 || got[0].ID != urgent[0] {
		t.Fatalf("claimed %v, want the urgent job %d first", jobIDs(got), urgent[0])
	}

	behind := claim(t, c, "s", 100)
	claim(t, c, "s", 100) // the start is now past all of behind
	if err := c.Release(ctx, queue.Leases(behind[:1])); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i == resumeEvery {
			t.Fatalf("job %d given back behind the start was not claimed in %d claims", behind[0].ID, resumeEvery)
		}
		if got := claim(t, c, "s", 1); len(got) == 1 && got[0].ID == behind[0].ID {
			break
		}
	}
}

// planStep is how plan.sql's statement begins.
const planStep = "SELECT set_config('enable_seqscan'"

// sqlTracer records the SQL of every statement a connection runs or
// prepares (pipelined prepares its steps).
type sqlTracer struct {
	mu  sync.Mutex
	sql []string
}

func (t *sqlTracer) add(sql string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sql = append(t.sql, sql)
}

// sent reports whether a statement that starts with prefix ran.
func (t *sqlTracer) sent(prefix string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.sql {
		if strings.HasPrefix(strings.TrimSpace(stripComments(s)), prefix) {
			return true
		}
	}
	return false
}

// stripComments drops the leading "--" comment lines of a statement.
func stripComments(sql string) string {
	var b strings.Builder
	for line := range strings.Lines(sql) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func (t *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.add(d.SQL)
	return ctx
}

func (t *sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t *sqlTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	t.add(d.SQL)
	return ctx
}

func (t *sqlTracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}
