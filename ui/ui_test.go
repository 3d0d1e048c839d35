package ui_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/ui"
)

func TestQueuesPageCountsEachQueue(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		e.enqueue(t, queue.NewJob{Queue: "emails"}, queue.NewJob{Queue: "emails"}, queue.NewJob{Queue: "emails"},
			queue.NewJob{Queue: "emails", Delay: time.Hour})
		ids := e.enqueue(t, queue.NewJob{Queue: "reports"}, queue.NewJob{Queue: "reports"})
		e.kill(t, "reports", ids[1], "boom")
		for _, name := range []string{"reports", "idle"} {
			if err := e.q.Pause(ctxT(t), name); err != nil {
				t.Fatal(err)
			}
		}
		b := e.serve(t, ui.Options{})
		body := b.page("/")
		for name, want := range map[string]string{
			"emails":  `^emails 3 1 0 0 \S+ – running Pause$`, // no activity stored: no chart
			"reports": `^reports 1 0 0 1 \S+ – paused Resume Retry 1 dead$`,
			"idle":    `^idle 0 0 0 0 – – paused Resume$`, // paused, no jobs: not in Stats
		} {
			if got := queueRow(body, name); !regexp.MustCompile(want).MatchString(got) {
				t.Errorf("row of %s: %q, want %s", name, got, want)
			}
		}
	})
}

func TestJobsPageFiltersAndPagesByID(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		var a, bq []int64
		for i := range 10 {
			name := "a"
			if i%3 == 2 {
				name = "b"
			}
			id := e.enqueue(t, queue.NewJob{Queue: name, MaxAttempts: 1})[0]
			if name == "a" {
				a = append(a, id)
			} else {
				bq = append(bq, id)
			}
		}
		e.kill(t, "a", a[4], "dead one")
		b := e.serve(t, ui.Options{PageSize: 3})

		// Queue a, page by page: 3, 3, 1, and the last page has no next link.
		path := "/jobs?queue=a"
		for i, want := range [][]int64{a[0:3], a[3:6], a[6:7]} {
			body := b.page(path)
			equalIDs(t, fmt.Sprintf("queue a, page %d", i+1), rowIDs(t, body), want)
			path = nextLink(body)
			if i < 2 && path == "" {
				t.Fatalf("page %d of queue a has no next link", i+1)
			}
		}
		if path != "" {
			t.Errorf("last page of queue a links to %s", path)
		}
		equalIDs(t, "queue b", rowIDs(t, b.page("/jobs?queue=b")), bq)
		equalIDs(t, "dead of a", rowIDs(t, b.page("/jobs?queue=a&state=dead")), []int64{a[4]})
		equalIDs(t, "dead of b", rowIDs(t, b.page("/jobs?queue=b&state=dead")), nil)
		equalIDs(t, "ready after a[5]", rowIDs(t, b.page(fmt.Sprintf("/jobs?state=ready&after=%d", a[5]))),
			[]int64{bq[2], a[6]})
		if code, _ := b.get("/jobs?state=nonsense"); code != http.StatusBadRequest {
			t.Errorf("unknown state: %d, want 400", code)
		}

		// Lookup by id: a redirect to the Job page, which 404s once the job is gone.
		code, loc := b.get2(fmt.Sprintf("/jobs?id=%d", a[2]))
		if code != http.StatusSeeOther || loc != fmt.Sprintf("/jobs/%d", a[2]) {
			t.Errorf("lookup of %d: %d to %q", a[2], code, loc)
		}
		if body := b.page(loc); !strings.Contains(body, fmt.Sprintf("<h1>Job %d ", a[2])) {
			t.Errorf("Job page of %d does not name it", a[2])
		}
		last := max(a[len(a)-1], bq[len(bq)-1])
		if code, _ := b.get(fmt.Sprintf("/jobs/%d", last+1)); code != http.StatusNotFound {
			t.Errorf("job %d, never stored: %d, want 404", last+1, code)
		}
		if _, err := e.q.Cancel(ctxT(t), a[1]); err != nil {
			t.Fatal(err)
		}
		if code, body := b.get(fmt.Sprintf("/jobs/%d", a[1])); code != http.StatusNotFound ||
			!strings.Contains(body, fmt.Sprintf("<h1>Job %d not found</h1>", a[1])) {
			t.Errorf("job %d, cancelled: %d, want 404 and a page that says so", a[1], code)
		}
	})
}

