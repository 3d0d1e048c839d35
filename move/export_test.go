package move

import (
	"context"
	"errors"

	"github.com/dbqueue/dbq/queue"
)

// RunFailingCommits runs a move whose first n source commits fail after
// the destination has committed: what a kill between the two commits
// leaves behind.
func RunFailingCommits(ctx context.Context, src, dst *queue.Queue, opts Options, n int) (*Report, error) {
	m, err := prepare(ctx, src, dst, opts)
	if err != nil {
		return nil, err
	}
	m.src = &failingSource{Mover: m.src, left: n}
	return m.run(ctx)
}

type failingSource struct {
	queue.Mover
	left int
}

func (f *failingSource) Export(ctx context.Context, ef queue.ExportFilter) (queue.ExportBatch, error) {
	b, err := f.Mover.Export(ctx, ef)
	if err != nil || len(b.Jobs()) == 0 || f.left == 0 {
		return b, err
	}
	f.left--
	return failingBatch{b}, nil
}

type failingBatch struct{ queue.ExportBatch }

func (b failingBatch) Commit(context.Context, []int64) error {
	_ = b.ExportBatch.Rollback()
	return errors.New("killed between the commits")
}
