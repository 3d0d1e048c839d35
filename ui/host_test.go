package ui_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/ui"
)

// do sends method path to b's server naming host in the Host header,
// with b's cookies and the headers a browser on that host's page would
// send, and returns the status and body.
func (b *browser) do(method, path, host string, form url.Values) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Host = host
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A page whose name its owner points at 127.0.0.1 (DNS rebinding) is
// same-origin with itself, so the browser sends its fetches with that
// name in Host, Origin and Sec-Fetch-Site: same-origin, and gives the page
// what comes back. The dashboard must answer it with nothing.
func TestRebindingHostIsRefused(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		e.enqueue(t, queue.NewJob{Queue: "rb", Payload: []byte(`{"secret":"payload"}`)})
		b := e.serve(t, ui.Options{})
		port := b.srv.URL[strings.LastIndex(b.srv.URL, ":"):]
		tok := b.token("/") // a token and cookie the browser holds
		evil := "evil.example" + port
		for _, path := range []string{"/", "/jobs?queue=rb", "/schedules", "/static/style.css"} {
			code, body := b.do(http.MethodGet, path, evil, nil)
			if code != http.StatusMisdirectedRequest || strings.Contains(body, "csrf") || strings.Contains(body, "secret") {
				t.Errorf("GET %s as %s: %d %.200s, want 421 and nothing of the dashboard", path, evil, code, body)
			}
		}
		if code, _ := b.do(http.MethodPost, "/pause", evil, url.Values{"csrf": {tok}, "queue": {"rb"}}); code != http.StatusMisdirectedRequest {
			t.Errorf("POST /pause as %s with a valid token: %d, want 421", evil, code)
		}
		if p, _ := e.q.Paused(ctxT(t)); len(p) != 0 {
			t.Errorf("the refused pause paused %v", p)
		}
		// Loopback names pass, whatever the case or a trailing dot.
		for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LocalHost." + port, "[::1]" + port, "127.0.0.2" + port} {
			if code, body := b.do(http.MethodGet, "/", host, nil); code != http.StatusOK {
				t.Errorf("GET / as %s: %d %.200s, want 200", host, code, body)
			}
		}
		// The same POST from a loopback name succeeds: the refusal was the Host's.
		if code, _ := b.do(http.MethodPost, "/pause", "127.0.0.1"+port, url.Values{"csrf": {tok}, "queue": {"rb"}}); code != http.StatusSeeOther {
			t.Errorf("POST /pause as 127.0.0.1 with a valid token: %d, want 303", code)
		}

		named := e.serve(t, ui.Options{AllowedHosts: []string{"Dash.Example"}})
		for host, want := range map[string]int{"dash.example" + port: 200, "dash.example.:443": 200, "localhost": 200,
			evil: 421, "sub.dash.example": 421} {
			if code, _ := named.do(http.MethodGet, "/", host, nil); code != want {
				t.Errorf("AllowedHosts [Dash.Example]: GET / as %q: %d, want %d", host, code, want)
			}
		}
		any := e.serve(t, ui.Options{AllowedHosts: []string{"*"}})
		if code, _ := any.do(http.MethodGet, "/", evil, nil); code != http.StatusOK {
			t.Errorf(`AllowedHosts ["*"]: GET / as %s: %d, want 200`, evil, code)
		}
	})
}

func TestAllowedHostsRefusesBadEntries(t *testing.T) {
	e := newEnv(t, testDBs[0])
	for _, bad := range []string{"", "dash.example:8080", "http://dash.example", "a b", "user@host"} {
		if _, err := ui.NewHandler(e.q, ui.Options{AllowedHosts: []string{bad}}); err == nil || !strings.Contains(err.Error(), "AllowedHosts") {
			t.Errorf("AllowedHosts [%q]: %v, want an error naming AllowedHosts", bad, err)
		}
	}
	for _, good := range []string{"dash.example", "10.0.0.5", "::1", "[fe80::1]", "*"} {
		if _, err := ui.NewHandler(e.q, ui.Options{AllowedHosts: []string{good}}); err != nil {
			t.Errorf("AllowedHosts [%q]: %v", good, err)
		}
	}
}
