package schedule

import (
	"errors"
	"testing"
	"time"
)

func mustParse(t *testing.T, spec, zone string) *Spec {
	t.Helper()
	s, err := Parse(spec, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, zone, err)
	}
	return s
}

func at(t *testing.T, zone, wall string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04:05 -0700", wall, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ticks returns the first n ticks of s after from, as wall clock with
// offset in the spec's zone.
func ticks(s *Spec, from time.Time, n int) []string {
	var out []string
	for t := s.Next(from); len(out) < n; t = s.Next(t) {
		out = append(out, t.In(s.loc).Format("2006-01-02 15:04:05 -0700"))
	}
	return out
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: tick %d is %s, want %s\n got %v\nwant %v", what, i, got[i], want[i], got, want)
		}
	}
}

// Daylight-saving changes: a daily time in the skipped hour fires at the
// first instant after the change, one in the repeated hour fires once;
// a spec that fires every hour keeps firing by the clock.
func TestDST(t *testing.T) {
	cases := []struct {
		name, zone, spec, from string
		want                   []string
	}{
		{"Berlin spring, daily in the skipped hour", "Europe/Berlin", "30 2 * * *", "2025-03-29 00:00:00 +0100",
			[]string{"2025-03-29 02:30:00 +0100", "2025-03-30 03:00:00 +0200", "2025-03-31 02:30:00 +0200"}},
		{"Berlin autumn, daily in the repeated hour", "Europe/Berlin", "30 2 * * *", "2025-10-25 00:00:00 +0200",
			[]string{"2025-10-25 02:30:00 +0200", "2025-10-26 02:30:00 +0200", "2025-10-27 02:30:00 +0100"}},
		{"Berlin autumn, hourly by the clock", "Europe/Berlin", "0 * * * *", "2025-10-26 01:30:00 +0200",
			[]string{"2025-10-26 02:00:00 +0200", "2025-10-26 02:00:00 +0100", "2025-10-26 03:00:00 +0100"}},
		{"Berlin spring, hourly by the clock", "Europe/Berlin", "0 * * * *", "2025-03-30 00:30:00 +0100",
			[]string{"2025-03-30 01:00:00 +0100", "2025-03-30 03:00:00 +0200", "2025-03-30 04:00:00 +0200"}},
		{"New York spring, daily in the skipped hour", "America/New_York", "15 2 * * *", "2025-03-08 12:00:00 -0500",
			[]string{"2025-03-09 03:00:00 -0400", "2025-03-10 02:15:00 -0400"}},
		{"New York autumn, daily in the repeated hour", "America/New_York", "30 1 * * *", "2025-11-01 12:00:00 -0400",
			[]string{"2025-11-02 01:30:00 -0400", "2025-11-03 01:30:00 -0500"}},
		{"New York autumn, every 20 minutes by the clock", "America/New_York", "*/20 * * * *", "2025-11-02 01:30:00 -0400",
			[]string{"2025-11-02 01:40:00 -0400", "2025-11-02 01:00:00 -0500", "2025-11-02 01:20:00 -0500"}},
		{"New York autumn, two named hours", "America/New_York", "0 1,2 * * *", "2025-11-02 00:30:00 -0400",
			[]string{"2025-11-02 01:00:00 -0400", "2025-11-02 02:00:00 -0500", "2025-11-03 01:00:00 -0500"}},
		{"Year end, yearly", "UTC", "@yearly", "2025-12-31 23:59:59 +0000",
			[]string{"2026-01-01 00:00:00 +0000", "2027-01-01 00:00:00 +0000"}},
		{"Year end, seconds across midnight", "Europe/Berlin", "*/20 * * * * *", "2025-12-31 23:59:30 +0100",
			[]string{"2025-12-31 23:59:40 +0100", "2026-01-01 00:00:00 +0100", "2026-01-01 00:00:20 +0100"}},
		{"Year end, last day of the month", "America/New_York", "0 23 31 12 *", "2025-12-31 23:00:00 -0500",
			[]string{"2026-12-31 23:00:00 -0500", "2027-12-31 23:00:00 -0500"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustParse(t, c.spec, c.zone)
			eq(t, c.spec, ticks(s, at(t, c.zone, c.from), len(c.want)), c.want)
		})
	}
}

