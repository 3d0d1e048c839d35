package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
)

// jsonCommands are the --json commands that read one database (move, which
// reads two, prints one report struct).
var jsonCommands = map[string][]string{
	"stats": {"stats", "--json"},
	"jobs":  {"jobs", "--json"},
	"dead":  {"dead", "list", "--queue", "j", "--json"},
	"check": {"check", "--json"},
}

// TestJSONSameShapeOnEveryDialect: every --json command prints the same
// shape — keys and value types — on SQLite, PostgreSQL and MySQL, on an
// empty queue (a list is [], never null) and with jobs in it.
func TestJSONSameShapeOnEveryDialect(t *testing.T) {
	t.Parallel()
	shapes := map[dialect.Name]map[string]string{}
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			g, _ := cliDB(t, db)
			got := map[string]string{}
			run := func(when string) {
				for name, args := range jsonCommands {
					out := mustRun(t, "", append(slices.Clone(g), args...)...)
					got[when+" "+name] = jsonShape(t, out)
				}
			}
			run("empty:")
			mustRun(t, "", append(slices.Clone(g), "enqueue", "-q", "j", "--dedupe", "k", "x")...)
			mustRun(t, "", append(slices.Clone(g), "enqueue", "-q", "j", "y")...)
			run("two jobs:")
			if got["empty: stats"] != "[]" || got["empty: jobs"] != "[]" || got["empty: dead"] != "[]" {
				t.Errorf("empty lists print %q, %q, %q; want []", got["empty: stats"], got["empty: jobs"], got["empty: dead"])
			}
			shapes[db.d] = got
		})
	}
	ref, ok := shapes[dialect.SQLite]
	if !ok {
		t.Fatal("no SQLite shapes to compare with")
	}
	for d, got := range shapes {
		for k, want := range ref {
			if got[k] != want {
				t.Errorf("%s on %s prints\n  %s\nSQLite prints\n  %s", k, d, got[k], want)
			}
		}
	}
}

// jsonShape describes a JSON document by its keys and value types: a list
// by its first element's shape.
func jsonShape(t *testing.T, out string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	var shape func(v any) string
	shape = func(v any) string {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + ":" + shape(v[k])
			}
			return "{" + strings.Join(parts, ",") + "}"
		case []any:
			if len(v) == 0 {
				return "[]"
			}
			return "[" + shape(v[0]) + "]"
		case nil:
			return "null"
		default:
			return fmt.Sprintf("%T", v)
		}
	}
	return shape(v)
}
