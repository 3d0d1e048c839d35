package memq_test

import (
	"context"
	"testing"

	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

// TestConformance runs the suite against the in-memory driver: it checks
// the suite and package queue, not any database.
func TestConformance(t *testing.T) {
	integration.Run(t, integration.Harness{
		Dialect: "memory",
		NewQueue: func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
			lease := cfg.Lease
			if lease == 0 {
				lease = queue.DefaultLease
			}
			s := memq.New(lease)
			s.SetMigrated(migrate)
			q, err := queue.New(s.Driver(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			return q
		},
		Kill:       func(t *testing.T, c queue.Claimer) { c.(*memq.Claimer).Abandon() },
		HeldLocks:  func(t *testing.T, c queue.Claimer) []int64 { return c.(*memq.Claimer).Stored() },
		NoUserPool: "the in-memory driver has no pool",
		// The in-memory store has no transactions: a nil tx is its own
		// (EnqueueTx with nil is Enqueue), committed as it is made.
		Tx: func(*testing.T, *queue.Queue) (any, func() error) { return nil, func() error { return nil } },
	})
}

// JobFilter.DedupeKey finds the one job of a queue with that key, and the
// other filters apply to it.
func TestJobsByDedupeKey(t *testing.T) {
	ctx := context.Background()
	q, err := queue.New(memq.New(queue.DefaultLease).Driver(), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ids, err := q.Enqueue(ctx, queue.NewJob{Queue: "a", DedupeKey: "k1", Kind: "mail"},
		queue.NewJob{Queue: "b", DedupeKey: "k1"}, queue.NewJob{Queue: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    queue.JobFilter
		want int64 // 0: none
	}{
		{queue.JobFilter{Queue: "a", DedupeKey: "k1"}, ids[0]},
		{queue.JobFilter{Queue: "b", DedupeKey: "k1"}, ids[1]},
		{queue.JobFilter{Queue: "a", DedupeKey: "k1", Kind: "mail", State: queue.StateReady}, ids[0]},
		{queue.JobFilter{Queue: "a", DedupeKey: "k1", Kind: "sms"}, 0},
		{queue.JobFilter{Queue: "a", DedupeKey: "k1", State: queue.StateDead}, 0},
		{queue.JobFilter{Queue: "a", DedupeKey: "k1", AfterID: ids[0]}, 0},
		{queue.JobFilter{Queue: "a", DedupeKey: "k2"}, 0},
	} {
		jobs, err := q.Jobs(ctx, c.f)
		switch {
		case err != nil:
			t.Errorf("%+v: %v", c.f, err)
		case c.want == 0 && len(jobs) != 0:
			t.Errorf("%+v: job %d, want none", c.f, jobs[0].ID)
		case c.want != 0 && (len(jobs) != 1 || jobs[0].ID != c.want):
			t.Errorf("%+v: %v, want job %d", c.f, jobs, c.want)
		}
	}
}
