package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// `dbq enqueue --kind email x` then `dbq work --kind email=CMD` runs CMD
// with DBQ_JOB_KIND=email; a job of a kind no --kind routes is retried,
// never run by another kind's command; jobs, dead list and stats show and
// filter kinds.
func TestWorkRoutesKinds(t *testing.T) {
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			dir := t.TempDir()
			script := filepath.Join(dir, "record.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$DBQ_JOB_KIND $(cat)\" >> "+filepath.Join(dir, "ran")+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustRun(t, "", append(g, "enqueue", "-q", "k", "--kind", "email", "to-ada")...)
			mustRun(t, "", append(g, "enqueue", "-q", "k", "--kind", "resize", "--max-attempts", "2", "img-1")...)
			if out := mustRun(t, "", append(g, "jobs", "-q", "k", "--kind", "email")...); !strings.Contains(out, "email") || strings.Contains(out, "resize") {
				t.Errorf("jobs --kind email:\n%s", out)
			}
			var listed []map[string]any
			if err := json.Unmarshal([]byte(mustRun(t, "", append(g, "jobs", "-q", "k", "--json")...)), &listed); err != nil || len(listed) != 2 || listed[0]["kind"] != "email" {
				t.Errorf("jobs --json: %v %v", listed, err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := dbqCmd(ctx, "", append(g, "work", "-q", "k", "--poll", "50ms", "--kind", "email="+script)...)
				done <- err
			}()
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				if dead := allDead(t, q, "k"); len(dead) == 1 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("work: %v", err)
			}
			ran, _ := os.ReadFile(filepath.Join(dir, "ran"))
			if string(ran) != "email to-ada\n" {
				t.Errorf("the email command ran for %q; want once, for the email job, with DBQ_JOB_KIND=email", ran)
			}
			dead := allDead(t, q, "k")
			if len(dead) != 1 || dead[0].Kind != "resize" || dead[0].Attempt != 2 || !strings.Contains(dead[0].LastError, "resize") {
				t.Fatalf("dead jobs %+v: want the resize job, retried twice with an error naming its kind", dead)
			}
			if out := mustRun(t, "", append(g, "dead", "list", "-q", "k", "--kind", "resize")...); !strings.Contains(out, "resize") {
				t.Errorf("dead list --kind resize:\n%s", out)
			}
			var byKind []queue.KindStats
			if err := json.Unmarshal([]byte(mustRun(t, "", append(g, "stats", "--by-kind", "--json")...)), &byKind); err != nil ||
				len(byKind) != 1 || byKind[0] != (queue.KindStats{Queue: "k", Kind: "resize", Dead: 1}) {
				t.Errorf("stats --by-kind: %+v, %v", byKind, err)
			}
		})
	}
}

func allDead(t *testing.T, q *queue.Queue, name string) []*queue.Job {
	t.Helper()
	jobs, err := q.Jobs(context.Background(), queue.JobFilter{Queue: name, State: queue.StateDead})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestParseKindRoutes: routes split at the first "=" (a kind holds none),
// follow the kind rule, and resolve their commands at start; a route to a
// missing program is refused, naming it.
func TestParseKindRoutes(t *testing.T) {
	r, err := parseKindRoutes([]string{"email=sh -c true", "resize=true -resize 50%"})
	if err != nil || strings.Join(r["email"], "|") != "sh|-c|true" || len(r["resize"]) != 3 {
		t.Fatalf("routes %v, %v", r, err)
	}
	for _, bad := range [][]string{{"email"}, {"email="}, {"=cmd"}, {"a=true", "a=true"}, {"bad\x01kind=true"}, {"a b=true"}, {"a/b=true"}} {
		if _, err := parseKindRoutes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, c := range []struct{ flag, names string }{
		{"email=./no-such-send.sh --fast", "./no-such-send.sh"},
		{"email=dbq-no-such-program", "dbq-no-such-program"},
		{"a=b=true", `"b=true"`}, // kind a, whose command is "b=true"
	} {
		_, err := parseKindRoutes([]string{c.flag})
		if !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), c.names) {
			t.Errorf("--kind %q: %v; want ErrInvalidConfig naming %s", c.flag, err, c.names)
		}
	}
}

// TestKindCharactersRefused: enqueue --kind takes what a --kind route can
// name, no more (a kind with "=" could never be routed); work refuses to
// start on a route or a command after -- that cannot be run, naming it,
// before it touches the database.
func TestKindCharactersRefused(t *testing.T) {
	t.Setenv("DBQ_DSN", "")
	// A work that started would run until this ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := []string{"--dsn", "sqlite:" + filepath.Join(t.TempDir(), "k.db")}
	mustRun(t, "", append(g, "migrate", "up", "--no-check")...)
	for _, kind := range []string{"a=b", "a b", "a/b"} {
		if out, err := dbqCmd(ctx, "", append(g, "enqueue", "-q", "k", "--kind", kind, "x")...); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("enqueue --kind %q: %v\n%s; want ErrInvalidJob", kind, err, out)
		}
	}
	for _, c := range []struct {
		args  []string
		names string
	}{
		{[]string{"work", "-q", "k", "--kind", "email=dbq-no-such-program"}, "dbq-no-such-program"},
		{[]string{"work", "-q", "k", "--", "dbq-no-such-program", "x"}, "dbq-no-such-program"},
	} {
		out, err := dbqCmd(ctx, "", append(g, c.args...)...)
		if !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), c.names) {
			t.Errorf("dbq %s: %v\n%s; want ErrInvalidConfig naming %s", strings.Join(c.args, " "), err, out, c.names)
		}
	}
}