func TestJobsPagePagesBackAndForth(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		var jobs []queue.NewJob
		for range 25 {
			jobs = append(jobs, queue.NewJob{Queue: "p"})
		}
		ids := e.enqueue(t, jobs...)
		e.enqueue(t, queue.NewJob{Queue: "other"})
		b := e.serve(t, ui.Options{PageSize: 1})

		// Forward to the last page, one job a page; then back by Previous
		// links, which carry the latest 20 cursors: page 5 is as far back
		// as they go, and from there First page leads home.
		path, last := "/jobs?queue=p", ""
		for i := range ids {
			body := b.page(path)
			equalIDs(t, fmt.Sprintf("forward, page %d", i+1), rowIDs(t, body), ids[i:i+1])
			if (link(body, "first") == "") != (i == 0) || (link(body, "prev") == "") != (i == 0) {
				t.Errorf("page %d: first %q, prev %q", i+1, link(body, "first"), link(body, "prev"))
			}
			last, path = body, link(body, "next")
		}
		if path != "" {
			t.Fatalf("last page links to %s", path)
		}
		body := last
		for i := len(ids) - 2; i >= 0; i-- {
			prev := link(body, "prev")
			if i < len(ids)-1-20 {
				if prev != "" {
					t.Errorf("page %d links back beyond 20 pages, to %s", i+2, prev)
				}
				break
			}
			if prev == "" {
				t.Fatalf("page %d has no previous link", i+2)
			}
			if !strings.Contains(prev, "queue=p") {
				t.Errorf("previous link %s drops the queue filter", prev)
			}
			body = b.page(prev)
			equalIDs(t, fmt.Sprintf("back, page %d", i+1), rowIDs(t, body), ids[i:i+1])
			if next := link(body, "next"); next == "" || !slices.Equal(rowIDs(t, b.page(next)), ids[i+1:i+2]) {
				t.Errorf("back on page %d, Next page (%s) does not lead to page %d", i+1, next, i+2)
			}
		}
		equalIDs(t, "first page", rowIDs(t, b.page(link(body, "first"))), ids[:1])
		for _, bad := range []string{"/jobs?back=x", "/jobs?back=1,,2", "/jobs?back=-1", "/jobs?after=1&back=0,99999999999999999999"} {
			if code, _ := b.get(bad); code != http.StatusBadRequest {
				t.Errorf("GET %s: %d, want 400", bad, code)
			}
		}
	})
}

func TestJobPageShowsPayloadAttemptsAndError(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		longErr := "first line\n" + strings.Repeat("x", 3000) + "\nlast line"
		ids := e.enqueue(t,
			queue.NewJob{Queue: "p", Payload: []byte(`{"to":"a@example.com","n":[1,2]}`), MaxAttempts: 1, Priority: 7},
			queue.NewJob{Queue: "p", Payload: []byte("plain text, ünïcode")},
			queue.NewJob{Queue: "p", Payload: []byte{0x00, 0x01, 0xfe, 0xff}},
		)
		e.kill(t, "p", ids[0], longErr)
		b := e.serve(t, ui.Options{})

		body := b.page(fmt.Sprintf("/jobs/%d", ids[0]))
		for _, want := range []string{
			"<pre id=\"payload\" class=\"json\">{\n  &#34;to&#34;: &#34;a@example.com&#34;,\n  &#34;n&#34;: [\n    1,",
			"<dt>Attempt</dt><dd>1 of 1</dd>",
			"<dt>Priority</dt><dd>7</dd>",
			"<pre class=\"err\" id=\"last-error\">" + longErr + "</pre>",
			`<span class="badge dead">dead</span>`,
			`<button id="retry">`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("job %d page lacks %q", ids[0], want[:min(len(want), 80)])
			}
		}
		if body := b.page(fmt.Sprintf("/jobs/%d", ids[1])); !strings.Contains(body, `<pre id="payload" class="text">plain text, ünïcode</pre>`) ||
			strings.Contains(body, `<button id="retry">`) {
			t.Errorf("text job page: payload not shown as text, or a ready job offers retry")
		}
		if body := b.page(fmt.Sprintf("/jobs/%d", ids[2])); !strings.Contains(body, `<pre id="payload" class="hex">00000000  00 01 fe ff `) {
			t.Errorf("binary job page: payload not shown as hex")
		}
	})
}

