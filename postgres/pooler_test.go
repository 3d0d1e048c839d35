package postgres

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPgBouncerDSN is where scripts/pgbouncer.sh up puts a PgBouncer in
// transaction mode in front of the local PostgreSQL.
const DefaultPgBouncerDSN = "postgres://postgres@127.0.0.1:6433/test?sslmode=disable"

// pgbouncerPool returns a pool through the PgBouncer at DBQ_PGBOUNCER_DSN
// (default DefaultPgBouncerDSN), with query options added to the DSN
// (e.g. default_query_exec_mode=exec), closed at t's cleanup. It skips the
// test when PgBouncer does not answer, or fails it when DBQ_REQUIRE names
// pgbouncer.
func pgbouncerPool(t testing.TB, options string) *pgxpool.Pool {
	t.Helper()
	testPool(t) // the schema is made on the server itself
	dsn := os.Getenv("DBQ_PGBOUNCER_DSN")
	if dsn == "" {
		dsn = DefaultPgBouncerDSN
	}
	if options != "" {
		dsn += "&" + options
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("DBQ_PGBOUNCER_DSN: %v", err)
	}
	cfg.MaxConns = 16
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		msg := "PgBouncer at " + dialect.Redact(dsn) + " does not answer (scripts/pgbouncer.sh up starts one): " + err.Error()
		if dbtest.Required("pgbouncer") {
			t.Fatalf("%s (DBQ_REQUIRE names pgbouncer)", msg)
		}
		t.Skipf("%s; skipping (set DBQ_REQUIRE=pgbouncer to fail instead)", msg)
	}
	t.Cleanup(pool.Close)
	return pool
}

// queueThrough returns a Queue over a fresh, migrated schema of the server,
// reached through pool.
func queueThrough(t testing.TB, pool *pgxpool.Pool, cfg Config) *queue.Queue {
	t.Helper()
	cfg.Schema = newSchema(t, testPool(t))
	if err := Migrate(testCtx(t), testPool(t), cfg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	q, err := New(pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// TestPgBouncerRefusesAdvisory: behind PgBouncer in transaction mode the
// advisory claimer refuses to start, with queue.ErrUnsupportedServer and a
// message that names the setup that works — in pgx's default mode (whose
// prepared statements the pooler breaks) and in exec mode alike.
func TestPgBouncerRefusesAdvisory(t *testing.T) {
	t.Parallel()
	for _, options := range []string{"", "default_query_exec_mode=exec"} {
		pool := pgbouncerPool(t, options)
		q := queueThrough(t, pool, Config{NoNotify: true})
		c, err := q.NewClaimer(testCtx(t))
		if err == nil {
			_ = c.Close(context.Background())
			t.Fatalf("options %q: NewClaimer succeeded behind a transaction pooler", options)
		}
		if !errors.Is(err, queue.ErrUnsupportedServer) || !strings.Contains(err.Error(), "skiplocked") ||
			!strings.Contains(err.Error(), "default_query_exec_mode=exec") {
			t.Fatalf("options %q: NewClaimer: %v, want ErrUnsupportedServer naming the setup to use", options, err)
		}
		t.Logf("options %q: %v", options, err)
		// A Worker stops at once with the same error rather than retrying.
		w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil }, queue.WorkerConfig{Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Run(testCtx(t)); !errors.Is(err, queue.ErrUnsupportedServer) {
			t.Fatalf("options %q: Worker.Run: %v, want ErrUnsupportedServer", options, err)
		}
	}
}

// TestPgBouncerSkipLockedNeedsExecMode: behind PgBouncer in transaction
// mode, the SKIP LOCKED claimer in pgx's default mode (named prepared
// statements, which the pooler mixes up between clients) refuses to start,
// naming exec mode, instead of claiming jobs whose completion then fails;
// in exec mode it starts. Not parallel: the probe relies on the pooler
// handing the second connection the server connection the first just
// left, which the package's other PgBouncer tests, running at the same
// moment, can take in between (it then missed the pooler in 1 of about 7
// make test runs); alone, the probe is what it is tested for here.
func TestPgBouncerSkipLockedNeedsExecMode(t *testing.T) {
	q := queueThrough(t, pgbouncerPool(t, ""), Config{Strategy: SkipLocked, NoNotify: true})
	c, err := q.NewClaimer(testCtx(t))
	if err == nil {
		_ = c.Close(context.Background())
		t.Fatal("NewClaimer succeeded with named prepared statements behind a transaction pooler")
	}
	if !errors.Is(err, queue.ErrUnsupportedServer) || !strings.Contains(err.Error(), "default_query_exec_mode=exec") {
		t.Fatalf("NewClaimer: %v, want ErrUnsupportedServer naming exec mode", err)
	}
	t.Logf("refused: %v", err)
	q = queueThrough(t, pgbouncerPool(t, "default_query_exec_mode=exec"), Config{Strategy: SkipLocked, NoNotify: true})
	c, err = q.NewClaimer(testCtx(t))
	if err != nil {
		t.Fatalf("NewClaimer in exec mode: %v", err)
	}
	_ = c.Close(context.Background())
}

// TestPgBouncerAdvisoryNeverRunsTwice: advisory claimers forced past the
// start check behind PgBouncer in transaction mode (as if the probe had
// missed the pooler) never hand one job to two claimers: a claimer whose
// session another holds is refused when it takes its connection, and a
// statement that reaches a session not marked as its own fails before it
// takes a lock.
func TestPgBouncerAdvisoryNeverRunsTwice(t *testing.T) {
	t.Parallel()
	pool := pgbouncerPool(t, "default_query_exec_mode=exec")
	q := queueThrough(t, pool, Config{NoNotify: true})
	enqueueN(t, q, "g", 300)
	driverOf(t, q).sessionChecked.Store(true) // skip the start check
	claimers := make([]queue.Claimer, 4)
	defer func() {
		for _, c := range claimers {
			if c != nil {
				_ = c.Close(context.Background())
			}
		}
	}()
	owner := map[int64]int{}
	refused, guarded := 0, 0
	for round := 0; round < 50; round++ {
		for i := range claimers {
			if claimers[i] == nil {
				c, err := q.NewClaimer(testCtx(t))
				if err != nil {
					if !errors.Is(err, queue.ErrUnsupportedServer) {
						t.Fatalf("NewClaimer: %v, want ErrUnsupportedServer", err)
					}
					refused++
					continue
				}
				claimers[i] = c
			}
			jobs, err := claimers[i].Claim(testCtx(t), "g", 5)
			if err != nil {
				if !errors.Is(err, queue.ErrUnsupportedServer) {
					t.Fatalf("Claim: %v, want ErrUnsupportedServer", err)
				}
				guarded++
				continue
			}
			for _, j := range jobs {
				if o, ok := owner[j.ID]; ok && o != i {
					t.Fatalf("job %d handed to claimers %d and %d", j.ID, o, i)
				}
				owner[j.ID] = i
			}
		}
	}
	t.Logf("%d jobs claimed, %d claimers refused at start, %d claims stopped by the session guard", len(owner), refused, guarded)
	if refused+guarded == 0 {
		t.Fatal("no claimer met the session checks: the test did not put claimers behind a transaction pooler")
	}
}

// TestConformancePgBouncer runs the conformance suite with the SKIP LOCKED
// strategy through PgBouncer in transaction mode, in exec mode and without
// wake-ups: the setup the advisory claimer's refusal names.
func TestConformancePgBouncer(t *testing.T) {
	t.Parallel()
	pool := pgbouncerPool(t, "default_query_exec_mode=exec")
	h := harness(SkipLocked)
	h.Dialect = "postgres via pgbouncer"
	h.NewQueue = func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
		t.Helper()
		c := Config{Config: cfg, Strategy: SkipLocked, NoNotify: true}
		if migrate {
			return queueThrough(t, pool, c)
		}
		c.Schema = newSchema(t, testPool(t))
		q, err := New(pool, c)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = q.Close() })
		return q
	}
	h.UserPool = nil // reads sessions of a pool it makes on the server itself
	h.NoUserPool = "through PgBouncer the server sessions are the pooler's; TestConformance reads a user pool's"
	integration.Run(t, h)
}

