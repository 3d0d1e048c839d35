package mysql

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// The fault test drives the cluster through scripts/galera.sh (kill N,
// start N, isolate N 1|0), named by DBQ_GALERA_CTL; make test-galera sets
// it. DBQ_GALERA_FAULT_JOBS is the number of jobs (default 100,000).

// galeraCtl returns a function that runs the cluster script with args,
// or ends the test when DBQ_GALERA_CTL is unset (a failure when DBQ_REQUIRE
// names galera).
func galeraCtl(t *testing.T) func(args ...string) error {
	t.Helper()
	script := os.Getenv("DBQ_GALERA_CTL")
	if script == "" {
		msg := "DBQ_GALERA_CTL does not name scripts/galera.sh, which kills, restarts and isolates the nodes (make test-galera sets it)"
		if dbtest.Required(galeraName) {
			t.Fatalf("%s; DBQ_REQUIRE names galera", msg)
		}
		t.Skip(msg)
	}
	return func(args ...string) error {
		out, err := exec.Command("bash", append([]string{script}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("galera.sh %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
}

// faultRun is one run of a job's handler, as a Worker's hooks saw it.
type faultRun struct {
	job, attempt int
	node         int // 1-based
	at           time.Time
	outcome      queue.Outcome
	ended        bool
}

// faultLedger records every run and every claim of the Workers of the
// test, in memory: a node cut off from the others could not write a
// ledger table, and a crashed one would lose its writes.
type faultLedger struct {
	mu        sync.Mutex
	runs      []faultRun
	done      map[int64]bool // jobs with a completed run
	claims    []faultClaim
	completed atomic.Int64 // distinct jobs completed
}

type faultClaim struct {
	node       int
	start, end time.Time
	got        int
}

func newFaultLedger() *faultLedger { return &faultLedger{done: map[int64]bool{}} }

type runKey struct{}

// faultHooks are the hooks of the Worker on node (1-based).
type faultHooks struct {
	l    *faultLedger
	node int
}

func (h faultHooks) ClaimDone(_ string, _, got int, took time.Duration, err error) {
	if err != nil {
		return
	}
	now := time.Now()
	h.l.mu.Lock()
	h.l.claims = append(h.l.claims, faultClaim{node: h.node, start: now.Add(-took), end: now, got: got})
	h.l.mu.Unlock()
}

func (h faultHooks) JobStart(ctx context.Context, j *queue.Job) context.Context {
	h.l.mu.Lock()
	i := len(h.l.runs)
	h.l.runs = append(h.l.runs, faultRun{job: int(j.ID), attempt: j.Attempt, node: h.node, at: time.Now()})
	h.l.mu.Unlock()
	return context.WithValue(ctx, runKey{}, i)
}

func (h faultHooks) JobEnd(ctx context.Context, j *queue.Job, o queue.Outcome, _ time.Duration, _ error) {
	i, ok := ctx.Value(runKey{}).(int)
	if !ok {
		return
	}
	h.l.mu.Lock()
	h.l.runs[i].outcome, h.l.runs[i].ended = o, true
	if o == queue.OutcomeCompleted && !h.l.done[j.ID] {
		h.l.done[j.ID] = true
		h.l.completed.Add(1)
	}
	h.l.mu.Unlock()
}

func (faultHooks) LeasesLost(string, []int64) {}

// fault is one fault injected: node (1-based) killed or cut off from from
// to to (restarted and Synced, or back in the primary component).
type fault struct {
	what     string
	node     int
	from, to time.Time
	// A cut: when the node was seen out of the primary component, and
	// when it was let back.
	outOfQuorum, back time.Time
}

// faultPhase runs the workers of nodes (1-based, one Worker each, on the
// node's queue) on queue name until the ledger has n more completed jobs
// or ctx ends, with inject running beside them; it returns the time the
// jobs took.
func faultPhase(t *testing.T, ctx context.Context, qs []*queue.Queue, nodes []int, name string, l *faultLedger, n int64, logger *slog.Logger, inject func()) time.Duration {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	base := l.completed.Load()
	start := time.Now()
	for _, node := range nodes {
		w, err := queue.NewWorker(qs[node-1], func(context.Context, *queue.Job) error { return nil }, queue.WorkerConfig{
			Queue: name, Concurrency: 8, PollInterval: 50 * time.Millisecond,
			Hooks: faultHooks{l: l, node: node}, Logger: logger,
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(runCtx); err != nil {
				errs <- fmt.Errorf("worker on node %d: %w", node, err)
			}
		}()
	}
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		if inject != nil {
			inject()
		}
	}()
	// A job whose completion committed while its node died has no
	// completed run in the ledger (the worker never heard): the phase also
	// ends when the table holds no job of the queue.
	for i := 0; l.completed.Load()-base < n && ctx.Err() == nil; i++ {
		if i%20 == 19 && queueEmpty(qs, name) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	<-injected
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := l.completed.Load() - base; got < n && !queueEmpty(qs, name) {
		t.Fatalf("queue %s: %d of %d jobs completed before %v", name, got, n, ctx.Err())
	}
	return elapsed
}

// queueEmpty reports whether the first node of qs that answers holds no
// job of queue name.
func queueEmpty(qs []*queue.Queue, name string) bool {
	for _, q := range qs {
		d := q.Driver().(*Driver)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var left int
		err := d.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d.stmts.jobsTable+" WHERE queue = ?", name).Scan(&left)
		cancel()
		if err == nil {
			return left == 0
		}
	}
	return false
}

// wsrepStatus reads a wsrep status variable of node i (0-based), with
// SHOW, which a node out of the primary component still answers; "" when
// the node does not answer.
func wsrepStatus(ns []galeraNode, i int, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var n, v string
	if err := ns[i].db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
		return ""
	}
	return v
}

// TestGaleraFaults: DBQ_GALERA_FAULT_JOBS jobs (default 100,000) worked by
// a Worker per node while, one after the other from 5% of the jobs on,
// node 2 is killed -9 and restarted (it rejoins by state transfer), node
// 1 is cut off from the others for 20 s, and node 3 is killed and
// restarted. Every run and every claim is recorded in memory
// by the Workers' hooks. Checked: no job lost (each ran and the table is
// empty on every node), no job run twice at the same attempt (two holders
// at once), every repeated job's earlier run ended without its result
// written (the node died or was cut off) and started during a fault, and
// no claim that started while the cut node was out of quorum took a job.
// Before the faults, jobs/s of three Workers on node 1 and of one Worker
// on each node, a tenth of the jobs each.
func TestGaleraFaults(t *testing.T) {
	ns := galeraNodes(t)
	if len(ns) != 3 {
		t.Skipf("needs the 3 nodes of scripts/galera.sh; DBQ_MYSQL_DSNS lists %d", len(ns))
	}
	ctl := galeraCtl(t)
	total := envJobs(t, "DBQ_GALERA_FAULT_JOBS", 100_000, 1000)
	_, dsns := galeraDatabase(t, ns, 0)
	// Whatever happens, the cluster is whole again before the database
	// is dropped: the cut node back, the killed nodes restarted.
	var faultsMu sync.Mutex
	var faults []fault
	t.Cleanup(func() {
		faultsMu.Lock()
		defer faultsMu.Unlock()
		for _, f := range faults {
			if !f.to.IsZero() {
				continue
			}
			var err error
			if f.what == "cut" {
				err = ctl("isolate", strconv.Itoa(f.node), "0")
			} else {
				err = ctl("start", strconv.Itoa(f.node))
			}
			if err != nil {
				t.Errorf("restoring node %d after %s: %v", f.node, f.what, err)
			}
		}
	})

	logs := newLogCount()
	logger := slog.New(logs)
	cfg := Config{Config: queue.Config{Logger: logger, Lease: 20 * time.Second}}
	qs := make([]*queue.Queue, len(ns))
	ds := make([]*Driver, len(ns))
	for i := range ns {
		qs[i], ds[i] = openQueueOn(t, dsns[i], cfg, i == 0)
	}
	// Three more queues on node 1, for the one-node phase.
	q1 := make([]*queue.Queue, len(ns))
	d1 := make([]*Driver, len(ns))
	for i := range q1 {
		q1[i], d1[i] = openQueueOn(t, dsns[0], cfg, false)
	}
	for _, d := range ds {
		waitVisible(t, d.db, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dbq_jobs'")
	}
	counters := func(ds []*Driver) (conflicts, claims int64) {
		for _, d := range ds {
			_, c := d.EmptyLocks()
			conflicts, claims = conflicts+d.Conflicts(), claims+c
		}
		return
	}
	per1000 := func(c, n int64) float64 { return 1000 * float64(c) / float64(max(n, 1)) }

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	l := newFaultLedger()
	enqueue := func(name string, n int) []int64 {
		start := time.Now()
		ids := enqueueN(t, qs[1], name, n, name)
		t.Logf("galera faults: enqueued %d jobs on queue %s through node 2 in %v", n, name, time.Since(start).Round(time.Millisecond))
		return ids
	}

	// Jobs/s, no faults: three Workers on node 1, then one on each node.
	tenth := max(total/10, 1000)
	enqueue("one", tenth)
	took1 := faultPhase(t, ctx, q1, []int{1, 2, 3}, "one", l, int64(tenth), logger, nil)
	c1, n1 := counters(d1)
	enqueue("three", tenth)
	c3a, n3a := counters(ds)
	took3 := faultPhase(t, ctx, qs, []int{1, 2, 3}, "three", l, int64(tenth), logger, nil)
	c3b, n3b := counters(ds)
	t.Logf("galera faults: %d jobs, 3 Workers (concurrency 8) on node 1: %v, %.0f jobs/s; %d claims, %.1f conflicts per 1,000",
		tenth, took1.Round(time.Millisecond), float64(tenth)/took1.Seconds(), n1, per1000(c1, n1))
	t.Logf("galera faults: %d jobs, 1 Worker (concurrency 8) on each node: %v, %.0f jobs/s; %d claims, %.1f conflicts per 1,000",
		tenth, took3.Round(time.Millisecond), float64(tenth)/took3.Seconds(), n3b-n3a, per1000(c3b-c3a, n3b-n3a))

	// The faults.
	ids := enqueue("faults", total)
	base := l.completed.Load()
	progress := func() float64 { return float64(l.completed.Load()-base) / float64(total) }
	waitProgress := func(p float64) {
		for progress() < p && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	begin := func(what string, node int) int {
		faultsMu.Lock()
		defer faultsMu.Unlock()
		faults = append(faults, fault{what: what, node: node, from: time.Now()})
		return len(faults) - 1
	}
	end := func(i int) {
		faultsMu.Lock()
		faults[i].to = time.Now()
		faultsMu.Unlock()
	}
	// started reports a fault begun while jobs were left to claim.
	started := func(what string) bool {
		if p := progress(); p >= 1 {
			t.Errorf("%s: all jobs done before it began: raise DBQ_GALERA_FAULT_JOBS", what)
			return false
		}
		return true
	}
	kill := func(node int) bool {
		i := begin("kill", node)
		if err := ctl("kill", strconv.Itoa(node)); err != nil {
			t.Error(err)
			return false
		}
		t.Logf("galera faults: node %d killed -9 at %.0f%% of the jobs", node, 100*progress())
		started(fmt.Sprintf("kill node %d", node))
		time.Sleep(5 * time.Second)
		if err := ctl("start", strconv.Itoa(node)); err != nil {
			t.Error(err)
			return false
		}
		end(i)
		t.Logf("galera faults: node %d restarted and Synced after %v, at %.0f%%", node,
			faults[i].to.Sub(faults[i].from).Round(time.Millisecond), 100*progress())
		return true
	}
	cutOff := func() bool {
		i := begin("cut", 1)
		if err := ctl("isolate", "1", "1"); err != nil {
			t.Error(err)
			return false
		}
		t.Logf("galera faults: node 1 cut off at %.0f%% of the jobs", 100*progress())
		started("cut node 1")
		st := ""
		for st = wsrepStatus(ns, 0, "wsrep_cluster_status"); (st == "" || st == "Primary") && time.Since(faults[i].from) < 20*time.Second; st = wsrepStatus(ns, 0, "wsrep_cluster_status") {
			time.Sleep(100 * time.Millisecond)
		}
		if st == "" || st == "Primary" {
			t.Errorf("node 1 still %q 20 s after it was cut off", st)
		} else {
			faultsMu.Lock()
			faults[i].outOfQuorum = time.Now()
			faultsMu.Unlock()
			t.Logf("galera faults: node 1 out of the primary component (%s) after %v", st,
				faults[i].outOfQuorum.Sub(faults[i].from).Round(time.Millisecond))
		}
		time.Sleep(time.Until(faults[i].from.Add(20 * time.Second)))
		faultsMu.Lock()
		faults[i].back = time.Now()
		faultsMu.Unlock()
		if err := ctl("isolate", "1", "0"); err != nil {
			t.Error(err)
			return false
		}
		for {
			st, state := wsrepStatus(ns, 0, "wsrep_cluster_status"), wsrepStatus(ns, 0, "wsrep_local_state_comment")
			if st == "Primary" && state == "Synced" {
				break
			}
			if time.Since(faults[i].from) > 5*time.Minute {
				t.Errorf("node 1 not back in the primary component 5 minutes after the cut (%s, %s)", st, state)
				return false
			}
			time.Sleep(100 * time.Millisecond)
		}
		end(i)
		t.Logf("galera faults: node 1 back and Synced %v after the cut began, at %.0f%%",
			faults[i].to.Sub(faults[i].from).Round(time.Millisecond), 100*progress())
		return true
	}
	// A restart rejoins by a full state transfer, which takes minutes on a
	// loaded machine: the faults follow one another from early on.
	inject := func() {
		waitProgress(0.05)
		_ = kill(2) && cutOff() && kill(3)
	}
	cf0, nf0 := counters(ds)
	wall := faultPhase(t, ctx, qs, []int{1, 2, 3}, "faults", l, int64(total), logger, inject)
	cf1, nf1 := counters(ds)

	// The ledger.
	l.mu.Lock()
	defer l.mu.Unlock()
	faultsMu.Lock()
	defer faultsMu.Unlock()
	runsOf := map[int][]faultRun{}
	for _, r := range l.runs {
		runsOf[r.job] = append(runsOf[r.job], r)
	}
	// A run is in a fault when it started during one, or a lease before:
	// on the node itself (killed, cut off), or on another one (a kill
	// stalls every commit until the others evict the dead node; a restart
	// blocks its donor's writes for the state transfer).
	inFault := func(r faultRun) (own bool, ok bool) {
		for _, f := range faults {
			if !r.at.Before(f.from.Add(-cfg.Lease)) && !r.at.After(f.to) {
				own, ok = own || f.node == r.node, true
			}
		}
		return own, ok
	}
	var lost, repeated, sameAttempt, unexplained int
	why := map[string]int{} // the earlier runs of repeated jobs, by how they ended
	perNode := map[int]int{}
	for _, id := range ids {
		rs := runsOf[int(id)]
		if len(rs) == 0 {
			lost++
			continue
		}
		for _, r := range rs {
			perNode[r.node]++
		}
		if len(rs) == 1 {
			continue
		}
		repeated++
		seen := map[int]bool{}
		for k, r := range rs {
			if seen[r.attempt] {
				sameAttempt++
				t.Errorf("job %d ran twice at attempt %d: %+v", id, r.attempt, rs)
			}
			seen[r.attempt] = true
			if k == len(rs)-1 {
				continue
			}
			own, ok := inFault(r)
			switch {
			case !r.ended || r.outcome == queue.OutcomeCompleted || !ok:
				unexplained++
				t.Errorf("job %d ran again after a run not explained by a fault: %+v", id, rs)
			case own:
				why[fmt.Sprintf("%s on the faulted node", r.outcome)]++
			default:
				why[fmt.Sprintf("%s on another node during a fault", r.outcome)]++
			}
		}
	}
	var cutClaims int
	for _, f := range faults {
		if f.what != "cut" || f.outOfQuorum.IsZero() {
			continue
		}
		for _, c := range l.claims {
			if c.node == f.node && c.got > 0 && c.start.After(f.outOfQuorum) && c.end.Before(f.back) {
				cutClaims++
			}
		}
	}
	lefts := make([]string, len(ds))
	for i, d := range ds {
		var left int
		if err := d.db.QueryRow("SELECT COUNT(*) FROM " + d.stmts.jobsTable).Scan(&left); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		lefts[i] = strconv.Itoa(left)
		if left != 0 {
			t.Errorf("node %d: %d jobs left in the table", i+1, left)
		}
	}
	var desc []string
	for _, f := range faults {
		desc = append(desc, fmt.Sprintf("%s node %d for %v", f.what, f.node, f.to.Sub(f.from).Round(100*time.Millisecond)))
	}
	var perNodeS []string
	for _, k := range slices.Sorted(maps.Keys(perNode)) {
		perNodeS = append(perNodeS, fmt.Sprintf("node %d: %d", k, perNode[k]))
	}
	t.Logf("galera faults: %d jobs in %v (%.0f jobs/s) with %s", total, wall.Round(time.Millisecond), float64(total)/wall.Seconds(), strings.Join(desc, ", "))
	t.Logf("galera faults: lost %d, repeated %d (unexplained %d), runs at the same attempt %d, claims on the cut node out of quorum %d; runs per node: %s; jobs left per node: %s",
		lost, repeated, unexplained, sameAttempt, cutClaims, strings.Join(perNodeS, ", "), strings.Join(lefts, "/"))
	t.Logf("galera faults: the earlier runs of repeated jobs: %v", why)
	t.Logf("galera faults: %d claims, %.1f certification conflicts per 1,000; %d claim-failed warnings", nf1-nf0, per1000(cf1-cf0, nf1-nf0), logs.count("WARN dbq: claim failed"))
	if len(faults) != 3 {
		t.Errorf("%d faults injected, want 3: %s", len(faults), strings.Join(desc, ", "))
	}
	if lost != 0 {
		t.Errorf("%d jobs lost", lost)
	}
	if cutClaims != 0 {
		t.Errorf("%d claims on node 1 took jobs while it was out of the primary component", cutClaims)
	}
}

func (r faultRun) String() string {
	end := "still running"
	if r.ended {
		end = r.outcome.String()
	}
	return fmt.Sprintf("node %d, attempt %d, started %s, %s", r.node, r.attempt, r.at.Format("15:04:05.000"), end)
}
