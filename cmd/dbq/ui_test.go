package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestUIRefusesNonLoopbackWithoutAuth(t *testing.T) {
	t.Setenv(authEnv, "")
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "none.db") // never opened: the refusal comes first
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.0.2.1:8080", "example.com:80"} {
		out, err := dbqCmd(context.Background(), "", "--dsn", dsn, "ui", "--listen", listen)
		if err == nil || !strings.Contains(err.Error(), "not a loopback address") || !strings.Contains(err.Error(), "$DBQ_UI_AUTH") {
			t.Errorf("ui --listen %s: %v %s, want a refusal naming $DBQ_UI_AUTH", listen, err, out)
		}
	}
	if _, err := dbqCmd(context.Background(), "", "--dsn", dsn, "ui", "--allow-remote", "--listen", "0.0.0.0:8080"); err == nil ||
		!strings.Contains(err.Error(), "--auth") {
		t.Errorf("ui --allow-remote: %v, want a refusal naming --auth", err)
	}
	for _, listen := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080"} {
		if err := checkListen(listen, false); err != nil {
			t.Errorf("checkListen(%s, no auth): %v", listen, err)
		}
	}
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "192.0.2.1:8080"} {
		if err := checkListen(listen, true); err != nil {
			t.Errorf("checkListen(%s, with auth): %v", listen, err)
		}
	}
}

func TestUIRefusesMalformedAuthWithoutShowingIt(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	for _, bad := range []string{"no-colon-secret", ":only-secret", "user-only:"} {
		t.Setenv(authEnv, bad)
		out, err := dbqCmd(context.Background(), "", "--dsn", dsn, "ui")
		if err == nil || !strings.Contains(err.Error(), "want user:password") {
			t.Errorf("%s=%q: %v, want a refusal", authEnv, bad, err)
		}
		if err != nil && strings.Contains(err.Error()+out, "secret") {
			t.Errorf("%s=%q: the refusal shows it: %v %s", authEnv, bad, err, out)
		}
	}
}

func TestUIServesTheDashboard(t *testing.T) {
	t.Setenv(authEnv, "")
	ui := startUI(t)
	resp := ui.get(t, "/", "", "")
	if resp.code != http.StatusOK || !strings.Contains(resp.body, `<tr data-queue="mail">`) {
		t.Errorf("Queues page: %d, lacks queue mail:\n%s", resp.code, resp.body)
	}
	if out := ui.stop(); !strings.Contains(out, "no authentication") {
		t.Errorf("start message does not say there is no authentication: %s", out)
	}
}

// What a page of evil.example, its name pointed at 127.0.0.1, can do from
// its visitor's browser: fetch the dashboard naming evil.example in Host
// and post back with the token it read. dbq ui must give it nothing.
func TestUIRefusesRebindingHost(t *testing.T) {
	t.Setenv(authEnv, "")
	ui := startUI(t)
	_, port, _ := net.SplitHostPort(ui.addr)
	evil := "evil.example:" + port
	if resp := ui.getAs(t, evil, "/", "", ""); resp.code != http.StatusMisdirectedRequest || strings.Contains(resp.body, "csrf") {
		t.Errorf("GET / as %s: %d %.300s, want 421 without a token", evil, resp.code, resp.body)
	}
	// A token and cookie got from the real page, posted as the evil page would.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get("http://" + ui.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the dashboard:\n%s", page)
	}
	post := func(host string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ui.addr+"/pause",
			strings.NewReader(url.Values{"csrf": {string(m[1])}, "queue": {"mail"}}.Encode()))
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(evil); code != http.StatusMisdirectedRequest {
		t.Errorf("POST /pause as %s with a valid token: %d, want 421", evil, code)
	}
	if resp := ui.get(t, "/", "", ""); strings.Contains(resp.body, "paused") {
		t.Errorf("the refused pause paused queue mail:\n%s", resp.body)
	}
	if code := post(ui.addr); code != http.StatusSeeOther {
		t.Errorf("POST /pause as %s with a valid token: %d, want 303 (the refusal must be the Host's)", ui.addr, code)
	}
	if out := ui.stop(); !strings.Contains(out, "answering to localhost, loopback addresses (") {
		t.Errorf("start message does not say which hosts it answers to: %s", out)
	}
}

