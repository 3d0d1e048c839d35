package mssql

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/sqlc-dev/teesql/ast"
)

// The Babelfish forms (sql/babelfish/) replace files of the same name
// (move_insert: move/insert), parse as T-SQL, carry no table hint
// (Babelfish ignores or rejects them), use one OUTPUT clause per
// statement (Babelfish 4.4 takes no second one) and name the configured
// tables.
func TestBabelfishStatements(t *testing.T) {
	bf, err := loadStatements(babelfishPattern, testNames)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := renderStatements(testNames)
	if err != nil {
		t.Fatal(err)
	}
	move, err := loadStatements(movePattern, testNames)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{sqlClaim, sqlClaimUpdLock, sqlEnqueue, sqlBabelfishMoveExport, sqlBabelfishMoveInsert, sqlBabelfishMoveSurvey,
		sqlRelease, sqlRescue, sqlRetry}
	if got := bf.names(); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("babelfish statements %v, want %v", got, want)
	}
	for _, name := range bf.names() {
		orig := plain
		if strings.HasPrefix(name, "move_") {
			orig = move
		}
		if _, ok := orig.plain[strings.TrimPrefix(name, "move_")]; !ok {
			t.Errorf("%s replaces no statement", name)
		}
		text := exampleRows(bf, name, 2)
		stmts, err := parseBatch(text)
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, text)
			continue
		}
		for _, r := range find[*ast.NamedTableReference](stmts) {
			if h := hintsOf(r); len(h) > 0 {
				t.Errorf("%s: table hints %v on %s", name, h, tableRef(r))
			}
		}
		for _, s := range stmts {
			if n := len(find[*ast.OutputClause](s)) + len(find[*ast.OutputIntoClause](s)); n > 1 {
				t.Errorf("%s: %d OUTPUT clauses in one statement", name, n)
			}
		}
		if want := dialect.Quote(dialect.MSSQL, testNames.Schema) + "."; !strings.Contains(text, want) {
			t.Errorf("%s does not name the schema %s", name, want)
		}
	}
}
