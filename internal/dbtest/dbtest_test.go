package dbtest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// closedPort returns a local TCP port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// TestCannotConnect: what each driver returns, through dbq's open and
// migrate paths, for a server that is not there is a reason to skip; a
// server that answers with an error, or a setup error, is not.
func TestCannotConnect(t *testing.T) {
	port := closedPort(t)
	for _, dsn := range []string{
		fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=5", port),
		fmt.Sprintf("mysql://root@127.0.0.1:%d/test", port),
		fmt.Sprintf("sqlserver://sa:x@127.0.0.1:%d?database=master&dial+timeout=5", port),
		"postgres://postgres@no-such-host.invalid:5432/test?sslmode=disable&connect_timeout=5",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := dbq.Open(ctx, dsn, dbq.Options{})
		if !dbtest.CannotConnect(err) {
			t.Errorf("Open at a closed port (%T): %v; want CannotConnect", err, err)
		}
		_, _, err = dbq.Migrator(ctx, dsn, queue.Config{})
		if !dbtest.CannotConnect(err) {
			t.Errorf("Migrator at a closed port (%T): %v; want CannotConnect", err, err)
		}
		cancel()
	}
	for _, err := range []error{
		nil,
		errors.New(`partial migration error (type:sql,version:2): ERROR: syntax error at or near "CREAT"`),
		fmt.Errorf("migrate: %w", queue.ErrNotMigrated),
	} {
		if dbtest.CannotConnect(err) {
			t.Errorf("CannotConnect(%v) = true", err)
		}
	}
	// A server that answers and refuses: a database that does not exist.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, dsn := range []string{
		"postgres://postgres@127.0.0.1:5432/no_such_db_dbq?sslmode=disable",
		"mysql://root@127.0.0.1:3306/no_such_db_dbq",
	} {
		_, err := dbq.Open(ctx, dsn, dbq.Options{})
		if err == nil || dbtest.CannotConnect(err) {
			t.Errorf("Open of a missing database: %v; want an error that is not CannotConnect", err)
		}
	}
}
