package schedule

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// ErrCrontab: a crontab file has a line that is not a schedule.
var ErrCrontab = errors.New("dbq: bad crontab")

// CrontabSyntax is the rule ParseCrontab reads lines by, for help texts.
const CrontabSyntax = `  # comment
  CRON_TZ=Europe/Berlin            time zone of the lines below (default UTC)
  [OPTION=VALUE ...] SPEC QUEUE [PAYLOAD]

OPTIONs come first, each at most once: name=NAME (the schedule's name),
kind=KIND (the kind of its jobs), CRON_TZ=ZONE (this line's time zone),
seconds=FIELD (a seconds field in front of the five). SPEC is exactly five
cron fields (minute hour day-of-month month day-of-week; 0 or 7 is Sunday),
or one of @hourly @daily @weekly @monthly @yearly, or @every DURATION. The
next word is the queue; the rest of the line, spaces kept, is the payload.
A line without name= is named after its queue and kind (QUEUE, or
QUEUE:KIND), so editing its spec or payload keeps the schedule; two such
lines on the same queue and kind need names.`

// ParseCrontab reads schedules from a crontab-like file, one per line; the
// rule is [CrontabSyntax]:
//
//	# comment
//	CRON_TZ=Europe/Berlin          time zone of the lines below (default UTC)
//	[OPTION=VALUE ...] SPEC QUEUE [PAYLOAD]
//
// The words of a line are read in a fixed order, never guessed from what
// they look like: leading OPTION=VALUE words (name=, kind=, CRON_TZ=,
// seconds=; a cron field never holds "="), then the spec — five fields, or
// one word starting with @ (two for "@every 30s") — then the queue, then
// the payload, which is the rest of the line with its spaces and may be
// empty. So a queue may be called monitoring, sat-jobs or 0queue. A spec
// with a seconds field is written seconds=FIELD before the five fields
// ("seconds=*/10 * * * * * q").
//
// A line's schedule is named by its name= option, or else after its queue
// and kind (see doc.go, "Identity"): editing the spec, the zone or the
// payload of a line keeps its schedule, its last tick and its pause. A bad
// line, or a second line with the same name, is refused with its number.
func ParseCrontab(r io.Reader) ([]Schedule, error) {
	var out []Schedule
	zone := ""
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			// One "dbq:" prefix: the errors quoted are dbq's too.
			msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "dbq: ", "")
			return fmt.Errorf("%w: line %d: %s", ErrCrontab, n, msg)
		}
		if z, ok := strings.CutPrefix(line, "CRON_TZ="); ok && !strings.ContainsAny(z, " \t") {
			if _, err := Parse("@daily", z); err != nil {
				return nil, bad("%v", err)
			}
			zone = z
			continue
		}
		s, named, err := parseLine(line, zone)
		if err != nil {
			return nil, bad("%v", err)
		}
		if prev, ok := seen[s.Name]; ok {
			if named {
				return nil, bad("schedule %s is also line %d: names must differ", s.Name, prev)
			}
			return nil, bad("schedule %s is also line %d (a line without name= is named after its queue and kind): give one of them a name=NAME", s.Name, prev)
		}
		seen[s.Name] = n
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCrontab, err)
	}
	return out, nil
}

// word is a word of a line and where it ends.
type word struct {
	text string
	end  int
}

func words(line string) []word {
	var out []word
	start := -1
	for i := 0; i <= len(line); i++ {
		space := i == len(line) || line[i] == ' ' || line[i] == '\t'
		switch {
		case space && start >= 0:
			out = append(out, word{line[start:i], i})
			start = -1
		case !space && start < 0:
			start = i
		}
	}
	return out
}

// lineOptions are a line's OPTION=VALUE words.
type lineOptions struct{ name, kind, zone, seconds string }

// options reads the leading OPTION=VALUE words of w and returns the rest.
func options(w []word, zone string) (lineOptions, []word, error) {
	o := lineOptions{zone: zone}
	set := map[string]bool{}
	for len(w) > 0 {
		key, value, ok := strings.Cut(w[0].text, "=")
		if !ok {
			break
		}
		var dst *string
		switch key {
		case "name":
			dst = &o.name
		case "kind":
			dst = &o.kind
		case "CRON_TZ":
			dst = &o.zone
		case "seconds":
			dst = &o.seconds
		default:
			return o, nil, fmt.Errorf("unknown option %s= (want name=, kind=, CRON_TZ= or seconds=)", key)
		}
		if set[key] || value == "" {
			return o, nil, fmt.Errorf("option %s= given twice or empty", key)
		}
		set[key], *dst, w = true, value, w[1:]
	}
	return o, w, nil
}

// parseLine reads [OPTION=VALUE ...] SPEC QUEUE [PAYLOAD]; named says the
// line had name=.
func parseLine(line, zone string) (Schedule, bool, error) {
	o, w, err := options(words(line), zone)
	if err != nil {
		return Schedule{}, false, err
	}
	var spec int // words of the spec
	switch {
	case len(w) == 0:
		return Schedule{}, false, errors.New("want [OPTION=VALUE ...] SPEC QUEUE [PAYLOAD]")
	case w[0].text == "@every":
		spec = 2
	case strings.HasPrefix(w[0].text, "@"):
		spec = 1
	default:
		spec = 5
	}
	if o.seconds != "" && spec != 5 {
		return Schedule{}, false, errors.New("seconds= goes with a five-field spec")
	}
	if len(w) < spec+1 {
		return Schedule{}, false, fmt.Errorf("want [OPTION=VALUE ...] SPEC QUEUE [PAYLOAD]: a %d-word spec and no queue after it", spec)
	}
	texts := make([]string, 0, spec+1)
	if o.seconds != "" {
		texts = append(texts, o.seconds)
	}
	for _, x := range w[:spec] {
		texts = append(texts, x.text)
	}
	parsed, err := Parse(strings.Join(texts, " "), o.zone)
	if err != nil {
		return Schedule{}, false, err
	}
	q := w[spec]
	if err := dialect.ValidateQueue(q.text); err != nil {
		return Schedule{}, false, err
	}
	if o.kind != "" {
		if err := queue.ValidateKind(o.kind); err != nil {
			return Schedule{}, false, err
		}
	}
	name := o.name
	if name == "" {
		name = LineName(q.text, o.kind)
	} else if err := queue.ValidateScheduleName(name); err != nil {
		return Schedule{}, false, err
	}
	return Schedule{
		Name:     name,
		Spec:     parsed.String(),
		TimeZone: parsed.TimeZone(),
		Queue:    q.text,
		Kind:     o.kind,
		Payload:  []byte(strings.TrimSpace(line[q.end:])),
	}, o.name != "", nil
}

// LineName is the name of a crontab line's schedule that has no name=: its
// queue, or QUEUE:KIND when it sets a kind. When that is not a valid
// schedule name (a kind with characters names may not hold, or longer than
// queue.MaxScheduleName), it is the queue cut to fit, a dot and 12 hex
// digits of a SHA-256 of queue and kind.
func LineName(queueName, kind string) string {
	name := queueName
	if kind != "" {
		name += ":" + kind
	}
	if queue.ValidateScheduleName(name) == nil {
		return name
	}
	h := sha256.Sum256([]byte(queueName + "\x00" + kind))
	return queueName[:min(len(queueName), queue.MaxScheduleName-13)] + "." + hex.EncodeToString(h[:6])
}
