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

// dbq schedule --file runs the file's schedules; schedules list shows
// them, pause and resume set the flag; a bad line is refused with its
// number.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			file := filepath.Join(t.TempDir(), "crontab")
			src := "# test\n@every 1s  ticks  {\"n\": 1}\nCRON_TZ=Europe/Berlin\n0 3 * * *  nightly\n"
			if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
			defer cancel()
			if out, err := dbqCmd(ctx, "", append(g, "schedule", "--file", file)...); err != nil {
				t.Fatalf("schedule: %v\n%s", err, out)
			}
			jobs := allJobs(t, q, "ticks")
			if len(jobs) < 1 || len(jobs) > 3 || string(jobs[0].Payload) != `{"n": 1}` {
				t.Fatalf("%d jobs in 2.5 s of @every 1s: %+v", len(jobs), jobs)
			}
			var got []queue.ScheduleInfo
			if err := json.Unmarshal([]byte(mustRun(t, "", append(g, "schedules", "list", "--json")...)), &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Queue != "nightly" || got[0].TimeZone != "Europe/Berlin" || got[0].NextTick.UTC().Hour()%24 > 2 ||
				got[1].Spec != "@every 1s" || !got[1].LastTick.Equal(jobs[len(jobs)-1].RunAt) {
				t.Fatalf("schedules %+v", got)
			}
			mustRun(t, "", append(g, "schedules", "pause", got[1].Name)...)
			table := mustRun(t, "", append(g, "schedules", "list")...)
			if !strings.Contains(table, "NEXT TICK") || !strings.Contains(table, got[1].Name) || !strings.Contains(table, "true") {
				t.Fatalf("list after pause:\n%s", table)
			}
			mustRun(t, "", append(g, "schedules", "resume", got[1].Name)...)
			// A crontab line without name= is named after its queue.
			if got[0].Name != "nightly" || got[1].Name != "ticks" {
				t.Fatalf("names %s, %s; want nightly, ticks", got[0].Name, got[1].Name)
			}
			// A schedule that never ticked has no last_tick in JSON.
			if raw := mustRun(t, "", append(g, "schedules", "list", "--json")...); strings.Count(raw, `"last_tick"`) != 1 {
				t.Fatalf("want last_tick only on the schedule that ticked:\n%s", raw)
			}
			if _, err := dbqCmd(context.Background(), "", append(g, "schedules", "resume", "nosuch")...); err == nil || !strings.Contains(err.Error(), "not found") {
				t.Fatalf("resume of nosuch: %v", err)
			}
			scheduleDeletePrune(t, g, q)
			if err := os.WriteFile(file, []byte("@hourly q\n\n0 25 * * * q\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := dbqCmd(context.Background(), "", append(g, "schedule", "--file", file)...); err == nil || !strings.Contains(err.Error(), "line 3:") {
				t.Fatalf("bad file: %v", err)
			}
		})
	}
}

// scheduleDeletePrune: a schedule no scheduler stored for two hours is
// marked stale by schedules list and removed by schedules prune; the
// others stay; schedules delete removes one by name.
func scheduleDeletePrune(t *testing.T, g []string, q *queue.Queue) {
	t.Helper()
	ctx := context.Background()
	old := queue.ScheduleDef{Name: "left-over", Spec: "@hourly", TimeZone: "UTC", Queue: "q", At: time.Now().Add(-2 * time.Hour)}
	if err := q.UpsertSchedule(ctx, old); err != nil {
		t.Fatal(err)
	}
	table := mustRun(t, "", append(g, "schedules", "list")...)
	for _, line := range strings.Split(table, "\n") {
		if stale := strings.Contains(line, "(stale)"); stale != strings.HasPrefix(line, "left-over ") {
			t.Fatalf("stale marks wrong on %q:\n%s", line, table)
		}
	}
	if _, err := dbqCmd(ctx, "", append(g, "schedules", "prune", "--older-than", "1m")...); err == nil || !strings.Contains(err.Error(), "under 1h") {
		t.Fatalf("prune --older-than 1m: %v", err)
	}
	if out := mustRun(t, "", append(g, "schedules", "prune", "--older-than", "90m")...); !strings.HasPrefix(out, "deleted left-over\n") || !strings.Contains(out, " 1 schedule(s) not seen") {
		t.Fatalf("prune: %q", out)
	}
	mustRun(t, "", append(g, "schedules", "delete", "nightly")...)
	if _, err := dbqCmd(ctx, "", append(g, "schedules", "delete", "nightly")...); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("second delete: %v", err)
	}
	left, err := q.Schedules(ctx)
	if err != nil || len(left) != 1 || left[0].Name != "ticks" {
		t.Fatalf("after prune and delete: %+v, %v", left, err)
	}
}
