// Package dbq opens a job queue from a DSN, whatever the database: the
// scheme picks the dialect (postgres://, mysql:// or mariadb://, sqlserver://,
// sqlite:). Errors never show the password: see dialect.NewDSN.
// It is the one open function the dbq CLI uses too.
//
// Importing this package links every dialect's driver. A program that only
// ever talks to one database imports that dialect's package instead
// (postgres.New, mysql.New, mssql.New, sqlite.Open) and links only its
// driver; package queue itself imports none.
package dbq

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/connwait"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/mssql"
	"github.com/dbqueue/dbq/mysql"
	"github.com/dbqueue/dbq/postgres"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
	"github.com/pressly/goose/v3"
)

// Options configures Open.
type Options struct {
	queue.Config
	// Strategy picks the claimer where a dialect has more than one:
	// PostgreSQL "advisory" (the default) or "skiplocked" (lease-based, safe
	// behind PgBouncer in transaction mode); SQL Server "deletetop" (the
	// default) or "updlock". Empty means the dialect's default; a name the
	// dialect does not have is an ErrInvalidConfig.
	Strategy string
	// HorizonWarn is PostgreSQL's postgres.Config.HorizonWarn: how long a
	// session or prepared transaction may hold the MVCC horizon back before
	// queue.Check's "horizon" probe fails. Default 5m; the other dialects
	// have no such probe.
	HorizonWarn time.Duration
	// ConnectWait is how long Open keeps trying while the database does not
	// answer yet — refused or broken connections, a server starting or
	// shutting down, no free connection slot, a Galera node still joining —
	// with backoff from 100 ms to 2 s, logging a warning every 10 s to
	// Config.Logger. Any other error (a bad password, a missing database or
	// table) ends it at once, as does ctx. Zero, the default, tries once:
	// a library caller decides itself how its program starts; `dbq work`
	// waits a minute (--wait-for-db).
	ConnectWait time.Duration
}

// opener is one dialect's constructors: the table Open and OpenDB read.
type opener struct {
	open   func(ctx context.Context, dsn string, opts Options) (*queue.Queue, error)
	openDB func(dsn string) (*sql.DB, error)
}

var openers = map[dialect.Name]opener{
	dialect.Postgres: {
		open: func(ctx context.Context, dsn string, opts Options) (*queue.Queue, error) {
			s, err := postgres.ParseStrategy(opts.Strategy)
			if err != nil {
				return nil, err
			}
			return postgres.Open(ctx, dsn, postgres.Config{Config: opts.Config, Strategy: s, HorizonWarn: opts.HorizonWarn})
		},
		openDB: postgres.OpenDB,
	},
	dialect.MySQL: {
		open: func(ctx context.Context, dsn string, opts Options) (*queue.Queue, error) {
			if err := oneStrategy(dialect.MySQL, opts.Strategy); err != nil {
				return nil, err
			}
			return mysql.Open(ctx, dsn, mysql.Config{Config: opts.Config})
		},
		openDB: mysql.OpenDB,
	},
	dialect.MSSQL: {
		open: func(ctx context.Context, dsn string, opts Options) (*queue.Queue, error) {
			s, err := mssql.ParseStrategy(opts.Strategy)
			if err != nil {
				return nil, err
			}
			return mssql.Open(ctx, dsn, mssql.Config{Config: opts.Config, Strategy: s})
		},
		openDB: mssql.OpenDB,
	},
	dialect.SQLite: {
		open: func(ctx context.Context, dsn string, opts Options) (*queue.Queue, error) {
			if err := oneStrategy(dialect.SQLite, opts.Strategy); err != nil {
				return nil, err
			}
			return sqlite.Open(ctx, dsn, sqlite.Config{Config: opts.Config})
		},
		openDB: sqlite.OpenDB,
	},
}

// oneStrategy refuses a strategy name for a dialect with one claimer.
func oneStrategy(d dialect.Name, strategy string) error {
	if strategy == "" {
		return nil
	}
	return fmt.Errorf("%w: %s has no claim strategy %q: it has one", queue.ErrInvalidConfig, d, strategy)
}

// pick reads dsn and finds its dialect's constructors.
func pick(dsn string) (*dialect.DSN, opener, error) {
	d, err := dialect.NewDSN(dsn)
	if err != nil {
		return nil, opener{}, err
	}
	o, ok := openers[d.Dialect]
	if !ok {
		return nil, opener{}, fmt.Errorf("%w: %s", dialect.ErrUnknownScheme, d.Dialect)
	}
	return d, o, nil
}

// Open opens the queue in the database dsn names. Close the Queue when done;
// it closes the connections Open made.
func Open(ctx context.Context, dsn string, opts Options) (*queue.Queue, error) {
	_, o, err := pick(dsn)
	if err != nil {
		return nil, err
	}
	return connwait.Do(ctx, opts.ConnectWait, opts.Logger, func(ctx context.Context) (*queue.Queue, error) {
		return o.open(ctx, dsn, opts)
	})
}

// Migrator returns the goose provider for the job schema in the database dsn
// names, with the tables cfg names, and the *sql.DB it opened for it; close
// that when done. Migrating needs DDL rights.
func Migrator(ctx context.Context, dsn string, cfg queue.Config) (*goose.Provider, *sql.DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	db, d, err := OpenDB(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	p, err := migrations.NewProvider(ctx, d, db, cfg.Names())
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return p, db, nil
}

// OpenDB opens a *sql.DB on the database dsn names, through the driver dbq
// uses for its dialect, and checks that it answers. Close it when done.
func OpenDB(ctx context.Context, dsn string) (*sql.DB, dialect.Name, error) {
	d, o, err := pick(dsn)
	if err != nil {
		return nil, "", err
	}
	db, err := o.openDB(dsn)
	if err != nil {
		return nil, "", err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, "", d.ConnectError(err)
	}
	return db, d.Dialect, nil
}
