package queue_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

// sharingClaimer hands every claimer the jobs the first claim took, as a
// database whose SKIP LOCKED locks nothing would.
type sharingClaimer struct {
	queue.Claimer
	mu    *sync.Mutex
	first *[]*queue.Job
}

func (c *sharingClaimer) Claim(ctx context.Context, name string, n int) ([]*queue.Job, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *c.first != nil {
		return append([]*queue.Job(nil), *c.first...), nil
	}
	jobs, err := c.Claimer.Claim(ctx, name, n)
	*c.first = jobs
	return jobs, err
}

// Check passes on a sound driver and fails its exclusive probe, with a
// fix, on one whose claimers share jobs; either way it leaves no probe job.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	q, _ := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
	for _, r := range queue.Check(ctx, q) {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Saw)
		}
	}

	var (
		mu    sync.Mutex
		first []*queue.Job
	)
	inner := memq.New(time.Minute).Driver()
	d := struct {
		*wrapDriver
		queue.Admin
	}{&wrapDriver{Driver: inner, wrap: func(c queue.Claimer) queue.Claimer {
		return &sharingClaimer{Claimer: c, mu: &mu, first: &first}
	}}, inner.(queue.Admin)}
	q, _ = queue.New(d, queue.Config{})
	var failed *queue.CheckResult
	rs := queue.Check(ctx, q)
	for i := range rs {
		if !rs[i].OK {
			failed = &rs[i]
			break
		}
	}
	if failed == nil || failed.Name != "exclusive" || !strings.Contains(failed.Saw, "unsupported server") || failed.Fix == "" {
		t.Fatalf("check of claimers that share jobs: %+v, want the exclusive probe failed with a fix", rs)
	}
	jobs, err := q.Jobs(ctx, queue.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Fatalf("%d probe jobs left behind", len(jobs))
	}
}
