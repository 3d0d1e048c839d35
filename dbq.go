// Package dbq opens a job queue from a DSN, whatever the database: the
// scheme picks the dialect (postgres://, mysql://, sqlserver://, sqlite:).
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
	"strings"

	"github.com/dbqueue/dbq/dialect"
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
}

// Open opens the queue in the database dsn names. Close the Queue when done;
// it closes the connections Open made.
func Open(ctx context.Context, dsn string, opts Options) (*queue.Queue, error) {
	d, err := dialect.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	strategy := strings.ReplaceAll(strings.ToLower(opts.Strategy), "-", "")
	bad := func(want string) error {
		return fmt.Errorf("%w: %s has no claim strategy %q (want %s)", queue.ErrInvalidConfig, d.Dialect, opts.Strategy, want)
	}
	switch d.Dialect {
	case dialect.Postgres:
		cfg := postgres.Config{Config: opts.Config}
		switch strategy {
		case "", "advisory":
		case "skiplocked":
			cfg.Strategy = postgres.SkipLocked
		default:
			return nil, bad("advisory or skiplocked")
		}
		return postgres.Open(ctx, d.Driver, cfg)
	case dialect.MySQL:
		if strategy != "" {
			return nil, bad("none: it has one")
		}
		return mysql.Open(ctx, dsn, mysql.Config{Config: opts.Config})
	case dialect.MSSQL:
		cfg := mssql.Config{Config: opts.Config}
		switch strategy {
		case "", "deletetop":
		case "updlock":
			cfg.Strategy = mssql.UpdLock
		default:
			return nil, bad("deletetop or updlock")
		}
		return mssql.Open(ctx, d.Driver, cfg)
	case dialect.SQLite:
		if strategy != "" {
			return nil, bad("none: it has one")
		}
		return sqlite.Open(ctx, d.Driver, sqlite.Config{Config: opts.Config})
	}
	return nil, fmt.Errorf("%w: %s", dialect.ErrUnknownScheme, d)
}

// Migrator returns the goose provider for the job schema in the database dsn
// names, with the tables cfg names, and the *sql.DB it opened for it; close
// that when done. Migrating needs DDL rights.
func Migrator(ctx context.Context, dsn string, cfg queue.Config) (*goose.Provider, *sql.DB, error) {
	if _, err := dialect.ParseDSN(dsn); err != nil {
		return nil, nil, err
	}
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
	d, err := dialect.ParseDSN(dsn)
	if err != nil {
		return nil, "", err
	}
	var db *sql.DB
	switch d.Dialect {
	case dialect.Postgres:
		db, err = postgres.OpenDB(d.Driver)
	case dialect.MySQL:
		db, err = mysql.OpenDB(dsn)
	case dialect.MSSQL:
		db, err = mssql.OpenDB(d.Driver)
	case dialect.SQLite:
		db, err = sqlite.OpenDB(d.Driver)
	default:
		err = fmt.Errorf("%w: %s", dialect.ErrUnknownScheme, d)
	}
	if err != nil {
		return nil, "", err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("dbq: connect to %s: %w", d, err)
	}
	return db, d.Dialect, nil
}
