package metrics

import (
	"fmt"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

func TestBoundKinds(t *testing.T) {
	var st []queue.KindStats
	for i := range MaxKinds + 10 {
		st = append(st, queue.KindStats{Queue: fmt.Sprintf("q%d", i%2), Kind: fmt.Sprintf("k%03d", i), Ready: 1, Dead: 2})
	}
	got := boundKinds(st)
	if len(got) != MaxKinds+2 {
		t.Fatalf("%d series, want MaxKinds and one other per queue", len(got))
	}
	var ready, dead int64
	for _, s := range got[MaxKinds:] {
		if s.Kind != "other" {
			t.Errorf("series %+v past the bound is not other", s)
		}
		ready, dead = ready+s.Ready, dead+s.Dead
	}
	if ready != 10 || dead != 20 {
		t.Errorf("other sums ready %d dead %d, want 10 and 20", ready, dead)
	}
	if few := boundKinds(st[:3]); len(few) != 3 {
		t.Errorf("under the bound: %d series", len(few))
	}
}
