package mssql

import (
	"embed"
	"sync"

	"github.com/dbqueue/dbq/dialect"
)

// The statements, one embedded file each in sql/, named as in the other
// dialects where they have the same job. A file whose VALUES list has a
// row per lease, job, id or key builds it with {{range $i := rows .N}}.
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
	sqlStatsByKind  = "stats_by_kind"

	sqlEnqueueUnique = "enqueue_unique"
	sqlJobs          = "jobs"
	sqlCancel        = "cancel"
	sqlRetryDeadIDs  = "retry_dead_ids"
	sqlRetryDeadAll  = "retry_dead_all"
	sqlSetPaused     = "set_paused"
	sqlPaused        = "paused"

	sqlSavepoint         = "savepoint"
	sqlRollbackSavepoint = "rollback_savepoint"

	sqlScheduleUpsert    = "schedule_upsert"
	sqlScheduleAdvance   = "schedule_advance"
	sqlSchedules         = "schedules"
	sqlScheduleSetPaused = "schedule_set_paused"
	sqlScheduleDelete    = "schedule_delete"

	sqlActivityAdd   = "activity_add"
	sqlActivity      = "activity"
	sqlActivityPrune = "activity_prune"
	sqlProcessTouch  = "process_touch"
	sqlProcessRemove = "process_remove"
	sqlProcessPrune  = "process_prune"
	sqlProcesses     = "processes"
)

// The statements of package move, one embedded file each in sql/move/.
const (
	sqlMoveIdentity = "identity"
	sqlMoveSurvey   = "survey"
	sqlMoveExport   = "export"
	sqlMoveDelete   = "delete"
	sqlMoveExisting = "existing"
	sqlMoveInsert   = "insert"
	sqlMoveStored   = "stored"
)

// The statements that differ on Babelfish for PostgreSQL, one embedded file
// each in sql/babelfish/, used in place of the file of the same name (see
// server.go).
const (
	sqlBabelfishMoveInsert = "move_insert"
	sqlBabelfishMoveSurvey = "move_survey"
	sqlBabelfishMoveExport = "move_export"
)

// The three sets of statement files.
const (
	sqlPattern       = "sql/*.sql"
	movePattern      = "sql/move/*.sql"
	babelfishPattern = "sql/babelfish/*.sql"
)

//go:embed sql/*.sql sql/move/*.sql sql/babelfish/*.sql
var sqlFiles embed.FS

// statements is one set of statement files rendered with dialect.LoadSQL
// for one set of names: each file once with no rows when loaded, and once
// per row count on first use.
type statements struct {
	files *dialect.SQLFiles
	plain map[string]string // no rows; read-only once loaded
	rowed sync.Map          // stmtKey → string
}

type stmtKey struct {
	name string
	n    int
}

// rowsData is a statement file's data: how many VALUES rows it gets.
type rowsData struct{ N int }

// loadStatements renders the files of pattern for n. Every file renders
// here, so a broken one fails New rather than a call.
func loadStatements(pattern string, n dialect.Names) (*statements, error) {
	files, err := dialect.LoadSQL(sqlFiles, pattern, dialect.MSSQL, n, dialect.SQLOptions{})
	if err != nil {
		return nil, err
	}
	s := &statements{files: files, plain: map[string]string{}}
	for _, name := range files.Names() {
		if s.plain[name], err = files.Render(name, rowsData{}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// names returns the statements' names, sorted.
func (s *statements) names() []string { return s.files.Names() }

// text returns statement name, one without VALUES rows.
func (s *statements) text(name string) string { return s.plain[name] }

// rows returns statement name with n VALUES rows.
func (s *statements) rows(name string, n int) (string, error) {
	k := stmtKey{name, n}
	if t, ok := s.rowed.Load(k); ok {
		return t.(string), nil
	}
	t, err := s.files.Render(name, rowsData{N: n})
	if err != nil {
		return "", err
	}
	s.rowed.Store(k, t)
	return t, nil
}
