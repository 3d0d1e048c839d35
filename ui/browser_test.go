package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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

// TestBrowserRetryDeadJobAndPauseQueue drives a headless Chromium through
// the dashboard mounted under a prefix, on SQLite: from the Queues page to
// the dead job, Retry, and the job is ready; then Pause on the queue.
func TestBrowserRetryDeadJobAndPauseQueue(t *testing.T) {
	path := chromium(t)
	e := newEnv(t, testDB{d: dialect.SQLite})
	ids := e.enqueue(t, queue.NewJob{Queue: "mail", Payload: []byte(`{"to":"a@example.com"}`)},
		queue.NewJob{Queue: "mail", Payload: []byte(`{"to":"b@example.com"}`)})
	e.kill(t, "mail", ids[1], "smtp: 550 mailbox unavailable")
	const prefix = "/admin/dbq"
	srv := e.serve(t, ui.Options{Prefix: prefix}).srv

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	ctx, cancelT := context.WithTimeout(ctx, time.Minute)
	defer cancelT()

	deadLink := chromedp.CSS(`tr[data-queue="mail"] a.dead`)
	jobLink := chromedp.CSS(fmt.Sprintf(`tr[data-id="%d"] a`, ids[1]))
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: text of %s: %v", sel, err)
		}
		return s
	}
	run(chromedp.Navigate(srv.URL+prefix+"/"),
		chromedp.WaitVisible(deadLink), chromedp.Click(deadLink),
		chromedp.WaitVisible(jobLink), chromedp.Click(jobLink),
		chromedp.WaitVisible(chromedp.CSS("#retry")))
	lastError := text("#last-error")
	run(chromedp.Click(chromedp.CSS("#retry")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	flash, badge := text(".flash"), text("h1 .badge")
	loc, err := chromedp.Run(ctx, chromedp.Location())
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
	run(chromedp.Navigate(srv.URL+prefix+"/"), chromedp.WaitVisible(pause), chromedp.Click(pause),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	row := text(`tr[data-queue="mail"]`)
	if !strings.Contains(row, "paused") {
		t.Errorf("Queues row after Pause: %q", row)
	}
	if p, err := e.q.Paused(ctxT(t)); err != nil || len(p) != 1 || p[0] != "mail" {
		t.Errorf("after Pause in the browser, paused = %v, %v", p, err)
	}
}
