package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	req, err := http.NewRequest(http.MethodGet, "http://"+u.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
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
