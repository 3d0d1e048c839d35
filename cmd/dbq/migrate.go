package main

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	"github.com/pressly/goose/v3"
	"github.com/spf13/cobra"
)

func migrateCmd(g *globals) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "migrate up|down|status|sql",
		Short: "Create, roll back or show the job schema (needs DDL rights)",
	})
	var noCheck bool
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		Args:  cobra.NoArgs,
		RunE: g.withMigrator(true, func(cmd *cobra.Command, p *goose.Provider, _ *sql.DB) error {
			res, err := p.Up(cmd.Context())
			for _, r := range res {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %s (%v)\n", r.Source.Path, r.Duration.Round(1e6))
			}
			if err != nil {
				return fmt.Errorf("migrate up (migrations need DDL rights: CREATE TABLE, CREATE INDEX, DROP): %w", err)
			}
			if len(res) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "already up to date")
			}
			if noCheck {
				return nil
			}
			// What a worker will rely on, checked once the tables exist.
			rs, err := g.check(cmd.Context())
			if err != nil {
				return err
			}
			if err := checkFailed(rs); err != nil {
				_ = printChecks(cmd.ErrOrStderr(), rs)
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "check: %d probes passed (dbq check shows them)\n", len(rs))
			return nil
		}),
	}
	up.Flags().BoolVar(&noCheck, "no-check", false, "do not run dbq check after migrating")
	var to string
	down := &cobra.Command{
		Use:   "down",
		Short: "Roll back the last migration (--to 0: all of them, dropping the tables, their jobs and dbq's version table)",
		Args:  cobra.NoArgs,
		RunE: g.withMigrator(false, func(cmd *cobra.Command, p *goose.Provider, db *sql.DB) error {
			if to == "" {
				r, err := p.Down(cmd.Context())
				if r != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "rolled back %s\n", r.Source.Path)
				}
				return err
			}
			v, err := strconv.ParseInt(to, 10, 64)
			if err != nil || v < 0 {
				return fmt.Errorf("--to %q: want a version number >= 0", to)
			}
			return g.migrateDownTo(cmd, p, db, v)
		}),
	}
	down.Flags().StringVar(&to, "to", "", "roll back to this version (0 removes the tables and dbq's version table; a schema stays)")
	status := &cobra.Command{
		Use:   "status",
		Short: "List migrations and whether each is applied",
		Args:  cobra.NoArgs,
		RunE: g.withMigrator(false, func(cmd *cobra.Command, p *goose.Provider, _ *sql.DB) error {
			st, err := p.Status(cmd.Context())
			if err != nil {
				return err
			}
			for _, s := range st {
				when := "pending"
				if !s.AppliedAt.IsZero() {
					when = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%05d  %-28s %s\n", s.Source.Version, s.Source.Path, when)
			}
			return nil
		}),
	}
	cmd.AddCommand(up, down, status, migrateSQLCmd(g))
	return cmd
}

