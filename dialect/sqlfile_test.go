package dialect_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/dbqueue/dbq/dialect"
)

func TestLoadSQLVocabulary(t *testing.T) {
	fsys := fstest.MapFS{
		"sql/enqueue.sql": {Data: []byte("-- a comment with a ? in it\nINSERT INTO {{table \"jobs\"}} (a, b)\n\nVALUES {{range $i := rows .N}}{{if $i}}, {{end}}(?, ?){{end}}\n")},
		"sql/cancel.sql":  {Data: []byte("DELETE FROM {{table \"queues\"}} WHERE id IN ({{params .N}}) -- trailing stays\n")},
		"sql/index.sql":   {Data: []byte("DROP INDEX {{ident \"jobs_claim_idx\"}} ON {{schema}}")},
		"sql/move/x.sql":  {Data: []byte("SELECT 1")},
	}
	for _, tc := range []struct {
		d                  dialect.Name
		n                  dialect.Names
		enqueue, cancel, x string
	}{
		{dialect.Postgres, dialect.Names{Schema: "app"},
			`INSERT INTO "app"."dbq_jobs" (a, b)` + "\n" + `VALUES (?, ?), (?, ?), (?, ?)`,
			`DELETE FROM "app"."dbq_queues" WHERE id IN (?, ?, ?) -- trailing stays`,
			`DROP INDEX "dbq_jobs_claim_idx" ON "app"`},
		{dialect.MySQL, dialect.Names{Prefix: "q_"},
			"INSERT INTO `q_jobs` (a, b)\nVALUES (?, ?), (?, ?), (?, ?)",
			"DELETE FROM `q_queues` WHERE id IN (?, ?, ?) -- trailing stays",
			"DROP INDEX `q_jobs_claim_idx` ON "},
		{dialect.MSSQL, dialect.Names{Schema: "s"},
			"INSERT INTO [s].[dbq_jobs] (a, b)\nVALUES (?, ?), (?, ?), (?, ?)",
			"DELETE FROM [s].[dbq_queues] WHERE id IN (?, ?, ?) -- trailing stays",
			"DROP INDEX [dbq_jobs_claim_idx] ON [s]"},
		{dialect.SQLite, dialect.Names{Schema: "ignored"},
			`INSERT INTO "dbq_jobs" (a, b)` + "\n" + `VALUES (?, ?), (?, ?), (?, ?)`,
			`DELETE FROM "dbq_queues" WHERE id IN (?, ?, ?) -- trailing stays`,
			`DROP INDEX "dbq_jobs_claim_idx" ON `},
	} {
		s, err := dialect.LoadSQL(fsys, "sql/*.sql", tc.d, tc.n, dialect.SQLOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.Names(), ","); got != "cancel,enqueue,index" {
			t.Errorf("%s names %s", tc.d, got)
		}
		data := struct{ N int }{3}
		for name, want := range map[string]string{"enqueue": tc.enqueue, "cancel": tc.cancel, "index": tc.x} {
			got, err := s.Render(name, data)
			if err != nil || got != want {
				t.Errorf("%s %s = %q, %v; want %q", tc.d, name, got, err, want)
			}
		}
	}
	move, err := dialect.LoadSQL(fsys, "sql/move/*.sql", dialect.Postgres, dialect.Names{}, dialect.SQLOptions{})
	if err != nil || strings.Join(move.Names(), ",") != "x" {
		t.Fatalf("move files: %v %v", move, err)
	}
}

func TestLoadSQLErrors(t *testing.T) {
	fsys := fstest.MapFS{"sql/a.sql": {Data: []byte("SELECT {{.Missing}} FROM {{table \"jobs\"}}")}}
	s, err := dialect.LoadSQL(fsys, "sql/*.sql", dialect.Postgres, dialect.Names{}, dialect.SQLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Render("a", struct{}{}); err == nil {
		t.Error("a missing field rendered")
	}
	if _, err := s.Render("nope", nil); err == nil {
		t.Error("an unknown file rendered")
	}
	var dst string
	if err := s.Text(map[string]*string{"nope": &dst}); err == nil {
		t.Error("Text filled a file that does not exist")
	}
	if _, err := dialect.LoadSQL(fsys, "sql/*.sql", dialect.Postgres, dialect.Names{Prefix: "bad-prefix"}, dialect.SQLOptions{}); err == nil {
		t.Error("an invalid prefix was accepted")
	}
	if _, err := dialect.LoadSQL(fsys, "none/*.sql", dialect.Postgres, dialect.Names{}, dialect.SQLOptions{}); err == nil {
		t.Error("a pattern matching nothing was accepted")
	}
	bad := fstest.MapFS{"sql/b.sql": {Data: []byte("SELECT {{nosuchfunc}}")}}
	if _, err := dialect.LoadSQL(bad, "sql/*.sql", dialect.Postgres, dialect.Names{}, dialect.SQLOptions{}); err == nil {
		t.Error("an unknown function parsed")
	}
	keep := fstest.MapFS{"m/1.sql": {Data: []byte("-- +goose Up\nSELECT 1;\n\n-- +goose Down\n")}}
	m, err := dialect.LoadSQL(keep, "m/*.sql", dialect.MySQL, dialect.Names{}, dialect.SQLOptions{KeepComments: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Render("1", nil); got != "-- +goose Up\nSELECT 1;\n\n-- +goose Down\n" {
		t.Errorf("KeepComments rendered %q", got)
	}
}
