package ui_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/ui"
)

// chromium returns the path of a Chromium or Chrome, or ends t: it fails
// when DBQ_REQUIRE names "browser", and skips, saying so, otherwise.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DBQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium, chromium-browser or google-chrome on PATH (apt-get install chromium, or set DBQ_CHROMIUM)"
	if dbtest.Required("browser") {
		t.Fatalf("%s, and DBQ_REQUIRE names browser", msg)
	}
	t.Skipf("%s; skipping the browser test (set DBQ_REQUIRE=browser to fail instead)", msg)
	return ""
}

// headless is a headless Chromium tab, ended when t ends.
type headless struct {
	t   *testing.T
	ctx context.Context
}

// newHeadless starts a headless Chromium (see chromium) with a tab of
// width by height pixels, and more command-line options if given.
func newHeadless(t *testing.T, width, height int64, more ...chromedp.ExecAllocatorOption) *headless {
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true))
	opts = append(opts, more...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelT)
	// The first action starts the browser, which lives as long as the
	// context of that action: ctx, not a step's shorter one.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatalf("browser: %v", err)
	}
	return &headless{t: t, ctx: ctx}
}

// run runs steps, failing t if they take longer than 30s together.
func (b *headless) run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func (b *headless) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return s
}

// eval returns the value of the JavaScript expression js.
func eval[T any](b *headless, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", js, err)
	}
	return v
}

