package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
)

// testRole makes a login role (PostgreSQL) or user (MySQL, at every host
// a loopback login may match) named name, runs setup as the admin with
// each statement's %[1]s the quoted role (MySQL: once per host), and
// returns a DSN that logs in as it and the admin's *sql.DB. When t ends
// the role and what it owns are dropped and admin is closed; a failed
// drop fails t. A server that does not answer skips t as dbtest says.
func testRole(t *testing.T, d dialect.Name, name string, setup ...string) (dsn string, admin *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, _, err := dbq.OpenDB(ctx, dbtest.DSN(d))
	if err != nil {
		dbtest.Unreachable(t, d, err)
	}
	t.Cleanup(func() { admin.Close() })
	var cleanup []string
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range cleanup {
			if _, err := admin.ExecContext(ctx, s); err != nil {
				t.Errorf("cleanup: %s: %v", s, err)
			}
		}
	})
	exec := func(q string) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	switch d {
	case dialect.Postgres:
		role := fmt.Sprintf("%q", name)
		exec("CREATE ROLE " + role + " LOGIN")
		cleanup = append(cleanup, "DROP OWNED BY "+role, "DROP ROLE "+role)
		for _, s := range setup {
			exec(fmt.Sprintf(s, role))
		}
	case dialect.MySQL:
		for _, host := range []string{"%", "localhost", "127.0.0.1"} {
			user := fmt.Sprintf("'%s'@'%s'", name, host)
			exec("CREATE USER " + user)
			cleanup = append(cleanup, "DROP USER "+user)
			for _, s := range setup {
				exec(fmt.Sprintf(s, user))
			}
		}
	default:
		t.Fatalf("testRole: no roles on %s", d)
	}
	u, err := url.Parse(dbtest.DSN(d))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(name)
	return u.String(), admin
}

// dropAtEnd runs stmts on admin when t ends (before testRole's cleanups,
// if registered after it), failing t if one fails.
func dropAtEnd(t *testing.T, admin *sql.DB, stmts ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range stmts {
			if _, err := admin.ExecContext(ctx, s); err != nil {
				t.Errorf("cleanup: %s: %v", s, err)
			}
		}
	})
}

// withParam returns dsn with the query parameter k=v added.
func withParam(dsn, k, v string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + url.QueryEscape(k) + "=" + url.QueryEscape(v)
}
