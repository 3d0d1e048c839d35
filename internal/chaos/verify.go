//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// ledgerDDL creates the ledger table (see cmd/dbq/ledger.go for what each
// column holds) and its index on (pid, job_id), which the snapshots of
// what a worker holds read.
func ledgerDDL(d dialect.Name, table, index string) []string {
	cols := map[dialect.Name]string{
		dialect.Postgres: "exec_id BIGINT PRIMARY KEY, job_id BIGINT NOT NULL, payload BYTEA NOT NULL, pid INTEGER NOT NULL, " +
			"attempt INTEGER NOT NULL, started_ns BIGINT NOT NULL, finished_ns BIGINT",
		dialect.MySQL: "exec_id BIGINT PRIMARY KEY, job_id BIGINT NOT NULL, payload VARBINARY(1024) NOT NULL, pid INT NOT NULL, " +
			"attempt INT NOT NULL, started_ns BIGINT NOT NULL, finished_ns BIGINT NULL",
		dialect.SQLite: "exec_id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL, payload BLOB NOT NULL, pid INTEGER NOT NULL, " +
			"attempt INTEGER NOT NULL, started_ns INTEGER NOT NULL, finished_ns INTEGER",
	}[d]
	create := "CREATE TABLE " + table + " (" + cols + ")"
	if d == dialect.MySQL {
		create += " ENGINE=InnoDB"
	}
	return []string{create, "CREATE INDEX " + dialect.Quote(d, index) + " ON " + table + " (pid, job_id)"}
}

// run is one ledger row: one run of a job by a worker.
type run struct {
	exec     int64
	job      int64
	payload  string
	pid      int
	attempt  int
	started  int64 // Unix nanoseconds
	finished int64 // Unix nanoseconds; 0: the run never finished
}

// readLedger reads every run.
func (h *harness) readLedger(ctx context.Context) ([]run, error) {
	var runs []run
	err := h.retry(ctx, func(ctx context.Context) error {
		runs = runs[:0]
		rows, err := h.db.QueryContext(ctx, "SELECT exec_id, job_id, payload, pid, attempt, started_ns, finished_ns FROM "+h.ledger)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r run
			var payload []byte
			var fin sql.NullInt64
			if err := rows.Scan(&r.exec, &r.job, &payload, &r.pid, &r.attempt, &r.started, &fin); err != nil {
				return err
			}
			r.payload, r.finished = string(payload), fin.Int64
			runs = append(runs, r)
		}
		return rows.Err()
	})
	return runs, err
}

// findings is what the ledger says about a run of the harness.
type findings struct {
	executions, finished, duplicates, explained, lost, retried int
	problems                                                   []string
	// suspects are the workers that ran unexplained duplicates.
	suspects map[int]bool
}

// maxListed caps how many cases of one problem a report lists.
const maxListed = 10

