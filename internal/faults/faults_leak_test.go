package faults

import (
	"strings"
	"testing"
	"time"
)

// TestLeftoverFindsAGoroutine: the leak check sees a goroutine started
// after its snapshot while it runs, and not once it has ended.
func TestLeftoverFindsAGoroutine(t *testing.T) {
	before := goroutines()
	stop := make(chan struct{})
	go parkedForTest(stop)
	left := leftover(before, 50*time.Millisecond)
	if len(left) != 1 || !strings.Contains(left[0], "parkedForTest") {
		t.Fatalf("leftover found %d goroutines, want the parked one:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	close(stop)
	if left := leftover(before, 2*time.Second); len(left) != 0 {
		t.Fatalf("after it ended, leftover still finds:\n%s", strings.Join(left, "\n\n"))
	}
}

func parkedForTest(stop chan struct{}) { <-stop }
