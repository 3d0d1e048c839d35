// Package migrations holds the one dbq job schema as goose v3 migrations, a
// folder per dialect with the same version numbers in each, embedded in the
// binary.
//
// The files are templates: table and index names come from the configured
// schema and prefix ([dialect.Names]), already validated and quoted, so one
// database can hold several dbq tables side by side. In a file,
// {{table "jobs"}} is the qualified, quoted table name prefix+"jobs",
// {{ident "jobs_claim"}} the quoted unqualified name prefix+"jobs_claim"
// (for indexes and constraints), and {{schema}} the quoted schema or "".
//
// For teams that apply migrations with their own tool, [Render], [SQL] and
// [WriteDir] give the same migrations as plain SQL or as goose files (what
// `dbq migrate sql` prints or writes); the tables they make are the ones
// [Up] makes.
//
// Migrating needs DDL rights (CREATE TABLE, CREATE INDEX, and CREATE SCHEMA
// or CREATE DATABASE when a configured schema does not exist yet: an
// existing one is looked up, not created again, so its owner needs no
// right on the database); running workers and
// producers needs only SELECT, INSERT, UPDATE and DELETE on the tables.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"testing/fstest"
	"text/template"

	"github.com/dbqueue/dbq/dialect"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

//go:embed postgres/*.sql mysql/*.sql mssql/*.sql sqlite/*.sql
var files embed.FS

// Raw returns the dialect's migration templates as stored.
func Raw(d dialect.Name) (fs.FS, error) {
	switch d {
	case dialect.Postgres, dialect.MySQL, dialect.MSSQL, dialect.SQLite:
		return fs.Sub(files, string(d))
	}
	return nil, fmt.Errorf("%w: no migrations for dialect %q", dialect.ErrUnknownScheme, d)
}

// Versions lists the migration versions of dialect d, ascending.
func Versions(d dialect.Name) ([]int64, error) {
	raw, err := Raw(d)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(raw, "*.sql")
	if err != nil {
		return nil, err
	}
	var vs []int64
	for _, n := range names {
		num, _, ok := strings.Cut(n, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("dbq: migration %s/%s: name must start with a version number", d, n)
		}
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs, nil
}

// FS returns the migrations of dialect d rendered for names n.
func FS(d dialect.Name, n dialect.Names) (fs.FS, error) { return render(d, n, false) }

// render renders the migrations; tidb marks a MySQL-dialect server that
// is TiDB, which some statements must spell differently ({{if tidb}}).
func render(d dialect.Name, n dialect.Names, tidb bool) (fs.FS, error) {
	n = n.WithDefaults()
	if err := n.Validate(); err != nil {
		return nil, err
	}
	raw, err := Raw(d)
	if err != nil {
		return nil, err
	}
	files, err := dialect.LoadSQL(raw, "*.sql", d, n, dialect.SQLOptions{
		KeepComments: true,
		Funcs:        template.FuncMap{"tidb": func() bool { return tidb }},
	})
	if err != nil {
		return nil, fmt.Errorf("dbq: migrations of %s: %w", d, err)
	}
	out := fstest.MapFS{}
	for _, name := range files.Names() {
		text, err := files.Render(name, nil)
		if err != nil {
			return nil, fmt.Errorf("dbq: migration %s/%s: %w", d, name, err)
		}
		out[name+".sql"] = &fstest.MapFile{Data: []byte(text)}
	}
	return out, nil
}

// TiDB names, for Render, SQL and WriteDir only, the MySQL dialect's
// migrations as TiDB takes them (`dbq migrate sql --dialect tidb`).
// NewProvider finds TiDB by itself.
const TiDB dialect.Name = "tidb"

// IsTiDB reports whether db, of dialect d, is a TiDB server (VERSION()
// like 8.0.11-TiDB-v8.5.3), whose migrations differ ({{if tidb}}).
func IsTiDB(ctx context.Context, d dialect.Name, db *sql.DB) (bool, error) {
	if d != dialect.MySQL {
		return false, nil
	}
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return false, fmt.Errorf("dbq: migrations: read the server version: %w", err)
	}
	return strings.Contains(v, "TiDB"), nil
}

// NewProvider returns a goose provider for the job schema of dialect d in db,
// with its version table named prefix+"schema_version" beside the jobs
// table. It creates the configured schema (PostgreSQL, SQL Server) or
// database (MySQL) first when it does not exist, since goose's version
// table lives there.
func NewProvider(ctx context.Context, d dialect.Name, db *sql.DB, n dialect.Names) (*goose.Provider, error) {
	n = n.WithDefaults()
	tidb, err := IsTiDB(ctx, d, db)
	if err != nil {
		return nil, err
	}
	fsys, err := render(d, n, tidb)
	if err != nil {
		return nil, err
	}
	if err := ensureSchema(ctx, d, db, n); err != nil {
		return nil, err
	}
	store, err := newStore(d, n)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider("", db, fsys, goose.WithStore(store), goose.WithDisableGlobalRegistry(true))
}

// newStore returns goose's version store for the version table of names n.
//
// goose splices the table name into its statements as given. PostgreSQL
// folds an unquoted name to lower case, so there the name is quoted, as
// the migrations quote every other name, and the existence check looks
// the quoted name up with to_regclass (goose's own compares the name,
// quotes and all, with pg_tables). For a lower-case name both spell the
// same table. MySQL keeps an unquoted name's case, and SQL Server and
// SQLite compare names without it, so they get the name unquoted.
func newStore(d dialect.Name, n dialect.Names) (database.Store, error) {
	if d == dialect.Postgres {
		name := n.Qualified(d, n.Versions())
		store, err := database.NewStore(database.DialectPostgres, name)
		if err != nil {
			return nil, err
		}
		return quotedStore{store}, nil
	}
	gd, err := GooseDialect(d)
	if err != nil {
		return nil, err
	}
	versions := n.Versions()
	if n.Schema != "" && d != dialect.SQLite {
		versions = n.Schema + "." + versions
	}
	return database.NewStore(gd, versions)
}

