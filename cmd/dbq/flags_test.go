package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// startWork runs `dbq work` in-process with args until t ends (or the
// returned stop is called) and returns stop, which waits for it.
func startWork(t *testing.T, args ...string) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := dbqCmd(ctx, "", append([]string{"work"}, args...)...)
		done <- err
	}()
	var err error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() }) // a test that cared has called it
	return stop
}

// waitForLines waits until the file at path holds n lines and returns them.
func waitForLines(t *testing.T, path string, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(b) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q; gave up waiting for %d lines", path, b, n)
		}
	}
}

// TestEnqueuePriority: one worker running one job at a time runs the jobs
// in --priority order, lower first, whatever order they were enqueued in.
func TestEnqueuePriority(t *testing.T) {
	t.Parallel()
	db := testDBs(t)[0]
	g, _ := cliDB(t, db)
	for _, p := range []string{"5", "-1", "0", "2"} {
		mustRun(t, "", append(g, "enqueue", "-q", "prio", "--priority="+p, "--", p)...)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	startWork(t, append(g, "-q", "prio", "-c", "1", "--poll", "50ms", "--", "sh", "-c", `cat >> "$0"; echo >> "$0"`, ran)...)
	if got := strings.Join(waitForLines(t, ran, 4), ","); got != "-1,0,2,5" {
		t.Errorf("ran in order %s, want -1,0,2,5", got)
	}
}

// TestEnqueueDelay: a job enqueued with --delay 1h is scheduled, not
// ready, and runs no sooner than an hour from now.
func TestEnqueueDelay(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			mustRun(t, "", append(g, "enqueue", "-q", "later", "--delay", "1h", "x")...)
			if s := stats(t, g)["later"]; s.Scheduled != 1 || s.Ready != 0 {
				t.Errorf("stats: %+v, want 1 scheduled, 0 ready", s)
			}
			jobs := allJobs(t, q, "later")
			if len(jobs) != 1 || time.Until(jobs[0].RunAt) < 59*time.Minute {
				t.Errorf("%d jobs, want one running at least 59 minutes from now", len(jobs))
			}
		})
	}
}

// TestEnqueueDedupe: a second job with the same --dedupe key in the same
// queue is refused and stores nothing; another queue may use the key; a
// key of 200 bytes is taken, one of 201 refused.
func TestEnqueueDedupe(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			mustRun(t, "", append(g, "enqueue", "-q", "dd", "--dedupe", "k1", "first")...)
			if _, err := dbqCmd(ctx, "", append(g, "enqueue", "-q", "dd", "--dedupe", "k1", "second")...); !errors.Is(err, queue.ErrDuplicate) {
				t.Errorf("second job with key k1: %v, want ErrDuplicate", err)
			}
			mustRun(t, "", append(g, "enqueue", "-q", "other", "--dedupe", "k1", "elsewhere")...)
			long := strings.Repeat("k", 200)
			mustRun(t, "", append(g, "enqueue", "-q", "dd", "--dedupe", long, "long")...)
			if _, err := dbqCmd(ctx, "", append(g, "enqueue", "-q", "dd", "--dedupe", long+"k", "too long")...); !errors.Is(err, queue.ErrInvalidJob) {
				t.Errorf("a 201-byte key: %v, want ErrInvalidJob", err)
			}
			jobs := allJobs(t, q, "dd")
			if len(jobs) != 2 || string(jobs[0].Payload) != "first" || jobs[0].DedupeKey != "k1" || jobs[1].DedupeKey != long {
				t.Errorf("queue dd holds %d jobs, want first (k1) and long", len(jobs))
			}
		})
	}
}

