package move_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/move"
	"github.com/dbqueue/dbq/queue"
)

// endpoint is one side of a move: a fresh, migrated jobs table.
type endpoint struct {
	name dialect.Name
	dsn  string
	cfg  queue.Config
}

// fresh makes a migrated, empty jobs table of dialect d with its own
// prefix (a file of its own for SQLite), dropped at cleanup, or skips the
// test when d does not answer.
func fresh(t *testing.T, d dialect.Name) endpoint {
	t.Helper()
	ctx := context.Background()
	e := endpoint{name: d, cfg: queue.Config{Prefix: dbtest.UniqueName("mv") + "_", Logger: quiet}}
	switch d {
	case dialect.SQLite:
		e.dsn = "sqlite:" + filepath.Join(t.TempDir(), "jobs.db")
	default:
		e.dsn = dbtest.DSN(d)
	}
	p, db, err := dbq.Migrator(ctx, e.dsn, e.cfg)
	if err != nil {
		dbtest.Unreachable(t, d, err)
	}
	dbtest.MigrateUp(t, d, p, db, e.cfg.Names())
	return e
}

func (e endpoint) open(t *testing.T) *queue.Queue {
	t.Helper()
	q, err := dbq.Open(context.Background(), e.dsn, dbq.Options{Config: e.cfg})
	if err != nil {
		t.Fatalf("open %s: %v", e.name, err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

var dialects = []dialect.Name{dialect.Postgres, dialect.MySQL, dialect.SQLite}

// pairs runs fn for every ordered pair of distinct dialects, the pairs in
// parallel: each has its own tables.
func pairs(t *testing.T, fn func(t *testing.T, from, to dialect.Name)) {
	for _, from := range dialects {
		for _, to := range dialects {
			if from == to {
				continue
			}
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				t.Parallel()
				fn(t, from, to)
			})
		}
	}
}

// sequentialPairs is pairs one at a time, for a test whose workers must
// not share the machine with another pair's.
func sequentialPairs(t *testing.T, fn func(t *testing.T, from, to dialect.Name)) {
	for _, from := range dialects {
		for _, to := range dialects {
			if from != to {
				t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) { fn(t, from, to) })
			}
		}
	}
}

// fill stores n jobs across three queues in every state a move carries:
// ready, scheduled, retried (attempt and last_error set), dead, with
// priorities, empty and binary payloads and some dedupe keys. It returns
// the jobs' payloads.
func fill(t *testing.T, q *queue.Queue, n int) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	queues := []string{"alpha", "beta", "gamma"}
	var batch []queue.NewJob
	flush := func() {
		if _, err := q.Enqueue(ctx, batch...); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		batch = batch[:0]
	}
	for i := range n {
		j := queue.NewJob{
			Queue:    queues[i%3],
			Payload:  fmt.Appendf(nil, "job-%d-%x", i, rng.Uint64()),
			Priority: int16(rng.IntN(5) - 2),
		}
		switch i % 10 {
		case 1:
			j.Delay = time.Hour + time.Duration(rng.IntN(1000))*time.Second
		case 2:
			j.DedupeKey = fmt.Sprintf("key-%d", i)
		case 5:
			j.Kind = fmt.Sprintf("kind_%d", i%7)
		case 3:
			j.Payload = append(j.Payload, 0, 0xff, 0xfe, 0) // NUL and invalid UTF-8
		case 4:
			if i%100 == 4 {
				j.Payload = []byte{}
			}
		}
		batch = append(batch, j)
		if len(batch) == 1000 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	// Dead and retried jobs: some of each queue's ready jobs fail.
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, name := range queues {
		jobs, err := c.Claim(ctx, name, max(n/60, 2))
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		var rp []queue.RetryParams
		for i, j := range jobs {
			rp = append(rp, queue.RetryParams{Lease: j.Lease(), Error: fmt.Sprintf("boom %d: ünïcode", i), Dead: i%2 == 0})
		}
		if err := c.Retry(ctx, rp); err != nil {
			t.Fatalf("retry: %v", err)
		}
	}
}

// row is what a move must keep of a job.
type row struct {
	queue, kind, payload, lastErr, key, state string
	priority                                  int16
	runAt, created                            int64
	attempt, maxAttempts                      int
}

