package memq_test

import (
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
		Kill:      func(t *testing.T, c queue.Claimer) { c.(*memq.Claimer).Abandon() },
		HeldLocks: func(t *testing.T, c queue.Claimer) []int64 { return c.(*memq.Claimer).Stored() },
		// The in-memory store has no transactions: a nil tx is its own
		// (EnqueueTx with nil is Enqueue), committed as it is made.
		Tx: func(*testing.T, *queue.Queue) (any, func() error) { return nil, func() error { return nil } },
	})
}
