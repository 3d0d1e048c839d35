package mssql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// fakeDB is a database/sql driver that records every statement the dialect
// sends and answers from a script: no SQL Server needed. It checks nothing
// itself; the tests check what it recorded.
type fakeDB struct {
	mu     sync.Mutex
	sent   []sentStmt
	answer func(s sentStmt) fakeAnswer
	stmts  *statements // the dialect's SQL, to name what is sent
}

// sentStmt is one statement as the driver received it.
type sentStmt struct {
	name  string // the sql/*.sql file it came from, "" when none matched
	query string
	args  map[string]any
	tx    bool // sent inside a transaction begun with BeginTx
}

// fakeAnswer is the scripted result of one statement.
type fakeAnswer struct {
	err      error            // returned at once
	cols     []string         // result columns
	rows     [][]driver.Value // result rows
	rowsErr  error            // returned after the rows: a statement that failed mid-OUTPUT
	affected int64
}

func (f *fakeDB) statements() []sentStmt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentStmt(nil), f.sent...)
}

func (f *fakeDB) named(name string) []sentStmt {
	var out []sentStmt
	for _, s := range f.statements() {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// newFakeQueue returns a Queue over a fakeDB whose statements are
// identified against the dialect's own rendered SQL. Its tables are named by
// testNames unless cfg names others.
func newFakeQueue(t *testing.T, cfg Config, answer func(s sentStmt) fakeAnswer) (*queue.Queue, *Driver, *fakeDB) {
	t.Helper()
	if cfg.Schema == "" && cfg.Prefix == "" {
		cfg.Schema, cfg.Prefix = testNames.Schema, testNames.Prefix
	}
	f := &fakeDB{answer: answer}
	db := sql.OpenDB(fakeConnector{f})
	t.Cleanup(func() { db.Close() })
	q, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := q.Driver().(*Driver)
	d.pause = func(ctx context.Context, attempt int) error { return ctx.Err() }
	d.server.Store(serverSQLServer) // the fake is SQL Server: no question sent
	f.stmts = d.sql
	return q, d, f
}

func (f *fakeDB) record(s sentStmt) fakeAnswer {
	s.name = identify(f.stmts, s.query)
	f.mu.Lock()
	f.sent = append(f.sent, s)
	f.mu.Unlock()
	if f.answer == nil {
		return fakeAnswer{}
	}
	return f.answer(s)
}

// identify names the statement text q was rendered from: the text itself,
// or for a statement with VALUES rows, the text around them.
func identify(stmts *statements, q string) string {
	for _, name := range stmts.names() {
		one, _ := stmts.rows(name, 1)
		two, _ := stmts.rows(name, 2)
		if one == two {
			if q == one {
				return name
			}
			continue
		}
		before, after := aroundRows(one, two)
		if strings.HasPrefix(q, before) && strings.HasSuffix(q[len(before):], after) {
			return name
		}
	}
	return ""
}

// aroundRows returns the text one and two share before and after the place
// where they differ: one statement rendered with one and with two rows.
func aroundRows(one, two string) (before, after string) {
	i := 0
	for i < len(one) && i < len(two) && one[i] == two[i] {
		i++
	}
	j := 0
	for j < len(one)-i && j < len(two)-i && one[len(one)-1-j] == two[len(two)-1-j] {
		j++
	}
	return one[:i], one[len(one)-j:]
}

type fakeConnector struct{ f *fakeDB }

func (c fakeConnector) Connect(context.Context) (driver.Conn, error) { return &fakeConn{f: c.f}, nil }
func (c fakeConnector) Driver() driver.Driver                        { return fakeDriver{} }

type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) { return nil, errors.New("use the connector") }

type fakeConn struct {
	f    *fakeDB
	inTx bool
}

var (
	_ driver.QueryerContext    = (*fakeConn)(nil)
	_ driver.ExecerContext     = (*fakeConn)(nil)
	_ driver.ConnBeginTx       = (*fakeConn)(nil)
	_ driver.NamedValueChecker = (*fakeConn)(nil)
)

func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("fake: no Prepare") }
func (c *fakeConn) Close() error                        { return nil }
func (c *fakeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *fakeConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.inTx = true
	return fakeTx{c}, nil
}

// CheckNamedValue takes every value as is, go-mssqldb's types included.
func (c *fakeConn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (c *fakeConn) sent(query string, args []driver.NamedValue) fakeAnswer {
	m := make(map[string]any, len(args))
	for _, a := range args {
		m[a.Name] = a.Value
	}
	return c.f.record(sentStmt{query: query, args: m, tx: c.inTx})
}

func (c *fakeConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	a := c.sent(query, args)
	if a.err != nil {
		return nil, a.err
	}
	return &fakeRows{a: a}, nil
}

func (c *fakeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	a := c.sent(query, args)
	if a.err != nil {
		return nil, a.err
	}
	return driver.RowsAffected(a.affected), nil
}

type fakeTx struct{ c *fakeConn }

func (t fakeTx) Commit() error   { t.c.inTx = false; return nil }
func (t fakeTx) Rollback() error { t.c.inTx = false; return nil }

type fakeRows struct {
	a fakeAnswer
	i int
}

func (r *fakeRows) Columns() []string {
	if r.a.cols == nil && len(r.a.rows) > 0 {
		return make([]string, len(r.a.rows[0]))
	}
	return r.a.cols
}
func (r *fakeRows) Close() error { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if r.i >= len(r.a.rows) {
		if r.a.rowsErr != nil {
			return r.a.rowsErr
		}
		return io.EOF
	}
	copy(dest, r.a.rows[r.i])
	r.i++
	return nil
}
