package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones by name in a container without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// ErrInvalidSpec: a spec or time zone that does not parse, or a spec that
// never fires.
var ErrInvalidSpec = errors.New("dbq: invalid schedule spec")

// parser reads standard 5-field specs, 6-field ones that start with a
// seconds field, and the descriptors @yearly, @monthly, @weekly, @daily,
// @hourly and @every DURATION.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// allHours are the hour bits of a spec that fires in every hour.
const allHours = 1<<24 - 1

// Spec is a parsed schedule spec in its time zone: the instants it fires
// at. Its methods are pure functions of their arguments.
type Spec struct {
	text  string
	zone  string
	loc   *time.Location
	every time.Duration      // @every: multiples of it since the Unix epoch
	cron  *cron.SpecSchedule // otherwise
}

// Parse parses spec in the IANA time zone timeZone ("" means UTC). The
// spec may start with CRON_TZ=ZONE (or TZ=ZONE), which must then agree
// with timeZone when both are given. @every takes a Go duration of at least
// one second, in whole seconds.
func Parse(spec, timeZone string) (*Spec, error) {
	text := strings.TrimSpace(spec)
	if first, rest, ok := strings.Cut(text, " "); ok && (strings.HasPrefix(first, "CRON_TZ=") || strings.HasPrefix(first, "TZ=")) {
		_, z, _ := strings.Cut(first, "=")
		if timeZone != "" && timeZone != z {
			return nil, fmt.Errorf("%w: %q names time zone %s, the schedule %s", ErrInvalidSpec, spec, z, timeZone)
		}
		timeZone, text = z, strings.TrimSpace(rest)
	}
	if timeZone == "" {
		timeZone = "UTC"
	}
	loc, err := time.LoadLocation(timeZone)
	if err != nil || timeZone == "Local" {
		return nil, fmt.Errorf("%w: unknown time zone %q (want an IANA name such as Europe/Berlin)", ErrInvalidSpec, timeZone)
	}
	if text == "" {
		return nil, fmt.Errorf("%w: empty spec", ErrInvalidSpec)
	}
	if strings.HasPrefix(text, "@every ") {
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(text, "@every ")))
		if err != nil || d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("%w: %q: @every takes whole seconds, at least 1s", ErrInvalidSpec, spec)
		}
		return &Spec{text: text, zone: timeZone, loc: loc, every: d}, nil
	}
	sched, err := parser.Parse("CRON_TZ=" + timeZone + " " + sundaySeven(text))
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidSpec, spec, err)
	}
	cs, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrInvalidSpec, spec)
	}
	s := &Spec{text: text, zone: timeZone, loc: loc, cron: cs}
	if s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%w: %q never fires", ErrInvalidSpec, spec)
	}
	return s, nil
}

// dowNames are the day-of-week names a cron field may use, Sunday first.
var dowNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// sundaySeven rewrites the day-of-week field (the last of a 5- or 6-field
// spec) so that 7 means Sunday, as it does in crontab(5): the parser
// underneath knows only 0-6. An item naming 7 ("7", "5-7", "1-7/2",
// "fri-7") becomes the list of its days with 7 written as 0; other items
// and other fields are left as written, so the parser reports their errors.
func sundaySeven(spec string) string {
	f := strings.Fields(spec)
	if len(f) != 5 && len(f) != 6 {
		return spec
	}
	items := strings.Split(f[len(f)-1], ",")
	for i, item := range items {
		items[i] = sundaySevenItem(item)
	}
	f[len(f)-1] = strings.Join(items, ",")
	return strings.Join(f, " ")
}

func sundaySevenItem(item string) string {
	base, stepText, stepped := strings.Cut(item, "/")
	loText, hiText, ranged := strings.Cut(base, "-")
	lo, okLo := dowNumber(loText)
	hi, okHi := lo, okLo
	if ranged {
		hi, okHi = dowNumber(hiText)
	} else if stepped {
		hi, okHi = 7, true // "a/s" runs from a to the end of the week
	}
	step := 1
	if stepped {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 {
			return item
		}
		step = n
	}
	if !okLo || !okHi || lo > hi || (lo != 7 && hi != 7) || (stepped && !ranged && lo != 7) {
		return item
	}
	var days []string
	for d := lo; d <= hi; d += step {
		days = append(days, strconv.Itoa(d%7))
	}
	return strings.Join(days, ",")
}

