package mssql

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// Jobs exported from one schema and imported into another arrive whole;
// the commit deletes them and their keys on the source, a second import
// finds them, and a claimer does not get a job an open batch holds.
func TestLiveMoveBetweenSchemas(t *testing.T) {
	db := liveDB(t)
	ctx := liveCtx(t)
	src := newLiveQueue(t, db, Config{}, true)
	dst := newLiveQueue(t, db, Config{}, true)
	sd, dd := src.Driver().(*Driver), dst.Driver().(*Driver)
	if _, err := src.Enqueue(ctx,
		queue.NewJob{Queue: "m", Payload: []byte{0, 1, 2}, Priority: 3, DedupeKey: "k-é"},
		queue.NewJob{Queue: "m", Payload: []byte("later"), RunAt: time.Now().Add(time.Hour)},
		queue.NewJob{Queue: "other", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	si, err := sd.Identity(ctx)
	if err != nil || !strings.HasPrefix(si, "sqlserver://") {
		t.Fatalf("Identity %q, %v", si, err)
	}
	if di, _ := dd.Identity(ctx); di == si {
		t.Errorf("two schemas share the identity %q", si)
	}
	f := queue.ExportFilter{Queues: []string{"m"}, Ready: true, Scheduled: true, Limit: 10}
	s, err := sd.Survey(ctx, f)
	if err != nil || s.MaxPayload != 5 || s.MaxKeyBytes != 4 || s.MaxKeyChars != 3 {
		t.Errorf("Survey = %+v, %v", s, err)
	}
	b, err := sd.Export(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Rollback() }()
	jobs := b.Jobs()
	if len(jobs) != 2 || b.Cursor() != jobs[len(jobs)-1].ID {
		t.Fatalf("Export: %d jobs, cursor %d", len(jobs), b.Cursor())
	}
	c, _ := src.NewClaimer(ctx)
	if got, err := c.Claim(ctx, "m", 5); err == nil && len(got) > 0 {
		t.Errorf("claimed %d jobs an open export batch holds", len(got))
	}
	jobs[1].DedupeKey = "moved-2"
	got, err := dd.Import(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		j := jobs[i]
		if !g.New || g.Job.Queue != j.Queue || !bytes.Equal(g.Job.Payload, j.Payload) || g.Job.Priority != j.Priority ||
			!g.Job.RunAt.Equal(j.RunAt) || !g.Job.CreatedAt.Equal(j.CreatedAt) || g.Job.DedupeKey != j.DedupeKey ||
			g.Job.State != j.State || g.Job.Attempt != j.Attempt || g.Job.MaxAttempts != j.MaxAttempts {
			t.Errorf("job %d stored as %+v, want %+v", i, g.Job, j)
		}
	}
	if err := b.Commit(ctx, []int64{jobs[0].ID, jobs[1].ID}); err != nil {
		t.Fatal(err)
	}
	again, err := dd.Import(ctx, jobs)
	if err != nil || again[0].New || again[0].Job.ID != got[0].Job.ID {
		t.Errorf("second Import: %+v, %v", again, err)
	}
	// The source freed the key: it takes a new job with it.
	if _, existed, err := src.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "m", DedupeKey: "k-é"}); err != nil || existed {
		t.Errorf("key after the move: existed %v, %v", existed, err)
	}
	if b, err := sd.Export(ctx, queue.ExportFilter{Queues: []string{"m"}, Ready: true, Scheduled: true, AfterID: jobs[1].ID, Limit: 10}); err != nil || len(b.Jobs()) != 1 {
		t.Errorf("export after the move: %v", err)
	} else {
		_ = b.Rollback()
	}
}
