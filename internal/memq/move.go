package memq

import (
	"context"
	"fmt"

	"github.com/dbqueue/dbq/queue"
)

// The memory driver moves no jobs: each Mover method says so, as the
// driver contract asks of a driver that lacks a part of it.

func errNoMove(op string) error {
	return fmt.Errorf("%w: memory: %s (jobs cannot be moved to or from memory)", queue.ErrUnsupported, op)
}

func (d *driver) Identity(context.Context) (string, error) { return "", errNoMove("Identity") }
func (d *driver) Survey(context.Context, queue.ExportFilter) (queue.Survey, error) {
	return queue.Survey{}, errNoMove("Survey")
}
func (d *driver) Export(context.Context, queue.ExportFilter) (queue.ExportBatch, error) {
	return nil, errNoMove("Export")
}
func (d *driver) Import(context.Context, []*queue.Job) ([]queue.Imported, error) {
	return nil, errNoMove("Import")
}
func (d *driver) Limits(context.Context) (queue.MoveLimits, error) {
	return queue.MoveLimits{}, errNoMove("Limits")
}
func (d *driver) Stored(context.Context, []queue.JobKey) ([]*queue.Job, error) {
	return nil, errNoMove("Stored")
}
