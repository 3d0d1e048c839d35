package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
)

// TestMigrateAsSchemaOwner: the owner of a schema a DBA made, with no
// CREATE on the database, runs migrate up (and its check), status and
// down --to 0 with --schema, and applies what migrate sql --schema prints,
// up and down. On MySQL --schema names a database: there the account has
// every privilege on that database and none beyond it, and an account
// that may only read it runs migrate status.
func TestMigrateAsSchemaOwner(t *testing.T) {
	t.Parallel()
	for _, d := range []dialect.Name{dialect.Postgres, dialect.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			schema := dbtest.UniqueName("own")
			var dsn string
			switch d {
			case dialect.Postgres:
				var admin = mustRole(t, d, schema+"_o", &dsn, fmt.Sprintf(`CREATE SCHEMA %q AUTHORIZATION %%[1]s`, schema))
				dropAtEnd(t, admin, fmt.Sprintf(`DROP SCHEMA IF EXISTS %q CASCADE`, schema))
				var create bool
				if err := admin.QueryRowContext(ctx, "SELECT has_database_privilege($1, current_database(), 'CREATE')", schema+"_o").Scan(&create); err != nil || create {
					t.Fatalf("the owner may create in the database (%v, %v): the test proves nothing", create, err)
				}
			case dialect.MySQL:
				admin := mustRole(t, d, schema+"_o", &dsn, "GRANT ALL ON `"+schema+"`.* TO %[1]s")
				if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+schema+"`"); err != nil {
					t.Fatal(err)
				}
				dropAtEnd(t, admin, "DROP DATABASE IF EXISTS `"+schema+"`")
				// The account may use no other database to log in to.
				dsn = withDatabase(t, d, dsn, schema)
			}
			g := []string{"--dsn", dsn, "--schema", schema}
			if out := mustRun(t, "", append(g, "migrate", "up")...); !strings.Contains(out, "probes passed") {
				t.Fatalf("migrate up:\n%s", out)
			}
			if out := mustRun(t, "", append(g, "migrate", "status")...); strings.Contains(out, "pending") || !strings.Contains(out, "applied") {
				t.Fatalf("migrate status:\n%s", out)
			}
			if d == dialect.MySQL {
				var reader string
				mustRole(t, d, schema+"_r", &reader, "GRANT SELECT ON `"+schema+"`.* TO %[1]s")
				reader = withDatabase(t, d, reader, schema)
				if out := mustRun(t, "", "--dsn", reader, "--schema", schema, "migrate", "status"); !strings.Contains(out, "applied") {
					t.Fatalf("migrate status as a reader:\n%s", out)
				}
			}
			if out := mustRun(t, "", append(g, "migrate", "down", "--to", "0")...); !strings.Contains(out, "dropped") {
				t.Fatalf("migrate down --to 0:\n%s", out)
			}
			// What migrate sql prints, applied by the owner with a client.
			sqlDSN := dsn
			if d == dialect.MySQL {
				sqlDSN = withParam(dsn, "multiStatements", "true")
			}
			db, _, err := dbq.OpenDB(ctx, sqlDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, down := range []bool{false, true} {
				args := append(g, "migrate", "sql")
				if down {
					args = append(args, "--down")
				}
				if _, err := db.ExecContext(ctx, mustRun(t, "", args...)); err != nil {
					t.Fatalf("apply dbq %s as the owner: %v", strings.Join(args, " "), err)
				}
			}
		})
	}
}

// mustRole is testRole, storing the role's DSN in dsn and returning the
// admin connection.
func mustRole(t *testing.T, d dialect.Name, name string, dsn *string, setup ...string) *sql.DB {
	t.Helper()
	var admin *sql.DB
	*dsn, admin = testRole(t, d, name, setup...)
	return admin
}