// snapshot reads every exportable job of q (no held ones) through the
// Mover, rolling each batch back. Synthesized move keys are left out.
func snapshot(t *testing.T, q *queue.Queue) []row {
	t.Helper()
	ctx := context.Background()
	m := q.Driver().(queue.Mover)
	f := queue.ExportFilter{Ready: true, Scheduled: true, Dead: true, Limit: 5000}
	var out []row
	for {
		b, err := m.Export(ctx, f)
		if err != nil {
			t.Fatalf("snapshot export: %v", err)
		}
		for _, j := range b.Jobs() {
			key := j.DedupeKey
			if strings.HasPrefix(key, "dbq-move:") {
				key = ""
			}
			out = append(out, row{j.Queue, j.Kind, string(j.Payload), j.LastError, key, string(j.State), j.Priority,
				j.RunAt.UnixMicro(), j.CreatedAt.UnixMicro(), j.Attempt, j.MaxAttempts})
		}
		f.AfterID = b.Cursor()
		_ = b.Rollback()
		if f.AfterID == 0 {
			break
		}
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

func sameRows(t *testing.T, what string, want, got []row) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d jobs, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: job %d differs:\n got  %+v\n want %+v", what, i, got[i], want[i])
		}
	}
}

var quiet = slog.New(slog.DiscardHandler)

// moveJobs is how many jobs TestMoveAllStates moves per pair: DBQ_MOVE_JOBS
// when set, else 10,000 (2,000 with -short). At least 100, so that every
// state and queue fill makes has jobs.
func moveJobs(t *testing.T) int {
	env := os.Getenv("DBQ_MOVE_JOBS")
	if env == "" {
		if testing.Short() {
			return 2_000
		}
		return 10_000
	}
	n, err := strconv.Atoi(env)
	if err != nil || n < 100 {
		t.Fatalf("DBQ_MOVE_JOBS=%q: want a whole number of at least 100", env)
	}
	return n
}

// TestMoveAllStates: 10,000 jobs (DBQ_MOVE_JOBS, 50,000 in make
// test-move-large) in three queues and every state move between each pair
// of dialects, arrive identical, and leave the source empty; held jobs
// stay with their holder and a rerun moves them once released.
func TestMoveAllStates(t *testing.T) {
	n := moveJobs(t)
	pairs(t, func(t *testing.T, from, to dialect.Name) {
		ctx := context.Background()
		src, dst := fresh(t, from).open(t), fresh(t, to).open(t)
		fill(t, src, n)
		// Two jobs held by a worker during the move.
		c, err := src.NewClaimer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		held, err := c.Claim(ctx, "beta", 2)
		if err != nil || len(held) != 2 {
			t.Fatalf("claim held: %v, %v", held, err)
		}
		want := snapshot(t, src)
		if len(want) != n-2 {
			t.Fatalf("source snapshot has %d jobs, want %d", len(want), n-2)
		}

		rep, err := move.Run(ctx, src, dst, move.Options{Batch: 1000, Logger: quiet})
		if err != nil {
			t.Fatalf("move: %v", err)
		}
		t.Logf("%s -> %s: %d jobs in %v (%.0f jobs/s), %d passes", from, to, rep.Moved, rep.Elapsed, rep.JobsPerSecond, rep.Passes)
		if rep.Moved != int64(n-2) || rep.Found != 0 || rep.Held != 2 || !rep.Verified() {
			t.Fatalf("report %+v: want %d moved, 2 held, verified", rep, n-2)
		}
		if rep.Source.Checksum != rep.Destination.Checksum || rep.Source.Dead == 0 || rep.Source.Scheduled == 0 ||
			rep.Source.Dead != rep.Destination.Dead || rep.Source.Scheduled != rep.Destination.Scheduled {
			t.Fatalf("sides differ or lack states: %+v / %+v", rep.Source, rep.Destination)
		}
		sameRows(t, "destination after move", want, snapshot(t, dst))

		// The held jobs come back (released) and a rerun moves them.
		if err := c.Release(ctx, queue.Leases(held)); err != nil {
			t.Fatal(err)
		}
		rep, err = move.Run(ctx, src, dst, move.Options{Logger: quiet})
		if err != nil || rep.Moved != 2 || rep.Left != 0 || rep.Held != 0 {
			t.Fatalf("second move: %+v, %v; want 2 moved and nothing left", rep, err)
		}
		if got := snapshot(t, src); len(got) != 0 {
			t.Fatalf("source still holds %d jobs", len(got))
		}
		// A third run has nothing to do.
		rep, err = move.Run(ctx, src, dst, move.Options{Logger: quiet})
		if err != nil || rep.Moved+rep.Found != 0 {
			t.Fatalf("third move: %+v, %v; want nothing moved", rep, err)
		}
	})
}

