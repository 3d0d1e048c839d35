package mysql

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"text/template"

	"github.com/dbqueue/dbq/dialect"
)

// The statements, one file each in sql/, named as in the other dialects
// where the statement exists there. They are text/template files rendered
// with [stmtData]: .Jobs and .Queues are the validated, quoted, qualified
// names of the jobs table and of the queues (pause) table, .ClaimIndex the
// quoted name of the claim index, .List n "?" placeholders for an IN list
// and .Rows a slice of length n to range over for per-row groups; jobs.sql
// also sees the filters of its variant. Values always travel as
// parameters. Full-line "--" comments are dropped when a file is loaded,
// so a comment can never hold a stray placeholder.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// Statement names: the file names without ".sql".
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
	sqlServer           = "server"
	sqlServerWsrep      = "server_wsrep"
	sqlSession          = "session"

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
)

var templates = sync.OnceValues(func() (map[string]*template.Template, error) {
	names, err := fs.Glob(sqlFiles, "sql/*.sql")
	if err != nil {
		return nil, err
	}
	out := make(map[string]*template.Template, len(names))
	for _, n := range names {
		b, err := sqlFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(path.Base(n), ".sql")
		t, err := template.New(name).Option("missingkey=error").Parse(stripComments(string(b)))
		if err != nil {
			return nil, fmt.Errorf("dbq: mysql: sql/%s.sql: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
})

// stripComments drops full-line "--" comments and blank lines.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight(line, " \t\r"))
	}
	return b.String()
}

// stmtData is what a statement template sees.
type stmtData struct {
	Jobs       string
	Queues     string
	Schedules  string
	ClaimIndex string
	List       string
	Rows       []struct{}

	// The filters of a jobs.sql variant: each adds a condition on a bind
	// parameter; DeadOfQueue (queue and state 'dead') picks the claim index.
	ByQueue, ByState, DeadOfQueue bool

	LockWaitSeconds int
	// CandidateIsolation is the claimer session's level (session.sql),
	// set by New from the server's flavour.
	CandidateIsolation string
}

// statements renders and caches the statements for one table.
type statements struct {
	base  stmtData
	cache sync.Map // stmtKey -> string
}

type stmtKey struct {
	name string
	n    int
}

func newStatements(n dialect.Names, lockWaitSeconds int) (*statements, error) {
	n = n.WithDefaults()
	if err := n.Validate(); err != nil {
		return nil, err
	}
	if _, err := templates(); err != nil {
		return nil, err
	}
	return &statements{base: stmtData{
		Jobs:               n.Qualified(dialect.MySQL, n.Jobs()),
		Queues:             n.Qualified(dialect.MySQL, n.Prefix+"queues"),
		Schedules:          n.Qualified(dialect.MySQL, n.Prefix+"schedules"),
		ClaimIndex:         dialect.Quote(dialect.MySQL, n.Prefix+"jobs_claim"),
		LockWaitSeconds:    lockWaitSeconds,
		CandidateIsolation: "READ UNCOMMITTED",
	}}, nil
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
	if n > 0 {
		d.List = strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
		d.Rows = make([]struct{}, n)
	}
	return s.renderData(name, d)
}

// jobs returns the variant of jobs.sql for a filter on queue, on state, or
// both. Its parameters are the AfterID, then the queue and the state that
// are filtered on, then the limit.
func (s *statements) jobs(byQueue, byState, dead bool) string {
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
	k := stmtKey{sqlJobs, -1 - flags} // apart from get's keys, which are >= 0
	if v, ok := s.cache.Load(k); ok {
		return v.(string)
	}
	d := s.base
	d.ByQueue, d.ByState, d.DeadOfQueue = byQueue, byState, dead
	q := s.renderData(sqlJobs, d)
	s.cache.Store(k, q)
	return q
}

func (s *statements) renderData(name string, d stmtData) string {
	ts, err := templates()
	if err != nil {
		panic(err) // checked in newStatements
	}
	t := ts[name]
	if t == nil {
		panic("dbq: mysql: no statement " + name)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		panic(fmt.Sprintf("dbq: mysql: sql/%s.sql: %v", name, err))
	}
	return b.String()
}
