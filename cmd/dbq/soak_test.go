//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// orphanBound is how long after its worker's SIGKILL a job may still
// write: the supervisor's reaction (it reads EOF and sends SIGTERM), with
// room for a loaded machine (it took up to 0.2 s with a load of 25 on 2
// cores). A run left orphaned writes for up to 1.8 s more.
const orphanBound = time.Second

// TestWorkKillSoak runs three `dbq work` on one queue of jobs that each
// write a start line, ticks every 0.25 s for 2 s and an end line to a
// ledger, and SIGKILLs one of them again and again while it runs jobs,
// starting it anew each time. No killed worker's job writes later than
// orphanBound after the kill, no two runs of a job overlap for longer
// than that (with PostgreSQL's advisory claimer a killed run's job is
// claimed again at once), and every job ends, once its killed runs are
// run again. DBQ_SOAK_KILLS and DBQ_SOAK_JOBS
// make it longer (default 6 kills, 60 jobs per database).
func TestWorkKillSoak(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a soak of about 25 s; skipped in -short mode")
	}
	bin := buildDBQ(t, t.TempDir())
	kills, jobs := envInt(t, "DBQ_SOAK_KILLS", 6), envInt(t, "DBQ_SOAK_JOBS", 60)
	for _, db := range claimerDBs(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			testKillSoak(t, bin, db, kills, jobs)
		})
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number above 0", name, v)
	}
	return n
}

// soakWorker is one `dbq work` process of the soak.
type soakWorker struct {
	name string
	cmd  *exec.Cmd
	out  output
	done chan error
}

func testKillSoak(t *testing.T, bin string, db claimerDB, kills, total int) {
	g, q := cliDB(t, db.testDB)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	jobs := make([]queue.NewJob, total)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "soak"}
	}
	ids, err := q.Enqueue(ctx, jobs...)
	if err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	script := `w() { echo "$1 $DBQ_JOB_ID $WORKER $$ $(date +%s%N)" >> "$LEDGER"; }
w start; for i in 1 2 3 4 5 6 7 8; do sleep 0.25; w tick; done; w end`
	start := func(name string) *soakWorker {
		args := append(append(append([]string{}, g...), db.strategy...), "work", "-q", "soak", "-c", "3",
			"--poll", "100ms", "--lease", "3s", "--no-activity", "--", "sh", "-c", script)
		w := &soakWorker{name: name, cmd: exec.Command(bin, args...), out: outputFile(t), done: make(chan error, 1)}
		w.cmd.Env = append(os.Environ(), "LEDGER="+ledger, "WORKER="+name)
		w.cmd.Stdout, w.cmd.Stderr = w.out.f, w.out.f
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { w.done <- w.cmd.Wait() }()
		t.Cleanup(func() { _ = w.cmd.Process.Kill() })
		return w
	}
	steady := []*soakWorker{start("w1"), start("w2")}
	deaths := map[string]time.Time{}
	for i := range kills {
		w := start(fmt.Sprintf("w0.%d", i))
		for deadline := time.Now().Add(time.Minute); !ledgerHas(t, ledger, "start", w.name); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s started no job in a minute\n%s", w.name, w.out.String())
			}
		}
		time.Sleep(time.Duration(200+100*i%700) * time.Millisecond) // kill at varied points of its runs
		deaths[w.name] = time.Now()
		if err := w.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-w.done; err == nil {
			t.Fatalf("%s exited 0 before its SIGKILL", w.name)
		}
	}
	for deadline := time.Now().Add(3 * time.Minute); len(allJobs(t, q, "soak")) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still stored 3 minutes after the last kill", len(allJobs(t, q, "soak")))
		}
	}
	for _, w := range steady {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		if err := <-w.done; err != nil {
			t.Errorf("%s after SIGTERM: %v\n%s", w.name, err, w.out.String())
		}
	}
	checkSoakLedger(t, db.name, readSoakLedger(t, ledger), ids, deaths)
}

// soakLine is one line of the soak's ledger.
type soakLine struct {
	what, worker string
	job          int64
	run          string // job, worker and shell pid: one run
	at           time.Time
}

func readSoakLedger(t *testing.T, path string) []soakLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []soakLine
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			t.Fatalf("ledger line %q", l)
		}
		job, err1 := strconv.ParseInt(f[1], 10, 64)
		ns, err2 := strconv.ParseInt(f[4], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("ledger line %q", l)
		}
		lines = append(lines, soakLine{what: f[0], job: job, worker: f[2], run: f[1] + " " + f[2] + " " + f[3], at: time.Unix(0, ns)})
	}
	return lines
}

func ledgerHas(t *testing.T, path, what, worker string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 5 && f[0] == what && f[2] == worker {
			return true
		}
	}
	return false
}

// checkSoakLedger: no killed worker's job wrote later than orphanBound
// after the kill, no two runs of a job overlap for longer, every job ended.
func checkSoakLedger(t *testing.T, name string, lines []soakLine, ids []int64, deaths map[string]time.Time) {
	type span struct{ first, last time.Time }
	runs := map[string]*span{}
	runJob := map[string]int64{}
	ended := map[int64]bool{}
	var orphanWrites, interrupted int
	var latest time.Duration // the latest write of a killed worker's job, after the kill
	for _, l := range lines {
		s := runs[l.run]
		if s == nil {
			s = &span{l.at, l.at}
			runs[l.run], runJob[l.run] = s, l.job
		}
		s.first, s.last = minTime(s.first, l.at), maxTime(s.last, l.at)
		if l.what == "end" {
			ended[l.job] = true
		}
		if death, ok := deaths[l.worker]; ok {
			latest = max(latest, l.at.Sub(death))
			if l.at.After(death.Add(orphanBound)) {
				orphanWrites++
				t.Errorf("job %d of %s (killed) wrote %q %v after the kill", l.job, l.worker, l.what, l.at.Sub(death).Round(time.Millisecond))
			}
		}
	}
	byJob := map[int64][]*span{}
	for run, s := range runs {
		byJob[runJob[run]] = append(byJob[runJob[run]], s)
		if death, killed := deaths[strings.Fields(run)[1]]; killed && s.first.Before(death) && !endedBefore(lines, run, death) {
			interrupted++
		}
	}
	overlaps, longest := 0, time.Duration(0) // overlapping pairs of runs, the longest overlap
	for job, spans := range byJob {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if d := minTime(a.last, b.last).Sub(maxTime(a.first, b.first)); d >= 0 {
					overlaps++
					longest = max(longest, d)
					if d > orphanBound {
						t.Errorf("job %d: two runs overlap for %v", job, d.Round(time.Millisecond))
					}
				}
			}
		}
	}
	for _, id := range ids {
		if !ended[id] {
			t.Errorf("job %d never ended: lost", id)
		}
	}
	if interrupted == 0 {
		t.Errorf("no kill came while a run was going on: the soak proved nothing")
	}
	t.Logf("%s: %d jobs, %d runs, %d kills, %d runs under way at a kill, %d orphan writes (> %v after the kill), %d overlapping runs (longest %v); a killed worker's job wrote at most %v after the kill",
		name, len(ids), len(runs), len(deaths), interrupted, orphanWrites, orphanBound, overlaps, longest.Round(time.Millisecond), latest.Round(time.Millisecond))
}

// endedBefore reports whether run wrote its end line before t.
func endedBefore(lines []soakLine, run string, t time.Time) bool {
	for _, l := range lines {
		if l.run == run && l.what == "end" && l.at.Before(t) {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
