package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// CheckResult is one probe of [Check]: what it looked at, whether it
// passed, what it saw and, when it failed, what to do.
type CheckResult struct {
	Name string
	OK   bool
	Saw  string
	Fix  string
}

// Check probes, before any worker runs, that q's database and the path to
// it keep the claim's promise, for a team's CI or first run: the tables
// exist; the account may enqueue, claim, complete and release; two
// claimers never get one job, and a released job comes back; and the
// driver's own probes ([Checker]). It works on a queue of its own,
// "dbq.check.<random>", and removes its jobs whatever happens (a failed
// probe, a cancelled ctx); when it cannot — an account without DELETE —
// a failed "cleanup" result names the jobs left. The results come
// in the order run; a failed probe may make later ones pointless, and
// they say so.
func Check(ctx context.Context, q *Queue) []CheckResult {
	if _, err := q.Stats(ctx); err != nil {
		return []CheckResult{{Name: "schema", Saw: err.Error(), Fix: fixFor(err)}}
	}
	out := []CheckResult{{Name: "schema", OK: true, Saw: "the jobs table answers"}}
	out = append(out, checkClaims(ctx, q)...)
	if c, ok := checker(q.drv); ok {
		out = append(out, c.Check(ctx)...)
	}
	return out
}

// fixFor says what to do about a probe's error.
func fixFor(err error) string {
	switch {
	case errors.Is(err, ErrNotMigrated):
		return "run `dbq migrate up` (or apply the migrations `dbq migrate sql` prints) with an account that may create tables"
	case errors.Is(err, ErrUnsupportedServer):
		return "change the setup the error names: the claim's promise does not hold on this path to the database"
	case errors.Is(err, ErrInvalidConfig):
		return "see the error: a setting must change"
	}
	return "grant the account SELECT, INSERT, UPDATE and DELETE on dbq's tables, and check that the database answers"
}

// checkClaims is Check's round trip through two claimers, on a queue of
// its own.
func checkClaims(ctx context.Context, q *Queue) (out []CheckResult) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "dbq.check." + hex.EncodeToString(b[:])
	res := func(probe string, err error, saw string) bool {
		r := CheckResult{Name: probe, OK: err == nil, Saw: saw}
		if err != nil {
			r.Saw, r.Fix = err.Error(), fixFor(err)
		}
		out = append(out, r)
		return err == nil
	}
	var claimers []Claimer
	defer func() {
		// Whatever happened — a failed probe, a cancelled ctx, even an
		// enqueue that committed and then failed — give back what is
		// held, then remove what is left of the probe's queue.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkCleanupTimeout)
		defer cancel()
		for _, c := range claimers {
			_ = c.Close(cctx)
		}
		if r, ok := removeProbeJobs(cctx, q, name); !ok {
			out = append(out, r)
		}
	}()
	ids, err := q.Enqueue(ctx, NewJob{Queue: name, Payload: []byte("a")}, NewJob{Queue: name, Payload: []byte("b")})
	if !res("enqueue", err, "2 jobs stored in queue "+name) {
		return out
	}
	newClaimer := func() (Claimer, error) {
		c, err := q.NewClaimer(ctx)
		if err == nil {
			claimers = append(claimers, c)
		}
		return c, err
	}
	a, err := newClaimer()
	var first []*Job
	if err == nil {
		first, err = a.Claim(ctx, name, 1)
	}
	if err == nil && (len(first) != 1 || !slices.Contains(ids, first[0].ID)) {
		err = fmt.Errorf("%w: the first claimer got %d of the probe's jobs, want 1", ErrUnsupportedServer, len(first))
	}
	if !res("claim", err, "a claimer took one probe job") {
		return out
	}
	b2, err := newClaimer()
	var second []*Job
	if err == nil {
		second, err = b2.Claim(ctx, name, 2)
	}
	if err == nil && (len(second) != 1 || second[0].ID == first[0].ID) {
		err = fmt.Errorf("%w: a second claimer asking for 2 got jobs %v while the first held job %d, want only the other one"+
			" (the database does not keep one claimer's job from another)", ErrUnsupportedServer, IDs(second), first[0].ID)
	}
	if !res("exclusive", err, "a second claimer skipped the held job and took the other") {
		return out
	}
	err = a.Release(ctx, []Lease{first[0].Lease()})
	var again []*Job
	if err == nil {
		again, err = b2.Claim(ctx, name, 1)
	}
	if err == nil && (len(again) != 1 || again[0].ID != first[0].ID) {
		err = fmt.Errorf("%w: after the first claimer released job %d, a claim got %v", ErrUnsupportedServer, first[0].ID, IDs(again))
	}
	if !res("release", err, "a released job was claimable again at once") {
		return out
	}
	err = b2.Complete(ctx, append(Leases(second), Leases(again)...))
	if err == nil {
		var st []QueueStats
		if st, err = q.Stats(ctx); err == nil {
			for _, s := range st {
				if s.Queue == name && s.Ready+s.Held+s.Scheduled+s.Dead > 0 {
					err = fmt.Errorf("dbq: %d probe jobs remain after both were completed", s.Ready+s.Held+s.Scheduled+s.Dead)
				}
			}
		}
	}
	res("complete", err, "completed jobs left the table")
	return out
}

// checkCleanupTimeout bounds the removal of Check's probe jobs, which runs
// even when the caller's ctx has ended.
const checkCleanupTimeout = 30 * time.Second

// removeProbeJobs deletes every job of Check's probe queue name and
// reports ok when none is left; otherwise its "cleanup" result says which
// jobs stay and why (an account without DELETE cannot remove them).
func removeProbeJobs(ctx context.Context, q *Queue, name string) (r CheckResult, ok bool) {
	left, err := q.Jobs(ctx, JobFilter{Queue: name})
	if err == nil && len(left) > 0 {
		if _, err = q.Cancel(ctx, IDs(left)...); err == nil {
			left, err = q.Jobs(ctx, JobFilter{Queue: name})
		}
	}
	if err == nil && len(left) == 0 {
		return CheckResult{}, true
	}
	r = CheckResult{Name: "cleanup", Saw: "the probe jobs of queue " + name + " may remain",
		Fix: "`dbq cancel` them with an account that may DELETE from dbq's tables"}
	if len(left) > 0 {
		r.Saw = fmt.Sprintf("%d probe jobs remain in queue %s (ids %v)", len(left), name, IDs(left))
	}
	if err != nil {
		r.Saw += ": " + err.Error()
		r.Fix = fixFor(err) + "; then " + r.Fix
	}
	return r, false
}
