package postgres

import (
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/queue"
	"github.com/pressly/goose/v3"
)

// TestConformanceGooseFiles runs the conformance suite on tables made by
// goose itself from the files `dbq migrate sql --dir` writes, as a team
// with its own migration tool has them.
func TestConformanceGooseFiles(t *testing.T) {
	t.Parallel()
	testPool(t)
	h := harness(Advisory)
	h.NewQueue = func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
		t.Helper()
		q := newQueue(t, Config{Config: cfg, Strategy: Advisory}, false)
		if migrate {
			if _, err := gooseProvider(t, q).Up(testCtx(t)); err != nil {
				t.Fatalf("goose up: %v", err)
			}
		}
		return q
	}
	h.Migrator = gooseProvider
	integration.Run(t, h)
}

func gooseProvider(t *testing.T, q *queue.Queue) *goose.Provider {
	t.Helper()
	db := SQLDB(driverOf(t, q).Pool())
	t.Cleanup(func() { _ = db.Close() })
	return integration.GooseProvider(t, dialect.Postgres, db, q.Config().Names())
}
