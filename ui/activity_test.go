package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/ui"
)

// store returns e's driver as the activity store.
func (e *env) store(t *testing.T) queue.ActivityStore {
	t.Helper()
	s, ok := e.q.Driver().(queue.ActivityStore)
	if !ok {
		t.Fatalf("%s keeps no activity", e.d)
	}
	return s
}

// workerRow returns the text of the Workers page's row of process id.
func workerRow(body, id string) string {
	return queueRow(strings.ReplaceAll(body, `<tr data-process="`+id+`">`, `<tr data-queue="`+id+`">`), id)
}

func TestWorkersPageListsProcesses(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		b := e.serve(t, ui.Options{})
		if body := b.page("/workers"); !strings.Contains(body, "No worker process is running.") ||
			!strings.Contains(body, `<a href="/workers" aria-current="page">Workers</a>`) {
			t.Errorf("Workers page with no process:\n%s", body)
		}
		now := time.Now().UTC()
		for _, p := range []queue.ProcessInfo{
			{ID: "aaaa", Host: "web-1", PID: 101, Queues: []string{"emails", "reports"}, Concurrency: 20,
				StartedAt: now.Add(-time.Hour), SeenAt: now},
			{ID: "bbbb", Host: `<script>alert(1)</script>`, PID: 202, StartedAt: now.Add(-2 * time.Hour),
				SeenAt: now.Add(-5 * time.Minute)},
		} {
			if err := e.store(t).TouchProcess(ctxT(t), p); err != nil {
				t.Fatal(err)
			}
		}
		body := b.page("/workers")
		for id, want := range map[string]string{
			"aaaa": `^web-1 101 emails , reports 20 1h0m\d+s ago \S+ ago running$`,
			"bbbb": `^&lt;script&gt;alert\(1\)&lt;/script&gt; 202 none 0 2h0m\d+s ago 5m\d+s ago gone$`,
		} {
			if got := workerRow(body, id); !regexp.MustCompile(want).MatchString(got) {
				t.Errorf("row of %s: %q, want %s", id, got, want)
			}
		}
		if !strings.Contains(body, "1 process running Workers.") {
			t.Errorf("Workers page does not count the running process")
		}
		if strings.Contains(withoutOwnScript(body), "<script") {
			t.Errorf("a hostile host name is rendered as markup")
		}
		if !strings.Contains(body, `<a href="/jobs?queue=emails">emails</a>`) {
			t.Errorf("a worker's queue does not link to its jobs")
		}
	})
}

