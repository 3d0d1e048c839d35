package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/cobra"
)

// listFlags are the flags of the commands that list jobs.
type listFlags struct {
	queue  string
	kind   string
	state  string
	limit  int
	after  int64
	asJSON bool
}

func (l *listFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&l.limit, "limit", queue.DefaultListLimit, fmt.Sprintf("jobs to show, at most %d", queue.MaxListLimit))
	f.Int64Var(&l.after, "after", 0, "show jobs with a larger id: the last id of the previous page")
	f.StringVar(&l.kind, "kind", "", "only jobs of this kind")
	f.BoolVar(&l.asJSON, "json", false, "print JSON")
}

// list prints the jobs f selects, and on stderr how to get the next page
// when the page is full.
func (l *listFlags) list(cmd *cobra.Command, g *globals, f queue.JobFilter) error {
	// 0 would mean the default to Queue.Jobs; on the command line it more
	// likely is a mistake.
	if l.limit < 1 || l.limit > queue.MaxListLimit {
		return fmt.Errorf("--limit %d: want 1..%d", l.limit, queue.MaxListLimit)
	}
	if l.after < 0 {
		return fmt.Errorf("--after %d: want a job id, or 0 for the first page", l.after)
	}
	ctx := cmd.Context()
	q, err := g.open(ctx, g.config())
	if err != nil {
		return err
	}
	defer q.Close()
	f.AfterID, f.Limit, f.Kind = l.after, l.limit, l.kind
	jobs, err := q.Jobs(ctx, f)
	if err != nil {
		return err
	}
	if l.asJSON {
		out := make([]jobJSON, len(jobs))
		for i, j := range jobs {
			out[i] = toJSON(j)
		}
		return printJSON(cmd.OutOrStdout(), out)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tKIND\tSTATE\tPRIORITY\tATTEMPT\tRUN AT\tLAST ERROR")
	for _, j := range jobs {
		state := string(j.State)
		if j.State == queue.StateReady && j.RunAt.After(time.Now()) {
			state = "scheduled"
		}
		kind := j.Kind
		if kind == "" {
			kind = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\n", j.ID, j.Queue, oneLine(kind, 40), state, j.Priority,
			j.Attempt, j.MaxAttempts, j.RunAt.UTC().Format(time.RFC3339), oneLine(j.LastError, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(jobs) == f.Limit && len(jobs) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: add --after %d\n", jobs[len(jobs)-1].ID)
	}
	return nil
}

// jobJSON is a job as the CLI prints it. The payload is a string when it is
// UTF-8 text (JSON payloads are), else base64 in payload_base64.
type jobJSON struct {
	ID            int64     `json:"id"`
	Queue         string    `json:"queue"`
	Kind          string    `json:"kind,omitempty"`
	State         string    `json:"state"`
	Priority      int16     `json:"priority"`
	Attempt       int       `json:"attempt"`
	MaxAttempts   int       `json:"max_attempts"`
	RunAt         time.Time `json:"run_at"`
	CreatedAt     time.Time `json:"created_at"`
	LastError     string    `json:"last_error,omitempty"`
	DedupeKey     string    `json:"dedupe_key,omitempty"`
	Payload       *string   `json:"payload,omitempty"`
	PayloadBase64 []byte    `json:"payload_base64,omitempty"`
}

func toJSON(j *queue.Job) jobJSON {
	out := jobJSON{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, State: string(j.State), Priority: j.Priority, Attempt: j.Attempt,
		MaxAttempts: j.MaxAttempts, RunAt: j.RunAt, CreatedAt: j.CreatedAt, LastError: j.LastError,
		DedupeKey: j.DedupeKey,
	}
	if utf8.Valid(j.Payload) {
		s := string(j.Payload)
		out.Payload = &s
	} else {
		out.PayloadBase64 = j.Payload
	}
	return out
}

// oneLine returns the first line of s, cut to n runes.
func oneLine(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	} else if cut {
		return s + " …"
	}
	return s
}

func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("%q is not a job id", a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// missing returns the ids of want that are not in got.
func missing(want, got []int64) []int64 {
	var out []int64
	for _, id := range want {
		if !slices.Contains(got, id) {
			out = append(out, id)
		}
	}
	return out
}

func printIDs(w io.Writer, verb string, ids []int64) {
	noun := "jobs"
	if len(ids) == 1 {
		noun = "job"
	}
	fmt.Fprintf(w, "%s %d %s", verb, len(ids), noun)
	if len(ids) > 0 && len(ids) <= 20 {
		fmt.Fprintf(w, ": %s", strings.Trim(fmt.Sprint(ids), "[]"))
	}
	fmt.Fprintln(w)
}

func deadCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "dead",
		Short: "List dead jobs and run them again",
	})
	var l listFlags
	list := &cobra.Command{
		Use:   "list --queue Q [--limit N] [--after ID] [--json]",
		Short: "List a queue's dead jobs, oldest id first, with their last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return l.list(cmd, g, queue.JobFilter{Queue: l.queue, State: queue.StateDead})
		},
	}
	list.Flags().StringVarP(&l.queue, "queue", "q", "default", "queue")
	l.register(list)

	var (
		name string
		all  bool
	)
	retry := &cobra.Command{
		Use:   "retry --queue Q (ID... | --all)",
		Short: "Make dead jobs ready to run now, with attempt 0 (last error kept)",
		Long: `retry makes the given dead jobs of the queue, or with --all every dead job of
it, ready to run now with their attempts reset. It fails, after reviving the
others, when an id is not a dead job of the queue.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return fmt.Errorf("name the dead jobs to retry, or pass --all")
			}
			var ids []int64 // nil: every dead job, as RetryDead takes it
			if !all {
				var err error
				if ids, err = parseIDs(args); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			done, err := q.RetryDead(ctx, name, ids...)
			if err != nil {
				return err
			}
			printIDs(cmd.OutOrStdout(), "retried", done)
			if miss := missing(ids, done); len(miss) > 0 {
				return fmt.Errorf("not dead jobs of queue %s: %v", name, miss)
			}
			return nil
		},
	}
	retry.Flags().StringVarP(&name, "queue", "q", "default", "queue")
	retry.Flags().BoolVar(&all, "all", false, "retry every dead job of the queue")
	cmd.AddCommand(list, retry)
	return cmd
}

func jobsCmd(g *globals) *cobra.Command {
	var l listFlags
	cmd := &cobra.Command{
		Use:   "jobs [--queue Q] [--state ready|held|dead] [--limit N] [--after ID] [--json]",
		Short: "List stored jobs, oldest id first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			state := queue.State(l.state)
			switch l.state {
			case "held":
				state = queue.StateClaimed
			case "", string(queue.StateReady), string(queue.StateClaimed), string(queue.StateDead):
			default:
				return fmt.Errorf("--state %q: want ready, held (or claimed) or dead", l.state)
			}
			return l.list(cmd, g, queue.JobFilter{Queue: l.queue, State: state})
		},
	}
	cmd.Flags().StringVarP(&l.queue, "queue", "q", "", "only this queue's jobs (default all)")
	cmd.Flags().StringVar(&l.state, "state", "", "only jobs in this state: ready (includes scheduled), held or dead")
	l.register(cmd)
	return cmd
}

func cancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID...",
		Short: "Delete jobs no worker holds (ready, scheduled or dead)",
		Long: `cancel deletes the given jobs unless a worker holds them: a held job is left to
its holder. It fails, after deleting the others, when an id was not deleted
(held, or no such job).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			done, err := q.Cancel(ctx, ids...)
			if err != nil {
				return err
			}
			printIDs(cmd.OutOrStdout(), "cancelled", done)
			if miss := missing(ids, done); len(miss) > 0 {
				return fmt.Errorf("not cancelled (held by a worker, or no such job): %v", miss)
			}
			return nil
		},
	}
}

func pauseCmd(g *globals, pause bool) *cobra.Command {
	use, short, verb := "pause QUEUE", "Stop workers from claiming a queue's jobs (running jobs go on)", "paused"
	if !pause {
		use, short, verb = "resume QUEUE", "Let workers claim a paused queue's jobs again", "resumed"
	}
	return g.toggleCmd(use, short, verb, func(ctx context.Context, q *queue.Queue, name string) error {
		if pause {
			return q.Pause(ctx, name)
		}
		return q.Resume(ctx, name)
	})
}

// toggleCmd is a command that pauses or resumes one named thing (a queue,
// a schedule) with set, then says verb and the name.
func (g *globals) toggleCmd(use, short, verb string, set func(context.Context, *queue.Queue, string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			q, err := g.open(ctx, g.config())
			if err != nil {
				return err
			}
			defer q.Close()
			if err := set(ctx, q, args[0]); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), verb, args[0])
			return nil
		},
	}
}