func TestUIAllowedHosts(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	t.Setenv(authEnv, "")
	if _, err := dbqCmd(context.Background(), "", "--dsn", dsn, "ui", "--allowed-hosts", "dash.example"); err == nil ||
		!strings.Contains(err.Error(), "--allowed-hosts needs credentials") {
		t.Errorf("--allowed-hosts without auth: %v, want a refusal", err)
	}
	t.Setenv(authEnv, "ops:pw")
	ui := startUI(t, "--allowed-hosts", "dash.example")
	_, port, _ := net.SplitHostPort(ui.addr)
	for host, want := range map[string]int{"dash.example:" + port: 200, "localhost:" + port: 200, ui.addr: 200,
		"evil.example:" + port: http.StatusMisdirectedRequest} {
		if resp := ui.getAs(t, host, "/", "ops", "pw"); resp.code != want {
			t.Errorf("with auth and --allowed-hosts dash.example: GET / as %s: %d, want %d", host, resp.code, want)
		}
	}
	hosts, err := uiHosts("0.0.0.0:8080", true, nil)
	if err != nil || slices.Contains(hosts, "0.0.0.0") || slices.Contains(hosts, "127.0.0.1") {
		t.Errorf("uiHosts(0.0.0.0, auth) = %v, %v: want this machine's non-loopback addresses", hosts, err)
	}
	if got := servedAddr("0.0.0.0:0", &net.TCPAddr{IP: net.IPv6zero, Port: 41234}); got != "0.0.0.0:41234" {
		t.Errorf("servedAddr(0.0.0.0:0, [::]:41234) = %s", got)
	}
	if got := servedAddr(":0", &net.TCPAddr{IP: net.IPv6zero, Port: 41234}); got != "0.0.0.0:41234" {
		t.Errorf("servedAddr(:0, [::]:41234) = %s", got)
	}
}

func TestUIAuthAsksForCredentials(t *testing.T) {
	const user, secret = "ops", "s3cret-pw:with-colon"
	for _, how := range []string{"env", "flag"} {
		t.Run(how, func(t *testing.T) {
			var args []string
			if how == "env" {
				t.Setenv(authEnv, user+":"+secret)
			} else {
				t.Setenv(authEnv, "")
				args = []string{"--auth", user + ":" + secret}
			}
			ui := startUI(t, args...)
			for name, c := range map[string]struct {
				user, pass string
				want       int
			}{
				"no credentials": {"", "", http.StatusUnauthorized},
				"wrong password": {user, secret + "x", http.StatusUnauthorized},
				"wrong user":     {"root", secret, http.StatusUnauthorized},
				"credentials":    {user, secret, http.StatusOK},
			} {
				for _, path := range []string{"/", "/schedules", "/static/style.css"} {
					resp := ui.get(t, path, c.user, c.pass)
					if resp.code != c.want {
						t.Errorf("%s, GET %s: %d, want %d", name, path, resp.code, c.want)
					}
					if c.want == http.StatusUnauthorized && !strings.HasPrefix(resp.auth, "Basic ") {
						t.Errorf("%s, GET %s: WWW-Authenticate %q", name, path, resp.auth)
					}
					if strings.Contains(resp.body, secret) {
						t.Errorf("%s, GET %s: the page shows the password", name, path)
					}
				}
			}
			out := ui.stop()
			if !strings.Contains(out, `basic auth as "ops"`) {
				t.Errorf("start message does not name the user:\n%s", out)
			}
			if strings.Contains(out, "s3cret") {
				t.Errorf("the password appears in the output or logs:\n%s", out)
			}
			if got := strings.Contains(out, "process list"); got != (how == "flag") {
				t.Errorf("warning about --auth in ps: %v, want %v:\n%s", got, how == "flag", out)
			}
		})
	}
}

// runningUI is a `dbq -v ui` started by startUI.
type runningUI struct {
	addr string
	stop func() string // stops it, once, and returns its output and logs
}

// uiResponse is what a GET of the dashboard answered.
type uiResponse struct {
	code       int
	body, auth string
}

// get fetches path, with basic auth when user is not "".
func (u *runningUI) get(t *testing.T, path, user, pass string) uiResponse {
	t.Helper()
	return u.getAs(t, "", path, user, pass)
}

// getAs fetches path naming host in the Host header ("": the address).
func (u *runningUI) getAs(t *testing.T, host, path, user, pass string) uiResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+u.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return uiResponse{code: resp.StatusCode, body: string(b), auth: resp.Header.Get("WWW-Authenticate")}
}

// startUI migrates a SQLite file with one job of queue mail and serves
// its dashboard with `dbq -v ui` and args on a free loopback port until t
// ends, catching os.Stderr, where -v logs go.
func startUI(t *testing.T, args ...string) *runningUI {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ui.db")
	mustRun(t, "", "--dsn", dsn, "migrate", "up")
	mustRun(t, "", "--dsn", dsn, "enqueue", "--queue", "mail", `{"to":"a"}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	logs := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(r); r.Close(); logs <- b }()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := dbqCmd(ctx, "", append([]string{"--dsn", dsn, "-v", "ui", "--listen", addr}, args...)...)
		done <- result{out, err}
	}()
	var (
		once sync.Once
		all  string
	)
	stop := func() string {
		once.Do(func() {
			cancel()
			select {
			case res := <-done:
				if res.err != nil {
					t.Errorf("dbq ui after cancel: %v", res.err)
				}
				all = res.out
			case <-time.After(10 * time.Second):
				t.Error("dbq ui did not stop when its context ended")
			}
			os.Stderr = stderr
			w.Close()
			all += string(<-logs)
		})
		return all
	}
	t.Cleanup(func() { stop() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return &runningUI{addr: addr, stop: stop}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dbq ui never answered on %s: %v\n%s", addr, err, stop())
		}
	}
}
