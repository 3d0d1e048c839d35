package ui_test

import (
	"errors"
	"html"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/ui"
)

// CountQueues, which the Queues page reads, counts what Stats counts, each
// count cut at its limit, and the oldest ready wait exactly.
func TestCountQueuesAgreesWithStats(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		old := time.Now().Add(-time.Hour)
		e.enqueue(t,
			queue.NewJob{Queue: "a", Priority: 5}, queue.NewJob{Queue: "a", Priority: 1},
			queue.NewJob{Queue: "a", Priority: 9, RunAt: old}, queue.NewJob{Queue: "a", Priority: 1},
			queue.NewJob{Queue: "a", Priority: 1, Delay: time.Hour}, queue.NewJob{Queue: "a", Priority: 9, Delay: time.Hour},
			queue.NewJob{Queue: "a", Delay: 2 * time.Hour})
		ids := e.enqueue(t, queue.NewJob{Queue: "b"}, queue.NewJob{Queue: "b"}, queue.NewJob{Queue: "b"})
		e.kill(t, "b", ids[0], "x")
		e.kill(t, "b", ids[1], "x")
		c, err := e.q.NewClaimer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if jobs, err := c.Claim(ctx, "b", 1); err != nil || len(jobs) != 1 {
			t.Fatalf("claim of b: %v, %v", jobs, err)
		}
		e.enqueue(t, queue.NewJob{Queue: "c", Delay: time.Hour})
		if err := e.q.Pause(ctx, "c"); err != nil {
			t.Fatal(err)
		}

		st, err := e.q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int64{1000, 2, 1} {
			got, err := e.q.CountQueues(ctx, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(st) {
				t.Fatalf("CountQueues(%d) = %+v, Stats %+v", limit, got, st)
			}
			for i, s := range st {
				g := got[i]
				want := s
				want.Ready, want.Scheduled, want.Held, want.Dead = min(s.Ready, limit), min(s.Scheduled, limit),
					min(s.Held, limit), min(s.Dead, limit)
				want.OldestReadyAge, g.OldestReadyAge = 0, 0
				if g != want {
					t.Errorf("CountQueues(%d) of %s: %+v, want %+v", limit, s.Queue, g, want)
				}
				if d := math.Abs(got[i].OldestReadyAge - s.OldestReadyAge); d > 30 {
					t.Errorf("CountQueues(%d) of %s: oldest ready %.1fs, Stats %.1fs", limit, s.Queue,
						got[i].OldestReadyAge, s.OldestReadyAge)
				}
			}
		}
		if st[0].Queue != "a" || st[0].OldestReadyAge < 3500 {
			t.Errorf("Stats: %+v, want queue a with its oldest ready an hour old", st[0])
		}
		if _, err := e.q.CountQueues(ctx, 0); !errors.Is(err, queue.ErrInvalidLimit) {
			t.Errorf("CountQueues(0): %v, want ErrInvalidLimit", err)
		}
	})
}

// JobFilter.DedupeKey finds the one job of a queue with that key, and the
// other filters apply to it.
func TestJobsByDedupeKey(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		ids := e.enqueue(t, queue.NewJob{Queue: "a", DedupeKey: "k1", Kind: "mail"},
			queue.NewJob{Queue: "b", DedupeKey: "k1"}, queue.NewJob{Queue: "a", DedupeKey: "k2"}, queue.NewJob{Queue: "a"})
		e.kill(t, "a", ids[2], "x")
		for _, c := range []struct {
			f    queue.JobFilter
			want int64 // 0: none
		}{
			{queue.JobFilter{Queue: "a", DedupeKey: "k1"}, ids[0]},
			{queue.JobFilter{Queue: "b", DedupeKey: "k1"}, ids[1]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k2"}, ids[2]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k2", State: queue.StateDead}, ids[2]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k2", State: queue.StateReady}, 0},
			{queue.JobFilter{Queue: "a", DedupeKey: "k1", Kind: "mail"}, ids[0]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k1", Kind: "sms"}, 0},
			{queue.JobFilter{Queue: "a", DedupeKey: "k1", AfterID: ids[0]}, 0},
			{queue.JobFilter{Queue: "b", DedupeKey: "k2"}, 0},
			{queue.JobFilter{Queue: "a", DedupeKey: "nope"}, 0},
		} {
			jobs, err := e.q.Jobs(ctx, c.f)
			if err != nil {
				t.Fatalf("%+v: %v", c.f, err)
			}
			switch {
			case c.want == 0 && len(jobs) != 0:
				t.Errorf("%+v: job %d, want none", c.f, jobs[0].ID)
			case c.want != 0 && (len(jobs) != 1 || jobs[0].ID != c.want):
				t.Errorf("%+v: %v, want job %d", c.f, jobs, c.want)
			}
		}
		if _, err := e.q.Jobs(ctx, queue.JobFilter{DedupeKey: "k1"}); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("DedupeKey without Queue: %v, want ErrInvalidJob", err)
		}
	})
}

// The Queues page stops counting at Options.CountLimit and says so.
func TestQueuesPageCapsCounts(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		e.enqueue(t, queue.NewJob{Queue: "big"}, queue.NewJob{Queue: "big"}, queue.NewJob{Queue: "big"},
			queue.NewJob{Queue: "big", Delay: time.Hour})
		body := e.serve(t, ui.Options{CountLimit: 2}).page("/")
		if got, want := html.UnescapeString(queueRow(body, "big")), `^big 2\+ 1 0 0 \S+ – running Pause$`; !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("row of big: %q, want %s", got, want)
		}
		if !strings.Contains(html.UnescapeString(body), "Counting stops at 2: a queue with more shows 2+.") {
			t.Errorf("the page does not say where counting stops")
		}
		if _, err := ui.NewHandler(e.q, ui.Options{CountLimit: -1}); err == nil {
			t.Errorf("CountLimit -1 accepted")
		}
	})
}

// The Jobs page finds a job by queue and dedupe key; a key alone is
// refused, and a hostile key is shown as text.
func TestJobsPageFindsByDedupeKey(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		hostile := `<script>alert(1)</script>`
		ids := e.enqueue(t, queue.NewJob{Queue: "a", DedupeKey: "order-7"}, queue.NewJob{Queue: "b", DedupeKey: "order-7"},
			queue.NewJob{Queue: "a", DedupeKey: hostile})
		b := e.serve(t, ui.Options{})
		equalIDs(t, "a/order-7", rowIDs(t, b.page("/jobs?queue=a&key=order-7")), ids[:1])
		equalIDs(t, "b/order-7", rowIDs(t, b.page("/jobs?queue=b&key=order-7")), ids[1:2])
		equalIDs(t, "a/order-8", rowIDs(t, b.page("/jobs?queue=a&key=order-8")), nil)
		body := b.page("/jobs?queue=a&key=" + url.QueryEscape(hostile))
		equalIDs(t, "a/hostile", rowIDs(t, body), ids[2:3])
		if strings.Contains(withoutOwnScript(body), "<script") {
			t.Errorf("a hostile dedupe key is rendered as markup")
		}
		if code, _ := b.get("/jobs?key=order-7"); code != http.StatusBadRequest {
			t.Errorf("key without queue: %d, want 400", code)
		}
	})
}