func TestHostileTextIsEscaped(t *testing.T) {
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	eachDB(t, func(t *testing.T, e *env) {
		e.insertRaw(t, evil, []byte(evil))
		ids := e.enqueue(t, queue.NewJob{Queue: "h", Payload: []byte(`{"html":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`)})
		e.kill(t, "h", ids[0], evil)
		b := e.serve(t, ui.Options{})
		jobs := b.page("/jobs")
		all := rowIDs(t, jobs)
		if len(all) != 2 {
			t.Fatalf("jobs page lists %v, want the raw job and %d", all, ids[0])
		}
		for _, path := range []string{"/", "/jobs", fmt.Sprintf("/jobs/%d", all[0]), fmt.Sprintf("/jobs/%d", ids[0])} {
			body := withoutOwnScript(b.page(path))
			if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
				t.Errorf("%s: hostile text rendered as markup", path)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(") {
				t.Errorf("%s: hostile text not shown escaped", path)
			}
		}
	})
}

func TestActionsChangeTheDatabase(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ids := e.enqueue(t, queue.NewJob{Queue: "w"}, queue.NewJob{Queue: "w"}, queue.NewJob{Queue: "w"},
			queue.NewJob{Queue: "w"})
		for _, id := range ids[:3] {
			e.kill(t, "w", id, "failed")
		}
		b := e.serve(t, ui.Options{})
		tok := b.token("/")
		ctx := ctxT(t)
		id := strconv.FormatInt

		// Retry one dead job.
		code, loc := b.post("/retry", url.Values{"csrf": {tok}, "queue": {"w"}, "id": {id(ids[0], 10)}})
		if code != http.StatusSeeOther || loc != "/jobs/"+id(ids[0], 10) {
			t.Fatalf("retry: %d to %q", code, loc)
		}
		if j := e.job(t, ids[0]); j == nil || j.State != queue.StateReady || j.Attempt != 0 {
			t.Fatalf("retried job %d: %+v, want ready with attempt 0", ids[0], j)
		}
		if j := e.job(t, ids[1]); j == nil || j.State != queue.StateDead {
			t.Fatalf("retry of job %d changed job %d: %+v", ids[0], ids[1], j)
		}
		if body := b.page(loc); !strings.Contains(body, fmt.Sprintf(`<p class="flash" role="status">Job %d is ready to run again.</p>`, ids[0])) {
			t.Errorf("no flash after retry")
		}
		if body := b.page(loc); strings.Contains(body, `class="flash"`) {
			t.Errorf("flash shown twice")
		}

		// Retry every dead job of the queue.
		if code, _ := b.post("/retry", url.Values{"csrf": {tok}, "queue": {"w"}}); code != http.StatusSeeOther {
			t.Fatalf("retry all: %d", code)
		}
		if dead, _ := e.q.Jobs(ctx, queue.JobFilter{Queue: "w", State: queue.StateDead}); len(dead) != 0 {
			t.Errorf("after retry all, %d dead jobs", len(dead))
		}

		// Cancel deletes.
		if code, _ := b.post("/cancel", url.Values{"csrf": {tok}, "queue": {"w"}, "id": {id(ids[3], 10)}}); code != http.StatusSeeOther {
			t.Fatalf("cancel: %d", code)
		}
		if j := e.job(t, ids[3]); j != nil {
			t.Errorf("cancelled job %d still stored: %+v", ids[3], j)
		}

		// Pause, then resume.
		if code, _ := b.post("/pause", url.Values{"csrf": {tok}, "queue": {"w"}}); code != http.StatusSeeOther {
			t.Fatalf("pause: %d", code)
		}
		if p, err := e.q.Paused(ctx); err != nil || len(p) != 1 || p[0] != "w" {
			t.Errorf("after pause, paused = %v, %v", p, err)
		}
		if row := queueRow(b.page("/"), "w"); !strings.Contains(row, "paused Resume") {
			t.Errorf("queue row after pause: %q", row)
		}
		if code, _ := b.post("/resume", url.Values{"csrf": {tok}, "queue": {"w"}}); code != http.StatusSeeOther {
			t.Fatalf("resume: %d", code)
		}
		if p, err := e.q.Paused(ctx); err != nil || len(p) != 0 {
			t.Errorf("after resume, paused = %v, %v", p, err)
		}
	})
}

