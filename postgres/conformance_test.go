package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
)

// TestConformance runs the conformance suite against both strategies.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, s := range []Strategy{Advisory, SkipLocked} {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			testPool(t)
			integration.Run(t, harness(s))
		})
	}
}

func harness(s Strategy) integration.Harness {
	h := integration.Harness{
		Dialect: string(dialect.Postgres),
		NewQueue: func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
			t.Helper()
			return newQueue(t, Config{Config: cfg, Strategy: s}, migrate)
		},
		Migrator: func(t *testing.T, q *queue.Queue) *goose.Provider {
			t.Helper()
			db := SQLDB(driverOf(t, q).Pool())
			t.Cleanup(func() { _ = db.Close() })
			p, err := migrations.NewProvider(context.Background(), dialect.Postgres, db, q.Config().Names())
			if err != nil {
				t.Fatalf("migrations.NewProvider: %v", err)
			}
			return p
		},
		UserPool: func(t *testing.T, cfg queue.Config) (*queue.Queue, func(*testing.T) []map[string]string) {
			t.Helper()
			return userPoolQueue(t, Config{Config: cfg, Strategy: s})
		},
		InsertRaw: insertRaw,
	}
	switch s {
	case Advisory:
		h.Tx = pgxTx
		h.LockBased = true
		h.Kill = func(t *testing.T, c queue.Claimer) {
			t.Helper()
			kill(t, c.(*AdvisoryClaimer))
		}
		h.HeldLocks = func(t *testing.T, c queue.Claimer) []int64 {
			t.Helper()
			return lockedIDs(t, c.(*AdvisoryClaimer).backendPID())
		}
		h.Leftovers = func(t *testing.T, c queue.Claimer) []string {
			t.Helper()
			return advisoryLeftovers(t, c.(*AdvisoryClaimer))
		}
	case SkipLocked:
		h.Tx = sqlTx
		// A lease claimer holds no locks between calls; what it holds in
		// the database are the rows claimed under its tokens.
		h.HeldLocks = func(t *testing.T, c queue.Claimer) []int64 {
			t.Helper()
			return skipLockedClaimed(t, c.(*SkipLockedClaimer))
		}
		// A SKIP LOCKED claimer holds no connection: a dead one is one that
		// stops, leaving its leases to expire.
		h.Kill = func(t *testing.T, c queue.Claimer) {
			t.Helper()
			c.(*SkipLockedClaimer).abandon()
		}
		h.Leftovers = func(t *testing.T, c queue.Claimer) []string {
			t.Helper()
			return skipLockedLeftovers(t, c.(*SkipLockedClaimer))
		}
	}
	return h
}

// pgxTx begins a pgx transaction on q's pool, as an application using pgx
// does. The advisory harness takes it and the SKIP LOCKED one sqlTx, so
// that the suite enqueues in both kinds of transaction Enqueue takes.
func pgxTx(t *testing.T, q *queue.Queue) (any, func() error) {
	t.Helper()
	ctx := testCtx(t)
	tx, err := driverOf(t, q).Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // after Commit: nothing to do
	return tx, func() error { return tx.Commit(ctx) }
}

// sqlTx begins a database/sql transaction (pgx's stdlib driver) on q's
// pool, as an application using database/sql does.
func sqlTx(t *testing.T, q *queue.Queue) (any, func() error) {
	t.Helper()
	db := SQLDB(driverOf(t, q).Pool())
	t.Cleanup(func() { _ = db.Close() })
	tx, err := db.BeginTx(testCtx(t), nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback() }) // after Commit: nothing to do
	return tx, tx.Commit
}

