//go:build linux

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// event is one fault: the workers it hit, when it began (the workers were
// stopped and the snapshot read right after) and ended (the worker was
// killed or resumed, the server answered again), and the jobs the workers
// held when it began.
type event struct {
	kind   string
	pids   map[int]bool
	t0, t1 int64 // Unix nanoseconds
	held   map[int64]bool
}

// explains reports whether e explains run r: r was a run of a worker e
// hit, it started before e ended (or within Slack after: claimed before,
// started after), and its job was held at e's start, or r had not
// finished when e began.
func (e *event) explains(r *run) bool {
	if !e.pids[r.pid] || r.started > e.t1+Slack.Nanoseconds() {
		return false
	}
	return e.held[r.job] || r.finished == 0 || r.finished >= e.t0
}

// settle is how long a stopped worker is left before the snapshot, so
// that statements it sent just before are done on the server.
const settle = 150 * time.Millisecond

// inject runs the planned faults, spread over the drain: the i-th of n
// waits until 5% + 70%·(i+1)/(n+1) of the jobs are done.
func (h *harness) inject(ctx context.Context) {
	var plan []string
	for kind, n := range map[string]int{"kill": h.cfg.Kills, "cut": h.cfg.Cuts, "freeze": h.cfg.Freezes, "restart": h.cfg.Restarts} {
		for range n {
			plan = append(plan, kind)
		}
	}
	slices.Sort(plan) // map order is random; the seed decides
	h.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	for i, kind := range plan {
		at := 0.05 + 0.70*float64(i+1)/float64(len(plan)+1)
		if !h.awaitProgress(ctx, at, fmt.Sprintf("%s (fault %d of %d)", kind, i+1, len(plan))) {
			return
		}
		if !sleep(ctx, time.Duration(h.rng.Int64N(int64(300*time.Millisecond)))) {
			return
		}
		switch kind {
		case "kill":
			h.kill(ctx)
		case "freeze":
			h.freeze(ctx)
		case "cut":
			h.cut(ctx)
		case "restart":
			h.restart(ctx)
		}
	}
}

