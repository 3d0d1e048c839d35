package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/queue"
)

// FuzzPayloadRoundTrip: any payload up to the limit comes back byte for
// byte — empty, NUL bytes, invalid UTF-8, exactly the limit — and one byte
// past it is refused with ErrPayloadTooLarge, storing nothing. Dedupe keys
// come back as given.
func FuzzPayloadRoundTrip(f *testing.F) {
	for _, p := range faults.PayloadSeeds(faults.FuzzLimit) {
		f.Add(p, "")
	}
	f.Add([]byte("k"), "key\x00with NUL")
	f.Add([]byte("k"), "\xff\xfe not UTF-8")
	f.Add([]byte("k"), "'); DROP TABLE dbq_jobs; --")
	q := newTestQueue(f, filepath.Join(f.TempDir(), "fuzz.db"), queue.Config{MaxPayloadBytes: faults.FuzzLimit}, true)
	c, err := q.NewClaimer(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, payload []byte, key string) {
		if len(key) > 200 {
			key = key[:200]
		}
		faults.RoundTrip(t, q, c, "fuzz", payload, key)
	})
}

// TestPayloadAtDefaultLimit: a payload of exactly the default limit
// (1 MiB) round-trips; one byte more is refused.
func TestPayloadAtDefaultLimit(t *testing.T) {
	t.Parallel()
	q := newTestQueue(t, filepath.Join(t.TempDir(), "big.db"), queue.Config{}, true)
	c, err := q.NewClaimer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, p := range faults.PayloadSeeds(queue.DefaultMaxPayloadBytes)[10:] {
		faults.RoundTrip(t, q, c, "big", p, "")
	}
}