// CRON_TZ in the spec sets its zone; it must agree with an explicit one.
func TestCronTZ(t *testing.T) {
	s := mustParse(t, "CRON_TZ=America/New_York 0 9 * * mon-fri", "")
	if s.TimeZone() != "America/New_York" || s.String() != "0 9 * * mon-fri" {
		t.Fatalf("zone %q, spec %q", s.TimeZone(), s.String())
	}
	from := time.Date(2025, 7, 4, 12, 0, 0, 0, time.UTC) // a Friday, 08:00 in New York
	if got, want := s.Next(from), time.Date(2025, 7, 4, 13, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("Next = %v, want %v", got, want)
	}
	if got := mustParse(t, "TZ=Asia/Tokyo @daily", "Asia/Tokyo").Next(from); !got.Equal(time.Date(2025, 7, 4, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("Tokyo midnight = %v", got)
	}
	if got := mustParse(t, "0 9 * * *", "").Next(from); !got.Equal(time.Date(2025, 7, 5, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("default zone is not UTC: %v", got)
	}
	for _, c := range [][2]string{
		{"CRON_TZ=Europe/Paris 0 9 * * *", "Europe/Berlin"},
		{"CRON_TZ=Mars/Olympus 0 9 * * *", ""},
		{"0 9 * * *", "Local"},
		{"61 * * * *", ""},
		{"0 0 30 2 *", ""},
		{"@every 1500ms", ""},
		{"@every 0s", ""},
		{"", ""},
	} {
		if _, err := Parse(c[0], c[1]); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Parse(%q, %q): %v, want ErrInvalidSpec", c[0], c[1], err)
		}
	}
}

// @every ticks at multiples of its duration since the epoch, whatever the
// zone and wherever one starts counting.
func TestEveryIsAGrid(t *testing.T) {
	s := mustParse(t, "@every 30s", "Europe/Berlin")
	for _, from := range []time.Time{
		time.Date(2025, 3, 30, 0, 59, 45, 0, time.UTC),
		time.Date(2025, 3, 30, 0, 59, 30, 0, time.UTC),
		time.Date(2025, 3, 30, 0, 59, 31, 999, time.UTC),
	} {
		if got := s.Next(from); !got.Equal(time.Date(2025, 3, 30, 1, 0, 0, 0, time.UTC)) {
			t.Errorf("Next(%v) = %v", from, got)
		}
	}
	if got := s.Next(time.Date(2025, 3, 30, 1, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2025, 3, 30, 1, 0, 30, 0, time.UTC)) {
		t.Errorf("a tick's Next is %v, want 30s later", got)
	}
}

// due finds the latest ticks after a long gap without walking every one,
// and counts those it passed over.
func TestDue(t *testing.T) {
	s := mustParse(t, "@every 1s", "")
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := from.Add(5*time.Second + 300*time.Millisecond)
	got, passed := s.due(from, now, 1)
	if len(got) != 1 || !got[0].Equal(from.Add(5*time.Second)) || passed != 4 {
		t.Fatalf("due after 5.3s: %v, passed %d; want [+5s], 4", got, passed)
	}
	got, passed = s.due(from, now, 3)
	if len(got) != 3 || !got[0].Equal(from.Add(3*time.Second)) || passed != 2 {
		t.Fatalf("due(3): %v, passed %d", got, passed)
	}
	if got, _ := s.due(now, now, 1); got != nil {
		t.Fatalf("nothing is due at from: %v", got)
	}
	// A year of seconds: the latest tick, and the count capped.
	later := from.AddDate(1, 0, 0)
	got, passed = s.due(from, later, 1)
	if len(got) != 1 || !got[0].Equal(later) || passed != maxCounted {
		t.Fatalf("due after a year: %v, passed %d", got, passed)
	}
	// A sparse spec over a long gap.
	y := mustParse(t, "0 3 1 * *", "Europe/Berlin")
	got, passed = y.due(from, later, 2)
	if len(got) != 2 || got[1].In(y.loc).Format("2006-01-02 15:04") != "2025-12-01 03:00" || passed != 10 {
		t.Fatalf("monthly due: %v, passed %d", got, passed)
	}
}
