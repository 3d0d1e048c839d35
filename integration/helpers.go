package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// testTimeout bounds every subtest's database work.
const testTimeout = 2 * time.Minute

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) queue(t *testing.T, cfg queue.Config) *queue.Queue {
	t.Helper()
	return s.h.NewQueue(t, cfg, true)
}

func (s *suite) claimer(t *testing.T, q *queue.Queue) queue.Claimer {
	t.Helper()
	c, err := q.NewClaimer(ctxFor(t))
	if err != nil {
		t.Fatalf("NewClaimer: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// leaseWait is how long to wait for a lease of d to expire and be rescued.
func (s *suite) leaseWait(d time.Duration) time.Duration {
	return d + d/2 + s.h.LeaseSlack + 200*time.Millisecond
}

func enqueue(t *testing.T, q *queue.Queue, jobs ...queue.NewJob) []int64 {
	t.Helper()
	ids, err := q.Enqueue(ctxFor(t), jobs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if len(ids) != len(jobs) {
		t.Fatalf("Enqueue returned %d ids for %d jobs", len(ids), len(jobs))
	}
	return ids
}

func enqueueN(t *testing.T, q *queue.Queue, name string, n int) []int64 {
	t.Helper()
	var ids []int64
	for len(ids) < n {
		batch := make([]queue.NewJob, min(500, n-len(ids)))
		for i := range batch {
			batch[i] = queue.NewJob{Queue: name, Payload: fmt.Appendf(nil, "job-%d", len(ids)+i)}
		}
		ids = append(ids, enqueue(t, q, batch...)...)
	}
	return ids
}

func claim(t *testing.T, c queue.Claimer, name string, n int) []*queue.Job {
	t.Helper()
	jobs, err := c.Claim(ctxFor(t), name, n)
	if err != nil {
		t.Fatalf("Claim(%q, %d): %v", name, n, err)
	}
	if len(jobs) > n {
		t.Fatalf("Claim(%q, %d) returned %d jobs", name, n, len(jobs))
	}
	return jobs
}

func complete(t *testing.T, c queue.Claimer, jobs []*queue.Job) {
	t.Helper()
	if err := c.Complete(ctxFor(t), leases(jobs)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
}

func sameIDs(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// stats returns the counts of one queue (zero counts when it has no jobs).
func stats(t *testing.T, q *queue.Queue, name string) queue.QueueStats {
	t.Helper()
	all, err := q.Stats(ctxFor(t))
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, s := range all {
		if s.Queue == name {
			return s
		}
	}
	return queue.QueueStats{Queue: name}
}

func wantCounts(t *testing.T, q *queue.Queue, name string, ready, scheduled, held, dead int64) {
	t.Helper()
	st := stats(t, q, name)
	if st.Ready != ready || st.Scheduled != scheduled || st.Held != held || st.Dead != dead {
		t.Fatalf("queue %q: ready/scheduled/held/dead = %d/%d/%d/%d, want %d/%d/%d/%d",
			name, st.Ready, st.Scheduled, st.Held, st.Dead, ready, scheduled, held, dead)
	}
}

// drainAll claims with a fresh claimer until the queue yields nothing and
// returns what it got, completing each batch.
func (s *suite) drainAll(t *testing.T, q *queue.Queue, name string) []int64 {
	t.Helper()
	c := s.claimer(t, q)
	var got []int64
	for {
		jobs := claim(t, c, name, 100)
		if len(jobs) == 0 {
			return got
		}
		got = append(got, ids(jobs)...)
		complete(t, c, jobs)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func distinct(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

var ids = queue.IDs

var leases = queue.Leases
