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
// (a NUL byte, invalid UTF-8) gets queue.ErrInvalidJob, not a driver
// error, and stores nothing: not the batch it is part of, whether by
// Enqueue or EnqueueUnique, and it leaves the caller's transaction usable.
func TestDedupeKeyNotText(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	ctx := testCtx(t)
	for _, key := range []string{"a\x00b", "\xff\xfe", "ok\xc3"} {
		batch := []queue.NewJob{{Queue: "k", DedupeKey: "good"}, {Queue: "k", DedupeKey: key}, {Queue: "k"}}
		if _, err := q.Enqueue(ctx, batch...); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("Enqueue with dedupe key %q: %v, want queue.ErrInvalidJob", key, err)
		}
		if _, _, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "k", DedupeKey: key}); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("EnqueueUnique with dedupe key %q: %v, want queue.ErrInvalidJob", key, err)
		}
		tx, err := testPool(t).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueTx(ctx, tx, batch...); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("EnqueueTx with dedupe key %q: %v, want queue.ErrInvalidJob", key, err)
		}
		// The key never reached the server, so the transaction goes on.
		if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "k", DedupeKey: "in-tx"}); err != nil {
			t.Errorf("EnqueueTx after a refused key: %v", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, q, ""); n != 0 {
		t.Fatalf("%d jobs stored; a batch with an invalid dedupe key must store none", n)
	}
	// Text the dialect's check lets through still gets a typed error when
	// the server refuses it with 22021.
	_, err := testPool(t).Exec(ctx, "SELECT convert_from('\\xff'::bytea, 'UTF8')")
	if !isCode(err, codeCharacterNotInRepertoire) {
		t.Fatalf("convert_from of an invalid byte: %v, want SQLSTATE %s", err, codeCharacterNotInRepertoire)
	}
	if err := interpret("probe", err); !errors.Is(err, queue.ErrInvalidJob) || !isCode(err, codeCharacterNotInRepertoire) {
		t.Errorf("interpret(22021) = %v, want queue.ErrInvalidJob wrapping the *pgconn.PgError", err)
	}
}
