// Package faults holds what the fault-injection and hostile-input tests of
// every dialect share: the payloads and names an attacker or a careless
// caller sends, the payload round trip, and a goroutine leak check.
//
// The leak check is go.uber.org/goleak: it snapshots the goroutines
// running before the code under test starts (IgnoreCurrent) and, after it
// has shut down, waits for every goroutine started since to end.
package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"go.uber.org/goleak"
)

// Quiet is a logger that drops everything, for code under test that logs
// on purpose (a worker's shutdown, a panicking handler).
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// FuzzLimit is the MaxPayloadBytes of the queues the payload fuzz targets
// use: small, so that payloads at and past it are cheap to try.
const FuzzLimit = 4096

// PayloadSeeds returns the payloads every dialect must store byte for byte,
// or refuse whole with ErrPayloadTooLarge: empty, NUL bytes, invalid UTF-8,
// text that looks like SQL, and exactly limit and limit+1 bytes.
func PayloadSeeds(limit int) [][]byte {
	pattern := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*131 + i>>8) // every byte value, NUL and 0xff included
		}
		return b
	}
	return [][]byte{
		{},
		{0},
		[]byte("a\x00b\x00\x00"),
		{0xff, 0xfe, 0xfd},
		{0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28, 0x8c, 0xbc}, // invalid UTF-8 sequences
		{0xed, 0xa0, 0x80}, // a UTF-16 surrogate in UTF-8
		[]byte(`{"json": "ü€😀", "nul": "\u0000"}`),
		[]byte(`'); DELETE FROM dbq_jobs; --`),
		[]byte("\\x00\\\\'\"`%_"),
		[]byte("\r\n\t \x1a\x7f"),
		pattern(limit - 1),
		pattern(limit),
		pattern(limit + 1),
	}
}

// HostileQueueNames are queue names that must be refused with
// queue.ErrInvalidQueue: quotes, statement separators, comments, wildcards,
// control characters, non-ASCII look-alikes and lengths past the limit.
var HostileQueueNames = []string{
	"", " ", "q ", "q'", `q"`, "q`", "q;", "q'; DROP TABLE dbq_jobs; --", `q" OR "1"="1`, "q' OR '1'='1",
	"q/*", "q*/", "q%", "q\\", "q\x00", "q\n", "q\r", "q\t", "q]", "q[", "q)", "q(", "q,",
	"qü", "ｑ", "q\u200b", "q\u202e", "q\uff07", strings.Repeat("q", 65),
}

// HostileIdentifiers are schema names and table prefixes that must be
// refused with queue.ErrInvalidIdentifier: each would change a statement's
// shape if spliced unquoted, or breaks out of a quoted identifier.
var HostileIdentifiers = []string{
	`x"`, `x"; DROP TABLE dbq_jobs; --`, "x`", "x`; DROP TABLE dbq_jobs; --", "x]", "x]; DROP TABLE dbq_jobs; --",
	"x;", "x --", "x/*", "x.y", "x y", "x'", "1x", "x-y", "x\x00", "x\n", "über", "x\u200b", "ｘ",
	"x\\", "x%", strings.Repeat("p", 64),
}

