package mysql

import (
	"testing"

	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/queue"
)

// FuzzPayloadRoundTrip: any payload up to the limit comes back byte for
// byte — empty, NUL bytes, invalid UTF-8, exactly the limit — and one byte
// past it is refused with ErrPayloadTooLarge, storing nothing. The dedupe
// key is VARBINARY, so any bytes come back too. Statements interpolate
// their parameters client-side (interpolateParams), so this is also the
// driver's escaping under test.
func FuzzPayloadRoundTrip(f *testing.F) {
	for _, p := range faults.PayloadSeeds(faults.FuzzLimit) {
		f.Add(p, "")
	}
	f.Add([]byte("k"), "key\x00with NUL")
	f.Add([]byte("k"), "\xff\xfe not UTF-8")
	f.Add([]byte("k"), "'); DROP TABLE dbq_jobs; --")
	f.Add([]byte("k"), "\\'\\\"\x1a")
	q, _ := openQueue(f, Config{Config: queue.Config{MaxPayloadBytes: faults.FuzzLimit}}, true)
	c := newClaimer(f, q)
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
	q, _ := openQueue(t, Config{}, true)
	c := newClaimer(t, q)
	for _, p := range faults.PayloadSeeds(queue.DefaultMaxPayloadBytes)[10:] {
		faults.RoundTrip(t, q, c, "big", p, "")
	}
}
