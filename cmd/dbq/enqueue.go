package main

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/cobra"
)

func enqueueCmd(g *globals) *cobra.Command {
	var (
		name        string
		priority    int16
		delay       time.Duration
		maxAttempts int
		dedupe      string
		lines       bool
		count       int
	)
	cmd := &cobra.Command{
		Use:   "enqueue --queue Q [payload | -]",
		Short: "Add jobs: one with the payload given (- or none: stdin), or one per stdin line with --lines",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			base := queue.NewJob{Queue: name, Priority: priority, Delay: delay, MaxAttempts: maxAttempts, DedupeKey: dedupe}
			if count < 1 {
				return fmt.Errorf("--count %d: want at least 1", count)
			}
			var jobs []queue.NewJob
			switch {
			case lines:
				if dedupe != "" {
					return fmt.Errorf("--dedupe applies to one job; not with --lines")
				}
				sc := bufio.NewScanner(cmd.InOrStdin())
				sc.Buffer(make([]byte, 64<<10), q.Config().MaxPayloadBytes+1)
				for sc.Scan() {
					j := base
					j.Payload = append([]byte(nil), sc.Bytes()...)
					jobs = append(jobs, j)
				}
				if err := sc.Err(); err != nil {
					return err
				}
			default:
				var payload []byte
				if len(args) == 1 && args[0] != "-" {
					payload = []byte(args[0])
				} else {
					if payload, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), int64(q.Config().MaxPayloadBytes)+1)); err != nil {
						return err
					}
				}
				for range count {
					j := base
					j.Payload = payload
					jobs = append(jobs, j)
				}
			}
			var total int
			for len(jobs) > 0 {
				n := min(len(jobs), 1000)
				ids, err := q.Enqueue(ctx, jobs[:n]...)
				if err != nil {
					return err
				}
				if len(ids) == 1 && total == 0 && len(jobs) == 1 {
					fmt.Fprintln(cmd.OutOrStdout(), ids[0])
				}
				total += len(ids)
				jobs = jobs[n:]
			}
			if total != 1 {
				fmt.Fprintf(cmd.OutOrStdout(), "enqueued %d jobs\n", total)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&name, "queue", "q", "default", "queue name")
	f.Int16Var(&priority, "priority", 0, "priority, lower runs first")
	f.DurationVar(&delay, "delay", 0, "run no sooner than this from now (database clock)")
	f.IntVar(&maxAttempts, "max-attempts", 0, "runs before the job is dead (default 25)")
	f.StringVar(&dedupe, "dedupe", "", "dedupe key, unique among the queue's stored jobs")
	f.BoolVar(&lines, "lines", false, "one job per line of stdin")
	f.IntVar(&count, "count", 1, "enqueue this many copies of the payload")
	return cmd
}
