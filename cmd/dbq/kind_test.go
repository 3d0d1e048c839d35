package main

import (
	"context"
	"encoding/json"
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

func TestParseKindRoutes(t *testing.T) {
	r, err := parseKindRoutes([]string{"email=./send.sh --fast", "resize=convert -resize 50%"})
	if err != nil || strings.Join(r["email"], "|") != "./send.sh|--fast" || len(r["resize"]) != 3 {
		t.Fatalf("routes %v, %v", r, err)
	}
	for _, bad := range [][]string{{"email"}, {"email="}, {"=cmd"}, {"a=x", "a=y"}, {"bad\x01kind=x"}} {
		if _, err := parseKindRoutes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
