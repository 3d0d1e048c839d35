package queue

import (
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before the next run of a job that has
// failed attempt+1 times.
type Backoff func(attempt int) time.Duration

// ExponentialBackoff returns a Backoff of base·2^attempt, capped at max,
// with ±20% jitter so jobs that failed together do not retry together.
func ExponentialBackoff(base, max time.Duration) Backoff {
	return func(attempt int) time.Duration {
		d := max
		if attempt < 62 {
			if e := base << uint(attempt); e > 0 && e < max {
				d = e
			}
		}
		return Jitter(d, 0.2)
	}
}

// DefaultBackoff is ExponentialBackoff(time.Second, time.Hour): 1s, 2s, 4s …
// up to an hour.
var DefaultBackoff = ExponentialBackoff(time.Second, time.Hour)

// Jitter returns d moved by a random fraction in [-frac, +frac] of itself.
func Jitter(d time.Duration, frac float64) time.Duration {
	if d <= 0 || frac <= 0 {
		return d
	}
	return d + time.Duration((rand.Float64()*2-1)*frac*float64(d))
}
