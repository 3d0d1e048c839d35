package integration

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

// GooseProvider returns a goose provider for the job schema of dialect d
// as a team that applies migrations with its own tool has it: the files
// migrations.WriteDir writes (what `dbq migrate sql --dir` writes) read
// back from a directory of t's own, with goose's own version table
// (goose_db_version) — what the goose CLI does with `goose -dir DIR
// <driver> <dsn> up`. When n has a schema (a database, on MySQL), the
// version table goes there (`goose -table S.goose_db_version`), and the
// schema is created first, as its user would; dropping it drops the
// version table with the jobs tables. With no schema, the caller drops
// goose_db_version itself.
func GooseProvider(t *testing.T, d dialect.Name, db *sql.DB, n dialect.Names) *goose.Provider {
	t.Helper()
	dir := t.TempDir()
	wd := d
	if tidb, err := migrations.IsTiDB(context.Background(), d, db); err != nil {
		t.Fatal(err)
	} else if tidb {
		wd = migrations.TiDB
	}
	if _, err := migrations.WriteDir(dir, wd, n); err != nil {
		t.Fatalf("migrations.WriteDir: %v", err)
	}
	gd, err := migrations.GooseDialect(d)
	if err != nil {
		t.Fatal(err)
	}
	table := "goose_db_version"
	if stmt := migrations.SchemaStatement(d, n); stmt != "" {
		table = n.Schema + "." + table
		if _, err := db.ExecContext(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	store, err := database.NewStore(gd, table)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider("", db, os.DirFS(dir), goose.WithStore(store), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatalf("goose.NewProvider over the written files: %v", err)
	}
	return p
}
