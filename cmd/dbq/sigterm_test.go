//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// buildDBQ builds this command into dir and returns the binary's path.
func buildDBQ(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "go"
	}
	bin := filepath.Join(dir, "dbq")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestWorkSIGTERMLosesNoJob runs the real `dbq work` binary over 300 jobs
// whose command appends the job id to a ledger, sends it SIGTERM mid-run,
// and checks the drain: exit status 0, every job either in the ledger
// once or still ready with no attempt spent, nothing held. A second `dbq
// work` then finishes the rest, and the ledger holds every id once. The
// first run also serves --metrics, scraped while it works.
func TestWorkSIGTERMLosesNoJob(t *testing.T) {
	t.Parallel()
	bin := buildDBQ(t, t.TempDir())
	dsns := []struct {
		d   dialect.Name
		dsn string
	}{
		{dialect.SQLite, "sqlite:" + filepath.Join(t.TempDir(), "term.db")},
		{dialect.Postgres, dbtest.DSN(dialect.Postgres)}, // the default advisory claimer
	}
	for _, tc := range dsns {
		t.Run(string(tc.d), func(t *testing.T) {
			t.Parallel()
			testSIGTERM(t, bin, tc.d, tc.dsn)
		})
	}
}

func testSIGTERM(t *testing.T, bin string, d dialect.Name, dsn string) {
	const total = 300
	prefix := dbtest.UniqueName("term") + "_"
	g := []string{"--dsn", dsn, "--prefix", prefix}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dropTables(t, dsn, prefix)
	mctx, mcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := dbqCmd(mctx, "", append(g, "migrate", "up")...)
	mcancel()
	if err != nil {
		if d == dialect.SQLite {
			t.Fatalf("migrate up: %v", err)
		}
		dbtest.Unreachable(t, d, err)
	}

	q, err := dbq.Open(ctx, dsn, dbq.Options{Config: queue.Config{Prefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	jobs := make([]queue.NewJob, total)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "term"}
	}
	ids, err := q.Enqueue(ctx, jobs...)
	if err != nil {
		t.Fatal(err)
	}

	ledger := filepath.Join(t.TempDir(), "ledger")
	// One short line per O_APPEND write: lines from concurrent commands
	// never interleave.
	script := `sleep 0.05; echo "$DBQ_JOB_ID" >> "$LEDGER"`
	start := func(extra ...string) (*exec.Cmd, *syncBuffer, <-chan string) {
		args := append(append([]string{}, g...), "work", "-q", "term", "-c", "8", "--poll", "50ms", "--shutdown-timeout", "60s")
		args = append(append(args, extra...), "--", "sh", "-c", script)
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "LEDGER="+ledger)
		out := &syncBuffer{}
		cmd.Stdout = out
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		metricsURL := make(chan string, 1)
		re := regexp.MustCompile(`metrics on (http://\S+)`)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				line := sc.Text()
				out.WriteString(line + "\n")
				if m := re.FindStringSubmatch(line); m != nil {
					metricsURL <- m[1]
				}
			}
		}()
		return cmd, out, metricsURL
	}
	stop := func(cmd *exec.Cmd, out *syncBuffer) {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("dbq work after SIGTERM: %v (want exit 0)\n%s", err, out.String())
			}
		case <-time.After(90 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("dbq work did not exit after SIGTERM\n%s", out.String())
		}
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// First run: SIGTERM once a fifth of the jobs are done.
	cmd, out, metricsURL := start("--metrics", "127.0.0.1:0")
	var url string
	select {
	case url = <-metricsURL:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("dbq work printed no metrics address\n%s", out.String())
	}
	waitUntil("a fifth of the jobs to run", func() bool { return len(readLedger(t, ledger)) >= total/5 })
	scrape := scrapeMetrics(t, url)
	if !regexp.MustCompile(`(?m)^dbq_jobs_claimed_total\{queue="term"\} [1-9]`).MatchString(scrape) ||
		!strings.Contains(scrape, `dbq_queue_jobs{queue="term",state="ready"}`) ||
		!strings.Contains(scrape, `dbq_job_runs_total{outcome="completed",queue="term"}`) {
		t.Errorf("/metrics mid-run lacks the worker's and the queue's series:\n%s", scrape)
	}
	stop(cmd, out)

	runs := readLedger(t, ledger)
	ran := map[int64]int{}
	for _, id := range runs {
		ran[id]++
	}
	for id, n := range ran {
		if n != 1 {
			t.Errorf("job %d ran %d times before SIGTERM", id, n)
		}
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Held != 0 || s.Dead != 0 {
			t.Errorf("after the drain: %+v, want nothing held or dead", s)
		}
	}
	// What did not run must be ready with no attempt spent: claim it all.
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []*queue.Job
	for {
		got, err := c.Claim(ctx, "term", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		left = append(left, got...)
	}
	for _, j := range left {
		if j.Attempt != 0 {
			t.Errorf("job %d left with attempt %d, want 0", j.ID, j.Attempt)
		}
		if ran[j.ID] != 0 {
			t.Errorf("job %d ran and is still queued", j.ID)
		}
	}
	if err := c.Release(ctx, queue.Leases(left)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ran)+len(left) != total {
		t.Fatalf("%d jobs ran and %d are left: %d lost", len(ran), len(left), total-len(ran)-len(left))
	}
	t.Logf("%s: SIGTERM after %d jobs ran; %d left for the second run", d, len(ran), len(left))

	// Second run finishes the rest.
	cmd, out, _ = start()
	waitUntil("the second run to drain the queue", func() bool {
		st, err := q.Stats(ctx)
		return err == nil && len(st) == 0
	})
	stop(cmd, out)
	ran = map[int64]int{}
	for _, id := range readLedger(t, ledger) {
		ran[id]++
	}
	for _, id := range ids {
		if ran[id] != 1 {
			t.Errorf("job %d ran %d times, want once", id, ran[id])
		}
	}
	if len(ran) != total {
		t.Errorf("ledger holds %d distinct ids, want %d", len(ran), total)
	}
}

func readLedger(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	lines := strings.Split(string(b), "\n")
	for _, line := range lines[:len(lines)-1] { // the last is empty, or being written

		id, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("ledger line %q: %v", line, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) WriteString(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(v)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
