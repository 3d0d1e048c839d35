package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgxpool"
)

// runLog records the runs of a job: when each began and ended and how, so
// a test can tell whether two ever overlapped, and for how long.
type runLog struct {
	mu   sync.Mutex
	runs []span
}

// span is one run: lost when its handler was cancelled because its hold
// was lost.
type span struct {
	from, to time.Time
	lost     bool
}

func (l *runLog) begin() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, span{from: time.Now()})
	return len(l.runs) - 1
}

// end records that run i ended on a handler ctx ending with cause.
func (l *runLog) end(i int, cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[i].to = time.Now()
	l.runs[i].lost = errors.Is(cause, queue.ErrLeaseLost)
}

// overlaps counts pairs of runs that were under way at once, and of
// those the ones the lock check does not explain: the earlier run was not
// cancelled for a lost hold, or both ran at once for longer than window
// (the documented bound from a lost connection to its handlers' cancel).
func (l *runLog) overlaps(window time.Duration) (n, outside int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, a := range l.runs {
		for _, b := range l.runs[i+1:] {
			aTo, bTo := a.to, b.to
			if aTo.IsZero() {
				aTo = time.Now()
			}
			if bTo.IsZero() {
				bTo = time.Now()
			}
			if !a.from.Before(bTo) || !b.from.Before(aTo) {
				continue
			}
			n++
			first := a
			if b.from.Before(a.from) {
				first = b
			}
			both := minTime(aTo, bTo).Sub(maxTime(a.from, b.from))
			if !first.lost || both > window {
				outside++
			}
		}
	}
	return n, outside
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

// outcomeHooks collects the outcome of every run.
type outcomeHooks struct {
	queue.NopHooks
	mu        sync.Mutex
	got       []queue.Outcome
	completed map[int64]bool
}

func (h *outcomeHooks) JobEnd(_ context.Context, j *queue.Job, o queue.Outcome, _ time.Duration, _ error) {
	h.mu.Lock()
	h.got = append(h.got, o)
	if o == queue.OutcomeCompleted {
		if h.completed == nil {
			h.completed = map[int64]bool{}
		}
		h.completed[j.ID] = true
	}
	h.mu.Unlock()
}

// done reports whether a run of job id ended completed.
func (h *outcomeHooks) done(id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.completed[id]
}

func (h *outcomeHooks) count(o queue.Outcome) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, g := range h.got {
		if g == o {
			n++
		}
	}
	return n
}

// poolWith returns a pool of its own whose sessions run with the given
// server settings (e.g. idle_session_timeout), closed at t's cleanup.
func poolWith(t testing.TB, settings map[string]string) *pgxpool.Pool {
	t.Helper()
	testPool(t)
	cfg, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	for k, v := range settings {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// lockHolder returns the server process holding the advisory lock of job
// id of q's table, 0 when none does.
func lockHolder(t testing.TB, q *queue.Queue, id int64) int32 {
	t.Helper()
	var pid int32
	err := testPool(t).QueryRow(testCtx(t), `
		SELECT coalesce(max(pid), 0) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND granted
			AND classid = $1::regclass::oid AND objid::int8 = $2`, driverOf(t, q).Table(), id).Scan(&pid)
	if err != nil {
		t.Fatalf("pg_locks: %v", err)
	}
	return pid
}

// TestAdvisoryLostLockConnectionCancelsHandler: when the connection whose
// session holds a running job's lock ends (here pg_terminate_backend; an
// idle timeout, a proxy or a network cut do the same), the Worker notices
// within LockCheck, cancels the handler with a lease-lost cause, reports
// OutcomeLeaseLost, and claims again on a new connection; the job then
// runs once more, to completion. DBQ_LOCKCHECK_TRIALS=n runs n trials with
// the default LockCheck and logs the time from loss to cancel.
func TestAdvisoryLostLockConnectionCancelsHandler(t *testing.T) {
	t.Parallel()
	trials, lockCheck := 1, 600*time.Millisecond
	if s := os.Getenv("DBQ_LOCKCHECK_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("DBQ_LOCKCHECK_TRIALS=%q: want a positive number", s)
		}
		trials, lockCheck = n, 0
	}
	var took []time.Duration
	for range trials {
		took = append(took, lostLockTrial(t, lockCheck))
	}
	slices.Sort(took)
	t.Logf("connection loss to handler cancel over %d trials (LockCheck %v): p50 %v, max %v",
		trials, cmp.Or(lockCheck, DefaultLockCheck), took[len(took)/2], took[len(took)-1])
}

// lostLockTrial runs one job on a Worker of one slot, ends the connection
// holding its lock, and returns how long the Worker took to cancel the
// handler.
func lostLockTrial(t *testing.T, lockCheck time.Duration) time.Duration {
	t.Helper()
	q := newQueue(t, Config{LockCheck: lockCheck}, true)
	id := enqueueN(t, q, "lost", 1)[0]
	var (
		runs    atomic.Int32
		started = make(chan struct{})
		causes  = make(chan error, 4)
	)
	h := func(ctx context.Context, j *queue.Job) error {
		if runs.Add(1) > 1 {
			return nil // the second run completes
		}
		close(started)
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(30 * time.Second):
			causes <- nil
			return errors.New("never cancelled")
		}
	}
	hooks := &outcomeHooks{}
	// One slot: the worker cannot claim the job again while the first run
	// goes on, so only the lock check can end it.
	w, err := queue.NewWorker(q, h, queue.WorkerConfig{Queue: "lost", Concurrency: 1, PollInterval: 50 * time.Millisecond, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not start")
	}
	pid := lockHolder(t, q, id)
	if pid == 0 {
		t.Fatal("no session holds the running job's lock")
	}
	// The loss falls anywhere between two checks.
	time.Sleep(rand.N(cmp.Or(lockCheck, DefaultLockCheck) / 3))
	var ok bool
	if err := testPool(t).QueryRow(testCtx(t), "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	killed := time.Now()
	cause := <-causes
	took := time.Since(killed)
	if !errors.Is(cause, queue.ErrLeaseLost) {
		t.Fatalf("handler ended with cause %v, want one matching queue.ErrLeaseLost", cause)
	}
	for deadline := time.Now().Add(20 * time.Second); countRows(t, q, "") > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job was not run again to completion")
		}
	}
	for deadline := time.Now().Add(5 * time.Second); hooks.count(queue.OutcomeLeaseLost) == 0 || hooks.count(queue.OutcomeCompleted) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("outcomes %v, want one lease_lost and one completed", hooks.got)
		}
	}
	if st := w.Stats(); st.LeasesLost != 1 || st.Completed != 1 {
		t.Errorf("stats %+v, want 1 lease lost and 1 completed", st)
	}
	return took
}