// dowNumber reads a day of week, 0-7 or a name.
func dowNumber(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 7 && s != "" && s[0] != '+' && s[0] != '-' {
		return n, true
	}
	for i, name := range dowNames {
		if strings.EqualFold(s, name) {
			return i, true
		}
	}
	return 0, false
}

// String returns the spec as parsed, without a CRON_TZ prefix.
func (s *Spec) String() string { return s.text }

// TimeZone returns the spec's IANA time zone name.
func (s *Spec) TimeZone() string { return s.zone }

// Next returns the first tick strictly after t, or the zero time if there
// is none within five years.
//
// Across daylight-saving changes a spec that fires in every hour (such as
// "*/5 * * * *") keeps firing by the clock: through the repeated hour
// twice, through the skipped one not at all, since those wall times do not
// exist. A spec that names hours fires once per wall-clock time, as cron
// does: a time in the skipped hour fires at the first instant after the
// change (02:30 becomes 03:00), and a time in the repeated hour fires only
// the first time round.
func (s *Spec) Next(t time.Time) time.Time {
	if s.every > 0 {
		e := s.every.Nanoseconds()
		n := t.UnixNano()
		n = (n/e + 1) * e
		if t.UnixNano() < 0 && t.UnixNano()%e != 0 {
			n -= e
		}
		return time.Unix(0, n).In(s.loc)
	}
	t = t.In(s.loc)
	for {
		n := s.cron.Next(t)
		if n.IsZero() || s.cron.Hour&allHours == allHours {
			return n
		}
		if g, ok := s.skipped(t, n); ok {
			return g
		}
		if !s.repeated(n) {
			return n
		}
		t = n
	}
}

// skipped returns the first moment after t and before n at which the
// clock jumped forward over a wall time the spec matches.
func (s *Spec) skipped(t, n time.Time) (time.Time, bool) {
	for cur := t; ; {
		_, end := cur.ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}, false
		}
		_, before := cur.Zone()
		_, after := end.Zone()
		if gap := after - before; gap > 0 {
			// The wall times skipped are those of [end, end+gap) in the
			// old offset.
			old := *s.cron
			old.Location = time.FixedZone("", before)
			if c := old.Next(end.Add(-time.Second)); !c.IsZero() && c.Before(end.Add(time.Duration(gap)*time.Second)) {
				return end, true
			}
		}
		cur = end
	}
}

// repeated reports whether n's wall time already occurred earlier: n lies
// in the hour the clock went back over.
func (s *Spec) repeated(n time.Time) bool {
	start, _ := n.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, at := n.Zone()
	back := before - at
	return back > 0 && n.Before(start.Add(time.Duration(back)*time.Second))
}

// maxCounted bounds the count of ticks passed over that due reports.
const maxCounted = 100_000

// due returns the latest n ticks in (from, now], oldest first, and how many
// earlier ticks in (from, now] it passed over (counted up to maxCounted).
// It looks back from now in windows that grow fourfold, so a long
// downtime costs a few dozen Next calls, not one per missed tick.
func (s *Spec) due(from, now time.Time, n int) ([]time.Time, int) {
	if n < 1 || !now.After(from) {
		return nil, 0
	}
	var kept []time.Time
	for w := time.Second; ; w *= 4 {
		start := from
		if now.Sub(from) > w {
			start = now.Add(-w)
		}
		kept = kept[:0]
		for t := s.Next(start); !t.IsZero() && !t.After(now); t = s.Next(t) {
			if len(kept) == n {
				copy(kept, kept[1:])
				kept = kept[:n-1]
			}
			kept = append(kept, t)
		}
		if len(kept) == n || start.Equal(from) {
			break
		}
	}
	passed := 0
	if len(kept) > 0 {
		for t := s.Next(from); !t.IsZero() && t.Before(kept[0]) && passed < maxCounted; t = s.Next(t) {
			passed++
		}
	}
	return kept, passed
}
