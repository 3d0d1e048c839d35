package postgres

import (
	"testing"
)

// CountQueues counts a job an advisory claimer holds as held, not ready,
// also when its id is past 2^32 (the lock key holds the low 32 bits).
func TestCountQueuesHeldAdvisoryPast32Bits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{}, true)
	table := driverOf(t, q).Table()
	if _, err := testPool(t).Exec(ctx, "ALTER TABLE "+table+" ALTER COLUMN id RESTART WITH 4294967301"); err != nil {
		t.Fatal(err)
	}
	ids := enqueueN(t, q, "big", 3)
	if ids[0] != 4294967301 {
		t.Fatalf("first id %d", ids[0])
	}
	c := advisoryClaimer(t, q)
	if jobs := claim(t, c, "big", 1); len(jobs) != 1 || jobs[0].ID != ids[0] {
		t.Fatalf("claimed %v, want job %d", jobs, ids[0])
	}
	for _, limit := range []int64{100, 1} {
		got, err := q.CountQueues(ctx, limit)
		if err != nil || len(got) != 1 {
			t.Fatalf("CountQueues(%d) = %+v, %v", limit, got, err)
		}
		if s := got[0]; s.Queue != "big" || s.Ready != min(2, limit) || s.Held != 1 || s.Scheduled != 0 || s.Dead != 0 {
			t.Errorf("CountQueues(%d) = %+v, want 2 ready (at most %d) and 1 held", limit, s, limit)
		}
	}
}
