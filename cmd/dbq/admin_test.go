package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/queue"
)

// TestAdminCommands drives dead list/retry, jobs, cancel, pause and resume
// on SQLite, and the PAUSED column of stats.
func TestAdminCommands(t *testing.T) {
	t.Parallel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "admin.db")
	g := []string{"--dsn", dsn}
	mustRun(t, "", append(g, "migrate", "up")...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := dbq.Open(ctx, dsn, dbq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	// Four jobs: three made dead, one left ready.
	ids, err := q.Enqueue(ctx, queue.NewJob{Queue: "adm", Payload: []byte(`{"n":1}`)}, queue.NewJob{Queue: "adm"},
		queue.NewJob{Queue: "adm", Payload: []byte{0xff, 0x00}}, queue.NewJob{Queue: "adm"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	held, err := c.Claim(ctx, "adm", 3)
	if err != nil || len(held) != 3 {
		t.Fatalf("claim: %v, %d jobs", err, len(held))
	}
	var rs []queue.RetryParams
	for _, j := range held {
		rs = append(rs, queue.RetryParams{Lease: j.Lease(), Error: "boom " + strconv.FormatInt(j.ID, 10) + "\nstack", Dead: true})
	}
	if err := c.Retry(ctx, rs); err != nil {
		t.Fatal(err)
	}

	list := func(args ...string) []jobJSON {
		t.Helper()
		out := mustRun(t, "", append(append(g, args...), "--json")...)
		var jobs []jobJSON
		if err := json.Unmarshal([]byte(out), &jobs); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return jobs
	}
	idsOf := func(jobs []jobJSON) (out []int64) {
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}

	dead := list("dead", "list", "-q", "adm")
	if got := idsOf(dead); len(got) != 3 || got[0] != ids[0] || got[2] != ids[2] {
		t.Fatalf("dead list: %v, want %v", got, ids[:3])
	}
	if d := dead[0]; d.State != "dead" || d.LastError != "boom "+strconv.FormatInt(ids[0], 10)+"\nstack" ||
		d.Payload == nil || *d.Payload != `{"n":1}` {
		t.Errorf("dead list [0]: %+v", d)
	}
	if d := dead[2]; d.Payload != nil || string(d.PayloadBase64) != "\xff\x00" {
		t.Errorf("binary payload: %+v, want it in payload_base64", d)
	}
	page := list("dead", "list", "-q", "adm", "--limit", "2")
	next := list("dead", "list", "-q", "adm", "--limit", "2", "--after", strconv.FormatInt(page[1].ID, 10))
	if len(page) != 2 || len(next) != 1 || next[0].ID != ids[2] {
		t.Errorf("pages %v then %v, want 2 then job %d", idsOf(page), idsOf(next), ids[2])
	}
	if out := mustRun(t, "", append(g, "dead", "list", "-q", "adm")...); !strings.Contains(out, "boom") || !strings.Contains(out, "LAST ERROR") {
		t.Errorf("dead list table:\n%s", out)
	}
	if got := list("dead", "list", "-q", "other"); len(got) != 0 {
		t.Errorf("dead list of an empty queue: %v", got)
	}

	// retry one, then the rest.
	if out := mustRun(t, "", append(g, "dead", "retry", "-q", "adm", strconv.FormatInt(ids[0], 10))...); !strings.Contains(out, "retried 1 job") {
		t.Errorf("dead retry one: %q", out)
	}
	if st := stats(t, g)["adm"]; st.Ready != 2 || st.Dead != 2 {
		t.Errorf("after retrying one: %+v, want 2 ready, 2 dead", st)
	}
	revived := list("jobs", "-q", "adm", "--state", "ready")
	if len(revived) != 2 || revived[0].ID != ids[0] || revived[0].Attempt != 0 || revived[0].LastError == "" {
		t.Errorf("ready jobs after retry: %+v; want job %d first, attempt 0, last error kept", revived, ids[0])
	}
	if _, err := dbqCmd(ctx, "", append(g, "dead", "retry", "-q", "adm", strconv.FormatInt(ids[3], 10))...); err == nil {
		t.Error("dead retry of a ready job succeeded")
	}
	mustRun(t, "", append(g, "dead", "retry", "-q", "adm", "--all")...)
	if st := stats(t, g)["adm"]; st.Ready != 4 || st.Dead != 0 {
		t.Errorf("after retry --all: %+v, want 4 ready", st)
	}

	// pause and resume.
	mustRun(t, "", append(g, "pause", "adm")...)
	if st := stats(t, g)["adm"]; !st.Paused {
		t.Errorf("stats after pause: %+v", st)
	}
	if out := mustRun(t, "", append(g, "stats")...); !strings.Contains(out, "PAUSED") || !strings.Contains(out, "yes") {
		t.Errorf("stats table after pause:\n%s", out)
	}
	if got, err := c.Claim(ctx, "adm", 10); err != nil || len(got) != 0 {
		t.Errorf("claim from a paused queue: %d jobs, %v", len(got), err)
	}
	mustRun(t, "", append(g, "resume", "adm")...)
	if st := stats(t, g)["adm"]; st.Paused {
		t.Errorf("stats after resume: %+v", st)
	}

	// cancel: a held job stays with its holder.
	h, err := c.Claim(ctx, "adm", 1)
	if err != nil || len(h) != 1 {
		t.Fatalf("claim after resume: %v, %d jobs", err, len(h))
	}
	var free []string
	for _, id := range ids {
		if id != h[0].ID {
			free = append(free, strconv.FormatInt(id, 10))
		}
	}
	if out := mustRun(t, "", append(append(g, "cancel"), free...)...); !strings.Contains(out, "cancelled 3 jobs") {
		t.Errorf("cancel: %q", out)
	}
	if _, err := dbqCmd(ctx, "", append(g, "cancel", strconv.FormatInt(h[0].ID, 10))...); err == nil {
		t.Error("cancel of a held job succeeded")
	}
	if all := list("jobs"); len(all) != 1 || all[0].ID != h[0].ID || all[0].State != "claimed" {
		t.Errorf("jobs after cancel: %+v, want only the held job %d", all, h[0].ID)
	}
}

// TestAdminCommandsRefuseBadInput: the admin commands check their
// arguments before touching the database.
func TestAdminCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	g := []string{"--dsn", "sqlite:" + filepath.Join(t.TempDir(), "bad.db")}
	for _, args := range [][]string{
		{"dead", "retry", "-q", "a"},
		{"dead", "retry", "-q", "a", "--all", "1"},
		{"dead", "retry", "-q", "a", "x"},
		{"cancel"},
		{"cancel", "-3"},
		{"cancel", "abc"},
		{"pause"},
		{"resume", "a", "b"},
		{"jobs", "--state", "bogus"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := dbqCmd(ctx, "", append(g, args...)...)
		cancel()
		if err == nil {
			t.Errorf("dbq %s: no error", strings.Join(args, " "))
		}
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"short":                 "short",
		"first\nsecond":         "first …",
		strings.Repeat("x", 70): strings.Repeat("x", 59) + "…",
		"":                      "",
	} {
		if got := oneLine(in, 60); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
