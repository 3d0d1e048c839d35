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

// schedulesCmd is `dbq schedules list|pause|resume|delete|prune`.
func schedulesCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "schedules",
		Short: "List, pause, resume, delete and prune recurring schedules",
	})
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "Show every stored schedule: spec, time zone, queue, last and next tick, paused, last seen",
		Long: fmt.Sprintf(`list shows every stored schedule. Running schedulers store their
schedules' definitions every %v (SEEN); a schedule not seen for %v is
marked stale: no running scheduler defines it any more (its line or code
was removed or renamed, or its schedulers are down). dbq schedules prune
removes such schedules.`, schedule.SeenInterval, schedule.StaleAfter),
		Args: cobra.NoArgs,
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
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSPEC\tTIME ZONE\tQUEUE\tLAST TICK\tNEXT TICK\tPAUSED\tSEEN")
			for _, s := range got {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", s.Name, s.Spec, s.TimeZone, s.Queue,
					tickText(s.LastTick), tickText(s.NextTick), s.Paused, seenText(s, now))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(list, schedulePauseCmd(g, true), schedulePauseCmd(g, false), scheduleDeleteCmd(g), schedulePruneCmd(g))
	return cmd
}

// seenText is when a scheduler last stored s, and "stale" when that is
// longer ago than schedule.StaleAfter.
func seenText(s queue.ScheduleInfo, now time.Time) string {
	text := tickText(s.SeenAt)
	if schedule.Stale(s, now) {
		text += " (stale)"
	}
	return text
}

func scheduleDeleteCmd(g *globals) *cobra.Command {
	c := g.toggleCmd("delete NAME", "Remove a stored schedule (its last tick and paused flag; its jobs stay)", "deleted",
		func(ctx context.Context, q *queue.Queue, name string) error {
			if err := q.DeleteSchedule(ctx, name); err != nil {
				return fmt.Errorf("%w: %s", err, name)
			}
			return nil
		})
	c.Long = fmt.Sprintf(`delete removes a stored schedule. A scheduler that still defines it stores
it again within %v, unpaused, starting from then: remove its line from the
crontab file (or its definition from the code) first. See also prune.`, schedule.SeenInterval)
	return c
}

func schedulePruneCmd(g *globals) *cobra.Command {
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "prune [--older-than D]",
		Short: "Remove the schedules no running scheduler has stored for D (default 24h)",
		Long: fmt.Sprintf(`prune removes every stored schedule that no scheduler has stored for
--older-than (default 24h, at least %v, the time after which list marks a
schedule stale): schedules whose lines were removed or renamed. Each is
removed only if it is still unseen at that moment, so a scheduler that
refreshes it meanwhile keeps it. Prints the names removed.`, schedule.StaleAfter),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan < schedule.StaleAfter {
				return fmt.Errorf("%w: --older-than %v is under %v: running schedulers store their schedules every %v, so a younger one may be running",
					queue.ErrInvalidConfig, olderThan, schedule.StaleAfter, schedule.SeenInterval)
			}
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			gone, err := q.PruneSchedules(ctx, time.Now().Add(-olderThan))
			for _, name := range gone {
				fmt.Fprintln(cmd.OutOrStdout(), "deleted", name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "dbq schedules prune: %d schedule(s) not seen for %v deleted\n", len(gone), olderThan)
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 24*time.Hour, "remove schedules not seen for this long")
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
				if like := schedulesOfQueue(ctx, q, name); len(like) > 0 {
					return fmt.Errorf("%w: %s (schedules of queue %s: %s)", err, name, name, strings.Join(like, ", "))
				}
			}
			return fmt.Errorf("%w: %s", err, name)
		}
		return nil
	})
}

// schedulesOfQueue returns the names of the stored schedules that feed
// queue name: what a person who typed the queue most likely meant. Nil when
// none or on error.
func schedulesOfQueue(ctx context.Context, q *queue.Queue, name string) []string {
	all, err := q.Schedules(ctx)
	if err != nil {
		return nil
	}
	var like []string
	for _, s := range all {
		if s.Queue == name {
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

` + schedule.CrontabSyntax + `

For example:

  0 3 * * *  reports  {"kind":"nightly"}
  name=weekly kind=report.weekly CRON_TZ=Europe/Berlin 0 6 * * 1 reports {}
  seconds=*/15 * * * * * probes

A bad line is refused with its number. Any number of processes may run the
same file (here or in dbq work --schedule): each tick makes one job, also
while old and new versions of the file run side by side. A changed spec
starts from the moment it is stored, so it never fires a tick of the old
spec. After downtime only the latest missed tick is enqueued. See dbq
schedules list.`,
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
