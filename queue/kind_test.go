package queue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

type email struct {
	To string `json:"to"`
}

func (email) Kind() string { return "email" }

type resize struct {
	W, H int
}

func (resize) Kind() string { return "resize" }

type unknownArgs struct{}

func (unknownArgs) Kind() string { return "never_registered" }

func newKindsQueue(t *testing.T, logTo io.Writer) (*queue.Queue, *queue.Kinds) {
	t.Helper()
	q, err := queue.New(memq.New(time.Minute).Driver(), queue.Config{MaxAttempts: 7})
	if err != nil {
		t.Fatal(err)
	}
	k, err := queue.NewKinds(q, queue.KindsConfig{Queue: "work", Logger: slog.New(slog.NewTextHandler(logTo, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return q, k
}

// Jobs of several kinds on one queue are run by one Worker, each decoded
// into its own Args type and handed to its own handler.
func TestKindsRoundTrip(t *testing.T) {
	q, k := newKindsQueue(t, io.Discard)
	var mu sync.Mutex
	got := map[string][]string{}
	record := func(kind, v string) {
		mu.Lock()
		defer mu.Unlock()
		got[kind] = append(got[kind], v)
	}
	if err := queue.Handle(k, queue.KindOptions{}, func(_ context.Context, j *queue.TypedJob[email]) error {
		record(j.Kind, j.Args.To)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := queue.Handle(k, queue.KindOptions{}, func(_ context.Context, j *queue.TypedJob[resize]) error {
		record(j.Kind, fmt.Sprintf("%dx%d", j.Args.W, j.Args.H))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ids, err := k.Enqueue(context.Background(), email{To: "a@example.com"}, resize{W: 3, H: 4}, email{To: "b@example.com"})
	if err != nil || len(ids) != 3 {
		t.Fatalf("Enqueue: %v %v", ids, err)
	}
	jobs, err := q.Jobs(context.Background(), queue.JobFilter{Queue: "work"})
	if err != nil || len(jobs) != 3 || jobs[0].Kind != "email" || jobs[1].Kind != "resize" || string(jobs[1].Payload) != `{"W":3,"H":4}` {
		t.Fatalf("stored jobs %+v, %v", jobs, err)
	}
	runUntil(t, q, k.Handler(), "work", func(st queue.WorkerStats) bool { return st.Completed == 3 })
	slices.Sort(got["email"]) // handlers run concurrently
	if fmt.Sprint(got) != "map[email:[a@example.com b@example.com] resize:[3x4]]" {
		t.Errorf("handlers saw %v", got)
	}
	if known := k.Known("work"); fmt.Sprint(known) != "[email resize]" {
		t.Errorf("Known = %v", known)
	}
}

// A job of a kind no handler here knows is retried with backoff, logged,
// and dead after its attempts: never completed, never lost. A job whose
// payload does not decode is dead at once.
func TestKindsUnknownAndBadArgs(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	q, k := newKindsQueue(t, &lockedWriter{w: &logs, mu: &logMu})
	ran := 0
	if err := queue.Handle(k, queue.KindOptions{}, func(context.Context, *queue.TypedJob[resize]) error {
		ran++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nj, err := k.NewJob(unknownArgs{}, queue.Opts{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, nj, queue.NewJob{Queue: "work", Kind: "resize", Payload: []byte("not json")}); err != nil {
		t.Fatal(err)
	}
	runUntil(t, q, k.Handler(), "work", func(st queue.WorkerStats) bool { return st.Dead == 2 })
	dead, err := q.Jobs(ctx, queue.JobFilter{Queue: "work", State: queue.StateDead})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead jobs %v, %v", dead, err)
	}
	for _, j := range dead {
		switch j.Kind {
		case "never_registered":
			if j.Attempt != 2 || !strings.Contains(j.LastError, "no handler for the job's kind") {
				t.Errorf("unknown kind: attempt %d, error %q; want 2 attempts spent and the kind named", j.Attempt, j.LastError)
			}
		case "resize":
			if j.Attempt != 1 || !strings.Contains(j.LastError, "does not decode") {
				t.Errorf("bad args: attempt %d, error %q; want dead at the first run", j.Attempt, j.LastError)
			}
		}
	}
	if ran != 0 {
		t.Errorf("the resize handler ran %d times on a payload that does not decode", ran)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "kind=never_registered") {
		t.Errorf("no warning names the unknown kind; log:\n%s", logs.String())
	}
}

// A kind's defaults — queue, priority, max attempts, timeout — apply to
// its jobs unless one enqueue overrides them.
func TestKindsDefaults(t *testing.T) {
	q, k := newKindsQueue(t, io.Discard)
	timedOut := make(chan bool, 1)
	err := queue.Handle(k, queue.KindOptions{Queue: "mail", Priority: -3, MaxAttempts: 4, Timeout: 50 * time.Millisecond},
		func(ctx context.Context, j *queue.TypedJob[email]) error {
			<-ctx.Done()
			timedOut <- errors.Is(ctx.Err(), context.DeadlineExceeded)
			return queue.Permanent(ctx.Err())
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.Declare[resize](k, queue.KindOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := k.NewJob(email{To: "x"}, queue.Opts{})
	if err != nil || a.Queue != "mail" || a.Priority != -3 || a.MaxAttempts != 4 || a.Kind != "email" {
		t.Fatalf("kind defaults: %+v, %v", a, err)
	}
	one := int16(1)
	b, err := k.NewJob(email{To: "y"}, queue.Opts{Queue: "other", Priority: &one, MaxAttempts: 9, DedupeKey: "k"})
	if err != nil || b.Queue != "other" || b.Priority != 1 || b.MaxAttempts != 9 || b.DedupeKey != "k" {
		t.Fatalf("overrides: %+v, %v", b, err)
	}
	c, err := k.NewJob(resize{}, queue.Opts{})
	if err != nil || c.Queue != "work" || c.MaxAttempts != 0 {
		t.Fatalf("declared kind: %+v, %v", c, err)
	}
	if _, err := q.Enqueue(ctx, a); err != nil {
		t.Fatal(err)
	}
	runUntil(t, q, k.Handler(), "mail", func(st queue.WorkerStats) bool { return st.Dead == 1 })
	if !<-timedOut {
		t.Error("the handler's context did not end with the kind's Timeout")
	}
	if known := k.Known(""); fmt.Sprint(known) != "[email]" {
		t.Errorf("Known = %v: a declared kind has no handler", known)
	}
}

func TestKindsRegistrationErrors(t *testing.T) {
	_, k := newKindsQueue(t, io.Discard)
	h := func(context.Context, *queue.TypedJob[email]) error { return nil }
	if err := queue.Handle(k, queue.KindOptions{}, h); err != nil {
		t.Fatal(err)
	}
	if err := queue.Handle(k, queue.KindOptions{}, h); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("second registration: %v, want ErrInvalidConfig", err)
	}
	if err := queue.Declare[resize](k, queue.KindOptions{Queue: "bad queue!"}); err == nil {
		t.Error("an invalid queue name was accepted")
	}
	if err := queue.Handle[resize](k, queue.KindOptions{}, nil); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("nil handler: %v", err)
	}
}

// TestKindRule: one rule for a kind's characters — letters and digits of
// any script and "_.:-" — refuses "=" (a --kind route splits there),
// spaces, "/" and control characters at every way in: ValidateKind,
// Enqueue, EnqueueUnique, NewJob, registration. A filter still finds a
// kind another producer stored outside the rule.
func TestKindRule(t *testing.T) {
	for _, good := range []string{"email", "send_email", "App::SendEmail", "billing.invoice-v2", "résumé", "日本", strings.Repeat("k", queue.MaxKindLen)} {
		if err := queue.ValidateKind(good); err != nil {
			t.Errorf("ValidateKind(%q) = %v", good, err)
		}
	}
	bad := []string{"", strings.Repeat("k", queue.MaxKindLen+1), "a\nb", "bad\xffutf8", "a=b", "a b", "email ", "a/b", "a\tb", "é=x"}
	for _, b := range bad {
		if err := queue.ValidateKind(b); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("ValidateKind(%q) = %v", b, err)
		}
	}
	q, k := newKindsQueue(t, io.Discard)
	ctx := context.Background()
	for _, b := range bad[2:] {
		if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "a", Kind: b}); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("Enqueue with kind %q: %v, want ErrInvalidJob", b, err)
		}
		if _, _, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "a", Kind: b, DedupeKey: "k"}); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("EnqueueUnique with kind %q: %v, want ErrInvalidJob", b, err)
		}
	}
	if err := queue.Declare[routeArgs](k, queue.KindOptions{}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("Declare of kind %q: %v, want ErrInvalidJob", routeArgs{}.Kind(), err)
	}
	if _, err := k.NewJob(routeArgs{}, queue.Opts{}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("NewJob of kind %q: %v, want ErrInvalidJob", routeArgs{}.Kind(), err)
	}
	if st, err := q.Stats(ctx); err != nil || len(st) != 0 {
		t.Errorf("refused kinds stored jobs: %v, %v", st, err)
	}
	if _, err := q.Jobs(ctx, queue.JobFilter{Kind: "send email"}); err != nil {
		t.Errorf("a filter on a kind stored outside the rule: %v", err)
	}
}

type routeArgs struct{}

func (routeArgs) Kind() string { return "a=b" }

type ptrArgs struct{ N int }

func (*ptrArgs) Kind() string { return "ptr" }

// TestKindsNullIntoPointerArgs: a handler whose args are a pointer never
// gets a nil one: the payload null is ErrBadArgs, dead at once, like any
// payload that does not decode.
func TestKindsNullIntoPointerArgs(t *testing.T) {
	q, k := newKindsQueue(t, io.Discard)
	var mu sync.Mutex
	var got []int
	if err := queue.Handle(k, queue.KindOptions{}, func(_ context.Context, j *queue.TypedJob[*ptrArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		if j.Args == nil {
			t.Errorf("job %d: the handler got nil args", j.ID)
			return nil
		}
		got = append(got, j.Args.N)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{"null", " null ", `{"N":7}`} {
		if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "work", Kind: "ptr", Payload: []byte(p)}); err != nil {
			t.Fatal(err)
		}
	}
	runUntil(t, q, k.Handler(), "work", func(st queue.WorkerStats) bool { return st.Dead+st.Completed == 3 })
	dead, err := q.Jobs(ctx, queue.JobFilter{Queue: "work", State: queue.StateDead})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead jobs %v, %v; want the two null payloads", dead, err)
	}
	for _, j := range dead {
		if j.Attempt != 1 || !strings.Contains(j.LastError, queue.ErrBadArgs.Error()) {
			t.Errorf("job %d (%q): attempt %d, error %q; want ErrBadArgs at the first run", j.ID, j.Payload, j.Attempt, j.LastError)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != 7 {
		t.Errorf("the handler got %v, want [7]", got)
	}
}

// upperCodec stores payloads as upper-case text, to show the codec is used
// both ways.
type upperCodec struct{}

func (upperCodec) Marshal(v any) ([]byte, error) {
	return []byte(strings.ToUpper(v.(email).To)), nil
}

func (upperCodec) Unmarshal(data []byte, v any) error {
	v.(*email).To = strings.ToLower(string(data))
	return nil
}

func TestKindsCodec(t *testing.T) {
	q, err := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := queue.NewKinds(q, queue.KindsConfig{Codec: upperCodec{}})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	if err := queue.Handle(k, queue.KindOptions{}, func(_ context.Context, j *queue.TypedJob[email]) error {
		got <- j.Args.To
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Enqueue(context.Background(), email{To: "who@x"}); err != nil {
		t.Fatal(err)
	}
	jobs, _ := q.Jobs(context.Background(), queue.JobFilter{Queue: "default"})
	if len(jobs) != 1 || string(jobs[0].Payload) != "WHO@X" {
		t.Fatalf("stored %+v", jobs)
	}
	runUntil(t, q, k.Handler(), "default", func(st queue.WorkerStats) bool { return st.Completed == 1 })
	if to := <-got; to != "who@x" {
		t.Errorf("decoded %q", to)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runUntil runs a Worker on queueName until done holds for its stats.
func runUntil(t *testing.T, q *queue.Queue, h queue.Handler, queueName string, done func(queue.WorkerStats) bool) {
	t.Helper()
	w, err := queue.NewWorker(q, h, queue.WorkerConfig{Queue: queueName, PollInterval: 5 * time.Millisecond,
		Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	waitFor(t, "the worker's stats", func() bool { return done(w.Stats()) })
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// signup is a typical small args struct.
type signup struct {
	UserID int64  `json:"user_id"`
	Email  string `json:"email"`
	Plan   string `json:"plan"`
}

func (signup) Kind() string { return "signup" }

// BenchmarkBatch100 claims, handles and completes a batch of 100 jobs on
// the in-memory driver, raw and typed: the difference is what the typed
// path (kind lookup, decoding the payload, TypedJob) costs per batch, with
// no database cost to hide it.
func BenchmarkBatch100(b *testing.B) {
	for _, typed := range []bool{false, true} {
		name := "raw"
		if typed {
			name = "typed"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			q, err := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
			if err != nil {
				b.Fatal(err)
			}
			k, _ := queue.NewKinds(q, queue.KindsConfig{Queue: "bench"})
			var sum int64
			if err := queue.Handle(k, queue.KindOptions{}, func(_ context.Context, j *queue.TypedJob[signup]) error {
				sum += j.Args.UserID
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			raw := func(_ context.Context, j *queue.Job) error { sum += int64(len(j.Payload)); return nil }
			h := queue.Handler(raw)
			if typed {
				h = k.Handler()
			}
			nj, _ := k.NewJob(signup{UserID: 42, Email: "someone@example.com", Plan: "pro"}, queue.Opts{})
			batch := make([]queue.NewJob, 100)
			for i := range batch {
				batch[i] = nj
			}
			c, err := q.NewClaimer(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if _, err := q.Enqueue(ctx, batch...); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				jobs, err := c.Claim(ctx, "bench", 100)
				if err != nil || len(jobs) != 100 {
					b.Fatalf("claimed %d: %v", len(jobs), err)
				}
				for _, j := range jobs {
					if err := h(ctx, j); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.Complete(ctx, queue.Leases(jobs)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