// check holds the runs against the jobs enqueued (ids, with their
// payloads) and the faults injected: every job finished at least once
// with its own payload, no run of a job not enqueued, and every job run
// more than once has at most one run that no fault explains.
func check(runs []run, events []event, ids []int64, payloads map[int64]string) findings {
	f := findings{suspects: map[int]bool{}}
	byJob := make(map[int64][]*run, len(ids))
	var strangers, badPayload []string
	for i := range runs {
		r := &runs[i]
		f.executions++
		if r.finished != 0 {
			f.finished++
		}
		if r.attempt > 0 {
			f.retried++
		}
		want, ok := payloads[r.job]
		switch {
		case !ok:
			strangers = append(strangers, fmt.Sprint(r.job))
			continue
		case r.payload != want:
			badPayload = append(badPayload, fmt.Sprintf("job %d ran with %q, enqueued with %q", r.job, r.payload, want))
		}
		byJob[r.job] = append(byJob[r.job], r)
	}
	var lost, unexplained []string
	for _, id := range ids {
		rs := byJob[id]
		if !slices.ContainsFunc(rs, func(r *run) bool { return r.finished != 0 }) {
			f.lost++
			lost = append(lost, fmt.Sprintf("job %d (%d unfinished runs)", id, len(rs)))
		}
		if len(rs) < 2 {
			continue
		}
		f.duplicates++
		var lines []string
		plain := 0
		for _, r := range rs {
			var by []string
			for i := range events {
				if events[i].explains(r) {
					by = append(by, fmt.Sprintf("%s %d", events[i].kind, i+1))
				}
			}
			if len(by) == 0 {
				plain++
				by = []string{"no fault"}
			}
			fin := "unfinished"
			if r.finished != 0 {
				fin = "finished " + time.Unix(0, r.finished).Format("15:04:05.000")
			}
			lines = append(lines, fmt.Sprintf("pid %d attempt %d started %s %s [%s]", r.pid, r.attempt,
				time.Unix(0, r.started).Format("15:04:05.000"), fin, strings.Join(by, ", ")))
		}
		if plain <= 1 {
			f.explained++
			continue
		}
		// A lease dialect counts a lease taken back as an attempt: two
		// runs of one attempt were two claims of a job nobody took back
		// (on PostgreSQL's advisory claimer, whose locks end with their
		// session, an attempt never rises without a failure).
		how := "its attempt rose between runs: taken back from a live holder (lease expired?) or failed"
		attempts := map[int]bool{}
		for _, r := range rs {
			if attempts[r.attempt] {
				how = "two runs of the same attempt: claimed twice without being taken back"
			}
			attempts[r.attempt] = true
			f.suspects[r.pid] = true
		}
		unexplained = append(unexplained, fmt.Sprintf("job %d ran %d times, %d of them in no fault's reach; %s: %s",
			id, len(rs), plain, how, strings.Join(lines, "; ")))
	}
	list := func(what string, cases []string) {
		if len(cases) == 0 {
			return
		}
		n, more := len(cases), ""
		if n > maxListed {
			more = fmt.Sprintf(" (listing %d)", maxListed)
			cases = cases[:maxListed]
		}
		f.problems = append(f.problems, fmt.Sprintf("%s: %d%s\n    %s", what, n, more, strings.Join(cases, "\n    ")))
	}
	list("LOST: jobs with no finished run", lost)
	list("UNEXPLAINED DUPLICATES: jobs run more than once outside any fault", unexplained)
	list("payloads that changed", badPayload)
	list("runs of jobs never enqueued", strangers)
	return f
}

// verify reads the ledger and the jobs table after the drain and fills
// the report.
func (h *harness) verify(ctx context.Context, ids []int64, payloads map[int64]string) {
	runs, err := h.readLedger(ctx)
	if err != nil {
		h.problem("reading the ledger: %v", err)
		return
	}
	f := check(runs, h.events, ids, payloads)
	h.report.Executions, h.report.Finished = f.executions, f.finished
	h.report.Duplicates, h.report.Explained = f.duplicates, f.explained
	h.report.Lost, h.report.Retried = f.lost, f.retried
	for _, p := range f.problems {
		h.problem("%s", p)
	}
	for _, pid := range keys(f.suspects) {
		if w := h.workers.byPid(pid); w != nil {
			h.problem("log of worker %d (pid %d), which ran unexplained duplicates:\n%s", w.n, pid, w.logs.last(60))
		}
	}
	if stats, err := h.q.Stats(ctx); err != nil {
		h.problem("queue stats: %v", err)
	} else {
		for _, s := range stats {
			if s.Queue == QueueName {
				h.report.Left = s
			}
		}
	}
	left, err := h.leftovers(ctx)
	switch {
	case err != nil:
		h.problem("reading what is left in the jobs table: %v", err)
	case len(left) > 0:
		h.problem("jobs left in the table (ready %d, scheduled %d, held %d, dead %d): %s", h.report.Left.Ready,
			h.report.Left.Scheduled, h.report.Left.Held, h.report.Left.Dead, strings.Join(left, "; "))
	}
}

// leftovers describes up to maxListed jobs of the queue still in the table.
func (h *harness) leftovers(ctx context.Context) ([]string, error) {
	limit := fmt.Sprintf(" ORDER BY id LIMIT %d", maxListed)
	rows, err := h.db.QueryContext(ctx, "SELECT id, state, attempt, COALESCE(last_error, '') FROM "+h.jobs+
		" WHERE queue = "+h.ph(1)+limit, QueueName)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id int64
		var state, lastErr string
		var attempt int
		if err := rows.Scan(&id, &state, &attempt, &lastErr); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("job %d %s attempt %d %q", id, state, attempt, lastErr))
	}
	return out, rows.Err()
}
