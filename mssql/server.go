package mssql

import (
	"context"
	"database/sql"
	"errors"
)

// Which server a Driver talks to: SQL Server, or Babelfish for PostgreSQL
// (T-SQL over TDS on PostgreSQL), where a few statements take another form
// (sql/babelfish/). Asked once, on first need.
const (
	serverUnknown int32 = iota
	serverSQLServer
	serverBabelfish
)

// babelfishQuery is 1 on Babelfish (SERVERPROPERTY('babelfish')) and NULL
// on SQL Server, which knows no such property.
const babelfishQuery = "SELECT CAST(SERVERPROPERTY('babelfish') AS INT)"

// rowQuerier is a *sql.DB or *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// babelfish reports whether d's server is Babelfish for PostgreSQL, asking
// it through q the first time. An error leaves the question open.
func (d *Driver) babelfish(ctx context.Context, q rowQuerier) (bool, error) {
	switch d.server.Load() {
	case serverSQLServer:
		return false, nil
	case serverBabelfish:
		return true, nil
	}
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, babelfishQuery).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	kind := serverSQLServer
	if v.Valid && v.Int64 == 1 {
		kind = serverBabelfish
	}
	d.server.Store(kind)
	return kind == serverBabelfish, nil
}

// Babelfish reports whether the Driver's server is Babelfish for
// PostgreSQL rather than SQL Server. There the claim, enqueue and import
// statements take the forms in sql/babelfish/ (see the package doc), and
// locking is PostgreSQL's: NOWAIT, READPAST and the other table hints do
// not apply.
func (d *Driver) Babelfish(ctx context.Context) (bool, error) { return d.babelfish(ctx, d.db) }

// variant returns statement name of set, or, when the server is Babelfish
// and sql/babelfish/ has a file bfName, that file instead; n is the number
// of VALUES rows (0: none).
func (d *Driver) variant(ctx context.Context, q rowQuerier, set *statements, name, bfName string, n int) (string, error) {
	bf, err := d.babelfish(ctx, q)
	if err != nil {
		return "", err
	}
	if _, ok := d.bf.plain[bfName]; bf && ok {
		set, name = d.bf, bfName
	}
	if n == 0 {
		return set.text(name), nil
	}
	return set.rows(name, n)
}
