package mysql

import (
	"embed"
	"fmt"
	"strings"
	"sync"

	"github.com/dbqueue/dbq/dialect"
)

// The statements, one file each in sql/ (those of package move in
// sql/move/), named as in the other dialects where the statement exists
// there, rendered by [dialect.LoadSQL] with its vocabulary ({{table
// "jobs"}}, {{ident "jobs_claim"}}, {{params .N}}, {{range rows .N}}) and
// [stmtData]. Values always travel as parameters.
//
//go:embed sql/*.sql sql/move/*.sql
var sqlFiles embed.FS

// Statement names: the file names without ".sql"; "move/" names a file of
// sql/move/.
const (
	sqlEnqueue          = "enqueue"
	sqlEnqueueIDs       = "enqueue_ids"
	sqlClaimCandidates  = "claim_candidates"
	sqlClaimLock        = "claim_lock"
	sqlClaimUpdate      = "claim_update"
	sqlClaimRead        = "claim_read"
	sqlLeaseLock        = "lease_lock"
	sqlComplete         = "complete"
	sqlRetry            = "retry"
	sqlRelease          = "release"
	sqlExtend           = "extend"
	sqlRescueQueues     = "rescue_queues"
	sqlRescueCandidates = "rescue_candidates"
	sqlRescueLock       = "rescue_lock"
	sqlRescue           = "rescue"
	sqlStats            = "stats"
	sqlStatsByKind      = "stats_by_kind"
	sqlServer           = "server"
	sqlServerWsrep      = "server_wsrep"
	sqlSession          = "session"
	sqlConnectionID     = "connection_id"

	sqlEnqueueUnique       = "enqueue_unique"
	sqlJobs                = "jobs"
	sqlCancelLock          = "cancel_lock"
	sqlCancel              = "cancel"
	sqlRetryDeadCandidates = "retry_dead_candidates"
	sqlRetryDeadLock       = "retry_dead_lock"
	sqlRetryDead           = "retry_dead"
	sqlSetPaused           = "set_paused"
	sqlPaused              = "paused"
	sqlRescueGetLock       = "rescue_get_lock"
	sqlRescueReleaseLock   = "rescue_release_lock"

	sqlActivityAdd   = "activity_add"
	sqlActivity      = "activity"
	sqlActivityPrune = "activity_prune"
	sqlProcessTouch  = "process_touch"
	sqlProcessRemove = "process_remove"
	sqlProcessPrune  = "process_prune"
	sqlProcesses     = "processes"

	sqlMoveIdentity     = "move/identity"
	sqlMoveIdentityHost = "move/identity_host"
	sqlMoveLimits       = "move/limits"
	sqlMoveSurvey       = "move/survey"
	sqlMoveExport       = "move/export"
	sqlMoveExportLock   = "move/export_lock"
	sqlMoveDelete       = "move/delete"
	sqlMoveInsert       = "move/insert"
	sqlMoveStored       = "move/stored"
)

// stmtData is a statement file's data besides the shared vocabulary.
type stmtData struct {
	// N is the length of the IN list ({{params .N}}) or the number of
	// per-row groups ({{range rows .N}}).
	N int

	// The filters of a jobs.sql variant: each adds a condition on a bind
	// parameter; DeadOfQueue (queue and state 'dead') picks the claim index.
	ByQueue, ByState, ByKind, DeadOfQueue bool

	LockWaitSeconds int
	// CandidateIsolation is the claimer session's level (session.sql),
	// set by New from the server's flavour.
	CandidateIsolation string
}

// statements renders and caches the statements for one set of names.
type statements struct {
	files, move *dialect.SQLFiles
	// jobsTable and queuesTable are the quoted, qualified table names, for
	// log lines and errors.
	jobsTable, queuesTable string
	base                   stmtData
	cache                  sync.Map // stmtKey -> string
}

type stmtKey struct {
	name string
	n    int
}

func newStatements(n dialect.Names, lockWaitSeconds int) (*statements, error) {
	files, err := dialect.LoadSQL(sqlFiles, "sql/*.sql", dialect.MySQL, n, dialect.SQLOptions{})
	if err != nil {
		return nil, err
	}
	move, err := dialect.LoadSQL(sqlFiles, "sql/move/*.sql", dialect.MySQL, n, dialect.SQLOptions{})
	if err != nil {
		return nil, err
	}
	n = n.WithDefaults()
	return &statements{
		files:       files,
		move:        move,
		jobsTable:   n.Qualified(dialect.MySQL, n.Jobs()),
		queuesTable: n.Qualified(dialect.MySQL, n.Prefix+"queues"),
		base:        stmtData{LockWaitSeconds: lockWaitSeconds, CandidateIsolation: "READ UNCOMMITTED"},
	}, nil
}

// maxCached bounds the list lengths whose rendering is kept: batches are
// usually small, and a long list is cheap to render next to running it.
const maxCached = 256

// get returns statement name rendered for n list elements or rows.
func (s *statements) get(name string, n int) string {
	if n > maxCached {
		return s.render(name, n)
	}
	k := stmtKey{name, n}
	if v, ok := s.cache.Load(k); ok {
		return v.(string)
	}
	q := s.render(name, n)
	s.cache.Store(k, q)
	return q
}

func (s *statements) render(name string, n int) string {
	d := s.base
	d.N = n
	return s.renderData(name, d)
}

// jobs returns the variant of jobs.sql for a filter on any of queue, state
// and kind. Its parameters are the AfterID, then the queue, the state and
// the kind that are filtered on, then the limit.
func (s *statements) jobs(byQueue, byState, byKind, dead bool) string {
	flags := 0
	if byQueue {
		flags |= 1
	}
	if byState {
		flags |= 2
	}
	dead = dead && byQueue && byState
	if dead {
		flags |= 4
	}
	if byKind {
		flags |= 8
	}
	k := stmtKey{sqlJobs, -1 - flags} // apart from get's keys, which are >= 0
	if v, ok := s.cache.Load(k); ok {
		return v.(string)
	}
	d := s.base
	d.ByQueue, d.ByState, d.ByKind, d.DeadOfQueue = byQueue, byState, byKind, dead
	q := s.renderData(sqlJobs, d)
	s.cache.Store(k, q)
	return q
}

// renderData renders a statement; the files were parsed by newStatements,
// so a failure is a bug in a file.
func (s *statements) renderData(name string, d stmtData) string {
	files := s.files
	if m, ok := strings.CutPrefix(name, "move/"); ok {
		files, name = s.move, m
	}
	q, err := files.Render(name, d)
	if err != nil {
		panic(fmt.Sprintf("dbq: mysql: %v", err))
	}
	return q
}
