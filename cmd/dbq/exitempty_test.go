//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// TestWorkExitWhenEmpty runs `dbq work --exit-when-empty` as a cron step
// would, on each database: over 40 jobs that succeed, one whose command
// enqueues another job half a second in (while the rest drain: the queue
// looks empty then, but a job still runs), one whose command fails and one
// scheduled an hour ahead, it exits 0 by itself, having run each of the 40,
// the spawner and its child once and completed them, with the failed job
// waiting out its backoff and the scheduled one untouched; on the queue it
// left, it exits at once with nothing run, and so it does on the queue
// paused with jobs ready.
func TestWorkExitWhenEmpty(t *testing.T) {
	t.Parallel()
	bin := buildDBQ(t, t.TempDir())
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			jobs := []queue.NewJob{
				{Queue: "cron", Payload: []byte("fail"), MaxAttempts: 25},
				{Queue: "cron", Delay: time.Hour},
				{Queue: "cron", Payload: []byte("spawn")},
			}
			for range 40 {
				jobs = append(jobs, queue.NewJob{Queue: "cron", Payload: []byte("ok")})
			}
			ids, err := q.Enqueue(ctx, jobs...)
			if err != nil {
				t.Fatal(err)
			}
			ledger := filepath.Join(t.TempDir(), "ledger")
			run := func() string {
				t.Helper()
				args := append(append([]string{}, g...), "work", "-q", "cron", "-c", "4", "--poll", "50ms", "--exit-when-empty",
					"--", "sh", "-c", `p=$(cat); echo "$DBQ_JOB_ID" >> "$LEDGER"
					if [ "$p" = spawn ]; then
						sleep 0.5; "$DBQ_BIN" --dsn "$CHILD_DSN" --prefix "$CHILD_PREFIX" enqueue --queue cron ok >/dev/null || exit 9
						exit 0
					fi
					[ "$p" = ok ]`)
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Env = append(os.Environ(), "LEDGER="+ledger, "DBQ_BIN="+bin, "CHILD_DSN="+g[1], "CHILD_PREFIX="+g[3])
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("dbq work --exit-when-empty: %v\n%s", err, out)
				}
				return string(out)
			}
			out := run()
			if !strings.Contains(out, "dbq work: 42 completed, ") || !strings.Contains(out, "(0 dead)") {
				t.Fatalf("want 42 completed (40, the spawner and its child) and none dead:\n%s", out)
			}
			ran := readLedger(t, ledger)
			var okRuns []int64
			for _, id := range ran {
				if id != ids[0] {
					okRuns = append(okRuns, id)
				}
			}
			slices.Sort(okRuns)
			want := slices.Sorted(slices.Values(ids[2:]))
			if len(okRuns) != len(want)+1 || !slices.Equal(okRuns[:len(want)], want) || okRuns[len(want)] <= ids[len(ids)-1] {
				t.Fatalf("ran %v apart from the failing job, want each of %v once and then the child", okRuns, want)
			}
			if !slices.Contains(ran, ids[0]) || slices.Contains(ran, ids[1]) {
				t.Fatalf("ledger %v: want the failing job run and the scheduled one not", ran)
			}
			left := allJobs(t, q, "cron")
			if len(left) != 2 {
				t.Fatalf("%d jobs left, want the failing and the scheduled one", len(left))
			}
			for _, j := range left {
				if j.ID == ids[0] && j.Attempt < 1 {
					t.Errorf("the failing job is left with attempt %d, want at least 1", j.Attempt)
				}
			}
			// Nothing due now: the second run ends at once, having run
			// nothing (the failing job's 1 s backoff has at most just
			// ended, and then it runs once more and fails again).
			before := len(readLedger(t, ledger))
			out = run()
			if !strings.Contains(out, "dbq work: 0 completed, ") {
				t.Fatalf("second run:\n%s", out)
			}
			for _, id := range readLedger(t, ledger)[before:] {
				if id != ids[0] {
					t.Fatalf("second run ran job %d", id)
				}
			}
			// A paused queue's backlog counts as nothing due: it stays.
			if err := q.Pause(ctx, "cron"); err != nil {
				t.Fatal(err)
			}
			paused, err := q.Enqueue(ctx, queue.NewJob{Queue: "cron", Payload: []byte("ok")}, queue.NewJob{Queue: "cron", Payload: []byte("ok")})
			if err != nil {
				t.Fatal(err)
			}
			before = len(readLedger(t, ledger))
			if out = run(); !strings.Contains(out, "dbq work: 0 completed, 0 retried") || len(readLedger(t, ledger)) != before {
				t.Fatalf("run on a paused queue ran jobs:\n%s", out)
			}
			left = allJobs(t, q, "cron")
			for _, id := range paused {
				if !slices.ContainsFunc(left, func(j *queue.Job) bool { return j.ID == id }) {
					t.Fatalf("job %d of the paused queue is gone", id)
				}
			}
		})
	}
}