// screenshot saves the whole page as DIR/name.png when DBQ_UI_SCREENSHOTS
// names a directory DIR (docs/ui holds the ones the docs show).
func (b *headless) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("DBQ_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("browser: screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// TestBrowserRetryDeadJobAndPauseQueue drives a headless Chromium through
// the dashboard mounted under a prefix, on SQLite: from the Queues page to
// the dead job, Retry, and the job is ready; then Pause on the queue, and
// Pause on a schedule. With DBQ_UI_SCREENSHOTS=DIR it saves the Queues,
// Jobs, Job and Schedules pages there.
func TestBrowserRetryDeadJobAndPauseQueue(t *testing.T) {
	b := newHeadless(t, 1280, 720)
	e := newEnv(t, testDB{d: dialect.SQLite})
	ids := e.enqueue(t, queue.NewJob{Queue: "mail", Payload: []byte(`{"to":"a@example.com"}`)},
		queue.NewJob{Queue: "mail", Payload: []byte(`{"to":"b@example.com","subject":"Your invoice","attachments":["inv-1042.pdf"]}`), Priority: 5})
	e.kill(t, "mail", ids[1], "smtp: 550 mailbox unavailable")
	// More to look at in the screenshots.
	e.enqueue(t, queue.NewJob{Queue: "reports", Payload: []byte(`{"kind":"nightly"}`), Delay: time.Hour},
		queue.NewJob{Queue: "webhooks", Payload: []byte(`{"url":"https://example.com/hook","event":"order.paid"}`)},
		queue.NewJob{Queue: "webhooks", Payload: []byte(`{"url":"https://example.com/hook","event":"order.shipped"}`)})
	now := time.Now()
	e.upsert(t, "nightly-report", "0 3 * * *", "Europe/Berlin", "reports", now.Add(time.Hour))
	e.upsert(t, "sync-webhooks", "@every 5m", "UTC", "webhooks", now.Add(time.Minute))
	seedActivity(t, e, now)
	const prefix = "/admin/dbq"
	srv := e.serve(t, ui.Options{Prefix: prefix}).srv

	deadLink := chromedp.CSS(`tr[data-queue="mail"] a.dead`)
	jobLink := chromedp.CSS(fmt.Sprintf(`tr[data-id="%d"] a`, ids[1]))
	b.run(chromedp.Navigate(srv.URL+prefix+"/"), chromedp.WaitVisible(deadLink))
	b.screenshot("queues")
	b.run(chromedp.Navigate(srv.URL+prefix+"/jobs"), chromedp.WaitVisible(jobLink))
	b.screenshot("jobs")
	b.run(chromedp.Navigate(srv.URL+prefix+"/"),
		chromedp.WaitVisible(deadLink), chromedp.Click(deadLink),
		chromedp.WaitVisible(jobLink), chromedp.Click(jobLink),
		chromedp.WaitVisible(chromedp.CSS("#retry")))
	b.screenshot("job")
	lastError := b.text("#last-error")
	b.run(chromedp.Click(chromedp.CSS("#retry")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	flash, badge := b.text(".flash"), b.text("h1 .badge")
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if lastError != "smtp: 550 mailbox unavailable" {
		t.Errorf("Job page shows last error %q", lastError)
	}
	if want := fmt.Sprintf("%s%s/jobs/%d", srv.URL, prefix, ids[1]); loc != want || badge != "ready" {
		t.Errorf("after Retry: at %s with state %q, want %s and ready (flash %q)", loc, badge, want, flash)
	}
	if j := e.job(t, ids[1]); j == nil || j.State != queue.StateReady {
		t.Errorf("job %d after Retry in the browser: %+v, want ready", ids[1], j)
	}

	pause := chromedp.CSS(`tr[data-queue="mail"] form[action$="/pause"] button`)
	b.run(chromedp.Navigate(srv.URL+prefix+"/"), chromedp.WaitVisible(pause), chromedp.Click(pause),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	row := b.text(`tr[data-queue="mail"]`)
	if !strings.Contains(row, "paused") {
		t.Errorf("Queues row after Pause: %q", row)
	}
	if p, err := e.q.Paused(ctxT(t)); err != nil || len(p) != 1 || p[0] != "mail" {
		t.Errorf("after Pause in the browser, paused = %v, %v", p, err)
	}

	// Schedules, from the nav: pause one.
	nav := chromedp.CSS(`header nav a[href$="/schedules"]`)
	pauseSchedule := chromedp.CSS(`tr[data-schedule="sync-webhooks"] form[action$="/schedules/pause"] button`)
	b.run(chromedp.Click(nav), chromedp.WaitVisible(pauseSchedule))
	b.screenshot("schedules")
	b.run(chromedp.Click(pauseSchedule), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if row := b.text(`tr[data-schedule="sync-webhooks"]`); !strings.Contains(row, "paused") {
		t.Errorf("Schedules row after Pause: %q", row)
	}
	if list, err := e.q.Schedules(ctxT(t)); err != nil || len(list) != 2 || list[0].Paused || !list[1].Paused {
		t.Errorf("after Pause of sync-webhooks in the browser: %+v, %v", list, err)
	}

	// Workers, from the nav; back on Queues, the charts are drawn (the
	// stylesheet reached the SVG: the CSP let it).
	workers := chromedp.CSS(`header nav a[href$="/workers"]`)
	b.run(chromedp.Click(workers), chromedp.WaitVisible(chromedp.CSS(`tr[data-process]`)))
	b.screenshot("workers")
	if row := b.text(`tr[data-process="c0ffee0000000002"]`); !strings.Contains(row, "gone") {
		t.Errorf("Workers row of a process not seen for 5 minutes: %q", row)
	}
	b.run(chromedp.Navigate(srv.URL+prefix+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="webhooks"] svg.spark`)))
	if w := eval[float64](b, `document.querySelector('tr[data-queue="webhooks"] svg.spark').getBoundingClientRect().width`); w < 50 {
		t.Errorf("chart %vpx wide: style.css did not reach it", w)
	}
	if stroke := eval[string](b, `getComputedStyle(document.querySelector('tr[data-queue="webhooks"] polyline.completed')).stroke`); stroke == "none" || stroke == "" {
		t.Errorf("completed line has stroke %q", stroke)
	}
}

// seedActivity stores an hour of throughput and two worker processes, as
// worker processes would have, for the charts and the Workers page.
func seedActivity(t *testing.T, e *env, now time.Time) {
	t.Helper()
	st := e.q.Driver().(queue.ActivityStore)
	var counts []queue.ActivityCount
	first := now.UTC().Truncate(time.Minute).Add(-59 * time.Minute)
	for i := range 60 {
		m := first.Add(time.Duration(i) * time.Minute)
		counts = append(counts,
			queue.ActivityCount{Process: "c0ffee0000000001", Queue: "webhooks", Minute: m,
				Completed: int64(40 + 25*((i/7)%3) + i%5), Retried: int64(i % 4), Dead: int64(i / 50)},
			queue.ActivityCount{Process: "c0ffee0000000001", Queue: "mail", Minute: m,
				Completed: int64(10 + i%9), Retried: int64((i / 10) % 2 * 3), Dead: int64(i % 20 / 19)})
	}
	for len(counts) > 0 {
		n := min(len(counts), queue.MaxActivityBatch)
		if err := st.AddActivity(ctxT(t), counts[:n]); err != nil {
			t.Fatal(err)
		}
		counts = counts[n:]
	}
	for _, p := range []queue.ProcessInfo{
		{ID: "c0ffee0000000001", Host: "worker-1.internal", PID: 4711, Queues: []string{"mail", "webhooks"},
			Concurrency: 20, StartedAt: now.Add(-26 * time.Hour), SeenAt: now.Add(-4 * time.Second)},
		{ID: "c0ffee0000000002", Host: "worker-2.internal", PID: 902, Queues: []string{"reports"},
			Concurrency: 4, StartedAt: now.Add(-3 * time.Hour), SeenAt: now.Add(-5 * time.Minute)},
	} {
		if err := st.TouchProcess(ctxT(t), p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowserLiveRefreshKeepsThePlace switches Live on, on the second page
// of a filtered job list scrolled down: a job cancelled meanwhile leaves
// the page by itself, with the URL and the scroll position kept; while the
// filter field has the focus, nothing is swapped; the switch is
// remembered across a reload.
func TestBrowserLiveRefreshKeepsThePlace(t *testing.T) {
	b := newHeadless(t, 1000, 400)
	e := newEnv(t, testDB{d: dialect.SQLite})
	var jobs []queue.NewJob
	for range 60 {
		jobs = append(jobs, queue.NewJob{Queue: "a"})
	}
	ids := e.enqueue(t, jobs...)
	srv := e.serve(t, ui.Options{PageSize: 20, Refresh: time.Second}).srv
	page2 := fmt.Sprintf("%s/jobs?after=%d&back=0&queue=a", srv.URL, ids[19])
	row := func(id int64) chromedp.CSS { return chromedp.CSS(fmt.Sprintf(`tr[data-id="%d"]`, id)) }
	live := chromedp.CSS(`#live input`)
	b.run(chromedp.Navigate(page2), chromedp.WaitVisible(row(ids[25])), chromedp.WaitVisible(live), chromedp.Click(live),
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 250)`))
	if _, err := e.q.Cancel(ctxT(t), ids[25]); err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.WaitNotPresent(row(ids[25])))
	if loc, y := eval[string](b, `location.href`), eval[float64](b, `window.scrollY`); loc != page2 || y != 250 {
		t.Errorf("after a live refresh: at %s scrolled to %v, want %s and 250", loc, y, page2)
	}

	// Typing in the filter holds the refresh back.
	b.run(chromedp.Focus(chromedp.CSS(`form.filter input[name="queue"]`)))
	if _, err := e.q.Cancel(ctxT(t), ids[26]); err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.Sleep(2500 * time.Millisecond))
	if n := eval[int](b, fmt.Sprintf(`document.querySelectorAll('tr[data-id="%d"]').length`, ids[26])); n != 1 {
		t.Errorf("refreshed while the filter had the focus")
	}
	if st := b.text(".live-status"); st != "paused while you type" {
		t.Errorf("Live status while typing: %q", st)
	}
	b.run(chromedp.Blur(chromedp.CSS(`form.filter input[name="queue"]`)), chromedp.WaitNotPresent(row(ids[26])))

	// Remembered: after a reload the switch is on and the page refreshes.
	b.run(chromedp.Reload(), chromedp.WaitVisible(live))
	if on := eval[bool](b, `document.querySelector("#live input").checked`); !on {
		t.Errorf("Live switch off after a reload")
	}
	if _, err := e.q.Cancel(ctxT(t), ids[27]); err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.WaitNotPresent(row(ids[27])))
}

// TestBrowserRebindingIsRefused is DNS rebinding in a real browser: the
// name evil.example resolves to 127.0.0.1 (a host-resolver rule stands in
// for the attacker's DNS), so a page of evil.example and the dashboard
// share an origin. Chromium, sent there, must get the refusal and no page;
// the same dashboard at 127.0.0.1 shows its page.
func TestBrowserRebindingIsRefused(t *testing.T) {
	b := newHeadless(t, 1024, 600, chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))
	e := newEnv(t, testDB{d: dialect.SQLite})
	e.enqueue(t, queue.NewJob{Queue: "mail", Payload: []byte(`{"to":"secret@example.com"}`)})
	h, err := ui.NewHandler(e.q, ui.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	b.run(chromedp.Navigate("http://evil.example" + port + "/jobs?queue=mail"))
	body := eval[string](b, "document.body.innerText")
	forms := eval[int](b, "document.forms.length")
	if !strings.Contains(body, "does not answer to the host") || strings.Contains(body, "secret@example.com") || forms != 0 {
		t.Errorf("the dashboard at evil.example%s showed %d forms and %q, want the refusal", port, forms, body)
	}
	b.run(chromedp.Navigate(srv.URL + "/jobs?queue=mail"))
	if body := eval[string](b, "document.body.innerText"); !strings.Contains(body, "mail") {
		t.Errorf("the dashboard at %s: %q, want its Jobs page", srv.URL, body)
	}
}