// awaitProgress waits until the fraction at of the jobs has left the
// table. It reports false, recording a problem, when the queue drained
// or every worker died first: the fault would have nothing to hit.
func (h *harness) awaitProgress(ctx context.Context, at float64, next string) bool {
	for {
		n, err := h.remaining(ctx)
		switch {
		case ctx.Err() != nil:
			h.problem("the run's time was up before the %s", next)
			return false
		case err != nil:
		case n == 0:
			h.problem("the queue drained before the %s: give the run more jobs or a longer handler delay", next)
			return false
		case 1-float64(n)/float64(h.cfg.Jobs) >= at:
			return true
		}
		if h.workers.live() == 0 {
			h.problem("every worker had exited before the %s", next)
			return false
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// victim picks a live worker at random.
func (h *harness) victim() *worker {
	ws := h.workers.alive()
	if len(ws) == 0 {
		return nil
	}
	return ws[h.rng.IntN(len(ws))]
}

// stopAndSnapshot stops ws with SIGSTOP, waits settle, and returns what
// they hold (see heldBy), their pids and when they were stopped.
func (h *harness) stopAndSnapshot(ctx context.Context, ws []*worker) (map[int64]bool, map[int]bool, int64) {
	pids := map[int]bool{}
	for _, w := range ws {
		_ = w.signal(syscall.SIGSTOP)
		pids[w.pid] = true
	}
	t0 := time.Now().UnixNano()
	sleep(ctx, settle)
	held, err := h.heldBy(ctx, pids)
	if err != nil {
		h.problem("reading the jobs held by pids %v: %v", keys(pids), err)
	}
	return held, pids, t0
}

// kill stops a worker, reads what it holds, kills it with SIGKILL and
// starts a replacement.
func (h *harness) kill(ctx context.Context) {
	w := h.victim()
	if w == nil {
		return
	}
	h.workers.plan(w)
	held, pids, t0 := h.stopAndSnapshot(ctx, []*worker{w})
	_ = w.signal(syscall.SIGKILL)
	<-w.done
	h.events = append(h.events, event{kind: "kill", pids: pids, t0: t0, t1: time.Now().UnixNano(), held: held})
	h.report.Kills++
	h.logf("killed worker %d (pid %d) holding %d jobs", w.n, w.pid, len(held))
	if _, err := h.workers.start(); err != nil {
		h.problem("starting a replacement worker: %v", err)
	}
}

// freeze stops a worker for longer than its lease, then resumes it.
func (h *harness) freeze(ctx context.Context) {
	w := h.victim()
	if w == nil {
		return
	}
	// On SQLite every write takes the database's one write lock: a worker
	// frozen while it holds it stalls every writer, so that live workers'
	// leases run out and their jobs are taken again. There the freeze
	// reaches every worker, as a server restart does (see package sqlite).
	hit := []*worker{w}
	if h.d == dialect.SQLite {
		hit = h.workers.alive()
	}
	held, pids, t0 := h.stopAndSnapshot(ctx, hit)
	for _, o := range hit {
		if o != w {
			_ = o.signal(syscall.SIGCONT)
		}
	}
	sleep(ctx, h.cfg.Freeze-settle)
	_ = w.signal(syscall.SIGCONT)
	t1 := time.Now().UnixNano()
	h.events = append(h.events, event{kind: "freeze", pids: pids, t0: t0, t1: t1, held: held})
	h.report.Freezes++
	h.logf("froze worker %d (pid %d) holding %d jobs for %v", w.n, w.pid, len(held), h.cfg.Freeze)
	h.awaitRun(ctx, []*worker{w}, t1, "its freeze")
}

// cut ends a worker's connections from the server side while it is
// stopped, then resumes it.
func (h *harness) cut(ctx context.Context) {
	w := h.victim()
	if w == nil {
		return
	}
	held, pids, t0 := h.stopAndSnapshot(ctx, []*worker{w})
	n, err := h.cutConnections(ctx, w)
	_ = w.signal(syscall.SIGCONT)
	t1 := time.Now().UnixNano()
	h.events = append(h.events, event{kind: "cut", pids: pids, t0: t0, t1: t1, held: held})
	h.report.Cuts++
	h.report.ConnectionsCut += n
	switch {
	case err != nil:
		h.problem("cutting the connections of worker %d (pid %d): %v", w.n, w.pid, err)
	case n == 0:
		h.problem("found no connection of worker %d (pid %d) to cut", w.n, w.pid)
	}
	h.logf("cut %d connections of worker %d (pid %d) holding %d jobs", n, w.n, w.pid, len(held))
	h.awaitRun(ctx, []*worker{w}, t1, "its connections were cut")
}

// restart restarts the database server under the running workers.
func (h *harness) restart(ctx context.Context) {
	ws := h.workers.alive()
	held, pids, t0 := h.stopAndSnapshot(ctx, ws)
	for _, w := range ws {
		_ = w.signal(syscall.SIGCONT)
	}
	began := time.Now()
	err := h.restartServer(ctx)
	t1 := time.Now().UnixNano()
	h.events = append(h.events, event{kind: "restart", pids: pids, t0: t0, t1: t1, held: held})
	h.report.Restarts++
	if err != nil {
		h.problem("restarting the server: %v", err)
		return
	}
	h.logf("restarted the server in %v; the %d workers held %d jobs", time.Since(began).Round(time.Millisecond), len(ws), len(held))
	h.awaitRun(ctx, ws, t1, "the server restart")
}

// awaitRun waits until each of ws that is still running has started a
// run after the Unix-nanosecond time after: it reconnected on its own.
func (h *harness) awaitRun(ctx context.Context, ws []*worker, after int64, what string) {
	deadline := time.Now().Add(2 * time.Minute)
	waiting := slices.Clone(ws)
	for len(waiting) > 0 {
		var still []*worker
		for _, w := range waiting {
			if w.exited() {
				continue // a crash is its own problem; a kill is planned
			}
			var first int64
			err := h.db.QueryRowContext(ctx, "SELECT COALESCE(MIN(started_ns), 0) FROM "+h.ledger+
				" WHERE pid = "+h.ph(1)+" AND started_ns > "+h.ph(2), w.pid, after).Scan(&first)
			if err == nil && first > 0 {
				if d := time.Duration(first - after); d > h.report.Reconnect {
					h.report.Reconnect = d
				}
				continue
			}
			still = append(still, w)
		}
		waiting = still
		if len(waiting) == 0 {
			return
		}
		if n, err := h.remaining(ctx); err == nil && n == 0 {
			h.problem("the queue drained before %d worker(s) ran a job after %s: cannot tell whether they reconnected", len(waiting), what)
			return
		}
		if time.Now().After(deadline) || !sleep(ctx, 100*time.Millisecond) {
			var names []string
			for _, w := range waiting {
				names = append(names, fmt.Sprintf("worker %d (pid %d), last log lines:\n%s", w.n, w.pid, w.logs.last(10)))
			}
			h.problem("no run started within 2m after %s by %s", what, strings.Join(names, "; "))
			return
		}
	}
}

// heldBy returns the jobs that the workers pids have run (or are running)
// and that are still in the jobs table: not completed.
func (h *harness) heldBy(ctx context.Context, pids map[int]bool) (map[int64]bool, error) {
	held := map[int64]bool{}
	if len(pids) == 0 {
		return held, nil
	}
	list := make([]string, 0, len(pids))
	for _, p := range keys(pids) {
		list = append(list, strconv.Itoa(p))
	}
	query := "SELECT DISTINCT l.job_id FROM " + h.ledger + " l JOIN " + h.jobs + " j ON j.id = l.job_id WHERE l.pid IN (" + strings.Join(list, ", ") + ")"
	err := h.retry(ctx, func(ctx context.Context) error {
		clear(held)
		rows, err := h.db.QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			held[id] = true
		}
		return rows.Err()
	})
	return held, err
}

func keys[K interface{ ~int | ~int64 }, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