// TestAdvisorySessionGuard: every statement of the advisory claimer that
// runs in a session not marked as the claimer's fails with
// queue.ErrUnsupportedServer before it takes, checks or releases a lock:
// run here on a connection with no mark, as a pooler would run it on
// another client's server connection.
func TestAdvisorySessionGuard(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	ids := enqueueN(t, q, "guard", 10)
	d := driverOf(t, q)
	conn, err := d.pool.Acquire(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	ns := []int32{1}
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"claim", d.stmts.claimAdvisory, []any{"guard", []int64{}, int32(5), headPriority, headRunAt, int64(0), "mine"}},
		{"postcheck", d.stmts.postcheck, []any{ids, "mine"}},
		{"complete", d.stmts.completeAdvisory, []any{ids, "mine"}},
		{"unlock completed", d.stmts.unlockCompleted, []any{ns, ids, "mine"}},
		{"unlock", d.stmts.unlock, []any{ns, ns, "mine"}},
		{"unlock all", d.stmts.unlockAll, []any{"mine"}},
		{"held locks", d.stmts.heldLocks, []any{"mine"}},
	} {
		rows, err := conn.Query(testCtx(t), c.sql, c.args...)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
		}
		if err = interpret(c.name, err); !errors.Is(err, queue.ErrUnsupportedServer) {
			t.Errorf("%s in a session not marked as the claimer's: %v, want ErrUnsupportedServer", c.name, err)
		}
	}
	if got := lockedIDs(t, pid); len(got) != 0 {
		t.Fatalf("the session holds locks %v after the guarded statements", got)
	}
	if n := countRows(t, q, ""); n != 10 {
		t.Fatalf("%d jobs left after a guarded complete, want all 10", n)
	}
	// A claimer's own session: its locks go and its mark is cleared when it
	// closes, so the connection goes back to the pool as it came.
	one, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	one.MaxConns = 1
	pool1, err := pgxpool.NewWithConfig(testCtx(t), one)
	if err != nil {
		t.Fatal(err)
	}
	defer pool1.Close()
	q1, err := New(pool1, Config{Config: queue.Config{Schema: q.Config().Schema}})
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Close()
	c := advisoryClaimer(t, q1)
	if got := claim(t, c, "guard", 2); len(got) != 2 {
		t.Fatalf("claimed %d, want 2", len(got))
	}
	if err := c.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var (
		mark  *string
		locks int
	)
	err = pool1.QueryRow(testCtx(t), `SELECT nullif(current_setting('dbq.claimer', true), ''),
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())`).Scan(&mark, &locks)
	if err != nil {
		t.Fatal(err)
	}
	if mark != nil || locks != 0 {
		t.Fatalf("the closed claimer's connection came back with mark %v and %d advisory locks", *mark, locks)
	}
}
