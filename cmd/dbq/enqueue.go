package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/cobra"
)

// enqueueBatch bounds the jobs, and enqueueBatchBytes the payload bytes,
// sent in one statement; the transaction holds them all.
const (
	enqueueBatch      = 1000
	enqueueBatchBytes = 4 << 20
)

func enqueueCmd(g *globals) *cobra.Command {
	var (
		name        string
		priority    int16
		delay       time.Duration
		maxAttempts int
		dedupe      string
		kind        string
		lines       bool
		count       int
	)
	cmd := &cobra.Command{
		Use:   "enqueue --queue Q [payload | -]",
		Short: "Add jobs: one with the payload given (- or none: stdin), or one per stdin line with --lines",
		Long: `enqueue adds one job with the payload given (- or none: read stdin), --count
copies of it, or with --lines one job per line of stdin (without its newline).

All or nothing: every job goes into one transaction, committed after the last
line is read. Interrupted (Ctrl-C, SIGTERM) or failed before that, it enqueues
nothing and says so, so running it again on the same input adds each job once.
It prints the new job's id, or "enqueued N jobs".`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 {
				return fmt.Errorf("--count %d: want at least 1", count)
			}
			if delay < 0 {
				return fmt.Errorf("--delay %v: want 0 or more", delay)
			}
			if cmd.Flags().Changed("max-attempts") && maxAttempts < 1 {
				return fmt.Errorf("--max-attempts %d: want at least 1", maxAttempts)
			}
			if lines && (dedupe != "" || count != 1 || len(args) > 0) {
				return fmt.Errorf("--lines reads every payload from stdin; not with --dedupe, --count or a payload argument")
			}
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			base := queue.NewJob{Queue: name, Kind: kind, Priority: priority, Delay: delay, MaxAttempts: maxAttempts, DedupeKey: dedupe}
			limit := q.Config().MaxPayloadBytes
			jobs := make(chan queue.NewJob)
			readErr := make(chan error, 1)
			// Read in a goroutine, so an interrupt does not wait for a
			// line that a terminal or a pipe may never send.
			go func() {
				defer close(jobs)
				readErr <- readJobs(ctx, cmd.InOrStdin(), args, lines, count, limit, base, jobs)
			}()
			ids, err := enqueueAll(ctx, g.dsn, q, jobs, readErr)
			if err != nil {
				if ctx.Err() != nil {
					err = errors.New("interrupted")
				}
				return fmt.Errorf("%w; nothing enqueued", err)
			}
			if len(ids) == 1 {
				fmt.Fprintln(cmd.OutOrStdout(), ids[0])
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "enqueued %d jobs\n", len(ids))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&name, "queue", "q", "default", "queue name")
	f.StringVar(&kind, "kind", "", "the job's kind (letters, digits, _.:-), which `dbq work --kind KIND=CMD` routes on (empty: none)")
	f.Int16Var(&priority, "priority", 0, "priority, lower runs first")
	f.DurationVar(&delay, "delay", 0, "run no sooner than this from now (database clock)")
	f.IntVar(&maxAttempts, "max-attempts", queue.DefaultMaxAttempts, "runs before the job is dead")
	f.StringVar(&dedupe, "dedupe", "", "dedupe key (at most 200 bytes), unique among the queue's stored jobs")
	f.BoolVar(&lines, "lines", false, "one job per line of stdin")
	f.IntVar(&count, "count", 1, "enqueue this many copies of the payload")
	return cmd
}

// readJobs sends the jobs the input makes to out: count copies of one
// payload (args[0], or stdin when it is "-" or absent), or with lines one
// job per line of stdin. It stops when ctx ends.
func readJobs(ctx context.Context, stdin io.Reader, args []string, lines bool, count, limit int, base queue.NewJob, out chan<- queue.NewJob) error {
	send := func(payload []byte) error {
		j := base
		j.Payload = payload
		select {
		case out <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if lines {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), limit+1)
		n := 0
		for sc.Scan() {
			n++
			if err := send(append([]byte(nil), sc.Bytes()...)); err != nil {
				return err
			}
		}
		if errors.Is(sc.Err(), bufio.ErrTooLong) {
			return fmt.Errorf("%w: line %d of stdin is over the limit of %d bytes", queue.ErrPayloadTooLarge, n+1, limit)
		}
		return sc.Err()
	}
	var payload []byte
	if len(args) == 1 && args[0] != "-" {
		payload = []byte(args[0])
	} else {
		var err error
		if payload, err = io.ReadAll(io.LimitReader(stdin, int64(limit)+1)); err != nil {
			return err
		}
		if len(payload) > limit {
			return fmt.Errorf("%w: the payload on stdin is over the limit of %d bytes", queue.ErrPayloadTooLarge, limit)
		}
	}
	for range count {
		if err := send(payload); err != nil {
			return err
		}
	}
	return nil
}

// enqueueAll stores every job from jobs in one transaction on the database
// dsn names, committed once jobs is closed and readErr says the input was
// read whole: all of them or, if ctx ends or anything fails first, none.
func enqueueAll(ctx context.Context, dsn string, q *queue.Queue, jobs <-chan queue.NewJob, readErr <-chan error) ([]int64, error) {
	db, _, err := dbq.OpenDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// The transaction does not follow ctx: an interrupt is checked between
	// batches and before the commit, so that a commit once begun ends
	// (and is reported) as the database ends it.
	tx, err := db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var (
		ids   []int64
		batch []queue.NewJob
		size  int
	)
	flush := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		got, err := q.EnqueueTx(context.WithoutCancel(ctx), tx, batch...)
		ids = append(ids, got...)
		batch, size = batch[:0], 0
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case j, ok := <-jobs:
			if !ok {
				if err := <-readErr; err != nil {
					return nil, err
				}
				if err := flush(); err != nil {
					return nil, err
				}
				if err := tx.Commit(); err != nil {
					return nil, err
				}
				return ids, nil
			}
			batch = append(batch, j)
			size += len(j.Payload)
			if len(batch) == enqueueBatch || size >= enqueueBatchBytes {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
}
