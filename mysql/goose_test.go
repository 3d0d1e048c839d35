package mysql

import (
	"context"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/queue"
	"github.com/pressly/goose/v3"
)

// TestConformanceGooseFiles runs the conformance suite on tables made by
// goose itself from the files `dbq migrate sql --dir` writes, as a team
// with its own migration tool has them; each subtest's database, goose's
// version table with it, is dropped at its end.
func TestConformanceGooseFiles(t *testing.T) {
	integration.Run(t, integration.Harness{
		Dialect: string(dialect.MySQL),
		NewQueue: func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
			q, d := openQueue(t, Config{Config: cfg}, false)
			d.trackTokens = true
			if migrate {
				if _, err := gooseProvider(t, q).Up(context.Background()); err != nil {
					t.Fatalf("goose up: %v", err)
				}
			}
			return q
		},
		Migrator:   gooseProvider,
		NoUserPool: "TestConformance runs the case on the same server; only the migrations differ here",
		Kill:       func(t *testing.T, c queue.Claimer) { killConn(t, sessionOf(c)) },
		HeldLocks:  func(t *testing.T, c queue.Claimer) []int64 { return claimedWithTokens(t, c.(*Claimer)) },
		Leftovers:  func(t *testing.T, c queue.Claimer) []string { return openTrx(t, sessionOf(c)) },
		InsertRaw:  insertRaw,
		Tx:         beginTx,
	})
}

func gooseProvider(t *testing.T, q *queue.Queue) *goose.Provider {
	t.Helper()
	return integration.GooseProvider(t, dialect.MySQL, q.Driver().(*Driver).DB(), q.Config().Names())
}