// RoundTrip enqueues payload with dedupe key key on queue name and claims
// it back with c, which must find nothing else there. A payload over
// q's limit must fail with ErrPayloadTooLarge and store nothing. A stored
// job must come back with the same bytes and key, and is completed.
func RoundTrip(t testing.TB, q *queue.Queue, c queue.Claimer, name string, payload []byte, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limit := q.Config().MaxPayloadBytes
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: name, Payload: payload, DedupeKey: key})
	if len(payload) > limit {
		if !errors.Is(err, queue.ErrPayloadTooLarge) {
			t.Fatalf("Enqueue of %d bytes over the %d-byte limit: %v, want ErrPayloadTooLarge", len(payload), limit, err)
		}
		if jobs, err := c.Claim(ctx, name, 1); err != nil || len(jobs) != 0 {
			t.Fatalf("after a refused enqueue, Claim = %d jobs, %v; want none", len(jobs), err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Enqueue of %d bytes (limit %d), key %q: %v", len(payload), limit, key, err)
	}
	jobs, err := c.Claim(ctx, name, 2)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if len(jobs) != 1 {
		t.Fatalf("Claim returned %d jobs, want the 1 enqueued", len(jobs))
	}
	j := jobs[0]
	if err := c.Complete(ctx, queue.Leases(jobs)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if !bytes.Equal(j.Payload, payload) {
		t.Fatalf("payload of %d bytes came back as %d bytes:\n in %s\nout %s", len(payload), len(j.Payload), abbrev(payload), abbrev(j.Payload))
	}
	if j.Payload == nil {
		t.Fatalf("payload came back nil, want non-nil empty")
	}
	if j.DedupeKey != key {
		t.Fatalf("dedupe key %q came back as %q", key, j.DedupeKey)
	}
}

func abbrev(b []byte) string {
	if len(b) > 48 {
		return fmt.Sprintf("%q…", b[:48])
	}
	return fmt.Sprintf("%q", b)
}

// benign are functions whose goroutines a leak check ignores wherever
// they appear in the stack: the runtime's and the testing package's own,
// which whatever runs first starts lazily and which outlive it by design.
var benign = []string{
	"testing.(*T).Run", "testing.(*F).Fuzz", "testing.tRunner", "testing.runFuzzTests", "testing.(*M).Run",
	"runtime/trace.Start", "runtime.ensureSigM", "runtime.unique_runtime_registerUniqueMapCleanup",
}

// leakGrace is how long a leak check waits for goroutines to end.
const leakGrace = 2 * time.Second

// Leaks snapshots the goroutines now running (goleak.IgnoreCurrent) and
// returns a check to call once the code under test has shut down: it fails
// t, listing their stacks, if goroutines started since are still running
// after a grace period of about 2 seconds (goleak.Find, retried). Tests
// that use it must not run in parallel with others of their package.
func Leaks(t testing.TB) (check func()) {
	t.Helper()
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	for _, f := range benign {
		opts = append(opts, goleak.IgnoreAnyFunction(f))
	}
	return func() {
		t.Helper()
		if err := findLeaks(leakGrace, opts...); err != nil {
			t.Errorf("goroutine leak: %v", err)
		}
	}
}

// findLeaks calls goleak.Find, which gives up after well under a second,
// until it finds nothing or grace has passed, and returns its last error.
func findLeaks(grace time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(grace)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// OddQueueNames are valid queue names that look like SQL: each must work
// like any other name, since queue names travel only as parameters.
var OddQueueNames = []string{"--", "--x:y", "a.b:c-d_E", "..", ":::", "q--", "_", "0", "DROP", "select", "NULL", strings.Repeat("z", 64)}

// RefuseHostileQueues calls every Queue and Claimer method that takes a
// queue name with each of HostileQueueNames, and fails t unless each call
// is refused with ErrInvalidQueue. An optional Admin method may instead
// say ErrUnsupported.
func RefuseHostileQueues(t testing.TB, q *queue.Queue, c queue.Claimer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := func(context.Context, *queue.Job) error { return nil }
	for _, name := range HostileQueueNames {
		want := func(what string, err error, orUnsupported bool) {
			t.Helper()
			if errors.Is(err, queue.ErrInvalidQueue) || orUnsupported && errors.Is(err, queue.ErrUnsupported) {
				return
			}
			t.Errorf("%s with queue %q: %v, want ErrInvalidQueue", what, name, err)
		}
		_, err := q.Enqueue(ctx, queue.NewJob{Queue: name, Payload: []byte("x")})
		want("Enqueue", err, false)
		_, err = q.Enqueue(ctx, queue.NewJob{Queue: "fine", Payload: []byte("x")}, queue.NewJob{Queue: name})
		want("Enqueue of a batch", err, false)
		_, err = c.Claim(ctx, name, 1)
		want("Claim", err, false)
		_, err = queue.NewWorker(q, h, queue.WorkerConfig{Queue: name})
		want("NewWorker", err, false)
		_, _, err = q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: name, DedupeKey: "k"})
		want("EnqueueUnique", err, true)
		_, err = q.Jobs(ctx, queue.JobFilter{Queue: name})
		if name != "" { // an empty filter means every queue
			want("Jobs", err, true)
		}
		_, err = q.RetryDead(ctx, name)
		want("RetryDead", err, true)
		want("Pause", q.Pause(ctx, name), true)
		want("Resume", q.Resume(ctx, name), true)
	}
}

// RunAndStop enqueues n jobs on queue name and runs a Worker on them with
// handlers that succeed, fail, panic, and block until cancelled, until at
// least half have started; then it cancels the Worker and waits for Run to
// return, past a ShutdownTimeout that the blocked handlers outlast. It
// fails t if Run returns an error or does not return. A lease-based
// claimer's heartbeat runs too: the lease is a few heartbeats long.
func RunAndStop(t testing.TB, q *queue.Queue, name string, n int) queue.WorkerStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs := make([]queue.NewJob, n)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: name, Payload: []byte(strconv.Itoa(i)), MaxAttempts: 3}
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	started := make(chan struct{}, n)
	h := func(ctx context.Context, j *queue.Job) error {
		started <- struct{}{}
		i, _ := strconv.Atoi(string(j.Payload))
		switch {
		case i%4 == 0:
			<-ctx.Done()
			return ctx.Err()
		case i%5 == 0:
			return errors.New("handler failed")
		case i%7 == 0:
			panic("handler panicked")
		}
		return nil
	}
	w, err := queue.NewWorker(q, h, queue.WorkerConfig{
		Queue: name, Concurrency: 8, PollInterval: 10 * time.Millisecond, ShutdownTimeout: 100 * time.Millisecond,
		Backoff: func(int) time.Duration { return time.Hour },
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for range n / 2 {
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-ctx.Done():
			t.Fatalf("only some of %d jobs started in time", n)
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its cancel")
	}
	return w.Stats()
}
