package migrations

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
)

func TestVersionsMatchAcrossDialects(t *testing.T) {
	want, err := Versions(dialect.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no postgres migrations")
	}
	for _, d := range dialect.All {
		got, err := Versions(d)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s versions %v, postgres has %v", d, got, want)
		}
	}
}

func TestFSRendersNames(t *testing.T) {
	for _, d := range dialect.All {
		fsys, err := FS(d, dialect.Names{Schema: "s1", Prefix: "pfx_"})
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		names, _ := fs.Glob(fsys, "*.sql")
		if len(names) == 0 {
			t.Fatalf("%s: nothing rendered", d)
		}
		for _, n := range names {
			b, _ := fs.ReadFile(fsys, n)
			s := string(b)
			if !strings.Contains(s, "+goose Up") || !strings.Contains(s, "+goose Down") {
				t.Errorf("%s/%s: missing goose annotations", d, n)
			}
			if strings.Contains(s, "{{") {
				t.Errorf("%s/%s: unrendered template", d, n)
			}
			// Every migration names at least one table, each with the prefix.
			if !strings.Contains(s, "pfx_") {
				t.Errorf("%s/%s: prefix not applied", d, n)
			}
			if strings.Contains(s, "dbq_") {
				t.Errorf("%s/%s: hard-coded table name", d, n)
			}
		}
	}
}

func TestFSRejectsBadNames(t *testing.T) {
	for _, n := range []dialect.Names{
		{Prefix: `x"; DROP TABLE t; --`},
		{Schema: "a b"},
		{Prefix: "ünï_"},
		{Schema: "s]"},
	} {
		if _, err := FS(dialect.Postgres, n); err == nil {
			t.Errorf("%+v: accepted", n)
		}
	}
}
