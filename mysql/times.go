package mysql

import (
	"fmt"
	"time"
)

// Every DATETIME(6) in the table holds a UTC wall clock written by
// UTC_TIMESTAMP(6). What the driver hands back depends on the DSN the user
// chose: with parseTime=false the text "2006-01-02 15:04:05.999999", with
// parseTime=true a time.Time carrying that wall clock in the DSN's loc
// (time.Local if loc=Local). utcTime reads either and keeps the wall clock,
// in UTC, so the dialect needs neither parseTime nor loc=UTC from a user's
// *sql.DB. Times go the other way as text in UTC (formatTime), never as
// time.Time, for the same reason.
type utcTime struct {
	T     time.Time
	Valid bool
}

const dbTimeLayout = "2006-01-02 15:04:05.999999"

// Scan implements sql.Scanner.
func (u *utcTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*u = utcTime{}
		return nil
	case time.Time:
		u.T = time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
		u.Valid = true
		return nil
	case []byte:
		return u.parse(string(v))
	case string:
		return u.parse(v)
	}
	return fmt.Errorf("dbq: mysql: cannot read %T as a time", src)
}

func (u *utcTime) parse(s string) error {
	t, err := time.ParseInLocation(dbTimeLayout, s, time.UTC)
	if err != nil {
		return fmt.Errorf("dbq: mysql: bad DATETIME %q: %w", s, err)
	}
	u.T, u.Valid = t, true
	return nil
}

// formatTime renders t as a DATETIME(6) literal in UTC.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.000000")
}

// micros converts d to whole microseconds, the resolution of DATETIME(6).
func micros(d time.Duration) int64 { return d.Microseconds() }