// TestWorkJobEnvironment runs a job that fails once and records its
// environment: DBQ_JOB_ID, DBQ_JOB_QUEUE and DBQ_JOB_ATTEMPT (0, then 1)
// are set, and $DBQ_DSN, from which dbq work took a DSN with a password,
// reaches the job with the password masked. The PostgreSQL test server
// trusts its users, so any password connects.
func TestWorkJobEnvironment(t *testing.T) {
	const pw = "Env-Secret-9f3"
	db := testDB{dialect.Postgres, dbtest.DSN(dialect.Postgres)}
	g, q := cliDB(t, db)
	withPW := strings.Replace(db.dsn, "postgres@", "postgres:"+pw+"@", 1)
	if withPW == db.dsn {
		t.Fatalf("cannot add a password to %s", dialect.Redact(db.dsn))
	}
	t.Setenv("DBQ_DSN", withPW)
	dir := t.TempDir()
	t.Setenv("ENV_DIR", dir)
	out := mustRun(t, "", g[2], g[3], "enqueue", "-q", "envq", "x") // --prefix only: the DSN is $DBQ_DSN's
	id := strings.TrimSpace(out)
	script := `env > "$ENV_DIR/env.$DBQ_JOB_ATTEMPT"; echo "$DBQ_JOB_ATTEMPT" >> "$ENV_DIR/attempts"; [ "$DBQ_JOB_ATTEMPT" -ge 1 ]`
	stop := startWork(t, g[2], g[3], "-q", "envq", "--poll", "50ms", "--", "sh", "-c", script)
	if got := strings.Join(waitForLines(t, filepath.Join(dir, "attempts"), 2), ","); got != "0,1" {
		t.Errorf("DBQ_JOB_ATTEMPT of the two runs: %s, want 0,1", got)
	}
	for deadline := time.Now().Add(time.Minute); len(allJobs(t, q, "envq")) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job was not completed on its second run")
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "env.1"))
	if err != nil {
		t.Fatal(err)
	}
	env := "\n" + string(b)
	for _, want := range []string{"\nDBQ_JOB_ID=" + id + "\n", "\nDBQ_JOB_QUEUE=envq\n", "\nDBQ_JOB_ATTEMPT=1\n", "\nDBQ_DSN=postgres://postgres:xxxxx@"} {
		if !strings.Contains(env, want) {
			t.Errorf("job environment lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(env, pw) {
		t.Errorf("the job's environment holds the DSN's password")
	}
}

// TestWorkLease: a job held by `dbq work --lease 3s` has a lease ending
// within seconds (the default is minutes), renewed while it runs.
func TestWorkLease(t *testing.T) {
	t.Parallel()
	for _, db := range []testDB{testDBs(t)[0], testDBs(t)[2]} { // SQLite, MySQL: lease-based claimers
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			mustRun(t, "", append(g, "enqueue", "-q", "lease", "x")...)
			release := filepath.Join(t.TempDir(), "release")
			startWork(t, append(g, "-q", "lease", "--lease", "3s", "--poll", "50ms", "--",
				"sh", "-c", `until [ -e "$0" ]; do sleep 0.05; done`, release)...)
			defer func() { _ = os.WriteFile(release, nil, 0o600) }()
			var seen []time.Duration
			for deadline := time.Now().Add(time.Minute); len(seen) < 3; time.Sleep(time.Second) {
				jobs := allJobs(t, q, "lease")
				if len(jobs) == 1 && jobs[0].State == queue.StateClaimed {
					seen = append(seen, time.Until(jobs[0].ClaimedUntil))
				}
				if time.Now().After(deadline) {
					t.Fatalf("the job was not held; saw leases %v", seen)
				}
			}
			// 3 s apart the lease still ends within seconds: renewed.
			for _, left := range seen {
				if left > 10*time.Second || left < -2*time.Second {
					t.Errorf("leases left %v, want each within a few seconds of 3s", seen)
					break
				}
			}
		})
	}
}

// TestWorkWakeups: on PostgreSQL a worker that polls once an hour runs a
// job enqueued while it waits, woken by the enqueue; with --no-wakeups it
// does not, and the job is still ready when the worker stops.
func TestWorkWakeups(t *testing.T) {
	t.Parallel()
	for _, noWakeups := range []bool{false, true} {
		t.Run("no-wakeups="+strconv.FormatBool(noWakeups), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, testDB{dialect.Postgres, dbtest.DSN(dialect.Postgres)})
			mustRun(t, "", append(g, "enqueue", "-q", "wake", "first")...)
			ran := filepath.Join(t.TempDir(), "ran")
			args := append(g, "-q", "wake", "-c", "2", "--poll", "1h")
			if noWakeups {
				args = append(args, "--no-wakeups")
			}
			stop := startWork(t, append(args, "--", "sh", "-c", `cat >> "$0"; echo >> "$0"`, ran)...)
			// The first claim found one job for two slots, so the worker
			// now waits its hour.
			waitForLines(t, ran, 1)
			mustRun(t, "", append(g, "enqueue", "-q", "wake", "second")...)
			if !noWakeups {
				waitForLines(t, ran, 2)
				return
			}
			time.Sleep(2 * time.Second)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(ran); string(b) != "first\n" {
				t.Errorf("with --no-wakeups the worker ran %q, want only the first job", b)
			}
			if jobs := allJobs(t, q, "wake"); len(jobs) != 1 || jobs[0].State != queue.StateReady {
				t.Errorf("queue wake holds %d jobs, want the second, ready", len(jobs))
			}
		})
	}
}

// TestMoveFollow: `dbq move --follow` keeps moving while the source holds
// a job a worker has, and ends once that job is back and moved; without
// --follow, move ends after one pass and leaves the held job.
func TestMoveFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from, to := "sqlite:"+filepath.Join(dir, "from.db"), "sqlite:"+filepath.Join(dir, "to.db")
	mustRun(t, "", "--dsn", from, "migrate", "up")
	mustRun(t, "", "--dsn", to, "migrate", "up")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mustRun(t, "", "--dsn", from, "enqueue", "-q", "mv", "--count", "3", "x")
	q := openQueue(t, from)
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	held, err := c.Claim(ctx, "mv", 1)
	if err != nil || len(held) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(held))
	}

	mustRun(t, "", "move", "--from", from, "--to", to, "--poll", "50ms")
	if n := len(allJobs(t, q, "mv")); n != 1 {
		t.Fatalf("after a move without --follow the source holds %d jobs, want the held one", n)
	}
	done := make(chan error, 1)
	go func() {
		_, err := dbqCmd(ctx, "", "move", "--from", from, "--to", to, "--poll", "50ms", "--follow")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("move --follow ended (%v) while the source holds a job", err)
	case <-time.After(time.Second):
	}
	if err := c.Release(ctx, queue.Leases(held)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("move --follow: %v", err)
	}
	if n := len(allJobs(t, q, "mv")); n != 0 {
		t.Errorf("after move --follow the source holds %d jobs, want 0", n)
	}
	if n := len(allJobs(t, openQueue(t, to), "mv")); n != 3 {
		t.Errorf("the destination holds %d jobs, want 3", n)
	}
}
