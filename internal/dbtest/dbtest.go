// Package dbtest finds the test databases: it reads their DSNs from the
// environment (defaults match docker-compose.yml and the development
// machines) and decides whether a test that cannot reach one skips or
// fails, following DBQ_REQUIRE. Only a server that cannot be reached is a
// reason to skip: any other error of a test's setup (a failed migration, a
// refused login, a missing database) fails the test.
package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/pressly/goose/v3"
)

// Default DSNs, matching docker-compose.yml.
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "mysql://root@127.0.0.1:3306/test"
	DefaultMSSQLDSN    = "sqlserver://sa:Dbq-Passw0rd@127.0.0.1:1433?database=master"
)

// DSN returns the DSN for dialect d: DBQ_POSTGRES_DSN, DBQ_MYSQL_DSN or
// DBQ_MSSQL_DSN when set, else the default.
func DSN(d dialect.Name) string {
	env, def := "", ""
	switch d {
	case dialect.Postgres:
		env, def = "DBQ_POSTGRES_DSN", DefaultPostgresDSN
	case dialect.MySQL:
		env, def = "DBQ_MYSQL_DSN", DefaultMySQLDSN
	case dialect.MSSQL:
		env, def = "DBQ_MSSQL_DSN", DefaultMSSQLDSN
	default:
		return ""
	}
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// Required reports whether DBQ_REQUIRE (comma-separated dialect names)
// names d.
func Required(d dialect.Name) bool {
	for _, s := range strings.Split(os.Getenv("DBQ_REQUIRE"), ",") {
		if strings.TrimSpace(s) == string(d) {
			return true
		}
	}
	return false
}

// CannotConnect reports whether err says that no connection to the server
// could be made: a refused or timed-out dial, an unknown host, a missing
// socket. An error from a server that answered is not one.
func CannotConnect(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) ||
		(errors.As(err, &op) && op.Op == "dial") ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// Unreachable ends the test whose setup failed with err. When err says the
// database cannot be reached (CannotConnect), the test fails if
// DBQ_REQUIRE names the dialect and skips, saying so, otherwise; any other
// error fails it. The error is printed with passwords redacted.
func Unreachable(t testing.TB, d dialect.Name, err error) {
	t.Helper()
	if !CannotConnect(err) {
		t.Fatalf("%s at %s: test setup failed: %s", d, dialect.Redact(DSN(d)), dialect.Redact(err.Error()))
	}
	msg := fmt.Sprintf("%s at %s does not answer: %s", d, dialect.Redact(DSN(d)), dialect.Redact(err.Error()))
	if Required(d) {
		t.Fatalf("%s (DBQ_REQUIRE names %s)", msg, d)
	}
	t.Skipf("%s; skipping (set DBQ_REQUIRE=%s to fail instead)", msg, d)
}

var seq atomic.Int64

// UniqueName returns a fresh identifier for a test's schema, database or
// prefix: the base, the process's start time and a counter.
func UniqueName(base string) string {
	return fmt.Sprintf("%s_%x_%d", base, start, seq.Add(1))
}

var start = time.Now().UnixNano() & 0xffffffffff

// MigrateUp migrates p (goose over db, tables named by n, in dialect d) up
// for t, and registers first, so that a partial migration is undone too,
// a cleanup that migrates down to zero, drops goose's version table and
// closes db, failing t if any of that fails. db must already answer
// (dbq.Migrator checks that); a migration that fails ends t as Unreachable
// says. db keeps no idle connection between the migration and the cleanup.
func MigrateUp(t testing.TB, d dialect.Name, p *goose.Provider, db *sql.DB, n dialect.Names) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := p.DownTo(ctx, 0); err != nil {
			t.Errorf("cleanup: migrate %s down: %v", n.Jobs(), err)
		}
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+n.Qualified(d, n.Versions())); err != nil {
			t.Errorf("cleanup: drop %s: %v", n.Versions(), err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("cleanup: close: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Up(ctx); err != nil {
		Unreachable(t, d, err)
	}
	db.SetMaxIdleConns(0)
}
