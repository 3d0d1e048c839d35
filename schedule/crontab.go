package schedule

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/dbqueue/dbq/dialect"
)

// ErrCrontab: a crontab file has a line that is not a schedule.
var ErrCrontab = errors.New("dbq: bad crontab")

// dowField matches a day-of-week field: numbers, names, *, ?, ranges,
// lists and steps.
var dowField = regexp.MustCompile(`^(?i)([0-7*?]|sun|mon|tue|wed|thu|fri|sat)([-,/0-7a-z*?]*)$`)

// ParseCrontab reads schedules from a crontab-like file, one per line:
//
//	# comment
//	CRON_TZ=Europe/Berlin          time zone of the lines below (default UTC)
//	SPEC  QUEUE  PAYLOAD
//
// SPEC is 5 cron fields, 6 when it starts with seconds, or a descriptor
// (@hourly, @every 30s); a line may start with its own CRON_TZ=ZONE. The
// sixth field is taken as part of the spec when it reads as a day-of-week
// field (0-7, mon, */2, …), so a queue with such a name needs a 6-field
// spec before it. PAYLOAD is the rest of the line, spaces kept; it may be
// empty. Each schedule is named QUEUE.HASH, HASH standing for its spec,
// zone, queue and payload: every process reading the same line runs the
// same schedule, and an edited line is a new one. A bad line is refused with
// its number.
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
		s, err := parseLine(line, zone)
		if err != nil {
			return nil, bad("%v", err)
		}
		if prev, ok := seen[s.Name]; ok {
			return nil, bad("the same schedule as line %d", prev)
		}
		seen[s.Name] = n
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCrontab, err)
	}
	return out, nil
}

// parseLine reads SPEC QUEUE PAYLOAD.
func parseLine(line, zone string) (Schedule, error) {
	all := strings.Fields(line)
	f, lineZone := all, zone
	if z, ok := strings.CutPrefix(f[0], "CRON_TZ="); ok {
		lineZone, f = z, f[1:]
	}
	var spec int // fields of the spec
	switch {
	case len(f) == 0:
		return Schedule{}, errors.New("want SPEC QUEUE [PAYLOAD]")
	case f[0] == "@every":
		spec = 2
	case strings.HasPrefix(f[0], "@"):
		spec = 1
	case len(f) >= 7 && dowField.MatchString(f[5]):
		spec = 6
	default:
		spec = 5
	}
	if len(f) < spec+1 {
		return Schedule{}, errors.New("want SPEC QUEUE [PAYLOAD]: no queue")
	}
	specText := strings.Join(f[:spec], " ")
	queueName := f[spec]
	parsed, err := Parse(specText, lineZone)
	if err != nil {
		return Schedule{}, err
	}
	if err := dialect.ValidateQueue(queueName); err != nil {
		return Schedule{}, err
	}
	// The payload is the rest of the line as written, after the queue.
	rest := line
	for _, w := range all[:len(all)-len(f)+spec+1] {
		rest = rest[strings.Index(rest, w)+len(w):]
	}
	payload := strings.TrimSpace(rest)
	h := sha256.Sum256([]byte(parsed.String() + "\x00" + parsed.TimeZone() + "\x00" + queueName + "\x00" + payload))
	name := queueName
	if len(name) > dialect.MaxQueueLen-13 {
		name = name[:dialect.MaxQueueLen-13]
	}
	return Schedule{
		Name:     name + "." + hex.EncodeToString(h[:6]),
		Spec:     parsed.String(),
		TimeZone: parsed.TimeZone(),
		Queue:    queueName,
		Payload:  []byte(payload),
	}, nil
}