// TestAdvisoryIdleSessionTimeout: a server (or proxy) that ends idle
// sessions must not end a session holding running jobs' locks. Workers on
// sessions with idle_session_timeout shorter than the jobs run them each
// once, never two at once, and complete them all. DBQ_SOAK (a duration)
// runs it longer with a steady stream of jobs.
func TestAdvisoryIdleSessionTimeout(t *testing.T) {
	t.Parallel()
	idle := 1500 * time.Millisecond
	soak := time.Duration(0)
	if s := os.Getenv("DBQ_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("DBQ_SOAK=%q: %v", s, err)
		}
		soak, idle = d, 2*time.Second
	}
	base := newQueue(t, Config{}, true)
	schema := base.Config().Schema

	var (
		mu    sync.Mutex
		logs  = map[int64]*runLog{}
		total atomic.Int64
	)
	logOf := func(id int64) *runLog {
		mu.Lock()
		defer mu.Unlock()
		l := logs[id]
		if l == nil {
			l = &runLog{}
			logs[id] = l
		}
		return l
	}
	h := func(ctx context.Context, j *queue.Job) error {
		l := logOf(j.ID)
		i := l.begin()
		defer func() { l.end(i, context.Cause(ctx)) }()
		total.Add(1)
		d := 2*time.Second + time.Duration(j.ID%5)*time.Second // 2–6 s
		if soak == 0 {
			d = 4 * time.Second
		}
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	hooks := &outcomeHooks{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var workers []*queue.Worker
	// Before the pools close (cleanups run last first), even on failure.
	t.Cleanup(func() { stop(); wg.Wait() })
	for range 2 {
		pool := poolWith(t, map[string]string{"idle_session_timeout": fmt.Sprint(idle.Milliseconds())})
		q, err := New(pool, Config{Config: queue.Config{Schema: schema}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Close() })
		w, err := queue.NewWorker(q, h, queue.WorkerConfig{Queue: "idle", Concurrency: 4, PollInterval: 3 * idle, DisableWakeups: true, Hooks: hooks})
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
	}
	ids := enqueueN(t, base, "idle", 1)
	for end := time.Now().Add(soak); time.Now().Before(end); time.Sleep(time.Second) {
		ids = append(ids, enqueueN(t, base, "idle", 1)...)
	}
	for deadline := time.Now().Add(90 * time.Second); countRows(t, base, "") > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%d of %d jobs still in the table 90s after the last was enqueued", countRows(t, base, ""), len(ids))
			break
		}
	}
	stop()
	wg.Wait()
	// Only in this window after a lost connection may a job run twice at
	// once (docs/postgres.md, "A lost lock connection").
	window := 2 * DefaultLockCheck / 3
	overlaps, outside, completed := 0, 0, 0
	for _, id := range ids {
		l := logOf(id)
		n, o := l.overlaps(window)
		overlaps, outside = overlaps+n, outside+o
		if hooks.done(id) {
			completed++
		}
	}
	var lost int64
	for _, w := range workers {
		lost += w.Stats().LeasesLost
	}
	t.Logf("idle_session_timeout %v, %v of enqueueing: %d jobs enqueued, %d runs, %d completed, %d lost holds, "+
		"%d jobs run twice at once (%d of them outside the %v detection window)",
		idle, soak, len(ids), total.Load(), completed, lost, overlaps, outside, window)
	if outside != 0 {
		t.Errorf("%d times a job ran twice at once outside the detection window", outside)
	}
	if overlaps != 0 {
		t.Errorf("%d times a job ran twice at once", overlaps)
	}
	if completed != len(ids) {
		t.Errorf("%d of %d jobs completed", completed, len(ids))
	}
	if lost != 0 || total.Load() != int64(len(ids)) {
		t.Errorf("%d runs of %d jobs, %d holds lost: the idle timeout ended a session holding jobs", total.Load(), len(ids), lost)
	}
}