func TestPostWithoutValidCSRFTokenIsRefused(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ids := e.enqueue(t, queue.NewJob{Queue: "c"}, queue.NewJob{Queue: "c"})
		e.kill(t, "c", ids[0], "failed")
		b := e.serve(t, ui.Options{})
		tok := b.token("/")
		other := e.serve(t, ui.Options{}) // another handler: another secret
		otherTok := other.token("/")
		retry := url.Values{"queue": {"c"}, "id": {strconv.FormatInt(ids[0], 10)}}
		with := func(tok string) url.Values {
			v := url.Values{"csrf": {tok}}
			for k, x := range retry {
				v[k] = x
			}
			return v
		}
		noCookie := &browser{t: t, srv: b.srv, c: &http.Client{}}
		for name, try := range map[string]func() (int, string){
			"no token":            func() (int, string) { return b.post("/retry", retry) },
			"wrong token":         func() (int, string) { return b.post("/retry", with(tok[:len(tok)-2]+"AA")) },
			"other handler token": func() (int, string) { return b.post("/retry", with(otherTok)) },
			"token, no cookie":    func() (int, string) { return noCookie.post("/retry", with(tok)) },
			"cross-site":          func() (int, string) { return b.post("/retry", with(tok), "Sec-Fetch-Site", "cross-site") },
			"pause, no token":     func() (int, string) { return b.post("/pause", url.Values{"queue": {"c"}}) },
			"cancel, no token": func() (int, string) {
				return b.post("/cancel", url.Values{"id": {strconv.FormatInt(ids[1], 10)}})
			},
		} {
			if code, _ := try(); code != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", name, code)
			}
		}
		if j := e.job(t, ids[0]); j == nil || j.State != queue.StateDead {
			t.Errorf("refused retry changed job %d: %+v", ids[0], j)
		}
		if j := e.job(t, ids[1]); j == nil {
			t.Errorf("refused cancel deleted job %d", ids[1])
		}
		if p, _ := e.q.Paused(ctxT(t)); len(p) != 0 {
			t.Errorf("refused pause paused %v", p)
		}
		// The same request with the token succeeds: the refusals were the token's.
		if code, _ := b.post("/retry", with(tok)); code != http.StatusSeeOther {
			t.Errorf("retry with token: %d", code)
		}
	})
}

func TestReadOnlyShowsNoActionsAndRefusesPosts(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ids := e.enqueue(t, queue.NewJob{Queue: "r"})
		e.kill(t, "r", ids[0], "failed")
		secret := []byte("one secret for both handlers, 32+")
		rw := e.serve(t, ui.Options{CSRFSecret: secret})
		b := e.serve(t, ui.Options{ReadOnly: true, CSRFSecret: secret})
		b.c = rw.c // same cookies: a token valid for both
		tok := rw.token("/")
		for _, path := range []string{"/", fmt.Sprintf("/jobs/%d", ids[0])} {
			if body := b.page(path); strings.Contains(body, "<form method=\"post\"") {
				t.Errorf("read-only %s shows an action", path)
			}
		}
		if code, _ := b.post("/pause", url.Values{"csrf": {tok}, "queue": {"r"}}); code != http.StatusForbidden {
			t.Errorf("read-only pause: %d, want 403", code)
		}
		if p, _ := e.q.Paused(ctxT(t)); len(p) != 0 {
			t.Errorf("read-only pause paused %v", p)
		}
	})
}

func TestMountedUnderPrefix(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ids := e.enqueue(t, queue.NewJob{Queue: "m"})
		e.kill(t, "m", ids[0], "failed")
		const prefix = "/admin/dbq"
		b := e.serve(t, ui.Options{Prefix: prefix})
		body := b.page(prefix + "/")
		hrefs := regexp.MustCompile(`(?:href|action|src)="([^"]*)"`).FindAllStringSubmatch(body, -1)
		if len(hrefs) < 5 {
			t.Fatalf("Queues page has %d links", len(hrefs))
		}
		for _, h := range hrefs {
			if !strings.HasPrefix(h[1], prefix+"/") {
				t.Errorf("link %q outside %s/", h[1], prefix)
			}
		}
		// The app's mux redirects to the slash before the handler sees it.
		if code, loc := b.get2(prefix); code/100 != 3 || loc != prefix+"/" {
			t.Errorf("GET %s: %d to %q", prefix, code, loc)
		}
		for _, asset := range []string{"style.css", "live.js"} {
			if code, _ := b.get(prefix + "/static/" + asset); code != http.StatusOK {
				t.Errorf("%s: %d", asset, code)
			}
		}
		if code, _ := b.get("/jobs"); code != http.StatusTeapot {
			t.Errorf("GET /jobs, outside the prefix: %d, want the app's 418", code)
		}
		equalIDs(t, "jobs under prefix", rowIDs(t, b.page(prefix+"/jobs?queue=m")), ids)
		tok := b.token(prefix + "/")
		code, loc := b.post(prefix+"/retry", url.Values{"csrf": {tok}, "queue": {"m"}, "id": {strconv.FormatInt(ids[0], 10)}})
		if code != http.StatusSeeOther || loc != fmt.Sprintf("%s/jobs/%d", prefix, ids[0]) {
			t.Errorf("retry under prefix: %d to %q", code, loc)
		}
		if j := e.job(t, ids[0]); j == nil || j.State != queue.StateReady {
			t.Errorf("job %d after retry under prefix: %+v", ids[0], j)
		}
	})
}

