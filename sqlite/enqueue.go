package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"slices"

	"github.com/dbqueue/dbq/queue"
)

// enqueueChunk is the most jobs one INSERT carries: 500 × 8 parameters
// stays far below SQLite's 32,766-variable limit and keeps statements
// small enough to prepare quickly.
const enqueueChunk = 500

// enqueueRowParams is the number of bind parameters per enqueued job.
const enqueueRowParams = 8

// enqueueData is the data of enqueue.sql: N rows.
type enqueueData struct{ N int }

// enqueuePow2Sizes is how many power-of-two INSERTs are kept prepared:
// 1, 2, 4, … 256 jobs, the largest below enqueueChunk.
const enqueuePow2Sizes = 9

// enqueue returns the INSERT for n jobs: prepared for a full chunk and for
// powers of two (see enqueueSplit), ad hoc otherwise.
func (s *statements) enqueue(n int) *stmt {
	if n == enqueueChunk {
		return s.enqueueFull
	}
	if n > 0 && n&(n-1) == 0 && n < 1<<enqueuePow2Sizes {
		return s.enqueuePow2[bits.TrailingZeros(uint(n))]
	}
	text, err := s.files.Render("enqueue", enqueueData{N: n})
	return &stmt{text: text, adhoc: true, err: err}
}

// enqueueSplit returns the sizes of the INSERTs that carry n jobs (n at
// most enqueueChunk), largest first, each kept prepared: n itself for a
// full chunk, else its binary digits — at most enqueuePow2Sizes statements
// instead of parsing a new one for every batch size.
func enqueueSplit(n int) []int {
	if n == enqueueChunk {
		return []int{n}
	}
	var out []int
	for k := enqueuePow2Sizes - 1; k >= 0; k-- {
		if n&(1<<k) != 0 {
			out = append(out, 1<<k)
		}
	}
	return out
}

// Enqueue inserts jobs atomically and returns their IDs in input order. tx
// is nil (Enqueue runs its own BEGIN IMMEDIATE transaction) or a *sql.Tx of
// a modernc.org/sqlite *sql.DB on the same file, in which the jobs become
// visible when, and only if, it commits. Any other type gives
// queue.ErrUnsupportedTx. A dedupe-key collision gives queue.ErrDuplicate
// and inserts nothing.
func (d *Driver) Enqueue(ctx context.Context, tx any, jobs []queue.NewJob) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	switch t := tx.(type) {
	case nil:
		var ids []int64
		err := d.write(ctx, true, func(ctx context.Context, r runner) error {
			var err error
			ids, err = d.insert(ctx, r, jobs)
			return err
		})
		if err != nil {
			return nil, err
		}
		return ids, nil
	case *sql.Tx:
		if t == nil {
			return nil, fmt.Errorf("%w: nil *sql.Tx", queue.ErrUnsupportedTx)
		}
		// No retry here: after an error the caller's transaction decides.
		return d.insert(ctx, runner{d: d, tx: t}, jobs)
	default:
		return nil, fmt.Errorf("%w: sqlite takes a *sql.Tx, not %T", queue.ErrUnsupportedTx, tx)
	}
}

// insert runs the INSERTs for jobs, chunk by chunk, on e.
//
// A chunk that is not full goes in as INSERTs of power-of-two sizes (see
// enqueueSplit), each prepared once per connection. IDs come back in input
// order because ids are AUTOINCREMENT, the rows of one VALUES list are
// inserted in order, the statements run in input order, and the write lock
// is held for the whole transaction: sorting what RETURNING gives (whose order SQLite does
// not promise) restores input order.
func (d *Driver) insert(ctx context.Context, r runner, jobs []queue.NewJob) ([]int64, error) {
	ids := make([]int64, 0, len(jobs))
	for full := range slices.Chunk(jobs, enqueueChunk) {
		for _, size := range enqueueSplit(len(full)) {
			chunk := full[:size]
			full = full[size:]
			if err := d.insertChunk(ctx, r, chunk, &ids); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}

// insertChunk inserts chunk with one prepared INSERT and appends the new
// ids to *ids in input order.
func (d *Driver) insertChunk(ctx context.Context, r runner, chunk []queue.NewJob, ids *[]int64) error {
	args := make([]any, 0, len(chunk)*enqueueRowParams)
	for _, j := range chunk {
		var runAt, dedupe any
		if !j.RunAt.IsZero() {
			runAt = j.RunAt.UnixMicro()
		}
		if j.DedupeKey != "" {
			dedupe = j.DedupeKey
		}
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		args = append(args, j.Queue, j.Kind, payload, int64(j.Priority), runAt, j.Delay.Microseconds(), int64(j.MaxAttempts), dedupe)
	}
	rows, err := r.query(ctx, d.stmts.enqueue(len(chunk)), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	start := len(*ids)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return interpret(err)
		}
		*ids = append(*ids, id)
	}
	if err := rows.Err(); err != nil {
		return interpret(err)
	}
	if err := rows.Close(); err != nil {
		return interpret(err)
	}
	if got := len(*ids) - start; got != len(chunk) {
		return fmt.Errorf("dbq: sqlite: insert returned %d ids for %d jobs", got, len(chunk))
	}
	slices.Sort((*ids)[start:])
	return nil
}
