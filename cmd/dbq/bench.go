package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/dbqueue/dbq/bench"
	"github.com/spf13/cobra"
)

// benchCmd measures the queue against the raw-SQL floor on --dsn.
func benchCmd(g *globals) *cobra.Command {
	var (
		cfg      bench.Config
		quick    bool
		asJSON   bool
		plotFile string
		merge    []string
		sections []string
		cpuProf  string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure enqueue, drain, claim-and-complete latency, pickup and steady state against raw SQL",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkBenchFlags(cmd, cfg); err != nil {
				return err
			}
			c := cfg
			if quick {
				quickDefaults(cmd, &c)
			}
			c.Sections = sections
			c.Schema, c.Logger = g.schema, g.logger()
			if !asJSON {
				c.Progress = cmd.ErrOrStderr()
			}
			r, err := bench.New(g.dsn, c)
			if err != nil {
				return err
			}
			if cpuProf != "" {
				stop, err := startCPUProfile(cpuProf)
				if err != nil {
					return err
				}
				defer stop()
			}
			rows, err := r.Run(cmd.Context())
			for _, file := range merge {
				more, merr := readRows(file)
				if merr != nil && err == nil {
					err = merr
				}
				rows = append(rows, more...)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if werr := bench.WriteJSON(out, rows); werr != nil && err == nil {
					err = werr
				}
			} else if werr := bench.WriteTable(out, rows); werr != nil && err == nil {
				err = werr
			}
			if plotFile != "" && err == nil {
				err = bench.Plot(plotFile, rows)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&sections, "sections", nil, fmt.Sprintf("sections to run (default all: %v)", bench.AllSections))
	f.IntVar(&cfg.N, "n", 0, "jobs per drain (default 100000)")
	f.IntSliceVar(&cfg.Workers, "workers", nil, "worker counts to drain with (default 1,2,4,8,16,32,64)")
	f.StringSliceVar(&cfg.Strategies, "strategies", nil, "claim strategies (default all the dialect has)")
	f.IntVar(&cfg.DrainBatch, "batch", 0, "drain: jobs per claim of each Worker, and per DELETE of the floor, 1..1000 (default 100)")
	f.IntVar(&cfg.DrainConcurrency, "concurrency", 0, "drain: handlers per Worker (default --batch: a Worker claims only for free handlers)")
	f.BoolVar(&quick, "quick", false, "a small smoke run")
	f.BoolVar(&asJSON, "json", false, "print rows as JSON lines")
	f.StringSliceVar(&merge, "merge", nil, "JSON rows from another program (bench/river) to add to the table and plot")
	f.IntVar(&cfg.EnqueueJobs, "enqueue-jobs", 0, "jobs per enqueue cell (default 10000)")
	f.IntSliceVar(&cfg.DepthSizes, "depth", nil, "ready-job counts for claim latency (default 10000,1000000)")
	f.IntVar(&cfg.DepthFuture, "future", 0, "future jobs ahead of the ready ones in the last depth cell (default 1000000)")
	f.IntVar(&cfg.Samples, "samples", 0, "claim-and-complete steps timed per depth cell (default 500; pickup times a tenth)")
	f.IntVar(&cfg.SteadyTotal, "steady-total", 0, "jobs worked in the steady-state section (default 1000000)")
	f.IntVar(&cfg.SteadyWindow, "steady-window", 0, "first and last window compared there (default 100000)")
	f.StringVar(&plotFile, "plot", "", "draw drain throughput vs workers to this file (.png, .svg)")
	f.StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	return cmd
}

// quickDefaults sets c's counts to bench.Quick's, but for the flags given
// explicitly, which win over --quick.
func quickDefaults(cmd *cobra.Command, c *bench.Config) {
	q := bench.Quick()
	f := cmd.Flags()
	if !f.Changed("n") {
		c.N = q.N
	}
	if !f.Changed("workers") {
		c.Workers = q.Workers
	}
	set := func(name string, dst *int, v int) {
		if !f.Changed(name) {
			*dst = v
		}
	}
	set("enqueue-jobs", &c.EnqueueJobs, q.EnqueueJobs)
	set("future", &c.DepthFuture, q.DepthFuture)
	set("samples", &c.Samples, q.Samples)
	set("steady-total", &c.SteadyTotal, q.SteadyTotal)
	set("steady-window", &c.SteadyWindow, q.SteadyWindow)
	if !f.Changed("depth") {
		c.DepthSizes = q.DepthSizes
	}
}

// checkBenchFlags refuses counts below 1, and batches above a Worker's
// 1,000. An unset flag is 0, which means
// its default; given, 0 is a mistake (--workers 0 would never drain).
func checkBenchFlags(cmd *cobra.Command, cfg bench.Config) error {
	f := cmd.Flags()
	for name, v := range map[string]int{
		"n": cfg.N, "enqueue-jobs": cfg.EnqueueJobs, "future": cfg.DepthFuture,
		"samples": cfg.Samples, "steady-total": cfg.SteadyTotal, "steady-window": cfg.SteadyWindow,
		"concurrency": cfg.DrainConcurrency,
	} {
		if f.Changed(name) && v < 1 {
			return fmt.Errorf("--%s %d: want at least 1", name, v)
		}
	}
	if f.Changed("batch") && (cfg.DrainBatch < 1 || cfg.DrainBatch > 1000) {
		return fmt.Errorf("--batch %d: want 1..1000", cfg.DrainBatch)
	}
	for name, vs := range map[string][]int{"workers": cfg.Workers, "depth": cfg.DepthSizes} {
		if f.Changed(name) && len(vs) == 0 {
			return fmt.Errorf("--%s: want at least one count", name)
		}
		for _, v := range vs {
			if v < 1 {
				return fmt.Errorf("--%s %d: want at least 1", name, v)
			}
		}
	}
	return nil
}

// startCPUProfile profiles this process's CPU until the returned function
// is called.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func readRows(file string) ([]bench.Row, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return bench.ReadJSON(f)
}

const benchLong = `bench measures the queue in --dsn, each figure beside its raw-SQL floor (the same
database work as the plainest SQL loop): enqueue, drain of N pre-filled jobs per
worker count and claim strategy, the latency of claiming and completing one job
by table depth (the floor: one DELETE of a ready row), pickup latency on
an idle queue, and steady-state throughput. It works on tables of its own
(a unique prefix) and drops them afterwards. --quick is a small smoke run.`
