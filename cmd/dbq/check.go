package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	mssqldrv "github.com/microsoft/go-mssqldb"
	"github.com/spf13/cobra"
)

// errCheckFailed ends dbq check (and migrate up) with exit 1 once the
// failed probes are printed; checkFailed wraps it.
var errCheckFailed = errors.New("dbq: check failed")

// checkFailed returns nil when every probe of rs passed, else
// errCheckFailed naming each failed probe and what it saw, so that the
// error alone (in a log, or a test's failure) says what failed.
func checkFailed(rs []queue.CheckResult) error {
	var failed []string
	for _, r := range rs {
		if !r.OK {
			failed = append(failed, r.Name+": "+r.Saw)
		}
	}
	if failed == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", errCheckFailed, strings.Join(failed, "; "))
}

func checkCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Probe that the database, and the path to it, keep the claim's promise; exit 1 if not",
		Long: `check runs, for a team's CI or a first run, what a worker relies on: the schema
is migrated to the latest version; the account may enqueue, claim, complete and
release; a job one claimer holds is skipped by another's claim and a released
job comes back; and the dialect's own probes (a row one session locks with
FOR UPDATE is skipped by another's SKIP LOCKED; PostgreSQL's advisory claimer
has a session of its own, not a transaction pooler's; on PostgreSQL, that no
session or prepared transaction has held the MVCC horizon back for more than 5
minutes (--horizon-warn), no inactive replication slot holds it, and the jobs table has no more
than max(100,000, 2 × live) dead rows: see docs/postgres-health.md). It works in a queue of
its own, dbq.check.<random>, and removes its jobs whatever happens (an
account without DELETE cannot: then a failed "cleanup" line names them). Each
probe prints what it saw and, when it failed, what to do — for a privilege
the account lacks, the grant to give; the exit status is 1 when any failed.
migrate up runs it after migrating.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := mustExist(g.dsn); err != nil {
				return err
			}
			rs, err := g.check(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), rs); err != nil {
					return err
				}
			} else if err := printChecks(cmd.OutOrStdout(), rs); err != nil {
				return err
			}
			return checkFailed(rs)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&g.horizonWarn, "horizon-warn", 0,
		"PostgreSQL: fail the horizon probe when a session or prepared transaction has held the MVCC horizon back longer (default 5m)")
	return cmd
}

// check runs the schema version probe and queue.Check. A version table
// the account may not read stops nothing: the other probes say whether
// the account can work.
func (g *globals) check(ctx context.Context) ([]queue.CheckResult, error) {
	v, at, denied := g.checkVersion(ctx)
	rs := []queue.CheckResult{v}
	if !v.OK && at != 0 && !denied {
		return rs, nil
	}
	q, err := g.open(ctx, g.config())
	if err != nil {
		return nil, err
	}
	defer q.Close()
	if !v.OK && at == 0 {
		// dbq's version table says nothing was applied: the tables may
		// still be there, made with another tool from `dbq migrate sql`.
		// Then the other probes tell whether they serve. (MySQL shows
		// only the tables an account has a privilege on: there a table
		// it may not read looks missing.)
		if _, err := q.Stats(ctx); err != nil {
			return rs, nil
		}
		rs[0] = queue.CheckResult{Name: "version", OK: true,
			Saw: "the tables exist but dbq's version table is empty, or this account may not read it: migrated with another tool? (dbq migrate sql prints every version)"}
	}
	return append(rs, queue.Check(ctx, q)...), nil
}

// checkVersion compares the schema's version, which it also returns, with
// the latest migration; denied reports that the account may not read the
// version table.
func (g *globals) checkVersion(ctx context.Context) (r queue.CheckResult, at int64, denied bool) {
	r = queue.CheckResult{Name: "version"}
	cfg := g.config()
	db, d, err := dbq.OpenDB(ctx, g.dsn)
	if err != nil {
		r.Saw, r.Fix = err.Error(), "check the DSN and that the database answers"
		if permissionDenied(err) {
			r.Fix = "grant the account CONNECT to the database (or, on MySQL, a privilege on it)"
		}
		return r, -1, false
	}
	defer db.Close()
	// Read-only: migrations.Version creates no schema and no version table.
	at, latest, err := migrations.Version(ctx, d, db, cfg.Names())
	if err != nil {
		r.Saw, r.Fix = err.Error(), "run `dbq migrate up`"
		if permissionDenied(err) {
			n := cfg.Names().WithDefaults()
			r.Fix = fmt.Sprintf("grant the account SELECT on %s (dbq check reads it; workers do not), and USAGE on its schema if it has one", n.Qualified(d, n.Versions()))
			return r, -1, true
		}
		return r, -1, false
	}
	r.Saw = fmt.Sprintf("schema at version %d of %d", at, latest)
	switch {
	case at < latest:
		r.Fix = "run `dbq migrate up`"
	case at > latest:
		r.Fix = "this dbq is older than the schema: upgrade it"
	default:
		r.OK = true
	}
	return r, at, false
}

// permissionDenied reports whether err is the database refusing the
// account a privilege: PostgreSQL 42501, MySQL's "command denied" and
// "access denied to database" errors, SQL Server's permission errors.
func permissionDenied(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "42501"
	}
	var my *mysqldrv.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case 1044, 1142, 1143, 1227: // ER_DBACCESS_DENIED, ER_TABLEACCESS_DENIED, ER_COLUMNACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED
			return true
		}
		return false
	}
	var ms mssqldrv.Error
	if errors.As(err, &ms) {
		switch ms.Number {
		case 229, 230, 262, 297, 300: // permission denied on an object, a column, in a database; no access; no permission
			return true
		}
	}
	return false
}

func printChecks(w io.Writer, rs []queue.CheckResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tSAW")
	for _, r := range rs {
		res := "ok"
		if !r.OK {
			res = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, res, r.Saw)
		if !r.OK && r.Fix != "" {
			fmt.Fprintf(tw, "\t\tto fix: %s\n", r.Fix)
		}
	}
	return tw.Flush()
}