// TestMoveFindsEarlierCopies: jobs an interrupted move stored on the
// destination but did not delete on the source are found by their keys on
// the rerun, stored once, and deleted on the source.
func TestMoveFindsEarlierCopies(t *testing.T) {
	pairs(t, func(t *testing.T, from, to dialect.Name) {
		ctx := context.Background()
		src, dst := fresh(t, from).open(t), fresh(t, to).open(t)
		fill(t, src, 600)
		want := snapshot(t, src)
		_, err := move.RunFailingCommits(ctx, src, dst, move.Options{Batch: 100, Logger: quiet}, 1)
		if err == nil || !strings.Contains(err.Error(), "killed between the commits") {
			t.Fatalf("interrupted run: %v, want the injected failure", err)
		}
		if got := len(snapshot(t, dst)); got != 100 {
			t.Fatalf("destination after the interrupted run holds %d jobs, want 100", got)
		}
		if got := len(snapshot(t, src)); got != 600 {
			t.Fatalf("source after the interrupted run holds %d jobs, want 600", got)
		}
		rep, err := move.Run(ctx, src, dst, move.Options{Batch: 100, Logger: quiet})
		if err != nil {
			t.Fatalf("rerun: %v", err)
		}
		if rep.Found != 100 || rep.Moved != 500 || !rep.Verified() {
			t.Fatalf("rerun report %+v: want 100 found, 500 moved, verified", rep)
		}
		sameRows(t, "destination", want, snapshot(t, dst))
		if got := len(snapshot(t, src)); got != 0 {
			t.Fatalf("source still holds %d jobs", got)
		}
	})
}

// TestMoveConflictStaysOnSource: a destination job of its own that has a
// source job's dedupe key and other contents is never overwritten; the
// source job stays, and the run reports the conflict as a mismatch.
func TestMoveConflictStaysOnSource(t *testing.T) {
	ctx := context.Background()
	from, to := dialect.SQLite, dialect.Postgres
	src, dst := fresh(t, from).open(t), fresh(t, to).open(t)
	if _, err := src.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: []byte("source"), DedupeKey: "k"},
		queue.NewJob{Queue: "q", Payload: []byte("other")}); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: []byte("destination"), DedupeKey: "k"}); err != nil {
		t.Fatal(err)
	}
	rep, err := move.Run(ctx, src, dst, move.Options{Logger: quiet})
	if !errors.Is(err, move.ErrMismatch) || rep == nil || rep.Conflicts != 1 || rep.Moved != 1 || rep.Left != 1 {
		t.Fatalf("move = %+v, %v; want ErrMismatch, 1 conflict, 1 moved, 1 left", rep, err)
	}
	left := snapshot(t, src)
	if len(left) != 1 || left[0].payload != "source" {
		t.Fatalf("source holds %+v, want the conflicting job", left)
	}
	got := snapshot(t, dst)
	if len(got) != 2 || got[0].payload != "destination" || got[1].payload != "other" {
		t.Fatalf("destination holds %+v, want its own job and the moved one", got)
	}
}

