package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/schedule"
	"github.com/spf13/cobra"
)

// schedulesCmd is `dbq schedules list|pause|resume`.
func schedulesCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "schedules",
		Short: "List, pause and resume recurring schedules",
	})
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "Show every stored schedule: spec, time zone, queue, last and next tick, paused",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			got, err := q.Schedules(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				if got == nil {
					got = []queue.ScheduleInfo{}
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(got)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSPEC\tTIME ZONE\tQUEUE\tLAST TICK\tNEXT TICK\tPAUSED")
			for _, s := range got {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\n", s.Name, s.Spec, s.TimeZone, s.Queue,
					tickText(s.LastTick), tickText(s.NextTick), s.Paused)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(list, schedulePauseCmd(g, true), schedulePauseCmd(g, false))
	return cmd
}

func tickText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func schedulePauseCmd(g *globals, pause bool) *cobra.Command {
	use, short, verb := "pause NAME", "Stop a schedule from enqueueing jobs (its ticks pass without one)", "paused"
	if !pause {
		use, short, verb = "resume NAME", "Let a paused schedule enqueue jobs again from its next tick", "resumed"
	}
	return g.toggleCmd(use, short, verb, func(ctx context.Context, q *queue.Queue, name string) error {
		set := q.ResumeSchedule
		if pause {
			set = q.PauseSchedule
		}
		if err := set(ctx, name); err != nil {
			if errors.Is(err, queue.ErrScheduleNotFound) {
				if like := schedulesNamed(ctx, q, name); len(like) > 0 {
					return fmt.Errorf("%w: %s (a crontab line's schedule is named QUEUE.HASH: %s)", err, name, strings.Join(like, ", "))
				}
			}
			return fmt.Errorf("%w: %s", err, name)
		}
		return nil
	})
}

// schedulesNamed returns the stored schedules whose names are name
// followed by a dot, as a crontab file names its lines' schedules: what a
// person who typed the queue most likely meant. Nil when none or on error.
func schedulesNamed(ctx context.Context, q *queue.Queue, name string) []string {
	all, err := q.Schedules(ctx)
	if err != nil {
		return nil
	}
	var like []string
	for _, s := range all {
		if strings.HasPrefix(s.Name, name+".") {
			like = append(like, s.Name)
		}
	}
	return like
}

// scheduleCmd is `dbq schedule --file FILE`: run schedules alone.
func scheduleCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "schedule --file FILE",
		Short: "Enqueue the jobs of the schedules in a crontab-like file until interrupted",
		Long: `schedule reads schedules from FILE, one per line:

  # comment
  CRON_TZ=Europe/Berlin            time zone of the lines below (default UTC)
  SPEC  QUEUE  PAYLOAD             e.g.  0 3 * * *  reports  {"kind":"nightly"}

SPEC is a 5-field cron spec, 6 fields starting with seconds, @hourly,
@daily, @weekly, @monthly, @yearly or @every 30s. A bad line is refused
with its number. Any number of processes may run the same file (here or in
dbq work --schedule): each tick makes one job. After downtime only the
latest missed tick is enqueued. See dbq schedules list.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := g.config()
			schedules, err := readCrontab(file)
			if err != nil {
				return err
			}
			q, err := g.open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer q.Close()
			sc, err := schedule.New(q, schedules, schedule.Config{Logger: cfg.Logger, Hooks: logHooks{cfg.Logger}})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "dbq schedule: running %d schedule(s) from %s\n", len(schedules), file)
			return sc.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "crontab-like file of schedules (required)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// readCrontab reads and checks the schedules of file.
func readCrontab(file string) ([]schedule.Schedule, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := schedule.ParseCrontab(f)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, file)
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("%w: no schedules (file %s)", schedule.ErrCrontab, file)
	}
	return s, nil
}

// runSchedules starts the schedules of file on q beside a worker, until
// ctx ends or stop is called; stop returns once they have stopped. A
// scheduler that has to stop (the schedules table is missing) says so on
// stderr and leaves the worker running.
func runSchedules(ctx context.Context, q *queue.Queue, file string, log *slog.Logger) (stop func(), err error) {
	schedules, err := readCrontab(file)
	if err != nil {
		return nil, err
	}
	sc, err := schedule.New(q, schedules, schedule.Config{Logger: log, Hooks: logHooks{log}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := sc.Run(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "dbq work: schedules stopped: %v\n", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// logHooks logs each tick enqueued at debug level (dbq -v).
type logHooks struct{ log *slog.Logger }

func (h logHooks) TickEnqueued(name string, tick time.Time, id int64) {
	h.log.Debug("dbq: schedule: tick enqueued", "schedule", name, "tick", tick, "job", id)
}

func (h logHooks) TicksSkipped(name string, reason schedule.SkipReason, n int) {
	h.log.Debug("dbq: schedule: ticks skipped", "schedule", name, "reason", reason, "n", n)
}

func (logHooks) TickFailed(string, error) {} // the scheduler logs failures itself
