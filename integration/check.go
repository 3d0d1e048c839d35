package integration

import (
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// CheckPasses: queue.Check (dbq check) finds nothing wrong with a healthy
// database and leaves no probe job behind; on tables not migrated it fails
// at once and says to migrate.
func testCheck(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	for _, r := range queue.Check(ctxFor(t), q) {
		if !r.OK {
			t.Errorf("check %s failed: %s (fix: %s)", r.Name, r.Saw, r.Fix)
		}
	}
	st, err := q.Stats(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if n := s.Ready + s.Scheduled + s.Held + s.Dead; n > 0 {
			t.Errorf("queue %q holds %d jobs after the check", s.Queue, n)
		}
	}
	bare := s.h.NewQueue(t, queue.Config{}, false)
	rs := queue.Check(ctxFor(t), bare)
	if len(rs) != 1 || rs[0].OK || rs[0].Name != "schema" || rs[0].Fix == "" {
		t.Fatalf("check of tables not migrated: %+v, want one failed schema probe with a fix", rs)
	}
}
