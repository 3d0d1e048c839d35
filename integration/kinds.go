package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

type kindEmail struct {
	To string `json:"to"`
}

func (kindEmail) Kind() string { return "email" }

type kindResize struct {
	W int `json:"w"`
	H int `json:"h"`
}

func (kindResize) Kind() string { return "resize" }

// KindsRoundTrip: typed jobs enqueued in the caller's transaction exist
// once it commits, carry their kind and their kind's defaults, are listed
// and counted per kind, and one Worker runs every kind of its queue,
// each decoded into its own type.
func testKindsRoundTrip(t *testing.T, s *suite) {
	if s.h.Tx == nil {
		t.Fatal("the harness has no Tx: typed enqueue in a transaction cannot be tested")
	}
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	k, err := queue.NewKinds(q, queue.KindsConfig{Queue: "kinds"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	record := func(s string) { mu.Lock(); defer mu.Unlock(); seen = append(seen, s) }
	if err := queue.Handle(k, queue.KindOptions{Priority: -2, MaxAttempts: 4}, func(_ context.Context, j *queue.TypedJob[kindEmail]) error {
		record("email:" + j.Args.To)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := queue.Handle(k, queue.KindOptions{}, func(_ context.Context, j *queue.TypedJob[kindResize]) error {
		record(fmt.Sprintf("resize:%dx%d", j.Args.W, j.Args.H))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tx, commit := s.h.Tx(t, q)
	if _, err := k.EnqueueTx(ctx, tx, kindEmail{To: "ada@example.com"}, kindResize{W: 640, H: 480}); err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Enqueue(ctx, kindEmail{To: "bob@example.com"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := q.Jobs(ctx, queue.JobFilter{Queue: "kinds"})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("Jobs: %d jobs, %v; want 3", len(jobs), err)
	}
	for _, j := range jobs {
		switch j.Kind {
		case "email":
			if j.Priority != -2 || j.MaxAttempts != 4 {
				t.Errorf("email job %d: priority %d, max attempts %d; want the kind's -2 and 4", j.ID, j.Priority, j.MaxAttempts)
			}
		case "resize":
			if string(j.Payload) != `{"w":640,"h":480}` {
				t.Errorf("resize payload %q", j.Payload)
			}
		default:
			t.Errorf("job %d has kind %q", j.ID, j.Kind)
		}
	}
	emails, err := q.Jobs(ctx, queue.JobFilter{Queue: "kinds", Kind: "email"})
	if err != nil || len(emails) != 2 || emails[0].Kind != "email" || emails[1].Kind != "email" {
		t.Errorf("Jobs(kind email) = %d jobs, %v; want the 2 emails", len(emails), err)
	}
	byKind, err := q.StatsByKind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []queue.KindStats{{Queue: "kinds", Kind: "email", Ready: 2}, {Queue: "kinds", Kind: "resize", Ready: 1}}
	if !slices.Equal(byKind, want) {
		t.Errorf("StatsByKind = %+v, want %+v", byKind, want)
	}

	w, err := queue.NewWorker(q, k.Handler(), queue.WorkerConfig{Queue: "kinds", Concurrency: 3, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := startWorker(t, ctx, w)
	until(t, "3 typed jobs completed", func() bool { return w.Stats().Completed == 3 }, r)
	if err := r.stop(0); err != nil {
		t.Errorf("Run: %v", err)
	}
	slices.Sort(seen)
	if got := strings.Join(seen, " "); got != "email:ada@example.com email:bob@example.com resize:640x480" {
		t.Errorf("handlers saw %q", got)
	}
}

// KindsUnknownRetriedThenDead: a job of a kind no handler here knows is
// retried, keeps an error naming its kind, and is dead after its
// attempts — never completed; one whose payload does not decode is dead
// at its first run.
func testKindsUnknown(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	k, err := queue.NewKinds(q, queue.KindsConfig{Queue: "kinds"})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{}, 10)
	if err := queue.Handle(k, queue.KindOptions{}, func(context.Context, *queue.TypedJob[kindResize]) error {
		ran <- struct{}{}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ids := enqueue(t, q,
		queue.NewJob{Queue: "kinds", Kind: "not_deployed_yet", Payload: []byte(`{}`), MaxAttempts: 3},
		queue.NewJob{Queue: "kinds", Kind: "resize", Payload: []byte(`not json`), MaxAttempts: 3})
	w, err := queue.NewWorker(q, k.Handler(), queue.WorkerConfig{Queue: "kinds", Concurrency: 2,
		PollInterval: 20 * time.Millisecond, Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	r := startWorker(t, ctx, w)
	until(t, "both jobs dead", func() bool { return w.Stats().Dead == 2 }, r)
	if err := r.stop(0); err != nil {
		t.Errorf("Run: %v", err)
	}
	if st := w.Stats(); st.Completed != 0 || st.Retried != 4 {
		t.Errorf("worker stats %+v: want 4 failures (3 runs of the unknown kind, 1 of the bad args), nothing completed", st)
	}
	dead, err := q.Jobs(ctx, queue.JobFilter{Queue: "kinds", State: queue.StateDead})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead jobs %d, %v; want 2", len(dead), err)
	}
	for _, j := range dead {
		switch j.ID {
		case ids[0]:
			if j.Attempt != 3 || !strings.Contains(j.LastError, `"not_deployed_yet"`) {
				t.Errorf("unknown kind: attempt %d, last error %q; want 3 runs and the kind named", j.Attempt, j.LastError)
			}
		case ids[1]:
			if j.Attempt != 1 || !strings.Contains(j.LastError, "does not decode") {
				t.Errorf("bad args: attempt %d, last error %q; want dead at the first run", j.Attempt, j.LastError)
			}
		}
	}
	if len(ran) != 0 {
		t.Errorf("the resize handler ran on a payload that does not decode")
	}
}
