package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/cobra"
)

func workCmd(g *globals) *cobra.Command {
	var (
		name            string
		concurrency     int
		lease           time.Duration
		shutdownTimeout time.Duration
		poll            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "work --queue Q [flags] -- command [args...]",
		Short: "Run a command per job, payload on stdin; exit 0 completes the job, anything else retries it",
		Long: `work claims jobs from a queue and runs the command once per job, with the
payload on stdin and DBQ_JOB_ID, DBQ_JOB_QUEUE and DBQ_JOB_ATTEMPT in the
environment. Exit status 0 completes the job; any other status retries it with
exponential backoff, keeping the end of stderr as the job's last error; after
its attempts are spent the job is dead. SIGINT or SIGTERM drains gracefully:
no new claims, running commands get --shutdown-timeout to finish, then are
killed and their jobs released.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := g.config()
			cfg.Lease = lease
			q, err := g.open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer q.Close()
			w, err := queue.NewWorker(q, commandHandler(args), queue.WorkerConfig{
				Queue: name, Concurrency: concurrency, ShutdownTimeout: shutdownTimeout,
				PollInterval: poll, Logger: cfg.Logger,
			})
			if err != nil {
				return err
			}
			err = w.Run(cmd.Context())
			st := w.Stats()
			fmt.Fprintf(cmd.ErrOrStderr(), "dbq work: %d completed, %d retried, %d released, %d leases lost\n",
				st.Completed, st.Retried, st.Released, st.LeasesLost)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&name, "queue", "q", "default", "queue to work")
	f.IntVarP(&concurrency, "concurrency", "c", 10, "commands run at once")
	f.DurationVar(&lease, "lease", queue.DefaultLease, "lease per claim, renewed while the command runs (lease-based claimers)")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long running commands may finish")
	f.DurationVar(&poll, "poll", time.Second, "pause after a claim that found fewer jobs than free slots")
	return cmd
}

// commandHandler runs argv per job with the payload on stdin.
func commandHandler(argv []string) queue.Handler {
	return func(ctx context.Context, j *queue.Job) error {
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Stdin = bytes.NewReader(j.Payload)
		c.Stdout = os.Stdout
		var stderr tail
		c.Stderr = &stderr
		c.Env = append(os.Environ(),
			"DBQ_JOB_ID="+strconv.FormatInt(j.ID, 10),
			"DBQ_JOB_QUEUE="+j.Queue,
			"DBQ_JOB_ATTEMPT="+strconv.Itoa(j.Attempt),
		)
		c.WaitDelay = 5 * time.Second
		err := c.Run()
		if stderr.Len() > 0 {
			os.Stderr.Write(stderr.Bytes())
		}
		if err == nil {
			return nil
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) && stderr.Len() > 0 {
			return fmt.Errorf("%s: %v: %s", argv[0], err, bytes.TrimSpace(stderr.Bytes()))
		}
		return fmt.Errorf("%s: %w", argv[0], err)
	}
}

// tail keeps the last 4 KiB written to it.
type tail struct{ bytes.Buffer }

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	t.Buffer.Write(p)
	if over := t.Len() - 4096; over > 0 {
		t.Next(over)
	}
	return n, nil
}
