package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseCrontab(t *testing.T) {
	src := `# nightly things
*/5 * * * *   reports   {"kind": "five minutes"}
CRON_TZ=Europe/Berlin
name=nightly 0 3 * * *     reports   {"kind":"nightly"}
@every 30s    pings
seconds=*/10 0 * * * mon  ticks  x y
CRON_TZ=UTC kind=report.hourly @hourly reports hourly
*/5 * * * * monitoring {"check":1}
0 3 * * * thumbnails x
0 3 * * * sat-jobs x y
0 3 * * 7 0queue
name=sun-late kind=cleanup CRON_TZ=Asia/Tokyo 0 23 * * 5-7 sat-jobs  {"deep": true}  
`
	got, err := ParseCrontab(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, spec, zone, queue, kind, payload string }{
		{"reports", "*/5 * * * *", "UTC", "reports", "", `{"kind": "five minutes"}`},
		{"nightly", "0 3 * * *", "Europe/Berlin", "reports", "", `{"kind":"nightly"}`},
		{"pings", "@every 30s", "Europe/Berlin", "pings", "", ""},
		{"ticks", "*/10 0 * * * mon", "Europe/Berlin", "ticks", "", "x y"},
		{"reports:report.hourly", "@hourly", "UTC", "reports", "report.hourly", "hourly"},
		{"monitoring", "*/5 * * * *", "Europe/Berlin", "monitoring", "", `{"check":1}`},
		{"thumbnails", "0 3 * * *", "Europe/Berlin", "thumbnails", "", "x"},
		{"sat-jobs", "0 3 * * *", "Europe/Berlin", "sat-jobs", "", "x y"},
		{"0queue", "0 3 * * 7", "Europe/Berlin", "0queue", "", ""},
		{"sun-late", "0 23 * * 5-7", "Asia/Tokyo", "sat-jobs", "cleanup", `{"deep": true}`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d schedules: %+v", len(got), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Spec != w.spec || g.TimeZone != w.zone || g.Queue != w.queue || g.Kind != w.kind || string(g.Payload) != w.payload {
			t.Errorf("schedule %d: %q %q %q %q %q %q, want %+v", i, g.Name, g.Spec, g.TimeZone, g.Queue, g.Kind, g.Payload, w)
		}
		if _, err := Parse(g.Spec, g.TimeZone); err != nil {
			t.Errorf("schedule %d: %v", i, err)
		}
	}
}

// A line keeps its schedule's name when only its spacing, payload, spec or
// zone change; its queue, kind or name= make another schedule.
func TestCrontabNamesAreStableAcrossEdits(t *testing.T) {
	name := func(line string) string {
		t.Helper()
		s, err := ParseCrontab(strings.NewReader(line))
		if err != nil || len(s) != 1 {
			t.Fatalf("%q: %v, %v", line, s, err)
		}
		return s[0].Name
	}
	base := name(`@every 1s dep {"v":1}`)
	for _, edit := range []string{`@every 1s  dep {"v": 1}`, "\t@every 1s dep", `@every 2s dep {"v":2}`,
		`CRON_TZ=Europe/Berlin 0 4 * * * dep {"v":1}`} {
		if got := name(edit); got != base {
			t.Errorf("%q is schedule %s, %q is %s", edit, got, `@every 1s dep {"v":1}`, base)
		}
	}
	for _, other := range []string{`@every 1s dep2 {"v":1}`, `kind=k @every 1s dep {"v":1}`, `name=x @every 1s dep {"v":1}`} {
		if got := name(other); got == base {
			t.Errorf("%q is the same schedule as %q", other, `@every 1s dep {"v":1}`)
		}
	}
	long := strings.Repeat("q", 64)
	if n := LineName(long, "k"); len(n) > 64 || !strings.HasPrefix(n, long[:51]+".") || n == LineName(long, "k2") {
		t.Errorf("LineName of a long queue and a kind: %q", n)
	}
	if n := LineName("q", "a kind/with space"); n == "q" || strings.ContainsAny(n, " /") {
		t.Errorf("LineName of a kind that is no name: %q", n)
	}
}

// Day of week 7 is Sunday, as in crontab(5), alone, in ranges and lists.
func TestSundayIsSeven(t *testing.T) {
	from := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // a Monday
	for _, c := range []struct {
		spec string
		want []time.Weekday
	}{
		{"0 0 * * 7", []time.Weekday{time.Sunday}},
		{"0 0 * * 5-7", []time.Weekday{time.Friday, time.Saturday, time.Sunday}},
		{"0 0 * * 1-7/2", []time.Weekday{time.Wednesday, time.Friday, time.Sunday, time.Monday}},
		{"0 0 * * fri-7", []time.Weekday{time.Friday, time.Saturday, time.Sunday}},
		{"0 0 * * 1,7", []time.Weekday{time.Sunday, time.Monday}},
		{"0 0 0 * * 7", []time.Weekday{time.Sunday}}, // seconds first
		{"0 0 * * 0", []time.Weekday{time.Sunday}},
	} {
		s, err := Parse(c.spec, "")
		if err != nil {
			t.Errorf("%s: %v", c.spec, err)
			continue
		}
		var got []time.Weekday
		for n := s.Next(from); len(got) < len(c.want); n = s.Next(n) {
			got = append(got, n.Weekday())
		}
		if !equalDays(got, c.want) {
			t.Errorf("%s fires on %v, want %v", c.spec, got, c.want)
		}
		if s.String() != c.spec {
			t.Errorf("%s is shown as %s", c.spec, s.String())
		}
	}
	for _, bad := range []string{"0 0 * * 8", "0 0 * * 7-5", "0 0 * * 7/0"} {
		if _, err := Parse(bad, ""); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func equalDays(a, b []time.Weekday) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseCrontabRefusesWithLineNumber(t *testing.T) {
	for _, c := range []struct{ src, line string }{
		{"# ok\n\n61 * * * * q p\n", "line 3:"},
		{"@hourly\n", "line 1:"},
		{"@hourly q\nCRON_TZ=Nowhere/Special\n", "line 2:"},
		{"* * * * *\n", "line 1:"},
		{"@daily bad/queue x\n", "line 1:"},
		{"@daily q x\n@daily q y\n", "line 2: schedule q is also line 1"},
		{"name=a @daily q x\nname=a @daily r y\n", "line 2: schedule a is also line 1"},
		{"@every 1ms q\n", "line 1:"},
		// Six fields are never guessed: the sixth word is the queue, and
		// "*" is no queue name.
		{"# x\n*/5 * * * * * monitoring\n", "line 2:"},
		{"name=bad/name @daily q\n", "line 1:"},
		{"colour=red @daily q\n", "line 1: unknown option colour="},
		{"name=a name=b @daily q\n", "line 1: option name= given twice"},
		{"seconds=5 @hourly q\n", "line 1: seconds= goes with a five-field spec"},
		{"kind= @hourly q\n", "line 1:"},
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
	f.Add("name=n kind=k seconds=*/5 * * * * 7 q x\n")
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
