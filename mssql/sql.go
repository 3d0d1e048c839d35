package mssql

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/dbqueue/dbq/dialect"
)

// The statements, one embedded file each in sql/, named as in the other
// dialects where they have the same job.
const (
	sqlEnqueue      = "enqueue"
	sqlClaim        = "claim"
	sqlClaimUpdLock = "claim_updlock"
	sqlComplete     = "complete"
	sqlRetry        = "retry"
	sqlRelease      = "release"
	sqlExtend       = "extend"
	sqlRescue       = "rescue"
	sqlAbandon      = "abandon"
	sqlStats        = "stats"

	sqlEnqueueUnique = "enqueue_unique"
	sqlJobs          = "jobs"
	sqlCancel        = "cancel"
	sqlRetryDeadIDs  = "retry_dead_ids"
	sqlRetryDeadAll  = "retry_dead_all"
	sqlSetPaused     = "set_paused"
	sqlPaused        = "paused"

	sqlSavepoint         = "savepoint"
	sqlRollbackSavepoint = "rollback_savepoint"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

var (
	// {{table "jobs"}} names a table or sequence, as in the migrations.
	tableMarker = regexp.MustCompile(`\{\{table "([a-z_]+)"\}\}`)
	// rowsMarker is where a statement's VALUES rows go, one per lease or job.
	rowsMarker = "{{rows}}"
)

// statements is the dialect's SQL, rendered for one set of names.
type statements map[string]string

// renderStatements loads every statement, drops its whole-line comments
// and puts in the validated, quoted and qualified table names.
func renderStatements(n dialect.Names) (statements, error) {
	return renderFiles(sqlFiles, "sql/*.sql", n)
}

// renderFiles renders the statements of fsys that match pattern, as
// renderStatements says.
func renderFiles(fsys fs.FS, pattern string, n dialect.Names) (statements, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	n = n.WithDefaults()
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	out := statements{}
	for _, f := range files {
		src, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for line := range strings.Lines(string(src)) {
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			b.WriteString(line)
		}
		s := tableMarker.ReplaceAllStringFunc(b.String(), func(m string) string {
			return n.Qualified(dialect.MSSQL, n.Prefix+tableMarker.FindStringSubmatch(m)[1])
		})
		if strings.Contains(strings.ReplaceAll(s, rowsMarker, ""), "{{") {
			return nil, fmt.Errorf("dbq: mssql statement %s: unknown marker", f)
		}
		out[strings.TrimSuffix(path.Base(f), ".sql")] = s
	}
	return out, nil
}

// withRows returns stmt with its VALUES list made of n rows of the columns
// cols: row i is (@<col>i, ...), or the literal i for a column named "#".
// Only generated parameter names and integers are spliced; every value is a
// parameter.
func withRows(stmt string, n int, cols ...string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j, c := range cols {
			if j > 0 {
				b.WriteString(", ")
			}
			if c == "#" {
				b.WriteString(strconv.Itoa(i))
				continue
			}
			b.WriteString("@" + c + strconv.Itoa(i))
		}
		b.WriteByte(')')
	}
	return strings.Replace(stmt, rowsMarker, b.String(), 1)
}
