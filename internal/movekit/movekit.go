// Package movekit holds what every dialect's queue.Mover shares: the
// checks on jobs to import and the pairing of imported jobs with what is
// stored.
package movekit

import (
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/queue"
)

// Importable checks what every dialect's Import needs of each job: a
// dedupe key that is valid text, and state ready or dead.
func Importable(jobs []*queue.Job) error {
	for _, j := range jobs {
		if err := importable(j); err != nil {
			return err
		}
	}
	return nil
}

func importable(j *queue.Job) error {
	switch {
	case j.DedupeKey == "":
		return fmt.Errorf("%w: import of job %d needs a dedupe key", queue.ErrInvalidJob, j.ID)
	case j.State != queue.StateReady && j.State != queue.StateDead:
		return fmt.Errorf("%w: import of job %d in state %q (want ready or dead)", queue.ErrInvalidJob, j.ID, j.State)
	case ValidText(j.DedupeKey) != j.DedupeKey:
		return fmt.Errorf("%w: import of job %d: dedupe key is not valid UTF-8 text", queue.ErrInvalidJob, j.ID)
	}
	return nil
}

// Match pairs each of jobs with the stored job of its queue and dedupe key;
// isNew tells, by stored id, whether the import stored it. A job with no
// stored match is an error: the insert and the read that follows it run in
// one transaction.
func Match(dialect string, jobs, stored []*queue.Job, isNew func(id int64) bool) ([]queue.Imported, error) {
	type qk struct{ q, k string }
	byKey := make(map[qk]*queue.Job, len(stored))
	for _, s := range stored {
		byKey[qk{s.Queue, s.DedupeKey}] = s
	}
	out := make([]queue.Imported, len(jobs))
	for i, j := range jobs {
		s, ok := byKey[qk{j.Queue, j.DedupeKey}]
		if !ok {
			return nil, fmt.Errorf("dbq: %s: import: job %d (queue %q, key %q) is not stored after its insert", dialect, j.ID, j.Queue, j.DedupeKey)
		}
		out[i] = queue.Imported{Job: s, New: isNew(s.ID)}
	}
	return out, nil
}

// ValidText drops NUL bytes and replaces invalid UTF-8 with U+FFFD: what
// a text column of every dialect stores as given.
func ValidText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// IDSet returns a func that reports whether an id is one of ids.
func IDSet(ids []int64) func(int64) bool {
	set := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		set[id] = struct{}{}
	}
	return func(id int64) bool { _, ok := set[id]; return ok }
}
