package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/connwait"
	"github.com/dbqueue/dbq/queue"
	"github.com/spf13/pflag"
)

// ledgerOptions are the hidden `dbq work` flags of the fault harness
// (internal/chaos): instead of running a command, each job is recorded in
// a ledger table of the same database, where the harness reads which
// process ran which job, and whether the run finished.
type ledgerOptions struct {
	table    string
	maxDelay time.Duration
}

// addLedgerFlags registers --ledger and --ledger-delay on f, hidden: they
// serve the fault harness, not users.
func addLedgerFlags(f *pflag.FlagSet) *ledgerOptions {
	o := &ledgerOptions{}
	f.StringVar(&o.table, "ledger", "", "record each job in this table instead of running a command (fault harness)")
	f.DurationVar(&o.maxDelay, "ledger-delay", 0, "with --ledger, sleep up to this long (at random) between a run's start and finish rows")
	_ = f.MarkHidden("ledger")
	_ = f.MarkHidden("ledger-delay")
	return o
}

// The ledger table, which the harness creates, has the columns
//
//	exec_id     bigint primary key  one run of one job, random
//	job_id      bigint              the job's id
//	payload     bytes               the payload the run was given
//	pid         integer             the worker process
//	attempt     integer             the job's attempt count at the claim
//	started_ns  bigint              Unix nanoseconds when the handler was called
//	finished_ns bigint, null        Unix nanoseconds when the run finished
//
// A run inserts its row, sleeps up to maxDelay, and sets finished_ns. Both
// writes are retried (a cut connection, a restarting server) until they
// succeed, the job's context ends, or ledgerGiveUp passes; the insert is
// idempotent, so a retry after a lost reply never makes a second row.
type ledger struct {
	db       *sql.DB
	insert   string
	finish   string
	pid      int
	maxDelay time.Duration
	log      *slog.Logger
}

// ledgerGiveUp bounds the retries of one ledger write; the job then fails
// and is retried like any failed job.
const ledgerGiveUp = 2 * time.Minute

// open opens the database dsn names with the driver dbq uses for it, and
// prepares the ledger statements for table (in schema, when set).
func (o *ledgerOptions) open(ctx context.Context, dsn, schema string, wait time.Duration, log *slog.Logger) (*ledger, error) {
	if err := dialect.ValidateIdentifier("ledger table", o.table, 63); err != nil {
		return nil, err
	}
	if o.maxDelay < 0 {
		return nil, fmt.Errorf("%w: --ledger-delay %v < 0", queue.ErrInvalidConfig, o.maxDelay)
	}
	d, err := dialect.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if d == dialect.MSSQL {
		// The harness runs where a server runs here; SQL Server does not.
		return nil, fmt.Errorf("%w: --ledger works on PostgreSQL, MySQL and SQLite, not %s", queue.ErrUnsupported, d)
	}
	db, err := connwait.Do(ctx, wait, log, func(ctx context.Context) (*sql.DB, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		db, _, err := dbq.OpenDB(ctx, dsn)
		return db, err
	})
	if err != nil {
		return nil, err
	}
	// A few connections serve every handler: the writes are short, and a
	// server's connection limit is shared by every worker process.
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	t := dialect.Names{Schema: schema}.Qualified(d, o.table)
	cols := "(exec_id, job_id, payload, pid, attempt, started_ns)"
	l := &ledger{db: db, pid: os.Getpid(), maxDelay: o.maxDelay, log: log}
	switch d {
	case dialect.Postgres:
		l.insert = "INSERT INTO " + t + " " + cols + " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (exec_id) DO NOTHING"
		l.finish = "UPDATE " + t + " SET finished_ns = $1 WHERE exec_id = $2"
	case dialect.MySQL:
		l.insert = "INSERT INTO " + t + " " + cols + " VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE exec_id = exec_id"
		l.finish = "UPDATE " + t + " SET finished_ns = ? WHERE exec_id = ?"
	default:
		l.insert = "INSERT INTO " + t + " " + cols + " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (exec_id) DO NOTHING"
		l.finish = "UPDATE " + t + " SET finished_ns = ? WHERE exec_id = ?"
	}
	return l, nil
}

// Close closes the ledger's connections.
func (l *ledger) Close() error { return l.db.Close() }

// handle is the queue.Handler of a ledger worker.
func (l *ledger) handle(ctx context.Context, j *queue.Job) error {
	started := time.Now().UnixNano()
	exec := rand.Int64()
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	if err := l.write(ctx, "start", l.insert, exec, j.ID, payload, l.pid, j.Attempt, started); err != nil {
		return err
	}
	if l.maxDelay > 0 {
		t := time.NewTimer(rand.N(l.maxDelay + 1))
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	return l.write(ctx, "finish", l.finish, time.Now().UnixNano(), exec)
}

// write runs one ledger statement, retrying with jittered backoff.
func (l *ledger) write(ctx context.Context, what, query string, args ...any) error {
	give := time.Now().Add(ledgerGiveUp)
	wait := 10 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := l.db.ExecContext(sctx, query, args...)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case time.Now().After(give):
			return fmt.Errorf("dbq: ledger %s: %w", what, err)
		}
		l.log.Warn("dbq: ledger write failed; retrying", "what", what, "err", dialect.Redact(err.Error()), "in", wait)
		t := time.NewTimer(queue.Jitter(wait, 0.5))
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}
