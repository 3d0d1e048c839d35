package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgxpool"
)

// raceRound is one round of the post-check race: claimers claim→complete
// loops over total jobs in batches of batch, until every job is deleted.
type raceRound struct {
	claims  map[int64]int // how often each job was handed out
	dropped int64         // post-check drops, summed over the claimers
}

// runRace enqueues total jobs and drains them with claimers advisory
// claimers. It returns how often each job was handed out.
func runRace(t *testing.T, q *queue.Queue, name string, total, claimers, batch int) raceRound {
	t.Helper()
	enqueueN(t, q, name, total)
	ctx := testCtx(t)
	var (
		mu      sync.Mutex
		claims  = make(map[int64]int, total)
		deleted atomic.Int64
		dropped atomic.Int64
		wg      sync.WaitGroup
		errc    = make(chan error, claimers)
	)
	deadline := time.Now().Add(30 * time.Second)
	for range claimers {
		c := advisoryClaimer(t, q)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { dropped.Add(c.PostCheckDropped()) }()
			for deleted.Load() < int64(total) {
				if time.Now().After(deadline) {
					errc <- errors.New("round did not finish in 30s")
					return
				}
				jobs, err := c.Claim(ctx, name, batch)
				if err != nil {
					errc <- err
					return
				}
				if len(jobs) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				for _, j := range jobs {
					claims[j.ID]++
				}
				mu.Unlock()
				// A job handed out twice is deleted once; the second
				// Complete finds it gone and reports its lease lost.
				err = c.Complete(ctx, leases(jobs))
				var lost *queue.LeaseLostError
				switch {
				case err == nil:
					deleted.Add(int64(len(jobs)))
				case errors.As(err, &lost):
					deleted.Add(int64(len(jobs) - len(lost.IDs)))
				default:
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if n := countRows(t, q, ""); n != 0 {
		t.Fatalf("%d jobs left after the round", n)
	}
	return raceRound{claims: claims, dropped: dropped.Load()}
}

func (r raceRound) duplicates() (jobs, extra int) {
	for _, n := range r.claims {
		if n > 1 {
			jobs++
			extra += n - 1
		}
	}
	return jobs, extra
}

// TestPostCheckRace makes the race the post-check exists for happen: a
// claimer whose claim statement's snapshot predates another claimer's
// delete, and whose lock comes after that claimer's unlock, locks a job that
// is already done. With the post-check off such jobs are handed out twice;
// with it on they are caught (PostCheckDropped > 0) and never handed out.
func TestPostCheckRace(t *testing.T) {
	t.Parallel()
	const (
		total     = 5000
		claimers  = 8
		batch     = 100
		maxRounds = 5
	)
	t.Run("Off", func(t *testing.T) {
		q := newQueue(t, Config{}, true)
		driverOf(t, q).noPostCheck = true
		for round := 1; ; round++ {
			r := runRace(t, q, "race", total, claimers, batch)
			jobs, extra := r.duplicates()
			t.Logf("post-check off, round %d: %d of %d jobs handed out twice or more (%d extra runs)", round, jobs, total, extra)
			if jobs > 0 {
				return
			}
			if round == maxRounds {
				t.Fatalf("no job was handed out twice in %d rounds: the race did not happen, so the test proves nothing", maxRounds)
			}
		}
	})
	on := func(t *testing.T, q *queue.Queue, oneTx bool) {
		c := advisoryClaimer(t, q)
		claim(t, c, "probe", 1) // connects
		if c.oneTx != oneTx {
			t.Fatalf("walk and post-check in one transaction: %v, want %v", c.oneTx, oneTx)
		}
		var dropped int64
		for round := 1; ; round++ {
			r := runRace(t, q, "race", total, claimers, batch)
			jobs, _ := r.duplicates()
			if jobs > 0 || len(r.claims) != total {
				t.Fatalf("post-check on, round %d: %d jobs handed out twice, %d of %d handed out", round, jobs, len(r.claims), total)
			}
			dropped += r.dropped
			t.Logf("post-check on, round %d: 0 duplicates, %d jobs dropped by the post-check", round, r.dropped)
			if dropped > 0 {
				return
			}
			if round == maxRounds {
				t.Fatalf("the post-check dropped nothing in %d rounds: the race did not happen, so the test proves nothing", maxRounds)
			}
		}
	}
	t.Run("On", func(t *testing.T) { on(t, newQueue(t, Config{}, true), true) })
	// Sessions whose transactions default to REPEATABLE READ: the
	// post-check runs in a transaction of its own.
	t.Run("OnRepeatableRead", func(t *testing.T) {
		ctx := testCtx(t)
		pcfg, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
		if err != nil {
			t.Fatal(err)
		}
		pcfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
		pcfg.MaxConns = 16
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		var cfg Config
		cfg.Schema = newSchema(t, testPool(t))
		q, err := New(pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Close() })
		if err := Migrate(ctx, pool, cfg); err != nil {
			t.Fatal(err)
		}
		on(t, q, false)
	})
}

// TestPostCheckKeepsFreshRow: a job retried by one claimer and locked by
// another whose claim snapshot is older is handed out with the row as the
// post-check reads it (attempt and error of the retry), not as the claim
// saw it.
func TestPostCheckReadsFresh(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	enqueueN(t, q, "fresh", 1)
	a := advisoryClaimer(t, q)
	jobs := claim(t, a, "fresh", 1)
	if err := a.Retry(context.Background(), []queue.RetryParams{{Lease: jobs[0].Lease(), Error: "first"}}); err != nil {
		t.Fatal(err)
	}
	b := advisoryClaimer(t, q)
	again := claim(t, b, "fresh", 1)
	if len(again) != 1 || again[0].Attempt != 1 || again[0].LastError != "first" {
		t.Fatalf("re-claim after retry: %+v", again)
	}
}
