package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/cobra"
)

func statsCmd(g *globals) *cobra.Command {
	var asJSON, byKind bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show per queue: ready, scheduled, held and dead jobs, whether it is paused, and the oldest ready job's wait",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := g.open(cmd.Context(), g.config())
			if err != nil {
				return err
			}
			defer q.Close()
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
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&byKind, "by-kind", false, "count per queue and job kind")
	return cmd
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