// migrateSQLCmd prints the migrations as plain SQL, or writes them as goose
// files, for teams that apply migrations with their own tool. It connects
// to nothing: --dsn only names the dialect.
func migrateSQLCmd(g *globals) *cobra.Command {
	var (
		dialectName, dir string
		version          int64
		down, force      bool
	)
	cmd := &cobra.Command{
		Use:   "sql [--dialect D] [--version N] [--down] [--dir DIR]",
		Short: "Print the migrations as plain SQL, or write goose files, for your own migration tool (connects to nothing)",
		Long: `Print the job schema's migrations as plain SQL, rendered for --schema and
--prefix: every version (--version N: one), the up direction (--down: the
down direction, newest first). With --dir DIR, write them instead as goose
files (NNNNN_name.sql with goose annotations), which the goose CLI applies
as they are:

  dbq migrate sql --dialect postgres --dir db/dbq
  goose -dir db/dbq postgres "$DATABASE_URL" up

The dialect comes from --dialect (postgres, mysql, sqlserver, sqlite) or else
from the scheme of --dsn; nothing connects to a database. Keep to one tool
for a set of tables: goose keeps its own version table, dbq migrate its own.
--dir refuses to overwrite a file that holds something else (--force does).
SQLite has no schemas: --schema is refused there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := g.sqlDialect(cmd, dialectName)
			if err != nil {
				return err
			}
			n := g.config().Names()
			if d == dialect.SQLite && n.Schema != "" {
				// dbq's SQLite tables are never qualified (a file is one
				// database; sqlite.Open ignores Config.Schema), so SQL
				// that put them in a schema would make tables no worker
				// finds, and SQL that ignored it would not be what was asked.
				return fmt.Errorf("%w: --schema %s: SQLite has no schemas (a file is one database): drop --schema", queue.ErrInvalidConfig, n.Schema)
			}
			if dir != "" {
				if version != 0 || down {
					return errors.New("--dir writes every version, both directions: drop --version and --down")
				}
				if !force {
					if err := refuseOverwrite(dir, d, n); err != nil {
						return err
					}
				}
				paths, err := migrations.WriteDir(dir, d, n)
				for _, p := range paths {
					fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", p)
				}
				return err
			}
			if version < 0 {
				return fmt.Errorf("--version %d: want a version number > 0 (0: all)", version)
			}
			s, err := migrations.SQL(d, n, version, down)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), s)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dialectName, "dialect", "", "postgres, mysql (MariaDB too), tidb, sqlserver or sqlite (default: the scheme of --dsn)")
	f.Int64Var(&version, "version", 0, "only this migration version (default: all)")
	f.BoolVar(&down, "down", false, "the down direction, newest first")
	f.StringVar(&dir, "dir", "", "write goose files into this directory instead of printing")
	f.BoolVar(&force, "force", false, "with --dir: overwrite files that differ from what it writes")
	return cmd
}

// refuseOverwrite returns an error naming the files in dir that WriteDir
// would change: a file of the same name with other contents (an older
// dbq's, other names, or edited by hand). A file that already holds what
// it would write is no reason to stop.
func refuseOverwrite(dir string, d dialect.Name, n dialect.Names) error {
	ms, err := migrations.Render(d, n)
	if err != nil {
		return err
	}
	var differ []string
	for _, m := range ms {
		p := filepath.Join(dir, m.File)
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("dbq: %w", err)
		}
		if !bytes.Equal(b, m.Source) {
			differ = append(differ, p)
		}
	}
	if differ != nil {
		return fmt.Errorf("%w: --dir %s: %s exist with other contents: --force overwrites them", queue.ErrInvalidConfig, dir, strings.Join(differ, ", "))
	}
	return nil
}

// sqlDialect is the dialect `migrate sql` renders for: --dialect, else the
// --dsn given (flag or $DBQ_DSN). The built-in default DSN does not count:
// a user who names nothing is asked to.
func (g *globals) sqlDialect(cmd *cobra.Command, name string) (dialect.Name, error) {
	if name != "" {
		d, ok := dialectNames[strings.ToLower(name)]
		if !ok {
			return "", fmt.Errorf("--dialect %q: want postgres, mysql, tidb, sqlserver or sqlite", name)
		}
		return d, nil
	}
	if !cmd.Flags().Changed("dsn") && os.Getenv("DBQ_DSN") == "" {
		return "", errors.New("name the dialect: --dialect postgres|mysql|sqlserver|sqlite, or --dsn (its scheme is enough)")
	}
	return dialect.ParseDSN(g.dsn)
}

var dialectNames = map[string]dialect.Name{
	"postgres": dialect.Postgres, "postgresql": dialect.Postgres,
	"mysql": dialect.MySQL, "mariadb": dialect.MySQL, "tidb": migrations.TiDB,
	"sqlserver": dialect.MSSQL, "mssql": dialect.MSSQL,
	"sqlite": dialect.SQLite, "sqlite3": dialect.SQLite,
}

// withMigrator opens the goose provider for --dsn around fn, with the
// *sql.DB it runs on. Only a command that creates the schema may create
// the database (SQLite).
func (g *globals) withMigrator(create bool, fn func(cmd *cobra.Command, p *goose.Provider, db *sql.DB) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if !create {
			if err := mustExist(g.dsn); err != nil {
				return err
			}
		}
		p, db, err := dbq.Migrator(cmd.Context(), g.dsn, g.config())
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(cmd, p, db)
	}
}

// migrateDownTo rolls the schema back to version v. At 0 nothing of dbq's
// is left: the tables go, and so does dbq's version table, which serves
// those tables alone (goose keeps its goose_db_version at 0, a table that
// records every migration of an application). The schema (PostgreSQL,
// SQL Server) or database (MySQL) stays: it may hold more than dbq's.
func (g *globals) migrateDownTo(cmd *cobra.Command, p *goose.Provider, db *sql.DB, v int64) error {
	ctx := cmd.Context()
	at, err := p.GetDBVersion(ctx)
	if err != nil {
		return err
	}
	if v > at {
		return fmt.Errorf("--to %d: the schema is at version %d; down goes to a lower version", v, at)
	}
	if v == at {
		fmt.Fprintf(cmd.OutOrStdout(), "already at version %d\n", v)
	} else {
		res, err := p.DownTo(ctx, v)
		for _, r := range res {
			fmt.Fprintf(cmd.OutOrStdout(), "rolled back %s\n", r.Source.Path)
		}
		if err != nil {
			return err
		}
	}
	if v != 0 {
		return nil
	}
	d, err := dialect.ParseDSN(g.dsn)
	if err != nil {
		return err
	}
	n := g.config().Names().WithDefaults()
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+n.Qualified(d, n.Versions())); err != nil {
		return fmt.Errorf("dbq: drop the version table %s: %w", n.Versions(), err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "dropped %s\n", n.Versions())
	return nil
}