// TestMoveRefusesBadInput: each bad input is a typed error before anything
// moves.
func TestMoveRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	a := fresh(t, dialect.SQLite)
	src := a.open(t)
	if _, err := src.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, dst *queue.Queue, opts move.Options, want error) {
		t.Helper()
		opts.Logger = quiet
		rep, err := move.Run(ctx, src, dst, opts)
		if !errors.Is(err, want) || rep != nil {
			t.Fatalf("%s: %+v, %v; want %v", what, rep, err, want)
		}
		if got := len(snapshot(t, src)); got != 1 {
			t.Fatalf("%s: source holds %d jobs, want 1", what, got)
		}
	}
	check("same table", a.open(t), move.Options{}, move.ErrSameDatabase)

	// Not migrated: a prefix nothing created.
	nm := endpoint{name: dialect.SQLite, dsn: "sqlite:" + filepath.Join(t.TempDir(), "empty.db"), cfg: queue.Config{Logger: quiet}}
	check("destination not migrated", nm.open(t), move.Options{}, move.ErrDestinationNotMigrated)
	check("bad batch", fresh(t, dialect.SQLite).open(t), move.Options{Batch: move.MaxBatch + 1}, queue.ErrInvalidConfig)
	check("bad queue", fresh(t, dialect.SQLite).open(t), move.Options{Queues: []string{"no;queue"}}, queue.ErrInvalidQueue)

	// A payload larger than MariaDB's max_allowed_packet (16 MiB here and by
	// default) lets through.
	big := fresh(t, dialect.SQLite)
	big.cfg.MaxPayloadBytes = 64 << 20
	bigQ := big.open(t)
	if _, err := bigQ.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: make([]byte, 17<<20)}); err != nil {
		t.Fatal(err)
	}
	my := fresh(t, dialect.MySQL).open(t)
	rep, err := move.Run(ctx, bigQ, my, move.Options{Logger: quiet})
	if !errors.Is(err, move.ErrTooLarge) || rep != nil {
		t.Fatalf("17 MiB payload to mysql: %+v, %v; want ErrTooLarge", rep, err)
	}
	if got := len(snapshot(t, bigQ)); got != 1 {
		t.Fatalf("source holds %d jobs, want 1", got)
	}
}

// TestMain runs the child of TestMoveKilledAndRerun when DBQ_MOVE_CHILD
// names its endpoints, and the tests otherwise.
func TestMain(m *testing.M) {
	if env := os.Getenv("DBQ_MOVE_CHILD"); env != "" {
		if err := moveChild(env); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// moveChild is the child of TestMoveKilledAndRerun: a move in its own
// process, in small batches so that a kill is likely to land mid-move,
// killed by the parent at random moments.
func moveChild(env string) error {
	f := strings.Split(env, "\x1f")
	ctx := context.Background()
	open := func(d, dsn, prefix string) (*queue.Queue, error) {
		q, err := dbq.Open(ctx, dsn, dbq.Options{Config: queue.Config{Prefix: prefix, Logger: quiet}})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", d, err)
		}
		return q, nil
	}
	src, err := open(f[0], f[1], f[2])
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := open(f[3], f[4], f[5])
	if err != nil {
		return err
	}
	defer dst.Close()
	_, err = move.Run(ctx, src, dst, move.Options{Batch: 10, Logger: quiet})
	return err
}

// TestMoveKilledAndRerun: a move killed with SIGKILL at random moments,
// five times, then run to the end, leaves the destination holding exactly
// the source's jobs and the source empty.
func TestMoveKilledAndRerun(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	pairs(t, func(t *testing.T, from, to dialect.Name) {
		ctx := context.Background()
		a, b := fresh(t, from), fresh(t, to)
		src, dst := a.open(t), b.open(t)
		fill(t, src, n)
		want := snapshot(t, src)
		env := strings.Join([]string{string(a.name), a.dsn, a.cfg.Prefix, string(b.name), b.dsn, b.cfg.Prefix}, "\x1f")
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
		kills := 0
		for kills < 5 {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "DBQ_MOVE_CHILD="+env)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("child ended on its own: %v", err)
				}
				t.Logf("child finished before kill %d", kills+1)
			case <-time.After(time.Duration(50+rng.IntN(250)) * time.Millisecond):
				_ = cmd.Process.Kill()
				if err := <-done; err == nil {
					t.Logf("child finished as kill %d came", kills+1)
				}
				kills++
			}
			if len(snapshot(t, src)) == 0 {
				break
			}
		}
		if !testing.Short() && kills < 5 {
			t.Fatalf("only %d kills before the source was empty; want 5", kills)
		}
		moved := len(snapshot(t, dst))
		rep, err := move.Run(ctx, src, dst, move.Options{Batch: 100, Logger: quiet})
		if err != nil {
			t.Fatalf("final run: %v", err)
		}
		t.Logf("%d kills; %d jobs on the destination before the final run, which moved %d and found %d", kills, moved, rep.Moved, rep.Found)
		sameRows(t, "destination after kills and rerun", want, snapshot(t, dst))
		if got := len(snapshot(t, src)); got != 0 {
			t.Fatalf("source still holds %d jobs", got)
		}
	})
}

