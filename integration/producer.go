package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// ProducerInsertsWithPlainSQL: the jobs table is a public contract. A
// producer in another language inserts with plain SQL — only (queue,
// payload), or also priority, run_at, max_attempts and dedupe_key — the
// defaults fill the rest (times on the database clock, in UTC), and a
// Worker drains what it inserted, in claim order, with the values it set.
func testProducer(t *testing.T, s *suite) {
	if s.h.InsertRaw == nil {
		if s.h.Dialect != "memory" {
			t.Fatalf("the %s harness has no InsertRaw: every dialect must take jobs from plain SQL", s.h.Dialect)
		}
		t.Skip("the in-memory test driver has no SQL")
	}
	q := s.queue(t, queue.Config{})
	const name = "producer"
	before := time.Now()
	s.h.InsertRaw(t, q, map[string]any{"queue": name, "payload": []byte("minimal")})
	s.h.InsertRaw(t, q, map[string]any{
		"queue": name, "payload": []byte("full"), "priority": -5,
		"run_at": time.Now().Add(-time.Minute).UTC(), "max_attempts": 3, "dedupe_key": "k1",
	})
	s.h.InsertRaw(t, q, map[string]any{"queue": name, "payload": []byte("later"), "run_at": time.Now().Add(time.Hour).UTC()})
	after := time.Now()
	wantCounts(t, q, name, 2, 1, 0, 0)

	// The key the producer set is taken, as if Enqueue had set it.
	_, err := q.Enqueue(ctxFor(t), queue.NewJob{Queue: name, DedupeKey: "k1"})
	wantErr(t, "Enqueue of the dedupe key a producer inserted", err, queue.ErrDuplicate)

	var (
		mu  sync.Mutex
		got []*queue.Job
	)
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, j)
		return nil
	}, queue.WorkerConfig{Queue: name, Concurrency: 1, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("the Worker ran %d jobs a producer inserted, want the 2 ready ones", len(got))
	}
	full, minimal := got[0], got[1]
	if string(full.Payload) != "full" || string(minimal.Payload) != "minimal" {
		t.Fatalf("ran %q then %q, want full (priority -5) then minimal", full.Payload, minimal.Payload)
	}
	if full.Priority != -5 || full.MaxAttempts != 3 || full.DedupeKey != "k1" || full.Attempt != 0 {
		t.Errorf("full job: priority %d, max_attempts %d, dedupe_key %q, attempt %d; want -5, 3, k1, 0",
			full.Priority, full.MaxAttempts, full.DedupeKey, full.Attempt)
	}
	if d := full.RunAt.Sub(before.Add(-time.Minute)); d < -2*time.Second || d > after.Sub(before)+2*time.Second {
		t.Errorf("full job run_at %v, want the producer's %v", full.RunAt, before.Add(-time.Minute))
	}
	if minimal.Priority != 0 || minimal.MaxAttempts <= 0 || minimal.DedupeKey != "" || minimal.Attempt != 0 {
		t.Errorf("minimal job defaults: priority %d, max_attempts %d, dedupe_key %q, attempt %d",
			minimal.Priority, minimal.MaxAttempts, minimal.DedupeKey, minimal.Attempt)
	}
	// Defaults on the database clock in UTC: the instant of the insert,
	// give or take clock skew — hours off where a default used local time.
	for what, at := range map[string]time.Time{"run_at": minimal.RunAt, "created_at": minimal.CreatedAt} {
		if at.Before(before.Add(-time.Minute)) || at.After(after.Add(time.Minute)) {
			t.Errorf("minimal job %s default %v, want between %v and %v", what, at, before, after)
		}
	}
	wantCounts(t, q, name, 0, 1, 0, 0)
}

// InsertStatement builds a producer's plain INSERT into table naming the
// columns of cols, in a stable order, with placeholder(i) (1-based) for the
// i-th value: what a harness's InsertRaw runs once it has converted the
// values to the dialect's storage.
func InsertStatement(table string, cols map[string]any, placeholder func(i int) string) (string, []any) {
	names := make([]string, 0, len(cols))
	for c := range cols {
		names = append(names, c)
	}
	slices.Sort(names)
	marks := make([]string, len(names))
	args := make([]any, len(names))
	for i, c := range names {
		marks[i] = placeholder(i + 1)
		args[i] = cols[c]
	}
	return "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(marks, ", ") + ")", args
}
