package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

// The cases that run a Worker must fail, not hang, when its Run ends
// early. Each runs here in a child process on an in-memory queue whose
// table is gone when the Worker starts, so Run returns ErrNotMigrated at
// once, and the child must fail well within its bound and say why.

const childEnv = "DBQ_INTEGRATION_WAIT_CHILD"

// workerCases are the cases whose waits follow a Worker.
var workerCases = map[string]func(t *testing.T, s *suite){
	"WorkerRunsEveryJobOnce":    testWorkerDrains,
	"WorkerShutsDownGracefully": testWorkerShutdown,
	"WorkerMarksDead":           testWorkerDead,
	"WorkerSnoozeRunsAgain":     testWorkerSnooze,
}

// unmigrated is a harness whose queues take jobs but whose table is gone
// by the time a Worker starts: every NewClaimer fails with ErrNotMigrated.
var unmigrated = Harness{
	Dialect: "memory",
	NewQueue: func(t *testing.T, cfg queue.Config, _ bool) *queue.Queue {
		q, err := queue.New(noClaims{memq.New(queue.DefaultLease).Driver()}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	},
	Kill: func(t *testing.T, c queue.Claimer) {},
}

type noClaims struct{ queue.Driver }

func (noClaims) NewClaimer(context.Context) (queue.Claimer, error) {
	return nil, fmt.Errorf("%w: the test dropped the table", queue.ErrNotMigrated)
}

func TestWorkerCasesFailWhenRunEnds(t *testing.T) {
	if name := os.Getenv(childEnv); name != "" {
		fn := workerCases[name]
		if fn == nil {
			t.Fatalf("no case %q", name)
		}
		fn(t, &suite{h: unmigrated})
		return
	}
	if testing.Short() {
		t.Skip("runs a child test binary per case")
	}
	for name := range workerCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const bound = 20 * time.Second // the old waits gave up after 30 s, 1 min or never
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkerCasesFailWhenRunEnds$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+name)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case ctx.Err() != nil:
				t.Fatalf("the case hung: killed after %v\n%s", bound, out)
			case !errors.As(err, &exit):
				t.Fatalf("the case passed or did not run (%v) with a Worker that cannot run:\n%s", err, out)
			case !strings.Contains(string(out), queue.ErrNotMigrated.Error()):
				t.Fatalf("the case failed without naming Run's error (%v):\n%s", err, out)
			}
			t.Logf("failed in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}