func TestQueuesPageChartsThroughput(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		now := time.Now().UTC()
		m := now.Truncate(time.Minute).Add(-2 * time.Minute)
		e.enqueue(t, queue.NewJob{Queue: "mixed"})
		err := e.store(t).AddActivity(ctxT(t), []queue.ActivityCount{
			// Two processes in one minute: summed. busy has no job now.
			{Process: "p1", Queue: "busy", Minute: m, Completed: 5, Retried: 1, Dead: 2},
			{Process: "p2", Queue: "busy", Kind: "k", Minute: m, Completed: 5},
			{Process: "p1", Queue: "busy", Minute: m.Add(-10 * time.Minute), Completed: 4},
			{Process: "p1", Queue: "busy", Minute: m.Add(-2 * time.Hour), Completed: 1000}, // not in the hour
			{Process: "p1", Queue: "mixed", Minute: m, Dead: 3},
		})
		if err != nil {
			t.Fatal(err)
		}
		b := e.serve(t, ui.Options{})
		code, body := b.get("/")
		if code != http.StatusOK {
			t.Fatalf("Queues page: %d", code)
		}
		for name, want := range map[string]string{
			"busy":  `^busy 0 0 0 0 – 14 completed, peak 10/min 1 retried, peak 1/min 2 dead, peak 2/min running Pause$`,
			"mixed": `^mixed 1 0 0 0 \S+ 0 completed 0 retried 3 dead, peak 3/min running Pause$`,
		} {
			if got := queueRow(body, name); !regexp.MustCompile(want).MatchString(got) {
				t.Errorf("row of %s: %q, want %s", name, got, want)
			}
		}
		// busy's completed line: 60 points, a step of 2 across; the
		// busiest minute (two minutes ago: the 58th point) at the top,
		// the one of 4 jobs ten minutes before it part way, the rest on
		// the floor. Its dead line has a scale of its own: 2 at the top.
		pts := regexp.MustCompile(`<tr data-queue="busy">[\s\S]*?<polyline class="completed" points="([^"]+)"/>`).FindStringSubmatch(body)
		if pts == nil {
			t.Fatalf("no completed line for busy:\n%s", queueRow(body, "busy"))
		}
		points := strings.Fields(pts[1])
		if len(points) != 60 || points[0] != "0,11.5" || points[57] != "114,0.5" || points[47] != "94,7.1" || points[59] != "118,11.5" {
			t.Errorf("completed points %q", points)
		}
		dead := regexp.MustCompile(`<tr data-queue="busy">[\s\S]*?<polyline class="dead" points="([^"]+)"/>`).FindStringSubmatch(body)
		if dead == nil || strings.Fields(dead[1])[57] != "114,0.5" {
			t.Errorf("dead line of busy: %q, want its peak of 2 at the top", dead)
		}
		if !strings.Contains(body, `aria-label="Last hour: 14 completed (busiest minute 10), 1 retried (busiest minute 1), 2 dead (busiest minute 2)"`) {
			t.Errorf("chart label:\n%s", body)
		}
		// Inline SVG, styled by classes from style.css: no style attribute
		// the CSP would refuse.
		if strings.Contains(body, "style=") || !strings.Contains(body, `<svg class="spark" viewBox="0 0 118 12"`) {
			t.Errorf("chart markup:\n%s", queueRow(body, "busy"))
		}
	})
}

// noActivityStore is memq without activity, as a third-party driver that
// keeps none answers: ErrUnsupported from each ActivityStore method.
type noActivityStore struct{ queue.Driver }

var errNoActivity = fmt.Errorf("%w: no activity here", queue.ErrUnsupported)

func (noActivityStore) AddActivity(context.Context, []queue.ActivityCount) error {
	return errNoActivity
}
func (noActivityStore) Activity(context.Context, time.Time) ([]queue.ActivityCount, error) {
	return nil, errNoActivity
}
func (noActivityStore) TouchProcess(context.Context, queue.ProcessInfo) error { return errNoActivity }
func (noActivityStore) RemoveProcess(context.Context, string) error           { return errNoActivity }
func (noActivityStore) Processes(context.Context) ([]queue.ProcessInfo, error) {
	return nil, errNoActivity
}
func (noActivityStore) PruneActivity(context.Context, queue.ActivityPrune) (int64, error) {
	return 0, errNoActivity
}

func TestPagesWithoutActivityStore(t *testing.T) {
	store := memq.New(time.Minute)
	drv := store.Driver()
	q, err := queue.New(noActivityStore{drv}, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctxT(t), queue.NewJob{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	b := (&env{q: q}).serve(t, ui.Options{})
	if body := b.page("/workers"); !strings.Contains(body, `<p class="empty" id="unsupported">The memory driver keeps no worker activity.</p>`) {
		t.Errorf("Workers page without a store:\n%s", body)
	}
	if body := b.page("/"); !strings.Contains(body, "The memory driver keeps no worker activity.") || queueRow(body, "q") == "" {
		t.Errorf("Queues page without a store:\n%s", body)
	}

	// A store whose tables are missing.
	q, err = queue.New(drv, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store.SetMigrated(false)
	if body := (&env{q: q}).serve(t, ui.Options{}).page("/workers"); !strings.Contains(body, "The activity tables do not exist: run `dbq migrate up`.") {
		t.Errorf("Workers page without the tables:\n%s", body)
	}
}
