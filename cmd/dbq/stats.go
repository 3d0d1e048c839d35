package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/cobra"
)

func statsCmd(g *globals) *cobra.Command {
	var asJSON, byKind, health bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show per queue: ready, scheduled, held and dead jobs, whether it is paused, and the oldest ready job's wait",
		Long: `stats shows per queue the ready, scheduled, held and dead jobs, whether it is
paused, and the oldest ready job's wait. Where the database reports its health
(PostgreSQL), two lines follow the table: what holds the MVCC horizon back
longest (a session, replication slot or prepared transaction, how long it has
been open and its age in transaction ids), and the jobs table's dead and live
rows and last autovacuum. --health prints only those (as JSON with --json);
see docs/postgres-health.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := g.open(cmd.Context(), g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			if health {
				return printHealth(cmd, q, asJSON)
			}
			if byKind {
				return printKindStats(cmd, q, asJSON)
			}
			st, err := q.Stats(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), st)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "QUEUE\tREADY\tSCHEDULED\tHELD\tDEAD\tPAUSED\tOLDEST READY\t")
			for _, s := range st {
				age := "-"
				if s.Ready > 0 {
					age = time.Duration(s.OldestReadyAge * float64(time.Second)).Round(time.Millisecond).String()
				}
				paused := "no"
				if s.Paused {
					paused = "yes"
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", s.Queue, s.Ready, s.Scheduled, s.Held, s.Dead, paused, age)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			h, err := q.Health(cmd.Context())
			if errors.Is(err, queue.ErrUnsupported) {
				return nil
			}
			if err != nil {
				// The counts are printed; a report the account may not
				// read is no reason to fail them.
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "\nhealth: %v\n", err)
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return healthLines(cmd.OutOrStdout(), h)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&byKind, "by-kind", false, "count per queue and job kind")
	cmd.Flags().BoolVar(&health, "health", false, "print only the database's health: what holds the MVCC horizon back, the jobs table's dead rows")
	return cmd
}

// printHealth prints the database's health report alone, for --health.
func printHealth(cmd *cobra.Command, q *queue.Queue, asJSON bool) error {
	h, err := q.Health(cmd.Context())
	if err != nil {
		return err
	}
	if asJSON {
		if h.Holders == nil {
			h.Holders = []queue.HorizonHolder{}
		}
		return printJSON(cmd.OutOrStdout(), h)
	}
	return healthLines(cmd.OutOrStdout(), h)
}

// healthLines prints the horizon and jobs table lines of h, marking dead
// rows past queue.TableHealth.TooManyDead.
func healthLines(w io.Writer, h queue.Health) error {
	warn := ""
	if h.Table.TooManyDead() {
		warn = fmt.Sprintf(" — more than max(%d, 2 × live): see `dbq check`", queue.DeadRowsWarn)
	}
	_, err := fmt.Fprintf(w, "MVCC horizon: %s\njobs table: %s%s\n", h.HorizonSummary(), h.TableSummary(), warn)
	return err
}

// printKindStats prints the counts per queue and kind.
func printKindStats(cmd *cobra.Command, q *queue.Queue, asJSON bool) error {
	st, err := q.StatsByKind(cmd.Context())
	if err != nil {
		return err
	}
	if asJSON {
		if st == nil {
			st = []queue.KindStats{}
		}
		return printJSON(cmd.OutOrStdout(), st)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "QUEUE\tKIND\tREADY\tSCHEDULED\tHELD\tDEAD\t")
	for _, s := range st {
		kind := s.Kind
		if kind == "" {
			kind = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t\n", s.Queue, oneLine(kind, 40), s.Ready, s.Scheduled, s.Held, s.Dead)
	}
	return tw.Flush()
}
