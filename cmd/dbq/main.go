// Command dbq runs and inspects dbq job queues in PostgreSQL, MySQL, SQL
// Server or SQLite: migrate the schema, enqueue jobs, run workers that pipe
// each job's payload into a command, show counts, and a self-contained demo.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/cobra"
)

// globals are the flags every command shares.
type globals struct {
	dsn      string
	schema   string
	prefix   string
	strategy string
	verbose  bool
}

func (g *globals) config() queue.Config {
	return queue.Config{Schema: g.schema, Prefix: g.prefix, Logger: g.logger()}
}

func (g *globals) logger() *slog.Logger {
	level := slog.LevelWarn
	if g.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func (g *globals) open(ctx context.Context, cfg queue.Config) (*queue.Queue, error) {
	return dbq.Open(ctx, g.dsn, dbq.Options{Config: cfg, Strategy: g.strategy})
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "dbq:", redactErr(err))
		return 1
	}
	return 0
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "dbq",
		Short: "A job queue in the database you already run",
		Long: `dbq turns a table in PostgreSQL, MySQL, SQL Server or SQLite into a job queue
that many workers on many machines drain in parallel.

The database is named by --dsn (or $DBQ_DSN):
  postgres://user:pass@host:5432/db   mysql://user:pass@host:3306/db
  sqlserver://user:pass@host:1433?database=db   sqlite:path/to/file.db`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("DBQ_DSN")
	if def == "" {
		def = "sqlite:dbq.db"
	}
	f := root.PersistentFlags()
	f.StringVar(&g.dsn, "dsn", def, "database to use (default $DBQ_DSN or sqlite:dbq.db)")
	f.StringVar(&g.schema, "schema", "", "schema (PostgreSQL, SQL Server) or database (MySQL) holding the tables")
	f.StringVar(&g.prefix, "prefix", dialect.DefaultPrefix, "table name prefix")
	f.StringVar(&g.strategy, "strategy", "", "claimer: PostgreSQL advisory (default) or skiplocked; SQL Server deletetop (default) or updlock")
	f.BoolVarP(&g.verbose, "verbose", "v", false, "log debug output to stderr")
	root.AddCommand(migrateCmd(g), enqueueCmd(g), statsCmd(g), workCmd(g), demoCmd(g), benchCmd(g),
		jobsCmd(g), deadCmd(g), cancelCmd(g), pauseCmd(g, true), pauseCmd(g, false), moveCmd(g))
	return root
}

// redactErr keeps passwords out of what the CLI prints.
func redactErr(err error) string { return dialect.Redact(err.Error()) }