func TestPagesSendSecurityHeaders(t *testing.T) {
	e := newEnv(t, testDBs[0])
	b := e.serve(t, ui.Options{})
	resp, err := b.c.Get(b.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Scripts from this origin only (live.js): no inline code, no eval.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") ||
		!strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	var c *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == "dbq_csrf" {
			c = x
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("CSRF cookie %+v, want HttpOnly and SameSite=Strict", c)
	}
}

func TestLiveSwitchFollowsRefresh(t *testing.T) {
	e := newEnv(t, testDBs[0])
	for _, c := range []struct {
		refresh time.Duration
		want    string // "": no switch and no script
	}{
		{0, `data-every="5"`},
		{1500 * time.Millisecond, `data-every="2"`},
		{100 * time.Millisecond, `data-every="1"`},
		{-1, ""},
	} {
		body := e.serve(t, ui.Options{Refresh: c.refresh}).page("/jobs")
		hasSwitch, hasScript := strings.Contains(body, `id="live"`), strings.Contains(body, ownScript)
		if c.want == "" && (hasSwitch || hasScript) || c.want != "" && (!strings.Contains(body, c.want) || !hasScript) {
			t.Errorf("Refresh %v: switch %v, script %v, want %q", c.refresh, hasSwitch, hasScript, c.want)
		}
	}
}

// The Jobs page shows each job's kind, filters by kind and keeps the kind
// in its page links; the Job page names the kind.
func TestJobsPageFiltersByKind(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		var emails []int64
		for i := range 5 {
			kind := "resize"
			if i%2 == 0 {
				kind = "email"
			}
			id := e.enqueue(t, queue.NewJob{Queue: "k", Kind: kind})[0]
			if kind == "email" {
				emails = append(emails, id)
			}
		}
		// A producer's plain SQL may store a kind queue.ValidateKind refuses.
		e.enqueue(t, queue.NewJob{Queue: "k", Kind: "hostile"})
		if _, err := e.db.ExecContext(ctxT(t), "UPDATE "+e.names.Qualified(e.d, e.names.Jobs())+
			" SET kind = '<script>alert(1)</script>' WHERE kind = 'hostile'"); err != nil {
			t.Fatal(err)
		}
		b := e.serve(t, ui.Options{PageSize: 2})
		body := b.page("/jobs?queue=k&kind=email")
		equalIDs(t, "emails, page 1", rowIDs(t, body), emails[:2])
		next := nextLink(body)
		if !strings.Contains(next, "kind=email") {
			t.Fatalf("next link %q drops the kind", next)
		}
		equalIDs(t, "emails, page 2", rowIDs(t, b.page(next)), emails[2:])
		if job := b.page(fmt.Sprintf("/jobs/%d", emails[0])); !strings.Contains(job, ">email</a>") {
			t.Errorf("the Job page does not name the kind")
		}
		if all := b.page("/jobs?queue=k&kind=%3Cscript%3Ealert%281%29%3C%2Fscript%3E"); strings.Contains(all, "<script>alert") ||
			!strings.Contains(all, "&lt;script&gt;alert(1)") {
			t.Errorf("a hostile kind is not escaped")
		}
		if code, _ := b.get("/jobs?kind=bad%01kind"); code != http.StatusBadRequest {
			t.Errorf("a kind with a control character: %d, want 400", code)
		}
	})
}
