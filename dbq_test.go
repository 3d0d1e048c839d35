package dbq_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

func TestOpenRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	sqlitePath := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	for _, c := range []struct {
		dsn, strategy string
		want          error
	}{
		{"postgres://127.0.0.1:1/x", "fifo", queue.ErrInvalidConfig},
		{"sqlserver://127.0.0.1:1?database=x", "advisory", queue.ErrInvalidConfig},
		{"mysql://127.0.0.1:1/x", "skiplocked", queue.ErrInvalidConfig},
		{sqlitePath, "updlock", queue.ErrInvalidConfig},
		{"redis://127.0.0.1:6379", "", dialect.ErrUnknownScheme},
	} {
		q, err := dbq.Open(ctx, c.dsn, dbq.Options{Strategy: c.strategy})
		if !errors.Is(err, c.want) {
			t.Errorf("Open(%q, strategy %q) = %v, want %v", c.dsn, c.strategy, err, c.want)
		}
		if q != nil {
			q.Close()
		}
	}
}

func TestOpenSQLite(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "q.db")
	p, db, err := dbq.Migrator(ctx, dsn, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	db.Close()
	q, err := dbq.Open(ctx, dsn, dbq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Dialect() != "sqlite" {
		t.Errorf("Dialect = %q", q.Dialect())
	}
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "a"}); err != nil {
		t.Fatal(err)
	}
}