// TestMoveWhileLive: producers enqueue on the source and workers drain
// both sides while a following move runs; once the producers stop and the
// move ends, every job produced ran exactly once, on one side or the other.
func TestMoveWhileLive(t *testing.T) {
	sequentialPairs(t, func(t *testing.T, from, to dialect.Name) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src, dst := fresh(t, from).open(t), fresh(t, to).open(t)
		var mu sync.Mutex
		runs := map[string]int{}
		handler := func(_ context.Context, j *queue.Job) error {
			time.Sleep(time.Millisecond) // slower than the producer, so the move has work
			mu.Lock()
			runs[string(j.Payload)]++
			mu.Unlock()
			return nil
		}
		var workers sync.WaitGroup
		for _, q := range []*queue.Queue{src, dst} {
			w, err := queue.NewWorker(q, handler, queue.WorkerConfig{Queue: "live", Concurrency: 2,
				PollInterval: 20 * time.Millisecond, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			workers.Add(1)
			go func() { defer workers.Done(); _ = w.Run(ctx) }()
		}
		// The move follows the source while the producer runs.
		moveDone := make(chan error, 1)
		var rep *move.Report
		go func() {
			var err error
			rep, err = move.Run(ctx, src, dst, move.Options{Follow: true, PollInterval: 20 * time.Millisecond, Batch: 200, Logger: quiet})
			moveDone <- err
		}()
		produced := 0
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
			var batch []queue.NewJob
			for range 20 {
				batch = append(batch, queue.NewJob{Queue: "live", Payload: fmt.Appendf(nil, "live-%d", produced)})
				produced++
			}
			if _, err := src.Enqueue(ctx, batch...); err != nil {
				t.Fatalf("produce: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case err := <-moveDone:
			if err != nil {
				t.Fatalf("move: %v", err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the following move did not end after the producer stopped")
		}
		// The move may have found the source empty between two of the
		// producer's batches and ended: as in a cutover, run it again once
		// producers have stopped.
		last, err := move.Run(ctx, src, dst, move.Options{Follow: true, PollInterval: 20 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatalf("last move: %v", err)
		}
		waitDrained(t, src)
		waitDrained(t, dst)
		cancel()
		workers.Wait()
		mu.Lock()
		defer mu.Unlock()
		for i := range produced {
			if c := runs[fmt.Sprintf("live-%d", i)]; c != 1 {
				t.Fatalf("job live-%d ran %d times, want 1", i, c)
			}
		}
		if len(runs) != produced {
			t.Fatalf("%d distinct jobs ran, %d produced", len(runs), produced)
		}
		carried := rep.Moved + rep.Found + last.Moved + last.Found
		t.Logf("%d produced; the moves carried %d, the rest ran on the source", produced, carried)
		if carried == 0 || carried == int64(produced) {
			t.Fatalf("the moves carried %d of %d jobs: want some moved, some run on the source", carried, produced)
		}
	})
}

// waitDrained waits (bounded) until q stores no job.
func waitDrained(t *testing.T, q *queue.Queue) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		stats, err := q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var left int64
		for _, s := range stats {
			left += s.Ready + s.Scheduled + s.Held + s.Dead
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs left after a minute", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMoveKeyRaceIsAConflict: a producer on the destination that commits a
// job with a moved job's key while the import runs keeps its job; the
// source job is not counted as moved and stays where it is.
func TestMoveKeyRaceIsAConflict(t *testing.T) {
	ctx := context.Background()
	to := fresh(t, dialect.MySQL)
	src, dst := fresh(t, dialect.SQLite).open(t), to.open(t)
	if _, err := src.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: []byte("source"), DedupeKey: "k"}); err != nil {
		t.Fatal(err)
	}
	_, db, err := dbq.Migrator(ctx, to.dsn, to.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := dst.EnqueueTx(ctx, tx, queue.NewJob{Queue: "q", Payload: []byte("destination"), DedupeKey: "k"}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		rep *move.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := move.Run(ctx, src, dst, move.Options{Logger: quiet})
		done <- result{rep, err}
	}()
	time.Sleep(300 * time.Millisecond) // the import's insert now waits on the producer's key
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !errors.Is(r.err, move.ErrMismatch) || r.rep.Conflicts != 1 || r.rep.Moved != 0 {
		t.Fatalf("move = %+v, %v; want ErrMismatch with 1 conflict and nothing moved", r.rep, r.err)
	}
	if left := snapshot(t, src); len(left) != 1 || left[0].payload != "source" {
		t.Fatalf("source holds %+v, want its job", left)
	}
	if got := snapshot(t, dst); len(got) != 1 || got[0].payload != "destination" {
		t.Fatalf("destination holds %+v, want only the producer's job", got)
	}
}

// TestMoveRejectsKeysTheDestinationCannotStore: a dedupe key that is not
// UTF-8 text (legal in SQLite and MySQL) stays on the source when the
// destination is PostgreSQL; the rest of the batch moves.
func TestMoveRejectsKeysTheDestinationCannotStore(t *testing.T) {
	ctx := context.Background()
	src, dst := fresh(t, dialect.SQLite).open(t), fresh(t, dialect.Postgres).open(t)
	if _, err := src.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: []byte("bad key"), DedupeKey: "k\xff\x00"},
		queue.NewJob{Queue: "q", Payload: []byte("fine")}); err != nil {
		t.Fatal(err)
	}
	rep, err := move.Run(ctx, src, dst, move.Options{Logger: quiet})
	if !errors.Is(err, move.ErrMismatch) || rep.Rejected != 1 || rep.Moved != 1 || rep.Left != 1 {
		t.Fatalf("move = %+v, %v; want ErrMismatch, 1 rejected, 1 moved, 1 left", rep, err)
	}
	if left := snapshot(t, src); len(left) != 1 || left[0].payload != "bad key" {
		t.Fatalf("source holds %+v, want the job with the bad key", left)
	}
}

// TestMoveVerifiesTheDestination: a payload changed on the destination
// between two batches of a move, through another connection, fails the
// run's verification with ErrMismatch naming the job and the field; the
// sides' checksums differ.
func TestMoveVerifiesTheDestination(t *testing.T) {
	for _, p := range [][2]dialect.Name{
		{dialect.SQLite, dialect.Postgres}, {dialect.Postgres, dialect.MySQL}, {dialect.MySQL, dialect.SQLite},
	} {
		from, to := p[0], p[1]
		t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := fresh(t, to)
			src, dst := fresh(t, from).open(t), b.open(t)
			fill(t, src, 300)
			_, db, err := dbq.Migrator(ctx, b.dsn, b.cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			n := b.cfg.Names()
			table := n.Qualified(to, n.Jobs())
			arg := "?"
			if to == dialect.Postgres {
				arg = "$1"
			}
			var corrupted int64
			corrupt := func(move.Progress) {
				if corrupted != 0 {
					return
				}
				if err := db.QueryRowContext(ctx, "SELECT min(id) FROM "+table).Scan(&corrupted); err != nil {
					t.Errorf("find a moved job: %v", err)
					return
				}
				if _, err := db.ExecContext(ctx, "UPDATE "+table+" SET payload = "+arg+" WHERE id = "+fmt.Sprint(corrupted),
					[]byte("corrupted")); err != nil {
					t.Errorf("corrupt job %d: %v", corrupted, err)
				}
			}
			rep, err := move.Run(ctx, src, dst, move.Options{Batch: 50, Progress: corrupt, Logger: quiet})
			if corrupted == 0 {
				t.Fatal("the move never reached the hook between batches")
			}
			want := fmt.Sprintf("is destination job %d: its payload differ", corrupted)
			if !errors.Is(err, move.ErrMismatch) || !strings.Contains(err.Error(), want) {
				t.Fatalf("move = %v; want ErrMismatch saying %q", err, want)
			}
			if rep.Verified() || rep.Mismatched != 1 || rep.Moved != 300 || rep.Left != 0 ||
				rep.Source.Jobs != 300 || rep.Destination.Jobs != 300 || rep.Source.Checksum == rep.Destination.Checksum {
				t.Fatalf("report %+v: want 300 moved, 1 mismatched, unverified, checksums that differ", rep)
			}
		})
	}
}

// TestMoveVerifiesWorkedJobs: moved jobs that a destination worker
// retries, holds or completes between two batches are what workers do, not
// mismatches: the run verifies, counting them as worked and gone.
func TestMoveVerifiesWorkedJobs(t *testing.T) {
	ctx := context.Background()
	src, dst := fresh(t, dialect.MySQL).open(t), fresh(t, dialect.Postgres).open(t)
	fill(t, src, 300)
	c, err := dst.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var work func(move.Progress)
	work = func(move.Progress) {
		work = func(move.Progress) {}
		jobs, err := c.Claim(ctx, "alpha", 3)
		if err != nil || len(jobs) != 3 {
			t.Errorf("claim on the destination: %v, %v", jobs, err)
			return
		}
		if err := c.Retry(ctx, []queue.RetryParams{{Lease: jobs[0].Lease(), Error: "again", Delay: time.Hour}}); err != nil {
			t.Error(err)
		}
		if err := c.Complete(ctx, []queue.Lease{jobs[1].Lease()}); err != nil {
			t.Error(err)
		}
		// jobs[2] stays held to the end.
	}
	rep, err := move.Run(ctx, src, dst, move.Options{Batch: 50, Progress: func(p move.Progress) { work(p) }, Logger: quiet})
	if err != nil || !rep.Verified() {
		t.Fatalf("move = %+v, %v; want verified", rep, err)
	}
	if rep.Moved != 300 || rep.Gone != 1 || rep.Worked < 1 || rep.Mismatched != 0 || rep.Source.Jobs != rep.Destination.Jobs+1 {
		t.Fatalf("report %+v: want 300 moved, 1 gone, the retried job worked, none mismatched", rep)
	}
}

// TestChecksumCoversEveryField: changing any field a move keeps changes a
// job's Checksum; the id and dedupe key, which a move changes, do not.
func TestChecksumCoversEveryField(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	base := queue.Job{ID: 1, Queue: "q", Payload: []byte("p"), Priority: 1, RunAt: at, Attempt: 1, MaxAttempts: 5,
		State: queue.StateReady, LastError: "e", DedupeKey: "k", CreatedAt: at}
	sum := move.Checksum(&base)
	for name, change := range map[string]func(j *queue.Job){
		"queue":         func(j *queue.Job) { j.Queue = "r" },
		"kind":          func(j *queue.Job) { j.Kind = "x" },
		"payload":       func(j *queue.Job) { j.Payload = []byte("P") },
		"payload bytes": func(j *queue.Job) { j.Payload = []byte("p\x00") },
		"priority":      func(j *queue.Job) { j.Priority = 2 },
		"run_at":        func(j *queue.Job) { j.RunAt = at.Add(time.Microsecond) },
		"attempt":       func(j *queue.Job) { j.Attempt = 2 },
		"max_attempts":  func(j *queue.Job) { j.MaxAttempts = 6 },
		"state":         func(j *queue.Job) { j.State = queue.StateDead },
		"last_error":    func(j *queue.Job) { j.LastError = "f" },
		"created_at":    func(j *queue.Job) { j.CreatedAt = at.Add(time.Microsecond) },
	} {
		j := base
		change(&j)
		if move.Checksum(&j) == sum {
			t.Errorf("changing %s leaves the checksum %x", name, sum)
		}
	}
	j := base
	j.ID, j.DedupeKey = 2, "dbq-move:x:1"
	if move.Checksum(&j) != sum {
		t.Error("the id or dedupe key changes the checksum")
	}
}
