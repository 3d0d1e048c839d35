package faults

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Errorf says.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestLeaksFindsAGoroutine: the leak check reports a goroutine started
// after its snapshot while it runs, naming its function, and reports
// nothing once it has ended.
func TestLeaksFindsAGoroutine(t *testing.T) {
	r := &recorder{TB: t}
	check := Leaks(r)
	stop := make(chan struct{})
	parked := make(chan struct{})
	go parkedForTest(parked, stop)
	<-parked
	check()
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "parkedForTest") {
		t.Fatalf("leak check with a parked goroutine said %q, want one error naming parkedForTest", r.errs)
	}
	close(stop)
	r.errs = nil
	check()
	if len(r.errs) != 0 {
		t.Fatalf("after the goroutine ended, the leak check still says %q", r.errs)
	}
}

// TestLeaksIgnoresEarlierGoroutines: goroutines running when the snapshot
// was taken are not leaks.
func TestLeaksIgnoresEarlierGoroutines(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	parked := make(chan struct{})
	go parkedForTest(parked, stop)
	<-parked
	r := &recorder{TB: t}
	Leaks(r)()
	if len(r.errs) != 0 {
		t.Fatalf("leak check reports a goroutine older than its snapshot: %q", r.errs)
	}
}

func parkedForTest(parked, stop chan struct{}) {
	close(parked)
	<-stop
}
