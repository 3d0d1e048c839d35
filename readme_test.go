package dbq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// readmeRecipes returns the producer statements of README.md's SQL block
// (the one with a "-- PostgreSQL:" comment), by dialect: each "-- <database>:" comment and
// the statement under it, up to its ";". It fails t if one is missing, so
// the test follows the README as it is written.
func readmeRecipes(t *testing.T) map[dialect.Name]string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, part := range strings.Split(string(b), "```sql\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		if block == "" && strings.Contains(body, "-- PostgreSQL:") {
			block = body
		}
	}
	names := []struct {
		comment string
		d       dialect.Name
	}{{"-- PostgreSQL", dialect.Postgres}, {"-- MySQL", dialect.MySQL}, {"-- SQLite", dialect.SQLite}, {"-- SQL Server", dialect.MSSQL}}
	out := map[dialect.Name]string{}
	var cur dialect.Name
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "--") {
			cur = ""
			for _, n := range names {
				if strings.HasPrefix(line, n.comment) {
					cur = n.d
				}
			}
			continue
		}
		if cur != "" && strings.TrimSpace(line) != "" {
			out[cur] += line + "\n"
		}
	}
	for _, n := range names {
		s := strings.TrimSpace(out[n.d])
		if !strings.HasPrefix(s, "INSERT INTO dbq_jobs ") || !strings.HasSuffix(s, ";") {
			t.Fatalf("README.md: no producer statement under %q in the SQL block of producers:\n%s", n.comment, block)
		}
		out[n.d] = strings.TrimSuffix(s, ";")
	}
	return out
}

// recipePayload is JSON whose bytes a text path can change: an escaped
// backslash, \n, \", \u00e9, and UTF-8 up to a 4-byte character.
const recipePayload = `{"path":"C:\\tmp","nl":"a\nb","q":"say \"hi\"","e":"caf\u00e9","raw":"café 😀"}`

// TestREADMEProducerRecipes: README.md's producer statements, as written
// there, store JSON sent as text byte for byte on every database that
// answers (SQL Server only where DBQ_MSSQL_DSN does), and a worker's queue
// reads the same bytes back.
func TestREADMEProducerRecipes(t *testing.T) {
	if !json.Valid([]byte(recipePayload)) || !strings.ContainsFunc(recipePayload, func(r rune) bool { return utf8.RuneLen(r) == 4 }) {
		t.Fatalf("the test's payload is not JSON with a 4-byte character: %s", recipePayload)
	}
	recipes := readmeRecipes(t)
	// No SQL Server answers on most machines: there its statement at
	// least converts through a UTF-8 collation (teesql, which checks the
	// dialect's other SQL, takes no COLLATE inside CONVERT).
	if !strings.Contains(recipes[dialect.MSSQL], "_UTF8") {
		t.Errorf("README.md's SQL Server statement converts through no UTF-8 collation:\n%s", recipes[dialect.MSSQL])
	}
	for _, d := range []dialect.Name{dialect.Postgres, dialect.MySQL, dialect.SQLite, dialect.MSSQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dsn := dbtest.DSN(d)
			if d == dialect.SQLite {
				dsn = "sqlite:" + filepath.Join(t.TempDir(), "readme.db")
			}
			cfg := queue.Config{Prefix: dbtest.UniqueName("readme") + "_", Logger: quietLog}
			p, db, err := dbq.Migrator(ctx, dsn, cfg)
			if err != nil {
				dbtest.Unreachable(t, d, err)
			}
			n := cfg.Names()
			dbtest.MigrateUp(t, d, p, db, n)
			stmt := strings.Replace(recipes[d], "dbq_jobs", n.Qualified(d, n.Jobs()), 1)
			if _, err := db.ExecContext(ctx, stmt, "recipe", recipePayload); err != nil {
				t.Fatalf("README.md's %s statement: %v\n%s", d, err, stmt)
			}
			q, err := dbq.Open(ctx, dsn, dbq.Options{Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			jobs, err := q.Jobs(ctx, queue.JobFilter{Queue: "recipe"})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("jobs of queue recipe: %d, %v", len(jobs), err)
			}
			if !bytes.Equal(jobs[0].Payload, []byte(recipePayload)) {
				t.Errorf("README.md's %s statement stored\n%q\nfor\n%q", d, jobs[0].Payload, recipePayload)
			}
		})
	}
}
