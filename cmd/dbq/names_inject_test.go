package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/queue"
)

// TestHostileNamesRefused: --prefix, --schema and --queue values that
// would change a statement's shape are refused with their typed error by
// every command, and the queue already in the database is untouched.
func TestHostileNamesRefused(t *testing.T) {
	t.Parallel()
	g := []string{"--dsn", "sqlite:" + filepath.Join(t.TempDir(), "inject.db")}
	mustRun(t, "", append(g, "migrate", "up")...)
	mustRun(t, "", append(g, "enqueue", "-q", "victim", "--count", "3", "x")...)
	before := stats(t, g)
	run := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := dbqCmd(ctx, "", append(append([]string{}, g...), args...)...)
		return err
	}
	for _, id := range faults.HostileIdentifiers {
		for _, flag := range []string{"--prefix", "--schema"} {
			for _, cmd := range [][]string{{"migrate", "up"}, {"migrate", "down", "--to", "0"}, {"enqueue", "-q", "victim", "x"}, {"stats"}, {"work", "-q", "victim", "--", "true"}} {
				if err := run(append([]string{flag, id}, cmd...)...); !errors.Is(err, queue.ErrInvalidIdentifier) {
					t.Errorf("dbq %s %q %s: %v, want ErrInvalidIdentifier", flag, id, strings.Join(cmd, " "), err)
				}
			}
		}
	}
	for _, name := range faults.HostileQueueNames {
		for _, cmd := range [][]string{{"enqueue", "-q", name, "x"}, {"work", "-q", name, "--", "true"}} {
			if err := run(cmd...); !errors.Is(err, queue.ErrInvalidQueue) {
				t.Errorf("dbq %q: %v, want ErrInvalidQueue", cmd, err)
			}
		}
	}
	after := stats(t, g)
	for _, s := range []map[string]queue.QueueStats{before, after} {
		v := s["victim"]
		v.OldestReadyAge = 0
		s["victim"] = v
	}
	if len(after) != len(before) || after["victim"] != before["victim"] {
		t.Errorf("stats changed: before %+v, after %+v", before, after)
	}
}