// userPoolQueue returns a migrated Queue through New on a pgxpool of the
// test's own, as an application passes its own, and a reader of the
// session settings of every connection that pool holds.
func userPoolQueue(t *testing.T, cfg Config) (*queue.Queue, func(*testing.T) []map[string]string) {
	t.Helper()
	const size = 4
	cfg.Schema = newSchema(t, testPool(t))
	pc, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = size
	pool, err := pgxpool.NewWithConfig(testCtx(t), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the schema is dropped: cleanups run last first
	if err := Migrate(testCtx(t), pool, cfg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	q, err := New(pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, func(t *testing.T) []map[string]string {
		t.Helper()
		return poolSessions(t, pool, size)
	}
}

// poolSessions holds n connections of pool at once — every idle one among
// them — and reads on each the settings a session can be left with: the
// ones SET on it, the isolation level and timeouts whatever their source,
// and dbq's own custom settings. Empty counts as unset: a custom setting
// once set stays defined in its session, empty when reset (PostgreSQL has
// no way to remove it), and dbq reads empty as unset.
func poolSessions(t *testing.T, pool *pgxpool.Pool, n int) []map[string]string {
	t.Helper()
	ctx := testCtx(t)
	out := make([]map[string]string, n)
	for i := range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		defer c.Release()
		rows, err := c.Query(ctx, `SELECT name, setting FROM pg_settings
			WHERE source = 'session' OR name IN ('transaction_isolation', 'default_transaction_isolation',
				'lock_timeout', 'statement_timeout', 'idle_in_transaction_session_timeout')
			UNION ALL SELECT name, coalesce(nullif(current_setting(name, true), ''), '<unset>')
			FROM unnest(ARRAY['dbq.claim_skipped', 'dbq.claimer', 'dbq.walked', 'dbq.completed']) AS name`)
		if err != nil {
			t.Fatalf("session settings: %v", err)
		}
		m := map[string]string{}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			m[k] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		out[i] = m
	}
	return out
}

// advisoryLeftovers lists what the claimer's session holds besides the
// locks of its jobs: an open transaction, any other lock.
func advisoryLeftovers(t testing.TB, c *AdvisoryClaimer) []string {
	t.Helper()
	pid := c.backendPID()
	if pid == 0 {
		return nil
	}
	ctx := testCtx(t)
	pool := testPool(t)
	var out []string
	var state string
	err := pool.QueryRow(ctx, `SELECT coalesce(state, '') || CASE WHEN xact_start IS NULL THEN '' ELSE ' (transaction open)' END
		FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&state)
	if err != nil {
		t.Fatalf("pg_stat_activity: %v", err)
	}
	if state != "idle" {
		out = append(out, "session state "+state)
	}
	rows, err := pool.Query(ctx, `SELECT locktype, coalesce(objid::int8, 0), objsubid, mode
		FROM pg_locks WHERE pid = $1`, int32(pid))
	if err != nil {
		t.Fatalf("pg_locks: %v", err)
	}
	defer rows.Close()
	held := c.heldIDs()
	for rows.Next() {
		var (
			typ, mode string
			objid     int64
			sub       int16
		)
		if err := rows.Scan(&typ, &objid, &sub, &mode); err != nil {
			t.Fatal(err)
		}
		if typ == "advisory" && sub == 2 && slices.Contains(held, objid) {
			continue
		}
		out = append(out, fmt.Sprintf("%s lock %d/%d %s", typ, objid, sub, mode))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// skipLockedLeftovers lists claimed rows whose claim the claimer does not
// know it made: a claim cut off after it took effect.
func skipLockedLeftovers(t testing.TB, c *SkipLockedClaimer) []string {
	t.Helper()
	rows, err := testPool(t).Query(testCtx(t), "SELECT id, claim_token FROM "+c.d.Table()+" WHERE state = 'claimed'")
	if err != nil {
		t.Fatalf("claimed rows: %v", err)
	}
	defer rows.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for rows.Next() {
		var id, token int64
		if err := rows.Scan(&id, &token); err != nil {
			t.Fatal(err)
		}
		if c.held[id] != token {
			out = append(out, fmt.Sprintf("claimed row %d (token %d) unknown to the claimer", id, token))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// skipLockedClaimed returns the ids of the rows claimed under the tokens of
// the jobs c holds, sorted.
func skipLockedClaimed(t *testing.T, c *SkipLockedClaimer) []int64 {
	t.Helper()
	c.mu.Lock()
	tokens := make([]int64, 0, len(c.held))
	for _, tok := range c.held {
		tokens = append(tokens, tok)
	}
	c.mu.Unlock()
	rows, err := c.d.pool.Query(testCtx(t), "SELECT id FROM "+c.d.stmts.table+
		" WHERE state = 'claimed' AND claim_token = ANY($1) ORDER BY id", tokens)
	if err != nil {
		t.Fatalf("claimed rows: %v", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("claimed rows: %v", err)
	}
	return ids
}

// insertRaw inserts a job as a producer does from psql: timestamptz takes
// the instant as it is.
func insertRaw(t *testing.T, q *queue.Queue, cols map[string]any) {
	t.Helper()
	n := q.Config().Names()
	stmt, args := integration.InsertStatement(n.Qualified(dialect.Postgres, n.Jobs()), cols,
		func(i int) string { return fmt.Sprintf("$%d", i) })
	if _, err := driverOf(t, q).Pool().Exec(testCtx(t), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}