// GooseDialect returns goose's name for dialect d.
func GooseDialect(d dialect.Name) (database.Dialect, error) {
	switch d {
	case dialect.Postgres:
		return database.DialectPostgres, nil
	case dialect.MySQL:
		return database.DialectMySQL, nil
	case dialect.MSSQL:
		return database.DialectMSSQL, nil
	case dialect.SQLite:
		return database.DialectSQLite3, nil
	}
	return "", fmt.Errorf("%w: no migrations for dialect %q", dialect.ErrUnknownScheme, d)
}

// quotedStore is goose's PostgreSQL store over a quoted, possibly
// schema-qualified table name, with an existence check that understands
// quotes.
type quotedStore struct{ database.Store }

var _ database.StoreExtender = quotedStore{}

// TableExists reports whether the version table exists, resolving its
// quoted name as the statements that use it do.
func (s quotedStore) TableExists(ctx context.Context, db database.DBTxConn) (bool, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", s.Tablename()).Scan(&exists); err != nil {
		return false, fmt.Errorf("failed to check if table exists: %w", err)
	}
	return exists, nil
}

// Version returns the version the job tables of names n in db are at, and
// the latest migration's, creating nothing (NewProvider creates the schema,
// and goose the version table it reads): a database without dbq's version
// table, or with an empty one, is at version 0. For read-only commands.
func Version(ctx context.Context, d dialect.Name, db *sql.DB, n dialect.Names) (at, latest int64, err error) {
	n = n.WithDefaults()
	vs, err := Versions(d)
	if err != nil || len(vs) == 0 {
		return 0, 0, err
	}
	latest = vs[len(vs)-1]
	store, err := newStore(d, n)
	if err != nil {
		return 0, 0, err
	}
	exists, err := versionTableExists(ctx, d, db, n, store)
	if err != nil || !exists {
		return 0, latest, err
	}
	at, err = store.GetLatestVersion(ctx, db)
	if errors.Is(err, database.ErrVersionNotFound) {
		return 0, latest, nil
	}
	if err != nil {
		return 0, latest, fmt.Errorf("dbq: migrations: read the schema version: %w", err)
	}
	return at, latest, nil
}

// versionTableExists reports whether the version table of names n exists:
// through goose's store where it can tell (PostgreSQL, MySQL), else from
// the catalog (goose has no such query for SQL Server and SQLite).
func versionTableExists(ctx context.Context, d dialect.Name, db *sql.DB, n dialect.Names, store database.Store) (bool, error) {
	var q string
	var args []any
	switch d {
	case dialect.SQLite:
		q, args = "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?", []any{n.Versions()}
	case dialect.MSSQL:
		q, args = "SELECT CAST(CASE WHEN OBJECT_ID(@p1, 'U') IS NULL THEN 0 ELSE 1 END AS bit)", []any{n.Qualified(d, n.Versions())}
	default:
		ext, ok := store.(database.StoreExtender)
		if !ok {
			return false, fmt.Errorf("dbq: migrations: no existence check for %s", d)
		}
		exists, err := ext.TableExists(ctx, db)
		if err != nil {
			return false, fmt.Errorf("dbq: migrations: %w", err)
		}
		return exists, nil
	}
	var exists bool
	if err := db.QueryRowContext(ctx, q, args...).Scan(&exists); err != nil {
		return false, fmt.Errorf("dbq: migrations: look for the version table: %w", err)
	}
	return exists, nil
}

// ensureSchema creates n's schema (database, on MySQL) unless it exists.
// It looks first, and creates only what is missing: PostgreSQL checks
// CREATE on the database before it reads IF NOT EXISTS, and MySQL checks
// the CREATE privilege, so the statement alone fails for a role that owns
// the schema a DBA made for it, or that may only read it.
func ensureSchema(ctx context.Context, d dialect.Name, db *sql.DB, n dialect.Names) error {
	stmt := SchemaStatement(d, n)
	if stmt == "" {
		return nil
	}
	exists, err := schemaExists(ctx, d, db, n.Schema)
	if err != nil || exists {
		return err
	}
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("dbq: create schema %s (migrations need DDL rights): %w", dialect.Quote(d, n.Schema), err)
	}
	return nil
}

// schemaExists reports whether schema (database, on MySQL) exists, as far
// as the account can see: MySQL lists only the databases it has a
// privilege on, and one it cannot see it could not use either.
func schemaExists(ctx context.Context, d dialect.Name, db *sql.DB, schema string) (bool, error) {
	var q string
	switch d {
	case dialect.Postgres:
		q = "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)"
	case dialect.MySQL:
		q = "SELECT COUNT(*) > 0 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"
	case dialect.MSSQL:
		q = "SELECT CAST(CASE WHEN SCHEMA_ID(@p1) IS NULL THEN 0 ELSE 1 END AS bit)"
	default:
		return true, nil
	}
	var exists bool
	if err := db.QueryRowContext(ctx, q, schema).Scan(&exists); err != nil {
		return false, fmt.Errorf("dbq: migrations: look for schema %s: %w", dialect.Quote(d, schema), err)
	}
	return exists, nil
}

// Up applies every pending migration of dialect d for names n.
func Up(ctx context.Context, d dialect.Name, db *sql.DB, n dialect.Names) error {
	p, err := NewProvider(ctx, d, db, n)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("dbq: migrate up (needs DDL rights): %w", err)
	}
	return nil
}
