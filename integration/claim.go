package integration

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// ClaimsInPriorityRunAtIDOrder: a claim returns ready jobs lowest priority
// first, then earliest run_at, then lowest id.
func testClaimOrder(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	in := []queue.NewJob{
		{Queue: "order", Payload: []byte("p5-new"), Priority: 5},
		{Queue: "order", Payload: []byte("p1-late"), Priority: 1, RunAt: past.Add(2 * time.Minute)},
		{Queue: "order", Payload: []byte("p1-early"), Priority: 1, RunAt: past},
		{Queue: "order", Payload: []byte("p-3"), Priority: -3},
		{Queue: "order", Payload: []byte("p1-early-2"), Priority: 1, RunAt: past},
		{Queue: "other", Payload: []byte("other queue")},
	}
	enqueue(t, q, in...)
	c := s.claimer(t, q)
	jobs := claim(t, c, "order", 10)
	var got []string
	for _, j := range jobs {
		got = append(got, string(j.Payload))
		if j.Queue != "order" {
			t.Errorf("job %d from queue %q", j.ID, j.Queue)
		}
	}
	want := []string{"p-3", "p1-early", "p1-early-2", "p1-late", "p5-new"}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order %q, want %q", got, want)
	}
	for _, j := range jobs {
		if j.State != queue.StateClaimed {
			t.Errorf("job %d state %q, want claimed", j.ID, j.State)
		}
		if j.Attempt != 0 || j.MaxAttempts != queue.DefaultMaxAttempts {
			t.Errorf("job %d attempt %d/%d, want 0/%d", j.ID, j.Attempt, j.MaxAttempts, queue.DefaultMaxAttempts)
		}
		if j.CreatedAt.IsZero() || j.RunAt.IsZero() {
			t.Errorf("job %d has zero created_at or run_at", j.ID)
		}
	}
	if !jobs[1].RunAt.Equal(past) {
		t.Errorf("run_at %v, want %v", jobs[1].RunAt, past)
	}
}

// ClaimsAtMostN: a claim never returns more than asked, and successive
// claims by one holder return different jobs.
func testClaimLimit(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "lim", 25)
	c := s.claimer(t, q)
	seen := map[int64]bool{}
	for _, n := range []int{1, 7, 10, 10} {
		jobs := claim(t, c, "lim", n)
		want := min(n, 25-len(seen))
		if len(jobs) != want {
			t.Fatalf("Claim(%d) = %d jobs, want %d", n, len(jobs), want)
		}
		for _, j := range jobs {
			if seen[j.ID] {
				t.Fatalf("job %d claimed twice by one holder", j.ID)
			}
			seen[j.ID] = true
		}
	}
}

// HonoursRunAt: a job whose run_at is in the future is not claimed until it
// passes, on the database clock; Delay is measured there too.
func testHonoursRunAt(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueue(t, q,
		queue.NewJob{Queue: "runat", Payload: []byte("later"), Delay: 1500 * time.Millisecond},
		queue.NewJob{Queue: "runat", Payload: []byte("tomorrow"), RunAt: time.Now().Add(24 * time.Hour)},
		queue.NewJob{Queue: "runat", Payload: []byte("now")},
	)
	wantCounts(t, q, "runat", 1, 2, 0, 0)
	c := s.claimer(t, q)
	jobs := claim(t, c, "runat", 10)
	if len(jobs) != 1 || string(jobs[0].Payload) != "now" {
		t.Fatalf("claimed %d jobs (%v), want only the ready one", len(jobs), ids(jobs))
	}
	complete(t, c, jobs)
	deadline := time.Now().Add(10 * time.Second)
	for {
		jobs = claim(t, c, "runat", 10)
		if len(jobs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("delayed job never became claimable")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(jobs) != 1 || string(jobs[0].Payload) != "later" {
		t.Fatalf("claimed %q, want only the delayed job", jobs[0].Payload)
	}
	complete(t, c, jobs)
	wantCounts(t, q, "runat", 0, 1, 0, 0)
}

// SkipsHeldJobs: a second claimer never gets what the first holds, and
// does not wait for it.
func testSkipsHeld(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "skip", 30)
	a, b := s.claimer(t, q), s.claimer(t, q)
	ja := claim(t, a, "skip", 10)
	start := time.Now()
	jb := claim(t, b, "skip", 100)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("second claim took %v: it waited on held rows", d)
	}
	if len(ja) != 10 || len(jb) != 20 {
		t.Fatalf("claims got %d and %d jobs, want 10 and 20", len(ja), len(jb))
	}
	for _, id := range ids(jb) {
		if slices.Contains(ids(ja), id) {
			t.Fatalf("job %d returned to two live claimers", id)
		}
	}
	if got := claim(t, b, "skip", 100); len(got) != 0 {
		t.Fatalf("third claim got %d jobs while all are held", len(got))
	}
	wantCounts(t, q, "skip", 0, 0, 30, 0)
	if s.h.HeldLocks != nil {
		if got := s.h.HeldLocks(t, a); !sameIDs(got, ids(ja)) {
			t.Fatalf("claimer a holds locks of %v, claimed %v", got, ids(ja))
		}
	}
}

// PayloadRoundTrip: payload bytes come back exactly, including empty, NUL
// bytes, invalid UTF-8 and the configured limit.
func testPayloadRoundTrip(t *testing.T, s *suite) {
	const limit = 64 << 10
	q := s.queue(t, queue.Config{MaxPayloadBytes: limit})
	big := make([]byte, limit)
	for i := range big {
		big[i] = byte(i * 7)
	}
	payloads := [][]byte{
		{}, {0}, []byte("a\x00b\x00"), {0xff, 0xfe, 0xc3, 0x28}, []byte(`{"json": "ü€😀"}`), big,
	}
	var in []queue.NewJob
	for i, p := range payloads {
		in = append(in, queue.NewJob{Queue: "bytes", Payload: p, Priority: int16(i)})
	}
	enqueue(t, q, in...)
	c := s.claimer(t, q)
	jobs := claim(t, c, "bytes", len(payloads))
	if len(jobs) != len(payloads) {
		t.Fatalf("claimed %d of %d", len(jobs), len(payloads))
	}
	for i, j := range jobs {
		if !bytes.Equal(j.Payload, payloads[i]) {
			t.Errorf("payload %d: got %d bytes %.20q, want %d bytes %.20q", i, len(j.Payload), j.Payload, len(payloads[i]), payloads[i])
		}
	}
	complete(t, c, jobs)
}
