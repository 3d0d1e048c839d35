package schedule

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCrontab(t *testing.T) {
	src := `# nightly things
*/5 * * * *   reports   {"kind": "five minutes"}
CRON_TZ=Europe/Berlin
0 3 * * *     reports   {"kind":"nightly"}
@every 30s    pings
0 */10 * * * mon  ticks  x y
CRON_TZ=UTC @hourly reports hourly
`
	got, err := ParseCrontab(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ spec, zone, queue, payload string }{
		{"*/5 * * * *", "UTC", "reports", `{"kind": "five minutes"}`},
		{"0 3 * * *", "Europe/Berlin", "reports", `{"kind":"nightly"}`},
		{"@every 30s", "Europe/Berlin", "pings", ""},
		{"0 */10 * * * mon", "Europe/Berlin", "ticks", "x y"},
		{"@hourly", "UTC", "reports", "hourly"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d schedules: %+v", len(got), got)
	}
	names := map[string]bool{}
	for i, w := range want {
		g := got[i]
		if g.Spec != w.spec || g.TimeZone != w.zone || g.Queue != w.queue || string(g.Payload) != w.payload {
			t.Errorf("line %d: %q %q %q %q, want %+v", i, g.Spec, g.TimeZone, g.Queue, g.Payload, w)
		}
		if !strings.HasPrefix(g.Name, w.queue+".") || names[g.Name] {
			t.Errorf("name %q", g.Name)
		}
		names[g.Name] = true
	}
	again, _ := ParseCrontab(strings.NewReader(src))
	if again[1].Name != got[1].Name {
		t.Errorf("names are not stable: %s, %s", again[1].Name, got[1].Name)
	}
}

func TestParseCrontabRefusesWithLineNumber(t *testing.T) {
	for _, c := range []struct{ src, line string }{
		{"# ok\n\n61 * * * * q p\n", "line 3:"},
		{"@hourly\n", "line 1:"},
		{"@hourly q\nCRON_TZ=Nowhere/Special\n", "line 2:"},
		{"* * * * *\n", "line 1:"},
		{"@daily bad/queue x\n", "line 1:"},
		{"@daily q x\n@daily q x\n", "line 2: the same schedule as line 1"},
		{"@every 1ms q\n", "line 1:"},
	} {
		_, err := ParseCrontab(strings.NewReader(c.src))
		if !errors.Is(err, ErrCrontab) || !strings.Contains(err.Error(), c.line) || !strings.HasPrefix(err.Error(), "dbq:") {
			t.Errorf("%q: %v, want %s", c.src, err, c.line)
		}
	}
}

func FuzzParseCrontab(f *testing.F) {
	f.Add("CRON_TZ=Europe/Berlin\n0 3 * * * q {}\n")
	f.Add("@every 5s q x\n")
	f.Fuzz(func(t *testing.T, src string) {
		got, err := ParseCrontab(strings.NewReader(src))
		if err != nil {
			return
		}
		for _, s := range got {
			if _, err := Parse(s.Spec, s.TimeZone); err != nil {
				t.Fatalf("schedule %+v does not parse: %v", s, err)
			}
		}
	})
}