// lateCtx is a context whose deadline has passed but that does not say
// so yet: an Extend that waited for the claimer's connection past its
// heartbeat interval sees one like it.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestAdvisoryExtendLateKeepsHealthyConnection: an Extend whose ctx runs
// out before its ping is sent (it waited for a claim or a completion on
// the same connection) still gives the ping its time, and a healthy
// connection keeps its locks. Dropping it would give running jobs to other
// workers: under load, make chaos saw five jobs run twice that way.
func TestAdvisoryExtendLateKeepsHealthyConnection(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	id := enqueueN(t, q, "late", 1)[0]
	c := advisoryClaimer(t, q)
	jobs := claim(t, c, "late", 1)
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("claimed %v, want job %d", queue.IDs(jobs), id)
	}
	pid := c.backendPID()
	if err := c.Extend(lateCtx{context.Background()}, []queue.Lease{jobs[0].Lease()}); err != nil {
		t.Fatalf("Extend on a healthy connection with its deadline just passed: %v", err)
	}
	if got := c.backendPID(); got != pid || lockHolder(t, q, id) != int32(pid) {
		t.Fatalf("after Extend the claimer's backend is %d (was %d) and job %d's lock is held by %d",
			got, pid, id, lockHolder(t, q, id))
	}
	if err := c.Complete(testCtx(t), []queue.Lease{jobs[0].Lease()}); err != nil {
		t.Fatalf("Complete after Extend: %v", err)
	}
}

// cutProxy forwards TCP connections to the PostgreSQL server until cut,
// after which it forwards nothing and closes nothing, as a network that
// drops every packet does: neither end hears of it.
type cutProxy struct {
	ln    net.Listener
	addr  string
	cut   chan struct{}
	once  sync.Once
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, addr: ln.Addr().String(), cut: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.cut:
			<-make(chan struct{}) // hold on; close ends the goroutine's conns
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// close ends every connection on both sides, as the network coming back
// and TCP resetting would.
func (p *cutProxy) close() {
	p.once.Do(func() { close(p.cut) })
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// TestAdvisoryNetworkCutCancelsHandler: a network that silently stops
// carrying the lock connection's packets (no reset, no error) makes the
// lock check's ping go unanswered; the Worker cancels the handler with a
// lease-lost cause within LockCheck rather than waiting on TCP, and once
// the server hears the connection is gone the job runs again to completion.
func TestAdvisoryNetworkCutCancelsHandler(t *testing.T) {
	t.Parallel()
	const lockCheck = 900 * time.Millisecond
	base := newQueue(t, Config{}, true)
	cc, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, net.JoinHostPort(cc.ConnConfig.Host, strconv.Itoa(int(cc.ConnConfig.Port))))
	host, port, _ := net.SplitHostPort(proxy.addr)
	cc.ConnConfig.Host = host
	p, _ := strconv.Atoi(port)
	cc.ConnConfig.Port = uint16(p)
	cc.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(testCtx(t), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q, err := New(pool, Config{Config: queue.Config{Schema: base.Config().Schema}, LockCheck: lockCheck})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	id := enqueueN(t, base, "cut", 1)[0]
	started, causes := make(chan struct{}), make(chan error, 1)
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		close(started)
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(30 * time.Second):
			causes <- nil
		}
		return ctx.Err()
	}, queue.WorkerConfig{Queue: "cut", Concurrency: 1, PollInterval: time.Hour, DisableWakeups: true, ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-started
	if lockHolder(t, base, id) == 0 {
		t.Fatal("no session holds the running job's lock")
	}
	proxy.once.Do(func() { close(proxy.cut) })
	cutAt := time.Now()
	cause := <-causes
	t.Logf("network cut to handler cancel: %v (LockCheck %v)", time.Since(cutAt), lockCheck)
	if !errors.Is(cause, queue.ErrLeaseLost) {
		t.Fatalf("handler ended with cause %v, want one matching queue.ErrLeaseLost", cause)
	}
	stop()
	select {
	case err := <-done:
		t.Logf("Run with its connections cut: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return with its connections cut")
	}
	// The network comes back: the server ends the session and its locks.
	proxy.close()
	c := advisoryClaimer(t, base)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if jobs := claim(t, c, "cut", 1); len(jobs) == 1 && jobs[0].ID == id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not become claimable once the cut connection ended")
		}
	}
}
