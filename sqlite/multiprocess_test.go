package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

const childEnv = "DBQ_SQLITE_CHILD_DB"

// TestMultiProcess drains one file from three processes at once — this
// test and two copies of the test binary — and checks every job is
// claimed exactly once, with no SQLITE_BUSY surfacing anywhere.
func TestMultiProcess(t *testing.T) {
	t.Parallel()
	const jobsTotal = 3000
	path := filepath.Join(t.TempDir(), "shared.db")
	q := newTestQueue(t, path, queue.Config{}, true)

	var (
		mu     sync.Mutex
		ledger = map[int64]int{}
		per    [3]int // jobs claimed by process
		wg     sync.WaitGroup
	)
	recorder := func(proc int) func(int64) {
		return func(id int64) {
			mu.Lock()
			ledger[id]++
			per[proc]++
			mu.Unlock()
		}
	}
	for proc := range 2 {
		record := recorder(proc + 1)
		cmd := exec.Command(os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "ready" {
			t.Fatalf("child did not start: %v", sc.Err())
		}
		wg.Go(func() {
			for sc.Scan() {
				if id, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
					record(id)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("child: %v", err)
			}
		})
	}
	var all []queue.NewJob
	for i := range jobsTotal {
		all = append(all, queue.NewJob{Queue: "mp", Payload: []byte(strconv.Itoa(i))})
	}
	enqueue(t, q, all...)
	c := newClaimer(t, q)
	drain(t, c, "mp", recorder(0))
	wg.Wait()
	t.Logf("jobs claimed per process: %v", per)
	if len(ledger) != jobsTotal {
		t.Fatalf("%d distinct jobs claimed, want %d", len(ledger), jobsTotal)
	}
	for id, n := range ledger {
		if n != 1 {
			t.Fatalf("job %d claimed %d times", id, n)
		}
	}
}

// TestMultiProcessChild is the other processes of TestMultiProcess; it
// prints the ids it claimed, one a line.
func TestMultiProcessChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("run by TestMultiProcess")
	}
	q, err := Open(context.Background(), path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	c, err := q.NewClaimer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	// Wait for the parent's jobs, then drain.
	for deadline := time.Now().Add(time.Minute); ; {
		st, err := q.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(st) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no jobs came")
		}
		time.Sleep(time.Millisecond)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	drain(t, c, "mp", func(id int64) { fmt.Fprintln(w, id) })
}

// drain claims batches of 10 and completes them until the queue stays
// empty for a while.
func drain(t testing.TB, c queue.Claimer, name string, record func(int64)) {
	ctx := context.Background()
	idle := 0
	for idle < 20 {
		jobs, err := c.Claim(ctx, name, 10)
		if err != nil {
			t.Errorf("Claim: %v", err)
			return
		}
		if len(jobs) == 0 {
			idle++
			time.Sleep(5 * time.Millisecond)
			continue
		}
		idle = 0
		for _, j := range jobs {
			record(j.ID)
		}
		if err := c.Complete(ctx, leasesOf(jobs)); err != nil {
			t.Errorf("Complete: %v", err)
			return
		}
	}
}
