package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// BadInputGetsTypedErrors: every bad input of contract point 5 gets its
// typed error and changes nothing.
func testBadInput(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{MaxPayloadBytes: 100})
	ctx := ctxFor(t)
	enqueueN(t, q, "bad", 3)
	c := s.claimer(t, q)
	if got := claim(t, c, "bad", 3); len(got) != 3 {
		t.Fatalf("claimed %d of 3", len(got))
	}

	for _, n := range []int{0, -1} {
		_, err := c.Claim(ctx, "bad", n)
		wantErr(t, "Claim with n <= 0", err, queue.ErrInvalidLimit)
	}
	for _, name := range []string{"", strings.Repeat("q", 65), "a b", "q'; DROP TABLE x; --", "ü", "q\x00"} {
		_, err := c.Claim(ctx, name, 1)
		wantErr(t, "Claim with queue "+name, err, queue.ErrInvalidQueue)
		_, err = q.Enqueue(ctx, queue.NewJob{Queue: name})
		wantErr(t, "Enqueue with queue "+name, err, queue.ErrInvalidQueue)
	}
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: "bad", Payload: make([]byte, 101)})
	wantErr(t, "Enqueue over the payload limit", err, queue.ErrPayloadTooLarge)
	// A batch with one bad job stores none of it.
	_, err = q.Enqueue(ctx,
		queue.NewJob{Queue: "bad", Payload: []byte("fine")},
		queue.NewJob{Queue: "bad", Payload: make([]byte, 101)},
	)
	wantErr(t, "batch with an oversized job", err, queue.ErrPayloadTooLarge)
	_, err = q.Enqueue(ctx, queue.NewJob{Queue: "bad", MaxAttempts: -1})
	wantErr(t, "negative MaxAttempts", err, queue.ErrInvalidJob)
	wantCounts(t, q, "bad", 0, 0, 3, 0)

	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = c.Claim(ctx, "bad", 1)
	wantErr(t, "Claim on a closed claimer", err, queue.ErrClosed)
	// Closing gave the jobs back.
	if got := s.drainAll(t, q, "bad"); len(got) != 3 {
		t.Fatalf("after Close %d jobs claimable, want 3", len(got))
	}
	if err := q.Close(); err != nil {
		t.Fatalf("Queue.Close: %v", err)
	}
	_, err = q.Enqueue(ctx, queue.NewJob{Queue: "bad"})
	wantErr(t, "Enqueue on a closed queue", err, queue.ErrClosed)
	_, err = q.NewClaimer(ctx)
	wantErr(t, "NewClaimer on a closed queue", err, queue.ErrClosed)
}

// DuplicateDedupeKey: a second job with the same queue and dedupe key fails
// with ErrDuplicate and the whole batch is stored or none of it; another
// queue may reuse the key, and a completed job frees it.
func testDedupe(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	ctx := ctxFor(t)
	enqueue(t, q, queue.NewJob{Queue: "dd", DedupeKey: "k1"})
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: "dd", DedupeKey: "k1"})
	wantErr(t, "duplicate key", err, queue.ErrDuplicate)
	_, err = q.Enqueue(ctx, queue.NewJob{Queue: "dd", DedupeKey: "k2"}, queue.NewJob{Queue: "dd", DedupeKey: "k2"})
	wantErr(t, "duplicate within a batch", err, queue.ErrDuplicate)
	wantCounts(t, q, "dd", 1, 0, 0, 0)
	enqueue(t, q, queue.NewJob{Queue: "dd2", DedupeKey: "k1"}, queue.NewJob{Queue: "dd", DedupeKey: "k2"})
	c := s.claimer(t, q)
	jobs := claim(t, c, "dd", 10)
	if len(jobs) != 2 || jobs[0].DedupeKey == "" {
		t.Fatalf("claimed %d jobs, dedupe key %q", len(jobs), jobs[0].DedupeKey)
	}
	// Held jobs still hold their keys.
	_, err = q.Enqueue(ctx, queue.NewJob{Queue: "dd", DedupeKey: "k1"})
	wantErr(t, "duplicate of a held job", err, queue.ErrDuplicate)
	complete(t, c, jobs)
	enqueue(t, q, queue.NewJob{Queue: "dd", DedupeKey: "k1"})
}

// NotMigrated: on tables that were never created every operation says so.
func testNotMigrated(t *testing.T, s *suite) {
	q := s.h.NewQueue(t, queue.Config{}, false)
	ctx := ctxFor(t)
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: "x"})
	wantErr(t, "Enqueue", err, queue.ErrNotMigrated)
	if !strings.Contains(err.Error(), "dbq migrate up") {
		t.Errorf("error %q does not name the command that fixes it", err)
	}
	_, err = q.Stats(ctx)
	wantErr(t, "Stats", err, queue.ErrNotMigrated)
	c, err := q.NewClaimer(ctx)
	if err == nil {
		defer c.Close(context.Background())
		_, err = c.Claim(ctx, "x", 1)
	}
	wantErr(t, "Claim", err, queue.ErrNotMigrated)
}

// MigrateUpDownUp: the migrations apply, roll back to nothing and apply
// again, and the queue works after.
func testMigrations(t *testing.T, s *suite) {
	if s.h.Migrator == nil {
		if s.h.Dialect != "memory" {
			t.Fatalf("the %s harness has no Migrator: every dialect must test its migrations", s.h.Dialect)
		}
		t.Skip("the in-memory test driver has no migrations")
	}
	q := s.h.NewQueue(t, queue.Config{}, false)
	p := s.h.Migrator(t, q)
	ctx := ctxFor(t)
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	enqueueN(t, q, "mig", 1)
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: "mig"})
	wantErr(t, "Enqueue after down", err, queue.ErrNotMigrated)
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil || v < 1 {
		t.Fatalf("version %d, %v", v, err)
	}
	enqueueN(t, q, "mig", 2)
	if got := s.drainAll(t, q, "mig"); len(got) != 2 {
		t.Fatalf("after up-down-up drained %d jobs, want 2", len(got))
	}
	if _, err := p.Up(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("up when current: %v", err)
	}
}
