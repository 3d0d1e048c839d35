package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// Enqueue inserts jobs, all or none, and returns their ids in order. tx is
// nil (a transaction of the driver's own; a single batch is one autocommit
// INSERT unless its ids are read back by marker) or the caller's *sql.Tx; anything else gives ErrUnsupportedTx.
// Each batch of up to 1000 jobs is one multi-row INSERT; its ids come from
// LAST_INSERT_ID() (the package documentation says how, and why that is
// exact in every innodb_autoinc_lock_mode).
func (d *Driver) Enqueue(ctx context.Context, tx any, jobs []queue.NewJob) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	for i, j := range jobs {
		if !j.RunAt.IsZero() {
			if y := j.RunAt.UTC().Year(); y < 1000 || y > 9999 {
				return nil, fmt.Errorf("job %d: %w: RunAt %v outside DATETIME's years 1000..9999", i, queue.ErrInvalidJob, j.RunAt)
			}
		}
	}
	batches := d.batches(jobs)
	switch t := tx.(type) {
	case nil:
		var ids []int64
		err := d.retry(ctx, func() error {
			var err error
			// By marker, the ids are read back after the INSERT: in the same
			// transaction, or a claim in between overwrites the marker.
			if len(batches) == 1 && !d.idsByMarker {
				ids, err = d.insert(ctx, d.db, batches[0], nil)
				return err
			}
			own, err := beginRC(ctx, d.db)
			if err != nil {
				return d.classify("enqueue", err)
			}
			ids = ids[:0]
			for _, b := range batches {
				if ids, err = d.insert(ctx, own, b, ids); err != nil {
					own.Rollback()
					return err
				}
			}
			return d.classify("enqueue commit", own.Commit())
		})
		return ids, err
	case *sql.Tx:
		if t == nil {
			return nil, fmt.Errorf("%w: nil *sql.Tx", queue.ErrUnsupportedTx)
		}
		var ids []int64
		for _, b := range batches {
			var err error
			if ids, err = d.insert(ctx, t, b, ids); err != nil {
				return nil, err
			}
		}
		return ids, nil
	default:
		return nil, fmt.Errorf("%w: %T (the mysql dialect takes a *sql.Tx)", queue.ErrUnsupportedTx, tx)
	}
}

// batches splits jobs into INSERTs of at most 1000 rows and about a
// quarter of max_allowed_packet (escaping can double a payload's bytes).
func (d *Driver) batches(jobs []queue.NewJob) [][]queue.NewJob {
	budget := int(d.server.MaxAllowedPacket / 4)
	if budget < 64<<10 {
		budget = 64 << 10
	}
	var out [][]queue.NewJob
	start, size := 0, 0
	for i, j := range jobs {
		sz := len(j.Payload) + len(j.DedupeKey) + len(j.Kind) + 128
		if i > start && (i-start >= 1000 || size+sz > budget) {
			out = append(out, jobs[start:i])
			start, size = i, 0
		}
		size += sz
	}
	if start < len(jobs) {
		out = append(out, jobs[start:])
	}
	return out
}

type execQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (d *Driver) insert(ctx context.Context, ex execQuerier, jobs []queue.NewJob, ids []int64) ([]int64, error) {
	var marker any
	if d.idsByMarker {
		marker = newToken()
	}
	args := make([]any, 0, 9*len(jobs))
	for _, j := range jobs {
		var runAt any
		if !j.RunAt.IsZero() {
			runAt = formatTime(j.RunAt)
		}
		var dedupe any
		if j.DedupeKey != "" {
			dedupe = []byte(j.DedupeKey)
		}
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		args = append(args, j.Queue, []byte(j.Kind), payload, j.Priority, runAt, micros(j.Delay), j.MaxAttempts, dedupe, marker)
	}
	res, err := ex.ExecContext(ctx, d.stmts.get(sqlEnqueue, len(jobs)), args...)
	if err != nil {
		if isDuplicate(err) {
			return nil, fmt.Errorf("%w: %v", queue.ErrDuplicate, err)
		}
		return nil, d.classify("enqueue", err)
	}
	first, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("dbq: mysql enqueue: %w", err)
	}
	if marker != nil {
		got, err := dialect.QueryIDs(ctx, ex, d.stmts.get(sqlEnqueueIDs, 0), first, marker, len(jobs))
		if err != nil {
			return nil, d.classify("enqueue ids", err)
		}
		if len(got) != len(jobs) {
			return nil, fmt.Errorf("dbq: mysql enqueue: found %d of the %d rows just inserted", len(got), len(jobs))
		}
		return append(ids, got...), nil
	}
	step := d.server.AutoincIncrement
	for i := range jobs {
		ids = append(ids, first+int64(i)*step)
	}
	return ids, nil
}
