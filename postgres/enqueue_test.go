package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgconn"
)

// payloadsByID reads back the payloads of ids.
func payloadsByID(t *testing.T, q *queue.Queue, ids []int64) map[int64][]byte {
	t.Helper()
	rows, err := testPool(t).Query(testCtx(t), "SELECT id, payload FROM "+driverOf(t, q).Table()+" WHERE id = ANY($1)", ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64][]byte{}
	for rows.Next() {
		var (
			id int64
			p  []byte
		)
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		out[id] = p
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEnqueueInCallersTransaction: jobs enqueued in a pgx.Tx or a *sql.Tx
// appear when, and only if, it commits; ids come back in input order, and
// a dedupe collision is ErrDuplicate keeping the server's error.
func TestEnqueueInCallersTransaction(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	pool := testPool(t)
	db := SQLDB(pool)
	t.Cleanup(func() { _ = db.Close() })
	type txn struct {
		tx       any
		commit   func() error
		rollback func() error
	}
	kinds := map[string]func(t *testing.T) txn{
		"pgx.Tx": func(t *testing.T) txn {
			tx, err := pool.Begin(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			return txn{tx, func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(ctx) }}
		},
		"*sql.Tx": func(t *testing.T) txn {
			tx, err := db.BeginTx(testCtx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			return txn{tx, tx.Commit, tx.Rollback}
		},
	}
	for kind, begin := range kinds {
		t.Run(kind, func(t *testing.T) {
			name := "tx-" + strings.Trim(kind, "*.")
			ctx := testCtx(t)
			runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
			jobs := []queue.NewJob{
				{Queue: name, Payload: []byte{0, 1, 2, 0xff}, Priority: 3, DedupeKey: "k"},
				{Queue: name, Payload: []byte(`{"a":"ü"}`), RunAt: runAt},
				{Queue: name, Payload: nil, Delay: time.Minute, MaxAttempts: 2},
			}
			for i := 3; i < 50; i++ {
				jobs = append(jobs, queue.NewJob{Queue: name, Payload: fmt.Appendf(nil, "n%d", i)})
			}

			tx := begin(t)
			if _, err := q.EnqueueTx(ctx, tx.tx, jobs...); err != nil {
				t.Fatal(err)
			}
			if err := tx.rollback(); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, q, "queue = '"+name+"'"); n != 0 {
				t.Fatalf("%d jobs stored by a rolled-back transaction", n)
			}

			tx = begin(t)
			got, err := q.EnqueueTx(ctx, tx.tx, jobs...)
			if err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, q, "queue = '"+name+"'"); n != 0 {
				t.Fatalf("%d jobs visible before commit", n)
			}
			if err := tx.commit(); err != nil {
				t.Fatal(err)
			}
			stored := payloadsByID(t, q, got)
			for i, id := range got {
				want := jobs[i].Payload
				if want == nil {
					want = []byte{}
				}
				if !bytes.Equal(stored[id], want) {
					t.Fatalf("id %d (input %d) holds %q, want %q: ids not in input order", id, i, stored[id], want)
				}
			}
			if n := countRows(t, q, fmt.Sprintf("id = %d AND priority = 3 AND dedupe_key = 'k'", got[0])); n != 1 {
				t.Error("priority or dedupe key not stored")
			}
			var at time.Time
			if err := pool.QueryRow(ctx, "SELECT run_at FROM "+driverOf(t, q).Table()+" WHERE id = $1", got[1]).Scan(&at); err != nil || !at.Equal(runAt) {
				t.Errorf("run_at %v, %v; want %v", at, err, runAt)
			}
			if n := countRows(t, q, fmt.Sprintf("id = %d AND max_attempts = 2 AND run_at > now() + interval '50 seconds'", got[2])); n != 1 {
				t.Error("Delay or MaxAttempts not stored")
			}

			tx = begin(t)
			_, err = q.EnqueueTx(ctx, tx.tx, queue.NewJob{Queue: name, DedupeKey: "k"})
			_ = tx.rollback()
			var pgErr *pgconn.PgError
			if !errors.Is(err, queue.ErrDuplicate) || !errors.As(err, &pgErr) || pgErr.Code != "23505" {
				t.Fatalf("duplicate in a transaction: %v", err)
			}
		})
	}
}

// TestEnqueueBatchIsAtomic: a batch with a collision stores nothing, also
// when the collision is within the batch.
func TestEnqueueBatchIsAtomic(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	ctx := testCtx(t)
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "a", DedupeKey: "x"}); err != nil {
		t.Fatal(err)
	}
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: "a"}, queue.NewJob{Queue: "a", DedupeKey: "x"})
	if !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("collision with a stored job: %v", err)
	}
	_, err = q.Enqueue(ctx, queue.NewJob{Queue: "b", DedupeKey: "y"}, queue.NewJob{Queue: "b"}, queue.NewJob{Queue: "b", DedupeKey: "y"})
	if !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("collision within the batch: %v", err)
	}
	if n := countRows(t, q, ""); n != 1 {
		t.Fatalf("%d jobs stored, want 1", n)
	}
	if _, err := q.EnqueueTx(ctx, "not a transaction", queue.NewJob{Queue: "a"}); !errors.Is(err, queue.ErrUnsupportedTx) {
		t.Fatalf("EnqueueTx with a string: %v", err)
	}
}

// TestNotMigrated: on a schema never migrated, every operation of both
// strategies says so, names the fix and keeps the server's error.
func TestNotMigrated(t *testing.T) {
	t.Parallel()
	for _, s := range []Strategy{Advisory, SkipLocked} {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			q := newQueue(t, Config{Strategy: s}, false)
			ctx := testCtx(t)
			check := func(what string, err error) {
				t.Helper()
				var pgErr *pgconn.PgError
				if !errors.Is(err, queue.ErrNotMigrated) || !strings.Contains(err.Error(), "dbq migrate up") || !errors.As(err, &pgErr) {
					t.Fatalf("%s on an unmigrated schema: %v", what, err)
				}
			}
			_, err := q.Enqueue(ctx, queue.NewJob{Queue: "x"})
			check("Enqueue", err)
			_, err = q.Stats(ctx)
			check("Stats", err)
			c := newClaimer(t, q)
			_, err = c.Claim(ctx, "x", 1)
			check("Claim", err)
			if ac, ok := c.(*AdvisoryClaimer); ok {
				if got := lockedIDs(t, ac.backendPID()); len(got) != 0 {
					t.Fatalf("failed claim left locks %v", got)
				}
			}
		})
	}
}

// TestStatsCountsAdvisoryHeld: jobs an advisory claimer holds are Held,
// found in pg_locks, though their rows still say ready.
func TestStatsCountsAdvisoryHeld(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	ctx := testCtx(t)
	enqueueN(t, q, "st", 5)
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "st", Delay: time.Hour}, queue.NewJob{Queue: "other"}); err != nil {
		t.Fatal(err)
	}
	c := advisoryClaimer(t, q)
	jobs := claim(t, c, "st", 3)
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: jobs[0].Lease(), Dead: true, Error: "bad"}}); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Queue != "other" || st[1].Queue != "st" {
		t.Fatalf("stats %+v", st)
	}
	s := st[1]
	if s.Ready != 2 || s.Scheduled != 1 || s.Held != 2 || s.Dead != 1 || s.OldestReadyAge < 0 {
		t.Fatalf("stats %+v, want ready 2, scheduled 1, held 2, dead 1", s)
	}
}
