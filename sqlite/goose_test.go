package sqlite

import (
	"context"
	"path/filepath"
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
	h := harness()
	h.NewQueue = func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
		t.Helper()
		q := newTestQueue(t, filepath.Join(t.TempDir(), "dbq.db"), cfg, false)
		if migrate {
			if _, err := gooseProvider(t, q).Up(context.Background()); err != nil {
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
	return integration.GooseProvider(t, dialect.SQLite, driverOf(t, q).DB(), q.Config().Names())
}
