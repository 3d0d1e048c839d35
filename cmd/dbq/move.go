package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/move"
	"github.com/dbqueue/dbq/queue"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func moveCmd(g *globals) *cobra.Command {
	var (
		from, to                                 string
		fromSchema, fromPrefix, toSchema, toPrfx string
		queues                                   []string
		states                                   string
		opts                                     move.Options
		migrate, asJSON                          bool
	)
	cmd := &cobra.Command{
		Use:   "move --from DSN --to DSN",
		Short: "Move jobs from one database to another, live, resumable and verified",
		Long:  moveLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if from == "" || to == "" {
				return errors.New("move: --from and --to are required")
			}
			if opts.Batch < 1 || opts.Batch > move.MaxBatch {
				return fmt.Errorf("%w: --batch %d: want 1..%d", queue.ErrInvalidConfig, opts.Batch, move.MaxBatch)
			}
			srcCfg, dstCfg := g.config(), g.config()
			srcCfg.Schema, srcCfg.Prefix = pick(fromSchema, g.schema), pick(fromPrefix, g.prefix)
			dstCfg.Schema, dstCfg.Prefix = pick(toSchema, g.schema), pick(toPrfx, g.prefix)
			if from == to && srcCfg.Schema == dstCfg.Schema && srcCfg.Prefix == dstCfg.Prefix {
				return fmt.Errorf("%w: --from and --to name the same database and tables", move.ErrSameDatabase)
			}
			var err error
			if opts.Ready, opts.Scheduled, opts.Dead, err = parseStates(states); err != nil {
				return err
			}
			opts.Queues = queues
			opts.Logger = g.logger()
			// A missing SQLite file is refused rather than created: the
			// source is only read, and only --migrate makes a destination.
			if err := mustExist(from); err != nil {
				return fmt.Errorf("move: source: %w", err)
			}
			if migrate {
				if err := migrateUp(ctx, to, dstCfg); err != nil {
					return fmt.Errorf("move: migrating the destination: %w", err)
				}
			} else if err := mustExist(to); err != nil {
				return fmt.Errorf("%w: %w (run again with --migrate)", move.ErrDestinationNotMigrated, err)
			}
			src, err := dbq.Open(ctx, from, dbq.Options{Config: srcCfg})
			if err != nil {
				return fmt.Errorf("move: source: %w", err)
			}
			defer src.Close()
			dst, err := dbq.Open(ctx, to, dbq.Options{Config: dstCfg})
			if err != nil {
				return fmt.Errorf("move: destination: %w", err)
			}
			defer dst.Close()

			out := cmd.OutOrStdout()
			progressTo := out
			if asJSON {
				progressTo = cmd.ErrOrStderr()
			}
			p := newMoveProgress(progressTo)
			opts.Progress = p.update
			rep, err := move.Run(ctx, src, dst, opts)
			p.done()
			if errors.Is(err, move.ErrDestinationNotMigrated) {
				return fmt.Errorf("%w (run again with --migrate, or dbq migrate up on the destination)", err)
			}
			if rep == nil {
				return err
			}
			if asJSON {
				if jerr := printJSON(out, rep); jerr != nil {
					return jerr
				}
			} else {
				printMoveReport(out, rep)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "DSN of the database to move jobs from")
	f.StringVar(&to, "to", "", "DSN of the database to move jobs to")
	f.StringVar(&fromSchema, "from-schema", "", "schema of the source tables (default --schema)")
	f.StringVar(&fromPrefix, "from-prefix", "", "table prefix on the source (default --prefix)")
	f.StringVar(&toSchema, "to-schema", "", "schema of the destination tables (default --schema)")
	f.StringVar(&toPrfx, "to-prefix", "", "table prefix on the destination (default --prefix)")
	f.StringSliceVar(&queues, "queue", nil, "move only this queue (repeat or comma-separate; default all)")
	f.StringVar(&states, "states", "ready,scheduled,dead", "states to move, comma-separated: ready, scheduled, dead")
	f.IntVar(&opts.Batch, "batch", move.DefaultBatch, fmt.Sprintf("jobs per batch (1..%d)", move.MaxBatch))
	f.BoolVar(&opts.DryRun, "dry-run", false, "check and count what would move; move nothing")
	f.BoolVar(&opts.Follow, "follow", false, "keep moving until the source holds none of the selected jobs (cutover)")
	f.DurationVar(&opts.PollInterval, "poll", move.DefaultPollInterval, "with --follow, how often to look again")
	f.StringVar(&opts.SourceID, "source-id", "", "name of the source in the dedupe keys of moved jobs (default: its address and table)")
	f.BoolVar(&migrate, "migrate", false, "migrate the destination first, also on --dry-run (needs DDL rights)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (progress goes to stderr)")
	return cmd
}

func pick(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

func parseStates(s string) (ready, scheduled, dead bool, err error) {
	for _, st := range strings.Split(s, ",") {
		switch strings.TrimSpace(st) {
		case "ready":
			ready = true
		case "scheduled":
			scheduled = true
		case "dead":
			dead = true
		case "":
		default:
			return false, false, false, fmt.Errorf("%w: --states: unknown state %q (want ready, scheduled, dead)", queue.ErrInvalidConfig, st)
		}
	}
	if !ready && !scheduled && !dead {
		return false, false, false, fmt.Errorf("%w: --states names no state", queue.ErrInvalidConfig)
	}
	return ready, scheduled, dead, nil
}

func migrateUp(ctx context.Context, dsn string, cfg queue.Config) error {
	p, db, err := dbq.Migrator(ctx, dsn, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = p.Up(ctx)
	return err
}

// moveProgress shows a move's progress: a bar on a terminal, else a line
// every few seconds.
type moveProgress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	bar  *progressbar.ProgressBar
	last time.Time
}

const progressEvery = 2 * time.Second

func newMoveProgress(w io.Writer) *moveProgress { return &moveProgress{w: w, tty: isTerminal(w)} }

func (p *moveProgress) update(pr move.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		if time.Since(p.last) < progressEvery {
			return
		}
		p.last = time.Now()
		rate := float64(pr.Moved) / max(pr.Elapsed.Seconds(), 1e-9)
		eta := "-"
		if rest := pr.Total - pr.Moved; rest > 0 && rate > 0 {
			eta = time.Duration(float64(rest) / rate * float64(time.Second)).Round(time.Second).String()
		}
		fmt.Fprintf(p.w, "moved %d of %d jobs, %.0f jobs/s, eta %s\n", pr.Moved, pr.Total, rate, eta)
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(max(pr.Total, 1),
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("moving"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("jobs"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond))
	}
	if pr.Moved > p.bar.GetMax64() {
		p.bar.ChangeMax64(pr.Moved)
	}
	_ = p.bar.Set64(pr.Moved)
}

func (p *moveProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}

func printMoveReport(w io.Writer, r *move.Report) {
	if r.DryRun {
		fmt.Fprintf(w, "dry run: %d jobs to move from %s to %s; %d held by workers now\n",
			r.Planned, r.Source.Identity, r.Destination.Identity, r.Held)
		return
	}
	fmt.Fprintf(w, "moved %d jobs (%d stored, %d found from an earlier run) in %v, %.0f jobs/s, %d passes\n",
		r.Moved+r.Found, r.Moved, r.Found, r.Elapsed.Round(time.Millisecond), r.JobsPerSecond, r.Passes)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SIDE\tJOBS\tREADY\tSCHEDULED\tDEAD\tHELD\tCHECKSUM\tTABLE")
	for _, s := range []struct {
		name string
		side move.Side
	}{{"source", r.Source}, {"destination", r.Destination}} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.name, s.side.Jobs, s.side.Ready, s.side.Scheduled,
			s.side.Dead, s.side.Held, s.side.Checksum, s.side.Identity)
	}
	_ = tw.Flush()
	if r.Left > 0 || r.Held > 0 {
		fmt.Fprintf(w, "left on the source: %d selected jobs, %d held by workers (run move again once they are released)\n", r.Left, r.Held)
	}
	if r.Rejected > 0 {
		fmt.Fprintf(w, "rejected: %d source jobs left in place: their dedupe keys are not text the destination can store\n", r.Rejected)
	}
	if r.Conflicts > 0 {
		fmt.Fprintf(w, "conflicts: %d source jobs left in place: the destination holds other jobs with their dedupe keys\n", r.Conflicts)
	}
	if r.Worked+r.Gone > 0 {
		fmt.Fprintf(w, "taken by destination workers since they moved: %d held, retried or snoozed; %d completed (compared on queue, payload, priority, max attempts and creation time)\n",
			r.Worked, r.Gone)
	}
	if r.Mismatched > 0 {
		fmt.Fprintf(w, "mismatched: %d moved jobs are not on the destination as the source held them\n", r.Mismatched)
	}
	switch {
	case !r.Verified():
		fmt.Fprintln(w, "NOT VERIFIED: the sides differ")
	case r.Worked+r.Gone > 0:
		fmt.Fprintln(w, "verified: every moved job is on the destination as it was, or as its workers left it")
	default:
		fmt.Fprintln(w, "verified: both sides match")
	}
}

const moveLong = `Move jobs from the queue tables of --from to those of --to, in batches: each is
locked on the source (live workers skip it), stored on the destination with a
dedupe key naming its source job, then deleted on the source. Killed and run
again, a move ends as one uninterrupted run would. Jobs workers hold on the
source are left to them and moved by a later pass once released or failed.

Cutover: point producers at the new database, run move --follow until the
source is empty, then stop the old workers.

At the end every moved job is read back from the destination and compared with
the job the source held: its queue, payload bytes, priority, run_at, attempts,
state, last error and creation time, and the destination id it was stored
under. The end prints counts per state and a checksum on both sides (the
source's jobs as moved, the destination's as read back), and exits non-zero
when a moved job differs. Jobs destination workers took meanwhile are counted
apart: held, retried or snoozed ("worked"), or completed ("gone").`
