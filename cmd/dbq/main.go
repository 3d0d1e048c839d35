// Command dbq runs and inspects dbq job queues in PostgreSQL, MySQL, SQL
// Server or SQLite: migrate the schema, enqueue jobs, run workers that pipe
// each job's payload into a command, show counts, and a self-contained demo.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
	"github.com/spf13/cobra"
)

// globals are the flags every command shares.
type globals struct {
	dsn      string
	schema   string
	prefix   string
	strategy string
	verbose  bool
	// horizonWarn is check's --horizon-warn (0: the default).
	horizonWarn time.Duration

	// force is closed by a second SIGINT or SIGTERM; nil in tests.
	force <-chan struct{}
	// forceHandled is set by a command that stops on force by itself
	// (work); any other is ended by the second signal at once.
	forceHandled atomic.Bool
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

// open opens the queue in an existing database: every command but
// `migrate up`, demo and bench works on one that is there.
func (g *globals) open(ctx context.Context, cfg queue.Config) (*queue.Queue, error) {
	return g.openWait(ctx, cfg, 0)
}

// openWait is open that keeps trying for up to wait while the database
// does not answer yet (dbq.Options.ConnectWait).
func (g *globals) openWait(ctx context.Context, cfg queue.Config, wait time.Duration) (*queue.Queue, error) {
	if err := mustExist(g.dsn); err != nil {
		return nil, err
	}
	return dbq.Open(ctx, g.dsn, dbq.Options{Config: cfg, Strategy: g.strategy, HorizonWarn: g.horizonWarn, ConnectWait: wait})
}

// mustExist refuses a SQLite DSN whose file is missing: the driver would
// create an empty database, and a command that only reads would leave it
// behind. Other DSNs, and DSNs that do not parse, are for Open to judge.
func mustExist(dsn string) error {
	d, err := dialect.ParseDSN(dsn)
	if err != nil || d != dialect.SQLite {
		return nil
	}
	file, err := sqlite.File(dsn)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqlite database %s does not exist (`dbq migrate up` creates it)", file)
	}
	return nil
}

func main() {
	// Before anything else: a job's supervisor (see startJob) is this
	// binary started again, and does nothing of dbq's own.
	if len(os.Args) > 1 && os.Args[1] == superviseArg {
		os.Exit(supervise(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

// run runs the command args name. The first SIGINT or SIGTERM cancels its
// context (work drains, the others stop); a second closes globals.force,
// which work answers by stopping its commands at once, and which ends any
// other command on the spot.
func run(args []string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	force := make(chan struct{})
	g := &globals{force: force}
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-sigs:
		case <-finished:
			return
		}
		cancel()
		select {
		case <-sigs:
		case <-finished:
			return
		}
		close(force)
		if !g.forceHandled.Load() {
			fmt.Fprintln(os.Stderr, "dbq: interrupted again; stopping now")
			os.Exit(130)
		}
	}()
	root := newRootWith(g)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		return 1
	}
	return 0
}

// errorLine is err as the CLI prints it: one "dbq:" prefix, however many
// layers added theirs (a wrapped sentinel keeps its own inside the
// wrapper's text). Passwords are kept out at the source, where a DSN goes
// into a message (dialect.DSNError, dialect.ConnectError), not by
// rewriting the message.
func errorLine(err error) string {
	msg := strings.ReplaceAll(err.Error(), ": dbq: ", ": ")
	if !strings.HasPrefix(msg, "dbq:") {
		msg = "dbq: " + msg
	}
	return msg
}

func newRoot() *cobra.Command { return newRootWith(&globals{}) }

func newRootWith(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "dbq",
		Short: "A job queue in the database you already run",
		Long: `dbq turns a table in PostgreSQL, MySQL, SQL Server or SQLite into a job queue
that many workers on many machines drain in parallel.

The database is named by --dsn (or $DBQ_DSN):
  postgres://user:pass@host:5432/db   mysql://user:pass@host:3306/db (or mariadb://)
  sqlserver://user:pass@host:1433?database=db   sqlite:path/to/file.db
or in the driver's own form: user:pass@tcp(host:3306)/db, host=h user=u dbname=db,
  server=h;user id=u;password=p;database=db
In a URL the password must be URL-escaped (%40 for @, %3F for ?, %23 for #,
%2F for /, %25 for %); the driver's own forms take it as it is.`,
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
	root.AddCommand(migrateCmd(g), checkCmd(g), enqueueCmd(g), statsCmd(g), workCmd(g), demoCmd(g), benchCmd(g),
		jobsCmd(g), deadCmd(g), cancelCmd(g), pauseCmd(g, true), pauseCmd(g, false), moveCmd(g),
		schedulesCmd(g), scheduleCmd(g), uiCmd(g))
	return root
}

// group makes cmd the parent of its subcommands, refusing a name that is
// none of them (cobra alone would print the help and exit 0).
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		return fmt.Errorf("unknown command %q for %q (want %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
	return cmd
}
