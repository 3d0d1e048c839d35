package main

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// TestWorkKeepsActivity: `dbq work` lists itself in the processes table
// while it runs, removes its row at a clean exit, and leaves the jobs it
// completed and made dead in the activity table; --no-activity does
// neither.
func TestWorkKeepsActivity(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			mustRun(t, "", append(g, "enqueue", "-q", "act", "--count", "4", "ok")...)
			mustRun(t, "", append(g, "enqueue", "-q", "act", "--max-attempts", "1", "fail")...)
			wctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := dbqCmd(wctx, "", append(g, "work", "-q", "act", "-c", "3", "--poll", "50ms", "--",
					"sh", "-c", `test "$(cat)" = ok`)...)
				done <- err
			}()
			var seen []queue.ProcessInfo
			for ctx.Err() == nil {
				st, err := q.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if seen, err = q.Processes(ctx); err != nil {
					t.Fatal(err)
				}
				// The row shows the Worker once a flush after its start has
				// run; the jobs may all be done before that.
				if len(seen) == 1 && len(seen[0].Queues) > 0 &&
					slices.ContainsFunc(st, func(s queue.QueueStats) bool { return s.Queue == "act" && s.Dead == 1 && s.Ready == 0 && s.Held == 0 }) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(seen) != 1 || !slices.Equal(seen[0].Queues, []string{"act"}) || seen[0].Concurrency != 3 || seen[0].PID != os.Getpid() {
				t.Errorf("processes while working: %+v", seen)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("work: %v", err)
			}
			if ps, err := q.Processes(ctx); err != nil || len(ps) != 0 {
				t.Errorf("processes after work exited: %+v, %v", ps, err)
			}
			counts, err := q.Activity(ctx, time.Now().Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			var sum queue.ActivityCount
			for _, c := range counts {
				sum.Completed, sum.Retried, sum.Dead = sum.Completed+c.Completed, sum.Retried+c.Retried, sum.Dead+c.Dead
			}
			if sum.Completed != 4 || sum.Retried != 0 || sum.Dead != 1 {
				t.Errorf("activity after work: %+v, want 4 completed and 1 dead", sum)
			}

			// --no-activity: no row, no counts.
			mustRun(t, "", append(g, "enqueue", "-q", "quiet", "ok")...)
			wctx, stop = context.WithCancel(ctx)
			go func() {
				_, err := dbqCmd(wctx, "", append(g, "work", "-q", "quiet", "--no-activity", "--poll", "50ms", "--", "cat")...)
				done <- err
			}()
			for ctx.Err() == nil {
				if ps, _ := q.Processes(ctx); len(ps) != 0 {
					t.Fatalf("--no-activity stored a process row: %+v", ps)
				}
				if st, _ := q.Stats(ctx); !slices.ContainsFunc(st, func(s queue.QueueStats) bool { return s.Queue == "quiet" }) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("work --no-activity: %v", err)
			}
			after, _ := q.Activity(ctx, time.Now().Add(-time.Hour))
			if slices.ContainsFunc(after, func(c queue.ActivityCount) bool { return c.Queue == "quiet" }) {
				t.Errorf("--no-activity wrote counts: %+v", after)
			}
		})
	}
}
